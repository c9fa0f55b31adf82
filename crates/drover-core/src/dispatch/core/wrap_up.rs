//! Wrap up, then stop (docs/ARCHITECTURE.md §"Wrap up, then stop"): before a run's time
//! box, at its last allowed turn, near its dollar cap, or when the user asks for a soft
//! stop, drover sends one turn of its own asking the run to stop working and write its
//! result block now; the run ends `completed` with that result (reason `stopped_soft`),
//! or, when the wrap-up gives none or overruns its bound, as the limit would have ended it.
//!
//! What must stay true: a run is asked to wrap up at most once; the wrap-up turn is
//! drover's ([`TurnOrigin::WrapUp`]), never counted against max turns; a turn in flight
//! is never cut for it — the wrap-up is sent when that turn ends, bounded meanwhile by the
//! run's other limits (and, for a soft stop, by its own bound); once sent, the hard stop
//! follows `wrap_up_bound_secs` later.

use super::run::{Batch, Run, TurnOrigin, WrapReason, WrapUp};
use super::{Core, ReplyTo, prompts};
use crate::UnixMillis;
use crate::live_state::Cause;
use crate::run_state::RunState;
use crate::{DroverError, ErrorCode};

impl Core {
    /// When the time-box wrap-up of `run` falls due: `wrap_up_secs` (at most half its
    /// time box) before its deadline, once, for a run that has sent a turn and holds its
    /// slot (or sleeps, hibernated). None when it is off or already asked.
    pub(super) fn wrap_up_due(&self, run: &Run) -> Option<UnixMillis> {
        let lead = super::answers::secs_ms(self.limits().wrap_up_secs);
        let half_box = i64::from(run.spec.max_minutes).saturating_mul(30_000);
        let eligible = lead > 0
            && run.wrap_up.is_none()
            && run.ending.is_none()
            && run.taken_over.is_none()
            && !run.turns.is_empty()
            && (run.holds_slot() || run.hibernated);
        eligible.then(|| run.deadline.saturating_sub(lead.min(half_box)))
    }

