//! Latency with many active runs: how long a child's event takes to reach a dashboard's
//! view model, and then the frame that draws it, and a key press answering a permission
//! takes to reach the child — for a dashboard attached over the control socket (the
//! default) and, beside it, one fed by the dispatcher in the same process.
//!
//! Frames are paced as the dashboard paces them (`drover_tui::frame`: a frame after
//! anything was handled, bursts merged, at least `MIN_FRAME_GAP` apart), and a key
//! answers only a request a frame drew, as in the dashboard.
//!
//! Run: `cargo bench --bench latency`. Targets: event → view model p99 ≤ 5 ms; key → child
//! p99 ≤ 2 ms, each over at least 1,000 samples; in the third mode, whose runs are ACP
//! agents (`sim-agent --acp`), also an agent's `session/request_permission` → the request
//! in the attached dashboard's view model p99 ≤ 10 ms (`DROVER_BENCH_MODE=acp` runs that
//! mode alone). Sizes: `DROVER_BENCH_RUNS` (default 50)
//! simulated runs, each writing `DROVER_BENCH_LINES` (default 40) lines 100 ms apart
//! (after a pause that lets every run start first), then asking `DROVER_BENCH_ASKS`
//! (default 20) permissions one after another, each answered by a key: 2,000 event and
//! 1,000 key samples by default. The sim stamps each line with its wall clock
//! (`{now_us}`), so the figures start at the child.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::env_or;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use drover_core::dispatch::{DispatchEvent, DispatcherHandle, Request};
use drover_core::paths::Paths;
use drover_core::spec::SpecInput;
use drover_tui::views::prompt::{PromptState, PromptView};
use drover_tui::{App, AppEvent, AppOptions, Effect, Link, RequestRunner, ViewModel};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// How long the bench waits for the next answer before it reports a hang.
const STALL: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Attached,
    InProcess,
    /// Attached, the runs' agent the sim speaking ACP (`sim-agent --acp`) as a configured
    /// ACP provider (docs/PROVIDERS.md §"ACP agents").
    AttachedAcp,
}

/// The ACP provider's name in the ACP mode's config.
const ACP_AGENT: &str = "simacp";

struct Figures {
    event_ms: Vec<f64>,
    frame_ms: Vec<f64>,
    key_ms: Vec<f64>,
    /// From the agent sending a permission request to the request in the dashboard's
    /// view model (ACP mode: the sim stamps the request's input as it sends it).
    ask_ms: Vec<f64>,
}

