//! `cargo bench --bench peers`: for each real CLI, one run (one turn, a text answer, the
//! process ended) directly against its mock model API, then the same through drover
//! (`drover dispatch --max-turns 1 --wait` to a `drover serve`, logging at drover's
//! default level as a user runs it), alternating, with drover serve's peak resident
//! memory (VmHWM). Prints figures; asserts nothing about speed.
//!
//! Each pair (a direct run and a drover run, which goes first swapping from pair to pair)
//! gives one ratio, drover / direct; the figure is the median of those ratios over
//! `DROVER_BENCH_PAIRS` pairs (default 31, after one warm-up pair), so a change in the
//! machine's load weighs on both sides of a pair alike. Where drover's side goes is split
//! by the ledger's clock: from the command's start to the run's creation, the run's first
//! turn, and from the turn's end to the command's exit.
//!
//! - Claude Code: the CLI driven over stream-json as drover's adapter drives it.
//! - Codex: `codex exec --json` (drover runs the same for policy `auto`), as npm's `codex`
//!   launcher runs it (Node, then the native binary) and as the native binary alone,
//!   which is what drover starts.
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

/// Measured pairs (after one warm-up pair), unless `DROVER_BENCH_PAIRS` says otherwise.
/// One pair's ratio moves by ±10 % with the CLI's own start (Claude Code's most); the
/// median of 31 moves by about ±2 %, of 15 by about ±3 %, as wide as the 1.02× target.
const PAIRS: usize = 31;

