//! Checks on a deserialized [`Config`] that types cannot express: each clamp range in
//! order (min ≤ default ≤ max), money from $0 to $1,000,000, every string and list
//! bounded, key bindings in the dashboard's vocabulary ([`super::keys`], with the closest
//! names when one strays), the session warning at or
//! below the hard cap, a command for every provider but `sim`, rails and catalog entries
//! only for providers that exist, and catalog entries that merge over the embedded model
//! catalog (those checks are the catalog's own, [`crate::money::Catalog::with_entries`]),
//! a `[routing]` section with a sane price threshold and expiry and known class names,
//! and a dashboard answer guard of at most five seconds.
//!
//! Pure: it sees only the config and reports the first problem with the keys involved;
//! the loader picks the one the user wrote to name a line.

use super::{Config, SIM_PROVIDER};
use crate::config::locate::{dotted, index_segment};
use crate::money::Catalog;
use crate::money::dollars::is_amount;
use crate::route::TaskClass;
use std::fmt::Display;

/// One problem, with the keys it involves in the order to blame them.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Problem {
    pub message: String,
    keys: Vec<Vec<String>>,
}

impl Problem {
    fn new(message: String, keys: Vec<Vec<String>>) -> Problem {
        Problem { message, keys }
    }

    /// The first involved key for which `written` holds (the user set it), else the first.
    pub fn key_to_blame(&self, written: impl Fn(&[String]) -> bool) -> &[String] {
        self.keys
            .iter()
            .find(|k| written(k))
            .or_else(|| self.keys.first())
            .map_or(&[], Vec::as_slice)
    }
}

fn limit(name: &str) -> Vec<String> {
    vec!["limits".to_owned(), name.to_owned()]
}

