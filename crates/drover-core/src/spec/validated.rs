//! The validated spec and its closed vocabularies (capability, permission policy, effort).
//!
//! Owns the shape the dispatcher acts on. What must stay true: a `Spec` only comes out of
//! `validate` (or the ledger, which stored one), so every number in it is inside the
//! limits it was validated against, and every adjustment is listed in `clamps`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::path::PathBuf;

/// A dispatch that passed validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The provider's configured name (`claude-code`, `codex`, `opencode`, `sim`).
    pub provider: String,
    /// The catalog id of the model; `None` means the provider's default or routed
    /// (the input `auto`).
    pub model: Option<String>,
    /// The reasoning effort asked of the model; `None` for the provider's default.
    pub effort: Option<Effort>,
    /// Absolute (resolved against the caller's directory) and known to exist.
    pub cwd: PathBuf,
    /// What the run is to do: non-blank, at most `[limits] task_max_chars` characters.
    pub task: String,
    /// Background the agent gets along with the task; `None` when absent or blank.
    pub context: Option<String>,
    /// One line, at most 80 characters.
    pub title: String,
    /// Labels for the run, one line each (at most [`MAX_TAGS`](crate::spec::MAX_TAGS)).
    pub tags: Vec<String>,
    /// What the run may touch.
    pub capability: Capability,
    /// How the provider's tool-use requests are answered.
    pub policy: PermissionPolicy,
    /// Time limit in minutes, within `[limits] max_minutes_min..=max_minutes_max`.
    pub max_minutes: u32,
    /// US dollars, whole cents.
    pub budget_usd: f64,
    /// How long an idle run waits for a follow-up before it ends, in seconds.
    pub idle_timeout_secs: u64,
    /// How many user turns (the task and its follow-ups) the run may take.
    pub max_turns: u32,
    /// A JSON object (a JSON Schema) the final answer must satisfy.
    pub output_schema: Option<Value>,
    /// The workflow the run belongs to (its own rail); a sub-run's is its parent's.
    pub workflow_id: Option<String>,
    /// The run this one was dispatched from, when it is a sub-run.
    pub parent_run: Option<String>,
    /// The dispatch's idempotency key, when it gave one.
    pub idempotency_key: Option<String>,
    /// Queue the run when a rail is full; `false` refuses it instead.
    pub queue_if_busy: bool,
    /// Scenario name for the simulated provider.
    pub scenario: Option<String>,
    /// Task class, used to remember route choices.
    pub class: Option<String>,
    /// Where the run works: as asked by the dispatch until admission decides, then as
    /// decided. Absent in records older than workspaces (those runs shared their cwd).
    #[serde(default)]
    pub workspace: Option<crate::workspace::WorkspaceMode>,
    /// A worktree run brings the checkout's uncommitted changes along.
    #[serde(default)]
    pub carry_changes: bool,
    /// The provider CLI runs under bubblewrap (docs/ARCHITECTURE.md §"The sandbox"):
    /// asked by the dispatch, or set at admission (`[limits] sandbox_auto` for an `auto`
    /// run, a sandboxed parent for a sub-run). Absent in older records: not sandboxed.
    #[serde(default)]
    pub sandbox: bool,
    /// The `[hosts.<name>]` its CLI runs on (docs/ARCHITECTURE.md §"Hosts"); `None` on
    /// this machine. Absent in older records: this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Every number that was changed to fit the limits, so the dispatcher can note it.
    #[serde(default)]
    pub clamps: Vec<Clamp>,
}

/// One number that was not used as asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clamp {
    /// The spec field (`max_minutes`, `budget_usd`, …).
    pub field: String,
    /// What was asked, as sent (`500`, `NaN`).
    pub requested: String,
    /// What the run uses.
    pub applied: String,
}

impl fmt::Display for Clamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: asked for {}, using {}",
            self.field, self.requested, self.applied
        )
    }
}

/// What the run may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// Read files, change nothing.
    ReadOnly,
    /// Change files inside the working directory.
    #[default]
    Workspace,
    /// No sandbox.
    Full,
}

