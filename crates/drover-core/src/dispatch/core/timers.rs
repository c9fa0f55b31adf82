//! Every timer of the dispatcher, in one place: a pending answer's expiry, a run's time
//! box and the wrap-up before it (and the wrap-up's own bound), its idle timeout, hibernating an idle run, sending a failed turn again, reconnecting to a host, the
//! provider's silence, the stalled watchdog, making its
//! worktree, waiting for a shared directory, route cards' expiry, waits, and the shutdown
//! grace period.
//!
//! What must stay true: [`Core::timers_of`] is the one statement of when each run timer
//! falls due; firing them and naming the next deadline both read it, so the two cannot
//! disagree (a condition that fires nothing never wakes the loop). A run fires at most one
//! timer per pass, in the order below; the next pass (at once, if another is due) fires
//! the next.

use super::Core;
use super::run::{Batch, Run, WrapReason};
use crate::UnixMillis;
use crate::live_state::Cause;
use crate::run_state::RunState;
use crate::text::duration_words;

/// A run timer, in the order they are fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunTimer {
    /// A pending request was not answered in time: it is denied.
    AnswerExpired,
    /// The run went past its max minutes: it fails (`timeout`).
    TimeBox,
    /// Its time box is near (`wrap_up_secs` before it): it is asked to wrap up
    /// (`wrap_up.rs`).
    WrapUp,
    /// Its wrap-up overran its bound: the hard stop.
    WrapUpOverrun,
    /// Idle for its idle timeout: it completes (`idle_timeout`).
    Idle,
    /// Idle with a warm child for `hibernate_after_secs`: the child is shut down, its
    /// provider session kept.
    Hibernate,
    /// A turn the model API failed is held until then: it is sent again.
    Resend,
    /// The connection to the run's host dropped: the next reconnect is due
    /// (`host_drop.rs`).
    HostRetry,
    /// The model owes an answer and the CLI said nothing for the provider's silence
    /// timeout: it fails (`timeout`).
    Silence,
    /// No provider event for a while: flagged, not stopped.
    Stalled,
    /// Its worktree was not made (or checked) in time: it fails.
    Prepare,
    /// A shared run waited its whole time box for its directory: it fails.
    DirWait,
}

impl Core {
    /// When each timer of `run` falls due, in firing order (none for a finished run).
    pub(super) fn timers_of(&self, run: &Run) -> [Option<(UnixMillis, RunTimer)>; 12] {
        if run.state().is_terminal() {
            return [None; 12];
        }
        // Once the wrap-up turn is sent, its own bound is the run's hard stop.
        let wrap_sent = run.wrap_up.is_some_and(|w| w.sent_at.is_some());
        let stalled_after = super::answers::secs_ms(self.limits().stalled_after_secs);
        let silence = self.config.silence_ms(&run.spec.provider);
        let idle_timeout = super::answers::secs_ms(run.spec.idle_timeout_secs);
        [
            run.broker
                .next_expiry()
                .map(|at| (at, RunTimer::AnswerExpired)),
            (run.ending.is_none() && !wrap_sent && (run.holds_slot() || run.hibernated))
                .then_some((run.deadline, RunTimer::TimeBox)),
            self.wrap_up_due(run).map(|at| (at, RunTimer::WrapUp)),
            run.wrap_up
                .and_then(|w| w.hard_at)
                .filter(|_| run.ending.is_none())
                .map(|at| (at, RunTimer::WrapUpOverrun)),
            run.idle_since
                .filter(|_| run.ending.is_none() && run.taken_over.is_none())
                .map(|idle| (idle.saturating_add(idle_timeout), RunTimer::Idle)),
            self.hibernate_due(run).map(|at| (at, RunTimer::Hibernate)),
            run.resend_at
                .filter(|_| run.ending.is_none())
                .map(|at| (at, RunTimer::Resend)),
            run.host_wait
                .and_then(|w| w.at)
                .filter(|_| run.ending.is_none())
                .map(|at| (at, RunTimer::HostRetry)),
            run.silence_deadline(silence)
                .map(|at| (at, RunTimer::Silence)),
            (run.turn_in_flight && !run.stalled && run.broker.is_empty()).then_some((
                run.last_event_at.saturating_add(stalled_after),
                RunTimer::Stalled,
            )),
            run.preparing_until.map(|at| (at, RunTimer::Prepare)),
            run.waiting_for_dir
                .then_some((run.deadline, RunTimer::DirWait)),
        ]
    }

