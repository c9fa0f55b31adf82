//! `cargo bench --bench peers`: for each real CLI, one run (one turn, a text answer, the
//! process ended) directly against its mock model API, then the same through drover
//! (`drover dispatch --max-turns 1 --wait` to a `drover serve`), alternating, with drover
//! serve's peak resident memory (VmHWM). Prints figures; asserts nothing about speed.
//!
//! - Claude Code: the CLI driven over stream-json as drover's adapter drives it.
//! - Codex: `codex exec --json` (drover runs the same for policy `auto`).
//! - OpenCode: `opencode run --format json` (its own in-process server); drover runs
//!   `opencode serve` and drives it over HTTP.
//! - `opencode acp`: the agent driven directly over ACP (JSON-RPC lines: `initialize`,
//!   `session/new`, one `session/prompt`, stdin closed, exit) vs drover's `opencode-acp`
//!   provider (docs/PROVIDERS.md §"ACP agents").
//!
//! Needs the pinned CLIs (`npm ci` in tests/peers, or scripts/test.sh). An argument
//! (`claude`, `codex`, `opencode`, `opencode-acp`) runs only that CLI.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

#[allow(dead_code)]
#[path = "acp.rs"]
mod acp;
#[allow(dead_code)]
#[path = "caps.rs"]
mod caps;
#[allow(dead_code, unused_imports)]
#[path = "codex.rs"]
mod codex;
#[allow(dead_code)]
#[path = "drover.rs"]
mod drover;
#[allow(dead_code)]
#[path = "loopback.rs"]
mod loopback;
#[allow(dead_code)]
#[path = "mock/mod.rs"]
mod mock;
#[allow(dead_code, unused_imports)]
#[path = "opencode.rs"]
mod opencode;
#[allow(dead_code)]
#[path = "peers.rs"]
mod peers;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use drover::{Drover, proc_status_kib, provider_config};
use mock::{MockApi, Protocol};

/// Measured runs per side (after one warm-up run each).
const RUNS: usize = 7;
const MODEL: &str = "claude-sonnet-4-5";
/// The prompt of every run.
const PROMPT: &str = "Say hello.";
const BOUND: Duration = Duration::from_secs(120);

