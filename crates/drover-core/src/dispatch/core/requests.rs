//! Client requests: each is checked, applied to run state, committed, then answered.
//!
//! What must stay true: a refused request changes nothing; an accepted one is answered
//! only after its writes are committed; a run that is not in memory (a previous owner's)
//! is read from the ledger off the dispatcher's task, never here.

use super::admission::shutting_down;
use super::run::{Batch, Run, TurnOrigin};
use super::workspaces::Action;
use super::{Core, Fetch, Query, REMOVE_PAGE, ReplyTo, Then, not_active, not_found};
use crate::dispatch::api::{DispatchEvent, RunSummary, TranscriptView};
use crate::dispatch::api::{Pong, Removed, Request, Response, Stopped, TranscriptFormat};
use crate::ledger::{RunPatch, WriteOp};
use crate::live_state::Cause;
use crate::route::EscalationKind;
use crate::run_state::RunState;
use crate::workspace::WorkspaceView;
use crate::{DroverError, ErrorCode};

/// The event kinds of a follow-up queued behind a running turn and of a queued one sent
/// as a turn (the ledger's kinds: retention keeps them).
pub use crate::ledger::kind::{FOLLOW_UP_QUEUED, FOLLOW_UP_SENT};

/// The longest a `wait` may block.
pub const WAIT_CAP_SECS: u64 = 3_600;

/// Where a run a request names stands.
enum Target {
    /// In memory, active and not ending.
    Active,
    /// In memory, but not active (or already ending).
    Inactive(RunState),
    /// Not in memory: a previous owner's run, or none.
    Elsewhere,
}

impl Core {
    /// Who owns the data directory, as `ping` answers.
    fn pong(&self) -> Pong {
        Pong {
            pong: true,
            pid: self.pid,
            version: self.version.clone(),
            started_at: self.started_at,
            config_refused: self.config_refused.clone(),
            ledger_unavailable: self.ledger_unavailable.clone(),
        }
    }

