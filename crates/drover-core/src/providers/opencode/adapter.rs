//! The OpenCode adapter's session: one tokio task per run that owns an `opencode serve`
//! child on a loopback port, talks to it over HTTP, reads its `/event` stream (parsed by
//! the `eventsource-stream` crate), feeds each event to [`protocol::parse_event`], and
//! turns [`ProviderCommand`]s into HTTP calls.
//!
//! Not on the session loop ([`crate::providers::session`]), whose protocol is a pure
//! state machine over the child's stdin and stdout: the server reads no stdin, its
//! stdout only says where it listens, its events come over an HTTP stream, and each
//! command is an HTTP call awaited here, as are the steps of its start (listen, open
//! the stream, make or find the session). It shares with the loop the child's start and
//! end ([`process::spawn`], [`end_child`]), the run's `Exited` (from an
//! [`crate::providers::process::ExitReport`]), the [`EventSink`] and the shape of the
//! phases: start (commands queued), running, an abort of the turn in flight bounded
//! before the end, exactly one `Exited` last.
//!
//! What must stay true:
//! - the run's events start with `Ready` (the server listens, the event stream is open,
//!   the session exists) and `Session`, and end with exactly one `Exited`, after which
//!   nothing is sent; a server that does not come up within its bound, dies, or refuses
//!   the session gets no `Ready`, only notices and `Exited` with its stderr tail;
//! - every HTTP call has a timeout; the event stream has a connect timeout and a read
//!   timeout longer than the server's 10 s heartbeat, so a hung server cannot hang the
//!   run; the stream ending is the end of the run (events would be lost otherwise);
//! - the child is always ended through [`ProviderProcess::shutdown`] (its whole process
//!   group, always reaped), after a turn in flight was aborted over HTTP (bounded), so
//!   the tools it runs stop too; OpenCode runs tools outside its process group, so what
//!   of its descendants outside the group is still there once it is gone is killed
//!   ([`sweep`], noted before the abort and before the end);
//! - nothing the server sends can make the task panic.

use std::collections::VecDeque;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::{Client, Method, StatusCode, Url};
use serde_json::{Value, json};
use tokio::process::ChildStdout;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::clock::now_millis;
use crate::providers::process::{
    self, ChildCommand, Line, LineReader, ProviderProcess, ShutdownTimings,
};
use crate::providers::session::end_child;
use crate::providers::sink::EventSink;
use crate::providers::{
    AdapterHandle, LaunchError, LaunchSpec, ProviderCommand, ProviderEvent, ProviderEventSink,
    notice,
};

use crate::providers::sweep;

use super::launch::{self, SERVER_USER};
use super::protocol::{self, Outgoing, ParseState, Reply};

/// How long the adapter waits on its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterTimings {
    /// For the server to say it listens (it takes about 2 s).
    pub start: Duration,
    /// For one HTTP call (and for the event stream's first event).
    pub request: Duration,
    /// For the next bytes of the event stream (the server beats every 10 s).
    pub stream_idle: Duration,
    /// For a turn in flight to end after an abort, before the server is ended.
    pub interrupt: Duration,
    /// How the server is ended.
    pub shutdown: ShutdownTimings,
}

impl Default for AdapterTimings {
    fn default() -> Self {
        AdapterTimings {
            start: Duration::from_secs(60),
            request: Duration::from_secs(15),
            stream_idle: Duration::from_secs(45),
            interrupt: Duration::from_secs(3),
            shutdown: ShutdownTimings {
                // The server does not read stdin: closing it ends nothing, so the end
                // goes straight to SIGTERM (waiting here only added to every run's end).
                stdin_grace: Duration::ZERO,
                // It takes over a second to stop after SIGTERM.
                term_grace: Duration::from_secs(5),
                drain: Duration::from_secs(2),
            },
        }
    }
}

/// Start an `opencode serve` child for `spec` and its session task, with the default
/// timings. Must be called inside a tokio runtime, from an async task (see [`process`]
/// on the parent-death signal).
pub fn launch(spec: LaunchSpec, sink: ProviderEventSink) -> Result<AdapterHandle, LaunchError> {
    launch_with(spec, sink, AdapterTimings::default())
}

