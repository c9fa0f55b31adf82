//! Every number drover enforces (docs/ARCHITECTURE.md §"Run lifecycle",
//! §"Rails and the queue", §"Money", §"Routing and route cards", §"Permission prompts"), as
//! read from `[limits]`.
//!
//! The defaults live in `assets/default-config.toml`; this struct has no defaults of its
//! own, so the embedded file is the one source of truth.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[limits]`: the ranges a spec's numbers are clamped into, the rails, the money caps
/// and the timeouts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// The longest task accepted, in characters; a longer one is refused.
    pub task_max_chars: usize,
    /// A run's time limit in minutes when the dispatch sets none.
    pub max_minutes_default: u32,
    /// The smallest time limit a dispatch may set, in minutes (a smaller one is clamped
    /// up).
    pub max_minutes_min: u32,
    /// The largest time limit a dispatch may set, in minutes (a larger one is clamped
    /// down).
    pub max_minutes_max: u32,
    /// A run's budget cap in US dollars when the dispatch sets none.
    pub budget_usd_default: f64,
    /// The smallest budget cap a dispatch may set, in US dollars.
    pub budget_usd_min: f64,
    /// The largest budget cap a dispatch may set, in US dollars.
    pub budget_usd_max: f64,
    /// How long an idle run waits for a follow-up before it ends, in seconds, when the
    /// dispatch sets none.
    pub idle_timeout_secs_default: u64,
    /// The shortest idle timeout a dispatch may set, in seconds.
    pub idle_timeout_secs_min: u64,
    /// The longest idle timeout a dispatch may set, in seconds.
    pub idle_timeout_secs_max: u64,
    /// A run's user turns (its task and follow-ups) when the dispatch sets none.
    pub max_turns_default: u32,
    /// The fewest user turns a dispatch may set.
    pub max_turns_min: u32,
    /// The most user turns a dispatch may set.
    pub max_turns_max: u32,
    /// How long a dispatch's idempotency key names the run it created, in seconds: the
    /// same key within this window gets that run back.
    pub idempotency_window_secs: u64,
    /// A run with no provider event for this long is flagged as stalled (not killed), in
    /// seconds.
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
    /// The most one-line summaries a live run's transcript ring holds.
    pub transcript_max_lines: usize,
    /// The most characters a live run's transcript ring holds.
    pub transcript_max_chars: usize,
    /// Concurrent runs per provider account (a provider's configured account directory).
    pub per_account: u32,
    /// Concurrent runs per budget session.
    pub per_session_running: u32,
    /// Runs that may wait in the queue per budget session; a dispatch beyond it is
    /// refused (`QUEUE_FULL`).
    pub queued_per_session: u32,
    /// Runs that may wait on route cards per budget session; a routed dispatch beyond it
    /// is refused (`HELD_FULL`).
    pub held_per_session: u32,
    /// Concurrent runs per workflow.
    pub per_workflow: u32,
    /// Every run with the `auto` policy runs in a sandbox (docs/ARCHITECTURE.md
    /// §"The sandbox"), as if dispatched with `--sandbox`.
    pub sandbox_auto: bool,
    /// A sandboxed run's CLI reaches the network (it must reach its model API); `false`
    /// gives it a network namespace with only loopback.
    pub sandbox_network: bool,
    /// How deep sub-runs (runs dispatched from inside a run) may nest: a top-level run
    /// is at depth 0.
    pub max_depth: u32,
    /// A budget session's default warning, in US dollars spent.
    pub session_warning_usd: f64,
    /// A budget session's default hard cap, in US dollars: when the session's spend
    /// reaches it, its runs are stopped and it takes no new dispatches.
    pub session_hard_cap_usd: f64,
    /// An unanswered permission prompt is denied after this long, in seconds.
    pub permission_timeout_secs: u64,
    /// An unanswered question is denied after this long, in seconds.
    pub question_timeout_secs: u64,
    /// How long before a run's time box drover asks it to wrap up, in seconds (at most
    /// half the time box; 0: never wraps up, the limits cut as they are reached).
    pub wrap_up_secs: u64,
    /// How long the wrap-up turn may take before the hard stop, in seconds.
    pub wrap_up_bound_secs: u64,
    /// The part of a run's dollar cap kept for its wrap-up turn: a turn that ends with no
    /// result block while its spend is within this of the cap is followed by the wrap-up.
    pub wrap_up_usd: f64,
    /// Concurrent runs per provider name (`claude-code`, `codex`, `opencode`, `sim`).
    pub per_provider: BTreeMap<String, u32>,
}
