//! Checks on a deserialized [`Config`] that types cannot express: each clamp range in
//! order (min ≤ default ≤ max), money finite and non-negative, the session warning at or
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
    ] {
        if !is_amount(value) {
            return Err(Problem::new(
                format!(
                    "`{}` must be a dollar amount of 0 or more, found {value}",
                    dotted(&limit(name))
                ),
                vec![limit(name)],
            ));
        }
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
    ] {
        seconds(limit(name), secs)?;
    }
    seconds(
        vec!["routing".to_owned(), "card_expiry_secs".to_owned()],
        config.routing.card_expiry_secs,
    )?;
    for (name, value) in [
        ("per_account", l.per_account),
        ("per_session_running", l.per_session_running),
        ("per_workflow", l.per_workflow),
        ("max_minutes_min", l.max_minutes_min),
        ("max_turns_min", l.max_turns_min),
    ] {
        at_least_one(limit(name), u64::from(value))?;
    }
    for (name, value) in [
        ("task_max_chars", l.task_max_chars),
        ("transcript_max_lines", l.transcript_max_lines),
        ("transcript_max_chars", l.transcript_max_chars),
    ] {
        at_least_one(limit(name), value as u64)?;
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
    guard(config)
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

/// `[workspaces] root`: empty (the data directory's `worktrees/`) or an absolute path.
fn workspaces(config: &Config) -> Result<(), Problem> {
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
    if let Some(price) = r.ask_above_price_per_mtok
        && !is_amount(price)
    {
        let key = key("ask_above_price_per_mtok");
        return Err(Problem::new(
            format!(
                "`{}` must be a dollar amount of 0 or more, found {price}",
                dotted(&key)
            ),
            vec![key],
        ));
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

/// A capacity or a minimum of 0 would stop everything: refused, naming the key.
fn at_least_one(key: Vec<String>, value: u64) -> Result<(), Problem> {
    if value >= 1 {
        return Ok(());
    }
    Err(Problem::new(
        format!(
            "`{}` is 0, which would stop every run (a rail of 0 queues runs forever); give at least 1",
            dotted(&key)
        ),
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
            "`limits.budget_usd_min` must be a dollar amount of 0 or more, found -1"
        );
        let p = problem(|c| c.limits.session_hard_cap_usd = f64::NAN);
        assert_eq!(blamed(&p), "limits.session_hard_cap_usd");
        let p = problem(|c| c.limits.session_warning_usd = f64::INFINITY);
        assert_eq!(blamed(&p), "limits.session_warning_usd");
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
            "`limits.per_provider.claud-code` names no provider; providers are: claude-code, codex, opencode, sim"
        );
    }
}
