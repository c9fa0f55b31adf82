//! Claude Code's stream-json protocol, read side: one stdout line in, drover events out.
//!
//! Pure: no I/O and no clock (`now` is passed in). [`ParseState`] carries what a line
//! needs from earlier lines: the requests awaiting an answer, drover's own control
//! requests awaiting a response, the handshake, the rate-limit flag, the usage already
//! reported for the message being streamed, and the replies to write back. What must
//! stay true:
//! - no line panics or stops the run: what cannot be understood becomes a
//!   [`ProviderEvent::Notice`] with a short, clipped description;
//! - a `can_use_tool` request is answered exactly once: shown to the user (policy
//!   `ask`) and kept until [`ParseState::answer`] or a withdrawal forgets it, or answered
//!   at once by the policy ([`policy::unattended_answer`]); it is shown as a typed ask
//!   ([`super::ask`]), while the input the answer echoes and the suggestions "allow
//!   always" applies stay here;
//! - every other control request from the CLI gets an error reply, so the CLI never
//!   waits on drover for something drover does not do;
//! - the `Usage` events of one model message add up to that message's usage (the CLI
//!   repeats a message's usage on each of its content-block lines; only growth is
//!   reported);
//! - a turn's `model_usage` is that turn's: the CLI's `modelUsage` holds running totals
//!   for its process (checked on 2.1.197: the second turn of a process reports both
//!   turns, a resumed process starts from zero), so the growth since the previous
//!   `result` is reported; `total_cost_usd` stays the running total the contract asks
//!   for;
//! - `Session` is sent when the session id or model is new, not on every turn's init;
//! - a `result` with `is_error` withdraws the requests still pending (the CLI abandons
//!   them without saying so).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::UnixMillis;
use crate::providers::session::Handshake;
use crate::providers::wire::{clip, f64_at, first_line_summary, str_at, u64_at};
use crate::providers::{
    ModelUsage, PermissionAnswer, PermissionRequest, ProviderEvent, RequestKind, Tokens, TurnEnd,
    notice,
};
use crate::spec::PermissionPolicy;

use super::ask::{always_of, ask_of};
use super::{encode, policy};

/// How long a Notice's quote of a line may be.
const QUOTE_CHARS: usize = 120;
/// How long a tool result's one-line summary may be.
const SUMMARY_CHARS: usize = 160;

/// System message subtypes that carry nothing for drover.
const QUIET_SYSTEM_SUBTYPES: [&str; 8] = [
    "status",
    "hook_started",
    "hook_progress",
    "hook_response",
    "task_started",
    "task_progress",
    "task_notification",
    "task_updated",
];

/// Line types that carry nothing for drover (`stream_event` only comes with
/// `--include-partial-messages`, which drover does not pass).
const QUIET_TYPES: [&str; 3] = ["stream_event", "keep_alive", "tool_progress"];

/// A control request drover sent and is waiting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnRequest {
    Initialize,
    Interrupt,
}

/// A request awaiting the user's answer: what drover was shown, and what the CLI sent
/// that answering needs (the input to echo, the suggestions "allow always" applies).
#[derive(Debug, Clone)]
struct Pending {
    request: PermissionRequest,
    input: Value,
    suggestions: Value,
}

/// What parsing remembers between lines (see the module doc).
#[derive(Debug, Clone)]
pub struct ParseState {
    policy: PermissionPolicy,
    pending: HashMap<String, Pending>,
    own: HashMap<String, OwnRequest>,
    next_request: u64,
    handshake: Handshake,
    /// `claude_code_version` from the init message.
    version: Option<String>,
    rate_limited: bool,
    /// The message whose usage was last reported, and the largest usage reported for it.
    streamed_usage: Option<(String, Tokens)>,
    /// The last `modelUsage` running totals, per model: tokens and dollars.
    model_totals: HashMap<String, (Tokens, f64)>,
    /// The session last reported.
    session: Option<(String, Option<String>)>,
    outgoing: Vec<String>,
}

impl ParseState {
    /// A state before any line, answering requests as `policy` says (the user answers
    /// under `ask`).
    pub fn new(policy: PermissionPolicy) -> ParseState {
        ParseState {
            policy,
            pending: HashMap::new(),
            own: HashMap::new(),
            next_request: 0,
            handshake: Handshake::Waiting,
            version: None,
            rate_limited: false,
            streamed_usage: None,
            model_totals: HashMap::new(),
            session: None,
            outgoing: Vec::new(),
        }
    }

