//! The money sections of the config: `[pricing]` and the user's `[[catalog.models]]`
//! entries, read as written.
//!
//! What must stay true: these are the file's shapes only. Merging the entries over the
//! embedded model catalog, and every check that needs that catalog (a new model needs a
//! tier, aliases must not collide, one default per provider), live in
//! [`crate::money::catalog`]; the loader runs them so that a [`super::Config`] it returns
//! always builds a catalog.

use serde::{Deserialize, Serialize};

/// `[pricing]`: how strictly spend must be priceable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PricingConfig {
    /// Refuse a dispatch up front (`BUDGET_UNPRICED`) when its model has no price in the
    /// catalog. When false, such a run goes ahead and its usage is recorded as `unpriced`
    /// (flagged, never booked as $0).
    pub enforce: bool,
}

/// `[catalog]`: the user's additions to the embedded model catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// Entries that add a model, or override one of the embedded catalog's by
    /// (provider, id); `hidden = true` hides a model.
    pub models: Vec<CatalogEntry>,
}

/// One `[[catalog.models]]` entry (also the shape of each `[[models]]` entry of
/// `assets/catalog.toml`). Only `provider` and `id` are required: an entry that
/// overrides a known model changes only the fields it sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// `claude-code`, `codex`, `opencode`, `sim`, or another configured provider.
    pub provider: String,
    /// The name the provider's CLI takes (`--model`); matched without regard to case.
    pub id: String,
    /// Other names that resolve to this model (replace the known model's aliases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aliases: Option<Vec<String>>,
    /// `small`, `standard` or `frontier`; required for a model the catalog does not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// US dollars per million input tokens (uncached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_per_mtok: Option<f64>,
    /// US dollars per million output tokens (reasoning tokens are billed as output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_per_mtok: Option<f64>,
    /// US dollars per million input tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_mtok: Option<f64>,
    /// US dollars per million input tokens written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
    /// The model costs nothing (instead of prices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<bool>,
    /// Tokens the model can take in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Whether the model reads images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<bool>,
    /// The provider's default model (what `auto` falls back to without routing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
    /// A hidden model is refused (`MODEL_DISABLED`) and never offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}
