//! OpenCode's server events, read side: one `/event` message in, drover events out, for
//! the one session a run owns; and the bodies drover posts back (pure).
//!
//! No I/O and no clock (`now` is passed in). [`ParseState`] carries what an event needs
//! from earlier ones: the session, the turn in flight (its messages, their tokens and
//! cost, its error), the permission requests awaiting an answer, and which text and tool
//! parts were already reported. What must stay true:
//! - no event panics or stops the run: what cannot be understood becomes a
//!   [`ProviderEvent::Notice`] (once per unknown event type, so a chatty server cannot
//!   flood the transcript); events of other sessions are ignored;
//! - a turn ends exactly once, with one `TurnCompleted`, when the session goes idle after
//!   it started: an `idle` that comes before any sign of the new turn (the tail of the
//!   previous one: OpenCode says idle as `session.status` and `session.idle`, and after
//!   an error or an abort says it all again once the failed message is completed) does
//!   not end it, unless an error for it came already; a message of an ended turn never
//!   counts in a later one;
//! - the `Usage` events of one message add up to that message's tokens (OpenCode repeats
//!   a message's running totals in every `message.updated`; only growth is reported);
//! - a turn's `model_usage` holds, per model (`providerID/modelID`), the sum of the final
//!   tokens and the final cost of the turn's assistant messages, as OpenCode reported them;
//! - a permission request or a question (`question.asked`) is shown once and answered at
//!   most once; one OpenCode settles without drover's answer is withdrawn; an errored
//!   turn withdraws what is left;
//! - a long answer streamed as deltas only (no drover event of their own) still gives a
//!   sign of life every [`PROGRESS_EVERY_MS`].

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::UnixMillis;
use crate::providers::wire::{clip, first_line_summary, str_at, u64_at};
use crate::providers::{
    Ask, ModelUsage, PermissionAnswer, PermissionRequest, ProviderEvent, Question, RequestKind,
    Tokens, TurnEnd, is_transient_status, notice,
};

use super::ask::{always_of, permission_ask, questions_of, tool_ask};

/// How long a Notice's quote may be.
const QUOTE_CHARS: usize = 120;
/// How long a tool result's one-line summary may be.
const SUMMARY_CHARS: usize = 160;
/// The message a denial without one carries (a reject without a message would stop the
/// whole turn; with one, the model hears it and goes on).
pub const DEFAULT_DENIAL: &str = "The user denied this.";

/// How far OpenCode's clock may be behind drover's when telling a message of the turn in
/// flight from an earlier one (same machine: only rounding and scheduling).
const CLOCK_SLACK_MS: UnixMillis = 2_000;

/// How often a long stream of deltas (which carry no drover event of their own) is
/// reported as a sign of life, so the dispatcher's silence timeout only catches a model
/// that says nothing at all.
pub const PROGRESS_EVERY_MS: UnixMillis = 60_000;

/// Event types that carry nothing for drover.
const QUIET_TYPES: &[&str] = &[
    "server.connected",
    "server.heartbeat",
    "server.instance.disposed",
    "message.part.removed",
    "message.removed",
    "session.created",
    "session.updated",
    "session.deleted",
    "session.diff",
    "session.compacted",
    "file.edited",
    "file.watcher.updated",
    "todo.updated",
    "command.executed",
    "installation.updated",
    "installation.update-available",
    "project.updated",
    "vcs.branch.updated",
    "lsp.updated",
    "lsp.client.diagnostics",
    "mcp.tools.changed",
    "storage.write",
    "ide.installed",
    // Seen from 1.18.33 at start: its plugins, model catalog and integrations loading.
    "plugin.added",
    "catalog.updated",
    "reference.updated",
    "integration.updated",
];

/// Part types that carry nothing for drover (their content comes in other parts or in
/// `message.updated`).
const QUIET_PARTS: &[&str] = &[
    "step-start",
    "step-finish",
    "snapshot",
    "patch",
    "agent",
    "file",
    "compaction",
    "subtask",
    "retry",
];

/// What a turn in flight has seen.
#[derive(Debug, Clone, Default)]
struct Turn {
    started_at: UnixMillis,
    /// Some event showed the turn under way (busy, a new message, an error).
    active: bool,
    /// The turn's assistant messages, in the order first seen.
    messages: Vec<String>,
    error: Option<TurnError>,
}

