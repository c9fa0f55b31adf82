//! The ledger's single writer: one thread owns the write connection and applies
//! [`WriteOp`]s in group-committed transactions.
//!
//! What must stay true:
//! - every write goes through this thread, in the order it was sent;
//! - a write that asked for an ack is acknowledged only after the transaction holding it
//!   committed and is on disk — with [`Synchronous::Deferred`](super::Synchronous), once
//!   the sync thread synced the WAL after that commit — or with the error that stopped it;
//!   a staged write ([`LedgerWriter::send_staged`]) is told of its commit first, before
//!   that sync, and only then of the sync (docs/ARCHITECTURE.md §"Commit, then publish");
//! - one refused op (say, an event with a gap in its seq) is backed out alone — SQLite's
//!   ABORT keeps the rest of the transaction — and reported on that op's ack;
//! - it stores what it is given: the dispatcher core redacts every op it sends
//!   ([`WriteOp::redact`], docs/ARCHITECTURE.md §"Secrets"), so no text is scanned twice;
//! - a batch is committed when it holds `max_batch` ops or its first op is `max_delay`
//!   old, whichever comes first: an ack waits at most `max_delay` plus one commit;
//! - a batch the disk refuses (full, read-only, failing) changes nothing: it is rolled
//!   back, kept in order and tried again until it commits, and no ack is answered before
//!   — the writer's [`Health`] says why meanwhile
//!   (docs/ARCHITECTURE.md §"When the disk cannot write").

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

use super::LedgerError;
use super::records::{
    BudgetSessionRecord, DecisionRecord, EventRecord, RunPatch, RunRecord, TurnRecord, UsageRecord,
};

/// One change to the ledger.
#[derive(Debug, Clone)]
pub enum WriteOp {
    /// Insert a new run.
    InsertRun(Box<RunRecord>),
    /// Change a run's row: the columns the patch sets.
    UpdateRun {
        /// The run to change.
        run_id: String,
        /// What to change.
        patch: Box<RunPatch>,
    },
    /// Built with [`WriteOp::event`], which serializes the body on the sender's thread.
    AppendEvent(NewEvent),
    /// Insert a turn, or replace it (by run and number). The search index is left as it
    /// is for the turn's agent text: a turn in flight, or a turn's row written again.
    UpsertTurn(Box<TurnRecord>),
    /// Insert or replace a turn whose end this records, and index its agent text in the
    /// same transaction, one document a turn replacing any it had (docs/ARCHITECTURE.md
    /// §"Ledger").
    EndTurn {
        /// The turn's row, its end set.
        turn: Box<TurnRecord>,
        /// The turn's agent text as its sender gathered it from the turn's
        /// `assistant_text` events (their texts, one per line, bounded by the sender: the
        /// dispatcher keeps at most 100,000 characters), so the writer reads none of them
        /// again; empty for a turn that said nothing. `None` when the sender does not hold
        /// it (a turn closed on restart): it is read from the turn's events, as migration 8
        /// built the index.
        text: Option<String>,
    },
    /// Insert a usage row.
    InsertUsage(Box<UsageRecord>),
    /// Insert a decision.
    InsertDecision(Box<DecisionRecord>),
    /// Make a budget session, or replace it (by name).
    PutBudgetSession(BudgetSessionRecord),
    /// Set a key of the `meta` table.
    PutMeta {
        /// The key.
        key: String,
        /// Its new value.
        value: String,
    },
    /// Delete runs with everything that belongs to them, their run-scoped rules included
    /// (retention's hard cap).
    DeleteRuns(Vec<String>),
    /// Prune the events of finished runs (retention): every event but the few kinds a
    /// run's view reads ([`super::retention::KEPT_KINDS`]) and its last one (so its seqs
    /// go on from where they were); the run's row, turns, usage and decisions stay.
    PruneEvents {
        /// The finished runs whose events are pruned.
        run_ids: Vec<String>,
        /// When, in ms since the Unix epoch (kept on each run as `events_pruned_at`).
        at: crate::UnixMillis,
    },
    /// Note processes of a run's child (see [`crate::providers::sweep`]).
    NoteProcesses {
        /// The run whose child started them.
        run_id: String,
        /// The boot they were started on (process ids are only meaningful within one
        /// boot).
        boot_id: String,
        /// The processes.
        processes: Vec<crate::providers::sweep::Noted>,
        /// When they were noted, in ms since the Unix epoch.
        at: crate::UnixMillis,
    },
    /// A run's processes were swept: nothing of them is left to end.
    ForgetProcesses {
        /// The run whose processes were swept.
        run_id: String,
    },
    /// Keep an approval rule (a new one, or one replaced by id).
    PutRule(Box<crate::rules::Rule>),
    /// Forget an approval rule.
    DeleteRule(u64),
    /// Keep a repository script the user approved (replacing the one approved before).
    PutScriptApproval(Box<crate::workspace::scripts::ApprovedScript>),
}

/// An event ready for the writer: its body already serialized.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The run the event belongs to.
    pub run_id: String,
    /// Its place in the run's events: the run's last seq plus one.
    pub seq: u64,
    /// What the event is (see [`super::kind`]): one of drover's own kinds as it is, or a
    /// kind read from elsewhere.
    pub kind: std::borrow::Cow<'static, str>,
    /// When it happened, in ms since the Unix epoch.
    pub at: crate::UnixMillis,
    /// The body, already serialized as JSON.
    pub body_json: String,
    /// It is a tool call the search index holds (a `transcript` event of a
    /// `tool_started` provider event, its line in `body.line`): the writer indexes that
    /// line in the transaction that appends the event, both or neither
    /// (docs/ARCHITECTURE.md §"Ledger"). Its sender knows what it sent, so no event's body
    /// is looked into for it.
    pub tool_call: bool,
}

