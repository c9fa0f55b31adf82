//! The model catalog: per provider, the models drover knows, with tier, list prices,
//! context window, vision, the provider default and what is hidden.
//!
//! The catalog ships as `assets/catalog.toml` (embedded); the user's `[[catalog.models]]`
//! entries are applied over it in order: an entry naming a known (provider, id) changes
//! the fields it sets, any other entry adds a model. What must stay true:
//! - names resolve without regard to case, by id or alias, and each name stands for one
//!   model of its provider (ids and aliases never collide);
//! - a hidden model still resolves (to [`ModelResolution::Hidden`]) and keeps its price,
//!   so usage booked on it before it was hidden is still priced; it is never suggested,
//!   defaulted to or picked for escalation;
//! - a provider has at most one default; [`Catalog::default_model`] falls back to the
//!   first visible model, with a note, when the default is hidden or missing;
//! - every refusal of an entry names the entry (`catalog.models[N]`) and the key at
//!   fault, so the config loader can point at the user's line.
//!
//! Pure: building and looking up never touch the file system.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use crate::config::{CatalogEntry, Config, SIM_PROVIDER};
use crate::error::{DroverError, ErrorCode};
use crate::spec::{ModelCatalog, ModelResolution, suggest};

use super::dollars::is_amount;
use super::pricing::Price;

/// The embedded catalog, exactly as shipped.
pub const EMBEDDED_CATALOG_TOML: &str = include_str!("../../../../assets/catalog.toml");

/// How the user's entries are named in messages (their place in the config file).
pub const USER_ENTRIES_KEY: &str = "catalog.models";

/// How capable (and, roughly, how dear) a model is; escalation climbs this ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Cheap, fast models for simple work.
    Small,
    /// The everyday models.
    Standard,
    /// The most capable (and dearest) models.
    Frontier,
}

impl Tier {
    /// Every tier, lowest first.
    pub const ALL: [Tier; 3] = [Tier::Small, Tier::Standard, Tier::Frontier];

    /// The tier as the catalog and the config write it (`small`, `standard`, `frontier`).
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Small => "small",
            Tier::Standard => "standard",
            Tier::Frontier => "frontier",
        }
    }

    /// The tier a word names (case-insensitive, surrounding spaces ignored).
    pub fn parse(word: &str) -> Option<Tier> {
        let word = word.trim();
        Tier::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(word))
    }

    /// The tiers above this one, nearest first.
    pub fn above(self) -> impl Iterator<Item = Tier> {
        Tier::ALL.into_iter().filter(move |t| *t > self)
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One model of one provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The provider's configured name (`claude-code`, `codex`, `opencode`, `sim`).
    pub provider: String,
    /// The canonical name, as the provider's CLI takes it.
    pub id: String,
    /// Other names the model answers to (case-insensitive), unique within its provider.
    pub aliases: Vec<String>,
    /// How capable the model is.
    pub tier: Tier,
    /// Its list price, per million tokens.
    pub price: Price,
    /// How many tokens the model's context holds, when known.
    pub context_window: Option<u64>,
    /// Whether the model takes images.
    pub vision: bool,
    /// The provider's default model.
    pub default: bool,
    /// Hidden models still resolve and keep their price, but are never suggested,
    /// defaulted to or picked.
    pub hidden: bool,
}

impl Model {
    /// Whether `name` is this model's id or one of its aliases (case-insensitive).
    pub fn answers_to(&self, name: &str) -> bool {
        let name = name.trim();
        self.id.eq_ignore_ascii_case(name)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    }
}

/// An entry that cannot be applied: which entry (its index in the list it came from),
/// which of its keys is at fault (`None`: the entry as a whole), and a sentence that
/// names `catalog.models[N]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogProblem {
    /// The entry's index in the list it came from.
    pub entry: usize,
    /// The key at fault; `None` when the entry as a whole is.
    pub key: Option<&'static str>,
    /// What is wrong, naming `catalog.models[N]`.
    pub message: String,
}

/// The models of every provider, in catalog order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Catalog {
    models: Vec<Model>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    models: Vec<CatalogEntry>,
}