    /// The `initialize` line to send first; its response completes the handshake.
    pub fn initialize_request(&mut self) -> String {
        let id = self.own_request(OwnRequest::Initialize);
        self.handshake = Handshake::Waiting;
        encode::initialize(&id)
    }

    /// An `interrupt` line; its response is handled here.
    pub fn interrupt_request(&mut self) -> String {
        let id = self.own_request(OwnRequest::Interrupt);
        encode::interrupt(&id)
    }

    fn own_request(&mut self, kind: OwnRequest) -> String {
        self.next_request += 1;
        let name = match kind {
            OwnRequest::Initialize => "init",
            OwnRequest::Interrupt => "interrupt",
        };
        let id = format!("drover_{}_{name}", self.next_request);
        self.own.insert(id.clone(), kind);
        id
    }

    /// Where the `initialize` handshake stands: `Done` once answered (CLI 2.1.197
    /// answers with its commands, agents, models and account; not with its version,
    /// which only the init message of the first turn names), `Failed` when refused.
    pub fn handshake(&self) -> Handshake {
        self.handshake
    }

    /// The CLI's version, once an init message named it.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The requests waiting for the user's answer, in no particular order.
    pub fn pending_requests(&self) -> impl Iterator<Item = &PermissionRequest> {
        self.pending.values().map(|p| &p.request)
    }

    /// Replies produced by parsing (answers given by the policy, refusals of control
    /// requests drover does not handle), to be written to the child in order.
    pub fn take_outgoing(&mut self) -> Vec<String> {
        std::mem::take(&mut self.outgoing)
    }

    /// The line that answers request `request_id`, which is then forgotten. `Err` holds a
    /// notice when the answer cannot apply: the id is unknown (never asked, already
    /// answered, or withdrawn), or question answers were given to a permission request
    /// (which then stays pending).
    pub fn answer(
        &mut self,
        request_id: &str,
        answer: &PermissionAnswer,
    ) -> Result<String, String> {
        let Some(pending) = self.pending.get(request_id) else {
            return Err(format!(
                "dropped an answer to request {}: it is not pending (answered, withdrawn or \
                 never asked)",
                clip(request_id, 60)
            ));
        };
        if matches!(answer, PermissionAnswer::Answer { .. })
            && pending.request.kind != RequestKind::Question
        {
            return Err(format!(
                "dropped an answer to request {}: it asks to use {}, so it takes allow or deny, \
                 not answers",
                clip(request_id, 60),
                clip(&pending.request.tool, 60)
            ));
        }
        let line = answer_line(pending, answer);
        self.pending.remove(request_id);
        Ok(line)
    }
}

/// The `control_response` line for `answer` to a pending request.
fn answer_line(pending: &Pending, answer: &PermissionAnswer) -> String {
    let id = &pending.request.request_id;
    match answer {
        PermissionAnswer::Allow { always } => {
            let permissions = if *always {
                policy::session_permissions(&pending.suggestions)
            } else {
                None
            };
            encode::allow(id, &pending.input, permissions)
        }
        PermissionAnswer::Deny { message } => encode::deny(
            id,
            message
                .as_deref()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or("The user denied this."),
        ),
        PermissionAnswer::Answer { answers } => {
            let mut input = match &pending.input {
                Value::Object(map) => map.clone(),
                _ => Map::new(),
            };
            let answers: Map<String, Value> = answers
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            input.insert("answers".into(), Value::Object(answers));
            encode::allow(id, &Value::Object(input), None)
        }
    }
}

/// Turn one stdout line into events (possibly none), updating `state`.
pub fn parse_line(line: &str, state: &mut ParseState, now: UnixMillis) -> Vec<ProviderEvent> {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Vec::new();
    }
    // Most lines are the model's messages: read into borrowed, typed parts, with no
    // `Value` tree built (docs/ARCHITECTURE.md §"Ledger"); a line of another shape goes
    // the general way below, to the same events.
    if let Some(events) = typed_assistant(trimmed, state) {
        return events;
    }
    parse_value_line(trimmed, state, now)
}

