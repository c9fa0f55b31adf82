//! The adapter contract: how the dispatcher starts a provider CLI and what it hears back.
//!
//! An adapter owns one child process and translates its protocol both ways. The
//! dispatcher never sees provider JSON: it sends [`ProviderCommand`]s and receives
//! [`ProviderEvent`]s tagged with the run id. What must stay true:
//! - every adapter ends with exactly one [`ProviderEvent::Exited`], after which it sends
//!   nothing more;
//! - a line the adapter cannot understand becomes a [`ProviderEvent::Notice`], never a
//!   panic or a dead run;
//! - a permission request or a tool call reaches the dispatcher as a typed [`Ask`] (and
//!   an [`AlwaysOption`] sentence), never as the CLI's JSON: what answering needs of
//!   that JSON stays with the adapter;
//! - the child cannot outlive drover (own process group, kill on drop, parent-death
//!   signal), and nor can anything it starts: every child is tracked and swept by
//!   [`sweep`], the one sweep for every adapter.

pub mod ask;
pub mod claude;
pub mod codex;
pub mod opencode;
pub mod process;
pub mod registry;
pub mod session;
pub mod sink;
pub mod sweep;
pub mod wire;

pub use ask::{AlwaysOption, Ask, EditedFile, FileChange, Question, QuestionOption};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tokio::sync::mpsc;

use crate::UnixMillis;
use crate::spec::{Capability, PermissionPolicy};

pub use registry::{DEFAULT_PROVIDER, Launcher, ProviderTraits, launch, traits};

/// The environment variable drover sets in each run's child: the run's id (so a `drover
/// mcp` started inside the run dispatches sub-runs as that run's children).
pub const RUN_ID_ENV: &str = "DROVER_RUN_ID";

/// Everything an adapter needs to start a run's child.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub run_id: String,
    /// `claude-code`, `sim`, …
    pub provider: String,
    /// The executable and the argument prefix from config (`command` empty when the config
    /// names none: [`launch`] resolves it, e.g. to this drover's `sim-agent` for `sim`).
    pub command: PathBuf,
    pub args: Vec<String>,
    /// Added to the child's inherited environment.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub policy: PermissionPolicy,
    pub capability: Capability,
    /// Continue this provider session instead of starting a new one.
    pub resume_session: Option<String>,
    /// With `resume_session`: the tokens drover has booked on the run so far (for a
    /// provider that reports a session's running total, the base to count from).
    pub resume_tokens: Option<Tokens>,
    /// The sim's scenario (name or file); ignored by real providers.
    pub scenario: Option<String>,
    /// drover's MCP server, to configure in the child's CLI (`[mcp] expose_to_runs`).
    pub mcp: Option<McpServer>,
    /// Where the run's processes are noted ([`sweep`]); the driver gives one per launch.
    pub journal: Option<sweep::ProcessJournal>,
}

/// A stdio MCP server a run's CLI is started with: `command args…` with `env` added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// Empty until [`launch`] fills in this drover's own executable.
    pub command: PathBuf,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

/// The name drover's MCP server goes by in a CLI's config (its tools are
/// `mcp__drover__dispatch`, … in Claude Code).
pub const MCP_SERVER_NAME: &str = "drover";

/// What the dispatcher asks of a running adapter.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderCommand {
    /// Send one user turn.
    StartTurn { prompt: String },
    /// Answer a pending permission request or question.
    Answer {
        request_id: String,
        answer: PermissionAnswer,
    },
    /// Interrupt the turn in flight (the session stays usable).
    Interrupt,
    /// End the child: close stdin, wait, SIGTERM, wait, SIGKILL.
    Shutdown,
}

/// A decision on a permission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "behavior", rename_all = "snake_case")]
pub enum PermissionAnswer {
    /// Allow; `always` also allows the same again for the rest of this run's session
    /// (what the request's [`AlwaysOption`] says, carried out by the adapter).
    Allow {
        always: bool,
    },
    Deny {
        message: Option<String>,
    },
    /// Answers to a question, keyed by the question text (or option key).
    Answer {
        answers: BTreeMap<String, String>,
    },
}

/// Whether a request asks for a tool or asks the user something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    Permission,
    Question,
}

/// A provider asking to use a tool, or asking the user a question, as its adapter
/// read it: no provider JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRequest {
    /// The provider's own id for the request; answers must name it.
    pub request_id: String,
    /// Always `ask.kind()`.
    pub kind: RequestKind,
    /// The provider's name of the tool (`Bash`, `shell`, `bash`, `AskUserQuestion`, …).
    pub tool: String,
    pub ask: Ask,
    /// What "allow always" would allow, when the provider offers more than this once.
    pub always: Option<AlwaysOption>,
    pub tool_use_id: Option<String>,
    pub blocked_path: Option<String>,
}

