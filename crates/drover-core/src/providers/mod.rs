//! The adapter contract: how the dispatcher starts a provider CLI and what it hears back.
//!
//! An adapter owns one child process and translates its protocol both ways. The
//! dispatcher never sees provider JSON: it sends [`ProviderCommand`]s and receives
//! [`ProviderEvent`]s tagged with the run id. A CLI that speaks a line protocol over
//! stdio supplies a [`session::Protocol`] and runs on the one session loop
//! ([`session`]); [`registry`] names every provider and starts its adapter
//! (docs/PROVIDERS.md §"The adapter contract"). What must stay true:
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

pub mod acp;
pub mod ask;
pub mod claude;
pub mod codex;
pub mod interactive;
pub mod opencode;
pub mod process;
pub mod registry;
pub mod sandbox;
pub mod session;
pub mod sink;
pub mod sweep;
pub mod transport;
pub mod wire;

pub use ask::{AlwaysOption, Ask, EditedFile, FileChange, Question, QuestionOption};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tokio::sync::mpsc;

use crate::UnixMillis;
use crate::redact::Redactor;
use crate::spec::{Capability, PermissionPolicy};

pub use registry::{DEFAULT_PROVIDER, Launcher, ProviderTraits, launch, traits};

/// The environment variable drover sets in each run's child: the run's id (so a `drover
/// mcp` started inside the run dispatches sub-runs as that run's children).
pub const RUN_ID_ENV: &str = "DROVER_RUN_ID";

/// Everything an adapter needs to start a run's child.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The run the child serves; every event it causes is tagged with it.
    pub run_id: String,
    /// `claude-code`, `sim`, …
    pub provider: String,
    /// The executable and the argument prefix from config (`command` empty when the config
    /// names none: [`launch`] resolves it, e.g. to this drover's `sim-agent` for `sim`).
    pub command: PathBuf,
    /// The configured argument prefix, put before the adapter's own arguments.
    pub args: Vec<String>,
    /// Added to the child's inherited environment.
    pub env: BTreeMap<String, String>,
    /// The run's working directory (its workspace): the child runs there.
    pub cwd: PathBuf,
    /// The model, as the provider names it; `None` leaves the CLI's default.
    pub model: Option<String>,
    /// The reasoning effort, as the provider names it; `None` leaves the CLI's default.
    pub effort: Option<String>,
    /// The session mode an ACP agent is put in (`[providers.NAME] mode`, sent with
    /// `session/set_mode`); `None` leaves the agent's current mode. Other providers
    /// ignore it.
    pub mode: Option<String>,
    /// Who answers the child's permission requests: the user, the policy's denials, or
    /// the policy's allowances (each adapter maps it onto its CLI).
    pub policy: PermissionPolicy,
    /// What the run may touch; each adapter maps it onto its CLI's tools or sandbox, and
    /// nothing widens it.
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
    /// Where the run's processes are noted ([`sweep`]); the dispatcher gives one per
    /// launch.
    pub journal: Option<sweep::ProcessJournal>,
    /// Run the CLI under bubblewrap ([`sandbox`]); [`launch`] adds the CLI's own state
    /// directories to what it may write.
    pub sandbox: Option<sandbox::Sandbox>,
    /// Run the CLI on another host ([`transport`]): `cwd` and `env` are the host's, and
    /// the transport's local command is the child (docs/ARCHITECTURE.md §"Hosts").
    pub transport: Option<Box<transport::Transport>>,
}

#[cfg(test)]
impl LaunchSpec {
    /// A local run `r1` of `provider` started as `command` in `/w`, under `policy` and
    /// `capability`, with nothing else set: what the tests of a command line start from.
    pub(crate) fn for_tests(
        provider: &str,
        command: &str,
        policy: crate::spec::PermissionPolicy,
        capability: crate::spec::Capability,
    ) -> LaunchSpec {
        LaunchSpec {
            run_id: "r1".into(),
            provider: provider.into(),
            command: command.into(),
            args: vec![],
            env: std::collections::BTreeMap::new(),
            cwd: "/w".into(),
            model: None,
            effort: None,
            mode: None,
            policy,
            capability,
            resume_session: None,
            resume_tokens: None,
            scenario: None,
            mcp: None,
            journal: None,
            transport: None,
            sandbox: None,
        }
    }
}

