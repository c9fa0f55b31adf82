//! The router: for a spec without a model, the ranked options a route card shows.
//!
//! Pure. How options are chosen and ranked:
//! - providers come from the `providers` list the caller passes (configured providers with
//!   their availability); unavailable ones are left out with their reason, and so is an
//!   available one with no model that suits the class;
//! - a non-blank `spec.provider` restricts the options to that provider and offers every
//!   suitable visible model of it; otherwise each provider offers one model per tier (the
//!   provider default when it is of that tier and suits, else the first suitable one, as
//!   [`Catalog::pick`] does) and the simulated agent is not offered at all (it never
//!   stands in for a real provider);
//! - a model suits a class when its tier is one the class's rule lists, it is visible,
//!   reads images if the class needs vision, and its known context window is at least the
//!   rule's minimum;
//! - ranking: the class's tier preference first; within a tier, free, then priced by
//!   output then input price, then unpriced; ties by the ladder's provider order, then
//!   catalog order. At most [`MAX_OPTIONS`]; the first is recommended.

use serde::{Deserialize, Serialize};

use crate::config::SIM_PROVIDER;
use crate::error::{DroverError, ErrorCode};
use crate::money::{Catalog, Model, Price, Tier, usd_per_mtok};
use crate::spec::Spec;

use super::class::TaskClass;
use super::policy::{ClassPolicy, RoutingPolicy};

/// The most options a route card shows.
pub const MAX_OPTIONS: usize = 6;

/// Whether a provider can take runs now, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderAvailability {
    /// The provider's configured name.
    pub name: String,
    /// Whether it can take runs now.
    pub available: bool,
    /// Why it is not available (`the claude CLI is not installed`, `disabled in config`).
    pub reason: Option<String>,
}

impl ProviderAvailability {
    /// `name`, available.
    pub fn available(name: &str) -> ProviderAvailability {
        ProviderAvailability {
            name: name.to_string(),
            available: true,
            reason: None,
        }
    }

    /// `name`, not available for `reason`.
    pub fn unavailable(name: &str, reason: &str) -> ProviderAvailability {
        ProviderAvailability {
            name: name.to_string(),
            available: false,
            reason: Some(reason.to_string()),
        }
    }
}

/// One option on a route card.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RouteOption {
    /// 1-based, as the user picks it.
    pub number: u32,
    /// The provider's configured name.
    pub provider: String,
    /// The catalog id.
    pub model: String,
    /// The effort the option runs with: the spec's, else the class's suggested one;
    /// `None` for the provider's default.
    pub effort: Option<String>,
    /// `small`, `standard` or `frontier`.
    pub tier: String,
    /// US dollars per million tokens; `None` when free or unpriced.
    pub input_per_mtok: Option<f64>,
    /// US dollars per million output tokens (reasoning included); `None` when free or
    /// unpriced.
    pub output_per_mtok: Option<f64>,
    /// Whether the model costs nothing.
    pub free: bool,
    /// How many tokens the model's context holds, when the catalog knows.
    pub context_window: Option<u64>,
    /// Whether the model reads images.
    pub vision: bool,
    /// One line: "standard tier suits code; $3/$15 per Mtok; 200k context".
    pub reason: String,
    /// The first option.
    pub recommended: bool,
}

impl RouteOption {
    /// The option's tier (`None` for a word the catalog does not know).
    pub fn tier(&self) -> Option<Tier> {
        Tier::parse(&self.tier)
    }

    /// Whether the option carries no price at all.
    pub fn unpriced(&self) -> bool {
        !self.free && self.output_per_mtok.is_none()
    }
}

/// A provider not on the card, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LeftOut {
    /// The provider's configured name.
    pub provider: String,
    /// Why it has no option on the card (unavailable, or no model that suits the class).
    pub reason: String,
}

/// What the router offers for one spec.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Routing {
    /// The class the spec was read as.
    pub class: TaskClass,
    /// The options, ranked, most suitable first (numbered from 1); at most
    /// [`MAX_OPTIONS`].
    pub options: Vec<RouteOption>,
    /// Providers with no option, and why.
    pub left_out: Vec<LeftOut>,
}

impl Routing {
    /// The first option, if there is any.
    pub fn recommended(&self) -> Option<&RouteOption> {
        self.options.first()
    }

    /// The option the user picks by `number` (1-based).
    pub fn option(&self, number: u32) -> Option<&RouteOption> {
        self.options.iter().find(|o| o.number == number)
    }

    /// `NO_ROUTE` saying why nothing was offered (the left-out providers and reasons).
    pub fn no_route_error(&self) -> DroverError {
        let why = if self.left_out.is_empty() {
            "no configured provider has a model for it".to_string()
        } else {
            self.left_out
                .iter()
                .map(|l| format!("{}: {}", l.provider, l.reason))
                .collect::<Vec<_>>()
                .join("; ")
        };
        DroverError::new(
            ErrorCode::NoRoute,
            format!(
                "No provider can take this {} task ({why}); install or enable a provider, or name a model.",
                self.class
            ),
        )
    }
}