    pub(super) fn on_request(&mut self, to: ReplyTo, request: Request) {
        if self.shutting_down() && !matches!(request, Request::Ping) {
            return self.reply_now(to, Err(shutting_down()));
        }
        if let Some(refusal) = self.refuse_while_ledger_unavailable(&request) {
            return self.reply_now(to, Err(refusal));
        }
        let answer = match request {
            Request::Ping => Ok(Response::Pong(self.pong())),
            Request::Dispatch { spec } => return self.dispatch(to, *spec),
            request @ Request::Runs { .. } => {
                let filter = crate::dispatch::api::RunsFilter::of(&request).unwrap_or_default();
                return self.list_runs(to, filter);
            }
            Request::Counts => return self.answer_from_ledger(to, Query::Counts),
            Request::Search { query, limit } => {
                let live = self.live_summaries();
                let limit = limit.unwrap_or(crate::ledger::SEARCH_LIMIT_DEFAULT);
                return self.answer_from_ledger(to, Query::Search { query, limit, live });
            }
            Request::Spend { by, since } => {
                match since
                    .as_deref()
                    .map(crate::ledger::spend::Since::parse)
                    .transpose()
                {
                    Ok(since) => return self.answer_from_ledger(to, Query::Spend { by, since }),
                    Err(refusal) => Err(refusal),
                }
            }
            // The control server keeps a connection's focus (it never reaches the core
            // from a client); answered like a ping for any other caller.
            Request::Focus { .. } => Ok(Response::Pong(self.pong())),
            Request::Show { run_id } => match self.runs.get(&run_id) {
                Some(run) => Ok(Response::Show(Box::new(run.view()))),
                None => return self.answer_from_ledger(to, Query::Show { run_id }),
            },
            Request::Transcript { run_id, format } => {
                // The ring is in memory; everything else is in the ledger, committed turn
                // by turn.
                match self.runs.get(&run_id) {
                    Some(run) if format == TranscriptFormat::Tail => {
                        Ok(Response::Transcript(Box::new(TranscriptView {
                            run_id: run_id.clone(),
                            format,
                            lines: run.transcript.lines().cloned().collect(),
                            events: Vec::new(),
                            result: None,
                            events_pruned_at: None,
                            last_seq: Some(run.transcript.last_seq()),
                        })))
                    }
                    _ => {
                        return self.answer_from_ledger(to, Query::Transcript { run_id, format });
                    }
                }
            }
            Request::FollowUp { run_id, text } => return self.follow_up(to, &run_id, text),
            Request::Resume { run_id, text } => return self.resume(to, &run_id, text),
            Request::TakeOver { run_id } => match self.target(&run_id) {
                Target::Active => return self.take_over(to, &run_id),
                other => return self.refuse_target(to, &run_id, other),
            },
            Request::HandBack { run_id } => match self.target(&run_id) {
                Target::Active => return self.hand_back(to, &run_id),
                other => return self.refuse_target(to, &run_id, other),
            },
            Request::Wake { run_id } => match self.target(&run_id) {
                Target::Active if self.taken_over_refusal(&run_id).is_some() => {
                    self.summary_response(&run_id)
                }
                Target::Active => {
                    self.wake_ahead(&run_id);
                    self.summary_response(&run_id)
                }
                other => return self.refuse_target(to, &run_id, other),
            },
            Request::Respond {
                run_id,
                request_id,
                answer,
            } => return self.respond(to, &run_id, &request_id, answer),
            Request::Stop { run_id } => match self.target(&run_id) {
                Target::Active => {
                    self.end_run(&run_id, RunState::Stopped, "user", Cause::Stopped);
                    self.summary_response(&run_id)
                }
                other => return self.refuse_target(to, &run_id, other),
            },
            Request::WrapUp { run_id } => match self.target(&run_id) {
                Target::Active => return self.soft_stop(to, &run_id),
                other => return self.refuse_target(to, &run_id, other),
            },
            Request::Complete { run_id } => return self.complete(to, &run_id),
            Request::Remove {
                run_id,
                finished,
                force,
            } => return self.remove(to, run_id, finished, force),
            Request::Diff { run_id, file, stat } => {
                return self.workspace_request(to, &run_id, Action::Diff { file, stat });
            }
            Request::Merge {
                run_id,
                squash,
                message,
            } => return self.workspace_request(to, &run_id, Action::Merge { squash, message }),
            Request::Update { run_id, rebase } => {
                return self.workspace_request(to, &run_id, Action::Update { rebase });
            }
            Request::ApproveScripts { run_id, approve } => match self.target(&run_id) {
                Target::Active => self.approve_scripts(&run_id, approve),
                other => return self.refuse_target(to, &run_id, other),
            },
            Request::Keep { run_id } => return self.workspace_request(to, &run_id, Action::Keep),
            Request::Discard { run_id } => {
                return self.workspace_request(to, &run_id, Action::Discard);
            }
            Request::Pr {
                run_id,
                draft,
                title,
                force_with_lease,
                refresh,
            } => {
                let wish = super::workspaces::PrWish {
                    draft,
                    title,
                    force_with_lease,
                    refresh,
                };
                return self.workspace_request(to, &run_id, Action::Pr(wish));
            }
            Request::KillAll { workflow } => {
                let mut active = self.active_ids();
                if let Some(w) = workflow.as_deref() {
                    active.retain(|id| self.runs[id].spec.workflow_id.as_deref() == Some(w));
                }
                for id in &active {
                    self.end_run(id, RunState::Stopped, "user", Cause::Stopped);
                }
                Ok(Response::Stopped(Stopped { stopped: active }))
            }
            Request::Wait {
                run_ids,
                workflow,
                until,
                any,
                timeout_secs,
            } => {
                let wait = super::waits::WaitAsk {
                    run_ids,
                    workflow,
                    until,
                    any,
                    timeout_secs,
                };
                return self.register_wait(to, wait);
            }
            Request::Subscribe { .. } => {
                Ok(Response::Subscribed(crate::dispatch::api::Subscribed {
                    subscribed: true,
                    ..Default::default()
                }))
            }
            Request::Budget => return self.budget_reply(to),
            Request::BudgetSet {
                warning_usd,
                hard_cap_usd,
            } => match self.budget_set(warning_usd, hard_cap_usd) {
                Ok(()) => return self.budget_reply(to),
                Err(e) => Err(e),
            },
            Request::BudgetNew { name } => return self.budget_new(to, name),
            Request::Routes => Ok(Response::Routes(self.open_routes())),
            Request::Rules => Ok(self.rules_list()),
            Request::RuleAdd { rule, answer } => return self.rule_add(to, rule, answer),
            Request::RuleRemove { id } => self.rule_remove(id),
            Request::Route {
                run_id,
                option,
                remember,
            } => self.pick_route(&run_id, option, remember),
            Request::RouteDecline { run_id } => self.decline_route(&run_id),
            // A run drover no longer holds (removed, or ended before it started) has no
            // escalation to offer: the ledger says what it is and what does work.
            Request::Escalate { run_id, .. } | Request::Retry { run_id }
                if !self.runs.contains_key(&run_id) =>
            {
                return self.answer_from_ledger(to, Query::NotActive { run_id });
            }
            Request::Escalate {
                run_id,
                provider,
                model,
            } => self.escalate(&run_id, EscalationKind::Escalate, provider, model),
            Request::Retry { run_id } => self.escalate(&run_id, EscalationKind::Retry, None, None),
        };
        self.reply(to, answer);
    }

