//! Table tests of classification, the rule table, the router, pick validation, the
//! routing mode decision and escalation offers.

use super::*;
use crate::config::{CatalogEntry, Config};
use crate::error::ErrorCode;
use crate::money::{Catalog, Tier};
use crate::spec::{Effort, Spec};
use std::path::Path;

fn spec(provider: &str, task: &str) -> Spec {
    serde_json::from_value(serde_json::json!({
        "provider": provider, "model": null, "effort": null, "cwd": "/tmp", "task": task,
        "context": null, "title": "t", "tags": [], "capability": "workspace",
        "policy": "ask", "max_minutes": 45, "budget_usd": 5.0, "idle_timeout_secs": 1200,
        "max_turns": 6, "output_schema": null, "workflow_id": null, "parent_run": null,
        "idempotency_key": null, "queue_if_busy": true, "scenario": null, "class": null,
        "clamps": []
    }))
    .unwrap()
}

const REAL: [&str; 3] = ["claude-code", "codex", "opencode"];

fn all_available() -> Vec<ProviderAvailability> {
    REAL.iter()
        .chain(&["sim"])
        .map(|p| ProviderAvailability::available(p))
        .collect()
}

fn with(unavailable: &[(&str, &str)]) -> Vec<ProviderAvailability> {
    all_available()
        .into_iter()
        .map(|p| match unavailable.iter().find(|(n, _)| *n == p.name) {
            Some((n, why)) => ProviderAvailability::unavailable(n, why),
            None => p,
        })
        .collect()
}

/// `provider/model` of each option, in order.
fn names(r: &Routing) -> Vec<String> {
    r.options
        .iter()
        .map(|o| format!("{}/{}", o.provider, o.model))
        .collect()
}

fn routed(
    provider: &str,
    class: TaskClass,
    catalog: &Catalog,
    providers: &[ProviderAvailability],
) -> Routing {
    route(
        &spec(provider, "x"),
        class,
        catalog,
        providers,
        &RoutingPolicy::embedded(),
    )
}

fn entry(provider: &str, id: &str) -> CatalogEntry {
    CatalogEntry {
        provider: provider.into(),
        id: id.into(),
        ..CatalogEntry::default()
    }
}

fn hide(provider: &str, id: &str) -> CatalogEntry {
    CatalogEntry {
        hidden: Some(true),
        ..entry(provider, id)
    }
}

/// The embedded catalog with codex's standard models replaced by a cheap one, a
/// standard claude-code model with too small a context window, and opencode left with
/// its free models only (which cannot read images).
fn custom_catalog() -> Catalog {
    let mut entries = vec![
        hide("codex", "gpt-5.4"),
        hide("codex", "gpt-5.3-codex"),
        hide("codex", "gpt-5.2"),
        CatalogEntry {
            tier: Some("standard".into()),
            input_per_mtok: Some(0.5),
            output_per_mtok: Some(2.0),
            context_window: Some(400_000),
            vision: Some(true),
            ..entry("codex", "gpt-cheap")
        },
        CatalogEntry {
            tier: Some("standard".into()),
            input_per_mtok: Some(0.1),
            output_per_mtok: Some(0.2),
            context_window: Some(50_000),
            vision: Some(true),
            ..entry("claude-code", "claude-tiny-window")
        },
    ];
    for id in [
        "anthropic/claude-sonnet-5-5",
        "anthropic/claude-opus-5-5",
        "anthropic/claude-haiku-5-5",
        "openai/gpt-5.5",
        "openai/gpt-5.4",
        "openai/gpt-5.4-mini",
    ] {
        entries.push(hide("opencode", id));
    }
    Catalog::with_entries(&entries).unwrap()
}

/// (provider filter, class, providers, expected options, expected left out)
type RouterRow<'a> = (
    &'a str,
    TaskClass,
    Vec<ProviderAvailability>,
    Vec<&'a str>,
    Vec<(&'a str, &'a str)>,
);

/// (outcome, providers, expected (kind, provider, model))
type OfferRow<'a> = (
    RunOutcome<'a>,
    &'a [ProviderAvailability],
    Option<(EscalationKind, &'a str, &'a str)>,
);

// --- classify ------------------------------------------------------------------------

