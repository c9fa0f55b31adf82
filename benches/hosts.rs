//! A run on a host against a local one (issue 32's figures, docs/ARCHITECTURE.md
//! §"Hosts"): the same simulated agent run here and over `ssh -T` to a real sshd on
//! 127.0.0.1 (throwaway keys, a free port), in an in-process owner whose event feed is what
//! a dashboard is sent. Each turn the sim writes a stamped line as it starts (`turn
//! {now_us}`), one right before it asks a permission (`asking {now_us}`) and one once the
//! answer reached it (`answered {now_us}`); the clocks are one machine's. Per turn:
//!
//! - follow-up → CLI: `Request::FollowUp` sent → the sim's `turn` stamp (through the
//!   owner, the adapter, stdin, and over ssh the connection and sshd);
//! - permission → dashboard: the `asking` stamp → the `PermissionRequested` event in the
//!   feed;
//! - answer → CLI: `Request::Respond` sent → the `answered` stamp.
//!
//! The runs alternate turn by turn (local, host, local, …) so the machine's load falls on
//! both alike; the first turn of each (the CLI's start) is not counted.
//!
//! Run: `cargo bench --bench hosts` (as root: sshd needs it). `DROVER_BENCH_TURNS`
//! (default 200) turns per run.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;
#[path = "../tests/common/sshd.rs"]
mod sshd;

use common::env_or;
use drover_core::dispatch::{DispatchEvent, DispatcherHandle, Published, Request};
use drover_core::paths::Paths;
use drover_core::providers::PermissionAnswer;
use drover_core::spec::SpecInput;
use std::path::Path;
use std::time::Duration;
use tokio::sync::broadcast;

const STALL: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Figures {
    follow_up_ms: Vec<f64>,
    permission_ms: Vec<f64>,
    answer_ms: Vec<f64>,
}

