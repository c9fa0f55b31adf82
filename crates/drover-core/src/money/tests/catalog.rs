use std::path::Path;

use crate::config::{CatalogEntry, Config, SIM_PROVIDER};
use crate::error::ErrorCode;
use crate::money::catalog::{Catalog, EMBEDDED_CATALOG_TOML, Model, Tier, USER_ENTRIES_KEY};
use crate::money::pricing::Price;
use crate::spec::{
    MAX_SUGGESTIONS, ModelResolution, PermissionPolicy, ProviderInfo, SpecInput, ValidationContext,
    validate,
};

/// Every provider drover can run: the catalog covers each of them.
/// The providers with catalog models: every runnable one but the ACP agents (whose
/// models are their own).
fn providers() -> Vec<&'static str> {
    crate::providers::registry::runnable_names()
        .into_iter()
        .filter(|p| !crate::providers::registry::is_acp(p))
        .collect()
}

fn entry(provider: &str, id: &str) -> CatalogEntry {
    CatalogEntry {
        provider: provider.into(),
        id: id.into(),
        ..CatalogEntry::default()
    }
}

fn with(entries: Vec<CatalogEntry>) -> Catalog {
    match Catalog::with_entries(&entries) {
        Ok(c) => c,
        Err(p) => panic!("entries refused: {}", p.message),
    }
}

fn known(id: &str) -> ModelResolution {
    ModelResolution::Known { id: id.into() }
}

fn ids<'a>(models: impl IntoIterator<Item = &'a Model>) -> Vec<&'a str> {
    models.into_iter().map(|m| m.id.as_str()).collect()
}

#[test]
fn the_embedded_catalog_covers_every_provider_with_one_visible_default() {
    let c = Catalog::embedded();
    assert_eq!(c.providers(), providers());
    for provider in providers() {
        let defaults: Vec<&Model> = c.models(provider).filter(|m| m.default).collect();
        assert_eq!(defaults.len(), 1, "{provider} has one default");
        assert!(!defaults[0].hidden, "{provider}'s default is visible");
        let (model, note) = c.default_model(provider);
        assert_eq!(model.map(|m| m.id.as_str()), Some(defaults[0].id.as_str()));
        assert_eq!(note, None);
        for tier in Tier::ALL {
            assert!(
                c.pick(provider, tier).is_some(),
                "{provider} has a {tier} model"
            );
        }
    }
    assert_eq!(
        c.default_model("claude-code").0.unwrap().id,
        "claude-sonnet-5-5"
    );
    assert_eq!(c.default_model("codex").0.unwrap().id, "gpt-5.5");
    assert_eq!(c.default_model(SIM_PROVIDER).0.unwrap().id, "sim-standard");
}

#[test]
fn every_embedded_entry_states_its_tier_flags_and_prices_plainly() {
    #[derive(serde::Deserialize)]
    struct File {
        models: Vec<CatalogEntry>,
    }
    let file: File = toml::from_str(EMBEDDED_CATALOG_TOML).unwrap();
    for e in &file.models {
        let name = format!("{} {}", e.provider, e.id);
        assert!(e.tier.is_some(), "{name}: tier");
        assert!(
            e.aliases.is_some() || e.free == Some(true),
            "{name}: aliases"
        );
        assert!(e.vision.is_some(), "{name}: vision");
        assert!(e.default.is_some(), "{name}: default");
        assert!(e.hidden.is_some(), "{name}: hidden");
        let rates = [
            e.input_per_mtok,
            e.output_per_mtok,
            e.cache_read_per_mtok,
            e.cache_write_per_mtok,
        ];
        // all four prices or none: no price silently defaults in the shipped file
        assert!(
            rates.iter().all(Option::is_some) || rates.iter().all(Option::is_none),
            "{name}: prices"
        );
    }
}

