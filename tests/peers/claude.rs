//! Claude Code (`claude`, the pinned version) run by drover through its headless
//! interface, against the mock Anthropic Messages API.
//!
//! Each test owns a `drover serve` in a temporary `DROVER_HOME` whose `config.toml` points
//! `[providers.claude-code]` at the pinned CLI and its `env` at the mock (base URL, a fake
//! key, no telemetry or other traffic, a throwaway `CLAUDE_CONFIG_DIR` and `HOME`). What a
//! user relies on is checked from both ends: what drover shows (`show --json`, the
//! events transcript) and what the model API actually received.

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::drover::{
    Drover, NO_RESEND, QUICK_IDLE, SHARED_DIR, eventually, group_alive, live_states,
    mentioned_under, processes_with, provider_config, provider_events,
};
use crate::mock::{MockApi, Protocol, RecordedRequest, Reply, Usage};
use crate::{caps, peers};

/// The model every run asks for.
const MODEL: &str = "claude-sonnet-4-5";
/// How long a turn against the mock may take (the CLI starts in about a second).
const TURN: Duration = Duration::from_secs(60);

/// A final answer with the `## Result` block drover asks for.
fn done(summary: &str) -> String {
    format!("All set.\n\n## Result\nstatus: done\nsummary: {summary}")
}

/// A mock Anthropic API and a drover whose `claude-code` provider talks to it.
struct Rig {
    mock: MockApi,
    drover: Drover,
}

impl Rig {
    async fn start(script: Vec<Reply>) -> Rig {
        Rig::with_env(script, &[]).await
    }

    /// `extra_env` is added to the provider's `env` in the config.
    async fn with_env(script: Vec<Reply>, extra_env: &[(&str, &str)]) -> Rig {
        Rig::with(script, extra_env, "").await
    }

