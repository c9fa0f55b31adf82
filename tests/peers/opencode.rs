//! OpenCode (`opencode`, the pinned version) run by drover through its headless
//! interface, against the mock OpenAI chat completions API.
//!
//! Each test owns a `drover serve` in a temporary `DROVER_HOME` whose `config.toml` points
//! `[providers.opencode]` at the pinned CLI, its `env` at an `opencode.json` naming the
//! mock as provider `mock` (model `mock/mock-model`, priced $1 / $2 / $0.10 per million
//! input / output / cache-read tokens), and at throwaway XDG directories and `HOME`, with
//! every OpenCode download and update switched off and npm offline. The catalog gets the
//! same model at the same price. What a user relies on is checked from both ends: what
//! drover shows (`show --json`, the events transcript) and what the model API received.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::drover::{
    Drover, NO_RESEND, QUICK_IDLE, SHARED_DIR, eventually, group_alive, live_states,
    mentioned_under, processes_with, provider_config, provider_events,
};
use crate::mock::{MockApi, Protocol, Reply, Usage};
use crate::{caps, peers};

/// The model every run asks for, as drover names it (`provider/model`).
pub const MODEL: &str = "mock/mock-model";
/// The mock model's price in the OpenCode config and the catalog, $ per million tokens.
const PRICE_INPUT: f64 = 1.0;
const PRICE_OUTPUT: f64 = 2.0;
const PRICE_CACHE_READ: f64 = 0.1;
/// How long a turn against the mock may take (the server starts in about 2 s).
const TURN: Duration = Duration::from_secs(90);

/// A final answer with the `## Result` block drover asks for.
fn done(summary: &str) -> String {
    format!("All set.\n\n## Result\nstatus: done\nsummary: {summary}")
}

/// The environment docs/PROVIDERS.md §"Tests offline" gives OpenCode to run offline, everything under `root`
/// (`oc/…`), with its config at `config_file`.
pub fn opencode_env(root: &Path, config_file: &Path) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for (key, dir) in [
        ("XDG_CONFIG_HOME", "oc/config"),
        ("XDG_DATA_HOME", "oc/data"),
        ("XDG_CACHE_HOME", "oc/cache"),
        ("XDG_STATE_HOME", "oc/state"),
    ] {
        let path = root.join(dir);
        std::fs::create_dir_all(&path).expect("an XDG directory");
        env.push((key.to_string(), path.display().to_string()));
    }
    env.push(("HOME".into(), root.join("home").display().to_string()));
    env.push(("OPENCODE_CONFIG".into(), config_file.display().to_string()));
    // OpenCode installs `@opencode-ai/plugin` into its config directory from the npm
    // registry at start (in the background, whatever the flags below say): npm offline
    // keeps that off the network (the install fails quietly).
    env.push(("npm_config_offline".into(), "true".into()));
    for flag in [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_SHARE",
    ] {
        env.push((flag.into(), "1".into()));
    }
    env
}

/// OpenCode's config: the mock as the only provider, bash and edits asking first.
pub fn opencode_config(mock_url: &str) -> Value {
    json!({
        "model": MODEL, "small_model": MODEL,
        "autoupdate": false, "share": "disabled", "enabled_providers": ["mock"],
        "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible", "name": "Mock",
            "options": {"baseURL": format!("{mock_url}/v1"), "apiKey": "sk-mock"},
            "models": {"mock-model": {
                "name": "Mock", "tool_call": true,
                "limit": {"context": 128000, "output": 8192},
                "cost": {"input": PRICE_INPUT, "output": PRICE_OUTPUT,
                         "cache_read": PRICE_CACHE_READ}}}}},
        "permission": {"bash": "ask", "edit": "ask"}
    })
}

/// The drover config: the opencode provider and the mock model in the catalog.
pub fn drover_config(root: &Path, mock_url: &str) -> String {
    let config_file = root.join("opencode.json");
    std::fs::write(&config_file, opencode_config(mock_url).to_string()).expect("opencode.json");
    let env = opencode_env(root, &config_file);
    let mut config = provider_config("opencode", &peers::cli("opencode"), &env);
    config.push_str(&format!(
        "\n[[catalog.models]]\nprovider = \"opencode\"\nid = \"{MODEL}\"\ntier = \"small\"\n\
         input_per_mtok = {PRICE_INPUT:?}\noutput_per_mtok = {PRICE_OUTPUT:?}\n\
         cache_read_per_mtok = {PRICE_CACHE_READ:?}\ncache_write_per_mtok = 0.0\n"
    ));
    config
}

/// A mock chat completions API and a drover whose `opencode` provider talks to it.
struct Rig {
    mock: MockApi,
    drover: Drover,
}