/// Why a turn failed, from `session.error` or an assistant message's `error`.
#[derive(Debug, Clone, PartialEq)]
struct TurnError {
    name: String,
    message: Option<String>,
    status: Option<u16>,
    retryable: Option<bool>,
}

/// One assistant message's numbers, as last reported.
#[derive(Debug, Clone, Default)]
struct Message {
    model: Option<String>,
    tokens: Tokens,
    cost: Option<f64>,
    /// Text parts, by part id, in the order first seen.
    texts: Vec<(String, String)>,
}

/// An answer to post: to `POST /permission/{request_id}/reply` ([`reply_body`]) or, on
/// servers without that route, `POST /session/{session_id}/permissions/{request_id}`
/// ([`legacy_reply_body`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// OpenCode's id of the permission request.
    pub request_id: String,
    /// The session that asked (the older route names it).
    pub session_id: String,
    /// `once`, `always` or `reject`.
    pub reply: &'static str,
    /// Why, with a `reject`, for the model.
    pub message: Option<String>,
}

/// What drover posts to answer a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// A permission answer ([`Reply`]).
    Permission(Reply),
    /// `POST /question/{request_id}/reply` with this body ([`question_reply_body`]).
    QuestionReply {
        /// OpenCode's id of the question.
        request_id: String,
        /// The answers, in the question's shape.
        body: Value,
    },
    /// `POST /question/{request_id}/reject`.
    QuestionReject {
        /// OpenCode's id of the question.
        request_id: String,
    },
}

/// The body of `POST /question/{id}/reply`: per question, in order, the labels chosen
/// (or a typed answer). `answers` is keyed by the question's text, or by its header; the
/// answer to a question that takes several options may name several of its labels,
/// separated by commas.
pub fn question_reply_body(questions: &[Question], answers: &BTreeMap<String, String>) -> Value {
    let list: Vec<Value> = questions
        .iter()
        .map(|q| {
            let answer = answers
                .get(&q.question)
                .or_else(|| q.header.as_ref().and_then(|h| answers.get(h)));
            match answer {
                Some(answer) => json!(chosen_labels(q, answer)),
                None => json!([]),
            }
        })
        .collect();
    json!({ "answers": list })
}

/// The labels an answer chooses: several, when the question takes several and every
/// comma-separated part is one of its labels; else the answer as given.
fn chosen_labels(question: &Question, answer: &str) -> Vec<String> {
    if question.multi_select {
        let parts: Vec<&str> = answer.split(',').map(str::trim).collect();
        let labelled = parts
            .iter()
            .all(|p| question.options.iter().any(|o| o.label == *p));
        if parts.len() > 1 && labelled {
            return parts.into_iter().map(str::to_string).collect();
        }
    }
    vec![answer.to_string()]
}

/// The body of `POST /permission/{id}/reply`.
pub fn reply_body(reply: &Reply) -> Value {
    match &reply.message {
        Some(message) => json!({"reply": reply.reply, "message": message}),
        None => json!({"reply": reply.reply}),
    }
}

/// The body of the older `POST /session/{sid}/permissions/{id}`.
pub fn legacy_reply_body(reply: &Reply) -> Value {
    json!({"response": reply.reply})
}

/// The body of `POST /session/{id}/prompt_async`: the prompt, and the model when drover
/// names one (`provider/model`, split at the first `/`).
pub fn prompt_body(prompt: &str, model: Option<&str>) -> Value {
    let mut body = json!({"parts": [{"type": "text", "text": prompt}]});
    if let Some((provider, model)) = model.and_then(split_model) {
        body["model"] = json!({"providerID": provider, "modelID": model});
    }
    body
}

/// `provider/model` → (`provider`, `model`); `None` when either side is empty.
pub fn split_model(model: &str) -> Option<(&str, &str)> {
    let (provider, id) = model.split_once('/')?;
    (!provider.is_empty() && !id.is_empty()).then_some((provider, id))
}

/// What parsing remembers between events (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct ParseState {
    session_id: String,
    /// The model last reported in a `Session` event.
    model: Option<String>,
    turn: Option<Turn>,
    messages: HashMap<String, Message>,
    user_messages: HashSet<String>,
    /// Messages of ended turns, and messages created before the open turn started: a
    /// late update of one (OpenCode completes a failed turn's message after saying idle,
    /// then says idle again) never counts in the open turn.
    old_messages: HashSet<String>,
    /// Text, reasoning and tool parts already reported (tools: started, finished).
    parts_done: HashSet<String>,
    tools_started: HashSet<String>,
    pending: HashMap<String, PermissionRequest>,
    rate_limited: bool,
    unknown_types: HashSet<String>,
    /// When parsing last gave drover an event.
    last_sign_at: UnixMillis,
    /// Characters streamed since then.
    streamed_chars: usize,
}

