//! Commit-then-publish: events wait for the commit of the writes queued before them;
//! replies and ledger reads wait for those writes to be synced to disk as well; each in
//! the order they were produced; the reads then run on a thread of their own.
//!
//! What must stay true: a subscriber never sees a change that is not committed (every
//! reader of the ledger sees it, a crash of drover keeps it), and sees changes in the
//! order the dispatcher made them (commits complete in order, and one task awaits them
//! one after another); nothing is acknowledged — a reply, a read's answer — before the
//! writes before it are synced (a crash of the machine keeps them; a second task awaits
//! the syncs in the same order, so a sync never holds back the next turn's events:
//! docs/ARCHITECTURE.md §"Commit, then publish"); a read sees every write the dispatcher
//! made before asking for it — but while the ledger cannot write, a turn that wrote nothing
//! (no ack) has its replies and answers sent at once, from memory or from what is on disk,
//! not behind writes that wait for the disk
//! (docs/ARCHITECTURE.md §"When the disk cannot write"); no SQLite call runs on a runtime
//! thread.

use std::path::PathBuf;
use tokio::sync::{broadcast, mpsc};

use super::Reply;
use super::api::{DispatchEvent, Response};
use super::core::{Fetch, Input, Query, Then};
use super::projections;
use crate::ledger::{Ack, LedgerReader, Staged};
use crate::{DroverError, ErrorCode};

/// What one turn of the dispatcher's loop sends after its commit.
pub struct Publication {
    /// The commit (and sync) to wait for; `None`: the turn wrote nothing while the ledger
    /// cannot write, and its replies and answers go at once.
    pub ack: Option<Staged>,
    pub events: Vec<DispatchEvent>,
    pub replies: Vec<(Reply, Result<Response, DroverError>)>,
    pub reads: Vec<ReadJob>,
}

/// A ledger read for the reader thread.
pub enum ReadJob {
    /// Answer a client.
    Answer { reply: Reply, query: Query },
    /// Hand the answer back to the dispatcher.
    Load { fetch: Fetch, then: Then },
}

pub fn spawn(
    mut queue: mpsc::UnboundedReceiver<Publication>,
    events: broadcast::Sender<super::Published>,
    reads: std::sync::mpsc::Sender<ReadJob>,
) -> tokio::task::JoinHandle<()> {
    let (ordered_tx, ordered) = mpsc::unbounded_channel();
    let in_order = spawn_in_order(ordered, events, reads.clone());
    tokio::spawn(async move {
        while let Some(mut p) = queue.recv().await {
            if p.ack.is_none() {
                for (reply, value) in p.replies.drain(..) {
                    let _ = reply.send(value);
                }
                let (answers, loads): (Vec<ReadJob>, Vec<ReadJob>) = p
                    .reads
                    .drain(..)
                    .partition(|job| matches!(job, ReadJob::Answer { .. }));
                for job in answers {
                    let _ = reads.send(job);
                }
                p.reads = loads;
                if p.events.is_empty() && p.reads.is_empty() {
                    continue;
                }
            }
            if ordered_tx.send(p).is_err() {
                break;
            }
        }
        drop(ordered_tx);
        let _ = in_order.await;
    })
}

/// What waits for the sync once the events are out.
struct Acknowledgement {
    durable: Option<Ack>,
    replies: Vec<(Reply, Result<Response, DroverError>)>,
    reads: Vec<ReadJob>,
}

/// Publishes each publication's events once its commit is done, one after another, and
/// hands its replies and reads to the task that sends them once the commit is synced.
fn spawn_in_order(
    mut queue: mpsc::UnboundedReceiver<Publication>,
    events: broadcast::Sender<super::Published>,
    reads: std::sync::mpsc::Sender<ReadJob>,
) -> tokio::task::JoinHandle<()> {
    let (synced_tx, synced) = mpsc::unbounded_channel();
    let acknowledge = spawn_acknowledge(synced, reads);
    tokio::spawn(async move {
        while let Some(p) = queue.recv().await {
            let durable = match p.ack {
                Some(Staged { committed, durable }) => {
                    // Not committed (closed unanswered): the durable ack says why.
                    if let Ok(Ok(())) = committed.await {
                        publish(&events, p.events);
                    }
                    Some(durable)
                }
                None => {
                    publish(&events, p.events);
                    None
                }
            };
            let next = Acknowledgement {
                durable,
                replies: p.replies,
                reads: p.reads,
            };
            if synced_tx.send(next).is_err() {
                break;
            }
        }
        drop(synced_tx);
        let _ = acknowledge.await;
    })
}

fn publish(to: &broadcast::Sender<super::Published>, events: Vec<DispatchEvent>) {
    for e in events {
        let _ = to.send(std::sync::Arc::new(e));
    }
}

/// Sends each turn's replies once its writes are synced (or the failure that stopped
/// them), one turn after another, then hands its reads to the reader thread.
fn spawn_acknowledge(
    mut queue: mpsc::UnboundedReceiver<Acknowledgement>,
    reads: std::sync::mpsc::Sender<ReadJob>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(p) = queue.recv().await {
            let durable = match p.durable {
                Some(ack) => ack.await,
                None => Ok(Ok(())),
            };
            match durable {
                Ok(Ok(())) => {
                    for (reply, value) in p.replies {
                        let _ = reply.send(value);
                    }
                }
                failure => {
                    let why = match failure {
                        Ok(Err(e)) => e.to_string(),
                        _ => "the ledger writer stopped".to_string(),
                    };
                    tracing::error!(%why, "ledger write failed; the change is not published");
                    for (reply, _) in p.replies {
                        let _ = reply.send(Err(DroverError::new(
                            ErrorCode::LedgerError,
                            format!(
                                "the ledger did not record the change ({why}); check the disk \
                                 and the log, then try again"
                            ),
                        )));
                    }
                }
            }
            // Reads answer from what is on disk, whatever became of these writes.
            for job in p.reads {
                let _ = reads.send(job);
            }
        }
    })
}

/// Starts the thread that answers ledger reads, on a read-only connection of its own.
/// Answers to [`ReadJob::Load`] come back to the dispatcher on `loaded`.
pub fn spawn_reader(
    ledger_file: PathBuf,
    loaded: mpsc::UnboundedSender<Input>,
) -> Result<std::sync::mpsc::Sender<ReadJob>, DroverError> {
    let reader = LedgerReader::open(&ledger_file)?;
    let (tx, rx) = std::sync::mpsc::channel::<ReadJob>();
    std::thread::Builder::new()
        .name("ledger-reader".into())
        .spawn(move || {
            for job in rx {
                match job {
                    ReadJob::Answer { reply, query } => {
                        let _ = reply.send(projections::answer(&reader, query));
                    }
                    ReadJob::Load { fetch, then } => {
                        let answer = projections::fetch(&reader, fetch);
                        let _ = loaded.send(Input::Loaded { then, answer });
                    }
                }
            }
        })
        .map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!("cannot start the ledger reader thread: {e}"),
            )
        })?;
    Ok(tx)
}
