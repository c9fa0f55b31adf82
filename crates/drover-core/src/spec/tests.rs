//! Table tests of `validate`: one or more cases per refusal code, the clamps as they
//! reach a `Spec`, model and cwd resolution, and the defaults.

use super::*;
use crate::config::Config;
use crate::error::ErrorCode;
use std::path::{Path, PathBuf};

/// A small catalog: known names per provider, one hidden model, suggestions for the rest.
struct TableCatalog;

const CLAUDE_MODELS: &[&str] = &["claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5"];
const CODEX_MODELS: &[&str] = &["gpt-5", "gpt-5-codex", "gpt-5-mini"];

impl ModelCatalog for TableCatalog {
    fn resolve(&self, provider: &str, model: &str) -> ModelResolution {
        let known = match provider {
            "claude-code" | "sim" => CLAUDE_MODELS,
            "codex" => CODEX_MODELS,
            _ => &[],
        };
        if model == "claude-3-opus" {
            return ModelResolution::Hidden;
        }
        // Aliases resolve to a canonical id.
        if model == "sonnet" && known == CLAUDE_MODELS {
            return ModelResolution::Known {
                id: "claude-sonnet-4-5".into(),
            };
        }
        if known.contains(&model) {
            ModelResolution::Known { id: model.into() }
        } else {
            ModelResolution::Unknown {
                suggestions: suggest(model, known.iter().copied()),
            }
        }
    }
}

fn providers() -> Vec<ProviderInfo> {
    use PermissionPolicy::*;
    vec![
        ProviderInfo {
            name: "claude-code".into(),
            enabled: true,
            policies: vec![Ask, Restricted, Auto],
        },
        ProviderInfo {
            name: "codex".into(),
            enabled: true,
            policies: vec![Ask, Restricted, Auto],
        },
        ProviderInfo {
            name: "opencode".into(),
            enabled: false,
            policies: vec![Ask, Auto],
        },
        ProviderInfo {
            name: "sim".into(),
            enabled: true,
            policies: vec![Restricted, Auto],
        },
    ]
}

const EXISTING: &[&str] = &["/home/dev/repo", "/home/dev/repo/crates/core", "/srv/other"];

fn run(input: &SpecInput) -> Result<Spec, crate::error::DroverError> {
    let config = Config::defaults();
    let providers = providers();
    let dir_exists = |p: &Path| EXISTING.iter().any(|e| Path::new(e) == p);
    let ctx = ValidationContext {
        limits: &config.limits,
        providers: &providers,
        default_provider: "claude-code",
        current_dir: Path::new("/home/dev/repo"),
        dir_exists: &dir_exists,
        models: &TableCatalog,
    };
    validate(input, &ctx)
}

fn task(text: &str) -> SpecInput {
    SpecInput {
        task: text.into(),
        ..SpecInput::default()
    }
}

fn accepted(input: &SpecInput) -> Spec {
    match run(input) {
        Ok(spec) => spec,
        Err(e) => panic!("expected acceptance, got {e}"),
    }
}

#[test]
fn a_minimal_spec_takes_every_default_from_the_limits() {
    let limits = Config::defaults().limits;
    let spec = accepted(&task("Fix the flaky test\nin crates/core"));
    assert_eq!(spec.provider, "claude-code");
    assert_eq!(spec.model, None);
    assert_eq!(spec.effort, None);
    assert_eq!(spec.cwd, PathBuf::from("/home/dev/repo"));
    assert_eq!(spec.task, "Fix the flaky test\nin crates/core");
    assert_eq!(spec.title, "Fix the flaky test");
    assert_eq!(spec.capability, Capability::Workspace);
    assert_eq!(spec.policy, PermissionPolicy::Ask);
    assert_eq!(spec.max_minutes, limits.max_minutes_default);
    assert_eq!(spec.budget_usd, limits.budget_usd_default);
    assert_eq!(spec.idle_timeout_secs, limits.idle_timeout_secs_default);
    assert_eq!(spec.max_turns, limits.max_turns_default);
    assert!(spec.queue_if_busy);
    assert!(spec.tags.is_empty());
    assert!(spec.clamps.is_empty(), "absent numbers are not clamps");
    assert_eq!(spec.output_schema, None);
    assert_eq!(spec.context, None);
}

