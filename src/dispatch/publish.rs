//! Commit-then-publish: events and replies wait for the ledger's ack of the writes that
//! carry them, in the order they were produced.
//!
//! What must stay true: a subscriber never sees a change that is not on disk, and sees
//! changes in the order the dispatcher made them (acks complete in commit order, and this
//! task awaits them one after another).

use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use super::Reply;
use super::api::DispatchEvent;
use crate::ledger::Ack;
use crate::{DroverError, ErrorCode};

pub struct Publication {
    pub ack: Ack,
    pub events: Vec<DispatchEvent>,
    pub replies: Vec<(Reply, Result<Value, DroverError>)>,
}

pub fn spawn(
    mut queue: mpsc::UnboundedReceiver<Publication>,
    events: broadcast::Sender<DispatchEvent>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(p) = queue.recv().await {
            match p.ack.await {
                Ok(Ok(())) => {
                    for e in p.events {
                        let _ = events.send(e);
                    }
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
        }
    })
}