#[test]
fn classify_table() {
    // (class, tags, task, expected)
    let table: &[(Option<&str>, &[&str], &str, TaskClass)] = &[
        (Some("design"), &[], "Fix the login bug", TaskClass::Design),
        (Some(" Review "), &["docs"], "Fix it", TaskClass::Review),
        (Some("nonsense"), &[], "Fix the login bug", TaskClass::Code),
        (
            Some("nonsense"),
            &["docs"],
            "Fix the login bug",
            TaskClass::Docs,
        ),
        (
            None,
            &["urgent", "review"],
            "Fix the login bug",
            TaskClass::Review,
        ),
        (
            None,
            &["research"],
            "Fix the login bug",
            TaskClass::Research,
        ),
        (None, &["UI"], "Fix the login bug", TaskClass::Design),
        (
            None,
            &["documentation"],
            "Fix the login bug",
            TaskClass::Docs,
        ),
        (None, &["bug"], "Review the PR", TaskClass::Code),
        (
            None,
            &["urgent"],
            "Review PR #42 for races",
            TaskClass::Review,
        ),
        (
            None,
            &[],
            "look at this diff and comment",
            TaskClass::Review,
        ),
        (None, &[], "Check the pull request", TaskClass::Review),
        (None, &[], "Reviewing the parser change", TaskClass::Review),
        (
            None,
            &[],
            "Update the README with install steps",
            TaskClass::Docs,
        ),
        (None, &[], "Document the config keys", TaskClass::Docs),
        (None, &[], "write docs for the CLI", TaskClass::Docs),
        (
            None,
            &[],
            "Make the settings UI match the mockup",
            TaskClass::Design,
        ),
        (None, &[], "Design a new landing page", TaskClass::Design),
        (
            None,
            &[],
            "the screenshot shows a broken layout",
            TaskClass::Design,
        ),
        (
            None,
            &[],
            "Investigate the memory leak",
            TaskClass::Research,
        ),
        (
            None,
            &[],
            "Why does the build take 10 minutes?",
            TaskClass::Research,
        ),
        (
            None,
            &[],
            "Compare serde_json and simd-json",
            TaskClass::Research,
        ),
        (
            None,
            &[],
            "research rate limiting options",
            TaskClass::Research,
        ),
        (None, &[], "Fix the flaky test in ledger", TaskClass::Code),
        (
            None,
            &[],
            "Add a --json flag to drover runs",
            TaskClass::Code,
        ),
        (
            None,
            &[],
            "write a comparator for versions",
            TaskClass::Code,
        ),
        (None, &[], "print the product", TaskClass::Code),
        (None, &[], "", TaskClass::Code),
        // Class order decides between words: review before docs before design.
        (None, &[], "review the design doc", TaskClass::Review),
        (None, &[], "document why the UI is slow", TaskClass::Docs),
    ];
    for (class, tags, task, want) in table {
        let mut s = spec("sim", task);
        s.class = class.map(str::to_string);
        s.tags = tags.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            classify(&s),
            *want,
            "class {class:?} tags {tags:?} task {task:?}"
        );
    }
}

#[test]
fn class_words_round_trip() {
    for c in TaskClass::ALL {
        assert_eq!(TaskClass::parse(c.as_str()), Some(c));
        assert_eq!(TaskClass::parse(&c.as_str().to_uppercase()), Some(c));
        assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
    }
    assert_eq!(TaskClass::parse("codes"), None);
}

// --- policy ---------------------------------------------------------------------------

#[test]
fn embedded_rules_cover_every_class_and_design_needs_vision() {
    let policy = RoutingPolicy::embedded();
    for c in TaskClass::ALL {
        assert!(!policy.rule(c).tiers.is_empty(), "{c}");
    }
    assert!(policy.rule(TaskClass::Design).needs_vision);
    assert!(!policy.rule(TaskClass::Code).needs_vision);
    assert_eq!(policy.rule(TaskClass::Code).tiers[0], Tier::Standard);
    assert_eq!(policy.rule(TaskClass::Research).tiers[0], Tier::Frontier);
    assert_eq!(policy.rule(TaskClass::Docs).tiers[0], Tier::Small);
    assert_eq!(policy.rule(TaskClass::Docs).effort, Some(Effort::Low));
    assert_eq!(policy.ladder().tiers, Tier::ALL.to_vec());
    assert_eq!(policy.ladder().providers, REAL.to_vec());
    assert_eq!(
        policy.ladder().after("codex"),
        vec!["opencode", "claude-code"]
    );
    assert_eq!(policy.ladder().after("sim"), REAL.to_vec());
}

#[test]
fn bad_rule_tables_are_refused_naming_the_key() {
    let good = EMBEDDED_ROUTING_TOML;
    let cases: &[(String, &str)] = &[
        (
            good.replace("[classes.docs]", "[classes.doks]"),
            "`classes.doks` names no task class",
        ),
        (
            good.replace(
                "tiers = [\"small\", \"standard\"]",
                "tiers = [\"small\", \"huge\"]",
            ),
            "`classes.docs.tiers` must hold small, standard or frontier, found \"huge\"",
        ),
        (
            good.replace(
                "tiers = [\"small\", \"standard\"]",
                "tiers = [\"small\", \"small\"]",
            ),
            "`classes.docs.tiers` lists small twice",
        ),
        (
            good.replace("tiers = [\"small\", \"standard\"]", "tiers = []"),
            "`classes.docs.tiers` is empty",
        ),
        (
            good.replace("effort = \"low\"", "effort = \"max\""),
            "`classes.docs.effort` must be minimal",
        ),
        (
            good.replace(
                "tiers = [\"small\", \"standard\", \"frontier\"]",
                "tiers = [\"standard\", \"small\", \"frontier\"]",
            ),
            "`ladder.tiers` must list tiers lowest first",
        ),
        (
            good.replace("\"codex\", \"opencode\"]", "\"codex\", \"codex\"]"),
            "`ladder.providers` must name each provider once",
        ),
        (
            good.replace("needs_vision = true", "needs_vision = true\nvision = 1"),
            "unknown field `vision`",
        ),
    ];
    for (text, want) in cases {
        let e = RoutingPolicy::parse(text).unwrap_err();
        assert!(e.contains(want), "{e:?} does not contain {want:?}");
    }
    let cut = good.split("[classes.docs]").next().unwrap().to_string()
        + "[ladder]\ntiers = [\"small\"]\nproviders = []\n";
    assert!(
        RoutingPolicy::parse(&cut)
            .unwrap_err()
            .contains("`classes.docs` is missing")
    );
}

