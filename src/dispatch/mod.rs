//! The dispatcher: one tokio task that owns every run (DESIGN.md §2, §3).
//!
//! Clients (the dashboard, the control socket) hold a [`DispatcherHandle`]: they send
//! [`Request`]s and subscribe to [`DispatchEvent`]s. Nothing else mutates run state.

mod actor;
pub mod api;
mod broker;
mod lifecycle;
mod money;
mod prompts;
mod provider_events;
mod publish;
pub mod rails;
mod requests;
mod resume;
mod routes;
mod run;
mod transcript;
mod waits;

pub use actor::Clock;

pub use api::{DispatchEvent, Request};

use serde_json::Value;
use std::path::PathBuf;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::DroverError;
use crate::config::Config;
use crate::paths::Paths;

/// What the dispatcher needs to start.
#[derive(Debug, Clone)]
pub struct DispatcherOptions {
    pub paths: Paths,
    pub config: Config,
    /// This drover executable (the `sim` provider runs `<self_exe> sim-agent`).
    pub self_exe: PathBuf,
}

pub(crate) type Reply = oneshot::Sender<Result<Value, DroverError>>;

pub(crate) enum Envelope {
    Request(Request, Reply),
    /// Stop every active run (recorded as interrupted by shutdown), then end the actor.
    Shutdown(oneshot::Sender<()>),
}

/// A client's handle on the dispatcher. Cheap to clone.
#[derive(Clone)]
pub struct DispatcherHandle {
    tx: mpsc::Sender<Envelope>,
    events: broadcast::Sender<DispatchEvent>,
}

impl DispatcherHandle {
    /// Sends one request and waits for its answer (the JSON form of the API's view types).
    pub async fn request(&self, request: Request) -> Result<Value, DroverError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Envelope::Request(request, reply))
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Events published after the ledger acknowledged them.
    pub fn subscribe(&self) -> broadcast::Receiver<DispatchEvent> {
        self.events.subscribe()
    }

    /// Stops every active run (recorded as interrupted by shutdown) and ends the actor.
    pub async fn shutdown(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Envelope::Shutdown(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

fn stopped() -> DroverError {
    DroverError::new(
        crate::ErrorCode::Internal,
        "the dispatcher has stopped; restart drover",
    )
}

/// Opens the ledger (recovering runs left active) and starts the dispatcher task.
/// The returned join handle ends after [`DispatcherHandle::shutdown`].
pub async fn start(
    options: DispatcherOptions,
) -> Result<(DispatcherHandle, tokio::task::JoinHandle<()>), DroverError> {
    actor::start(options).await
}
