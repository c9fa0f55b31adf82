//! OpenCode (`opencode`, the pinned version) against the mock OpenAI chat completions
//! API, run directly: drover has no OpenCode adapter yet, so this only proves the binary
//! serves its HTTP API, asks for permission over it, runs the tool once allowed and books
//! cost per message — the ground the adapter will be built on (PROVIDERS.md, "OpenCode").

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use crate::mock::{MockApi, Protocol, Reply, Usage};
use crate::peers::{self, base_env};

/// Any one step against OpenCode (it retries a dead API forever: always bounded).
const STEP: Duration = Duration::from_secs(90);

/// `opencode serve` on a loopback port; ended (SIGTERM, then SIGKILL) when dropped.
struct Server {
    child: tokio::process::Child,
    pid: u32,
    base: String,
}

impl Server {
    async fn start(opencode: &Path, env: &[(String, String)], cwd: &Path) -> Server {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            probe.local_addr().unwrap().port()
        };
        let port_arg = port.to_string();
        let mut child = tokio::process::Command::new(opencode)
            .args(["serve", "--port", &port_arg, "--hostname", "127.0.0.1"])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("opencode serve starts");
        let pid = child.id().expect("opencode's pid");
        // Both streams are read to their end, so opencode never blocks on a full pipe;
        // the first line that says it listens is passed on.
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let _ = tx.send(line);
                }
            });
        }
        drop(tx);
        let mut said = Vec::new();
        let listening = tokio::time::timeout(STEP, async {
            while let Some(line) = rx.recv().await {
                let hit = line.contains("listening");
                said.push(line);
                if hit {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(
            matches!(listening, Ok(true)),
            "opencode serve did not say it listens: {said:#?}"
        );
        tokio::spawn(async move { while rx.recv().await.is_some() {} });
        Server {
            child,
            pid,
            base: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.start_kill();
    }
}

/// OpenCode's `/event` stream, parsed as server-sent events into JSON messages.
fn subscribe(client: reqwest::Client, url: String) -> mpsc::UnboundedReceiver<Value> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let Ok(mut response) = client.get(&url).send().await else {
            return;
        };
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if let Ok(value) = serde_json::from_str::<Value>(&data.join("\n"))
                    && tx.send(value).is_err()
                {
                    return;
                }
            }
        }
    });
    rx
}