#[test]
fn every_field_passes_through_when_valid() {
    let input = SpecInput {
        provider: Some("Codex".into()),
        model: Some("gpt-5-codex".into()),
        effort: Some("High".into()),
        cwd: Some("/srv/other".into()),
        task: "Add a CLI flag".into(),
        context: Some("  see issue 12  ".into()),
        title: Some("CLI flag".into()),
        tags: vec![" cli ".into(), "small".into()],
        capability: Some("read-only".into()),
        policy: Some("restricted".into()),
        max_minutes: Some(30),
        budget_usd: Some(2.5),
        idle_timeout_secs: Some(600),
        max_turns: Some(3),
        output_schema: Some(serde_json::json!({"type": "object"})),
        workflow_id: Some("wf-1".into()),
        parent_run: Some("run-9".into()),
        idempotency_key: Some("key-1".into()),
        queue_if_busy: Some(false),
        scenario: Some(" ".into()),
        class: Some("feature".into()),
        workspace: Some(" Worktree ".into()),
        carry_changes: Some(true),
        sandbox: Some(true),
        host: None,
    };
    let spec = accepted(&input);
    assert_eq!(
        spec.provider, "codex",
        "provider names are matched ignoring case"
    );
    assert_eq!(spec.model.as_deref(), Some("gpt-5-codex"));
    assert_eq!(spec.effort, Some(Effort::High));
    assert_eq!(spec.cwd, PathBuf::from("/srv/other"));
    assert_eq!(spec.context.as_deref(), Some("see issue 12"));
    assert_eq!(spec.title, "CLI flag");
    assert_eq!(spec.tags, vec!["cli", "small"]);
    assert_eq!(spec.capability, Capability::ReadOnly);
    assert_eq!(spec.policy, PermissionPolicy::Restricted);
    assert_eq!(
        (
            spec.max_minutes,
            spec.budget_usd,
            spec.idle_timeout_secs,
            spec.max_turns
        ),
        (30, 2.5, 600, 3)
    );
    assert_eq!(
        spec.output_schema,
        Some(serde_json::json!({"type": "object"}))
    );
    assert_eq!(spec.workflow_id.as_deref(), Some("wf-1"));
    assert_eq!(spec.parent_run.as_deref(), Some("run-9"));
    assert_eq!(spec.idempotency_key.as_deref(), Some("key-1"));
    assert!(!spec.queue_if_busy);
    assert_eq!(spec.scenario, None, "blank strings count as absent");
    assert_eq!(spec.class.as_deref(), Some("feature"));
    assert_eq!(
        spec.workspace,
        Some(crate::workspace::WorkspaceMode::Worktree)
    );
    assert!(spec.carry_changes);
    assert!(spec.sandbox);
    assert!(spec.clamps.is_empty());

    // A validated spec survives the ledger's JSON round trip.
    let json = serde_json::to_string(&spec).unwrap();
    assert!(json.contains("\"capability\":\"read-only\""));
    let back: Spec = serde_json::from_str(&json).unwrap();
    assert_eq!(back, spec);
}