    /// As [`Rig::with_env`], with `limits` (a `[limits]` table) added to the config.
    async fn with(script: Vec<Reply>, extra_env: &[(&str, &str)], limits: &str) -> Rig {
        let claude = peers::cli("claude");
        let mock = MockApi::start(Protocol::AnthropicMessages, script).await;
        let drover = Drover::start_with(|root| {
            let mut env = peers::claude_env(root, &mock.url());
            env.extend(
                extra_env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string())),
            );
            provider_config("claude-code", &claude, &env) + limits
        })
        .await;
        Rig { mock, drover }
    }

    /// A run whose first part is done and that has hibernated (quick idle limits), a
    /// second part scripted: the rig, the run, its Claude session and its first CLI's pid.
    async fn hibernated_after_a_first_part() -> (Rig, String, String, u32) {
        let rig = Rig::with(
            vec![
                Reply::text(done("first part done")),
                Reply::text(done("second part done")),
            ],
            &[],
            QUICK_IDLE,
        )
        .await;
        let run = rig.dispatch("Do the first part").await;
        let first = rig.drover.until_state(&run, "idle", TURN).await;
        let session = first["provider_session_id"].as_str().unwrap().to_string();
        let pid = first["pid"].as_u64().unwrap() as u32;
        rig.drover.until_hibernated(&run, Some(pid), TURN).await;
        rig.drover.assert_nothing_runs_under_it().await;
        (rig, run, session, pid)
    }

    async fn dispatch(&self, task: &str) -> String {
        self.drover
            .dispatch(&[
                "--provider",
                "claude-code",
                "--model",
                MODEL,
                "--policy",
                "ask",
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

    /// The Claude Code session id the CLI sent with a model request.
    fn session_header(request: &RecordedRequest) -> String {
        request
            .header("x-claude-code-session-id")
            .unwrap_or_else(|| panic!("the CLI sent no session header: {:?}", request.headers))
            .to_string()
    }

    /// Ends an idle run as complete and checks its child is gone.
    async fn complete(&self, run: &str, pid: u32) {
        let grace = Duration::from_secs(5);
        self.drover.complete(run, Some(pid), TURN, grace).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_allowed_by_the_user_runs_and_its_result_goes_back_to_the_model() {
    let command = "echo allowed-7f3a > allowed.txt && cat allowed.txt";
    let rig = Rig::start(vec![
        Reply::tool_call(
            "Bash",
            json!({"command": command, "description": "Write allowed.txt"}),
        ),
        Reply::text(done("wrote allowed.txt")),
    ])
    .await;
    let run = rig.dispatch("Write allowed.txt").await;

    let pending = rig.pending(&run).await;
    assert_eq!(pending["kind"], "permission", "{pending:#}");
    assert_eq!(pending["tool"], "Bash", "{pending:#}");
    assert_eq!(pending["input"]["command"], command, "{pending:#}");
    assert!(
        !rig.drover.work_dir().join("allowed.txt").exists(),
        "the tool ran before it was allowed"
    );
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(&run, &request, &["allow"]).await;

    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert!(view["pending"].as_array().unwrap().is_empty(), "{view:#}");
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    assert_eq!(
        std::fs::read_to_string(rig.drover.work_dir().join("allowed.txt")).unwrap(),
        "allowed-7f3a\n"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let results = rig.mock.tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].call_id.starts_with("toolu_mock_"), "{results:?}");
    assert!(!results[0].is_error, "{results:?}");
    assert!(results[0].content.contains("allowed-7f3a"), "{results:?}");
    assert_eq!(rig.mock.remaining(), 0);

    // The ledger holds the CLI's own session id: the one it sends the API.
    let session = Rig::session_header(&requests[0]);
    assert_eq!(Rig::session_header(&requests[1]), session);
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    let pid = view["pid"].as_u64().expect("an idle run keeps its child") as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_written_in_a_worktree_lands_there_only_and_merge_brings_it_to_the_users_branch() {
    let command = "printf 'cached-91c2\\n' > cache.txt";
    let rig = Rig::start(vec![
        Reply::tool_call(
            "Bash",
            json!({"command": command, "description": "Write cache.txt"}),
        ),
        Reply::text(done("wrote cache.txt")),
    ])
    .await;
    let base = rig.drover.work_repo().await;
    let run = rig.dispatch("Write cache.txt").await;
    let pending = rig.pending(&run).await;
    assert_eq!(pending["tool"], "Bash", "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(&run, &request, &["allow"]).await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    rig.drover
        .merge_worktree_file(&run, &base, "cache.txt", "cached-91c2\n")
        .await;
    let pid = view["pid"].as_u64().expect("an idle run keeps its child") as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_denied_by_the_user_does_not_run_and_the_model_hears_why() {
    let command = "echo denied-51c2 > denied.txt";
    let rig = Rig::start(vec![
        Reply::tool_call(
            "Bash",
            json!({"command": command, "description": "Write denied.txt"}),
        ),
        Reply::text(done("the user said no, so nothing was written")),
    ])
    .await;
    let run = rig.dispatch("Write denied.txt").await;
    let pending = rig.pending(&run).await;
    assert_eq!(pending["input"]["command"], command, "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(
        &run,
        &request,
        &["deny", "--message", "not in this directory"],
    )
    .await;

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
        results[0].is_error,
        "a denial is an error result: {results:?}"
    );
    assert!(
        results[0].content.contains("not in this directory"),
        "the model hears the user's reason: {results:?}"
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_from_the_model_is_answered_through_respond() {
    let question = "Which colour should the button be?";
    let rig = Rig::start(vec![
        Reply::tool_call(
            "AskUserQuestion",
            json!({"questions": [{
                "question": question, "header": "Colour", "multiSelect": false,
                "options": [{"label": "Blue", "description": "calm"},
                            {"label": "Red", "description": "loud"}]}]}),
        ),
        Reply::text(done("the button is blue")),
    ])
    .await;
    let run = rig.dispatch("Style the button").await;
    let pending = rig.pending(&run).await;
    assert_eq!(pending["kind"], "question", "{pending:#}");
    assert_eq!(pending["tool"], "AskUserQuestion", "{pending:#}");
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
    assert!(!results[0].is_error, "{results:?}");
    assert!(
        results[0]
            .content
            .contains(&format!("\"{question}\"=\"Blue\"")),
        "the model hears the user's answer to its question: {results:?}"
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_turn_continues_the_same_provider_session() {
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
    assert_eq!(
        view["pid"], pid,
        "the same CLI process serves the follow-up"
    );

    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    for request in &requests {
        assert_eq!(Rig::session_header(request), session);
    }
    // The follow-up carries the conversation: the first answer, then the new prompt.
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
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_and_cost_are_booked_as_the_cli_reported_them() {
    let first_tool = Usage {
        input: 1200,
        output: 80,
        cache_read: 300,
        cache_write: 50,
        reasoning: 0,
    };
    let first_text = Usage {
        input: 1500,
        output: 120,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };
    let second = Usage {
        input: 900,
        output: 60,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };
    let rig = Rig::start(vec![
        Reply::tool_call(
            "Bash",
            json!({"command": "touch usage.txt", "description": "Touch a file"}),
        )
        .usage(first_tool),
        Reply::text(done("one")).usage(first_text),
        Reply::text(done("two")).usage(second),
    ])
    .await;
    let run = rig.dispatch("Count tokens").await;
    let pending = rig.pending(&run).await;
    rig.respond(&run, pending["request_id"].as_str().unwrap(), &["allow"])
        .await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;

    // Tokens: the turn's two model requests, as the CLI summed them.
    assert_eq!(
        view["tokens"],
        json!({"input": 2700, "output": 200, "reasoning": 0, "cache_read": 300, "cache_write": 50}),
        "{view:#}"
    );
    let totals = |events: &[Value]| -> Vec<f64> {
        provider_events(events)
            .iter()
            .filter(|e| e["type"] == "turn_completed")
            .map(|e| {
                e["total_cost_usd"]
                    .as_f64()
                    .expect("the CLI reported a total")
            })
            .collect()
    };
    let reported = totals(&rig.drover.events(&run).await);
    assert_eq!(reported.len(), 1);
    assert!(reported[0] > 0.0);
    assert!(
        (view["cost_usd"].as_f64().unwrap() - reported[0]).abs() < 1e-9,
        "drover booked {} but the CLI reported {}",
        view["cost_usd"],
        reported[0]
    );
    assert_eq!(view["cost_basis"], "reported", "{view:#}");
    // Cross-check: the pinned CLI prices claude-sonnet-4-5 at $3 / $15 per million input /
    // output tokens, $0.30 cache read, $3.75 cache write.
    let priced = (2700.0 * 3.0 + 200.0 * 15.0 + 300.0 * 0.3 + 50.0 * 3.75) / 1e6;
    assert!(
        (reported[0] - priced).abs() < 1e-9,
        "the CLI reported {} for usage priced at {priced}",
        reported[0]
    );

    // A second turn: the CLI's total is a running one; drover books the difference.
    let out = rig.drover.run(&["follow-up", &run, "Again"]).await;
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    let view = rig
        .drover
        .until(&run, "idle after two turns", TURN, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == 2)
        })
        .await;
    let reported = totals(&rig.drover.events(&run).await);
    assert_eq!(reported.len(), 2);
    let cost = view["cost_usd"].as_f64().unwrap();
    assert!(
        (cost - reported[1]).abs() < 1e-9,
        "drover booked {cost} but the CLI's running total is {}",
        reported[1]
    );
    let turn_two = view["turns"][1]["cost_usd"].as_f64().unwrap();
    assert!(
        (turn_two - (reported[1] - reported[0])).abs() < 1e-9,
        "{view:#}"
    );
    assert_eq!(view["turns"][1]["tokens"]["input"], 900, "{view:#}");
    assert_eq!(view["tokens"]["input"], 3600, "{view:#}");
    assert_eq!(view["tokens"]["output"], 260, "{view:#}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_holds_the_run_in_waiting_provider_until_the_api_answers_again() {
    let rig = Rig::start(vec![
        Reply::error(429).retry_after(Duration::from_secs(1)),
        Reply::error(529),
        Reply::text(done("answered after the rate limit")),
    ])
    .await;
    let run = rig.dispatch("Say something").await;
    let view = rig.drover.until_state(&run, "idle", TURN).await;
    assert_eq!(
        view["last_result"]["summary"], "answered after the rate limit",
        "{view:#}"
    );
    let requests = rig.mock.wait_for_model_requests(3, TURN).await;
    assert_eq!(requests.len(), 3, "{}", crate::mock::describe(&requests));

    let states = live_states(&rig.drover.events(&run).await);
    let kinds: Vec<&str> = states.iter().filter_map(|s| s["state"].as_str()).collect();
    let waiting = kinds
        .iter()
        .position(|k| *k == "waiting_provider")
        .unwrap_or_else(|| panic!("the run never waited for the provider: {kinds:?}"));
    // The provider's retry hint (retry-after: 1 s, which the CLI honours) is the bound.
    let held = &states[waiting];
    let hint = held["bound"].as_i64().unwrap() - held["at"].as_i64().unwrap();
    assert!(
        (900..=1100).contains(&hint),
        "the wait is bounded by the retry hint: {held:#}"
    );
    assert!(
        held["detail"].as_str().unwrap_or("").contains("429"),
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
async fn a_server_error_that_outlasts_the_retries_fails_the_run() {
    // Two retries (the CLI's default is ten, with back-off: minutes).
    let rig = Rig::with(
        vec![Reply::error(500), Reply::error(500), Reply::error(500)],
        &[("CLAUDE_CODE_MAX_RETRIES", "2")],
        NO_RESEND,
    )
    .await;
    let run = rig.dispatch("Say something").await;
    let running = rig
        .drover
        .until(&run, "running with a child", TURN, |v| v["pid"].is_u64())
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
    // The status and the API's own message (the mock's), not the result's subtype
    // (the CLI reports a spent retry as `subtype: success`, `is_error: true`).
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("the model API failed with HTTP 500: mock error 500")),
        "the run says the API failed with 500 and why: {notes:?}"
    );
    assert!(!notes.iter().any(|n| n.contains("success")), "{notes:?}");
    let requests = rig.mock.model_requests();
    assert_eq!(requests.len(), 3, "{}", crate::mock::describe(&requests));
    assert!(
        eventually(Duration::from_secs(5), || !group_alive(pid)).await,
        "the CLI's process group {pid} outlived its failed run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_run_while_the_model_answers_leaves_no_process_behind() {
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
async fn stopping_a_run_while_its_tool_runs_leaves_no_process_behind() {
    // A marker no other process has: the tool's own command line.
    let marker = format!("drover-stop-{}", std::process::id());
    let command = format!("sleep 97 && touch slept.txt # {marker}");
    let rig = Rig::start(vec![
        Reply::tool_call("Bash", json!({"command": command, "description": "Wait"})),
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
    // Claude Code runs a Bash tool in a session of its own, outside the CLI's process
    // group; on SIGTERM or SIGKILL the CLI leaves it running (only an `interrupt` control
    // request ends it). Whatever is left is killed here, then reported.
    let left = processes_with(&marker);
    let described: Vec<String> = left
        .iter()
        .map(|(pid, cmdline)| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().collect())
                .unwrap_or_default();
            let field = |i: usize| fields.get(i).copied().unwrap_or("?");
            format!(
                "pid {pid} (ppid {}, pgid {}, sid {}): {cmdline}",
                field(1),
                field(2),
                field(3)
            )
        })
        .collect();
    for (pid, _) in &left {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-(*pid as i32)), Signal::SIGKILL);
    }
    assert!(
        left.is_empty(),
        "the allowed tool outlived the stopped run (the CLI's own group {pid} is gone): {described:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drover_crash_with_a_run_in_flight_leaves_it_interrupted_after_restart() {
    let mut rig = Rig::start(vec![
        Reply::text(done("too late")).delay(Duration::from_secs(120)),
    ])
    .await;
    let run = rig.dispatch("Take your time").await;
    rig.mock.wait_for_model_requests(1, TURN).await;
    let view = rig.drover.show(&run).await;
    let pid = view["pid"].as_u64().unwrap() as u32;
    let session = view["provider_session_id"].as_str().map(str::to_string);

    rig.drover.stop_serve(Signal::SIGKILL).await;
    assert!(
        eventually(Duration::from_secs(10), || !group_alive(pid)).await,
        "the CLI's process group {pid} outlived a killed drover"
    );
    rig.drover.serve().await;
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "interrupted", "{view:#}");
    assert_eq!(
        view["completion_reason"],
        Value::Null,
        "not an end: {view:#}"
    );
    assert_eq!(view["needs_you"]["reason"], "interrupted", "{view:#}");
    assert_eq!(view["live_state"]["state"], "ended", "{view:#}");
    assert_eq!(view["live_state"]["cause"], "resident_replaced", "{view:#}");
    // The ledger keeps the CLI's session, for a resume.
    let sent = Rig::session_header(&rig.mock.model_requests()[0]);
    assert_eq!(session.as_deref(), Some(sent.as_str()), "{view:#}");
    assert_eq!(view["provider_session_id"], sent.as_str(), "{view:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_a_drover_crash_continues_the_same_claude_session_on_the_same_run() {
    let mut rig = Rig::start(vec![Reply::text(done("first part written"))]).await;
    let run = rig.dispatch("Write the first part").await;
    let idle = rig
        .drover
        .until(&run, "the first turn to end", TURN, |v| {
            v["state"] == "idle"
        })
        .await;
    let pid = idle["pid"].as_u64().unwrap() as u32;
    let sent = Rig::session_header(&rig.mock.model_requests()[0]);
    assert_eq!(idle["provider_session_id"], sent.as_str(), "{idle:#}");
    // The CLI writes its session file a moment after the turn's result; a session killed
    // before that is lost to `--resume` ("No conversation found"). Resume is about the
    // drover crash, so let the CLI finish writing first.
    let projects = rig.drover.root().join("claude-config/projects");
    assert!(
        eventually(Duration::from_secs(10), || mentioned_under(
            &projects,
            "first part written"
        ))
        .await,
        "claude never wrote its session under {}",
        projects.display()
    );

    rig.drover.stop_serve(Signal::SIGKILL).await;
    assert!(
        eventually(Duration::from_secs(10), || !group_alive(pid)).await,
        "the CLI's process group {pid} outlived a killed drover"
    );
    rig.drover.serve().await;
    // Idle when drover died: back idle, hibernated in its session.
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "idle", "{view:#}");
    assert_eq!(
        view["live_state"]["detail"], "idle · hibernated",
        "{view:#}"
    );

    // `drover resume` with words starts `claude --resume=SESSION`: the model hears the
    // same session, with the first turn in its history, and the new turn lands on the
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
    assert_eq!(view["provider_session_id"], sent.as_str(), "{view:#}");
    let turns = view["turns"].as_array().expect("turns");
    assert_eq!(turns[1]["origin"], "resume", "{view:#}");
    assert_eq!(
        turns[1]["prompt_preview"], "Now the second part",
        "{view:#}"
    );
    assert_eq!(
        view["last_result"]["summary"], "picked up where it stopped",
        "{view:#}"
    );
    let requests = rig.mock.model_requests();
    assert_eq!(requests.len(), 2, "{}", crate::mock::describe(&requests));
    assert_eq!(
        Rig::session_header(&requests[1]),
        sent,
        "the same Claude session"
    );
    let history = requests[1].body["messages"].to_string();
    assert!(
        history.contains("Write the first part") && history.contains("first part written"),
        "the resumed session holds the first turn: {history}"
    );
    // Money goes on from what the first turn cost (the resumed CLI counts from zero).
    let spent: f64 = view["usage"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["cost_usd"].as_f64())
        .sum();
    assert!(
        (view["cost_usd"].as_f64().unwrap() - spent).abs() < 1e-9,
        "{view:#}"
    );
    let pid = view["pid"].as_u64().expect("a resumed child") as u32;
    rig.complete(&run, pid).await;
}

/// A kill -9 of drover with one run hibernated, one waiting on a permission and one in
/// a turn: the next drover puts the first two back where they were (no CLI started, no
/// turn sent) and only the third is interrupted, in Needs you; each goes on after one
/// command, in its own Claude session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drover_crash_puts_each_run_back_where_it_was_and_each_goes_on_after_one_command() {
    let command = "echo restored-5c1e > restored.txt";
    let bash = || {
        Reply::tool_call(
            "Bash",
            json!({"command": command, "description": "Write restored.txt"}),
        )
    };
    let limits = format!("{QUICK_IDLE}{SHARED_DIR}");
    let mut rig = Rig::with(vec![], &[], &limits).await;
    let projects = rig.drover.root().join("claude-config/projects");
    let written = |text: &'static str| {
        let projects = projects.clone();
        async move {
            assert!(
                eventually(Duration::from_secs(10), || mentioned_under(&projects, text)).await,
                "claude never wrote its session holding {text:?}"
            );
        }
    };
    // Hibernated after its first part.
    rig.mock.push([Reply::text(done("asleep: first part"))]);
    let asleep = rig.dispatch("Do the first part").await;
    let view = rig.drover.until_state(&asleep, "idle", TURN).await;
    let asleep_session = view["provider_session_id"].as_str().unwrap().to_string();
    let pid = view["pid"].as_u64().map(|p| p as u32);
    rig.drover.until_hibernated(&asleep, pid, TURN).await;
    // Waiting on a permission, in its second turn (a session on disk to go on in).
    rig.mock
        .push([Reply::text(done("asking: looked around")), bash()]);
    let asking = rig.dispatch("Look around first").await;
    rig.drover.until_state(&asking, "idle", TURN).await;
    written("asking: looked around").await;
    rig.drover
        .follow_up(&asking, "Now write restored.txt")
        .await;
    let request = rig.pending(&asking).await;
    let request_id = request["request_id"].as_str().unwrap().to_string();
    // In its second turn, whose answer takes long.
    rig.mock.push([
        Reply::text(done("busy: first part")),
        Reply::text(done("too late")).delay(Duration::from_secs(120)),
    ]);
    let busy = rig.dispatch("Start the long work").await;
    rig.drover.until_state(&busy, "idle", TURN).await;
    written("busy: first part").await;
    rig.drover.follow_up(&busy, "Now the long part").await;
    rig.drover.until_state(&busy, "running", TURN).await;
    rig.mock.wait_for_model_requests(5, TURN).await;
    // A follow-up queued behind the long turn.
    rig.drover.follow_up(&busy, "(queued)").await;
    let asking_pid = rig.drover.show(&asking).await["pid"].as_u64().unwrap() as u32;
    let busy_pid = rig.drover.show(&busy).await["pid"].as_u64().unwrap() as u32;

    rig.drover.stop_serve(Signal::SIGKILL).await;
    for pid in [asking_pid, busy_pid] {
        assert!(
            eventually(Duration::from_secs(10), || !group_alive(pid)).await,
            "the CLI's process group {pid} outlived a killed drover"
        );
    }
    let requests_before = rig.mock.model_requests().len();
    rig.drover.serve().await;

    // Back where they were: no CLI, no turn.
    let view = rig.drover.show(&asleep).await;
    assert_eq!(view["state"], "idle", "{view:#}");
    assert_eq!(
        view["live_state"]["detail"], "idle · hibernated",
        "{view:#}"
    );
    assert_eq!(view["provider_session_id"], asleep_session.as_str());
    let view = rig.drover.show(&asking).await;
    assert_eq!(view["state"], "awaiting_permission", "{view:#}");
    assert_eq!(
        view["pending"][0]["request_id"],
        request_id.as_str(),
        "{view:#}"
    );
    assert_eq!(view["pending"][0]["input"]["command"], command, "{view:#}");
    let view = rig.drover.show(&busy).await;
    assert_eq!(view["state"], "interrupted", "{view:#}");
    assert_eq!(view["needs_you"]["reason"], "interrupted", "{view:#}");
    assert!(view["finished_at"].is_null(), "{view:#}");
    assert_eq!(
        view["live_state"]["detail"], "interrupted by a restart of drover · R resumes",
        "{view:#}"
    );
    for run in [&asleep, &asking, &busy] {
        assert!(rig.drover.show(run).await["pid"].is_null(), "{run}");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        rig.mock.model_requests().len(),
        requests_before,
        "no turn was sent by the restart"
    );

    // The hibernated run: one follow-up, in its session.
    rig.mock.push([Reply::text(done("asleep: second part"))]);
    rig.drover.follow_up(&asleep, "Now the second part").await;
    let view = rig.drover.until_idle_after(&asleep, 2, TURN).await;
    assert_eq!(view["provider_session_id"], asleep_session.as_str());
    let last = rig.mock.model_requests().pop().unwrap();
    assert_eq!(Rig::session_header(&last), asleep_session);
    assert!(
        last.body["messages"]
            .to_string()
            .contains("asleep: first part")
    );

    // The run that waited on a permission: one answer. No CLI heard the old request; the
    // resumed session is told what was asked and answered, asks again, and the user's
    // answer allows it.
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
    let decisions: Vec<(String, String)> = view["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["who"].as_str().unwrap().to_string(),
                d["decision"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("user".to_string(), "allow".to_string()),
            (
                "user".to_string(),
                "allow (answered before drover was restarted)".to_string()
            )
        ],
        "{view:#}"
    );
    // (`claude --resume` keeps the cut turn's prompt and drops its unanswered tool call:
    // the old request cannot be answered; the new turn tells the model.)
    let told = rig
        .mock
        .model_requests()
        .into_iter()
        .find(|r| {
            r.body["messages"]
                .to_string()
                .contains("the user allowed it")
        })
        .expect("a model request carrying the answer");
    assert!(told.body["messages"].to_string().contains(command));

    // The interrupted run: one resume; drover's turn says why.
    rig.mock.push([
        Reply::text(done("busy: carried on")),
        Reply::text(done("busy: queued one")),
    ]);
    let out = rig.drover.run(&["resume", &busy]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_idle_after(&busy, 4, TURN).await;
    let turns = view["turns"].as_array().unwrap();
    assert_eq!(turns[2]["origin"], "resume", "{view:#}");
    assert!(
        turns[2]["prompt_preview"]
            .as_str()
            .unwrap()
            .starts_with("drover was restarted during your last turn; continue it"),
        "{view:#}"
    );
    assert_eq!(
        turns[3]["origin"], "follow_up",
        "the queued follow-up after it"
    );
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&busy, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drover_shutdown_with_a_run_in_flight_ends_the_child_and_records_it_interrupted() {
    let mut rig = Rig::start(vec![
        Reply::text(done("too late")).delay(Duration::from_secs(120)),
    ])
    .await;
    let run = rig.dispatch("Take your time").await;
    rig.mock.wait_for_model_requests(1, TURN).await;
    let view = rig.drover.show(&run).await;
    let pid = view["pid"].as_u64().unwrap() as u32;

    let status = rig.drover.stop_serve(Signal::SIGTERM).await;
    assert!(
        status.success(),
        "drover serve exits 0 on SIGTERM: {status:?}"
    );
    assert!(
        !group_alive(pid),
        "the CLI's process group {pid} outlived drover serve"
    );
    rig.drover.serve().await;
    let view = rig.drover.show(&run).await;
    assert_eq!(view["state"], "interrupted", "{view:#}");
    assert_eq!(
        view["completion_reason"],
        Value::Null,
        "not an end: {view:#}"
    );
    assert_eq!(
        view["live_state"]["detail"], "interrupted by a restart of drover · R resumes",
        "{view:#}"
    );
    let sent = Rig::session_header(&rig.mock.model_requests()[0]);
    assert_eq!(view["provider_session_id"], sent.as_str(), "{view:#}");
}

/// With `[mcp] expose_to_runs`, the run's Claude Code has drover's MCP server: the model
/// dispatches a sub-run through it (the person allows the tool call, as any other), which
/// shows in `drover runs` under the run; a second call waits for it and reads its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_dispatches_a_sub_run_through_drovers_mcp_server_and_waits_for_it() {
    let claude = peers::cli("claude");
    let workflow = "wf-fan-out";
    let mock = MockApi::start(
        Protocol::AnthropicMessages,
        vec![
            Reply::tool_call(
                "mcp__drover__dispatch",
                json!({"provider": "sim", "scenario": "quick-success", "task": "say hello"}),
            ),
            Reply::tool_call(
                "mcp__drover__wait",
                json!({"workflow": workflow, "until": "idle", "any": true, "timeout_secs": 60}),
            ),
            Reply::text(done("the sub-run said hello")),
        ],
    )
    .await;
    let drover = Drover::start_with(|root| {
        let env = peers::claude_env(root, &mock.url());
        provider_config("claude-code", &claude, &env) + "\n[mcp]\nexpose_to_runs = true\n"
    })
    .await;
    let run = drover
        .dispatch(&[
            "--provider",
            "claude-code",
            "--model",
            MODEL,
            "--policy",
            "ask",
            "--workflow",
            workflow,
            "Fan out",
        ])
        .await;

    // The model sees drover's tools; calling one is a permission prompt for the person.
    let pending = drover.pending(&run, TURN).await;
    assert_eq!(pending["tool"], "mcp__drover__dispatch", "{pending:#}");
    let requests = mock.wait_for_model_requests(1, TURN).await;
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .expect("the CLI offers tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in [
        "mcp__drover__dispatch",
        "mcp__drover__wait",
        "mcp__drover__show",
    ] {
        assert!(tools.contains(&tool), "{tool} in {tools:?}");
    }
    let request = pending["request_id"].as_str().unwrap().to_string();
    drover.respond(&run, &request, &["allow"]).await;

    // The sub-run: under the run, one deeper, in its workflow.
    let deadline = tokio::time::Instant::now() + TURN;
    let sub = loop {
        let runs = drover.json(&["runs"]).await;
        let found = runs
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["parent_run"] == run.as_str()))
            .cloned();
        if let Some(sub) = found {
            break sub;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no sub-run of {run} within {TURN:?}: {runs:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(sub["depth"], 1, "{sub:#}");
    assert_eq!(sub["workflow_id"], workflow, "{sub:#}");
    assert_eq!(sub["provider"], "sim", "{sub:#}");
    let sub_id = sub["run_id"].as_str().unwrap().to_string();

    let pending = drover.pending(&run, TURN).await;
    assert_eq!(pending["tool"], "mcp__drover__wait", "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    drover.respond(&run, &request, &["allow"]).await;

    let view = drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["last_result"]["status"], "done", "{view:#}");
    let requests = mock.wait_for_model_requests(3, TURN).await;
    let dispatched = mock.tool_results(&requests[1]);
    assert_eq!(dispatched.len(), 1, "{dispatched:?}");
    assert!(!dispatched[0].is_error, "{dispatched:?}");
    assert!(dispatched[0].content.contains(&sub_id), "{dispatched:?}");
    let waited = mock.tool_results(&requests[2]);
    assert_eq!(waited.len(), 1, "{waited:?}");
    assert!(!waited[0].is_error, "{waited:?}");
    assert!(waited[0].content.contains(&sub_id), "{waited:?}");
    assert!(
        waited[0].content.contains("\"result_status\":\"done\""),
        "{waited:?}"
    );
    assert_eq!(mock.remaining(), 0);
    drover.json(&["kill-all"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_run_hibernates_and_a_follow_up_wakes_it_in_the_same_claude_session() {
    let (rig, run, session, pid) = Rig::hibernated_after_a_first_part().await;

    rig.drover.follow_up(&run, "Now the second part").await;
    let view = rig.drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "follow_up", "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "second part done",
        "{view:#}"
    );
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    let woken = view["pid"].as_u64().expect("a woken child") as u32;
    assert_ne!(woken, pid, "a new CLI process, `claude --resume`");
    // The model hears the same session, with the first turn in its history.
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    for request in &requests {
        assert_eq!(Rig::session_header(request), session);
    }
    let messages = requests[1].body["messages"].as_array().unwrap();
    let text = |m: &Value| crate::mock::content_text(&m["content"]);
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && text(m).contains("first part done")),
        "{messages:#?}"
    );
    assert!(text(messages.last().unwrap()).contains("Now the second part"));
    rig.complete(&run, woken).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_run_woken_ahead_takes_its_follow_up_on_the_woken_claude() {
    let (rig, run, session, pid) = Rig::hibernated_after_a_first_part().await;
    // The follow-up box stays open a while: the woken run must not hibernate meanwhile
    // (the config is read again at the wake).
    let config = rig.drover.drover_home().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("hibernate_after_secs = 1", "hibernate_after_secs = 600"),
    )
    .unwrap();

    let out = rig.drover.run(&["wake", &run]).await;
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("waking"), "{}", out.stdout);
    let warm = rig
        .drover
        .until(&run, "warm again", TURN, |v| {
            v["live_state"]["detail"] == "idle: waiting for a follow-up" && v["pid"].is_u64()
        })
        .await;
    assert_eq!(warm["state"], "idle", "{warm:#}");
    assert_eq!(
        warm["turns"].as_array().map(Vec::len),
        Some(1),
        "no turn sent"
    );
    let woken = warm["pid"].as_u64().unwrap() as u32;
    assert_ne!(woken, pid, "a new CLI process, `claude --resume`");
    assert_eq!(
        rig.mock.model_requests().len(),
        1,
        "waking asks the model nothing"
    );

    rig.drover.follow_up(&run, "Now the second part").await;
    let view = rig.drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(
        view["pid"], woken,
        "the follow-up went to the woken CLI: {view:#}"
    );
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    assert_eq!(
        view["last_result"]["summary"], "second part done",
        "{view:#}"
    );
    let requests = rig.mock.wait_for_model_requests(2, TURN).await;
    let messages = requests[1].body["messages"].as_array().unwrap();
    let text = |m: &Value| crate::mock::content_text(&m["content"]);
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && text(m).contains("first part done")),
        "the same session: {messages:#?}"
    );
    rig.complete(&run, woken).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_that_outlasts_the_clis_retries_is_sent_again_in_the_same_session_and_done() {
    // One CLI retry: two 429s fail the turn; drover sends it again a second later.
    let rig = Rig::with(
        vec![
            Reply::error(429),
            Reply::error(429),
            Reply::text(done("done at last")),
        ],
        &[("CLAUDE_CODE_MAX_RETRIES", "1")],
        QUICK_IDLE,
    )
    .await;
    let run = rig.dispatch("Say something").await;
    let held = rig
        .drover
        .until(&run, "held for the model provider", TURN, |v| {
            v["live_state"]["state"] == "waiting_provider"
                && v["live_state"]["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("sent again"))
        })
        .await;
    assert_eq!(held["state"], "running", "{held:#}");
    let view = rig.drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(view["turns"][1]["origin"], "resend", "{view:#}");
    assert_eq!(view["last_result"]["summary"], "done at last", "{view:#}");
    let requests = rig.mock.model_requests();
    assert_eq!(requests.len(), 3, "{}", crate::mock::describe(&requests));
    let session = view["provider_session_id"].as_str().unwrap();
    for request in &requests {
        assert_eq!(Rig::session_header(request), session, "the same session");
    }
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_queued_before_a_drover_crash_are_delivered_once_each_after_resume() {
    let mut rig = Rig::start(vec![
        Reply::text(done("first part written")),
        Reply::text(done("too late")).delay(Duration::from_secs(120)),
    ])
    .await;
    let run = rig.dispatch("Write the first part").await;
    rig.drover.until_state(&run, "idle", TURN).await;
    let projects = rig.drover.root().join("claude-config/projects");
    assert!(
        eventually(Duration::from_secs(10), || mentioned_under(
            &projects,
            "first part written"
        ))
        .await,
        "claude never wrote its session"
    );
    rig.drover.follow_up(&run, "Second part please").await;
    rig.mock.wait_for_model_requests(2, TURN).await;
    rig.drover.follow_up(&run, "Third part please").await;
    rig.drover.follow_up(&run, "Fourth part please").await;
    let pid = rig.drover.show(&run).await["pid"].as_u64().unwrap() as u32;

    rig.drover.stop_serve(Signal::SIGKILL).await;
    assert!(eventually(Duration::from_secs(10), || !group_alive(pid)).await);
    rig.drover.serve().await;
    assert_eq!(rig.drover.show(&run).await["state"], "interrupted");
    rig.mock.push([
        Reply::text(done("second part resumed")),
        Reply::text(done("third part written")),
        Reply::text(done("fourth part written")),
    ]);
    let out = rig.drover.run(&["resume", &run]).await;
    assert!(out.success, "resume failed: {}{}", out.stdout, out.stderr);
    let view = rig.drover.until_idle_after(&run, 5, TURN).await;
    let origins: Vec<&str> = view["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["origin"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        origins,
        ["dispatch", "follow_up", "resume", "follow_up", "follow_up"],
        "{view:#}"
    );
    assert_eq!(view["last_result"]["summary"], "fourth part written");
    // The model got each queued follow-up once, in order.
    let requests = rig.mock.model_requests();
    let last_user = |r: &RecordedRequest| {
        crate::mock::content_text(
            &r.body["messages"].as_array().unwrap().last().unwrap()["content"],
        )
    };
    let asked: Vec<String> = requests.iter().map(last_user).collect();
    let third: Vec<usize> = (0..asked.len())
        .filter(|i| asked[*i].contains("Third part"))
        .collect();
    let fourth: Vec<usize> = (0..asked.len())
        .filter(|i| asked[*i].contains("Fourth part"))
        .collect();
    assert_eq!(third.len(), 1, "{asked:#?}");
    assert_eq!(fourth.len(), 1, "{asked:#?}");
    assert!(third[0] < fourth[0], "{asked:#?}");
    let pid = view["pid"].as_u64().unwrap() as u32;
    rig.complete(&run, pid).await;
}

/// One step of a spender: a Bash call drover allows (the `auto` policy).
fn bash_step(i: usize) -> Reply {
    Reply::tool_call(
        "Bash",
        json!({"command": format!("echo step-{i}"), "description": "Count a step"}),
    )
}

/// `dispatch` for the caps tests: the `auto` policy, so every step runs unasked.
const CAPPED: [&str; 6] = [
    "--provider",
    "claude-code",
    "--model",
    MODEL,
    "--policy",
    "auto",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_keeps_calling_tools_is_stopped_within_one_step_of_its_budget() {
    // Each step: input tokens at the catalog's $3 per million for claude-sonnet-4-5.
    let rig = Rig::start(caps::spender(caps::step_usage(3.0), bash_step)).await;
    caps::run_capped("claude", &rig.drover, &rig.mock, &CAPPED, TURN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_hard_cap_reached_by_spending_stops_the_second_run_and_the_session() {
    let step = caps::step_usage(3.0);
    let script = caps::session_script(step, bash_step, Reply::text(done("spent a little")));
    let rig = Rig::with(script, &[], caps::SESSION_LIMITS).await;
    caps::session_capped("claude", &rig.drover, &rig.mock, &CAPPED, TURN).await;
}

/// Take-over (docs/ARCHITECTURE.md §"Take-over"): `drover attach` opens Claude Code's own
/// interface on the run's session in tmux; a prompt typed there is answered by the model,
/// and once the user leaves with `/exit` the run's ledger holds that turn (`interactive`,
/// its tokens and an estimated cost), and a follow-up goes on in the same session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_taken_over_in_claudes_own_interface_is_handed_back_with_the_turn_typed_there() {
    if !crate::tmux::available() {
        panic!("tmux is needed for the take-over test (install it: CI does)");
    }
    let rig = Rig::start(vec![
        Reply::text(done("first part done")),
        Reply::text("Hello from the interface 4b1c"),
        Reply::text(done("second part done")),
    ])
    .await;
    let run = rig.dispatch("Do the first part").await;
    let first = rig.drover.until_state(&run, "idle", TURN).await;
    let session = first["provider_session_id"].as_str().unwrap().to_string();
    // What a real user's Claude config already holds: onboarding done, this key approved,
    // this folder trusted (docs/PROVIDERS.md §"Interactive take-over").
    let cwd = first["workspace"]["dir"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| rig.drover.work_dir().display().to_string());
    let config_dir = rig.drover.root().join("claude-config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let key = "sk-ant-mock-key";
    let tail = &key[key.len().saturating_sub(20)..];
    let seeded = json!({
        "hasCompletedOnboarding": true,
        "customApiKeyResponses": {"approved": [tail], "rejected": []},
        "projects": {cwd.clone(): {"hasTrustDialogAccepted": true}},
    });
    std::fs::write(config_dir.join(".claude.json"), seeded.to_string()).unwrap();

    let tmux = crate::tmux::Tmux::attach(
        &rig.drover,
        &run,
        &[("CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "1")],
    );
    let typed = "say hello from the interface";
    tmux.exchange_and_leave(
        TURN,
        "first part done",
        typed,
        "Hello from the interface 4b1c",
        "/exit",
    )
    .await;
    let view = rig.drover.show(&run).await;
    crate::tmux::assert_one_interactive_turn(
        &view,
        typed,
        "Hello from the interface 4b1c",
        &tmux.screen(),
    );

    rig.drover.follow_up(&run, "Do the second part").await;
    let after = rig.drover.until_idle_after(&run, 3, TURN).await;
    assert_eq!(after["turns"][2]["origin"], "follow_up", "{after}");
    assert_eq!(after["provider_session_id"], session, "{after}");
    let last = rig.mock.requests().pop().unwrap();
    assert_eq!(Rig::session_header(&last), session);
}

/// Wrap up, then stop, and evidence, with the real CLI (docs/ARCHITECTURE.md
/// §"Wrap up, then stop", §"Evidence"): the run's `npm test` really runs (its script exits 3) and is
/// kept with the exit code Claude Code reported; `drover stop --soft` while the model is
/// answering lets that turn end, then drover's wrap-up turn goes to the CLI as a user
/// message and its answer's result block completes the run (`stopped_soft`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_stop_waits_for_the_turn_then_the_wrap_up_gets_the_result_and_tests_are_evidence() {
    let rig = Rig::start(vec![
        Reply::tool_call(
            "Bash",
            json!({"command": "npm test", "description": "Run the tests"}),
        ),
        Reply::text("Still working on the fix.").delay(Duration::from_secs(4)),
        Reply::text(done("stopped as asked; npm test still fails")),
    ])
    .await;
    std::fs::write(
        rig.drover.work_dir().join("package.json"),
        r#"{"name": "pager", "private": true, "scripts": {"test": "exit 3"}}"#,
    )
    .unwrap();
    let run = rig.dispatch("Fix the pager and run the tests").await;
    let pending = rig.pending(&run).await;
    assert_eq!(pending["input"]["command"], "npm test", "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    rig.respond(&run, &request, &["allow"]).await;
    // The model is answering (delayed): the soft stop waits for it.
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
        requests[2]
            .body
            .to_string()
            .contains("drover is ending this run soon: you asked for a soft stop"),
        "the wrap-up reached the model: {}",
        requests[2].body
    );
    assert_eq!(rig.mock.remaining(), 0);

    let command = &view["turns"][0]["commands"][0];
    assert_eq!(command["command"], "npm test", "{view:#}");
    assert_eq!(command["test"], "npm test", "{view:#}");
    assert_eq!(command["exit_code"], 3, "Claude Code's exit code: {view:#}");
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
