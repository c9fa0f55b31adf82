//! Where a run is in the dispatcher (docs/ARCHITECTURE.md §"Vocabulary"): the run state,
//! the one table of the moves between states ([`RunState::allowed`]), and where a run a
//! stopped or crashed drover left is put back ([`RunState::after_restart`]).
//!
//! Run state is distinct from the live state (`crate::live_state`): the run state says
//! which tray a run belongs to; the live state says what it is doing right now. What must
//! stay true: a run's state changes only through the dispatcher's one setter, which checks
//! every move against [`RunState::allowed`] and refuses (and logs) any other; a finished
//! run (completed, failed, stopped) never changes again. `interrupted` is not finished: a
//! restart cut its turn short, and it waits for the user
//! (docs/ARCHITECTURE.md §"A restart").

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a run is in the dispatcher: which tray it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepted, waiting for a slot on its rails (or for its directory, or for room).
    Queued,
    /// Held behind a route card until the user picks a provider and model.
    AwaitingRoute,
    /// Its workspace is being made or its child launched and handshaking.
    Starting,
    /// A turn is in flight.
    Running,
    /// Between turns: a follow-up starts the next one (its child may be hibernated).
    Idle,
    /// A turn waits for the user's answer to a permission request or question.
    AwaitingPermission,
    /// Ended as complete (by the user, the agent's result, or max turns).
    Completed,
    /// Ended by a failure (the provider, the launch, a timeout, money).
    Failed,
    /// Ended by the user, a cap, or a declined route.
    Stopped,
    /// Its turn was cut short by a restart of drover (a crash or a stop): it waits for
    /// the user, who resumes it in its provider session (or stops it). Not finished.
    Interrupted,
}

impl RunState {
    /// Every state, active ones first (`interrupted` last: it is active, but holds nothing
    /// and waits for the user).
    pub const ALL: [RunState; 10] = [
        RunState::Queued,
        RunState::AwaitingRoute,
        RunState::Starting,
        RunState::Running,
        RunState::Idle,
        RunState::AwaitingPermission,
        RunState::Completed,
        RunState::Failed,
        RunState::Stopped,
        RunState::Interrupted,
    ];

