//! The dispatcher task: its state, its loop, its clock and its timers.
//!
//! What must stay true: this task is the only owner of run state; it never blocks on a
//! child or awaits the ledger inline (commits go to the publisher); one `select!` loop
//! over client requests, adapter events and the next deadline.

use serde_json::Value;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use super::publish::{self, Publication};
use super::run::{Batch, Run};
use super::waits::Waiter;
use super::{DispatcherHandle, DispatcherOptions, Envelope, Reply};
use crate::config::{Config, Limits};
use crate::ledger::{Ledger, LedgerOptions, LedgerReader, LedgerWriter, WriteOp};
use crate::providers::RunProviderEvent;
use crate::{DroverError, UnixMillis};

/// Maps tokio's clock (virtual under paused time) to Unix milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_unix: UnixMillis,
    base: Instant,
}

impl Clock {
    pub fn start() -> Clock {
        let base_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Clock {
            base_unix,
            base: Instant::now(),
        }
    }

    pub fn now(&self) -> UnixMillis {
        self.base_unix + self.base.elapsed().as_millis() as i64
    }

    pub fn instant_at(&self, at: UnixMillis) -> Instant {
        self.base + Duration::from_millis((at - self.base_unix).max(0) as u64)
    }
}

pub struct Actor {
    pub options: DispatcherOptions,
    pub clock: Clock,
    pub ledger: Option<Ledger>,
    pub writer: LedgerWriter,
    pub reader: LedgerReader,
    pub runs: HashMap<String, Run>,
    /// Run ids in creation order.
    pub order: Vec<String>,
    pub queue: VecDeque<String>,
    pub publish: mpsc::UnboundedSender<Publication>,
    pub provider_tx: mpsc::Sender<RunProviderEvent>,
    pub waiters: Vec<Waiter>,
    pub next_id: u64,
    pub shutdown: Option<oneshot::Sender<()>>,
    /// When shutting down, the moment to give up waiting for children.
    pub shutdown_deadline: Option<UnixMillis>,
    /// Writes, events and replies queued during one turn of the loop.
    pub outbox: RefCell<Outbox>,
    /// The catalog and the budget sessions (loaded at start).
    pub money: Option<super::money::Money>,
}

/// What one turn of the loop produced, committed together.
#[derive(Default)]
pub struct Outbox {
    ops: Vec<WriteOp>,
    events: Vec<super::api::DispatchEvent>,
    replies: Vec<(Reply, Result<Value, DroverError>)>,
}

/// Adapter events handled per turn of the loop before committing.
const PROVIDER_EVENTS_PER_TURN: usize = 512;

/// How long shutdown waits for children to exit before giving up on them.
const SHUTDOWN_GRACE_MS: i64 = 15_000;

pub async fn start(
    options: DispatcherOptions,
) -> Result<(DispatcherHandle, tokio::task::JoinHandle<()>), DroverError> {
    let clock = Clock::start();
    let ledger_options = LedgerOptions {
        retention_finished_runs: options.config.limits.retention_finished_runs,
        ..LedgerOptions::default()
    };
    let path = options.paths.ledger_file.clone();
    let now = clock.now();
    let (ledger, recovery) =
        tokio::task::spawn_blocking(move || Ledger::open(&path, ledger_options, now))
            .await
            .map_err(|e| DroverError::new(crate::ErrorCode::Internal, e.to_string()))??;
    if !recovery.interrupted.is_empty() {
        tracing::info!(runs = ?recovery.interrupted, "runs left active were marked interrupted");
    }
    let writer = ledger.writer();
    let reader = ledger.reader()?;
    let (tx, rx) = mpsc::channel::<Envelope>(256);
    let (events, _) = broadcast::channel(4096);
    let (publish_tx, publish_rx) = mpsc::unbounded_channel();
    let publisher = publish::spawn(publish_rx, events.clone());
    let (provider_tx, provider_rx) = mpsc::channel(1024);
    let actor = Actor {
        options,
        clock,
        ledger: Some(ledger),
        writer,
        reader,
        runs: HashMap::new(),
        order: Vec::new(),
        queue: VecDeque::new(),
        publish: publish_tx,
        provider_tx,
        waiters: Vec::new(),
        next_id: 0,
        shutdown: None,
        shutdown_deadline: None,
        outbox: RefCell::new(Outbox::default()),
        money: None,
    };
    let mut actor = actor;
    actor.load_money()?;
    let join = tokio::spawn(async move {
        actor.run(rx, provider_rx).await;
        let _ = publisher.await;
    });
    Ok((DispatcherHandle { tx, events }, join))
}

impl Actor {
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    pub fn limits(&self) -> &Limits {
        &self.options.config.limits
    }

    pub fn config(&self) -> &Config {
        &self.options.config
    }