fn stamp(line: &str, prefix: &str) -> Option<i64> {
    line.strip_prefix(prefix)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Waits for the run's next event that `pick` takes, bounded.
async fn next<T>(
    events: &mut broadcast::Receiver<Published>,
    run: &str,
    what: &str,
    mut pick: impl FnMut(&DispatchEvent) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + STALL;
    loop {
        let event = tokio::select! {
            e = events.recv() => e,
            () = tokio::time::sleep_until(deadline) => panic!("{run}: no {what} within {STALL:?}"),
        };
        match event {
            Ok(event) if event.run_id() == run => {
                if let DispatchEvent::Note { note, .. } = &*event {
                    panic!("{run} did not go as planned: {}", note.text);
                }
                if let Some(found) = pick(&event) {
                    return found;
                }
            }
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => panic!("the owner went away"),
        }
    }
}

fn transcript_stamp(event: &DispatchEvent, prefix: &str) -> Option<i64> {
    match event {
        DispatchEvent::Transcript { line, .. } => stamp(line, prefix),
        _ => None,
    }
}

/// One turn of `run`: its prompt sent (the dispatch's, or a follow-up), the permission
/// answered; the three figures (`None` for the first turn, which starts the CLI).
async fn turn(
    handle: &DispatcherHandle,
    events: &mut broadcast::Receiver<Published>,
    run: &str,
    sent_at: i64,
    figures: Option<&mut Figures>,
) {
    let started = next(events, run, "turn stamp", |e| {
        transcript_stamp(e, "text: turn ")
    })
    .await;
    let asked = next(events, run, "asking stamp", |e| {
        transcript_stamp(e, "text: asking ")
    })
    .await;
    let request = next(events, run, "permission request", |e| match e {
        DispatchEvent::PermissionRequested { pending, .. } => Some(pending.request_id.clone()),
        _ => None,
    })
    .await;
    let seen = drover_core::clock::now_micros();
    let answered_at = drover_core::clock::now_micros();
    handle
        .request(Request::Respond {
            run_id: run.to_string(),
            request_id: request,
            answer: PermissionAnswer::Allow { always: false },
        })
        .await
        .expect("respond");
    let answered = next(events, run, "answered stamp", |e| {
        transcript_stamp(e, "text: answered ")
    })
    .await;
    // Idle again before the next follow-up.
    next(events, run, "the turn's end", |e| match e {
        DispatchEvent::RunChanged { run: row, .. }
            if row.head.state == drover_core::run_state::RunState::Idle =>
        {
            Some(())
        }
        _ => None,
    })
    .await;
    if let Some(f) = figures {
        f.follow_up_ms.push((started - sent_at) as f64 / 1000.0);
        f.permission_ms.push((seen - asked) as f64 / 1000.0);
        f.answer_ms.push((answered - answered_at) as f64 / 1000.0);
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn line(name: &str, local: &[f64], host: &[f64]) {
    let mut l = local.to_vec();
    let mut h = host.to_vec();
    l.sort_by(f64::total_cmp);
    h.sort_by(f64::total_cmp);
    let (lp50, hp50) = (percentile(&l, 0.5), percentile(&h, 0.5));
    println!(
        "{name:<24} local p50 {lp50:7.2} ms p99 {:7.2} ms · host p50 {hp50:7.2} ms p99 {:7.2} ms · ratio p50 {:5.1}× (n={})",
        percentile(&l, 0.99),
        percentile(&h, 0.99),
        hp50 / lp50,
        l.len()
    );
}

async fn dispatch(
    handle: &DispatcherHandle,
    scenario: &Path,
    dir: &Path,
    host: Option<&str>,
) -> String {
    let summary = handle
        .request(Request::Dispatch {
            spec: Box::new(SpecInput {
                provider: Some("sim".into()),
                scenario: Some(scenario.display().to_string()),
                task: "probe".into(),
                cwd: Some(dir.to_path_buf()),
                workspace: Some("shared".into()),
                host: host.map(str::to_string),
                ..SpecInput::default()
            }),
        })
        .await
        .expect("dispatch");
    match summary {
        drover_core::dispatch::Response::Run(run) => run.head.run_id,
        other => panic!("dispatch answered {other:?}"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(sshd) = sshd::Sshd::start("hosts bench") else {
        return;
    };
    let turns = env_or("DROVER_BENCH_TURNS", 200).max(20);
    let home = tempfile::Builder::new()
        .prefix("drover-bench-hosts")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let paths = Paths::under(home.path());
    paths.ensure_dirs().expect("dirs");
    std::fs::write(
        &paths.config_file,
        format!(
            "[limits]\nhibernate_after_secs = 0\nmax_turns_max = 10000\nmax_turns_default = 10000\n\
             session_warning_usd = 100000.0\nsession_hard_cap_usd = 100000.0\n\
             [workspaces]\nshared_conflict = \"allow\"\n{}",
            sshd.host_table("loop")
        ),
    )
    .expect("config");
    let scenario = home.path().join("probe.toml");
    std::fs::write(
        &scenario,
        "description = \"hosts probe\"\nmodel = \"claude-sonnet-4-5\"\n\
         [[turns]]\nstatus = \"done\"\nsummary = \"probed\"\n\
         [[turns.steps]]\ntext = \"turn {now_us}\"\n\
         [[turns.steps]]\ntext = \"asking {now_us}\"\n\
         [[turns.steps]]\ntool = \"Bash\"\ninput = { command = \"true\" }\nneeds_permission = true\n\
         [[turns.steps]]\ntext = \"answered {now_us}\"\n",
    )
    .expect("scenario");
    let work = home.path().join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let host = common::start_owner_in_process(&paths).await;
    let handle = host.handle().clone();
    let mut events = handle.subscribe();

    let mut local = Figures::default();
    let mut remote = Figures::default();
    let runs = [None, Some("loop")];
    let mut ids = Vec::new();
    for target in runs {
        let sent = drover_core::clock::now_micros();
        let id = dispatch(&handle, &scenario, &work, target).await;
        turn(&handle, &mut events, &id, sent, None).await;
        ids.push(id);
    }
    for _ in 0..turns {
        for (i, id) in ids.iter().enumerate() {
            let sent = drover_core::clock::now_micros();
            handle
                .request(Request::FollowUp {
                    run_id: id.clone(),
                    text: "again".into(),
                })
                .await
                .expect("follow-up");
            let figures = if i == 0 { &mut local } else { &mut remote };
            turn(&handle, &mut events, id, sent, Some(figures)).await;
        }
    }
    println!("a sim run here vs on a host over ssh to 127.0.0.1 ({turns} turns each, alternating)");
    line("follow-up → CLI", &local.follow_up_ms, &remote.follow_up_ms);
    line(
        "permission → dashboard",
        &local.permission_ms,
        &remote.permission_ms,
    );
    line("answer → CLI", &local.answer_ms, &remote.answer_ms);
    for id in &ids {
        let _ = handle.request(Request::Stop { run_id: id.clone() }).await;
    }
    host.shutdown().await;
    drop(sshd);
}
