//! One run's conversation with an ACP agent: the child, the SDK's client connection over
//! its stdio, and the phases handshake → running → ending
//! (docs/PROVIDERS.md §"ACP agents").
//!
//! The `agent-client-protocol` SDK speaks the JSON-RPC (ids, responses, errors, unknown
//! methods answered `-32601`); this task owns the child and everything around the SDK:
//! each stdout line, bounded by the [`LineReader`], is looked at before the SDK reads it
//! (a line that is not JSON, or a notification over [`map::MAX_NOTIFICATION_BYTES`],
//! becomes a notice); the SDK's lines for the child go to its stdin through the process's writer
//! task; the agent's updates and permission requests come back from the SDK's handlers
//! over a channel and are mapped by [`super::map`]. What must stay true, besides the
//! adapter contract: a turn taken ends in exactly one `TurnCompleted` (a turn the agent
//! never ended is ended as failed before `Exited`); every request drover sends before
//! `Ready` is bounded by the handshake's timeout; a permission request is answered
//! exactly once (by drover's answer, by `cancelled` on an interrupt or at the end, or
//! refused for a session that is not the run's).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, EnvVariable, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpServer,
    McpServerStdio, NewSessionRequest, NewSessionResponse, PermissionOption, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionConfigKind, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigSelectOptions, SessionConfigValueId, SessionId, SessionModeState,
    SessionNotification, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse, TextContent, ToolKind,
};
use agent_client_protocol::{Agent, Client, JsonRpcRequest, Lines};
use futures::{SinkExt, StreamExt};
use tokio::process::ChildStdout;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::map::{self, Gate, Updates};
use crate::providers::process::{Line, LineReader, ProviderProcess, ShutdownTimings};
use crate::providers::session::{end_child, line_events};
use crate::providers::sink::EventSink;
use crate::providers::{
    LaunchSpec, MCP_SERVER_NAME, PermissionAnswer, PermissionRequest, ProviderCommand,
    ProviderEvent, ProviderEventSink, RequestKind, notice, sweep,
};

/// The most permission requests waiting at once; more are refused.
const MAX_PENDING: usize = 256;

/// How long the adapter waits on its agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcpTimings {
    /// For each answer before `Ready` (`initialize`, `session/new` or `session/load`,
    /// picking the model, setting the mode): an agent that never answers fails the run
    /// with the cause.
    pub handshake: Duration,
    /// For a turn in flight to end after `session/cancel` at the end, before the child
    /// is ended.
    pub interrupt: Duration,
    /// How the child is ended.
    pub shutdown: ShutdownTimings,
}

impl Default for AcpTimings {
    fn default() -> Self {
        AcpTimings {
            handshake: Duration::from_secs(60),
            interrupt: Duration::from_secs(3),
            shutdown: ShutdownTimings::default(),
        }
    }
}

/// What the SDK's handlers hand over from the agent.
enum FromAgent {
    Update(Box<SessionNotification>),
    Permission(Box<(RequestPermissionRequest, PermissionResponder)>),
}

type PermissionResponder = agent_client_protocol::v1::Responder<RequestPermissionResponse>;

/// The answer to a request drover sent.
enum Reply {
    Initialized(Box<Result<InitializeResponse, agent_client_protocol::Error>>),
    Opened(Box<Result<NewSessionResponse, agent_client_protocol::Error>>),
    Loaded(Box<Result<LoadSessionResponse, agent_client_protocol::Error>>),
    ModelSet(Box<Result<SetSessionConfigOptionResponse, agent_client_protocol::Error>>),
    ModeSet(Box<Result<SetSessionModeResponse, agent_client_protocol::Error>>),
    Prompted(
        u64,
        Box<Result<PromptResponse, agent_client_protocol::Error>>,
    ),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Initializing,
    Opening,
    PickingModel,
    PickingMode,
    Running,
}

/// Why the conversation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Shutdown,
    ChildGone,
    NoHandshake,
}

struct Pending {
    options: Vec<PermissionOption>,
    responder: agent_client_protocol::v1::Responder<RequestPermissionResponse>,
}

struct Turn {
    number: u64,
    started: Instant,
}