/// [`launch()`] with explicit timings (tests shorten them).
pub fn launch_with(
    spec: LaunchSpec,
    sink: ProviderEventSink,
    timings: AdapterTimings,
) -> Result<AdapterHandle, LaunchError> {
    let fail = |reason: String| LaunchError {
        command: spec.command.display().to_string(),
        reason,
    };
    let runtime = process::adapter_runtime(&spec)?;
    // drover speaks to `opencode serve` over loopback: a sandbox with a network namespace
    // of its own would put the server out of reach (docs/ARCHITECTURE.md §"The sandbox").
    if spec.sandbox.as_ref().is_some_and(|s| !s.network) {
        return Err(fail(
            "OpenCode is driven over HTTP on 127.0.0.1, which a sandbox without the network cuts off; set [limits] sandbox_network = true for OpenCode runs, or dispatch without --sandbox".into(),
        ));
    }
    // Its server would listen on the host's loopback, out of reach from here: a run on a
    // host speaks OpenCode's ACP mode over the transport's stdio instead
    // (docs/ARCHITECTURE.md §"Hosts"). Admission refuses it first when it is named.
    if let Some(host) = spec.transport.as_deref() {
        return Err(fail(opencode_on_host(&host.name)));
    }
    let password = launch::fresh_password()
        .ok_or_else(|| fail("cannot read /dev/urandom for the server's password".into()))?;
    let port = free_port().map_err(|e| fail(format!("no free loopback port: {e}")))?;
    let client = Client::builder()
        .no_proxy()
        .connect_timeout(timings.request)
        .timeout(timings.request)
        .build()
        .map_err(|e| fail(format!("cannot make an HTTP client: {e}")))?;
    let stream_client = Client::builder()
        .no_proxy()
        .connect_timeout(timings.request)
        .read_timeout(timings.stream_idle)
        .build()
        .map_err(|e| fail(format!("cannot make an HTTP client: {e}")))?;
    let argv = launch::serve_args(&spec, port);
    let env = launch::serve_env(&spec, &password);
    let (child, stdout) = process::spawn(ChildCommand {
        program: &spec.command,
        args: &argv,
        env: &env,
        cwd: &spec.cwd,
        run_id: &spec.run_id,
        journal: spec.journal.as_ref(),
        transport: spec.transport.as_deref(),
        sandbox: spec.sandbox.as_ref(),
    })?;
    let pid = child.pid();
    tracing::debug!(run_id = %spec.run_id, pid, port, "opencode server started");
    let (commands, rx) = mpsc::unbounded_channel();
    let session = ServerSession {
        out: EventSink::new(spec.run_id.clone(), sink),
        model: spec.model.clone(),
        resume: spec.resume_session.clone(),
        child,
        stdout,
        stdout_open: true,
        commands: rx,
        timings,
        client,
        stream_client,
        password,
        base: None,
        events: None,
        stream_task: None,
        first_event: None,
        state: ParseState::default(),
    };
    runtime.spawn(session.run());
    Ok(AdapterHandle {
        commands,
        pid: Some(pid),
    })
}

/// Why `opencode serve` is not run on a host, and what to dispatch instead.
pub fn opencode_on_host(host: &str) -> String {
    format!(
        "OpenCode's server would listen on 127.0.0.1 on the host {host}, out of drover's reach; dispatch it with --provider opencode-acp (OpenCode's ACP mode, spoken over the host's transport like every other CLI)"
    )
}

/// A port that was free a moment ago: bound on 127.0.0.1 and released. (`--port 0`
/// does not pick a free port: 1.18.33 falls back to 4096.)
fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Why the running phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Asked to, or nobody is left to talk to.
    Shutdown,
    /// The server exited, or its event stream ended.
    ServerGone,
    /// The server did not come up, or refused the session (a notice says which).
    NoStart,
}

/// What the event stream task passes on.
enum StreamItem {
    /// The data of one server-sent event.
    Data(String),
    /// The stream ended; why.
    End(String),
}