/// The first problem in `config`, if any.
pub(super) fn check(config: &Config) -> Result<(), Problem> {
    let l = &config.limits;

    for (name, value) in [
        ("budget_usd_default", l.budget_usd_default),
        ("budget_usd_min", l.budget_usd_min),
        ("budget_usd_max", l.budget_usd_max),
        ("session_warning_usd", l.session_warning_usd),
        ("session_hard_cap_usd", l.session_hard_cap_usd),
        ("wrap_up_usd", l.wrap_up_usd),
    ] {
        money(limit(name), value)?;
    }

    range(
        "max_minutes",
        l.max_minutes_min,
        l.max_minutes_default,
        l.max_minutes_max,
    )?;
    range(
        "budget_usd",
        l.budget_usd_min,
        l.budget_usd_default,
        l.budget_usd_max,
    )?;
    range(
        "idle_timeout_secs",
        l.idle_timeout_secs_min,
        l.idle_timeout_secs_default,
        l.idle_timeout_secs_max,
    )?;
    range(
        "max_turns",
        l.max_turns_min,
        l.max_turns_default,
        l.max_turns_max,
    )?;
    not_above(
        "session_warning_usd",
        l.session_warning_usd,
        "session_hard_cap_usd",
        l.session_hard_cap_usd,
    )?;
    for (name, secs) in [
        ("idle_timeout_secs_default", l.idle_timeout_secs_default),
        ("idle_timeout_secs_min", l.idle_timeout_secs_min),
        ("idle_timeout_secs_max", l.idle_timeout_secs_max),
        ("idempotency_window_secs", l.idempotency_window_secs),
        ("stalled_after_secs", l.stalled_after_secs),
        ("hibernate_after_secs", l.hibernate_after_secs),
        ("resend_wait_max_secs", l.resend_wait_max_secs),
        ("permission_timeout_secs", l.permission_timeout_secs),
        ("question_timeout_secs", l.question_timeout_secs),
        ("wrap_up_secs", l.wrap_up_secs),
        ("wrap_up_bound_secs", l.wrap_up_bound_secs),
    ] {
        seconds(limit(name), secs)?;
    }
    seconds(
        vec!["routing".to_owned(), "card_expiry_secs".to_owned()],
        config.routing.card_expiry_secs,
    )?;
    for (name, value, why) in [
        ("per_account", u64::from(l.per_account), RAIL),
        (
            "per_session_running",
            u64::from(l.per_session_running),
            RAIL,
        ),
        ("per_workflow", u64::from(l.per_workflow), RAIL),
        (
            "max_minutes_min",
            u64::from(l.max_minutes_min),
            "a run could be given no minutes to work",
        ),
        (
            "max_turns_min",
            u64::from(l.max_turns_min),
            "a run could be given no turn to take",
        ),
        (
            "task_max_chars",
            l.task_max_chars as u64,
            "every dispatch would be refused as too long",
        ),
        (
            "transcript_max_lines",
            l.transcript_max_lines as u64,
            "a live run's transcript would keep no line",
        ),
        (
            "transcript_max_chars",
            l.transcript_max_chars as u64,
            "a live run's transcript would keep nothing",
        ),
    ] {
        at_least_one(limit(name), value, why)?;
    }
    for (name, value) in &l.per_provider {
        if *value == 0 {
            let key = vec!["limits".to_owned(), "per_provider".to_owned(), name.clone()];
            return Err(Problem::new(
                format!(
                    "`{}` is 0, so no {name} run could ever start; give at least 1, or set \
                     `providers.{name}.enabled = false` to turn the provider off",
                    dotted(&key)
                ),
                vec![key],
            ));
        }
    }

    strings(config)?;
    for (name, provider) in &config.providers {
        if name != SIM_PROVIDER && provider.command.trim().is_empty() {
            let key = vec!["providers".to_owned(), name.clone(), "command".to_owned()];
            return Err(Problem::new(
                format!(
                    "`{}` is empty; set it to the provider's executable (a name on PATH or a path)",
                    dotted(&key)
                ),
                vec![key, vec!["providers".to_owned(), name.clone()]],
            ));
        }
    }

    for (name, provider) in &config.providers {
        if let Some(protocol) = provider.protocol.as_deref()
            && protocol != super::ACP_PROTOCOL
        {
            let key = vec!["providers".to_owned(), name.clone(), "protocol".to_owned()];
            return Err(Problem::new(
                format!(
                    "`{}` is `{protocol}`; the one protocol drover speaks with a configured agent is `acp` (leave it out for a provider drover knows)",
                    dotted(&key)
                ),
                vec![key],
            ));
        }
        if provider.mode.is_some()
            && provider.protocol.is_none()
            && !crate::providers::registry::is_acp(name)
        {
            let key = vec!["providers".to_owned(), name.clone(), "mode".to_owned()];
            return Err(Problem::new(
                format!(
                    "`{}` is set, but only an ACP agent (`protocol = \"acp\"`, or one drover knows such as gemini) takes a session mode; remove it",
                    dotted(&key)
                ),
                vec![key],
            ));
        }
    }

    for (name, provider) in &config.providers {
        if let Some(secs) = provider.silence_timeout_secs
            && secs != 0
            && !(10..=86_400).contains(&secs)
        {
            let key = vec![
                "providers".to_owned(),
                name.clone(),
                "silence_timeout_secs".to_owned(),
            ];
            return Err(Problem::new(
                format!(
                    "`{}` is {secs}; give a number of seconds from 10 to 86400, or 0 for no \
                     timeout",
                    dotted(&key)
                ),
                vec![key],
            ));
        }
    }

    for name in l.per_provider.keys() {
        if !config.providers.contains_key(name) {
            let key = vec!["limits".to_owned(), "per_provider".to_owned(), name.clone()];
            let known: Vec<&str> = config.providers.keys().map(String::as_str).collect();
            return Err(Problem::new(
                format!(
                    "`{}` names no provider; providers are: {}",
                    dotted(&key),
                    known.join(", ")
                ),
                vec![key],
            ));
        }
    }
    catalog_entries(config)?;
    routing(config)?;
    workspaces(config)?;
    dashboard(config)?;
    guard(config)?;
    evidence(config)?;
    hosts(config)?;
    keys(config)
}

/// `[hosts.<name>]`: each reached one way, with words no tool reads as options
/// ([`super::hosts::check`]).
fn hosts(config: &Config) -> Result<(), Problem> {
    entries(vec!["hosts".to_owned()], config.hosts.len())?;
    for (name, host) in &config.hosts {
        if let Err((key, message)) = super::hosts::check(name, host) {
            let mut blamed = vec!["hosts".to_owned(), name.clone()];
            blamed.extend(key.map(str::to_owned));
            return Err(Problem::new(message, vec![blamed]));
        }
    }
    Ok(())
}

/// The most US dollars any amount in the config may be: a million.
pub(super) const MAX_USD: f64 = 1_000_000.0;
/// The longest text one setting may hold (a command, an argument, a path, a variable), in
/// bytes.
pub(super) const MAX_TEXT_BYTES: usize = 4096;
/// The most entries one list or table of the config may hold (arguments, variables,
/// providers, bindings of one context, …).
pub(super) const MAX_ENTRIES: usize = 256;

