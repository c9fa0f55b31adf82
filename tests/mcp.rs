//! `drover mcp` end to end: an MCP client (rmcp's) spawns the real `drover mcp` over
//! stdio in a private data directory, and calls every tool against the background owner
//! the server starts, on the simulated agent — successes and refusals. The owner it
//! started is ended by `drover shutdown` (the pid it reported on its socket).
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{Home, str_at};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::time::Duration;

/// The longest one tool call may take (a `wait` asks for less).
const CALL_LIMIT: Duration = Duration::from_secs(90);

type Client = RunningService<RoleClient, ()>;

/// `drover mcp` in `home`, from its work directory; `run_id` is the calling run
/// (`DROVER_RUN_ID`), when the server is to act as if started inside a run.
async fn connect(home: &Home, run_id: Option<&str>) -> Client {
    let command = tokio::process::Command::new(common::drover_bin()).configure(|cmd| {
        cmd.arg("mcp")
            .current_dir(home.work())
            .env("DROVER_HOME", home.path())
            .env_remove("DROVER_LOG")
            .env_remove("DROVER_RUN_ID");
        if let Some(id) = run_id {
            cmd.env("DROVER_RUN_ID", id);
        }
    });
    let transport = TokioChildProcess::new(command).expect("spawn drover mcp");
    tokio::time::timeout(CALL_LIMIT, ().serve(transport))
        .await
        .expect("drover mcp answers initialize in time")
        .expect("the MCP handshake")
}

async fn call_raw(client: &Client, tool: &'static str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("tool arguments are an object");
    };
    tokio::time::timeout(
        CALL_LIMIT,
        client.call_tool(CallToolRequestParams::new(tool).with_arguments(args)),
    )
    .await
    .unwrap_or_else(|_| panic!("{tool} answered in time"))
    .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Calls `tool`, which must succeed; returns its structured content.
async fn call(client: &Client, tool: &'static str, args: Value) -> Value {
    let result = call_raw(client, tool, args.clone()).await;
    assert_ne!(
        result.is_error,
        Some(true),
        "{tool} {args}: {:?}",
        result.content
    );
    result.structured_content.expect("structured content")
}

/// Calls `tool`, which must be refused with `code`; returns the sentence.
async fn refused(client: &Client, tool: &'static str, args: Value, code: &str) -> String {
    let result = call_raw(client, tool, args.clone()).await;
    assert_eq!(result.is_error, Some(true), "{tool} {args} was refused");
    let error = &result.structured_content.expect("structured error")["error"];
    assert_eq!(error["code"], code, "{tool} {args}: {error}");
    let message = str_at(error, "message").to_string();
    assert!(!message.is_empty());
    let text = result.content[0]
        .as_text()
        .expect("a text block")
        .text
        .clone();
    assert_eq!(text, format!("error[{code}]: {message}"));
    message
}

async fn dispatch(client: &Client, scenario: &str, task: &str) -> String {
    let run = call(
        client,
        "dispatch",
        json!({"provider": "sim", "scenario": scenario, "task": task}),
    )
    .await;
    str_at(&run, "run_id").to_string()
}

/// Waits (through the tool) until `run` meets `until`, which it must within the bound.
async fn wait(client: &Client, run: &str, until: &str) -> Value {
    let outcome = call(
        client,
        "wait",
        json!({"run_ids": [run], "until": until, "timeout_secs": common::RUN_LIMIT_SECS}),
    )
    .await;
    assert_eq!(
        outcome["timed_out"], false,
        "{run} reached {until}: {outcome}"
    );
    outcome["runs"][0].clone()
}

/// Ends the background owner `drover mcp` started in `home` (`drover shutdown`, which
/// signals the pid the owner reported), also when the test fails.
struct EndOwner<'a>(&'a Home);

impl Drop for EndOwner<'_> {
    fn drop(&mut self) {
        let out = self.0.drover(&["shutdown", "--wait"]);
        if !std::thread::panicking() {
            assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
        }
    }
}

