//! `cargo bench --bench peers`: one Claude Code run (one turn, a text answer, the
//! process ended) directly against the mock Anthropic API, then the same through drover
//! (`drover dispatch --max-turns 1 --wait` to a `drover serve`), alternating, with drover
//! serve's peak resident memory (VmHWM). Prints figures; asserts nothing about speed.
//!
//! Needs the pinned CLIs (`npm ci` in tests/peers, or scripts/test.sh).

#[allow(dead_code)]
#[path = "drover.rs"]
mod drover;
#[allow(dead_code)]
#[path = "mock/mod.rs"]
mod mock;
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
const BOUND: Duration = Duration::from_secs(120);

/// One direct run the way drover's adapter drives the CLI: handshake, one user turn, the
/// `result`, stdin closed, exit. Returns (time to `result`, time to exit, the CLI's VmHWM
/// in KiB just before it was told to end).
async fn direct_run(claude: &Path, root: &Path, mock: &MockApi) -> (Duration, Duration, u64) {
    let mut env = peers::base_env(&root.join("home"));
    env.extend(peers::claude_env(root, &mock.url()));
    let started = Instant::now();
    let mut child = tokio::process::Command::new(claude)
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-prompt-tool",
            "stdio",
            "--permission-mode",
            "default",
            "--model",
            MODEL,
        ])
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
/// the child is ended, the end recorded). Returns (the command's wall time, the time from
/// the run's creation to its turn's end as drover recorded them).
async fn drover_run(drover: &Drover) -> (Duration, Duration) {
    let started = Instant::now();
    let work = drover.work_dir().display().to_string();
    let out = drover
        .run(&[
            "dispatch",
            "--provider",
            "claude-code",
            "--model",
            MODEL,
            "--max-turns",
            "1",
            "--cwd",
            &work,
            "--wait",
            "--json",
            "Say hello.",
        ])
        .await;
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

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
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
        let idle_peak = drover.serve_peak_rss_kib().unwrap_or(0);
        // A warm-up run each, then the two kinds alternate, so a change in the machine's
        // load weighs on both alike.
        direct_run(&claude, direct_root.path(), &mock).await;
        drover_run(&drover).await;
        let (mut to_result, mut to_exit, mut peaks) = (vec![], vec![], vec![]);
        let (mut walls, mut turns) = (vec![], vec![]);
        for _ in 0..RUNS {
            let (r, e, p) = direct_run(&claude, direct_root.path(), &mock).await;
            to_result.push(ms(r));
            to_exit.push(ms(e));
            peaks.push(p as f64 / 1024.0);
            let (wall, turn) = drover_run(&drover).await;
            walls.push(ms(wall));
            turns.push(ms(turn));
        }
        let serve_peak = drover.serve_peak_rss_kib().unwrap_or(0);

        println!(
            "claude {} against the mock Anthropic API, {RUNS} runs each after a warm-up:",
            peers::pinned_version("@anthropic-ai/claude-code")
        );
        line("direct: spawn to result", &to_result);
        line("direct: spawn to exit (the whole run)", &to_exit);
        line("drover: dispatch --wait (the whole run)", &walls);
        line("drover: run created to turn ended", &turns);
        println!(
            "claude's own peak RSS (VmHWM) per direct run: median {:.0} MiB",
            median(peaks)
        );
        println!(
            "drover serve peak RSS (VmHWM): {:.1} MiB after start, {:.1} MiB after {} runs",
            idle_peak as f64 / 1024.0,
            serve_peak as f64 / 1024.0,
            RUNS + 1
        );
        println!(
            "model requests served by the mock: {}",
            mock.model_requests().len()
        );
    });
}
