//! Becoming the owner of a data directory: the lock, then the dispatcher, then the socket.
//!
//! The order is what must stay true: the lock first, so a second process never opens the
//! ledger (and runs recovery) under a live owner; the socket last, so nobody reaches a
//! dispatcher that is not up. Shutting down reverses it: the dispatcher shuts every run's CLI
//! down (a run in a turn is recorded as interrupted; the others are left for the next
//! owner, docs/ARCHITECTURE.md §"A restart") while subscribers still hear about it, then
//! the socket closes and the lock is released. An owner started with a warden
//! ([`super::warden`]) starts it once the dispatcher is up (the ledger open, a crash's
//! leftovers recovered) and lets it go last.

use std::path::Path;
use tokio::task::JoinHandle;

use super::owner::OwnerLock;
use super::server::{ControlServer, serve};
use super::warden::Warden;
use crate::dispatch::{self, DispatcherHandle, DispatcherOptions};
use crate::error::{DroverError, ErrorCode};

/// A running dispatcher owned by this process, reachable on the control socket.
pub struct Host {
    handle: DispatcherHandle,
    dispatcher: Option<JoinHandle<()>>,
    server: ControlServer,
    warden: Option<Warden>,
}

impl Host {
    /// Takes the owner lock (`OWNER_RUNNING` when another process holds it), starts the
    /// dispatcher and listens on the control socket. Must be called inside a tokio
    /// runtime.
    pub async fn start(options: DispatcherOptions) -> Result<Host, DroverError> {
        let owner = OwnerLock::acquire(&options.paths)?;
        let paths = options.paths.clone();
        let warden = options
            .warden
            .then(|| (options.self_exe.clone(), paths.ledger_file.clone()));
        let (handle, dispatcher) = dispatch::start(options).await?;
        match serve(handle.clone(), owner, &paths) {
            Ok(server) => Ok(Host {
                handle,
                dispatcher: Some(dispatcher),
                server,
                warden: warden.and_then(|(exe, ledger)| Warden::start(&exe, &ledger)),
            }),
            Err(e) => {
                handle.shutdown().await;
                let _ = dispatcher.await;
                Err(e)
            }
        }
    }

    /// The dispatcher, for this process's own requests.
    pub fn handle(&self) -> &DispatcherHandle {
        &self.handle
    }

    /// The control socket this process serves.
    pub fn socket_path(&self) -> &Path {
        self.server.socket_path()
    }

    /// Completes if the dispatcher task ends before [`Host::shutdown`] asked it to (it
    /// panicked or gave up): the error says so. Cancel-safe.
    pub async fn dispatcher_ended(&mut self) -> DroverError {
        let outcome = match self.dispatcher.as_mut() {
            Some(task) => task.await,
            None => std::future::pending().await,
        };
        self.dispatcher = None;
        let how = match outcome {
            Err(e) if e.is_panic() => "it panicked",
            _ => "it stopped on its own",
        };
        DroverError::new(
            ErrorCode::Internal,
            format!("the dispatcher ended unexpectedly ({how}); see the log, then restart drover"),
        )
    }

    /// Stops every active run, ends the dispatcher, closes the socket (removing its file),
    /// releases the lock and lets the warden go.
    pub async fn shutdown(mut self) {
        self.handle.shutdown().await;
        if let Some(task) = self.dispatcher.take()
            && let Err(e) = task.await
            && e.is_panic()
        {
            tracing::error!("the dispatcher task panicked while shutting down");
        }
        self.server.stop().await;
        if let Some(warden) = self.warden.take() {
            let _ = tokio::task::spawn_blocking(move || warden.stop()).await;
        }
    }
}
