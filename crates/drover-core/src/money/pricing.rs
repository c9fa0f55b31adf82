//! Turning what a provider reports into usage rows: tokens in five classes times a list
//! price, the basis each amount rests on, and Claude's running-total cost split per
//! model.
//!
//! Pure: no I/O, no clock. What must stay true:
//! - usage that cannot be priced has no cost (`None`, basis `unpriced`): it is recorded
//!   and flagged, never booked as $0;
//! - the five token classes are disjoint when priced: `input` is uncached input,
//!   `cache_read` and `cache_write` the cached parts, `output` excludes `reasoning`
//!   (which is billed at the output price); each adapter brings its provider's counts
//!   into these classes (OpenAI's overlapping ones: `providers::codex::protocol`);
//! - the rows of one Claude turn add up to exactly that turn's charge (the difference of
//!   `total_cost_usd`), however it is split across models;
//! - the weakest basis orders `unpriced` < `estimated` < `reported` < `free`; a word drover
//!   does not know counts as `unpriced`, so it never makes spend look firmer than it is.
//!   This is the rule `control::offline::weakest_basis` applies to ledger words; it lives
//!   here now ([`weakest_basis`] keeps the same contract).

use serde::{Deserialize, Serialize};

use crate::UnixMillis;
pub use crate::ledger::Basis;
use crate::ledger::UsageRecord;
use crate::providers::{ModelUsage, Tokens, TurnEnd};

use super::dollars::is_amount;

/// What a model costs, per million tokens, in US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Price {
    /// Priced per million tokens of each class, in US dollars.
    Priced {
        /// Uncached input.
        input: f64,
        /// Output, reasoning included.
        output: f64,
        /// Input read from the prompt cache.
        cache_read: f64,
        /// Input written to the prompt cache.
        cache_write: f64,
    },
    /// Costs nothing.
    Free,
    /// No price is known: spend on it cannot be counted.
    Unpriced,
}

impl Price {
    /// Dollars per million input and output tokens (`None` when free or unpriced).
    pub fn per_mtok(&self) -> (Option<f64>, Option<f64>) {
        match *self {
            Price::Priced { input, output, .. } => (Some(input), Some(output)),
            Price::Free | Price::Unpriced => (None, None),
        }
    }

    /// The price in words: `$2/$10 per Mtok`, `free`, `no price`.
    pub fn per_mtok_words(&self) -> String {
        match *self {
            Price::Priced { input, output, .. } => format!(
                "{}/{} per Mtok",
                super::usd_per_mtok(input),
                super::usd_per_mtok(output)
            ),
            Price::Free => "free".to_string(),
            Price::Unpriced => "no price".to_string(),
        }
    }

    /// What `tokens` cost at this price: `None` when unpriced, `Some(0.0)` when free.
    pub fn cost(&self, tokens: &Tokens) -> Option<f64> {
        match *self {
            Price::Priced {
                input,
                output,
                cache_read,
                cache_write,
            } => {
                let per_mtok = tokens.input as f64 * input
                    + (tokens.output as f64 + tokens.reasoning as f64) * output
                    + tokens.cache_read as f64 * cache_read
                    + tokens.cache_write as f64 * cache_write;
                Some(tidy_dollars(per_mtok / 1_000_000.0))
            }
            Price::Free => Some(0.0),
            Price::Unpriced => None,
        }
    }

    /// The basis of an amount priced from this price (not reported by the provider).
    pub fn basis(&self) -> Basis {
        match self {
            Price::Priced { .. } => Basis::Estimated,
            Price::Free => Basis::Free,
            Price::Unpriced => Basis::Unpriced,
        }
    }
}

/// The weakest basis among ledger words (see [`Basis::weakest`], [`Basis::parse`]).
pub fn weakest_basis<'a>(bases: impl IntoIterator<Item = &'a str>) -> &'static str {
    Basis::weakest(bases.into_iter().map(Basis::parse)).as_str()
}

/// Whether a row's numbers are the provider's complete account of what it describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fidelity {
    /// The provider's own account, complete.
    Exact,
    /// Approximated: a charge split across models whose own costs did not add up to it,
    /// several models' tokens lumped in one row, or usage streamed before the turn's
    /// final account.
    Partial,
}

