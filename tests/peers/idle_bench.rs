//! `cargo bench --bench idle`: what idle runs of the real CLIs (on the mock model APIs)
//! cost warm and hibernated. Prints figures; asserts nothing about speed or memory.
//!
//! - memory: `IDLE_RUNS` idle `claude` runs, warm (`hibernate_after_secs = 0`), then
//!   hibernated (the config turned to 1 s, re-read without a restart): the resident
//!   memory (VmRSS) of every process under `drover serve` and of the runs' process
//!   groups, summed, and each run's CLI's peak (VmHWM) while warm;
//! - latency: from `drover follow-up` to the model API receiving the turn's request, on
//!   a warm run, on a hibernated one, and on a hibernated one woken ahead as the
//!   dashboard does when its follow-up box opens (`drover wake`, then the follow-up
//!   `TYPING` later: the time to write it), (claude; codex app-server); and, for
//!   comparison, each CLI alone with no drover (claude; codex app-server): from writing a
//!   turn on its stdin to the model API receiving the request, the first turn of a
//!   process (started ahead, its handshake answered) against its later turns.
//!
//! Needs the pinned CLIs (`npm ci` in tests/peers, or scripts/test.sh). An argument
//! (`memory`, `latency`, `first-turn`: each CLI alone) runs only that part.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

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
#[allow(dead_code)]
#[path = "peers.rs"]
mod peers;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use drover::{Drover, proc_status_kib, provider_config};
use mock::{MockApi, Protocol, Reply};

/// Idle runs in the memory figure.
const IDLE_RUNS: usize = 20;
/// Follow-ups measured per side (after one warm-up each).
const FOLLOW_UPS: usize = 5;
const CLAUDE_MODEL: &str = "claude-sonnet-4-5";
/// From the follow-up box opening (the run woken ahead) to the follow-up being sent: a
/// short sentence typed.
const TYPING: Duration = Duration::from_secs(3);
/// `hibernate_after_secs` of the woken-ahead side: longer than `TYPING`, so that the
/// woken run is still warm when the follow-up comes.
const AHEAD_HIBERNATE_SECS: u64 = 5;
const BOUND: Duration = Duration::from_secs(300);

fn done(summary: &str) -> String {
    format!("All set.\n\n## Result\nstatus: done\nsummary: {summary}")
}

/// `[limits]` for the bench: rails wide enough for every run, money enough for all.
fn limits(hibernate_after_secs: u64, runs: usize) -> String {
    format!(
        "\n[limits]\nhibernate_after_secs = {hibernate_after_secs}\nper_account = {runs}\n\
         per_session_running = {runs}\nsession_warning_usd = 90.0\n\
         session_hard_cap_usd = 100.0\nbudget_usd_default = 1.0\nmax_turns_default = 20\n\
         [limits.per_provider]\nclaude-code = {runs}\ncodex = {runs}\n"
    )
}

fn claude_config(root: &std::path::Path, mock: &MockApi, extra: &str) -> String {
    let env = peers::claude_env(root, &mock.url());
    provider_config("claude-code", &peers::cli("claude"), &env) + extra
}

fn codex_config(root: &std::path::Path, mock: &MockApi, extra: &str) -> String {
    let env = codex::codex_env(root);
    codex::write_config(&root.join("codex-home"), mock, 0);
    provider_config("codex", &peers::cli("codex"), &env) + extra
}

/// The processes under `serve` (its descendants, not itself nor its warden) and those in
/// `groups`.
fn children_of(serve: u32, groups: &HashSet<u32>) -> Vec<u32> {
    let id = |pid: i32| u32::try_from(pid).unwrap_or_default();
    let table = ::drover_core::providers::sweep::all_processes();
    let mut found: HashSet<u32> = table
        .iter()
        .filter(|(_, stat)| groups.contains(&id(stat.pgid)))
        .map(|(pid, _)| id(*pid))
        .collect();
    let mut frontier = vec![serve];
    while let Some(parent) = frontier.pop() {
        for (pid, stat) in &table {
            if id(stat.ppid) == parent && found.insert(id(*pid)) {
                frontier.push(id(*pid));
            }
        }
        found.remove(&serve);
    }
    found
        .into_iter()
        .filter(|pid| !drover::is_warden(*pid))
        .collect()
}

fn rss_kib(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|pid| proc_status_kib(*pid, "VmRSS"))
        .sum()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn dispatch(drover: &Drover, flags: &[&str]) -> String {
    let mut args: Vec<&str> = flags.to_vec();
    args.push("Say hello.");
    drover.dispatch(&args).await
}