fn key(c: char) -> AppEvent {
    AppEvent::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn stamp(line: &str, prefix: &str) -> Option<i64> {
    // The turn's last text carries its result block after the stamp.
    line.strip_prefix(prefix)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

async fn measure(mode: Mode, runs: u64, lines: u64, asks: u64) -> Figures {
    let home = tempfile::tempdir().expect("temp dir");
    let paths = Paths::under(home.path());
    paths.ensure_dirs().expect("dirs");
    let cap = runs + 10;
    // Every child starts, and the burst of starting them is over, before the first line
    // that is measured: the figures are those of runs that are all active.
    let warm_up_ms = 2_000 + 40 * runs;
    // Every run works in the one directory on purpose: they do not wait for each other. A
    // run done with its asks stays warm (no hibernation) while the others finish theirs.
    let scenario = home.path().join("probe.toml");
    let (provider, acp) = match mode {
        Mode::AttachedAcp => (
            ACP_AGENT,
            format!(
                "[providers.{ACP_AGENT}]\nprotocol = \"acp\"\ncommand = \"{}\"\n\
                 args = [\"sim-agent\", \"--acp\", \"--scenario\", \"{}\"]\n",
                env!("CARGO_BIN_EXE_drover"),
                scenario.display()
            ),
        ),
        Mode::Attached | Mode::InProcess => ("sim", String::new()),
    };
    std::fs::write(
        &paths.config_file,
        format!(
            "[limits]\nper_session_running = {cap}\nqueued_per_session = {cap}\n\
             hibernate_after_secs = 0\n\
             session_warning_usd = 100000.0\nsession_hard_cap_usd = 100000.0\n\
             [limits.per_provider]\n{provider} = {cap}\n\
             [workspaces]\nshared_conflict = \"allow\"\n{acp}"
        ),
    )
    .expect("config");
    // Each ask: a permission (its command stamped as the ACP sim sends it), then the line
    // its answer lets the child write.
    let ask = "[[turns.steps]]\ntool = \"Bash\"\ninput = { command = \"true {now_us}\" }\nneeds_permission = true\n\
               [[turns.steps]]\ntext = \"answered {now_us}\"\n";
    std::fs::write(
        &scenario,
        format!(
            "description = \"latency probe\"\nmodel = \"claude-sonnet-4-5\"\n\
             [[turns]]\nstatus = \"done\"\nsummary = \"probed\"\n\
             [[turns.steps]]\nsleep_ms = {warm_up_ms}\n\
             [[turns.steps]]\ntext = \"probe {{now_us}}\"\ndelay_ms = 100\nrepeat = {lines}\n\
             {}",
            ask.repeat(asks as usize)
        ),
    )
    .expect("scenario");
    let host = common::start_owner_in_process(&paths).await;
    let handle = host.handle().clone();
    let (sender, mut rx) = drover_tui::runner::channel();
    let link = Link::new(paths.clone());
    let pump = match mode {
        Mode::Attached | Mode::AttachedAcp => {
            link.spawn_events(sender.clone(), tokio::sync::watch::channel(true).1)
        }
        Mode::InProcess => {
            let mut events = handle.subscribe();
            let sender = sender.clone();
            tokio::spawn(async move {
                loop {
                    match events.recv().await {
                        Ok(event) => {
                            sender.send(AppEvent::Dispatch(std::sync::Arc::unwrap_or_clone(event)))
                        }
                        Err(RecvError::Lagged(_)) => sender.send(AppEvent::Lagged),
                        Err(RecvError::Closed) => break,
                    }
                }
            })
        }
    };
    let requests = RequestRunner::new(link, sender.clone());
    let execute = |effect: Effect| match (mode, effect) {
        (Mode::Attached | Mode::AttachedAcp, effect) => {
            requests.execute(effect);
        }
        (Mode::InProcess, Effect::Request { tag, request }) => {
            let handle: DispatcherHandle = handle.clone();
            let sender = sender.clone();
            tokio::spawn(async move {
                let result = handle.request(request).await;
                sender.send(AppEvent::Reply { tag, result });
            });
        }
        (Mode::InProcess, _) => {}
    };
    // The key is timed from when it is pressed: the user's reading time before it (the
    // answer guard) is not drover's latency. A key still answers only what a frame drew.
    let mut options = AppOptions::new(home.path().to_path_buf());
    options.answer_guard_ms = 0;
    let mut app = App::new(
        options,
        ViewModel::new(drover_core::clock::now_millis(), 200, 60),
    );
    let mut screen =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 60)).expect("terminal");
    for effect in app.start() {
        execute(effect);
    }
    for i in 0..runs {
        handle
            .request(Request::Dispatch {
                spec: Box::new(SpecInput {
                    provider: Some(provider.into()),
                    scenario: (mode != Mode::AttachedAcp).then(|| scenario.display().to_string()),
                    task: format!("probe {i}"),
                    cwd: Some(home.path().to_path_buf()),
                    ..SpecInput::default()
                }),
            })
            .await
            .expect("dispatch");
    }

    let mut figures = Figures {
        event_ms: Vec::new(),
        frame_ms: Vec::new(),
        key_ms: Vec::new(),
        ask_ms: Vec::new(),
    };
    let (frames, mut draws) = drover_tui::frame::FrameRequester::spawn();
    // The child's stamps of the events handled since the last frame.
    let mut undrawn: Vec<i64> = Vec::new();
    // Requests seen, by run and request id: an ACP run numbers its requests from 1
    // (`acp-1`, `acp-2`, …), so the id alone repeats across runs.
    let mut asked: std::collections::HashSet<(String, String)> = Default::default();
    let mut pressed: HashMap<String, i64> = HashMap::new();
    // A minute with no answer seen is a hang: it is reported with what was waited for.
    let mut deadline = tokio::time::Instant::now() + STALL;
    while figures.key_ms.len() < (runs * asks) as usize {
        let event = tokio::select! {
            Some(event) = rx.recv() => event,
            Some(()) = draws.recv() => {
                app.model.now = drover_core::clock::now_millis();
                screen
                    .draw(|frame| drover_tui::render::draw(frame, &app))
                    .expect("draw");
                let now = drover_core::clock::now_micros();
                for at in undrawn.drain(..) {
                    figures.frame_ms.push((now - at) as f64 / 1000.0);
                }
                // Answer what the frame drew, by keys: `p` opens the oldest request, `y`
                // allows it.
                let open_prompt = app
                    .views
                    .top_as::<PromptView>()
                    .filter(|p| p.state == PromptState::Open)
                    .map(|p| p.run_id.clone());
                let key_effects = match (app.views.top(), open_prompt) {
                    (_, Some(run_id)) => {
                        pressed.insert(run_id, drover_core::clock::now_micros());
                        Some(app.handle(key('y')))
                    }
                    (None, None) if app.model.oldest_pending(None).is_some() => {
                        Some(app.handle(key('p')))
                    }
                    _ => None,
                };
                // A key was handled: a frame, as for any event.
                if let Some(effects) = key_effects {
                    frames.schedule_frame();
                    for effect in effects {
                        execute(effect);
                    }
                }
                continue;
            }
            () = tokio::time::sleep_until(deadline) => panic!("{}", stuck(&app, figures.key_ms.len())),
        };
        // (An ACP agent's model is its own: the catalog has no price for it.)
        if let AppEvent::Dispatch(DispatchEvent::Note { run_id, note }) = &event
            && !(mode == Mode::AttachedAcp && note.text.contains("no price in the model catalog"))
        {
            panic!("run {run_id} did not go as planned: {}", note.text);
        }
        let probe = match &event {
            AppEvent::Dispatch(DispatchEvent::Transcript { run_id, line, .. }) => {
                Some((run_id.clone(), line.clone()))
            }
            _ => None,
        };
        app.model.now = drover_core::clock::now_millis();
        for effect in app.handle(event) {
            execute(effect);
        }
        if mode == Mode::AttachedAcp {
            let now = drover_core::clock::now_micros();
            for run in app.model.runs() {
                for pending in &run.pending {
                    if asked.insert((run.summary.head.run_id.clone(), pending.request_id.clone()))
                        && let Some(at) = pending
                            .tool
                            .rsplit(' ')
                            .next()
                            .and_then(|s| s.parse::<i64>().ok())
                    {
                        figures.ask_ms.push((now - at) as f64 / 1000.0);
                    }
                }
            }
        }
        if let Some((run_id, line)) = probe {
            let now = drover_core::clock::now_micros();
            if let Some(at) = stamp(&line, "text: probe ") {
                figures.event_ms.push((now - at) as f64 / 1000.0);
                undrawn.push(at);
            } else if let Some(at) = stamp(&line, "text: answered ")
                && let Some(key_at) = pressed.remove(&run_id)
            {
                figures.key_ms.push((at - key_at) as f64 / 1000.0);
                deadline = tokio::time::Instant::now() + STALL;
            }
        }
        // Something was handled: a frame, as the dashboard asks for one.
        frames.schedule_frame();
    }
    pump.abort();
    host.shutdown().await;
    figures
}