// --- router --------------------------------------------------------------------------

#[test]
fn router_table_on_the_embedded_catalog() {
    let catalog = Catalog::embedded();
    let no_codex = with(&[("codex", "the codex CLI is not installed")]);
    // (provider filter, class, providers, expected first options, expected left out)
    let table: Vec<RouterRow> = vec![
        (
            "",
            TaskClass::Code,
            all_available(),
            vec![
                "claude-code/claude-sonnet-5-5",
                "opencode/anthropic/claude-sonnet-5-5",
                "codex/gpt-5.4",
                "claude-code/claude-opus-5-5",
                "opencode/anthropic/claude-opus-5-5",
                "codex/gpt-5.5",
            ],
            vec![],
        ),
        (
            "",
            TaskClass::Research,
            all_available(),
            vec![
                "claude-code/claude-opus-5-5",
                "opencode/anthropic/claude-opus-5-5",
                "codex/gpt-5.5",
                "claude-code/claude-sonnet-5-5",
                "opencode/anthropic/claude-sonnet-5-5",
                "codex/gpt-5.4",
            ],
            vec![],
        ),
        (
            "",
            TaskClass::Docs,
            no_codex.clone(),
            vec![
                "claude-code/claude-haiku-5-5",
                "opencode/anthropic/claude-haiku-5-5",
                "claude-code/claude-sonnet-5-5",
                "opencode/anthropic/claude-sonnet-5-5",
            ],
            vec![("codex", "the codex CLI is not installed")],
        ),
        (
            "",
            TaskClass::Review,
            with(&[
                ("claude-code", "disabled in config"),
                ("opencode", "the opencode CLI is not installed"),
            ]),
            vec!["codex/gpt-5.4", "codex/gpt-5.5"],
            vec![
                ("claude-code", "disabled in config"),
                ("opencode", "the opencode CLI is not installed"),
            ],
        ),
        // A provider filter offers every suitable model of that provider, cheapest first
        // within each tier: the free one leads.
        (
            "opencode",
            TaskClass::Code,
            all_available(),
            vec![
                "opencode/opencode/minimax-m3-free",
                "opencode/anthropic/claude-sonnet-5-5",
                "opencode/openai/gpt-5.4",
                "opencode/anthropic/claude-opus-5-5",
                "opencode/openai/gpt-5.5",
                "opencode/opencode/deepseek-v4-flash-free",
            ],
            vec![],
        ),
        // Design needs vision: the free minimax model is not offered.
        (
            "opencode",
            TaskClass::Design,
            all_available(),
            vec![
                "opencode/anthropic/claude-sonnet-5-5",
                "opencode/openai/gpt-5.4",
                "opencode/anthropic/claude-opus-5-5",
                "opencode/openai/gpt-5.5",
            ],
            vec![],
        ),
        // The sim: unpriced last within its tier, the hidden model never offered.
        (
            "sim",
            TaskClass::Code,
            all_available(),
            vec![
                "sim/sim-standard",
                "sim/sim-unpriced",
                "sim/sim-frontier",
                "sim/sim-free",
                "sim/sim-small",
            ],
            vec![],
        ),
        (
            "sim",
            TaskClass::Design,
            all_available(),
            vec!["sim/sim-standard", "sim/sim-frontier"],
            vec![],
        ),
        (
            "codex",
            TaskClass::Code,
            no_codex.clone(),
            vec![],
            vec![("codex", "the codex CLI is not installed")],
        ),
        (
            "acme",
            TaskClass::Code,
            all_available(),
            vec![],
            vec![("acme", "not configured")],
        ),
    ];
    for (provider, class, providers, want, want_left) in table {
        let r = routed(provider, class, &catalog, &providers);
        let got = names(&r);
        assert_eq!(got, want, "{provider:?} {class}");
        let left: Vec<(&str, &str)> = r
            .left_out
            .iter()
            .map(|l| (l.provider.as_str(), l.reason.as_str()))
            .collect();
        assert_eq!(left, want_left, "{provider:?} {class}");
        assert_eq!(r.class, class);
    }
}

#[test]
fn options_are_numbered_capped_and_the_first_recommended() {
    let catalog = Catalog::embedded();
    for class in TaskClass::ALL {
        for provider in ["", "claude-code", "codex", "opencode", "sim"] {
            let r = routed(provider, class, &catalog, &all_available());
            assert!(!r.options.is_empty(), "{provider:?} {class}");
            assert!(r.options.len() <= MAX_OPTIONS);
            for (i, o) in r.options.iter().enumerate() {
                assert_eq!(o.number, i as u32 + 1);
                assert_eq!(o.recommended, i == 0);
                let m = catalog.find(&o.provider, &o.model).unwrap();
                assert!(!m.hidden);
                assert_eq!(o.tier, m.tier.as_str());
                if class == TaskClass::Design {
                    assert!(o.vision, "{} offered for design", o.model);
                }
                if provider.is_empty() {
                    assert_ne!(o.provider, "sim", "the sim stands in for nobody");
                } else {
                    assert_eq!(o.provider, provider);
                }
            }
            assert_eq!(r.recommended(), r.options.first());
            assert_eq!(r.option(2), r.options.get(1));
            assert_eq!(r.option(99), None);
        }
    }
}