impl Capability {
    /// Every capability, narrowest first.
    pub const ALL: [Capability; 3] = [
        Capability::ReadOnly,
        Capability::Workspace,
        Capability::Full,
    ];

    /// The capability as written in specs (`read-only`, `workspace`, `full`).
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::ReadOnly => "read-only",
            Capability::Workspace => "workspace",
            Capability::Full => "full",
        }
    }

    /// The word as a user types it: case-insensitive, `read-only`, `read_only` or
    /// `readonly`.
    pub fn from_word(word: &str) -> Option<Capability> {
        match word.trim().to_ascii_lowercase().as_str() {
            "read-only" | "read_only" | "readonly" => Some(Capability::ReadOnly),
            "workspace" => Some(Capability::Workspace),
            "full" => Some(Capability::Full),
            _ => None,
        }
    }
}

/// How tool-use requests from the provider are answered (docs/ARCHITECTURE.md
/// §"Permission prompts").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionPolicy {
    /// Every request becomes a prompt.
    #[default]
    Ask,
    /// The provider's sandbox decides; no prompts.
    Restricted,
    /// Everything allowed; no prompts.
    Auto,
}

impl PermissionPolicy {
    /// Every policy.
    pub const ALL: [PermissionPolicy; 3] = [
        PermissionPolicy::Ask,
        PermissionPolicy::Restricted,
        PermissionPolicy::Auto,
    ];

    /// The policy as written in specs (`ask`, `restricted`, `auto`).
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionPolicy::Ask => "ask",
            PermissionPolicy::Restricted => "restricted",
            PermissionPolicy::Auto => "auto",
        }
    }

    /// The word as a user types it, case-insensitive.
    pub fn from_word(word: &str) -> Option<PermissionPolicy> {
        let word = word.trim();
        Self::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(word))
    }
}

/// Reasoning effort asked of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// As little reasoning as the model allows.
    Minimal,
    /// Light reasoning.
    Low,
    /// Moderate reasoning.
    Medium,
    /// Thorough reasoning.
    High,
    /// The most reasoning the model offers.
    Xhigh,
}

impl Effort {
    /// Every effort, lowest first.
    pub const ALL: [Effort; 5] = [
        Effort::Minimal,
        Effort::Low,
        Effort::Medium,
        Effort::High,
        Effort::Xhigh,
    ];

    /// The effort as written in specs (`minimal` … `xhigh`).
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::Xhigh => "xhigh",
        }
    }

    /// The word as a user types it, case-insensitive.
    pub fn from_word(word: &str) -> Option<Effort> {
        let word = word.trim();
        Self::ALL
            .into_iter()
            .find(|e| e.as_str().eq_ignore_ascii_case(word))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_through_serde_and_from_word() {
        for c in Capability::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(Capability::from_word(c.as_str()), Some(c));
        }
        for p in PermissionPolicy::ALL {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.as_str()));
            assert_eq!(PermissionPolicy::from_word(p.as_str()), Some(p));
        }
        for e in Effort::ALL {
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(json, format!("\"{}\"", e.as_str()));
            assert_eq!(Effort::from_word(e.as_str()), Some(e));
        }
    }

    #[test]
    fn words_are_case_insensitive_and_spelling_tolerant_where_documented() {
        assert_eq!(
            Capability::from_word(" READ_ONLY "),
            Some(Capability::ReadOnly)
        );
        assert_eq!(
            Capability::from_word("readonly"),
            Some(Capability::ReadOnly)
        );
        assert_eq!(Capability::from_word("root"), None);
        assert_eq!(
            PermissionPolicy::from_word("Ask"),
            Some(PermissionPolicy::Ask)
        );
        assert_eq!(PermissionPolicy::from_word("yolo"), None);
        assert_eq!(Effort::from_word("XHigh"), Some(Effort::Xhigh));
        assert_eq!(Effort::from_word("max"), None);
    }

    #[test]
    fn defaults_are_workspace_and_ask() {
        assert_eq!(Capability::default(), Capability::Workspace);
        assert_eq!(PermissionPolicy::default(), PermissionPolicy::Ask);
    }
}
