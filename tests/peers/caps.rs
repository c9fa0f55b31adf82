//! Caps against the real CLIs (docs/ARCHITECTURE.md §"Money"): what `claude.rs`,
//! `codex.rs` and `opencode.rs` share to prove that a run's `--budget` and a budget
//! session's hard cap stop a CLI that keeps calling tools, each step priced by the model's
//! price in drover's catalog, and to measure by how much each CLI overshoots.
//!
//! What must stay true: the overshoot is measured from the model API's end (the steps the
//! mock served, each at its known price) as well as from drover's (what it booked), after
//! the run has ended and nothing runs under the owner any more; a step is one model
//! request.

use std::time::Duration;

use serde_json::Value;

use crate::drover::Drover;
use crate::mock::{MockApi, Reply, Served, Usage};

/// How many tool calls a spender's script holds: far more than any cap here lets through.
pub const STEPS: usize = 40;
/// A run's cap in these tests: reached on the fourth step of [`STEP_USD`].
pub const CAP_USD: f64 = 0.10;
/// What one step costs at the model's catalog price (each CLI's test picks its tokens).
pub const STEP_USD: f64 = 0.03;
/// The session hard cap in the session tests.
pub const HARD_CAP_USD: f64 = 0.20;
/// `[limits]` with the session's warning and hard cap for the session tests.
pub const SESSION_LIMITS: &str =
    "\n[limits]\nsession_warning_usd = 0.1\nsession_hard_cap_usd = 0.2\n";
/// Float noise forgiven when comparing dollars.
const EPS: f64 = 1e-9;

/// Input tokens alone that cost [`STEP_USD`] at `input_per_mtok` dollars per million.
pub fn step_usage(input_per_mtok: f64) -> Usage {
    Usage {
        input: (STEP_USD * 1e6 / input_per_mtok).round() as u64,
        output: 0,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    }
}

/// How long the mock takes to answer each step: a real model takes seconds, so "within
/// one step" is about drover's reaction, not about how fast a mock answers on a loaded
/// machine.
pub const STEP_DELAY: Duration = Duration::from_millis(250);

/// A script of [`STEPS`] tool calls, the `i`th made by `call(i)`, each reporting `usage`
/// after [`STEP_DELAY`].
pub fn spender(usage: Usage, call: impl Fn(usize) -> Reply) -> Vec<Reply> {
    (0..STEPS)
        .map(|i| call(i).usage(usage).delay(STEP_DELAY))
        .collect()
}

/// The scripted model requests the mock served (the steps a provider would bill).
pub fn steps_served(mock: &MockApi) -> usize {
    mock.model_requests()
        .iter()
        .filter(|r| matches!(r.served, Served::Scripted { .. }))
        .count()
}

/// By how much a capped run (or session) went past its cap.
#[derive(Debug, Clone)]
pub struct Overshoot {
    /// The CLI and mode, for the report.
    pub cli: String,
    pub cap: f64,
    /// What was spent before the capped run started (a session's earlier run), as booked.
    pub before: f64,
    /// Steps the API served the capped run, each [`STEP_USD`].
    pub served: usize,
    /// What drover booked for the capped run.
    pub booked: f64,
}

impl Overshoot {
    /// The step of the capped run on which the spend reached the cap.
    pub fn cap_step(&self) -> usize {
        (((self.cap - self.before) / STEP_USD) - EPS).ceil() as usize
    }

    /// Steps served past the one that reached the cap.
    pub fn steps_past(&self) -> i64 {
        self.served as i64 - self.cap_step() as i64
    }

    /// Dollars spent past the cap, as the API served them.
    pub fn usd_past(&self) -> f64 {
        self.before + self.served as f64 * STEP_USD - self.cap
    }

    /// One line for the test's output (`cargo test … -- --nocapture` shows it).
    pub fn print(&self) {
        eprintln!(
            "overshoot {}: cap ${:.2} (${:.4} spent before), reached on step {}; the API \
             served {} step(s) (${:.2}): {} step(s) and ${:.2} past the cap; drover booked \
             ${:.4} for the run",
            self.cli,
            self.cap,
            self.before,
            self.cap_step(),
            self.served,
            self.served as f64 * STEP_USD,
            self.steps_past(),
            self.usd_past(),
            self.booked
        );
    }

    /// The promise: the spend reached the cap (nothing stopped it early), at most one step
    /// more was served, and drover booked at least what the cap left and at most one
    /// step past it.
    pub fn assert_within_one_step(&self) {
        self.print();
        assert!(
            self.steps_past() >= 0,
            "{}: stopped before the cap was reached: {self:?}",
            self.cli
        );
        assert!(
            self.steps_past() <= 1,
            "{}: {} steps past the cap (at most one): {self:?}",
            self.cli,
            self.steps_past()
        );
        assert!(
            self.before + self.booked + EPS >= self.cap,
            "{}: booked less than the cap: {self:?}",
            self.cli
        );
        assert!(
            self.booked <= (self.cap_step() + 1) as f64 * STEP_USD + EPS,
            "{}: booked more than one step past the cap: {self:?}",
            self.cli
        );
    }
}