#[test]
fn refusals_carry_their_code_and_a_sentence_naming_the_fix() {
    let base = || task("Do the thing");
    let over_limit = "x".repeat(20_001);
    let cases: Vec<(&str, SpecInput, ErrorCode, &[&str])> = vec![
        (
            "unknown provider lists the known ones",
            SpecInput {
                provider: Some("gemini".into()),
                ..base()
            },
            ErrorCode::InvalidProvider,
            &["\"gemini\"", "claude-code, codex, opencode or sim"],
        ),
        (
            "unknown workspace names both",
            SpecInput {
                workspace: Some("sandbox".into()),
                ..base()
            },
            ErrorCode::InvalidSpec,
            &["\"sandbox\"", "worktree or shared"],
        ),
        (
            "a near miss is suggested",
            SpecInput {
                provider: Some("claude".into()),
                ..base()
            },
            ErrorCode::InvalidProvider,
            &["did you mean claude-code?"],
        ),
        (
            "disabled provider",
            SpecInput {
                provider: Some("opencode".into()),
                ..base()
            },
            ErrorCode::InvalidProvider,
            &["opencode is disabled", "[providers.opencode]"],
        ),
        ("empty task", task(""), ErrorCode::TaskRequired, &["empty"]),
        (
            "whitespace task",
            task(" \n\t "),
            ErrorCode::TaskRequired,
            &["say what the run should do"],
        ),
        (
            "task of control characters only",
            task("\u{7}\u{1b}"),
            ErrorCode::TaskRequired,
            &["empty"],
        ),
        (
            "task over the limit says the count and the limit",
            task(&over_limit),
            ErrorCode::TaskTooLong,
            &["20001 characters", "limit of 20000"],
        ),
        (
            "missing directory",
            SpecInput {
                cwd: Some("/nope".into()),
                ..base()
            },
            ErrorCode::CwdInvalid,
            &["\"/nope\"", "existing directory"],
        ),
        (
            "missing relative directory is shown resolved",
            SpecInput {
                cwd: Some("crates/missing".into()),
                ..base()
            },
            ErrorCode::CwdInvalid,
            &["\"/home/dev/repo/crates/missing\""],
        ),
        (
            "unknown model with suggestions",
            SpecInput {
                model: Some("claude-sonet-4-5".into()),
                ..base()
            },
            ErrorCode::ModelUnknown,
            &[
                "\"claude-sonet-4-5\"",
                "claude-code",
                "did you mean claude-sonnet-4-5",
            ],
        ),
        (
            "unknown model without suggestions",
            SpecInput {
                provider: Some("codex".into()),
                model: Some("llama-70b".into()),
                ..base()
            },
            ErrorCode::ModelUnknown,
            &["name a model from the catalog or use auto"],
        ),
        (
            "models are checked against the chosen provider",
            SpecInput {
                provider: Some("codex".into()),
                model: Some("claude-opus-4-1".into()),
                ..base()
            },
            ErrorCode::ModelUnknown,
            &["provider codex"],
        ),
        (
            "hidden model",
            SpecInput {
                model: Some("claude-3-opus".into()),
                ..base()
            },
            ErrorCode::ModelDisabled,
            &["\"claude-3-opus\" is disabled"],
        ),
        (
            "unknown policy word",
            SpecInput {
                policy: Some("yolo".into()),
                ..base()
            },
            ErrorCode::PermissionPolicyUnsupported,
            &["\"yolo\"", "ask, restricted or auto"],
        ),
        (
            "policy the provider cannot honour",
            SpecInput {
                provider: Some("sim".into()),
                policy: Some("ask".into()),
                ..base()
            },
            ErrorCode::PermissionPolicyUnsupported,
            &["sim does not support the ask", "use restricted or auto"],
        ),
        (
            "the default policy is checked too",
            SpecInput {
                provider: Some("sim".into()),
                ..base()
            },
            ErrorCode::PermissionPolicyUnsupported,
            &["ask"],
        ),
        (
            "unknown capability",
            SpecInput {
                capability: Some("root".into()),
                ..base()
            },
            ErrorCode::InvalidSpec,
            &["\"root\"", "read-only, workspace or full"],
        ),
        (
            "unknown effort",
            SpecInput {
                effort: Some("max".into()),
                ..base()
            },
            ErrorCode::InvalidSpec,
            &["\"max\"", "minimal, low, medium, high or xhigh"],
        ),
        (
            "output schema that is an array",
            SpecInput {
                output_schema: Some(serde_json::json!([1])),
                ..base()
            },
            ErrorCode::InvalidSpec,
            &["an array", "JSON Schema object"],
        ),
        (
            "output schema that is a string",
            SpecInput {
                output_schema: Some(serde_json::json!("{}")),
                ..base()
            },
            ErrorCode::InvalidSpec,
            &["a string"],
        ),
        (
            "empty tag",
            SpecInput {
                tags: vec!["ok".into(), "  ".into()],
                ..base()
            },
            ErrorCode::InvalidSpec,
            &["Tag number 2 is empty"],
        ),
        (
            "tag too long",
            SpecInput {
                tags: vec!["t".repeat(65)],
                ..base()
            },
            ErrorCode::InvalidSpec,
            &["longer than 64 characters"],
        ),
        (
            "too many tags",
            SpecInput {
                tags: (0..21).map(|i| format!("t{i}")).collect(),
                ..base()
            },
            ErrorCode::InvalidSpec,
            &["21 tags", "at most 20"],
        ),
    ];
    for (name, input, code, fragments) in cases {
        let err = match run(&input) {
            Ok(spec) => panic!("{name}: expected {code}, got {spec:?}"),
            Err(e) => e,
        };
        assert_eq!(err.code, code, "{name}: {}", err.message);
        for fragment in fragments {
            assert!(
                err.message.contains(fragment),
                "{name}: {:?} does not contain {fragment:?}",
                err.message
            );
        }
        assert!(err.message.ends_with('.'), "{name}: one sentence");
        assert!(!err.message.contains('\n'), "{name}: one line");
    }
}

