//! Exit codes a script can trust, the same for every command that waits (`wait`,
//! `dispatch --wait`, a foreground `dispatch`), and for every refusal:
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | the run is idle, or ended with result `done` |
//! | 1 | refused: an error code was printed |
//! | 2 | usage: the command line is wrong |
//! | 3 | the wait timed out |
//! | 4 | the run failed, was stopped or interrupted, or its result is `blocked` (or missing) |
//! | 5 | the run needs you: a permission, a question, a route card, a result asking for input |
//!
//! What must stay true: with several runs the worst wins (4 over 5 over 0); these numbers
//! are public (README, `--help`) and never change meaning.

use drover_core::DroverError;
use drover_core::dispatch::api::{Need, RunSummary};
use drover_core::error::ErrorCode;
use drover_core::run_state::RunState;

/// The exit-code table, for `--help` texts.
pub const TABLE: &str = "Exit codes: 0 idle or ended done · 1 refused · 2 usage · 3 the wait timed out · \
     4 failed, stopped or blocked · 5 needs you.";

/// How a command that ran (or waited for) runs ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// Idle, or ended with result `done`.
    Done,
    /// Needs the user.
    NeedsYou,
    /// Failed, stopped, interrupted, blocked, or ended without a usable result.
    Failed,
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::NeedsYou => 5,
            Exit::Failed => 4,
        }
    }

    /// Where one run stands for a script.
    pub fn of_run(run: &RunSummary) -> Exit {
        let result = run.result_status.as_deref();
        match run.head.state {
            RunState::Failed | RunState::Stopped | RunState::Interrupted => Exit::Failed,
            _ if result == Some("blocked") => Exit::Failed,
            RunState::Completed if result != Some("done") => Exit::Failed,
            RunState::Completed => Exit::Done,
            _ => match run.needs_you() {
                Some(Need::Escalation) | None => Exit::Done,
                Some(_) => Exit::NeedsYou,
            },
        }
    }

    /// The worst of several runs (none: done).
    pub fn of_runs<'a>(runs: impl IntoIterator<Item = &'a RunSummary>) -> Exit {
        runs.into_iter()
            .map(Exit::of_run)
            .max()
            .unwrap_or(Exit::Done)
    }
}

/// The process exit code for a refusal: 3 when a wait timed out, 130 when a signal
/// stopped the command, 1 otherwise (clap exits 2 on usage errors by itself).
pub fn of_error(e: &DroverError) -> u8 {
    match e.code {
        ErrorCode::WaitTimeout => 3,
        ErrorCode::Interrupted => 130,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::dispatch::api::RunHead;

    fn run(state: RunState, result: Option<&str>, pending: usize, needs_input: bool) -> RunSummary {
        RunSummary {
            head: RunHead {
                run_id: "r1".into(),
                state,
                completion_reason: None,
                provider: "sim".into(),
                model: None,
                title: "t".into(),
                live_state: None,
                cost_usd: 0.0,
                budget_usd: 1.0,
                stalled: false,
                created_at: 0,
                finished_at: None,
                owner_gone: false,
                rev: 0,
                host: None,
            },
            pending,
            needs_input,
            escalation_offered: false,
            script_approval: false,
            conflict_offered: false,
            workspace: None,
            result_status: result.map(str::to_string),
            parent_run: None,
            depth: 0,
            workflow_id: None,
            sandbox: false,
        }
    }

    #[test]
    fn each_state_has_its_exit_code() {
        let cases = [
            (
                "idle after done",
                run(RunState::Idle, Some("done"), 0, false),
                0,
            ),
            (
                "idle without a result yet",
                run(RunState::Idle, None, 0, false),
                0,
            ),
            (
                "completed done",
                run(RunState::Completed, Some("done"), 0, false),
                0,
            ),
            (
                "completed without a result",
                run(RunState::Completed, None, 0, false),
                4,
            ),
            (
                "completed blocked",
                run(RunState::Completed, Some("blocked"), 0, false),
                4,
            ),
            (
                "idle blocked",
                run(RunState::Idle, Some("blocked"), 0, false),
                4,
            ),
            ("failed", run(RunState::Failed, None, 0, false), 4),
            ("stopped", run(RunState::Stopped, Some("done"), 0, false), 4),
            ("interrupted", run(RunState::Interrupted, None, 0, false), 4),
            (
                "a pending permission",
                run(RunState::AwaitingPermission, None, 1, false),
                5,
            ),
            (
                "a route card",
                run(RunState::AwaitingRoute, None, 0, false),
                5,
            ),
            (
                "a question in the result",
                run(RunState::Idle, Some("needs_input"), 0, true),
                5,
            ),
            ("still running", run(RunState::Running, None, 0, false), 0),
        ];
        for (what, summary, code) in cases {
            assert_eq!(Exit::of_run(&summary).code(), code, "{what}");
        }
    }

    #[test]
    fn the_worst_of_several_runs_wins() {
        let done = run(RunState::Idle, Some("done"), 0, false);
        let asks = run(RunState::AwaitingPermission, None, 1, false);
        let failed = run(RunState::Failed, None, 0, false);
        assert_eq!(Exit::of_runs([&done, &asks]), Exit::NeedsYou);
        assert_eq!(Exit::of_runs([&asks, &failed, &done]), Exit::Failed);
        assert_eq!(Exit::of_runs([]), Exit::Done);
    }

    #[test]
    fn refusals_exit_by_their_code() {
        assert_eq!(of_error(&DroverError::new(ErrorCode::WaitTimeout, "x")), 3);
        assert_eq!(of_error(&DroverError::new(ErrorCode::RunNotFound, "x")), 1);
    }
}
