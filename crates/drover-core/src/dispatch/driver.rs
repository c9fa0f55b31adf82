//! The dispatcher's driver: the one tokio task that feeds the [`Core`] and carries out
//! what it decides.
//!
//! It owns the clock, the channels, the ledger, the adapters and the replies: one
//! `select!` loop over client requests, adapter events, ledger answers and the core's
//! next deadline. For each input it reads the config again when the input asks for a
//! fresh one, hands the input to the core, and carries the effects out in order: commits
//! go to the publisher (one transaction per turn of the loop, events and replies after
//! the ack), launches go through [`providers::launch`] (their outcome goes straight back to
//! the core), commands go to the run's adapter, ledger reads go to the reader thread after
//! the commit, git work for workspaces runs in a task of its own (its outcome comes back
//! as an input, like a ledger answer).
//!
//! While the ledger cannot write (its [`Health`](crate::ledger::Health) says why), the core
//! is told and refuses new work; what the runs still send is kept, in order, until
//! [`DOWN_BUFFER_OPS`] writes wait, and then their output is no longer read (their CLIs
//! block on a full pipe) until the disk writes again
//! (docs/ARCHITECTURE.md §"When the disk cannot write").
//!
//! What must stay true: this task never blocks on a child or on SQLite (ledger reads run
//! on their own thread); it decides nothing — every rule is the core's.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use super::api::Response;
use super::core::{
    Core, Effect, Facts, Freshness, Input, InteractiveDone, InteractiveJob, Interactively,
    Launched, Read, ReplyTo,
};
use super::publish::{self, Publication, ReadJob};
use super::{DispatcherHandle, DispatcherOptions, Envelope, Reply};
use crate::config::Config;
use crate::dispatch::api::DispatchEvent;
use crate::ledger::{Ledger, LedgerOptions, LedgerWriter, WriteOp};
use crate::providers::{self, AdapterHandle, Launcher, ProviderEvent, RunProviderEvent};
use crate::{DroverError, UnixMillis};

/// Maps tokio's clock (virtual under paused time) to Unix milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_unix: UnixMillis,
    base: Instant,
}

impl Clock {
    /// A clock that reads the wall clock once, now, and counts on from there with
    /// tokio's.
    pub fn start() -> Clock {
        Clock {
            base_unix: crate::clock::now_millis(),
            base: Instant::now(),
        }
    }

    /// The time now, in ms since the Unix epoch.
    pub fn now(&self) -> UnixMillis {
        crate::clock::after(self.base_unix, self.base.elapsed())
    }

    /// The instant of `at`; one too far away to name is a year from now (the loop wakes,
    /// finds nothing due, and sleeps again).
    pub fn instant_at(&self, at: UnixMillis) -> Instant {
        let ahead =
            Duration::from_millis(u64::try_from(at.saturating_sub(self.base_unix)).unwrap_or(0));
        self.base
            .checked_add(ahead)
            .filter(|i| i.saturating_duration_since(Instant::now()) < FAR)
            .unwrap_or_else(|| Instant::now() + FAR)
    }
}

/// The facts of this machine the core may ask for.
struct SystemFacts;

