//! A restart of drover (docs/ARCHITECTURE.md §"A restart"): the runs a previous owner left
//! active are put back where they were as the dispatcher starts ([`Core::restore`]), and
//! a stopping owner leaves its runs so that the next one can ([`Core::begin_shutdown`]).
//!
//! Where each run goes is [`RunState::after_restart`]'s table: an idle run comes back
//! idle and hibernated (its CLI is gone, its provider session kept); a run waiting on a
//! permission or a question comes back waiting, its requests shown again under their ids
//! (no CLI hears them: answering wakes the run in its session and tells it the answers,
//! `answers.rs`); a run held on a route card gets its card again; a queued run, or one
//! that had not sent its first turn, waits in the queue; only a run whose turn was in
//! flight is `interrupted` — it needs the user, who resumes it (`resume.rs`) or stops it.
//! Their clocks (time box, idle timeout, a request's or a card's expiry) count from the
//! restart.
//!
//! What must stay true: putting a run back sends no turn and starts no CLI (a queued run
//! starts as its slot allows, as any queued run does); it moves the run only through
//! [`super::run::Run::set_state`]; its seqs go on from the ledger's; a stopping owner
//! interrupts only the runs whose turn is in flight and leaves every other run as it is
//! for the next owner, its CLI shut down.

use super::run::{Batch, HIBERNATED_DETAIL, Run, Turn, TurnOrigin};
use super::transcript::TranscriptRing;
use super::{Core, SHUTDOWN_GRACE_MS};
use crate::dispatch::projections;
use crate::dispatch::reads::ResumeData;
use crate::live_state::{Cause, LiveStateKind};
use crate::providers::{PermissionRequest, ProviderCommand};
use crate::run_state::RunState;

/// The live line's detail of a run a restart interrupted in a turn.
pub const INTERRUPTED_DETAIL: &str = "interrupted by a restart of drover · R resumes";
/// The live line's detail of a run a restart found with no provider session to go on in.
pub const INTERRUPTED_NO_SESSION_DETAIL: &str = "interrupted by a restart of drover before its provider gave it a session · retry starts it again";

