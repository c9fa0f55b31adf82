//! The real ACP agents (the versions pinned in `tests/peers/package.json`) run by drover
//! as ACP providers through its headless interface, each against a mock model API on
//! 127.0.0.1 (docs/PROVIDERS.md §"ACP agents"):
//!
//! - `opencode-acp`: `opencode acp` (opencode-ai) against the chat completions mock;
//! - `claude-acp`: `claude-agent-acp` (@zed-industries/claude-agent-acp, which runs the
//!   Claude Code the Claude Agent SDK ships) against the Anthropic Messages mock;
//! - `codex-acp`: `codex-acp` (@zed-industries/codex-acp, a native binary) against the
//!   OpenAI Responses mock, through a `CODEX_HOME/config.toml` model provider;
//! - `gemini`: `gemini --acp` (@google/gemini-cli) against the Gemini API mock, through
//!   `GOOGLE_GEMINI_BASE_URL` and a fake `GEMINI_API_KEY`.
//!
//! For each: a tool permission allowed and one denied (the agent hears it), a rule
//! answering a request, a follow-up in the same session, the transcript and the usage
//! recorded; stopping a run while its tool runs leaves nothing running; a restarted
//! drover wakes an idle run in its session through `session/load`. Every wait is
//! bounded; every agent runs where only loopback exists (`crate::loopback`).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::drover::{Drover, eventually, processes_with, provider_events};
use crate::mock::{MockApi, Protocol, Reply, Usage};
use crate::{codex, opencode, peers};

/// How long a turn against the mock may take (an agent starts in a few seconds).
const TURN: Duration = Duration::from_secs(90);

/// A final answer with the `## Result` block drover asks for.
fn done(summary: &str) -> String {
    format!("All set.\n\n## Result\nstatus: done\nsummary: {summary}")
}

/// The agents under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    OpenCode,
    Claude,
    Codex,
    Gemini,
}

impl Agent {
    /// drover's built-in provider for it.
    pub fn provider(self) -> &'static str {
        match self {
            Agent::OpenCode => "opencode-acp",
            Agent::Claude => "claude-acp",
            Agent::Codex => "codex-acp",
            Agent::Gemini => "gemini",
        }
    }

    /// The npm package `tests/peers/package.json` pins it with.
    fn package(self) -> &'static str {
        match self {
            Agent::OpenCode => "opencode-ai",
            Agent::Claude => "@zed-industries/claude-agent-acp",
            Agent::Codex => "@zed-industries/codex-acp",
            Agent::Gemini => "@google/gemini-cli",
        }
    }

    fn protocol(self) -> Protocol {
        match self {
            Agent::OpenCode => Protocol::OpenAiChat,
            Agent::Claude => Protocol::AnthropicMessages,
            Agent::Codex => Protocol::OpenAiResponses,
            Agent::Gemini => Protocol::Gemini,
        }
    }

    /// The model's shell tool call running `command`, as the agent's model calls it.
    fn shell(self, command: &str) -> Reply {
        match self {
            Agent::OpenCode => Reply::tool_call(
                "bash",
                json!({"command": command, "description": "Run a command"}),
            ),
            Agent::Claude => Reply::tool_call(
                "Bash",
                json!({"command": command, "description": "Run a command"}),
            ),
            Agent::Codex => Reply::tool_call("exec_command", json!({"cmd": command})),
            Agent::Gemini => Reply::tool_call(
                "run_shell_command",
                json!({"command": command, "description": "Run a command"}),
            ),
        }
    }

    /// The drover config: the agent's provider entry (command, arguments, environment)
    /// pointing it at `mock`, everything it keeps under `root`.
    pub fn config(self, root: &Path, mock: &MockApi) -> String {
        let (command, args, env) = match self {
            Agent::OpenCode => {
                let config_file = root.join("opencode.json");
                std::fs::write(
                    &config_file,
                    opencode::opencode_config(&mock.url()).to_string(),
                )
                .expect("opencode.json");
                (
                    peers::cli("opencode"),
                    vec!["acp".to_string()],
                    opencode::opencode_env(root, &config_file),
                )
            }
            Agent::Claude => (
                peers::cli("claude-agent-acp"),
                Vec::new(),
                peers::claude_env(root, &mock.url()),
            ),
            Agent::Codex => {
                let env = codex::codex_env(root);
                codex::write_config(&root.join("codex-home"), mock, 0);
                // Every command but the known-safe ones asks, and runs where the run's
                // capability (`workspace`) lets it write.
                let file = root.join("codex-home/config.toml");
                let config = std::fs::read_to_string(&file).expect("config.toml");
                std::fs::write(
                    &file,
                    format!(
                        "approval_policy = \"untrusted\"\nsandbox_mode = \"workspace-write\"\n{config}"
                    ),
                )
                .expect("config.toml");
                (peers::cli("codex-acp"), Vec::new(), env)
            }
            Agent::Gemini => (
                peers::cli("gemini"),
                vec!["--acp".to_string()],
                gemini_env(root, &mock.url()),
            ),
        };
        let mut env: toml::Table = env
            .into_iter()
            .map(|(k, v)| (k, toml::Value::String(v)))
            .collect();
        env.insert(
            "PATH".into(),
            toml::Value::String(std::env::var("PATH").unwrap_or_default()),
        );
        let mut section = toml::Table::new();
        section.insert(
            "command".into(),
            toml::Value::String(command.display().to_string()),
        );
        section.insert(
            "args".into(),
            toml::Value::Array(args.into_iter().map(toml::Value::String).collect()),
        );
        section.insert("env".into(), toml::Value::Table(env));
        let mut providers = toml::Table::new();
        providers.insert(self.provider().into(), toml::Value::Table(section));
        let mut config = toml::Table::new();
        config.insert("providers".into(), toml::Value::Table(providers));
        toml::to_string(&config).expect("a config file")
    }
}

