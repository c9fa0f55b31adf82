//! Sending a run's events to the dispatcher, for every adapter's task.
//!
//! What must stay true: once the receiver is gone nothing more is sent (and the adapter
//! can see it, to end its child).

use crate::providers::{ProviderEvent, ProviderEventSink, RunProviderEvent};

/// A run's event sender.
pub struct EventSink {
    run_id: std::sync::Arc<str>,
    sink: ProviderEventSink,
    open: bool,
}

impl EventSink {
    /// A sender of run `run_id`'s events into `sink`.
    pub fn new(run_id: String, sink: ProviderEventSink) -> EventSink {
        EventSink {
            run_id: run_id.into(),
            sink,
            open: true,
        }
    }

    /// The run the events are tagged with.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Whether the dispatcher still listens.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Sends `event`, waiting while the channel is full; drops it once the receiver is
    /// gone (and stays closed from then on).
    pub async fn send(&mut self, event: ProviderEvent) {
        if !self.open {
            return;
        }
        let event = RunProviderEvent {
            run_id: self.run_id.clone(),
            event,
        };
        if self.sink.send(event).await.is_err() {
            tracing::debug!(run_id = %self.run_id, "the event receiver is gone");
            self.open = false;
        }
    }

    /// Sends `events`, in order.
    pub async fn send_all(&mut self, events: Vec<ProviderEvent>) {
        for event in events {
            self.send(event).await;
        }
    }
}
