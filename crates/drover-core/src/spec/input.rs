//! What a client sends to dispatch a run: the CLI, the dashboard's form and the control
//! socket all build a `SpecInput`.
//!
//! Owns the wire shape only. What must stay true: every field is optional (a missing
//! field takes its default in `validate`), a field it does not know is refused (with the
//! list of those it does), not ignored, words stay raw strings so a bad word is
//! refused with a sentence rather than a parse error, and numbers are signed/floating so
//! out-of-range values reach the clamps instead of failing to deserialize.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// An unvalidated dispatch request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SpecInput {
    /// Provider name; absent or blank means the configured default provider.
    pub provider: Option<String>,
    /// Model name; absent, blank or `auto` means the provider default / routed.
    pub model: Option<String>,
    /// `minimal`, `low`, `medium`, `high` or `xhigh`.
    pub effort: Option<String>,
    /// Working directory; relative paths are resolved against the caller's directory.
    pub cwd: Option<PathBuf>,
    /// What the run is to do (required).
    pub task: String,
    /// Background the agent gets along with the task.
    pub context: Option<String>,
    /// A short name for the run (shown in the dashboard).
    pub title: Option<String>,
    /// Labels for the run (at most 20, each at most 64 characters); a tag naming a task
    /// class also classifies the run.
    pub tags: Vec<String>,
    /// `read-only`, `workspace` or `full`.
    pub capability: Option<String>,
    /// `ask`, `restricted` or `auto`.
    pub policy: Option<String>,
    /// Time limit in minutes; clamped into the configured range, absent means the
    /// configured default.
    pub max_minutes: Option<i64>,
    /// Budget cap in US dollars; clamped into the configured range and rounded to whole
    /// cents, absent means the configured default.
    pub budget_usd: Option<f64>,
    /// How long an idle run waits for a follow-up, in seconds; clamped into the
    /// configured range, absent means the configured default.
    pub idle_timeout_secs: Option<i64>,
    /// How many user turns (the task and its follow-ups) the run may take; clamped into
    /// the configured range, absent means the configured default.
    pub max_turns: Option<i64>,
    /// A JSON Schema (an object) the final answer must satisfy.
    pub output_schema: Option<Value>,
    /// Groups runs under one workflow, which has its own concurrency limit; a sub-run
    /// takes its parent's.
    pub workflow_id: Option<String>,
    /// The id of the run this one is dispatched from, making it a sub-run of it.
    pub parent_run: Option<String>,
    /// A dispatch with the same key within the idempotency window gets the run it created
    /// back instead of a new one.
    pub idempotency_key: Option<String>,
    /// Queue the run when a concurrency limit is reached (the default), or refuse it
    /// (`false`).
    pub queue_if_busy: Option<bool>,
    /// Scenario name for the simulated provider.
    pub scenario: Option<String>,
    /// Task class, used to remember route choices.
    pub class: Option<String>,
    /// `worktree` or `shared`; absent: the configured default (`[workspaces] default`).
    pub workspace: Option<String>,
    /// A worktree run brings the checkout's uncommitted changes along.
    pub carry_changes: Option<bool>,
    /// Run the provider CLI in a sandbox (bubblewrap): only the run's directory and the
    /// CLI's own state writable, secrets and other worktrees hidden. Refused with
    /// `SANDBOX_UNAVAILABLE` where bubblewrap cannot run, never run without it.
    pub sandbox: Option<bool>,
    /// Run the provider CLI on this `[hosts.<name>]` (docs/ARCHITECTURE.md §"Hosts");
    /// `cwd` is then an absolute directory there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_optional_on_the_wire() {
        let input: SpecInput = serde_json::from_str("{}").unwrap();
        assert_eq!(input, SpecInput::default());
        let input: SpecInput =
            serde_json::from_str(r#"{"task":"fix it","max_minutes":-3,"tags":["a"]}"#).unwrap();
        assert_eq!(input.task, "fix it");
        assert_eq!(input.max_minutes, Some(-3));
        assert_eq!(input.tags, vec!["a".to_string()]);
    }
}
