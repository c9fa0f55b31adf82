//! Checking a route card pick before it is accepted, and whether a routed dispatch waits
//! for a card at all.
//!
//! Pure. What must stay true: a refused pick is `ROUTE_PICK_REFUSED` with one sentence
//! naming the model and the cause, so the card stays open with the reason shown. Rails
//! and budget are the dispatcher's checks, made after these.

use crate::config::{RoutingConfig, RoutingMode};
use crate::error::{DroverError, ErrorCode};
use crate::money::{Price, usd_per_mtok};

use super::class::TaskClass;
use super::policy::RoutingPolicy;
use super::router::RouteOption;

/// Whether `option` may still be taken for a `class` task: the model is in the catalog
/// and visible, reads images when the class needs vision (per the embedded policy), and
/// has a price (or is free) when pricing is enforced. Checked against the catalog as it
/// is now, not the option's copy.
pub fn validate_pick(
    option: &RouteOption,
    class: TaskClass,
    catalog: &crate::money::Catalog,
    enforce_pricing: bool,
) -> Result<(), DroverError> {
    validate_pick_with(
        option,
        class,
        catalog,
        enforce_pricing,
        &RoutingPolicy::embedded(),
    )
}

/// [`validate_pick`] against a rule table of the caller's.
pub fn validate_pick_with(
    option: &RouteOption,
    class: TaskClass,
    catalog: &crate::money::Catalog,
    enforce_pricing: bool,
    policy: &RoutingPolicy,
) -> Result<(), DroverError> {
    let name = format!("{}/{}", option.provider, option.model);
    let refuse = |why: String| Err(DroverError::new(ErrorCode::RoutePickRefused, why));
    let Some(model) = catalog.find(&option.provider, &option.model) else {
        return refuse(format!(
            "Option {} ({name}) is no longer in the model catalog; pick another option.",
            option.number
        ));
    };
    if model.hidden {
        return refuse(format!(
            "Option {} ({name}) is hidden in the config; pick another option or unhide it under [[catalog.models]].",
            option.number
        ));
    }
    if policy.rule(class).needs_vision && !model.vision {
        return refuse(format!(
            "Option {} ({name}) cannot read images, which {class} work needs; pick a model with vision.",
            option.number
        ));
    }
    if enforce_pricing && model.price == Price::Unpriced {
        return refuse(format!(
            "Option {} ({name}) has no price in the model catalog and pricing is enforced; pick a priced option or add its prices under [[catalog.models]].",
            option.number
        ));
    }
    Ok(())
}

/// Whether a routed dispatch waits behind a route card or takes the recommended option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteDecision {
    /// Hold the run (`awaiting_route`) and show a card.
    Hold,
    /// Take the recommended option; no card.
    Take,
}

/// The mode in force for `class`: its `[routing.classes.<class>] mode`, else
/// `[routing] mode`.
pub fn mode_for(config: &RoutingConfig, class: TaskClass) -> RoutingMode {
    config
        .classes
        .iter()
        .find(|(name, _)| TaskClass::parse(name) == Some(class))
        .and_then(|(_, c)| c.mode)
        .unwrap_or(config.mode)
}

/// `ask` holds, `auto` takes; `ask-above` holds when the recommended option's tier is
/// above `ask_above_tier` (or is not a tier word), or when a price threshold is set and
/// its output price is above it (an unpriced option is held; a free one is not).
pub fn decide(
    config: &RoutingConfig,
    class: TaskClass,
    recommended: &RouteOption,
) -> RouteDecision {
    match mode_for(config, class) {
        RoutingMode::Ask => RouteDecision::Hold,
        RoutingMode::Auto => RouteDecision::Take,
        RoutingMode::AskAbove => {
            let tier_above = recommended.tier().is_none_or(|t| t > config.ask_above_tier);
            let price_above = config.ask_above_price_per_mtok.is_some_and(|limit| {
                !recommended.free && recommended.output_per_mtok.is_none_or(|p| p > limit)
            });
            if tier_above || price_above {
                RouteDecision::Hold
            } else {
                RouteDecision::Take
            }
        }
    }
}

/// Why `decide` held, in words for the run's notes ("opus is frontier, above standard").
pub fn hold_reason(config: &RoutingConfig, class: TaskClass, recommended: &RouteOption) -> String {
    let mode = mode_for(config, class);
    if mode != RoutingMode::AskAbove {
        return format!("routing mode for {class} is {}", mode.as_str());
    }
    let name = format!("{}/{}", recommended.provider, recommended.model);
    if recommended.tier().is_none_or(|t| t > config.ask_above_tier) {
        return format!(
            "{name} is {} tier, above {}",
            recommended.tier, config.ask_above_tier
        );
    }
    match (config.ask_above_price_per_mtok, recommended.output_per_mtok) {
        (Some(limit), Some(p)) => format!(
            "{name} costs {}/Mtok output, above {}",
            usd_per_mtok(p),
            usd_per_mtok(limit)
        ),
        _ => format!("{name} has no known price"),
    }
}