/// A stdio MCP server a run's CLI is started with: `command args…` with `env` added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// Empty until [`launch`] fills in this drover's own executable.
    pub command: PathBuf,
    /// Its arguments (`mcp` for drover's own).
    pub args: Vec<String>,
    /// Added to its environment (drover's data directory and the run's id, for drover's
    /// own).
    pub env: BTreeMap<String, String>,
}

/// The name drover's MCP server goes by in a CLI's config (its tools are
/// `mcp__drover__dispatch`, … in Claude Code).
pub const MCP_SERVER_NAME: &str = "drover";

/// What the dispatcher asks of a running adapter.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderCommand {
    /// Send one user turn.
    StartTurn {
        /// The turn's text, as the user (or the dispatcher's prompt templates) wrote it.
        prompt: String,
    },
    /// Answer a pending permission request or question.
    Answer {
        /// The provider's id of the request, as [`PermissionRequest::request_id`] gave it.
        request_id: String,
        /// The decision.
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
        /// Allow the same again for the rest of the session, not only this once.
        always: bool,
    },
    /// Deny; the model is told so (with `message` where the CLI carries one).
    Deny {
        /// Why, in words for the model; `None` (or blank) leaves the adapter's default.
        message: Option<String>,
    },
    /// Answers to a question, keyed by the question text (or option key).
    Answer {
        /// The answer to each question, keyed by its text (or header).
        answers: BTreeMap<String, String>,
    },
}

/// Whether a request asks for a tool or asks the user something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// Asks to use a tool: answered with allow or deny.
    Permission,
    /// Asks the user something: answered with answers (or dismissed with deny).
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
    /// What the request asks, typed.
    pub ask: Ask,
    /// What "allow always" would allow, when the provider offers more than this once.
    pub always: Option<AlwaysOption>,
    /// The id of the tool call the request is for (its `ToolStarted`), when the
    /// provider names it.
    pub tool_use_id: Option<String>,
    /// The path outside the allowed directories that made the CLI ask, when it says
    /// (Claude Code's `blocked_path`).
    pub blocked_path: Option<String>,
}

/// Tokens in five classes (docs/ARCHITECTURE.md §"Money").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens, reasoning not included.
    pub output: u64,
    /// Reasoning tokens (billed as output).
    pub reasoning: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
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

    /// Adds `other` to `self`, class by class.
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
    /// The model, as the provider names it.
    pub model: String,
    /// Its tokens in the turn.
    pub tokens: Tokens,
    /// Its charge in the turn, when the provider reports dollars.
    pub cost_usd: Option<f64>,
}

