//! `wait`: a client blocks until runs are idle, terminal, or have a new event — any or
//! all of them — or its (capped) timeout passes.

use serde_json::Value;

use super::Reply;
use super::actor::Actor;
use super::api::{RunSummary, WaitOutcome, WaitUntil};
use super::requests::{WAIT_CAP_SECS, not_found};
use crate::UnixMillis;
use crate::run_state::RunState;

pub struct Waiter {
    pub run_ids: Vec<String>,
    pub until: WaitUntil,
    pub any: bool,
    pub deadline: UnixMillis,
    /// Each run's next event seq when the wait began (for `until = event`).
    pub baseline: Vec<u64>,
    pub reply: Reply,
}

impl Actor {
    pub fn register_wait(
        &mut self,
        run_ids: Vec<String>,
        until: WaitUntil,
        any: bool,
        timeout_secs: Option<u64>,
        reply: Reply,
    ) {
        if run_ids.is_empty() {
            let _ = reply.send(Err(crate::DroverError::new(
                crate::ErrorCode::InvalidSpec,
                "name at least one run to wait for",
            )));
            return;
        }
        let mut baseline = Vec::new();
        for id in &run_ids {
            match self.runs.get(id) {
                Some(run) => baseline.push(run.next_seq),
                None => match self.reader.run(id) {
                    Ok(Some(_)) => baseline.push(0),
                    _ => {
                        let _ = reply.send(Err(not_found(id)));
                        return;
                    }
                },
            }
        }
        let timeout = timeout_secs.unwrap_or(WAIT_CAP_SECS).min(WAIT_CAP_SECS);
        self.waiters.push(Waiter {
            run_ids,
            until,
            any,
            deadline: self.now() + timeout as i64 * 1000,
            baseline,
            reply,
        });
        self.check_waiters();
    }

    /// Answers every waiter whose condition is met or whose time is up.
    pub fn check_waiters(&mut self) {
        let now = self.now();
        let waiters = std::mem::take(&mut self.waiters);
        for w in waiters {
            let met = self.wait_met(&w);
            if met || now >= w.deadline {
                let value = self.wait_outcome(&w, !met);
                self.reply_after_commit(w.reply, Ok(value));
            } else {
                self.waiters.push(w);
            }
        }
    }

    fn wait_met(&self, w: &Waiter) -> bool {
        let mut results = w.run_ids.iter().zip(&w.baseline).map(|(id, base)| {
            let Some(run) = self.runs.get(id) else {
                // Not in memory: a finished run from the ledger.
                return true;
            };
            match w.until {
                WaitUntil::Terminal => run.state.is_terminal(),
                WaitUntil::Idle => {
                    run.state.is_terminal()
                        || (run.ending.is_none()
                            && matches!(
                                run.state,
                                RunState::Idle
                                    | RunState::AwaitingPermission
                                    | RunState::AwaitingRoute
                            ))
                }
                WaitUntil::Event => run.next_seq > *base || run.state.is_terminal(),
            }
        });
        if w.any {
            results.any(|m| m)
        } else {
            results.all(|m| m)
        }
    }

    pub fn wait_outcome(&self, w: &Waiter, timed_out: bool) -> Value {
        let runs: Vec<RunSummary> = w
            .run_ids
            .iter()
            .filter_map(|id| match self.runs.get(id) {
                Some(run) => Some(run.summary()),
                None => self.reader.run(id).ok().flatten().and_then(|r| {
                    crate::control::offline::summary_from_record(&self.reader, &r).ok()
                }),
            })
            .collect();
        serde_json::to_value(WaitOutcome { timed_out, runs }).unwrap_or(Value::Null)
    }
}
