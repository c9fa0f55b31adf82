//! Codex (`codex`, the pinned version) run by drover through its headless interface,
//! against the mock OpenAI Responses API; plus one direct `codex exec` run that pins down
//! the CLI facts the exec mode relies on.
//!
//! Each test owns a `drover serve` in a temporary `DROVER_HOME` whose `config.toml` points
//! `[providers.codex]` at the pinned CLI, with `CODEX_HOME` (and `HOME`, `TMPDIR`) in the
//! temporary directory and a `config.toml` there that sends Codex to the mock and nowhere
//! else. What a user relies on is checked from both ends: what drover shows (`show
//! --json`, the events transcript) and what the model API actually received.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::caps;
use crate::drover::{
    Drover, NO_RESEND, QUICK_IDLE, SHARED_DIR, descendants_but_the_warden, eventually, group_alive,
    live_states, processes_with, provider_config, provider_events,
};
use crate::mock::{MockApi, Protocol, Reply, Usage};
use crate::peers::{self, base_env, run_bounded};

/// The model every run asks for (priced in the catalog: $5 / $30 / $0.50 per million
/// input / output / cached input tokens).
pub const MODEL: &str = "gpt-5.5";
/// How long a turn against the mock may take (Codex starts in about half a second; a
/// retried request waits for its back-off).
const TURN: Duration = Duration::from_secs(60);
/// One direct `codex exec` against the mock (it retries a dead API: always bounded).
const EXEC: Duration = Duration::from_secs(90);

/// A final answer with the `## Result` block drover asks for.
fn done(summary: &str) -> String {
    format!("All set.\n\n## Result\nstatus: done\nsummary: {summary}")
}

/// `CODEX_HOME/config.toml` pointing Codex at the mock, with `retries` request and stream
/// retries, and nothing else on the network: without `[features] plugins/apps = false`
/// the pinned Codex looks up api.github.com and chatgpt.com, without `[analytics]
/// enabled = false` ab.chatgpt.com (seen with strace).
pub fn write_config(codex_home: &Path, mock: &MockApi, retries: u32) {
    let config = format!(
        r#"model = "{MODEL}"
model_provider = "mock"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
apps = false

[model_providers.mock]
name = "Mock"
base_url = "{}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = {retries}
stream_max_retries = {retries}
"#,
        mock.url()
    );
    std::fs::write(codex_home.join("config.toml"), config).expect("codex config.toml");
}

/// The variables Codex needs under `root` (its home, `CODEX_HOME`, a temporary
/// directory) and the mock's fake key.
pub fn codex_env(root: &Path) -> Vec<(String, String)> {
    for dir in ["home", "codex-home", "tmp"] {
        std::fs::create_dir_all(root.join(dir)).expect("codex directories");
    }
    vec![
        ("HOME".into(), root.join("home").display().to_string()),
        (
            "CODEX_HOME".into(),
            root.join("codex-home").display().to_string(),
        ),
        ("MOCK_API_KEY".into(), "sk-mock".into()),
        ("TMPDIR".into(), root.join("tmp").display().to_string()),
    ]
}

/// A mock Responses API and a drover whose `codex` provider talks to it.
struct Rig {
    mock: MockApi,
    drover: Drover,
}

impl Rig {
    async fn start(script: Vec<Reply>) -> Rig {
        Rig::with_retries(script, 0).await
    }

    async fn with_retries(script: Vec<Reply>, retries: u32) -> Rig {
        Rig::with(script, retries, "").await
    }

    /// As [`Rig::with_retries`], with `limits` (a `[limits]` table) added to the config.
    async fn with(script: Vec<Reply>, retries: u32, limits: &str) -> Rig {
        let codex = peers::cli("codex");
        let mock = MockApi::start(Protocol::OpenAiResponses, script).await;
        let drover = Drover::start_with(|root| {
            let env = codex_env(root);
            write_config(&root.join("codex-home"), &mock, retries);
            provider_config("codex", &codex, &env) + limits
        })
        .await;
        Rig { mock, drover }
    }

    async fn dispatch(&self, policy: &str, task: &str) -> String {
        self.drover
            .dispatch(&[
                "--provider",
                "codex",
                "--model",
                MODEL,
                "--policy",
                policy,
                task,
            ])
            .await
    }

    async fn pending(&self, run: &str) -> Value {
        self.drover.pending(run, TURN).await
    }

    async fn respond(&self, run: &str, request: &str, decision: &[&str]) {
        self.drover.respond(run, request, decision).await
    }

    /// Ends an idle run as complete and checks its child (if any) is gone.
    async fn complete(&self, run: &str, pid: Option<u32>) {
        let grace = Duration::from_secs(5);
        self.drover.complete(run, pid, TURN, grace).await
    }
}

/// The text of a Responses API request's input (every item, as JSON).
fn input_text(request: &crate::mock::RecordedRequest) -> String {
    request.body["input"].to_string()
}