/// How many events may wait for the session task (the stream task waits when it is
/// full).
const STREAM_BUFFER: usize = 256;

/// One run's `opencode serve`: the child, the HTTP clients that talk to it, its event
/// stream and the session's parse state.
struct ServerSession {
    out: EventSink,
    /// The model drover asked for (`provider/model`).
    model: Option<String>,
    resume: Option<String>,
    child: ProviderProcess,
    stdout: LineReader<ChildStdout>,
    stdout_open: bool,
    commands: mpsc::UnboundedReceiver<ProviderCommand>,
    timings: AdapterTimings,
    client: Client,
    stream_client: Client,
    password: String,
    /// `http://127.0.0.1:PORT`, once the server listens.
    base: Option<Url>,
    events: Option<mpsc::Receiver<StreamItem>>,
    stream_task: Option<JoinHandle<()>>,
    /// The stream's first event, held until `Ready` is sent.
    first_event: Option<String>,
    state: ParseState,
}

impl ServerSession {
    async fn run(mut self) {
        let stop = match self.start().await {
            Ok((version, queued)) => {
                self.emit(ProviderEvent::Ready { version }).await;
                self.emit(ProviderEvent::Session {
                    session_id: self.state.session_id().to_string(),
                    model: self.model.clone(),
                })
                .await;
                if let Some(model) = self.model.clone()
                    && protocol::split_model(&model).is_none()
                {
                    self.emit(notice(format!(
                        "the model {model} is not named provider/model: OpenCode uses its default"
                    )))
                    .await;
                }
                if let Some(first) = self.first_event.take() {
                    self.event(&first).await;
                }
                for command in queued {
                    self.command(command).await;
                }
                self.running().await
            }
            Err(stop) => stop,
        };
        tracing::debug!(run_id = %self.out.run_id(), ?stop, "ending the opencode server");
        if let Some(task) = self.stream_task.take() {
            task.abort();
        }
        // The server runs its tools outside its own process group: the one sweep
        // (`providers::sweep`, run by the child's shutdown) ends what the abort missed.
        let ServerSession {
            mut out,
            child,
            stdout,
            timings,
            ..
        } = self;
        // What the server logs is not the run's: its lines are read and dropped.
        let report = end_child(child, stdout, timings.shutdown, &mut out, |_| Vec::new()).await;
        out.send(report.into()).await;
    }

    /// Wait for the server to listen, open the event stream, make or find the session.
    /// Returns the server's version and the commands that came meanwhile, or why the run
    /// cannot go on.
    async fn start(&mut self) -> Result<(Option<String>, VecDeque<ProviderCommand>), Stop> {
        let mut queued = VecDeque::new();
        let base = self.listening(&mut queued).await?;
        self.base = Some(base);
        self.open_stream().await?;
        let session_id = match self.resume.clone() {
            Some(id) => self.existing_session(&id).await?,
            None => self.new_session().await?,
        };
        self.state = ParseState::new(&session_id, self.model.as_deref());
        let version = self.version().await;
        Ok((version, queued))
    }

    /// Reads the server's stdout until it says where it listens (bounded).
    async fn listening(&mut self, queued: &mut VecDeque<ProviderCommand>) -> Result<Url, Stop> {
        let deadline = Instant::now() + self.timings.start;
        loop {
            tokio::select! {
                line = self.stdout.next_line() => match line {
                    Ok(Some(Line::Text(text))) => {
                        if let Some(url) = launch::listening_url(&text)
                            && let Ok(url) = Url::parse(&url)
                        {
                            return Ok(url);
                        }
                        tracing::debug!(run_id = %self.out.run_id(), line = %text, "opencode says");
                    }
                    Ok(Some(Line::TooLong { .. })) => {}
                    _ => {
                        self.emit(notice("the OpenCode server closed its output before it listened".into())).await;
                        return Err(Stop::ServerGone);
                    }
                },
                command = self.commands.recv() => match command {
                    None | Some(ProviderCommand::Shutdown) => return Err(Stop::Shutdown),
                    Some(command) => queued.push_back(command),
                },
                () = self.child.exited() => {
                    self.emit(notice("the OpenCode server exited before it listened".into())).await;
                    return Err(Stop::ServerGone);
                }
                () = tokio::time::sleep_until(deadline) => {
                    let secs = self.timings.start.as_secs_f64();
                    self.emit(notice(format!("the OpenCode server did not listen within {secs:.0} s"))).await;
                    return Err(Stop::NoStart);
                }
            }
        }
    }