#[test]
fn options_carry_prices_effort_and_a_one_line_reason() {
    let catalog = Catalog::embedded();
    let r = routed("", TaskClass::Code, &catalog, &all_available());
    let first = &r.options[0];
    assert_eq!(first.tier, "standard");
    assert_eq!(first.input_per_mtok, Some(2.0));
    assert_eq!(first.output_per_mtok, Some(10.0));
    assert!(!first.free);
    assert_eq!(first.context_window, Some(1_000_000));
    assert_eq!(first.effort.as_deref(), Some("medium"));
    assert_eq!(
        first.reason,
        "standard tier suits code; $2/$10 per Mtok; 1M context"
    );
    assert_eq!(
        r.options[3].reason,
        "frontier tier, for harder code; $4/$20 per Mtok; 1M context"
    );

    let docs = routed("", TaskClass::Docs, &catalog, &all_available());
    assert_eq!(
        docs.options[0].reason,
        "small tier suits docs; $0.10/$0.50 per Mtok; 1M context"
    );
    let research = routed("", TaskClass::Research, &catalog, &all_available());
    assert_eq!(
        research.options[3].reason,
        "standard tier, cheaper for research; $2/$10 per Mtok; 1M context"
    );
    let design = routed("sim", TaskClass::Design, &catalog, &all_available());
    assert_eq!(
        design.options[0].reason,
        "standard tier suits design; $3/$15 per Mtok; 200k context; reads images"
    );

    let sim = routed("sim", TaskClass::Code, &catalog, &all_available());
    let unpriced = &sim.options[1];
    assert_eq!(unpriced.model, "sim-unpriced");
    assert!(unpriced.unpriced());
    assert_eq!((unpriced.input_per_mtok, unpriced.free), (None, false));
    assert!(unpriced.reason.contains("no price known"));
    let free = &sim.options[3];
    assert_eq!(free.model, "sim-free");
    assert!(free.free && !free.unpriced());
    assert!(free.reason.contains("; free;"));

    // The spec's effort wins over the class's suggestion.
    let mut s = spec("", "x");
    s.effort = Some(Effort::Xhigh);
    let r = route(
        &s,
        TaskClass::Docs,
        &catalog,
        &all_available(),
        &RoutingPolicy::embedded(),
    );
    assert!(
        r.options
            .iter()
            .all(|o| o.effort.as_deref() == Some("xhigh"))
    );
}

#[test]
fn router_table_on_a_custom_catalog() {
    let catalog = custom_catalog();
    // Code: codex's cheap standard model ranks first on price; the small-window model
    // is not offered; opencode offers only its free models.
    let r = routed("", TaskClass::Code, &catalog, &all_available());
    assert_eq!(
        names(&r),
        vec![
            "opencode/opencode/minimax-m3-free",
            "codex/gpt-cheap",
            "claude-code/claude-sonnet-5-5",
            "claude-code/claude-opus-5-5",
            "codex/gpt-5.5",
            "opencode/opencode/deepseek-v4-flash-free",
        ]
    );
    assert!(names(&r).iter().all(|n| !n.contains("tiny-window")));
    // Design: opencode's remaining models cannot read images, so it is left out.
    let r = routed("", TaskClass::Design, &catalog, &all_available());
    assert_eq!(
        names(&r),
        vec![
            "codex/gpt-cheap",
            "claude-code/claude-sonnet-5-5",
            "claude-code/claude-opus-5-5",
            "codex/gpt-5.5",
        ]
    );
    assert_eq!(
        r.left_out,
        vec![LeftOut {
            provider: "opencode".into(),
            reason: "no visible standard or frontier model that reads images and has at least 100k context for design work".into(),
        }]
    );
    // The provider filter shows every suitable model, cheapest first within the tier.
    let r = routed("claude-code", TaskClass::Code, &catalog, &all_available());
    let standard: Vec<&str> = r
        .options
        .iter()
        .take_while(|o| o.tier == "standard")
        .map(|o| o.model.as_str())
        .collect();
    assert_eq!(standard[0], "claude-sonnet-5-5");
    let prices: Vec<f64> = r
        .options
        .iter()
        .take_while(|o| o.tier == "standard")
        .map(|o| o.output_per_mtok.unwrap())
        .collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
}

#[test]
fn no_route_names_every_reason() {
    let catalog = Catalog::embedded();
    let r = routed(
        "",
        TaskClass::Code,
        &catalog,
        &with(&[
            ("claude-code", "the claude CLI is not installed"),
            ("codex", "disabled in config"),
            ("opencode", "the opencode CLI is not installed"),
        ]),
    );
    assert!(r.options.is_empty());
    let e = r.no_route_error();
    assert_eq!(e.code, ErrorCode::NoRoute);
    assert!(
        e.message
            .contains("claude-code: the claude CLI is not installed"),
        "{}",
        e.message
    );
    assert!(e.message.contains("codex: disabled in config"));
    // A provider with no catalog entries is left out saying so.
    let r = routed(
        "acme",
        TaskClass::Code,
        &catalog,
        &[ProviderAvailability::available("acme")],
    );
    assert_eq!(
        r.left_out[0].reason,
        "the model catalog lists no models for it"
    );
}

