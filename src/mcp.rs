//! `drover mcp`: an MCP server over stdio through which an agent dispatches runs, waits
//! for them, reads their results and follows up (docs/ARCHITECTURE.md §"Agents as clients").
//!
//! The server is one more client of the owner's control socket: each tool is one
//! dispatcher [`Request`], sent on a connection of its own (so a long `wait` never holds
//! up another tool), with a background owner started when none runs, as the dashboard
//! does. What must stay true:
//! - a refusal is a tool error carrying drover's error code and sentence
//!   (`{"error": {"code", "message"}}`, the shape of `--json` refusals), never a
//!   protocol error;
//! - nothing answers permission prompts: that stays with the person;
//! - nothing is unbounded: `wait` is capped at [`MAX_WAIT_SECS`], a transcript at
//!   [`MAX_TRANSCRIPT_LINES`] lines of at most [`MAX_LINE_CHARS`] characters, a page of
//!   `runs` at [`MAX_RUNS_PAGE`] finished runs (besides the active ones);
//! - a server started inside a run (drover sets [`RUN_ID_ENV`] in each child) dispatches
//!   sub-runs of that run: the dispatcher records the parent and applies its limits.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use drover_core::config::Config;
use drover_core::control::ControlClient;
use drover_core::control::background::start_background;
use drover_core::dispatch::api::{RunsFilter, TranscriptFormat, WaitUntil};
use drover_core::dispatch::{Request, Response};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::money::Catalog;
use drover_core::paths::Paths;
use drover_core::run_state::RunState;
use drover_core::spec::SpecInput;

mod lines;

pub use drover_core::providers::RUN_ID_ENV;
/// The longest a `wait` tool call waits.
pub const MAX_WAIT_SECS: u64 = 300;
/// How long a `wait` waits when the call does not say.
pub const DEFAULT_WAIT_SECS: u64 = 60;
/// The most transcript lines (or events) one call returns; the latest are kept.
pub const MAX_TRANSCRIPT_LINES: usize = 500;
/// How many transcript lines a call returns when it does not say.
pub const DEFAULT_TRANSCRIPT_LINES: usize = 100;
/// Each transcript line is clipped to this many characters.
pub const MAX_LINE_CHARS: usize = 2_000;
/// Finished runs one `runs` call returns when it does not say (as `drover runs` does).
pub const DEFAULT_RUNS_PAGE: u32 = drover_core::dispatch::api::DEFAULT_RUNS_PAGE;
/// The most finished runs one `runs` call returns (older ones come page by page).
pub const MAX_RUNS_PAGE: u32 = 200;

/// The MCP server: its tools and where to reach the owner.
#[derive(Clone)]
pub struct DroverMcp {
    paths: Paths,
    /// The run this server was started inside, when it was ([`RUN_ID_ENV`]).
    calling_run: Option<String>,
    /// Where relative `cwd`s of a dispatch are resolved.
    caller_dir: std::path::PathBuf,
    tool_router: ToolRouter<DroverMcp>,
}