    fn target(&self, run_id: &str) -> Target {
        match self.runs.get(run_id) {
            Some(run) if run.state().is_active() && run.ending.is_none() => Target::Active,
            Some(run) => Target::Inactive(run.state()),
            None => Target::Elsewhere,
        }
    }

    /// The refusal for a request on a run that is not active (read from the ledger when
    /// the run is not in memory).
    fn refuse_target(&mut self, to: ReplyTo, run_id: &str, target: Target) {
        match target {
            Target::Inactive(state) => self.reply(to, Err(not_active(run_id, state))),
            Target::Active | Target::Elsewhere => self.answer_from_ledger(
                to,
                Query::NotActive {
                    run_id: run_id.to_string(),
                },
            ),
        }
    }

    /// Ends an idle run (or one a restart interrupted: the user says it is done) as
    /// complete; a run still in a turn (or not started) is refused.
    fn complete(&mut self, to: ReplyTo, run_id: &str) {
        let run = match self.target(run_id) {
            Target::Active => &self.runs[run_id],
            other => return self.refuse_target(to, run_id, other),
        };
        let settled = (run.state() == RunState::Idle && !run.turn_in_flight)
            || run.state() == RunState::Interrupted;
        if !settled {
            let what_helps = match run.state() {
                RunState::AwaitingPermission => format!(
                    "it waits for your answer: `drover show {run_id}` lists the request and \
                     `drover respond {run_id} REQUEST allow|deny` answers it"
                ),
                RunState::AwaitingRoute => format!(
                    "it waits on its route card: `drover routes` shows it and \
                     `drover route {run_id} N` picks"
                ),
                _ => format!("wait for its turn to end with `drover wait {run_id} --until idle`"),
            };
            let e = DroverError::new(
                ErrorCode::RunNotIdle,
                format!(
                    "run {run_id} is {}, not idle; {what_helps}, or end it now with \
                     `drover stop {run_id}`",
                    run.state()
                ),
            );
            return self.reply(to, Err(e));
        }
        self.end_run(run_id, RunState::Completed, "complete", Cause::Completed);
        let answer = self.summary_response(run_id);
        self.reply(to, answer);
    }

    fn list_runs(&mut self, to: ReplyTo, filter: crate::dispatch::api::RunsFilter) {
        let live = self.live_summaries();
        self.answer_from_ledger(to, Query::Runs { filter, live });
    }

    /// The summary of every run in memory, newest first (fresher than the ledger's rows).
    fn live_summaries(&self) -> Vec<RunSummary> {
        self.order
            .iter()
            .rev()
            .filter_map(|id| self.runs.get(id))
            .map(Run::summary)
            .collect()
    }

