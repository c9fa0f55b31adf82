//! The `codex app-server` conversation as a state machine: JSON-RPC lines in, drover
//! events and JSON-RPC lines out (docs/PROVIDERS.md §"codex app-server").
//!
//! Pure: no I/O; the clock comes in as `now`. [`AppState`] is the app-server's
//! [`Protocol`]: the session loop ([`crate::providers::session`], started by
//! [`super::app_server`]) feeds it the child's lines, drover's commands and the time,
//! writes what it queues to the child and forwards the events. What must stay true:
//! - the handshake is done when `initialize` is answered (the loop then sends `Ready`,
//!   with the version the answer's `userAgent` names); `Session` follows as soon as the
//!   thread id is known;
//! - every client request has a deadline ([`Bounds`]); a request that gets an error or
//!   no answer in time is handled as a failure of what it asked for (an `initialize`
//!   ends the handshake, a `thread/start` or `turn/start` ends the turn), never a hang;
//!   JSON-RPC error -32001 (the server is overloaded) is transient;
//! - each `turn/start` ends in exactly one `TurnCompleted` (from `turn/completed`, a
//!   failed request, or an expired one); a late `turn/completed` for a turn already
//!   ended is dropped;
//! - a server request is answered at most once: by drover's answer, by `cancel` on an
//!   interrupt, or with a JSON-RPC error when drover does not handle its method; one the
//!   server resolves by itself is reported withdrawn;
//! - nothing the server writes panics; what cannot be understood is a `Notice`.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use crate::UnixMillis;
use crate::providers::ask::{FOR_THE_RUN, quoted_code};
use crate::providers::session::{Handshake, Protocol};
use crate::providers::{
    AlwaysOption, Ask, EditedFile, LaunchSpec, PermissionAnswer, PermissionRequest, ProviderEvent,
    Tokens, TurnEnd, notice,
};
use crate::text::all_of;

use super::args::{app_server_args, sandbox};
use super::encode;
use super::protocol::{
    ErrorClass, changes_of, changes_to_ask, classify_turn_error, clip, command_ask,
    is_retry_message, item_completed, item_started, model_usage, rate_limited, str_of,
    usage_tokens, version_of,
};

/// While the model streams (message or reasoning deltas, which drover does not keep),
/// at most one `Thinking` per this many milliseconds says it is still at work, so a
/// long answer is not taken for silence.
pub const STREAMING_SIGN_MS: i64 = 30_000;

/// JSON-RPC error code of an overloaded app-server.
pub const OVERLOADED: i64 = -32001;

/// How long each client request may wait for its answer, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `initialize`: the handshake (its failure ends the run without `Ready`).
    pub initialize: i64,
    /// `thread/start` or `thread/resume` (a resume reads the thread from disk).
    pub thread: i64,
    /// `turn/start` (its failure ends the turn, as transient).
    pub turn_start: i64,
    /// `turn/interrupt`.
    pub interrupt: i64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            initialize: 60_000,
            thread: 60_000,
            turn_start: 30_000,
            interrupt: 10_000,
        }
    }
}