impl Core {
    /// Puts one run a previous owner left active back in memory, where it was. A run to
    /// interrupt is only put back here: its id is returned, and it is interrupted once
    /// every run is back ([`Core::settle_restored`]: its end looks at the queue).
    pub(super) fn restore(&mut self, data: ResumeData) -> Option<String> {
        let now = self.now;
        let ResumeData {
            record,
            view,
            tail,
            last_seq,
            session,
            follow_ups,
            pending,
            turn_cut,
        } = data;
        let run_id = record.run_id.clone();
        let spec = match projections::stored_spec(&record) {
            Ok(spec) => spec,
            Err(e) => {
                tracing::warn!(run = %run_id, error = %e, "a run left active is not put back");
                return None;
            }
        };
        let mut ring = TranscriptRing::new(
            self.limits().transcript_max_lines,
            self.limits().transcript_max_chars,
        );
        // Every line read back is held by an event at most the run's last.
        for line in tail {
            ring.push(line, last_seq);
        }
        self.adopt_session(session);
        let found = record.state;
        let mut run = Run::restored(
            run_id.clone(),
            spec,
            record.budget_session.clone(),
            found,
            now,
            ring,
        );
        run.created_at = record.created_at;
        run.next_seq = last_seq + 1;
        run.live = record.live_state.clone();
        run.model = record.model.clone();
        run.provider_session_id = record.provider_session_id.clone();
        run.turns = view.turns.iter().map(Turn::from_view).collect();
        run.tokens = view.tokens;
        run.cost_usd = view.head.cost_usd;
        run.cost_basis = view.cost_basis;
        run.usage = view.usage;
        run.notes = view.notes;
        run.needs_input =
            view.last_result.as_ref().and_then(|r| r.status.as_deref()) == Some("needs_input");
        run.last_result = view.last_result;
        run.depth = view.depth;
        run.route = view.route;
        run.escalation = view.escalation;
        run.decisions = view.decisions.into();
        run.follow_ups = follow_ups.into();
        run.turn_cut = turn_cut;
        if let Some(workspace) = view.workspace {
            run.workspace = workspace;
        }
        let mut batch = Batch::default();
        let mut interrupt = None;
        // No turn goes on across a restart: one left open ends now (its agent text, not
        // kept across the restart, read from its events).
        if let Some(turn) = run.turns.last_mut().filter(|t| t.ended_at.is_none()) {
            turn.ended_at = Some(now);
            batch.ops.push(turn.end_record(&run_id, None));
        }
        let back = found.after_restart(!run.turns.is_empty(), run.provider_session_id.is_some());
        match back {
            // A drover before this one wrote an end on the row of an interrupted run
            // (`interrupted` was an end then): it is forgotten, the run waits for the user.
            RunState::Interrupted if found == RunState::Interrupted => {
                if record.finished_at.is_some() || record.completion_reason.is_some() {
                    batch.ops.push(crate::ledger::WriteOp::UpdateRun {
                        run_id: run_id.clone(),
                        patch: Box::new(crate::ledger::RunPatch {
                            updated_at: now,
                            reopened: true,
                            ..Default::default()
                        }),
                    });
                }
            }
            // Interrupted once every run is back (its end needs the queue in place).
            RunState::Interrupted => {
                run.turn_cut = matches!(
                    found,
                    RunState::Running | RunState::Starting | RunState::Queued
                );
                interrupt = Some(run_id.clone());
            }
            // It starts as its slot allows, with its first turn built from the spec the
            // ledger keeps (redacted: a secret in the task reaches the CLI as
            // `[redacted]`).
            RunState::Queued => {
                if found != RunState::Queued {
                    run.set_state(&mut batch, RunState::Queued, Some("restart"), now);
                }
                run.workspace_asked = run.spec.workspace.is_some();
                if let Some(kind) = run
                    .live
                    .as_ref()
                    .map(|l| l.state)
                    .filter(|k| *k != LiveStateKind::Ended)
                {
                    let deadline = run.deadline;
                    run.set_live(
                        &mut batch,
                        kind,
                        Some(deadline),
                        Some("queued again after a restart of drover"),
                        None,
                        now,
                    );
                }
                self.queue.push_back(run_id.clone());
            }
            RunState::AwaitingRoute => {
                let expiry = super::answers::secs_ms(self.config.routing.card_expiry_secs);
                if let Some(card) = run.route.as_mut().filter(|c| c.status == "open") {
                    card.expires_at = now.saturating_add(expiry);
                    let card = card.clone();
                    run.event(&mut batch, "route", &card, now);
                    run.set_live(
                        &mut batch,
                        LiveStateKind::Admitted,
                        Some(card.expires_at),
                        Some("waiting for your route choice"),
                        None,
                        now,
                    );
                }
            }
            RunState::AwaitingPermission => {
                let permission_ms = super::answers::secs_ms(self.limits().permission_timeout_secs);
                let question_ms = super::answers::secs_ms(self.limits().question_timeout_secs);
                for p in pending {
                    let timeout = match p.kind {
                        crate::providers::RequestKind::Permission => permission_ms,
                        crate::providers::RequestKind::Question => question_ms,
                    };
                    let request = PermissionRequest {
                        request_id: p.request_id,
                        kind: p.kind,
                        tool: p.tool,
                        ask: p.ask,
                        always: p.always,
                        tool_use_id: None,
                        blocked_path: None,
                    };
                    run.broker
                        .restore(request, p.created_at, now.saturating_add(timeout), p.guard);
                }
                // No CLI hears the requests: the run holds no process, slot or money
                // until an answer wakes it.
                run.hibernated = true;
                if run.broker.is_empty() {
                    // Nothing left to answer (its requests were settled before the
                    // restart): idle in its session, as a run between turns.
                    run.set_state(&mut batch, RunState::Idle, Some("restart"), now);
                    let bound =
                        now.saturating_add(super::answers::secs_ms(run.spec.idle_timeout_secs));
                    run.working(&mut batch, bound, HIBERNATED_DETAIL, now);
                } else {
                    let first = &run.broker.pending()[0];
                    let detail = match first.request.kind {
                        crate::providers::RequestKind::Permission => {
                            format!("waiting for your answer: {}", first.request.tool)
                        }
                        crate::providers::RequestKind::Question => {
                            "waiting for your answer to a question".to_string()
                        }
                    };
                    let bound = run.broker.next_expiry().unwrap_or(now);
                    run.working(&mut batch, bound, &detail, now);
                    run.note(
                        &mut batch,
                        "drover was restarted while this run waited for your answer: the \
                         request is shown again; your answer wakes the run in its provider \
                         session and tells it",
                        now,
                    );
                }
            }
            RunState::Idle => {
                run.hibernated = true;
                run.idle_since = Some(now);
                let bound = now.saturating_add(super::answers::secs_ms(run.spec.idle_timeout_secs));
                run.working(&mut batch, bound, HIBERNATED_DETAIL, now);
            }
            other => {
                tracing::warn!(run = %run_id, state = %other, "a finished run is not put back");
                return None;
            }
        }
        self.runs.insert(run_id.clone(), run);
        self.order.push(run_id);
        self.commit(batch);
        interrupt
    }