#[test]
fn limits_are_inclusive_at_the_edges() {
    let at_limit = "é".repeat(20_000);
    assert!(
        run(&task(&at_limit)).is_ok(),
        "20,000 chars (not bytes) pass"
    );
    let tags: Vec<String> = (0..20).map(|i| format!("{i}-{}", "t".repeat(60))).collect();
    assert!(run(&SpecInput { tags, ..task("x") }).is_ok());
}

#[test]
fn the_first_fault_in_check_order_is_the_one_reported() {
    let input = SpecInput {
        provider: Some("nope".into()),
        task: String::new(),
        effort: Some("max".into()),
        ..SpecInput::default()
    };
    assert_eq!(run(&input).unwrap_err().code, ErrorCode::InvalidProvider);
    let input = SpecInput {
        effort: Some("max".into()),
        ..SpecInput::default()
    };
    assert_eq!(run(&input).unwrap_err().code, ErrorCode::TaskRequired);
}

#[test]
fn numbers_are_clamped_into_the_limits_and_each_clamp_is_recorded() {
    let limits = Config::defaults().limits;
    type Check = fn(&Spec) -> String;
    type WantClamp = Option<(&'static str, &'static str, &'static str)>;
    let cases: Vec<(&str, SpecInput, Check, &str, WantClamp)> = vec![
        (
            "max_minutes below min",
            SpecInput {
                max_minutes: Some(0),
                ..task("x")
            },
            |s| s.max_minutes.to_string(),
            "1",
            Some(("max_minutes", "0", "1")),
        ),
        (
            "max_minutes above max",
            SpecInput {
                max_minutes: Some(10_000),
                ..task("x")
            },
            |s| s.max_minutes.to_string(),
            "240",
            Some(("max_minutes", "10000", "240")),
        ),
        (
            "budget below min",
            SpecInput {
                budget_usd: Some(0.01),
                ..task("x")
            },
            |s| format!("{:.2}", s.budget_usd),
            "0.10",
            Some(("budget_usd", "0.01", "0.10")),
        ),
        (
            "budget above max",
            SpecInput {
                budget_usd: Some(99.999),
                ..task("x")
            },
            |s| format!("{:.2}", s.budget_usd),
            "25.00",
            Some(("budget_usd", "99.999", "25.00")),
        ),
        (
            "budget NaN takes the default",
            SpecInput {
                budget_usd: Some(f64::NAN),
                ..task("x")
            },
            |s| format!("{:.2}", s.budget_usd),
            "5.00",
            Some(("budget_usd", "NaN", "5.00")),
        ),
        (
            "budget infinity takes the default",
            SpecInput {
                budget_usd: Some(f64::INFINITY),
                ..task("x")
            },
            |s| format!("{:.2}", s.budget_usd),
            "5.00",
            Some(("budget_usd", "inf", "5.00")),
        ),
        (
            "budget rounded to whole cents",
            SpecInput {
                budget_usd: Some(4.56789),
                ..task("x")
            },
            |s| s.budget_usd.to_string(),
            "4.57",
            Some(("budget_usd", "4.56789", "4.57")),
        ),
        (
            "idle timeout below min",
            SpecInput {
                idle_timeout_secs: Some(5),
                ..task("x")
            },
            |s| s.idle_timeout_secs.to_string(),
            "30",
            Some(("idle_timeout_secs", "5", "30")),
        ),
        (
            "idle timeout above max",
            SpecInput {
                idle_timeout_secs: Some(86_400),
                ..task("x")
            },
            |s| s.idle_timeout_secs.to_string(),
            "21600",
            Some(("idle_timeout_secs", "86400", "21600")),
        ),
        (
            "max turns negative",
            SpecInput {
                max_turns: Some(-1),
                ..task("x")
            },
            |s| s.max_turns.to_string(),
            "1",
            Some(("max_turns", "-1", "1")),
        ),
        (
            "max turns above max",
            SpecInput {
                max_turns: Some(21),
                ..task("x")
            },
            |s| s.max_turns.to_string(),
            "20",
            Some(("max_turns", "21", "20")),
        ),
        (
            "max turns in range is untouched",
            SpecInput {
                max_turns: Some(20),
                ..task("x")
            },
            |s| s.max_turns.to_string(),
            "20",
            None,
        ),
    ];
    for (name, input, read, want, clamp) in cases {
        let spec = accepted(&input);
        assert_eq!(read(&spec), want, "{name}");
        let want_clamps: Vec<Clamp> = clamp
            .into_iter()
            .map(|(field, requested, applied)| Clamp {
                field: field.into(),
                requested: requested.into(),
                applied: applied.into(),
            })
            .collect();
        assert_eq!(spec.clamps, want_clamps, "{name}");
    }
    // Several clamps in one spec are all recorded, in field order.
    let spec = accepted(&SpecInput {
        max_minutes: Some(-5),
        budget_usd: Some(f64::NAN),
        idle_timeout_secs: Some(i64::MAX),
        max_turns: Some(0),
        ..task("x")
    });
    let fields: Vec<&str> = spec.clamps.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "max_minutes",
            "budget_usd",
            "idle_timeout_secs",
            "max_turns"
        ]
    );
    assert_eq!(spec.idle_timeout_secs, limits.idle_timeout_secs_max);
    assert_eq!(
        spec.clamps[0].to_string(),
        "max_minutes: asked for -5, using 1"
    );
}