impl Bounds {
    fn of(&self, kind: RequestKindOut) -> i64 {
        match kind {
            RequestKindOut::Initialize => self.initialize,
            RequestKindOut::Thread => self.thread,
            RequestKindOut::TurnStart => self.turn_start,
            RequestKindOut::Interrupt => self.interrupt,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RequestKindOut {
    Initialize,
    Thread,
    TurnStart,
    Interrupt,
}

#[derive(Debug, Clone)]
struct PendingRequest {
    kind: RequestKindOut,
    method: &'static str,
    deadline: UnixMillis,
}

/// The turn in flight.
#[derive(Debug, Clone, Default)]
struct Turn {
    /// Known from the `turn/start` answer (or `turn/started`).
    id: Option<String>,
    tokens: Tokens,
    /// The last agent message.
    text: Option<String>,
    /// The last error Codex gave up on (`error` with `willRetry: false`).
    error: Option<(String, ErrorClass)>,
    /// An interrupt was asked before the turn's id was known.
    interrupt_wanted: bool,
    /// Token updates naming a turn while this turn's id was not known yet: a resumed
    /// thread repeats its last turn's usage (with that turn's id) right after
    /// `thread/resume`, before `turn/start` is answered. Counted once the id is known,
    /// if it is this turn's.
    unplaced_usage: Vec<(String, Tokens)>,
}

/// A server request waiting for drover's answer.
#[derive(Debug, Clone)]
struct Approval {
    /// The id exactly as the server sent it.
    id: Value,
    /// The server offers `acceptForSession` (it lists the decisions it takes, or lists
    /// none, in which case every decision is taken).
    for_session: bool,
}

/// The app-server conversation of one run.
#[derive(Debug)]
pub struct AppState {
    cwd: String,
    sandbox: &'static str,
    model: Option<String>,
    effort: Option<String>,
    resume: Option<String>,
    bounds: Bounds,
    next_id: u64,
    pending: BTreeMap<u64, PendingRequest>,
    handshake: Handshake,
    version: Option<String>,
    thread_id: Option<String>,
    /// Why the thread could not be opened: every turn ends with it.
    thread_failed: Option<TurnEnd>,
    /// Prompts waiting for the thread or for the turn in flight.
    queued: VecDeque<String>,
    turn: Option<Turn>,
    approvals: BTreeMap<String, Approval>,
    /// This process's tag, before Codex's own id in each request id
    /// ([`crate::providers::launch_tag`]).
    pub request_tag: String,
    /// File changes by item id (from `item/started`), shown with their approval request.
    file_changes: BTreeMap<String, Vec<EditedFile>>,
    rate_limited: bool,
    /// Characters streamed since the last sign of streaming, and when that was.
    streamed_chars: usize,
    last_streaming_sign: UnixMillis,
    outgoing: Vec<String>,
}

impl Protocol for AppState {
    const NAME: &'static str = "Codex";

    fn args(&self, spec: &LaunchSpec) -> Vec<String> {
        app_server_args(spec)
    }

    fn version(&self) -> Option<String> {
        self.version.clone()
    }

    /// Opens the conversation: queues `initialize`.
    fn start(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        self.request(
            RequestKindOut::Initialize,
            "initialize",
            encode::initialize_params(),
            now,
        );
        Vec::new()
    }

    fn handshake(&self) -> Handshake {
        self.handshake
    }

    /// A turn was started and has not ended.
    fn turn_open(&self) -> bool {
        self.turn.is_some()
    }

    /// The lines to write to the child, in order.
    fn take_outgoing(&mut self) -> Vec<String> {
        std::mem::take(&mut self.outgoing)
    }

    /// The earliest deadline of a request in flight.
    fn next_deadline(&self) -> Option<UnixMillis> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// Drover asks for a turn: sent now, or once the thread is open and the turn in
    /// flight has ended.
    fn start_turn(&mut self, prompt: String, now: UnixMillis) -> Vec<ProviderEvent> {
        self.queued.push_back(prompt);
        self.next_turn(now)
    }

    /// Drover's answer to a pending approval request.
    fn answer(&mut self, request_id: &str, answer: &PermissionAnswer) -> Result<(), String> {
        let Some(approval) = self.approvals.remove(request_id) else {
            return Err(format!(
                "Codex has no pending request {request_id} (already resolved?)"
            ));
        };
        let decision = match answer {
            PermissionAnswer::Allow { always: true } if approval.for_session => "acceptForSession",
            // Codex does not offer it for this request: drover still remembers the
            // answer for the run.
            PermissionAnswer::Allow { .. } => "accept",
            // Codex's `decline` carries no message: the model only hears it was declined.
            PermissionAnswer::Deny { .. } | PermissionAnswer::Answer { .. } => "decline",
        };
        self.outgoing
            .push(encode::response(&approval.id, encode::decision(decision)));
        Ok(())
    }

    /// Interrupt the turn in flight: pending approvals are cancelled (and reported
    /// withdrawn) and `turn/interrupt` is sent (once the turn's id is known).
    fn interrupt(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        let mut events = Vec::new();
        for (request_id, approval) in std::mem::take(&mut self.approvals) {
            self.outgoing
                .push(encode::response(&approval.id, encode::decision("cancel")));
            events.push(ProviderEvent::PermissionWithdrawn { request_id });
        }
        self.queued.clear();
        let target = match (&mut self.turn, &self.thread_id) {
            (Some(turn), Some(thread)) => match &turn.id {
                Some(id) => Some((thread.clone(), id.clone())),
                None => {
                    turn.interrupt_wanted = true;
                    None
                }
            },
            _ => None,
        };
        if let Some((thread, turn)) = target {
            self.send_interrupt(&thread, &turn, now);
        }
        events
    }

    /// Requests whose deadline passed, handled as failures.
    fn expire(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        let mut events = Vec::new();
        for id in expired {
            let Some(request) = self.pending.remove(&id) else {
                continue;
            };
            let bound = self.bounds.of(request.kind);
            let message = format!(
                "Codex did not answer {} within {:.1} s",
                request.method,
                bound as f64 / 1000.0
            );
            // No answer in time may pass on its own (a busy server): transient.
            let class = ErrorClass {
                status: None,
                transient: request.kind != RequestKindOut::Initialize,
            };
            events.extend(self.request_failed(request, message, class, now));
        }
        events
    }

    /// One line from the child.
    fn parse_line(&mut self, line: &str, now: UnixMillis) -> Vec<ProviderEvent> {
        let line = line.trim();
        if line.is_empty() {
            return Vec::new();
        }
        let message = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => {
                return vec![notice(format!(
                    "skipped a line Codex wrote that is not a JSON-RPC message: {}",
                    clip(line)
                ))];
            }
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").filter(|id| !id.is_null());
        match (method, id) {
            (Some(method), Some(id)) => {
                let id = id.clone();
                self.server_request(method, id, &message)
            }
            (Some(method), None) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                self.notification(method, &params, now)
            }
            (None, Some(id)) => {
                let id = id.clone();
                self.response(&id, &message, now)
            }
            (None, None) => vec![notice(format!(
                "skipped a message from Codex with neither method nor id: {}",
                clip(line)
            ))],
        }
    }
}

impl AppState {
    /// The conversation of `spec`'s run, before `initialize`: its thread is opened (or
    /// resumed) in the run's directory, sandbox and model, each request bounded by
    /// `bounds`.
    pub fn new(spec: &LaunchSpec, bounds: Bounds) -> AppState {
        AppState {
            cwd: spec.cwd.display().to_string(),
            sandbox: sandbox(spec.capability),
            model: spec.model.clone(),
            effort: spec.effort.clone(),
            resume: spec.resume_session.clone(),
            bounds,
            next_id: 1,
            pending: BTreeMap::new(),
            handshake: Handshake::Waiting,
            version: None,
            thread_id: None,
            thread_failed: None,
            queued: VecDeque::new(),
            turn: None,
            approvals: BTreeMap::new(),
            request_tag: crate::providers::launch_tag(),
            file_changes: BTreeMap::new(),
            rate_limited: false,
            streamed_chars: 0,
            last_streaming_sign: 0,
            outgoing: Vec::new(),
        }
    }

    fn request(&mut self, kind: RequestKindOut, method: &'static str, params: Value, now: i64) {
        let id = self.next_id;
        self.next_id += 1;
        let bound = self.bounds.of(kind);
        self.pending.insert(
            id,
            PendingRequest {
                kind,
                method,
                deadline: now.saturating_add(bound),
            },
        );
        self.outgoing.push(encode::request(id, method, params));
    }

    fn next_turn(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        if self.turn.is_some() {
            return Vec::new();
        }
        if let Some(end) = &self.thread_failed {
            let end = end.clone();
            return self
                .queued
                .drain(..)
                .map(|_| ProviderEvent::TurnCompleted(end.clone()))
                .collect();
        }
        let Some(thread) = self.thread_id.clone() else {
            return Vec::new();
        };
        let Some(prompt) = self.queued.pop_front() else {
            return Vec::new();
        };
        self.turn = Some(Turn::default());
        self.rate_limited = false;
        self.streamed_chars = 0;
        self.last_streaming_sign = now;
        let params = encode::turn_params(&thread, &prompt, self.effort.as_deref());
        self.request(RequestKindOut::TurnStart, "turn/start", params, now);
        Vec::new()
    }

    fn send_interrupt(&mut self, thread: &str, turn: &str, now: UnixMillis) {
        let params = encode::interrupt_params(thread, turn);
        self.request(RequestKindOut::Interrupt, "turn/interrupt", params, now);
    }

    fn response(&mut self, id: &Value, message: &Value, now: UnixMillis) -> Vec<ProviderEvent> {
        let Some(request) = id.as_u64().and_then(|id| self.pending.remove(&id)) else {
            return vec![notice(format!(
                "an answer from Codex to no request in flight (id {id})"
            ))];
        };
        if let Some(error) = message.get("error") {
            let code = error.get("code").and_then(Value::as_i64);
            let text = match error.get("message").and_then(Value::as_str) {
                Some(m) => m.to_string(),
                None => error.to_string(),
            };
            let message = format!(
                "Codex refused {}: {}{}",
                request.method,
                clip(&text),
                code.map(|c| format!(" (JSON-RPC {c})")).unwrap_or_default()
            );
            let class = ErrorClass {
                status: None,
                transient: code == Some(OVERLOADED),
            };
            return self.request_failed(request, message, class, now);
        }
        let result = message.get("result").unwrap_or(&Value::Null);
        match request.kind {
            RequestKindOut::Initialize => {
                self.handshake = Handshake::Done;
                self.version = version_of(str_of(result, "userAgent"));
                self.outgoing.push(encode::notification("initialized"));
                let params = match &self.resume {
                    Some(thread) => encode::resume_params(
                        thread,
                        &self.cwd,
                        self.sandbox,
                        self.model.as_deref(),
                    ),
                    None => encode::thread_params(&self.cwd, self.sandbox, self.model.as_deref()),
                };
                let method = if self.resume.is_some() {
                    "thread/resume"
                } else {
                    "thread/start"
                };
                self.request(RequestKindOut::Thread, method, params, now);
                Vec::new()
            }
            RequestKindOut::Thread => {
                let thread = result
                    .get("thread")
                    .and_then(|t| t.get("id"))
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty());
                let Some(thread) = thread else {
                    let message = format!("Codex opened no thread: {}", clip(&result.to_string()));
                    let class = ErrorClass {
                        status: None,
                        transient: false,
                    };
                    return self.request_failed(request, message, class, now);
                };
                self.thread_id = Some(thread.to_string());
                if let Some(model) = result.get("model").and_then(Value::as_str)
                    && !model.is_empty()
                {
                    self.model = Some(model.to_string());
                }
                let mut events = vec![ProviderEvent::Session {
                    session_id: thread.to_string(),
                    model: self.model.clone(),
                }];
                events.extend(self.next_turn(now));
                events
            }
            RequestKindOut::TurnStart => {
                let id = result
                    .get("turn")
                    .and_then(|t| t.get("id"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let Some(id) = id else {
                    return Vec::new();
                };
                let events = self.place_turn(&id);
                let interrupt = self
                    .turn
                    .as_mut()
                    .is_some_and(|turn| std::mem::take(&mut turn.interrupt_wanted));
                if let (true, Some(thread)) = (interrupt, self.thread_id.clone()) {
                    self.send_interrupt(&thread, &id, now);
                }
                events
            }
            RequestKindOut::Interrupt => Vec::new(),
        }
    }

    /// A request that failed (an error answer, or no answer in time).
    fn request_failed(
        &mut self,
        request: PendingRequest,
        message: String,
        class: ErrorClass,
        now: UnixMillis,
    ) -> Vec<ProviderEvent> {
        match request.kind {
            RequestKindOut::Initialize => {
                self.handshake = Handshake::Failed;
                vec![notice(message)]
            }
            RequestKindOut::Thread => {
                self.thread_failed = Some(failed_end(
                    "thread_unavailable",
                    &message,
                    &class,
                    self.resume.clone(),
                ));
                let mut events = vec![notice(message)];
                events.extend(self.next_turn(now));
                events
            }
            RequestKindOut::TurnStart => {
                self.turn = None;
                let end = failed_end(
                    "turn_start_failed",
                    &message,
                    &class,
                    self.thread_id.clone(),
                );
                let mut events = vec![ProviderEvent::TurnCompleted(end)];
                events.extend(self.next_turn(now));
                events
            }
            RequestKindOut::Interrupt => vec![notice(message)],
        }
    }

    /// drover's id of the request Codex numbered `id` in this process.
    fn request_id(&self, id: &Value) -> String {
        match id {
            Value::String(s) => format!("{}-{s}", self.request_tag),
            other => format!("{}-{other}", self.request_tag),
        }
    }

    fn server_request(&mut self, method: &str, id: Value, message: &Value) -> Vec<ProviderEvent> {
        let params = message.get("params").unwrap_or(&Value::Null);
        let request_id = self.request_id(&id);
        let reason = Some(str_of(params, "reason"))
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        let (tool, ask) = match method {
            "item/commandExecution/requestApproval" => ("shell", command_ask(params, reason)),
            "item/fileChange/requestApproval" => {
                let files = self
                    .file_changes
                    .get(str_of(params, "itemId"))
                    .cloned()
                    .unwrap_or_default();
                let ask = changes_to_ask(files)
                    .unwrap_or_else(|| Ask::other("apply_patch", reason.as_deref(), params));
                ("apply_patch", ask)
            }
            _ => {
                self.outgoing.push(encode::error_response(
                    &id,
                    -32601,
                    &format!("drover does not handle {method}"),
                ));
                return vec![notice(format!(
                    "refused a Codex request drover does not handle: {}",
                    clip(method)
                ))];
            }
        };
        if self.approvals.contains_key(&request_id) {
            return vec![notice(format!(
                "Codex asked again with the id of a pending request ({request_id}); ignored"
            ))];
        }
        let for_session = offers_session(params);
        let always = for_session.then(|| always_for_session(&ask, str_of(params, "grantRoot")));
        self.approvals
            .insert(request_id.clone(), Approval { id, for_session });
        let item = str_of(params, "itemId");
        vec![ProviderEvent::PermissionRequested(PermissionRequest {
            request_id,
            kind: ask.kind(),
            tool: tool.to_string(),
            ask,
            always,
            tool_use_id: (!item.is_empty()).then(|| item.to_string()),
            blocked_path: None,
        })]
    }

    /// Progress after a retry: the rate limit is over.
    fn progress(&mut self, events: &mut Vec<ProviderEvent>) {
        if std::mem::take(&mut self.rate_limited) {
            events.push(ProviderEvent::RateLimitCleared);
        }
    }

    /// The turn in flight's id is known: token updates that waited for it are counted
    /// when they are this turn's, dropped otherwise.
    fn place_turn(&mut self, id: &str) -> Vec<ProviderEvent> {
        let Some(turn) = &mut self.turn else {
            return Vec::new();
        };
        if turn.id.is_some() {
            return Vec::new();
        }
        turn.id = Some(id.to_string());
        let ours: Vec<Tokens> = std::mem::take(&mut turn.unplaced_usage)
            .into_iter()
            .filter(|(theirs, _)| theirs == id)
            .map(|(_, tokens)| tokens)
            .collect();
        ours.into_iter()
            .flat_map(|tokens| self.count_usage(tokens))
            .collect()
    }

    /// One model request's tokens, counted into the turn in flight.
    fn count_usage(&mut self, tokens: Tokens) -> Vec<ProviderEvent> {
        let Some(turn) = &mut self.turn else {
            return Vec::new();
        };
        turn.tokens.add(&tokens);
        vec![ProviderEvent::Usage {
            model: self.model.clone(),
            tokens,
        }]
    }

    /// Whether a notification belongs to the turn in flight (by `turnId` when both
    /// are known).
    fn of_current_turn(&self, params: &Value) -> bool {
        let Some(turn) = &self.turn else {
            return false;
        };
        match (params.get("turnId").and_then(Value::as_str), &turn.id) {
            (Some(theirs), Some(ours)) => theirs == ours,
            _ => true,
        }
    }

    fn notification(
        &mut self,
        method: &str,
        params: &Value,
        now: UnixMillis,
    ) -> Vec<ProviderEvent> {
        let mut events = Vec::new();
        match method {
            "turn/started" => {
                let id = params
                    .get("turn")
                    .and_then(|t| t.get("id"))
                    .and_then(Value::as_str);
                if let Some(id) = id {
                    events.extend(self.place_turn(id));
                }
            }
            "item/started" => {
                self.progress(&mut events);
                let item = params.get("item").unwrap_or(&Value::Null);
                if matches!(str_of(item, "type"), "fileChange") {
                    self.file_changes
                        .insert(str_of(item, "id").to_string(), changes_of(item));
                }
                events.extend(item_started(item));
            }
            "item/completed" => {
                self.progress(&mut events);
                let item = params.get("item").unwrap_or(&Value::Null);
                let (more, text) = item_completed(item);
                events.extend(more);
                if let Some(text) = text
                    && self.of_current_turn(params)
                    && let Some(turn) = &mut self.turn
                {
                    turn.text = Some(text);
                }
                self.file_changes.remove(str_of(item, "id"));
            }
            "thread/tokenUsage/updated" => {
                self.progress(&mut events);
                let last = params
                    .get("tokenUsage")
                    .and_then(|u| u.get("last"))
                    .map(usage_tokens)
                    .unwrap_or_default();
                let theirs = params.get("turnId").and_then(Value::as_str);
                let unplaced = self.turn.as_ref().is_some_and(|t| t.id.is_none());
                match theirs {
                    Some(theirs) if unplaced => {
                        if let Some(turn) = &mut self.turn {
                            turn.unplaced_usage.push((theirs.to_string(), last));
                        }
                    }
                    _ if self.of_current_turn(params) => events.extend(self.count_usage(last)),
                    _ => {}
                }
            }
            "error" => {
                let error = params.get("error").unwrap_or(&Value::Null);
                let class = classify_turn_error(error);
                let message = str_of(error, "message");
                let details = str_of(error, "additionalDetails");
                let text = if details.is_empty() {
                    message.to_string()
                } else {
                    format!("{message}: {details}")
                };
                let retrying = params.get("willRetry").and_then(Value::as_bool) == Some(true)
                    || is_retry_message(message);
                if retrying {
                    self.rate_limited = true;
                    events.push(rate_limited(&text, &class));
                } else {
                    if self.of_current_turn(params)
                        && let Some(turn) = &mut self.turn
                    {
                        turn.error = Some((message.to_string(), class));
                    }
                    events.push(notice(clip(&format!("Codex: {text}"))));
                }
            }
            "turn/completed" => {
                if !self.of_current_turn(params) {
                    return vec![notice(
                        "Codex ended a turn drover no longer waits for; ignored".into(),
                    )];
                }
                self.progress(&mut events);
                let Some(turn) = self.turn.take() else {
                    return events;
                };
                for (request_id, _) in std::mem::take(&mut self.approvals) {
                    events.push(ProviderEvent::PermissionWithdrawn { request_id });
                }
                self.file_changes.clear();
                let end = self.turn_end(turn, params.get("turn").unwrap_or(&Value::Null));
                events.push(ProviderEvent::TurnCompleted(end));
                events.extend(self.next_turn(now));
            }
            "serverRequest/resolved" => {
                let request_id = self.request_id(params.get("requestId").unwrap_or(&Value::Null));
                if self.approvals.remove(&request_id).is_some() {
                    events.push(ProviderEvent::PermissionWithdrawn { request_id });
                }
            }
            "configWarning" | "deprecationNotice" | "warning" => {
                let text = [str_of(params, "summary"), str_of(params, "message")]
                    .into_iter()
                    .find(|t| !t.is_empty())
                    .unwrap_or(method);
                events.push(notice(clip(&format!("Codex: {text}"))));
            }
            "item/agentMessage/delta"
            | "item/reasoning/textDelta"
            | "item/reasoning/summaryTextDelta" => {
                self.progress(&mut events);
                if self.turn.is_some() {
                    self.streamed_chars += str_of(params, "delta").chars().count();
                    if now - self.last_streaming_sign >= STREAMING_SIGN_MS {
                        self.last_streaming_sign = now;
                        events.push(ProviderEvent::Thinking {
                            chars: std::mem::take(&mut self.streamed_chars),
                        });
                    }
                }
            }
            _ if is_quiet(method) => {}
            _ => events.push(notice(format!(
                "Codex sent a notification drover does not read: {}",
                clip(method)
            ))),
        }
        events
    }

    fn turn_end(&self, turn: Turn, reported: &Value) -> TurnEnd {
        let status = str_of(reported, "status");
        let mut end = TurnEnd {
            session_id: self.thread_id.clone(),
            tokens: turn.tokens,
            model_usage: model_usage(self.model.as_deref(), turn.tokens),
            duration_ms: reported.get("durationMs").and_then(Value::as_u64),
            ..TurnEnd::default()
        };
        match status {
            "completed" => {
                end.subtype = "success".into();
                end.text = turn.text.or_else(|| last_agent_message(reported));
            }
            "interrupted" => {
                end.is_error = true;
                end.subtype = "interrupted".into();
                end.text = turn.text;
            }
            other => {
                end.is_error = true;
                end.subtype = if other == "failed" {
                    "failed".into()
                } else {
                    format!("status {}", clip(other))
                };
                let reported_error = reported.get("error").filter(|e| e.is_object());
                let (message, class) = match (reported_error, turn.error) {
                    (Some(error), _) => (
                        str_of(error, "message").to_string(),
                        classify_turn_error(error),
                    ),
                    (None, Some(error)) => error,
                    (None, None) => (
                        String::new(),
                        ErrorClass {
                            status: None,
                            transient: false,
                        },
                    ),
                };
                end.api_error_status = class.status;
                end.transient = class.transient;
                end.text = (!message.is_empty()).then_some(message).or(turn.text);
            }
        }
        end
    }
}

/// Whether an approval request takes `acceptForSession`: it lists no decisions (every
/// decision is taken), or lists that one.
fn offers_session(params: &Value) -> bool {
    match params.get("availableDecisions").and_then(Value::as_array) {
        None => true,
        Some(decisions) => decisions
            .iter()
            .any(|d| d.as_str() == Some("acceptForSession")),
    }
}

/// What `acceptForSession` allows, in words: the same command again, or changes to the
/// same files (or under the root the request asks write access to).
fn always_for_session(ask: &Ask, grant_root: &str) -> AlwaysOption {
    let what = match ask {
        _ if !grant_root.is_empty() => format!("changes under {}", quoted_code(grant_root)),
        Ask::Command { command, .. } => format!("the command {}", quoted_code(command)),
        Ask::FileEdit {
            file_path,
            other_files,
            ..
        } => {
            let mut paths: Vec<String> = std::iter::once(file_path)
                .chain(other_files.iter().map(|f| &f.file_path))
                .take(3)
                .map(|p| quoted_code(p))
                .collect();
            if other_files.len() > 2 {
                paths.push(format!("{} more files", other_files.len() - 2));
            }
            format!("changes to {}", all_of(&paths))
        }
        _ => "the same request again".to_string(),
    };
    AlwaysOption::new(format!("allow {what} {FOR_THE_RUN}"))
}

/// The text of the last agent message among a turn's items.
fn last_agent_message(turn: &Value) -> Option<String> {
    turn.get("items")?
        .as_array()?
        .iter()
        .rev()
        .find(|i| str_of(i, "type") == "agentMessage")
        .map(|i| str_of(i, "text").to_string())
        .filter(|t| !t.is_empty())
}

/// The end of a turn that could not run.
fn failed_end(
    subtype: &str,
    message: &str,
    class: &ErrorClass,
    session_id: Option<String>,
) -> TurnEnd {
    TurnEnd {
        is_error: true,
        subtype: subtype.to_string(),
        text: Some(message.to_string()),
        session_id,
        api_error_status: class.status,
        transient: class.transient,
        ..TurnEnd::default()
    }
}

/// Notifications drover knows and has no use for (streaming deltas, status changes,
/// account and server bookkeeping).
fn is_quiet(method: &str) -> bool {
    method.ends_with("Delta")
        || method.ends_with("/delta")
        || method.ends_with("/updated")
        || method.ends_with("/changed")
        || method.ends_with("PartAdded")
        || method.starts_with("codex/event/")
        || matches!(
            method,
            "thread/started"
                | "thread/archived"
                | "thread/unarchived"
                | "thread/compacted"
                | "thread/closed"
                | "sessionConfigured"
                | "loginChatGptComplete"
                | "authStatusChange"
                | "item/mcpToolCall/progress"
                | "mcpServer/oauthLogin/completed"
        )
}