/// One run's conversation.
pub(super) struct Conversation {
    spec: LaunchSpec,
    timings: AcpTimings,
    out: EventSink,
    child: ProviderProcess,
    stdout: LineReader<ChildStdout>,
    commands: mpsc::UnboundedReceiver<ProviderCommand>,
    phase: Phase,
    deadline: Option<Instant>,
    ready: bool,
    held: Vec<ProviderEvent>,
    queued: VecDeque<ProviderCommand>,
    prompts: VecDeque<String>,
    version: Option<String>,
    can_load: bool,
    session: Option<SessionId>,
    config_options: Vec<SessionConfigOption>,
    /// The session modes the agent offered when the session opened, if any.
    modes: Option<SessionModeState>,
    updates: Updates,
    turn: Option<Turn>,
    turns: u64,
    pending: BTreeMap<String, Pending>,
    next_request: u64,
    /// This start's tag, before each request's number ([`crate::providers::launch_tag`]).
    request_tag: String,
    replies: mpsc::UnboundedSender<Reply>,
}

impl Conversation {
    fn new(
        spec: LaunchSpec,
        timings: AcpTimings,
        child: ProviderProcess,
        stdout: LineReader<ChildStdout>,
        commands: mpsc::UnboundedReceiver<ProviderCommand>,
        sink: ProviderEventSink,
        replies: mpsc::UnboundedSender<Reply>,
    ) -> Conversation {
        Conversation {
            out: EventSink::new(spec.run_id.clone(), sink),
            spec,
            timings,
            child,
            stdout,
            commands,
            phase: Phase::Initializing,
            deadline: None,
            ready: false,
            held: Vec::new(),
            queued: VecDeque::new(),
            prompts: VecDeque::new(),
            version: None,
            can_load: false,
            session: None,
            config_options: Vec::new(),
            modes: None,
            updates: Updates::default(),
            turn: None,
            turns: 0,
            pending: BTreeMap::new(),
            next_request: 0,
            request_tag: crate::providers::launch_tag(),
            replies,
        }
    }
}

/// Starts the conversation's task (see [`Conversation::run`]).
pub(super) fn spawn(
    runtime: &tokio::runtime::Handle,
    spec: LaunchSpec,
    timings: AcpTimings,
    child: ProviderProcess,
    stdout: LineReader<ChildStdout>,
    commands: mpsc::UnboundedReceiver<ProviderCommand>,
    sink: ProviderEventSink,
) {
    let (replies, reply_rx) = mpsc::unbounded_channel();
    let conversation = Conversation::new(spec, timings, child, stdout, commands, sink, replies);
    runtime.spawn(conversation.run(reply_rx));
}

/// The SDK's client connection over `transport`: its handlers hand the agent's updates
/// and permission requests to `to_loop`; the connection is handed out through `handle`
/// and lasts until `close` fires (or the transport ends).
async fn connect<T>(
    transport: T,
    to_loop: mpsc::UnboundedSender<FromAgent>,
    handle: oneshot::Sender<ConnectionTo<Agent>>,
    close: oneshot::Receiver<()>,
) -> Result<(), agent_client_protocol::Error>
where
    T: agent_client_protocol::ConnectTo<Client> + 'static,
{
    let updates = to_loop.clone();
    let asks = to_loop;
    Client
        .v1()
        .name("drover")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                let _ = updates.send(FromAgent::Update(Box::new(notification)));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| match asks
                .send(FromAgent::Permission(Box::new((request, responder))))
            {
                Ok(()) => Ok(()),
                Err(mpsc::error::SendError(FromAgent::Permission(ask))) => ask.1.respond(
                    RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled),
                ),
                Err(_) => Ok(()),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            let _ = handle.send(cx);
            let _ = close.await;
            Ok(())
        })
        .await
}

