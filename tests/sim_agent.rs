//! The simulated agent, run as the real binary the way drover's Claude adapter runs
//! `claude`: the handshake and user lines on stdin, stream-json lines on stdout.
//!
//! Every read is bounded by a timeout and every child is killed on drop, so a broken sim
//! fails a test instead of hanging it.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use drover_core::result_contract::{ResultStatus, parse_result};
use serde_json::{Value, json};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;

/// The longest any single read or exit may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(15);

/// The flags drover's Claude adapter passes.
const CLAUDE_FLAGS: &[&str] = &drover_core::providers::claude::args::PROTOCOL_FLAGS;

struct Sim {
    /// The agent's working directory: its allowed edits land here, never in the repo.
    work: tempfile::TempDir,
    /// Its `DROVER_HOME`: where it keeps its sessions (shared by a sim that resumes one).
    home: std::sync::Arc<tempfile::TempDir>,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Sim {
    fn start(scenario: &str, extra: &[&str]) -> Sim {
        Sim::start_with_env(scenario, extra, &[])
    }

    fn start_with_env(scenario: &str, extra: &[&str], env: &[(&str, &str)]) -> Sim {
        let home = std::sync::Arc::new(tempfile::tempdir().expect("a home"));
        Sim::start_in(&home, scenario, extra, env)
    }

    /// A sim keeping its sessions in `home` (a second process there resumes them).
    fn start_in(
        home: &std::sync::Arc<tempfile::TempDir>,
        scenario: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Sim {
        let work = tempfile::tempdir().expect("a work dir");
        std::fs::create_dir(work.path().join("src")).expect("src");
        std::fs::write(
            work.path().join("src/main.rs"),
            "fn main() {\n    println!(\"hello\");\n}\n",
        )
        .expect("src/main.rs");
        let mut command = Command::new(env!("CARGO_BIN_EXE_drover"));
        command
            .current_dir(work.path())
            .arg("sim-agent")
            .args(["--scenario", scenario])
            .args(CLAUDE_FLAGS)
            .args(extra)
            .env_remove("DROVER_SIM_SCENARIO")
            .env_remove("DROVER_SIM_FLOOD_EVENTS")
            .env("DROVER_HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the drover binary starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        Sim {
            work,
            home: home.clone(),
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        }
    }

    async fn send(&mut self, line: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        let mut text = line.to_string();
        text.push('\n');
        timeout(STEP_TIMEOUT, stdin.write_all(text.as_bytes()))
            .await
            .expect("writing stdin timed out")
            .expect("the sim reads stdin");
    }

    /// Sends the `initialize` handshake and returns its answer.
    async fn handshake(&mut self) -> Value {
        self.send(json!({"type":"control_request","request_id":"req_init","request":{"subtype":"initialize","hooks":null}}))
            .await;
        let answer = self.next_json().await;
        assert_eq!(answer["type"], "control_response", "{answer}");
        assert_eq!(answer["response"]["subtype"], "success", "{answer}");
        assert_eq!(answer["response"]["request_id"], "req_init", "{answer}");
        assert!(
            answer["response"]["response"]["commands"].is_array(),
            "{answer}"
        );
        answer
    }

    async fn user(&mut self, text: &str) {
        self.send(json!({"type":"user","message":{"role":"user","content":text},"parent_tool_use_id":null,"session_id":"default"}))
            .await;
    }

    /// The next stdout line; `None` once stdout is closed.
    async fn next_line(&mut self) -> Option<String> {
        timeout(STEP_TIMEOUT, self.lines.next_line())
            .await
            .expect("no line from the sim in time")
            .expect("stdout reads")
    }

    /// The next line that is a JSON object (other lines are skipped, as adapters do).
    async fn next_json(&mut self) -> Value {
        loop {
            let line = self.next_line().await.expect("the sim ended early");
            if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(&line) {
                return value;
            }
        }
    }

    /// JSON lines up to and including the first that `done` accepts.
    async fn until(&mut self, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let value = self.next_json().await;
            let stop = done(&value);
            seen.push(value);
            if stop {
                return seen;
            }
        }
    }

    async fn until_type(&mut self, kind: &str) -> Vec<Value> {
        self.until(|v| v["type"] == kind).await
    }

    /// Every remaining stdout line, until the sim closes stdout.
    async fn rest(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(line) = self.next_line().await {
            lines.push(line);
        }
        lines
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    async fn exit_status(&mut self) -> ExitStatus {
        timeout(STEP_TIMEOUT, self.child.wait())
            .await
            .expect("the sim did not exit in time")
            .expect("waiting for the sim")
    }

    async fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            timeout(STEP_TIMEOUT, stderr.read_to_string(&mut text))
                .await
                .expect("stderr did not close in time")
                .expect("stderr reads");
        }
        text
    }
}