fn pairs() -> usize {
    std::env::var("DROVER_BENCH_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(PAIRS)
}
const MODEL: &str = "claude-sonnet-4-5";
/// The prompt of every run.
const PROMPT: &str = "Say hello.";
const BOUND: Duration = Duration::from_secs(120);

/// What one direct Claude Code run took.
struct DirectClaude {
    /// Spawn to the answer to `initialize` (drover's handshake).
    to_init: Duration,
    /// Spawn to the `result`.
    to_result: Duration,
    /// Spawn to exit.
    whole: Duration,
    /// The CLI's VmHWM in KiB just before it was told to end.
    peak: u64,
}

/// One direct run the way drover's adapter drives the CLI: handshake, one user turn, the
/// `result`, stdin closed, exit.
async fn direct_run(claude: &Path, root: &Path, mock: &MockApi) -> DirectClaude {
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
    let mut to_init = Duration::ZERO;
    let to_result = tokio::time::timeout(BOUND, async {
        while let Some(line) = lines.next_line().await.expect("claude's stdout") {
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["type"] == "control_response" && to_init.is_zero() {
                to_init = started.elapsed();
            }
            if v["type"] == "result" {
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
    DirectClaude {
        to_init,
        to_result,
        whole: started.elapsed(),
        peak,
    }
}

/// Where one run through drover spent its wall time, by the ledger's clock (ms since
/// the epoch, so each part is whole milliseconds).
#[derive(Clone, Copy, Default)]
struct Split {
    /// The command's start to the run's creation (the CLI starting, the dispatch
    /// request, its commit).
    to_created: f64,
    /// The run's creation to its turn's start (the child's start and handshake).
    to_turn: f64,
    /// The turn, as drover recorded it.
    turn: f64,
    /// The turn's end to the run's end (the child ended and reaped, the end committed).
    to_end: f64,
    /// The run's end to the command's exit (the wait's answer, the command ending).
    to_exit: f64,
}

/// One run through drover: `dispatch --max-turns 1 --wait` (the run ends after its turn,
/// the child is ended, the end recorded). `flags` name the provider, model and policy.
/// Returns the command's wall time and where it went.
async fn drover_run(drover: &Drover, flags: &[&str]) -> (Duration, Split) {
    let started = Instant::now();
    let started_ms = ::drover_core::clock::now_millis();
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
    let out = drover.run_within(&args, BOUND).await;
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
    let at = |v: &Value| v.as_i64().unwrap() as f64;
    let created = at(&view["created_at"]);
    let turn_started = at(&view["turns"][0]["started_at"]);
    let turn_ended = at(&view["turns"][0]["ended_at"]);
    let finished = at(&view["finished_at"]);
    let split = Split {
        to_created: created - started_ms as f64,
        to_turn: turn_started - created,
        turn: turn_ended - turn_started,
        to_end: finished - turn_ended,
        to_exit: ms(wall) - (finished - started_ms as f64),
    };
    (wall, split)
}

/// One direct run of a CLI that ends by itself: spawn with `env` only, stdin closed,
/// wait for the exit (bounded). Returns the wall time.
async fn direct_exit(
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    cwd: &Path,
) -> Duration {
    direct_exit_tail(program, args, env, cwd).await.0
}

/// [`direct_exit`], with the time from the CLI's last line to its exit (what drover's
/// "turn ended to run ended" holds of the CLI's own).
async fn direct_exit_tail(
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    cwd: &Path,
) -> (Duration, Duration) {
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
    let mut last_line = Duration::ZERO;
    let status = tokio::time::timeout(BOUND, async {
        while let Ok(Some(_)) = lines.next_line().await {
            last_line = started.elapsed();
        }
        child.wait().await
    })
    .await
    .unwrap_or_else(|_| panic!("{} ended in time", program.display()))
    .expect("waiting for the CLI");
    assert!(status.success(), "{} failed: {status}", program.display());
    let whole = started.elapsed();
    (whole, whole.saturating_sub(last_line))
}

/// One direct run of `opencode serve` driven over HTTP as drover drives it (the bare
/// counterpart of drover's OpenCode runs, which `opencode run` is not: that is one process
/// with its server inside): start it on a free loopback port, wait for its "listening"
/// line, subscribe to `/event`, make a session, send the prompt (`prompt_async`), wait
/// for the session's `session.idle`, then SIGTERM its process group and wait for its
/// exit. Returns the wall time.
async fn direct_serve(program: &Path, env: &[(String, String)], cwd: &Path) -> Duration {
    const PASSWORD: &str = "bench-password";
    let started = Instant::now();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let permission = ::drover_core::providers::opencode::launch::permission_rules(
        ::drover_core::spec::PermissionPolicy::Auto,
        ::drover_core::spec::Capability::Workspace,
    );
    let mut child = tokio::process::Command::new(program)
        .args([
            "serve",
            "--hostname",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("OPENCODE_SERVER_USERNAME", "opencode")
        .env("OPENCODE_SERVER_PASSWORD", PASSWORD)
        .env("OPENCODE_PERMISSION", permission.to_string())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("opencode serve starts");
    let pid = child.id().expect("the server's pid") as i32;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    tokio::time::timeout(BOUND, async {
        while let Some(line) = lines.next_line().await.expect("the server's stdout") {
            if line.contains("listening on") {
                return;
            }
        }
        panic!("opencode serve ended before it listened");
    })
    .await
    .expect("opencode serve listened in time");
    // Keep reading what it says, so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut events = client
        .get(format!("{base}/event"))
        .basic_auth("opencode", Some(PASSWORD))
        .send()
        .await
        .expect("the event stream")
        .error_for_status()
        .expect("the event stream is served");
    let session: Value = client
        .post(format!("{base}/session"))
        .basic_auth("opencode", Some(PASSWORD))
        .json(&json!({}))
        .send()
        .await
        .expect("a session")
        .json()
        .await
        .expect("the session as JSON");
    let id = session["id"].as_str().expect("a session id").to_string();
    let (provider, model) = opencode::MODEL.split_once('/').unwrap();
    client
        .post(format!("{base}/session/{id}/prompt_async"))
        .basic_auth("opencode", Some(PASSWORD))
        .json(&json!({"parts": [{"type": "text", "text": PROMPT}],
                      "model": {"providerID": provider, "modelID": model}}))
        .send()
        .await
        .expect("the prompt")
        .error_for_status()
        .expect("the prompt is taken");
    let idle = format!("\"sessionID\":\"{id}\"");
    tokio::time::timeout(BOUND, async {
        let mut seen = String::new();
        while let Some(chunk) = events.chunk().await.expect("the event stream") {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = seen.find("\n\n") {
                let event: String = seen.drain(..end + 2).collect();
                if event.contains("\"session.idle\"") && event.contains(&idle) {
                    return;
                }
            }
        }
        panic!("the event stream ended before the session was idle");
    })
    .await
    .expect("the turn ended in time");
    drop(events);
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM the server's group");
    tokio::time::timeout(BOUND, child.wait())
        .await
        .expect("opencode serve exited in time")
        .expect("waiting for opencode serve");
    started.elapsed()
}

/// What one CLI measured: direct wall times, through-drover wall times and where they
/// went, drover serve's peak before and after.
struct Figures {
    /// Per counterpart, its wall times.
    direct: Vec<Vec<f64>>,
    walls: Vec<f64>,
    splits: Vec<Split>,
    idle_peak: u64,
    serve_peak: u64,
}

impl Figures {
    /// `names`: the direct counterparts, in the order the direct closure runs them.
    fn print(&self, title: &str, names: &[&str]) {
        let n = self.walls.len();
        println!("\n{title}, {n} pairs after a warm-up pair:");
        for (name, direct) in names.iter().zip(&self.direct) {
            line(name, direct);
        }
        line("drover: dispatch --wait (the whole run)", &self.walls);
        let part = |f: fn(&Split) -> f64| self.splits.iter().map(f).collect::<Vec<_>>();
        line("  command start to run created", &part(|s| s.to_created));
        line("  run created to turn started", &part(|s| s.to_turn));
        line("  the turn", &part(|s| s.turn));
        line("  turn ended to run ended", &part(|s| s.to_end));
        line("  run ended to command exit", &part(|s| s.to_exit));
        for (name, direct) in names.iter().zip(&self.direct) {
            let ratios: Vec<f64> = self.walls.iter().zip(direct).map(|(w, d)| w / d).collect();
            let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            let name = name.split(':').nth(1).unwrap_or(name).trim();
            println!(
                "drover / {name}, per pair: median {:.3}× (ratio of medians {:.3}×)\n  pairs [{}]",
                median(ratios.clone()),
                median(self.walls.clone()) / median(direct.clone()),
                shown.join(", ")
            );
        }
        println!(
            "drover serve peak RSS (VmHWM): {:.1} MiB after start, {:.1} MiB after {} runs",
            self.idle_peak as f64 / 1024.0,
            self.serve_peak as f64 / 1024.0,
            n + 1
        );
    }
}

/// Alternates `direct` (one run of each direct counterpart, in order) and a drover run
/// (`flags`), a warm-up pair first, so a change in the machine's load weighs on both
/// alike. Which side goes first swaps from pair to pair (direct first in the even pairs,
/// drover in the odd), so whatever one run leaves behind for the next (a warm cache, a
/// process still ending) falls on both sides alike.
async fn alternate<F, Fut>(drover: &Drover, flags: &[&str], mut direct: F) -> Figures
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Vec<Duration>>,
{
    let idle_peak = drover.serve_peak_rss_kib().unwrap_or(0);
    direct().await;
    drover_run(drover, flags).await;
    let (mut directs, mut walls, mut splits) = (Vec::<Vec<f64>>::new(), vec![], vec![]);
    for pair in 0..pairs() {
        let (took, (wall, split)) = if pair % 2 == 0 {
            let took = direct().await;
            (took, drover_run(drover, flags).await)
        } else {
            let through = drover_run(drover, flags).await;
            (direct().await, through)
        };
        for (i, took) in took.into_iter().enumerate() {
            if directs.len() <= i {
                directs.push(Vec::new());
            }
            directs[i].push(ms(took));
        }
        walls.push(ms(wall));
        splits.push(split);
    }
    Figures {
        direct: directs,
        walls,
        splits,
        idle_peak,
        serve_peak: drover.serve_peak_rss_kib().unwrap_or(0),
    }
}

/// What a direct run noted on the side, one value per run, without the warm-up pair's.
fn after_warm_up(v: std::cell::RefCell<Vec<f64>>) -> Vec<f64> {
    v.into_inner().split_off(1)
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
    let drover = Drover::start_as_a_user_runs(|root| {
        provider_config(
            "claude-code",
            &claude,
            &peers::claude_env(root, &mock.url()),
        )
    })
    .await;
    let peaks = std::cell::RefCell::new(Vec::new());
    let inits = std::cell::RefCell::new(Vec::new());
    let ends = std::cell::RefCell::new(Vec::new());
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
        let (peaks, inits, ends) = (&peaks, &inits, &ends);
        async move {
            let run = direct_run(claude, root, mock).await;
            peaks.borrow_mut().push(run.peak as f64 / 1024.0);
            inits.borrow_mut().push(ms(run.to_init));
            ends.borrow_mut().push(ms(run.whole - run.to_result));
            vec![run.whole]
        }
    })
    .await;
    figures.print(
        &format!(
            "claude {} against the mock Anthropic API",
            peers::pinned_version("@anthropic-ai/claude-code")
        ),
        &["direct: spawn to exit (stream-json, one turn)"],
    );
    // The direct run's parts that drover's split has too.
    line(
        "direct: spawn to initialize answered",
        &after_warm_up(inits),
    );
    line("direct: result to exit", &after_warm_up(ends));
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
    let drover = Drover::start_as_a_user_runs(|root| {
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
    // drover runs the native binary behind npm's `codex` launcher (no Node per child):
    // both are timed, the command a user types and the binary drover starts.
    let native = ::drover_core::providers::codex::native::behind_launcher(&program, None)
        .expect("the pinned codex is npm's launcher over a native binary");
    let mut native_env = env.clone();
    native_env.extend(native.env.clone());
    let tails = std::cell::RefCell::new(Vec::new());
    let figures = alternate(&drover, &flags, || async {
        let launcher = direct_exit(&program, &args, &env, &work).await;
        let (alone, tail) = direct_exit_tail(&native.binary, &args, &native_env, &work).await;
        tails.borrow_mut().push(ms(tail));
        vec![launcher, alone]
    })
    .await;
    figures.print(
        &format!(
            "codex {} against the mock Responses API",
            peers::pinned_version("@openai/codex")
        ),
        &[
            "direct: codex exec --json (the whole run)",
            "direct: its native binary, no launcher",
        ],
    );
    line("direct: native, last line to exit", &after_warm_up(tails));
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
    let drover =
        Drover::start_as_a_user_runs(|root| opencode::drover_config(root, &mock.url())).await;
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
    // Two direct counterparts: `opencode run`, what a user types, and `opencode serve`
    // driven over HTTP, what drover runs.
    let tails = std::cell::RefCell::new(Vec::new());
    let figures = alternate(&drover, &flags, || async {
        let (run, tail) = direct_exit_tail(&program, &args, &env, &work).await;
        tails.borrow_mut().push(ms(tail));
        vec![run, direct_serve(&program, &env, &work).await]
    })
    .await;
    figures.print(
        &format!(
            "opencode {} against the mock chat completions API",
            peers::pinned_version("opencode-ai")
        ),
        &[
            "direct: opencode run --format json",
            "direct: opencode serve over HTTP",
        ],
    );
    line(
        "direct: opencode run, last line to exit",
        &after_warm_up(tails),
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
    let drover = Drover::start_as_a_user_runs(|root| agent.config(root, &mock)).await;
    let work = direct_root.path().join("work");
    let flags = ["--provider", agent.provider()];
    let figures = alternate(&drover, &flags, || async {
        vec![direct_acp_run(&program, &env, &work).await]
    })
    .await;
    figures.print(
        &format!(
            "opencode acp {} against the mock chat completions API",
            peers::pinned_version("opencode-ai")
        ),
        &["direct: opencode acp over ACP (the whole run)"],
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