/// One direct run the way drover's adapter drives the CLI: handshake, one user turn, the
/// `result`, stdin closed, exit. Returns (time to `result`, time to exit, the CLI's VmHWM
/// in KiB just before it was told to end).
async fn direct_run(claude: &Path, root: &Path, mock: &MockApi) -> (Duration, Duration, u64) {
    let mut env = peers::base_env(&root.join("home"));
    env.extend(peers::claude_env(root, &mock.url()));
    let started = Instant::now();
    let mut child = tokio::process::Command::new(claude)
        .args(::drover_core::providers::claude::args::PROTOCOL_FLAGS)
        .args(["--permission-mode", "default", "--model", MODEL])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(root.join("work"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("claude starts");
    let pid = child.id().expect("claude's pid");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = json!({"type": "control_request", "request_id": "req_init",
                      "request": {"subtype": "initialize", "hooks": null}});
    let user = json!({"type": "user", "message": {"role": "user", "content": "Say hello."},
                      "parent_tool_use_id": null, "session_id": "default"});
    for line in [init, user] {
        stdin
            .write_all((line.to_string() + "\n").as_bytes())
            .await
            .expect("claude reads stdin");
    }
    let to_result = tokio::time::timeout(BOUND, async {
        while let Some(line) = lines.next_line().await.expect("claude's stdout") {
            if serde_json::from_str::<Value>(&line).is_ok_and(|v| v["type"] == "result") {
                return started.elapsed();
            }
        }
        panic!("claude ended without a result");
    })
    .await
    .expect("claude answered in time");
    let peak = proc_status_kib(pid, "VmHWM").unwrap_or(0);
    drop(stdin);
    tokio::time::timeout(BOUND, async {
        while let Ok(Some(_)) = lines.next_line().await {}
        child.wait().await
    })
    .await
    .expect("claude exited in time")
    .expect("waiting for claude");
    (to_result, started.elapsed(), peak)
}

/// One run through drover: `dispatch --max-turns 1 --wait` (the run ends after its turn,
/// the child is ended, the end recorded). `flags` name the provider, model and policy.
/// Returns (the command's wall time, the time from the run's creation to its turn's end
/// as drover recorded them).
async fn drover_run(drover: &Drover, flags: &[&str]) -> (Duration, Duration) {
    let started = Instant::now();
    let work = drover.work_dir().display().to_string();
    let mut args = vec!["dispatch"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&[
        "--max-turns",
        "1",
        "--cwd",
        &work,
        "--wait",
        "--json",
        PROMPT,
    ]);
    let out = drover.run(&args).await;
    let wall = started.elapsed();
    assert!(out.success, "dispatch failed: {}{}", out.stdout, out.stderr);
    let answer: Value =
        serde_json::from_str(out.stdout.lines().next().unwrap_or("")).expect("dispatch JSON");
    let run = answer
        .get("run_id")
        .or_else(|| answer.get("run").and_then(|r| r.get("run_id")))
        .and_then(Value::as_str)
        .expect("a run id")
        .to_string();
    let view = drover.show(&run).await;
    assert_eq!(view["state"], "completed", "{view:#}");
    let turn_end =
        view["turns"][0]["ended_at"].as_i64().unwrap() - view["created_at"].as_i64().unwrap();
    (wall, Duration::from_millis(turn_end.max(0) as u64))
}

/// One direct run of a CLI that ends by itself: spawn with `env` only, stdin closed,
/// wait for the exit (bounded). Returns the wall time.
async fn direct_exit(
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    cwd: &Path,
) -> Duration {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{} starts: {e}", program.display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let status = tokio::time::timeout(BOUND, async {
        while let Ok(Some(_)) = lines.next_line().await {}
        child.wait().await
    })
    .await
    .unwrap_or_else(|_| panic!("{} ended in time", program.display()))
    .expect("waiting for the CLI");
    assert!(status.success(), "{} failed: {status}", program.display());
    started.elapsed()
}

/// What one CLI measured: direct wall times, through-drover wall times and turn times,
/// drover serve's peak before and after.
struct Figures {
    direct: Vec<f64>,
    walls: Vec<f64>,
    turns: Vec<f64>,
    idle_peak: u64,
    serve_peak: u64,
}

impl Figures {
    fn print(&self, title: &str, direct: &str) {
        println!("\n{title}, {RUNS} runs each after a warm-up:");
        line(direct, &self.direct);
        line("drover: dispatch --wait (the whole run)", &self.walls);
        line("drover: run created to turn ended", &self.turns);
        println!(
            "drover serve peak RSS (VmHWM): {:.1} MiB after start, {:.1} MiB after {} runs",
            self.idle_peak as f64 / 1024.0,
            self.serve_peak as f64 / 1024.0,
            RUNS + 1
        );
    }
}