#[test]
fn auto_or_blank_model_means_none_and_known_names_resolve_to_their_id() {
    let cases: &[(Option<&str>, Option<&str>)] = &[
        (None, None),
        (Some("auto"), None),
        (Some("AUTO"), None),
        (Some("  "), None),
        (Some("claude-haiku-4-5"), Some("claude-haiku-4-5")),
        (Some(" claude-haiku-4-5 "), Some("claude-haiku-4-5")),
        (Some("sonnet"), Some("claude-sonnet-4-5")),
    ];
    for &(model, want) in cases {
        let spec = accepted(&SpecInput {
            model: model.map(str::to_string),
            ..task("x")
        });
        assert_eq!(spec.model.as_deref(), want, "{model:?}");
    }
}

#[test]
fn any_model_accepts_every_name_as_written() {
    assert_eq!(
        AnyModel.resolve("codex", "whatever-7"),
        ModelResolution::Known {
            id: "whatever-7".into()
        }
    );
}

#[test]
fn cwd_is_resolved_against_the_callers_directory() {
    let cases: &[(Option<&str>, &str)] = &[
        (None, "/home/dev/repo"),
        (Some(""), "/home/dev/repo"),
        (Some("."), "/home/dev/repo"),
        (Some("./"), "/home/dev/repo"),
        (Some("crates/core"), "/home/dev/repo/crates/core"),
        (Some("./crates/./core/"), "/home/dev/repo/crates/core"),
        (Some("/srv/other"), "/srv/other"),
        (Some("/srv/other/"), "/srv/other"),
    ];
    for &(cwd, want) in cases {
        let spec = accepted(&SpecInput {
            cwd: cwd.map(PathBuf::from),
            ..task("x")
        });
        assert_eq!(spec.cwd, PathBuf::from(want), "{cwd:?}");
    }
}

#[test]
fn title_comes_from_the_input_or_the_task() {
    let spec = accepted(&SpecInput {
        title: Some(format!("  {}  ", "T".repeat(100))),
        ..task("x")
    });
    assert_eq!(spec.title.chars().count(), TITLE_MAX_CHARS);
    assert!(spec.title.ends_with('…'));
    let spec = accepted(&task("\n\n  Ünïcödé   first line  \nsecond"));
    assert_eq!(spec.title, "Ünïcödé first line");
}

/// A spec stored before sandboxes existed reads as not sandboxed.
#[test]
fn a_spec_stored_without_the_sandbox_field_is_not_sandboxed() {
    let spec = accepted(&task("an old run"));
    let mut stored = serde_json::to_value(&spec).unwrap();
    stored.as_object_mut().unwrap().remove("sandbox");
    let read: super::Spec = serde_json::from_value(stored).unwrap();
    assert!(!read.sandbox);
    assert_eq!(read, spec);
}
