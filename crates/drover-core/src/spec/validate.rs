//! `validate`: the one gate between a client's `SpecInput` and a `Spec`.
//!
//! Owns the refusal rules and their sentences. What must stay true: the checks run in a
//! fixed order (provider, task, cwd, model, policy, capability, effort, workspace, output schema,
//! tags, scenario) so a spec with several faults always gets the same first refusal; each refusal
//! has a stable code and one sentence saying what to change; anything else is accepted,
//! with numbers clamped through `clamp`.

use crate::error::{DroverError, ErrorCode};
use serde_json::Value;
use std::path::{Path, PathBuf};

use super::clamp::{dollars, whole_number};
use super::context::{ModelResolution, ProviderInfo, ValidationContext};
use super::input::SpecInput;
use super::suggest::suggest;
use super::title::derive_title;
use super::validated::{Capability, Effort, PermissionPolicy, Spec};
use crate::text::{either, has_visible_text, one_line, quoted};

/// The most tags a spec may carry.
pub const MAX_TAGS: usize = 20;
/// The longest tag, in characters.
pub const TAG_MAX_CHARS: usize = 64;

/// Checks a dispatch request and returns the spec to run, or the first reason to refuse.
pub fn validate(input: &SpecInput, ctx: &ValidationContext) -> Result<Spec, DroverError> {
    let provider = provider(input.provider.as_deref(), ctx)?;
    check_task(&input.task, ctx)?;
    let host = present(input.host.as_deref());
    let cwd = match &host {
        Some(host) => host_cwd(input.cwd.as_deref(), host)?,
        None => cwd(input.cwd.as_deref(), ctx)?,
    };
    let model = model(input.model.as_deref(), &provider.name, ctx)?;
    let policy = policy(input.policy.as_deref(), provider)?;
    let capability = capability(input.capability.as_deref())?;
    let effort = effort(input.effort.as_deref())?;
    let workspace = workspace(input.workspace.as_deref())?;
    let output_schema = output_schema(input.output_schema.as_ref())?;
    let tags = tags(&input.tags)?;
    let scenario = scenario(input.scenario.as_deref())?;

    let limits = ctx.limits;
    let mut clamps = Vec::new();
    let max_minutes = whole_number(
        "max_minutes",
        input.max_minutes,
        (
            limits.max_minutes_min.into(),
            limits.max_minutes_max.into(),
            limits.max_minutes_default.into(),
        ),
        &mut clamps,
    );
    let budget_usd = dollars(
        "budget_usd",
        input.budget_usd,
        (
            limits.budget_usd_min,
            limits.budget_usd_max,
            limits.budget_usd_default,
        ),
        &mut clamps,
    );
    let idle_timeout_secs = whole_number(
        "idle_timeout_secs",
        input.idle_timeout_secs,
        (
            limits.idle_timeout_secs_min,
            limits.idle_timeout_secs_max,
            limits.idle_timeout_secs_default,
        ),
        &mut clamps,
    );
    let max_turns = whole_number(
        "max_turns",
        input.max_turns,
        (
            limits.max_turns_min.into(),
            limits.max_turns_max.into(),
            limits.max_turns_default.into(),
        ),
        &mut clamps,
    );

    Ok(Spec {
        provider: provider.name.clone(),
        model,
        effort,
        cwd,
        task: input.task.clone(),
        context: present(input.context.as_deref()),
        title: derive_title(input.title.as_deref(), &input.task),
        tags,
        capability,
        policy,
        // Both were fitted under a u32 maximum; the fallback is that maximum.
        max_minutes: u32::try_from(max_minutes).unwrap_or(limits.max_minutes_max),
        budget_usd,
        idle_timeout_secs,
        max_turns: u32::try_from(max_turns).unwrap_or(limits.max_turns_max),
        output_schema,
        workflow_id: present(input.workflow_id.as_deref()),
        parent_run: present(input.parent_run.as_deref()),
        idempotency_key: present(input.idempotency_key.as_deref()),
        queue_if_busy: input.queue_if_busy.unwrap_or(true),
        scenario,
        class: present(input.class.as_deref()),
        workspace,
        carry_changes: input.carry_changes.unwrap_or(false),
        sandbox: input.sandbox.unwrap_or(false),
        host,
        clamps,
    })
}