/// The events of an assistant line read the typed way, or `None` for a line that is not
/// one or that only the general way reads (see [`typed`]).
fn typed_assistant(trimmed: &str, state: &mut ParseState) -> Option<Vec<ProviderEvent>> {
    if !trimmed.contains("\"assistant\"") {
        return None;
    }
    let typed::Obj(line) =
        serde_json::from_str::<typed::Obj<typed::AssistantLine<'_>>>(trimmed).ok()?;
    (line.kind.0 == "assistant").then(|| line.events(state))
}

/// [`parse_line`] for a trimmed, non-empty line, through a `Value` tree: any line, any
/// shape.
fn parse_value_line(trimmed: &str, state: &mut ParseState, now: UnixMillis) -> Vec<ProviderEvent> {
    let value: Value = match serde_json::from_str(trimmed) {
        Ok(value) => value,
        Err(_) => {
            return vec![notice(format!(
                "skipped a line that is not JSON: {}",
                clip(trimmed, QUOTE_CHARS)
            ))];
        }
    };
    let Value::Object(msg) = value else {
        return vec![notice(format!(
            "skipped a JSON line that is not an object: {}",
            clip(trimmed, QUOTE_CHARS)
        ))];
    };
    let Some(kind) = str_at(&msg, "type") else {
        return vec![notice(format!(
            "skipped a JSON object without a type: {}",
            clip(trimmed, QUOTE_CHARS)
        ))];
    };
    match kind {
        "system" => system(&msg, state, now),
        "assistant" => assistant(&msg, state),
        "user" => user(&msg),
        "result" => result(&msg, state),
        "rate_limit_event" => rate_limit_event(&msg, state),
        "control_request" => control_request(&msg, state),
        "control_cancel_request" => control_cancel(&msg, state),
        "control_response" => control_response(&msg, state),
        quiet if QUIET_TYPES.contains(&quiet) => Vec::new(),
        other => vec![notice(format!(
            "skipped a line of unknown type {}",
            clip(other, 40)
        ))],
    }
}

fn system(msg: &Map<String, Value>, state: &mut ParseState, now: UnixMillis) -> Vec<ProviderEvent> {
    match str_at(msg, "subtype").unwrap_or("") {
        "init" => {
            if let Some(version) = str_at(msg, "claude_code_version") {
                state.version = Some(version.to_string());
            }
            let mut events = Vec::new();
            match str_at(msg, "session_id") {
                Some(session_id) => {
                    let session = (
                        session_id.to_string(),
                        str_at(msg, "model").map(str::to_string),
                    );
                    if state.session.as_ref() != Some(&session) {
                        state.session = Some(session.clone());
                        events.push(ProviderEvent::Session {
                            session_id: session.0,
                            model: session.1,
                        });
                    }
                }
                None => events.push(notice("the CLI's init message has no session id".into())),
            }
            let expected = policy::permission_mode(state.policy);
            if let Some(mode) = str_at(msg, "permissionMode")
                && mode != expected
            {
                events.push(notice(format!(
                    "the CLI runs in permission mode {}, not {expected}",
                    clip(mode, 40)
                )));
            }
            events
        }
        "api_retry" => api_retry(msg, state, now),
        "compact_boundary" => vec![notice("the conversation was compacted".into())],
        // Sent in mode dontAsk (policy restricted) when the CLI itself denies a tool.
        "permission_denied" => {
            let tool = str_at(msg, "tool_name").unwrap_or("a tool");
            let why = str_at(msg, "decision_reason_type")
                .map(|r| format!(" (by {})", clip(r, 40)))
                .unwrap_or_default();
            vec![notice(format!("the CLI denied {}{why}", clip(tool, 60)))]
        }
        quiet if QUIET_SYSTEM_SUBTYPES.contains(&quiet) => Vec::new(),
        other => vec![notice(format!(
            "skipped a system message of subtype {}",
            clip(if other.is_empty() { "(none)" } else { other }, 40)
        ))],
    }
}