/// Alternates `direct` and a drover run (`flags`), a warm-up of each first, so a change
/// in the machine's load weighs on both alike.
async fn alternate<F, Fut>(drover: &Drover, flags: &[&str], mut direct: F) -> Figures
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Duration>,
{
    let idle_peak = drover.serve_peak_rss_kib().unwrap_or(0);
    direct().await;
    drover_run(drover, flags).await;
    let (mut directs, mut walls, mut turns) = (vec![], vec![], vec![]);
    for _ in 0..RUNS {
        directs.push(ms(direct().await));
        let (wall, turn) = drover_run(drover, flags).await;
        walls.push(ms(wall));
        turns.push(ms(turn));
    }
    Figures {
        direct: directs,
        walls,
        turns,
        idle_peak,
        serve_peak: drover.serve_peak_rss_kib().unwrap_or(0),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn line(name: &str, v: &[f64]) {
    let shown: Vec<String> = v.iter().map(|x| format!("{x:.0}")).collect();
    println!(
        "{name:<44} median {:>6.0} ms   min {:>6.0} ms   runs [{}]",
        median(v.to_vec()),
        v.iter().copied().fold(f64::INFINITY, f64::min),
        shown.join(", ")
    );
}

async fn bench_claude() {
    let claude = peers::cli("claude");
    // The script is empty: every turn gets the mock's default text with a result block.
    let mock = MockApi::start(Protocol::AnthropicMessages, []).await;
    let direct_root = tempfile::tempdir().unwrap();
    for dir in ["home", "work", "claude-config"] {
        std::fs::create_dir_all(direct_root.path().join(dir)).unwrap();
    }
    let drover = Drover::start_with(|root| {
        provider_config(
            "claude-code",
            &claude,
            &peers::claude_env(root, &mock.url()),
        )
    })
    .await;
    let peaks = std::cell::RefCell::new(Vec::new());
    let flags = [
        "--provider",
        "claude-code",
        "--model",
        MODEL,
        "--policy",
        "ask",
    ];
    let figures = alternate(&drover, &flags, || {
        let (claude, root, mock) = (&claude, direct_root.path(), &mock);
        let peaks = &peaks;
        async move {
            let (_, whole, peak) = direct_run(claude, root, mock).await;
            peaks.borrow_mut().push(peak as f64 / 1024.0);
            whole
        }
    })
    .await;
    figures.print(
        &format!(
            "claude {} against the mock Anthropic API",
            peers::pinned_version("@anthropic-ai/claude-code")
        ),
        "direct: spawn to exit (stream-json, one turn)",
    );
    println!(
        "claude's own peak RSS (VmHWM) per direct run: median {:.0} MiB",
        median(peaks.into_inner())
    );
}

async fn bench_codex() {
    let program = peers::cli("codex");
    let mock = MockApi::start(Protocol::OpenAiResponses, []).await;
    let direct_root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(direct_root.path().join("work")).unwrap();
    let mut env = peers::base_env(&direct_root.path().join("home"));
    env.extend(codex::codex_env(direct_root.path()));
    codex::write_config(&direct_root.path().join("codex-home"), &mock, 0);
    let drover = Drover::start_with(|root| {
        let env = codex::codex_env(root);
        codex::write_config(&root.join("codex-home"), &mock, 0);
        provider_config("codex", &program, &env)
    })
    .await;
    let work = direct_root.path().join("work");
    let work_arg = work.display().to_string();
    let args = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-m",
        codex::MODEL,
        "-s",
        "workspace-write",
        "-C",
        &work_arg,
        PROMPT,
    ];
    let flags = [
        "--provider",
        "codex",
        "--model",
        codex::MODEL,
        "--policy",
        "auto",
    ];
    let figures = alternate(&drover, &flags, || {
        direct_exit(&program, &args, &env, &work)
    })
    .await;
    figures.print(
        &format!(
            "codex {} against the mock Responses API",
            peers::pinned_version("@openai/codex")
        ),
        "direct: codex exec --json (the whole run)",
    );
}

async fn bench_opencode() {
    let program = peers::cli("opencode");
    let mock = MockApi::start(Protocol::OpenAiChat, []).await;
    let direct_root = tempfile::tempdir().unwrap();
    for dir in ["home", "work"] {
        std::fs::create_dir_all(direct_root.path().join(dir)).unwrap();
    }
    let config_file = direct_root.path().join("opencode.json");
    std::fs::write(
        &config_file,
        opencode::opencode_config(&mock.url()).to_string(),
    )
    .unwrap();
    let mut env = peers::base_env(&direct_root.path().join("home"));
    env.extend(opencode::opencode_env(direct_root.path(), &config_file));
    let drover = Drover::start_with(|root| opencode::drover_config(root, &mock.url())).await;
    let work = direct_root.path().join("work");
    let args = [
        "run",
        "--format",
        "json",
        "--model",
        opencode::MODEL,
        PROMPT,
    ];
    let flags = [
        "--provider",
        "opencode",
        "--model",
        opencode::MODEL,
        "--policy",
        "auto",
    ];
    let figures = alternate(&drover, &flags, || {
        direct_exit(&program, &args, &env, &work)
    })
    .await;
    figures.print(
        &format!(
            "opencode {} against the mock chat completions API",
            peers::pinned_version("opencode-ai")
        ),
        "direct: opencode run --format json (the whole run)",
    );
}

/// The result of the JSON-RPC answer with `id` among the agent's lines (the
/// notifications and requests before it are skipped).
async fn acp_answer(
    id: i64,
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> Value {
    while let Some(line) = lines.next_line().await.expect("opencode acp's stdout") {
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if value["id"] == id && value.get("method").is_none() {
            assert!(value.get("error").is_none(), "{value}");
            return value["result"].clone();
        }
    }
    panic!("opencode acp ended before it answered {id}");
}

/// One direct run of `opencode acp` over ACP, as drover's adapter drives it:
/// `initialize`, `session/new`, one `session/prompt` answered, stdin closed, the exit
/// (SIGKILL after 3 s, as drover's shutdown ends what does not exit by itself). Returns
/// the wall time.
async fn direct_acp_run(program: &Path, env: &[(String, String)], cwd: &Path) -> Duration {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(program)
        .arg("acp")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("opencode acp starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |value: Value| {
        stdin
            .write_all((value.to_string() + "\n").as_bytes())
            .await
            .expect("opencode acp reads stdin");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}}),
    )
    .await;
    let cwd_text = cwd.display().to_string();
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": cwd_text, "mcpServers": []}}))
    .await;
    let session = tokio::time::timeout(BOUND, acp_answer(2, &mut lines))
        .await
        .expect("session/new answered in time");
    let session_id = session["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT}]}}),
    )
    .await;
    tokio::time::timeout(BOUND, acp_answer(3, &mut lines))
        .await
        .expect("session/prompt answered in time");
    drop(stdin);
    let exited = tokio::time::timeout(Duration::from_secs(3), async {
        while let Ok(Some(_)) = lines.next_line().await {}
        child.wait().await
    })
    .await;
    if exited.is_err() {
        child.kill().await.expect("opencode acp is killed");
    }
    started.elapsed()
}

