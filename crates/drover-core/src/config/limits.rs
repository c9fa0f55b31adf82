//! Every number drover enforces (docs/ARCHITECTURE.md §"Run lifecycle", §"Rails and the queue", §"Money", §"Routing and route cards", §"Permission prompts"), as read from `[limits]`.
//!
//! The defaults live in `assets/default-config.toml`; this struct has no defaults of its
//! own, so the embedded file is the one source of truth.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub task_max_chars: usize,
    pub max_minutes_default: u32,
    pub max_minutes_min: u32,
    pub max_minutes_max: u32,
    pub budget_usd_default: f64,
    pub budget_usd_min: f64,
    pub budget_usd_max: f64,
    pub idle_timeout_secs_default: u64,
    pub idle_timeout_secs_min: u64,
    pub idle_timeout_secs_max: u64,
    pub max_turns_default: u32,
    pub max_turns_min: u32,
    pub max_turns_max: u32,
    pub idempotency_window_secs: u64,
    pub stalled_after_secs: u64,
    /// An idle run with no follow-up for this long is hibernated (0: never by time).
    pub hibernate_after_secs: u64,
    /// How many times a turn the model API failed is sent again before the run fails.
    pub resend_turns_max: u32,
    /// The longest wait before a turn is sent again (the waits double from a minute).
    pub resend_wait_max_secs: u64,
    /// A finished run's events are pruned this many days after it finished (0: kept
    /// forever); its row, turns, usage and decisions always stay.
    pub retention_events_days: u32,
    /// At most this many runs are kept; the oldest finished ones beyond it are deleted
    /// whole (0: no cap).
    pub retention_max_runs: u64,
    pub transcript_max_lines: usize,
    pub transcript_max_chars: usize,
    pub per_account: u32,
    pub per_session_running: u32,
    pub queued_per_session: u32,
    pub held_per_session: u32,
    pub per_workflow: u32,
    /// How deep sub-runs (runs dispatched from inside a run) may nest: a top-level run
    /// is at depth 0.
    pub max_depth: u32,
    pub session_warning_usd: f64,
    pub session_hard_cap_usd: f64,
    pub permission_timeout_secs: u64,
    pub question_timeout_secs: u64,
    /// Concurrent runs per provider name (`claude-code`, `codex`, `opencode`, `sim`).
    pub per_provider: BTreeMap<String, u32>,
}