impl Catalog {
    /// The embedded catalog alone.
    pub fn embedded() -> Catalog {
        // Parsed once per process: a command and the dashboard ask for it more than once.
        static EMBEDDED: std::sync::LazyLock<Catalog> = std::sync::LazyLock::new(|| {
            let file: CatalogFile =
                toml::from_str(EMBEDDED_CATALOG_TOML).expect("the embedded catalog is valid TOML");
            let mut catalog = Catalog { models: Vec::new() };
            catalog
                .apply(&file.models, "models")
                .expect("the embedded catalog's entries are valid");
            catalog
        });
        EMBEDDED.clone()
    }

    /// The embedded catalog with the user's `entries` applied over it, in order.
    pub fn with_entries(entries: &[CatalogEntry]) -> Result<Catalog, CatalogProblem> {
        let mut catalog = Catalog::embedded();
        catalog.apply(entries, USER_ENTRIES_KEY)?;
        Ok(catalog)
    }

    /// The catalog a configuration asks for. A config from [`Config::load`] was checked
    /// with [`Catalog::with_entries`] already, so this fails only for hand-made configs.
    pub fn from_config(config: &Config) -> Result<Catalog, DroverError> {
        Catalog::with_entries(&config.catalog.models)
            .map_err(|p| DroverError::new(ErrorCode::ConfigInvalid, p.message))
    }

    /// Every model, hidden ones included, in catalog order.
    pub fn all(&self) -> &[Model] {
        &self.models
    }