    async fn run(
        mut self,
        mut requests: mpsc::Receiver<Envelope>,
        mut provider_events: mpsc::Receiver<RunProviderEvent>,
    ) {
        let mut requests_open = true;
        loop {
            let next = self.next_deadline();
            let sleep = tokio::time::sleep_until(
                next.map(|at| self.clock.instant_at(at))
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600)),
            );
            tokio::select! {
                envelope = requests.recv(), if requests_open => match envelope {
                    Some(Envelope::Request(request, reply)) => self.handle_request(request, reply),
                    Some(Envelope::Shutdown(done)) => self.begin_shutdown(Some(done)),
                    None => {
                        requests_open = false;
                        self.begin_shutdown(None);
                    }
                },
                Some(event) = provider_events.recv() => {
                    self.on_provider_event(event);
                    for _ in 1..PROVIDER_EVENTS_PER_TURN {
                        match provider_events.try_recv() {
                            Ok(event) => self.on_provider_event(event),
                            Err(_) => break,
                        }
                    }
                }
                _ = sleep => self.on_timers(),
            }
            self.flush_outbox();
            if self.shutdown_finished() {
                break;
            }
        }
        self.finish_shutdown().await;
    }

    /// The earliest moment a timer is due.
    fn next_deadline(&self) -> Option<UnixMillis> {
        let mut next: Option<UnixMillis> = self.shutdown_deadline;
        let mut consider = |at: UnixMillis| next = Some(next.map_or(at, |n| n.min(at)));
        let stalled_after = self.limits().stalled_after_secs as i64 * 1000;
        for run in self.runs.values() {
            if run.state.is_terminal() {
                continue;
            }
            if run.ending.is_none() && run.holds_slot() {
                consider(run.deadline);
            }
            if let Some(idle) = run.idle_since {
                consider(idle + run.spec.idle_timeout_secs as i64 * 1000);
            }
            if let Some(expiry) = run.broker.next_expiry() {
                consider(expiry);
            }
            if run.turn_in_flight && !run.stalled && run.broker.is_empty() {
                consider(run.last_event_at + stalled_after);
            }
            let silence = self.options.config.silence_ms(&run.spec.provider);
            if let Some(at) = run.silence_deadline(silence) {
                consider(at);
            }
        }
        for w in &self.waiters {
            consider(w.deadline);
        }
        if let Some(at) = self.next_route_expiry() {
            consider(at);
        }
        next
    }

    /// Queues a batch for the ledger; its events are published after the commit. Batches
    /// queued in one turn of the loop share one transaction and one ack.
    pub fn commit(&self, batch: Batch) {
        let mut outbox = self.outbox.borrow_mut();
        outbox.ops.extend(batch.ops);
        outbox.events.extend(batch.events);
    }

    /// Answers after everything queued so far is committed.
    pub fn reply_after_commit(&self, reply: Reply, value: Result<Value, DroverError>) {
        self.outbox.borrow_mut().replies.push((reply, value));
    }

    /// Sends what the loop turn queued to the ledger and the publisher.
    fn flush_outbox(&self) {
        let outbox = std::mem::take(&mut *self.outbox.borrow_mut());
        if outbox.ops.is_empty() && outbox.events.is_empty() && outbox.replies.is_empty() {
            return;
        }
        let ack = self.writer.send_acked(outbox.ops);
        let _ = self.publish.send(Publication {
            ack,
            events: outbox.events,
            replies: outbox.replies,
        });
    }

    pub fn begin_shutdown(&mut self, done: Option<oneshot::Sender<()>>) {
        if self.shutdown_deadline.is_none() {
            self.shutdown_deadline = Some(self.now() + SHUTDOWN_GRACE_MS);
            let active: Vec<String> = self
                .order
                .iter()
                .filter(|id| self.runs.get(*id).is_some_and(|r| r.state.is_active()))
                .cloned()
                .collect();
            for id in active {
                self.end_run(
                    &id,
                    crate::run_state::RunState::Interrupted,
                    "shutdown",
                    crate::live_state::Cause::Stopped,
                );
            }
        }
        if let Some(done) = done {
            self.shutdown = Some(done);
        }
    }

    fn shutdown_finished(&self) -> bool {
        let Some(deadline) = self.shutdown_deadline else {
            return false;
        };
        let children = self.runs.values().any(|r| r.adapter.is_some());
        !children || self.now() >= deadline
    }

    async fn finish_shutdown(mut self) {
        // Anything still waiting is answered before the writer stops.
        let waiters = std::mem::take(&mut self.waiters);
        for w in waiters {
            let value = self.wait_outcome(&w, true);
            self.reply_after_commit(w.reply, Ok(value));
        }
        self.flush_outbox();
        let barrier = self.writer.send_acked(Vec::<WriteOp>::new());
        let _ = barrier.await;
        if let Some(ledger) = self.ledger.take() {
            let _ = tokio::task::spawn_blocking(move || ledger.close()).await;
        }
        if let Some(done) = self.shutdown.take() {
            let _ = done.send(());
        }
    }

    /// A fresh run id: short, sortable by creation, unique in this ledger.
    pub fn new_run_id(&mut self) -> String {
        loop {
            self.next_id += 1;
            let stamp = self.now() as u64;
            let id = format!("r{}{:0>2}", base36(stamp), base36(self.next_id % 1296));
            let taken =
                self.runs.contains_key(&id) || self.reader.run(&id).ok().flatten().is_some();
            if !taken {
                return id;
            }
        }
    }
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}