/// Gemini CLI's environment: the mock as its Gemini API (`GOOGLE_GEMINI_BASE_URL`), a
/// fake key, and a throwaway `HOME` whose `.gemini/settings.json` picks the API-key
/// login (no browser, no Google account), fixes the model (no routing request first) and
/// turns off its update check, usage statistics and telemetry.
pub fn gemini_env(root: &Path, api_url: &str) -> Vec<(String, String)> {
    let home = root.join("gemini-home");
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": "gemini-2.5-pro"},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false}
    });
    std::fs::create_dir_all(home.join(".gemini")).expect("gemini home");
    std::fs::write(home.join(".gemini/settings.json"), settings.to_string())
        .expect("settings.json");
    vec![
        ("GOOGLE_GEMINI_BASE_URL".into(), api_url.to_string()),
        ("GEMINI_API_KEY".into(), "mock-gemini-key".into()),
        ("HOME".into(), home.display().to_string()),
    ]
}

impl Agent {
    /// Checks the run's tokens and money after `turns` turns and `requests` model
    /// requests of `usage` each.
    fn check_usage(self, view: &Value, turns: u64, requests: u64, usage: Usage) {
        let tokens = &view["tokens"];
        let input = tokens["input"].as_u64().unwrap_or(0)
            + tokens["cache_read"].as_u64().unwrap_or(0)
            + tokens["cache_write"].as_u64().unwrap_or(0);
        let output = tokens["output"].as_u64().unwrap_or(0);
        match self {
            // OpenCode reports each turn's last model request's tokens at the turn's
            // end, and the session's running cost at its config's price ($1 / $2 per
            // million input / output tokens) for every request.
            Agent::OpenCode => {
                assert_eq!(input, turns * usage.input, "{view:#}");
                assert_eq!(output, turns * usage.output, "{view:#}");
                let expected =
                    requests as f64 * (usage.input as f64 * 1.0 + usage.output as f64 * 2.0) / 1e6;
                let cost = view["cost_usd"].as_f64().expect("a booked cost");
                assert!(
                    (cost - expected).abs() < 1e-9,
                    "drover booked {cost}, OpenCode's price gives {expected}: {view:#}"
                );
                assert_eq!(view["cost_basis"], "reported", "{view:#}");
            }
            // The Claude Code under claude-agent-acp reports every request's tokens and
            // its own price for them.
            Agent::Claude => {
                assert!(input >= requests * usage.input, "{view:#}");
                assert!(output >= requests * usage.output, "{view:#}");
                assert!(
                    view["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
                    "{view:#}"
                );
            }
            // Gemini CLI reports each turn's tokens (every model request's, summed) in
            // its answer's `_meta.quota`, and no money; no catalog prices its model:
            // unpriced, never $0.
            Agent::Gemini => {
                assert_eq!(input, requests * usage.input, "{view:#}");
                assert_eq!(output, requests * usage.output, "{view:#}");
                assert_eq!(view["cost_basis"], "unpriced", "{view:#}");
                assert!(
                    view["usage"].as_array().is_some_and(|rows| !rows.is_empty()
                        && rows
                            .iter()
                            .all(|r| r["model"] == "gemini-2.5-pro" && r["cost_usd"].is_null())),
                    "the rows name the model Gemini used, none with a cost: {view:#}"
                );
            }
            // codex-acp reports no tokens and no cost: unpriced, never $0.
            Agent::Codex => {
                assert_eq!(input + output, 0, "{view:#}");
                assert_eq!(view["cost_basis"], "unpriced", "{view:#}");
                assert!(
                    view["usage"]
                        .as_array()
                        .is_some_and(|rows| rows.iter().all(|r| r["cost_usd"].is_null())),
                    "no row has a cost: {view:#}"
                );
            }
        }
    }
}

/// A mock model API and a drover whose agent talks to it.
struct Rig {
    agent: Agent,
    mock: MockApi,
    drover: Drover,
}

impl Rig {
    async fn start(agent: Agent, script: Vec<Reply>) -> Rig {
        let mock = MockApi::start(agent.protocol(), script).await;
        let drover = Drover::start_with(|root| agent.config(root, &mock)).await;
        Rig {
            agent,
            mock,
            drover,
        }
    }