    fn follow_up(&mut self, to: ReplyTo, run_id: &str, text: String) {
        if text.trim().is_empty() {
            let e = DroverError::new(
                ErrorCode::TaskRequired,
                "the follow-up is empty; say what the run should do next",
            );
            return self.reply(to, Err(e));
        }
        let max_chars = self.limits().task_max_chars;
        if text.chars().count() > max_chars {
            let e = DroverError::new(
                ErrorCode::TaskTooLong,
                format!("the follow-up is longer than {max_chars} characters; shorten it"),
            );
            return self.reply(to, Err(e));
        }
        let run = match self.target(run_id) {
            Target::Active => &self.runs[run_id],
            other => return self.refuse_target(to, run_id, other),
        };
        if let Some(refusal) = self.taken_over_refusal(run_id) {
            return self.reply_now(to, Err(refusal));
        }
        // A run a restart interrupted goes on in its session with these words.
        if run.state() == RunState::Interrupted {
            return self.resume(to, run_id, Some(text));
        }
        let planned = run.user_turns() + run.follow_ups.len() as u32;
        if planned >= run.spec.max_turns {
            let e = DroverError::new(
                ErrorCode::MaxTurns,
                format!(
                    "run {run_id} has used its {} turns; dispatch a new run to go on",
                    run.spec.max_turns
                ),
            );
            return self.reply(to, Err(e));
        }
        let idle = run.state() == RunState::Idle
            && !run.turn_in_flight
            && run.wake.is_none()
            && run.money_wait.is_none()
            && run.host_wait.is_none();
        let asleep = run.asleep();
        if idle {
            // Money is reserved for a turn: what the run's cap has left is fitted into its
            // budget session again (refused only when nothing is left), and when that is
            // not free now the follow-up waits for it in the queue, the run idle meanwhile.
            if let Err(e) = self.fit_follow_up(run_id) {
                return self.reply(to, Err(e));
            }
            if let Some(need) = self.money_short(run_id, true) {
                self.queue_follow_up(run_id, text);
                self.wait_for_money(run_id, need);
            } else if asleep {
                self.wake(run_id, text, TurnOrigin::FollowUp);
            } else {
                self.start_turn(run_id, text, TurnOrigin::FollowUp);
            }
        } else {
            self.queue_follow_up(run_id, text);
        }
        let answer = self.summary_response(run_id);
        self.reply(to, answer);
    }

    /// Keeps a follow-up sent while a turn runs, in memory and in the ledger (a restart
    /// delivers it once the run is resumed).
    fn queue_follow_up(&mut self, run_id: &str, text: String) {
        let now = self.now;
        let stored = self.redactor.redact(&text).into_owned();
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let mut batch = Batch::default();
        run.event(
            &mut batch,
            FOLLOW_UP_QUEUED,
            &serde_json::json!({ "text": stored }),
            now,
        );
        run.follow_ups.push_back(text);
        let why = if run.host_wait.is_some() {
            "follow-up queued until drover has reconnected to the run's host"
        } else if run.state() == RunState::Idle {
            "follow-up queued until its budget session has the money for the turn"
        } else {
            "follow-up queued until the current turn ends"
        };
        run.note(&mut batch, why, now);
        run.touch(&mut batch);
        self.commit(batch);
    }

    /// `remove`: one finished run, or every finished run, leaves the trays. A run whose
    /// worktree holds unmerged work is refused (left out of `--finished`) unless `force`.
    fn remove(&mut self, to: ReplyTo, run_id: Option<String>, finished: bool, force: bool) {
        match (run_id, finished) {
            (Some(id), _) => match self.runs.get(&id) {
                Some(run) if run.state().is_active() => {
                    let e = DroverError::new(
                        ErrorCode::RunNotActive,
                        format!(
                            "run {id} is still {}; stop it first, then remove it",
                            run.state()
                        ),
                    );
                    self.reply(to, Err(e));
                }
                Some(run) => {
                    let workspace = run.workspace.clone();
                    let answer = self.remove_runs(vec![(id, Some(workspace))], force, false);
                    self.reply(to, answer);
                }
                None => self.load(
                    Fetch::Summaries {
                        run_ids: vec![id.clone()],
                    },
                    Then::RemoveOne {
                        to,
                        run_id: id,
                        force,
                    },
                ),
            },
            (None, true) => self.load(
                Fetch::FinishedRuns { before: None },
                Then::RemoveFinished {
                    to,
                    force,
                    so_far: Removed::default(),
                    before: None,
                },
            ),
            (None, false) => {
                let e = DroverError::new(
                    ErrorCode::InvalidSpec,
                    "name a run to remove, or pass --finished to remove every finished run",
                );
                self.reply(to, Err(e));
            }
        }
    }

    /// The ledger's row of a run to remove that is not in memory.
    pub(super) fn remove_loaded(
        &mut self,
        run_id: &str,
        rows: Vec<RunSummary>,
        force: bool,
    ) -> Result<Response, DroverError> {
        let workspace = if let Some(run) = self.runs.get(run_id) {
            // Came back into memory meanwhile (resumed).
            if run.state().is_active() {
                return Err(not_active(run_id, run.state()));
            }
            Some(run.workspace.clone())
        } else {
            match rows.into_iter().find(|r| r.head.run_id == run_id) {
                Some(r) if r.head.state.is_active() => {
                    return Err(not_active(run_id, r.head.state));
                }
                Some(r) => r.workspace.map(|w| *w),
                None => return Err(not_found(run_id)),
            }
        };
        self.remove_runs(vec![(run_id.to_string(), workspace)], force, false)
    }