async fn memory() {
    let mock = MockApi::start(
        Protocol::AnthropicMessages,
        (0..IDLE_RUNS).map(|i| Reply::text(done(&format!("run {i} done")))),
    )
    .await;
    let drover =
        Drover::start_as_a_user_runs(|root| claude_config(root, &mock, &limits(0, IDLE_RUNS)))
            .await;
    let flags = [
        "--provider",
        "claude-code",
        "--model",
        CLAUDE_MODEL,
        "--policy",
        "ask",
    ];
    let mut runs = Vec::new();
    for _ in 0..IDLE_RUNS {
        runs.push(dispatch(&drover, &flags).await);
    }
    let mut groups = HashSet::new();
    let mut peaks = Vec::new();
    for run in &runs {
        let view = drover.until_state(run, "idle", BOUND).await;
        let pid = view["pid"].as_u64().expect("a warm child") as u32;
        groups.insert(pid);
        peaks.push(proc_status_kib(pid, "VmHWM").unwrap_or(0));
    }
    // Let the CLIs settle after their turn (session files written, timers quiet).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let serve = drover.serve_pid();
    let warm_pids = children_of(serve, &groups);
    let warm = rss_kib(&warm_pids);

    // Hibernate them all: the config says 1 s, re-read at the next request.
    let config = drover.drover_home().join("config.toml");
    let text = std::fs::read_to_string(&config).expect("config.toml");
    std::fs::write(
        &config,
        text.replace("hibernate_after_secs = 0", "hibernate_after_secs = 1"),
    )
    .expect("config.toml");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let out = drover.run(&["status"]).await;
    assert!(out.success, "status: {}{}", out.stdout, out.stderr);
    for run in &runs {
        drover.until_hibernated(run, None, BOUND).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut left = children_of(serve, &groups);
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        left = children_of(serve, &groups);
    }
    let hibernated = rss_kib(&left);
    let peak_sum: u64 = peaks.iter().sum();
    println!("\n{IDLE_RUNS} idle claude runs (mock Anthropic API):");
    println!(
        "  warm:       {} processes, {:.1} MiB resident in total ({:.1} MiB per run); \
         CLI peaks (VmHWM) {:.1} MiB per run on average, {:.1} MiB the largest",
        warm_pids.len(),
        mib(warm),
        mib(warm) / IDLE_RUNS as f64,
        mib(peak_sum) / IDLE_RUNS as f64,
        mib(peaks.iter().copied().max().unwrap_or(0)),
    );
    println!(
        "  hibernated: {} processes, {:.1} MiB resident in total",
        left.len(),
        mib(hibernated)
    );
    println!(
        "  drover serve itself: {:.1} MiB resident",
        mib(proc_status_kib(serve, "VmRSS").unwrap_or(0))
    );
}

