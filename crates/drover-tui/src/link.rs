//! The dashboard's connection to the owner of its data directory: requests and the event
//! stream over the control socket — exactly what a headless client has
//! (docs/ARCHITECTURE.md §"Layers").
//!
//! The event pump keeps one subscription up for as long as the dashboard runs. When the
//! owner goes away (it stopped, crashed, or the socket dropped) the app hears
//! [`AppEvent::OwnerGone`] once; the pump tries again every [`RECONNECT_EVERY`] and, when an
//! owner answers, subscribes after the last position it delivered: the same owner replays
//! what was missed (`OwnerBack { resumed: true }`), a new one (a restart) cannot, and the
//! app takes a fresh snapshot (`resumed: false`). What must stay true: no event is
//! delivered twice and none is lost without the app being told to resync; the pump never
//! blocks the app (it runs in its own task and only sends app events).

use std::time::Duration;
use tokio::task::JoinHandle;

use super::event::{AppEvent, AppEventSender};
use drover_core::control::{ControlClient, StreamItem};
use drover_core::dispatch::api::StreamPosition;
use drover_core::dispatch::{Request, Response};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::paths::Paths;

/// How often the pump looks for an owner while none answers.
pub const RECONNECT_EVERY: Duration = Duration::from_millis(300);

/// The owner of one data directory, as the dashboard reaches it.
#[derive(Debug, Clone)]
pub struct Link {
    paths: Paths,
}

impl Link {
    pub fn new(paths: Paths) -> Link {
        Link { paths }
    }

    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// One request, on a connection of its own (requests run side by side).
    pub async fn request(&self, request: Request) -> Result<Response, DroverError> {
        match ControlClient::connect(&self.paths).await? {
            Some(mut client) => client.request(request).await,
            None => Err(not_running(&self.paths)),
        }
    }

    /// Starts the event pump: dispatcher events, and the owner going and coming back, as
    /// app events. It ends when the app's channel closes (or when aborted). On the same
    /// connection it tells the owner whether the terminal is `focused` (again after each
    /// reconnect), so the owner posts no desktop notification while it is.
    pub fn spawn_events(
        &self,
        sender: AppEventSender,
        mut focused: tokio::sync::watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        let paths = self.paths.clone();
        tokio::spawn(async move {
            let mut after: Option<StreamPosition> = None;
            let mut told_gone = false;
            while !sender.is_closed() {
                match subscribe(&paths, after.clone()).await {
                    Ok((mut stream, resumed)) => {
                        told_gone = false;
                        sender.send(AppEvent::OwnerBack { resumed });
                        // A stream that cannot be written ends at its next read.
                        let now = *focused.borrow_and_update();
                        let _ = stream.focus(now).await;
                        let mut focus_open = true;
                        loop {
                            let item = tokio::select! {
                                item = stream.next() => item,
                                changed = focused.changed(), if focus_open => {
                                    // The terminal's side gone: the dashboard is leaving.
                                    focus_open = changed.is_ok();
                                    let now = focus_open && *focused.borrow_and_update();
                                    if stream.focus(now).await.is_err() {
                                        break;
                                    }
                                    continue;
                                }
                            };
                            after = stream.position().cloned().or(after);
                            match item {
                                Ok(Some(StreamItem::Event(event))) => {
                                    sender.send(AppEvent::Dispatch(event))
                                }
                                Ok(Some(StreamItem::Lagged(_))) => sender.send(AppEvent::Lagged),
                                Ok(None) | Err(_) => break,
                            }
                            if sender.is_closed() {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::debug!(code = %e.code, "dashboard: no owner yet: {}", e.message)
                    }
                }
                if !told_gone {
                    told_gone = true;
                    sender.send(AppEvent::OwnerGone);
                }
                tokio::time::sleep(RECONNECT_EVERY).await;
            }
        })
    }
}

async fn subscribe(
    paths: &Paths,
    after: Option<StreamPosition>,
) -> Result<(drover_core::control::EventStream, bool), DroverError> {
    let client = ControlClient::connect(paths)
        .await?
        .ok_or_else(|| not_running(paths))?;
    let (stream, ack) = client.subscribe_after(Vec::new(), after).await?;
    Ok((stream, ack.resumed))
}

fn not_running(paths: &Paths) -> DroverError {
    DroverError::new(
        ErrorCode::NoOwner,
        format!(
            "drover is not running for {}; the dashboard reconnects by itself once \
             `drover serve --detach` starts one",
            paths.data_dir.display()
        ),
    )
}
