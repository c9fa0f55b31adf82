//! `drover serve`: own the data directory with no dashboard, so headless commands in
//! other terminals (and dashboards) have a dispatcher to talk to. `--detach` starts it in
//! the background (see [`super::owner`]).
//!
//! What must stay true: an owner nobody can reach any more (its socket file, or its whole
//! data directory, was deleted) stops by itself instead of running on forever; one line
//! says where it listens (stderr, or a JSON line on stdout
//! with `--json`); SIGINT or SIGTERM shuts down cleanly — every run's CLI is stopped, a
//! run in a turn recorded as interrupted and the others left for the next owner, the
//! socket file is removed, the lock released — and the exit code is 0.

use clap::Args;
use serde_json::json;

use super::headless::{StopSignals, dispatcher_options, runtime};
use super::output::{note, print_json};
use drover_core::control::Host;
use drover_core::error::DroverError;
use drover_core::paths::Paths;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Print {"socket": …, "pid": …} on stdout once listening.
    #[arg(long)]
    pub json: bool,
    /// Run in the background (its own session, output to logs/owner.log); return once it
    /// answers, printing its pid. An owner already running is kept.
    #[arg(long)]
    pub detach: bool,
}

pub fn run(args: ServeArgs, paths: &Paths) -> Result<(), DroverError> {
    if args.detach {
        return super::owner::detach(args.json, paths);
    }
    runtime()?.block_on(serve(args, paths))
}

async fn serve(args: ServeArgs, paths: &Paths) -> Result<(), DroverError> {
    let mut signals = StopSignals::install()?;
    let mut host = Host::start(dispatcher_options(paths)?).await?;
    let pid = std::process::id();
    if args.json {
        print_json(&json!({"socket": host.socket_path(), "pid": pid}))?;
    } else {
        note(&format!(
            "drover serve: listening on {} (pid {pid}); Ctrl-C stops it and every active run",
            host.socket_path().display()
        ));
    }
    // Up: the code that opened the ledger and started the owner is not run again; nor,
    // after a while, what a burst of runs ran.
    let let_go = tokio::spawn(async {
        let mut every = tokio::time::interval(drover_core::resident::EVERY);
        loop {
            every.tick().await;
            drover_core::resident::let_go();
        }
    });
    let socket = host.socket_path().to_path_buf();
    let outcome = tokio::select! {
        signal = signals.recv() => {
            tracing::info!(signal, "serve: stopping");
            Ok(())
        }
        e = host.dispatcher_ended() => Err(e),
        () = socket_gone(&socket) => {
            tracing::warn!(socket = %socket.display(), "serve: the control socket (or the data directory) is gone; stopping");
            Ok(())
        }
    };
    let_go.abort();
    host.shutdown().await;
    outcome
}

/// Completes once the socket file is gone (checked every few seconds).
async fn socket_gone(socket: &std::path::Path) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
    loop {
        every.tick().await;
        if !socket.exists() {
            return;
        }
    }
}