    async fn dispatch(&self, task: &str) -> String {
        self.drover
            .dispatch(&["--provider", self.agent.provider(), task])
            .await
    }

    /// Waits for the run's pending request, checks it shows `needle`, and answers it.
    async fn answer(&self, run: &str, needle: &str, decision: &str) -> Value {
        let pending = self.drover.pending(run, TURN).await;
        assert!(
            pending.to_string().contains(needle),
            "{needle:?} in the request: {pending:#}"
        );
        let request = pending["request_id"].as_str().unwrap().to_string();
        self.drover.respond(run, &request, &[decision]).await;
        pending
    }

    /// Adds a rule (everywhere) that allows commands matching `pattern`.
    async fn allow_commands(&self, pattern: &str) {
        self.drover
            .json(&[
                "rules",
                "add",
                "--scope",
                "everywhere",
                "--kind",
                "command",
                "--pattern",
                pattern,
                "allow",
            ])
            .await;
    }
}

/// Every provider event of the run's ready with the version the agent reported.
fn ready_versions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "ready")
        .map(|e| e["version"].as_str().unwrap_or("").to_string())
        .collect()
}

/// A rule allows one command; the user allows a second and denies a third (the model
/// hears the denial); the turn ends done; a follow-up goes on in the same session and
/// the same process; the transcript and the usage are recorded.
async fn allowed_denied_rule_and_follow_up(agent: Agent) {
    let tag = format!("{:x}", std::process::id());
    let ruled = format!("touch ruled-{tag}.txt");
    let allowed = format!("touch allowed-{tag}.txt");
    let denied = format!("touch denied-{tag}.txt");
    let usage = Usage {
        input: 1200,
        output: 80,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };
    let rig = Rig::start(
        agent,
        vec![
            agent.shell(&ruled).usage(usage),
            agent.shell(&allowed).usage(usage),
            agent.shell(&denied).usage(usage),
            Reply::text(done("two files written, one refused")).usage(usage),
            Reply::text(done("second part done")).usage(usage),
        ],
    )
    .await;
    rig.allow_commands(&ruled).await;
    let run = rig.dispatch("Write the files").await;

    rig.answer(&run, &format!("allowed-{tag}"), "allow").await;
    rig.answer(&run, &format!("denied-{tag}"), "deny").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    let work = rig.drover.work_dir();
    assert!(
        work.join(format!("ruled-{tag}.txt")).exists(),
        "the command the rule allowed ran"
    );
    assert!(
        work.join(format!("allowed-{tag}.txt")).exists(),
        "the allowed command ran"
    );
    assert!(
        !work.join(format!("denied-{tag}.txt")).exists(),
        "a denied command ran"
    );
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    let decisions = view["decisions"].to_string();
    assert!(
        decisions.contains("rule:"),
        "one request was answered by the rule: {view:#}"
    );

    // The model heard each answer: the ruled and allowed commands' results, and the
    // denial as a tool result that is not the command's output.
    let requests = rig.mock.wait_for_model_requests(4, TURN).await;
    let ruled_result = rig.mock.tool_results(&requests[1]);
    assert!(
        ruled_result.iter().all(|r| !r.content.contains("denied")),
        "{ruled_result:?}"
    );
    let denial = rig.mock.tool_results(&requests[3]);
    assert_eq!(denial.len(), 1, "{}", crate::mock::describe(&requests));
    let heard = denial[0].content.to_lowercase();
    assert!(
        [
            "reject", "denied", "declined", "abort", "refused", "canceled"
        ]
        .iter()
        .any(|w| heard.contains(w)),
        "the model hears the denial: {denial:?}"
    );

    // The transcript: the agent's version, its text, each tool's start and end.
    let events = provider_events(&rig.drover.events(&run).await);
    assert_eq!(
        ready_versions(&events),
        [peers::pinned_version(agent.package())],
        "{events:#?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "assistant_text"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("two files written"))),
        "{events:#?}"
    );
    let started = events
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .count();
    // (codex-acp asks before its call starts: a denied one never does.)
    assert!(
        started >= 2,
        "the two allowed tool calls started: {events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_finished" && e["is_error"] == false),
        "{events:#?}"
    );
    // OpenCode ends its turn at a denial (its loop stops on a rejected permission), so
    // drover's retry turn for the missing `## Result` block gets the final answer.
    let turns = view["turns"].as_array().map_or(0, Vec::len);
    let completed = events
        .iter()
        .filter(|e| e["type"] == "turn_completed")
        .count();
    assert_eq!(completed, turns, "one end per turn: {events:#?}");
    agent.check_usage(&view, turns as u64, 4, usage);

    // A follow-up goes on in the same session, in the same process.
    let session = view["provider_session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no provider session: {view:#}"))
        .to_string();
    let pid = view["pid"].as_u64().expect("an idle run keeps its agent");
    rig.drover.follow_up(&run, "Now the second part").await;
    let view = rig.drover.until_idle_after(&run, turns + 1, TURN).await;
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    assert_eq!(view["pid"], pid, "the same agent serves the follow-up");
    assert_eq!(
        view["last_result"]["summary"], "second part done",
        "{view:#}"
    );
    let requests = rig.mock.wait_for_model_requests(5, TURN).await;
    let history = requests[4].body.to_string();
    assert!(
        history.contains("two files written") && history.contains("Now the second part"),
        "the follow-up carries the conversation: {history}"
    );
    rig.drover
        .complete(&run, Some(pid as u32), TURN, Duration::from_secs(10))
        .await;
}