/// What the bench waited for when it gave up.
fn stuck(app: &App, answers: usize) -> String {
    let top = match (app.views.top(), app.views.top_as::<PromptView>()) {
        (_, Some(p)) => format!("a prompt ({:?})", p.state),
        (Some(_), None) => "another view".to_string(),
        (None, None) => "nothing".to_string(),
    };
    let oldest = app
        .model
        .oldest_pending(None)
        .map(|(run, _)| run.summary.head.run_id.clone());
    let mut states: std::collections::BTreeMap<String, usize> = Default::default();
    let mut pending = 0;
    // Runs whose summary counts requests the model does not hold.
    let mut unheld = Vec::new();
    for run in app.model.runs() {
        *states
            .entry(format!("{:?}", run.summary.head.state))
            .or_default() += 1;
        pending += run.pending.len();
        if run.summary.pending != run.pending.len() {
            unheld.push(format!(
                "{} counts {} held {}",
                run.summary.head.run_id,
                run.summary.pending,
                run.pending.len()
            ));
        }
    }
    format!(
        "the bench saw no answer for {} s: {answers} answers seen, {top} on top, oldest \
         pending request of run {oldest:?}; runs by state {states:?}, {pending} requests \
         pending; requests counted but not held: {unheld:?}",
        STALL.as_secs()
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn line(what: &str, samples: &mut [f64]) {
    samples.sort_by(f64::total_cmp);
    println!(
        "  {what:<34} n {:>5}  p50 {:>7.3} ms  p99 {:>7.3} ms  max {:>7.3} ms",
        samples.len(),
        percentile(samples, 50.0),
        percentile(samples, 99.0),
        samples.last().copied().unwrap_or(f64::NAN)
    );
}

fn main() {
    let runs = env_or("DROVER_BENCH_RUNS", 50);
    let lines = env_or("DROVER_BENCH_LINES", 40);
    let asks = env_or("DROVER_BENCH_ASKS", 20);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    println!(
        "latency: {runs} active simulated runs, {lines} lines each, then {asks} permissions each"
    );
    // `DROVER_BENCH_MODE=acp` measures the ACP mode alone.
    let only = std::env::var("DROVER_BENCH_MODE").ok();
    for (mode, key, name) in [
        (Mode::Attached, "attached", "attached (control socket)"),
        (
            Mode::InProcess,
            "in-process",
            "in-process (dispatcher handle)",
        ),
        (
            Mode::AttachedAcp,
            "acp",
            "attached, ACP agents (sim-agent --acp)",
        ),
    ] {
        if only.as_deref().is_some_and(|o| o != key) {
            continue;
        }
        let mut f = runtime.block_on(measure(mode, runs, lines, asks));
        println!(" {name}");
        line("child event -> view model", &mut f.event_ms);
        line("child event -> frame drawn", &mut f.frame_ms);
        line("key press -> child (answer)", &mut f.key_ms);
        if mode == Mode::AttachedAcp {
            line("request_permission -> view model", &mut f.ask_ms);
        }
    }
    println!(
        " targets: event -> view model p99 <= 5 ms; key -> child p99 <= 2 ms; \
         request_permission -> view model p99 <= 10 ms (frames are at least {} ms apart)",
        drover_tui::frame::MIN_FRAME_GAP.as_millis()
    );
}