impl Fidelity {
    /// The fidelity as the ledger writes it (`exact`, `partial`).
    pub fn as_str(self) -> &'static str {
        match self {
            Fidelity::Exact => "exact",
            Fidelity::Partial => "partial",
        }
    }
}

/// Which part of a run used the tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// The run's own model.
    Main,
    /// Other models the agent called on (subagents, helper calls).
    Subagents,
}

impl Part {
    /// The part as the ledger writes it (`main`, `subagents`).
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Main => "main",
            Part::Subagents => "subagents",
        }
    }
}

/// A usage row before the driver adds where and when it belongs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageDraft {
    /// The model the tokens went to, as the provider named it; `None` when it did not
    /// say.
    pub model: Option<String>,
    /// Which part of the run used the tokens.
    pub part: Part,
    /// The tokens, in the five disjoint classes.
    pub tokens: Tokens,
    /// `None` exactly when `basis` is `Unpriced`.
    pub cost_usd: Option<f64>,
    /// What the amount rests on: reported by the provider, estimated from the catalog,
    /// free or unpriced.
    pub basis: Basis,
    /// Whether the numbers are the provider's complete account.
    pub fidelity: Fidelity,
    /// Where the numbers come from, e.g. `result.total_cost_usd`.
    pub source: String,
}

impl UsageDraft {
    /// The ledger row for this draft.
    pub fn into_record(
        self,
        run_id: &str,
        turn: Option<u32>,
        at: UnixMillis,
        provider: &str,
        budget_session: &str,
    ) -> UsageRecord {
        UsageRecord {
            run_id: run_id.to_string(),
            turn,
            at,
            provider: provider.to_string(),
            model: self.model,
            part: self.part.as_str().to_string(),
            input: self.tokens.input,
            output: self.tokens.output,
            reasoning: self.tokens.reasoning,
            cache_read: self.tokens.cache_read,
            cache_write: self.tokens.cache_write,
            cost_usd: self.cost_usd,
            basis: self.basis.as_str().to_string(),
            fidelity: self.fidelity.as_str().to_string(),
            source: self.source,
            budget_session: budget_session.to_string(),
        }
    }
}

/// A row for tokens the provider reported without dollars (Codex), priced from the
/// catalog: `estimated`, `free`, or `unpriced` with no cost.
pub fn estimated(
    model: Option<&str>,
    tokens: Tokens,
    price: &Price,
    fidelity: Fidelity,
    source: &str,
) -> UsageDraft {
    UsageDraft {
        model: model.map(str::to_string),
        part: Part::Main,
        tokens,
        cost_usd: price.cost(&tokens),
        basis: price.basis(),
        fidelity,
        source: source.to_string(),
    }
}

/// A row for dollars the provider reported (OpenCode per message). The basis is
/// `reported`, except `free` when the catalog lists the model as free and the provider
/// charged nothing. A reported amount that is not a finite, non-negative number is
/// ignored and the tokens are priced from the catalog instead.
pub fn reported(
    model: Option<&str>,
    tokens: Tokens,
    cost_usd: f64,
    price: &Price,
    fidelity: Fidelity,
    source: &str,
) -> UsageDraft {
    if !is_amount(cost_usd) {
        return estimated(model, tokens, price, Fidelity::Partial, source);
    }
    let basis = if cost_usd == 0.0 && *price == Price::Free {
        Basis::Free
    } else {
        Basis::Reported
    };
    UsageDraft {
        model: model.map(str::to_string),
        part: Part::Main,
        tokens,
        cost_usd: Some(tidy_dollars(cost_usd)),
        basis,
        fidelity,
        source: source.to_string(),
    }
}

/// A turn's charge from a provider's running total (Claude's `total_cost_usd`): the
/// growth since `previous_total`. A total below the previous one means the provider
/// process started counting again from zero (a resumed session), so the whole total is
/// this turn's.
pub fn total_cost_delta(previous_total: f64, total: f64) -> f64 {
    if total + DOLLAR_EPSILON < previous_total {
        tidy_dollars(total)
    } else {
        tidy_dollars((total - previous_total).max(0.0))
    }
}

