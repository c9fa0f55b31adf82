//! `drover` with no subcommand: the dashboard, attached to the owner of the data
//! directory through the control socket — the same requests and event stream a headless
//! client has.
//!
//! With `[dashboard] owner = "background"` (the default) it attaches to the running owner,
//! starting a background one (`drover serve --detach`) when none runs: leaving the
//! dashboard never stops a run. With `"in-process"` (and for `drover demo`) this process is
//! the owner, as `drover serve` would be, and leaving stops the active runs (the app asks
//! first). What must stay true: the terminal is given back before anything is printed.

use super::headless::{dispatcher_options, runtime};
use super::output::note;
use drover_core::config::{DashboardOwner, SIM_PROVIDER};
use drover_core::control::ControlClient;
use drover_core::control::Host;
use drover_core::control::background::{ping, start_background};
use drover_core::dispatch::{DispatcherOptions, Request};
use drover_core::error::DroverError;
use drover_core::paths::Paths;
use drover_core::spec::SpecInput;
use drover_tui::{AppOptions, Link};

pub fn run(paths: &Paths) -> Result<(), DroverError> {
    let options = dispatcher_options(paths)?;
    let mode = options.config.dashboard.owner;
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    runtime()?.block_on(open(options, Vec::new(), None, cwd, mode))
}

/// The enabled providers, in the config's order, and those of them whose CLI `drover
/// doctor` would not find.
fn providers_found(config: &drover_core::config::Config) -> (Vec<String>, Vec<String>) {
    let enabled: Vec<(&String, &drover_core::config::ProviderConfig)> =
        config.providers.iter().filter(|(_, p)| p.enabled).collect();
    let names = enabled.iter().map(|(name, _)| (*name).clone()).collect();
    let missing = enabled
        .iter()
        .filter(|(name, p)| !super::doctor::cli_found(name, &p.command))
        .map(|(name, _)| (*name).clone())
        .collect();
    (names, missing)
}

/// The provider the form starts on: the first enabled one whose CLI is found, other than
/// the simulated agent; the simulated agent when there is none.
fn first_found(names: &[String], missing: &[String]) -> String {
    names
        .iter()
        .find(|n| n.as_str() != SIM_PROVIDER && !missing.contains(n))
        .cloned()
        .unwrap_or_else(|| SIM_PROVIDER.to_string())
}

/// Attaches to (or becomes) the owner of `options.paths`, dispatches `initial` (in order,
/// before the dashboard opens), then runs the dashboard until the user leaves. The form
/// starts on `default_provider` (else the first provider found) and in `cwd`.
pub(crate) async fn open(
    options: DispatcherOptions,
    initial: Vec<SpecInput>,
    default_provider: Option<&str>,
    cwd: std::path::PathBuf,
    mode: DashboardOwner,
) -> Result<(), DroverError> {
    let paths = &options.paths.clone();
    let mut app_options = AppOptions::new(cwd);
    let (names, missing) = providers_found(&options.config);
    app_options.default_provider = default_provider
        .map(str::to_string)
        .unwrap_or_else(|| first_found(&names, &missing));
    app_options.providers = names;
    app_options.missing_providers = missing;
    app_options.hosts = options.config.hosts.keys().cloned().collect();
    app_options.notify = options.config.notifications.enabled;
    app_options.default_budget_usd = options.config.limits.budget_usd_default;
    if let Ok(catalog) = drover_core::money::Catalog::from_config(&options.config) {
        app_options.models = drover_tui::views::form::ModelOption::of_catalog(&catalog);
    }
    app_options.owner = mode;
    app_options.answer_guard_ms = options.config.dashboard.answer_guard_ms;
    app_options.open_in = options.config.dashboard.open_in;
    app_options.open_env = drover_tui::app::AppOptions::open_env_of_process();
    app_options.drover_exe = std::env::current_exe().unwrap_or_else(|_| "drover".into());
    app_options.data_dir = paths.data_dir.clone();
    app_options.keys = drover_tui::keys::KeyTable::defaults()
        .with_overrides(&options.config.keys)
        .map_err(|why| {
            DroverError::new(
                drover_core::ErrorCode::ConfigInvalid,
                format!("{}: {why}", options.paths.config_file.display()),
            )
        })?;
    let link = Link::new(paths.clone());
    match mode {
        DashboardOwner::Background => {
            // An owner that takes the connection is attached to as it is: asking it for a
            // ping first would put one more round trip before the first frame (one that
            // then does not answer is the event pump's to report, as when it goes later).
            let listening = ControlClient::connect(paths).await?.is_some();
            let started = if listening {
                None
            } else {
                Some(start_background(paths).await?.pid)
            };
            dispatch_all(&link, initial).await;
            let outcome =
                drover_tui::run_on_terminal(link, std::future::pending(), app_options).await;
            if outcome.is_ok() {
                let pid = match started {
                    Some(pid) => Some(pid),
                    None => ping(paths).await.ok().flatten().map(|pong| pong.pid),
                };
                let pid = pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default();
                note(&format!(
                    "drover goes on in the background{pid}: `drover` opens the dashboard \
                     again, `drover shutdown` ends it"
                ));
            }
            outcome
        }
        DashboardOwner::InProcess => {
            let mut host = Host::start(options).await?;
            dispatch_all(&link, initial).await;
            let outcome =
                drover_tui::run_on_terminal(link.clone(), host.dispatcher_ended(), app_options)
                    .await;
            let active = count_active(&link).await;
            if active > 0 {
                note(&format!(
                    "drover: stopping {active} active run{} (a run in a turn is recorded as interrupted; the others come back as they are)…",
                    drover_core::text::plural(active)
                ));
            }
            host.shutdown().await;
            outcome
        }
    }
}

async fn dispatch_all(link: &Link, specs: Vec<SpecInput>) {
    for spec in specs {
        let title = spec.title.clone().unwrap_or_default();
        if let Err(e) = link
            .request(Request::Dispatch {
                spec: Box::new(spec),
            })
            .await
        {
            tracing::warn!(%title, code = %e.code, "demo dispatch refused: {}", e.message);
        }
    }
}

async fn count_active(link: &Link) -> usize {
    match link.request(Request::active_runs()).await {
        Ok(drover_core::dispatch::Response::Runs(runs)) => {
            runs.iter().filter(|r| r.head.state.is_active()).count()
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_starts_on_the_first_provider_found_else_the_sim() {
        let names: Vec<String> = ["claude-code", "codex", "opencode", "sim"]
            .map(String::from)
            .to_vec();
        let missing = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(first_found(&names, &missing(&[])), "claude-code");
        assert_eq!(first_found(&names, &missing(&["claude-code"])), "codex");
        assert_eq!(
            first_found(&names, &missing(&["claude-code", "codex", "opencode"])),
            "sim"
        );
        // With the defaults on this machine: the sim is always found, and whatever is
        // missing is not the one the form starts on.
        let (names, missing) = providers_found(&drover_core::config::Config::defaults());
        assert!(names.contains(&"sim".to_string()) && !missing.contains(&"sim".to_string()));
        assert!(!missing.contains(&first_found(&names, &missing)));
    }
}