/// The simulated agent's scenario: a shipped name, or a path to a scenario file (the sim
/// reads it, and says what is wrong with it). Any other name is refused
/// (`SCENARIO_UNKNOWN`) with the close names, before anything is made for the run.
fn scenario(requested: Option<&str>) -> Result<Option<String>, DroverError> {
    use crate::sim::scenario::{builtin, builtin_names, looks_like_path};
    let Some(name) = present(requested) else {
        return Ok(None);
    };
    if builtin(&name).is_some() || looks_like_path(&name) {
        return Ok(Some(name));
    }
    let names = builtin_names();
    let hint = match suggest(&name, names.iter().copied()).as_slice() {
        [] => String::new(),
        close => format!(" (did you mean {}?)", either(close)),
    };
    Err(DroverError::new(
        ErrorCode::ScenarioUnknown,
        format!(
            "The simulated agent has no scenario {}{hint}; use one of {}, or a path to a .toml or .json scenario file.",
            quoted(&name),
            names.join(", ")
        ),
    ))
}

/// A trimmed optional string; blank counts as absent.
fn present(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

fn provider<'c>(
    requested: Option<&str>,
    ctx: &ValidationContext<'c>,
) -> Result<&'c ProviderInfo, DroverError> {
    let name = present(requested).unwrap_or_else(|| ctx.default_provider.to_string());
    let names: Vec<&str> = ctx.providers.iter().map(|p| p.name.as_str()).collect();
    let Some(found) = ctx
        .providers
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(&name))
    else {
        let known = if names.is_empty() {
            "no provider is configured".to_string()
        } else {
            format!("use {}", either(&names))
        };
        let hint = match suggest(&name, names.iter().copied()).as_slice() {
            [] => String::new(),
            close => format!(" (did you mean {}?)", either(close)),
        };
        return Err(DroverError::new(
            ErrorCode::InvalidProvider,
            format!("Unknown provider {}{hint}; {known}.", quoted(&name)),
        ));
    };
    if !found.enabled {
        return Err(DroverError::new(
            ErrorCode::InvalidProvider,
            format!(
                "Provider {} is disabled in the config; set enabled = true under [providers.{}] or pick another provider.",
                found.name, found.name
            ),
        ));
    }
    Ok(found)
}

fn check_task(task: &str, ctx: &ValidationContext) -> Result<(), DroverError> {
    if !has_visible_text(task) {
        return Err(DroverError::new(
            ErrorCode::TaskRequired,
            "The task is empty; say what the run should do.",
        ));
    }
    let max = ctx.limits.task_max_chars;
    // The check walks no further than the limit; the full count is only taken for the
    // refusal's sentence.
    if task.chars().nth(max).is_some() {
        let count = task.chars().count();
        return Err(DroverError::new(
            ErrorCode::TaskTooLong,
            format!(
                "The task is {count} characters, more than the limit of {max}; shorten it or move background material into the context."
            ),
        ));
    }
    Ok(())
}

/// A run on a host works in a directory there (docs/ARCHITECTURE.md §"Hosts"): it must
/// be given, absolute, and is not looked for on this machine (`drover doctor --host`
/// checks it there).
fn host_cwd(requested: Option<&Path>, host: &str) -> Result<PathBuf, DroverError> {
    match requested {
        Some(path) if path.is_absolute() => Ok(path.components().collect()),
        _ => Err(DroverError::new(
            ErrorCode::CwdInvalid,
            format!(
                "A run on the host {} needs the absolute directory it works in there; pass it as cwd (`--cwd /path/on/{host}`).",
                quoted(host)
            ),
        )),
    }
}

fn cwd(requested: Option<&Path>, ctx: &ValidationContext) -> Result<PathBuf, DroverError> {
    let joined = match requested {
        Some(path) if !path.as_os_str().is_empty() => ctx.current_dir.join(path),
        _ => ctx.current_dir.to_path_buf(),
    };
    // Rebuilding from components drops `.` segments and trailing slashes; `..` is kept,
    // since only the file system knows where it leads through a symlink.
    let resolved: PathBuf = joined.components().collect();
    if !(ctx.dir_exists)(&resolved) {
        return Err(DroverError::new(
            ErrorCode::CwdInvalid,
            format!(
                "The working directory {} does not exist or is not a directory; pass an existing directory as cwd.",
                quoted(&resolved.to_string_lossy())
            ),
        ));
    }
    Ok(resolved)
}

fn model(
    requested: Option<&str>,
    provider: &str,
    ctx: &ValidationContext,
) -> Result<Option<String>, DroverError> {
    let Some(name) = present(requested) else {
        return Ok(None);
    };
    if name.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    match ctx.models.resolve(provider, &name) {
        ModelResolution::Known { id } => Ok(Some(id)),
        ModelResolution::Hidden => Err(DroverError::new(
            ErrorCode::ModelDisabled,
            format!(
                "Model {} is disabled for provider {provider} in the config; enable it there, pick another model, or use auto.",
                quoted(&name)
            ),
        )),
        ModelResolution::Unknown { suggestions } => {
            let hint = match suggestions.as_slice() {
                [] => "name a model from the catalog or use auto".to_string(),
                close => format!("did you mean {}? Or use auto", either(close)),
            };
            Err(DroverError::new(
                ErrorCode::ModelUnknown,
                format!(
                    "Model {} is not known for provider {provider}; {hint}.",
                    quoted(&name)
                ),
            ))
        }
    }
}