fn runs_of(value: &Value) -> Vec<Value> {
    value["items"].as_array().expect("a list of runs").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_over_stdio_against_a_background_owner() {
    let home = Home::new();
    let _end_owner = EndOwner(&home);
    let client = connect(&home, None).await;

    // The tools, each with a description and an object schema; none answers prompts.
    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "budget",
            "complete",
            "dispatch",
            "escalate",
            "follow_up",
            "models",
            "retry",
            "runs",
            "show",
            "stop",
            "transcript",
            "wait"
        ]
    );
    for tool in &tools {
        assert!(tool.description.as_ref().is_some_and(|d| !d.is_empty()));
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
    }
    let dispatch_schema = &tools
        .iter()
        .find(|t| t.name == "dispatch")
        .unwrap()
        .input_schema;
    for field in [
        "task",
        "provider",
        "workflow_id",
        "parent_run",
        "budget_usd",
    ] {
        assert!(
            dispatch_schema["properties"].get(field).is_some(),
            "dispatch's schema has {field}"
        );
    }

    // dispatch → wait idle → runs / show / transcript → follow_up → complete.
    let run = dispatch(&client, "multi-turn", "write a parser").await;
    let idle = wait(&client, &run, "idle").await;
    assert_eq!(idle["state"], "idle");
    let runs = runs_of(&call(&client, "runs", json!({})).await);
    assert!(runs.iter().any(|r| r["run_id"] == run.as_str()));
    let only_running = runs_of(&call(&client, "runs", json!({"state": "running"})).await);
    assert!(only_running.iter().all(|r| r["run_id"] != run.as_str()));
    let shown = call(&client, "show", json!({"run_id": run})).await;
    assert_eq!(shown["run_id"], run.as_str());
    assert_eq!(shown["task"], "write a parser");
    assert_eq!(shown["parent_run"], Value::Null);
    let result = call(
        &client,
        "transcript",
        json!({"run_id": run, "format": "result"}),
    )
    .await;
    assert_eq!(
        result["result"]["summary"],
        "Wrote the first version of the parser."
    );
    let tail = call(
        &client,
        "transcript",
        json!({"run_id": run, "max_lines": 2}),
    )
    .await;
    let lines = tail["lines"].as_array().expect("lines");
    assert!(!lines.is_empty() && lines.len() <= 2, "{tail}");
    call(
        &client,
        "follow_up",
        json!({"run_id": run, "text": "handle empty input"}),
    )
    .await;
    let again = call(
        &client,
        "wait",
        json!({"run_ids": [run], "until": "idle", "timeout_secs": common::RUN_LIMIT_SECS}),
    )
    .await;
    assert_eq!(again["timed_out"], false);
    let result = call(
        &client,
        "transcript",
        json!({"run_id": run, "format": "result"}),
    )
    .await;
    assert_eq!(
        result["result"]["summary"],
        "Handled the first follow-up: handle empty input"
    );
    let done = call(&client, "complete", json!({"run_id": run})).await;
    assert_eq!(done["run_id"], run.as_str());
    let ended = wait(&client, &run, "terminal").await;
    assert_eq!(ended["state"], "completed");
    refused(
        &client,
        "complete",
        json!({"run_id": run}),
        "RUN_NOT_ACTIVE",
    )
    .await;

    // stop a run that would hang.
    let hung = dispatch(&client, "hang", "never answers").await;
    let stopped = call(&client, "stop", json!({"run_id": hung})).await;
    assert_eq!(stopped["run_id"], hung.as_str());
    let ended = wait(&client, &hung, "terminal").await;
    assert_eq!(ended["state"], "stopped");

    // A blocked run: retried on its model while it is idle (it completes, the new run
    // carries its result), then escalated to a named one (parent, depth 1).
    let blocked = dispatch(&client, "blocked", "run the tests").await;
    let stuck = wait(&client, &blocked, "idle").await;
    assert_eq!(stuck["result_status"], "blocked");
    let retried = call(&client, "retry", json!({"run_id": blocked})).await;
    let ended = wait(&client, &blocked, "terminal").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    assert_eq!(ended["completion_reason"], "retried", "{ended}");
    let escalated = call(
        &client,
        "escalate",
        json!({"run_id": blocked, "provider": "sim", "model": "sim-frontier"}),
    )
    .await;
    for successor in [&retried, &escalated] {
        let id = str_at(successor, "run_id");
        let shown = call(&client, "show", json!({"run_id": id})).await;
        assert_eq!(shown["parent_run"], blocked.as_str());
        assert_eq!(shown["depth"], 1);
        call(&client, "stop", json!({"run_id": id})).await;
    }

    // any: the first of two runs to be idle is enough.
    let quick = dispatch(&client, "quick-success", "say hi").await;
    let slow = dispatch(&client, "hang", "never answers").await;
    let first = call(
        &client,
        "wait",
        json!({"run_ids": [quick, slow], "until": "idle", "any": true, "timeout_secs": common::RUN_LIMIT_SECS}),
    )
    .await;
    assert_eq!(first["timed_out"], false, "{first}");
    // Bounded: a run that never ends times out (the answer says so).
    let timed_out = call(
        &client,
        "wait",
        json!({"run_ids": [slow], "until": "terminal", "timeout_secs": 1}),
    )
    .await;
    assert_eq!(timed_out["timed_out"], true);
    call(&client, "stop", json!({"run_id": slow})).await;

    // budget and models.
    let budget = call(&client, "budget", json!({})).await;
    assert!(
        budget["spent_usd"].as_f64().is_some_and(|s| s > 0.0),
        "{budget}"
    );
    let models = call(&client, "models", json!({"provider": "sim"})).await;
    let ids: Vec<&str> = models["models"]
        .as_array()
        .expect("models")
        .iter()
        .map(|m| str_at(m, "id"))
        .collect();
    assert!(ids.contains(&"sim-standard"), "{models}");
    assert!(
        models["models"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["provider"] == "sim")
    );

    // Refusals carry drover's code and sentence.
    refused(
        &client,
        "show",
        json!({"run_id": "r-nope"}),
        "RUN_NOT_FOUND",
    )
    .await;
    refused(
        &client,
        "dispatch",
        json!({"provider": "sim", "task": "  "}),
        "TASK_REQUIRED",
    )
    .await;
    refused(
        &client,
        "dispatch",
        json!({"provider": "nope", "task": "x"}),
        "INVALID_PROVIDER",
    )
    .await;
    refused(
        &client,
        "follow_up",
        json!({"run_id": "r-nope", "text": "x"}),
        "RUN_NOT_FOUND",
    )
    .await;
    refused(&client, "wait", json!({"run_ids": []}), "INVALID_SPEC").await;
    refused(
        &client,
        "models",
        json!({"provider": "nope"}),
        "INVALID_PROVIDER",
    )
    .await;

    // A server started inside a run dispatches sub-runs of that run.
    let parent = dispatch(&client, "multi-turn", "fan out").await;
    wait(&client, &parent, "idle").await;
    let inside = connect(&home, Some(&parent)).await;
    let sub = dispatch(&inside, "quick-success", "a sub-task").await;
    let shown = call(&inside, "show", json!({"run_id": sub})).await;
    assert_eq!(shown["parent_run"], parent.as_str());
    assert_eq!(shown["depth"], 1);
    // It is in its parent's workflow (the parent's id, as the parent names none).
    let family = runs_of(&call(&inside, "runs", json!({"workflow": parent})).await);
    let ids: Vec<&str> = family.iter().map(|r| str_at(r, "run_id")).collect();
    assert_eq!(ids, [sub.as_str()]);
    assert_eq!(family[0]["parent_run"], parent.as_str());
    let done = call(
        &inside,
        "wait",
        json!({"workflow": parent, "until": "idle", "timeout_secs": common::RUN_LIMIT_SECS}),
    )
    .await;
    assert_eq!(done["timed_out"], false, "{done}");
    assert_eq!(done["runs"][0]["run_id"], sub.as_str());
    let unknown = refused(
        &inside,
        "wait",
        json!({"workflow": "wf-none", "timeout_secs": 1}),
        "WORKFLOW_NOT_FOUND",
    )
    .await;
    assert!(unknown.contains("wf-none"), "{unknown}");
    call(&client, "stop", json!({"run_id": parent})).await;
    inside.cancel().await.expect("the inner session ends");

    client.cancel().await.expect("the session ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_come_a_page_at_a_time_as_drover_runs_lists_them() {
    let home = Home::new();
    // A long history: one finished run and 210 copies of it, each finished earlier.
    let done = home.seed_history(210);
    let _end_owner = EndOwner(&home);
    let client = connect(&home, None).await;
    let active = dispatch(&client, "tool-permission", "Fix greeting").await;
    wait(&client, &active, "needs_you").await;
    let ids = |page: &Value| -> Vec<String> {
        runs_of(page)
            .iter()
            .map(|r| str_at(r, "run_id").to_string())
            .collect()
    };
    let copies = |range: std::ops::RangeInclusive<usize>| -> Vec<String> {
        range.map(|i| format!("{done}-h{i:03}")).collect()
    };

    let schema = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .find(|t| t.name == "runs")
        .expect("the runs tool")
        .input_schema;
    for field in ["limit", "before", "search"] {
        assert!(
            schema["properties"].get(field).is_some(),
            "runs takes {field}"
        );
    }

    // By default: the active run and the 50 newest finished, as `drover runs` lists them.
    let first = call(&client, "runs", json!({})).await;
    let mut want = vec![active.clone(), done.clone()];
    want.extend(copies(1..=49));
    assert_eq!(ids(&first), want);
    let cli: Vec<String> = common::array(home.json(&["runs"]))
        .iter()
        .map(|r| str_at(r, "run_id").to_string())
        .collect();
    assert_eq!(cli, want, "the same window as `drover runs`");
    assert_eq!(first["next_before"], json!(format!("{done}-h049")));

    // The next page has no active run; the last one says there is none after it.
    let second = call(&client, "runs", json!({"before": first["next_before"]})).await;
    assert_eq!(ids(&second), copies(50..=99));
    let last = call(&client, "runs", json!({"before": format!("{done}-h199")})).await;
    assert_eq!(ids(&last), copies(200..=210));
    assert_eq!(last["next_before"], Value::Null);

    // A page holds at most 200 finished runs; 0 asks for the active runs alone.
    let most = call(&client, "runs", json!({"limit": 100_000})).await;
    assert_eq!(runs_of(&most).len(), 1 + 200);
    assert_eq!(most["next_before"], json!(format!("{done}-h199")));
    let only_active = call(&client, "runs", json!({"limit": 0})).await;
    assert_eq!(ids(&only_active), [active]);

    // A search looks through the whole history.
    let found = call(&client, "runs", json!({"search": "HISTORY 7"})).await;
    let mut want: Vec<String> = vec![format!("{done}-h007")];
    want.extend(copies(70..=79));
    assert_eq!(ids(&found), want);

    refused(
        &client,
        "runs",
        json!({"before": "no-such-run"}),
        "RUN_NOT_FOUND",
    )
    .await;
    let message = refused(
        &client,
        "runs",
        json!({"search": "x".repeat(201)}),
        "REQUEST_TOO_LARGE",
    )
    .await;
    assert!(message.contains("at most 200"), "{message}");
}