fn allow(request_id: &str, updated_input: Value) -> Value {
    json!({"type":"control_response","response":{"subtype":"success","request_id":request_id,"response":{"behavior":"allow","updatedInput":updated_input}}})
}

fn deny(request_id: &str, message: &str) -> Value {
    json!({"type":"control_response","response":{"subtype":"success","request_id":request_id,"response":{"behavior":"deny","message":message,"interrupt":false}}})
}

fn is_permission_request(v: &Value) -> bool {
    v["type"] == "control_request" && v["request"]["subtype"] == "can_use_tool"
}

fn tool_results(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|v| v["type"] == "user")
        .flat_map(|v| v["message"]["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "tool_result")
        .collect()
}

fn tool_uses(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|v| v["type"] == "assistant")
        .flat_map(|v| v["message"]["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "tool_use")
        .collect()
}

fn texts(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|v| v["type"] == "assistant")
        .flat_map(|v| v["message"]["content"].as_array().into_iter().flatten())
        .filter_map(|block| block["text"].as_str().map(str::to_string))
        .collect()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn quick_success_reports_init_then_a_result_with_a_running_cost() {
    let mut sim = Sim::start("quick-success", &[]);
    sim.handshake().await;
    sim.user("Say hello.").await;

    let first = sim.until_type("result").await;
    let init = &first[0];
    assert_eq!(init["type"], "system", "{init}");
    assert_eq!(init["subtype"], "init");
    assert_eq!(init["model"], "claude-sonnet-4-5");
    assert_eq!(init["permissionMode"], "default");
    assert!(init["tools"].as_array().is_some_and(|t| !t.is_empty()));
    let version = init["claude_code_version"].as_str().unwrap();
    assert_eq!(version, format!("{}-sim", env!("CARGO_PKG_VERSION")));
    let session = init["session_id"].as_str().unwrap().to_string();
    assert_eq!(session.len(), 36, "uuid-like: {session}");

    let result = first.last().unwrap();
    assert_eq!(result["subtype"], "success", "{result}");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["session_id"], session.as_str());
    assert_eq!(result["num_turns"], 1);
    assert!(result["duration_ms"].is_u64());
    assert!(result["permission_denials"].as_array().unwrap().is_empty());
    let block = parse_result(result["result"].as_str().unwrap());
    assert_eq!(block.status, Some(ResultStatus::Done), "{result}");
    assert_eq!(
        texts(&first).last().map(String::as_str),
        result["result"].as_str(),
        "the result text is the final assistant text"
    );
    let first_cost = result["total_cost_usd"].as_f64().unwrap();
    assert!(first_cost > 0.0);
    let usage_in = result["usage"]["input_tokens"].as_u64().unwrap();
    let messages_in: u64 = first
        .iter()
        .filter(|v| v["type"] == "assistant")
        .map(|v| v["message"]["usage"]["input_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(usage_in, messages_in, "the turn's usage sums its messages");

    sim.user("And again.").await;
    let second = sim.until_type("result").await;
    assert_eq!(second[0]["subtype"], "init");
    assert_eq!(second[0]["session_id"], session.as_str(), "same session");
    let result = second.last().unwrap();
    let total = result["total_cost_usd"].as_f64().unwrap();
    assert!(
        (total - 2.0 * first_cost).abs() < 1e-9,
        "the running total covers both turns: {first_cost} then {total}"
    );
    let model_cost = result["modelUsage"]["claude-sonnet-4-5"]["costUSD"]
        .as_f64()
        .unwrap();
    assert!((model_cost - total).abs() < 1e-9, "{result}");

    sim.close_stdin();
    assert!(sim.rest().await.is_empty());
    assert_eq!(sim.exit_status().await.code(), Some(0));
}

#[tokio::test]
async fn model_and_resume_flags_are_honoured() {
    let mut sim = Sim::start(
        "multi-turn",
        &[
            "--model",
            "claude-opus-4-1",
            "--resume=sess-0001",
            "--max-turns",
            "6",
        ],
    );
    sim.handshake().await;
    sim.user("Rename parse to read.").await;
    let lines = sim.until_type("result").await;
    assert_eq!(lines[0]["session_id"], "sess-0001");
    assert_eq!(lines[0]["model"], "claude-opus-4-1");
    for message in lines.iter().filter(|v| v["type"] == "assistant") {
        assert_eq!(message["message"]["model"], "claude-opus-4-1");
        assert_eq!(message["session_id"], "sess-0001");
    }
    let result = lines.last().unwrap();
    assert_eq!(result["session_id"], "sess-0001");
    // A resumed session continues with the scenario's follow-up turn.
    assert!(
        texts(&lines)[0].starts_with("Follow-up received: Rename parse to read."),
        "{:?}",
        texts(&lines)
    );
    assert!(
        result["modelUsage"]["claude-opus-4-1"].is_object(),
        "{result}"
    );
}

/// Plays one turn for `text`; returns its assistant texts and its result line.
async fn turn(sim: &mut Sim, text: &str) -> (Vec<String>, Value) {
    sim.user(text).await;
    let lines = sim.until_type("result").await;
    let result = lines.last().cloned().expect("a result");
    (texts(&lines), result)
}

#[tokio::test]
async fn a_resumed_session_goes_on_after_the_last_turn_it_completed() {
    let mut first = Sim::start("multi-turn", &[]);
    first.handshake().await;
    let (said, result) = turn(&mut first, "Write the parser.").await;
    assert_eq!(said[0], "Starting on the parser.", "{said:?}");
    let session = result["session_id"]
        .as_str()
        .expect("a session id")
        .to_string();
    let (said, _) = turn(&mut first, "Take a str.").await;
    assert!(said[0].starts_with("Follow-up received"), "{said:?}");
    first.close_stdin();
    assert_eq!(first.exit_status().await.code(), Some(0));

    // A new process in the same session: its third turn, not its second again.
    let resume = format!("--resume={session}");
    let mut second = Sim::start_in(&first.home, "multi-turn", &[&resume], &[]);
    second.handshake().await;
    let (said, result) = turn(&mut second, "Anything else?").await;
    assert_eq!(result["session_id"], session.as_str());
    assert!(
        said[0].starts_with("Another follow-up: Anything else?"),
        "{said:?}"
    );
    second.close_stdin();
    assert_eq!(second.exit_status().await.code(), Some(0));

    // A session file that is not the sim's own is not believed: the resumed session
    // is taken to have had its opening turn only.
    let file = first
        .home
        .path()
        .join("sim-sessions")
        .join(format!("{session}.json"));
    std::fs::write(&file, r#"{"scenario":"multi-turn","turns_done":"two"}"#).expect("written");
    let mut third = Sim::start_in(&first.home, "multi-turn", &[&resume], &[]);
    third.handshake().await;
    let (said, _) = turn(&mut third, "Again.").await;
    assert!(
        said[0].starts_with("Follow-up received: Again."),
        "{said:?}"
    );
}

#[tokio::test]
async fn an_allowed_tool_runs_after_the_permission_round_trip() {
    let mut sim = Sim::start("tool-permission", &[]);
    sim.handshake().await;
    sim.user("Fix the greeting.").await;

    let lines = sim.until(is_permission_request).await;
    let request = lines.last().unwrap();
    let ask = &request["request"];
    assert_eq!(ask["tool_name"], "Bash", "{request}");
    assert_eq!(ask["display_name"], "Bash");
    assert_eq!(ask["input"]["command"], "ls -la");
    assert_eq!(
        ask["permission_suggestions"][0]["rules"][0],
        json!({"toolName": "Bash", "ruleContent": "ls -la"})
    );
    assert!(ask.get("blocked_path").is_some());
    let uses = tool_uses(&lines);
    assert_eq!(uses.len(), 1);
    assert_eq!(
        ask["tool_use_id"], uses[0]["id"],
        "the request names its tool_use"
    );
    let request_id = request["request_id"].as_str().unwrap().to_string();

    // An answer for another request is not taken for this one.
    sim.send(deny("some-other-request", "wrong request")).await;
    sim.send(allow(&request_id, ask["input"].clone())).await;
    let lines = sim.until(is_permission_request).await;
    let results = tool_results(&lines);
    assert_eq!(results.len(), 1, "{lines:?}");
    assert_eq!(results[0]["tool_use_id"], uses[0]["id"]);
    assert_eq!(results[0]["is_error"], false, "{}", results[0]);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("Cargo.toml")
    );

    let edit = lines.last().unwrap();
    assert_eq!(edit["request"]["tool_name"], "Edit");
    let edit_id = edit["request_id"].as_str().unwrap().to_string();
    assert_ne!(edit_id, request_id);
    sim.send(allow(&edit_id, edit["request"]["input"].clone()))
        .await;
    let lines = sim.until_type("result").await;
    assert_eq!(tool_results(&lines)[0]["is_error"], false);
    // The allowed edit really changed the file in the agent's working directory.
    assert_eq!(
        std::fs::read_to_string(sim.work.path().join("src/main.rs")).unwrap(),
        "fn main() {\n    println!(\"hello, drover\");\n}\n"
    );
    let result = lines.last().unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(
        result["num_turns"], 3,
        "one model request per tool result, plus one"
    );
    assert!(result["permission_denials"].as_array().unwrap().is_empty());
    let block = parse_result(result["result"].as_str().unwrap());
    assert_eq!(block.files, ["src/main.rs"]);
}

#[tokio::test]
async fn a_denied_tool_gets_an_error_result_and_the_turn_goes_on() {
    let mut sim = Sim::start("tool-permission", &[]);
    sim.handshake().await;
    sim.user("Fix the greeting.").await;

    let request = sim.until(is_permission_request).await.pop().unwrap();
    let request_id = request["request_id"].as_str().unwrap();
    let tool_use_id = request["request"]["tool_use_id"].clone();
    sim.send(deny(request_id, "Not on this machine.")).await;

    let lines = sim.until(is_permission_request).await;
    let results = tool_results(&lines);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["tool_use_id"], tool_use_id);
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[0]["content"], "Not on this machine.");
    assert!(
        texts(&lines)
            .iter()
            .any(|t| t.contains("I won't run commands")),
        "the model says what it does instead: {:?}",
        texts(&lines)
    );

    let edit = lines.last().unwrap();
    sim.send(allow(
        edit["request_id"].as_str().unwrap(),
        edit["request"]["input"].clone(),
    ))
    .await;
    let lines = sim.until_type("result").await;
    let result = lines.last().unwrap();
    assert_eq!(result["subtype"], "success");
    let denials = result["permission_denials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{result}");
    assert_eq!(denials[0]["tool_name"], "Bash");
    assert_eq!(denials[0]["tool_use_id"], tool_use_id);
}

#[tokio::test]
async fn modes_without_prompts_send_no_permission_requests() {
    for (mode, denied) in [("bypassPermissions", false), ("dontAsk", true)] {
        let mut sim = Sim::start("tool-permission", &["--permission-mode", mode]);
        sim.handshake().await;
        sim.user("Fix the greeting.").await;
        let lines = sim.until_type("result").await;
        assert_eq!(lines[0]["permissionMode"], mode);
        assert!(
            !lines.iter().any(is_permission_request),
            "{mode} never asks"
        );
        let results = tool_results(&lines);
        assert_eq!(results.len(), 2, "{mode}");
        assert!(
            results.iter().all(|r| r["is_error"] == denied),
            "{mode}: {results:?}"
        );
        let denials = lines.last().unwrap()["permission_denials"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(denials, if denied { 2 } else { 0 }, "{mode}");
    }
}

#[tokio::test]
async fn a_question_is_answered_and_the_answer_is_used() {
    let mut sim = Sim::start("question", &[]);
    sim.handshake().await;
    sim.user("Add a cache.").await;

    let request = sim.until(is_permission_request).await.pop().unwrap();
    let ask = &request["request"];
    assert_eq!(ask["tool_name"], "AskUserQuestion", "{request}");
    let question = &ask["input"]["questions"][0];
    assert_eq!(question["question"], "Which database should the cache use?");
    assert_eq!(question["header"], "Database");
    assert_eq!(question["multiSelect"], false);
    let labels: Vec<&str> = question["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["SQLite", "Postgres"]);
    assert!(question["options"][0]["description"].is_string());

    let mut updated = ask["input"].clone();
    updated["answers"] = json!({"Which database should the cache use?": "Postgres"});
    sim.send(allow(request["request_id"].as_str().unwrap(), updated))
        .await;
    let lines = sim.until_type("result").await;
    let results = tool_results(&lines);
    assert_eq!(results[0]["is_error"], false);
    assert!(results[0]["content"].as_str().unwrap().contains("Postgres"));
    assert!(
        texts(&lines)
            .first()
            .is_some_and(|t| t == "Going with Postgres for the cache."),
        "{:?}",
        texts(&lines)
    );
    let result = lines.last().unwrap();
    let block = parse_result(result["result"].as_str().unwrap());
    assert_eq!(
        block.summary.as_deref(),
        Some("Set the cache up on Postgres, as chosen.")
    );
}

#[tokio::test]
async fn an_interrupt_ends_the_turn_in_flight() {
    let mut sim = Sim::start("slow-spender", &[]);
    sim.handshake().await;
    sim.user("Refactor everything.").await;
    sim.until_type("assistant").await;
    sim.send(json!({"type":"control_request","request_id":"r8","request":{"subtype":"interrupt"}}))
        .await;
    let lines = sim.until_type("result").await;
    let answer = lines
        .iter()
        .find(|v| v["type"] == "control_response")
        .expect("the interrupt is answered");
    assert_eq!(answer["response"]["request_id"], "r8");
    assert_eq!(answer["response"]["subtype"], "success");
    let result = lines.last().unwrap();
    assert_eq!(result["subtype"], "error_during_execution", "{result}");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["terminal_reason"], "interrupted");
    let spent = result["total_cost_usd"].as_f64().unwrap();
    assert!(spent < 1.0, "stopped before the whole dollar: {spent}");
}

#[tokio::test]
async fn an_interrupt_while_asking_withdraws_the_request_and_the_session_goes_on() {
    let mut sim = Sim::start("tool-permission", &[]);
    sim.handshake().await;
    sim.user("Fix the greeting.").await;
    let request = sim.until(is_permission_request).await.pop().unwrap();
    let request_id = request["request_id"].as_str().unwrap().to_string();
    sim.send(json!({"type":"control_request","request_id":"r9","request":{"subtype":"interrupt"}}))
        .await;
    let lines = sim.until_type("result").await;
    assert!(
        lines.iter().any(
            |v| v["type"] == "control_cancel_request" && v["request_id"] == request_id.as_str()
        ),
        "{lines:?}"
    );
    let results = tool_results(&lines);
    assert_eq!(results.len(), 1, "the tool_use is closed");
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(lines.last().unwrap()["terminal_reason"], "interrupted");

    // A late answer to the withdrawn request is ignored; the next turn asks afresh.
    sim.send(allow(&request_id, json!({}))).await;
    sim.user("Try again.").await;
    let lines = sim.until(is_permission_request).await;
    assert_eq!(lines[0]["subtype"], "init");
    assert_ne!(lines.last().unwrap()["request_id"], request_id.as_str());
}

#[tokio::test]
async fn a_step_can_withdraw_its_permission_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("withdraw.toml");
    std::fs::write(
        &path,
        r#"
model = "claude-haiku-4-5"
[[turns]]
steps = [
  { tool = "Bash", input = { command = "make deploy" }, needs_permission = true, withdraw_after_ms = 200, on_deny = "Skipping the deploy." },
]
"#,
    )
    .unwrap();
    let mut sim = Sim::start(path.to_str().unwrap(), &[]);
    sim.handshake().await;
    sim.user("Deploy.").await;
    let request = sim.until(is_permission_request).await.pop().unwrap();
    let lines = sim.until_type("result").await;
    assert_eq!(lines[0]["type"], "control_cancel_request");
    assert_eq!(lines[0]["request_id"], request["request_id"]);
    assert_eq!(tool_results(&lines)[0]["is_error"], true);
    assert!(
        texts(&lines)
            .iter()
            .any(|t| t.starts_with("Skipping the deploy."))
    );
    assert_eq!(lines.last().unwrap()["subtype"], "success");
}

#[tokio::test]
async fn garbage_lines_appear_between_valid_ones() {
    let mut sim = Sim::start("garbage-lines", &[]);
    sim.handshake().await;
    sim.user("Go.").await;
    let mut garbage = Vec::new();
    let mut objects = Vec::new();
    loop {
        let line = sim.next_line().await.expect("the sim ended early");
        match serde_json::from_str::<Value>(&line) {
            Ok(value @ Value::Object(_)) => {
                let done = value["type"] == "result";
                objects.push(value);
                if done {
                    break;
                }
            }
            _ => garbage.push(line),
        }
    }
    assert!(garbage.len() >= 3, "{garbage:?}");
    assert!(garbage.iter().any(|l| l == "[1, 2, 3]"));
    assert!(garbage.iter().any(|l| l == "42"));
    assert!(objects.len() >= 3);
    assert_eq!(objects.last().unwrap()["subtype"], "success");
}

#[tokio::test]
async fn a_crash_mid_turn_exits_non_zero_without_a_result() {
    let mut sim = Sim::start("crash-midturn", &[]);
    sim.handshake().await;
    sim.user("Read the config.").await;
    let lines = sim.rest().await;
    let values: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(!tool_uses(&values).is_empty(), "it got into the turn");
    assert!(!values.iter().any(|v| v["type"] == "result"), "{values:?}");
    let status = sim.exit_status().await;
    assert_eq!(status.code(), Some(1));
    assert!(sim.stderr().await.contains("simulated crash"));
}

#[tokio::test]
async fn a_rate_limit_is_rejected_then_allowed_then_the_turn_succeeds() {
    let mut sim = Sim::start("rate-limited", &[]);
    sim.handshake().await;
    sim.user("Go.").await;
    let lines = sim.until_type("result").await;
    let events: Vec<&Value> = lines
        .iter()
        .filter(|v| v["type"] == "rate_limit_event")
        .collect();
    assert_eq!(events.len(), 2, "{lines:?}");
    assert_eq!(events[0]["rate_limit_info"]["status"], "rejected");
    assert_eq!(events[1]["rate_limit_info"]["status"], "allowed");
    let resets_at = events[0]["rate_limit_info"]["resetsAt"].as_u64().unwrap();
    let now = now_secs();
    assert!(
        resets_at + 5 >= now && resets_at <= now + 5,
        "{resets_at} vs {now}"
    );
    assert_eq!(lines.last().unwrap()["subtype"], "success");
}

#[tokio::test]
async fn api_retries_are_announced_and_an_api_error_ends_the_process() {
    let mut sim = Sim::start("api-error", &[]);
    sim.handshake().await;
    sim.user("Go.").await;
    let lines = sim.until_type("result").await;
    let retry = lines
        .iter()
        .find(|v| v["type"] == "system" && v["subtype"] == "api_retry")
        .expect("an api_retry notice");
    assert_eq!(retry["attempt"], 1);
    assert_eq!(retry["error_status"], 529);
    assert!(retry["retry_delay_ms"].is_u64());
    let result = lines.last().unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["api_error_status"], 529);
    assert_eq!(result["terminal_reason"], "api_error");
    assert_eq!(sim.exit_status().await.code(), Some(1));
}