async fn bench_opencode_acp() {
    let program = peers::cli("opencode");
    let mock = MockApi::start(Protocol::OpenAiChat, []).await;
    let direct_root = tempfile::tempdir().unwrap();
    for dir in ["home", "work"] {
        std::fs::create_dir_all(direct_root.path().join(dir)).unwrap();
    }
    let config_file = direct_root.path().join("opencode.json");
    std::fs::write(
        &config_file,
        opencode::opencode_config(&mock.url()).to_string(),
    )
    .unwrap();
    let mut env = peers::base_env(&direct_root.path().join("home"));
    env.extend(opencode::opencode_env(direct_root.path(), &config_file));
    let agent = acp::Agent::OpenCode;
    let drover = Drover::start_with(|root| agent.config(root, &mock)).await;
    let work = direct_root.path().join("work");
    let flags = ["--provider", agent.provider()];
    let figures = alternate(&drover, &flags, || direct_acp_run(&program, &env, &work)).await;
    figures.print(
        &format!(
            "opencode acp {} against the mock chat completions API",
            peers::pinned_version("opencode-ai")
        ),
        "direct: opencode acp over ACP (the whole run)",
    );
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        if wanted("claude") {
            bench_claude().await;
        }
        if wanted("codex") {
            bench_codex().await;
        }
        if wanted("opencode") {
            bench_opencode().await;
        }
        if wanted("opencode-acp") {
            bench_opencode_acp().await;
        }
    });
}
