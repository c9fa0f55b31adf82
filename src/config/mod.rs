//! Configuration: the embedded defaults (`assets/default-config.toml`) with the user's
//! TOML file merged over them.

pub mod limits;

pub use limits::Limits;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The embedded defaults, exactly as shipped.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("../../assets/default-config.toml");

/// The merged configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub limits: Limits,
    pub providers: BTreeMap<String, ProviderConfig>,
}

/// How to start one provider's CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The executable: a name looked up on PATH or a path. Empty for `sim` means this
    /// drover executable.
    pub command: String,
    /// Arguments put before drover's own.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to the child's inherited environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

impl Config {
    /// The embedded defaults alone (no user file).
    pub fn defaults() -> Config {
        toml::from_str(DEFAULT_CONFIG_TOML).expect("the embedded default config is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_defaults_parse_and_hold_the_design_numbers() {
        let c = Config::defaults();
        assert_eq!(c.limits.max_minutes_default, 45);
        assert_eq!(c.limits.per_provider["claude-code"], 3);
        assert_eq!(c.limits.per_provider["codex"], 4);
        assert_eq!(c.limits.session_hard_cap_usd, 25.0);
        assert!(c.providers.contains_key("sim"));
    }
}