/// Waits (up to `within`) for `run` to end, checks it was stopped for one of `reasons`
/// and that nothing runs under the owner any more (so the mock's count of steps is
/// final); the run's final view.
pub async fn stopped(drover: &Drover, run: &str, reasons: &[&str], within: Duration) -> Value {
    let view = drover.until_ended(run, within).await;
    assert_eq!(view["state"], "stopped", "{view:#}");
    let reason = view["completion_reason"].as_str().unwrap_or_default();
    assert!(
        reasons.contains(&reason),
        "stopped for {reason}, not {reasons:?}: {view:#}"
    );
    drover.assert_nothing_runs_under_it().await;
    view
}

/// The script of [`session_capped`]: the first run's one tool call and its answer, then
/// the second run's [`spender`].
pub fn session_script(usage: Usage, call: impl Fn(usize) -> Reply, answer: Reply) -> Vec<Reply> {
    let mut script = vec![call(0).usage(usage), answer.usage(usage)];
    script.extend(spender(usage, call));
    script
}

/// Dispatches `dispatch` (provider, model, policy) with `--budget budget` and `task`.
async fn dispatch_capped(drover: &Drover, dispatch: &[&str], budget: f64, task: &str) -> String {
    let budget = budget.to_string();
    let mut args = dispatch.to_vec();
    args.extend(["--budget", &budget, task]);
    drover.dispatch(&args).await
}

/// A run with a [`CAP_USD`] budget on a [`spender`] script: stopped for its cap within
/// one step; its overshoot.
pub async fn run_capped(
    cli: &str,
    drover: &Drover,
    mock: &MockApi,
    dispatch: &[&str],
    within: Duration,
) -> Overshoot {
    let run = dispatch_capped(drover, dispatch, CAP_USD, "Keep going until told to stop").await;
    let view = stopped(drover, &run, &["budget_cap"], within).await;
    assert_eq!(view["budget"]["cap"], CAP_USD, "{view:#}");
    let overshoot = Overshoot {
        cli: cli.to_string(),
        cap: CAP_USD,
        before: 0.0,
        served: steps_served(mock),
        booked: view["cost_usd"].as_f64().expect("cost_usd"),
    };
    overshoot.assert_within_one_step();
    overshoot
}

/// A budget session with a [`HARD_CAP_USD`] hard cap ([`SESSION_LIMITS`]) on a
/// [`session_script`]: a first run spends a little and is idle; a second one, its cap
/// lowered to what the session has left, keeps spending until the session's spend reaches
/// the hard cap, which stops both and closes the session, so a third dispatch is refused.
/// The session's overshoot.
pub async fn session_capped(
    cli: &str,
    drover: &Drover,
    mock: &MockApi,
    dispatch: &[&str],
    within: Duration,
) -> Overshoot {
    let first = dispatch_capped(drover, dispatch, CAP_USD, "Spend a little").await;
    let idle = drover.until_state(&first, "idle", within).await;
    let before = idle["cost_usd"].as_f64().expect("cost_usd");
    assert!(before > 0.0, "the first run spent nothing: {idle:#}");
    let served_before = steps_served(mock);

    let second = dispatch_capped(drover, dispatch, HARD_CAP_USD, "Keep going").await;
    let view = stopped(
        drover,
        &second,
        &["budget_cap", "session_budget_cap"],
        within,
    )
    .await;
    let cap = view["budget"]["cap"].as_f64().expect("a cap");
    assert!(
        cap < HARD_CAP_USD && cap + before <= HARD_CAP_USD + EPS,
        "the second run's cap was lowered to what the session had left: {view:#}"
    );
    // The session's hard cap, reached, stopped the idle first run too.
    let idle = stopped(drover, &first, &["session_budget_cap"], within).await;
    let budget = drover.json(&["budget"]).await;
    assert_eq!(budget["closed"], true, "{budget:#}");
    let spent = budget["spent_usd"].as_f64().expect("spent_usd");
    assert!(spent + EPS >= HARD_CAP_USD, "{budget:#}");
    let booked = view["cost_usd"].as_f64().expect("cost_usd");
    let first_cost = idle["cost_usd"].as_f64().expect("cost_usd");
    assert!(
        (spent - booked - first_cost).abs() < EPS,
        "the session's spend is its runs': {budget:#}"
    );

    let work = drover.work_dir().display().to_string();
    let mut args = vec!["dispatch", "--cwd", &work];
    args.extend_from_slice(dispatch);
    args.push("One more");
    let refused = drover.run(&args).await;
    assert!(!refused.success, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("BUDGET_EXCEEDED") && refused.stderr.contains("budget set --hard"),
        "{}",
        refused.stderr
    );

    let overshoot = Overshoot {
        cli: format!("{cli} (session hard cap)"),
        cap: HARD_CAP_USD,
        before,
        served: steps_served(mock) - served_before,
        booked,
    };
    overshoot.assert_within_one_step();
    overshoot
}
