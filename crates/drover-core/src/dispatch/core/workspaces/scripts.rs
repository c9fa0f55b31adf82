//! A new worktree's setup and a repository's own scripts (docs/ARCHITECTURE.md
//! §"Workspaces"): once the worktree is made, the run waits (live `preparing`, in Needs
//! you) while a `.drover/setup` or `.drover/teardown` it holds was never approved for its
//! repository or changed since; approved, the hashes are kept in the ledger and the setup
//! runs (`[workspaces] setup` first, then `.drover/setup`), live `preparing · running
//! setup`; refused, the run starts without them. A removal of the worktree carries the
//! repository's approved teardown hash, so only that very script runs.

use crate::dispatch::api::{Response, ScriptApprovalView, ScriptAskView};
use crate::dispatch::core::Core;
use crate::dispatch::core::run::{Batch, ScriptsAwaiting};
use crate::ledger::WriteOp;
use crate::live_state::{Cause, LiveStateKind};
use crate::run_state::RunState;
use crate::workspace::scripts::{
    ApprovedScript, RepoScript, ScriptKind, SetupStep, StepRan, Teardown, diff,
};
use crate::workspace::{Outcome, Task};
use crate::{DroverError, ErrorCode};

/// The live detail while the setup commands run (`preparing: running setup · 12s`).
pub const RUNNING_SETUP: &str = "running setup";

impl Core {
    /// The repository a run's worktree belongs to (its checkout's top), for approvals.
    fn repository_of(&self, run_id: &str) -> Option<String> {
        self.runs.get(run_id)?.workspace.checkout.clone()
    }

    /// The approved hash of the repository's script `kind`, if any.
    fn approved(&self, repository: &str, kind: ScriptKind) -> Option<&ApprovedScript> {
        self.script_approvals.get(&(repository.to_string(), kind))
    }

    /// For a task that removes a worktree: its repository's teardown plan.
    pub(super) fn teardown_for(&self, task: &Task) -> Option<Teardown> {
        let ws = match task {
            Task::Keep { workspace, .. }
            | Task::Discard { workspace, .. }
            | Task::Release(workspace) => workspace,
            Task::Merge { workspace, ask } if ask.clean_up => workspace,
            _ => return None,
        };
        if !ws.has_worktree() {
            return None;
        }
        let repository = ws.checkout.as_deref()?;
        Some(Teardown {
            approved: self
                .approved(repository, ScriptKind::Teardown)
                .map(|a| a.sha256.clone()),
            timeout: std::time::Duration::from_secs(self.config.workspaces.setup_timeout_secs),
        })
    }

    /// What a worktree's teardown came to: a note on the run while it is in memory; a run
    /// that already left the trays (`X`, `gc`) has it in drover's log.
    pub(super) fn teardown_noted(&mut self, run_id: &str, note: String) {
        if !self.note_run(run_id, note.clone()) {
            tracing::warn!(run = %run_id, "{note}");
        }
    }

