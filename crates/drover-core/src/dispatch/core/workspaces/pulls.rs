//! A pull request from a worktree run (docs/ARCHITECTURE.md §"Workspaces"): `pr` pushes
//! the run's branch and opens (or reads) its pull request as an [`Effect::Workspace`]
//! (`workspace::forge` does the git and forge-CLI work off the core); the pull request
//! is kept on the run's workspace, and a run with an open one has each turn's work pushed
//! to it once the turn is over and the run idle.
//!
//! What must stay true: a push is never under way twice for a run, nor beside a merge,
//! keep or discard of it (`workspace_busy`); no push while a turn runs (the agent may be
//! writing); a push after a turn records what it came to as a note, never failing the run.

use super::{
    Core, Outcome, ReplyTo, Target, Task, WorkspaceView, commit_message, in_turn, run_active,
};
use crate::dispatch::api::{PrActionView, Response, RunSummary};
use crate::run_state::RunState;
use crate::workspace::forge::{PrAsk, PrState, body};
use crate::workspace::{WorkspaceStatus, no_worktree};
use crate::{DroverError, ErrorCode};

/// What `pr` asks, before the run is looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrWish {
    /// Open it as a draft.
    pub draft: bool,
    /// Its title (default: the run's title).
    pub title: Option<String>,
    /// Push with `--force-with-lease`.
    pub force_with_lease: bool,
    /// Only read the pull request again.
    pub refresh: bool,
}

/// The timer that reads open pull requests again (`[workspaces] pr_refresh_secs`,
/// docs/ARCHITECTURE.md §"Workspaces"): one run at a time, each run's at most once per
/// period, counted from its last read or the end of the timer's last try (so a read that
/// fails is not asked again at once).
#[derive(Debug, Default)]
pub struct PrRefresh {
    /// The run whose pull request is being read.
    in_flight: Option<String>,
    /// When each run's was last asked for by the timer.
    asked: std::collections::HashMap<String, crate::UnixMillis>,
}

impl PrRefresh {
    /// A pull request job of `run_id` came back at `now`: whether it was the timer's
    /// read (its next one is a period after this).
    pub(super) fn done(&mut self, run_id: &str, now: crate::UnixMillis) -> bool {
        if self.in_flight.as_deref() == Some(run_id) {
            self.in_flight = None;
            self.asked.insert(run_id.to_string(), now);
            true
        } else {
            false
        }
    }
}

/// The longest pull request title drover sends.
const TITLE_MAX: usize = 200;

impl Core {
    /// The git and forge work a `pr` asks of a run, or why it cannot be done now.
    pub(super) fn pr_task(
        &self,
        run_id: &str,
        target: &Target,
        ws: WorkspaceView,
        wish: PrWish,
    ) -> Result<Task, DroverError> {
        // The push and the forge's CLI would run here, on a branch that is on the host
        // (docs/ARCHITECTURE.md §"Hosts").
        if let Some(host) = &ws.host {
            return Err(DroverError::new(
                ErrorCode::HostUnsupported,
                format!(
                    "run {run_id}'s branch is on the host {host}: pull requests are opened from this machine's repositories only; push {} from there (git push) and open it with your forge's CLI there",
                    ws.branch.as_deref().unwrap_or("its branch")
                ),
            ));
        }
        let title = wish
            .title
            .filter(|t| crate::text::has_visible_text(t))
            .unwrap_or_else(|| target.title.clone());
        let ask = PrAsk {
            run_id: run_id.to_string(),
            title: crate::text::clip(&crate::text::one_line(&title), TITLE_MAX),
            body: body(run_id, &target.task, target.result.as_ref()),
            draft: wish.draft,
            force_with_lease: wish.force_with_lease,
            refresh: wish.refresh,
            message: commit_message(
                run_id,
                target.summary.as_deref().unwrap_or(target.title.as_str()),
            ),
        };
        if wish.refresh {
            if ws.pr.is_none() {
                return Err(DroverError::new(
                    ErrorCode::NoPullRequest,
                    format!(
                        "run {run_id} has no pull request to read; `drover pr {run_id}` pushes its branch and opens one"
                    ),
                ));
            }
            return Ok(Task::Pr { workspace: ws, ask });
        }
        if target.in_turn || ws.status == WorkspaceStatus::Preparing {
            return Err(run_active(
                run_id,
                target.state,
                &format!(
                    "a turn is running; push its branch when it is idle (`drover wait {run_id} --until idle`)"
                ),
            ));
        }
        if ws.status != WorkspaceStatus::Ready {
            return Err(no_worktree(run_id, Some(&ws)));
        }
        Ok(Task::Pr { workspace: ws, ask })
    }