#[test]
fn route_options_serialize_with_their_field_names() {
    let r = routed(
        "sim",
        TaskClass::Code,
        &Catalog::embedded(),
        &all_available(),
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["class"], "code");
    assert_eq!(json["options"][0]["number"], 1);
    assert_eq!(json["options"][0]["recommended"], true);
    let back: Routing = serde_json::from_value(json).unwrap();
    assert_eq!(back, r);
}

// --- validate_pick -------------------------------------------------------------------

fn option(provider: &str, model: &str) -> RouteOption {
    RouteOption {
        number: 2,
        provider: provider.into(),
        model: model.into(),
        effort: None,
        tier: "standard".into(),
        input_per_mtok: None,
        output_per_mtok: None,
        free: false,
        context_window: None,
        vision: true,
        reason: String::new(),
        recommended: false,
    }
}

#[test]
fn validate_pick_table() {
    let catalog = Catalog::embedded();
    // (provider, model, class, enforce pricing, refusal containing)
    let table: &[(&str, &str, TaskClass, bool, Option<&str>)] = &[
        ("sim", "sim-standard", TaskClass::Code, true, None),
        ("sim", "SIM-STANDARD", TaskClass::Design, false, None),
        ("claude-code", "opus", TaskClass::Design, true, None),
        (
            "sim",
            "sim-gone",
            TaskClass::Code,
            false,
            Some("Option 2 (sim/sim-gone) is no longer in the model catalog"),
        ),
        (
            "sim",
            "sim-retired",
            TaskClass::Code,
            false,
            Some("is hidden in the config"),
        ),
        (
            "sim",
            "sim-small",
            TaskClass::Design,
            false,
            Some("cannot read images, which design work needs"),
        ),
        ("sim", "sim-small", TaskClass::Code, false, None),
        (
            "opencode",
            "minimax-m3-free",
            TaskClass::Design,
            false,
            Some("cannot read images"),
        ),
        (
            "sim",
            "sim-unpriced",
            TaskClass::Code,
            true,
            Some("has no price in the model catalog and pricing is enforced"),
        ),
        ("sim", "sim-unpriced", TaskClass::Code, false, None),
        ("sim", "sim-free", TaskClass::Code, true, None),
    ];
    for (provider, model, class, enforce, refusal) in table {
        let got = validate_pick(&option(provider, model), *class, &catalog, *enforce);
        match refusal {
            None => assert_eq!(got, Ok(()), "{provider}/{model} {class}"),
            Some(want) => {
                let e = got.unwrap_err();
                assert_eq!(e.code, ErrorCode::RoutePickRefused);
                assert!(e.message.contains(want), "{:?} lacks {want:?}", e.message);
            }
        }
    }
    // Checked against the catalog as it is now: a model hidden since the card was made.
    let hidden = Catalog::with_entries(&[hide("sim", "sim-standard")]).unwrap();
    assert!(
        validate_pick(
            &option("sim", "sim-standard"),
            TaskClass::Code,
            &hidden,
            false
        )
        .is_err()
    );
}

// --- decide --------------------------------------------------------------------------

fn routing_config(text: &str) -> RoutingConfig {
    Config::parse(text, Path::new("/p/config.toml"))
        .unwrap()
        .routing
}

fn priced(tier: &str, output: Option<f64>, free: bool) -> RouteOption {
    RouteOption {
        tier: tier.into(),
        output_per_mtok: output,
        input_per_mtok: output.map(|o| o / 5.0),
        free,
        ..option("sim", "sim-standard")
    }
}