fn api_retry(
    msg: &Map<String, Value>,
    state: &mut ParseState,
    now: UnixMillis,
) -> Vec<ProviderEvent> {
    let status = u64_at(msg, "error_status");
    let error = str_at(msg, "error");
    let delay = u64_at(msg, "retry_delay_ms");
    let mut detail = String::from("API error");
    match (status, error) {
        (Some(s), Some(e)) => detail.push_str(&format!(" {s} {}", clip(e, 40))),
        (Some(s), None) => detail.push_str(&format!(" {s}")),
        (None, Some(e)) => detail.push_str(&format!(" {}", clip(e, 40))),
        (None, None) => {}
    }
    if let (Some(attempt), Some(max)) = (u64_at(msg, "attempt"), u64_at(msg, "max_retries")) {
        detail.push_str(&format!(", retry {attempt}/{max}"));
    }
    if let Some(ms) = delay {
        detail.push_str(&format!(" in {:.1} s", ms as f64 / 1000.0));
    }
    let limited = matches!(status, Some(429 | 529))
        || matches!(
            error,
            Some("rate_limit" | "overloaded" | "overloaded_error")
        );
    if limited {
        state.rate_limited = true;
        vec![ProviderEvent::RateLimited {
            until: delay.map(|ms| now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))),
            detail,
        }]
    } else {
        vec![notice(detail)]
    }
}

fn assistant(msg: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let message = msg
        .get("message")
        .and_then(Value::as_object)
        .map(|message| Message {
            id: str_at(message, "id"),
            model: str_at(message, "model"),
            blocks: message
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
                .map(|block| Block {
                    kind: str_at(block, "type").unwrap_or(""),
                    text: str_at(block, "text"),
                    thinking: str_at(block, "thinking"),
                    id: str_at(block, "id"),
                    name: str_at(block, "name"),
                    input: block.get("input"),
                })
                .collect(),
            usage: message
                .get("usage")
                .and_then(Value::as_object)
                .map(usage_tokens),
        });
    assistant_events(str_at(msg, "error"), message, state)
}

/// What drover reads of an assistant line's message, however the line was read.
struct Message<'a> {
    id: Option<&'a str>,
    model: Option<&'a str>,
    /// Its content blocks that are objects.
    blocks: Vec<Block<'a>>,
    usage: Option<Tokens>,
}

/// What drover reads of a content block (`kind` is `""` when it has no type).
struct Block<'a> {
    kind: &'a str,
    text: Option<&'a str>,
    thinking: Option<&'a str>,
    id: Option<&'a str>,
    name: Option<&'a str>,
    input: Option<&'a Value>,
}

/// An assistant line's events: its `error`, its message's blocks and usage.
fn assistant_events(
    error: Option<&str>,
    message: Option<Message<'_>>,
    state: &mut ParseState,
) -> Vec<ProviderEvent> {
    let mut events = Vec::new();
    if std::mem::take(&mut state.rate_limited) {
        events.push(ProviderEvent::RateLimitCleared);
    }
    if let Some(error) = error {
        events.push(notice(format!(
            "the CLI reports an error: {}",
            clip(error, 60)
        )));
    }
    let Some(message) = message else {
        events.push(notice("skipped an assistant line without a message".into()));
        return events;
    };
    for block in &message.blocks {
        match block.kind {
            "text" => {
                if let Some(text) = block.text
                    && !text.is_empty()
                {
                    events.push(ProviderEvent::AssistantText {
                        text: text.to_string(),
                    });
                }
            }
            "thinking" => events.push(ProviderEvent::Thinking {
                chars: block.thinking.map_or(0, |t| t.chars().count()),
            }),
            "redacted_thinking" => events.push(ProviderEvent::Thinking { chars: 0 }),
            "tool_use" => match (block.id, block.name) {
                (Some(id), Some(name)) => events.push(ProviderEvent::ToolStarted {
                    tool_use_id: id.to_string(),
                    name: name.to_string(),
                    ask: ask_of(name, block.input.unwrap_or(&Value::Null)),
                }),
                _ => events.push(notice("skipped a tool use without an id or a name".into())),
            },
            _ => {}
        }
    }
    if let Some(tokens) = message.usage {
        let delta = match (message.id, &mut state.streamed_usage) {
            (Some(id), Some((last_id, reported))) if last_id == id => {
                let delta = tokens.saturating_sub(reported);
                *reported = reported.field_max(&tokens);
                delta
            }
            // A new message: its id is kept in the last one's buffer (a line each).
            (Some(id), Some((last_id, reported))) => {
                last_id.clear();
                last_id.push_str(id);
                *reported = tokens;
                tokens
            }
            (id, streamed) => {
                *streamed = id.map(|id| (id.to_string(), tokens));
                tokens
            }
        };
        if delta != Tokens::default() {
            events.push(ProviderEvent::Usage {
                model: message.model.map(str::to_string),
                tokens: delta,
            });
        }
    }
    events
}