/// The arguments of a tool that takes none (any argument is refused).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// A tool's argument that names one run.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunIdArgs {
    /// The run's id (as `dispatch` or `runs` gave it).
    pub run_id: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsArgs {
    /// Only runs in this state.
    #[serde(default)]
    pub state: Option<RunState>,
    /// Include runs removed from the trays.
    #[serde(default)]
    pub include_removed: bool,
    /// Only the runs of this workflow (sub-runs are in their parent's workflow).
    #[serde(default)]
    pub workflow: Option<String>,
    /// Finished runs in the answer at most, newest finished first (default 50, at most
    /// 200; 0: only the active runs). Every active run is always in the answer.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The next page: only runs that finished before this run did (the previous answer's
    /// `next_before`).
    #[serde(default)]
    pub before: Option<String>,
    /// Only runs whose title, id, provider, model or state contains this text
    /// (case-insensitive), searched in the whole history.
    #[serde(default)]
    pub search: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// The runs to wait for.
    #[serde(default)]
    pub run_ids: Vec<String>,
    /// Also every run of this workflow (as it stands when the wait starts), however many.
    #[serde(default)]
    pub workflow: Option<String>,
    /// What to wait for: `needs_you` (a permission prompt, question or route card for the
    /// person, or the end), `idle` (the turn ended), `terminal` (the run ended, the
    /// default), `settled` (whichever of these comes first) or `event`.
    #[serde(default)]
    pub until: WaitUntil,
    /// Done when any of the runs meets the condition (default: all of them).
    #[serde(default)]
    pub any: bool,
    /// How long to wait, in seconds (default 60, at most 300). The answer says
    /// `timed_out` when the condition was not met by then.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TranscriptArgs {
    pub run_id: String,
    /// `result` (the last result block), `text` (each turn's answer), `tail` (one line
    /// per provider event, the default) or `events` (the recorded events).
    #[serde(default)]
    pub format: TranscriptFormat,
    /// At most this many lines or events, the latest (default 100, at most 500).
    #[serde(default)]
    pub max_lines: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FollowUpArgs {
    pub run_id: String,
    /// The next prompt (queued when a turn is running).
    pub text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EscalateArgs {
    pub run_id: String,
    /// The provider to escalate to (with `model`); absent: the run's escalation offer.
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelsArgs {
    /// Only this provider's models.
    #[serde(default)]
    pub provider: Option<String>,
}

/// One model a dispatch may name (`models`).
#[derive(Debug, Serialize)]
struct ModelEntry<'a> {
    provider: &'a str,
    id: &'a str,
    aliases: &'a [String],
    tier: drover_core::money::Tier,
    default: bool,
    vision: bool,
    context_window: Option<u64>,
}

impl DroverMcp {
    /// A server for the owner of `paths`; `calling_run` is the run it was started inside.
    pub fn new(
        paths: Paths,
        calling_run: Option<String>,
        caller_dir: std::path::PathBuf,
    ) -> DroverMcp {
        DroverMcp {
            paths,
            calling_run,
            caller_dir,
            tool_router: Self::tool_router(),
        }
    }

    /// Sends `request` to the owner on a connection of its own, starting a background
    /// owner when none runs.
    async fn ask(&self, request: Request) -> Result<Response, DroverError> {
        let mut client = match ControlClient::connect(&self.paths).await? {
            Some(client) => client,
            None => {
                start_background(&self.paths).await?;
                ControlClient::connect(&self.paths).await?.ok_or_else(|| {
                    DroverError::new(
                        ErrorCode::NoOwner,
                        "the background drover went away as it started; see logs/owner.log under the data directory",
                    )
                })?
            }
        };
        client.request(request).await
    }

    /// The answer to one tool call: the response as JSON, or the refusal.
    async fn answer(&self, request: Request) -> Result<CallToolResult, ErrorData> {
        Ok(match self.ask(request).await {
            Ok(response) => success(&response),
            Err(e) => refusal(&e),
        })
    }

    /// The spec a `dispatch` call sends: relative paths resolved, the calling run as the
    /// parent when the call names none.
    fn spec(&self, mut input: SpecInput) -> SpecInput {
        // A host's directory is the host's: taken as written (docs/ARCHITECTURE.md
        // §"Hosts").
        let on_host = input.host.as_deref().is_some_and(|h| !h.trim().is_empty());
        input.cwd = match input.cwd.take() {
            Some(dir) if on_host => Some(dir),
            None if on_host => None,
            Some(dir) => Some(self.caller_dir.join(dir)),
            None => Some(self.caller_dir.clone()),
        };
        if input
            .parent_run
            .as_deref()
            .is_none_or(|p| p.trim().is_empty())
        {
            input.parent_run = self.calling_run.clone();
        }
        input
    }
}

#[tool_router]
impl DroverMcp {
    #[tool(
        description = "Dispatch a coding-agent run (Claude Code, Codex, OpenCode or the simulated agent). Only `task` is required. The person supervises it in the drover dashboard and answers its permission prompts. Returns the run's summary, with its run_id."
    )]
    async fn dispatch(
        &self,
        Parameters(input): Parameters<SpecInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let spec = self.spec(input);
        self.answer(Request::Dispatch {
            spec: Box::new(spec),
        })
        .await
    }

    #[tool(
        description = "List runs, newest first: every active run and the 50 most recently finished ones (`limit` up to 200). The answer's `next_before`, when set, is the `before` of the next page of older runs. Optionally only one state, one workflow, or runs whose title, id, provider or model contains `search`."
    )]
    async fn runs(
        &self,
        Parameters(args): Parameters<RunsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let filter = RunsFilter {
            state: args.state,
            include_removed: args.include_removed,
            workflow: args.workflow,
            limit: Some(args.limit.unwrap_or(DEFAULT_RUNS_PAGE).min(MAX_RUNS_PAGE)),
            before: args.before,
            search: args.search,
        };
        Ok(match self.ask(filter.request()).await {
            Ok(Response::Runs(runs)) => structured(json!({
                "next_before": filter.next_before(&runs),
                "items": runs,
            })),
            Ok(other) => success(&other),
            Err(e) => refusal(&e),
        })
    }

    #[tool(
        description = "Everything about one run: state, turns, pending prompts, last result, spend."
    )]
    async fn show(
        &self,
        Parameters(args): Parameters<RunIdArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Request::Show {
            run_id: args.run_id,
        })
        .await
    }

    #[tool(
        description = "Wait (at most 300 s) until runs (named, or of a workflow) need the person, are idle or have ended; any or all of them. Returns the runs and whether it timed out."
    )]
    async fn wait(
        &self,
        Parameters(args): Parameters<WaitArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let timeout = args
            .timeout_secs
            .unwrap_or(DEFAULT_WAIT_SECS)
            .min(MAX_WAIT_SECS);
        self.answer(Request::Wait {
            run_ids: args.run_ids,
            workflow: args.workflow,
            until: args.until,
            any: args.any,
            timeout_secs: Some(timeout),
        })
        .await
    }

    #[tool(
        description = "A run's transcript: its last result block, each turn's answer, or the latest provider events (bounded)."
    )]
    async fn transcript(
        &self,
        Parameters(args): Parameters<TranscriptArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let max = args
            .max_lines
            .unwrap_or(DEFAULT_TRANSCRIPT_LINES)
            .clamp(1, MAX_TRANSCRIPT_LINES);
        let request = Request::Transcript {
            run_id: args.run_id,
            format: args.format,
        };
        Ok(match self.ask(request).await {
            Ok(Response::Transcript(mut view)) => {
                bound_transcript(&mut view, max);
                success(&Response::Transcript(view))
            }
            Ok(other) => success(&other),
            Err(e) => refusal(&e),
        })
    }

    #[tool(description = "Send the next prompt to an idle run (queued if a turn is running).")]
    async fn follow_up(
        &self,
        Parameters(args): Parameters<FollowUpArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Request::FollowUp {
            run_id: args.run_id,
            text: args.text,
        })
        .await
    }

    #[tool(description = "End an idle run as complete.")]
    async fn complete(
        &self,
        Parameters(args): Parameters<RunIdArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Request::Complete {
            run_id: args.run_id,
        })
        .await
    }

    #[tool(description = "Stop a run (its pending prompts are denied).")]
    async fn stop(
        &self,
        Parameters(args): Parameters<RunIdArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Request::Stop {
            run_id: args.run_id,
        })
        .await
    }

    #[tool(
        description = "A new run one tier up (or on the named provider and model) carrying an ended run's task and result."
    )]
    async fn escalate(
        &self,
        Parameters(args): Parameters<EscalateArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Request::Escalate {
            run_id: args.run_id,
            provider: args.provider,
            model: args.model,
        })
        .await
    }

    #[tool(description = "A new run on the same model after a run failed transiently.")]
    async fn retry(
        &self,
        Parameters(args): Parameters<RunIdArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Request::Retry {
            run_id: args.run_id,
        })
        .await
    }

    #[tool(
        description = "The budget session's money: spent, reserved, available, warning and hard cap (US dollars)."
    )]
    async fn budget(
        &self,
        Parameters(NoArgs {}): Parameters<NoArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Request::Budget).await
    }

    #[tool(
        description = "The models a dispatch may name, per enabled provider: id, aliases, tier, whether it is the provider's default."
    )]
    async fn models(
        &self,
        Parameters(args): Parameters<ModelsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match models(&self.paths, args.provider.as_deref()) {
            Ok(value) => structured(value),
            Err(e) => refusal(&e),
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DroverMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("drover", crate::VERSION))
            .with_instructions(
                "drover dispatches coding-agent runs and supervises them. Dispatch runs, wait \
                 for them, read their results and follow up; the person answers permission \
                 prompts in the drover dashboard.",
            )
    }
}

