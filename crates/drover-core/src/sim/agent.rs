//! The simulated agent's protocol loop: a scenario played over Claude Code's stream-json.
//!
//! Owns the session (id, model, permission mode, money, the allow rules answers added)
//! and the order of lines. A reader task turns stdin lines into [`Inbound`] values on a
//! channel; the loop is the only writer of stdout (one JSON line at a time, flushed per
//! line). What must stay true:
//! - each turn opens with a `system` `init` line (same session id every time) and every
//!   turn that is not cut short by a crash, a hang or closed stdin ends with
//!   exactly one `result` line, interrupted turns included;
//! - a `tool_use` always gets its `tool_result` before the turn's `result`;
//! - control requests (`initialize`, `interrupt`, …) are answered whenever they arrive,
//!   except while the scenario hangs; a `control_response` is only taken by the request
//!   that has its id; user lines that arrive during a turn wait for their own turn;
//! - stdin closing ends the process with exit 0 after the step in progress (a step
//!   waiting for a permission answer cannot finish, so it ends at once).

use serde_json::{Value, json};
use std::collections::VecDeque;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender, error::TryRecvError};
use tokio::time::{Duration, Instant, sleep_until};

use super::scenario::{
    Action, BlockPlacement, MessageMeta, Question, RateLimitStatus, ResultStep, Scenario, ToolCall,
    Turn, Usage, Vars, fill,
};
use super::session::SessionStore;
use super::wire::{self, Envelope, Inbound, Reply, SessionSpend, ToolPermission};

/// Claude Code's permission modes (`--permission-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionMode {
    /// Ask for every tool that needs permission (drover's `ask` policy).
    Default,
    /// File edits are allowed without asking; other tools ask.
    AcceptEdits,
    /// Nothing asks.
    BypassPermissions,
    /// Nothing asks; what would ask is denied.
    DontAsk,
    /// Planning: asks like `default`.
    Plan,
}

impl PermissionMode {
    /// Every mode's name, as `--permission-mode` takes it.
    pub const NAMES: &[&str] = &[
        "default",
        "acceptEdits",
        "bypassPermissions",
        "dontAsk",
        "plan",
    ];

    /// The mode `--permission-mode` names; `None` for an unknown name.
    pub fn parse(name: &str) -> Option<PermissionMode> {
        match name {
            "default" => Some(PermissionMode::Default),
            "acceptEdits" => Some(PermissionMode::AcceptEdits),
            "bypassPermissions" => Some(PermissionMode::BypassPermissions),
            "dontAsk" => Some(PermissionMode::DontAsk),
            "plan" => Some(PermissionMode::Plan),
            _ => None,
        }
    }

    /// The mode's name, as `--permission-mode` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::DontAsk => "dontAsk",
            PermissionMode::Plan => "plan",
        }
    }
}

/// What the command line decided.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The scenario to play (`--scenario`), with the environment applied.
    pub scenario: Scenario,
    /// `--model`; the scenario's model otherwise.
    pub model: Option<String>,
    /// The scenario's name or path, as `--scenario` gave it (what a kept session plays).
    pub scenario_name: String,
    /// `--resume`: continue this session id, at the turn after the last one it completed
    /// (as `sessions` keeps it; the second turn when it has no record of the session).
    pub resume: Option<String>,
    /// Where sessions are kept across processes; `None` keeps none.
    pub sessions: Option<SessionStore>,
    /// `--permission-mode`.
    pub permission_mode: PermissionMode,
    /// `--permission-prompt-tool stdio`: permission requests go over stdout/stdin.
    pub prompt_tool_stdio: bool,
    /// `--allowedTools` / `--disallowedTools` rules (`Bash`, `Bash(git log:*)`).
    pub allowed_tools: Vec<String>,
    /// `--disallowedTools` rules: these tools are denied without asking.
    pub disallowed_tools: Vec<String>,
    /// The working directory, as reported in the init line (tools that really run use
    /// it).
    pub cwd: String,
    /// `claude_code_version` in the init line.
    pub version: String,
}

/// The tools the init line lists (less the disallowed ones).
pub const TOOLS: &[&str] = &[
    "Task",
    "Bash",
    "Glob",
    "Grep",
    "Read",
    "Edit",
    "Write",
    "NotebookEdit",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "AskUserQuestion",
];

/// Tools that `acceptEdits` allows without asking.
const EDIT_TOOLS: &[&str] = &["Edit", "MultiEdit", "Write", "NotebookEdit"];

/// The question tool.
pub const ASK_USER_QUESTION: &str = "AskUserQuestion";

const INTERRUPTED_TOOL_TEXT: &str = "[Request interrupted by user for tool use]";
const USER_DENIED_TEXT: &str =
    "The user doesn't want to proceed with this tool use. The tool use was rejected.";
const WITHDRAWN_TEXT: &str = "The permission request was withdrawn before it was answered.";

/// Plays the scenario over `input` and `output` until stdin closes or the scenario ends
/// the process. Returns the exit code.
pub async fn run<R, W>(options: AgentOptions, input: R, output: W) -> i32
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let (sender, inbox) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_lines(input, sender));
    let code = Agent::new(options, inbox, output).serve().await;
    reader.abort();
    code
}

