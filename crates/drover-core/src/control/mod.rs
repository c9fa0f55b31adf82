//! The control socket: how headless commands in other terminals reach the process that
//! owns the dispatcher (docs/ARCHITECTURE.md §"Layers", §"Owner and clients").
//!
//! The owner (the dashboard, `drover serve`, or a `drover dispatch` run in the
//! foreground) holds an exclusive lock on the data directory ([`OwnerLock`]) and listens
//! on a Unix socket there ([`serve`]); every other drover process is a client
//! ([`ControlClient`]). The wire format is JSON lines (see [`wire`]). When nobody owns
//! the directory, read-only commands build the same views from the ledger ([`offline`]).
//!
//! What must stay true:
//! - the socket file is mode 0600 and a peer of another uid is refused, so only the user
//!   can drive their runs;
//! - the server speaks only the dispatcher API ([`Dispatcher`]): a client can ask nothing
//!   the dashboard could not; this is where typed answers become JSON and back;
//! - a bad line (not JSON, too long, unknown method) is answered with `INVALID_REQUEST`
//!   and the connection goes on; nothing a client sends can stop the server;
//! - the socket file exists only while an owner serves it (removed on a clean stop, and
//!   as stale by the next owner after a crash).

pub mod background;
pub mod bounds;
mod client;
mod feed;
mod host;
pub mod offline;
mod owner;
mod server;
pub mod warden;
pub mod wire;

#[cfg(test)]
mod tests;

pub use client::{ControlClient, EventStream, StreamItem, request_timeout};
pub use host::Host;
pub use owner::{OwnerLock, last_owner_gone, process_alive};
pub use server::{ControlServer, serve};

use serde_json::Value;
use std::future::Future;
use tokio::sync::broadcast;

use crate::dispatch::{DispatcherHandle, Published, Request};
use crate::error::{DroverError, ErrorCode};
use crate::paths::Paths;

/// What the control server needs from the dispatcher: requests answered as the JSON the
/// socket carries, and the event stream. [`DispatcherHandle`] is the one real
/// implementation (its typed answers become JSON here, at the socket boundary); tests use
/// a fake.
pub trait Dispatcher: Clone + Send + Sync + 'static {
    /// Carries out `request` and answers with its result as the JSON the socket sends.
    fn request(&self, request: Request) -> impl Future<Output = Result<Value, DroverError>> + Send;
    /// A receiver of every event the dispatcher publishes from now on.
    fn subscribe(&self) -> broadcast::Receiver<Published>;
    /// Where the connections' focus is kept (`Request::Focus`); `None`: nowhere.
    fn focus(&self) -> Option<crate::dispatch::notify::Focus> {
        None
    }
}

impl Dispatcher for DispatcherHandle {
    fn request(&self, request: Request) -> impl Future<Output = Result<Value, DroverError>> + Send {
        let handle = self.clone();
        async move { handle.request(request).await.map(|r| r.to_json()) }
    }

    fn subscribe(&self) -> broadcast::Receiver<Published> {
        DispatcherHandle::subscribe(self)
    }

    fn focus(&self) -> Option<crate::dispatch::notify::Focus> {
        Some(DispatcherHandle::focus(self).clone())
    }
}

/// The refusal for a command that changes runs when no process owns the data directory.
pub fn no_owner(paths: &Paths) -> DroverError {
    DroverError::new(
        ErrorCode::NoOwner,
        format!(
            "no drover owns {}; start `drover serve` (or the dashboard) first",
            paths.data_dir.display()
        ),
    )
}