    /// Asks `run_id` to wrap up for `reason`: at once when its turn is over, else once
    /// the turn in flight ends (`hard_at` bounds that wait; `None`: its other limits do).
    pub(super) fn wrap_up(
        &mut self,
        run_id: &str,
        reason: WrapReason,
        hard_at: Option<UnixMillis>,
    ) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.wrap_up.is_some() || run.ending.is_some() || run.state().is_terminal() {
            return;
        }
        run.wrap_up = Some(WrapUp {
            reason,
            sent_at: None,
            hard_at,
        });
        if run.turn_in_flight || run.wake.is_some() {
            let mut batch = Batch::default();
            run.note(
                &mut batch,
                format!(
                    "wrapping up once its turn ends: {} (the turn goes on)",
                    reason.words()
                ),
                now,
            );
            run.touch(&mut batch);
            return self.commit(batch);
        }
        self.send_wrap_up(run_id);
    }

    /// The run's turn is over and a wrap-up is due: a run whose last turn gave its result
    /// ends with it (nothing more to ask), except at its last allowed turn (whose result
    /// was not `done`); any other is sent the wrap-up turn (woken for it when it sleeps).
    pub(super) fn send_wrap_up(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(wrap) = run.wrap_up else {
            return;
        };
        let answered = run.turns.last().is_some_and(|t| t.result.is_some());
        if answered && wrap.reason != WrapReason::MaxTurns {
            let mut batch = Batch::default();
            run.note(
                &mut batch,
                format!(
                    "wrapped up: {}, and its last turn gave its result",
                    wrap.reason.words()
                ),
                now,
            );
            self.commit(batch);
            return self.end_run(run_id, RunState::Completed, STOPPED_SOFT, Cause::Completed);
        }
        let prompt = prompts::wrap_up(wrap.reason.words(), run.spec.output_schema.as_ref());
        let mut batch = Batch::default();
        run.note(
            &mut batch,
            format!(
                "wrapping up: {}; asked for the final answer",
                wrap.reason.words()
            ),
            now,
        );
        let asleep = run.asleep() && run.child.is_none();
        self.commit(batch);
        if asleep {
            self.wake(run_id, prompt, TurnOrigin::WrapUp);
        } else {
            self.start_turn(run_id, prompt, TurnOrigin::WrapUp);
        }
    }

    /// At the end of a turn (its result read, `done` when it said `status: done`): the
    /// wrap-up takes over when one is due — asked earlier, the spend near the cap and the
    /// turn gave no result (the wrap-up asks for it instead of the result retry; a turn
    /// that gave one goes idle, for the user to decide), or the last allowed turn ended
    /// without `done`. Returns whether it did (nothing else is sent then).
    pub(super) fn wrap_up_at_turn_end(&mut self, run_id: &str, done: bool) -> bool {
        let reserve = self.limits().wrap_up_usd;
        let on = self.limits().wrap_up_secs > 0;
        let Some(run) = self.runs.get(run_id) else {
            return false;
        };
        if run.ending.is_some() || run.taken_over.is_some() {
            return false;
        }
        if let Some(wrap) = run.wrap_up {
            if wrap.sent_at.is_some() {
                return false;
            }
            self.send_wrap_up(run_id);
            return true;
        }
        let money = crate::money::budget::RunMoney {
            cap: run.spec.budget_usd,
            spent: run.cost_usd + run.provisional_usd,
        };
        let answered = run.turns.last().is_some_and(|t| t.result.is_some());
        let reason = if on && !answered && money.is_near_cap(reserve) {
            WrapReason::Budget
        } else if on && !done && run.user_turns() >= run.spec.max_turns {
            WrapReason::MaxTurns
        } else {
            return false;
        };
        self.wrap_up(run_id, reason, None);
        true
    }

    /// The wrap-up turn ended: with a result the run ends `completed` (`stopped_soft`);
    /// without one, as its limit would have ended it.
    pub(super) fn wrapped_up(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(wrap) = run.wrap_up else {
            return;
        };
        if run.turns.last().is_some_and(|t| t.result.is_some()) {
            return self.end_run(run_id, RunState::Completed, STOPPED_SOFT, Cause::Completed);
        }
        let (state, reason, cause) = wrap.reason.hard_end();
        let mut batch = Batch::default();
        run.note(&mut batch, "the wrap-up turn gave no result block", now);
        self.commit(batch);
        self.end_run(run_id, state, reason, cause);
    }

    /// The wrap-up overran its bound (or, for a soft stop, the turn before it did): the
    /// hard stop.
    pub(super) fn wrap_up_overran(&mut self, run_id: &str) {
        let now = self.now;
        let bound = self.limits().wrap_up_bound_secs;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(wrap) = run.wrap_up else {
            return;
        };
        let (state, reason, cause) = wrap.reason.hard_end();
        let mut batch = Batch::default();
        let note = if wrap.sent_at.is_some() {
            format!(
                "the wrap-up took longer than {}; stopped",
                crate::text::duration_words(super::answers::secs_ms(bound))
            )
        } else {
            "its turn did not end in time to wrap up; stopped".to_string()
        };
        run.note(&mut batch, note, now);
        self.commit(batch);
        self.end_run(run_id, state, reason, cause);
    }

    /// `drover stop RUN --soft` (`s` then wrap up, in the dashboard): the run is asked to
    /// wrap up. Refused for a run that has not sent a turn (nothing to wrap up: stop it),
    /// one interrupted by a restart, taken over, or already wrapping up.
    pub(super) fn soft_stop(&mut self, to: ReplyTo, run_id: &str) {
        let limits = self.limits();
        let bound = super::answers::secs_ms(limits.wrap_up_secs.max(limits.wrap_up_bound_secs));
        if let Some(refusal) = self.taken_over_refusal(run_id) {
            return self.reply_now(to, Err(refusal));
        }
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        let refusal = if run.wrap_up.is_some() {
            Some(format!(
                "run {run_id} is already wrapping up; `drover stop {run_id}` stops it now"
            ))
        } else if run.state() == RunState::Interrupted {
            Some(format!(
                "run {run_id} was interrupted by a restart: resume it (`drover resume \
                 {run_id}`) or stop it (`drover stop {run_id}`)"
            ))
        } else if run.turns.is_empty() {
            Some(format!(
                "run {run_id} has not started a turn, so it has nothing to wrap up; stop it \
                 with `drover stop {run_id}`"
            ))
        } else {
            None
        };
        if let Some(message) = refusal {
            return self.reply(to, Err(DroverError::new(ErrorCode::RunNotActive, message)));
        }
        self.wrap_up(
            run_id,
            WrapReason::User,
            Some(self.now.saturating_add(bound)),
        );
        let answer = self.summary_response(run_id);
        self.reply(to, answer);
    }
}

/// The completion reason of a run that wrapped up with its result.
pub const STOPPED_SOFT: &str = "stopped_soft";