#[test]
fn decide_table() {
    use RouteDecision::{Hold, Take};
    let standard = priced("standard", Some(10.0), false);
    let dear_standard = priced("standard", Some(15.0), false);
    let frontier = priced("frontier", Some(20.0), false);
    let small = priced("small", Some(0.5), false);
    let unpriced = priced("standard", None, false);
    let free = priced("standard", None, true);
    let odd = priced("gigantic", Some(1.0), false);
    let table: &[(&str, TaskClass, &RouteOption, RouteDecision)] = &[
        ("", TaskClass::Code, &standard, Hold),
        ("[routing]\nmode = \"ask\"\n", TaskClass::Code, &small, Hold),
        (
            "[routing]\nmode = \"auto\"\n",
            TaskClass::Code,
            &frontier,
            Take,
        ),
        // Per-class overrides, both ways.
        (
            "[routing.classes.docs]\nmode = \"auto\"\n",
            TaskClass::Docs,
            &standard,
            Take,
        ),
        (
            "[routing.classes.docs]\nmode = \"auto\"\n",
            TaskClass::Code,
            &standard,
            Hold,
        ),
        (
            "[routing]\nmode = \"auto\"\n[routing.classes.research]\nmode = \"ask\"\n",
            TaskClass::Research,
            &small,
            Hold,
        ),
        (
            "[routing]\nmode = \"auto\"\n[routing.classes.research]\n",
            TaskClass::Research,
            &small,
            Take,
        ),
        // ask-above on tier (default threshold standard).
        (
            "[routing]\nmode = \"ask-above\"\n",
            TaskClass::Code,
            &small,
            Take,
        ),
        (
            "[routing]\nmode = \"ask-above\"\n",
            TaskClass::Code,
            &standard,
            Take,
        ),
        (
            "[routing]\nmode = \"ask-above\"\n",
            TaskClass::Code,
            &frontier,
            Hold,
        ),
        (
            "[routing]\nmode = \"ask-above\"\n",
            TaskClass::Code,
            &odd,
            Hold,
        ),
        (
            "[routing]\nmode = \"ask-above\"\nask_above_tier = \"small\"\n",
            TaskClass::Code,
            &standard,
            Hold,
        ),
        (
            "[routing]\nmode = \"ask-above\"\nask_above_tier = \"frontier\"\n",
            TaskClass::Code,
            &frontier,
            Take,
        ),
        // ask-above on price.
        (
            "[routing]\nmode = \"ask-above\"\nask_above_price_per_mtok = 12.0\n",
            TaskClass::Code,
            &standard,
            Take,
        ),
        (
            "[routing]\nmode = \"ask-above\"\nask_above_price_per_mtok = 12.0\n",
            TaskClass::Code,
            &dear_standard,
            Hold,
        ),
        (
            "[routing]\nmode = \"ask-above\"\nask_above_price_per_mtok = 12\n",
            TaskClass::Code,
            &unpriced,
            Hold,
        ),
        (
            "[routing]\nmode = \"ask-above\"\nask_above_price_per_mtok = 0.0\n",
            TaskClass::Code,
            &free,
            Take,
        ),
        (
            "[routing]\nmode = \"ask-above\"\n",
            TaskClass::Code,
            &unpriced,
            Take,
        ),
        // ask-above for one class only.
        (
            "[routing.classes.design]\nmode = \"ask-above\"\n",
            TaskClass::Design,
            &standard,
            Take,
        ),
        (
            "[routing.classes.design]\nmode = \"ask-above\"\n",
            TaskClass::Design,
            &frontier,
            Hold,
        ),
    ];
    for (text, class, recommended, want) in table {
        let config = routing_config(text);
        assert_eq!(
            decide(&config, *class, recommended),
            *want,
            "{text:?} {class} {}",
            recommended.tier
        );
    }
}

#[test]
fn hold_reasons_say_why() {
    let c = routing_config("[routing]\nmode = \"ask-above\"\nask_above_price_per_mtok = 12.0\n");
    assert_eq!(
        hold_reason(&c, TaskClass::Code, &priced("frontier", Some(20.0), false)),
        "sim/sim-standard is frontier tier, above standard"
    );
    assert_eq!(
        hold_reason(&c, TaskClass::Code, &priced("standard", Some(15.0), false)),
        "sim/sim-standard costs $15/Mtok output, above $12"
    );
    assert_eq!(
        hold_reason(
            &routing_config(""),
            TaskClass::Docs,
            &priced("small", None, true)
        ),
        "routing mode for docs is ask"
    );
}

// --- escalation ----------------------------------------------------------------------

fn outcome<'a>(
    state: &'a str,
    reason: Option<&'a str>,
    status: Option<&'a str>,
    usable: bool,
    provider: &'a str,
    model: Option<&'a str>,
) -> RunOutcome<'a> {
    RunOutcome {
        state,
        completion_reason: reason,
        result_status: status,
        has_usable_result: usable,
        provider,
        model,
        tests_failed: false,
    }
}

#[test]
fn a_done_whose_tests_failed_is_offered_a_retry_on_its_own_model() {
    let catalog = Catalog::embedded();
    let policy = RoutingPolicy::embedded();
    let all = all_available();
    let mut done = outcome(
        "completed",
        Some("complete"),
        Some("done"),
        true,
        "sim",
        Some("sim-small"),
    );
    assert_eq!(escalation_offer(&done, &catalog, &policy, &all), None);
    done.tests_failed = true;
    let offer = escalation_offer(&done, &catalog, &policy, &all).expect("a retry");
    assert_eq!(
        (
            offer.kind,
            offer.to_provider.as_str(),
            offer.to_model.as_str()
        ),
        (EscalationKind::Retry, "sim", "sim-small")
    );
    assert_eq!(
        offer.reason,
        "the run says done, but a test it ran failed; retry on sim/sim-small"
    );
    // Stopped by the user, it is offered nothing, failing tests or not.
    done.completion_reason = Some("user");
    assert_eq!(escalation_offer(&done, &catalog, &policy, &all), None);
}