/// How a turn ended, as the provider reported it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// The turn failed (`subtype` says how).
    pub is_error: bool,
    /// e.g. `success`, `error_max_turns`, `error_during_execution`.
    pub subtype: String,
    /// The final answer text of the turn.
    pub text: Option<String>,
    /// The provider session the turn ran in, when known.
    pub session_id: Option<String>,
    /// The provider session's running total in dollars (Claude); a turn's charge is the
    /// difference from the previous total.
    pub total_cost_usd: Option<f64>,
    /// The turn's tokens, all models together.
    pub tokens: Tokens,
    /// The turn's tokens (and cost) per model.
    pub model_usage: Vec<ModelUsage>,
    /// How many model round trips the turn took, when the provider says.
    pub num_turns: Option<u32>,
    /// How long the turn took, as the provider measured it (or drover, from the start
    /// of the turn, for a provider that does not say).
    pub duration_ms: Option<u64>,
    /// The model API's HTTP status of a failed turn, when the provider names it.
    pub api_error_status: Option<u16>,
    /// The model API's own words for a failed turn (Claude's `API Error: 500 {…}` read
    /// down to the error's message), when the provider gave them apart from `text`.
    #[serde(default)]
    pub api_message: Option<String>,
    /// Why the turn ended, in the provider's words (Claude Code's `completed`, an
    /// error's name, …).
    pub terminal_reason: Option<String>,
    /// The turn's structured output, when the CLI was asked for one and gave it.
    pub structured_output: Option<Value>,
    /// How many tool uses were denied during the turn, as the provider counted them.
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
        /// The CLI's version, when the handshake told it.
        version: Option<String>,
    },
    /// The provider's session (id, model) is known or changed.
    Session {
        /// The id that resumes the session (`LaunchSpec::resume_session`).
        session_id: String,
        /// The model the session runs, when the provider says.
        model: Option<String>,
    },
    /// The provider cannot go on in this session from a new process (an ACP agent that
    /// does not advertise `loadSession`): the run is never hibernated, and its session
    /// is only good while this child lives (docs/PROVIDERS.md §"ACP agents").
    SessionNotResumable {
        /// Why, as a sentence for the run's notes.
        reason: String,
    },
    /// A piece of the assistant's answer.
    AssistantText {
        /// The text, as the provider wrote it.
        text: String,
    },
    /// The model is thinking (content is not kept, only its size).
    Thinking {
        /// How many characters of thinking came (0 when the provider hides them).
        chars: usize,
    },
    /// The model called a tool.
    ToolStarted {
        /// The call's id; its `ToolFinished` and any request for it name the same one.
        tool_use_id: String,
        /// The provider's name of the tool.
        name: String,
        /// What the call does, typed as a request for it would be.
        ask: Ask,
    },
    /// A tool call ended.
    ToolFinished {
        /// The id its `ToolStarted` gave.
        tool_use_id: String,
        /// The tool failed (or was refused).
        is_error: bool,
        /// A command's exit code, when the CLI reported one (docs/ARCHITECTURE.md
        /// §"Evidence").
        exit_code: Option<i32>,
        /// One line about the result.
        summary: String,
    },
    /// The provider asks to use a tool, or asks the user a question; it waits for an
    /// `Answer` (or withdraws it).
    PermissionRequested(PermissionRequest),
    /// The provider withdrew a request before it was answered.
    PermissionWithdrawn {
        /// The withdrawn request's id.
        request_id: String,
    },
    /// Tokens of one model message, as they stream (cost comes with `TurnCompleted`).
    Usage {
        /// The model that used them, when the provider says.
        model: Option<String>,
        /// Tokens not reported before: a message's `Usage` events add up to its usage.
        tokens: Tokens,
    },
    /// The provider is rate-limited or overloaded; the turn is held until `until`.
    RateLimited {
        /// When the provider tries again, if it says.
        until: Option<UnixMillis>,
        /// The provider's words about it, clipped to one line.
        detail: String,
    },
    /// The provider answers again after a rate limit.
    RateLimitCleared,
    /// A turn ended: exactly one per `StartTurn` the provider took.
    TurnCompleted(TurnEnd),
    /// Something worth a line in the transcript (a skipped line, a warning).
    Notice {
        /// One line of it.
        text: String,
    },
    /// The child is gone. Always the last event.
    Exited {
        /// Its exit code, when it exited.
        code: Option<i32>,
        /// The signal that ended it, when one did.
        signal: Option<i32>,
        /// The last lines the child wrote to stderr.
        stderr_tail: String,
    },
}

