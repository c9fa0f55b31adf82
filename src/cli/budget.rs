//! `drover budget`: the current budget session's money; `budget set` changes its caps and
//! `budget new` starts a new session (both need a running drover).

use clap::{Args, Subcommand};

use super::headless::{ask, print_json, runtime};
use super::runs::JsonFlag;
use super::write_stdout;
use crate::dispatch::api::BudgetView;
use crate::dispatch::{Request, Response};
use crate::error::DroverError;
use crate::money::usd;
use crate::paths::Paths;

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
    let answer = runtime()?.block_on(ask(paths, request))?;
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
        "reserved        {} by live runs\n",
        usd(b.reserved_usd)
    ));
    out.push_str(&format!(
        "available       {} for a new run\n",
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
        out.push_str(&format!(
            "unpriced        {} (usage recorded, cost unknown)\n",
            b.unpriced_runs.join(", ")
        ));
    }
    out
}