    /// The providers the catalog lists models for, in catalog order.
    pub fn providers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for m in &self.models {
            if !out.contains(&m.provider.as_str()) {
                out.push(&m.provider);
            }
        }
        out
    }

    /// A provider's models, hidden ones included.
    pub fn models<'a>(&'a self, provider: &str) -> impl Iterator<Item = &'a Model> {
        self.models.iter().filter(move |m| m.provider == provider)
    }

    /// A provider's models that may be used.
    pub fn visible<'a>(&'a self, provider: &str) -> impl Iterator<Item = &'a Model> {
        self.models(provider).filter(|m| !m.hidden)
    }

    /// The model `name` (id or alias, any case) names for `provider`, hidden or not.
    pub fn find(&self, provider: &str, name: &str) -> Option<&Model> {
        self.models(provider).find(|m| m.answers_to(name))
    }

    /// What `name` means for `provider`: a usable model (by its canonical id), a hidden
    /// one, or no such model with up to five close names among the visible ones (ids and
    /// aliases, one name per model). A provider the catalog lists no models for takes any
    /// name as it is written.
    pub fn resolve(&self, provider: &str, name: &str) -> ModelResolution {
        if self.models(provider).next().is_none() {
            return ModelResolution::Known {
                id: name.trim().to_string(),
            };
        }
        match self.find(provider, name) {
            Some(m) if m.hidden => ModelResolution::Hidden,
            Some(m) => ModelResolution::Known { id: m.id.clone() },
            None => {
                let ids = self.visible(provider).map(|m| m.id.as_str());
                let aliases = self
                    .visible(provider)
                    .flat_map(|m| m.aliases.iter().map(String::as_str));
                // One name per model: an alias is dropped when its model is already named.
                let mut named: Vec<&str> = Vec::new();
                let suggestions = suggest(name, ids.chain(aliases))
                    .into_iter()
                    .filter(|s| match self.find(provider, s) {
                        Some(m) if named.contains(&m.id.as_str()) => false,
                        Some(m) => {
                            named.push(&m.id);
                            true
                        }
                        None => true,
                    })
                    .collect();
                ModelResolution::Unknown { suggestions }
            }
        }
    }

    /// The model a run on `provider` gets when it names none: the provider default, or,
    /// when the default is hidden (or none is set), the first visible model with a note
    /// saying so. `(None, None)` for a provider the catalog does not list; `(None, note)`
    /// when every model of the provider is hidden.
    pub fn default_model(&self, provider: &str) -> (Option<&Model>, Option<String>) {
        if self.models(provider).next().is_none() {
            return (None, None);
        }
        let first_visible = self.visible(provider).next();
        let default = self.models(provider).find(|m| m.default);
        let why = match default {
            Some(d) if !d.hidden => return (Some(d), None),
            Some(d) => format!("{provider}'s default model {} is hidden", d.id),
            None => format!("{provider} has no default model"),
        };
        match first_visible {
            Some(v) => (
                Some(v),
                Some(format!("{why}; using {}, its first visible model", v.id)),
            ),
            None => (
                None,
                Some(format!(
                    "{why} and so is every other {provider} model; unhide one under [[catalog.models]]"
                )),
            ),
        }
    }

    /// The price of `model` (id or alias) on `provider`; `Unpriced` for a model the
    /// catalog does not know. Hidden models keep their price.
    pub fn price(&self, provider: &str, model: &str) -> Price {
        self.find(provider, model)
            .map_or(Price::Unpriced, |m| m.price)
    }

    /// The model to take on `provider` for `tier`: the provider default when it is of
    /// that tier and visible, else the first visible model of the tier.
    pub fn pick(&self, provider: &str, tier: Tier) -> Option<&Model> {
        let mut of_tier = self.visible(provider).filter(|m| m.tier == tier);
        let first = of_tier.next()?;
        Some(
            std::iter::once(first)
                .chain(of_tier)
                .find(|m| m.default)
                .unwrap_or(first),
        )
    }

    /// Escalation on the same provider: the pick of the nearest tier above `model`'s that
    /// has a visible model. `None` at the top, or for a model the catalog does not know.
    pub fn next_tier_up(&self, provider: &str, model: &str) -> Option<&Model> {
        let tier = self.find(provider, model)?.tier;
        tier.above().find_map(|t| self.pick(provider, t))
    }

    /// The same tier elsewhere: for each other provider (in catalog order), its pick of
    /// `model`'s tier. The sim and the real providers never stand in for each other.
    pub fn same_tier_elsewhere(&self, provider: &str, model: &str) -> Vec<&Model> {
        let Some(tier) = self.find(provider, model).map(|m| m.tier) else {
            return Vec::new();
        };
        let simulated = provider == SIM_PROVIDER;
        self.providers()
            .into_iter()
            .filter(|p| *p != provider && (*p == SIM_PROVIDER) == simulated)
            .filter_map(|p| self.pick(p, tier))
            .collect()
    }

    /// Applies `entries` (named `{list}[N]` in messages) over this catalog, in order.
    fn apply(&mut self, entries: &[CatalogEntry], list: &str) -> Result<(), CatalogProblem> {
        // The entry that last set each model, to blame collisions on the user's entry.
        let mut set_by: Vec<Option<usize>> = vec![None; self.models.len()];
        let mut seen: HashMap<(String, String), usize> = HashMap::new();
        let mut default_set_by: HashMap<String, usize> = HashMap::new();

        for (index, entry) in entries.iter().enumerate() {
            let at = |key: Option<&'static str>, message: String| CatalogProblem {
                entry: index,
                key,
                message,
            };
            let name = |key: &str| format!("`{list}[{index}].{key}`");
            let EntryFields {
                provider,
                id,
                tier,
                aliases,
            } = read_entry(entry, index, list)?;
            let key = (provider.to_string(), id.to_lowercase());
            if let Some(first) = seen.insert(key, index) {
                return Err(at(
                    Some("id"),
                    format!(
                        "`{list}[{index}]` repeats {provider} model `{id}` of `{list}[{first}]`; merge the two entries"
                    ),
                ));
            }

            let existing = self
                .models
                .iter()
                .position(|m| m.provider == provider && m.id.eq_ignore_ascii_case(id));
            let target = match existing {
                Some(i) => {
                    let price = merged_price(&self.models[i].price, entry)
                        .map_err(|(key, why)| at(Some(key), format!("{}: {why}", name(key))))?;
                    let m = &mut self.models[i];
                    m.price = price;
                    if let Some(tier) = tier {
                        m.tier = tier;
                    }
                    if let Some(aliases) = aliases {
                        m.aliases = aliases;
                    }
                    if let Some(window) = entry.context_window {
                        m.context_window = Some(window);
                    }
                    if let Some(vision) = entry.vision {
                        m.vision = vision;
                    }
                    if let Some(hidden) = entry.hidden {
                        m.hidden = hidden;
                    }
                    i
                }
                None => {
                    let Some(tier) = tier else {
                        return Err(at(
                            None,
                            format!(
                                "`{list}[{index}]` adds {provider} model `{id}`, which needs a `tier` (small, standard or frontier)"
                            ),
                        ));
                    };
                    let price = merged_price(&Price::Unpriced, entry)
                        .map_err(|(key, why)| at(Some(key), format!("{}: {why}", name(key))))?;
                    self.models.push(Model {
                        provider: provider.to_string(),
                        id: id.to_string(),
                        aliases: aliases.unwrap_or_default(),
                        tier,
                        price,
                        context_window: entry.context_window,
                        vision: entry.vision.unwrap_or(false),
                        default: false,
                        hidden: entry.hidden.unwrap_or(false),
                    });
                    set_by.push(None);
                    self.models.len() - 1
                }
            };
            set_by[target] = Some(index);

            match entry.default {
                Some(true) => {
                    if let Some(first) = default_set_by.insert(provider.to_string(), index) {
                        return Err(at(
                            Some("default"),
                            format!(
                                "{} makes `{id}` the {provider} default, but `{list}[{first}]` already did that for another model; keep one",
                                name("default")
                            ),
                        ));
                    }
                    for m in self.models.iter_mut().filter(|m| m.provider == provider) {
                        m.default = false;
                    }
                    self.models[target].default = true;
                }
                Some(false) => self.models[target].default = false,
                None => {}
            }
        }
        self.check_names(entries, &set_by, list)
    }

    /// Every id and alias names one model of its provider.
    fn check_names(
        &self,
        entries: &[CatalogEntry],
        set_by: &[Option<usize>],
        list: &str,
    ) -> Result<(), CatalogProblem> {
        let mut owner: HashMap<(&str, String), usize> = HashMap::new();
        for (i, m) in self.models.iter().enumerate() {
            let names = std::iter::once(&m.id)
                .chain(&m.aliases)
                .map(|n| n.to_lowercase());
            for name in names {
                let other = *owner
                    .entry((m.provider.as_str(), name.clone()))
                    .or_insert(i);
                if other == i {
                    continue;
                }
                // Blame the later entry that set one of the two models (the shipped file
                // has no collisions, so one of them was set by an entry of this list).
                let entry = set_by[i].max(set_by[other]).unwrap_or(0);
                let (blamed, taken_by) = if set_by[i] == Some(entry) {
                    (i, other)
                } else {
                    (other, i)
                };
                let blamed = &self.models[blamed];
                let what = if blamed.id.eq_ignore_ascii_case(&name) {
                    "id"
                } else {
                    "alias"
                };
                let written_alias = entries
                    .get(entry)
                    .and_then(|e| e.aliases.as_ref())
                    .is_some_and(|aliases| {
                        aliases.iter().any(|a| a.trim().eq_ignore_ascii_case(&name))
                    });
                let (key, place) = if written_alias {
                    (Some("aliases"), format!("`{list}[{entry}].aliases`"))
                } else if what == "id" {
                    (Some("id"), format!("`{list}[{entry}].id`"))
                } else {
                    (None, format!("`{list}[{entry}]`"))
                };
                return Err(CatalogProblem {
                    entry,
                    key,
                    message: format!(
                        "{place}: the {what} `{name}` of {} model `{}` already names {} model `{}`; a name may stand for one model only",
                        m.provider, blamed.id, m.provider, self.models[taken_by].id
                    ),
                });
            }
        }
        Ok(())
    }
}

