//! Mock model APIs on 127.0.0.1 for the real provider CLIs: the Anthropic Messages API
//! (Claude Code), the OpenAI Responses API (Codex), the OpenAI chat completions API
//! (OpenCode) and the Gemini API (Gemini CLI), each streaming server-sent events the way
//! the real service does.
//!
//! A [`MockApi`] binds a random loopback port, answers each model request with the next
//! scripted [`Reply`] (text, a tool call, an HTTP error with its retry hint, each with an
//! optional delay and its usage), records every request it gets — model requests, side
//! requests such as token counts or model lists, and paths it does not know — and shuts
//! down when dropped. What must stay true:
//! - it only ever listens on 127.0.0.1 and never makes a request itself;
//! - every wait is bounded: a delayed reply ends early when the mock is dropped, and
//!   [`MockApi::wait_for`] gives up at its deadline;
//! - a model request that finds the script empty still gets a valid answer (a short text
//!   with a `## Result` block), marked unscripted, so a CLI never hangs on the mock;
//! - side requests (a model request without tools, e.g. a title) never consume the script.

pub mod anthropic;
pub mod chat;
pub mod gemini;
pub mod responses;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

/// The text a model request gets when the script is empty.
pub const UNSCRIPTED_TEXT: &str =
    "Nothing more was scripted.\n\n## Result\nstatus: done\nsummary: the mock had no reply left";

/// The longest a scripted delay may be: every wait in the tests is bounded.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// Which API a mock speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `POST /v1/messages` (Claude Code adds `?beta=true`).
    AnthropicMessages,
    /// `POST /v1/responses`.
    OpenAiResponses,
    /// `POST /v1/chat/completions`.
    OpenAiChat,
    /// `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`.
    Gemini,
}

/// Token counts a reply reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Reasoning tokens (OpenAI only; part of `output`).
    pub reasoning: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input: 1000,
            output: 100,
            cache_read: 0,
            cache_write: 0,
            reasoning: 0,
        }
    }
}

/// What one model request is answered with.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyKind {
    /// A streamed text answer.
    Text(String),
    /// A streamed tool call: the tool's name and its input (sent as JSON text in pieces).
    ToolCall { name: String, input: Value },
    /// An HTTP error with the API's error body and, when given, `retry-after` and
    /// `retry-after-ms` headers.
    Error {
        status: u16,
        retry_after: Option<Duration>,
        message: String,
    },
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub kind: ReplyKind,
    /// Waited before the response starts (bounded by [`MAX_DELAY`] and by the mock's
    /// life).
    pub delay: Duration,
    pub usage: Usage,
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::of(ReplyKind::Text(text.into()))
    }

    pub fn tool_call(name: impl Into<String>, input: Value) -> Reply {
        Reply::of(ReplyKind::ToolCall {
            name: name.into(),
            input,
        })
    }

    pub fn error(status: u16) -> Reply {
        Reply::of(ReplyKind::Error {
            status,
            retry_after: None,
            message: format!("mock error {status}"),
        })
    }

    fn of(kind: ReplyKind) -> Reply {
        Reply {
            kind,
            delay: Duration::ZERO,
            usage: Usage::default(),
        }
    }

    /// Adds a retry hint to an error reply (no effect on others).
    pub fn retry_after(mut self, after: Duration) -> Reply {
        if let ReplyKind::Error { retry_after, .. } = &mut self.kind {
            *retry_after = Some(after);
        }
        self
    }

    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay.min(MAX_DELAY);
        self
    }

    pub fn usage(mut self, usage: Usage) -> Reply {
        self.usage = usage;
        self
    }
}

/// How a request was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Served {
    /// A model request answered with the script's reply number `index` (from 0).
    Scripted { index: usize, reply: Reply },
    /// A model request that found the script empty.
    Unscripted,
    /// A model request without tools (a title, a summary): answered, script untouched.
    Side,
    /// Anything else the API knows (token counts, model lists).
    Auxiliary,
    /// A path the mock does not know: 404.
    Unknown,
}

/// One request the mock got.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
    pub served: Served,
    /// When the request arrived, from the mock's start.
    pub at: Duration,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether this was a model request answered from the script (or past its end).
    pub fn is_model_turn(&self) -> bool {
        matches!(self.served, Served::Scripted { .. } | Served::Unscripted)
    }
}

/// The tool results a model request carries back (the follow-up after a tool ran).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the tool call it answers (`tool_use_id`, `call_id`, `tool_call_id`).
    pub call_id: String,
    /// The result's text (text blocks joined).
    pub content: String,
    /// Anthropic's `is_error` (`false` where the API has no such flag).
    pub is_error: bool,
}