impl ParseState {
    /// For the events of session `session_id`, whose model drover reported as `model`.
    pub fn new(session_id: &str, model: Option<&str>) -> ParseState {
        ParseState {
            session_id: session_id.to_string(),
            model: model.map(str::to_string),
            ..ParseState::default()
        }
    }

    /// The one session this run owns (events of any other are ignored).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Whether a turn was started and has not ended.
    pub fn turn_open(&self) -> bool {
        self.turn.is_some()
    }

    /// A turn was sent (`prompt_async`) at `now`. A turn still open is replaced.
    pub fn begin_turn(&mut self, now: UnixMillis) {
        self.last_sign_at = now;
        self.streamed_chars = 0;
        self.turn = Some(Turn {
            started_at: now,
            ..Turn::default()
        });
    }

    /// Ends the open turn as failed without OpenCode (the prompt could not be sent).
    pub fn fail_turn(&mut self, why: &str, now: UnixMillis) -> Vec<ProviderEvent> {
        if let Some(turn) = self.turn.as_mut() {
            turn.active = true;
            turn.error = Some(TurnError {
                name: "prompt_failed".into(),
                message: Some(why.to_string()),
                status: None,
                retryable: None,
            });
        }
        self.end_turn(now)
    }

    /// What answers request `request_id`, which is then forgotten. `Err` holds a notice
    /// when the answer cannot apply: the id is not pending, question answers were given
    /// to a permission request, or an allow to a question (either then stays pending).
    pub fn answer(
        &mut self,
        request_id: &str,
        answer: &PermissionAnswer,
    ) -> Result<Outgoing, String> {
        let Some(request) = self.pending.get(request_id) else {
            return Err(format!(
                "dropped an answer to request {}: it is not pending (answered, withdrawn or \
                 never asked)",
                clip(request_id, 60)
            ));
        };
        let deny_message = |message: &Option<String>| {
            message
                .as_deref()
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
        };
        let outgoing = match (request.kind, answer) {
            (RequestKind::Permission, PermissionAnswer::Allow { always }) => {
                Outgoing::Permission(Reply {
                    request_id: request_id.to_string(),
                    session_id: self.session_id.clone(),
                    reply: if *always { "always" } else { "once" },
                    message: None,
                })
            }
            (RequestKind::Permission, PermissionAnswer::Deny { message }) => {
                Outgoing::Permission(Reply {
                    request_id: request_id.to_string(),
                    session_id: self.session_id.clone(),
                    reply: "reject",
                    message: Some(
                        deny_message(message).unwrap_or_else(|| DEFAULT_DENIAL.to_string()),
                    ),
                })
            }
            (RequestKind::Permission, PermissionAnswer::Answer { .. }) => {
                return Err(format!(
                    "dropped an answer to request {}: it asks for a permission, so it takes \
                     allow or deny, not answers",
                    clip(request_id, 60)
                ));
            }
            (RequestKind::Question, PermissionAnswer::Answer { answers }) => {
                Outgoing::QuestionReply {
                    request_id: request_id.to_string(),
                    body: question_reply_body(request.ask.questions(), answers),
                }
            }
            // A reason is handed to the model as the answer to every question, so the
            // turn goes on; a bare denial dismisses the question.
            (RequestKind::Question, PermissionAnswer::Deny { message }) => {
                match deny_message(message) {
                    Some(reason) => {
                        let questions = request.ask.questions().len();
                        Outgoing::QuestionReply {
                            request_id: request_id.to_string(),
                            body: json!({ "answers": vec![json!([reason]); questions.max(1)] }),
                        }
                    }
                    None => Outgoing::QuestionReject {
                        request_id: request_id.to_string(),
                    },
                }
            }
            (RequestKind::Question, PermissionAnswer::Allow { .. }) => {
                return Err(format!(
                    "dropped an answer to request {}: it is a question, so it takes answers \
                     or deny, not allow",
                    clip(request_id, 60)
                ));
            }
        };
        self.pending.remove(request_id);
        Ok(outgoing)
    }