    /// The worktree is made: its scripts are asked about when any is not approved, else
    /// its setup runs (or the run launches when there is none).
    pub(super) fn after_made(&mut self, run_id: &str, found: Vec<RepoScript>) {
        let Some(repository) = self.repository_of(run_id) else {
            return self.launch_now(run_id);
        };
        let waiting: Vec<ScriptAskView> = found
            .iter()
            .filter(|s| {
                self.approved(&repository, s.kind)
                    .is_none_or(|a| a.sha256 != s.sha256)
            })
            .map(|s| {
                let before = self.approved(&repository, s.kind);
                ScriptAskView {
                    kind: s.kind,
                    path: s.kind.path().to_string(),
                    sha256: s.sha256.clone(),
                    text: self.redactor.redact(&s.text).into_owned(),
                    diff: before.map(|a| {
                        self.redactor
                            .redact(&diff(&a.text, &s.text, s.kind))
                            .into_owned()
                    }),
                }
            })
            .collect();
        if waiting.is_empty() {
            return self.run_setup(run_id, &found, true);
        }
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let paths: Vec<&str> = waiting.iter().map(|s| s.path.as_str()).collect();
        let what = paths.join(" and ");
        let mut batch = Batch::default();
        let deadline = run.deadline;
        run.preparing_until = None;
        run.set_live(
            &mut batch,
            LiveStateKind::Preparing,
            Some(deadline),
            Some(&format!("waiting for you to approve {what}")),
            None,
            now,
        );
        for s in &waiting {
            let why = if s.diff.is_some() {
                "changed since you approved it"
            } else {
                "never approved for this repository"
            };
            run.note(
                &mut batch,
                format!(
                    "the repository's {} is {why}: it runs only once approved (enter on the run in Needs you, or `drover approve-scripts {run_id}`; `--refuse` starts the run without it)",
                    s.path
                ),
                now,
            );
        }
        run.script_approval = Some(ScriptsAwaiting {
            view: ScriptApprovalView {
                repository,
                scripts: waiting,
                since: now,
            },
            found,
        });
        run.touch(&mut batch);
        self.commit(batch);
    }

    /// `approve_scripts`: the user approves (or refuses) the scripts the run waits on.
    pub(in crate::dispatch::core) fn approve_scripts(
        &mut self,
        run_id: &str,
        approve: bool,
    ) -> Result<Response, DroverError> {
        let now = self.now;
        let run = self
            .runs
            .get_mut(run_id)
            .ok_or_else(|| super::super::not_found(run_id))?;
        let Some(awaiting) = run.script_approval.take() else {
            return Err(DroverError::new(
                ErrorCode::NoPendingRequest,
                format!(
                    "run {run_id} waits for no script approval; `drover show {run_id}` says what it waits for"
                ),
            ));
        };
        let mut batch = Batch::default();
        let ScriptsAwaiting { view, found } = awaiting;
        for ask in &view.scripts {
            let short: String = ask.sha256.chars().take(12).collect();
            if approve {
                let Some(script) = found.iter().find(|s| s.kind == ask.kind) else {
                    continue;
                };
                let approved = ApprovedScript {
                    repository: view.repository.clone(),
                    kind: ask.kind,
                    sha256: script.sha256.clone(),
                    text: script.text.clone(),
                    approved_at: now,
                };
                batch
                    .ops
                    .push(WriteOp::PutScriptApproval(Box::new(approved.clone())));
                self.script_approvals
                    .insert((view.repository.clone(), ask.kind), approved);
                run.note(
                    &mut batch,
                    format!("you approved {} (sha256 {short}…)", ask.path),
                    now,
                );
            } else {
                let what = match ask.kind {
                    ScriptKind::Setup => "the run starts without it",
                    ScriptKind::Teardown => "it will not run when the worktree is removed",
                };
                run.note(
                    &mut batch,
                    format!("you refused {} (sha256 {short}…): {what}", ask.path),
                    now,
                );
            }
        }
        run.touch(&mut batch);
        self.commit(batch);
        self.run_setup(run_id, &found, approve);
        self.summary_response(run_id)
    }