/// Tokens in five classes (DESIGN.md §6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    /// `self - other`, class by class, never below zero (what a running count grew by).
    pub fn saturating_sub(&self, other: &Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_sub(other.input),
            output: self.output.saturating_sub(other.output),
            reasoning: self.reasoning.saturating_sub(other.reasoning),
            cache_read: self.cache_read.saturating_sub(other.cache_read),
            cache_write: self.cache_write.saturating_sub(other.cache_write),
        }
    }

    /// The larger of the two counts, class by class.
    pub fn field_max(&self, other: &Tokens) -> Tokens {
        Tokens {
            input: self.input.max(other.input),
            output: self.output.max(other.output),
            reasoning: self.reasoning.max(other.reasoning),
            cache_read: self.cache_read.max(other.cache_read),
            cache_write: self.cache_write.max(other.cache_write),
        }
    }

    pub fn add(&mut self, other: &Tokens) {
        self.input += other.input;
        self.output += other.output;
        self.reasoning += other.reasoning;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
    }
}

/// Usage of one model within a turn, as the provider reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    pub model: String,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
}

/// How a turn ended, as the provider reported it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    pub is_error: bool,
    /// e.g. `success`, `error_max_turns`, `error_during_execution`.
    pub subtype: String,
    /// The final answer text of the turn.
    pub text: Option<String>,
    pub session_id: Option<String>,
    /// The provider session's running total in dollars (Claude); a turn's charge is the
    /// difference from the previous total.
    pub total_cost_usd: Option<f64>,
    pub tokens: Tokens,
    pub model_usage: Vec<ModelUsage>,
    pub num_turns: Option<u32>,
    pub duration_ms: Option<u64>,
    pub api_error_status: Option<u16>,
    /// The model API's own words for a failed turn (Claude's `API Error: 500 {…}` read
    /// down to the error's message), when the provider gave them apart from `text`.
    #[serde(default)]
    pub api_message: Option<String>,
    pub terminal_reason: Option<String>,
    pub structured_output: Option<Value>,
    pub permission_denials: u32,
    /// The provider failed in a way that may pass on its own (rate limit, overload, a
    /// 5xx after its retries, a dropped connection): the run fails as
    /// `provider_unavailable` and a retry is offered.
    #[serde(default)]
    pub transient: bool,
}

/// What an adapter reports, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProviderEvent {
    /// The child is up and the handshake is done.
    Ready {
        version: Option<String>,
    },
    /// The provider's session (id, model) is known or changed.
    Session {
        session_id: String,
        model: Option<String>,
    },
    /// A piece of the assistant's answer.
    AssistantText {
        text: String,
    },
    /// The model is thinking (content is not kept, only its size).
    Thinking {
        chars: usize,
    },
    ToolStarted {
        tool_use_id: String,
        name: String,
        /// What the call does, typed as a request for it would be.
        ask: Ask,
    },
    ToolFinished {
        tool_use_id: String,
        is_error: bool,
        /// One line about the result.
        summary: String,
    },
    PermissionRequested(PermissionRequest),
    /// The provider withdrew a request before it was answered.
    PermissionWithdrawn {
        request_id: String,
    },
    /// Tokens of one model message, as they stream (cost comes with `TurnCompleted`).
    Usage {
        model: Option<String>,
        tokens: Tokens,
    },
    /// The provider is rate-limited or overloaded; the turn is held until `until`.
    RateLimited {
        until: Option<UnixMillis>,
        detail: String,
    },
    /// The provider answers again after a rate limit.
    RateLimitCleared,
    TurnCompleted(TurnEnd),
    /// Something worth a line in the transcript (a skipped line, a warning).
    Notice {
        text: String,
    },
    /// The child is gone. Always the last event.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
        /// The last lines the child wrote to stderr.
        stderr_tail: String,
    },
}

/// A line for the transcript from an adapter (something skipped, a warning).
pub fn notice(text: String) -> ProviderEvent {
    ProviderEvent::Notice { text }
}

/// Whether an HTTP status from a model API means "try again later": a timeout, a
/// conflict, a rate limit (429), or a server error (5xx, Anthropic's 529 overload
/// included).
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 425 | 429 | 500..=599)
}

/// An event tagged with its run.
#[derive(Debug, Clone)]
pub struct RunProviderEvent {
    pub run_id: String,
    pub event: ProviderEvent,
}

/// Where adapters send their events (shared by all runs; bounded, so a flood of child
/// output slows the child rather than drover's memory).
pub type ProviderEventSink = mpsc::Sender<RunProviderEvent>;

/// A started adapter.
#[derive(Debug)]
pub struct AdapterHandle {
    pub commands: mpsc::UnboundedSender<ProviderCommand>,
    /// The child's pid (= its process group id).
    pub pid: Option<u32>,
}

/// Why a child could not be started.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot start {command}: {reason}")]
pub struct LaunchError {
    pub command: String,
    pub reason: String,
}