impl Conversation {
    async fn run(mut self, mut replies: mpsc::UnboundedReceiver<Reply>) {
        let (to_child, mut to_child_rx) = futures::channel::mpsc::unbounded::<String>();
        let (from_child, from_child_rx) = futures::channel::mpsc::unbounded::<io::Result<String>>();
        let transport = Lines::new(
            to_child.sink_map_err(|_| io::Error::other("the agent's stdin is closed")),
            from_child_rx,
        );
        let (agent_tx, mut agent_rx) = mpsc::unbounded_channel();
        let (handle_tx, handle_rx) = oneshot::channel();
        let (close_tx, close_rx) = oneshot::channel();
        let connection = tokio::spawn(connect(transport, agent_tx, handle_tx, close_rx));
        let stop = match handle_rx.await {
            Ok(cx) => {
                self.initialize(&cx);
                let stop = self
                    .converse(
                        &cx,
                        &mut replies,
                        &mut agent_rx,
                        &mut to_child_rx,
                        &from_child,
                    )
                    .await;
                // What the agent said before the end still counts (a turn's last words).
                while let Ok(message) = agent_rx.try_recv() {
                    self.on_agent(&cx, message).await;
                }
                stop
            }
            Err(_) => {
                self.emit(notice(
                    "could not open an ACP connection to the agent".to_string(),
                ))
                .await;
                Stop::NoHandshake
            }
        };
        tracing::debug!(run_id = %self.out.run_id(), ?stop, "ending the ACP agent");
        self.finish().await;
        let _ = close_tx.send(());
        drop(from_child);
        connection.abort();
        let Conversation {
            mut out,
            held,
            child,
            stdout,
            timings,
            ..
        } = self;
        out.send_all(held).await;
        // Nothing is written to the agent any more; what it still writes is read to the
        // end (its lines are only drained: the turns are already ended).
        let report = end_child(child, stdout, timings.shutdown, &mut out, |line| {
            line_events(line, |_| Vec::new())
        })
        .await;
        out.send(report.into()).await;
    }

    /// The handshake and the running phase, until one of them stops.
    async fn converse(
        &mut self,
        cx: &ConnectionTo<Agent>,
        replies: &mut mpsc::UnboundedReceiver<Reply>,
        agent_rx: &mut mpsc::UnboundedReceiver<FromAgent>,
        to_child_rx: &mut futures::channel::mpsc::UnboundedReceiver<String>,
        from_child: &futures::channel::mpsc::UnboundedSender<io::Result<String>>,
    ) -> Stop {
        let mut stopping: Option<Instant> = None;
        loop {
            if !self.out.is_open() {
                return Stop::Shutdown;
            }
            if stopping.is_some() && self.turn.is_none() {
                return Stop::Shutdown;
            }
            let deadline = match stopping {
                Some(at) => Some(at),
                None => self.deadline,
            };
            tokio::select! {
                biased;
                Some(message) = agent_rx.recv() => self.on_agent(cx, message).await,
                Some(reply) = replies.recv() => {
                    if let Err(stop) = self.reply(cx, reply).await {
                        return stop;
                    }
                }
                Some(line) = to_child_rx.next() => {
                    if !self.child.send_line(line) {
                        tracing::debug!(run_id = %self.out.run_id(), "the agent's stdin is closed");
                    }
                }
                line = self.stdout.next_line() => match line {
                    Ok(Some(line)) => self.line(line, from_child).await,
                    _ => return Stop::ChildGone,
                },
                command = self.commands.recv(), if stopping.is_none() => match command {
                    None => return Stop::Shutdown,
                    Some(ProviderCommand::Shutdown) => {
                        if self.turn.is_none() || !self.ready {
                            return Stop::Shutdown;
                        }
                        sweep::note_now(self.child.pid());
                        self.cancel(cx).await;
                        stopping = Some(Instant::now() + self.timings.interrupt);
                    }
                    Some(command) if !self.ready => self.queued.push_back(command),
                    Some(command) => self.command(cx, command).await,
                },
                () = self.child.exited() => {
                    self.read_what_it_wrote(cx, agent_rx, replies, from_child).await;
                    return Stop::ChildGone;
                }
                () = sleep_until(deadline) => {
                    if stopping.is_some() {
                        let secs = self.timings.interrupt.as_secs_f64();
                        self.emit(notice(format!(
                            "the agent did not end its turn within {secs:.1} s of session/cancel"
                        )))
                        .await;
                        return Stop::Shutdown;
                    }
                    let secs = self.timings.handshake.as_secs();
                    let what = match self.phase {
                        Phase::Initializing => "initialize",
                        Phase::Opening if self.spec.resume_session.is_some() => "session/load",
                        Phase::Opening => "session/new",
                        Phase::PickingModel => "session/set_config_option",
                        Phase::PickingMode => "session/set_mode",
                        Phase::Running => "a request",
                    };
                    self.emit(notice(format!(
                        "the agent did not answer {what} within {secs} s; check that its command starts an ACP agent on stdio"
                    )))
                    .await;
                    return Stop::NoHandshake;
                }
            }
        }
    }

