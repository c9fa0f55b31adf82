//! `drover` with no subcommand: the dashboard. It becomes the owner of the data
//! directory exactly as `drover serve` does (owner lock, dispatcher, control socket), so
//! headless commands in other terminals act on the same runs.
//!
//! What must stay true: the terminal is given back before anything is printed; leaving
//! the dashboard shuts the dispatcher down, which stops every active run (recorded as
//! interrupted by shutdown), then closes the socket and releases the lock.

use super::headless::{dispatcher_options, note, runtime};
use crate::control::Host;
use crate::dispatch::{DispatcherHandle, Request};
use crate::error::DroverError;
use crate::paths::Paths;
use crate::spec::SpecInput;
use crate::tui::AppOptions;

pub fn run(paths: &Paths) -> Result<(), DroverError> {
    runtime()?.block_on(open(paths, Vec::new(), "claude-code"))
}

/// Owns `paths`, dispatches `initial` (in order, before the dashboard opens), then runs
/// the dashboard until the user quits.
pub(crate) async fn open(
    paths: &Paths,
    initial: Vec<SpecInput>,
    default_provider: &str,
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
    app_options.keys = crate::tui::keys::KeyTable::defaults()
        .with_overrides(&options.config.keys)
        .map_err(|why| {
            DroverError::new(
                crate::ErrorCode::ConfigInvalid,
                format!("{}: {why}", options.paths.config_file.display()),
            )
        })?;
    let mut host = Host::start(options).await?;
    let handle = host.handle().clone();
    dispatch_all(&handle, initial).await;
    let outcome =
        crate::tui::run_on_terminal(handle.clone(), host.dispatcher_ended(), app_options).await;
    let active = count_active(&handle).await;
    if active > 0 {
        note(&format!(
            "drover: stopping {active} active run{} (recorded as interrupted by shutdown)…",
            crate::spec::text::plural(active)
        ));
    }
    host.shutdown().await;
    outcome
}

async fn dispatch_all(handle: &DispatcherHandle, specs: Vec<SpecInput>) {
    for spec in specs {
        let title = spec.title.clone().unwrap_or_default();
        if let Err(e) = handle
            .request(Request::Dispatch {
                spec: Box::new(spec),
            })
            .await
        {
            tracing::warn!(%title, code = %e.code, "demo dispatch refused: {}", e.message);
        }
    }
}

async fn count_active(handle: &DispatcherHandle) -> usize {
    match handle
        .request(Request::Runs {
            state: None,
            include_removed: false,
        })
        .await
    {
        Ok(crate::dispatch::Response::Runs(runs)) => {
            runs.iter().filter(|r| r.head.state.is_active()).count()
        }
        _ => 0,
    }
}