/// An assistant line read straight into typed parts that borrow its text (a string with
/// escapes is unescaped into its own buffer). Such a read fails on anything the general
/// way reads differently — a field of another type (a float token count, a block that is
/// no object, content that is no array), a key given twice — and the line then goes the
/// general way: both ways give the same events for every line (`protocol_tests.rs`).
mod typed {
    use std::borrow::Cow;

    use serde::Deserialize;
    use serde_json::Value;

    use super::{Block, Message, ParseState, ProviderEvent, Tokens, assistant_events};

    /// A JSON string, borrowed from the line when it has no escapes.
    pub(super) struct Str<'a>(pub(super) Cow<'a, str>);

    impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit<'a>(std::marker::PhantomData<&'a ()>);
            impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
                type Value = Str<'a>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a string")
                }
                fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'a>, E> {
                    Ok(Str(Cow::Borrowed(s)))
                }
                fn visit_str<E>(self, s: &str) -> Result<Str<'a>, E> {
                    Ok(Str(Cow::Owned(s.to_string())))
                }
                fn visit_string<E>(self, s: String) -> Result<Str<'a>, E> {
                    Ok(Str(Cow::Owned(s)))
                }
            }
            d.deserialize_str(Visit(std::marker::PhantomData))
        }
    }

    /// A JSON object read as `T`: never an array, which a derived struct would also take
    /// (field by field, in order) where the general way sees no object.
    pub(super) struct Obj<T>(pub(super) T);

    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit<T>(std::marker::PhantomData<T>);
            impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
                type Value = Obj<T>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    map: A,
                ) -> Result<Obj<T>, A::Error> {
                    T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Obj)
                }
            }
            d.deserialize_map(Visit(std::marker::PhantomData))
        }
    }

    fn text<'a>(s: &'a Option<Str<'_>>) -> Option<&'a str> {
        s.as_ref().map(|s| s.0.as_ref())
    }

    #[derive(Deserialize)]
    pub(super) struct AssistantLine<'a> {
        #[serde(rename = "type", borrow)]
        pub(super) kind: Str<'a>,
        #[serde(default, borrow)]
        error: Option<Str<'a>>,
        #[serde(default, borrow)]
        message: Option<Obj<TypedMessage<'a>>>,
    }

    #[derive(Deserialize)]
    struct TypedMessage<'a> {
        #[serde(default, borrow)]
        id: Option<Str<'a>>,
        #[serde(default, borrow)]
        model: Option<Str<'a>>,
        #[serde(default, borrow)]
        content: Option<Vec<Obj<TypedBlock<'a>>>>,
        #[serde(default)]
        usage: Option<Obj<Usage>>,
    }

    #[derive(Deserialize)]
    struct TypedBlock<'a> {
        #[serde(rename = "type", default, borrow)]
        kind: Option<Str<'a>>,
        #[serde(default, borrow)]
        text: Option<Str<'a>>,
        #[serde(default, borrow)]
        thinking: Option<Str<'a>>,
        #[serde(default, borrow)]
        id: Option<Str<'a>>,
        #[serde(default, borrow)]
        name: Option<Str<'a>>,
        #[serde(default)]
        input: Option<Value>,
    }

    #[derive(Deserialize)]
    struct Usage {
        #[serde(default)]
        input_tokens: Option<u64>,
        #[serde(default)]
        output_tokens: Option<u64>,
        #[serde(default)]
        cache_read_input_tokens: Option<u64>,
        #[serde(default)]
        cache_creation_input_tokens: Option<u64>,
    }

    impl AssistantLine<'_> {
        /// The line's events (see [`super::parse_line`]).
        pub(super) fn events(&self, state: &mut ParseState) -> Vec<ProviderEvent> {
            let message = self.message.as_ref().map(|Obj(m)| Message {
                id: text(&m.id),
                model: text(&m.model),
                blocks: m
                    .content
                    .iter()
                    .flatten()
                    .map(|Obj(b)| Block {
                        kind: text(&b.kind).unwrap_or(""),
                        text: text(&b.text),
                        thinking: text(&b.thinking),
                        id: text(&b.id),
                        name: text(&b.name),
                        input: b.input.as_ref(),
                    })
                    .collect(),
                usage: m.usage.as_ref().map(|Obj(u)| Tokens {
                    input: u.input_tokens.unwrap_or(0),
                    output: u.output_tokens.unwrap_or(0),
                    reasoning: 0,
                    cache_read: u.cache_read_input_tokens.unwrap_or(0),
                    cache_write: u.cache_creation_input_tokens.unwrap_or(0),
                }),
            });
            assistant_events(text(&self.error), message, state)
        }
    }
}

