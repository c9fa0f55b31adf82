//! What a finished run is offered next: a retry on the same model after a transient
//! failure or a `done` whose tests failed, or an escalation up the ladder after a failure, a `blocked` result or no
//! usable result.
//!
//! Pure. What must stay true:
//! - a run stopped (by the user, a budget cap, a declined or expired route card) is
//!   offered nothing;
//! - a retry always names the run's own provider and model;
//! - an escalation never names a hidden model or an unavailable provider, and the sim
//!   and the real providers never stand in for each other.

use serde::{Deserialize, Serialize};

use crate::config::SIM_PROVIDER;
use crate::money::{Catalog, Model, Tier};

use super::policy::RoutingPolicy;
use super::router::ProviderAvailability;

/// Completion reasons of a failure that may well pass: retry on the same model.
pub const TRANSIENT_REASONS: [&str; 7] = [
    "timeout",
    "provider_unavailable",
    "provider_error",
    "rate_limit",
    "rate_limited",
    "overloaded",
    "crash",
];

/// The completion reason of an idle run that went on as an escalation.
pub const ESCALATED: &str = "escalated";
/// The completion reason of an idle run that went on as a retry.
pub const RETRIED: &str = "retried";

/// Completion reasons after which nothing is offered: the user or money ended the run,
/// or it already went on as a new run.
pub const NO_OFFER_REASONS: [&str; 9] = [
    ESCALATED,
    RETRIED,
    "user",
    "budget_cap",
    "budget_exceeded",
    "session_budget_cap",
    "route_declined",
    "route_expired",
    "stopped",
];

/// The reason a run could not be started; escalation goes to another provider.
pub const LAUNCH_ERROR: &str = "launch_error";

/// Which kind of offer an [`Escalation`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EscalationKind {
    /// A stronger model (a tier up, or another provider).
    Escalate,
    /// The same provider and model again.
    Retry,
}

impl EscalationKind {
    /// The kind as the API writes it (`escalate`, `retry`).
    pub fn as_str(self) -> &'static str {
        match self {
            EscalationKind::Escalate => "escalate",
            EscalationKind::Retry => "retry",
        }
    }
}

/// An offer shown on a finished run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Escalation {
    /// Retry on the same model, or escalate to a stronger one.
    pub kind: EscalationKind,
    /// The provider the new run would use.
    pub to_provider: String,
    /// The catalog id of the model the new run would use.
    pub to_model: String,
    /// One line for the user: why the run is offered this, and where to.
    pub reason: String,
}

/// How a run ended, as the offer needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutcome<'a> {
    /// `failed`, `completed`, `stopped` or `interrupted`.
    pub state: &'a str,
    /// The run's completion reason (`timeout`, `launch_error`, …), if it has one.
    pub completion_reason: Option<&'a str>,
    /// The result block's status: `done`, `blocked`, `needs_input`.
    pub result_status: Option<&'a str>,
    /// Whether the run left a result the user can use.
    pub has_usable_result: bool,
    /// The provider the run used.
    pub provider: &'a str,
    /// The catalog id the run used; `None`: the provider's default.
    pub model: Option<&'a str>,
    /// A test it ran failed on its last run (docs/ARCHITECTURE.md §"Evidence").
    pub tests_failed: bool,
}