/// Why a rail of 0 is refused.
const RAIL: &str = "a rail of 0 queues runs forever";

/// A dollar amount from 0 to [`MAX_USD`].
fn money(key: Vec<String>, value: f64) -> Result<(), Problem> {
    if is_amount(value) && value <= MAX_USD {
        return Ok(());
    }
    // A huge number is written short (1e308, not 309 digits).
    let found = if value.is_finite() && value.abs() >= 1e15 {
        format!("{value:e}")
    } else {
        value.to_string()
    };
    Err(Problem::new(
        format!(
            "`{}` must be a dollar amount from 0 to 1000000, found {found}",
            dotted(&key)
        ),
        vec![key],
    ))
}

/// A text setting of at most [`MAX_TEXT_BYTES`].
fn text(key: Vec<String>, value: &str) -> Result<(), Problem> {
    if value.len() <= MAX_TEXT_BYTES {
        return Ok(());
    }
    Err(Problem::new(
        format!(
            "`{}` is {} bytes long; keep it to at most {MAX_TEXT_BYTES}",
            dotted(&key),
            value.len()
        ),
        vec![key],
    ))
}

/// `[notifications]`: a webhook that is an http(s) address, a batch of at most an hour.
fn notifications(n: &crate::config::NotificationsConfig) -> Result<(), Problem> {
    let key = |parts: &[&str]| parts.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
    text(key(&["notifications", "webhook"]), &n.webhook)?;
    text(key(&["notifications", "webhook_topic"]), &n.webhook_topic)?;
    if !n.webhook.is_empty() {
        let scheme = reqwest::Url::parse(&n.webhook).map(|url| url.scheme().to_string());
        if !matches!(scheme.as_deref(), Ok("http" | "https")) {
            let key = key(&["notifications", "webhook"]);
            return Err(Problem::new(
                format!(
                    "`{}` must be an http:// or https:// address (like \"https://ntfy.sh/\"), found {:?}; leave it empty for none",
                    dotted(&key),
                    crate::text::clip(&n.webhook, 60)
                ),
                vec![key],
            ));
        }
    }
    if n.batch_secs > 3600 {
        let key = key(&["notifications", "batch_secs"]);
        return Err(Problem::new(
            format!(
                "`{}` must be from 0 to 3600 seconds, found {}",
                dotted(&key),
                n.batch_secs
            ),
            vec![key],
        ));
    }
    Ok(())
}

/// A list or table of at most [`MAX_ENTRIES`].
fn entries(key: Vec<String>, len: usize) -> Result<(), Problem> {
    if len <= MAX_ENTRIES {
        return Ok(());
    }
    Err(Problem::new(
        format!(
            "`{}` has {len} entries; keep at most {MAX_ENTRIES}",
            dotted(&key)
        ),
        vec![key],
    ))
}

/// Every string and list the config holds, bounded.
fn strings(config: &Config) -> Result<(), Problem> {
    let key = |parts: &[&str]| parts.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
    entries(key(&["providers"]), config.providers.len())?;
    entries(
        key(&["limits", "per_provider"]),
        config.limits.per_provider.len(),
    )?;
    for (name, provider) in &config.providers {
        text(key(&["providers", name, "command"]), &provider.command)?;
        entries(key(&["providers", name, "args"]), provider.args.len())?;
        for (i, arg) in provider.args.iter().enumerate() {
            text(key(&["providers", name, "args", &index_segment(i)]), arg)?;
        }
        entries(key(&["providers", name, "env"]), provider.env.len())?;
        for (var, value) in &provider.env {
            text(key(&["providers", name, "env", var]), var)?;
            text(key(&["providers", name, "env", var]), value)?;
        }
    }
    text(key(&["workspaces", "root"]), &config.workspaces.root)?;
    entries(key(&["workspaces", "link"]), config.workspaces.link.len())?;
    for (i, dir) in config.workspaces.link.iter().enumerate() {
        text(key(&["workspaces", "link", &index_segment(i)]), dir)?;
    }
    entries(key(&["workspaces", "setup"]), config.workspaces.setup.len())?;
    for (i, word) in config.workspaces.setup.iter().enumerate() {
        text(key(&["workspaces", "setup", &index_segment(i)]), word)?;
    }
    entries(key(&["redact", "env"]), config.redact.env.len())?;
    for (i, var) in config.redact.env.iter().enumerate() {
        text(key(&["redact", "env", &index_segment(i)]), var)?;
    }
    let notify = &config.notifications.command;
    entries(key(&["notifications", "command"]), notify.len())?;
    for (i, part) in notify.iter().enumerate() {
        text(key(&["notifications", "command", &index_segment(i)]), part)?;
    }
    notifications(&config.notifications)?;
    entries(key(&["catalog", "models"]), config.catalog.models.len())?;
    Ok(())
}