#[tokio::test]
async fn the_missing_result_block_comes_on_the_retry_turn() {
    let mut sim = Sim::start("no-result-block", &[]);
    sim.handshake().await;
    sim.user("Rename the helper.").await;
    let first = sim.until_type("result").await;
    assert!(!parse_result(first.last().unwrap()["result"].as_str().unwrap()).found);
    sim.user("End your answer with a ## Result block.").await;
    let second = sim.until_type("result").await;
    let block = parse_result(second.last().unwrap()["result"].as_str().unwrap());
    assert_eq!(block.status, Some(ResultStatus::Done));
}

#[tokio::test]
async fn a_hang_writes_nothing_more_and_closing_stdin_ends_it() {
    let mut sim = Sim::start("hang", &[]);
    sim.handshake().await;
    sim.user("Go.").await;
    sim.until_type("assistant").await;
    sim.close_stdin();
    let rest = sim.rest().await;
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(sim.exit_status().await.code(), Some(0));
}

#[tokio::test]
async fn the_flood_size_comes_from_the_environment() {
    let mut sim = Sim::start_with_env("flood", &[], &[("DROVER_SIM_FLOOD_EVENTS", "50")]);
    sim.handshake().await;
    sim.user("Go.").await;
    let lines = sim.until_type("result").await;
    let chunks = texts(&lines);
    assert_eq!(chunks.len(), 50);
    assert_eq!(chunks[0], "chunk 1");
    assert!(chunks[49].starts_with("chunk 50\n\n## Result"));
}