/// The offer for a finished run, if any:
/// - `stopped`, or a reason in [`NO_OFFER_REASONS`]: nothing;
/// - `failed` with a reason in [`TRANSIENT_REASONS`], or `interrupted`: retry on the same
///   provider and model;
/// - `completed` with result `done` while a test it ran failed on its last run: retry on
///   the same provider and model;
/// - `failed` with `launch_error`: the same tier on the next available provider;
/// - `failed` otherwise, `completed` with result `blocked`, or without a usable result:
///   the next tier up on the same provider, else the next available provider (after the
///   run's own, in ladder order) at the run's tier or the nearest above;
/// - nothing when there is nowhere to go, or for a model the catalog does not know.
pub fn escalation_offer(
    outcome: &RunOutcome,
    catalog: &Catalog,
    policy: &RoutingPolicy,
    providers: &[ProviderAvailability],
) -> Option<Escalation> {
    let reason = outcome.completion_reason.unwrap_or("");
    if outcome.state == "stopped" || NO_OFFER_REASONS.contains(&reason) {
        return None;
    }
    let current = current_model(outcome, catalog);
    let run_model = current
        .map(|m| m.id.clone())
        .or(outcome.model.map(str::to_string));
    let from = format!(
        "{}/{}",
        outcome.provider,
        run_model.as_deref().unwrap_or("default")
    );

    let transient = match outcome.state {
        "failed" => TRANSIENT_REASONS.contains(&reason),
        "interrupted" => true,
        _ => false,
    };
    if transient {
        let model = run_model?;
        let what = if outcome.state == "interrupted" {
            "the run was interrupted".to_string()
        } else {
            format!("the run failed with {reason}, which may pass")
        };
        return Some(Escalation {
            kind: EscalationKind::Retry,
            to_provider: outcome.provider.to_string(),
            to_model: model,
            reason: format!("{what}; retry on {from}"),
        });
    }

    if outcome.state == "completed" && outcome.result_status == Some("done") && outcome.tests_failed
    {
        let model = run_model?;
        return Some(Escalation {
            kind: EscalationKind::Retry,
            to_provider: outcome.provider.to_string(),
            to_model: model,
            reason: format!("the run says done, but a test it ran failed; retry on {from}"),
        });
    }

    let why = match (outcome.state, outcome.result_status) {
        ("failed", _) => format!("the run failed ({})", or_unknown(reason)),
        ("completed", Some("blocked")) => "the run ended blocked".to_string(),
        ("completed", _) if !outcome.has_usable_result => {
            "the run gave no usable result".to_string()
        }
        _ => return None,
    };
    let current = current?;
    let ladder = policy.ladder();
    let usable = |p: &str| {
        providers
            .iter()
            .find(|a| a.name == p)
            .map_or(p == outcome.provider, |a| a.available)
    };

    let launch_error = outcome.state == "failed" && reason == LAUNCH_ERROR;
    if !launch_error
        && usable(outcome.provider)
        && let Some(up) = ladder
            .above(current.tier)
            .find_map(|t| catalog.pick(outcome.provider, t))
    {
        return Some(Escalation {
            kind: EscalationKind::Escalate,
            to_provider: up.provider.clone(),
            to_model: up.id.clone(),
            reason: format!(
                "{why} on {from} ({}); try {}, one tier up ({})",
                current.tier, up.id, up.tier
            ),
        });
    }

    let simulated = outcome.provider == SIM_PROVIDER;
    let elsewhere = ladder
        .after(outcome.provider)
        .into_iter()
        .filter(|p| (*p == SIM_PROVIDER) == simulated && usable(p))
        .find_map(|p| at_or_above(catalog, p, current.tier, &ladder.tiers))?;
    let at = if elsewhere.tier == current.tier {
        format!("{}'s {} tier", elsewhere.provider, elsewhere.tier)
    } else {
        format!(
            "{}'s nearest tier above ({})",
            elsewhere.provider, elsewhere.tier
        )
    };
    let nowhere_up = if launch_error {
        format!("{} could not be started", outcome.provider)
    } else {
        format!("{} has nothing above {}", outcome.provider, current.tier)
    };
    Some(Escalation {
        kind: EscalationKind::Escalate,
        to_provider: elsewhere.provider.clone(),
        to_model: elsewhere.id.clone(),
        reason: format!(
            "{why} on {from}; {nowhere_up}; try {}/{}, {at}",
            elsewhere.provider, elsewhere.id
        ),
    })
}

/// The catalog model the run used: its `model`, else the provider default.
fn current_model<'c>(outcome: &RunOutcome, catalog: &'c Catalog) -> Option<&'c Model> {
    match outcome.model {
        Some(name) => catalog.find(outcome.provider, name),
        None => catalog.default_model(outcome.provider).0,
    }
}

/// `provider`'s pick of `tier`, else of the nearest ladder tier above it.
fn at_or_above<'c>(
    catalog: &'c Catalog,
    provider: &str,
    tier: Tier,
    ladder: &[Tier],
) -> Option<&'c Model> {
    catalog.pick(provider, tier).or_else(|| {
        ladder
            .iter()
            .filter(|t| **t > tier)
            .find_map(|t| catalog.pick(provider, *t))
    })
}

fn or_unknown(reason: &str) -> &str {
    if reason.is_empty() {
        "no reason given"
    } else {
        reason
    }
}