struct Shared {
    protocol: Protocol,
    started: Instant,
    script: Mutex<VecDeque<Reply>>,
    next_index: Mutex<usize>,
    requests: Mutex<Vec<RecordedRequest>>,
    arrived: Notify,
    /// `true` once the mock is dropped: delayed replies end at once.
    closing: watch::Receiver<bool>,
    /// Numbers ids (messages, tool calls, responses) so each is unique.
    ids: Mutex<u64>,
}

/// A running mock model API. Dropping it stops it.
pub struct MockApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    close: watch::Sender<bool>,
}

impl MockApi {
    /// Starts a mock on a random 127.0.0.1 port that answers model requests with
    /// `script`, in order. Must be called inside a tokio runtime.
    pub async fn start(protocol: Protocol, script: impl IntoIterator<Item = Reply>) -> MockApi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the mock API");
        let addr = listener.local_addr().expect("the mock's address");
        let (close, closing) = watch::channel(false);
        let shared = Arc::new(Shared {
            protocol,
            started: Instant::now(),
            script: Mutex::new(script.into_iter().collect()),
            next_index: Mutex::new(0),
            requests: Mutex::new(Vec::new()),
            arrived: Notify::new(),
            closing: closing.clone(),
            ids: Mutex::new(0),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let mut stop = closing;
        tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stop.wait_for(|closed| *closed).await;
            });
            if let Err(e) = served.await {
                eprintln!("mock API stopped with an error: {e}");
            }
        });
        MockApi {
            addr,
            shared,
            close,
        }
    }

    /// `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.shared.script).extend(replies);
    }

    /// Replies not used yet.
    pub fn remaining(&self) -> usize {
        lock(&self.shared.script).len()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The model requests so far (scripted or past the script's end).
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(RecordedRequest::is_model_turn)
            .collect()
    }

    /// Waits until `done` holds for the requests so far; `Err` with them at the deadline.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&[RecordedRequest]) -> bool,
    ) -> Result<Vec<RecordedRequest>, Vec<RecordedRequest>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.arrived.notified();
            let requests = self.requests();
            if done(&requests) {
                return Ok(requests);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(self.requests());
            }
        }
    }

    /// Waits for at least `n` model requests.
    pub async fn wait_for_model_requests(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Vec<RecordedRequest> {
        match self
            .wait_for(timeout, |r| {
                r.iter().filter(|r| r.is_model_turn()).count() >= n
            })
            .await
        {
            Ok(requests) => requests.into_iter().filter(|r| r.is_model_turn()).collect(),
            Err(requests) => panic!(
                "the mock got {} model requests within {timeout:?}, expected {n}; all requests: {}",
                requests.iter().filter(|r| r.is_model_turn()).count(),
                describe(&requests)
            ),
        }
    }

    /// The tool results carried by a request's conversation: the ones after the last
    /// assistant message (the answer to the model's latest tool calls).
    pub fn tool_results(&self, request: &RecordedRequest) -> Vec<ToolResult> {
        match self.shared.protocol {
            Protocol::AnthropicMessages => anthropic::tool_results(&request.body),
            Protocol::OpenAiResponses => responses::tool_results(&request.body),
            Protocol::OpenAiChat => chat::tool_results(&request.body),
            Protocol::Gemini => gemini::tool_results(&request.body),
        }
    }
}

impl Drop for MockApi {
    fn drop(&mut self) {
        let _ = self.close.send(true);
    }
}