#[test]
fn codex_reports_tokens_only_so_every_codex_model_has_a_price() {
    let c = Catalog::embedded();
    for m in c.models("codex") {
        assert!(
            matches!(m.price, Price::Priced { .. }),
            "codex {} must be priced",
            m.id
        );
    }
}

#[test]
fn the_sim_has_a_ladder_a_free_an_unpriced_and_a_hidden_model() {
    let c = Catalog::embedded();
    let tier = |id: &str| c.find(SIM_PROVIDER, id).map(|m| m.tier);
    assert_eq!(tier("sim-small"), Some(Tier::Small));
    assert_eq!(tier("sim-standard"), Some(Tier::Standard));
    assert_eq!(tier("sim-frontier"), Some(Tier::Frontier));
    assert_eq!(c.price(SIM_PROVIDER, "sim-free"), Price::Free);
    assert_eq!(c.price(SIM_PROVIDER, "sim-unpriced"), Price::Unpriced);
    assert!(c.find(SIM_PROVIDER, "sim-retired").unwrap().hidden);
    // the sim's scenarios report this model by default
    assert_eq!(
        c.resolve(SIM_PROVIDER, "claude-sonnet-4-5"),
        known("sim-standard")
    );
}

#[test]
fn names_resolve_by_id_or_alias_in_any_case() {
    let c = Catalog::embedded();
    let cases: &[(&str, &str, ModelResolution)] = &[
        ("claude-code", "claude-opus-5-5", known("claude-opus-5-5")),
        ("claude-code", "opus", known("claude-opus-5-5")),
        ("claude-code", "SONNET", known("claude-sonnet-5-5")),
        (
            "claude-code",
            "  Claude-Haiku-5-5 ",
            known("claude-haiku-5-5"),
        ),
        (
            "claude-code",
            "claude-sonnet-4-5-20250929",
            known("claude-sonnet-4-5"),
        ),
        ("codex", "GPT-5.5", known("gpt-5.5")),
        ("codex", "gpt5.5", known("gpt-5.5")),
        ("opencode", "sonnet", known("anthropic/claude-sonnet-5-5")),
        ("opencode", "OpenAI/GPT-5.4", known("openai/gpt-5.4")),
        (SIM_PROVIDER, "sim-retired", ModelResolution::Hidden),
        (SIM_PROVIDER, "SIM-RETIRED", ModelResolution::Hidden),
        // the same name means different models on different providers
        ("codex", "sonnet", unknown(&[])),
        // a provider the catalog does not list takes names as written
        ("claude-work", " my-model ", known("my-model")),
    ];
    for (provider, name, want) in cases {
        assert_eq!(&c.resolve(provider, name), want, "{provider} {name:?}");
    }
}