/// Sends each stdin line to the loop; dropping the sender tells it stdin is closed.
async fn read_lines<R: AsyncRead + Unpin>(input: R, sender: UnboundedSender<Inbound>) {
    let mut lines = BufReader::new(input).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) if line.trim().is_empty() => {}
            Ok(Some(line)) => {
                if sender.send(wire::parse_inbound(&line)).is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                note(&format!("cannot read stdin: {e}"));
                return;
            }
        }
    }
}

/// `line` as JSON in `text` (emptied first); a line that cannot be made ends the sim.
fn json_line(text: &mut Vec<u8>, line: &impl serde::Serialize) -> Result<(), Stop> {
    text.clear();
    serde_json::to_writer(text, line).map_err(|e| {
        note(&format!("cannot write a line: {e}"));
        Stop::Exit(1)
    })
}

/// A line on stderr for whoever reads it; a closed stderr is not an error.
fn note(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "drover sim-agent: {text}");
}

/// Why the steps of a turn stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// An interrupt: the turn ends with an error result, the session goes on.
    Interrupted,
    /// The process ends with this code.
    Exit(i32),
}

/// How a step left the turn.
enum Flow {
    Next,
    /// The step wrote the turn's result itself.
    ResultWritten,
}

/// What a turn has produced so far.
struct TurnState {
    prompt: String,
    started: Instant,
    usage: Usage,
    /// Model requests: one, plus one after each tool result.
    requests: u32,
    denials: Vec<Value>,
    last_text: Option<String>,
}

/// A `tool_allowed` rule: a tool, and optionally a command or path (`ls:*` and `foo*` are
/// prefixes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRule {
    /// The tool's name.
    pub tool: String,
    /// The command or path the rule is limited to (`git log:*`); `None` covers every use.
    pub content: Option<String>,
}

impl ToolRule {
    /// `Bash` or `Bash(git log:*)`.
    pub fn parse(text: &str) -> ToolRule {
        let text = text.trim();
        match text.split_once('(') {
            Some((tool, rest)) if rest.ends_with(')') => ToolRule {
                tool: tool.trim().to_string(),
                content: Some(rest[..rest.len() - 1].to_string()).filter(|c| !c.is_empty()),
            },
            _ => ToolRule {
                tool: text.to_string(),
                content: None,
            },
        }
    }

    /// Whether a call of `tool` on `content` (its command or path) falls under this rule.
    pub fn matches(&self, tool: &str, content: Option<&str>) -> bool {
        if self.tool != tool {
            return false;
        }
        let Some(rule) = &self.content else {
            return true;
        };
        let Some(content) = content else {
            return false;
        };
        match rule.strip_suffix(":*").or_else(|| rule.strip_suffix('*')) {
            Some(prefix) => content.starts_with(prefix),
            None => content == rule,
        }
    }
}

/// What happens to a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The call runs without asking.
    Allow,
    /// Denied without asking, with the tool_result text.
    Deny(String),
    /// Send a `can_use_tool` request.
    Ask,
}

/// What a permission decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct PermissionContext<'a> {
    /// The permission mode.
    pub mode: PermissionMode,
    /// Whether permission requests can go over stdout/stdin.
    pub prompt_tool_stdio: bool,
    /// `--allowedTools` rules.
    pub allowed: &'a [ToolRule],
    /// `--disallowedTools` rules.
    pub disallowed: &'a [ToolRule],
    /// Rules added by answers ("allow always").
    pub session: &'a [ToolRule],
}

/// Whether a tool call runs, is denied, or is asked about. Questions always ask unless
/// they cannot (no prompt channel, `dontAsk`, disallowed).
pub fn decide(
    ctx: &PermissionContext<'_>,
    tool: &str,
    content: Option<&str>,
    needs_permission: bool,
) -> Decision {
    let is_question = tool == ASK_USER_QUESTION;
    if ctx.disallowed.iter().any(|r| r.matches(tool, content)) {
        return Decision::Deny(format!("Permission to use {tool} has been denied."));
    }
    if !is_question {
        let allowed = ctx
            .allowed
            .iter()
            .chain(ctx.session)
            .any(|r| r.matches(tool, content));
        if !needs_permission
            || allowed
            || ctx.mode == PermissionMode::BypassPermissions
            || (ctx.mode == PermissionMode::AcceptEdits && EDIT_TOOLS.contains(&tool))
        {
            return Decision::Allow;
        }
    }
    if ctx.mode == PermissionMode::DontAsk {
        return Decision::Deny(format!(
            "Permission to use {tool} has been denied because the permission mode is dontAsk."
        ));
    }
    if !ctx.prompt_tool_stdio {
        return Decision::Deny(format!(
            "Claude requested permissions to use {tool}, but you haven't granted it yet."
        ));
    }
    Decision::Ask
}

/// What a permission rule would name in a call: its command, path or URL.
pub fn rule_content(input: &Value) -> Option<&str> {
    ["command", "file_path", "notebook_path", "url"]
        .iter()
        .find_map(|key| input[key].as_str())
}

/// The answer to `question` in an `AskUserQuestion` allow's `updatedInput`.
pub fn answer_of(updated_input: Option<&Value>, question: &str) -> Option<String> {
    let answers = updated_input?.get("answers")?.as_object()?;
    let text = |value: &Value| match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => None,
    };
    answers
        .get(question)
        .and_then(text)
        .or_else(|| answers.values().find_map(text))
        .filter(|answer| !answer.is_empty())
}

/// The result of a `can_use_tool` request.
enum Verdict {
    Answered(Reply),
    Withdrawn,
}

/// How many lines of a burst are written between two looks at stdin.
const BURST_POLL_EVERY: u32 = 64;