    /// A push or a read of a pull request is done (or refused): the pull request kept on
    /// the run, a note, and the answer.
    pub(super) fn pr_done(
        &mut self,
        run_id: &str,
        reply: Option<ReplyTo>,
        row: Option<Box<RunSummary>>,
        outcome: Result<Outcome, DroverError>,
    ) {
        let done = match outcome {
            Ok(Outcome::Pr(done)) => done,
            Ok(other) => {
                if let Some(to) = reply {
                    self.reply_now(to, Err(super::unexpected(&other)));
                }
                return;
            }
            Err(e) => {
                match reply {
                    Some(to) => self.reply_now(to, Err(e)),
                    // A push after a turn: the user reads why in the run's notes.
                    None => {
                        self.note_run(
                            run_id,
                            format!(
                                "could not push the turn's work to its pull request: {}",
                                e.message
                            ),
                        );
                    }
                }
                return;
            }
        };
        let pr = done.workspace.pr.clone();
        let note = match (&done.push, &pr) {
            (Some(push), Some(pr)) if done.created => Some(format!(
                "pushed {} to {} and opened {} {}",
                push.branch,
                push.remote,
                pr.words(),
                pr.url
            )),
            (Some(push), Some(pr)) => Some(format!(
                "pushed {} to {} ({} at {}): {}",
                push.branch,
                push.remote,
                if reply.is_some() {
                    "your ask"
                } else {
                    "after the turn"
                },
                crate::workspace::short_commit(Some(&push.commit)),
                pr.words()
            )),
            (Some(push), None) => Some(format!(
                "pushed {} to {}; {}{}",
                push.branch,
                push.remote,
                match &push.compare_url {
                    Some(url) => format!("open a pull request at {url}"),
                    None => "the remote gave no address for opening a pull request".to_string(),
                },
                done.forge_cli_missing
                    .as_deref()
                    .map(|cli| format!(" (`{cli}` is not on PATH, so none was opened)"))
                    .unwrap_or_default()
            )),
            (None, _) => None,
        };
        // The run's workspace as it is now (its change may have been worked out again
        // meanwhile), with the pull request as read.
        let after = match self.runs.get(run_id) {
            Some(run) => WorkspaceView {
                pr: pr.clone(),
                ..run.workspace.clone()
            },
            None => done.workspace.clone(),
        };
        self.workspace_changed(run_id, after, row, note);
        if let Some(to) = reply {
            self.reply(
                to,
                Ok(Response::Pr(Box::new(PrActionView {
                    run_id: run_id.to_string(),
                    push: done.push,
                    pr,
                    created: done.created,
                    forge_cli_missing: done.forge_cli_missing,
                }))),
            );
        }
    }

    /// When the next open pull request is due to be read again, and whose: none while a
    /// read is under way, while shutting down, or for a run busy with its workspace.
    pub(in crate::dispatch::core) fn next_pr_refresh(&self) -> Option<(crate::UnixMillis, String)> {
        if self.pr_refresh.in_flight.is_some() || self.shutting_down() {
            return None;
        }
        let every = super::super::answers::secs_ms(self.config.workspaces.pr_refresh_secs);
        self.order
            .iter()
            .filter(|id| !self.workspace_busy.contains(*id))
            .filter_map(|id| self.runs.get(id))
            .filter_map(|run| {
                let pr = run.workspace.pr.as_ref()?;
                if pr.state != PrState::Open {
                    return None;
                }
                let asked = self.pr_refresh.asked.get(&run.id).copied().unwrap_or(0);
                Some((
                    pr.updated_at.max(asked).saturating_add(every),
                    run.id.clone(),
                ))
            })
            .min()
    }

    /// The timer: reads the most overdue open pull request again (its state and checks).
    pub(in crate::dispatch::core) fn refresh_due_pr(&mut self) {
        let now = self.now;
        let Some((at, run_id)) = self.next_pr_refresh() else {
            return;
        };
        if at > now {
            return;
        }
        let Some(run) = self.runs.get(&run_id) else {
            return;
        };
        let target = Target::of(run);
        let wish = PrWish {
            draft: false,
            title: None,
            force_with_lease: false,
            refresh: true,
        };
        let ws = run.workspace.clone();
        let runs = &self.runs;
        self.pr_refresh.asked.retain(|id, _| runs.contains_key(id));
        self.pr_refresh.asked.insert(run_id.clone(), now);
        match self.pr_task(&run_id, &target, ws, wish) {
            Ok(task) => {
                self.pr_refresh.in_flight = Some(run_id.clone());
                self.workspace_busy.insert(run_id.clone());
                self.job(&run_id, task, None, None);
            }
            Err(e) => tracing::warn!(run = %run_id, code = %e.code, "{}", e.message),
        }
    }

    /// After a turn: a run that is idle now and has an open pull request gets the turn's
    /// work pushed to it (committed onto its branch first).
    pub(in crate::dispatch::core) fn push_to_open_pr(&mut self, run_id: &str) {
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        let open = run
            .workspace
            .pr
            .as_ref()
            .is_some_and(|p| p.state == PrState::Open);
        if !open
            || !run.workspace.has_worktree()
            || run.state() != RunState::Idle
            || in_turn(run)
            || self.workspace_busy.contains(run_id)
        {
            return;
        }
        // Not in a turn: checked above.
        let target = Target::of(run);
        let wish = PrWish {
            draft: false,
            title: None,
            force_with_lease: false,
            refresh: false,
        };
        let ws = run.workspace.clone();
        if let Ok(task) = self.pr_task(run_id, &target, ws, wish) {
            self.workspace_busy.insert(run_id.to_string());
            self.job(run_id, task, None, None);
        }
    }
}