impl Facts for SystemFacts {
    fn current_dir(&self) -> PathBuf {
        std::env::current_dir().unwrap_or_else(|_| "/".into())
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn cli_found(&self, command: &str) -> bool {
        which::which(command).is_ok()
    }

    fn sandbox_unavailable(&self) -> Option<crate::DroverError> {
        crate::providers::sandbox::probe().err()
    }

    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn in_git_work_tree(&self, dir: &Path) -> bool {
        crate::workspace::in_work_tree(dir)
    }

    fn repository_of(&self, dir: &Path) -> Option<PathBuf> {
        crate::workspace::git_common_dir(dir)
    }
}

/// The furthest the loop sleeps ahead.
const FAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Adapter events handled per turn of the loop before committing.
const PROVIDER_EVENTS_PER_TURN: usize = 512;
/// While the ledger cannot write, the runs' events are kept for it until this many writes
/// wait; then the runs' output is not read until it can (their CLIs pause on a full pipe).
pub const DOWN_BUFFER_OPS: usize = 20_000;
/// How long a stop waits for a ledger that cannot write before it ends without it (what
/// waits was never acknowledged).
const STOP_WAIT_FOR_LEDGER: Duration = Duration::from_secs(5);
/// On the hot path, the config file is looked at no more often than this.
const CONFIG_CHECK_MS: i64 = 500;

/// When the config file was last looked at, and the modification time it had.
struct ConfigWatch {
    path: PathBuf,
    mtime: Option<SystemTime>,
    checked_at: UnixMillis,
}

impl ConfigWatch {
    /// The config read again, when it changed since it was last read. A broken file is
    /// logged and the config in force is kept.
    fn changed(
        &mut self,
        freshness: Freshness,
        now: UnixMillis,
    ) -> Option<Result<Config, DroverError>> {
        match freshness {
            Freshness::Any => return None,
            Freshness::Throttled if now - self.checked_at < CONFIG_CHECK_MS => return None,
            _ => {}
        }
        self.checked_at = now;
        let mtime = config_mtime(&self.path);
        if mtime == self.mtime {
            return None;
        }
        self.mtime = mtime;
        match Config::load(&self.path) {
            Ok(config) => {
                tracing::info!(path = %self.path.display(), "config re-read");
                install_redactor(&config);
                Some(Ok(config))
            }
            // The core keeps the config in force and says so (log, footer, status).
            Err(e) => Some(Err(e)),
        }
    }
}

/// Notes each run's processes in the ledger (not the run's event stream: bookkeeping for
/// the next owner's recovery, like retention's deletes).
fn process_journal(writer: LedgerWriter, clock: Clock) -> crate::providers::sweep::ProcessJournal {
    use crate::providers::sweep::JournalEntry;
    let writer = std::sync::Mutex::new(writer);
    crate::providers::sweep::ProcessJournal::new(move |entry| {
        let op = match entry {
            JournalEntry::Noted {
                run_id,
                boot_id,
                processes,
            } => WriteOp::NoteProcesses {
                run_id,
                boot_id,
                processes,
                at: clock.now(),
            },
            JournalEntry::Swept { run_id } => WriteOp::ForgetProcesses { run_id },
        };
        let writer = writer.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writer.send(op);
    })
}

/// The process's redactor (logs, the ledger writer) for `config` and this environment.
fn install_redactor(config: &Config) {
    crate::redact::install(crate::redact::Redactor::from_config(config, |name| {
        std::env::var(name).ok()
    }));
}

fn config_mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

struct Driver {
    /// Where each launch's processes are noted (this dispatcher's ledger).
    journal: crate::providers::sweep::ProcessJournal,
    core: Core,
    clock: Clock,
    ledger: Option<Ledger>,
    writer: LedgerWriter,
    /// Whether the ledger can write ([`crate::ledger::Ledger::health`]).
    health: crate::ledger::Health,
    /// Writes sent since the ledger last could not write; while it cannot and these reach
    /// [`DOWN_BUFFER_OPS`], the runs' output is not read.
    waiting_ops: usize,
    /// Where notices ([`Effect::Notice`]) go at once.
    events: broadcast::Sender<super::Published>,
    publish: mpsc::UnboundedSender<Publication>,
    launcher: Launcher,
    adapters: HashMap<String, AdapterHandle>,
    replies: HashMap<ReplyTo, Reply>,
    next_reply: u64,
    outbox: Outbox,
    /// Where workspace jobs send their outcome (the same channel as ledger answers).
    workspace_done: mpsc::UnboundedSender<Input>,
    config: ConfigWatch,
    /// The notifier's `[notifications]`, sent again with each config read.
    notify_config: tokio::sync::watch::Sender<crate::config::NotificationsConfig>,
    shutdown: Option<oneshot::Sender<()>>,
}

pub async fn start(
    options: DispatcherOptions,
) -> Result<(DispatcherHandle, tokio::task::JoinHandle<()>), DroverError> {
    let clock = Clock::start();
    install_redactor(&options.config);
    // Whatever a CLI starts stays drover's to end (see `providers::sweep`).
    crate::providers::sweep::become_subreaper();
    let mut ledger_options = LedgerOptions {
        retention: crate::ledger::RetentionPolicy::from_limits(
            options.config.limits.retention_events_days,
            options.config.limits.retention_max_runs,
        ),
        ..LedgerOptions::default()
    };
    ledger_options.writer.gate = options.ledger_gate.clone();
    let path = options.paths.ledger_file.clone();
    let data_dir = options.paths.data_dir.clone();
    let now = clock.now();
    let (ledger, startup) = tokio::task::spawn_blocking(move || {
        let (ledger, recovery) = Ledger::open(&path, ledger_options, now)?;
        if !recovery.interrupted.is_empty() {
            tracing::info!(runs = ?recovery.interrupted, "runs left active whose rows do not read back were marked interrupted");
        }
        if recovery.processes_ended > 0 {
            tracing::info!(
                processes = recovery.processes_ended,
                "ended processes a crashed drover's runs left"
            );
        }
        let reader = ledger.reader()?;
        let startup = super::projections::startup(&reader, std::process::id(), &data_dir)?;
        Ok::<_, DroverError>((ledger, startup))
    })
    .await
    .map_err(|e| DroverError::new(crate::ErrorCode::Internal, e.to_string()))??;
    // The ledger's opening (its migrations, recovery and the startup read) is not run
    // again: its code need not stay mapped, nor what it freed (docs/ARCHITECTURE.md
    // §"Memory"). From here the heap keeps what a busy turn frees for the next.
    crate::resident::let_go();
    crate::resident::keep_freed_heap();
    end_left_on_hosts(&startup, &options.config, &options.paths).await;
    let core = Core::new(
        options.config.clone(),
        startup,
        Box::new(SystemFacts),
        clock.now(),
    )?;
    let (tx, rx) = mpsc::channel::<Envelope>(256);
    let (events, _) = broadcast::channel(4096);
    let (loaded_tx, loaded_rx) = mpsc::unbounded_channel();
    let reads = publish::spawn_reader(options.paths.ledger_file.clone(), loaded_tx.clone())?;
    let (publish_tx, publish_rx) = mpsc::unbounded_channel();
    let publisher = publish::spawn(publish_rx, events.clone(), reads);
    let (provider_tx, provider_rx) = mpsc::channel(1024);
    let journal = process_journal(ledger.writer(), clock);
    let focus = super::notify::Focus::default();
    let (notify_config, notify_rx) =
        tokio::sync::watch::channel(options.config.notifications.clone());
    let notifier = super::notify::spawn(notify_rx, events.subscribe(), focus.clone(), clock);
    let driver = Driver {
        journal,
        core,
        clock,
        writer: ledger.writer(),
        health: ledger.health(),
        waiting_ops: 0,
        events: events.clone(),
        ledger: Some(ledger),
        publish: publish_tx,
        launcher: Launcher {
            self_exe: options.self_exe.clone(),
            sink: provider_tx,
            data_dir: options.paths.data_dir.clone(),
        },
        adapters: HashMap::new(),
        replies: HashMap::new(),
        next_reply: 0,
        outbox: Outbox::default(),
        workspace_done: loaded_tx,
        config: ConfigWatch {
            mtime: config_mtime(&options.paths.config_file),
            path: options.paths.config_file.clone(),
            checked_at: now,
        },
        notify_config,
        shutdown: None,
    };
    let join = tokio::spawn(async move {
        driver.run(rx, provider_rx, loaded_rx).await;
        let _ = publisher.await;
        notifier.abort();
    });
    Ok((DispatcherHandle { tx, events, focus }, join))
}

impl Driver {
    async fn run(
        mut self,
        mut requests: mpsc::Receiver<Envelope>,
        mut provider_events: mpsc::Receiver<RunProviderEvent>,
        mut loaded: mpsc::UnboundedReceiver<Input>,
    ) {
        let mut requests_open = true;
        let mut health_open = true;
        loop {
            let (effects, next) = self.core.due(self.clock.now());
            self.carry_out(effects);
            self.flush();
            if self.core.shutdown_finished(self.clock.now()) {
                break;
            }
            let sleep = tokio::time::sleep_until(
                next.map(|at| self.clock.instant_at(at))
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600)),
            );
            tokio::select! {
                envelope = requests.recv(), if requests_open => match envelope {
                    Some(Envelope::Request(request, reply)) => {
                        let from = self.reply_to(reply);
                        self.input(Input::Request { from, request });
                    }
                    Some(Envelope::Shutdown(done)) => {
                        self.shutdown = Some(done);
                        self.input(Input::Shutdown);
                    }
                    None => {
                        requests_open = false;
                        self.input(Input::Shutdown);
                    }
                },
                changed = self.health.changed(), if health_open => match changed {
                    Ok(()) => {
                        let health = self.health.borrow_and_update().clone();
                        self.waiting_ops = 0;
                        self.input(Input::Ledger(health));
                    }
                    Err(_) => health_open = false,
                },
                Some(event) = provider_events.recv(), if !self.paused() => {
                    self.provider_event(event);
                    for _ in 1..PROVIDER_EVENTS_PER_TURN {
                        match provider_events.try_recv() {
                            Ok(event) => self.provider_event(event),
                            Err(_) => break,
                        }
                    }
                }
                Some(input) = loaded.recv() => self.input(input),
                _ = sleep => {}
            }
        }
        self.finish().await;
    }

    /// Whether the ledger cannot write and enough waits for it that the runs' output is
    /// left unread until it can.
    fn paused(&self) -> bool {
        self.ledger_unavailable() && self.waiting_ops >= DOWN_BUFFER_OPS
    }

    fn ledger_unavailable(&self) -> bool {
        self.health.borrow().is_some()
    }

    fn reply_to(&mut self, reply: Reply) -> ReplyTo {
        self.next_reply += 1;
        let to = ReplyTo(self.next_reply);
        self.replies.insert(to, reply);
        to
    }

    fn provider_event(&mut self, event: RunProviderEvent) {
        if matches!(event.event, ProviderEvent::Exited { .. }) {
            // The adapter has sent its last event. Forgotten before the core hears of it:
            // the exit may start the run's next CLI at once (a wake that waited for it),
            // whose adapter must not be the one dropped.
            self.adapters.remove(&*event.run_id);
        }
        self.input(Input::Provider(event));
    }

    /// Hands one input to the core (after reading the config again when it asks for a
    /// fresh one) and carries out what it decided.
    fn input(&mut self, input: Input) {
        let now = self.clock.now();
        if let Some(read) = self.config.changed(input.freshness(), now) {
            let input = match read {
                Ok(config) => {
                    self.notify_config
                        .send_replace(config.notifications.clone());
                    Input::Config(Box::new(config))
                }
                Err(refusal) => Input::ConfigRefused(refusal),
            };
            let effects = self.core.handle(input, now);
            self.carry_out(effects);
        }
        let effects = self.core.handle(input, now);
        self.carry_out(effects);
    }

    fn carry_out(&mut self, effects: Vec<Effect>) {
        let mut queue: VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            match effect {
                Effect::Commit(batch) => {
                    let (ops, events) = batch.into_parts();
                    self.outbox.ops.extend(ops);
                    self.outbox.events.extend(events);
                }
                Effect::Reply {
                    to,
                    answer,
                    after_commit,
                } => {
                    if let Some(reply) = self.replies.remove(&to) {
                        if after_commit {
                            self.outbox.replies.push((reply, answer));
                        } else {
                            let _ = reply.send(answer);
                        }
                    }
                }
                Effect::Launch(mut spec) => {
                    spec.journal = Some(self.journal.clone());
                    let run_id = spec.run_id.clone();
                    let outcome = providers::launch(*spec, &self.launcher).map(|handle| {
                        let pid = handle.pid;
                        self.adapters.insert(run_id.clone(), handle);
                        Launched { pid }
                    });
                    // Carried out after what the core asked for before it: its events
                    // were made later, so their seqs come later.
                    let more = self
                        .core
                        .handle(Input::Launched { run_id, outcome }, self.clock.now());
                    queue.extend(more);
                }
                Effect::Send { run_id, command } => {
                    if let Some(adapter) = self.adapters.get(&run_id) {
                        // A closed channel means the adapter is ending; its exit will
                        // end the run.
                        let _ = adapter.commands.send(command);
                    }
                }
                Effect::Read(Read::Answer { to, query }) => {
                    if let Some(reply) = self.replies.remove(&to) {
                        self.outbox.reads.push(ReadJob::Answer { reply, query });
                    }
                }
                Effect::Read(Read::Load { fetch, then }) => {
                    self.outbox.reads.push(ReadJob::Load { fetch, then });
                }
                Effect::Notice(event) => {
                    let _ = self.events.send(std::sync::Arc::new(*event));
                }
                Effect::Workspace(job) => {
                    // Git runs in a task of its own; its outcome comes back as an input.
                    let done = self.workspace_done.clone();
                    tokio::spawn(async move {
                        let (outcome, teardown) = crate::workspace::perform_with(
                            &job.run_id,
                            job.task.clone(),
                            job.teardown.clone(),
                            job.at.clone(),
                        )
                        .await;
                        let mut finished = job.done(outcome);
                        finished.teardown = teardown;
                        let _ = done.send(Input::Workspace(Box::new(finished)));
                    });
                }
                Effect::Reconnect(job) => {
                    // The host is tried in a task of its own; its outcome comes back as
                    // an input (docs/ARCHITECTURE.md §"Hosts").
                    let done = self.workspace_done.clone();
                    tokio::spawn(async move {
                        let timeout =
                            std::time::Duration::from_millis(job.timeout_ms.max(0) as u64);
                        let outcome = job.transport.try_end_group(&job.pid_file, timeout).await;
                        let _ = done.send(Input::Reconnected {
                            run_id: job.run_id,
                            outcome,
                        });
                    });
                }
                Effect::Interactive(job) => {
                    // Reading a session's record is file work: a blocking thread does it.
                    let done = self.workspace_done.clone();
                    let self_exe = self.launcher.self_exe.clone();
                    let data_dir = self.launcher.data_dir.clone();
                    tokio::task::spawn_blocking(move || {
                        let outcome = interactive(&job, &self_exe, &data_dir);
                        let _ = done.send(Input::Interactive(Box::new(InteractiveDone {
                            run_id: job.run_id,
                            reply: job.reply,
                            outcome,
                        })));
                    });
                }
            }
        }
    }

    /// Sends what the loop turn queued to the ledger and the publisher.
    fn flush(&mut self) {
        // The next turn's outbox starts as large as this one's was: a busy turn's
        // hundreds of events are not gathered by growing from empty again.
        let next = Outbox::sized_like(&self.outbox);
        let outbox = std::mem::replace(&mut self.outbox, next);
        if outbox.ops.is_empty()
            && outbox.events.is_empty()
            && outbox.replies.is_empty()
            && outbox.reads.is_empty()
        {
            return;
        }
        // While the ledger cannot write, a turn that wrote nothing is answered at once
        // (from memory, or from what is on disk): it does not wait behind writes that
        // wait for the disk.
        let ack = if self.ledger_unavailable() && outbox.ops.is_empty() {
            None
        } else {
            if self.ledger_unavailable() {
                self.waiting_ops += outbox.ops.len();
            }
            Some(self.writer.send_staged(outbox.ops))
        };
        let _ = self.publish.send(Publication {
            ack,
            events: outbox.events,
            replies: outbox.replies,
            reads: outbox.reads,
        });
    }

    async fn finish(mut self) {
        // Anything still waiting is answered before the writer stops.
        let effects = self.core.finish(self.clock.now());
        self.carry_out(effects);
        self.flush();
        let barrier = self.writer.send_acked(Vec::<WriteOp>::new());
        // A ledger that cannot write is given a moment, not forever: what still waits
        // for it was never acknowledged.
        let mut health = self.health.clone();
        let unavailable = async move {
            loop {
                if health.borrow_and_update().is_some() {
                    tokio::time::sleep(STOP_WAIT_FOR_LEDGER).await;
                    return;
                }
                if health.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            _ = barrier => {}
            _ = unavailable => {
                tracing::warn!("stopping while the ledger cannot write: what was not recorded was never acknowledged");
            }
        }
        if let Some(ledger) = self.ledger.take() {
            let _ = tokio::task::spawn_blocking(move || ledger.close()).await;
        }
        if let Some(done) = self.shutdown.take() {
            let _ = done.send(());
        }
    }
}