    /// One page of `remove --finished`: the finished runs in memory (with the first page)
    /// and those the ledger listed (runs whose worktree holds unmerged work stay, unless
    /// `force`). A full page asks for the next one; the last answers with every page's.
    pub(super) fn remove_finished(
        &mut self,
        to: ReplyTo,
        ledger_rows: Vec<RunSummary>,
        force: bool,
        mut so_far: Removed,
        first: bool,
    ) {
        let mut targets: Vec<(String, Option<WorkspaceView>)> = Vec::new();
        if first {
            targets.extend(
                self.order
                    .iter()
                    .filter_map(|id| self.runs.get(id))
                    .filter(|r| r.state().is_terminal())
                    .map(|r| (r.id.clone(), Some(r.workspace.clone()))),
            );
        }
        let finished: Vec<RunSummary> = ledger_rows
            .into_iter()
            .filter(|r| r.head.state.is_terminal())
            .collect();
        let next = (finished.len() >= REMOVE_PAGE as usize)
            .then(|| finished.last().map(|r| r.head.run_id.clone()))
            .flatten();
        targets.extend(
            finished
                .into_iter()
                .filter(|r| !self.runs.contains_key(&r.head.run_id))
                .map(|r| (r.head.run_id, r.workspace.map(|w| *w))),
        );
        if let Ok(Response::Removed(page)) = self.remove_runs(targets, force, true) {
            so_far.removed.extend(page.removed);
            so_far.unmerged.extend(page.unmerged);
            so_far.kept.extend(page.kept);
        }
        match next {
            Some(before) => self.load(
                Fetch::FinishedRuns {
                    before: Some(before.clone()),
                },
                Then::RemoveFinished {
                    to,
                    force,
                    so_far,
                    before: Some(before),
                },
            ),
            None => self.reply(to, Ok(Response::Removed(so_far))),
        }
    }

    /// Removes runs from the trays, with what becomes of their worktrees. With `skip`, a
    /// run with unmerged work is left in the trays (listed as such); without, it refuses
    /// the whole request.
    fn remove_runs(
        &mut self,
        targets: Vec<(String, Option<WorkspaceView>)>,
        force: bool,
        skip: bool,
    ) -> Result<Response, DroverError> {
        let mut removed = Vec::new();
        let mut unmerged = Vec::new();
        let mut kept = Vec::new();
        let mut after = Vec::new();
        for (id, workspace) in targets {
            match self.removal(&id, workspace.as_ref(), force) {
                Ok((task, branch)) => {
                    after.extend(task.map(|t| (id.clone(), t)));
                    kept.extend(branch.map(|branch| crate::dispatch::api::KeptBranch {
                        run_id: id.clone(),
                        branch,
                    }));
                    removed.push(id);
                }
                Err(e) if skip && e.code == ErrorCode::UnmergedWork => unmerged.push(id),
                Err(e) => return Err(e),
            }
        }
        let answer = self.mark_removed(removed, unmerged, kept);
        for (id, task) in after {
            self.after_removal(&id, task);
        }
        Ok(answer)
    }

    fn mark_removed(
        &mut self,
        targets: Vec<String>,
        unmerged: Vec<String>,
        kept: Vec<crate::dispatch::api::KeptBranch>,
    ) -> Response {
        let now = self.now;
        let mut batch = Batch::default();
        for id in &targets {
            batch.ops.push(WriteOp::UpdateRun {
                run_id: id.clone(),
                patch: Box::new(RunPatch {
                    updated_at: now,
                    removed: Some(true),
                    ..RunPatch::default()
                }),
            });
            batch
                .events
                .push(DispatchEvent::RunRemoved { run_id: id.clone() });
            // Its run-scoped rules can never match again.
            for rule in self.rules.forget_run(id) {
                batch.ops.push(WriteOp::DeleteRule(rule));
            }
            self.runs.remove(id);
        }
        self.order.retain(|id| !targets.contains(id));
        self.commit(batch);
        Response::Removed(Removed {
            removed: targets,
            unmerged,
            kept,
        })
    }
}