/// One follow-up: the time from issuing it to the model API receiving its request.
async fn follow_up_latency(drover: &Drover, mock: &MockApi, run: &str, turns: usize) -> Duration {
    mock.push([Reply::text(done("again"))]);
    let before = mock.model_requests().len();
    let started = Instant::now();
    drover.follow_up(run, "Say it again.").await;
    let deadline = started + BOUND;
    while mock.model_requests().len() <= before {
        assert!(
            Instant::now() < deadline,
            "the follow-up never reached the API"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let latency = started.elapsed();
    drover.until_idle_after(run, turns, BOUND).await;
    latency
}

async fn latency_of(name: &str, protocol: Protocol, flags: &[&str]) {
    let mut figures: Vec<(String, Vec<f64>)> = Vec::new();
    for (side, after, ahead) in [
        ("warm", 0_u64, false),
        ("hibernated", 1, false),
        ("woken ahead", AHEAD_HIBERNATE_SECS, true),
    ] {
        let mock = MockApi::start(protocol, [Reply::text(done("first"))]).await;
        let drover = Drover::start_as_a_user_runs(|root| {
            let extra = limits(after, 4);
            match protocol {
                Protocol::AnthropicMessages => claude_config(root, &mock, &extra),
                _ => codex_config(root, &mock, &extra),
            }
        })
        .await;
        let run = dispatch(&drover, flags).await;
        drover.until_state(&run, "idle", BOUND).await;
        let mut times = Vec::new();
        for i in 0..=FOLLOW_UPS {
            if after > 0 {
                drover.until_hibernated(&run, None, BOUND).await;
            }
            if ahead {
                let out = drover.run(&["wake", &run]).await;
                assert!(out.success, "wake failed: {}{}", out.stdout, out.stderr);
                tokio::time::sleep(TYPING).await;
            }
            let t = follow_up_latency(&drover, &mock, &run, i + 2).await;
            if i > 0 {
                times.push(t.as_secs_f64() * 1000.0);
            }
        }
        figures.push((side.to_string(), times));
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "\n{name}: follow-up → the model API receives the turn ({FOLLOW_UPS} each, after a warm-up):"
    );
    for (side, times) in &figures {
        let shown: Vec<String> = times.iter().map(|t| format!("{t:.0}")).collect();
        println!(
            "  {side:<11} median {:>6.0} ms  [{}]",
            median(times),
            shown.join(", ")
        );
    }
    for (side, times) in &figures[1..] {
        let ratio = median(times) / median(&figures[0].1);
        println!("  {side} / warm: {ratio:.2}×");
    }
}

/// A CLI alone, with no drover: the bench speaks its protocol itself.
#[derive(Clone, Copy)]
enum Alone {
    Claude,
    /// `codex app-server`.
    Codex,
}

impl Alone {
    fn name(self) -> &'static str {
        match self {
            Alone::Claude => "claude",
            Alone::Codex => "codex app-server",
        }
    }

    fn protocol(self) -> Protocol {
        match self {
            Alone::Claude => Protocol::AnthropicMessages,
            Alone::Codex => Protocol::OpenAiResponses,
        }
    }

    /// The command, with the arguments drover gives it (claude resumes `session`).
    fn command(
        self,
        root: &std::path::Path,
        mock: &MockApi,
        session: Option<&str>,
    ) -> tokio::process::Command {
        let mut env = peers::base_env(&root.join("home"));
        let mut args: Vec<&str> = Vec::new();
        let program = match self {
            Alone::Claude => {
                env.extend(peers::claude_env(root, &mock.url()));
                args.extend(::drover_core::providers::claude::args::PROTOCOL_FLAGS);
                args.extend(["--permission-mode", "default", "--model", CLAUDE_MODEL]);
                if let Some(session) = session {
                    args.extend(["--resume", session]);
                }
                peers::cli("claude")
            }
            Alone::Codex => {
                env.extend(codex::codex_env(root));
                codex::write_config(&root.join("codex-home"), mock, 0);
                args.push("app-server");
                peers::cli("codex")
            }
        };
        let mut command = tokio::process::Command::new(program);
        command.args(args).env_clear().envs(env).current_dir(root);
        command
    }

    /// The handshake's lines, each with what the answer to wait for contains (Codex
    /// starts a thread, or resumes `session`).
    fn handshake(self, cwd: &str, session: Option<&str>) -> Vec<(String, &'static str)> {
        match self {
            Alone::Claude => vec![(
                r#"{"type":"control_request","request_id":"init","request":{"subtype":"initialize","hooks":null}}"#
                    .to_string(),
                "control_response",
            )],
            Alone::Codex => {
                let mut params = serde_json::json!({"cwd": cwd, "approvalPolicy": "untrusted",
                    "sandbox": "read-only", "model": codex::MODEL});
                let method = match session {
                    Some(thread) => {
                        params["threadId"] = serde_json::json!(thread);
                        "thread/resume"
                    }
                    None => "thread/start",
                };
                let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1,
                    "method": "initialize",
                    "params": {"clientInfo": {"name": "bench", "version": "0"}}});
                let thread = serde_json::json!({"jsonrpc": "2.0", "id": 2,
                    "method": method, "params": params});
                vec![
                    (initialize.to_string(), "\"id\":1"),
                    (
                        format!("{}\n{thread}", r#"{"jsonrpc":"2.0","method":"initialized"}"#),
                        "\"id\":2",
                    ),
                ]
            }
        }
    }

    /// Turn `n`'s line in `session`.
    fn turn(self, n: usize, session: &str) -> String {
        let text = format!("Say it again ({n}).");
        match self {
            Alone::Claude => serde_json::json!({
                "type": "user",
                "message": {"role": "user", "content": text},
            })
            .to_string(),
            Alone::Codex => serde_json::json!({"jsonrpc": "2.0", "id": 10 + n,
                "method": "turn/start",
                "params": {"threadId": session,
                           "input": [{"type": "text", "text": text, "text_elements": []}]}})
            .to_string(),
        }
    }

    /// What the line that ends a turn contains.
    fn turn_end(self) -> &'static str {
        match self {
            Alone::Claude => "\"type\":\"result\"",
            Alone::Codex => "\"method\":\"turn/completed\"",
        }
    }

    /// The session a line names: claude's `session_id`, Codex's thread id in the answer
    /// to `thread/start`.
    fn session_of(self, line: &str) -> Option<String> {
        let value: serde_json::Value = serde_json::from_str(line).ok()?;
        let id = match self {
            Alone::Claude => &value["session_id"],
            Alone::Codex => &value["result"]["thread"]["id"],
        };
        id.as_str().map(str::to_string)
    }
}