/// `[keys.<context>] "<key>" = "<action>"`: known contexts, keys written as the help
/// writes them, known actions (or `"none"`), each refusal with the closest names.
fn keys(config: &Config) -> Result<(), Problem> {
    use super::keys::{ACTIONS, CONTEXTS, KeyText, UNBIND};
    let close = |wanted: &str, names: &[&str]| {
        let near = crate::spec::suggest(wanted, names.iter().copied());
        match near.as_slice() {
            [] => format!("use one of {}", names.join(", ")),
            near => format!("did you mean {}?", near.join(" or ")),
        }
    };
    for (context, table) in &config.keys {
        let context_key = vec!["keys".to_owned(), context.clone()];
        if !CONTEXTS.contains(&context.as_str()) {
            return Err(Problem::new(
                format!(
                    "`{}` names no context of the dashboard; {}",
                    dotted(&context_key),
                    close(context, &CONTEXTS)
                ),
                vec![context_key],
            ));
        }
        let Some(table) = table.as_table() else {
            return Err(Problem::new(
                format!(
                    "`{}` must be a table of \"key\" = \"action\"",
                    dotted(&context_key)
                ),
                vec![context_key],
            ));
        };
        entries(context_key.clone(), table.len())?;
        for (key_text, action) in table {
            let key = vec!["keys".to_owned(), context.clone(), key_text.clone()];
            if KeyText::parse(key_text).is_none() {
                return Err(Problem::new(
                    format!(
                        "`{}`: {key_text:?} is not a key (write \"x\", \"X\", \"ctrl-x\", \
                         \"alt-x\", \"enter\", \"esc\", \"pgdn\", \"f2\")",
                        dotted(&key)
                    ),
                    vec![key],
                ));
            }
            let Some(action) = action.as_str() else {
                return Err(Problem::new(
                    format!(
                        "`{}` must name an action as a string (or \"none\" to unbind the key)",
                        dotted(&key)
                    ),
                    vec![key],
                ));
            };
            if action != UNBIND && !ACTIONS.contains(&action) {
                return Err(Problem::new(
                    format!(
                        "`{}` binds no action `{action}`; {}",
                        dotted(&key),
                        close(action, &ACTIONS)
                    ),
                    vec![key],
                ));
            }
        }
    }
    Ok(())
}

/// `[dashboard] answer_guard_ms`: at most [`DashboardConfig::MAX_ANSWER_GUARD_MS`].
///
/// [`DashboardConfig::MAX_ANSWER_GUARD_MS`]: crate::config::DashboardConfig::MAX_ANSWER_GUARD_MS
fn dashboard(config: &Config) -> Result<(), Problem> {
    let ms = config.dashboard.answer_guard_ms;
    let max = crate::config::DashboardConfig::MAX_ANSWER_GUARD_MS;
    if ms <= max {
        return Ok(());
    }
    let key = vec!["dashboard".to_owned(), "answer_guard_ms".to_owned()];
    Err(Problem::new(
        format!(
            "`{}` is {ms}; give at most {max} milliseconds (a request must be on screen \
             this long before a key may answer it)",
            dotted(&key)
        ),
        vec![key],
    ))
}

/// `[guard] commands`: at most [`GuardConfig::MAX_COMMANDS`] patterns that parse.
fn guard(config: &Config) -> Result<(), Problem> {
    let commands = &config.guard.commands;
    let key = vec!["guard".to_owned(), "commands".to_owned()];
    let max = crate::config::GuardConfig::MAX_COMMANDS;
    if commands.len() > max {
        return Err(Problem::new(
            format!(
                "`{}` has {} patterns; keep at most {max}",
                dotted(&key),
                commands.len()
            ),
            vec![key],
        ));
    }
    for (i, pattern) in commands.iter().enumerate() {
        if let Err(why) = crate::rules::pattern::CommandPattern::parse(pattern) {
            let key = vec!["guard".to_owned(), format!("commands[{i}]")];
            return Err(Problem::new(
                format!("`{}` is {pattern:?}: {why}", dotted(&key)),
                vec![key],
            ));
        }
    }
    Ok(())
}

