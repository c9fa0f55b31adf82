//! A turn the model API failed after the CLI's own retries (429, 529, 5xx): the run is
//! held in `waiting_provider` and the turn is sent again in the same provider session,
//! after a wait that doubles (1, 2, 4 … minutes, at most `[limits] resend_wait_max_secs`),
//! up to `[limits] resend_turns_max` times; then it fails as `provider_unavailable`. The
//! user may send it again now (`resume`, `R` in the dashboard) or stop the run.
//!
//! What must stay true: a held turn is sent again only while the run is not ending, and
//! never after its time box; each re-send is a turn of its own (origin `resend`, not
//! counted against max turns); a turn that succeeds forgets the count.

use super::Core;
use super::run::{Batch, TurnOrigin};
use crate::live_state::LiveStateKind;
use crate::text::duration_words;

/// The first wait before a failed turn is sent again; each further one doubles it.
pub const RESEND_FIRST_WAIT_MS: i64 = 60_000;

/// How long to wait before sending a failed turn again, after it was sent again
/// `sent_again` times already: 1, 2, 4 … minutes, at most `cap_ms`.
pub fn resend_wait(sent_again: u32, cap_ms: i64) -> i64 {
    RESEND_FIRST_WAIT_MS
        .saturating_mul(1_i64 << sent_again.min(62))
        .min(cap_ms)
        .max(0)
}

impl Core {
    /// Holds a turn the model API failed, to send it again, if it may be: true when it
    /// is held (the batch has its note and live state).
    pub(super) fn hold_for_resend(&mut self, run_id: &str, batch: &mut Batch) -> bool {
        let now = self.now;
        let max = self.limits().resend_turns_max;
        let cap_ms = super::answers::secs_ms(self.limits().resend_wait_max_secs);
        let Some(run) = self.runs.get_mut(run_id) else {
            return false;
        };
        if run.resends >= max || run.last_prompt.is_none() || run.ending.is_some() {
            return false;
        }
        let wait = resend_wait(run.resends, cap_ms);
        let at = now.saturating_add(wait);
        if at >= run.deadline {
            return false;
        }
        run.resends += 1;
        run.resend_at = Some(at);
        let count = format!("{} of {max}", run.resends);
        run.note(
            batch,
            format!(
                "the model API stayed unavailable: the turn is sent again in {} ({count}); \
                 `drover resume {run_id}` sends it now, `drover stop {run_id}` ends the run",
                duration_words(wait)
            ),
            now,
        );
        run.set_live(
            batch,
            LiveStateKind::WaitingProvider,
            Some(at),
            Some(&format!(
                "the model API stayed unavailable; the turn is sent again ({count})"
            )),
            None,
            now,
        );
        run.touch(batch);
        true
    }

    /// Whether the run holds a failed turn to send again.
    pub(super) fn holds_resend(&self, run_id: &str) -> bool {
        self.runs
            .get(run_id)
            .is_some_and(|r| r.resend_at.is_some() && r.ending.is_none())
    }

    /// The CLI exited while its failed turn was held (some end the process with the
    /// turn): the turn is sent again in a new one, in the same provider session, when
    /// its time comes; meanwhile the run holds no process and no slot. Without a
    /// session to go on in, the run fails as `provider_unavailable`.
    pub(super) fn on_exited_while_held(&mut self, run_id: &str, note: String) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let mut batch = Batch::default();
        if run.provider_session_id.is_none() {
            run.resend_at = None;
            run.note(&mut batch, note, now);
            run.note(
                &mut batch,
                "this failure may pass: retry the run later",
                now,
            );
            self.commit(batch);
            return self.finalize(
                run_id,
                crate::run_state::RunState::Failed,
                "provider_unavailable",
                crate::live_state::Cause::Failed,
            );
        }
        run.child = None;
        run.ready = false;
        run.hibernated = true;
        run.note(
            &mut batch,
            "the CLI exited with the failed turn; it is sent again in a new one, in the same \
             provider session",
            now,
        );
        run.touch(&mut batch);
        self.commit(batch);
        self.start_queued();
    }

    /// Sends the held turn again now, in the same provider session.
    pub(super) fn resend_now(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.resend_at = None;
        let Some(prompt) = run.last_prompt.clone() else {
            return;
        };
        if run.child.is_some() {
            self.start_turn(run_id, prompt, TurnOrigin::Resend);
        } else {
            self.wake(run_id, prompt, TurnOrigin::Resend);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_a_minute_up_to_its_cap() {
        let cap = 600_000;
        let waits: Vec<i64> = (0..6).map(|n| resend_wait(n, cap)).collect();
        assert_eq!(waits, [60_000, 120_000, 240_000, 480_000, 600_000, 600_000]);
        assert_eq!(resend_wait(u32::MAX, i64::MAX), i64::MAX);
        assert_eq!(resend_wait(0, 0), 0);
    }
}
