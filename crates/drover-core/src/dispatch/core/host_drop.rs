//! A run on another host whose connection dropped (docs/ARCHITECTURE.md §"Hosts"): its
//! transport's local child (`ssh`) exited while the run was not being stopped — the
//! client killed, the network gone, the host rebooted (OpenSSH exits 255, or the client
//! died of a signal). The run is not failed: it waits in `waiting_host` while the owner
//! reconnects, after 1, 2, 4 … seconds (at most [`HOST_WAIT_MAX_MS`]), up to
//! [`HOST_TRIES_MAX`] tries; then it fails as `host_unreachable`.
//!
//! Reconnecting ([`Effect::Reconnect`], carried out by the driver) is: the host answers
//! (its ssh control master opened again if it died), and what is left of the run's old
//! process group there is ended, its pid file removed. Then the run goes on as a restart
//! puts a run back (`restore.rs`): a run that was between turns is idle and hibernated in
//! its provider session (a follow-up, or one sent while it waited, wakes it there); a run
//! whose turn was in flight is `interrupted`, its turn cut (`drover resume` goes on with
//! it in the same session there); a run woken for a turn is woken again for it.
//!
//! What must stay true: only a run on a host that had reported its provider session
//! waits for its host (anything else fails as before); one reconnect at a time per run;
//! nothing is sent to the host's CLI before the old group there is ended; a run stopped,
//! or past its time box, while it waits ends as any run without a child does, and what
//! is left of its group there is ended all the same; a CLI that drops again before it
//! is ready goes on counting the tries, so the give-up bounds a host that answers but
//! never keeps the run.

use super::run::{Batch, HIBERNATED_DETAIL};
use super::{Core, Effect};
use crate::UnixMillis;
use crate::live_state::{Cause, LiveStateKind};
use crate::run_state::RunState;
use crate::text::duration_words;

/// The first wait before reconnecting to a host; each further one doubles it.
pub const HOST_FIRST_WAIT_MS: i64 = 1_000;
/// The longest wait between two tries.
pub const HOST_WAIT_MAX_MS: i64 = 60_000;
/// How many times the owner tries to reconnect before the run fails.
pub const HOST_TRIES_MAX: u32 = 10;
/// How long one try may take.
pub const HOST_TRY_TIMEOUT_MS: i64 = 20_000;
/// The end reason of a run that waited for its host in vain.
pub const HOST_UNREACHABLE_REASON: &str = "host_unreachable";
/// The end reason of a run whose turn the drop cut short (it is `interrupted`).
pub const HOST_DROPPED_REASON: &str = "host_dropped";
/// The live line's detail of a run whose turn a dropped connection cut short.
pub const HOST_DROPPED_DETAIL: &str = "interrupted: the connection to its host dropped · R resumes";

/// How long to wait before the next try, after `tries` tries already: 1, 2, 4 … seconds,
/// at most [`HOST_WAIT_MAX_MS`].
pub fn host_wait(tries: u32) -> i64 {
    HOST_FIRST_WAIT_MS
        .saturating_mul(1_i64 << tries.min(62))
        .min(HOST_WAIT_MAX_MS)
}

/// A run waiting for its host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostWait {
    /// Tries made so far.
    pub tries: u32,
    /// The next try is due then; `None` while one is under way.
    pub at: Option<UnixMillis>,
    /// Its turn was in flight when the connection dropped.
    pub turn_cut: bool,
}

/// A reconnect to a run's host: carried out off the dispatcher's task, its outcome an
/// [`super::Input::Reconnected`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReconnectJob {
    /// The run whose connection dropped.
    pub run_id: String,
    /// Its host's transport.
    pub transport: crate::providers::transport::Transport,
    /// The run's pid file on the host ([`crate::providers::transport::pid_file`]).
    pub pid_file: String,
    /// How long the try may take.
    pub timeout_ms: i64,
}