/// Whether an event of `kind` with `body` is a tool call the search index holds (see
/// [`NewEvent::tool_call`]).
pub fn is_tool_call(kind: &str, body: &serde_json::Value) -> bool {
    kind == super::kind::TRANSCRIPT
        && body
            .pointer("/event/type")
            .and_then(serde_json::Value::as_str)
            == Some("tool_started")
}

impl WriteOp {
    /// Appends an event; the body is serialized here so the writer thread only inserts
    /// (and indexes it when it is a tool call, [`is_tool_call`]).
    pub fn event(e: EventRecord) -> Result<WriteOp, LedgerError> {
        Ok(WriteOp::AppendEvent(NewEvent {
            body_json: serde_json::to_string(&e.body)?,
            tool_call: is_tool_call(&e.kind, &e.body),
            run_id: e.run_id,
            seq: e.seq,
            kind: e.kind.into(),
            at: e.at,
        }))
    }
}

impl WriteOp {
    /// Redacts, in place, every text and JSON value the op stores that can carry the
    /// user's or an agent's words (titles, specs, live-state details, results, workspaces,
    /// turn texts, event and decision bodies). The writer stores ops as they come: the
    /// dispatcher core calls this on each op it commits (docs/ARCHITECTURE.md §"Secrets").
    pub fn redact(&mut self, redactor: &crate::redact::Redactor) {
        fn live(
            redactor: &crate::redact::Redactor,
            live: &mut Option<crate::live_state::LiveState>,
        ) {
            if let Some(live) = live {
                redactor.redact_opt(&mut live.detail);
            }
        }
        fn value(redactor: &crate::redact::Redactor, value: &mut Option<serde_json::Value>) {
            if let Some(value) = value {
                redactor.redact_json(value);
            }
        }
        match self {
            WriteOp::AppendEvent(e) => {
                if let std::borrow::Cow::Owned(clean) = redactor.redact_json_text(&e.body_json) {
                    e.body_json = clean;
                }
            }
            WriteOp::InsertRun(r) => {
                redactor.redact_string(&mut r.title);
                redactor.redact_json(&mut r.spec);
                live(redactor, &mut r.live_state);
                value(redactor, &mut r.result);
                value(redactor, &mut r.workspace);
            }
            WriteOp::UpdateRun { run_id: _, patch } => {
                live(redactor, &mut patch.live_state);
                value(redactor, &mut patch.result);
                value(redactor, &mut patch.workspace);
            }
            // An ended turn's agent text is made of the texts of events the core redacted
            // as they arrived: it is not scanned again.
            WriteOp::UpsertTurn(t) | WriteOp::EndTurn { turn: t, text: _ } => {
                redactor.redact_string(&mut t.prompt_preview);
                redactor.redact_opt(&mut t.text);
                value(redactor, &mut t.result);
                value(redactor, &mut t.evidence);
            }
            WriteOp::InsertDecision(d) => {
                redactor.redact_json(&mut d.body);
            }
            // Numbers, ids, names drover made and rule patterns (refused when they hold a
            // secret): nothing a person or an agent wrote.
            WriteOp::InsertUsage(_)
            | WriteOp::PutBudgetSession(_)
            | WriteOp::PutMeta { .. }
            | WriteOp::DeleteRuns(_)
            | WriteOp::PruneEvents { .. }
            | WriteOp::NoteProcesses { .. }
            | WriteOp::ForgetProcesses { .. }
            | WriteOp::PutRule(_)
            | WriteOp::DeleteRule(_) => {}
            // The text kept is what a later diff is shown against; the hash (of the
            // file's own bytes) is what decides.
            WriteOp::PutScriptApproval(a) => {
                redactor.redact_string(&mut a.text);
            }
        }
    }
}

pub(super) type AckSender = oneshot::Sender<Result<(), LedgerError>>;

/// What the writer hands the sync thread ([`sync_loop`]): the durable acks of what it
/// committed, and whether anything was written since its last handover. Acks with
/// nothing new under them (a request that only reads, waiting for what came before it)
/// are answered without a sync of their own once every earlier handover's sync is done.
pub(super) struct ToSync {
    acks: Vec<AckSender>,
    wrote: bool,
}

/// Completes once the transaction holding the write committed and is on disk (see
/// [`Staged`] for the two apart).
pub type Ack = oneshot::Receiver<Result<(), LedgerError>>;

/// What [`LedgerWriter::send_staged`] hands back: the commit, then the sync.
pub struct Staged {
    /// Resolves `Ok` once the transaction holding the writes committed: every reader
    /// sees them, and a crash of drover keeps them. Closed without a value when they were
    /// not committed (`durable` says why).
    pub committed: Ack,
    /// Resolves once they are also synced to disk, so a crash of the machine keeps them:
    /// what [`LedgerWriter::send_acked`]'s ack means.
    pub durable: Ack,
}

/// Who hears of a message's commit.
pub(super) struct AckTo {
    /// Told once the writes are committed and synced.
    durable: AckSender,
    /// Told as soon as the transaction committed, before its sync.
    committed: Option<AckSender>,
}

pub(super) enum Message {
    /// The common case, kept free of a Vec allocation.
    One(WriteOp),
    Ops(Vec<WriteOp>, Option<AckTo>),
    Shutdown,
}

impl Message {
    fn ops(&self) -> usize {
        match self {
            Message::One(_) => 1,
            Message::Ops(ops, _) => ops.len(),
            Message::Shutdown => 0,
        }
    }
}

/// How the writer batches.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Commit once a batch holds this many ops.
    pub max_batch: usize,
    /// Commit once a batch's first op is this old.
    pub max_delay: Duration,
    /// Where each batch waits before its commit: held or failed on purpose by a test
    /// ([`Gate`]); `None` in drover itself.
    pub gate: Option<Gate>,
}