    /// Runs the new worktree's setup: `[workspaces] setup` in the run's directory, then
    /// the repository's `.drover/setup` at the worktree's top when `with_script` and its
    /// hash is approved; with no step, the run launches.
    fn run_setup(&mut self, run_id: &str, found: &[RepoScript], with_script: bool) {
        let now = self.now;
        let timeout_secs = self.config.workspaces.setup_timeout_secs;
        let own = self.config.workspaces.setup.clone();
        let repository = self.repository_of(run_id);
        let script = found
            .iter()
            .find(|s| s.kind == ScriptKind::Setup)
            .filter(|s| {
                with_script
                    && repository
                        .as_deref()
                        .and_then(|r| self.approved(r, ScriptKind::Setup))
                        .is_some_and(|a| a.sha256 == s.sha256)
            });
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let mut steps = Vec::new();
        if !own.is_empty() {
            steps.push(SetupStep {
                shown: shell_words::join(&own),
                argv: own,
                dir: run.work_dir(),
                approved: None,
            });
        }
        if let (Some(script), Some(top)) = (script, run.workspace.worktree_path()) {
            steps.push(SetupStep::script(&top, ScriptKind::Setup, &script.sha256));
        }
        if steps.is_empty() {
            return self.launch_now(run_id);
        }
        let timeout_ms = super::super::answers::secs_ms(timeout_secs);
        // Each step is bounded by the timeout; the core's bound is the backstop.
        let bound = (now
            + timeout_ms.saturating_mul(steps.len() as i64)
            + super::PREPARE_WORKTREE_BOUND_MS)
            .min(run.deadline);
        run.preparing_until = Some(bound);
        let mut batch = Batch::default();
        run.set_live(
            &mut batch,
            LiveStateKind::Preparing,
            Some(bound),
            Some(RUNNING_SETUP),
            None,
            now,
        );
        self.commit(batch);
        self.job(
            run_id,
            Task::Setup {
                steps,
                timeout: std::time::Duration::from_secs(timeout_secs),
            },
            None,
            None,
        );
    }

    /// The setup ran (or failed): the run launches, or fails its start with the command's
    /// exit code and the end of its output (its worktree discarded: nothing ran in it).
    pub(super) fn setup_done(&mut self, run_id: &str, outcome: Result<Outcome, DroverError>) {
        let now = self.now;
        let root = self.worktree_root();
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.preparing_until = None;
        let gone = run.state().is_terminal() || run.ending.is_some();
        let mut batch = Batch::default();
        let failed = match outcome {
            Ok(Outcome::SetupRan(ran)) if !gone => {
                for StepRan { shown, took, tail } in ran {
                    let took = crate::text::duration_words(took.as_millis() as i64);
                    // Its output goes to the transcript, where the run's work is read; the
                    // note says it ran (docs/ARCHITECTURE.md §"Workspaces").
                    let line = if tail.is_empty() {
                        format!("setup `{shown}` ran ({took}), printing nothing")
                    } else {
                        format!("setup `{shown}` ran ({took}): {tail}")
                    };
                    run.transcript_line(
                        &mut batch,
                        crate::text::clip(&line, super::super::transcript::LINE_MAX_CHARS),
                        now,
                    );
                    run.note(
                        &mut batch,
                        format!(
                            "ran its setup `{shown}` ({took}){}",
                            if tail.is_empty() {
                                String::new()
                            } else {
                                format!(": {tail}")
                            }
                        ),
                        now,
                    );
                }
                None
            }
            Ok(Outcome::SetupRan(_)) => None,
            Ok(other) => Some(super::unexpected(&other)),
            Err(e) => Some(e),
        };
        if let Some(e) = &failed
            && !gone
        {
            run.transcript_line(
                &mut batch,
                crate::text::clip(
                    &format!("setup failed: {}", crate::text::one_line(&e.message)),
                    super::super::transcript::LINE_MAX_CHARS,
                ),
                now,
            );
            run.note(&mut batch, format!("its setup failed: {}", e.message), now);
        }
        if gone || failed.is_some() {
            // Its change is not worked out: the worktree is on its way out.
            run.workspace_ready = false;
        }
        let workspace = run.workspace.clone();
        self.commit(batch);
        if gone || failed.is_some() {
            // Nothing ran in the worktree: it goes (its teardown first, when approved).
            self.job(run_id, Task::Discard { workspace, root }, None, None);
        }
        if gone {
            return;
        }
        match failed {
            None => self.launch_now(run_id),
            Some(_) => self.finalize(run_id, RunState::Failed, "setup_failed", Cause::Failed),
        }
    }
}