    /// The child has exited: what it wrote before is still in the pipe and is read now,
    /// bounded by the shutdown's drain.
    async fn read_what_it_wrote(
        &mut self,
        cx: &ConnectionTo<Agent>,
        agent_rx: &mut mpsc::UnboundedReceiver<FromAgent>,
        replies: &mut mpsc::UnboundedReceiver<Reply>,
        from_child: &futures::channel::mpsc::UnboundedSender<io::Result<String>>,
    ) {
        let drain = self.timings.shutdown.drain;
        let read = async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                self.line(line, from_child).await;
            }
        };
        let _ = tokio::time::timeout(drain, read).await;
        // Give the SDK a moment to hand over what those lines meant.
        let settle = async {
            loop {
                tokio::select! {
                    biased;
                    Some(message) = agent_rx.recv() => self.on_agent(cx, message).await,
                    Some(reply) = replies.recv() => {
                        if self.reply(cx, reply).await.is_err() {
                            return;
                        }
                    }
                    () = tokio::time::sleep(Duration::from_millis(50)) => return,
                }
            }
        };
        let _ = tokio::time::timeout(drain, settle).await;
    }

    /// One stdout line: looked at, then handed to the SDK.
    async fn line(
        &mut self,
        line: Line,
        from_child: &futures::channel::mpsc::UnboundedSender<io::Result<String>>,
    ) {
        let text = match line {
            Line::Text(text) => text,
            too_long @ Line::TooLong { .. } => {
                let events = line_events(too_long, |_| Vec::new());
                self.emit_all(events).await;
                return;
            }
        };
        match map::gate(&text) {
            Gate::Ignore => return,
            Gate::Skip(why) => {
                self.emit(notice(why)).await;
                return;
            }
            // The SDK answers it as JSON-RPC says (a parse error).
            Gate::PassWithNotice(why) => self.emit(notice(why)).await,
            Gate::Pass => {}
        }
        let _ = from_child.unbounded_send(Ok(text));
    }

    fn initialize(&mut self, cx: &ConnectionTo<Agent>) {
        self.deadline = Some(Instant::now() + self.timings.handshake);
        let request = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(ClientCapabilities::new())
            .client_info(Implementation::new("drover", env!("CARGO_PKG_VERSION")));
        self.send(cx, request, |r| Reply::Initialized(Box::new(r)));
    }

    /// Sends `request`; its answer comes back as `wrap(answer)`.
    fn send<R>(
        &self,
        cx: &ConnectionTo<Agent>,
        request: R,
        wrap: impl FnOnce(Result<R::Response, agent_client_protocol::Error>) -> Reply + Send + 'static,
    ) where
        R: JsonRpcRequest + Send + 'static,
        R::Response: Send + 'static,
    {
        let cx = cx.clone();
        let replies = self.replies.clone();
        tokio::spawn(async move {
            let answer = cx.send_request(request).block_task().await;
            let _ = replies.send(wrap(answer));
        });
    }

    fn mcp_servers(&self) -> Vec<McpServer> {
        // Every ACP agent takes stdio MCP servers (the protocol requires it).
        self.spec
            .mcp
            .iter()
            .map(|server| {
                McpServer::Stdio(
                    McpServerStdio::new(MCP_SERVER_NAME, server.command.clone())
                        .args(server.args.clone())
                        .env(
                            server
                                .env
                                .iter()
                                .map(|(k, v)| EnvVariable::new(k.clone(), v.clone()))
                                .collect(),
                        ),
                )
            })
            .collect()
    }

    async fn reply(&mut self, cx: &ConnectionTo<Agent>, reply: Reply) -> Result<(), Stop> {
        match reply {
            Reply::Initialized(init) => match *init {
                Ok(init) => self.initialized(cx, init).await?,
                Err(e) => {
                    self.emit(notice(format!(
                        "the agent refused initialize: {}",
                        e.message
                    )))
                    .await;
                    return Err(Stop::NoHandshake);
                }
            },
            Reply::Opened(opened) => match *opened {
                Ok(session) => {
                    self.session = Some(session.session_id.clone());
                    self.config_options = session.config_options.unwrap_or_default();
                    self.modes = session.modes;
                    self.opened(cx).await;
                }
                Err(e) => return Err(self.not_opened(&e).await),
            },
            Reply::Loaded(loaded) => match *loaded {
                Ok(session) => {
                    self.config_options = session.config_options.unwrap_or_default();
                    self.modes = session.modes;
                    self.opened(cx).await;
                }
                Err(e) => return Err(self.not_opened(&e).await),
            },
            Reply::ModelSet(result) => {
                if let Err(e) = *result {
                    self.emit(notice(format!(
                        "the agent refused the model {}: {}; it runs its default",
                        self.spec.model.as_deref().unwrap_or("?"),
                        e.message
                    )))
                    .await;
                }
                self.pick_mode(cx).await;
            }
            Reply::ModeSet(result) => {
                match *result {
                    Ok(_) => {
                        if let (Some(modes), Some(mode)) = (self.modes.as_mut(), &self.spec.mode) {
                            modes.current_mode_id = mode.clone().into();
                        }
                    }
                    Err(e) => {
                        self.emit(notice(format!(
                            "the agent refused the session mode {}: {}; it runs in its current mode",
                            self.spec.mode.as_deref().unwrap_or("?"),
                            e.message
                        )))
                        .await;
                    }
                }
                self.ready(cx).await;
            }
            Reply::Prompted(number, result) => self.prompted(cx, number, *result).await,
        }
        Ok(())
    }

    async fn not_opened(&mut self, e: &agent_client_protocol::Error) -> Stop {
        let what = if self.spec.resume_session.is_some() {
            "session/load"
        } else {
            "session/new"
        };
        self.emit(notice(format!("the agent refused {what}: {}", e.message)))
            .await;
        Stop::NoHandshake
    }

    async fn initialized(
        &mut self,
        cx: &ConnectionTo<Agent>,
        init: InitializeResponse,
    ) -> Result<(), Stop> {
        self.version = init.agent_info.as_ref().map(|i| i.version.clone());
        self.can_load = init.agent_capabilities.load_session;
        self.phase = Phase::Opening;
        self.deadline = Some(Instant::now() + self.timings.handshake);
        let cwd: PathBuf = self.spec.cwd.clone();
        match self.spec.resume_session.clone() {
            Some(id) if self.can_load => {
                self.session = Some(SessionId::from(id.clone()));
                let request = LoadSessionRequest::new(id, cwd).mcp_servers(self.mcp_servers());
                self.send(cx, request, |r| Reply::Loaded(Box::new(r)));
            }
            Some(id) => {
                self.emit(notice(format!(
                            "cannot resume session {id}: this agent does not load sessions (it does not advertise loadSession); dispatch a new run instead"
                        )))
                        .await;
                return Err(Stop::NoHandshake);
            }
            None => {
                let request = NewSessionRequest::new(cwd).mcp_servers(self.mcp_servers());
                self.send(cx, request, |r| Reply::Opened(Box::new(r)));
            }
        }
        Ok(())
    }

    async fn prompted(
        &mut self,
        cx: &ConnectionTo<Agent>,
        number: u64,
        result: Result<PromptResponse, agent_client_protocol::Error>,
    ) {
        let Some(turn) = self.turn.take_if(|t| t.number == number) else {
            return;
        };
        let duration_ms = u64::try_from(turn.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let session = self.session_id();
        let events = match result {
            Ok(response) => {
                self.updates
                    .turn_end(&response, self.spec.model.as_deref(), &session, duration_ms)
            }
            Err(e) => self
                .updates
                .turn_failed(&e.message, Some(&session), duration_ms),
        };
        self.emit_all(events).await;
        if let Some(prompt) = self.prompts.pop_front() {
            self.prompt(cx, prompt);
        }
    }

    /// The session is open: the model is picked when the agent offers a choice, then
    /// `Ready`.
    async fn opened(&mut self, cx: &ConnectionTo<Agent>) {
        if let Some(model) = self.spec.model.clone() {
            match model_choice(&self.config_options, &model) {
                Ok(Some((config_id, value))) => {
                    self.phase = Phase::PickingModel;
                    self.deadline = Some(Instant::now() + self.timings.handshake);
                    let request = SetSessionConfigOptionRequest::new(
                        self.session_id(),
                        config_id,
                        SessionConfigValueId::from(value),
                    );
                    self.send(cx, request, |r| Reply::ModelSet(Box::new(r)));
                    return;
                }
                Ok(None) => {}
                Err(why) => self.emit(notice(why)).await,
            }
        }
        self.pick_mode(cx).await;
    }

    /// The model is picked: the configured session mode is set (`session/set_mode`)
    /// when the agent offers it, then `Ready`; a mode it does not offer is a notice and
    /// the run goes on in the agent's current mode.
    async fn pick_mode(&mut self, cx: &ConnectionTo<Agent>) {
        if let Some(mode) = self.spec.mode.clone() {
            match mode_choice(self.modes.as_ref(), &mode) {
                Ok(true) => {
                    self.phase = Phase::PickingMode;
                    self.deadline = Some(Instant::now() + self.timings.handshake);
                    let request = SetSessionModeRequest::new(self.session_id(), mode);
                    self.send(cx, request, |r| Reply::ModeSet(Box::new(r)));
                    return;
                }
                Ok(false) => {}
                Err(why) => self.emit(notice(why)).await,
            }
        }
        self.ready(cx).await;
    }

    async fn ready(&mut self, cx: &ConnectionTo<Agent>) {
        self.phase = Phase::Running;
        self.deadline = None;
        self.ready = true;
        let version = self.version.clone();
        self.out.send(ProviderEvent::Ready { version }).await;
        self.out
            .send(ProviderEvent::Session {
                session_id: self.session_id(),
                model: self.spec.model.clone(),
            })
            .await;
        if let Some(modes) = self
            .modes
            .as_ref()
            .filter(|m| !m.available_modes.is_empty())
        {
            // The session's modes, and the one it runs in, where the user sees the run.
            let text = modes_note(modes);
            self.out.send(notice(text)).await;
        }
        if !self.can_load {
            // Its session lives only as long as this child: no hibernation.
            self.out
                .send(ProviderEvent::SessionNotResumable {
                    reason: "this agent does not load sessions (it does not advertise \
                             loadSession): the run is kept running while idle, never \
                             hibernated, and cannot be resumed once its agent has exited"
                        .to_string(),
                })
                .await;
        }
        let held = std::mem::take(&mut self.held);
        self.out.send_all(held).await;
        while let Some(command) = self.queued.pop_front() {
            self.command(cx, command).await;
        }
    }

    fn session_id(&self) -> String {
        self.session
            .as_ref()
            .map(|s| s.0.to_string())
            .unwrap_or_default()
    }

    async fn command(&mut self, cx: &ConnectionTo<Agent>, command: ProviderCommand) {
        match command {
            ProviderCommand::StartTurn { prompt } => {
                if self.turn.is_some() {
                    self.prompts.push_back(prompt);
                } else {
                    self.prompt(cx, prompt);
                }
            }
            ProviderCommand::Answer { request_id, answer } => {
                if let Err(text) = self.answer(&request_id, &answer) {
                    self.emit(notice(text)).await;
                }
            }
            ProviderCommand::Interrupt => self.cancel(cx).await,
            ProviderCommand::Shutdown => {}
        }
    }

    fn prompt(&mut self, cx: &ConnectionTo<Agent>, prompt: String) {
        self.turns += 1;
        let number = self.turns;
        self.turn = Some(Turn {
            number,
            started: Instant::now(),
        });
        self.updates.start_turn();
        let request = PromptRequest::new(
            self.session_id(),
            vec![ContentBlock::Text(TextContent::new(prompt))],
        );
        self.send(cx, request, move |r| Reply::Prompted(number, Box::new(r)));
    }

    /// `session/cancel` for the turn in flight; the requests it was waiting on are
    /// answered `cancelled` (as the protocol asks) and withdrawn.
    async fn cancel(&mut self, cx: &ConnectionTo<Agent>) {
        if self.turn.is_none() && self.pending.is_empty() {
            return;
        }
        if let Some(session) = self.session.clone()
            && let Err(e) = cx.send_notification(CancelNotification::new(session))
        {
            tracing::debug!(run_id = %self.out.run_id(), error = %e.message, "could not send session/cancel");
        }
        self.withdraw_all().await;
        // Queued prompts were never taken: they end with the cancelled turn.
        self.prompts.clear();
    }

    async fn withdraw_all(&mut self) {
        for (request_id, pending) in std::mem::take(&mut self.pending) {
            let _ = pending.responder.respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            ));
            self.emit(ProviderEvent::PermissionWithdrawn { request_id })
                .await;
        }
    }

    fn answer(&mut self, request_id: &str, answer: &PermissionAnswer) -> Result<(), String> {
        let Some(pending) = self.pending.remove(request_id) else {
            return Err(format!(
                "the agent is not waiting on request {request_id} any more"
            ));
        };
        let outcome = match map::option_for(&pending.options, answer) {
            Ok(Some(option)) => {
                RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option))
            }
            Ok(None) => RequestPermissionOutcome::Cancelled,
            Err(why) => {
                self.pending.insert(request_id.to_string(), pending);
                return Err(why);
            }
        };
        pending
            .responder
            .respond(RequestPermissionResponse::new(outcome))
            .map_err(|e| format!("could not answer the agent: {}", e.message))
    }

    async fn on_agent(&mut self, _cx: &ConnectionTo<Agent>, message: FromAgent) {
        match message {
            FromAgent::Update(notification) => {
                let ours = self.session.as_ref() == Some(&notification.session_id);
                // Updates before the session is open are a loaded session's replay of
                // what drover already recorded; another session's are not this run's.
                if !ours || self.phase != Phase::Running {
                    return;
                }
                let events = self.updates.read(notification.update);
                self.emit_all(events).await;
            }
            FromAgent::Permission(ask) => {
                let (request, responder) = *ask;
                let ours = self.session.as_ref() == Some(&request.session_id);
                if !ours || self.phase != Phase::Running {
                    let _ = responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(format!("unknown session {}", request.session_id.0)),
                    );
                    self.emit(notice(format!(
                        "refused a permission request for session {}, which is not this run's",
                        crate::providers::wire::clip(&request.session_id.0, 80)
                    )))
                    .await;
                    return;
                }
                if self.pending.len() >= MAX_PENDING {
                    let _ = responder.respond(RequestPermissionResponse::new(
                        RequestPermissionOutcome::Cancelled,
                    ));
                    self.emit(notice(format!(
                        "cancelled a permission request: {MAX_PENDING} are already waiting"
                    )))
                    .await;
                    return;
                }
                self.next_request += 1;
                let request_id = format!("acp-{}-{}", self.request_tag, self.next_request);
                let fields = &request.tool_call.fields;
                let title = fields.title.clone().unwrap_or_else(|| "tool".to_string());
                let ask = map::ask_of(
                    fields.kind.unwrap_or(ToolKind::Other),
                    &title,
                    fields.raw_input.as_ref(),
                    fields.locations.as_deref().unwrap_or_default(),
                    fields.content.as_deref().unwrap_or_default(),
                );
                let event = ProviderEvent::PermissionRequested(PermissionRequest {
                    request_id: request_id.clone(),
                    kind: RequestKind::Permission,
                    tool: crate::providers::wire::clip(&title, 120),
                    ask,
                    always: map::always_option(&request.options),
                    tool_use_id: Some(request.tool_call.tool_call_id.0.to_string()),
                    blocked_path: None,
                });
                self.pending.insert(
                    request_id,
                    Pending {
                        options: request.options,
                        responder,
                    },
                );
                self.emit(event).await;
            }
        }
    }

    /// Before `Exited`: the requests still waiting are cancelled, and a turn the agent
    /// never ended is ended as failed.
    async fn finish(&mut self) {
        self.withdraw_all().await;
        if let Some(turn) = self.turn.take() {
            let duration_ms = u64::try_from(turn.started.elapsed().as_millis()).unwrap_or(0);
            let session = self.session.as_ref().map(|s| s.0.to_string());
            let events = self.updates.turn_failed(
                "the agent ended before it answered the turn",
                session.as_deref(),
                duration_ms,
            );
            self.emit_all(events).await;
        }
    }

    async fn emit_all(&mut self, events: Vec<ProviderEvent>) {
        for event in events {
            self.emit(event).await;
        }
    }

    async fn emit(&mut self, event: ProviderEvent) {
        if self.ready {
            self.out.send(event).await;
        } else {
            self.held.push(event);
        }
    }
}