    /// Subscribes to `/event` and waits (bounded) for its first event, so nothing the
    /// session does later can be missed.
    async fn open_stream(&mut self) -> Result<(), Stop> {
        let Some(url) = self.url(&["event"]) else {
            return Err(Stop::NoStart);
        };
        let request = self
            .stream_client
            .get(url)
            .basic_auth(SERVER_USER, Some(&self.password))
            .header("accept", "text/event-stream");
        let response = match tokio::time::timeout(self.timings.request, request.send()).await {
            Ok(Ok(response)) if response.status().is_success() => response,
            Ok(Ok(response)) => {
                let status = response.status();
                self.emit(notice(format!(
                    "OpenCode refused its event stream: HTTP {status}"
                )))
                .await;
                return Err(Stop::NoStart);
            }
            Ok(Err(e)) => {
                self.emit(notice(format!("cannot open OpenCode's event stream: {e}")))
                    .await;
                return Err(Stop::NoStart);
            }
            Err(_) => {
                self.emit(notice(
                    "OpenCode's event stream did not open in time".into(),
                ))
                .await;
                return Err(Stop::NoStart);
            }
        };
        let (tx, mut rx) = mpsc::channel(STREAM_BUFFER);
        self.stream_task = Some(tokio::spawn(async move {
            let mut events = response.bytes_stream().eventsource();
            let why = loop {
                match events.next().await {
                    Some(Ok(event)) => {
                        if tx.send(StreamItem::Data(event.data)).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(e)) => break e.to_string(),
                    None => break "the server closed it".to_string(),
                }
            };
            let _ = tx.send(StreamItem::End(why)).await;
        }));
        match tokio::time::timeout(self.timings.request, rx.recv()).await {
            Ok(Some(StreamItem::Data(data))) => {
                // Parsed after `Ready`, once the session is known.
                self.first_event = Some(data);
                self.events = Some(rx);
                Ok(())
            }
            Ok(Some(StreamItem::End(why))) => {
                self.emit(notice(format!(
                    "OpenCode's event stream ended at once: {why}"
                )))
                .await;
                Err(Stop::NoStart)
            }
            Ok(None) | Err(_) => {
                self.emit(notice(
                    "OpenCode's event stream sent nothing in time".into(),
                ))
                .await;
                Err(Stop::NoStart)
            }
        }
    }

    async fn new_session(&mut self) -> Result<String, Stop> {
        let title = format!("drover {}", self.out.run_id());
        let answer = self
            .call(Method::POST, &["session"], Some(json!({ "title": title })))
            .await;
        match answer {
            Ok((status, body)) if status.is_success() => {
                match body.get("id").and_then(Value::as_str) {
                    Some(id) if !id.is_empty() => Ok(id.to_string()),
                    _ => {
                        self.emit(notice("OpenCode made a session without an id".into()))
                            .await;
                        Err(Stop::NoStart)
                    }
                }
            }
            Ok((status, _)) => {
                self.emit(notice(format!(
                    "OpenCode refused to make a session: HTTP {status}"
                )))
                .await;
                Err(Stop::NoStart)
            }
            Err(e) => {
                self.emit(notice(format!("cannot make an OpenCode session: {e}")))
                    .await;
                Err(Stop::NoStart)
            }
        }
    }