struct Agent<W: AsyncWrite + Unpin> {
    out: BufWriter<W>,
    /// The buffer each JSON line is made in before it is written.
    line: Vec<u8>,
    /// Inside a burst of repeated lines: write without flushing (the burst's last line
    /// flushes).
    batching: bool,
    inbox: UnboundedReceiver<Inbound>,
    stdin_closed: bool,
    /// User messages waiting for their turn.
    queued: VecDeque<String>,
    scenario: Scenario,
    scenario_name: String,
    /// The index of the scenario turn the next user message plays; also how many turns
    /// of this session have been played.
    next_turn: usize,
    sessions: Option<SessionStore>,
    ids: wire::Ids,
    session_id: String,
    model: String,
    mode: PermissionMode,
    prompt_tool_stdio: bool,
    allowed: Vec<ToolRule>,
    disallowed: Vec<ToolRule>,
    session_rules: Vec<ToolRule>,
    tools: Vec<String>,
    cwd: String,
    version: String,
    spend: SessionSpend,
    /// The last answer to a question in this session (`{answer}`).
    answer: Option<String>,
}

impl<W: AsyncWrite + Unpin> Agent<W> {
    fn new(options: AgentOptions, inbox: UnboundedReceiver<Inbound>, output: W) -> Self {
        let mut ids = wire::Ids::from_clock();
        let resumed = options.resume.is_some();
        let session_id = options.resume.unwrap_or_else(|| ids.uuid());
        let disallowed: Vec<ToolRule> = options
            .disallowed_tools
            .iter()
            .map(|t| ToolRule::parse(t))
            .collect();
        let tools = TOOLS
            .iter()
            .filter(|tool| {
                !disallowed
                    .iter()
                    .any(|r| r.tool == **tool && r.content.is_none())
            })
            .map(|tool| tool.to_string())
            .collect();
        // A resumed session goes on after the last turn it completed; one it has no
        // record of has had its opening turn: it goes on with the follow-ups.
        let kept = resumed
            .then(|| {
                options
                    .sessions
                    .as_ref()
                    .and_then(|store| store.turns_done(&session_id, &options.scenario_name))
            })
            .flatten();
        let next_turn =
            kept.unwrap_or_else(|| usize::from(resumed && options.scenario.turns.len() > 1));
        Agent {
            out: BufWriter::with_capacity(64 * 1024, output),
            line: Vec::new(),
            batching: false,
            inbox,
            stdin_closed: false,
            queued: VecDeque::new(),
            model: options
                .model
                .unwrap_or_else(|| options.scenario.model.clone()),
            scenario: options.scenario,
            scenario_name: options.scenario_name,
            next_turn,
            sessions: options.sessions,
            ids,
            session_id,
            mode: options.permission_mode,
            prompt_tool_stdio: options.prompt_tool_stdio,
            allowed: options
                .allowed_tools
                .iter()
                .map(|t| ToolRule::parse(t))
                .collect(),
            disallowed,
            session_rules: Vec::new(),
            tools,
            cwd: options.cwd,
            version: options.version,
            spend: SessionSpend::default(),
            answer: None,
        }
    }

    /// Turns until stdin closes or the scenario ends the process.
    async fn serve(&mut self) -> i32 {
        loop {
            if self.stdin_closed {
                return 0;
            }
            let Some(prompt) = self.queued.pop_front() else {
                let handled = match self.inbox.recv().await {
                    None => {
                        self.stdin_closed = true;
                        Ok(())
                    }
                    Some(message) => self.handle(message, false).await,
                };
                if let Err(Stop::Exit(code)) = handled {
                    return code;
                }
                continue;
            };
            if let Err(Stop::Exit(code)) = self.run_turn(prompt).await {
                return code;
            }
        }
    }

    /// A line that arrived outside a permission wait. `busy`: a turn is running, so an
    /// interrupt stops it.
    async fn handle(&mut self, message: Inbound, busy: bool) -> Result<(), Stop> {
        match message {
            Inbound::User { text } => self.queued.push_back(text),
            Inbound::ControlRequest {
                request_id,
                subtype,
                request,
            } => {
                let answer = match subtype.as_str() {
                    "initialize" => wire::initialize_response(&request_id, &self.model),
                    "interrupt" => {
                        self.write(&wire::control_success(&request_id, json!({})))
                            .await?;
                        return if busy { Err(Stop::Interrupted) } else { Ok(()) };
                    }
                    "set_permission_mode" => {
                        match request["mode"].as_str().and_then(PermissionMode::parse) {
                            Some(mode) => {
                                self.mode = mode;
                                wire::control_success(&request_id, json!({}))
                            }
                            None => wire::control_error(
                                &request_id,
                                &format!(
                                    "Invalid permission mode; expected one of {}",
                                    PermissionMode::NAMES.join(", ")
                                ),
                            ),
                        }
                    }
                    "set_model" => {
                        self.model = request["model"]
                            .as_str()
                            .map_or_else(|| self.scenario.model.clone(), str::to_string);
                        wire::control_success(&request_id, json!({}))
                    }
                    other => wire::control_error(
                        &request_id,
                        &format!("Unsupported control request subtype: {other}"),
                    ),
                };
                self.write(&answer).await?;
            }
            // An answer nobody waits for: late, withdrawn, or for an unknown id.
            Inbound::ControlResponse { .. } | Inbound::Ignored { .. } => {}
            Inbound::Unreadable { reason } => note(&format!("skipped a stdin line: {reason}")),
        }
        Ok(())
    }