/// `[evidence] tests`: at most [`crate::config::EvidenceConfig::MAX_TESTS`] rows whose
/// patterns parse and whose names are not blank.
fn evidence(config: &Config) -> Result<(), Problem> {
    let tests = &config.evidence.tests;
    let key = vec!["evidence".to_owned(), "tests".to_owned()];
    let max = crate::config::EvidenceConfig::MAX_TESTS;
    if tests.len() > max {
        return Err(Problem::new(
            format!(
                "`{}` has {} rows; keep at most {max}",
                dotted(&key),
                tests.len()
            ),
            vec![key],
        ));
    }
    for (i, row) in tests.iter().enumerate() {
        let key = vec!["evidence".to_owned(), format!("tests[{i}]")];
        if let Err(why) = crate::rules::pattern::CommandPattern::parse(&row.pattern) {
            return Err(Problem::new(
                format!("`{}.pattern` is {:?}: {why}", dotted(&key), row.pattern),
                vec![key],
            ));
        }
        if row.shown_name().trim().is_empty() {
            return Err(Problem::new(
                format!(
                    "`{}` has no name to show; give it `name = \"…\"`",
                    dotted(&key)
                ),
                vec![key],
            ));
        }
    }
    Ok(())
}

/// `[workspaces] root`: empty (the data directory's `worktrees/`) or an absolute path.
fn workspaces(config: &Config) -> Result<(), Problem> {
    for (i, dir) in config.workspaces.link.iter().enumerate() {
        let path = std::path::Path::new(dir);
        let inside = !dir.trim().is_empty()
            && path.is_relative()
            && path
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            let key = vec!["workspaces".to_owned(), "link".to_owned(), index_segment(i)];
            return Err(Problem::new(
                format!(
                    "`{}` is {dir:?}; name a directory inside the checkout (`node_modules`, `target`), with no `..`",
                    dotted(&key)
                ),
                vec![key],
            ));
        }
    }
    let ws = &config.workspaces;
    if ws.setup.first().is_some_and(|w| w.trim().is_empty())
        || !(1..=3_600).contains(&ws.setup_timeout_secs)
    {
        let key = vec!["workspaces".to_owned(), "setup".to_owned()];
        return Err(Problem::new(
            format!(
                "`{}` must start with a command and `workspaces.setup_timeout_secs` be 1 to 3600 seconds",
                dotted(&key)
            ),
            vec![key],
        ));
    }
    if !(30..=86_400).contains(&ws.pr_refresh_secs) {
        let key = vec!["workspaces".to_owned(), "pr_refresh_secs".to_owned()];
        return Err(Problem::new(
            format!(
                "`{}` must be 30 to 86400 seconds (the forge is asked at most that often)",
                dotted(&key)
            ),
            vec![key],
        ));
    }
    let root = config.workspaces.root.trim();
    if !root.is_empty() && !std::path::Path::new(root).is_absolute() {
        let key = vec!["workspaces".to_owned(), "root".to_owned()];
        return Err(Problem::new(
            format!(
                "`{}` is {root:?}; give an absolute path, or \"\" for the data directory's worktrees/",
                dotted(&key)
            ),
            vec![key],
        ));
    }
    Ok(())
}

/// `[routing]`: the price threshold a dollar amount, cards that last at least a second,
/// and `[routing.classes.<class>]` only for task classes.
fn routing(config: &Config) -> Result<(), Problem> {
    let r = &config.routing;
    let key = |name: &str| vec!["routing".to_owned(), name.to_owned()];
    if let Some(price) = r.ask_above_price_per_mtok {
        money(key("ask_above_price_per_mtok"), price)?;
    }
    if r.card_expiry_secs == 0 {
        let key = key("card_expiry_secs");
        return Err(Problem::new(
            format!(
                "`{}` must be at least 1 (seconds a route card stays open), found 0",
                dotted(&key)
            ),
            vec![key],
        ));
    }
    for name in r.classes.keys() {
        if TaskClass::parse(name).is_none() {
            let key = vec!["routing".to_owned(), "classes".to_owned(), name.clone()];
            let known: Vec<&str> = TaskClass::ALL.iter().map(|c| c.as_str()).collect();
            return Err(Problem::new(
                format!(
                    "`{}` names no task class; classes are: {}",
                    dotted(&key),
                    known.join(", ")
                ),
                vec![key],
            ));
        }
    }
    Ok(())
}