/// One process of the CLI alone under `root`, in a new session or resuming `session`,
/// started ahead with its handshake answered and `TYPING` waited: each turn's time
/// from its line on stdin to the model API receiving the request, and the session.
async fn alone_process(
    cli: Alone,
    root: &std::path::Path,
    mock: &MockApi,
    session: Option<&str>,
    turns: usize,
) -> (Vec<f64>, String) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut child = cli
        .command(root, mock, session)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the CLI starts");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut until_line = async |needle: &str| {
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            let line = tokio::time::timeout_at(deadline, lines.next_line())
                .await
                .expect("the CLI answers in time")
                .expect("the CLI's stdout")
                .expect("the CLI is still up");
            if line.contains(needle) {
                return line;
            }
        }
    };
    let mut session = session.map(str::to_string);
    for (line, needle) in cli.handshake(&root.display().to_string(), session.as_deref()) {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let answer = until_line(needle).await;
        session = session.or_else(|| cli.session_of(&answer));
    }
    tokio::time::sleep(TYPING).await;
    let mut times = Vec::new();
    for turn in 0..turns {
        mock.push([Reply::text(done("again"))]);
        let before = mock.model_requests().len();
        let line = cli.turn(turn, session.as_deref().unwrap_or_default());
        let started = Instant::now();
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        while mock.model_requests().len() <= before {
            assert!(started.elapsed() < BOUND, "the turn never reached the API");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        let end = until_line(cli.turn_end()).await;
        session = session.or_else(|| cli.session_of(&end));
    }
    drop(stdin);
    let _ = tokio::time::timeout(BOUND, child.wait()).await;
    (times, session.expect("the CLI named its session"))
}

/// Each CLI itself, `FOLLOW_UPS` times: a process in a new session, then a second
/// process resuming that session (as a woken run's does); the first turn of each process
/// against its later ones.
async fn first_turn() {
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for cli in [Alone::Claude, Alone::Codex] {
        let mut figures: [(Vec<f64>, Vec<f64>); 2] = Default::default();
        for _ in 0..FOLLOW_UPS {
            let root = tempfile::tempdir().expect("a temporary directory");
            std::fs::create_dir_all(root.path().join("home")).expect("a home");
            let mock = MockApi::start(cli.protocol(), []).await;
            let mut session = None;
            for (first, later) in &mut figures {
                let (times, named) =
                    alone_process(cli, root.path(), &mock, session.as_deref(), 4).await;
                first.push(times[0]);
                later.extend_from_slice(&times[1..]);
                session = Some(named);
            }
        }
        println!(
            "\n{} alone, no drover: its turn on stdin → the model API receives it:",
            cli.name()
        );
        for ((first, later), process) in figures.iter_mut().zip(["new session", "resumed"]) {
            let (first, later) = (median(first), median(later));
            println!(
                "  {process:<11}  first turn of a process {first:>5.0} ms, its later turns \
                 {later:>4.0} ms ({:.2}×)",
                first / later
            );
        }
    }
}

async fn latency() {
    latency_of(
        "claude",
        Protocol::AnthropicMessages,
        &[
            "--provider",
            "claude-code",
            "--model",
            CLAUDE_MODEL,
            "--policy",
            "ask",
        ],
    )
    .await;
    latency_of(
        "codex app-server",
        Protocol::OpenAiResponses,
        &[
            "--provider",
            "codex",
            "--model",
            codex::MODEL,
            "--policy",
            "ask",
        ],
    )
    .await;
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
        if wanted("memory") {
            memory().await;
        }
        if wanted("latency") {
            latency().await;
        }
        if wanted("latency") || only.as_deref() == Some("first-turn") {
            first_turn().await;
        }
    });
}