impl ModelCatalog for Catalog {
    fn resolve(&self, provider: &str, model: &str) -> ModelResolution {
        Catalog::resolve(self, provider, model)
    }
}

/// The checked fields of an entry that need more than serde: provider and id present,
/// the tier a known word, prices dollar amounts, `free` not mixed with prices, aliases
/// not blank.
struct EntryFields<'e> {
    provider: &'e str,
    id: &'e str,
    tier: Option<Tier>,
    aliases: Option<Vec<String>>,
}

fn read_entry<'e>(
    entry: &'e CatalogEntry,
    index: usize,
    list: &str,
) -> Result<EntryFields<'e>, CatalogProblem> {
    let at = |key: Option<&'static str>, message: String| CatalogProblem {
        entry: index,
        key,
        message,
    };
    let name = |key: &str| format!("`{list}[{index}].{key}`");
    let provider = entry.provider.trim();
    let id = entry.id.trim();
    if provider.is_empty() {
        return Err(at(
            Some("provider"),
            format!(
                "{} is empty; name the provider the model belongs to",
                name("provider")
            ),
        ));
    }
    if id.is_empty() {
        return Err(at(
            Some("id"),
            format!(
                "{} is empty; give the name the provider's CLI takes",
                name("id")
            ),
        ));
    }
    let tier = match entry.tier.as_deref() {
        Some(word) => Some(Tier::parse(word).ok_or_else(|| {
            at(
                Some("tier"),
                format!(
                    "{} must be small, standard or frontier, found {word:?}",
                    name("tier")
                ),
            )
        })?),
        None => None,
    };
    for (key, value) in rates(entry) {
        if let Some(value) = value
            && !is_amount(value)
        {
            return Err(at(
                Some(key),
                format!(
                    "{} must be a dollar amount of 0 or more, found {value}",
                    name(key)
                ),
            ));
        }
    }
    let sets_rates = rates(entry).iter().any(|(_, v)| v.is_some());
    if entry.free == Some(true) && sets_rates {
        return Err(at(
            Some("free"),
            format!(
                "{} is true but the entry also sets prices; keep one or the other",
                name("free")
            ),
        ));
    }
    let aliases: Option<Vec<String>> = match &entry.aliases {
        Some(list_of) => {
            if list_of.iter().any(|a| a.trim().is_empty()) {
                return Err(at(
                    Some("aliases"),
                    format!("{} holds an empty name", name("aliases")),
                ));
            }
            Some(list_of.iter().map(|a| a.trim().to_string()).collect())
        }
        None => None,
    };
    Ok(EntryFields {
        provider,
        id,
        tier,
        aliases,
    })
}