fn user(msg: &Map<String, Value>) -> Vec<ProviderEvent> {
    let blocks = msg
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array);
    let mut events = Vec::new();
    for block in blocks.into_iter().flatten() {
        let Some(block) = block.as_object() else {
            continue;
        };
        if str_at(block, "type") != Some("tool_result") {
            continue;
        }
        let Some(id) = str_at(block, "tool_use_id") else {
            events.push(notice("skipped a tool result without a tool use id".into()));
            continue;
        };
        let is_error = block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        events.push(ProviderEvent::ToolFinished {
            tool_use_id: id.to_string(),
            is_error,
            exit_code: tool_result_exit(is_error, block.get("content")),
            summary: tool_result_summary(block.get("content")),
        });
    }
    events
}

fn result(msg: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let is_error = msg
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut events = Vec::new();
    if !is_error && std::mem::take(&mut state.rate_limited) {
        events.push(ProviderEvent::RateLimitCleared);
    }
    state.streamed_usage = None;
    if is_error {
        // An interrupted or failed turn abandons its tool uses without a
        // `control_cancel_request` (seen on 2.1.197 after an interrupt): withdraw what is
        // still pending. After a successful turn, a pending request may belong to a
        // background task and stays.
        let mut withdrawn: Vec<String> = state.pending.drain().map(|(id, _)| id).collect();
        withdrawn.sort();
        events.extend(
            withdrawn
                .into_iter()
                .map(|request_id| ProviderEvent::PermissionWithdrawn { request_id }),
        );
    }
    let model_usage = msg
        .get("modelUsage")
        .and_then(Value::as_object)
        .map(|models| turn_model_usage(models, &mut state.model_totals))
        .unwrap_or_default();
    let permission_denials = match msg.get("permission_denials") {
        Some(Value::Array(list)) => u32::try_from(list.len()).unwrap_or(u32::MAX),
        Some(other) => other
            .as_u64()
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        None => 0,
    };
    let api_error_status = u64_at(msg, "api_error_status").and_then(|n| u16::try_from(n).ok());
    let text = str_at(msg, "result");
    let api_message = if is_error {
        text.and_then(api_message)
    } else {
        None
    };
    events.push(ProviderEvent::TurnCompleted(TurnEnd {
        is_error,
        transient: is_error && api_error_status.is_some_and(crate::providers::is_transient_status),
        subtype: str_at(msg, "subtype").unwrap_or("unknown").to_string(),
        text: text.map(str::to_string),
        api_message,
        session_id: str_at(msg, "session_id").map(str::to_string),
        total_cost_usd: f64_at(msg, "total_cost_usd"),
        tokens: msg
            .get("usage")
            .and_then(Value::as_object)
            .map(usage_tokens)
            .unwrap_or_default(),
        model_usage,
        num_turns: u64_at(msg, "num_turns").and_then(|n| u32::try_from(n).ok()),
        duration_ms: u64_at(msg, "duration_ms"),
        api_error_status,
        terminal_reason: str_at(msg, "terminal_reason").map(str::to_string),
        structured_output: msg
            .get("structured_output")
            .filter(|v| !v.is_null())
            .cloned(),
        permission_denials,
    }));
    events
}

/// The model API's message in a failed turn's `result`: the CLI writes `API Error: 500
/// {"type":"error","error":{"type":"api_error","message":"…"}}` (the API's JSON body) or
/// `API Error: 529 Overloaded`; anything else is not an API error's text.
fn api_message(text: &str) -> Option<String> {
    let rest = text.trim().strip_prefix("API Error:")?.trim_start();
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit()).trim();
    let from_json = || {
        let body: Value = serde_json::from_str(rest.get(rest.find('{')?..)?).ok()?;
        let error = body.get("error").unwrap_or(&body);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| body.get("message").and_then(Value::as_str))?;
        Some(message.trim().to_string())
    };
    let message = if rest.starts_with('{') {
        from_json()?
    } else {
        rest.to_string()
    };
    (!message.is_empty()).then(|| clip(&message, 400))
}