impl ProviderEvent {
    /// Redacts, in place, every field that can carry the user's or the agent's text:
    /// answers, tool inputs and outputs, questions, notices, stderr (docs/ARCHITECTURE.md
    /// §"Secrets"). Numbers, the provider's own ids and fixed words (tool and model names,
    /// versions) are left as they are, so a usage event is never scanned. Every field is
    /// named here: a new one does not build until it is decided.
    pub fn redact(&mut self, redactor: &Redactor) {
        match self {
            ProviderEvent::Ready { version: _ }
            | ProviderEvent::Session {
                session_id: _,
                model: _,
            }
            | ProviderEvent::Thinking { chars: _ }
            | ProviderEvent::PermissionWithdrawn { request_id: _ }
            | ProviderEvent::Usage {
                model: _,
                tokens: _,
            }
            | ProviderEvent::RateLimitCleared => {}
            ProviderEvent::AssistantText { text }
            | ProviderEvent::Notice { text }
            | ProviderEvent::SessionNotResumable { reason: text } => {
                redactor.redact_string(text);
            }
            ProviderEvent::ToolStarted {
                tool_use_id: _,
                name: _,
                ask,
            } => ask.redact(redactor),
            ProviderEvent::ToolFinished {
                tool_use_id: _,
                is_error: _,
                exit_code: _,
                summary,
            } => {
                redactor.redact_string(summary);
            }
            ProviderEvent::PermissionRequested(request) => request.redact(redactor),
            ProviderEvent::RateLimited { until: _, detail } => {
                redactor.redact_string(detail);
            }
            ProviderEvent::TurnCompleted(end) => end.redact(redactor),
            ProviderEvent::Exited {
                code: _,
                signal: _,
                stderr_tail,
            } => {
                redactor.redact_string(stderr_tail);
            }
        }
    }
}

impl PermissionRequest {
    /// Redacts, in place, what the request asks and what "always" would allow (see
    /// [`ProviderEvent::redact`]).
    pub fn redact(&mut self, redactor: &Redactor) {
        let PermissionRequest {
            request_id: _,
            kind: _,
            tool: _,
            ask,
            always,
            tool_use_id: _,
            blocked_path,
        } = self;
        ask.redact(redactor);
        if let Some(AlwaysOption { sentence }) = always {
            redactor.redact_string(sentence);
        }
        redactor.redact_opt(blocked_path);
    }
}

impl TurnEnd {
    /// Redacts, in place, the turn's words: its text, the API's message, the provider's
    /// reason and the structured output (see [`ProviderEvent::redact`]).
    pub fn redact(&mut self, redactor: &Redactor) {
        let TurnEnd {
            is_error: _,
            subtype: _,
            text,
            session_id: _,
            total_cost_usd: _,
            tokens: _,
            model_usage: _,
            num_turns: _,
            duration_ms: _,
            api_error_status: _,
            api_message,
            terminal_reason,
            structured_output,
            permission_denials: _,
            transient: _,
        } = self;
        redactor.redact_opt(text);
        redactor.redact_opt(api_message);
        redactor.redact_opt(terminal_reason);
        if let Some(output) = structured_output {
            redactor.redact_json(output);
        }
    }
}

/// A tag unique to one start of a provider's CLI, for the ids of the requests it asks
/// (`<tag>-<its own id>`) where the CLI numbers them afresh in every process (Codex's
/// JSON-RPC ids, an ACP adapter's count). A run keeps its broker across a wake and its
/// ledger across restarts, so a request id must never come back in the same run: a
/// repeated one would be dropped as already answered, or take a late answer meant for
/// the earlier request (docs/ARCHITECTURE.md §"Permission prompts").
pub fn launch_tag() -> String {
    static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let start = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    use crate::text::base36;
    format!("{}{}", base36(ms), base36(start % 1296))
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
    /// The run whose adapter sent it (shared by all of its events).
    pub run_id: std::sync::Arc<str>,
    /// What happened.
    pub event: ProviderEvent,
}

/// Where adapters send their events (shared by all runs; bounded, so a flood of child
/// output slows the child rather than drover's memory).
pub type ProviderEventSink = mpsc::Sender<RunProviderEvent>;

/// A started adapter.
#[derive(Debug)]
pub struct AdapterHandle {
    /// Where the run's commands go; dropping it ends the run's child too.
    pub commands: mpsc::UnboundedSender<ProviderCommand>,
    /// The child's pid (= its process group id).
    pub pid: Option<u32>,
}

/// Why a child could not be started.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot start {command}: {reason}")]
pub struct LaunchError {
    /// What could not be started (the executable, or the provider's name).
    pub command: String,
    /// Why, in a sentence.
    pub reason: String,
}