    /// Takes what has arrived without waiting, and lets the reader run.
    async fn poll(&mut self) -> Result<(), Stop> {
        tokio::task::yield_now().await;
        loop {
            match self.inbox.try_recv() {
                Ok(message) => self.handle(message, true).await?,
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => {
                    self.stdin_closed = true;
                    return Ok(());
                }
            }
        }
    }

    /// Waits `ms` while answering control requests; an interrupt cuts it short.
    async fn pause(&mut self, ms: u64) -> Result<(), Stop> {
        if ms == 0 {
            return self.poll().await;
        }
        let until = Instant::now() + Duration::from_millis(ms);
        loop {
            tokio::select! {
                () = sleep_until(until) => return Ok(()),
                message = self.inbox.recv(), if !self.stdin_closed => match message {
                    None => self.stdin_closed = true,
                    Some(message) => self.handle(message, true).await?,
                },
            }
        }
    }

    /// Waits for the answer to `request_id`, withdrawing the request after
    /// `withdraw_after_ms` when set.
    async fn await_reply(
        &mut self,
        request_id: &str,
        withdraw_after_ms: Option<u64>,
    ) -> Result<Verdict, Stop> {
        let withdraw_at = withdraw_after_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        loop {
            if self.stdin_closed {
                // The answer can no longer come.
                return Err(Stop::Exit(0));
            }
            tokio::select! {
                () = sleep_until(withdraw_at.unwrap_or_else(Instant::now)), if withdraw_at.is_some() => {
                    self.write(&wire::cancel_request(request_id)).await?;
                    return Ok(Verdict::Withdrawn);
                }
                message = self.inbox.recv() => match message {
                    None => self.stdin_closed = true,
                    Some(Inbound::ControlResponse { request_id: id, reply }) if id == request_id => {
                        return Ok(Verdict::Answered(reply));
                    }
                    Some(message) => {
                        let handled = self.handle(message, true).await;
                        if handled == Err(Stop::Interrupted) {
                            self.write(&wire::cancel_request(request_id)).await?;
                        }
                        handled?;
                    }
                },
            }
        }
    }

    /// Writes `line` as one JSON line.
    async fn write(&mut self, line: &impl serde::Serialize) -> Result<(), Stop> {
        let mut text = std::mem::take(&mut self.line);
        let made = json_line(&mut text, line);
        self.write_made(text, made).await
    }

    /// Writes the line [`json_line`] `made` in `text` (the buffer every line reuses, taken
    /// from `self.line`), and keeps the buffer for the next.
    async fn write_made(&mut self, text: Vec<u8>, made: Result<(), Stop>) -> Result<(), Stop> {
        let written = match made {
            Ok(()) => self.write_bytes(&text).await,
            Err(stop) => Err(stop),
        };
        self.line = text;
        written
    }

    async fn write_raw(&mut self, text: &str) -> Result<(), Stop> {
        self.write_bytes(text.as_bytes()).await
    }

    async fn write_bytes(&mut self, text: &[u8]) -> Result<(), Stop> {
        let batching = self.batching;
        let out = &mut self.out;
        let written = async {
            out.write_all(text).await?;
            out.write_all(b"\n").await?;
            if batching { Ok(()) } else { out.flush().await }
        }
        .await;
        written.map_err(|e| {
            note(&format!("cannot write to stdout: {e}"));
            Stop::Exit(1)
        })
    }