/// `drover mcp` as a child with raw pipes: lines written as given, answers read one per
/// line (each within a bound).
struct RawServer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    answers: std::sync::mpsc::Receiver<Value>,
}

impl RawServer {
    fn start(home: &Home) -> RawServer {
        use std::io::BufRead;
        let mut child = std::process::Command::new(common::drover_bin())
            .arg("mcp")
            .current_dir(home.work())
            .env("DROVER_HOME", home.path())
            .env_remove("DROVER_LOG")
            .env_remove("DROVER_RUN_ID")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn drover mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("drover mcp wrote a line that is not JSON: {e}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        RawServer {
            child,
            stdin,
            answers,
        }
    }

    fn send(&mut self, line: &[u8]) {
        use std::io::Write;
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn answer(&self) -> Value {
        self.answers
            .recv_timeout(CALL_LIMIT)
            .expect("drover mcp answers the line in time")
    }

    /// Closes stdin and waits (bounded) for the server to exit.
    fn finish(mut self) {
        drop(self.stdin);
        let status = common::wait_child(&mut self.child, CALL_LIMIT);
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        assert!(
            status.is_some_and(|s| s.success()),
            "drover mcp exits 0: {status:?}"
        );
    }
}

/// Every line gets an answer: `-32700` for each kind of line that does not parse,
/// `-32600` for JSON that is no request and for a line over the bound, `-32602` for
/// params that fit no method; unknown tool arguments are a tool error naming the known
/// ones; the session goes on after each.
#[test]
fn every_line_over_stdio_is_answered() {
    let home = Home::new();
    let mut server = RawServer::start(&home);
    server.send(
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
    );
    let init = server.answer();
    assert_eq!(init["id"], 0, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "drover", "{init}");
    server.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    let oversized = format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{{"name":"dispatch","arguments":{{"task":"{}"}}}}}}"#,
        "a".repeat(4 * 1024 * 1024)
    );
    // (what, line, the id answered, the code)
    let cases: Vec<(&str, Vec<u8>, Value, i64)> = vec![
        (
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\xc3\x28\"}".to_vec(),
            json!(1),
            -32700,
        ),
        (
            "a lone surrogate",
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"runs","arguments":{"search":"\udc00"}}}"#.to_vec(),
            json!(2),
            -32700,
        ),
        (
            "a NUL",
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"x\":\"\x00\"}".to_vec(),
            json!(3),
            -32700,
        ),
        ("deep nesting", deep.into_bytes(), Value::Null, -32700),
        (
            "truncated",
            br#"{"jsonrpc":"2.0","id":5,"method":"tools/list","par"#.to_vec(),
            json!(5),
            -32700,
        ),
        ("plain text", b"hello, server".to_vec(), Value::Null, -32700),
        ("a number", b"17".to_vec(), Value::Null, -32600),
        (
            "no jsonrpc",
            br#"{"id":7,"method":"ping"}"#.to_vec(),
            json!(7),
            -32600,
        ),
        (
            "neither method nor result",
            br#"{"jsonrpc":"2.0","id":8}"#.to_vec(),
            json!(8),
            -32600,
        ),
        (
            "params that fit no method",
            br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":7}"#.to_vec(),
            json!(9),
            -32602,
        ),
        ("over the bound", oversized.into_bytes(), json!("big"), -32600),
    ];
    for (what, line, id, code) in cases {
        server.send(&line);
        let answer = server.answer();
        assert_eq!(answer["id"], id, "{what}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{what}: {answer}");
        assert!(
            !answer["error"]["message"].as_str().unwrap().is_empty(),
            "{what}"
        );
        // The session is still there, answering in order.
        server.send(br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
        let pong = server.answer();
        assert_eq!(pong["id"], "p", "after {what}: {pong}");
        assert!(pong.get("result").is_some(), "after {what}: {pong}");
    }

    // Unknown tool arguments are refused, naming the known ones; nothing is dispatched.
    server.send(
        br#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"dispatch","arguments":{"task":"t","rm_rf":true}}}"#,
    );
    let refused = server.answer();
    assert_eq!(refused["id"], 20, "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let message = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("unknown field `rm_rf`") && message.contains("`task`"),
        "{message}"
    );
    // A call whose tool name is no string is answered too (by the session).
    server.send(br#"{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":7}}"#);
    let odd = server.answer();
    assert_eq!(odd["id"], 22, "{odd}");
    assert!(
        odd.get("error").is_some() || odd.get("result").is_some(),
        "{odd}"
    );
    // The schemas say so too.
    server.send(br#"{"jsonrpc":"2.0","id":21,"method":"tools/list"}"#);
    let tools = server.answer();
    let tools = tools["result"]["tools"].as_array().unwrap();
    assert!(!tools.is_empty());
    for tool in tools {
        assert_eq!(
            tool["inputSchema"]["additionalProperties"], false,
            "{}",
            tool["name"]
        );
    }
    server.finish();
    assert!(
        !drover_core::paths::Paths::under(home.path())
            .ledger_file
            .exists(),
        "no call reached an owner"
    );
}
