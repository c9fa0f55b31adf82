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
use drover_core::config::DashboardOwner;
use drover_core::control::Host;
use drover_core::control::background::start_background;
use drover_core::dispatch::Request;
use drover_core::error::DroverError;
use drover_core::paths::Paths;
use drover_core::spec::SpecInput;
use drover_tui::{AppOptions, Link};

pub fn run(paths: &Paths) -> Result<(), DroverError> {
    let mode = dispatcher_options(paths)?.config.dashboard.owner;
    runtime()?.block_on(open(paths, Vec::new(), "claude-code", mode))
}

/// Attaches to (or becomes) the owner of `paths`, dispatches `initial` (in order, before
/// the dashboard opens), then runs the dashboard until the user leaves.
pub(crate) async fn open(
    paths: &Paths,
    initial: Vec<SpecInput>,
    default_provider: &str,
    mode: DashboardOwner,
) -> Result<(), DroverError> {
    let options = dispatcher_options(paths)?;
    let mut app_options = AppOptions::new(std::env::current_dir().unwrap_or_else(|_| "/".into()));
    app_options.providers = options
        .config
        .providers
        .iter()
        .filter(|(_, p)| p.enabled)
        .map(|(name, _)| name.clone())
        .collect();
    app_options.default_provider = default_provider.to_string();
    app_options.notify = options.config.notifications.enabled;
    app_options.notify_command = options.config.notifications.command.clone();
    app_options.default_budget_usd = options.config.limits.budget_usd_default;
    if let Ok(catalog) = drover_core::money::Catalog::from_config(&options.config) {
        app_options.models = drover_tui::views::form::ModelOption::of_catalog(&catalog);
    }
    app_options.owner = mode;
    app_options.answer_guard_ms = options.config.dashboard.answer_guard_ms;
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
            let started = start_background(paths).await?;
            dispatch_all(&link, initial).await;
            let outcome =
                drover_tui::run_on_terminal(link, std::future::pending(), app_options).await;
            if outcome.is_ok() {
                note(&format!(
                    "drover goes on in the background (pid {}): `drover` opens the dashboard \
                     again, `drover shutdown` ends it",
                    started.pid
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
                    "drover: stopping {active} active run{} (recorded as interrupted by shutdown)…",
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
    match link
        .request(Request::Runs {
            state: None,
            include_removed: false,
            workflow: None,
            // Every active run, no finished one.
            limit: Some(0),
            before: None,
            search: None,
        })
        .await
    {
        Ok(drover_core::dispatch::Response::Runs(runs)) => {
            runs.iter().filter(|r| r.head.state.is_active()).count()
        }
        _ => 0,
    }
}