    /// Forget the pending requests (the server is going away); their ids.
    pub fn drain_pending(&mut self) -> Vec<String> {
        let mut ids: Vec<String> = self.pending.drain().map(|(id, _)| id).collect();
        ids.sort();
        ids
    }
}

/// Turn the data of one server-sent event into drover events (possibly none).
pub fn parse_event(data: &str, state: &mut ParseState, now: UnixMillis) -> Vec<ProviderEvent> {
    let events = parse_one(data, state, now);
    if !events.is_empty() {
        state.last_sign_at = now;
    }
    events
}

fn parse_one(data: &str, state: &mut ParseState, now: UnixMillis) -> Vec<ProviderEvent> {
    let trimmed = data.trim();
    if trimmed.is_empty() {
        return Vec::new();
    }
    let Ok(value) = serde_json::from_str::<Value>(trimmed) else {
        return vec![notice(format!(
            "skipped an event that is not JSON: {}",
            clip(trimmed, QUOTE_CHARS)
        ))];
    };
    let Some(event) = value.as_object() else {
        return vec![notice(format!(
            "skipped an event that is not a JSON object: {}",
            clip(trimmed, QUOTE_CHARS)
        ))];
    };
    let Some(kind) = str_at(event, "type") else {
        return vec![notice(format!(
            "skipped an event without a type: {}",
            clip(trimmed, QUOTE_CHARS)
        ))];
    };
    let empty = Map::new();
    let props = event
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    match kind {
        "message.updated" => message_updated(props, state),
        "message.part.updated" => part_updated(props, state),
        "message.part.delta" => part_delta(props, state, now),
        "session.status" => session_status(props, state, now),
        "session.idle" => {
            if str_at(props, "sessionID") == Some(state.session_id.as_str()) {
                state.end_turn(now)
            } else {
                Vec::new()
            }
        }
        "session.error" => session_error(props, state),
        "permission.asked" | "permission.updated" => permission_asked(props, state),
        "permission.replied" => permission_replied(props, state),
        "question.asked" => question_asked(props, state),
        "question.replied" | "question.rejected" => permission_replied(props, state),
        quiet if QUIET_TYPES.contains(&quiet) => Vec::new(),
        other => {
            if state.unknown_types.len() < 64 && state.unknown_types.insert(other.to_string()) {
                vec![notice(format!(
                    "skipped events of unknown type {}",
                    clip(other, 60)
                ))]
            } else {
                Vec::new()
            }
        }
    }
}

impl ParseState {
    fn ours(&self, props: &Map<String, Value>) -> bool {
        str_at(props, "sessionID") == Some(self.session_id.as_str())
    }

    fn mark_active(&mut self) {
        if let Some(turn) = self.turn.as_mut() {
            turn.active = true;
        }
    }