    fn envelope(&self) -> Envelope<'_> {
        Envelope {
            session_id: &self.session_id,
        }
    }

    fn vars(&self, turn: &TurnState, i: u32) -> Vars {
        Vars {
            i,
            answer: self.answer.clone(),
            prompt: turn.prompt.clone(),
            now_us: crate::clock::now_micros(),
        }
    }

    async fn run_turn(&mut self, prompt: String) -> Result<(), Stop> {
        let turn = self.scenario.turn(self.next_turn).clone();
        self.next_turn += 1;
        let mut state = TurnState {
            prompt,
            started: Instant::now(),
            usage: Usage::default(),
            requests: 1,
            denials: Vec::new(),
            last_text: None,
        };
        let init = wire::system_init(
            &wire::InitFacts {
                session_id: &self.session_id,
                model: &self.model,
                tools: &self.tools,
                permission_mode: self.mode.as_str(),
                version: &self.version,
                cwd: &self.cwd,
            },
            self.ids.uuid(),
        );
        self.write(&init).await?;
        match self.run_steps(&turn, &mut state).await {
            Ok(Flow::ResultWritten) => Ok(()),
            Ok(Flow::Next) => {
                if let (Some(block), BlockPlacement::Separate) =
                    (&turn.result_block, turn.block_placement())
                {
                    let text = block.render(&self.vars(&state, 1));
                    self.say_text(text, &MessageMeta::default(), &mut state)
                        .await?;
                }
                let text = state.last_text.clone().unwrap_or_default();
                self.write_result(&mut state, "success", false, &text, "completed", None)
                    .await
            }
            Err(Stop::Interrupted) => {
                self.write_result(
                    &mut state,
                    "error_during_execution",
                    true,
                    "Request interrupted by user",
                    "interrupted",
                    None,
                )
                .await
            }
            Err(stop) => Err(stop),
        }
    }

    async fn run_steps(&mut self, turn: &Turn, state: &mut TurnState) -> Result<Flow, Stop> {
        let placement = turn.block_placement();
        for (index, step) in turn.steps.iter().enumerate() {
            let times = step.repeat.times;
            for i in 1..=times {
                // A repetition with no pause looks at stdin after the one before it, below.
                if step.delay_ms > 0 || i == 1 {
                    self.pause(step.delay_ms).await?;
                }
                let vars = self.vars(state, i);
                let block = match (&turn.result_block, placement) {
                    (Some(block), BlockPlacement::AppendTo(at)) if at == index && i == times => {
                        Some(block)
                    }
                    _ => None,
                };
                // A burst of repeated messages with no pause between them is flushed once,
                // at its last line, instead of once per line.
                self.batching = i < times
                    && step.delay_ms == 0
                    && matches!(step.action, Action::Text { .. } | Action::Thinking { .. });
                let flow = match &step.action {
                    Action::Text { text, meta } => {
                        let mut text = fill(text, &vars);
                        if let Some(block) = block {
                            text = format!("{text}\n\n{}", block.render(&vars));
                        }
                        self.say_text(text, meta, state).await?;
                        Flow::Next
                    }
                    Action::Thinking { text, meta } => {
                        let text = fill(text, &vars);
                        let content = wire::thinking_block(&text);
                        self.say(content, &text, meta, state).await?;
                        Flow::Next
                    }
                    Action::Tool(call) => {
                        self.tool(call, &vars, state).await?;
                        Flow::Next
                    }
                    Action::Question(question) => {
                        self.question(question, state).await?;
                        Flow::Next
                    }
                    Action::RateLimit { seconds, status } => {
                        self.rate_limit(*seconds, *status).await?;
                        Flow::Next
                    }
                    Action::ApiRetry {
                        attempts,
                        retry_delay_ms,
                        error_status,
                    } => {
                        for attempt in 1..=*attempts {
                            let uuid = self.ids.uuid();
                            let line = wire::api_retry(
                                self.envelope(),
                                uuid,
                                attempt,
                                *retry_delay_ms,
                                *error_status,
                            );
                            self.write(&line).await?;
                            self.pause(*retry_delay_ms).await?;
                        }
                        Flow::Next
                    }
                    Action::Garbage { line } => {
                        self.write_raw(line).await?;
                        Flow::Next
                    }
                    Action::Sleep { ms } => {
                        self.pause(*ms).await?;
                        Flow::Next
                    }
                    Action::Crash { exit_code, stderr } => {
                        if let Some(text) = stderr {
                            use std::io::Write;
                            let _ = writeln!(std::io::stderr(), "{text}");
                        }
                        return Err(Stop::Exit(*exit_code));
                    }
                    Action::Hang { ignore_eof } => return Err(self.hang(*ignore_eof).await),
                    Action::Result(result) => {
                        self.result_step(result, state).await?;
                        Flow::ResultWritten
                    }
                };
                if let Flow::ResultWritten = flow {
                    return Ok(flow);
                }
                // In a burst, what came in on stdin (an interrupt, a control request) is
                // looked at every [`BURST_POLL_EVERY`] lines, not after each.
                if !self.batching || i % BURST_POLL_EVERY == 0 {
                    self.poll().await?;
                }
                if self.stdin_closed {
                    return Err(Stop::Exit(0));
                }
            }
        }
        Ok(Flow::Next)
    }

    /// One assistant message: booked on the session and the turn, then written.
    async fn say(
        &mut self,
        content: wire::Block<'_>,
        text: &str,
        meta: &MessageMeta,
        state: &mut TurnState,
    ) -> Result<(), Stop> {
        let usage = meta.usage.unwrap_or_else(|| Usage::estimated_for(text));
        let model = meta.model.as_deref().unwrap_or(&self.model);
        self.spend.charge(model, &usage, meta.cost_usd);
        state.usage.add(&usage);
        let (message_id, uuid) = (self.ids.message_id(), self.ids.uuid());
        let mut text = std::mem::take(&mut self.line);
        let line = wire::assistant(self.envelope(), message_id, uuid, model, content, &usage);
        let made = json_line(&mut text, &line);
        self.write_made(text, made).await
    }

    async fn say_text(
        &mut self,
        text: String,
        meta: &MessageMeta,
        state: &mut TurnState,
    ) -> Result<(), Stop> {
        self.say(wire::text_block(&text), &text, meta, state)
            .await?;
        state.last_text = Some(text);
        Ok(())
    }

    async fn write_tool_result(
        &mut self,
        tool_use_id: &str,
        content: &str,
        is_error: bool,
        state: &mut TurnState,
    ) -> Result<(), Stop> {
        let uuid = self.ids.uuid();
        let line = wire::tool_result(self.envelope(), uuid, tool_use_id, content, is_error);
        self.write(&line).await?;
        state.requests += 1;
        Ok(())
    }

    /// Sends a `can_use_tool` request and waits for its answer. An interrupt while
    /// waiting closes the tool call before the turn ends.
    async fn ask(
        &mut self,
        tool_name: &str,
        input: &Value,
        blocked_path: Option<&str>,
        withdraw_after_ms: Option<u64>,
        tool_use_id: &str,
        state: &mut TurnState,
    ) -> Result<Verdict, Stop> {
        let request_id = self.ids.uuid();
        let suggestions = if tool_name == ASK_USER_QUESTION {
            json!([])
        } else {
            wire::allow_rule_suggestion(tool_name, rule_content(input))
        };
        let request = wire::can_use_tool(
            &request_id,
            &ToolPermission {
                tool_name,
                input,
                suggestions,
                blocked_path,
                tool_use_id,
            },
        );
        self.write(&request).await?;
        match self.await_reply(&request_id, withdraw_after_ms).await {
            Err(Stop::Interrupted) => {
                self.write_tool_result(tool_use_id, INTERRUPTED_TOOL_TEXT, true, state)
                    .await?;
                Err(Stop::Interrupted)
            }
            other => other,
        }
    }

    fn permission_context(&self) -> PermissionContext<'_> {
        PermissionContext {
            mode: self.mode,
            prompt_tool_stdio: self.prompt_tool_stdio,
            allowed: &self.allowed,
            disallowed: &self.disallowed,
            session: &self.session_rules,
        }
    }

    /// A denied call: its error tool_result, booked as a denial, then what the model
    /// says about it. A deny that asks to interrupt ends the turn.
    async fn denied(
        &mut self,
        tool_name: &str,
        tool_use_id: &str,
        input: &Value,
        message: &str,
        on_deny: Option<&str>,
        state: &mut TurnState,
    ) -> Result<(), Stop> {
        state.denials.push(json!({
            "tool_name": tool_name,
            "tool_use_id": tool_use_id,
            "tool_input": input,
        }));
        self.write_tool_result(tool_use_id, message, true, state)
            .await?;
        if let Some(text) = on_deny {
            let text = fill(text, &self.vars(state, 1));
            self.say_text(text, &MessageMeta::default(), state).await?;
        }
        Ok(())
    }

    async fn tool(
        &mut self,
        call: &ToolCall,
        vars: &Vars,
        state: &mut TurnState,
    ) -> Result<(), Stop> {
        let tool_use_id = self.ids.tool_use_id();
        let content = wire::tool_use_block(&tool_use_id, &call.name, &call.input);
        self.say(content, &call.input.to_string(), &call.meta, state)
            .await?;
        let decision = decide(
            &self.permission_context(),
            &call.name,
            rule_content(&call.input),
            call.needs_permission,
        );
        let on_deny = call.on_deny.as_deref();
        // What the tool runs with: the call's input, or the one an allow sent instead.
        let mut input = call.input.clone();
        match decision {
            Decision::Allow => {}
            Decision::Deny(message) => {
                return self
                    .denied(
                        &call.name,
                        &tool_use_id,
                        &call.input,
                        &message,
                        on_deny,
                        state,
                    )
                    .await;
            }
            Decision::Ask => {
                let verdict = self
                    .ask(
                        &call.name,
                        &call.input,
                        call.blocked_path.as_deref(),
                        call.withdraw_after_ms,
                        &tool_use_id,
                        state,
                    )
                    .await?;
                let message = match verdict {
                    Verdict::Answered(Reply::Allow {
                        updated_permissions,
                        updated_input,
                    }) => {
                        self.session_rules.extend(
                            wire::added_allow_rules(&updated_permissions)
                                .into_iter()
                                .map(|(tool, content)| ToolRule { tool, content }),
                        );
                        if let Some(changed) = updated_input.filter(Value::is_object) {
                            input = changed;
                        }
                        None
                    }
                    Verdict::Answered(Reply::Deny { message, interrupt }) => {
                        let message = message.unwrap_or_else(|| USER_DENIED_TEXT.to_string());
                        if interrupt {
                            self.denied(
                                &call.name,
                                &tool_use_id,
                                &call.input,
                                &message,
                                None,
                                state,
                            )
                            .await?;
                            return Err(Stop::Interrupted);
                        }
                        Some(message)
                    }
                    Verdict::Answered(Reply::Error { message }) => Some(message),
                    Verdict::Withdrawn => Some(WITHDRAWN_TEXT.to_string()),
                };
                if let Some(message) = message {
                    return self
                        .denied(
                            &call.name,
                            &tool_use_id,
                            &call.input,
                            &message,
                            on_deny,
                            state,
                        )
                        .await;
                }
            }
        }
        if let Err(stop) = self.pause(call.duration_ms).await {
            if stop == Stop::Interrupted {
                self.write_tool_result(&tool_use_id, INTERRUPTED_TOOL_TEXT, true, state)
                    .await?;
            }
            return Err(stop);
        }
        let scripted = fill(&call.output, vars);
        // An allowed edit or a command marked to run really happens, in the cwd.
        let acted = if call.is_error {
            None
        } else {
            super::act::perform(
                &call.name,
                &input,
                call.run,
                std::path::Path::new(&self.cwd),
                &scripted,
            )
            .await
        };
        let (output, is_error) = match acted {
            Some(acted) => (acted.output, acted.is_error),
            None => (scripted, call.is_error),
        };
        self.write_tool_result(&tool_use_id, &output, is_error, state)
            .await
    }

    async fn question(&mut self, question: &Question, state: &mut TurnState) -> Result<(), Stop> {
        let tool_use_id = self.ids.tool_use_id();
        let input = json!({
            "questions": [{
                "question": question.question,
                "header": question.header,
                "options": question.options,
                "multiSelect": question.multi_select,
            }]
        });
        let content = wire::tool_use_block(&tool_use_id, ASK_USER_QUESTION, &input);
        self.say(content, &input.to_string(), &question.meta, state)
            .await?;
        let on_deny = question.on_deny.as_deref();
        let verdict = match decide(&self.permission_context(), ASK_USER_QUESTION, None, true) {
            Decision::Deny(message) => {
                return self
                    .denied(
                        ASK_USER_QUESTION,
                        &tool_use_id,
                        &input,
                        &message,
                        on_deny,
                        state,
                    )
                    .await;
            }
            Decision::Allow | Decision::Ask => {
                self.ask(ASK_USER_QUESTION, &input, None, None, &tool_use_id, state)
                    .await?
            }
        };
        let message = match verdict {
            Verdict::Answered(Reply::Allow { updated_input, .. }) => {
                let answer = answer_of(updated_input.as_ref(), &question.question)
                    .unwrap_or_else(|| "(no answer)".to_string());
                let result = format!(
                    "User has answered your questions: \"{}\"=\"{answer}\". You can now continue with the user's answers in mind.",
                    question.question
                );
                self.answer = Some(answer);
                self.write_tool_result(&tool_use_id, &result, false, state)
                    .await?;
                let reply = fill(&question.reply, &self.vars(state, 1));
                return self.say_text(reply, &MessageMeta::default(), state).await;
            }
            Verdict::Answered(Reply::Deny { message, interrupt }) => {
                let message = message.unwrap_or_else(|| USER_DENIED_TEXT.to_string());
                if interrupt {
                    self.denied(
                        ASK_USER_QUESTION,
                        &tool_use_id,
                        &input,
                        &message,
                        None,
                        state,
                    )
                    .await?;
                    return Err(Stop::Interrupted);
                }
                message
            }
            Verdict::Answered(Reply::Error { message }) => message,
            Verdict::Withdrawn => WITHDRAWN_TEXT.to_string(),
        };
        self.denied(
            ASK_USER_QUESTION,
            &tool_use_id,
            &input,
            &message,
            on_deny,
            state,
        )
        .await
    }

    async fn rate_limit(&mut self, seconds: u64, status: RateLimitStatus) -> Result<(), Stop> {
        let now = u64::try_from(crate::clock::now_millis() / 1000).unwrap_or(0);
        let resets_at = now + seconds;
        let word = match status {
            RateLimitStatus::Rejected => "rejected",
            RateLimitStatus::AllowedWarning => "allowed_warning",
        };
        let uuid = self.ids.uuid();
        let line = wire::rate_limit_event(self.envelope(), uuid, word, resets_at);
        self.write(&line).await?;
        if status == RateLimitStatus::Rejected {
            self.pause(seconds.saturating_mul(1_000)).await?;
            let uuid = self.ids.uuid();
            let line = wire::rate_limit_event(self.envelope(), uuid, "allowed", resets_at);
            self.write(&line).await?;
        }
        Ok(())
    }

    /// Writes nothing more. Closed stdin ends the process (exit 0) unless `ignore_eof`,
    /// then only a signal does.
    async fn hang(&mut self, ignore_eof: bool) -> Stop {
        loop {
            if self.stdin_closed {
                if ignore_eof {
                    std::future::pending::<()>().await;
                }
                return Stop::Exit(0);
            }
            if self.inbox.recv().await.is_none() {
                self.stdin_closed = true;
            }
        }
    }

    async fn result_step(
        &mut self,
        result: &ResultStep,
        state: &mut TurnState,
    ) -> Result<(), Stop> {
        let text = result
            .message
            .clone()
            .or_else(|| state.last_text.clone())
            .unwrap_or_default();
        let terminal_reason = result.terminal_reason.clone().unwrap_or_else(|| {
            match (result.subtype.as_str(), result.api_error_status) {
                ("success", _) => "completed",
                (_, Some(_)) => "api_error",
                ("error_max_turns", _) => "max_turns",
                ("error_max_budget_usd", _) => "max_budget",
                _ => "error",
            }
            .to_string()
        });
        self.write_result(
            state,
            &result.subtype,
            result.is_error,
            &text,
            &terminal_reason,
            result.api_error_status,
        )
        .await?;
        match result.exit_code {
            Some(code) => Err(Stop::Exit(code)),
            None => Ok(()),
        }
    }

    /// The turn's `result` line; the turn's flat charge is booked first.
    async fn write_result(
        &mut self,
        state: &mut TurnState,
        subtype: &str,
        is_error: bool,
        text: &str,
        terminal_reason: &str,
        api_error_status: Option<u16>,
    ) -> Result<(), Stop> {
        let model = self.model.clone();
        self.spend.charge(
            &model,
            &Usage::default(),
            self.scenario.session_cost_per_turn,
        );
        let uuid = self.ids.uuid();
        let line = wire::result(
            self.envelope(),
            uuid,
            &wire::TurnResult {
                subtype,
                is_error,
                text,
                num_turns: state.requests,
                duration_ms: u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                usage: &state.usage,
                permission_denials: &state.denials,
                terminal_reason,
                api_error_status,
            },
            &self.spend,
        );
        self.write(&line).await?;
        self.keep_session();
        Ok(())
    }

    /// Records that the session has completed the turns played so far.
    fn keep_session(&self) {
        if let Some(store) = &self.sessions
            && let Err(problem) =
                store.record(&self.session_id, &self.scenario_name, self.next_turn)
        {
            note(&problem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(texts: &[&str]) -> Vec<ToolRule> {
        texts.iter().map(|t| ToolRule::parse(t)).collect()
    }

    #[test]
    fn rules_name_a_tool_and_maybe_a_command() {
        assert_eq!(
            ToolRule::parse("Bash(git log:*)"),
            ToolRule {
                tool: "Bash".into(),
                content: Some("git log:*".into())
            }
        );
        assert_eq!(
            ToolRule::parse(" Read "),
            ToolRule {
                tool: "Read".into(),
                content: None
            }
        );
        let git = ToolRule::parse("Bash(git log:*)");
        assert!(git.matches("Bash", Some("git log --oneline")));
        assert!(!git.matches("Bash", Some("rm -rf /")));
        assert!(!git.matches("Bash", None));
        assert!(!git.matches("Read", Some("git log")));
        let exact = ToolRule::parse("Bash(ls)");
        assert!(exact.matches("Bash", Some("ls")));
        assert!(!exact.matches("Bash", Some("ls -la")));
        assert!(ToolRule::parse("Edit(src/*)").matches("Edit", Some("src/main.rs")));
        assert!(ToolRule::parse("Bash").matches("Bash", Some("anything")));
    }

    #[test]
    fn permission_decisions_follow_the_mode_and_the_rules() {
        use Decision::*;
        use PermissionMode::*;
        let none: Vec<ToolRule> = Vec::new();
        let allowed = rules(&["Bash(ls:*)"]);
        let disallowed = rules(&["WebFetch"]);
        let session = rules(&["Edit(src/a.rs)"]);
        let ctx = |mode, stdio| PermissionContext {
            mode,
            prompt_tool_stdio: stdio,
            allowed: &allowed,
            disallowed: &disallowed,
            session: &session,
        };
        let is_deny = |d: Decision| matches!(d, Deny(_));
        // (mode, stdio, tool, content, needs_permission) -> decision
        assert_eq!(decide(&ctx(Default, true), "Bash", Some("rm x"), true), Ask);
        assert_eq!(
            decide(&ctx(Default, true), "Bash", Some("rm x"), false),
            Allow
        );
        assert_eq!(
            decide(&ctx(Default, true), "Bash", Some("ls -la"), true),
            Allow
        );
        assert_eq!(
            decide(&ctx(Default, true), "Edit", Some("src/a.rs"), true),
            Allow
        );
        assert_eq!(
            decide(&ctx(Default, true), "Edit", Some("src/b.rs"), true),
            Ask
        );
        assert_eq!(
            decide(&ctx(Plan, true), "Edit", Some("src/b.rs"), true),
            Ask
        );
        assert_eq!(
            decide(&ctx(AcceptEdits, true), "Edit", Some("src/b.rs"), true),
            Allow
        );
        assert_eq!(
            decide(&ctx(AcceptEdits, true), "Bash", Some("rm x"), true),
            Ask
        );
        assert_eq!(
            decide(&ctx(BypassPermissions, true), "Bash", Some("rm x"), true),
            Allow
        );
        assert!(is_deny(decide(
            &ctx(BypassPermissions, true),
            "WebFetch",
            None,
            false
        )));
        assert!(is_deny(decide(
            &ctx(DontAsk, true),
            "Bash",
            Some("rm x"),
            true
        )));
        assert_eq!(decide(&ctx(DontAsk, true), "Bash", Some("ls"), true), Allow);
        assert!(is_deny(decide(
            &ctx(Default, false),
            "Bash",
            Some("rm x"),
            true
        )));
        // Questions ask whenever they can.
        assert_eq!(
            decide(&ctx(BypassPermissions, true), ASK_USER_QUESTION, None, true),
            Ask
        );
        assert!(is_deny(decide(
            &ctx(DontAsk, true),
            ASK_USER_QUESTION,
            None,
            true
        )));
        assert!(is_deny(decide(
            &ctx(Default, false),
            ASK_USER_QUESTION,
            None,
            true
        )));
        let plain = PermissionContext {
            mode: Default,
            prompt_tool_stdio: true,
            allowed: &none,
            disallowed: &none,
            session: &none,
        };
        assert_eq!(decide(&plain, "Bash", None, true), Ask);
    }

    #[test]
    fn rule_content_is_the_command_path_or_url() {
        assert_eq!(
            rule_content(&json!({"command": "ls", "description": "x"})),
            Some("ls")
        );
        assert_eq!(rule_content(&json!({"file_path": "a.rs"})), Some("a.rs"));
        assert_eq!(
            rule_content(&json!({"url": "https://x"})),
            Some("https://x")
        );
        assert_eq!(rule_content(&json!({"pattern": "*.rs"})), None);
    }

    #[test]
    fn answers_are_found_by_question_text_or_else_the_first() {
        let input = json!({"questions": [], "answers": {"Which?": "SQLite"}});
        assert_eq!(answer_of(Some(&input), "Which?"), Some("SQLite".into()));
        assert_eq!(answer_of(Some(&input), "Other?"), Some("SQLite".into()));
        let many = json!({"answers": {"Which?": ["a", "b"]}});
        assert_eq!(answer_of(Some(&many), "Which?"), Some("a, b".into()));
        assert_eq!(answer_of(Some(&json!({"answers": {}})), "Which?"), None);
        assert_eq!(answer_of(Some(&json!({})), "Which?"), None);
        assert_eq!(answer_of(None, "Which?"), None);
    }

    #[test]
    fn permission_modes_round_trip_their_names() {
        for name in PermissionMode::NAMES {
            assert_eq!(
                PermissionMode::parse(name).map(PermissionMode::as_str),
                Some(*name)
            );
        }
        assert_eq!(PermissionMode::parse("ask"), None);
    }
}