impl Default for WriterOptions {
    /// The writer drover runs with: 10,000 ops or 1 ms, whichever comes first.
    fn default() -> WriterOptions {
        WriterOptions {
            max_batch: 10_000,
            max_delay: Duration::from_millis(1),
            gate: None,
        }
    }
}

/// A point each batch passes just before its commit, for tests that prove what waits for
/// a commit (docs/ARCHITECTURE.md §"Commit, then publish"): [`Gate::hold`] keeps every
/// batch there until [`Gate::release`]; [`Gate::fail`] makes every commit fail, as a full
/// disk would, until [`Gate::heal`]. The sync thread of
/// [`Synchronous::Deferred`](super::Synchronous) passes it too, before each sync of the
/// WAL: [`Gate::hold_syncs`] keeps it there until [`Gate::release_syncs`] (commits go on
/// meanwhile). Cheap to clone; clones share one gate.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    inner: Arc<(Mutex<GateState>, Condvar)>,
}

#[derive(Debug, Default)]
struct GateState {
    hold: bool,
    fail: Option<String>,
    waiting: bool,
    passed: u64,
    hold_syncs: bool,
    sync_waiting: bool,
}

impl Gate {
    fn state(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.inner.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn change(&self, f: impl FnOnce(&mut GateState)) {
        f(&mut self.state());
        self.inner.1.notify_all();
    }

    /// From now on, each batch waits before its commit until [`Gate::release`].
    pub fn hold(&self) {
        self.change(|s| s.hold = true);
    }

    /// Lets the waiting batch (and every later one) through.
    pub fn release(&self) {
        self.change(|s| s.hold = false);
    }

    /// From now on, each commit fails with `why` (the writer keeps the batch and tries it
    /// again) until [`Gate::heal`].
    pub fn fail(&self, why: &str) {
        self.change(|s| s.fail = Some(why.to_string()));
    }

    /// Commits succeed again.
    pub fn heal(&self) {
        self.change(|s| s.fail = None);
    }

    /// Whether a batch is waiting at the gate now.
    pub fn waiting(&self) -> bool {
        self.state().waiting
    }

    /// How many batches have passed the gate (committed or failed) so far.
    pub fn passed(&self) -> u64 {
        self.state().passed
    }

    /// From now on, each sync of the WAL waits until [`Gate::release_syncs`].
    pub fn hold_syncs(&self) {
        self.change(|s| s.hold_syncs = true);
    }

    /// Lets the waiting sync (and every later one) through.
    pub fn release_syncs(&self) {
        self.change(|s| s.hold_syncs = false);
    }

    /// Whether a sync is waiting at the gate now.
    pub fn sync_waiting(&self) -> bool {
        self.state().sync_waiting
    }

    /// The sync thread's side: waits while syncs are held.
    fn pass_sync(&self) {
        let (lock, turn) = &*self.inner;
        let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
        s.sync_waiting = true;
        while s.hold_syncs {
            s = turn.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.sync_waiting = false;
    }

    /// The writer's side: waits while held, then says whether the commit may go on.
    fn pass(&self) -> Result<(), String> {
        let (lock, turn) = &*self.inner;
        let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
        s.waiting = true;
        while s.hold {
            s = turn.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.waiting = false;
        s.passed += 1;
        match &s.fail {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

/// A cloneable handle that sends writes to the writer thread.
#[derive(Clone)]
pub struct LedgerWriter {
    tx: Sender<Message>,
}

impl LedgerWriter {
    pub(super) fn new(tx: Sender<Message>) -> Self {
        LedgerWriter { tx }
    }

    /// Sends a write without waiting; a failure is logged by the writer.
    pub fn send(&self, op: WriteOp) -> Result<(), LedgerError> {
        self.tx
            .send(Message::One(op))
            .map_err(|_| LedgerError::Closed)
    }

    /// Sends writes that commit in the same transaction; the ack resolves after the commit,
    /// once it is on disk.
    pub fn send_acked(&self, ops: Vec<WriteOp>) -> Ack {
        let (durable, ack) = oneshot::channel();
        self.send_to(
            ops,
            AckTo {
                durable,
                committed: None,
            },
        );
        ack
    }

    /// Sends writes that commit in the same transaction, and hears of their commit and of
    /// their sync apart: what the dispatcher's publisher shows once committed and
    /// acknowledges once synced (docs/ARCHITECTURE.md §"Commit, then publish").
    pub fn send_staged(&self, ops: Vec<WriteOp>) -> Staged {
        let (durable, durable_rx) = oneshot::channel();
        let (committed, committed_rx) = oneshot::channel();
        self.send_to(
            ops,
            AckTo {
                durable,
                committed: Some(committed),
            },
        );
        Staged {
            committed: committed_rx,
            durable: durable_rx,
        }
    }

    fn send_to(&self, ops: Vec<WriteOp>, to: AckTo) {
        if let Err(mpsc::SendError(Message::Ops(_, Some(to)))) =
            self.tx.send(Message::Ops(ops, Some(to)))
        {
            let _ = to.durable.send(Err(LedgerError::Closed));
        }
    }

    /// Sends writes and waits (async) until they are committed.
    pub async fn commit(&self, ops: Vec<WriteOp>) -> Result<(), LedgerError> {
        self.send_acked(ops)
            .await
            .unwrap_or(Err(LedgerError::Closed))
    }

    /// Sends writes and blocks the thread until they are committed. Not for async code.
    pub fn commit_blocking(&self, ops: Vec<WriteOp>) -> Result<(), LedgerError> {
        self.send_acked(ops)
            .blocking_recv()
            .unwrap_or(Err(LedgerError::Closed))
    }

    pub(super) fn shutdown(&self) {
        let _ = self.tx.send(Message::Shutdown);
    }
}

/// Whether the ledger can write: `None` when the last commit succeeded, else why it
/// cannot, in words ([`super::disk::describe`]).
pub type Health = tokio::sync::watch::Receiver<Option<String>>;

/// The first wait before a batch that did not commit is tried again; it doubles up to
/// [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest wait between two tries of a batch that did not commit.
const RETRY_MAX: Duration = Duration::from_secs(1);
/// Tries of a batch that does not commit after the ledger was told to stop: then its acks
/// are answered with the failure and the writer ends (the changes were never
/// acknowledged, so nothing acknowledged is lost).
const TRIES_AFTER_STOP: u32 = 5;

/// The writer thread's loop. Returns when shut down or every sender is gone.
///
/// A batch that does not commit (the disk is full, read-only or failing) changes nothing:
/// its transaction is rolled back, its messages are kept, in order, and tried again —
/// with whatever was sent since, behind them — until a commit succeeds. Meanwhile `health`
/// says why, and no ack is answered: what waits for one waits for the disk.
pub(super) fn run(
    mut conn: Connection,
    rx: Receiver<Message>,
    opts: WriterOptions,
    health: tokio::sync::watch::Sender<Option<String>>,
    syncer: Option<Sender<ToSync>>,
    spent: Option<SpentOps>,
) {
    // A ledger has the search index; a benchmark drops it to time what it costs.
    let indexed = super::search::has_index(&conn);
    let mut held: Vec<Message> = Vec::new();
    let mut failures = 0u32;
    let mut stopping = false;
    // Whether a commit since the last handover to the sync thread wrote anything.
    let mut unsynced = false;
    loop {
        let started = Instant::now();
        let mut batch = std::mem::take(&mut held);
        if batch.is_empty() {
            match rx.recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
        stopping |= gather(&rx, &mut batch, &opts, started);
        let wrote = batch.iter().any(|m| m.ops() > 0);
        match attempt(&mut conn, &batch, opts.gate.as_ref(), indexed) {
            Ok(outcomes) => {
                if failures > 0 {
                    tracing::info!(tries = failures + 1, "ledger: writes succeed again");
                }
                failures = 0;
                health.send_if_modified(|h| h.take().is_some());
                unsynced |= wrote;
                let mut durable = Vec::new();
                let committed: Vec<Message> = batch
                    .into_iter()
                    .zip(outcomes)
                    .map(|(message, outcome)| answer(message, outcome, &mut durable))
                    .collect();
                to_disk(durable, syncer.as_ref(), &mut unsynced);
                hand_back(committed, spent.as_ref());
                if stopping {
                    break;
                }
            }
            Err(why) => {
                failures += 1;
                let changed = health.send_if_modified(|h| {
                    let new = h.as_deref() != Some(why.as_str());
                    if new {
                        *h = Some(why.clone());
                    }
                    new
                });
                if changed {
                    tracing::error!(%why, ops = batch.iter().map(Message::ops).sum::<usize>(), "ledger: commit failed; the batch is kept and tried again");
                }
                if stopping && failures >= TRIES_AFTER_STOP {
                    tracing::error!(%why, "ledger: stopping with writes that never committed (none was acknowledged)");
                    for message in batch {
                        answer(
                            message,
                            Err(LedgerError::Commit(why.clone())),
                            &mut Vec::new(),
                        );
                    }
                    break;
                }
                held = batch;
                std::thread::sleep(retry_wait(failures));
            }
        }
    }
}

/// The wait before the `failures`-th try again: doubling from [`RETRY_FIRST`], at most
/// [`RETRY_MAX`].
fn retry_wait(failures: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(RETRY_MAX)
}

/// Adds to `batch` what comes within the batch's time and size. Returns true when the
/// writer is to stop after it (a shutdown, or every sender gone).
fn gather(
    rx: &Receiver<Message>,
    batch: &mut Vec<Message>,
    opts: &WriterOptions,
    started: Instant,
) -> bool {
    let mut ops: usize = batch.iter().map(Message::ops).sum();
    if batch.iter().any(|m| matches!(m, Message::Shutdown)) {
        return true;
    }
    while ops < opts.max_batch {
        let next = match rx.try_recv() {
            Ok(m) => m,
            Err(TryRecvError::Disconnected) => return true,
            Err(TryRecvError::Empty) => {
                let left = opts.max_delay.saturating_sub(started.elapsed());
                match rx.recv_timeout(left) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => return false,
                    Err(RecvTimeoutError::Disconnected) => return true,
                }
            }
        };
        ops += next.ops();
        let stop = matches!(next, Message::Shutdown);
        batch.push(next);
        if stop {
            return true;
        }
    }
    false
}

/// One try at committing `batch` in one transaction: each message's outcome (an op
/// refused alone, say an event with a gap in its seq, is backed out alone — SQLite's
/// ABORT keeps the rest), or why nothing was committed.
fn attempt(
    conn: &mut Connection,
    batch: &[Message],
    gate: Option<&Gate>,
    indexed: bool,
) -> Result<Vec<Result<(), LedgerError>>, String> {
    let dir = conn
        .path()
        .and_then(|p| std::path::Path::new(p).parent())
        .map_or_else(
            || std::path::PathBuf::from("."),
            std::path::Path::to_path_buf,
        );
    let why = |e: &dyn std::fmt::Display| {
        super::disk::describe(&e.to_string(), &dir, super::disk::state_of(&dir))
    };
    let tx = match conn.transaction() {
        Ok(tx) => tx,
        Err(e) => return Err(why(&e)),
    };
    let mut outcomes = Vec::with_capacity(batch.len());
    for message in batch {
        match apply(&tx, message, indexed) {
            Ok(outcome) => outcomes.push(outcome),
            Err(e) => return Err(why(&e)),
        }
    }
    if let Some(gate) = gate
        && let Err(why) = gate.pass()
    {
        return Err(why);
    }
    match tx.commit() {
        Ok(()) => Ok(outcomes),
        Err(e) => Err(why(&e)),
    }
}

/// Whether SQLite's error is the disk's (full, read-only, failing, locked): the whole
/// batch is tried again later. Any other error refuses one op.
fn is_disk_error(e: &LedgerError) -> bool {
    use rusqlite::ErrorCode as C;
    match e {
        LedgerError::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => matches!(
            f.code,
            C::DiskFull
                | C::SystemIoFailure
                | C::ReadOnly
                | C::CannotOpen
                | C::DatabaseBusy
                | C::DatabaseLocked
                | C::OutOfMemory
                | C::FileLockingProtocolFailed
        ),
        _ => false,
    }
}

/// Applies one message inside the open transaction (`indexed`: the ledger has the search
/// index): its outcome (the first op it had refused), or the disk's error that stops the
/// whole batch.
fn apply(
    tx: &Transaction<'_>,
    message: &Message,
    indexed: bool,
) -> Result<Result<(), LedgerError>, LedgerError> {
    let ops: &[WriteOp] = match message {
        Message::One(op) => std::slice::from_ref(op),
        Message::Ops(ops, _) => ops,
        Message::Shutdown => return Ok(Ok(())),
    };
    let mut outcome = Ok(());
    for op in ops {
        if let Err(e) = apply_op(tx, op, indexed) {
            if is_disk_error(&e) {
                return Err(e);
            }
            tracing::warn!(error = %e, "ledger: write refused");
            if outcome.is_ok() {
                outcome = Err(e);
            }
        }
    }
    Ok(outcome)
}

/// Tells a committed message's sender of its outcome: at once when it was refused; else
/// its commit at once, and the sender of its durable ack goes on `durable`, answered once
/// the commit is on disk ([`to_disk`]). Gives back what is left of the message (its ops)
/// to be freed.
fn answer(
    message: Message,
    result: Result<(), LedgerError>,
    durable: &mut Vec<AckSender>,
) -> Message {
    let Message::Ops(ops, Some(to)) = message else {
        return message;
    };
    match result {
        Ok(()) => {
            if let Some(committed) = to.committed {
                let _ = committed.send(Ok(()));
            }
            durable.push(to.durable);
        }
        // The committed sender is dropped unanswered: not committed.
        Err(e) => {
            let _ = to.durable.send(Err(e));
        }
    }
    Message::Ops(ops, None)
}

/// Where the writer hands the ops it committed, to be freed on a tokio worker, the kind
/// of thread that made them: glibc frees a block into the arena it came from, under that
/// arena's lock, so a writer freeing every event's strings waited on the workers that
/// were making the next ones (docs/ARCHITECTURE.md §"Memory"). Bounded: when the task
/// that frees them falls behind, the writer frees them itself.
pub(super) type SpentOps = tokio::sync::mpsc::Sender<Vec<Message>>;

/// How many committed batches wait at most for [`spent_ops`]'s task.
const SPENT_BATCHES_MAX: usize = 64;

/// A [`SpentOps`] and the task on the current tokio runtime that frees what it is given,
/// or `None` outside a runtime (the writer then frees its ops itself). The task ends
/// with the writer.
pub(super) fn spent_ops() -> Option<SpentOps> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Message>>(SPENT_BATCHES_MAX);
    runtime.spawn(async move { while rx.recv().await.is_some() {} });
    Some(tx)
}

/// Hands `committed` to the task that frees it, or frees it here.
fn hand_back(committed: Vec<Message>, spent: Option<&SpentOps>) {
    if let Some(spent) = spent {
        // Full or gone: dropped here instead.
        let _ = spent.try_send(committed);
    }
}

/// Answers the durable acks of a commit: at once when the commit itself reached the disk
/// (`synchronous=FULL`), else once the sync thread synced the WAL ([`sync_loop`]), told
/// whether anything was written (`unsynced`, cleared once handed over) since the last
/// acks it was given.
fn to_disk(durable: Vec<AckSender>, syncer: Option<&Sender<ToSync>>, unsynced: &mut bool) {
    if durable.is_empty() {
        return;
    }
    match syncer {
        None => {
            for ack in durable {
                let _ = ack.send(Ok(()));
            }
        }
        Some(syncer) => {
            let wrote = std::mem::take(unsynced);
            if let Err(mpsc::SendError(ToSync { acks, .. })) = syncer.send(ToSync {
                acks: durable,
                wrote,
            }) {
                for ack in acks {
                    let _ = ack.send(Err(LedgerError::Closed));
                }
            }
        }
    }
}

/// A WAL that has held frames no checkpoint copied for this long is checkpointed at the
/// next quiet moment ([`CHECKPOINT_QUIET`] with nothing to sync) by [`sync_loop`].
const CHECKPOINT_AFTER: Duration = Duration::from_millis(250);
/// How long nothing to sync makes a quiet moment: a checkpoint then copies pages while
/// nothing waits for an answer (the reply a sync just released, the command ending that
/// waited for it), not beside them on a machine with few cores.
const CHECKPOINT_QUIET: Duration = Duration::from_millis(10);
/// Under a steady stream of commits with no quiet moment, the WAL is checkpointed right
/// after a sync once it has held uncopied frames this long.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);
/// With [`Synchronous::Deferred`](super::Synchronous), the writer's own automatic
/// checkpoint (SQLite's default is 1,000 pages) is only a backstop for a WAL the sync
/// thread's checkpoints could not reset (a reader held it): checkpointing inside a commit
/// holds every write behind it, and the events waiting for it.
pub(super) const BACKSTOP_CHECKPOINT_PAGES: i64 = 20_000;

/// How long [`sync_loop`] waits for the next commit to sync before it checkpoints, the
/// WAL having held uncopied frames for `dirty` (`None`: it holds none, so it waits as long
/// as it takes).
fn checkpoint_wait(dirty: Option<Duration>) -> Option<Duration> {
    dirty.map(|d| CHECKPOINT_AFTER.saturating_sub(d).max(CHECKPOINT_QUIET))
}

/// The sync thread of [`Synchronous::Deferred`](super::Synchronous): syncs the WAL file
/// `wal` after commits, then answers their durable acks — every commit handed over while
/// a sync ran is covered by the next one (one sync for all); acks with nothing written
/// since the last handover (a request that only reads) are answered without one, as the
/// last sync covered everything, unless that sync failed. It runs beside the writer, so
/// the writer commits the next batch (and the publisher shows it) while the disk syncs the
/// last. It checkpoints the WAL on its own connection `conn` (passive: the writer goes on
/// meanwhile; the checkpoint syncs what it copied) at a quiet moment once the WAL has
/// held uncopied frames for [`CHECKPOINT_AFTER`] ([`checkpoint_wait`]), or right after a
/// sync once it has for [`CHECKPOINT_EVERY`]; an idle ledger's WAL is copied without
/// waiting for another commit. Ends when the writer does, once it answered every ack it
/// was given.
pub(super) fn sync_loop(
    wal: &std::path::Path,
    conn: Connection,
    acks: Receiver<ToSync>,
    gate: Option<Gate>,
) {
    // Since when the WAL has held frames no checkpoint copied (the first sync after one).
    let mut dirty: Option<Instant> = None;
    // A sync failed: every round syncs until one succeeds, written or not.
    let mut failed = false;
    loop {
        let next = match checkpoint_wait(dirty.map(|since| since.elapsed())) {
            None => acks.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(wait) => acks.recv_timeout(wait),
        };
        let ToSync {
            acks: mut waiting,
            mut wrote,
        } = match next {
            Ok(handover) => handover,
            Err(RecvTimeoutError::Timeout) => {
                checkpoint(&conn);
                dirty = None;
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        while let Ok(more) = acks.try_recv() {
            waiting.extend(more.acks);
            wrote |= more.wrote;
        }
        // Nothing written since the last handover, whose sync is done: already on disk.
        if !wrote && !failed {
            for ack in waiting {
                let _ = ack.send(Ok(()));
            }
            continue;
        }
        if let Some(gate) = &gate {
            gate.pass_sync();
        }
        let synced = sync_file(wal);
        failed = synced.is_err();
        match synced {
            Ok(()) => {
                for ack in waiting {
                    let _ = ack.send(Ok(()));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, wal = %wal.display(), "ledger: the write-ahead log cannot be synced");
                for ack in waiting {
                    let _ = ack.send(Err(LedgerError::Commit(format!(
                        "{} cannot be synced to disk: {e}",
                        wal.display()
                    ))));
                }
            }
        }
        if dirty.get_or_insert_with(Instant::now).elapsed() >= CHECKPOINT_EVERY {
            checkpoint(&conn);
            dirty = None;
        }
    }
}

/// Copies the WAL into the database file (passive: never waits for the writer or a
/// reader); a failure is logged, and the next checkpoint tries again.
fn checkpoint(conn: &Connection) {
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
        tracing::warn!(error = %e, "ledger: checkpoint failed; the next one tries again");
    }
}

/// Syncs the file's data to disk. The file gone is nothing to sync: SQLite removes its
/// WAL only once it checkpointed every frame into the database file and synced that.
fn sync_file(path: &std::path::Path) -> std::io::Result<()> {
    match std::fs::File::open(path) {
        Ok(file) => file.sync_data(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// A value as stored: JSON (its sender redacted it, [`WriteOp::redact`]).
fn json(v: &impl serde::Serialize) -> Result<String, LedgerError> {
    Ok(serde_json::to_string(v)?)
}

fn opt_json(v: &Option<impl serde::Serialize>) -> Result<Option<String>, LedgerError> {
    v.as_ref().map(json).transpose()
}

/// Inserts a turn's row, or replaces it (by run and number).
fn upsert_turn(tx: &Transaction<'_>, t: &TurnRecord) -> Result<(), LedgerError> {
    let mut st = tx.prepare_cached(
        "INSERT INTO turns (run_id, number, origin, started_at, ended_at, prompt_preview,
                text, usage_json, cost_usd, result_json, evidence_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (run_id, number) DO UPDATE SET
                origin = excluded.origin, started_at = excluded.started_at,
                ended_at = excluded.ended_at, prompt_preview = excluded.prompt_preview,
                text = excluded.text, usage_json = excluded.usage_json,
                cost_usd = excluded.cost_usd, result_json = excluded.result_json,
                evidence_json = excluded.evidence_json",
    )?;
    st.execute(params![
        t.run_id,
        t.number,
        t.origin,
        t.started_at,
        t.ended_at,
        t.prompt_preview,
        t.text,
        opt_json(&t.usage)?,
        t.cost_usd,
        opt_json(&t.result)?,
        opt_json(&t.evidence)?,
    ])?;
    Ok(())
}

/// Runs `write` in a savepoint: what it wrote stays whole or not at all, so an op
/// refused alone is backed out alone (docs/ARCHITECTURE.md §"Ledger").
fn whole(
    tx: &Transaction<'_>,
    write: impl FnOnce() -> Result<(), LedgerError>,
) -> Result<(), LedgerError> {
    tx.prepare_cached("SAVEPOINT op")?.execute([])?;
    match write() {
        Ok(()) => {
            tx.prepare_cached("RELEASE op")?.execute([])?;
            Ok(())
        }
        Err(e) => {
            tx.prepare_cached("ROLLBACK TO op")?.execute([])?;
            tx.prepare_cached("RELEASE op")?.execute([])?;
            Err(e)
        }
    }
}

/// Appends an event; a tool call's line goes into the search index with it (`indexed`:
/// the ledger has the index), both or neither.
fn append_event(tx: &Transaction<'_>, e: &NewEvent, indexed: bool) -> Result<(), LedgerError> {
    let insert = || -> Result<(), LedgerError> {
        tx.prepare_cached(
            "INSERT INTO events (run_id, seq, kind, at, body_json) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![e.run_id, e.seq as i64, e.kind, e.at, e.body_json])?;
        Ok(())
    };
    if indexed && e.tool_call {
        whole(tx, || {
            insert()?;
            super::search::index_tool_call(tx, &e.run_id, e.seq, &e.body_json)
        })
    } else {
        insert()
    }
}

/// Records a turn's end: its row, then (`indexed`: the ledger has the search index) its
/// agent text as one document, both or neither.
fn end_turn(
    tx: &Transaction<'_>,
    turn: &TurnRecord,
    text: Option<&str>,
    indexed: bool,
) -> Result<(), LedgerError> {
    whole(tx, || {
        // Its document is replaced only if it had one: a delete of a rowid the index does
        // not hold still leaves FTS5 a tombstone to keep.
        let was_ended = indexed
            && tx
                .prepare_cached(
                    "SELECT ended_at IS NOT NULL FROM turns WHERE run_id = ?1 AND number = ?2",
                )?
                .query_row(params![turn.run_id, turn.number], |r| r.get::<_, bool>(0))
                .optional()?
                .unwrap_or(false);
        upsert_turn(tx, turn)?;
        if indexed && turn.ended_at.is_some() {
            super::search::index_turn_text(tx, &turn.run_id, turn.number, was_ended, text)?;
        }
        Ok(())
    })
}

fn apply_op(tx: &Transaction<'_>, op: &WriteOp, indexed: bool) -> Result<(), LedgerError> {
    match op {
        WriteOp::AppendEvent(e) => append_event(tx, e, indexed)?,
        WriteOp::InsertRun(r) => {
            let mut st = tx.prepare_cached(
                "INSERT INTO runs (run_id, created_at, updated_at, finished_at, state,
                    completion_reason, provider, model, title, budget_session, workflow_id,
                    parent_run, idempotency_key, provider_session_id, removed, spec_json,
                    live_state_json, result_json, workspace_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                    ?17, ?18, ?19)",
            )?;
            st.execute(params![
                r.run_id,
                r.created_at,
                r.updated_at,
                r.finished_at,
                r.state.as_str(),
                r.completion_reason,
                r.provider,
                r.model,
                r.title,
                r.budget_session,
                r.workflow_id,
                r.parent_run,
                r.idempotency_key,
                r.provider_session_id,
                r.removed,
                json(&r.spec)?,
                opt_json(&r.live_state)?,
                opt_json(&r.result)?,
                opt_json(&r.workspace)?,
            ])?;
        }
        WriteOp::UpdateRun { run_id, patch: p } => {
            let mut st = tx.prepare_cached(
                "UPDATE runs SET updated_at = ?2,
                    state = COALESCE(?3, state),
                    completion_reason = CASE WHEN ?11 THEN NULL
                        ELSE COALESCE(?4, completion_reason) END,
                    finished_at = CASE WHEN ?11 THEN NULL ELSE COALESCE(?5, finished_at) END,
                    model = COALESCE(?6, model),
                    provider_session_id = COALESCE(?7, provider_session_id),
                    removed = COALESCE(?8, removed),
                    live_state_json = COALESCE(?9, live_state_json),
                    result_json = COALESCE(?10, result_json),
                    workspace_json = COALESCE(?12, workspace_json)
                 WHERE run_id = ?1",
            )?;
            let changed = st.execute(params![
                run_id,
                p.updated_at,
                p.state.map(|s| s.as_str()),
                p.completion_reason,
                p.finished_at,
                p.model,
                p.provider_session_id,
                p.removed,
                opt_json(&p.live_state)?,
                opt_json(&p.result)?,
                p.reopened,
                opt_json(&p.workspace)?,
            ])?;
            if changed == 0 {
                return Err(LedgerError::Rejected(format!("no run {run_id}")));
            }
        }
        WriteOp::UpsertTurn(t) => upsert_turn(tx, t)?,
        WriteOp::EndTurn { turn, text } => end_turn(tx, turn, text.as_deref(), indexed)?,
        WriteOp::InsertUsage(u) => {
            let mut st = tx.prepare_cached(
                "INSERT INTO usage (run_id, turn, at, provider, model, part, input, output,
                    reasoning, cache_read, cache_write, cost_usd, basis, fidelity, source,
                    budget_session)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            )?;
            st.execute(params![
                u.run_id,
                u.turn,
                u.at,
                u.provider,
                u.model,
                u.part,
                u.input as i64,
                u.output as i64,
                u.reasoning as i64,
                u.cache_read as i64,
                u.cache_write as i64,
                u.cost_usd,
                u.basis,
                u.fidelity,
                u.source,
                u.budget_session,
            ])?;
        }
        WriteOp::InsertDecision(d) => {
            let mut st = tx.prepare_cached(
                "INSERT INTO decisions (run_id, at, kind, request_id, who, decision, body_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            st.execute(params![
                d.run_id,
                d.at,
                d.kind,
                d.request_id,
                d.who,
                d.decision,
                json(&d.body)?
            ])?;
        }
        WriteOp::PutBudgetSession(b) => {
            let mut st = tx.prepare_cached(
                "INSERT INTO budget_sessions (name, created_at, warning_usd, hard_cap_usd)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (name) DO UPDATE SET
                    warning_usd = excluded.warning_usd, hard_cap_usd = excluded.hard_cap_usd",
            )?;
            st.execute(params![b.name, b.created_at, b.warning_usd, b.hard_cap_usd])?;
        }
        WriteOp::PutMeta { key, value } => {
            let mut st = tx.prepare_cached(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?;
            st.execute(params![key, value])?;
        }
        WriteOp::DeleteRuns(ids) => {
            let mut st = tx.prepare_cached("DELETE FROM runs WHERE run_id = ?1")?;
            // Its run-scoped rules can never match again.
            let mut rules =
                tx.prepare_cached("DELETE FROM rules WHERE scope = 'run' AND run_id = ?1")?;
            for id in ids {
                st.execute(params![id])?;
                rules.execute(params![id])?;
            }
        }
        WriteOp::PruneEvents { run_ids, at } => {
            let kept = super::retention::KEPT_KINDS
                .iter()
                .map(|k| format!("'{k}'"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut delete = tx.prepare_cached(&format!(
                "DELETE FROM events WHERE run_id = ?1 AND kind NOT IN ({kept})
                   AND seq < (SELECT MAX(seq) FROM events WHERE run_id = ?1)"
            ))?;
            let mut mark =
                tx.prepare_cached("UPDATE runs SET events_pruned_at = ?2 WHERE run_id = ?1")?;
            for id in run_ids {
                delete.execute(params![id])?;
                mark.execute(params![id, at])?;
            }
        }
        WriteOp::NoteProcesses {
            run_id,
            boot_id,
            processes,
            at,
        } => {
            let mut st = tx.prepare_cached(
                "INSERT OR IGNORE INTO processes (run_id, pid, start_ticks, pgid, boot_id, noted_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for p in processes {
                let start = i64::try_from(p.start).unwrap_or(i64::MAX);
                st.execute(params![run_id, p.pid, start, p.pgid, boot_id, at])?;
            }
        }
        WriteOp::ForgetProcesses { run_id } => {
            let mut st = tx.prepare_cached("DELETE FROM processes WHERE run_id = ?1")?;
            st.execute(params![run_id])?;
        }
        WriteOp::PutRule(rule) => {
            let mut st = tx.prepare_cached(
                "INSERT OR REPLACE INTO rules
                    (id, scope, kind, pattern, decision, run_id, repository, created_at, rule_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            st.execute(params![
                rule.id as i64,
                rule.scope.as_str(),
                rule.kind.as_str(),
                rule.pattern,
                rule.decision.as_str(),
                rule.run_id,
                rule.repository,
                rule.created_at,
                serde_json::to_string(&**rule)?
            ])?;
        }
        WriteOp::DeleteRule(id) => {
            let mut st = tx.prepare_cached("DELETE FROM rules WHERE id = ?1")?;
            st.execute(params![*id as i64])?;
        }
        WriteOp::PutScriptApproval(a) => {
            let mut st = tx.prepare_cached(
                "INSERT OR REPLACE INTO script_approvals
                    (repository, kind, sha256, script, approved_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            st.execute(params![
                a.repository,
                a.kind.as_str(),
                a.sha256,
                a.text,
                a.approved_at
            ])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sync_thread_checkpoints_at_a_quiet_moment_once_the_wal_held_frames_long_enough() {
        let ms = Duration::from_millis;
        for (dirty, wait) in [
            // Nothing to copy: wait for the next commit as long as it takes.
            (None, None),
            // Just synced: a checkpoint is due after CHECKPOINT_AFTER, if it is quiet then.
            (Some(ms(0)), Some(ms(250))),
            (Some(ms(100)), Some(ms(150))),
            // Due, or nearly: only a quiet moment's wait.
            (Some(ms(245)), Some(ms(10))),
            (Some(ms(250)), Some(ms(10))),
            (Some(ms(5_000)), Some(ms(10))),
        ] {
            assert_eq!(checkpoint_wait(dirty), wait, "{dirty:?}");
        }
    }

    fn meta(key: &str) -> WriteOp {
        WriteOp::PutMeta {
            key: key.into(),
            value: "v".into(),
        }
    }

    #[test]
    fn a_committed_message_is_answered_and_its_ops_are_given_back_to_be_freed() {
        let (durable, _durable_rx) = oneshot::channel();
        let (committed, mut committed_rx) = oneshot::channel();
        let message = Message::Ops(
            vec![meta("a"), meta("b")],
            Some(AckTo {
                durable,
                committed: Some(committed),
            }),
        );
        let mut waiting = Vec::new();
        let back = answer(message, Ok(()), &mut waiting);
        assert!(matches!(committed_rx.try_recv(), Ok(Ok(()))));
        assert_eq!(waiting.len(), 1, "the durable ack waits for the sync");
        assert!(matches!(back, Message::Ops(ops, None) if ops.len() == 2));
        // A message without acks comes back as it went.
        let back = answer(Message::One(meta("c")), Ok(()), &mut waiting);
        assert!(matches!(back, Message::One(WriteOp::PutMeta { key, .. }) if key == "c"));
    }

    #[test]
    fn committed_ops_are_freed_by_a_task_of_the_runtime_or_else_by_the_writer() {
        assert!(spent_ops().is_none(), "no runtime: the writer frees them");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let spent = runtime.block_on(async { spent_ops() }).unwrap();
        for _ in 0..SPENT_BATCHES_MAX * 2 {
            // The task has not run yet: past the bound, the batches are dropped here.
            hand_back(vec![Message::One(meta("k"))], Some(&spent));
        }
        assert_eq!(spent.capacity(), 0, "the channel holds at most its bound");
        runtime.block_on(async {
            while spent.capacity() < SPENT_BATCHES_MAX {
                tokio::task::yield_now().await;
            }
        });
    }
}
