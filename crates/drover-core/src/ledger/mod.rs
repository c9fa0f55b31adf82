//! The ledger: one SQLite file (WAL) holding runs, their ordered events, turns, usage
//! rows, decisions and budget sessions (docs/ARCHITECTURE.md §"Ledger").
//!
//! What must stay true:
//! - all writes go through the one writer thread ([`writer`]); reads use connections of
//!   their own ([`LedgerReader`]);
//! - a write that asked for an ack is on disk (committed, WAL) when the ack arrives, so
//!   what was shown is never lost;
//! - each run's events have contiguous seqs 1, 2, 3, … (enforced by the schema);
//! - opening the file ends what a dead owner's runs left running, and settles a run whose
//!   row no longer reads back (see [`recovery`]; the dispatcher puts the others back);
//! - retention prunes the events of old finished runs (and deletes runs only beyond an
//!   optional hard cap) in the background, never on the write path; each run's row,
//!   turns, usage and decisions stay (see [`retention`]).

pub mod disk;
mod reader;
pub mod records;
pub mod recovery;
pub mod retention;
mod schema;
pub mod search;
pub mod spend;
pub mod writer;

pub use reader::{LedgerReader, RunsPage, SessionTotals};
pub use records::{
    Basis, BudgetSessionRecord, DecisionRecord, EventRecord, RunPatch, RunRecord, TurnRecord,
    UsageRecord, kind,
};
pub use recovery::Recovery;
pub use retention::RetentionPolicy;
pub use schema::Synchronous;
pub use search::{SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX, SearchHit, SearchSource};
pub use spend::{SpendBy, SpendRow, SpendView};
pub use writer::{Ack, Gate, Health, LedgerWriter, Staged, WriteOp, WriterOptions};

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{DroverError, ErrorCode, UnixMillis};

/// Why a ledger operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// SQLite refused or failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A JSON column could not be read or written.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// The file was written by a newer drover: its schema version is past this one's.
    #[error("the ledger schema version {found} is newer than this drover knows ({known})")]
    TooNew {
        /// The file's schema version.
        found: i64,
        /// The newest version this drover knows.
        known: i64,
    },
    /// The writer thread has stopped (the ledger is closing or closed).
    #[error("the ledger writer has stopped")]
    Closed,
    /// The transaction could not be committed; the message is SQLite's.
    #[error("commit failed: {0}")]
    Commit(String),
    /// The op was refused: it changes a run that is not there.
    #[error("write refused: {0}")]
    Rejected(String),
    /// A run's row cannot be read back (bad JSON, an unknown state).
    #[error("run {run_id} has a damaged row: {what}")]
    Corrupt {
        /// The run whose row is damaged.
        run_id: String,
        /// What is wrong with it.
        what: String,
    },
    /// A search query FTS5 cannot read (the message is SQLite's).
    #[error("{0}")]
    SearchQuery(String),
    /// The file has no search index yet (no owner of this version has opened it).
    #[error("this ledger's search index is not built yet")]
    NoSearchIndex,
    /// A thread could not be started, or the file could not be reached.
    #[error("cannot start the ledger writer: {0}")]
    Io(#[from] std::io::Error),
}

impl From<LedgerError> for DroverError {
    fn from(e: LedgerError) -> Self {
        if let LedgerError::SearchQuery(why) = &e {
            return DroverError::new(
                ErrorCode::SearchQueryInvalid,
                format!(
                    "the search cannot be read ({why}); search words, \"a phrase\", \
                     prefix*, AND, OR, NOT: quote a word with - or : in it (\"staging-eu\")"
                ),
            );
        }
        let hint = match &e {
            LedgerError::TooNew { .. } => {
                "upgrade drover, or point DROVER_HOME at another directory"
            }
            LedgerError::NoSearchIndex => {
                "start drover's owner once (`drover serve`, or the dashboard): it builds the index"
            }
            _ => "check the disk and the ledger file's permissions, then try again",
        };
        DroverError::new(ErrorCode::LedgerError, format!("{e}; {hint}"))
    }
}

/// Brings the ledger file at `path` up to schema `version` only (at most this build's),
/// as a drover of that version left it: what a test or a bench of a later migration
/// starts from. Nothing else is done (no recovery, no writer).
pub fn migrate_file_to(path: &Path, version: i64) -> Result<(), LedgerError> {
    let mut conn = Connection::open(path)?;
    schema::configure(&conn, Synchronous::Full)?;
    schema::migrate_to(&mut conn, version)
}

