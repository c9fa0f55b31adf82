//! drover's MCP server under the official MCP Inspector's CLI (`@modelcontextprotocol/
//! inspector --cli`, pinned in `tests/peers/package.json`), run offline with `npx` from
//! `tests/peers/node_modules`: it lists the tools and calls every one of them against
//! `drover mcp` (on the simulated agent, in a temporary `DROVER_HOME`).
//!
//! This inspector passes every `--tool-arg` as a string, so the calls name no number or
//! list (a wait names the run's workflow).
//!
//! What must stay true: a missing inspector fails the test with the command that installs
//! it; every inspector call is bounded; the background owner `drover mcp` started is ended
//! by `drover shutdown` (the pid it reported), also when the test fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::peers::{base_env, cli_in, peers_dir, run_bounded};

/// The longest one inspector call may take (node starts, then drover mcp, then the owner).
const CALL: Duration = Duration::from_secs(90);

/// The tools `drover mcp` offers (the README lists them).
const TOOLS: [&str; 12] = [
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
    "wait",
];

struct World {
    home: tempfile::TempDir,
}

impl World {
    fn data(&self) -> PathBuf {
        self.home.path().join("drover")
    }

    fn work(&self) -> PathBuf {
        self.home.path().join("work")
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut env = base_env(&self.home.path().join("home"));
        env.push(("npm_config_update_notifier".into(), "false".into()));
        env
    }

    /// `npx @modelcontextprotocol/inspector --cli drover mcp ARGS…`, offline; its JSON.
    async fn inspector(&self, args: &[&str]) -> Value {
        let home = format!("DROVER_HOME={}", self.data().display());
        let mut all = vec![
            "--offline",
            "--no-install",
            "@modelcontextprotocol/inspector",
            "--cli",
            "-e",
            &home,
            env!("CARGO_BIN_EXE_drover"),
            "mcp",
        ];
        all.extend_from_slice(args);
        let (ok, stdout, stderr) =
            run_bounded(Path::new("npx"), &all, &self.env(), &peers_dir(), CALL).await;
        assert!(ok, "inspector {args:?} failed: {stdout}{stderr}");
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("inspector {args:?} printed no JSON ({e}): {stdout}"))
    }

    /// Calls `tool` with `key=value` arguments; its structured content and whether it
    /// was an error.
    async fn call(&self, tool: &str, args: &[String]) -> (Value, bool) {
        let mut all = vec!["--method", "tools/call", "--tool-name", tool];
        for arg in args {
            all.push("--tool-arg");
            all.push(arg);
        }
        let result = self.inspector(&all).await;
        let is_error = result["isError"] == true;
        (result["structuredContent"].clone(), is_error)
    }

    async fn ok(&self, tool: &str, args: &[String]) -> Value {
        let (content, is_error) = self.call(tool, args).await;
        assert!(!is_error, "{tool} {args:?}: {content}");
        content
    }

    async fn refused(&self, tool: &str, args: &[String], code: &str) {
        let (content, is_error) = self.call(tool, args).await;
        assert!(is_error, "{tool} {args:?} was refused: {content}");
        assert_eq!(content["error"]["code"], code, "{tool} {args:?}: {content}");
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // The background owner `drover mcp` started, by the pid it reported.
        let _ = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["shutdown", "--wait"])
            .env("DROVER_HOME", self.data())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_inspector_lists_and_calls_every_tool() {
    cli_in(&peers_dir(), "mcp-inspector");
    let world = World {
        home: tempfile::Builder::new()
            .prefix("drover-inspector-")
            .tempdir()
            .unwrap(),
    };
    for dir in ["drover", "work", "home"] {
        std::fs::create_dir_all(world.home.path().join(dir)).unwrap();
    }

    let listed = world.inspector(&["--method", "tools/list"]).await;
    let tools = listed["tools"].as_array().expect("a tool list");
    let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    for tool in tools {
        assert_eq!(
            tool["inputSchema"]["additionalProperties"], false,
            "{}",
            tool["name"]
        );
    }

    let work = format!("cwd={}", world.work().display());
    let run = world
        .ok(
            "dispatch",
            &[
                "provider=sim".into(),
                "scenario=quick-success".into(),
                "task=say hello".into(),
                "workflow_id=wf-inspector".into(),
                work.clone(),
            ],
        )
        .await;
    let run_id = run["run_id"].as_str().expect("a run id").to_string();
    let id = format!("run_id={run_id}");
    let waited = world
        .ok(
            "wait",
            &["workflow=wf-inspector".into(), "until=idle".into()],
        )
        .await;
    assert_eq!(waited["timed_out"], false, "{waited}");
    let listed = world.ok("runs", &[]).await;
    assert_eq!(listed["items"][0]["run_id"], run_id.as_str(), "{listed}");
    let shown = world.ok("show", std::slice::from_ref(&id)).await;
    assert_eq!(shown["run_id"], run_id.as_str(), "{shown}");
    let transcript = world
        .ok("transcript", &[id.clone(), "format=text".into()])
        .await;
    assert!(transcript["lines"].as_array().is_some(), "{transcript}");
    world
        .ok("follow_up", &[id.clone(), "text=once more".into()])
        .await;
    // No escalation is offered: a tool error with drover's code. A retry is a new run.
    world
        .refused("escalate", std::slice::from_ref(&id), "NO_ROUTE")
        .await;
    let again = world.ok("retry", std::slice::from_ref(&id)).await;
    let again = format!("run_id={}", again["run_id"].as_str().expect("a new run"));
    world
        .ok(
            "wait",
            &["workflow=wf-inspector".into(), "until=idle".into()],
        )
        .await;
    // The retry took the run's place (the first one is completed); it is completed too,
    // and a stop of either is refused.
    world.ok("complete", std::slice::from_ref(&again)).await;
    world
        .refused("stop", std::slice::from_ref(&id), "RUN_NOT_ACTIVE")
        .await;
    let budget = world.ok("budget", &[]).await;
    assert!(budget.is_object(), "{budget}");
    let models = world.ok("models", &["provider=sim".into()]).await;
    assert!(!models["models"].as_array().unwrap().is_empty(), "{models}");
    // An argument no tool takes is refused, naming the ones it does.
    let refusal = world
        .inspector(&[
            "--method",
            "tools/call",
            "--tool-name",
            "show",
            "--tool-arg",
            &id,
            "--tool-arg",
            "rm_rf=true",
        ])
        .await;
    assert_eq!(refusal["isError"], true, "{refusal}");
    let text = refusal["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("`rm_rf`") && text.contains("`run_id`"),
        "{text}"
    );
}