#[tokio::test]
async fn a_bad_scenario_file_is_exit_2_with_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.toml");
    std::fs::write(
        &path,
        "model = \"m\"\n[[turns]]\nsteps = [{ tool = \"Bash\", result = \"x\" }]\n",
    )
    .unwrap();
    let mut sim = Sim::start(path.to_str().unwrap(), &[]);
    assert_eq!(sim.exit_status().await.code(), Some(2));
    let stderr = sim.stderr().await;
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(path.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("turn 1, step 1"), "{stderr}");
    assert!(sim.rest().await.is_empty());
}

#[tokio::test]
async fn a_denied_edit_leaves_the_file_as_it_was() {
    let mut sim = Sim::start("tool-permission", &[]);
    sim.handshake().await;
    sim.user("Fix the greeting.").await;
    let bash = sim.until(is_permission_request).await.pop().unwrap();
    sim.send(allow(
        bash["request_id"].as_str().unwrap(),
        bash["request"]["input"].clone(),
    ))
    .await;
    let edit = sim.until(is_permission_request).await.pop().unwrap();
    sim.send(deny(edit["request_id"].as_str().unwrap(), "not that file"))
        .await;
    let lines = sim.until_type("result").await;
    assert_eq!(tool_results(&lines)[0]["is_error"], true);
    assert_eq!(
        std::fs::read_to_string(sim.work.path().join("src/main.rs")).unwrap(),
        "fn main() {\n    println!(\"hello\");\n}\n"
    );
}

