//! The simulated agent's ACP mode (`drover sim-agent --acp`): the same scenarios, played
//! as an ACP agent on the `agent-client-protocol` SDK's agent side over stdio, so the
//! ACP provider is tested headless against a real child
//! (docs/PROVIDERS.md §"ACP agents").
//!
//! A scenario's turn is one `session/prompt`: text and thinking become
//! `agent_message_chunk` and `agent_thought_chunk` updates, a tool call a `tool_call`
//! (with `session/request_permission` first when it needs permission; a denial is
//! heard, its `on_deny` said), `garbage` a raw line on stdout, `hang` a turn that ends
//! only on `session/cancel`, `crash` an exit; its usage comes back in the prompt's answer
//! and its session cost in a `usage_update`. Sessions are kept like the stream-json
//! sim's ([`super::session`]), so `session/load` goes on where the session was.
//! Every session offers the modes `default` (its current one) and `plan`; a
//! `session/set_mode` to one of them is recorded and said (`the client set session mode
//! plan`) at the start of the session's next turn, one to any other mode refused.
//! `DROVER_SIM_ACP` (a comma-separated list) makes it misbehave for tests:
//! `no-initialize` (never answers it), `no-load` (does not advertise `loadSession`),
//! `unknown-request` (asks the client for a method it does not have and says what it
//! heard), `foreign-permission` (asks permission for another session and says what it
//! heard), `huge-notification` (a 2 MiB update before the turn's text).
//! What must stay true: it speaks ACP as the SDK does and nothing drover-specific.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Content, ContentBlock, ContentChunk, Cost,
    Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionMode,
    SessionModeState, SessionNotification, SessionUpdate, SetSessionModeRequest,
    SetSessionModeResponse, StopReason, TextContent, ToolCall as AcpToolCall, ToolCallContent,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, Usage, UsageUpdate,
};
use agent_client_protocol::{Agent, Client, Lines};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::agent::AgentOptions;
use super::scenario::{Action, Vars};

/// The environment variable listing the misbehaviours (see the module doc).
pub const MISBEHAVE_ENV: &str = "DROVER_SIM_ACP";

#[derive(Default)]
struct Sessions {
    /// Per session: turns done, and the cancel signal of its turn in flight.
    turns: HashMap<String, usize>,
    cancel: HashMap<String, watch::Sender<bool>>,
    /// Per session: the mode the client set with `session/set_mode`, not yet said.
    mode_set: HashMap<String, String>,
}

/// The session modes the sim offers; the first is every session's current one.
const MODES: [&str; 2] = ["default", "plan"];

fn modes() -> SessionModeState {
    SessionModeState::new(
        MODES[0],
        MODES
            .iter()
            .map(|id| SessionMode::new(*id, id.to_string()))
            .collect(),
    )
}

struct Shared {
    options: AgentOptions,
    misbehave: Vec<String>,
    sessions: Mutex<Sessions>,
    raw: futures::channel::mpsc::UnboundedSender<String>,
}

impl Shared {
    fn misbehaves(&self, what: &str) -> bool {
        self.misbehave.iter().any(|m| m == what)
    }
}

/// Plays `options.scenario` as an ACP agent on stdin/stdout until stdin closes. Returns
/// the exit code.
pub async fn run(options: AgentOptions) -> i32 {
    let misbehave = std::env::var(MISBEHAVE_ENV)
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let (out_tx, mut out_rx) = futures::channel::mpsc::unbounded::<String>();
    let shared = Arc::new(Shared {
        options,
        misbehave,
        sessions: Mutex::new(Sessions::default()),
        raw: out_tx.clone(),
    });
    // One writer for the SDK's lines and the raw ones a scenario writes.
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = out_rx.next().await {
            if stdout.write_all(line.as_bytes()).await.is_err()
                || stdout.write_all(b"\n").await.is_err()
                || stdout.flush().await.is_err()
            {
                return;
            }
        }
    });
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let incoming = futures::stream::unfold(stdin.lines(), |mut lines| async move {
        match lines.next_line().await {
            Ok(Some(line)) => Some((Ok(line), lines)),
            Ok(None) => None,
            Err(e) => Some((Err(e), lines)),
        }
    });
    let transport = Lines::new(
        out_tx.sink_map_err(|_| std::io::Error::other("stdout is closed")),
        incoming,
    );
    let result = serve(transport, shared).await;
    writer.abort();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sim-agent --acp: {}", e.message);
            1
        }
    }
}