/// One Claude turn's money.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeTurn {
    /// What the turn cost (the difference of `total_cost_usd`), when the result had one.
    pub charge: Option<f64>,
    /// The running total to remember for the next turn.
    pub running_total: f64,
    /// The usage rows; their costs add up to `charge` when there is one.
    pub rows: Vec<UsageDraft>,
}

/// The usage rows of a Claude turn.
///
/// With a `total_cost_usd`, the turn's charge is its difference from `previous_total`
/// ([`total_cost_delta`]); the charge is split across the models of `modelUsage`
/// proportionally to each model's own reported cost (rows `exact` when those costs add up
/// to the charge, `partial` otherwise), or booked as one row when no model reports a cost.
/// Without a total, each model's reported cost is booked as it is, and tokens without any
/// dollars are priced with `price_of` (the catalog). The row of `main_model` (the run's
/// model) is the `main` part and the others are `subagents`; when no row is the run's
/// model, the costliest row is `main`.
pub fn claude_turn(
    end: &TurnEnd,
    previous_total: f64,
    main_model: Option<&str>,
    price_of: impl Fn(&str) -> Price,
) -> ClaudeTurn {
    let total = end.total_cost_usd.filter(|t| is_amount(*t));
    let charge = total.map(|t| total_cost_delta(previous_total, t));
    let running_total = total.unwrap_or(previous_total);
    let mut rows = match charge {
        Some(charge) => charged_rows(end, charge, main_model),
        None => uncharged_rows(end, main_model, &price_of),
    };
    mark_parts(&mut rows, main_model);
    ClaudeTurn {
        charge,
        running_total,
        rows,
    }
}

/// Source of rows whose cost comes from the turn's `total_cost_usd`, split by `modelUsage`.
const SOURCE_SPLIT: &str = "result.total_cost_usd/modelUsage";
const SOURCE_TOTAL: &str = "result.total_cost_usd";
const SOURCE_MODEL_USAGE: &str = "result.modelUsage";
const SOURCE_USAGE: &str = "result.usage";

fn charged_rows(end: &TurnEnd, charge: f64, main_model: Option<&str>) -> Vec<UsageDraft> {
    let models = &end.model_usage;
    let costs: Vec<Option<f64>> = models
        .iter()
        .map(|m| m.cost_usd.filter(|c| is_amount(*c)))
        .collect();
    let reported_sum: f64 = costs.iter().flatten().sum();
    if reported_sum <= 0.0 {
        // No model says what it cost: one row carries the whole charge.
        let tokens = if models.is_empty() {
            end.tokens
        } else {
            sum_tokens(models)
        };
        let model = main_model
            .map(str::to_string)
            .or_else(|| models.first().map(|m| m.model.clone()));
        let fidelity = if models.len() > 1 {
            Fidelity::Partial
        } else {
            Fidelity::Exact
        };
        return vec![UsageDraft {
            model,
            part: Part::Main,
            tokens,
            cost_usd: Some(charge),
            basis: Basis::Reported,
            fidelity,
            source: SOURCE_TOTAL.to_string(),
        }];
    }
    let all_costed = costs.iter().all(Option::is_some);
    let fidelity =
        if all_costed && (reported_sum - charge).abs() <= DOLLAR_EPSILON.max(charge * 1e-6) {
            Fidelity::Exact
        } else {
            Fidelity::Partial
        };
    // Shares of the charge; the last costed row takes what rounding left, so the rows add
    // up to the charge exactly.
    let last_costed = costs.iter().rposition(Option::is_some);
    let mut booked = 0.0;
    let mut rows = Vec::with_capacity(models.len());
    for (i, (usage, cost)) in models.iter().zip(&costs).enumerate() {
        let share = match cost {
            Some(_) if Some(i) == last_costed => tidy_dollars((charge - booked).max(0.0)),
            Some(cost) => tidy_dollars(charge * cost / reported_sum),
            None => 0.0,
        };
        booked += share;
        rows.push(UsageDraft {
            model: Some(usage.model.clone()),
            part: Part::Main,
            tokens: usage.tokens,
            cost_usd: Some(share),
            basis: Basis::Reported,
            fidelity,
            source: SOURCE_SPLIT.to_string(),
        });
    }
    rows
}