/// This turn's usage per model, from the CLI's running totals (see the module doc).
/// Models this turn did not use are left out.
fn turn_model_usage(
    models: &Map<String, Value>,
    totals: &mut HashMap<String, (Tokens, f64)>,
) -> Vec<ModelUsage> {
    let mut out = Vec::new();
    for (model, usage) in models {
        let Some(usage) = usage.as_object() else {
            continue;
        };
        let tokens = Tokens {
            input: u64_at(usage, "inputTokens").unwrap_or(0),
            output: u64_at(usage, "outputTokens").unwrap_or(0),
            reasoning: 0,
            cache_read: u64_at(usage, "cacheReadInputTokens").unwrap_or(0),
            cache_write: u64_at(usage, "cacheCreationInputTokens").unwrap_or(0),
        };
        let cost = f64_at(usage, "costUSD");
        let (before, cost_before) = totals.get(model).copied().unwrap_or_default();
        let turn_tokens = tokens.saturating_sub(&before);
        let turn_cost = cost.map(|c| (c - cost_before).max(0.0));
        totals.insert(model.clone(), (tokens, cost.unwrap_or(cost_before)));
        if turn_tokens != Tokens::default() || turn_cost.is_some_and(|c| c > 0.0) {
            out.push(ModelUsage {
                model: model.clone(),
                tokens: turn_tokens,
                cost_usd: turn_cost,
            });
        }
    }
    out
}

fn rate_limit_event(msg: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let Some(info) = msg.get("rate_limit_info").and_then(Value::as_object) else {
        return vec![notice("skipped a rate limit event without its info".into())];
    };
    let limit = str_at(info, "rateLimitType").map(|t| format!(" ({})", clip(t, 40)));
    let limit = limit.as_deref().unwrap_or("");
    match str_at(info, "status").unwrap_or("") {
        "rejected" => {
            state.rate_limited = true;
            vec![ProviderEvent::RateLimited {
                until: info
                    .get("resetsAt")
                    .and_then(Value::as_f64)
                    .map(epoch_millis),
                detail: format!("rate limit reached{limit}"),
            }]
        }
        "allowed" => {
            if std::mem::take(&mut state.rate_limited) {
                vec![ProviderEvent::RateLimitCleared]
            } else {
                Vec::new()
            }
        }
        "allowed_warning" => vec![notice(format!("nearing the rate limit{limit}"))],
        other => vec![notice(format!(
            "rate limit event with status {}",
            clip(if other.is_empty() { "(none)" } else { other }, 40)
        ))],
    }
}

/// `resetsAt` is in seconds since the epoch; a value that is clearly milliseconds
/// already is taken as such.
fn epoch_millis(value: f64) -> UnixMillis {
    let millis = if value > 1e11 { value } else { value * 1000.0 };
    millis as UnixMillis
}

fn control_request(msg: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let Some(request_id) = str_at(msg, "request_id") else {
        return vec![notice(
            "skipped a control request without a request id".into(),
        )];
    };
    let request = msg.get("request").and_then(Value::as_object);
    let subtype = request.and_then(|r| str_at(r, "subtype")).unwrap_or("");
    let (Some(request), "can_use_tool") = (request, subtype) else {
        let what = if subtype.is_empty() {
            "(none)"
        } else {
            subtype
        };
        state.outgoing.push(encode::error_response(
            request_id,
            &format!("drover does not handle control requests of subtype {what}"),
        ));
        return vec![notice(format!(
            "refused a control request of subtype {}",
            clip(what, 40)
        ))];
    };
    let Some(tool) = str_at(request, "tool_name") else {
        state.outgoing.push(encode::error_response(
            request_id,
            "a can_use_tool request needs a tool_name",
        ));
        return vec![notice(
            "refused a permission request without a tool name".into(),
        )];
    };
    let input = request.get("input").cloned().unwrap_or(Value::Null);
    let suggestions = request
        .get("permission_suggestions")
        .cloned()
        .unwrap_or(Value::Null);
    let ask = ask_of(tool, &input);
    let pending = Pending {
        request: PermissionRequest {
            request_id: request_id.to_string(),
            kind: ask.kind(),
            tool: tool.to_string(),
            always: always_of(&suggestions),
            ask,
            tool_use_id: str_at(request, "tool_use_id").map(str::to_string),
            blocked_path: str_at(request, "blocked_path").map(str::to_string),
        },
        input,
        suggestions,
    };
    let request = &pending.request;
    match policy::unattended_answer(state.policy, request.kind) {
        None => {
            let event = ProviderEvent::PermissionRequested(request.clone());
            state.pending.insert(request.request_id.clone(), pending);
            vec![event]
        }
        Some(answer) => {
            state.outgoing.push(answer_line(&pending, &answer));
            let verb = match answer {
                PermissionAnswer::Allow { .. } => "allowed",
                _ => "denied",
            };
            let what = match request.kind {
                RequestKind::Question => "a question".to_string(),
                RequestKind::Permission => clip(&pending.request.tool, 60),
            };
            vec![notice(format!(
                "{verb} {what} without asking (policy {})",
                state.policy.as_str()
            ))]
        }
    }
}