/// The visible models of the enabled providers (of `provider` alone when named).
fn models(paths: &Paths, provider: Option<&str>) -> Result<Value, DroverError> {
    let config = Config::load(&paths.config_file)?;
    let catalog = Catalog::from_config(&config)?;
    if let Some(name) = provider
        && !config.providers.contains_key(name)
    {
        let known: Vec<&str> = config.providers.keys().map(String::as_str).collect();
        return Err(DroverError::new(
            ErrorCode::InvalidProvider,
            format!("no provider {name}; use one of {}", known.join(", ")),
        ));
    }
    let mut out = Vec::new();
    for (name, p) in &config.providers {
        if !p.enabled || provider.is_some_and(|wanted| wanted != name) {
            continue;
        }
        for m in catalog.visible(name) {
            out.push(ModelEntry {
                provider: &m.provider,
                id: &m.id,
                aliases: &m.aliases,
                tier: m.tier,
                default: m.default,
                vision: m.vision,
                context_window: m.context_window,
            });
        }
    }
    Ok(json!({ "models": out }))
}

/// Keeps the latest `max` lines and events of a transcript, each line clipped.
fn bound_transcript(view: &mut drover_core::dispatch::api::TranscriptView, max: usize) {
    let drop_lines = view.lines.len().saturating_sub(max);
    view.lines.drain(..drop_lines);
    for line in &mut view.lines {
        if line.chars().count() > MAX_LINE_CHARS {
            *line = drover_core::text::clip(line, MAX_LINE_CHARS);
        }
    }
    let drop_events = view.events.len().saturating_sub(max);
    view.events.drain(..drop_events);
}

