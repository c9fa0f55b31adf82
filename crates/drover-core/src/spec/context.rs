//! What validation needs to know about the world, passed in as values and callbacks so
//! validation itself stays pure.
//!
//! Owns the seams: the provider list, the model catalog trait and the directory check.
//! What must stay true: nothing here reads files or the clock; the caller decides what
//! "exists" means (`dir_exists`) and what a model name resolves to (`ModelCatalog`).

use crate::config::Limits;
use serde::{Deserialize, Serialize};
use std::path::Path;

use super::validated::PermissionPolicy;

/// Everything `validate` consults besides the input.
pub struct ValidationContext<'a> {
    /// The configured limits the spec's numbers are clamped into.
    pub limits: &'a Limits,
    /// Every configured provider, enabled or not, in the order to list them.
    pub providers: &'a [ProviderInfo],
    /// Used when the input names no provider.
    pub default_provider: &'a str,
    /// The caller's directory: a relative `cwd` is resolved against it.
    pub current_dir: &'a Path,
    /// Whether a path names an existing directory (the driver asks the file system).
    pub dir_exists: &'a dyn Fn(&Path) -> bool,
    /// What model names resolve to.
    pub models: &'a dyn ModelCatalog,
}

/// One configured provider, as validation sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderInfo {
    /// The provider's configured name.
    pub name: String,
    /// Whether the config enables it; a disabled provider is refused.
    pub enabled: bool,
    /// The permission policies its adapter can honour.
    pub policies: Vec<PermissionPolicy>,
}

/// What a model name means for one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelResolution {
    /// A model that may be used; `id` is its canonical catalog id.
    Known {
        /// The model's canonical catalog id.
        id: String,
    },
    /// A model the catalog knows but the config hides or disables.
    Hidden,
    /// No such model; `suggestions` are close names (see [`super::suggest`]).
    Unknown {
        /// Up to five close names of the provider's models, best first.
        suggestions: Vec<String>,
    },
}

/// Resolves model names. The model catalog implements this; tests use small tables.
pub trait ModelCatalog {
    /// What `model` means for `provider`.
    fn resolve(&self, provider: &str, model: &str) -> ModelResolution;
}

/// A catalog that accepts every name as it is written. Stands in until the real catalog
/// lands, and suits providers whose models are not listed.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyModel;

impl ModelCatalog for AnyModel {
    fn resolve(&self, _provider: &str, model: &str) -> ModelResolution {
        ModelResolution::Known {
            id: model.to_string(),
        }
    }
}