/// The four price keys of an entry with their values.
fn rates(entry: &CatalogEntry) -> [(&'static str, Option<f64>); 4] {
    [
        ("input_per_mtok", entry.input_per_mtok),
        ("output_per_mtok", entry.output_per_mtok),
        ("cache_read_per_mtok", entry.cache_read_per_mtok),
        ("cache_write_per_mtok", entry.cache_write_per_mtok),
    ]
}

/// `base` with the entry's price keys applied: `free = true` makes it free; price keys
/// change the rates they name (a model without rates yet needs both input and output;
/// cache rates it leaves out default to the input rate, which never under-books);
/// `free = false` alone makes a free model unpriced.
fn merged_price(base: &Price, entry: &CatalogEntry) -> Result<Price, (&'static str, String)> {
    if entry.free == Some(true) {
        return Ok(Price::Free);
    }
    let sets_rates = rates(entry).iter().any(|(_, v)| v.is_some());
    if !sets_rates {
        return Ok(match (base, entry.free) {
            (Price::Free, Some(false)) => Price::Unpriced,
            _ => *base,
        });
    }
    let (input, output, cache_read, cache_write) = match *base {
        Price::Priced {
            input,
            output,
            cache_read,
            cache_write,
        } => (
            entry.input_per_mtok.unwrap_or(input),
            entry.output_per_mtok.unwrap_or(output),
            entry.cache_read_per_mtok.unwrap_or(cache_read),
            entry.cache_write_per_mtok.unwrap_or(cache_write),
        ),
        Price::Free | Price::Unpriced => {
            let (Some(input), Some(output)) = (entry.input_per_mtok, entry.output_per_mtok) else {
                let missing = if entry.input_per_mtok.is_none() {
                    "input_per_mtok"
                } else {
                    "output_per_mtok"
                };
                return Err((
                    missing,
                    "a model without prices needs both `input_per_mtok` and `output_per_mtok`"
                        .to_string(),
                ));
            };
            (
                input,
                output,
                entry.cache_read_per_mtok.unwrap_or(input),
                entry.cache_write_per_mtok.unwrap_or(input),
            )
        }
    };
    Ok(Price::Priced {
        input,
        output,
        cache_read,
        cache_write,
    })
}