    /// The session went idle: the open turn ends, if it started (see the module doc).
    fn end_turn(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        let Some(turn) = self.turn.as_ref() else {
            return Vec::new();
        };
        if !turn.active && turn.error.is_none() {
            return Vec::new();
        }
        let Some(turn) = self.turn.take() else {
            return Vec::new();
        };
        let mut events = Vec::new();
        // Text parts OpenCode never marked finished are reported now.
        for id in &turn.messages {
            let Some(message) = self.messages.get(id) else {
                continue;
            };
            for (part, text) in &message.texts {
                if !text.trim().is_empty() && self.parts_done.insert(part.clone()) {
                    events.push(ProviderEvent::AssistantText { text: text.clone() });
                }
            }
        }
        if turn.error.is_none() && std::mem::take(&mut self.rate_limited) {
            events.push(ProviderEvent::RateLimitCleared);
        }
        self.rate_limited = false;
        if turn.error.is_some() {
            events.extend(
                self.drain_pending()
                    .into_iter()
                    .map(|request_id| ProviderEvent::PermissionWithdrawn { request_id }),
            );
        }
        let mut model_usage: Vec<ModelUsage> = Vec::new();
        let mut tokens = Tokens::default();
        let mut text = None;
        for id in &turn.messages {
            self.old_messages.insert(id.clone());
            let Some(message) = self.messages.remove(id) else {
                continue;
            };
            tokens.add(&message.tokens);
            let model = message.model.clone().unwrap_or_else(|| "unknown".into());
            match model_usage.iter_mut().find(|u| u.model == model) {
                Some(usage) => {
                    usage.tokens.add(&message.tokens);
                    usage.cost_usd = match (usage.cost_usd, message.cost) {
                        (Some(a), Some(b)) => Some(a + b),
                        (a, b) => a.or(b),
                    };
                }
                None => model_usage.push(ModelUsage {
                    model,
                    tokens: message.tokens,
                    cost_usd: message.cost,
                }),
            }
            let joined: Vec<&str> = message
                .texts
                .iter()
                .map(|(_, t)| t.as_str())
                .filter(|t| !t.trim().is_empty())
                .collect();
            if !joined.is_empty() {
                text = Some(joined.join("\n"));
            }
        }
        model_usage
            .retain(|u| u.tokens != Tokens::default() || u.cost_usd.is_some_and(|c| c > 0.0));
        let (is_error, subtype, terminal_reason, status, transient) = match &turn.error {
            None => (false, "success".to_string(), None, None, false),
            Some(error) => {
                let aborted = error.name == "MessageAbortedError";
                let transient = !aborted
                    && (error.retryable == Some(true)
                        || error.status.is_some_and(is_transient_status));
                let subtype = if aborted {
                    "interrupted".to_string()
                } else {
                    error.name.clone()
                };
                (
                    true,
                    subtype,
                    Some(error.name.clone()),
                    error.status,
                    transient,
                )
            }
        };
        let api_message = turn.error.as_ref().and_then(|e| e.message.clone());
        let text = match (&turn.error, text) {
            (Some(error), None) => error.message.clone(),
            (_, text) => text,
        };
        events.push(ProviderEvent::TurnCompleted(TurnEnd {
            is_error,
            subtype,
            text,
            session_id: Some(self.session_id.clone()),
            total_cost_usd: None,
            tokens,
            model_usage,
            num_turns: None,
            duration_ms: u64::try_from(now.saturating_sub(turn.started_at)).ok(),
            api_error_status: status,
            api_message,
            terminal_reason,
            structured_output: None,
            permission_denials: 0,
            transient,
        }));
        events
    }
}

fn message_updated(props: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let Some(info) = props.get("info").and_then(Value::as_object) else {
        return vec![notice("skipped a message update without its info".into())];
    };
    if !state.ours(info) {
        return Vec::new();
    }
    let Some(id) = str_at(info, "id") else {
        return vec![notice(
            "skipped a message update without a message id".into(),
        )];
    };
    let created = info
        .get("time")
        .and_then(Value::as_object)
        .and_then(|t| t.get("created"))
        .and_then(Value::as_f64)
        .map(epoch_millis);
    let before_turn = state.old_messages.contains(id)
        || match (&state.turn, created) {
            (Some(turn), Some(created)) => created < turn.started_at.saturating_sub(CLOCK_SLACK_MS),
            _ => false,
        };
    if before_turn {
        state.old_messages.insert(id.to_string());
    }
    match str_at(info, "role") {
        Some("user") => {
            if state.user_messages.insert(id.to_string()) && !before_turn {
                state.mark_active();
            }
            Vec::new()
        }
        Some("assistant") if before_turn => Vec::new(),
        Some("assistant") => assistant_message(id, info, state),
        other => vec![notice(format!(
            "skipped a message update with role {}",
            clip(other.unwrap_or("(none)"), 40)
        ))],
    }
}

fn assistant_message(
    id: &str,
    info: &Map<String, Value>,
    state: &mut ParseState,
) -> Vec<ProviderEvent> {
    let mut events = Vec::new();
    let Some(turn) = state.turn.as_mut() else {
        // A late update of a message of an ended turn: its numbers were booked already.
        return events;
    };
    turn.active = true;
    if !turn.messages.iter().any(|m| m == id) {
        turn.messages.push(id.to_string());
    }
    if let Some(error) = info.get("error").and_then(Value::as_object)
        && turn.error.is_none()
    {
        turn.error = Some(turn_error(error));
    }
    let model = match (str_at(info, "providerID"), str_at(info, "modelID")) {
        (Some(p), Some(m)) => Some(format!("{p}/{m}")),
        (None, Some(m)) => Some(m.to_string()),
        _ => None,
    };
    if model.is_some() && model != state.model {
        state.model = model.clone();
        events.push(ProviderEvent::Session {
            session_id: state.session_id.clone(),
            model: model.clone(),
        });
    }
    let message = state.messages.entry(id.to_string()).or_default();
    if model.is_some() {
        message.model = model.clone();
    }
    if let Some(cost) = info.get("cost").and_then(Value::as_f64)
        && cost.is_finite()
        && cost >= 0.0
    {
        message.cost = Some(message.cost.map_or(cost, |c| c.max(cost)));
    }
    if let Some(tokens) = info.get("tokens").and_then(Value::as_object) {
        let now = message_tokens(tokens);
        let delta = now.saturating_sub(&message.tokens);
        message.tokens = message.tokens.field_max(&now);
        if delta != Tokens::default() {
            events.push(ProviderEvent::Usage {
                model: message.model.clone(),
                tokens: delta,
            });
        }
    }
    events
}

