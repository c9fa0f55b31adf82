//! `wait`: a client blocks until runs are idle, terminal, or have a new event — any or
//! all of them — or its (capped) timeout passes.
//!
//! What must stay true: a wait names at least one run or a workflow, and every run it
//! names exists (runs not in memory are read from the ledger first: they are a previous
//! owner's, finished, and meet every condition); a workflow's runs are looked up here, in
//! memory and in the ledger, however many (only ids the client lists are bounded, by
//! `control::bounds`), and a workflow with no run is `WORKFLOW_NOT_FOUND`; the answer
//! carries each run's summary as it is when the wait ends.

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
    /// Also every run of this workflow as it stands now.
    pub workflow: Option<String>,
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
    pub(super) fn register_wait(&mut self, to: ReplyTo, wait: WaitAsk) {
        if wait.run_ids.is_empty() && wait.workflow.is_none() {
            let e = DroverError::new(
                ErrorCode::InvalidSpec,
                "name at least one run (or a workflow) to wait for",
            );
            return self.reply_now(to, Err(e));
        }
        let elsewhere: Vec<String> = wait
            .run_ids
            .iter()
            .filter(|id| !self.runs.contains_key(*id))
            .cloned()
            .collect();
        match wait.workflow.clone() {
            Some(workflow) => self.load(
                Fetch::WaitRows {
                    run_ids: elsewhere,
                    workflow,
                },
                Then::Wait { to, wait },
            ),
            None if elsewhere.is_empty() => self.add_waiter(to, wait, HashMap::new()),
            None => self.load(
                Fetch::Summaries { run_ids: elsewhere },
                Then::Wait { to, wait },
            ),
        }
    }

    /// The ledger's rows of the runs a wait names that were not in memory (and of its
    /// workflow's runs).
    pub(super) fn wait_loaded(
        &mut self,
        to: ReplyTo,
        mut wait: WaitAsk,
        answer: Result<Fetched, DroverError>,
    ) {
        let rows = match answer {
            Ok(Fetched::Summaries(rows)) => rows,
            Ok(Fetched::WaitRows { named, workflow }) => {
                let Some(name) = wait.workflow.as_deref() else {
                    let other = Fetched::WaitRows { named, workflow };
                    return self.reply_now(to, Err(super::unexpected(&other)));
                };
                // The workflow's runs: the ledger's (oldest first), then those only in
                // memory (a dispatch whose commit is still on its way).
                let mut members: Vec<String> = workflow
                    .iter()
                    .rev()
                    .map(|r| r.head.run_id.clone())
                    .collect();
                let mut in_memory: Vec<&String> = self
                    .runs
                    .iter()
                    .filter(|(_, run)| run.spec.workflow_id.as_deref() == Some(name))
                    .map(|(id, _)| id)
                    .collect();
                in_memory.sort();
                members.extend(in_memory.into_iter().cloned());
                if members.is_empty() {
                    return self.reply_now(to, Err(super::workflow_not_found(name)));
                }
                let mut seen: std::collections::HashSet<String> =
                    wait.run_ids.iter().cloned().collect();
                for id in members {
                    if seen.insert(id.clone()) {
                        wait.run_ids.push(id);
                    }
                }
                named.into_iter().chain(workflow).collect()
            }
            Ok(other) => return self.reply_now(to, Err(super::unexpected(&other))),
            Err(e) => return self.reply_now(to, Err(e)),
        };
        let rows = rows
            .into_iter()
            .filter(|r| !self.runs.contains_key(&r.head.run_id))
            .map(|r| (r.head.run_id.clone(), r))
            .collect();
        self.add_waiter(to, wait, rows);
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
                until => until.met_when(run.state(), run.broker.pending().len(), || {
                    run.summary().needs_you().is_some()
                }),
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