/// A run stopped while its allowed command runs ends stopped, and nothing it started
/// runs on.
async fn stop_while_a_tool_runs(agent: Agent) {
    let marker = format!(
        "drover-acp-stop-{}-{}",
        agent.provider(),
        std::process::id()
    );
    // A command that writes asks every agent first; `&&` keeps the shell up with the
    // marker on its command line.
    let command = format!("sleep 300 && touch {marker}.txt");
    let rig = Rig::start(
        agent,
        vec![agent.shell(&command), Reply::text(done("too late"))],
    )
    .await;
    let run = rig.dispatch("Wait a while").await;
    rig.answer(&run, &marker, "allow").await;
    assert!(
        eventually(TURN, || !processes_with(&marker).is_empty()).await,
        "the allowed command never started"
    );
    let out = rig.drover.run(&["stop", &run]).await;
    assert!(out.success, "stop failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "stopped", "{view:#}");
    assert!(view["pid"].is_null(), "{view:#}");
    rig.drover.assert_nothing_runs_under_it().await;
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&marker)
            .is_empty())
        .await,
        "the stopped run's command runs on: {:?}",
        processes_with(&marker)
    );
}

/// An idle run outlives a restart of drover: the next owner wakes it for a follow-up in
/// its session, which the agent loads (`session/load`) with the first turn in it.
async fn restart_and_resume_through_session_load(agent: Agent) {
    let rig = Rig::start(
        agent,
        vec![
            Reply::text(done("first part done")),
            Reply::text(done("second part done")),
        ],
    )
    .await;
    let run = rig.dispatch("Do the first part").await;
    let first = rig.drover.until_state(&run, "idle", TURN).await;
    let session = first["provider_session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no provider session: {first:#}"))
        .to_string();
    if agent == Agent::Gemini {
        next_wall_clock_minute().await;
    }
    let mut rig = rig;
    rig.drover
        .stop_serve(nix::sys::signal::Signal::SIGTERM)
        .await;
    rig.drover.serve().await;
    rig.drover.follow_up(&run, "Now the second part").await;
    let view = rig.drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "second part done",
        "{view:#}"
    );
    let events = provider_events(&rig.drover.events(&run).await);
    assert_eq!(ready_versions(&events).len(), 2, "two starts: {events:#?}");
    assert!(
        !events.iter().any(|e| e["text"]
            .as_str()
            .is_some_and(|t| t.contains("cannot resume"))),
        "{events:#?}"
    );
    // The agent loaded its session: the second model request holds the first turn.
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let history = requests[1].body.to_string();
    assert!(
        history.contains("first part done") && history.contains("Now the second part"),
        "the resumed session holds the first turn: {history}"
    );
    let pid = view["pid"].as_u64().map(|p| p as u32);
    rig.drover
        .complete(&run, pid, TURN, Duration::from_secs(10))
        .await;
}

