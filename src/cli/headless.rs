//! What the headless run commands share: their tokio runtime, the dispatcher options of
//! an owner process, stop signals, and asking the owner (or the ledger, when nobody owns
//! the data directory; or an owner still coming up).

use tokio::signal::unix::{Signal, SignalKind, signal};

use drover_core::config::Config;
use drover_core::control::{ControlClient, offline};
use drover_core::dispatch::{DispatcherOptions, Request, Response};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::paths::Paths;

/// The most worker threads a runtime gets, however many cores the machine has: drover's
/// tasks wait on pipes, sockets and the ledger's threads, and each worker costs a stack and
/// a malloc arena (docs/ARCHITECTURE.md §"Memory").
const WORKERS_MAX: usize = 2;

/// The runtime a headless command (and the dashboard, and the owner) runs on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, DroverError> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(WORKERS_MAX));
    build(tokio::runtime::Builder::new_multi_thread().worker_threads(workers))
}

/// The runtime of a command that only asks an owner (or reads the ledger when none
/// runs) and never becomes one: one thread, so the command starts no worker threads and
/// waits for none at its exit (0.4–0.9 ms of each such command). A command that may own
/// the data directory runs on [`runtime`].
pub(crate) fn client_runtime() -> Result<tokio::runtime::Runtime, DroverError> {
    build(&mut tokio::runtime::Builder::new_current_thread())
}

fn build(builder: &mut tokio::runtime::Builder) -> Result<tokio::runtime::Runtime, DroverError> {
    builder.enable_all().build().map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot start the async runtime: {e}; check the process limits"),
        )
    })
}

/// What this process needs to own the dispatcher: the config in force and its own path.
pub(crate) fn dispatcher_options(paths: &Paths) -> Result<DispatcherOptions, DroverError> {
    let config = Config::load(&paths.config_file)?;
    let self_exe = std::env::current_exe().map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot find the drover executable: {e}; run drover by its full path"),
        )
    })?;
    Ok(DispatcherOptions {
        paths: paths.clone(),
        config,
        self_exe,
        warden: true,
        ledger_gate: None,
    })
}

/// SIGINT and SIGTERM, the signals that stop an owner process.
pub(crate) struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignals {
    /// Must be called inside the runtime. From now on these signals no longer kill the
    /// process: [`StopSignals::recv`] reports them.
    pub(crate) fn install() -> Result<StopSignals, DroverError> {
        let install = |kind| {
            signal(kind).map_err(|e| {
                DroverError::new(
                    ErrorCode::Internal,
                    format!("cannot listen for signals: {e}"),
                )
            })
        };
        Ok(StopSignals {
            interrupt: install(SignalKind::interrupt())?,
            terminate: install(SignalKind::terminate())?,
        })
    }

    /// The name of the next stop signal.
    pub(crate) async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }
}

/// Sends `request` to the owner of the data directory; with no owner, answers a `diff`
/// from the ledger and git, and makes this process the owner for anything else (a
/// `merge`, `keep` or `discard`) for as long as the request takes.
pub(crate) async fn ask_or_own(paths: &Paths, request: Request) -> Result<Response, DroverError> {
    if let Some(mut client) = ControlClient::connect(paths).await? {
        return client.request(request).await;
    }
    if let Request::Diff { run_id, file, stat } = &request {
        return offline::diff(paths, run_id, file.as_deref(), *stat).await;
    }
    match drover_core::control::Host::start(dispatcher_options(paths)?).await {
        Ok(host) => {
            let answer = host.handle().request(request).await;
            host.shutdown().await;
            answer
        }
        Err(e) if e.code == ErrorCode::OwnerRunning => {
            // Another drover took the directory between our look and our lock: use it.
            let mut client = owner_coming_up(paths).await?.ok_or(e)?;
            client.request(request).await
        }
        Err(e) => Err(e),
    }
}

/// Sends `request` to the owner of the data directory; with no owner, answers it from
/// the ledger when it only reads (`NO_OWNER` otherwise).
pub(crate) async fn ask(paths: &Paths, request: Request) -> Result<Response, DroverError> {
    match ControlClient::connect(paths).await? {
        Some(mut client) => client.request(request).await,
        None => offline::answer(paths, &request),
    }
}

/// A client of an owner that holds the lock but may not listen yet (it is starting).
pub(crate) async fn owner_coming_up(paths: &Paths) -> Result<Option<ControlClient>, DroverError> {
    for _ in 0..50 {
        if let Some(client) = ControlClient::connect(paths).await? {
            return Ok(Some(client));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(None)
}
