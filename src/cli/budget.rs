//! `drover budget`: the current budget session's money; `budget set` changes its caps and
//! `budget new` starts a new session (both need a running drover).

use clap::{Args, Subcommand};

use super::headless::{ask, client_runtime};
use super::output::{JsonFlag, print_json, write_stdout};
use drover_core::dispatch::api::BudgetView;
use drover_core::dispatch::{Request, Response};
use drover_core::error::DroverError;
use drover_core::money::usd;
use drover_core::paths::Paths;

#[derive(Debug, Args)]
pub struct BudgetArgs {
    #[command(subcommand)]
    pub action: Option<BudgetAction>,
    #[command(flatten)]
    pub output: JsonFlag,
}

#[derive(Debug, Subcommand)]
pub enum BudgetAction {
    /// New caps for the current budget session (raising the hard cap reopens it).
    Set {
        /// Tell me once when the session's spend reaches this many dollars.
        #[arg(long = "warn", value_name = "USD")]
        warning: Option<f64>,
        /// Stop every run of the session when its spend reaches this many dollars.
        #[arg(long = "hard", value_name = "USD")]
        hard_cap: Option<f64>,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Start a new budget session: new runs count against it.
    New {
        name: String,
        #[command(flatten)]
        output: JsonFlag,
    },
}

pub fn run(args: BudgetArgs, paths: &Paths) -> Result<(), DroverError> {
    let (request, json) = match args.action {
        None => (Request::Budget, args.output.json),
        Some(BudgetAction::Set {
            warning,
            hard_cap,
            output,
        }) => (
            Request::BudgetSet {
                warning_usd: warning,
                hard_cap_usd: hard_cap,
            },
            output.json || args.output.json,
        ),
        Some(BudgetAction::New { name, output }) => {
            (Request::BudgetNew { name }, output.json || args.output.json)
        }
    };
    let answer = client_runtime()?.block_on(ask(paths, request))?;
    if json {
        return print_json(&answer);
    }
    match &answer {
        Response::Budget(b) => write_stdout(&budget_lines(b)),
        other => write_stdout(&super::render::pretty_json(other)),
    }
}

/// The human form of a budget session.
fn budget_lines(b: &BudgetView) -> String {
    let state = if b.closed {
        " — CLOSED: the hard cap is reached; `drover budget set --hard USD` reopens it"
    } else if b.warned {
        " — past the warning"
    } else {
        ""
    };
    let mut out = format!("budget session  {}{state}\n", b.session);
    out.push_str(&format!(
        "spent           {} of {} hard cap (warning at {})\n",
        usd(b.spent_usd),
        usd(b.hard_cap_usd),
        usd(b.warning_usd)
    ));
    out.push_str(&format!(
        "reserved        {} by turns in flight\n",
        usd(b.reserved_usd)
    ));
    out.push_str(&format!(
        "available       {} free for a turn to start\n",
        usd(b.available_usd)
    ));
    if !b.runs_by_basis.is_empty() {
        let runs: Vec<String> = b
            .runs_by_basis
            .iter()
            .map(|(basis, n)| format!("{n} {basis}"))
            .collect();
        out.push_str(&format!("runs by basis   {}\n", runs.join(" · ")));
    }
    if !b.unpriced_runs.is_empty() {
        let all = b.runs_by_basis.get("unpriced").copied().unwrap_or_default();
        let more = all.saturating_sub(b.unpriced_runs.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        out.push_str(&format!(
            "unpriced        {}{more} (usage recorded, cost unknown)\n",
            b.unpriced_runs.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unpriced_runs_named_say_how_many_more_there_are() {
        let budget = |named: &[&str], all: usize| BudgetView {
            session: "default".into(),
            spent_usd: 1.0,
            reserved_usd: 0.0,
            available_usd: 24.0,
            warning_usd: 20.0,
            hard_cap_usd: 25.0,
            runs_by_basis: [("unpriced".to_string(), all)].into(),
            unpriced_runs: named.iter().map(|s| s.to_string()).collect(),
            warned: false,
            closed: false,
            config_refused: None,
            ledger_unavailable: None,
        };
        let cases: [(&[&str], usize, &str); 3] = [
            (
                &["r2", "r1"],
                2,
                "\nunpriced        r2, r1 (usage recorded, cost unknown)\n",
            ),
            (
                &["r9", "r8"],
                30,
                "\nunpriced        r9, r8 and 28 more (usage recorded, cost unknown)\n",
            ),
            (&[], 0, ""),
        ];
        for (named, all, line) in cases {
            let text = budget_lines(&budget(named, all));
            if line.is_empty() {
                assert!(!text.contains("unpriced  "), "{text}");
            } else {
                assert!(text.contains(line), "{text}");
            }
        }
    }
}