/// The next event `wanted` accepts (bounded by [`STEP`]); every event read is kept.
async fn next_event(
    events: &mut mpsc::UnboundedReceiver<Value>,
    seen: &mut Vec<Value>,
    what: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| {
                let types: Vec<&str> = seen.iter().filter_map(|e| e["type"].as_str()).collect();
                panic!("no {what} from opencode within {STEP:?}; events: {types:?}")
            })
            .unwrap_or_else(|| panic!("opencode's event stream ended before {what}"));
        seen.push(event.clone());
        if wanted(&event) {
            return event;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_serve_asks_before_running_bash_and_runs_it_once_allowed() {
    let opencode = peers::cli("opencode");
    let root = tempfile::tempdir().unwrap();
    let dirs = ["home", "config", "data", "cache", "state", "work"];
    for dir in dirs {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    let marker = "opencode-smoke-2c8f";
    let usage = Usage {
        input: 1000,
        output: 100,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };
    let mock = MockApi::start(
        Protocol::OpenAiChat,
        [
            Reply::tool_call(
                "bash",
                json!({"command": format!("touch allowed.txt && echo {marker}"),
                       "description": "Touch a file"}),
            )
            .usage(usage),
            Reply::text("Touched it.").usage(usage),
        ],
    )
    .await;
    let config = json!({
        "model": "mock/mock-model", "small_model": "mock/mock-model",
        "autoupdate": false, "share": "disabled", "enabled_providers": ["mock"],
        "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible", "name": "Mock",
            "options": {"baseURL": format!("{}/v1", mock.url()), "apiKey": "sk-mock"},
            "models": {"mock-model": {
                "name": "Mock", "tool_call": true,
                "limit": {"context": 128000, "output": 8192},
                "cost": {"input": 1, "output": 2, "cache_read": 0.1}}}}},
        "permission": {"bash": "ask", "edit": "ask"}
    });
    let config_file = root.path().join("opencode.json");
    std::fs::write(&config_file, config.to_string()).unwrap();
    let mut env = base_env(&root.path().join("home"));
    for (key, dir) in [
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
    ] {
        env.push((key.into(), root.path().join(dir).display().to_string()));
    }
    env.push(("OPENCODE_CONFIG".into(), config_file.display().to_string()));
    // OpenCode installs `@opencode-ai/plugin` into its config directory from the npm
    // registry at start (in the background, whatever the flags above say): npm offline
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
    let work = root.path().join("work");
    let server = Server::start(&opencode, &env, &work).await;
    let client = reqwest::Client::builder()
        .timeout(STEP)
        .build()
        .expect("an HTTP client");
    // The event stream stays open: no overall timeout on it, each read is bounded.
    let streaming = reqwest::Client::builder()
        .connect_timeout(STEP)
        .build()
        .expect("an HTTP client");
    let mut events = subscribe(streaming, format!("{}/event", server.base));
    let mut seen = Vec::new();
    next_event(&mut events, &mut seen, "server.connected", |e| {
        e["type"] == "server.connected"
    })
    .await;

    let session: Value = client
        .post(format!("{}/session", server.base))
        .json(&json!({"title": "drover peers smoke"}))
        .send()
        .await
        .expect("POST /session")
        .json()
        .await
        .expect("a session");
    let session_id = session["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id: {session}"))
        .to_string();
    assert!(session_id.starts_with("ses_"), "{session}");
    let prompt = client
        .post(format!("{}/session/{session_id}/prompt_async", server.base))
        .json(
            &json!({"parts": [{"type": "text", "text": "Touch the file"}],
                      "model": {"providerID": "mock", "modelID": "mock-model"}}),
        )
        .send()
        .await
        .expect("POST prompt_async");
    assert!(prompt.status().is_success(), "{}", prompt.status());

    let asked = next_event(&mut events, &mut seen, "permission.asked", |e| {
        e["type"] == "permission.asked"
    })
    .await;
    let properties = &asked["properties"];
    assert_eq!(properties["sessionID"], session_id.as_str(), "{asked}");
    assert_eq!(properties["permission"], "bash", "{asked}");
    assert!(
        !work.join("allowed.txt").exists(),
        "the command ran before it was allowed"
    );
    let permission = properties["id"].as_str().unwrap().to_string();
    let reply = client
        .post(format!("{}/permission/{permission}/reply", server.base))
        .json(&json!({"reply": "once"}))
        .send()
        .await
        .expect("POST permission reply");
    assert!(reply.status().is_success(), "{}", reply.status());

    next_event(&mut events, &mut seen, "session.idle", |e| {
        e["type"] == "session.idle" && e["properties"]["sessionID"] == session_id.as_str()
    })
    .await;
    assert!(work.join("allowed.txt").exists(), "the allowed command ran");
    let model = mock.model_requests();
    assert_eq!(
        model.len(),
        2,
        "{}",
        crate::mock::describe(&mock.requests())
    );
    assert_eq!(model[0].body["stream"], true);
    let results = mock.tool_results(&model[1]);
    assert_eq!(results.len(), 1, "{:#}", model[1].body["messages"]);
    assert!(results[0].call_id.starts_with("call_mock_"), "{results:?}");
    assert!(results[0].content.contains(marker), "{results:?}");

    // Cost per message, from the configured price: 1000 × $1/M + 100 × $2/M each.
    let costs: Vec<f64> = seen
        .iter()
        .filter(|e| e["type"] == "message.updated")
        .filter(|e| e["properties"]["info"]["role"] == "assistant")
        .filter_map(|e| e["properties"]["info"]["cost"].as_f64())
        .collect();
    assert!(
        costs.iter().any(|c| (c - 0.0012).abs() < 1e-9),
        "an assistant message costs $0.0012: {costs:?}"
    );
}