    async fn existing_session(&mut self, id: &str) -> Result<String, Stop> {
        match self.call(Method::GET, &["session", id], None).await {
            Ok((status, body)) if status.is_success() => {
                if body.get("id").and_then(Value::as_str) == Some(id) {
                    Ok(id.to_string())
                } else {
                    self.emit(notice(format!(
                        "OpenCode answered for session {id} with another one"
                    )))
                    .await;
                    Err(Stop::NoStart)
                }
            }
            Ok((status, _)) => {
                self.emit(notice(format!(
                    "cannot resume OpenCode session {id}: HTTP {status} (it is not in this \
                     OpenCode's storage)"
                )))
                .await;
                Err(Stop::NoStart)
            }
            Err(e) => {
                self.emit(notice(format!("cannot resume OpenCode session {id}: {e}")))
                    .await;
                Err(Stop::NoStart)
            }
        }
    }

    /// The server's version (`GET /global/health`), if it says.
    async fn version(&mut self) -> Option<String> {
        let (status, body) = self
            .call(Method::GET, &["global", "health"], None)
            .await
            .ok()?;
        if !status.is_success() {
            return None;
        }
        body.get("version")
            .and_then(Value::as_str)
            .map(|v| v.chars().take(40).collect())
    }

    async fn running(&mut self) -> Stop {
        loop {
            let Some(events) = self.events.as_mut() else {
                return Stop::ServerGone;
            };
            tokio::select! {
                item = events.recv() => match item {
                    Some(StreamItem::Data(data)) => self.event(&data).await,
                    Some(StreamItem::End(why)) => {
                        self.emit(notice(format!("OpenCode's event stream ended: {why}"))).await;
                        return Stop::ServerGone;
                    }
                    None => return Stop::ServerGone,
                },
                command = self.commands.recv() => match command {
                    None => return Stop::Shutdown,
                    Some(ProviderCommand::Shutdown) => {
                        self.abort_turn().await;
                        return Stop::Shutdown;
                    }
                    Some(command) => self.command(command).await,
                },
                line = self.stdout.next_line(), if self.stdout_open => match line {
                    Ok(Some(Line::Text(text))) => {
                        tracing::debug!(run_id = %self.out.run_id(), line = %text, "opencode says");
                    }
                    Ok(Some(Line::TooLong { .. })) => {}
                    _ => self.stdout_open = false,
                },
                () = self.child.exited() => return Stop::ServerGone,
            }
            if !self.out.is_open() {
                return Stop::Shutdown;
            }
        }
    }

    /// Aborts a turn in flight before the server is ended, and waits (bounded by
    /// `timings.interrupt`) for it to end, so the tool it runs is stopped by OpenCode.
    async fn abort_turn(&mut self) {
        if !self.state.turn_open() {
            return;
        }
        // The abort may orphan a tool without ending it: note them first.
        sweep::note_now(self.child.pid());
        self.abort().await;
        let deadline = Instant::now() + self.timings.interrupt;
        while self.state.turn_open() {
            let Some(events) = self.events.as_mut() else {
                return;
            };
            tokio::select! {
                item = events.recv() => match item {
                    Some(StreamItem::Data(data)) => self.event(&data).await,
                    _ => return,
                },
                () = self.child.exited() => return,
                () = tokio::time::sleep_until(deadline) => {
                    let secs = self.timings.interrupt.as_secs_f64();
                    self.emit(notice(format!(
                        "OpenCode did not end its turn within {secs:.1} s of an abort"
                    )))
                    .await;
                    return;
                }
            }
        }
    }

    async fn event(&mut self, data: &str) {
        let events = protocol::parse_event(data, &mut self.state, now_millis());
        for event in events {
            self.emit(event).await;
        }
    }