fn unknown(suggestions: &[&str]) -> ModelResolution {
    ModelResolution::Unknown {
        suggestions: suggestions.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn unknown_names_get_up_to_five_visible_suggestions() {
    let c = Catalog::embedded();
    let cases: &[(&str, &str, &[&str])] = &[
        // one name per model: the alias `gpt5.5` is not offered beside `gpt-5.5`
        ("codex", "gpt-5.55", &["gpt-5.5", "gpt-5.4", "gpt-5.2"]),
        (
            "codex",
            "gpt-5",
            &[
                "gpt-5.5",
                "gpt-5.4",
                "gpt-5.3-codex",
                "gpt-5.2",
                "gpt-5.4-mini",
            ],
        ),
        ("claude-code", "sonet", &["sonnet"]),
        // at most five, nearest first
        (
            "claude-code",
            "claude-sonet-5-5",
            &[
                "claude-sonnet-5-5",
                "claude-sonnet-4-5",
                "claude-sonnet-5",
                "claude-sonnet-4-6",
                "claude-opus-5-5",
            ],
        ),
        // hidden models are never suggested
        (SIM_PROVIDER, "sim-retire", &[]),
        ("codex", "llama-70b", &[]),
    ];
    for (provider, name, want) in cases {
        let got = c.resolve(provider, name);
        assert_eq!(got, unknown(want), "{provider} {name:?}");
        if let ModelResolution::Unknown { suggestions } = got {
            assert!(suggestions.len() <= MAX_SUGGESTIONS);
        }
    }
}

#[test]
fn the_default_is_pinned_to_the_first_visible_model_when_hidden() {
    let mut hide = entry(SIM_PROVIDER, "sim-standard");
    hide.hidden = Some(true);
    let c = with(vec![hide]);
    let (model, note) = c.default_model(SIM_PROVIDER);
    assert_eq!(model.map(|m| m.id.as_str()), Some("sim-small"));
    assert_eq!(
        note.as_deref(),
        Some(
            "sim's default model sim-standard is hidden; using sim-small, its first visible model"
        )
    );
    assert_eq!(
        c.resolve(SIM_PROVIDER, "sim-standard"),
        ModelResolution::Hidden
    );
    // by alias too
    assert_eq!(
        c.resolve(SIM_PROVIDER, "claude-sonnet-4-5"),
        ModelResolution::Hidden
    );

    // no default at all
    let mut undefault = entry("codex", "gpt-5.5");
    undefault.default = Some(false);
    let c = with(vec![undefault]);
    let (model, note) = c.default_model("codex");
    assert_eq!(model.map(|m| m.id.as_str()), Some("gpt-5.5"));
    assert_eq!(
        note.as_deref(),
        Some("codex has no default model; using gpt-5.5, its first visible model")
    );

    // everything hidden
    let every: Vec<CatalogEntry> = Catalog::embedded()
        .models("codex")
        .map(|m| CatalogEntry {
            hidden: Some(true),
            ..entry("codex", &m.id)
        })
        .collect();
    let c = with(every);
    let (model, note) = c.default_model("codex");
    assert!(model.is_none());
    assert!(note.unwrap().contains("every other codex model"));

    assert_eq!(
        Catalog::embedded().default_model("claude-work"),
        (None, None)
    );
}

#[test]
fn a_default_set_by_the_user_replaces_the_shipped_one() {
    let mut pick = entry("codex", "gpt-5.4-mini");
    pick.default = Some(true);
    let c = with(vec![pick]);
    let defaults: Vec<&str> = ids(c.models("codex").filter(|m| m.default));
    assert_eq!(defaults, ["gpt-5.4-mini"]);
    assert_eq!(c.default_model("codex").0.unwrap().id, "gpt-5.4-mini");
    // other providers keep theirs
    assert_eq!(
        c.default_model("claude-code").0.unwrap().id,
        "claude-sonnet-5-5"
    );
}

#[test]
fn user_entries_override_by_provider_and_id_and_add_new_models() {
    let mut cheaper = entry("codex", "GPT-5.5");
    cheaper.input_per_mtok = Some(1.25);
    cheaper.aliases = Some(vec!["five-five".into()]);
    let mut added = entry("codex", "gpt-6-preview");
    added.tier = Some("Frontier".into());
    added.input_per_mtok = Some(10.0);
    added.output_per_mtok = Some(40.0);
    added.context_window = Some(2_000_000);
    added.vision = Some(true);
    let mut free = entry("opencode", "opencode/new-free");
    free.tier = Some("small".into());
    free.free = Some(true);
    let mut no_longer_free = entry("sim", "sim-free");
    no_longer_free.free = Some(false);
    let mut now_priced = entry("sim", "sim-unpriced");
    now_priced.input_per_mtok = Some(2.0);
    now_priced.output_per_mtok = Some(8.0);
    now_priced.cache_write_per_mtok = Some(0.0);
    let c = with(vec![cheaper, added, free, no_longer_free, now_priced]);

    let gpt = c.find("codex", "gpt-5.5").unwrap();
    // the id keeps its catalog spelling; only the fields set change
    assert_eq!(gpt.id, "gpt-5.5");
    assert_eq!(
        gpt.price,
        Price::Priced {
            input: 1.25,
            output: 30.0,
            cache_read: 0.5,
            cache_write: 0.0
        }
    );
    assert_eq!(gpt.tier, Tier::Frontier);
    assert!(gpt.default);
    // aliases are replaced, not added to
    assert_eq!(c.resolve("codex", "five-five"), known("gpt-5.5"));
    assert!(matches!(
        c.resolve("codex", "gpt5.5"),
        ModelResolution::Unknown { .. }
    ));

    let new = c.find("codex", "gpt-6-preview").unwrap();
    assert_eq!(new.tier, Tier::Frontier);
    assert_eq!(new.context_window, Some(2_000_000));
    assert!(new.vision && !new.default && !new.hidden);
    // cache rates left out default to the input rate (never under-books)
    assert_eq!(
        new.price,
        Price::Priced {
            input: 10.0,
            output: 40.0,
            cache_read: 10.0,
            cache_write: 10.0
        }
    );
    // added models come after the shipped ones of their provider
    assert_eq!(ids(c.models("codex")).last(), Some(&"gpt-6-preview"));

    assert_eq!(c.price("opencode", "opencode/new-free"), Price::Free);
    assert_eq!(c.price("sim", "sim-free"), Price::Unpriced);
    assert_eq!(
        c.price("sim", "sim-unpriced"),
        Price::Priced {
            input: 2.0,
            output: 8.0,
            cache_read: 2.0,
            cache_write: 0.0
        }
    );
}

#[test]
fn hidden_models_keep_their_price_and_can_be_shown_again() {
    let mut hide = entry("codex", "gpt-5.4");
    hide.hidden = Some(true);
    let c = with(vec![hide]);
    assert_eq!(c.resolve("codex", "gpt-5.4"), ModelResolution::Hidden);
    assert!(matches!(c.price("codex", "gpt-5.4"), Price::Priced { .. }));
    assert!(!ids(c.visible("codex")).contains(&"gpt-5.4"));

    let mut show = entry(SIM_PROVIDER, "sim-retired");
    show.hidden = Some(false);
    let c = with(vec![show]);
    assert_eq!(c.resolve(SIM_PROVIDER, "sim-retired"), known("sim-retired"));
}

#[test]
fn bad_entries_are_refused_naming_the_entry_and_the_key() {
    let priced = |provider: &str, id: &str| CatalogEntry {
        tier: Some("small".into()),
        input_per_mtok: Some(1.0),
        output_per_mtok: Some(2.0),
        ..entry(provider, id)
    };
    let cases: Vec<(Vec<CatalogEntry>, usize, Option<&str>, &str)> = vec![
        (vec![entry("", "x")], 0, Some("provider"), "is empty"),
        (vec![entry("codex", " ")], 0, Some("id"), "is empty"),
        (
            vec![priced("codex", "a"), entry("codex", "new")],
            1,
            None,
            "adds codex model `new`, which needs a `tier`",
        ),
        (
            vec![CatalogEntry {
                tier: Some("medium".into()),
                ..entry("codex", "gpt-5.5")
            }],
            0,
            Some("tier"),
            "must be small, standard or frontier, found \"medium\"",
        ),
        (
            vec![CatalogEntry {
                output_per_mtok: Some(f64::NAN),
                ..entry("codex", "gpt-5.5")
            }],
            0,
            Some("output_per_mtok"),
            "must be a dollar amount of 0 or more",
        ),
        (
            vec![CatalogEntry {
                free: Some(true),
                cache_write_per_mtok: Some(1.0),
                ..entry("sim", "sim-small")
            }],
            0,
            Some("free"),
            "also sets prices",
        ),
        (
            vec![CatalogEntry {
                input_per_mtok: Some(1.0),
                ..entry("sim", "sim-unpriced")
            }],
            0,
            Some("output_per_mtok"),
            "needs both `input_per_mtok` and `output_per_mtok`",
        ),
        (
            vec![CatalogEntry {
                aliases: Some(vec!["ok".into(), "  ".into()]),
                ..entry("sim", "sim-small")
            }],
            0,
            Some("aliases"),
            "holds an empty name",
        ),
        (
            vec![priced("sim", "a"), priced("sim", "A")],
            1,
            Some("id"),
            "repeats sim model `A` of `catalog.models[0]`",
        ),
        (
            vec![CatalogEntry {
                aliases: Some(vec!["sim-small".into()]),
                ..entry("sim", "sim-frontier")
            }],
            0,
            Some("aliases"),
            "the alias `sim-small` of sim model `sim-frontier` already names sim model `sim-small`",
        ),
        (
            // a new model whose id is an alias of a shipped one
            vec![priced("sim", "claude-haiku-4-5"), priced("sim", "other")],
            0,
            Some("id"),
            "the id `claude-haiku-4-5` of sim model `claude-haiku-4-5` already names sim model `sim-small`",
        ),
        (
            vec![
                CatalogEntry {
                    default: Some(true),
                    ..entry("sim", "sim-small")
                },
                CatalogEntry {
                    default: Some(true),
                    ..entry("sim", "sim-frontier")
                },
            ],
            1,
            Some("default"),
            "makes `sim-frontier` the sim default, but `catalog.models[0]` already did that",
        ),
    ];
    for (entries, at, key, words) in cases {
        let problem = match Catalog::with_entries(&entries) {
            Ok(_) => panic!("expected a refusal of {entries:?}"),
            Err(p) => p,
        };
        assert_eq!(problem.entry, at, "{}", problem.message);
        assert_eq!(problem.key, key, "{}", problem.message);
        assert!(
            problem.message.contains(words),
            "{:?} should contain {words:?}",
            problem.message
        );
        assert!(
            problem
                .message
                .contains(&format!("`{USER_ENTRIES_KEY}[{at}]")),
            "{}",
            problem.message
        );
    }
}

#[test]
fn a_loaded_config_builds_its_catalog() {
    let config = Config::parse(
        "[[catalog.models]]\nprovider = \"sim\"\nid = \"sim-small\"\nhidden = true\n",
        Path::new("/p/config.toml"),
    )
    .unwrap();
    let c = Catalog::from_config(&config).unwrap();
    assert_eq!(
        c.resolve(SIM_PROVIDER, "sim-small"),
        ModelResolution::Hidden
    );
    assert_eq!(
        Catalog::from_config(&Config::defaults()).unwrap(),
        Catalog::embedded()
    );

    // a hand-made config with a bad entry is refused, not panicked on
    let mut bad = Config::defaults();
    bad.catalog.models.push(entry("sim", "brand-new"));
    let e = Catalog::from_config(&bad).unwrap_err();
    assert_eq!(e.code, ErrorCode::ConfigInvalid);
}

#[test]
fn escalation_climbs_the_tier_ladder_on_the_same_provider() {
    let c = Catalog::embedded();
    let up = |provider: &str, model: &str| c.next_tier_up(provider, model).map(|m| m.id.as_str());
    assert_eq!(up(SIM_PROVIDER, "sim-small"), Some("sim-standard"));
    assert_eq!(up(SIM_PROVIDER, "sim-free"), Some("sim-standard"));
    assert_eq!(up(SIM_PROVIDER, "sim-standard"), Some("sim-frontier"));
    assert_eq!(up(SIM_PROVIDER, "sim-frontier"), None);
    assert_eq!(up("claude-code", "haiku"), Some("claude-sonnet-5-5"));
    assert_eq!(up("claude-code", "sonnet"), Some("claude-opus-5-5"));
    assert_eq!(up("codex", "gpt-5.4-nano"), Some("gpt-5.4"));
    assert_eq!(up("codex", "no-such-model"), None);

    // a hidden tier is skipped; a hidden model is never picked
    let mut hide = entry(SIM_PROVIDER, "sim-standard");
    hide.hidden = Some(true);
    let c = with(vec![hide]);
    assert_eq!(
        c.next_tier_up(SIM_PROVIDER, "sim-small")
            .map(|m| m.id.as_str()),
        Some("sim-unpriced")
    );
    let mut hide_both = vec![
        entry(SIM_PROVIDER, "sim-standard"),
        entry(SIM_PROVIDER, "sim-unpriced"),
    ];
    for e in &mut hide_both {
        e.hidden = Some(true);
    }
    let c = with(hide_both);
    assert_eq!(
        c.next_tier_up(SIM_PROVIDER, "sim-small")
            .map(|m| m.id.as_str()),
        Some("sim-frontier")
    );
}

#[test]
fn the_pick_of_a_tier_prefers_the_provider_default() {
    let c = Catalog::embedded();
    let pick = |p: &str, t: Tier| c.pick(p, t).map(|m| m.id.as_str());
    assert_eq!(
        pick("claude-code", Tier::Standard),
        Some("claude-sonnet-5-5")
    );
    assert_eq!(pick("claude-code", Tier::Frontier), Some("claude-opus-5-5"));
    assert_eq!(pick("codex", Tier::Standard), Some("gpt-5.4"));
    let mut make_default = entry("codex", "gpt-5.2");
    make_default.default = Some(true);
    let c = with(vec![make_default]);
    assert_eq!(
        c.pick("codex", Tier::Standard).map(|m| m.id.as_str()),
        Some("gpt-5.2")
    );
}

#[test]
fn the_same_tier_is_offered_on_the_other_real_providers_only() {
    let c = Catalog::embedded();
    assert_eq!(
        ids(c.same_tier_elsewhere("claude-code", "sonnet")),
        ["gpt-5.4", "anthropic/claude-sonnet-5-5"]
    );
    assert_eq!(
        ids(c.same_tier_elsewhere("codex", "gpt-5.5")),
        ["claude-opus-5-5", "anthropic/claude-opus-5-5"]
    );
    // the sim never stands in for a real provider, nor the reverse
    assert!(
        c.same_tier_elsewhere(SIM_PROVIDER, "sim-standard")
            .is_empty()
    );
    assert!(c.same_tier_elsewhere("codex", "unknown").is_empty());
}

#[test]
fn validation_uses_the_catalog_for_model_unknown_and_model_disabled() {
    let config = Config::defaults();
    let providers: Vec<ProviderInfo> = providers()
        .iter()
        .map(|p| ProviderInfo {
            name: p.to_string(),
            enabled: true,
            policies: vec![
                PermissionPolicy::Ask,
                PermissionPolicy::Restricted,
                PermissionPolicy::Auto,
            ],
        })
        .collect();
    let catalog = Catalog::embedded();
    let dir_exists = |_: &Path| true;
    let ctx = ValidationContext {
        limits: &config.limits,
        providers: &providers,
        default_provider: SIM_PROVIDER,
        current_dir: Path::new("/w"),
        dir_exists: &dir_exists,
        models: &catalog,
    };
    let input = |model: &str| SpecInput {
        task: "do it".into(),
        provider: Some("sim".into()),
        model: Some(model.into()),
        ..SpecInput::default()
    };
    let spec = validate(&input("SIM-small"), &ctx).unwrap();
    assert_eq!(spec.model.as_deref(), Some("sim-small"));
    let e = validate(&input("sim-retired"), &ctx).unwrap_err();
    assert_eq!(e.code, ErrorCode::ModelDisabled);
    let e = validate(&input("sim-smal"), &ctx).unwrap_err();
    assert_eq!(e.code, ErrorCode::ModelUnknown);
    assert!(e.message.contains("sim-small"), "{}", e.message);
}