#[test]
fn escalation_table() {
    use EscalationKind::{Escalate, Retry};
    let catalog = Catalog::embedded();
    let policy = RoutingPolicy::embedded();
    let no_codex = with(&[("codex", "disabled in config")]);
    let all = all_available();
    // (outcome, providers, expected (kind, provider, model))
    let table: Vec<OfferRow> = vec![
        // Transient failures: retry on the same model.
        (
            outcome(
                "failed",
                Some("timeout"),
                None,
                false,
                "sim",
                Some("sim-small"),
            ),
            &all,
            Some((Retry, "sim", "sim-small")),
        ),
        (
            outcome(
                "failed",
                Some("provider_error"),
                None,
                false,
                "sim",
                Some("claude-sonnet-4-5"),
            ),
            &all,
            Some((Retry, "sim", "sim-standard")),
        ),
        (
            outcome(
                "failed",
                Some("rate_limit"),
                None,
                false,
                "codex",
                Some("gpt-5.5"),
            ),
            &all,
            Some((Retry, "codex", "gpt-5.5")),
        ),
        (
            outcome(
                "failed",
                Some("overloaded"),
                None,
                false,
                "claude-code",
                None,
            ),
            &all,
            Some((Retry, "claude-code", "claude-sonnet-5-5")),
        ),
        (
            outcome(
                "interrupted",
                None,
                None,
                false,
                "sim",
                Some("sim-frontier"),
            ),
            &all,
            Some((Retry, "sim", "sim-frontier")),
        ),
        // Blocked, or no usable result, or failed otherwise: one tier up.
        (
            outcome(
                "completed",
                Some("complete"),
                Some("blocked"),
                true,
                "sim",
                Some("sim-small"),
            ),
            &all,
            Some((Escalate, "sim", "sim-standard")),
        ),
        (
            outcome(
                "completed",
                Some("max_turns"),
                None,
                false,
                "sim",
                Some("sim-standard"),
            ),
            &all,
            Some((Escalate, "sim", "sim-frontier")),
        ),
        (
            outcome(
                "completed",
                Some("idle_timeout"),
                Some("done"),
                false,
                "claude-code",
                Some("haiku"),
            ),
            &all,
            Some((Escalate, "claude-code", "claude-sonnet-5-5")),
        ),
        (
            outcome("failed", None, None, false, "claude-code", Some("sonnet")),
            &all,
            Some((Escalate, "claude-code", "claude-opus-5-5")),
        ),
        (
            outcome(
                "failed",
                Some("exit_error"),
                None,
                false,
                "codex",
                Some("gpt-5.4-mini"),
            ),
            &all,
            Some((Escalate, "codex", "gpt-5.4")),
        ),
        // At the top of its provider: the next available provider's same tier.
        (
            outcome(
                "completed",
                Some("complete"),
                Some("blocked"),
                true,
                "claude-code",
                Some("opus"),
            ),
            &all,
            Some((Escalate, "codex", "gpt-5.5")),
        ),
        (
            outcome(
                "completed",
                Some("complete"),
                Some("blocked"),
                true,
                "claude-code",
                Some("opus"),
            ),
            &no_codex,
            Some((Escalate, "opencode", "anthropic/claude-opus-5-5")),
        ),
        (
            outcome(
                "completed",
                Some("complete"),
                Some("blocked"),
                true,
                "opencode",
                Some("openai/gpt-5.5"),
            ),
            &all,
            Some((Escalate, "claude-code", "claude-opus-5-5")),
        ),
        // A launch error moves to another provider at the same tier.
        (
            outcome(
                "failed",
                Some("launch_error"),
                None,
                false,
                "claude-code",
                Some("sonnet"),
            ),
            &all,
            Some((Escalate, "codex", "gpt-5.4")),
        ),
        (
            outcome(
                "failed",
                Some("launch_error"),
                None,
                false,
                "claude-code",
                Some("sonnet"),
            ),
            &no_codex,
            Some((Escalate, "opencode", "anthropic/claude-sonnet-5-5")),
        ),
        // Nowhere to go: the sim's top tier (the sim stands in for nobody).
        (
            outcome(
                "completed",
                Some("complete"),
                Some("blocked"),
                true,
                "sim",
                Some("sim-frontier"),
            ),
            &all,
            None,
        ),
        (
            outcome(
                "failed",
                Some("launch_error"),
                None,
                false,
                "sim",
                Some("sim-small"),
            ),
            &all,
            None,
        ),
        // Finished well, or waiting on the user: nothing.
        (
            outcome(
                "completed",
                Some("complete"),
                Some("done"),
                true,
                "sim",
                Some("sim-small"),
            ),
            &all,
            None,
        ),
        (
            outcome(
                "completed",
                Some("complete"),
                Some("needs_input"),
                true,
                "sim",
                Some("sim-small"),
            ),
            &all,
            None,
        ),
        // Stopped by the user or for money: nothing.
        (
            outcome(
                "stopped",
                Some("user"),
                None,
                false,
                "sim",
                Some("sim-small"),
            ),
            &all,
            None,
        ),
        (
            outcome(
                "stopped",
                Some("budget_cap"),
                None,
                false,
                "sim",
                Some("sim-small"),
            ),
            &all,
            None,
        ),
        (
            outcome(
                "stopped",
                Some("session_budget_cap"),
                None,
                false,
                "sim",
                Some("sim-small"),
            ),
            &all,
            None,
        ),
        (
            outcome(
                "stopped",
                Some("budget_exceeded"),
                Some("blocked"),
                false,
                "sim",
                Some("sim-small"),
            ),
            &all,
            None,
        ),
        (
            outcome("stopped", Some("route_declined"), None, false, "sim", None),
            &all,
            None,
        ),
        (
            outcome(
                "failed",
                Some("session_budget_cap"),
                None,
                false,
                "sim",
                Some("sim-small"),
            ),
            &all,
            None,
        ),
        // A model the catalog does not know cannot be placed on the ladder.
        (
            outcome(
                "completed",
                Some("complete"),
                Some("blocked"),
                true,
                "sim",
                Some("mystery"),
            ),
            &all,
            None,
        ),
    ];
    for (o, providers, want) in table {
        let got = escalation_offer(&o, &catalog, &policy, providers);
        let got_key = got
            .as_ref()
            .map(|e| (e.kind, e.to_provider.as_str(), e.to_model.as_str()));
        assert_eq!(got_key, want, "{o:?}");
        if let Some(e) = got {
            assert!(!e.reason.is_empty() && !e.reason.contains('\n'));
        }
    }
}