    async fn command(&mut self, command: ProviderCommand) {
        match command {
            ProviderCommand::StartTurn { prompt } => {
                self.state.begin_turn(now_millis());
                let session = self.state.session_id().to_string();
                let body = protocol::prompt_body(&prompt, self.model.as_deref());
                let failed = match self
                    .call(
                        Method::POST,
                        &["session", &session, "prompt_async"],
                        Some(body),
                    )
                    .await
                {
                    Ok((status, _)) if status.is_success() => None,
                    Ok((status, body)) => Some(format!(
                        "OpenCode refused the prompt: HTTP {status} {}",
                        error_text(&body)
                    )),
                    Err(e) => Some(format!("cannot send the prompt to OpenCode: {e}")),
                };
                if let Some(why) = failed {
                    for event in self.state.fail_turn(&why, now_millis()) {
                        self.emit(event).await;
                    }
                }
            }
            ProviderCommand::Answer { request_id, answer } => {
                match self.state.answer(&request_id, &answer) {
                    Ok(Outgoing::Permission(reply)) => self.reply(reply).await,
                    Ok(Outgoing::QuestionReply { request_id, body }) => {
                        self.answer_question(&request_id, "reply", Some(body)).await;
                    }
                    Ok(Outgoing::QuestionReject { request_id }) => {
                        self.answer_question(&request_id, "reject", None).await;
                    }
                    Err(text) => self.emit(notice(text)).await,
                }
            }
            ProviderCommand::Interrupt => self.abort().await,
            // Handled by the loops.
            ProviderCommand::Shutdown => {}
        }
    }

    async fn abort(&mut self) {
        let session = self.state.session_id().to_string();
        match self
            .call(Method::POST, &["session", &session, "abort"], None)
            .await
        {
            Ok((status, _)) if status.is_success() => {}
            Ok((status, _)) => {
                self.emit(notice(format!("OpenCode refused the abort: HTTP {status}")))
                    .await;
            }
            Err(e) => {
                self.emit(notice(format!("cannot abort the OpenCode turn: {e}")))
                    .await;
            }
        }
    }

    /// Posts a permission answer; on servers without `/permission/{id}/reply` (404), the
    /// older `/session/{sid}/permissions/{id}`.
    async fn reply(&mut self, reply: Reply) {
        let answer = self
            .call(
                Method::POST,
                &["permission", &reply.request_id, "reply"],
                Some(protocol::reply_body(&reply)),
            )
            .await;
        let answer = match answer {
            Ok((StatusCode::NOT_FOUND, _)) => {
                self.call(
                    Method::POST,
                    &[
                        "session",
                        &reply.session_id,
                        "permissions",
                        &reply.request_id,
                    ],
                    Some(protocol::legacy_reply_body(&reply)),
                )
                .await
            }
            other => other,
        };
        let failure = match answer {
            Ok((status, _)) if status.is_success() => return,
            Ok((status, body)) => format!("HTTP {status} {}", error_text(&body)),
            Err(e) => e,
        };
        self.emit(notice(format!(
            "could not answer OpenCode's permission request {}: {failure}",
            reply.request_id
        )))
        .await;
    }

    /// Posts an answer to a question (`reply`, with the answers) or dismisses it
    /// (`reject`).
    async fn answer_question(&mut self, request_id: &str, verb: &str, body: Option<Value>) {
        let failure = match self
            .call(Method::POST, &["question", request_id, verb], body)
            .await
        {
            Ok((status, _)) if status.is_success() => return,
            Ok((status, body)) => format!("HTTP {status} {}", error_text(&body)),
            Err(e) => e,
        };
        self.emit(notice(format!(
            "could not answer OpenCode's question {request_id}: {failure}"
        )))
        .await;
    }

    /// `base` with `segments` appended (each percent-encoded).
    fn url(&self, segments: &[&str]) -> Option<Url> {
        let mut url = self.base.clone()?;
        url.path_segments_mut().ok()?.clear().extend(segments);
        Some(url)
    }

    /// One bounded HTTP call: its status and its body as JSON (`Null` when not JSON).
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Value>,
    ) -> Result<(StatusCode, Value), String> {
        let url = self
            .url(segments)
            .ok_or_else(|| "the server's address is not known".to_string())?;
        let mut request = self
            .client
            .request(method, url)
            .basic_auth(SERVER_USER, Some(&self.password));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| e.to_string())?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    async fn emit(&mut self, event: ProviderEvent) {
        self.out.send(event).await;
    }
}

/// A short description of an error answer's body.
fn error_text(body: &Value) -> String {
    let text = match body {
        Value::Null => return String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    text.chars().take(200).collect()
}

#[cfg(test)]
#[path = "adapter_tests.rs"]
mod tests;