/// A message's `tokens` (`input`, `output`, `reasoning`, `cache.read`, `cache.write`).
pub(crate) fn message_tokens(tokens: &Map<String, Value>) -> Tokens {
    let cache = tokens.get("cache").and_then(Value::as_object);
    Tokens {
        input: u64_at(tokens, "input").unwrap_or(0),
        output: u64_at(tokens, "output").unwrap_or(0),
        reasoning: u64_at(tokens, "reasoning").unwrap_or(0),
        cache_read: cache.and_then(|c| u64_at(c, "read")).unwrap_or(0),
        cache_write: cache.and_then(|c| u64_at(c, "write")).unwrap_or(0),
    }
}

fn part_updated(props: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let Some(part) = props.get("part").and_then(Value::as_object) else {
        return vec![notice("skipped a part update without its part".into())];
    };
    if !state.ours(part) {
        return Vec::new();
    }
    let (Some(id), Some(message_id)) = (str_at(part, "id"), str_at(part, "messageID")) else {
        return vec![notice(
            "skipped a part without an id or a message id".into(),
        )];
    };
    if state.user_messages.contains(message_id)
        || state.old_messages.contains(message_id)
        || state.turn.is_none()
    {
        return Vec::new();
    }
    state.mark_active();
    let mut events = Vec::new();
    if std::mem::take(&mut state.rate_limited) {
        events.push(ProviderEvent::RateLimitCleared);
    }
    let finished = part
        .get("time")
        .and_then(Value::as_object)
        .is_some_and(|t| t.get("end").is_some_and(|e| !e.is_null()));
    match str_at(part, "type").unwrap_or("") {
        "text" => {
            if part.get("synthetic").and_then(Value::as_bool) == Some(true) {
                return events;
            }
            let text = str_at(part, "text").unwrap_or("").to_string();
            if let Some(turn) = state.turn.as_mut()
                && !turn.messages.iter().any(|m| m == message_id)
            {
                turn.messages.push(message_id.to_string());
            }
            let message = state.messages.entry(message_id.to_string()).or_default();
            match message.texts.iter_mut().find(|(p, _)| p == id) {
                Some((_, kept)) => *kept = text.clone(),
                None => message.texts.push((id.to_string(), text.clone())),
            }
            if finished && !text.trim().is_empty() && state.parts_done.insert(id.to_string()) {
                events.push(ProviderEvent::AssistantText { text });
            }
        }
        "reasoning" => {
            if finished && state.parts_done.insert(id.to_string()) {
                events.push(ProviderEvent::Thinking {
                    chars: str_at(part, "text").map_or(0, |t| t.chars().count()),
                });
            }
        }
        "tool" => events.extend(tool_part(id, part, state)),
        quiet if QUIET_PARTS.contains(&quiet) => {}
        other => events.push(notice(format!(
            "skipped a part of unknown type {}",
            clip(if other.is_empty() { "(none)" } else { other }, 40)
        ))),
    }
    events
}

fn part_delta(
    props: &Map<String, Value>,
    state: &mut ParseState,
    now: UnixMillis,
) -> Vec<ProviderEvent> {
    let Some(message) = str_at(props, "messageID") else {
        return Vec::new();
    };
    if !state.ours(props)
        || state.turn.is_none()
        || state.user_messages.contains(message)
        || state.old_messages.contains(message)
    {
        return Vec::new();
    }
    state.streamed_chars += str_at(props, "delta").map_or(0, |d| d.chars().count());
    if now.saturating_sub(state.last_sign_at) < PROGRESS_EVERY_MS {
        return Vec::new();
    }
    let chars = std::mem::take(&mut state.streamed_chars);
    vec![notice(format!(
        "the model is still answering ({chars} characters in the last minute or so)"
    ))]
}

