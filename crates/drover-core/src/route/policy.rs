//! The routing rule table (`assets/routing.toml`, embedded): per task class, the tiers
//! offered in order of suitability, whether vision is needed, the least context window
//! and the suggested effort; and the escalation ladder (tiers lowest first, and the
//! provider order for "the next provider's equivalent tier").
//!
//! Pure. What must stay true: a [`RoutingPolicy`] has a rule for every class, each with at
//! least one tier and no tier twice; the ladder's tiers rise strictly and name each
//! provider once. [`RoutingPolicy::parse`] refuses anything else with a sentence naming
//! the key.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::money::Tier;
use crate::spec::Effort;

use super::class::TaskClass;

/// The embedded rule table, exactly as shipped.
pub const EMBEDDED_ROUTING_TOML: &str = include_str!("../../../../assets/routing.toml");

/// What suits one task class.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassPolicy {
    /// The tiers offered, most suitable first; tiers not listed are not offered.
    pub tiers: Vec<Tier>,
    /// Only models that read images are offered or accepted.
    pub needs_vision: bool,
    /// Models with a smaller known context window are not offered.
    pub min_context: Option<u64>,
    /// The effort suggested when the dispatch names none.
    pub effort: Option<Effort>,
}

impl ClassPolicy {
    /// Where `tier` stands in this class's preference (0 = most suitable), if offered.
    pub fn rank_of(&self, tier: Tier) -> Option<usize> {
        self.tiers.iter().position(|t| *t == tier)
    }
}

/// The escalation ladder.
#[derive(Debug, Clone, PartialEq)]
pub struct Ladder {
    /// Lowest first, strictly rising.
    pub tiers: Vec<Tier>,
    /// The order in which providers stand in for each other (after the run's own,
    /// wrapping round). Also breaks ties between equally priced route options.
    pub providers: Vec<String>,
}

impl Ladder {
    /// The ladder's tiers above `tier`, nearest first.
    pub fn above(&self, tier: Tier) -> impl Iterator<Item = Tier> + '_ {
        self.tiers.iter().copied().filter(move |t| *t > tier)
    }

    /// The other ladder providers in turn after `provider` (wrapping round); all of them
    /// in ladder order when `provider` is not on the ladder.
    pub fn after(&self, provider: &str) -> Vec<&str> {
        let n = self.providers.len();
        match self.providers.iter().position(|p| p == provider) {
            Some(i) => (1..n)
                .map(|k| self.providers[(i + k) % n].as_str())
                .collect(),
            None => self.providers.iter().map(String::as_str).collect(),
        }
    }

    /// Where `provider` stands on the ladder; providers not on it come after all others.
    pub fn position(&self, provider: &str) -> usize {
        self.providers
            .iter()
            .position(|p| p == provider)
            .unwrap_or(self.providers.len())
    }
}

/// The whole rule table.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingPolicy {
    classes: BTreeMap<TaskClass, ClassPolicy>,
    ladder: Ladder,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    classes: BTreeMap<String, ClassFile>,
    ladder: LadderFile,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassFile {
    tiers: Vec<String>,
    #[serde(default)]
    needs_vision: bool,
    #[serde(default)]
    min_context: Option<u64>,
    #[serde(default)]
    effort: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LadderFile {
    tiers: Vec<String>,
    providers: Vec<String>,
}

impl RoutingPolicy {
    /// The embedded table (parsed once).
    pub fn embedded() -> RoutingPolicy {
        static RULES: OnceLock<RoutingPolicy> = OnceLock::new();
        RULES
            .get_or_init(|| {
                RoutingPolicy::parse(EMBEDDED_ROUTING_TOML)
                    .unwrap_or_else(|e| panic!("the embedded routing policy is invalid: {e}"))
            })
            .clone()
    }

    /// A table in the shape of `assets/routing.toml`; the refusal names the key at fault.
    pub fn parse(text: &str) -> Result<RoutingPolicy, String> {
        let file: RulesFile = toml::from_str(text).map_err(|e| {
            e.message()
                .split('\n')
                .next()
                .unwrap_or_default()
                .to_string()
        })?;
        let mut classes = BTreeMap::new();
        for (name, rule) in file.classes {
            let Some(class) = TaskClass::parse(&name) else {
                return Err(format!(
                    "`classes.{name}` names no task class; classes are: {}",
                    class_words()
                ));
            };
            let tiers = tiers(&rule.tiers, &format!("classes.{name}.tiers"))?;
            if tiers.is_empty() {
                return Err(format!(
                    "`classes.{name}.tiers` is empty; list at least one tier"
                ));
            }
            let mut seen = Vec::new();
            for t in &tiers {
                if seen.contains(t) {
                    return Err(format!("`classes.{name}.tiers` lists {t} twice"));
                }
                seen.push(*t);
            }
            let effort = match rule.effort.as_deref() {
                Some(word) => Some(Effort::from_word(word).ok_or_else(|| {
                    format!(
                        "`classes.{name}.effort` must be minimal, low, medium, high or xhigh, found {word:?}"
                    )
                })?),
                None => None,
            };
            classes.insert(
                class,
                ClassPolicy {
                    tiers,
                    needs_vision: rule.needs_vision,
                    min_context: rule.min_context,
                    effort,
                },
            );
        }
        if let Some(missing) = TaskClass::ALL.iter().find(|c| !classes.contains_key(c)) {
            return Err(format!(
                "`classes.{missing}` is missing; every class needs a rule"
            ));
        }
        let ladder_tiers = tiers(&file.ladder.tiers, "ladder.tiers")?;
        if ladder_tiers.is_empty() || ladder_tiers.windows(2).any(|w| w[0] >= w[1]) {
            return Err(
                "`ladder.tiers` must list tiers lowest first, each once (small, standard, frontier)"
                    .to_string(),
            );
        }
        let mut providers: Vec<String> = Vec::new();
        for p in &file.ladder.providers {
            let p = p.trim();
            if p.is_empty() || providers.iter().any(|q| q == p) {
                return Err(format!(
                    "`ladder.providers` must name each provider once, found {p:?} empty or twice"
                ));
            }
            providers.push(p.to_string());
        }
        Ok(RoutingPolicy {
            classes,
            ladder: Ladder {
                tiers: ladder_tiers,
                providers,
            },
        })
    }

    /// The rule for `class` (every class has one).
    pub fn rule(&self, class: TaskClass) -> &ClassPolicy {
        &self.classes[&class]
    }

    /// The escalation ladder: tiers lowest first, and the providers' order.
    pub fn ladder(&self) -> &Ladder {
        &self.ladder
    }
}

fn tiers(words: &[String], key: &str) -> Result<Vec<Tier>, String> {
    words
        .iter()
        .map(|w| {
            Tier::parse(w).ok_or_else(|| {
                format!("`{key}` must hold small, standard or frontier, found {w:?}")
            })
        })
        .collect()
}

fn class_words() -> String {
    TaskClass::ALL
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