/// How the ledger is opened.
#[derive(Debug, Clone)]
pub struct LedgerOptions {
    /// How the writer batches.
    pub writer: WriterOptions,
    /// What retention keeps (events pruned by age, an optional cap on runs). The
    /// default keeps everything; the owner sets it from `[limits]`.
    pub retention: RetentionPolicy,
    /// How often the retention pass looks for events to prune.
    pub retention_interval: Duration,
    /// How a commit reaches the disk ([`Synchronous::Deferred`] unless a bench or a test
    /// compares).
    pub synchronous: Synchronous,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions {
            writer: WriterOptions::default(),
            retention: RetentionPolicy::KEEP_ALL,
            retention_interval: Duration::from_secs(300),
            synchronous: Synchronous::default(),
        }
    }
}

/// The open ledger: owns the writer thread and the retention thread.
pub struct Ledger {
    path: PathBuf,
    writer: LedgerWriter,
    health: Health,
    writer_thread: Option<JoinHandle<()>>,
    /// [`Synchronous::Deferred`]'s sync thread; it ends after the writer.
    sync_thread: Option<JoinHandle<()>>,
    retention: Option<retention::Retention>,
}

impl Ledger {
    /// Opens (creating if needed) the ledger file, migrates it, recovers runs left active
    /// and starts the writer and retention threads.
    pub fn open(
        path: &Path,
        options: LedgerOptions,
        now: UnixMillis,
    ) -> Result<(Ledger, Recovery), LedgerError> {
        let mut conn = Connection::open(path)?;
        schema::configure(&conn, options.synchronous)?;
        schema::migrate(&mut conn)?;
        let recovery = recovery::recover(&mut conn, now)?;
        let (tx, rx) = mpsc::channel();
        let writer_options = options.writer;
        let (health_tx, health) = tokio::sync::watch::channel(None);
        let (syncer, sync_thread) = match options.synchronous {
            Synchronous::Deferred => {
                let mut wal = path.as_os_str().to_owned();
                wal.push("-wal");
                let wal = PathBuf::from(wal);
                // The sync thread checkpoints; the writer's own checkpoint is a backstop.
                conn.pragma_update(
                    None,
                    "wal_autocheckpoint",
                    writer::BACKSTOP_CHECKPOINT_PAGES,
                )?;
                let checkpoints = Connection::open(path)?;
                schema::configure(&checkpoints, Synchronous::Deferred)?;
                let (tx, acks) = mpsc::channel();
                let gate = writer_options.gate.clone();
                let thread = std::thread::Builder::new()
                    .name("ledger-sync".into())
                    .spawn(move || writer::sync_loop(&wal, checkpoints, acks, gate))?;
                (Some(tx), Some(thread))
            }
            Synchronous::Full | Synchronous::Normal => (None, None),
        };
        let spent = writer::spent_ops();
        let writer_thread = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || writer::run(conn, rx, writer_options, health_tx, syncer, spent))?;
        let writer = LedgerWriter::new(tx);
        let retention = retention::Retention::start(
            path.to_path_buf(),
            writer.clone(),
            options.retention,
            options.retention_interval,
        )?;
        Ok((
            Ledger {
                path: path.to_path_buf(),
                writer,
                health,
                writer_thread: Some(writer_thread),
                sync_thread,
                retention: Some(retention),
            },
            recovery,
        ))
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle for sending writes; clone it freely.
    pub fn writer(&self) -> LedgerWriter {
        self.writer.clone()
    }

    /// Whether the ledger can write now, and the news when that changes: `None` while
    /// commits succeed, else why they do not
    /// (docs/ARCHITECTURE.md §"When the disk cannot write").
    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// A new read connection.
    pub fn reader(&self) -> Result<LedgerReader, LedgerError> {
        LedgerReader::open(&self.path)
    }

    /// Commits everything sent so far and stops the threads.
    pub fn close(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(retention) = self.retention.take() {
            retention.stop();
        }
        self.writer.shutdown();
        if let Some(handle) = self.writer_thread.take()
            && handle.join().is_err()
        {
            tracing::error!("ledger: the writer thread panicked");
        }
        // The writer gone, the sync thread answers what it was given and ends.
        if let Some(handle) = self.sync_thread.take()
            && handle.join().is_err()
        {
            tracing::error!("ledger: the sync thread panicked");
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.stop();
    }
}