fn uncharged_rows(
    end: &TurnEnd,
    main_model: Option<&str>,
    price_of: &impl Fn(&str) -> Price,
) -> Vec<UsageDraft> {
    if end.model_usage.is_empty() {
        if end.tokens == Tokens::default() {
            return Vec::new();
        }
        let price = main_model.map_or(Price::Unpriced, price_of);
        return vec![estimated(
            main_model,
            end.tokens,
            &price,
            Fidelity::Exact,
            SOURCE_USAGE,
        )];
    }
    end.model_usage
        .iter()
        .map(|usage: &ModelUsage| {
            let price = price_of(&usage.model);
            match usage.cost_usd.filter(|c| is_amount(*c)) {
                Some(cost) => reported(
                    Some(&usage.model),
                    usage.tokens,
                    cost,
                    &price,
                    Fidelity::Exact,
                    SOURCE_MODEL_USAGE,
                ),
                None => estimated(
                    Some(&usage.model),
                    usage.tokens,
                    &price,
                    Fidelity::Exact,
                    SOURCE_MODEL_USAGE,
                ),
            }
        })
        .collect()
}

/// The row of the run's model is `main`, the others `subagents`; without such a row, the
/// costliest (then the one with most tokens, then the first) is `main`.
fn mark_parts(rows: &mut [UsageDraft], main_model: Option<&str>) {
    let by_name = main_model.and_then(|main| {
        rows.iter().position(|r| {
            r.model
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case(main))
        })
    });
    let main = by_name.or_else(|| {
        let mut best: Option<(usize, f64, u64)> = None;
        for (i, row) in rows.iter().enumerate() {
            let cost = row.cost_usd.unwrap_or(0.0);
            let tokens = token_count(&row.tokens);
            if best.is_none_or(|(_, c, t)| cost > c || (cost == c && tokens > t)) {
                best = Some((i, cost, tokens));
            }
        }
        best.map(|(i, _, _)| i)
    });
    for (i, row) in rows.iter_mut().enumerate() {
        row.part = if Some(i) == main {
            Part::Main
        } else {
            Part::Subagents
        };
    }
}

fn sum_tokens(models: &[ModelUsage]) -> Tokens {
    let mut sum = Tokens::default();
    for m in models {
        sum.add(&m.tokens);
    }
    sum
}

fn token_count(t: &Tokens) -> u64 {
    t.input + t.output + t.reasoning + t.cache_read + t.cache_write
}

/// A run's spend as its usage rows add it up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSpend {
    /// The sum of the priced rows (unpriced rows add nothing and are counted apart).
    pub cost_usd: f64,
    /// The tokens of every row, added up.
    pub tokens: Tokens,
    /// The weakest basis of the rows (`free` when there are none).
    pub basis: Basis,
    /// How many rows could not be priced.
    pub unpriced_rows: usize,
}

impl RunSpend {
    /// Adds up `rows` (of one run, or of any set of runs).
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = &'a UsageRecord>) -> RunSpend {
        let mut spend = RunSpend::default();
        for row in rows {
            spend.cost_usd += row.cost_usd.unwrap_or(0.0);
            spend.tokens.add(&Tokens {
                input: row.input,
                output: row.output,
                reasoning: row.reasoning,
                cache_read: row.cache_read,
                cache_write: row.cache_write,
            });
            let basis = Basis::parse(&row.basis);
            spend.basis = spend.basis.min(basis);
            if row.cost_usd.is_none() || basis == Basis::Unpriced {
                spend.unpriced_rows += 1;
            }
        }
        spend.cost_usd = tidy_dollars(spend.cost_usd);
        spend
    }
}

/// Amounts closer than this are the same amount (float noise of sums and differences).
pub(crate) const DOLLAR_EPSILON: f64 = 1e-9;

/// Sums of binary fractions drift (`0.1 + 0.2`); money is kept to ten decimals.
pub(crate) fn tidy_dollars(value: f64) -> f64 {
    (value * 1e10).round() / 1e10
}