/// The ranked options for `spec` as a `class` task. See the module documentation.
pub fn route(
    spec: &Spec,
    class: TaskClass,
    catalog: &Catalog,
    providers: &[ProviderAvailability],
    policy: &RoutingPolicy,
) -> Routing {
    let rule = policy.rule(class);
    let wanted = spec.provider.trim();
    let mut left_out = Vec::new();
    let mut candidates: Vec<&Model> = Vec::new();

    if !wanted.is_empty() && !providers.iter().any(|p| p.name == wanted) {
        left_out.push(LeftOut {
            provider: wanted.to_string(),
            reason: "not configured".to_string(),
        });
    }
    for p in providers {
        let considered = if wanted.is_empty() {
            p.name != SIM_PROVIDER
        } else {
            p.name == wanted
        };
        if !considered {
            continue;
        }
        if !p.available {
            left_out.push(LeftOut {
                provider: p.name.clone(),
                reason: p
                    .reason
                    .clone()
                    .unwrap_or_else(|| "unavailable".to_string()),
            });
            continue;
        }
        let before = candidates.len();
        for &tier in &rule.tiers {
            let mut suited = catalog
                .visible(&p.name)
                .filter(|m| m.tier == tier && suits(m, rule));
            if wanted.is_empty() {
                let all: Vec<&Model> = suited.collect();
                if let Some(m) = all.iter().find(|m| m.default).or(all.first()) {
                    candidates.push(m);
                }
            } else {
                candidates.extend(&mut suited);
            }
        }
        if candidates.len() == before {
            left_out.push(LeftOut {
                provider: p.name.clone(),
                reason: nothing_suits(class, rule, catalog.models(&p.name).next().is_some()),
            });
        }
    }

    let ladder = policy.ladder();
    let catalog_index = |m: &Model| {
        catalog
            .all()
            .iter()
            .position(|c| std::ptr::eq(c, m))
            .unwrap_or(usize::MAX)
    };
    candidates.sort_by(|a, b| {
        let rank = |m: &Model| rule.rank_of(m.tier).unwrap_or(usize::MAX);
        rank(a)
            .cmp(&rank(b))
            .then_with(|| price_order(&a.price, &b.price))
            .then_with(|| {
                ladder
                    .position(&a.provider)
                    .cmp(&ladder.position(&b.provider))
            })
            .then_with(|| catalog_index(a).cmp(&catalog_index(b)))
    });
    candidates.truncate(MAX_OPTIONS);

    let effort = spec.effort.or(rule.effort).map(|e| e.as_str().to_string());
    let options = candidates
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let (input, output) = match m.price {
                Price::Priced { input, output, .. } => (Some(input), Some(output)),
                Price::Free | Price::Unpriced => (None, None),
            };
            RouteOption {
                number: i as u32 + 1,
                provider: m.provider.clone(),
                model: m.id.clone(),
                effort: effort.clone(),
                tier: m.tier.as_str().to_string(),
                input_per_mtok: input,
                output_per_mtok: output,
                free: m.price == Price::Free,
                context_window: m.context_window,
                vision: m.vision,
                reason: reason_line(m, class, rule),
                recommended: i == 0,
            }
        })
        .collect();
    Routing {
        class,
        options,
        left_out,
    }
}

/// Whether `model` (already of an offered tier) meets the rule's capabilities.
fn suits(model: &Model, rule: &ClassPolicy) -> bool {
    (!rule.needs_vision || model.vision)
        && match (rule.min_context, model.context_window) {
            (Some(min), Some(window)) => window >= min,
            _ => true,
        }
}

/// Why an available provider offers nothing for the class.
fn nothing_suits(class: TaskClass, rule: &ClassPolicy, listed: bool) -> String {
    if !listed {
        return "the model catalog lists no models for it".to_string();
    }
    let tiers: Vec<&str> = rule.tiers.iter().map(|t| t.as_str()).collect();
    let mut needs = Vec::new();
    if rule.needs_vision {
        needs.push("reads images".to_string());
    }
    if let Some(min) = rule.min_context {
        needs.push(format!("has at least {} context", tokens_short(min)));
    }
    let needs = if needs.is_empty() {
        String::new()
    } else {
        format!(" that {}", needs.join(" and "))
    };
    format!(
        "no visible {} model{needs} for {class} work",
        tiers.join(" or ")
    )
}

/// Free first, then priced by output then input price, then unpriced.
fn price_order(a: &Price, b: &Price) -> std::cmp::Ordering {
    let key = |p: &Price| match *p {
        Price::Free => (0, 0.0, 0.0),
        Price::Priced { input, output, .. } => (1, output, input),
        Price::Unpriced => (2, 0.0, 0.0),
    };
    let (ka, kb) = (key(a), key(b));
    ka.0.cmp(&kb.0)
        .then_with(|| ka.1.total_cmp(&kb.1))
        .then_with(|| ka.2.total_cmp(&kb.2))
}

/// "standard tier suits code; $3/$15 per Mtok; 200k context".
fn reason_line(model: &Model, class: TaskClass, rule: &ClassPolicy) -> String {
    let first = rule.tiers.first().copied().unwrap_or(model.tier);
    let tier = model.tier;
    let mut parts = vec![if tier == first {
        format!("{tier} tier suits {class}")
    } else if tier > first {
        format!("{tier} tier, for harder {class}")
    } else {
        format!("{tier} tier, cheaper for {class}")
    }];
    parts.push(match model.price {
        Price::Priced { input, output, .. } => {
            format!("{}/{} per Mtok", usd_per_mtok(input), usd_per_mtok(output))
        }
        Price::Free => "free".to_string(),
        Price::Unpriced => "no price known".to_string(),
    });
    if let Some(window) = model.context_window {
        parts.push(format!("{} context", tokens_short(window)));
    }
    if rule.needs_vision && model.vision {
        parts.push("reads images".to_string());
    }
    parts.join("; ")
}

/// A token count (a context window) in short form, as route cards show it: `200k`, `1M`,
/// `1.5M`, `32000` → `32k`; below a thousand as it is.
pub fn tokens_short(n: u64) -> String {
    if n >= 1_000_000 {
        let m = n as f64 / 1_000_000.0;
        if m.fract() == 0.0 {
            format!("{m:.0}M")
        } else {
            format!("{m:.1}M")
        }
    } else if n >= 1000 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}
