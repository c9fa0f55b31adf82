//! Retention: keeps the newest N finished runs and deletes the rest, with their events,
//! turns, usage and decisions — from a thread of its own, in small batches sent to the
//! writer, so deleting never sits on the write path of a live run.

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{LedgerError, LedgerReader, LedgerWriter, WriteOp};

/// Runs deleted per write batch.
const CHUNK: usize = 50;

pub(super) struct Retention {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Retention {
    pub(super) fn start(
        path: PathBuf,
        writer: LedgerWriter,
        keep: u32,
        interval: Duration,
    ) -> Result<Retention, LedgerError> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ledger-retention".into())
            .spawn(move || {
                loop {
                    if let Err(e) = prune(&path, &writer, keep) {
                        tracing::warn!(error = %e, "ledger: retention pass failed");
                    }
                    match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
            })?;
        Ok(Retention { stop, thread })
    }

    pub(super) fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// One retention pass: deletes finished runs beyond the newest `keep`. Returns how many
/// were sent for deletion.
pub(super) fn prune(
    path: &std::path::Path,
    writer: &LedgerWriter,
    keep: u32,
) -> Result<usize, LedgerError> {
    let reader = LedgerReader::open(path)?;
    let doomed = reader.finished_beyond(keep)?;
    for chunk in doomed.chunks(CHUNK) {
        writer.send(WriteOp::DeleteRuns(chunk.to_vec()))?;
    }
    Ok(doomed.len())
}