fn tool_part(id: &str, part: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let call_id = str_at(part, "callID").unwrap_or(id).to_string();
    let name = str_at(part, "tool").unwrap_or("tool").to_string();
    let empty = Map::new();
    let tool_state = part
        .get("state")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let status = str_at(tool_state, "status").unwrap_or("");
    let mut events = Vec::new();
    let start = |state: &mut ParseState, events: &mut Vec<ProviderEvent>| {
        if state.tools_started.insert(call_id.clone()) {
            events.push(ProviderEvent::ToolStarted {
                tool_use_id: call_id.clone(),
                name: name.clone(),
                ask: tool_ask(&name, tool_state.get("input").unwrap_or(&Value::Null)),
            });
        }
    };
    match status {
        // The input is still streaming.
        "pending" => {}
        "running" => start(state, &mut events),
        "completed" | "error" => {
            start(state, &mut events);
            if state.parts_done.insert(format!("tool:{call_id}")) {
                let is_error = status == "error";
                let text = if is_error {
                    str_at(tool_state, "error")
                } else {
                    str_at(tool_state, "output")
                        .filter(|o| !o.trim().is_empty())
                        .or_else(|| str_at(tool_state, "title"))
                };
                let summary = first_line_summary(text.unwrap_or(""), SUMMARY_CHARS);
                // The bash tool's metadata carries its exit code; a completed call with
                // none exited 0 as far as OpenCode says.
                let exit_code = tool_state
                    .get("metadata")
                    .and_then(|m| m.get("exit").or_else(|| m.get("exitCode")))
                    .and_then(Value::as_i64)
                    .and_then(|code| i32::try_from(code).ok())
                    .or((!is_error).then_some(0));
                events.push(ProviderEvent::ToolFinished {
                    tool_use_id: call_id.clone(),
                    is_error,
                    exit_code,
                    summary,
                });
            }
        }
        other => events.push(notice(format!(
            "skipped a tool part with status {}",
            clip(if other.is_empty() { "(none)" } else { other }, 40)
        ))),
    }
    events
}

fn session_status(
    props: &Map<String, Value>,
    state: &mut ParseState,
    now: UnixMillis,
) -> Vec<ProviderEvent> {
    if !state.ours(props) {
        return Vec::new();
    }
    let Some(status) = props.get("status").and_then(Value::as_object) else {
        return vec![notice("skipped a session status without its status".into())];
    };
    match str_at(status, "type").unwrap_or("") {
        "idle" => state.end_turn(now),
        "busy" => {
            state.mark_active();
            if std::mem::take(&mut state.rate_limited) {
                vec![ProviderEvent::RateLimitCleared]
            } else {
                Vec::new()
            }
        }
        "retry" => {
            state.mark_active();
            state.rate_limited = true;
            let mut detail = str_at(status, "message")
                .map(|m| clip(m, QUOTE_CHARS))
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| "the model API asks to retry".into());
            if let Some(attempt) = u64_at(status, "attempt") {
                detail.push_str(&format!(" (retry {attempt})"));
            }
            let until = status
                .get("next")
                .and_then(Value::as_f64)
                .filter(|n| n.is_finite() && *n > 0.0)
                .map(epoch_millis)
                .filter(|u| *u > now);
            vec![ProviderEvent::RateLimited { until, detail }]
        }
        other => vec![notice(format!(
            "skipped a session status of type {}",
            clip(if other.is_empty() { "(none)" } else { other }, 40)
        ))],
    }
}

fn session_error(props: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    let error = props.get("error").and_then(Value::as_object);
    let described = error.map(turn_error);
    let ours = state.ours(props);
    match (ours, state.turn.as_mut(), described) {
        (true, Some(turn), Some(error)) => {
            turn.active = true;
            // The message's own error (same failure) may have come first; the session's
            // is the fuller one.
            turn.error = Some(error);
            Vec::new()
        }
        (true, _, described) => {
            let what = described
                .map(|e| describe_error(&e))
                .unwrap_or_else(|| "(no details)".into());
            vec![notice(format!("OpenCode reports an error: {what}"))]
        }
        // Another session's, or one without a session: worth a line only when it has
        // no session (it may be the server's own).
        (false, _, described) if str_at(props, "sessionID").is_none() => {
            let what = described
                .map(|e| describe_error(&e))
                .unwrap_or_else(|| "(no details)".into());
            vec![notice(format!("OpenCode reports an error: {what}"))]
        }
        _ => Vec::new(),
    }
}