/// The thread id Codex sent with a model request.
fn thread_header(request: &crate::mock::RecordedRequest) -> String {
    request
        .header("thread-id")
        .unwrap_or_else(|| panic!("Codex sent no thread-id header: {:?}", request.headers))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_allowed_by_the_user_runs_and_its_output_goes_back_to_the_model() {
    let command = "echo allowed-7f3a > allowed.txt && cat allowed.txt";
    let rig = Rig::start(vec![
        Reply::tool_call("exec_command", json!({"cmd": command})),
        Reply::text(done("wrote allowed.txt")),
    ])
    .await;
    let run = rig.dispatch("ask", "Write allowed.txt").await;

    let pending = rig.pending(&run).await;
    assert_eq!(pending["kind"], "permission", "{pending:#}");
    assert_eq!(pending["tool"], "shell", "{pending:#}");
    assert!(
        pending["input"]["command"]
            .as_str()
            .unwrap_or("")
            .contains(command),
        "{pending:#}"
    );
    assert!(
        !rig.drover.work_dir().join("allowed.txt").exists(),
        "the command ran before it was allowed"
    );
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(&run, &request, &["allow"]).await;

    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert!(view["pending"].as_array().unwrap().is_empty(), "{view:#}");
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "wrote allowed.txt",
        "{view:#}"
    );
    assert_eq!(
        std::fs::read_to_string(rig.drover.work_dir().join("allowed.txt")).unwrap(),
        "allowed-7f3a\n"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let results = rig.mock.tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].call_id.starts_with("call_mock_"), "{results:?}");
    assert!(results[0].content.contains("allowed-7f3a"), "{results:?}");
    assert_eq!(rig.mock.remaining(), 0);

    // The transcript shows the tool's start and end with the same id.
    let events = provider_events(&rig.drover.events(&run).await);
    let started = events
        .iter()
        .find(|e| e["type"] == "tool_started")
        .unwrap_or_else(|| panic!("no tool_started: {events:#?}"));
    assert_eq!(started["name"], "shell", "{started:#}");
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_finished")
        .unwrap_or_else(|| panic!("no tool_finished: {events:#?}"));
    assert_eq!(
        finished["tool_use_id"], started["tool_use_id"],
        "{finished:#}"
    );
    assert_eq!(finished["is_error"], false, "{finished:#}");
    // The ledger holds Codex's thread id: the one it sends the API.
    let thread = thread_header(&requests[0]);
    assert_eq!(thread_header(&requests[1]), thread);
    assert_eq!(view["provider_session_id"], thread.as_str(), "{view:#}");
    let pid = view["pid"].as_u64().expect("an idle run keeps its child") as u32;
    rig.complete(&run, Some(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_written_in_a_worktree_lands_there_only_and_merge_brings_it_to_the_users_branch() {
    let command = "printf 'cached-91c2\\n' > cache.txt";
    let rig = Rig::start(vec![
        Reply::tool_call("exec_command", json!({"cmd": command})),
        Reply::text(done("wrote cache.txt")),
    ])
    .await;
    let base = rig.drover.work_repo().await;
    let run = rig.dispatch("ask", "Write cache.txt").await;
    let pending = rig.pending(&run).await;
    assert_eq!(pending["tool"], "shell", "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(&run, &request, &["allow"]).await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    rig.drover
        .merge_worktree_file(&run, &base, "cache.txt", "cached-91c2\n")
        .await;
    rig.complete(&run, view["pid"].as_u64().map(|p| p as u32))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_denied_by_the_user_does_not_run_and_the_model_hears_it() {
    let command = "echo denied-51c2 > denied.txt";
    let rig = Rig::start(vec![
        Reply::tool_call("exec_command", json!({"cmd": command})),
        Reply::text(done("the user said no, so nothing was written")),
    ])
    .await;
    let run = rig.dispatch("ask", "Write denied.txt").await;
    let pending = rig.pending(&run).await;
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(&run, &request, &["deny", "--message", "not here"])
        .await;

    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    assert!(
        !rig.drover.work_dir().join("denied.txt").exists(),
        "a denied command ran"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let results = rig.mock.tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    // Codex's `decline` carries no message: the model hears the command was rejected.
    assert!(
        results[0].content.contains("rejected by user"),
        "the model hears the command was rejected: {results:?}"
    );
    let events = provider_events(&rig.drover.events(&run).await);
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_finished")
        .unwrap_or_else(|| panic!("no tool_finished: {events:#?}"));
    assert_eq!(finished["is_error"], true, "{finished:#}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, Some(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_turn_continues_the_same_codex_thread() {
    let rig = Rig::start(vec![
        Reply::text(done("first part done")),
        Reply::text(done("second part done")),
    ])
    .await;
    let run = rig.dispatch("ask", "Do the first part").await;
    let first = rig.drover.until_state(&run, "idle", TURN).await;
    let session = first["provider_session_id"]
        .as_str()
        .expect("the run knows its Codex thread")
        .to_string();
    let pid = first["pid"].as_u64().unwrap() as u32;

    let out = rig
        .drover
        .run(&["follow-up", &run, "Now", "the", "second", "part"])
        .await;
    assert!(
        out.success,
        "follow-up failed: {}{}",
        out.stdout, out.stderr
    );
    let view = rig
        .drover
        .until(&run, "idle after two turns", TURN, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
        })
        .await;
    assert_eq!(view["turns"][1]["origin"], "follow_up", "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "second part done",
        "{view:#}"
    );
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    assert_eq!(view["pid"], pid, "the same app-server serves the follow-up");

    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    for request in &requests {
        assert_eq!(thread_header(request), session);
    }
    // The follow-up carries the conversation: the first answer, then the new prompt.
    let input = input_text(&requests[1]);
    assert!(input.contains("first part done"), "{input}");
    assert!(input.contains("Now the second part"), "{input}");
    rig.complete(&run, Some(pid)).await;
}

/// `Usage` as the mock reports it, in drover's classes (OpenAI's input includes the
/// cached tokens and its output the reasoning ones).
fn drover_tokens(usages: &[Usage]) -> Value {
    let sum = |f: fn(&Usage) -> u64| usages.iter().map(f).sum::<u64>();
    json!({
        "input": sum(|u| u.input - u.cache_read),
        "output": sum(|u| u.output - u.reasoning),
        "reasoning": sum(|u| u.reasoning),
        "cache_read": sum(|u| u.cache_read),
        "cache_write": 0,
    })
}

/// What the catalog's gpt-5.5 price makes of `tokens` (drover's classes): $5 per million
/// uncached input tokens, $30 output (reasoning included), $0.50 cached input.
fn gpt55_cost(tokens: &Value) -> f64 {
    let n = |k: &str| tokens[k].as_u64().unwrap() as f64;
    (n("input") * 5.0 + (n("output") + n("reasoning")) * 30.0 + n("cache_read") * 0.5) / 1e6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_booked_as_tokens_priced_from_the_catalog() {
    let first_tool = Usage {
        input: 2000,
        output: 50,
        cache_read: 500,
        cache_write: 0,
        reasoning: 10,
    };
    let first_text = Usage {
        input: 2100,
        output: 30,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };
    let second = Usage {
        input: 900,
        output: 60,
        cache_read: 300,
        cache_write: 0,
        reasoning: 20,
    };
    let rig = Rig::start(vec![
        Reply::tool_call("exec_command", json!({"cmd": "touch usage.txt"})).usage(first_tool),
        Reply::text(done("one")).usage(first_text),
        Reply::text(done("two")).usage(second),
    ])
    .await;
    let run = rig.dispatch("ask", "Count tokens").await;
    let pending = rig.pending(&run).await;
    rig.respond(&run, pending["request_id"].as_str().unwrap(), &["allow"])
        .await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;

    // Tokens: the turn's two model requests, summed.
    let turn_one = drover_tokens(&[first_tool, first_text]);
    assert_eq!(view["tokens"], turn_one, "{view:#}");
    assert_eq!(view["cost_basis"], "estimated", "{view:#}");
    let expected = gpt55_cost(&turn_one);
    assert!(expected > 0.0);
    let cost = view["cost_usd"].as_f64().unwrap();
    assert!(
        (cost - expected).abs() < 1e-9,
        "drover booked {cost} for tokens the catalog prices at {expected}: {view:#}"
    );

    // A second turn is booked on its own tokens (not the thread's running total).
    let out = rig.drover.run(&["follow-up", &run, "Again"]).await;
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    let view = rig
        .drover
        .until(&run, "idle after two turns", TURN, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
        })
        .await;
    let turn_two = drover_tokens(&[second]);
    assert_eq!(view["turns"][1]["tokens"], turn_two, "{view:#}");
    assert_eq!(
        view["tokens"],
        drover_tokens(&[first_tool, first_text, second]),
        "{view:#}"
    );
    let turn_cost = view["turns"][1]["cost_usd"].as_f64().unwrap();
    assert!((turn_cost - gpt55_cost(&turn_two)).abs() < 1e-9, "{view:#}");
    let cost = view["cost_usd"].as_f64().unwrap();
    assert!(
        (cost - expected - gpt55_cost(&turn_two)).abs() < 1e-9,
        "{view:#}"
    );
    assert_eq!(view["cost_basis"], "estimated", "{view:#}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, Some(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_holds_the_run_in_waiting_provider_until_the_api_answers_again() {
    // Codex retries a 429 as a stream reconnect (honouring retry-after), when retries
    // are configured.
    let rig = Rig::with_retries(
        vec![
            Reply::error(429).retry_after(Duration::from_secs(1)),
            Reply::text(done("answered after the rate limit")),
        ],
        2,
    )
    .await;
    let run = rig.dispatch("ask", "Say something").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(
        view["last_result"]["summary"], "answered after the rate limit",
        "{view:#}"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    assert_eq!(requests.len(), 2, "{}", crate::mock::describe(&requests));

    let events = rig.drover.events(&run).await;
    let states = live_states(&events);
    let kinds: Vec<&str> = states.iter().filter_map(|s| s["state"].as_str()).collect();
    let waiting = kinds
        .iter()
        .position(|k| *k == "waiting_provider")
        .unwrap_or_else(|| panic!("the run never waited for the provider: {kinds:?}"));
    let held = &states[waiting];
    assert!(
        held["detail"].as_str().unwrap_or("").contains("429"),
        "{held:#}"
    );
    assert!(
        kinds[waiting..].contains(&"working"),
        "the run went back to work after the rate limit: {kinds:?}"
    );
    let provider = provider_events(&events);
    let limited = provider
        .iter()
        .position(|e| e["type"] == "rate_limited")
        .unwrap_or_else(|| panic!("no rate_limited event: {provider:#?}"));
    assert!(
        provider[limited..]
            .iter()
            .any(|e| e["type"] == "rate_limit_cleared"),
        "the adapter said the rate limit was over: {provider:#?}"
    );
    assert_eq!(view["live_state"]["state"], "working", "{view:#}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, Some(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_that_outlasts_the_retries_fails_the_run_as_provider_unavailable() {
    // One request retry and one stream retry: Codex makes four requests, then gives up.
    let rig = Rig::with((0..6).map(|_| Reply::error(500)).collect(), 1, NO_RESEND).await;
    let run = rig.dispatch("ask", "Say something").await;
    let running = rig
        .drover
        .until(&run, "running with a child", TURN, |v| v["pid"].is_u64())
        .await;
    let pid = running["pid"].as_u64().unwrap() as u32;
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "failed", "{view:#}");
    assert_eq!(
        view["completion_reason"], "provider_unavailable",
        "{view:#}"
    );
    // A retry on the same provider and model is offered.
    assert_eq!(view["escalation"]["kind"], "retry", "{view:#}");
    assert_eq!(view["escalation"]["to_provider"], "codex", "{view:#}");
    assert_eq!(view["escalation"]["to_model"], MODEL, "{view:#}");
    let ends: Vec<Value> = provider_events(&rig.drover.events(&run).await)
        .into_iter()
        .filter(|e| e["type"] == "turn_completed")
        .collect();
    assert_eq!(ends.len(), 1, "{ends:#?}");
    assert_eq!(ends[0]["is_error"], true, "{ends:#?}");
    assert_eq!(ends[0]["transient"], true, "{ends:#?}");
    assert_eq!(ends[0]["api_error_status"], 500, "{ends:#?}");
    let requests = rig.mock.model_requests();
    assert_eq!(requests.len(), 4, "{}", crate::mock::describe(&requests));
    assert!(
        eventually(Duration::from_secs(5), || !group_alive(pid)).await,
        "codex's process group {pid} outlived its failed run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_run_while_the_model_answers_leaves_no_process_behind() {
    let rig = Rig::start(vec![
        Reply::text(done("too late")).delay(Duration::from_secs(120)),
    ])
    .await;
    let run = rig.dispatch("ask", "Take your time").await;
    rig.mock.wait_for_model_requests(1, TURN).await;
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "running", "{view:#}");
    let pid = view["pid"]
        .as_u64()
        .expect("a running run shows its child's pid") as u32;
    assert!(group_alive(pid));

    let out = rig.drover.run(&["stop", &run]).await;
    assert!(out.success, "stop failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "stopped", "{view:#}");
    assert_eq!(view["completion_reason"], "user", "{view:#}");
    assert!(view["pid"].is_null(), "{view:#}");
    assert!(
        !group_alive(pid),
        "process group {pid} outlived the stopped run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_restricted_policy_runs_codex_exec_per_turn_and_resumes_its_thread() {
    let command = "echo exec-3c1e > exec.txt";
    let tool = Usage {
        input: 1500,
        output: 40,
        cache_read: 200,
        cache_write: 0,
        reasoning: 5,
    };
    let first = Usage {
        input: 1700,
        output: 30,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };
    let second = Usage {
        input: 2000,
        output: 70,
        cache_read: 1000,
        cache_write: 0,
        reasoning: 0,
    };
    let rig = Rig::start(vec![
        Reply::tool_call("exec_command", json!({"cmd": command})).usage(tool),
        Reply::text(done("wrote exec.txt")).usage(first),
        Reply::text(done("second exec turn")).usage(second),
    ])
    .await;
    let run = rig.dispatch("restricted", "Write exec.txt").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    // exec never asks: the sandbox (workspace-write) decides.
    assert_eq!(view["last_result"]["summary"], "wrote exec.txt", "{view:#}");
    assert_eq!(
        std::fs::read_to_string(rig.drover.work_dir().join("exec.txt")).unwrap(),
        "exec-3c1e\n"
    );
    // No child between turns.
    assert!(view["pid"].is_null(), "{view:#}");
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let thread = thread_header(&requests[0]);
    assert_eq!(view["provider_session_id"], thread.as_str(), "{view:#}");
    assert_eq!(view["tokens"], drover_tokens(&[tool, first]), "{view:#}");

    let out = rig.drover.run(&["follow-up", &run, "And", "again"]).await;
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    let view = rig
        .drover
        .until(&run, "idle after two turns", TURN, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
        })
        .await;
    assert_eq!(
        view["last_result"]["summary"], "second exec turn",
        "{view:#}"
    );
    assert_eq!(view["provider_session_id"], thread.as_str(), "{view:#}");
    let requests = rig.mock.wait_for_model_requests(3, TURN).await;
    assert_eq!(
        thread_header(&requests[2]),
        thread,
        "exec resume continues the thread"
    );
    let input = input_text(&requests[2]);
    assert!(
        input.contains("wrote exec.txt") && input.contains("And again"),
        "the resumed turn carries the thread: {input}"
    );
    // codex exec reports the thread's running total; the turn is booked on its own part.
    assert_eq!(
        view["turns"][1]["tokens"],
        drover_tokens(&[second]),
        "{view:#}"
    );
    let expected = gpt55_cost(&drover_tokens(&[tool, first, second]));
    let cost = view["cost_usd"].as_f64().unwrap();
    assert!(
        (cost - expected).abs() < 1e-9,
        "{cost} vs {expected}: {view:#}"
    );
    rig.complete(&run, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_resumes_its_codex_thread_after_a_drover_restart() {
    let mut rig = Rig::start(vec![
        Reply::text(done("too late")).delay(Duration::from_secs(120)),
        Reply::text(done("carried on")),
    ])
    .await;
    let run = rig.dispatch("ask", "Start the work").await;
    rig.mock.wait_for_model_requests(1, TURN).await;
    let view = rig.drover.show(&run).await;
    let pid = view["pid"].as_u64().unwrap() as u32;
    let thread = view["provider_session_id"]
        .as_str()
        .expect("the thread is known once the turn runs")
        .to_string();
    assert_eq!(thread_header(&rig.mock.model_requests()[0]), thread);

    rig.drover.stop_serve(Signal::SIGKILL).await;
    assert!(
        eventually(Duration::from_secs(10), || !group_alive(pid)).await,
        "codex's process group {pid} outlived a killed drover"
    );
    rig.drover.serve().await;
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "interrupted", "{view:#}");

    let out = rig.drover.run(&["resume", &run, "Carry", "on"]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["last_result"]["summary"], "carried on", "{view:#}");
    assert_eq!(view["provider_session_id"], thread.as_str(), "{view:#}");
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let last = requests.last().unwrap();
    assert_eq!(
        thread_header(last),
        thread,
        "the resumed app-server continues the thread"
    );
    let input = input_text(last);
    assert!(
        input.contains("Start the work") && input.contains("Carry on"),
        "the resumed turn carries the thread: {input}"
    );
    // The resumed turn is booked on its own usage (the mock's default for the reply).
    let turns = view["turns"].as_array().unwrap();
    assert_eq!(
        turns.last().unwrap()["tokens"],
        drover_tokens(&[Usage::default()]),
        "{view:#}"
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, Some(pid)).await;
}

/// The JSON lines of `codex exec --json` (other lines are skipped).
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
        .collect()
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_directly_runs_a_tool_call_and_resumes_its_thread_with_running_totals() {
    let codex = peers::cli("codex");
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("work")).unwrap();
    let marker = "codex-smoke-4d1e";
    let mock = MockApi::start(
        Protocol::OpenAiResponses,
        [
            Reply::tool_call("exec_command", json!({"cmd": format!("echo {marker}")})).usage(
                Usage {
                    input: 2000,
                    output: 50,
                    cache_read: 500,
                    cache_write: 0,
                    reasoning: 10,
                },
            ),
            Reply::text("Printed it.").usage(Usage {
                input: 2100,
                output: 30,
                cache_read: 0,
                cache_write: 0,
                reasoning: 0,
            }),
            Reply::text("Second turn."),
        ],
    )
    .await;
    let mut env = base_env(&root.path().join("home"));
    env.extend(codex_env(root.path()));
    write_config(&root.path().join("codex-home"), &mock, 0);
    let work = root.path().join("work");
    let work_arg = work.display().to_string();

    let (ok, stdout, stderr) = run_bounded(
        &codex,
        &[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
            "-C",
            &work_arg,
            "Print the marker",
        ],
        &env,
        &work,
        EXEC,
    )
    .await;
    let requests = mock.requests();
    assert!(
        ok,
        "codex exec failed:\n{stdout}\n{stderr}\nrequests:{}",
        crate::mock::describe(&requests)
    );
    let lines = json_lines(&stdout);
    let thread = of_type(&lines, "thread.started")
        .first()
        .and_then(|l| l["thread_id"].as_str())
        .unwrap_or_else(|| panic!("no thread.started: {stdout}"))
        .to_string();
    let completed = of_type(&lines, "item.completed");
    let command = completed
        .iter()
        .find(|l| l["item"]["type"] == "command_execution")
        .unwrap_or_else(|| panic!("no command_execution item: {stdout}"));
    assert_eq!(command["item"]["exit_code"], 0, "{command}");
    assert!(
        command["item"]["aggregated_output"]
            .as_str()
            .unwrap_or("")
            .contains(marker),
        "{command}"
    );
    let message = completed
        .iter()
        .find(|l| l["item"]["type"] == "agent_message")
        .unwrap_or_else(|| panic!("no agent_message item: {stdout}"));
    assert_eq!(message["item"]["text"], "Printed it.");
    let turn = of_type(&lines, "turn.completed");
    assert_eq!(turn.len(), 1, "{stdout}");
    // Usage is summed over the turn's two model requests.
    assert_eq!(turn[0]["usage"]["input_tokens"], 4100, "{}", turn[0]);
    assert_eq!(turn[0]["usage"]["output_tokens"], 80, "{}", turn[0]);
    assert_eq!(turn[0]["usage"]["cached_input_tokens"], 500, "{}", turn[0]);

    let model = mock.model_requests();
    assert_eq!(model.len(), 2, "{}", crate::mock::describe(&requests));
    assert_eq!(model[0].body["stream"], true);
    let results = mock.tool_results(&model[1]);
    assert_eq!(results.len(), 1, "{:#}", model[1].body["input"]);
    assert!(results[0].call_id.starts_with("call_mock_"), "{results:?}");
    assert!(results[0].content.contains(marker), "{results:?}");

    // A follow-up turn on the same thread.
    let (ok, stdout, stderr) = run_bounded(
        &codex,
        &[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
            "-C",
            &work_arg,
            "resume",
            &thread,
            "And again",
        ],
        &env,
        &work,
        EXEC,
    )
    .await;
    assert!(ok, "codex exec resume failed:\n{stdout}\n{stderr}");
    let lines = json_lines(&stdout);
    assert_eq!(
        of_type(&lines, "thread.started")
            .first()
            .and_then(|l| l["thread_id"].as_str()),
        Some(thread.as_str()),
        "{stdout}"
    );
    // A resumed exec reports the thread's running total, not the turn's own usage
    // (the adapter books the difference).
    let turn = of_type(&lines, "turn.completed");
    assert_eq!(turn.len(), 1, "{stdout}");
    assert_eq!(turn[0]["usage"]["input_tokens"], 4100 + 1000, "{}", turn[0]);
    assert_eq!(turn[0]["usage"]["output_tokens"], 80 + 100, "{}", turn[0]);
    let model = mock.model_requests();
    assert_eq!(
        model.len(),
        3,
        "{}",
        crate::mock::describe(&mock.requests())
    );
    let input = model[2].body["input"].to_string();
    assert!(
        input.contains("Printed it.") && input.contains("And again"),
        "the resumed turn carries the thread: {input}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_an_exec_turn_leaves_no_process_behind() {
    // The task's marker is in the exec child's command line (its prompt).
    let marker = format!("drover-codex-stop-{}", std::process::id());
    let rig = Rig::start(vec![
        Reply::text(done("too late")).delay(Duration::from_secs(120)),
    ])
    .await;
    let run = rig
        .dispatch("restricted", &format!("Take your time ({marker})"))
        .await;
    rig.mock.wait_for_model_requests(1, TURN).await;
    assert!(
        !processes_with(&marker).is_empty(),
        "the exec child is not running"
    );
    let out = rig.drover.run(&["stop", &run]).await;
    assert!(out.success, "stop failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "stopped", "{view:#}");
    assert_eq!(view["completion_reason"], "user", "{view:#}");
    let left = processes_with(&marker);
    assert!(
        left.is_empty(),
        "the exec turn outlived its stopped run: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_turn_waits_out_a_rate_limit_then_completes() {
    let rig = Rig::with_retries(
        vec![
            Reply::error(429).retry_after(Duration::from_secs(1)),
            Reply::text(done("answered after the rate limit")),
        ],
        2,
    )
    .await;
    let run = rig.dispatch("restricted", "Say something").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(
        view["last_result"]["summary"], "answered after the rate limit",
        "{view:#}"
    );
    let states = live_states(&rig.drover.events(&run).await);
    let kinds: Vec<&str> = states.iter().filter_map(|s| s["state"].as_str()).collect();
    let waiting = kinds
        .iter()
        .position(|k| *k == "waiting_provider")
        .unwrap_or_else(|| panic!("the run never waited for the provider: {kinds:?}"));
    assert!(
        states[waiting]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("429"),
        "{:#}",
        states[waiting]
    );
    assert!(kinds[waiting..].contains(&"working"), "{kinds:?}");
    rig.complete(&run, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_run_while_its_command_runs_leaves_no_process_behind() {
    // A marker no other process has: the command's own command line.
    let marker = format!("drover-codex-tool-{}", std::process::id());
    let command = format!("sleep 97 && touch slept.txt # {marker}");
    let rig = Rig::start(vec![
        Reply::tool_call("exec_command", json!({"cmd": command})),
        Reply::text(done("never reached")),
    ])
    .await;
    let run = rig.dispatch("ask", "Wait a while").await;
    let pending = rig.pending(&run).await;
    rig.respond(&run, pending["request_id"].as_str().unwrap(), &["allow"])
        .await;
    assert!(
        eventually(TURN, || !processes_with(&marker).is_empty()).await,
        "the allowed command never started"
    );
    let pid = rig.drover.show(&run).await["pid"].as_u64().unwrap() as u32;

    let out = rig.drover.run(&["stop", &run]).await;
    assert!(out.success, "stop failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "stopped", "{view:#}");
    assert!(
        !group_alive(pid),
        "process group {pid} outlived the stopped run"
    );
    // Codex runs the command in a session of its own (codex-linux-sandbox, its own
    // session and group, seen in /proc), which drover's group kill does not reach: Codex
    // ends it (on the interrupt drover sends first, or as it exits), and a killed process
    // takes a moment to be gone.
    eventually(Duration::from_secs(15), || {
        processes_with(&marker).is_empty()
    })
    .await;
    let left = processes_with(&marker);
    for (pid, _) in &left {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid as i32), Signal::SIGKILL);
    }
    let events: Vec<Value> = provider_events(&rig.drover.events(&run).await)
        .into_iter()
        .map(|e| json!([e["type"], e["subtype"], e["text"]]))
        .collect();
    assert!(
        left.is_empty(),
        "the allowed command outlived the stopped run: {:?}; provider events: {events:?}",
        left.iter().map(|(pid, _)| pid).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_idle_run_books_only_the_new_turns_usage() {
    let first = Usage {
        input: 4000,
        output: 200,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };
    let second = Usage {
        input: 700,
        output: 40,
        cache_read: 100,
        cache_write: 0,
        reasoning: 0,
    };
    let mut rig = Rig::start(vec![
        Reply::text(done("first")).usage(first),
        Reply::text(done("second")).usage(second),
    ])
    .await;
    let run = rig.dispatch("ask", "Start the work").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    let pid = view["pid"].as_u64().unwrap() as u32;
    let thread = view["provider_session_id"].as_str().unwrap().to_string();

    rig.drover.stop_serve(Signal::SIGKILL).await;
    assert!(
        eventually(Duration::from_secs(10), || !group_alive(pid)).await,
        "codex's process group {pid} outlived a killed drover"
    );
    rig.drover.serve().await;
    // Idle when drover died: back idle, hibernated in its thread.
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "idle", "{view:#}");
    assert_eq!(
        view["live_state"]["detail"], "idle · hibernated",
        "{view:#}"
    );

    let out = rig.drover.run(&["resume", &run, "Next"]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig
        .drover
        .until(&run, "idle after the resumed turn", TURN, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
        })
        .await;
    assert_eq!(view["last_result"]["summary"], "second", "{view:#}");
    assert_eq!(view["provider_session_id"], thread.as_str(), "{view:#}");
    // Codex repeats the thread's last usage when it resumes: it is not this turn's.
    assert_eq!(
        view["turns"][1]["tokens"],
        drover_tokens(&[second]),
        "{view:#}"
    );
    assert_eq!(view["tokens"], drover_tokens(&[first, second]), "{view:#}");
    let expected = gpt55_cost(&drover_tokens(&[first, second]));
    let cost = view["cost_usd"].as_f64().unwrap();
    assert!(
        (cost - expected).abs() < 1e-9,
        "{cost} vs {expected}: {view:#}"
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, Some(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_turn_whose_server_errors_outlast_the_retries_fails_as_provider_unavailable() {
    let rig = Rig::with((0..6).map(|_| Reply::error(503)).collect(), 1, NO_RESEND).await;
    let run = rig.dispatch("restricted", "Say something").await;
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "failed", "{view:#}");
    assert_eq!(
        view["completion_reason"], "provider_unavailable",
        "{view:#}"
    );
    assert_eq!(view["escalation"]["kind"], "retry", "{view:#}");
    let ends: Vec<Value> = provider_events(&rig.drover.events(&run).await)
        .into_iter()
        .filter(|e| e["type"] == "turn_completed")
        .collect();
    assert_eq!(ends.len(), 1, "{ends:#?}");
    assert_eq!(ends[0]["transient"], true, "{ends:#?}");
    assert_eq!(ends[0]["api_error_status"], 503, "{ends:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_exec_run_resumes_its_codex_thread_after_a_drover_restart() {
    let mut rig = Rig::start(vec![
        Reply::text(done("first exec turn")),
        Reply::text(done("resumed exec turn")),
    ])
    .await;
    let run = rig.dispatch("restricted", "Start the work").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    let thread = view["provider_session_id"].as_str().unwrap().to_string();

    rig.drover.stop_serve(Signal::SIGKILL).await;
    rig.drover.serve().await;
    // Idle when drover died: back idle, hibernated in its thread, nothing started.
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "idle", "{view:#}");
    assert_eq!(
        view["live_state"]["detail"], "idle · hibernated",
        "{view:#}"
    );
    rig.drover.assert_nothing_runs_under_it().await;

    let out = rig.drover.run(&["resume", &run, "Carry", "on"]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig
        .drover
        .until(&run, "idle after the resumed turn", TURN, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
        })
        .await;
    assert_eq!(
        view["last_result"]["summary"], "resumed exec turn",
        "{view:#}"
    );
    assert_eq!(view["provider_session_id"], thread.as_str(), "{view:#}");
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    assert_eq!(
        thread_header(&requests[1]),
        thread,
        "exec resume continues the thread"
    );
    let input = input_text(&requests[1]);
    assert!(
        input.contains("first exec turn") && input.contains("Carry on"),
        "the resumed turn carries the thread: {input}"
    );
    // Not checked: the resumed turn's tokens. codex exec reports the thread's running
    // total and a restarted drover does not know the total before it, so this turn books
    // the whole thread (an overestimate; see exec_protocol).
    rig.complete(&run, None).await;
}

/// The processes under `owner` (its warden aside) whose command line has `needle`.
fn under_owner_with(owner: u32, needle: &str) -> Vec<(u32, String)> {
    descendants_but_the_warden(owner)
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains(needle))
        .collect()
}

/// Hibernate then follow up, in `policy`'s mode: the run's Codex thread goes on. Each
/// reply is held back a moment, so the CLI of each turn is seen running under the owner
/// (the check that nothing runs while hibernated could not pass by seeing nothing).
/// app-server (`ask`): one child per run, whose pid drover shows; a new one resumes the
/// thread (`thread/resume`). exec (`restricted`): no pid at any time, a child per turn,
/// none between turns, and the follow-up's child is `codex exec … resume THREAD`.
async fn hibernate_then_follow_up(policy: &str) {
    let exec = policy != "ask";
    let hold = Duration::from_secs(2);
    let rig = Rig::with(
        vec![
            Reply::text(done("first part done")).delay(hold),
            Reply::text(done("second part done")).delay(hold),
        ],
        0,
        QUICK_IDLE,
    )
    .await;
    let owner = rig.drover.serve_pid();
    let run = rig.dispatch(policy, "Do the first part").await;
    rig.mock.wait_for_model_requests(1, TURN).await;
    let (mode, other) = if exec {
        ("exec", "app-server")
    } else {
        ("app-server", " exec ")
    };
    assert!(
        eventually(TURN, || !under_owner_with(owner, mode).is_empty()).await,
        "no `codex {mode}` runs under drover during the first turn: {:?}",
        descendants_but_the_warden(owner)
    );
    assert!(
        under_owner_with(owner, other).is_empty(),
        "{policy} runs `codex {other}`: {:?}",
        descendants_but_the_warden(owner)
    );
    let first = rig.drover.until_state(&run, "idle", TURN).await;
    let session = first["provider_session_id"].as_str().unwrap().to_string();
    let pid = first["pid"].as_u64().map(|p| p as u32);
    assert_eq!(
        pid.is_none(),
        exec,
        "an idle exec run has no child, an app-server run has one: {first:#}"
    );
    rig.drover.until_hibernated(&run, pid, TURN).await;
    // Asserted in both modes, by the process table (exec has no pid to check).
    rig.drover.assert_nothing_runs_under_it().await;

    rig.drover.follow_up(&run, "Now the second part").await;
    rig.mock.wait_for_model_requests(2, TURN).await;
    if exec {
        // The follow-up's child resumes the thread by its id.
        let resume = format!("resume {session}");
        let children = under_owner_with(owner, "exec");
        assert!(
            children.iter().any(|(_, c)| c.contains(&resume)),
            "the follow-up's codex exec does not resume {session}: {children:?}"
        );
    }
    let view = rig.drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "follow_up", "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "second part done",
        "{view:#}"
    );
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    if let Some(pid) = pid {
        assert_ne!(view["pid"], pid, "a new app-server, `thread/resume`");
    } else {
        assert!(view["pid"].is_null(), "{view:#}");
    }
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    for request in &requests {
        assert_eq!(thread_header(request), session, "the same thread");
    }
    // The model hears the earlier turn: its prompt and its answer, then the follow-up.
    let input = input_text(&requests[1]);
    assert!(input.contains("Do the first part"), "{input}");
    assert!(input.contains("first part done"), "{input}");
    assert!(input.contains("Now the second part"), "{input}");
    rig.complete(&run, view["pid"].as_u64().map(|p| p as u32))
        .await;
    rig.drover.assert_nothing_runs_under_it().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_app_server_run_hibernates_and_a_follow_up_resumes_its_thread() {
    hibernate_then_follow_up("ask").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_exec_run_hibernates_and_a_follow_up_resumes_its_thread() {
    hibernate_then_follow_up("restricted").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_that_outlasts_codexs_retries_is_sent_again_in_the_same_thread_and_done() {
    // No request or stream retry: one 429 fails the turn; drover sends it again.
    let rig = Rig::with(
        vec![Reply::error(429), Reply::text(done("done at last"))],
        0,
        QUICK_IDLE,
    )
    .await;
    let run = rig.dispatch("ask", "Say something").await;
    let view = rig.drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "resend", "{view:#}");
    assert_eq!(view["last_result"]["summary"], "done at last", "{view:#}");
    let held = live_states(&rig.drover.events(&run).await)
        .into_iter()
        .any(|l| l["state"] == "waiting_provider");
    assert!(held, "the turn was held in waiting_provider");
    let requests = rig.mock.model_requests();
    let session = view["provider_session_id"].as_str().unwrap();
    for request in &requests {
        assert_eq!(thread_header(request), session, "the same thread");
    }
    rig.complete(&run, view["pid"].as_u64().map(|p| p as u32))
        .await;
}

/// The model requests the mock got after the first `n`.
fn requests_after(mock: &MockApi, n: usize) -> Vec<crate::mock::RecordedRequest> {
    mock.model_requests().into_iter().skip(n).collect()
}

/// A kill -9 of drover with Codex runs in the app-server mode (`ask`): one hibernated,
/// one waiting on a command approval, one in a turn. The next drover puts the first two
/// back where they were (no app-server started, no turn sent) and only the third is
/// interrupted; each goes on after one command, in its own thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drover_crash_puts_each_app_server_run_back_where_it_was() {
    let command = "echo restored-5c1e > restored.txt";
    let exec = || Reply::tool_call("exec_command", json!({"cmd": command}));
    let limits = format!("{QUICK_IDLE}{SHARED_DIR}");
    let mut rig = Rig::with(vec![], 0, &limits).await;
    rig.mock.push([Reply::text(done("asleep: first part"))]);
    let asleep = rig.dispatch("ask", "Do the first part").await;
    let view = rig.drover.until_state(&asleep, "idle", TURN).await;
    let asleep_thread = view["provider_session_id"].as_str().unwrap().to_string();
    let pid = view["pid"].as_u64().map(|p| p as u32);
    rig.drover.until_hibernated(&asleep, pid, TURN).await;
    rig.mock.push([exec()]);
    let asking = rig.dispatch("ask", "Write restored.txt").await;
    let request = rig.pending(&asking).await;
    let request_id = request["request_id"].as_str().unwrap().to_string();
    rig.mock
        .push([Reply::text(done("too late")).delay(Duration::from_secs(120))]);
    let busy = rig.dispatch("ask", "Start the long work").await;
    rig.mock.wait_for_model_requests(3, TURN).await;
    let busy_thread = rig.drover.show(&busy).await["provider_session_id"]
        .as_str()
        .expect("the thread is known once the turn runs")
        .to_string();
    let pids: Vec<u32> = [
        rig.drover.show(&asking).await["pid"].as_u64().unwrap() as u32,
        rig.drover.show(&busy).await["pid"].as_u64().unwrap() as u32,
    ]
    .to_vec();

    rig.drover.stop_serve(Signal::SIGKILL).await;
    for pid in pids {
        assert!(
            eventually(Duration::from_secs(10), || !group_alive(pid)).await,
            "codex's process group {pid} outlived a killed drover"
        );
    }
    let before = rig.mock.model_requests().len();
    rig.drover.serve().await;

    let view = rig.drover.show(&asleep).await;
    assert_eq!(view["state"], "idle", "{view:#}");
    assert_eq!(
        view["live_state"]["detail"], "idle · hibernated",
        "{view:#}"
    );
    let view = rig.drover.show(&asking).await;
    assert_eq!(view["state"], "awaiting_permission", "{view:#}");
    assert_eq!(
        view["pending"][0]["request_id"],
        request_id.as_str(),
        "{view:#}"
    );
    let view = rig.drover.show(&busy).await;
    assert_eq!(view["state"], "interrupted", "{view:#}");
    assert_eq!(view["needs_you"]["reason"], "interrupted", "{view:#}");
    for run in [&asleep, &asking, &busy] {
        assert!(rig.drover.show(run).await["pid"].is_null(), "{run}");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(rig.mock.model_requests().len(), before, "no turn was sent");

    // One follow-up wakes the hibernated run in its thread.
    rig.mock.push([Reply::text(done("asleep: second part"))]);
    rig.drover.follow_up(&asleep, "Now the second part").await;
    rig.drover.until_idle_after(&asleep, 2, TURN).await;
    let woken = requests_after(&rig.mock, before);
    assert_eq!(thread_header(&woken[0]), asleep_thread);
    assert!(input_text(&woken[0]).contains("asleep: first part"));

    // One answer: the resumed thread is told, asks again, and the answer allows it.
    let before = rig.mock.model_requests().len();
    rig.mock
        .push([exec(), Reply::text(done("asking: wrote it"))]);
    rig.respond(&asking, &request_id, &["allow"]).await;
    let view = rig
        .drover
        .until(&asking, "idle after the allowed command", TURN, |v| {
            v["state"] == "idle" && v["last_result"]["summary"] == "asking: wrote it"
        })
        .await;
    assert_eq!(
        std::fs::read_to_string(rig.drover.work_dir().join("restored.txt")).unwrap(),
        "restored-5c1e\n"
    );
    let whos: Vec<&str> = view["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        whos,
        ["allow", "allow (answered before drover was restarted)"],
        "{view:#}"
    );
    let told = &requests_after(&rig.mock, before)[0];
    assert!(
        input_text(told).contains("the user allowed it"),
        "{}",
        input_text(told)
    );

    // One resume: drover's turn says why, in the same thread.
    let before = rig.mock.model_requests().len();
    rig.mock.push([Reply::text(done("busy: carried on"))]);
    let out = rig.drover.run(&["resume", &busy]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_idle_after(&busy, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "resume", "{view:#}");
    let resumed = &requests_after(&rig.mock, before)[0];
    assert_eq!(thread_header(resumed), busy_thread);
    assert!(
        input_text(resumed).contains("drover was restarted during your last turn; continue it"),
        "{}",
        input_text(resumed)
    );
    rig.complete(&busy, view["pid"].as_u64().map(|p| p as u32))
        .await;
}

/// The same in the exec mode (`restricted`: no approvals to wait on): one hibernated,
/// one whose result asks a question, one in a turn. `resume` with no words does not
/// answer the question for the user; each goes on after one command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drover_crash_puts_each_exec_run_back_where_it_was() {
    let limits = format!("{QUICK_IDLE}{SHARED_DIR}");
    let mut rig = Rig::with(vec![], 0, &limits).await;
    rig.mock.push([Reply::text(done("asleep: first part"))]);
    let asleep = rig.dispatch("restricted", "Do the first part").await;
    rig.drover.until_state(&asleep, "idle", TURN).await;
    rig.drover.until_hibernated(&asleep, None, TURN).await;
    // exec shows no pid: the process table says nothing runs for it.
    rig.drover.assert_nothing_runs_under_it().await;
    rig.mock.push([Reply::text(
        "Two targets match.\n\n## Result\nstatus: needs_input\nsummary: which target\nquestion: staging-eu or staging-us?",
    )]);
    let asking = rig.dispatch("restricted", "Deploy to staging").await;
    rig.drover.until_state(&asking, "idle", TURN).await;
    rig.mock
        .push([Reply::text(done("too late")).delay(Duration::from_secs(120))]);
    // The task's marker is in the exec child's command line (its prompt).
    let marker = format!("drover-codex-restart-{}", std::process::id());
    let busy = rig
        .dispatch("restricted", &format!("Start the long work ({marker})"))
        .await;
    rig.mock.wait_for_model_requests(3, TURN).await;
    // The thread is known once its turn runs (`thread.started` comes before the request).
    let view = rig
        .drover
        .until(&busy, "running in a known thread", TURN, |v| {
            v["state"] == "running" && v["provider_session_id"].is_string()
        })
        .await;
    let busy_thread = view["provider_session_id"].as_str().unwrap().to_string();

    rig.drover.stop_serve(Signal::SIGKILL).await;
    let before = rig.mock.model_requests().len();
    // What the killed drover's exec turn left (the native binary its npm wrapper started,
    // the wrapper itself gone with the owner) is ended by the owner's warden, before any
    // new drover starts.
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&marker)
            .is_empty())
        .await,
        "codex exec outlived the crashed drover: {:?}; the ledger noted {:?}; /proc says {:?}",
        processes_with(&marker),
        ::drover_core::ledger::LedgerReader::open(&rig.drover.drover_home().join("ledger.sqlite3"))
            .and_then(|r| r.noted_processes()),
        processes_with(&marker)
            .iter()
            .map(
                |(pid, _)| std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()
            )
            .collect::<Vec<_>>()
    );
    rig.drover.serve().await;

    let view = rig.drover.show(&asleep).await;
    assert_eq!(view["state"], "idle", "{view:#}");
    assert_eq!(
        view["live_state"]["detail"], "idle · hibernated",
        "{view:#}"
    );
    let view = rig.drover.show(&asking).await;
    assert_eq!(view["state"], "idle", "{view:#}");
    assert_eq!(view["needs_you"]["reason"], "input", "{view:#}");
    let view = rig.drover.show(&busy).await;
    assert_eq!(view["state"], "interrupted", "{view:#}");
    assert_eq!(view["needs_you"]["reason"], "interrupted", "{view:#}");

    // `resume` with no words never answers the question for the user.
    let out = rig.drover.run(&["resume", &asking]).await;
    assert!(!out.success, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("FOLLOW_UP_NEEDED"), "{}", out.stderr);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(rig.mock.model_requests().len(), before, "nothing was sent");

    rig.mock.push([Reply::text(done("asleep: second part"))]);
    rig.drover.follow_up(&asleep, "Now the second part").await;
    rig.drover.until_idle_after(&asleep, 2, TURN).await;

    rig.mock.push([Reply::text(done("deployed to staging-eu"))]);
    rig.drover.follow_up(&asking, "staging-eu").await;
    let view = rig.drover.until_idle_after(&asking, 2, TURN).await;
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    assert!(input_text(&rig.mock.model_requests().pop().unwrap()).contains("staging-eu"));

    let n = rig.mock.model_requests().len();
    rig.mock.push([Reply::text(done("busy: carried on"))]);
    let out = rig.drover.run(&["resume", &busy]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_idle_after(&busy, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "resume", "{view:#}");
    let resumed = &requests_after(&rig.mock, n)[0];
    assert_eq!(
        thread_header(resumed),
        busy_thread,
        "exec resume continues the thread"
    );
    assert!(
        input_text(resumed).contains("drover was restarted during your last turn; continue it"),
        "{}",
        input_text(resumed)
    );
    rig.complete(&busy, None).await;
}

/// One step of a spender: an `echo` command (exec never asks; the app-server asks, and
/// [`allow_echo`]'s rule answers).
fn command_step(i: usize) -> Reply {
    Reply::tool_call("exec_command", json!({"cmd": format!("echo step-{i}")}))
}

/// An approval rule that allows `echo` commands everywhere, so the app-server's steps
/// run without the user (its `untrusted` approvals ask for every command).
async fn allow_echo(drover: &Drover) {
    let rule = drover
        .json(&[
            "rules",
            "add",
            "--scope",
            "everywhere",
            "--kind",
            "command",
            "--pattern",
            "echo *",
            "allow",
        ])
        .await;
    assert_eq!(rule["decision"], "allow", "{rule:#}");
}

/// `dispatch` for the caps tests in `policy`'s mode.
fn capped(policy: &str) -> [&str; 6] {
    ["--provider", "codex", "--model", MODEL, "--policy", policy]
}

/// Each step: input tokens at the catalog's $5 per million for gpt-5.5.
fn codex_step() -> Usage {
    caps::step_usage(5.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_server_run_that_keeps_calling_tools_is_stopped_within_one_step_of_its_budget() {
    let rig = Rig::start(caps::spender(codex_step(), command_step)).await;
    allow_echo(&rig.drover).await;
    caps::run_capped(
        "codex app-server",
        &rig.drover,
        &rig.mock,
        &capped("ask"),
        TURN,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_server_session_hard_cap_reached_by_spending_stops_the_second_run() {
    let script = caps::session_script(codex_step(), command_step, Reply::text(done("spent")));
    let rig = Rig::with(script, 0, caps::SESSION_LIMITS).await;
    allow_echo(&rig.drover).await;
    caps::session_capped(
        "codex app-server",
        &rig.drover,
        &rig.mock,
        &capped("ask"),
        TURN,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_run_that_keeps_calling_tools_is_stopped_within_one_step_of_its_budget() {
    let rig = Rig::start(caps::spender(codex_step(), command_step)).await;
    caps::run_capped(
        "codex exec",
        &rig.drover,
        &rig.mock,
        &capped("restricted"),
        TURN,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_session_hard_cap_reached_by_spending_stops_the_second_run() {
    let script = caps::session_script(codex_step(), command_step, Reply::text(done("spent")));
    let rig = Rig::with(script, 0, caps::SESSION_LIMITS).await;
    caps::session_capped(
        "codex exec",
        &rig.drover,
        &rig.mock,
        &capped("restricted"),
        TURN,
    )
    .await;
}

/// Take-over (docs/ARCHITECTURE.md §"Take-over"): `drover attach` opens Codex's own
/// interface (`codex resume --no-daemon`) on the run's thread in tmux; a prompt typed
/// there is answered by the model, and once the user leaves with `/quit` the run's
/// ledger holds that turn (`interactive`, its tokens and an estimated cost), no Codex
/// daemon is left behind, and a follow-up goes on in the same thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_taken_over_in_codexs_own_interface_is_handed_back_with_the_turn_typed_there() {
    if !crate::tmux::available() {
        panic!("tmux is needed for the take-over test (install it: CI does)");
    }
    let rig = Rig::start(vec![
        Reply::text(done("first part done")),
        Reply::text("Hello from the interface 9d2e"),
        Reply::text(done("second part done")),
    ])
    .await;
    let run = rig.dispatch("ask", "Do the first part").await;
    let first = rig.drover.until_state(&run, "idle", TURN).await;
    let thread = first["provider_session_id"].as_str().unwrap().to_string();
    // What a real user's Codex config already holds: the model notice seen, this folder
    // trusted (docs/PROVIDERS.md §"Interactive take-over").
    let config = rig.drover.root().join("codex-home/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        rig.drover.work_dir().display()
    ));
    std::fs::write(&config, text).unwrap();

    let tmux = crate::tmux::Tmux::attach(&rig.drover, &run, &[]);
    let typed = "say hello from the interface";
    tmux.exchange_and_leave(
        TURN,
        "first part done",
        typed,
        "Hello from the interface 9d2e",
        "/quit",
    )
    .await;
    let view = rig.drover.show(&run).await;
    crate::tmux::assert_one_interactive_turn(
        &view,
        typed,
        "Hello from the interface 9d2e",
        &tmux.screen(),
    );
    assert!(
        processes_with("--managed-daemon").is_empty(),
        "no Codex daemon outlives the interface"
    );

    rig.drover.follow_up(&run, "Do the second part").await;
    let after = rig.drover.until_idle_after(&run, 3, TURN).await;
    assert_eq!(after["turns"][2]["origin"], "follow_up", "{after}");
    assert_eq!(after["provider_session_id"], thread, "{after}");
    let last = rig.mock.requests().pop().unwrap();
    assert_eq!(thread_header(&last), thread);
}

/// Wrap up, then stop, and evidence, with the real CLI (docs/ARCHITECTURE.md
/// §"Wrap up, then stop", §"Evidence"): the run's `npm test` really runs (its script exits 3) and is
/// kept with the exit code Codex reported; `drover stop --soft` while the model is
/// answering lets that turn end, then drover's wrap-up turn starts a new Codex turn and
/// its answer's result block completes the run (`stopped_soft`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_stop_waits_for_the_turn_then_the_wrap_up_gets_the_result_and_tests_are_evidence() {
    let rig = Rig::start(vec![
        Reply::tool_call("exec_command", json!({"cmd": "npm test"})),
        Reply::text("Still working on the fix.").delay(Duration::from_secs(4)),
        Reply::text(done("stopped as asked; npm test still fails")),
    ])
    .await;
    std::fs::write(
        rig.drover.work_dir().join("package.json"),
        r#"{"name": "pager", "private": true, "scripts": {"test": "exit 3"}}"#,
    )
    .unwrap();
    let run = rig.dispatch("ask", "Fix the pager and run the tests").await;
    let pending = rig.pending(&run).await;
    assert!(
        pending["input"]["command"]
            .as_str()
            .unwrap_or("")
            .contains("npm test"),
        "{pending:#}"
    );
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(&run, &request, &["allow"]).await;
    rig.mock.wait_for_model_requests(2, TURN).await;
    let asked = rig.drover.json(&["stop", &run, "--soft"]).await;
    assert_eq!(asked["state"], "running", "{asked:#}");

    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "completed", "{view:#}");
    assert_eq!(view["completion_reason"], "stopped_soft", "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "stopped as asked; npm test still fails",
        "{view:#}"
    );
    let origins: Vec<&str> = view["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["origin"].as_str().unwrap())
        .collect();
    assert_eq!(origins, ["dispatch", "wrap_up"], "{view:#}");
    let requests = rig.mock.wait_for_model_requests(3, TURN).await;
    assert!(
        input_text(&requests[2])
            .contains("drover is ending this run soon: you asked for a soft stop"),
        "the wrap-up reached the model: {}",
        input_text(&requests[2])
    );
    assert_eq!(rig.mock.remaining(), 0);

    let command = &view["turns"][0]["commands"][0];
    assert_eq!(command["test"], "npm test", "{view:#}");
    assert_eq!(command["exit_code"], 3, "Codex's exit code: {view:#}");
    assert_eq!(
        view["evidence"]["line"], "evidence: 1 command · tests ran: npm test (failed)",
        "{view:#}"
    );
    let states: Vec<String> = live_states(&rig.drover.events(&run).await)
        .iter()
        .map(|s| s["state"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(states.contains(&"wrapping_up".to_string()), "{states:?}");
}