    /// The state's word in the ledger and on the wire (`awaiting_permission`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::AwaitingRoute => "awaiting_route",
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Idle => "idle",
            RunState::AwaitingPermission => "awaiting_permission",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Stopped => "stopped",
            RunState::Interrupted => "interrupted",
        }
    }

    /// The state a word names, if any.
    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Finished runs (completed, failed, stopped) never change state again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Stopped
        )
    }

    /// Not finished: the run is in the dispatcher's memory and may change (an
    /// `interrupted` run included: it waits for the user).
    pub fn is_active(self) -> bool {
        !self.is_terminal()
    }

    /// Whether a run may move from `from` to `to`: the run lifecycle in one table (the
    /// dispatcher refuses and logs any other move).
    ///
    /// | from | to |
    /// | --- | --- |
    /// | queued | awaiting_route, starting, interrupted (a restart, for a run that had sent a turn), failed, stopped |
    /// | awaiting_route | queued, interrupted, failed, stopped |
    /// | starting | queued (its directory is taken, or a restart before its first turn), running, idle, interrupted, any end |
    /// | running | starting (its CLI exited and is started again to send the turn again), idle, awaiting_permission, interrupted, any end |
    /// | awaiting_permission | running, idle (answered with no CLI: woken to hear it), interrupted, any end |
    /// | idle | starting (waking a hibernated run), running, interrupted, any end |
    /// | interrupted | idle (resumed: back in its provider session), completed, stopped |
    /// | completed, failed, stopped | — |
    ///
    /// "Any end" is completed, failed or stopped. A state never moves to itself.
    pub fn allowed(from: RunState, to: RunState) -> bool {
        use RunState::*;
        match (from, to) {
            (Completed | Failed | Stopped, _) => false,
            (from, to) if from == to => false,
            (Interrupted, Idle | Completed | Stopped) => true,
            (Interrupted, _) => false,
            (Queued | AwaitingRoute, Completed) => false,
            (_, Completed | Failed | Stopped | Interrupted) => true,
            (Queued, AwaitingRoute | Starting) => true,
            (AwaitingRoute, Queued) => true,
            (Starting, Queued | Running | Idle) => true,
            (Running, Starting | Idle | AwaitingPermission) => true,
            (AwaitingPermission, Running | Idle) => true,
            (Idle, Starting | Running) => true,
            _ => false,
        }
    }

    /// Where a run found in this state by a new owner (after a crash or a stop) is put
    /// back: in place, without a new turn, unless a turn was in flight
    /// (docs/ARCHITECTURE.md §"A restart"). `sent_a_turn`: the run had sent a turn;
    /// `has_session`: its provider reported a session to go on in.
    ///
    /// | found | put back as |
    /// | --- | --- |
    /// | running | interrupted |
    /// | starting, queued | queued before its first turn; interrupted after (a resumed or woken run's turn was on its way) |
    /// | awaiting_permission | awaiting_permission (the request shown again), interrupted with no session |
    /// | idle | idle (hibernated), interrupted with no session |
    /// | awaiting_route, interrupted, completed, failed, stopped | the same |
    pub fn after_restart(self, sent_a_turn: bool, has_session: bool) -> RunState {
        use RunState::*;
        match self {
            Running => Interrupted,
            Starting | Queued if sent_a_turn => Interrupted,
            Starting => Queued,
            AwaitingPermission | Idle if !has_session => Interrupted,
            same => same,
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_its_name() {
        for s in RunState::ALL {
            assert_eq!(RunState::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        assert_eq!(RunState::parse("nope"), None);
    }

    /// The lifecycle table, written out: every move [`RunState::allowed`] takes, and
    /// (by leaving it out) every move it refuses.
    #[test]
    fn the_lifecycle_table_allows_exactly_these_moves() {
        use RunState::*;
        let any_end = [Completed, Failed, Stopped];
        let mut allowed: Vec<(RunState, RunState)> = Vec::new();
        let mut add = |from: RunState, tos: &[RunState]| {
            allowed.extend(tos.iter().map(|&to| (from, to)));
        };
        add(
            Queued,
            &[AwaitingRoute, Starting, Interrupted, Failed, Stopped],
        );
        add(AwaitingRoute, &[Queued, Interrupted, Failed, Stopped]);
        add(Starting, &[Queued, Running, Idle, Interrupted]);
        add(Starting, &any_end);
        add(Running, &[Starting, Idle, AwaitingPermission, Interrupted]);
        add(Running, &any_end);
        add(AwaitingPermission, &[Running, Idle, Interrupted]);
        add(AwaitingPermission, &any_end);
        add(Idle, &[Starting, Running, Interrupted]);
        add(Idle, &any_end);
        add(Interrupted, &[Idle, Completed, Stopped]);
        let mut checked = 0;
        for from in RunState::ALL {
            for to in RunState::ALL {
                let expected = allowed.contains(&(from, to));
                assert_eq!(
                    RunState::allowed(from, to),
                    expected,
                    "{from} -> {to} should be {}",
                    if expected { "allowed" } else { "refused" }
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 100);
        assert_eq!(allowed.len(), 38);
    }

    #[test]
    fn a_finished_run_never_moves() {
        for from in RunState::ALL.into_iter().filter(|s| s.is_terminal()) {
            let onward: Vec<_> = RunState::ALL
                .into_iter()
                .filter(|&to| RunState::allowed(from, to))
                .collect();
            assert_eq!(onward, [], "{from}");
        }
    }

    #[test]
    fn exactly_three_states_are_finished_and_interrupted_is_not_one() {
        let terminal: Vec<_> = RunState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [RunState::Completed, RunState::Failed, RunState::Stopped]
        );
        assert!(RunState::Interrupted.is_active());
    }

    /// Where a restart puts each run back, written out (the table of
    /// [`RunState::after_restart`]); every move it makes is one the lifecycle allows.
    #[test]
    fn a_restart_puts_a_run_back_in_place_unless_its_turn_was_in_flight() {
        use RunState::*;
        // (found, sent a turn, has a session, put back as)
        let cases = [
            (Running, true, true, Interrupted),
            (Running, true, false, Interrupted),
            (Starting, false, false, Queued),
            (Starting, true, true, Interrupted),
            (Queued, false, false, Queued),
            (Queued, true, true, Interrupted),
            (AwaitingRoute, false, false, AwaitingRoute),
            (AwaitingPermission, true, true, AwaitingPermission),
            (AwaitingPermission, true, false, Interrupted),
            (Idle, true, true, Idle),
            (Idle, true, false, Interrupted),
            (Interrupted, true, true, Interrupted),
            (Completed, true, true, Completed),
            (Failed, false, false, Failed),
            (Stopped, true, false, Stopped),
        ];
        for (found, sent, session, expected) in cases {
            let back = found.after_restart(sent, session);
            assert_eq!(back, expected, "{found} sent={sent} session={session}");
            assert!(
                back == found || RunState::allowed(found, back),
                "{found} -> {back} is not a move the lifecycle allows"
            );
        }
        // With its session, only a run that had sent a turn is interrupted (a running run
        // always has).
        for found in RunState::ALL {
            if found.after_restart(false, true) == Interrupted {
                assert!(matches!(found, Running | Interrupted), "{found}");
            }
        }
    }
}