/// Waits until the wall clock's minute has turned (at most 61 s).
///
/// Gemini CLI 0.61.0 names a session's file by the minute it opens it and the session's
/// id (`chats/session-YYYY-MM-DDTHH-MM-ID8.jsonl`); `session/load` opens its recording
/// before it reads the session, so a load in the minute the session was created appends
/// a fresh, empty history to the same file and then, racing that write, may find no
/// resumable session ("No previous sessions found for this project."). A drover restarted
/// a minute later loads it every time (tests/peers/README.md, Gemini CLI).
async fn next_wall_clock_minute() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let into = now.as_secs() % 60;
    tokio::time::sleep(Duration::from_secs(61 - into)).await;
}

macro_rules! agent_tests {
    ($module:ident, $agent:expr) => {
        mod $module {
            #[allow(unused_imports)] // the bench that includes this file has no tests
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_rule_and_the_user_answer_its_requests_the_denial_is_heard_and_a_follow_up_goes_on()
             {
                allowed_denied_rule_and_follow_up($agent).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stopping_a_run_while_its_command_runs_leaves_nothing_running() {
                stop_while_a_tool_runs($agent).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_restarted_drover_resumes_an_idle_run_through_session_load() {
                restart_and_resume_through_session_load($agent).await;
            }
        }
    };
}

agent_tests!(opencode_acp, Agent::OpenCode);
agent_tests!(claude_acp, Agent::Claude);
agent_tests!(codex_acp, Agent::Codex);
agent_tests!(gemini, Agent::Gemini);
