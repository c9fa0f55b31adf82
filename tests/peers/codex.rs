//! Codex (`codex`, the pinned version) against the mock OpenAI Responses API, run
//! directly: drover has no Codex adapter yet, so these only prove the binary starts, talks
//! to the mock, runs a tool call and resumes its thread — the ground the adapter will be
//! built on (PROVIDERS.md, "Codex").

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mock::{MockApi, Protocol, Reply, Usage};
use crate::peers::{self, base_env, run_bounded};

/// One `codex exec` against the mock (it retries a dead API forever: always bounded).
const EXEC: Duration = Duration::from_secs(90);

/// `CODEX_HOME/config.toml` pointing Codex at the mock, with no retries, and nothing
/// else on the network: without `[features] plugins/apps = false` the pinned Codex
/// looks up api.github.com and chatgpt.com, without `[analytics] enabled = false`
/// ab.chatgpt.com (seen with strace).
fn write_config(codex_home: &Path, mock: &MockApi) {
    let config = format!(
        r#"model = "gpt-5.5"
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
request_max_retries = 0
stream_max_retries = 0
"#,
        mock.url()
    );
    std::fs::write(codex_home.join("config.toml"), config).expect("codex config.toml");
}

fn env(root: &Path) -> Vec<(String, String)> {
    let mut env = base_env(&root.join("home"));
    env.push((
        "CODEX_HOME".into(),
        root.join("codex-home").display().to_string(),
    ));
    env.push(("MOCK_API_KEY".into(), "sk-mock".into()));
    env.push(("TMPDIR".into(), root.join("tmp").display().to_string()));
    env
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
async fn codex_exec_runs_a_tool_call_against_the_mock_and_resumes_its_thread() {
    let codex = peers::cli("codex");
    let root = tempfile::tempdir().unwrap();
    for dir in ["home", "codex-home", "work", "tmp"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
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
    write_config(&root.path().join("codex-home"), &mock);
    let env = env(root.path());
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

/// `codex app-server` over stdio: JSON-RPC lines (the server omits `"jsonrpc"`).
struct AppServer {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    /// Every message read so far, for failure messages.
    seen: Vec<Value>,
}

impl AppServer {
    fn start(codex: &Path, env: &[(String, String)], cwd: &Path) -> AppServer {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(codex)
            .arg("app-server")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("codex app-server starts");
        let stdin = child.stdin.take().unwrap();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        AppServer {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt;
        let line = message.to_string() + "\n";
        tokio::time::timeout(EXEC, self.stdin.write_all(line.as_bytes()))
            .await
            .expect("writing to codex app-server in time")
            .expect("codex app-server reads stdin");
    }

    /// The next message that `wanted` accepts (bounded by [`EXEC`] overall).
    async fn until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + EXEC;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no {what} from codex app-server: {:#?}", self.seen))
                .expect("reading codex app-server")
                .unwrap_or_else(|| {
                    panic!("codex app-server ended before {what}: {:#?}", self.seen)
                });
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            self.seen.push(message.clone());
            if wanted(&message) {
                return message;
            }
        }
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let answer = self
            .until(&format!("the answer to {method}"), |m| {
                m["id"] == id && m.get("method").is_none()
            })
            .await;
        assert!(answer.get("error").is_none(), "{method} failed: {answer}");
        answer["result"].clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_asks_before_running_a_command_and_runs_it_once_accepted() {
    let codex = peers::cli("codex");
    let root = tempfile::tempdir().unwrap();
    for dir in ["home", "codex-home", "work", "tmp"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    let marker = "codex-approval-9b27";
    let mock = MockApi::start(
        Protocol::OpenAiResponses,
        [
            Reply::tool_call(
                "exec_command",
                json!({"cmd": format!("touch approved.txt && echo {marker}")}),
            ),
            Reply::text("Touched it."),
        ],
    )
    .await;
    write_config(&root.path().join("codex-home"), &mock);
    let env = env(root.path());
    let work = root.path().join("work");
    let mut server = AppServer::start(&codex, &env, &work);

    let init = server
        .request(
            1,
            "initialize",
            json!({"clientInfo": {"name": "drover-peers", "title": null, "version": "0"},
                   "capabilities": {"experimentalApi": false}}),
        )
        .await;
    assert!(init["userAgent"].is_string(), "{init}");
    server
        .send(json!({"jsonrpc": "2.0", "method": "initialized"}))
        .await;
    let started = server
        .request(
            2,
            "thread/start",
            json!({"cwd": work, "approvalPolicy": "untrusted", "sandbox": "workspace-write",
                   "model": "gpt-5.5"}),
        )
        .await;
    let thread = started["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("thread/start names no thread: {started}"))
        .to_string();
    server
        .request(
            3,
            "turn/start",
            json!({"threadId": thread,
                   "input": [{"type": "text", "text": "Touch the file", "text_elements": []}]}),
        )
        .await;
    let ask = server
        .until("a command approval request", |m| {
            m["method"] == "item/commandExecution/requestApproval"
        })
        .await;
    assert!(
        ask["params"]["command"]
            .as_str()
            .unwrap_or("")
            .contains("touch approved.txt"),
        "{ask}"
    );
    assert!(
        !work.join("approved.txt").exists(),
        "the command ran before it was approved"
    );
    let id = ask["id"].clone();
    server
        .send(json!({"jsonrpc": "2.0", "id": id, "result": {"decision": "accept"}}))
        .await;
    let done = server
        .until("turn/completed", |m| m["method"] == "turn/completed")
        .await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    assert!(
        work.join("approved.txt").exists(),
        "the accepted command ran"
    );
    let model = mock.model_requests();
    assert_eq!(
        model.len(),
        2,
        "{}",
        crate::mock::describe(&mock.requests())
    );
    let results = mock.tool_results(&model[1]);
    assert_eq!(results.len(), 1, "{:#}", model[1].body["input"]);
    assert!(results[0].content.contains(marker), "{results:?}");
    assert!(
        server
            .seen
            .iter()
            .any(|m| m["method"] == "thread/tokenUsage/updated"),
        "codex reports token usage: {:#?}",
        server.seen
    );
    drop(server.stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), server.child.wait()).await;
}