/// What one turn of the loop produced, committed together.
#[derive(Default)]
struct Outbox {
    ops: Vec<WriteOp>,
    events: Vec<DispatchEvent>,
    replies: Vec<(Reply, Result<Response, DroverError>)>,
    reads: Vec<ReadJob>,
}

impl Outbox {
    /// An empty outbox with room for as many ops and events as `last` holds.
    fn sized_like(last: &Outbox) -> Outbox {
        Outbox {
            ops: Vec::with_capacity(last.ops.len()),
            events: Vec::with_capacity(last.events.len()),
            ..Outbox::default()
        }
    }
}

/// Carries out an [`InteractiveJob`]: the take-over's command, or the turns the session
/// recorded since the take-over.
fn interactive(
    job: &InteractiveJob,
    self_exe: &std::path::Path,
    data_dir: &std::path::Path,
) -> Result<Interactively, String> {
    let (plan, record) =
        providers::registry::interactive((*job.spec).clone(), &job.session, self_exe, data_dir)?;
    match job.read_since {
        None => Ok(Interactively::Planned(Box::new(plan))),
        Some(since) => {
            providers::interactive::read_back(record, &plan, since).map(Interactively::Read)
        }
    }
}

/// The sweep of a crashed owner's runs on other hosts (docs/ARCHITECTURE.md §"Hosts"):
/// for each run put back that ran on a host, what is left of its process group there
/// is ended through the host's transport, and its pid file removed, before any run
/// starts again (a woken run writes the file anew). A host that does not answer is
/// logged and skipped, each bounded.
async fn end_left_on_hosts(
    startup: &super::reads::Startup,
    config: &crate::config::Config,
    paths: &crate::paths::Paths,
) {
    use crate::providers::transport::{Transport, pid_file};
    let ssh_dir = paths.ssh_dir();
    let ends = startup.restored.iter().filter_map(|run| {
        let host = run.view.head.host.as_deref()?;
        let transport = Transport::named(host, &config.hosts, &ssh_dir).ok()?;
        let file = pid_file(&run.view.head.run_id);
        Some(async move { transport.end_group(&file).await })
    });
    futures::future::join_all(ends).await;
}