fn control_cancel(msg: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    match str_at(msg, "request_id") {
        // A request answered already (by the user or the policy) has nothing to withdraw.
        Some(id) => match state.pending.remove(id) {
            Some(_) => vec![ProviderEvent::PermissionWithdrawn {
                request_id: id.to_string(),
            }],
            None => Vec::new(),
        },
        None => vec![notice(
            "skipped a control cancel request without a request id".into(),
        )],
    }
}

fn control_response(msg: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let Some((response, id)) = msg
        .get("response")
        .and_then(Value::as_object)
        .and_then(|r| Some((r, str_at(r, "request_id")?)))
    else {
        return vec![notice(
            "skipped a control response without a request id".into(),
        )];
    };
    let Some(own) = state.own.remove(id) else {
        return vec![notice(format!(
            "skipped a control response to an unknown request {}",
            clip(id, 60)
        ))];
    };
    let failed = str_at(response, "subtype") == Some("error");
    let error = str_at(response, "error").unwrap_or("no reason given");
    match (own, failed) {
        (OwnRequest::Initialize, false) => {
            state.handshake = Handshake::Done;
            Vec::new()
        }
        (OwnRequest::Initialize, true) => {
            state.handshake = Handshake::Failed;
            vec![notice(format!(
                "the CLI refused the handshake: {}",
                clip(error, QUOTE_CHARS)
            ))]
        }
        (OwnRequest::Interrupt, false) => Vec::new(),
        (OwnRequest::Interrupt, true) => vec![notice(format!(
            "the CLI refused the interrupt: {}",
            clip(error, QUOTE_CHARS)
        ))],
    }
}

/// One line about a tool's result: its first non-empty line, clipped, and how many more.
/// A command's exit code from its tool result: 0 for a result that is not an error;
/// for an error, the code its `Exit code N` line gives (Claude Code's Bash tool writes
/// one), else none (a call refused, or cut before it exited).
fn tool_result_exit(is_error: bool, content: Option<&Value>) -> Option<i32> {
    if !is_error {
        return Some(0);
    }
    let texts: Vec<&str> = match content? {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.as_object())
            .filter_map(|b| str_at(b, "text"))
            .collect(),
        _ => Vec::new(),
    };
    texts.iter().flat_map(|t| t.lines()).find_map(|line| {
        let line = line.trim();
        let line = line.strip_prefix("Error: ").unwrap_or(line);
        line.strip_prefix("Exit code ")?.trim().parse().ok()
    })
}

fn tool_result_summary(content: Option<&Value>) -> String {
    let text = match content {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(blocks)) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| b.as_object())
                .filter(|b| str_at(b, "type") == Some("text"))
                .filter_map(|b| str_at(b, "text"))
                .collect();
            if texts.is_empty() {
                let image = blocks
                    .iter()
                    .filter_map(|b| b.as_object())
                    .any(|b| str_at(b, "type") == Some("image"));
                return if image { "(image)" } else { "(no output)" }.to_string();
            }
            Some(texts.join("\n"))
        }
        Some(other) => Some(other.to_string()),
    };
    match text {
        Some(text) => first_line_summary(&text, SUMMARY_CHARS),
        None => "(no output)".to_string(),
    }
}

/// Claude's usage object in drover's token classes.
pub fn usage_tokens(usage: &Map<String, Value>) -> Tokens {
    Tokens {
        input: u64_at(usage, "input_tokens").unwrap_or(0),
        output: u64_at(usage, "output_tokens").unwrap_or(0),
        reasoning: 0,
        cache_read: u64_at(usage, "cache_read_input_tokens").unwrap_or(0),
        cache_write: u64_at(usage, "cache_creation_input_tokens").unwrap_or(0),
    }
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