/// The path of key `key` (or of the whole entry) of `[[catalog.models]]` entry `index`.
fn entry_key(index: usize, key: Option<&str>) -> Vec<String> {
    let mut path = vec![
        "catalog".to_owned(),
        "models".to_owned(),
        index_segment(index),
    ];
    path.extend(key.map(str::to_owned));
    path
}

/// Each `[[catalog.models]]` entry names a configured provider and merges cleanly over
/// the embedded catalog.
fn catalog_entries(config: &Config) -> Result<(), Problem> {
    for (index, entry) in config.catalog.models.iter().enumerate() {
        let provider = entry.provider.trim();
        if !provider.is_empty() && !config.providers.contains_key(provider) {
            let key = entry_key(index, Some("provider"));
            let known: Vec<&str> = config.providers.keys().map(String::as_str).collect();
            return Err(Problem::new(
                format!(
                    "`{}` names no provider ({provider:?}); providers are: {}",
                    dotted(&key),
                    known.join(", ")
                ),
                vec![key, entry_key(index, None)],
            ));
        }
    }
    match Catalog::with_entries(&config.catalog.models) {
        Ok(_) => Ok(()),
        Err(problem) => {
            let mut keys = vec![entry_key(problem.entry, problem.key)];
            if problem.key.is_some() {
                keys.push(entry_key(problem.entry, None));
            }
            Err(Problem::new(problem.message, keys))
        }
    }
}

/// The longest duration drover takes from config: a year. (Durations are kept as
/// [`std::time::Duration`] and turned into milliseconds saturating, so a larger one would
/// not wrap; it is refused because no timer of drover's means anything that long.)
pub(super) const MAX_SECS: u64 = 365 * 24 * 3600;

fn seconds(key: Vec<String>, secs: u64) -> Result<(), Problem> {
    if secs <= MAX_SECS {
        return Ok(());
    }
    Err(Problem::new(
        format!(
            "`{}` is {secs} seconds; give at most {MAX_SECS} (a year)",
            dotted(&key)
        ),
        vec![key],
    ))
}

/// A capacity or a minimum of 0 would stop everything: refused, naming the key and what
/// 0 would do (`why`).
fn at_least_one(key: Vec<String>, value: u64, why: &str) -> Result<(), Problem> {
    if value >= 1 {
        return Ok(());
    }
    Err(Problem::new(
        format!("`{}` is 0: {why}; give at least 1", dotted(&key)),
        vec![key],
    ))
}

/// `<stem>_min` ≤ `<stem>_default` ≤ `<stem>_max`.
fn range<T: PartialOrd + Display + Copy>(
    stem: &str,
    min: T,
    default: T,
    max: T,
) -> Result<(), Problem> {
    let (min_key, default_key, max_key) = (
        format!("{stem}_min"),
        format!("{stem}_default"),
        format!("{stem}_max"),
    );
    not_above(&min_key, min, &default_key, default)?;
    not_above(&default_key, default, &max_key, max)
}

