//! `drover spend`: what was spent over time — by day, week, model, provider, repository,
//! workflow or tag — from every usage row the ledger holds, each basis apart
//! (docs/ARCHITECTURE.md §"Spend over time"). Answered by the owner, or from the ledger
//! when none runs.

use clap::Args;

use super::headless::{ask, client_runtime};
use super::output::{JsonFlag, print_json, write_stdout};
use drover_core::dispatch::Request;
use drover_core::dispatch::api::{SpendBy, SpendRow, SpendView};
use drover_core::error::DroverError;
use drover_core::money::usd;
use drover_core::paths::Paths;

#[derive(Debug, Args)]
pub struct SpendArgs {
    /// What to sum by.
    #[arg(long, value_name = "GROUP", default_value = "day",
          value_parser = clap::builder::TypedValueParser::map(
              clap::builder::PossibleValuesParser::new(SpendBy::ALL.map(SpendBy::as_str)),
              |word: String| by_word(&word)))]
    pub by: SpendBy,
    /// Only usage from the start of this local day: YYYY-MM-DD, or Nd days before today
    /// (0d is today, 29d the last 30 days).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    #[command(flatten)]
    pub output: JsonFlag,
}

/// The grouping a word names (the parser offers only [`SpendBy::ALL`]'s words).
fn by_word(word: &str) -> SpendBy {
    SpendBy::ALL
        .into_iter()
        .find(|by| by.as_str() == word)
        .unwrap_or_default()
}

pub fn run(args: SpendArgs, paths: &Paths) -> Result<(), DroverError> {
    let request = Request::Spend {
        by: args.by,
        since: args.since,
    };
    let answer = client_runtime()?.block_on(ask(paths, request))?;
    if args.output.json {
        return print_json(&answer);
    }
    write_stdout(&spend_lines(&answer.into_spend()?))
}

/// The human form: one line a group, then the total; each basis in its own column.
fn spend_lines(view: &SpendView) -> String {
    if view.total.runs == 0 {
        return format!(
            "no usage recorded{}\n",
            if view.since.is_some() {
                " in that time"
            } else {
                ""
            }
        );
    }
    let key_width = view
        .rows
        .iter()
        .map(|r| r.key.chars().count())
        .chain([view.by.as_str().len(), 5])
        .max()
        .unwrap_or(5);
    let mut out = format!(
        "{:<key_width$}  {:>10}  {:>10}  {:>10}  {:>8}  {:>6}  {:>8}\n",
        view.by.as_str(),
        "spent",
        "reported",
        "estimated",
        "unpriced",
        "runs",
        "tokens"
    );
    for row in view.rows.iter().chain([&view.total]) {
        out.push_str(&line(row, key_width));
    }
    if view.total.unpriced_rows > 0 {
        out.push_str(
            "unpriced: usage recorded whose cost is unknown; spent leaves it out (it is not $0)\n",
        );
    }
    out
}

fn line(row: &SpendRow, key_width: usize) -> String {
    format!(
        "{:<key_width$}  {:>10}  {:>10}  {:>10}  {:>8}  {:>6}  {:>8}\n",
        row.key,
        usd(row.usd()),
        usd(row.reported_usd),
        usd(row.estimated_usd),
        if row.unpriced_rows == 0 {
            "-".to_string()
        } else {
            format!(
                "{} row{}",
                row.unpriced_rows,
                drover_core::text::plural(row.unpriced_rows as usize)
            )
        },
        row.runs,
        tokens(row.tokens)
    )
}

/// `950`, `12.3k`, `4.1M`.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, reported: f64, estimated: f64, unpriced: u64) -> SpendRow {
        SpendRow {
            key: key.into(),
            reported_usd: reported,
            estimated_usd: estimated,
            unpriced_rows: unpriced,
            runs: 2,
            tokens: 12_345,
        }
    }

    #[test]
    fn the_lines_keep_each_basis_apart_and_say_what_unpriced_means() {
        let view = SpendView {
            by: SpendBy::Model,
            since: None,
            rows: vec![
                row("claude-sonnet-4-5", 1.5, 0.25, 0),
                row("gpt-5", 0.0, 0.0, 3),
            ],
            total: row("total", 1.5, 0.25, 3),
        };
        insta::assert_snapshot!(spend_lines(&view));
    }

    #[test]
    fn nothing_spent_says_so() {
        let view = SpendView::default();
        assert_eq!(spend_lines(&view), "no usage recorded\n");
    }
}
