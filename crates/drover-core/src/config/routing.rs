//! The `[routing]` section of the config: how a dispatch without a model is routed
//! (docs/ARCHITECTURE.md §"Routing and route cards"), read as written.
//!
//! What must stay true: these are the file's shapes only; the decision they feed
//! ([`crate::route::decide`]) is the route module's. Class names under
//! `[routing.classes.<class>]` are checked against the task classes by the loader
//! ([`super::validate`]), so a [`super::Config`] it returns names only known classes.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::money::Tier;

/// `[routing] mode`: whether a routed dispatch waits behind a route card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingMode {
    /// Hold the run (`awaiting_route`) behind a route card.
    Ask,
    /// Take the recommended option; no card.
    Auto,
    /// Hold only when the recommended option's tier or price is above the thresholds.
    AskAbove,
}

impl RoutingMode {
    /// Every mode.
    pub const ALL: [RoutingMode; 3] = [RoutingMode::Ask, RoutingMode::Auto, RoutingMode::AskAbove];

    /// The mode as the config file writes it (`ask`, `auto`, `ask-above`).
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingMode::Ask => "ask",
            RoutingMode::Auto => "auto",
            RoutingMode::AskAbove => "ask-above",
        }
    }
}

/// `[routing]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    /// The mode for every class without its own under `[routing.classes.<class>]`.
    pub mode: RoutingMode,
    /// `ask-above`: hold when the recommended option's tier is above this one.
    pub ask_above_tier: Tier,
    /// `ask-above`: hold when the recommended option's output price (US dollars per
    /// million tokens) is above this; an unpriced option is held too. Unset: no price
    /// threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_above_price_per_mtok: Option<f64>,
    /// A route card left unanswered this long is closed as declined (`route_expired`).
    pub card_expiry_secs: u64,
    /// Per task class (`code`, `review`, `research`, `design`, `docs`) overrides.
    pub classes: BTreeMap<String, ClassRouting>,
}

/// `[routing.classes.<class>]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassRouting {
    /// This class's mode instead of `[routing] mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RoutingMode>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::error::ErrorCode;
    use std::path::Path;

    fn parse(text: &str) -> Result<Config, crate::error::DroverError> {
        Config::parse(text, Path::new("/p/config.toml"))
    }

    #[test]
    fn routing_is_read_from_the_user_file_over_the_defaults() {
        let c = parse(
            "[routing]\nmode = \"ask-above\"\nask_above_tier = \"frontier\"\n\
             ask_above_price_per_mtok = 12.5\ncard_expiry_secs = 60\n\n\
             [routing.classes.docs]\nmode = \"auto\"\n\n[routing.classes.design]\n",
        )
        .unwrap();
        let r = &c.routing;
        assert_eq!(r.mode, RoutingMode::AskAbove);
        assert_eq!(r.ask_above_tier, Tier::Frontier);
        assert_eq!(r.ask_above_price_per_mtok, Some(12.5));
        assert_eq!(r.card_expiry_secs, 60);
        assert_eq!(r.classes["docs"].mode, Some(RoutingMode::Auto));
        assert_eq!(r.classes["design"].mode, None);

        // Only what is written changes.
        let c = parse("[routing]\nmode = \"auto\"\n").unwrap();
        assert_eq!(c.routing.mode, RoutingMode::Auto);
        assert_eq!(c.routing.ask_above_tier, Tier::Standard);
        assert_eq!(c.routing.card_expiry_secs, 1800);
        assert_eq!(
            parse("routing.classes.code.mode = \"ask\"\n")
                .unwrap()
                .routing
                .classes["code"]
                .mode,
            Some(RoutingMode::Ask)
        );
    }

    #[test]
    fn modes_serialize_as_the_file_writes_them() {
        for mode in RoutingMode::ALL {
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{}\"", mode.as_str()));
        }
        let c = parse("[routing]\nmode = \"ask-above\"\nask_above_price_per_mtok = 3.0\n[routing.classes.docs]\nmode = \"auto\"\n").unwrap();
        let again = parse(&c.to_toml_string().unwrap()).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn bad_routing_names_the_file_the_line_and_the_key() {
        let cases = [
            (
                "[routing]\nmode = \"sometimes\"\n",
                "/p/config.toml line 2: `routing.mode`: unknown variant `sometimes`, expected one of `ask`, `auto`, `ask-above`",
            ),
            (
                "[routing]\nmod = \"auto\"\n",
                "/p/config.toml line 2: unknown key `routing.mod` (did you mean `mode`?); known keys in [routing]: mode, ask_above_tier, ask_above_price_per_mtok, card_expiry_secs, classes",
            ),
            (
                "[routing]\nmode = \"auto\"\nask_above_tier = \"huge\"\n",
                "/p/config.toml line 3: `routing.ask_above_tier`: unknown variant `huge`, expected one of `small`, `standard`, `frontier`",
            ),
            (
                "[routing]\nask_above_price_per_mtok = \"cheap\"\n",
                "/p/config.toml line 2: `routing.ask_above_price_per_mtok` must be a number, found a string",
            ),
            (
                "[routing]\nask_above_price_per_mtok = -1.0\n",
                "/p/config.toml line 2: `routing.ask_above_price_per_mtok` must be a dollar amount from 0 to 1000000, found -1",
            ),
            (
                "[routing]\ncard_expiry_secs = 0\n",
                "/p/config.toml line 2: `routing.card_expiry_secs` must be at least 1 (seconds a route card stays open), found 0",
            ),
            (
                "[routing]\nmode = \"ask\"\n\n[routing.classes.codee]\nmode = \"auto\"\n",
                "/p/config.toml line 4: `routing.classes.codee` names no task class; classes are: code, review, research, design, docs",
            ),
            (
                "[routing.classes.docs]\nmode = \"auto\"\nmood = \"ask\"\n",
                "/p/config.toml line 3: unknown key `routing.classes.docs.mood` (did you mean `mode`?); known keys in [routing.classes.docs]: mode",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code, ErrorCode::ConfigInvalid, "{text}");
            assert_eq!(e.message, want, "{text}");
        }
    }
}
