//! The dispatcher: the one owner of every run (docs/ARCHITECTURE.md §"Layers", §"Run lifecycle").
//!
//! Clients (the dashboard, the control socket, the headless CLI's own owner) hold a
//! [`DispatcherHandle`]: they send [`Request`]s, get typed [`api::Response`]s, and
//! subscribe to [`DispatchEvent`]s. Nothing else mutates run state.
//!
//! The shape, and where to look:
//! - [`core`]: the state and every lifecycle rule as plain code — an input and the time
//!   in, effects out (its module doc has a table of which file holds which rule);
//! - `driver`: the tokio task that feeds the core and carries out its effects (the clock,
//!   the channels, the adapters, the config file);
//! - `publish`: commit-then-publish, and the thread that answers ledger reads;
//! - [`api`]: the requests, responses, views and events every client speaks;
//! - [`reads`]: what the core asks of the ledger and what comes back (plain data);
//! - [`projections`]: the ledger-to-view projections (runs not in memory, and the offline
//!   CLI);
//! - [`run_view`]: the one builder of a run's views, for both the core and the projections;
//! - [`notify`]: the owner's notifications when a run starts needing you.

pub mod api;
pub mod core;
mod driver;
pub mod notify;
pub mod projections;
mod publish;
pub mod reads;
pub mod run_view;

pub use api::{DispatchEvent, Request, Response};

/// A published event as its subscribers hear it: one copy shared by all of them, so each
/// slot of the broadcast holds a pointer rather than an event (docs/ARCHITECTURE.md
/// §"Memory").
pub type Published = std::sync::Arc<DispatchEvent>;
pub use driver::Clock;

use std::path::PathBuf;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::DroverError;
use crate::config::Config;
use crate::paths::Paths;

/// What the dispatcher needs to start.
#[derive(Debug, Clone)]
pub struct DispatcherOptions {
    /// Where the ledger, the socket and the logs are.
    pub paths: Paths,
    /// The configuration to start with (the file is read again when it changes).
    pub config: Config,
    /// This drover executable (the `sim` provider runs `<self_exe> sim-agent`).
    pub self_exe: PathBuf,
    /// Whether an owner ([`crate::control::Host`]) starts its warden, `<self_exe>
    /// warden` ([`crate::control::warden`]): true wherever `self_exe` is drover.
    pub warden: bool,
    /// A gate every ledger commit passes ([`crate::ledger::Gate`]), for tests that hold or
    /// fail commits; `None` in drover itself.
    pub ledger_gate: Option<crate::ledger::Gate>,
}

pub(crate) type Reply = oneshot::Sender<Result<Response, DroverError>>;

pub(crate) enum Envelope {
    Request(Request, Reply),
    /// Shut every run's CLI down (a run in a turn is recorded as interrupted, the others
    /// left for the next owner), then end the actor.
    Shutdown(oneshot::Sender<()>),
}

/// A client's handle on the dispatcher. Cheap to clone.
#[derive(Clone)]
pub struct DispatcherHandle {
    tx: mpsc::Sender<Envelope>,
    events: broadcast::Sender<Published>,
    focus: notify::Focus,
}

impl DispatcherHandle {
    /// Sends one request and waits for its typed answer.
    pub async fn request(&self, request: Request) -> Result<Response, DroverError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Envelope::Request(request, reply))
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Events published after the ledger acknowledged them.
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.events.subscribe()
    }

    /// Whether an attached dashboard is focused: the control server keeps it per
    /// connection, the notifier reads it.
    pub fn focus(&self) -> &notify::Focus {
        &self.focus
    }

    /// Shuts every run's CLI down (a run in a turn is recorded as interrupted, the others
    /// are left for the next owner: docs/ARCHITECTURE.md §"A restart") and ends the actor.
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
    driver::start(options).await
}