impl Rig {
    async fn start(script: Vec<Reply>) -> Rig {
        Rig::with_limits(script, "").await
    }

    /// As [`Rig::start`], with `limits` (a `[limits]` table) added to the config.
    async fn with_limits(script: Vec<Reply>, limits: &str) -> Rig {
        let mock = MockApi::start(Protocol::OpenAiChat, script).await;
        let url = mock.url();
        let drover = Drover::start_with(|root| drover_config(root, &url) + limits).await;
        Rig { mock, drover }
    }

    async fn dispatch(&self, task: &str) -> String {
        self.dispatch_with_policy("ask", task).await
    }

    async fn dispatch_with_policy(&self, policy: &str, task: &str) -> String {
        self.drover
            .dispatch(&[
                "--provider",
                "opencode",
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

    /// Ends an idle run as complete and checks its server is gone.
    async fn complete(&self, run: &str, pid: u32) {
        let grace = Duration::from_secs(10);
        self.drover.complete(run, Some(pid), TURN, grace).await
    }

    /// Where OpenCode keeps its data (sessions) for this drover.
    fn opencode_data(&self) -> PathBuf {
        self.drover.root().join("oc/data")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_tool_call_allowed_by_the_user_runs_and_its_result_goes_back_to_the_model() {
    let command = "echo allowed-7f3a > allowed.txt && cat allowed.txt";
    let rig = Rig::start(vec![
        Reply::tool_call(
            "bash",
            json!({"command": command, "description": "Write allowed.txt"}),
        ),
        Reply::text(done("wrote allowed.txt")),
    ])
    .await;
    let run = rig.dispatch("Write allowed.txt").await;

    let pending = rig.pending(&run).await;
    assert_eq!(pending["kind"], "permission", "{pending:#}");
    assert_eq!(pending["tool"], "bash", "{pending:#}");
    assert!(
        pending["input"].to_string().contains("allowed-7f3a"),
        "the request shows the command: {pending:#}"
    );
    assert!(
        !rig.drover.work_dir().join("allowed.txt").exists(),
        "the tool ran before it was allowed"
    );
    let request = pending["request_id"].as_str().unwrap().to_string();
    assert!(request.starts_with("per"), "{pending:#}");
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

    // The tool's start and end are in the transcript, under the model's call id.
    let events = provider_events(&rig.drover.events(&run).await);
    let ready = events
        .iter()
        .find(|e| e["type"] == "ready")
        .unwrap_or_else(|| panic!("no ready: {events:#?}"));
    assert_eq!(
        ready["version"],
        peers::pinned_version("opencode-ai").as_str(),
        "{ready:#}"
    );
    // Everything the pinned server said was understood.
    let skipped: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "notice")
        .filter(|e| e["text"].as_str().is_some_and(|t| t.contains("skipped")))
        .collect();
    assert!(skipped.is_empty(), "{skipped:#?}");
    let started = events
        .iter()
        .find(|e| e["type"] == "tool_started")
        .unwrap_or_else(|| panic!("no tool_started: {events:#?}"));
    assert_eq!(started["name"], "bash", "{started:#}");
    assert_eq!(started["tool_use_id"], results[0].call_id.as_str());
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_finished" && e["is_error"] == false),
        "{events:#?}"
    );

    // The run knows OpenCode's session, and it is the one OpenCode stored.
    let session = view["provider_session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no provider session: {view:#}"));
    assert!(session.starts_with("ses_"), "{view:#}");
    assert!(
        mentioned_under(&rig.opencode_data(), session),
        "OpenCode's storage does not know session {session}"
    );
    let pid = view["pid"].as_u64().expect("an idle run keeps its server") as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_tool_call_denied_by_the_user_does_not_run_and_the_model_hears_why() {
    let command = "echo denied-51c2 > denied.txt";
    let rig = Rig::start(vec![
        Reply::tool_call(
            "bash",
            json!({"command": command, "description": "Write denied.txt"}),
        ),
        Reply::text(done("the user said no, so nothing was written")),
    ])
    .await;
    let run = rig.dispatch("Write denied.txt").await;
    let pending = rig.pending(&run).await;
    assert!(
        pending["input"].to_string().contains("denied-51c2"),
        "{pending:#}"
    );
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(
        &run,
        &request,
        &["deny", "--message", "not in this directory"],
    )
    .await;

    // The turn goes on: the model hears the reason and answers.
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    assert!(
        !rig.drover.work_dir().join("denied.txt").exists(),
        "a denied tool ran"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let results = rig.mock.tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].content.contains("not in this directory"),
        "the model hears the user's reason: {results:?}"
    );
    let events = provider_events(&rig.drover.events(&run).await);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_finished" && e["is_error"] == true),
        "the denied tool ends as an error: {events:#?}"
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_follow_up_turn_continues_the_same_session() {
    let rig = Rig::start(vec![
        Reply::text(done("first part done")),
        Reply::text(done("second part done")),
    ])
    .await;
    let run = rig.dispatch("Do the first part").await;
    let first = rig.drover.until_state(&run, "idle", TURN).await;
    let session = first["provider_session_id"]
        .as_str()
        .expect("the run knows its provider session")
        .to_string();
    assert!(session.starts_with("ses_"), "{first:#}");
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
    assert_eq!(view["pid"], pid, "the same server serves the follow-up");

    // The follow-up carries the conversation: the first answer, then the new prompt.
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let messages = requests[1].body["messages"].as_array().unwrap();
    let text = |m: &Value| crate::mock::content_text(&m["content"]);
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && text(m).contains("first part done")),
        "{messages:#?}"
    );
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(text(last).contains("Now the second part"), "{last:#}");

    // The ledger keeps the session: a restarted drover still shows it.
    rig.complete(&run, pid).await;
    let mut rig = rig;
    rig.drover
        .stop_serve(nix::sys::signal::Signal::SIGTERM)
        .await;
    rig.drover.serve().await;
    let view = rig.drover.show(&run).await;
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_cost_is_booked_as_opencode_reported_it() {
    let tool = Usage {
        input: 1200,
        output: 80,
        cache_read: 200,
        cache_write: 0,
        reasoning: 0,
    };
    let text = Usage {
        input: 1500,
        output: 120,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };
    let rig = Rig::start(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "touch usage.txt", "description": "Touch a file"}),
        )
        .usage(tool),
        Reply::text(done("counted")).usage(text),
    ])
    .await;
    let run = rig.dispatch("Count tokens").await;
    let pending = rig.pending(&run).await;
    rig.respond(&run, pending["request_id"].as_str().unwrap(), &["allow"])
        .await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;

    // What the mock's usage costs at the configured price. The mock speaks OpenAI: its
    // prompt tokens include the cached ones, which OpenCode prices at the cache rate.
    let priced = |u: &Usage| {
        ((u.input - u.cache_read) as f64 * PRICE_INPUT
            + u.output as f64 * PRICE_OUTPUT
            + u.cache_read as f64 * PRICE_CACHE_READ)
            / 1e6
    };
    let expected = priced(&tool) + priced(&text);
    let cost = view["cost_usd"].as_f64().expect("a booked cost");
    assert!(
        (cost - expected).abs() < 1e-9,
        "drover booked {cost}, the usage at the configured price is {expected}: {view:#}"
    );
    assert_eq!(view["cost_basis"], "reported", "{view:#}");
    assert!(
        (view["turns"][0]["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{view:#}"
    );
    // Tokens in drover's disjoint classes: input without the cached ones.
    assert_eq!(view["tokens"]["input"], 2500, "{view:#}");
    assert_eq!(view["tokens"]["cache_read"], 200, "{view:#}");
    assert_eq!(view["tokens"]["output"], 200, "{view:#}");

    // As OpenCode reported it: per message, summed into the turn's model usage.
    let events = provider_events(&rig.drover.events(&run).await);
    let completed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "turn_completed")
        .collect();
    assert_eq!(completed.len(), 1, "{events:#?}");
    let usage = completed[0]["model_usage"].as_array().unwrap();
    assert_eq!(usage.len(), 1, "{usage:#?}");
    assert_eq!(usage[0]["model"], MODEL, "{usage:#?}");
    assert!(
        (usage[0]["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{usage:#?}"
    );
    // The streamed usage adds up to the turn's tokens.
    let streamed: u64 = events
        .iter()
        .filter(|e| e["type"] == "usage")
        .filter_map(|e| e["tokens"]["input"].as_u64())
        .sum();
    assert_eq!(streamed, 2500, "{events:#?}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_rate_limit_holds_the_run_in_waiting_provider_until_the_api_answers_again() {
    let rig = Rig::start(vec![
        Reply::error(429).retry_after(Duration::from_secs(2)),
        Reply::text(done("answered after the rate limit")),
    ])
    .await;
    let run = rig.dispatch("Say something").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(
        view["last_result"]["summary"], "answered after the rate limit",
        "{view:#}"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    assert_eq!(requests.len(), 2, "{}", crate::mock::describe(&requests));

    let states = live_states(&rig.drover.events(&run).await);
    let kinds: Vec<&str> = states.iter().filter_map(|s| s["state"].as_str()).collect();
    let waiting = kinds
        .iter()
        .position(|k| *k == "waiting_provider")
        .unwrap_or_else(|| panic!("the run never waited for the provider: {kinds:?}"));
    // OpenCode's `next` (now + the retry-after-ms hint of 2 s) is the bound.
    let held = &states[waiting];
    let hint = held["bound"].as_i64().unwrap() - held["at"].as_i64().unwrap();
    assert!(
        (1_000..=2_500).contains(&hint),
        "the wait is bounded by the retry hint: {held:#}"
    );
    assert!(
        !held["detail"].as_str().unwrap_or("").is_empty(),
        "{held:#}"
    );
    assert!(
        kinds[waiting..].contains(&"working"),
        "the run went back to work after the rate limit: {kinds:?}"
    );
    assert_eq!(view["live_state"]["state"], "working", "{view:#}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_server_error_that_outlasts_the_retries_fails_the_run_as_unavailable() {
    // OpenCode 1.18.33 retries a retryable error 5 times (6 requests), waiting what the
    // retry-after-ms header says.
    let rig = Rig::with_limits(
        (0..6)
            .map(|_| Reply::error(500).retry_after(Duration::from_millis(200)))
            .collect(),
        NO_RESEND,
    )
    .await;
    let run = rig.dispatch("Say something").await;
    let running = rig
        .drover
        .until(&run, "running with a server", TURN, |v| v["pid"].is_u64())
        .await;
    let pid = running["pid"].as_u64().unwrap() as u32;
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "failed", "{view:#}");
    // Transient: a retry on the same model is offered.
    assert_eq!(
        view["completion_reason"], "provider_unavailable",
        "{view:#}"
    );
    assert_eq!(view["escalation"]["kind"], "retry", "{view:#}");
    let notes: Vec<&str> = view["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["text"].as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("HTTP 500")),
        "the run says the API failed with 500: {notes:?}"
    );
    let requests = rig.mock.model_requests();
    assert_eq!(requests.len(), 6, "{}", crate::mock::describe(&requests));
    let events = provider_events(&rig.drover.events(&run).await);
    let end = events
        .iter()
        .find(|e| e["type"] == "turn_completed")
        .unwrap_or_else(|| panic!("no turn_completed: {events:#?}"));
    assert_eq!(end["is_error"], true, "{end:#}");
    assert_eq!(end["transient"], true, "{end:#}");
    assert_eq!(end["api_error_status"], 500, "{end:#}");
    assert!(
        eventually(Duration::from_secs(10), || !group_alive(pid)).await,
        "the server's process group {pid} outlived its failed run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_stopping_a_run_while_the_model_answers_leaves_no_process_behind() {
    let rig = Rig::start(vec![
        Reply::text(done("too late")).delay(Duration::from_secs(120)),
    ])
    .await;
    let run = rig.dispatch("Take your time").await;
    rig.mock.wait_for_model_requests(1, TURN).await;
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "running", "{view:#}");
    let pid = view["pid"]
        .as_u64()
        .expect("a running run shows its server's pid") as u32;
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
async fn opencode_stopping_a_run_while_its_tool_runs_leaves_no_process_behind() {
    // A marker no other process has: the tool's own command line.
    let marker = format!("drover-oc-stop-{}", std::process::id());
    let command = format!("sleep 97 && touch slept.txt # {marker}");
    let rig = Rig::start(vec![
        Reply::tool_call("bash", json!({"command": command, "description": "Wait"})),
        Reply::text(done("never reached")),
    ])
    .await;
    let run = rig.dispatch("Wait a while").await;
    let pending = rig.pending(&run).await;
    rig.respond(&run, pending["request_id"].as_str().unwrap(), &["allow"])
        .await;
    assert!(
        eventually(TURN, || !processes_with(&marker).is_empty()).await,
        "the allowed tool never started"
    );
    let view = rig.drover.show(&run).await;
    let pid = view["pid"].as_u64().unwrap() as u32;

    let out = rig.drover.run(&["stop", &run]).await;
    assert!(out.success, "stop failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "stopped", "{view:#}");
    assert!(
        !group_alive(pid),
        "process group {pid} outlived the stopped run"
    );
    let left = processes_with(&marker);
    for (pid, _) in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        left.is_empty(),
        "the allowed tool outlived the stopped run: {left:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_resume_after_a_drover_crash_continues_the_same_session_on_the_same_run() {
    let mut rig = Rig::start(vec![Reply::text(done("first part written"))]).await;
    let run = rig.dispatch("Write the first part").await;
    let idle = rig.drover.until_state(&run, "idle", TURN).await;
    let pid = idle["pid"].as_u64().unwrap() as u32;
    let session = idle["provider_session_id"]
        .as_str()
        .expect("the run knows its session")
        .to_string();

    rig.drover
        .stop_serve(nix::sys::signal::Signal::SIGKILL)
        .await;
    assert!(
        eventually(Duration::from_secs(10), || !group_alive(pid)).await,
        "the server's process group {pid} outlived a killed drover"
    );
    rig.drover.serve().await;
    // Idle when drover died: back idle, hibernated in its session.
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "idle", "{view:#}");
    assert_eq!(
        view["live_state"]["detail"], "idle · hibernated",
        "{view:#}"
    );

    // `drover resume` with words starts a new server on the same OpenCode data, which
    // finds the session: the model hears the first turn again, and the new turn is on the
    // same run.
    rig.mock
        .push([Reply::text(done("picked up where it stopped"))]);
    let out = rig
        .drover
        .run(&["resume", &run, "Now", "the", "second", "part"])
        .await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig
        .drover
        .until(&run, "the resumed turn to end", TURN, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
        })
        .await;
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    let turns = view["turns"].as_array().expect("turns");
    assert_eq!(turns[1]["origin"], "resume", "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "picked up where it stopped",
        "{view:#}"
    );
    let new_pid = view["pid"].as_u64().expect("a resumed server") as u32;
    assert_ne!(new_pid, pid, "a new server serves the resumed run");
    let requests = rig.mock.model_requests();
    assert_eq!(requests.len(), 2, "{}", crate::mock::describe(&requests));
    let history = requests[1].body["messages"].to_string();
    assert!(
        history.contains("Write the first part") && history.contains("first part written"),
        "the resumed session holds the first turn: {history}"
    );
    assert!(
        history.contains("Now the second part"),
        "the resumed turn's prompt: {history}"
    );
    rig.complete(&run, new_pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_resume_of_a_session_opencode_does_not_have_fails_the_launch() {
    let mut rig = Rig::start(vec![Reply::text(done("first part written"))]).await;
    let run = rig.dispatch("Write the first part").await;
    let idle = rig.drover.until_state(&run, "idle", TURN).await;
    let pid = idle["pid"].as_u64().unwrap() as u32;
    rig.drover
        .stop_serve(nix::sys::signal::Signal::SIGKILL)
        .await;
    assert!(
        eventually(Duration::from_secs(10), || !group_alive(pid)).await,
        "the server's process group {pid} outlived a killed drover"
    );
    // OpenCode's storage is lost meanwhile.
    std::fs::remove_dir_all(rig.opencode_data()).expect("remove OpenCode's data");
    std::fs::create_dir_all(rig.opencode_data()).expect("an empty data directory");
    rig.drover.serve().await;

    let out = rig.drover.run(&["resume", &run, "Go on"]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_ended(&run, TURN).await;
    assert_eq!(view["state"], "failed", "{view:#}");
    assert_eq!(view["completion_reason"], "launch_error", "{view:#}");
    let transcript = rig.drover.run(&["transcript", &run]).await.stdout;
    assert!(
        transcript.contains("cannot resume OpenCode session"),
        "the run says why: {transcript}"
    );
    assert_eq!(rig.mock.model_requests().len(), 1, "no turn was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_allow_always_lets_the_same_kind_of_command_run_again_without_asking() {
    let rig = Rig::start(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "echo one > one.txt", "description": "First"}),
        ),
        Reply::tool_call(
            "bash",
            json!({"command": "echo two > two.txt", "description": "Second"}),
        ),
        Reply::text(done("wrote both")),
    ])
    .await;
    let run = rig.dispatch("Write two files").await;
    let pending = rig.pending(&run).await;
    rig.respond(&run, pending["request_id"].as_str().unwrap(), &["always"])
        .await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["last_result"]["summary"], "wrote both", "{view:#}");
    let work = rig.drover.work_dir();
    assert!(work.join("one.txt").exists() && work.join("two.txt").exists());
    // One request was shown; the second command (same `echo *` rule) did not ask.
    let asked = rig
        .drover
        .events(&run)
        .await
        .iter()
        .filter(|e| e["kind"] == "permission_requested")
        .count();
    assert_eq!(asked, 1, "only the first command asked");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_policy_auto_runs_commands_without_asking() {
    let rig = Rig::start(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "echo auto-9d1e > auto.txt", "description": "Write"}),
        ),
        Reply::text(done("wrote auto.txt")),
    ])
    .await;
    let run = rig.dispatch_with_policy("auto", "Write auto.txt").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["last_result"]["summary"], "wrote auto.txt", "{view:#}");
    assert_eq!(
        std::fs::read_to_string(rig.drover.work_dir().join("auto.txt")).unwrap(),
        "auto-9d1e\n"
    );
    let events = rig.drover.events(&run).await;
    assert!(
        !events.iter().any(|e| e["kind"] == "permission_requested"),
        "nothing was shown to the user"
    );
    // OpenCode itself did not ask (the policy reached it as its permission rules).
    let asked: Vec<Value> = provider_events(&events)
        .into_iter()
        .filter(|e| e["type"] == "permission_requested")
        .collect();
    assert!(asked.is_empty(), "OpenCode asked: {asked:#?}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_policy_restricted_denies_commands_inside_opencode() {
    let rig = Rig::start(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "echo restricted-4b7a > restricted.txt", "description": "Write"}),
        ),
        Reply::text(done("could not write")),
    ])
    .await;
    let run = rig
        .dispatch_with_policy("restricted", "Write restricted.txt")
        .await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert!(
        !rig.drover.work_dir().join("restricted.txt").exists(),
        "a command ran under the restricted policy"
    );
    let events = rig.drover.events(&run).await;
    assert!(
        !events.iter().any(|e| e["kind"] == "permission_requested"),
        "nothing was shown to the user"
    );
    // OpenCode itself did not ask (the policy reached it as its permission rules).
    let asked: Vec<Value> = provider_events(&events)
        .into_iter()
        .filter(|e| e["type"] == "permission_requested")
        .collect();
    assert!(asked.is_empty(), "OpenCode asked: {asked:#?}");
    // The model heard the tool was not allowed, and the turn went on.
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let results = rig.mock.tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        !results[0].content.contains("restricted-4b7a\n"),
        "{results:?}"
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_question_from_the_model_is_answered_through_respond() {
    let question = "Which colour should the button be?";
    let rig = Rig::start(vec![
        Reply::tool_call(
            "question",
            json!({"questions": [{
                "question": question, "header": "Colour",
                "options": [{"label": "Blue", "description": "calm"},
                            {"label": "Red", "description": "loud"}]}]}),
        ),
        Reply::text(done("the button is blue")),
    ])
    .await;
    let run = rig.dispatch("Style the button").await;
    let pending = rig.pending(&run).await;
    assert_eq!(pending["kind"], "question", "{pending:#}");
    assert_eq!(pending["tool"], "question", "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    let answer = format!("{question}=Blue");
    rig.respond(&run, &request, &["--answer", &answer]).await;

    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(
        view["last_result"]["summary"], "the button is blue",
        "{view:#}"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let results = rig.mock.tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].content.contains("Blue"),
        "the model hears the user's answer to its question: {results:?}"
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_policy_auto_still_keeps_a_workspace_run_inside_its_directory() {
    let rig = Rig::start(Vec::new()).await;
    let outside = rig.drover.root().join("outside.txt");
    let inside = rig.drover.work_dir().join("inside.txt");
    rig.mock.push([
        Reply::tool_call(
            "write",
            json!({"filePath": outside.display().to_string(), "content": "escaped"}),
        ),
        Reply::tool_call(
            "write",
            json!({"filePath": inside.display().to_string(), "content": "stayed"}),
        ),
        Reply::text(done("wrote what was allowed")),
    ]);
    let run = rig.dispatch_with_policy("auto", "Write two files").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert!(
        !outside.exists(),
        "a workspace run wrote outside its directory"
    );
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "stayed");
    let events = rig.drover.events(&run).await;
    let asked: Vec<Value> = provider_events(&events)
        .into_iter()
        .filter(|e| e["type"] == "permission_requested")
        .collect();
    assert!(asked.is_empty(), "OpenCode asked: {asked:#?}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_an_answer_without_a_result_block_gets_one_retry_turn_at_once() {
    // The retry turn is sent the moment the first ends: the tail of the first turn's
    // events must not end it early.
    let rig = Rig::start(vec![
        Reply::text("Done, no block."),
        Reply::text(done("the block, as asked")),
    ])
    .await;
    let run = rig.dispatch("Say something").await;
    let view = rig
        .drover
        .until(&run, "idle after the retry turn", TURN, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
        })
        .await;
    assert_eq!(view["turns"][1]["origin"], "result_retry", "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "the block, as asked",
        "{view:#}"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    assert_eq!(requests.len(), 2, "{}", crate::mock::describe(&requests));
    let events = provider_events(&rig.drover.events(&run).await);
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "turn_completed")
        .collect();
    assert_eq!(ends.len(), 2, "{ends:#?}");
    assert_eq!(ends[0]["text"], "Done, no block.", "{ends:#?}");
    // Each turn books its own message: neither counts the other's tokens.
    assert_eq!(ends[0]["tokens"]["output"], 100, "{ends:#?}");
    assert_eq!(ends[1]["tokens"]["output"], 100, "{ends:#?}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_an_idle_run_hibernates_and_a_follow_up_wakes_it_in_the_same_session() {
    let rig = Rig::with_limits(
        vec![
            Reply::text(done("first part done")),
            Reply::text(done("second part done")),
        ],
        QUICK_IDLE,
    )
    .await;
    let run = rig.dispatch("Do the first part").await;
    let first = rig.drover.until_state(&run, "idle", TURN).await;
    let session = first["provider_session_id"].as_str().unwrap().to_string();
    let pid = first["pid"].as_u64().unwrap() as u32;
    rig.drover.until_hibernated(&run, Some(pid), TURN).await;
    rig.drover.assert_nothing_runs_under_it().await;

    rig.drover.follow_up(&run, "Now the second part").await;
    let view = rig.drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "follow_up", "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "second part done",
        "{view:#}"
    );
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    let woken = view["pid"].as_u64().expect("a woken server") as u32;
    assert_ne!(woken, pid);
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let messages = requests[1].body["messages"].as_array().unwrap();
    let text = |m: &Value| crate::mock::content_text(&m["content"]);
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && text(m).contains("first part done")),
        "the session's history: {messages:#?}"
    );
    assert!(text(messages.last().unwrap()).contains("Now the second part"));
    rig.complete(&run, woken).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_server_error_that_outlasts_its_retries_is_sent_again_and_done() {
    // OpenCode retries 5 times (6 requests); drover then sends the turn again.
    let mut script: Vec<Reply> = (0..6)
        .map(|_| Reply::error(500).retry_after(Duration::from_millis(100)))
        .collect();
    script.push(Reply::text(done("done at last")));
    let rig = Rig::with_limits(script, QUICK_IDLE).await;
    let run = rig.dispatch("Say something").await;
    let view = rig.drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "resend", "{view:#}");
    assert_eq!(view["last_result"]["summary"], "done at last", "{view:#}");
    let held = live_states(&rig.drover.events(&run).await)
        .into_iter()
        .any(|l| l["state"] == "waiting_provider");
    assert!(held, "the turn was held in waiting_provider");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