/// The config option and value that pick `model`, when the agent offers a model choice
/// (an option of category `model`, or id `model`). `Ok(None)`: it already runs it, or
/// offers no choice; `Err`: a notice saying the choice does not have it.
fn model_choice(
    options: &[SessionConfigOption],
    model: &str,
) -> Result<Option<(String, String)>, String> {
    let Some(option) = options.iter().find(|o| {
        matches!(o.category, Some(SessionConfigOptionCategory::Model)) || &*o.id.0 == "model"
    }) else {
        return Ok(None);
    };
    let SessionConfigKind::Select(select) = &option.kind else {
        return Ok(None);
    };
    if &*select.current_value.0 == model {
        return Ok(None);
    }
    let values: Vec<(String, String)> = match &select.options {
        SessionConfigSelectOptions::Ungrouped(options) => options
            .iter()
            .map(|o| (o.value.0.to_string(), o.name.clone()))
            .collect(),
        SessionConfigSelectOptions::Grouped(groups) => groups
            .iter()
            .flat_map(|g| g.options.iter())
            .map(|o| (o.value.0.to_string(), o.name.clone()))
            .collect(),
        _ => Vec::new(),
    };
    match values.iter().find(|(v, n)| v == model || n == model) {
        Some((value, _)) => Ok(Some((option.id.0.to_string(), value.clone()))),
        None => Err(format!(
            "the agent offers no model {model} (it offers: {}); it runs {}",
            crate::providers::wire::clip(
                &values
                    .iter()
                    .map(|(v, _)| v.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                300
            ),
            select.current_value.0
        )),
    }
}

/// Whether `mode` must be set with `session/set_mode`: `Ok(true)` when the agent offers
/// it and runs another, `Ok(false)` when it already runs it, `Err` a notice when it
/// offers no such mode (or no modes at all).
fn mode_choice(modes: Option<&SessionModeState>, mode: &str) -> Result<bool, String> {
    let Some(modes) = modes else {
        return Err(format!(
            "the agent offers no session mode {mode} (it offers no session modes); it runs in its own"
        ));
    };
    if &*modes.current_mode_id.0 == mode {
        return Ok(false);
    }
    if modes.available_modes.iter().any(|m| &*m.id.0 == mode) {
        return Ok(true);
    }
    Err(format!(
        "the agent offers no session mode {mode} (it offers: {}); it runs in mode {}",
        crate::providers::wire::clip(
            &modes
                .available_modes
                .iter()
                .map(|m| &*m.id.0)
                .collect::<Vec<_>>()
                .join(", "),
            300
        ),
        modes.current_mode_id.0
    ))
}

/// The note that says which session modes the agent offers and which one it runs in.
fn modes_note(modes: &SessionModeState) -> String {
    let offered = modes
        .available_modes
        .iter()
        .map(|m| &*m.id.0)
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "the agent offers the session modes {}; it runs in mode {}",
        crate::providers::wire::clip(&offered, 300),
        modes.current_mode_id.0
    )
}

/// Resolves at `deadline`; never without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::SessionMode;

    fn offered(current: &str) -> SessionModeState {
        SessionModeState::new(
            current.to_string(),
            vec![
                SessionMode::new("default", "Default"),
                SessionMode::new("plan", "Plan"),
            ],
        )
    }

    #[test]
    fn a_mode_is_set_only_when_offered_and_not_already_current() {
        assert_eq!(mode_choice(Some(&offered("default")), "plan"), Ok(true));
        assert_eq!(mode_choice(Some(&offered("plan")), "plan"), Ok(false));
        assert_eq!(
            mode_choice(Some(&offered("default")), "yolo"),
            Err(
                "the agent offers no session mode yolo (it offers: default, plan); it runs in mode default"
                    .to_string()
            )
        );
        let none = mode_choice(None, "plan").unwrap_err();
        assert!(none.contains("offers no session modes"), "{none}");
        assert_eq!(
            modes_note(&offered("plan")),
            "the agent offers the session modes default, plan; it runs in mode plan"
        );
    }
}