fn policy(
    requested: Option<&str>,
    provider: &ProviderInfo,
) -> Result<PermissionPolicy, DroverError> {
    let all: Vec<&str> = PermissionPolicy::ALL.iter().map(|p| p.as_str()).collect();
    let policy = match present(requested) {
        None => PermissionPolicy::default(),
        Some(word) => PermissionPolicy::from_word(&word).ok_or_else(|| {
            DroverError::new(
                ErrorCode::PermissionPolicyUnsupported,
                format!(
                    "Unknown permission policy {}; use {}.",
                    quoted(&word),
                    either(&all)
                ),
            )
        })?,
    };
    if !provider.policies.contains(&policy) {
        let supported: Vec<&str> = provider.policies.iter().map(|p| p.as_str()).collect();
        let instead = if supported.is_empty() {
            "pick another provider".to_string()
        } else {
            format!("use {} or pick another provider", either(&supported))
        };
        return Err(DroverError::new(
            ErrorCode::PermissionPolicyUnsupported,
            format!(
                "Provider {} does not support the {} permission policy; {instead}.",
                provider.name,
                policy.as_str()
            ),
        ));
    }
    Ok(policy)
}

fn capability(requested: Option<&str>) -> Result<Capability, DroverError> {
    let Some(word) = present(requested) else {
        return Ok(Capability::default());
    };
    Capability::from_word(&word).ok_or_else(|| {
        let all: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
        DroverError::new(
            ErrorCode::InvalidSpec,
            format!(
                "Unknown capability {}; use {}.",
                quoted(&word),
                either(&all)
            ),
        )
    })
}

fn workspace(
    requested: Option<&str>,
) -> Result<Option<crate::workspace::WorkspaceMode>, DroverError> {
    use crate::workspace::WorkspaceMode;
    let Some(word) = present(requested) else {
        return Ok(None);
    };
    match WorkspaceMode::from_word(&word) {
        Some(mode) => Ok(Some(mode)),
        None => {
            let all: Vec<&str> = WorkspaceMode::ALL.iter().map(|m| m.as_str()).collect();
            Err(DroverError::new(
                ErrorCode::InvalidSpec,
                format!("Unknown workspace {}; use {}.", quoted(&word), either(&all)),
            ))
        }
    }
}

fn effort(requested: Option<&str>) -> Result<Option<Effort>, DroverError> {
    let Some(word) = present(requested) else {
        return Ok(None);
    };
    match Effort::from_word(&word) {
        Some(effort) => Ok(Some(effort)),
        None => {
            let all: Vec<&str> = Effort::ALL.iter().map(|e| e.as_str()).collect();
            Err(DroverError::new(
                ErrorCode::InvalidSpec,
                format!(
                    "Unknown effort {}; use {} (or leave it out).",
                    quoted(&word),
                    either(&all)
                ),
            ))
        }
    }
}

fn output_schema(requested: Option<&Value>) -> Result<Option<Value>, DroverError> {
    let kind = match requested {
        None | Some(Value::Null) => return Ok(None),
        Some(schema @ Value::Object(_)) => return Ok(Some(schema.clone())),
        Some(Value::Array(_)) => "an array",
        Some(Value::String(_)) => "a string",
        Some(Value::Number(_)) => "a number",
        Some(Value::Bool(_)) => "a boolean",
    };
    Err(DroverError::new(
        ErrorCode::InvalidSpec,
        format!("The output schema is {kind}; pass a JSON Schema object, or leave it out."),
    ))
}

fn tags(requested: &[String]) -> Result<Vec<String>, DroverError> {
    if requested.len() > MAX_TAGS {
        return Err(DroverError::new(
            ErrorCode::InvalidSpec,
            format!(
                "The spec has {} tags; keep it to at most {MAX_TAGS}.",
                requested.len()
            ),
        ));
    }
    let mut tags = Vec::with_capacity(requested.len());
    for (index, tag) in requested.iter().enumerate() {
        let tag = one_line(tag);
        if tag.is_empty() {
            return Err(DroverError::new(
                ErrorCode::InvalidSpec,
                format!(
                    "Tag number {} is empty; remove it or give it a name.",
                    index + 1
                ),
            ));
        }
        if tag.chars().nth(TAG_MAX_CHARS).is_some() {
            return Err(DroverError::new(
                ErrorCode::InvalidSpec,
                format!(
                    "Tag {} is longer than {TAG_MAX_CHARS} characters; shorten it.",
                    quoted(&tag)
                ),
            ));
        }
        tags.push(tag);
    }
    Ok(tags)
}
