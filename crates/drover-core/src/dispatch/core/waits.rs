//! `wait`: a client blocks until runs are idle, terminal, or have a new event — any or
//! all of them — or its (capped) timeout passes.
//!
//! What must stay true: a wait names at least one run, and every run it names exists (runs
//! not in memory are read from the ledger first: they are a previous owner's, finished, and
//! meet every condition); the answer carries each run's summary as it is when the wait
//! ends.

use std::collections::HashMap;

use super::requests::WAIT_CAP_SECS;
use super::{Core, Fetch, Fetched, ReplyTo, Then};
use crate::dispatch::api::{Response, RunSummary, WaitOutcome, WaitUntil};
use crate::{DroverError, ErrorCode, UnixMillis};

/// A wait as the client asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitAsk {
    /// The runs to wait for.
    pub run_ids: Vec<String>,
    /// The condition.
    pub until: WaitUntil,
    /// Done when any run meets it (else all must).
    pub any: bool,
    /// The timeout asked for, in seconds; capped at an hour, the default.
    pub timeout_secs: Option<u64>,
}

pub(super) struct Waiter {
    pub run_ids: Vec<String>,
    pub until: WaitUntil,
    pub any: bool,
    pub deadline: UnixMillis,
    /// Each run's next event seq when the wait began (for `until = event`).
    pub baseline: Vec<u64>,
    /// The rows of runs that are not in memory, as the ledger had them.
    pub ledger_rows: HashMap<String, RunSummary>,
    pub to: ReplyTo,
}

impl Core {
    pub(super) fn register_wait(
        &mut self,
        to: ReplyTo,
        run_ids: Vec<String>,
        until: WaitUntil,
        any: bool,
        timeout_secs: Option<u64>,
    ) {
        if run_ids.is_empty() {
            let e = DroverError::new(ErrorCode::InvalidSpec, "name at least one run to wait for");
            return self.reply_now(to, Err(e));
        }
        let wait = WaitAsk {
            run_ids,
            until,
            any,
            timeout_secs,
        };
        let elsewhere: Vec<String> = wait
            .run_ids
            .iter()
            .filter(|id| !self.runs.contains_key(*id))
            .cloned()
            .collect();
        if elsewhere.is_empty() {
            return self.add_waiter(to, wait, HashMap::new());
        }
        self.load(
            Fetch::Summaries { run_ids: elsewhere },
            Then::Wait { to, wait },
        );
    }

    /// The ledger's rows of the runs a wait names that were not in memory.
    pub(super) fn wait_loaded(
        &mut self,
        to: ReplyTo,
        wait: WaitAsk,
        answer: Result<Fetched, DroverError>,
    ) {
        match answer {
            Ok(Fetched::Summaries(rows)) => {
                let rows = rows
                    .into_iter()
                    .map(|r| (r.head.run_id.clone(), r))
                    .collect();
                self.add_waiter(to, wait, rows);
            }
            Ok(other) => self.reply_now(to, Err(super::unexpected(&other))),
            Err(e) => self.reply_now(to, Err(e)),
        }
    }

    fn add_waiter(&mut self, to: ReplyTo, wait: WaitAsk, ledger_rows: HashMap<String, RunSummary>) {
        let baseline = wait
            .run_ids
            .iter()
            .map(|id| self.runs.get(id).map_or(0, |r| r.next_seq))
            .collect();
        let timeout = wait
            .timeout_secs
            .unwrap_or(WAIT_CAP_SECS)
            .min(WAIT_CAP_SECS);
        self.waiters.push(Waiter {
            run_ids: wait.run_ids,
            until: wait.until,
            any: wait.any,
            deadline: self.now.saturating_add(super::answers::secs_ms(timeout)),
            baseline,
            ledger_rows,
            to,
        });
        self.check_waiters();
    }

    /// Answers every waiter whose condition is met or whose time is up.
    pub(super) fn check_waiters(&mut self) {
        let now = self.now;
        for w in std::mem::take(&mut self.waiters) {
            let met = self.wait_met(&w);
            if met || now >= w.deadline {
                let outcome = self.wait_outcome(&w, !met);
                self.reply(w.to, Ok(Response::Wait(outcome)));
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
            if run.ending.is_some() {
                // Stopping: only its end will do.
                return run.state().is_terminal();
            }
            match w.until {
                WaitUntil::Event => run.next_seq > *base || run.state().is_terminal(),
                until => until.met_by(&run.summary()),
            }
        });
        if w.any {
            results.any(|m| m)
        } else {
            results.all(|m| m)
        }
    }

    pub(super) fn wait_outcome(&self, w: &Waiter, timed_out: bool) -> WaitOutcome {
        let runs = w
            .run_ids
            .iter()
            .filter_map(|id| match self.runs.get(id) {
                Some(run) => Some(run.summary()),
                None => w.ledger_rows.get(id).cloned(),
            })
            .collect();
        WaitOutcome { timed_out, runs }
    }
}