/// `limits.<low_name>` ≤ `limits.<high_name>`; blames the key the user wrote, the higher
/// one first (lowering a ceiling is the usual edit).
fn not_above<T: PartialOrd + Display>(
    low_name: &str,
    low: T,
    high_name: &str,
    high: T,
) -> Result<(), Problem> {
    if low <= high {
        return Ok(());
    }
    let (low_key, high_key) = (limit(low_name), limit(high_name));
    Err(Problem::new(
        format!(
            "`{}` ({low}) must not exceed `{}` ({high})",
            dotted(&low_key),
            dotted(&high_key)
        ),
        vec![high_key, low_key],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(edit: impl FnOnce(&mut Config)) -> Problem {
        let mut c = Config::defaults();
        edit(&mut c);
        match check(&c) {
            Ok(()) => panic!("expected a problem"),
            Err(p) => p,
        }
    }

    fn blamed(p: &Problem) -> String {
        dotted(p.key_to_blame(|_| false))
    }

    #[test]
    fn the_defaults_pass() {
        assert_eq!(check(&Config::defaults()), Ok(()));
    }

    #[test]
    fn each_clamp_range_must_be_in_order() {
        type Edit = fn(&mut Config);
        let cases: [(Edit, &str); 5] = [
            (
                |c| c.limits.max_minutes_min = 50,
                "`limits.max_minutes_min` (50) must not exceed `limits.max_minutes_default` (45)",
            ),
            (
                |c| c.limits.max_minutes_max = 30,
                "`limits.max_minutes_default` (45) must not exceed `limits.max_minutes_max` (30)",
            ),
            (
                |c| c.limits.budget_usd_default = 30.0,
                "`limits.budget_usd_default` (30) must not exceed `limits.budget_usd_max` (25)",
            ),
            (
                |c| c.limits.idle_timeout_secs_min = 2000,
                "`limits.idle_timeout_secs_min` (2000) must not exceed `limits.idle_timeout_secs_default` (1200)",
            ),
            (
                |c| c.limits.max_turns_max = 2,
                "`limits.max_turns_default` (6) must not exceed `limits.max_turns_max` (2)",
            ),
        ];
        for (edit, message) in cases {
            assert_eq!(problem(edit).message, message);
        }
    }

    #[test]
    fn money_must_be_finite_and_not_negative() {
        let p = problem(|c| c.limits.budget_usd_min = -1.0);
        assert_eq!(
            p.message,
            "`limits.budget_usd_min` must be a dollar amount from 0 to 1000000, found -1"
        );
        let p = problem(|c| c.limits.session_hard_cap_usd = f64::NAN);
        assert_eq!(blamed(&p), "limits.session_hard_cap_usd");
        let p = problem(|c| c.limits.session_warning_usd = f64::INFINITY);
        assert_eq!(blamed(&p), "limits.session_warning_usd");
    }

    #[test]
    fn every_amount_string_list_and_binding_is_bounded_and_each_refusal_names_its_key() {
        type Edit = fn(&mut Config);
        fn sim(c: &mut Config) -> &mut crate::config::ProviderConfig {
            c.providers.get_mut(SIM_PROVIDER).unwrap()
        }
        fn bind(c: &mut Config, context: &str, key: &str, action: toml::Value) {
            let mut table = toml::Table::new();
            table.insert(key.into(), action);
            c.keys.insert(context.into(), toml::Value::Table(table));
        }
        // (edit, the key blamed, words the sentence must hold)
        let cases: Vec<(Edit, &str, &str)> = vec![
            (
                |c| c.limits.session_hard_cap_usd = 1e308,
                "limits.session_hard_cap_usd",
                "from 0 to 1000000, found 1e308",
            ),
            (
                |c| c.limits.budget_usd_max = 1_000_000.01,
                "limits.budget_usd_max",
                "from 0 to 1000000",
            ),
            (
                |c| c.routing.ask_above_price_per_mtok = Some(2e6),
                "routing.ask_above_price_per_mtok",
                "from 0 to 1000000",
            ),
            (
                |c| sim(c).command = "x".repeat(5_000_000),
                "providers.sim.command",
                "5000000 bytes long; keep it to at most 4096",
            ),
            (
                |c| sim(c).args = vec!["-v".into(); MAX_ENTRIES + 1],
                "providers.sim.args",
                "257 entries; keep at most 256",
            ),
            (
                |c| sim(c).args = vec!["-v".into(), "x".repeat(MAX_TEXT_BYTES + 1)],
                "providers.sim.args[1]",
                "keep it to at most 4096",
            ),
            (
                |c| {
                    sim(c)
                        .env
                        .insert("LONG".into(), "x".repeat(MAX_TEXT_BYTES + 1));
                },
                "providers.sim.env.LONG",
                "keep it to at most 4096",
            ),
            (
                |c| c.redact.env = vec!["TOKEN".into(); MAX_ENTRIES + 1],
                "redact.env",
                "keep at most 256",
            ),
            (
                |c| c.notifications.command = vec!["x".repeat(MAX_TEXT_BYTES + 1)],
                "notifications.command[0]",
                "keep it to at most 4096",
            ),
            (
                |c| c.workspaces.root = format!("/{}", "x".repeat(MAX_TEXT_BYTES)),
                "workspaces.root",
                "keep it to at most 4096",
            ),
            (
                |c| c.limits.task_max_chars = 0,
                "limits.task_max_chars",
                "is 0: every dispatch would be refused as too long; give at least 1",
            ),
            (
                |c| c.limits.transcript_max_lines = 0,
                "limits.transcript_max_lines",
                "is 0: a live run's transcript would keep no line; give at least 1",
            ),
            (
                |c| c.limits.per_workflow = 0,
                "limits.per_workflow",
                "is 0: a rail of 0 queues runs forever",
            ),
            (
                |c| c.limits.max_turns_min = 0,
                "limits.max_turns_min",
                "no turn to take",
            ),
            (
                |c| bind(c, "dashbord", "N", "new_dispatch".into()),
                "keys.dashbord",
                "names no context of the dashboard; did you mean dashboard?",
            ),
            (
                |c| bind(c, "dashboard", "N", "new_dispatc".into()),
                "keys.dashboard.N",
                "binds no action `new_dispatc`; did you mean new_dispatch?",
            ),
            (
                |c| bind(c, "dashboard", "N", "frobnicate".into()),
                "keys.dashboard.N",
                "use one of select_next",
            ),
            (
                |c| bind(c, "dashboard", "ctrl-", "quit".into()),
                "keys.dashboard.ctrl-",
                "is not a key",
            ),
            (
                |c| bind(c, "dashboard", "q", 3.into()),
                "keys.dashboard.q",
                "must name an action as a string",
            ),
            (
                |c| {
                    c.keys.insert("help".into(), "quit".into());
                },
                "keys.help",
                "must be a table",
            ),
        ];
        for (edit, key, words) in cases {
            let p = problem(edit);
            assert_eq!(blamed(&p), key, "{}", p.message);
            assert!(p.message.contains(words), "{key}: {}", p.message);
            assert!(p.message.contains(&format!("`{key}`")), "{}", p.message);
        }
        // At the bounds: accepted; `none` unbinds.
        let mut c = Config::defaults();
        c.limits.session_hard_cap_usd = MAX_USD;
        c.limits.session_warning_usd = MAX_USD;
        sim(&mut c).command = "x".repeat(MAX_TEXT_BYTES);
        bind(&mut c, "dashboard", "ctrl-alt-f12", "none".into());
        assert_eq!(check(&c), Ok(()));
    }

    #[test]
    fn warning_must_not_exceed_the_hard_cap() {
        let p = problem(|c| c.limits.session_hard_cap_usd = 5.0);
        assert_eq!(
            p.message,
            "`limits.session_warning_usd` (8) must not exceed `limits.session_hard_cap_usd` (5)"
        );
        assert_eq!(blamed(&p), "limits.session_hard_cap_usd");
        // when only the lower key was written, it is the one blamed
        let only_warning = p.key_to_blame(|k| dotted(k) == "limits.session_warning_usd");
        assert_eq!(dotted(only_warning), "limits.session_warning_usd");
    }

    #[test]
    fn providers_other_than_sim_need_a_command() {
        let p = problem(|c| {
            if let Some(codex) = c.providers.get_mut("codex") {
                codex.command = " ".into();
            }
        });
        assert_eq!(blamed(&p), "providers.codex.command");
        assert!(p.message.starts_with("`providers.codex.command` is empty"));
        let mut c = Config::defaults();
        if let Some(sim) = c.providers.get_mut(SIM_PROVIDER) {
            sim.command.clear();
        }
        assert_eq!(check(&c), Ok(()));
    }

    #[test]
    fn zero_capacity_rails_and_endless_durations_are_refused_naming_the_key() {
        type Edit = fn(&mut Config);
        let cases: [(Edit, &str); 8] = [
            (
                |c| c.limits.per_session_running = 0,
                "limits.per_session_running",
            ),
            (|c| c.limits.per_account = 0, "limits.per_account"),
            (|c| c.limits.per_workflow = 0, "limits.per_workflow"),
            (
                |c| {
                    c.limits.per_provider.insert("codex".into(), 0);
                },
                "limits.per_provider.codex",
            ),
            (
                |c| {
                    c.limits.idle_timeout_secs_default = 18_446_744_073_709_551;
                    c.limits.idle_timeout_secs_max = 18_446_744_073_709_551;
                },
                "limits.idle_timeout_secs_default",
            ),
            (
                |c| c.limits.permission_timeout_secs = 18_446_744_073_709_551,
                "limits.permission_timeout_secs",
            ),
            (
                |c| c.routing.card_expiry_secs = u64::MAX,
                "routing.card_expiry_secs",
            ),
            (
                |c| c.dashboard.answer_guard_ms = 60_000,
                "dashboard.answer_guard_ms",
            ),
        ];
        for (edit, key) in cases {
            let p = problem(edit);
            assert_eq!(blamed(&p), key, "{}", p.message);
            assert!(p.message.contains(key), "{}", p.message);
        }
    }

    #[test]
    fn rails_must_name_a_known_provider() {
        let p = problem(|c| {
            c.limits.per_provider.insert("claud-code".into(), 1);
        });
        assert_eq!(
            p.message,
            "`limits.per_provider.claud-code` names no provider; providers are: claude-acp, claude-code, codex, codex-acp, copilot, gemini, opencode, opencode-acp, qwen, sim"
        );
    }
}