fn turn_error(error: &Map<String, Value>) -> TurnError {
    let data = error.get("data").and_then(Value::as_object);
    TurnError {
        name: str_at(error, "name").unwrap_or("UnknownError").to_string(),
        message: data
            .and_then(|d| str_at(d, "message"))
            .map(|m| clip(m, 400)),
        status: data
            .and_then(|d| u64_at(d, "statusCode"))
            .and_then(|s| u16::try_from(s).ok()),
        retryable: data
            .and_then(|d| d.get("isRetryable"))
            .and_then(Value::as_bool),
    }
}

fn describe_error(error: &TurnError) -> String {
    let mut out = clip(&error.name, 60);
    if let Some(status) = error.status {
        out.push_str(&format!(" (HTTP {status})"));
    }
    if let Some(message) = &error.message {
        out.push_str(": ");
        out.push_str(&clip(message, QUOTE_CHARS));
    }
    out
}

fn permission_asked(props: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    if !state.ours(props) {
        return Vec::new();
    }
    let Some(id) = str_at(props, "id") else {
        return vec![notice("skipped a permission request without an id".into())];
    };
    if state.pending.contains_key(id) {
        return Vec::new();
    }
    // 1.x names the permission (`bash`, `edit`); older servers a `type`.
    let Some(tool) = str_at(props, "permission").or_else(|| str_at(props, "type")) else {
        return vec![notice(format!(
            "skipped permission request {} that names no permission",
            clip(id, 60)
        ))];
    };
    state.mark_active();
    let mut input = Map::new();
    for key in ["patterns", "metadata", "title", "pattern"] {
        if let Some(v) = props.get(key).filter(|v| !v.is_null()) {
            input.insert(key.to_string(), v.clone());
        }
    }
    let tool_use_id = props
        .get("tool")
        .and_then(Value::as_object)
        .and_then(|t| str_at(t, "callID"))
        .or_else(|| str_at(props, "callID"))
        .map(str::to_string);
    let ask = permission_ask(tool, props, &Value::Object(input));
    let request = PermissionRequest {
        request_id: id.to_string(),
        kind: ask.kind(),
        tool: tool.to_string(),
        ask,
        always: always_of(tool, props.get("always")),
        tool_use_id,
        blocked_path: None,
    };
    state.pending.insert(id.to_string(), request.clone());
    vec![ProviderEvent::PermissionRequested(request)]
}

fn question_asked(props: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    if !state.ours(props) {
        return Vec::new();
    }
    let Some(id) = str_at(props, "id") else {
        return vec![notice("skipped a question without an id".into())];
    };
    if state.pending.contains_key(id) {
        return Vec::new();
    }
    let Some(questions) = props.get("questions").filter(|q| q.is_array()) else {
        return vec![notice(format!(
            "skipped question {} that asks nothing",
            clip(id, 60)
        ))];
    };
    state.mark_active();
    let request = PermissionRequest {
        request_id: id.to_string(),
        kind: RequestKind::Question,
        tool: "question".into(),
        ask: Ask::Question {
            questions: questions_of(questions),
        },
        always: None,
        tool_use_id: props
            .get("tool")
            .and_then(Value::as_object)
            .and_then(|t| str_at(t, "callID"))
            .map(str::to_string),
        blocked_path: None,
    };
    state.pending.insert(id.to_string(), request.clone());
    vec![ProviderEvent::PermissionRequested(request)]
}

fn permission_replied(props: &Map<String, Value>, state: &mut ParseState) -> Vec<ProviderEvent> {
    if !state.ours(props) {
        return Vec::new();
    }
    let Some(id) = str_at(props, "requestID").or_else(|| str_at(props, "permissionID")) else {
        return vec![notice(
            "skipped a permission reply without a request id".into(),
        )];
    };
    match state.pending.remove(id) {
        Some(_) => vec![ProviderEvent::PermissionWithdrawn {
            request_id: id.to_string(),
        }],
        // Drover's own answer coming back.
        None => Vec::new(),
    }
}

/// A timestamp in milliseconds since the epoch; one that is clearly in seconds is
/// converted.
fn epoch_millis(value: f64) -> UnixMillis {
    let millis = if value > 1e11 { value } else { value * 1000.0 };
    if millis >= UnixMillis::MAX as f64 {
        UnixMillis::MAX
    } else {
        millis as UnixMillis
    }
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