    /// Fires what is due at `self.now`.
    pub(super) fn fire_timers(&mut self) {
        let now = self.now;
        self.expire_routes(now);
        self.refresh_due_pr();
        // Looked at on every turn of the driver's loop, so the run ids are copied only
        // when some timer is due (what firing one changes, the others after it see).
        let due_of = |core: &Core, id: &str| {
            let run = core.runs.get(id)?;
            core.timers_of(run)
                .into_iter()
                .flatten()
                .find(|(at, _)| *at <= now)
                .map(|(_, timer)| timer)
        };
        if self.order.iter().any(|id| due_of(self, id).is_some()) {
            for id in self.order.clone() {
                if let Some(timer) = due_of(self, &id) {
                    self.fire(&id, timer);
                }
            }
        }
        self.check_waiters();
    }

    /// The earliest moment a timer is due.
    pub(super) fn next_deadline(&self) -> Option<UnixMillis> {
        let runs = self
            .runs
            .values()
            .flat_map(|run| self.timers_of(run).into_iter().flatten().map(|(at, _)| at));
        let waits = self.waiters.iter().map(|w| w.deadline);
        runs.chain(waits)
            .chain(self.next_route_expiry())
            .chain(self.next_pr_refresh().map(|(at, _)| at))
            .chain(self.shutdown_deadline)
            .min()
    }

    fn fire(&mut self, run_id: &str, timer: RunTimer) {
        let now = self.now;
        match timer {
            RunTimer::AnswerExpired => {
                self.deny_expired(run_id);
            }
            RunTimer::TimeBox => {
                let Some(run) = self.runs.get_mut(run_id) else {
                    return;
                };
                let minutes = run.spec.max_minutes;
                let mut batch = Batch::default();
                run.note(
                    &mut batch,
                    format!(
                        "ran past its limit of {minutes} minute{}",
                        crate::text::plural(minutes as usize)
                    ),
                    now,
                );
                self.commit(batch);
                self.end_run(run_id, RunState::Failed, "timeout", Cause::Failed);
            }
            RunTimer::WrapUp => self.wrap_up(run_id, WrapReason::TimeBox, None),
            RunTimer::WrapUpOverrun => self.wrap_up_overran(run_id),
            RunTimer::Idle => {
                self.end_run(
                    run_id,
                    RunState::Completed,
                    "idle_timeout",
                    Cause::Completed,
                );
            }
            RunTimer::Hibernate => self.hibernate(run_id, "idle with no follow-up"),
            RunTimer::Resend => self.resend_now(run_id),
            RunTimer::HostRetry => self.try_host(run_id),
            RunTimer::Silence => {
                let Some(run) = self.runs.get_mut(run_id) else {
                    return;
                };
                let silent_for = now - run.last_event_at;
                let provider = run.spec.provider.clone();
                let mut batch = Batch::default();
                run.note(
                    &mut batch,
                    format!(
                        "no word from {provider} for {} while the model was answering; it \
                         may be retrying an API that does not answer",
                        duration_words(silent_for)
                    ),
                    now,
                );
                self.commit(batch);
                self.end_run(run_id, RunState::Failed, "timeout", Cause::Failed);
            }
            RunTimer::Stalled => {
                let stalled_after = super::answers::secs_ms(self.limits().stalled_after_secs);
                let Some(run) = self.runs.get_mut(run_id) else {
                    return;
                };
                run.stalled = true;
                let mut batch = Batch::default();
                run.note(
                    &mut batch,
                    format!(
                        "stalled: no provider event for {} (not stopped; stop it if it is stuck)",
                        duration_words(stalled_after)
                    ),
                    now,
                );
                run.touch(&mut batch);
                self.commit(batch);
            }
            RunTimer::Prepare => self.prepare_timed_out(run_id),
            RunTimer::DirWait => self.dir_wait_timed_out(run_id),
        }
    }
}