impl Core {
    /// The run's transport child exited (`code`, `signal`): when it is a run on a host
    /// whose connection dropped, it waits for its host and `true` is returned; otherwise
    /// nothing changes.
    pub(super) fn host_dropped(
        &mut self,
        run_id: &str,
        code: Option<i32>,
        signal: Option<i32>,
        turn_cut: bool,
        note: &str,
    ) -> bool {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return false;
        };
        let dropped = code == Some(255) || signal.is_some();
        if !dropped
            || run.ending.is_some()
            || run.provider_session_id.is_none()
            || run.state().is_terminal()
            || run.state() == RunState::Interrupted
        {
            return false;
        }
        let Some(host) = run.spec.host.clone() else {
            return false;
        };
        let mut batch = Batch::default();
        // No CLI hears what it asked: denied, with the reason (as after a restart with no
        // session to answer in).
        run.deny_all_pending(&mut batch, "the connection to the run's host dropped", now);
        if run.state() == RunState::AwaitingPermission {
            run.set_state(&mut batch, RunState::Running, None, now);
        }
        // A CLI that got ready since the last reconnect starts the count again.
        let tries = if run.ready { 0 } else { run.host_tries };
        run.child = None;
        run.ready = false;
        run.launching = false;
        run.hibernated = true;
        run.tool_open = false;
        run.host_wait = Some(HostWait {
            tries,
            at: Some(now.saturating_add(host_wait(tries))),
            turn_cut: turn_cut || run.host_wait.is_some_and(|w| w.turn_cut),
        });
        run.note(
            &mut batch,
            format!(
                "the connection to host {host} dropped ({note}); drover reconnects and goes on \
                 in the same provider session there"
            ),
            now,
        );
        self.commit(batch);
        self.show_host_wait(run_id);
        self.start_queued();
        true
    }

    /// A run that ends while it waits for its host (stopped, past its time box): what is
    /// left of its group there is ended all the same, once the host answers (one try,
    /// its outcome ignored: the run is over).
    pub(super) fn end_left_while_waiting(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.host_wait.take().is_some() {
            self.reconnect(run_id);
        }
    }

    /// The live line of a run waiting for its host: `waiting for host: NAME`, bounded by
    /// the next try.
    fn show_host_wait(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let (Some(wait), Some(host)) = (run.host_wait, run.spec.host.clone()) else {
            return;
        };
        let bound = wait
            .at
            .unwrap_or_else(|| now.saturating_add(HOST_TRY_TIMEOUT_MS));
        let mut batch = Batch::default();
        run.set_live(
            &mut batch,
            LiveStateKind::WaitingHost,
            Some(bound),
            Some(&host),
            None,
            now,
        );
        run.touch(&mut batch);
        self.commit(batch);
    }

    /// The next try is due: the driver reconnects.
    pub(super) fn try_host(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(wait) = run.host_wait.as_mut() else {
            return;
        };
        wait.at = None;
        wait.tries += 1;
        self.reconnect(run_id);
    }

    /// Asks the driver to reach the run's host and end what is left of its group there.
    fn reconnect(&mut self, run_id: &str) {
        let Some(transport) = self.runs.get(run_id).and_then(|r| self.transport_of(r)) else {
            return;
        };
        self.out.push(Effect::Reconnect(Box::new(ReconnectJob {
            run_id: run_id.to_string(),
            transport: *transport,
            pid_file: crate::providers::transport::pid_file(run_id),
            timeout_ms: HOST_TRY_TIMEOUT_MS,
        })));
    }

    /// What a reconnect came to: the run goes on, waits for the next try, or fails.
    pub(super) fn on_reconnected(&mut self, run_id: &str, outcome: Result<(), String>) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(wait) = run.host_wait else {
            return;
        };
        if run.state().is_terminal() || run.ending.is_some() {
            run.host_wait = None;
            return;
        }
        let host = run.spec.host.clone().unwrap_or_default();
        let mut batch = Batch::default();
        match outcome {
            Err(why) if wait.tries >= HOST_TRIES_MAX => {
                run.host_wait = None;
                run.host_tries = 0;
                run.note(
                    &mut batch,
                    format!(
                        "host {host} did not answer after {} tries ({why}): check it with \
                         `drover doctor --host {host}`, then `drover retry {run_id}` starts \
                         the run again",
                        wait.tries
                    ),
                    now,
                );
                self.commit(batch);
                self.end_run(
                    run_id,
                    RunState::Failed,
                    HOST_UNREACHABLE_REASON,
                    Cause::Failed,
                );
            }
            Err(why) => {
                let next = host_wait(wait.tries);
                run.host_wait = Some(HostWait {
                    at: Some(now.saturating_add(next)),
                    ..wait
                });
                run.note(
                    &mut batch,
                    format!(
                        "host {host} did not answer ({why}); trying again in {} ({} of {})",
                        duration_words(next),
                        wait.tries,
                        HOST_TRIES_MAX
                    ),
                    now,
                );
                self.commit(batch);
                self.show_host_wait(run_id);
            }
            Ok(()) => {
                run.host_wait = None;
                run.host_tries = wait.tries;
                run.note(
                    &mut batch,
                    format!("reconnected to host {host}; what was left of the run there was ended"),
                    now,
                );
                let woken = run.wake.take();
                if let Some((prompt, origin)) = woken {
                    // Woken for a turn when the connection dropped: woken again for it.
                    self.commit(batch);
                    return self.wake(run_id, prompt, origin);
                }
                if wait.turn_cut {
                    // As a restart does with a turn in flight: the user resumes it.
                    run.turn_cut = true;
                    run.note(
                        &mut batch,
                        format!(
                            "the connection dropped during this run's turn: `drover resume \
                             {run_id}` (R) goes on with it in its provider session on \
                             {host}, `drover stop {run_id}` ends it"
                        ),
                        now,
                    );
                    self.commit(batch);
                    return self.finalize(
                        run_id,
                        RunState::Interrupted,
                        HOST_DROPPED_REASON,
                        Cause::RunnerGone,
                    );
                }
                // Between turns: idle in its session, as a restart puts it back.
                if run.state() != RunState::Idle {
                    run.set_state(&mut batch, RunState::Idle, Some("reconnected"), now);
                }
                run.idle_since.get_or_insert(now);
                let bound = Self::idle_bound(run, now);
                run.working(&mut batch, bound, HIBERNATED_DETAIL, now);
                run.touch(&mut batch);
                let next = run.take_follow_up(&mut batch, now);
                self.commit(batch);
                if let Some(text) = next {
                    self.wake(run_id, text, super::run::TurnOrigin::FollowUp);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_a_second_up_to_a_minute() {
        let waits: Vec<i64> = (0..8).map(host_wait).collect();
        assert_eq!(
            waits,
            [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]
        );
        assert_eq!(host_wait(u32::MAX), HOST_WAIT_MAX_MS);
    }
}