/// A response as the tool's result: JSON text, and the same as structured content (a
/// list is wrapped as `{"items": […]}`, since structured content is an object).
fn success(response: &Response) -> CallToolResult {
    match serde_json::to_value(response) {
        Ok(value @ Value::Object(_)) => structured(value),
        Ok(other) => structured(json!({ "items": other })),
        Err(e) => refusal(&DroverError::new(
            ErrorCode::Internal,
            format!("cannot write the answer as JSON: {e}"),
        )),
    }
}

fn structured(value: Value) -> CallToolResult {
    CallToolResult::structured(value)
}

/// A refusal as a tool error: `error[CODE]: sentence` as text, and `{"error": {"code",
/// "message"}}` as structured content.
pub fn refusal(e: &DroverError) -> CallToolResult {
    let mut result = CallToolResult::structured_error(json!({ "error": e }));
    result.content = vec![ContentBlock::text(format!(
        "error[{}]: {}",
        e.code, e.message
    ))];
    result
}

/// Serves MCP on stdin/stdout until the client closes it. Every line read is judged
/// first ([`lines`]): the MCP session gets only what it can read, and everything else is
/// answered here, on the same stdout.
pub async fn serve_stdio(server: DroverMcp) -> Result<(), DroverError> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mcp_error = |e: String| {
        DroverError::new(
            ErrorCode::Internal,
            format!("the MCP session failed: {e}; check that the client speaks MCP over stdio"),
        )
    };
    // The session's side of two pipes: it reads what passed, and writes its answers.
    let (mut to_session, session_in) = tokio::io::duplex(64 * 1024);
    let (session_out, from_session) = tokio::io::duplex(64 * 1024);
    // One writer to stdout, so the session's lines and ours never interleave.
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = out_rx.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let session_tx = out_tx.clone();
    let relay = tokio::spawn(async move {
        let mut answers = tokio::io::BufReader::new(from_session);
        let mut line = Vec::new();
        loop {
            line.clear();
            match answers.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if session_tx.send(line.clone()).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let reader = tokio::spawn(async move {
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        let answer = |value: serde_json::Value| {
            let mut bytes = value.to_string().into_bytes();
            bytes.push(b'\n');
            bytes
        };
        loop {
            let read = match lines::read_line(&mut stdin, lines::MAX_LINE_BYTES).await {
                Ok(read) => read,
                Err(e) => {
                    tracing::warn!(error = %e, "drover mcp cannot read stdin");
                    break;
                }
            };
            let reply = match read {
                lines::LineRead::Eof => break,
                lines::LineRead::TooLong(start) => {
                    Some(lines::too_long(&start, lines::MAX_LINE_BYTES))
                }
                lines::LineRead::Line(mut line) => match lines::judge(&line) {
                    lines::Verdict::Skip => None,
                    lines::Verdict::Answer(value) => Some(value),
                    lines::Verdict::Forward => {
                        line.push(b'\n');
                        if to_session.write_all(&line).await.is_err() {
                            break;
                        }
                        None
                    }
                },
            };
            if let Some(value) = reply
                && out_tx.send(answer(value)).await.is_err()
            {
                break;
            }
        }
        // Dropping `to_session` ends the session once it has answered what it read.
    });
    let served = async {
        let running = server
            .serve((session_in, session_out))
            .await
            .map_err(|e| mcp_error(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| mcp_error(e.to_string()))?;
        Ok::<(), DroverError>(())
    }
    .await;
    // The session is over: what it wrote is relayed, then stdout is done.
    reader.abort();
    let _ = relay.await;
    let _ = writer.await;
    served
}