async fn serve(
    transport: impl agent_client_protocol::ConnectTo<Agent> + 'static,
    shared: Arc<Shared>,
) -> Result<(), agent_client_protocol::Error> {
    let on_init = shared.clone();
    let on_new = shared.clone();
    let on_load = shared.clone();
    let on_prompt = shared.clone();
    let on_mode = shared.clone();
    let on_cancel = shared;
    Agent
        .v1()
        .name("drover-sim-acp")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                if on_init.misbehaves("no-initialize") {
                    // Never answered: the responder is kept alive for good.
                    std::mem::forget(responder);
                    return Ok(());
                }
                let capabilities =
                    AgentCapabilities::new().load_session(!on_init.misbehaves("no-load"));
                responder.respond(
                    InitializeResponse::new(request.protocol_version.min(ProtocolVersion::V1))
                        .agent_capabilities(capabilities)
                        .agent_info(Implementation::new(
                            "drover-sim-acp",
                            on_init.options.version.clone(),
                        )),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: NewSessionRequest, responder, _cx| {
                let id = format!(
                    "sim-acp-{}-{}",
                    std::process::id(),
                    crate::clock::now_micros()
                );
                if let Ok(mut sessions) = on_new.sessions.lock() {
                    sessions.turns.insert(id.clone(), 0);
                }
                // Kept from its start, so a session cut in its first turn still loads.
                if let Some(store) = &on_new.options.sessions {
                    let _ = store.record(&id, &on_new.options.scenario_name, 0);
                }
                responder.respond(NewSessionResponse::new(id).modes(modes()))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, _cx| {
                let id = request.session_id.0.to_string();
                let done = on_load
                    .options
                    .sessions
                    .as_ref()
                    .and_then(|s| s.turns_done(&id, &on_load.options.scenario_name));
                let Some(done) = done else {
                    return responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(format!("no session {id}")),
                    );
                };
                if let Ok(mut sessions) = on_load.sessions.lock() {
                    sessions.turns.insert(id, done);
                }
                responder.respond(LoadSessionResponse::new().modes(modes()))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, _cx| {
                let mode = request.mode_id.0.to_string();
                if !MODES.contains(&mode.as_str()) {
                    return responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(format!("no mode {mode}")),
                    );
                }
                if let Ok(mut sessions) = on_mode.sessions.lock() {
                    sessions
                        .mode_set
                        .insert(request.session_id.0.to_string(), mode);
                }
                responder.respond(SetSessionModeResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx: ConnectionTo<Client>| {
                let shared = on_prompt.clone();
                // The turn runs apart from the connection's handlers: it waits on the
                // client's answers, which those handlers deliver.
                tokio::spawn(async move {
                    let answer = play_turn(&shared, &cx, request).await;
                    let _ = match answer {
                        Ok(response) => responder.respond(response),
                        Err(e) => responder.respond_with_error(e),
                    };
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelNotification, _cx| {
                if let Ok(sessions) = on_cancel.sessions.lock()
                    && let Some(signal) = sessions.cancel.get(&*cancel.session_id.0)
                {
                    let _ = signal.send(true);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}

fn say(cx: &ConnectionTo<Client>, session: &str, update: SessionUpdate) {
    let _ = cx.send_notification(SessionNotification::new(session.to_string(), update));
}

fn text_update(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(
        text.to_string(),
    ))))
}

fn kind_of(tool: &str) -> ToolKind {
    match tool {
        "Bash" | "shell" | "bash" => ToolKind::Execute,
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => ToolKind::Edit,
        "Read" => ToolKind::Read,
        "Grep" | "Glob" => ToolKind::Search,
        "WebFetch" => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

fn title_of(tool: &str, input: &Value) -> String {
    let subject = ["command", "file_path", "path", "url", "pattern"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str));
    match subject {
        Some(s) => format!("{tool} {s}"),
        None => tool.to_string(),
    }
}

/// `input` with `{now_us}` in its strings filled with the wall clock now.
fn stamped(input: &Value) -> Value {
    match input {
        Value::String(s) if s.contains("{now_us}") => {
            Value::String(s.replace("{now_us}", &crate::clock::now_micros().to_string()))
        }
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), stamped(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(stamped).collect()),
        other => other.clone(),
    }
}

/// Plays the session's next turn; the answer to `session/prompt`.
async fn play_turn(
    shared: &Shared,
    cx: &ConnectionTo<Client>,
    request: PromptRequest,
) -> Result<PromptResponse, agent_client_protocol::Error> {
    let session = request.session_id.0.to_string();
    let (cancel_tx, mut cancel) = watch::channel(false);
    let (index, mode_set) = {
        let Ok(mut sessions) = shared.sessions.lock() else {
            return Err(agent_client_protocol::Error::internal_error());
        };
        let Some(done) = sessions.turns.get(&session).copied() else {
            return Err(agent_client_protocol::Error::invalid_params()
                .data(format!("no session {session}")));
        };
        sessions.cancel.insert(session.clone(), cancel_tx);
        (done, sessions.mode_set.remove(&session))
    };
    if let Some(mode) = mode_set {
        say(
            cx,
            &session,
            text_update(&format!("the client set session mode {mode}\n")),
        );
    }
    let prompt = request
        .prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let scenario = &shared.options.scenario;
    let turn = scenario.turn(index);
    let mut usage = super::scenario::Usage::default();
    let mut last_text = String::new();

    if index == 0 {
        misbehave(shared, cx, &session).await;
    }

    for step in &turn.steps {
        for i in 1..=step.repeat.times {
            // Every repetition takes the step's pause, as in the stream-json sim.
            if (step.delay_ms > 0 && sleep_or_cancel(step.delay_ms, &mut cancel).await)
                || *cancel.borrow()
            {
                return Ok(PromptResponse::new(StopReason::Cancelled));
            }
            let vars = Vars {
                i,
                answer: None,
                prompt: prompt.clone(),
                now_us: crate::clock::now_micros(),
            };
            match &step.action {
                Action::Text { text, meta } => {
                    let text = super::scenario::fill(text, &vars);
                    usage.add(
                        &meta
                            .usage
                            .unwrap_or_else(|| super::scenario::Usage::estimated_for(&text)),
                    );
                    say(cx, &session, text_update(&text));
                    last_text = text;
                }
                Action::Thinking { text, .. } => {
                    say(
                        cx,
                        &session,
                        SessionUpdate::AgentThoughtChunk(ContentChunk::new(ContentBlock::Text(
                            TextContent::new(super::scenario::fill(text, &vars)),
                        ))),
                    );
                }
                Action::Tool(call) => {
                    if let Some(u) = call.meta.usage {
                        usage.add(&u);
                    }
                    let id = format!("call-{index}-{i}-{}", crate::clock::now_micros());
                    let title = title_of(&call.name, &call.input);
                    let kind = kind_of(&call.name);
                    say(
                        cx,
                        &session,
                        SessionUpdate::ToolCall(
                            AcpToolCall::new(id.clone(), title.clone())
                                .kind(kind)
                                .status(ToolCallStatus::Pending)
                                .raw_input(call.input.clone()),
                        ),
                    );
                    let allowed = if call.needs_permission {
                        // `{now_us}` in the input is the moment the request is sent (the
                        // latency bench times it from here).
                        let input = stamped(&call.input);
                        let ask = RequestPermissionRequest::new(
                            session.clone(),
                            ToolCallUpdate::new(
                                id.clone(),
                                ToolCallUpdateFields::new()
                                    .title(title_of(&call.name, &input))
                                    .kind(kind)
                                    .raw_input(input),
                            ),
                            vec![
                                PermissionOption::new(
                                    "allow-once",
                                    "Allow",
                                    PermissionOptionKind::AllowOnce,
                                ),
                                PermissionOption::new(
                                    "allow-always",
                                    "Always allow",
                                    PermissionOptionKind::AllowAlways,
                                ),
                                PermissionOption::new(
                                    "reject-once",
                                    "Reject",
                                    PermissionOptionKind::RejectOnce,
                                ),
                            ],
                        );
                        let answer = cx.send_request(ask).block_task();
                        tokio::select! {
                            answer = answer => match answer.map(|r| r.outcome) {
                                Ok(RequestPermissionOutcome::Selected(s)) => {
                                    s.option_id.0.starts_with("allow")
                                }
                                Ok(RequestPermissionOutcome::Cancelled) => {
                                    return Ok(PromptResponse::new(StopReason::Cancelled));
                                }
                                _ => false,
                            },
                            _ = cancel.wait_for(|c| *c) => {
                                return Ok(PromptResponse::new(StopReason::Cancelled));
                            }
                        }
                    } else {
                        true
                    };
                    if !allowed {
                        say(
                            cx,
                            &session,
                            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                                id,
                                ToolCallUpdateFields::new()
                                    .status(ToolCallStatus::Failed)
                                    .raw_output(Value::String("denied by the user".into())),
                            )),
                        );
                        let said = call
                            .on_deny
                            .clone()
                            .unwrap_or_else(|| format!("I was not allowed to use {}.", call.name));
                        say(cx, &session, text_update(&said));
                        last_text = said;
                        continue;
                    }
                    if call.duration_ms > 0 && sleep_or_cancel(call.duration_ms, &mut cancel).await
                    {
                        return Ok(PromptResponse::new(StopReason::Cancelled));
                    }
                    let cwd = std::path::Path::new(&shared.options.cwd);
                    let acted =
                        super::act::perform(&call.name, &call.input, call.run, cwd, &call.output)
                            .await;
                    let (output, is_error) = match acted {
                        Some(a) => (a.output, a.is_error),
                        None => (call.output.clone(), call.is_error),
                    };
                    say(
                        cx,
                        &session,
                        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                            id,
                            ToolCallUpdateFields::new()
                                .status(if is_error {
                                    ToolCallStatus::Failed
                                } else {
                                    ToolCallStatus::Completed
                                })
                                .content(vec![ToolCallContent::Content(Content::new(
                                    ContentBlock::Text(TextContent::new(output)),
                                ))]),
                        )),
                    );
                }
                Action::Garbage { line } => {
                    let _ = shared.raw.unbounded_send(line.clone());
                }
                Action::Sleep { ms } if sleep_or_cancel(*ms, &mut cancel).await => {
                    return Ok(PromptResponse::new(StopReason::Cancelled));
                }
                Action::Crash { exit_code, stderr } => {
                    if let Some(stderr) = stderr {
                        eprintln!("{stderr}");
                    }
                    std::process::exit(*exit_code);
                }
                Action::Hang { .. } => {
                    let _ = cancel.wait_for(|c| *c).await;
                    return Ok(PromptResponse::new(StopReason::Cancelled));
                }
                // Questions, rate limits, retries and result lines are Claude Code's.
                _ => {}
            }
        }
    }
    if let Some(block) = &turn.result_block {
        let vars = Vars {
            i: 1,
            answer: None,
            prompt,
            now_us: crate::clock::now_micros(),
        };
        let text = format!("\n\n{}", block.render(&vars));
        say(cx, &session, text_update(&text));
    }
    let _ = last_text;
    if scenario.session_cost_per_turn > 0.0 {
        let total = scenario.session_cost_per_turn * (index + 1) as f64;
        say(
            cx,
            &session,
            SessionUpdate::UsageUpdate(
                UsageUpdate::new(usage.input_tokens + usage.output_tokens, 200_000)
                    .cost(Cost::new(total, "USD")),
            ),
        );
    }
    if let Ok(mut sessions) = shared.sessions.lock() {
        sessions.turns.insert(session.clone(), index + 1);
        sessions.cancel.remove(&session);
    }
    if let Some(store) = &shared.options.sessions {
        let _ = store.record(&session, &shared.options.scenario_name, index + 1);
    }
    let input =
        usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
    Ok(PromptResponse::new(StopReason::EndTurn).usage(
        Usage::new(input + usage.output_tokens, input, usage.output_tokens)
            .cached_read_tokens(usage.cache_read_input_tokens)
            .cached_write_tokens(usage.cache_creation_input_tokens),
    ))
}

/// What `DROVER_SIM_ACP` asks for before the first turn's steps.
async fn misbehave(shared: &Shared, cx: &ConnectionTo<Client>, session: &str) {
    if shared.misbehaves("huge-notification") {
        let huge = "x".repeat(2 * 1024 * 1024);
        say(cx, session, text_update(&huge));
    }
    if shared.misbehaves("unknown-request") {
        let unknown = agent_client_protocol::UntypedMessage {
            method: "sim/unknown".into(),
            params: serde_json::json!({}),
        };
        let answer = cx.send_request(unknown).block_task().await;
        let heard = match answer {
            Ok(_) => "the client answered sim/unknown".to_string(),
            Err(e) => format!(
                "the client refused sim/unknown with error {}",
                e.code.value()
            ),
        };
        say(cx, session, text_update(&format!("{heard}. ")));
    }
    if shared.misbehaves("foreign-permission") {
        let ask = RequestPermissionRequest::new(
            "not-this-session".to_string(),
            ToolCallUpdate::new(
                "foreign",
                ToolCallUpdateFields::new().title("Bash rm -rf /".to_string()),
            ),
            vec![PermissionOption::new(
                "allow-once",
                "Allow",
                PermissionOptionKind::AllowOnce,
            )],
        );
        let heard = match cx.send_request(ask).block_task().await {
            Ok(_) => "the client answered a permission request for another session".to_string(),
            Err(e) => format!(
                "the client refused a permission request for another session with error {}",
                e.code.value()
            ),
        };
        say(cx, session, text_update(&format!("{heard}. ")));
    }
}

/// Sleeps `ms`; `true` when the turn was cancelled meanwhile.
async fn sleep_or_cancel(ms: u64, cancel: &mut watch::Receiver<bool>) -> bool {
    let slept = tokio::select! {
        () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => false,
        _ = cancel.wait_for(|c| *c) => true,
    };
    slept || *cancel.borrow()
}
