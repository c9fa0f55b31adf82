//! The owner's event feed: the dispatcher's events numbered in the order it published
//! them, the last [`REPLAY`] kept, so a client that loses its connection comes back at
//! the event after the last one it saw — or is told to take a fresh snapshot.
//!
//! A position is `(epoch, pos)`: the epoch names this owner (a restarted owner has a new
//! one, and its positions mean nothing to the old). What must stay true: a subscriber
//! gets every event after its position exactly once, in order, or is told it must resync
//! (`resumed: false`); a replay and the live events that follow it never overlap or leave
//! a gap (both are taken under one lock); memory stays bounded ([`REPLAY`] events).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use crate::dispatch::Published;
use crate::dispatch::api::StreamPosition;

/// How many recent events a reconnecting client can be brought up to date with.
pub const REPLAY: usize = 4096;
/// How many numbered events wait for a slow connection before it is told it lagged.
const LIVE: usize = 4096;

/// One numbered event (the copy the dispatcher published, shared).
pub type Numbered = (u64, Published);

/// What live subscribers hear.
#[derive(Debug, Clone)]
pub enum Live {
    /// Shared: every live subscriber gets the same copy.
    Event(u64, Published),
    /// The feed itself fell behind the dispatcher: this many events were lost.
    Lost(u64),
}

#[derive(Clone)]
pub struct Feed {
    epoch: String,
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    ring: VecDeque<Numbered>,
    /// The position the next event gets.
    next: u64,
    /// Events before this were lost (the feed itself lagged): nobody resumes across them.
    lost_before: u64,
    tx: broadcast::Sender<Live>,
}

/// A new subscription: where the feed stands, whether the client's own position could be
/// resumed, the events it missed, and the live ones from here on.
pub struct Subscription {
    pub position: StreamPosition,
    pub resumed: bool,
    pub replay: Vec<Numbered>,
    pub live: broadcast::Receiver<Live>,
}

impl Feed {
    /// Numbers `events` (the dispatcher's broadcast) until it closes. `epoch` names this
    /// owner.
    pub fn start(epoch: String, mut events: broadcast::Receiver<Published>) -> Feed {
        let (tx, _) = broadcast::channel(LIVE);
        let feed = Feed {
            epoch,
            inner: Arc::new(Mutex::new(Inner {
                ring: VecDeque::with_capacity(REPLAY),
                next: 1,
                lost_before: 1,
                tx,
            })),
        };
        let inner = feed.inner.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => lock(&inner).push(event),
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "control: the event feed fell behind");
                        let mut inner = lock(&inner);
                        inner.next += missed;
                        inner.lost_before = inner.next;
                        let _ = inner.tx.send(Live::Lost(missed));
                    }
                    // Dropping the sender ends every live subscription.
                    Err(RecvError::Closed) => {
                        let (closed, _) = broadcast::channel(1);
                        lock(&inner).tx = closed;
                        return;
                    }
                }
            }
        });
        feed
    }

    /// Subscribes after `after` (a position this client saw), or from now.
    pub fn subscribe(&self, after: Option<&StreamPosition>) -> Subscription {
        let inner = lock(&self.inner);
        let current = inner.next - 1;
        let live = inner.tx.subscribe();
        let position = StreamPosition {
            epoch: self.epoch.clone(),
            pos: current,
        };
        let Some(after) = after.filter(|a| a.epoch == self.epoch) else {
            return Subscription {
                position,
                resumed: false,
                replay: Vec::new(),
                live,
            };
        };
        let oldest_kept = inner.ring.front().map_or(inner.next, |(pos, _)| *pos);
        let resumable = after.pos <= current
            && after.pos + 1 >= oldest_kept
            && after.pos + 1 >= inner.lost_before;
        let replay = if resumable {
            inner
                .ring
                .iter()
                .filter(|(pos, _)| *pos > after.pos)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        Subscription {
            position,
            resumed: resumable,
            replay,
            live,
        }
    }
}

impl Inner {
    fn push(&mut self, event: Published) {
        let pos = self.next;
        self.next += 1;
        if self.ring.len() == REPLAY {
            self.ring.pop_front();
        }
        // The ring and the live subscribers share the dispatcher's one copy.
        self.ring.push_back((pos, event.clone()));
        // No live subscriber is not an error.
        let _ = self.tx.send(Live::Event(pos, event));
    }
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    // A panic while holding the lock leaves the ring as it was: still usable.
    inner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::DispatchEvent;

    fn note(n: u64) -> DispatchEvent {
        DispatchEvent::RunRemoved {
            run_id: format!("r{n}"),
        }
    }

    async fn fed(count: u64) -> (broadcast::Sender<Published>, Feed) {
        let (tx, rx) = broadcast::channel(16);
        let feed = Feed::start("e1".into(), rx);
        for n in 1..=count {
            tx.send(Arc::new(note(n))).unwrap();
        }
        // Let the feed task number them.
        for _ in 0..100 {
            if lock(&feed.inner).next == count + 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        (tx, feed)
    }

    fn at(epoch: &str, pos: u64) -> StreamPosition {
        StreamPosition {
            epoch: epoch.into(),
            pos,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_client_resumes_after_its_position_or_is_told_to_resync() {
        let (_tx, feed) = fed(5).await;
        let fresh = feed.subscribe(None);
        assert_eq!(fresh.position, at("e1", 5));
        assert!(!fresh.resumed && fresh.replay.is_empty());
        let back = feed.subscribe(Some(&at("e1", 3)));
        assert!(back.resumed);
        assert_eq!(
            back.replay.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            [4, 5]
        );
        let current = feed.subscribe(Some(&at("e1", 5)));
        assert!(current.resumed && current.replay.is_empty());
        // Another owner's position, or one from the future, is not resumed.
        assert!(!feed.subscribe(Some(&at("e0", 3))).resumed);
        assert!(!feed.subscribe(Some(&at("e1", 9))).resumed);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn live_events_follow_the_replay_without_a_gap_or_an_overlap() {
        let (tx, feed) = fed(3).await;
        let mut sub = feed.subscribe(Some(&at("e1", 1)));
        tx.send(Arc::new(note(4))).unwrap();
        let mut seen: Vec<u64> = sub.replay.iter().map(|(p, _)| *p).collect();
        match sub.live.recv().await.unwrap() {
            Live::Event(pos, _) => seen.push(pos),
            Live::Lost(n) => panic!("lost {n}"),
        }
        assert_eq!(seen, [2, 3, 4]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn only_the_last_events_are_kept() {
        let (tx, feed) = fed(0).await;
        for n in 1..=(REPLAY as u64 + 10) {
            tx.send(Arc::new(note(n))).unwrap();
            if n % 8 == 0 {
                tokio::task::yield_now().await;
            }
        }
        for _ in 0..1000 {
            if lock(&feed.inner).next == REPLAY as u64 + 11 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(lock(&feed.inner).ring.len(), REPLAY);
        assert!(
            !feed.subscribe(Some(&at("e1", 5))).resumed,
            "fell out of the ring"
        );
        assert!(feed.subscribe(Some(&at("e1", 20))).resumed);
    }
}