/// One line per request, for failure messages.
pub fn describe(requests: &[RecordedRequest]) -> String {
    let lines: Vec<String> = requests
        .iter()
        .map(|r| {
            let served = match &r.served {
                Served::Scripted { index, reply } => format!("script #{index}: {:?}", reply.kind),
                other => format!("{other:?}"),
            };
            format!(
                "\n  {:>7.3}s {} {} -> {}",
                r.at.as_secs_f64(),
                r.method,
                r.path,
                served
            )
        })
        .collect();
    if lines.is_empty() {
        " (none)".into()
    } else {
        lines.concat()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock has failed already; the data is fine.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the protocol module decides about a request.
pub enum Route {
    /// A model request; `side` when it carries no tools.
    Model {
        side: bool,
    },
    /// Answer with this JSON (status 200).
    Json(Value),
    Unknown,
}

/// What a protocol module needs to write one reply.
pub struct ReplyContext<'a> {
    /// The request body.
    pub request: &'a Value,
    /// A fresh number for ids.
    pub id: u64,
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let route = match shared.protocol {
        Protocol::AnthropicMessages => anthropic::route(&method, uri.path(), &body),
        Protocol::OpenAiResponses => responses::route(&method, uri.path(), &body),
        Protocol::OpenAiChat => chat::route(&method, uri.path(), &body),
        Protocol::Gemini => gemini::route(&method, uri.path(), &body),
    };
    let (served, reply) = match &route {
        Route::Model { side: false } => {
            let next = lock(&shared.script).pop_front();
            match next {
                Some(reply) => {
                    let mut index = lock(&shared.next_index);
                    let served = Served::Scripted {
                        index: *index,
                        reply: reply.clone(),
                    };
                    *index += 1;
                    (served, Some(reply))
                }
                None => (Served::Unscripted, Some(Reply::text(UNSCRIPTED_TEXT))),
            }
        }
        Route::Model { side: true } => (Served::Side, Some(Reply::text("Mock side answer"))),
        Route::Json(_) => (Served::Auxiliary, None),
        Route::Unknown => (Served::Unknown, None),
    };
    let recorded = RecordedRequest {
        method: method.to_string(),
        path,
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
        served,
        at: shared.started.elapsed(),
    };
    let request_body = recorded.body.clone();
    lock(&shared.requests).push(recorded);
    shared.arrived.notify_waiters();

    match (route, reply) {
        (Route::Json(value), _) => json_response(StatusCode::OK, &value, None),
        (Route::Model { .. }, Some(reply)) => {
            if !reply.delay.is_zero() {
                let mut closing = shared.closing.clone();
                tokio::select! {
                    () = tokio::time::sleep(reply.delay) => {}
                    _ = closing.wait_for(|closed| *closed) => {
                        return json_response(StatusCode::SERVICE_UNAVAILABLE, &json!({"error": "the mock is shutting down"}), None);
                    }
                }
            }
            let id = {
                let mut ids = lock(&shared.ids);
                *ids += 1;
                *ids
            };
            let context = ReplyContext {
                request: &request_body,
                id,
            };
            match &reply.kind {
                ReplyKind::Error {
                    status,
                    retry_after,
                    message,
                } => {
                    let body = match shared.protocol {
                        Protocol::AnthropicMessages => anthropic::error_body(*status, message),
                        Protocol::OpenAiResponses | Protocol::OpenAiChat => {
                            openai_error_body(*status, message)
                        }
                        Protocol::Gemini => gemini::error_body(*status, message),
                    };
                    let status =
                        StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                    json_response(status, &body, *retry_after)
                }
                _ => {
                    let events = match shared.protocol {
                        Protocol::AnthropicMessages => anthropic::stream(&reply, &context),
                        Protocol::OpenAiResponses => responses::stream(&reply, &context),
                        Protocol::OpenAiChat => chat::stream(&reply, &context),
                        Protocol::Gemini => gemini::stream(&reply, &context),
                    };
                    sse_response(events)
                }
            }
        }
        _ => json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": {"type": "not_found_error", "message": "the mock does not know this path"}}),
            None,
        ),
    }
}

/// One server-sent event: its `event:` name (if any) and its JSON data (or a raw string
/// such as `[DONE]`).
pub struct SseEvent {
    pub name: Option<&'static str>,
    pub data: String,
}

impl SseEvent {
    pub fn named(name: &'static str, data: Value) -> SseEvent {
        SseEvent {
            name: Some(name),
            data: data.to_string(),
        }
    }

    pub fn data(data: Value) -> SseEvent {
        SseEvent {
            name: None,
            data: data.to_string(),
        }
    }

    pub fn raw(data: &str) -> SseEvent {
        SseEvent {
            name: None,
            data: data.to_string(),
        }
    }
}

fn sse_response(events: Vec<SseEvent>) -> Response {
    let mut text = String::new();
    for event in events {
        if let Some(name) = event.name {
            text.push_str("event: ");
            text.push_str(name);
            text.push('\n');
        }
        text.push_str("data: ");
        text.push_str(&event.data);
        text.push_str("\n\n");
    }
    let mut response = Response::new(Body::from(text));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn json_response(status: StatusCode, body: &Value, retry_after: Option<Duration>) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(after) = retry_after {
        let secs = after.as_secs_f64().ceil() as u64;
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            headers.insert(header::RETRY_AFTER, v);
        }
        if let Ok(v) = HeaderValue::from_str(&after.as_millis().to_string()) {
            headers.insert("retry-after-ms", v);
        }
    }
    response
}

fn openai_error_body(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        429 => ("rate_limit_exceeded", "rate_limit_exceeded"),
        500..=599 => ("server_error", "server_error"),
        _ => ("invalid_request_error", "invalid_request"),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// The text of a message content that is either a string or a list of text parts.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A text cut in two at a character boundary (two deltas, so clients must join them).
pub fn halves(text: &str) -> Vec<String> {
    let n = text.chars().count();
    if n < 2 {
        return vec![text.to_string()];
    }
    let mid = text.char_indices().nth(n / 2).map_or(0, |(i, _)| i);
    vec![text[..mid].to_string(), text[mid..].to_string()]
}

/// Whether a model request offers the model tools (an agent turn, not a side request).
pub fn has_tools(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}
