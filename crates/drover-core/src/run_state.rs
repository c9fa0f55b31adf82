//! Where a run is in the dispatcher (DESIGN.md §1): the run state and its end reasons.
//!
//! Run state is distinct from the live state (`crate::live_state`): the run state says
//! which tray a run belongs to; the live state says what it is doing right now.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Queued,
    AwaitingRoute,
    Starting,
    Running,
    Idle,
    AwaitingPermission,
    Completed,
    Failed,
    Stopped,
    Interrupted,
}

impl RunState {
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

    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Finished runs never change state again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Stopped | RunState::Interrupted
        )
    }

    pub fn is_active(self) -> bool {
        !self.is_terminal()
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

    #[test]
    fn exactly_four_states_are_terminal() {
        let terminal: Vec<_> = RunState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                RunState::Completed,
                RunState::Failed,
                RunState::Stopped,
                RunState::Interrupted
            ]
        );
    }
}