    /// Once every run is back: the runs whose turn was in flight (`to_interrupt`) are
    /// interrupted, and the queue starts what fits.
    pub(super) fn settle_restored(&mut self, to_interrupt: Vec<String>) {
        for run_id in to_interrupt {
            let now = self.now;
            let Some(run) = self.runs.get_mut(&run_id) else {
                continue;
            };
            let mut batch = Batch::default();
            // A run with no session to go on in cannot hear answers: what it asked is
            // denied, with the reason.
            run.deny_all_pending(
                &mut batch,
                "drover was restarted and the run has no session to go on in",
                now,
            );
            let note = if run.turn_cut {
                format!(
                    "drover was restarted during this run's turn: `drover resume {run_id}` \
                     (R) goes on with it in its provider session, `drover stop {run_id}` ends it"
                )
            } else {
                format!(
                    "drover was restarted before the provider gave this run a session to go \
                     on in: `drover retry {run_id}` starts it again"
                )
            };
            run.note(&mut batch, note, now);
            self.commit(batch);
            self.finalize(
                &run_id,
                RunState::Interrupted,
                "restart",
                Cause::ResidentReplaced,
            );
        }
        self.start_queued();
    }

    /// Stop every run's CLI and wind down: a run whose turn is in flight is interrupted
    /// (recorded once its CLI has exited); every other run is left as it is, for the next
    /// owner to put back where it was.
    pub(super) fn begin_shutdown(&mut self) {
        if self.shutdown_deadline.is_some() {
            return;
        }
        self.shutdown_deadline = Some(self.now + SHUTDOWN_GRACE_MS);
        for id in self.active_ids() {
            let Some(run) = self.runs.get_mut(&id) else {
                continue;
            };
            let state = run.state();
            let back =
                state.after_restart(!run.turns.is_empty(), run.provider_session_id.is_some());
            if back == RunState::Interrupted && state != RunState::Interrupted {
                run.turn_cut = matches!(
                    state,
                    RunState::Running | RunState::Starting | RunState::Queued
                );
                self.end_run(
                    &id,
                    RunState::Interrupted,
                    "shutdown",
                    Cause::ResidentReplaced,
                );
            } else if run.child.is_some() && run.ending.is_none() {
                // Left for the next owner: its CLI goes, the run stays as it is.
                self.send(&id, ProviderCommand::Shutdown);
            }
        }
    }

    /// The CLI of a run left for the next owner has exited: nothing of the run changes
    /// but that it has no CLI (the next owner puts it back where it is).
    pub(super) fn on_parked_exit(&mut self, run_id: &str) {
        if let Some(run) = self.runs.get_mut(run_id) {
            run.child = None;
            run.ready = false;
            run.launching = false;
        }
    }
}

impl Turn {
    /// A turn as the ledger kept it (its origin word read back).
    pub(super) fn from_view(view: &crate::dispatch::api::TurnView) -> Turn {
        let origin = match view.origin.as_str() {
            "follow_up" => TurnOrigin::FollowUp,
            "result_retry" => TurnOrigin::ResultRetry,
            "resume" => TurnOrigin::Resume,
            "resend" => TurnOrigin::Resend,
            "interactive" => TurnOrigin::Interactive,
            "wrap_up" => TurnOrigin::WrapUp,
            _ => TurnOrigin::Dispatch,
        };
        Turn {
            number: view.number,
            origin,
            started_at: view.started_at,
            ended_at: view.ended_at,
            prompt_preview: view.prompt_preview.clone(),
            text: view.text.clone().unwrap_or_default(),
            tokens: view.tokens,
            cost_usd: view.cost_usd,
            result: view.result.clone(),
            commands: view.commands.clone(),
        }
    }
}