#[tokio::test]
async fn writes_and_marked_commands_act_in_the_working_directory_and_never_outside() {
    let dir = tempfile::tempdir().unwrap();
    // A path outside the agent's directory, in a canary directory of the test's own.
    let canary = tempfile::tempdir().unwrap();
    let escaped = canary.path().join("escaped.txt");
    let path = dir.path().join("acts.toml");
    std::fs::write(
        &path,
        format!(
            r#"
model = "claude-haiku-4-5"
[[turns]]
steps = [
  {{ tool = "Write", input = {{ file_path = "notes/todo.txt", content = "one\ntwo\n" }} }},
  {{ tool = "Bash", input = {{ command = "wc -l < notes/todo.txt" }}, run = true }},
  {{ tool = "Bash", input = {{ command = "echo scripted" }}, output = "not run" }},
  {{ tool = "Write", input = {{ file_path = "{}", content = "x" }} }},
]
"#,
            escaped.display()
        ),
    )
    .unwrap();
    let mut sim = Sim::start(path.to_str().unwrap(), &[]);
    sim.handshake().await;
    sim.user("Write the notes.").await;
    let lines = sim.until_type("result").await;
    let results = tool_results(&lines);
    assert_eq!(results.len(), 4, "{lines:?}");
    assert_eq!(results[0]["is_error"], false, "{}", results[0]);
    assert_eq!(
        std::fs::read_to_string(sim.work.path().join("notes/todo.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(results[1]["is_error"], false, "{}", results[1]);
    assert_eq!(results[1]["content"].as_str().unwrap().trim(), "2");
    assert_eq!(
        results[2]["content"], "not run",
        "unmarked commands stay scripted"
    );
    assert_eq!(results[3]["is_error"], true, "{}", results[3]);
    assert!(
        results[3]["content"]
            .as_str()
            .unwrap()
            .contains("outside the working directory"),
        "{}",
        results[3]
    );
    assert!(!escaped.exists(), "nothing was written outside");
}

#[test]
fn run_belongs_only_on_a_bash_step_with_a_command() {
    for bad in [
        r#"{ tool = "Write", input = { file_path = "a", content = "b" }, run = true }"#,
        r#"{ tool = "Bash", input = { description = "no command" }, run = true }"#,
    ] {
        let text = format!("model = \"m\"\n[[turns]]\nsteps = [\n  {bad},\n]\n");
        let e =
            drover_core::sim::scenario::parse(&text, drover_core::sim::scenario::Format::Toml, "t")
                .unwrap_err();
        assert!(e.problem.contains("`run = true`"), "{e}");
    }
}