#[test]
fn escalation_reasons_read_well() {
    let catalog = Catalog::embedded();
    let policy = RoutingPolicy::embedded();
    let all = all_available();
    let offer = |o: RunOutcome| {
        escalation_offer(&o, &catalog, &policy, &all)
            .unwrap()
            .reason
    };
    assert_eq!(
        offer(outcome(
            "completed",
            Some("complete"),
            Some("blocked"),
            true,
            "sim",
            Some("sim-small")
        )),
        "the run ended blocked on sim/sim-small (small); try sim-standard, one tier up (standard)"
    );
    assert_eq!(
        offer(outcome(
            "failed",
            Some("timeout"),
            None,
            false,
            "sim",
            Some("sim-small")
        )),
        "the run failed with timeout, which may pass; retry on sim/sim-small"
    );
    assert_eq!(
        offer(outcome(
            "completed",
            Some("complete"),
            Some("blocked"),
            true,
            "claude-code",
            Some("opus")
        )),
        "the run ended blocked on claude-code/claude-opus-5-5; claude-code has nothing above frontier; try codex/gpt-5.5, codex's frontier tier"
    );
}

#[test]
fn escalation_one_tier_up_agrees_with_the_catalog() {
    let catalog = Catalog::embedded();
    let policy = RoutingPolicy::embedded();
    for m in catalog.all().iter().filter(|m| !m.hidden) {
        let o = outcome(
            "completed",
            Some("complete"),
            Some("blocked"),
            true,
            &m.provider,
            Some(&m.id),
        );
        let got = escalation_offer(&o, &catalog, &policy, &all_available()).map(|e| e.to_model);
        if let Some(up) = catalog.next_tier_up(&m.provider, &m.id) {
            assert_eq!(
                got.as_deref(),
                Some(up.id.as_str()),
                "{}/{}",
                m.provider,
                m.id
            );
        } else if m.provider != "sim" {
            let got = got.unwrap_or_else(|| panic!("{}/{} offered nothing", m.provider, m.id));
            assert!(
                catalog.find("codex", &got).is_some()
                    || catalog.find("claude-code", &got).is_some()
                    || catalog.find("opencode", &got).is_some()
            );
        }
    }
}

#[test]
fn escalation_skips_an_unavailable_provider_and_a_missing_tier() {
    // opencode with only free models (small, standard): a blocked frontier codex run goes
    // to claude-code (after opencode, which has no frontier model).
    let catalog = custom_catalog();
    let policy = RoutingPolicy::embedded();
    let o = outcome(
        "completed",
        Some("complete"),
        Some("blocked"),
        true,
        "codex",
        Some("gpt-5.5"),
    );
    let e = escalation_offer(&o, &catalog, &policy, &all_available()).unwrap();
    assert_eq!(
        (e.to_provider.as_str(), e.to_model.as_str()),
        ("claude-code", "claude-opus-5-5")
    );
    // A small opencode model goes up within opencode; with claude-code gone and codex
    // unavailable, a standard opencode run that is stuck has nowhere to go.
    let o = outcome(
        "completed",
        Some("complete"),
        Some("blocked"),
        true,
        "opencode",
        Some("deepseek-v4-flash-free"),
    );
    let e = escalation_offer(&o, &catalog, &policy, &all_available()).unwrap();
    assert_eq!(e.to_model, "opencode/minimax-m3-free");
    let o = outcome(
        "completed",
        Some("complete"),
        Some("blocked"),
        true,
        "opencode",
        Some("minimax-m3-free"),
    );
    let none = with(&[
        ("codex", "disabled in config"),
        ("claude-code", "disabled in config"),
    ]);
    assert_eq!(escalation_offer(&o, &catalog, &policy, &none), None);
    // With only codex left, the missing standard tier is filled by codex's standard.
    let only_codex = with(&[("claude-code", "disabled in config")]);
    let e = escalation_offer(&o, &catalog, &policy, &only_codex).unwrap();
    assert_eq!(e.to_model, "gpt-cheap");
}

#[test]
fn escalation_kinds_serialize_snake_case() {
    let e = Escalation {
        kind: EscalationKind::Retry,
        to_provider: "sim".into(),
        to_model: "sim-small".into(),
        reason: "r".into(),
    };
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["kind"], "retry");
    assert_eq!(
        serde_json::to_value(EscalationKind::Escalate).unwrap(),
        "escalate"
    );
    assert_eq!(serde_json::from_value::<Escalation>(json).unwrap(), e);
}