/// A kill -9 of drover with one OpenCode run hibernated, one waiting on a permission and
/// one in a turn: the next drover puts the first two back where they were (no server
/// started, no turn sent) and only the third is interrupted; each goes on after one
/// command, in its own session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_drover_crash_puts_each_run_back_where_it_was() {
    let command = "echo restored-5c1e > restored.txt";
    let bash = || {
        Reply::tool_call(
            "bash",
            json!({"command": command, "description": "Write restored.txt"}),
        )
    };
    let limits = format!("{QUICK_IDLE}{SHARED_DIR}");
    let mut rig = Rig::with_limits(vec![], &limits).await;
    rig.mock.push([Reply::text(done("asleep: first part"))]);
    let asleep = rig.dispatch("Do the first part").await;
    let view = rig.drover.until_state(&asleep, "idle", TURN).await;
    let asleep_session = view["provider_session_id"].as_str().unwrap().to_string();
    let pid = view["pid"].as_u64().map(|p| p as u32);
    rig.drover.until_hibernated(&asleep, pid, TURN).await;
    rig.mock.push([bash()]);
    let asking = rig.dispatch("Write restored.txt").await;
    let request = rig.pending(&asking).await;
    let request_id = request["request_id"].as_str().unwrap().to_string();
    rig.mock
        .push([Reply::text(done("too late")).delay(Duration::from_secs(120))]);
    let busy = rig.dispatch("Start the long work").await;
    rig.mock.wait_for_model_requests(3, TURN).await;
    let busy_session = rig.drover.show(&busy).await["provider_session_id"]
        .as_str()
        .expect("the run knows its session")
        .to_string();
    let pids = [
        rig.drover.show(&asking).await["pid"].as_u64().unwrap() as u32,
        rig.drover.show(&busy).await["pid"].as_u64().unwrap() as u32,
    ];

    rig.drover
        .stop_serve(nix::sys::signal::Signal::SIGKILL)
        .await;
    for pid in pids {
        assert!(
            eventually(Duration::from_secs(10), || !group_alive(pid)).await,
            "the server's process group {pid} outlived a killed drover"
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

    // One follow-up wakes the hibernated run in its session.
    rig.mock.push([Reply::text(done("asleep: second part"))]);
    rig.drover.follow_up(&asleep, "Now the second part").await;
    let view = rig.drover.until_idle_after(&asleep, 2, TURN).await;
    assert_eq!(view["provider_session_id"], asleep_session.as_str());
    let last = rig.mock.model_requests().pop().unwrap();
    assert!(
        last.body["messages"]
            .to_string()
            .contains("asleep: first part")
    );

    // One answer: the resumed session is told, asks again, and the answer allows it.
    rig.mock
        .push([bash(), Reply::text(done("asking: wrote it"))]);
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
    let decisions: Vec<&str> = view["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        ["allow", "allow (answered before drover was restarted)"],
        "{view:#}"
    );
    assert!(
        rig.mock.model_requests().iter().any(|r| r.body["messages"]
            .to_string()
            .contains("the user allowed it")),
        "the answer reached the model"
    );

    // One resume: drover's turn says why, in the same session.
    rig.mock.push([Reply::text(done("busy: carried on"))]);
    let out = rig.drover.run(&["resume", &busy]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_idle_after(&busy, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "resume", "{view:#}");
    assert_eq!(view["provider_session_id"], busy_session.as_str());
    let last = rig.mock.model_requests().pop().unwrap();
    assert!(
        last.body["messages"]
            .to_string()
            .contains("drover was restarted during your last turn; continue it"),
        "{}",
        last.body["messages"]
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&busy, pid).await;
}

/// One step of a spender: a bash call the `auto` policy allows.
fn bash_step(i: usize) -> Reply {
    Reply::tool_call(
        "bash",
        json!({"command": format!("echo step-{i}"), "description": "Count a step"}),
    )
}

/// `dispatch` for the caps tests: the `auto` policy, so every step runs unasked.
const CAPPED: [&str; 6] = [
    "--provider",
    "opencode",
    "--model",
    MODEL,
    "--policy",
    "auto",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_a_run_that_keeps_calling_tools_is_stopped_within_one_step_of_its_budget() {
    // Each step: input tokens at the mock model's $1 per million (catalog and OpenCode).
    let rig = Rig::start(caps::spender(caps::step_usage(PRICE_INPUT), bash_step)).await;
    caps::run_capped("opencode", &rig.drover, &rig.mock, &CAPPED, TURN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_the_session_hard_cap_reached_by_spending_stops_the_second_run() {
    let step = caps::step_usage(PRICE_INPUT);
    let script = caps::session_script(step, bash_step, Reply::text(done("spent a little")));
    let rig = Rig::with_limits(script, caps::SESSION_LIMITS).await;
    caps::session_capped("opencode", &rig.drover, &rig.mock, &CAPPED, TURN).await;
}

/// Take-over (docs/ARCHITECTURE.md §"Take-over"): `drover attach` opens OpenCode's own
/// interface (its TUI, `opencode --session=ID`) on the run's session in tmux, on the same
/// data as the run's server; a prompt typed there is answered by the model, and once the
/// user leaves with `/exit` the run's ledger holds that turn (`interactive`, read with
/// `opencode export`: its tokens and the dollars OpenCode recorded), and a follow-up goes
/// on in the same session, the turn typed in the interface in its history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_taken_over_in_opencodes_own_interface_is_handed_back_with_the_turn_typed_there() {
    if !crate::tmux::available() {
        panic!("tmux is needed for the take-over test (install it: CI does)");
    }
    let rig = Rig::start(vec![
        Reply::text(done("first part done")),
        Reply::text("Hello from the interface 7e51"),
        Reply::text(done("second part done")),
    ])
    .await;
    let run = rig.dispatch("Do the first part").await;
    let first = rig.drover.until_state(&run, "idle", TURN).await;
    let session = first["provider_session_id"].as_str().unwrap().to_string();

    let tmux = crate::tmux::Tmux::attach(&rig.drover, &run, &[]);
    let typed = "say hello from the interface";
    tmux.exchange_and_leave(
        TURN,
        "first part done",
        typed,
        "Hello from the interface 7e51",
        "/exit",
    )
    .await;
    let view = rig.drover.show(&run).await;
    crate::tmux::assert_one_interactive_turn(
        &view,
        typed,
        "Hello from the interface 7e51",
        &tmux.screen(),
    );
    // The turn's cost is its tokens' at the mock model's price (OpenCode records dollars,
    // at the same price as the catalog's).
    let turn = &view["turns"][1];
    let tokens = &turn["tokens"];
    let priced = (tokens["input"].as_f64().unwrap() * PRICE_INPUT
        + tokens["output"].as_f64().unwrap() * PRICE_OUTPUT
        + tokens["cache_read"].as_f64().unwrap() * PRICE_CACHE_READ)
        / 1e6;
    assert!(
        (turn["cost_usd"].as_f64().unwrap() - priced).abs() < 1e-9,
        "{view}"
    );

    rig.drover.follow_up(&run, "Do the second part").await;
    let after = rig.drover.until_idle_after(&run, 3, TURN).await;
    assert_eq!(after["turns"][2]["origin"], "follow_up", "{after}");
    assert_eq!(after["provider_session_id"], session, "{after}");
    // The follow-up's model request carries the session's history, the turn typed in the
    // interface in it: one session, not a fork.
    let last = rig.mock.model_requests().pop().unwrap();
    let history = last.body.to_string();
    assert!(
        history.contains(typed) && history.contains("Hello from the interface 7e51"),
        "{history}"
    );
}
