//! The dispatcher's core: its state and every decision of the run lifecycle, as plain code.
//!
//! [`Core::handle`] takes one [`Input`] — a client request, a provider event, the outcome
//! of a launch, the answer to a ledger read, a config change, shutdown — at a given time,
//! and returns [`Effect`]s as data: commit this batch (its events are published after the
//! commit), reply, launch an adapter with this [`LaunchSpec`], send this
//! [`ProviderCommand`], read this from the ledger. [`Core::due`] fires every timer that is
//! due and names the next one. The driver (`super::driver`) owns the clock, the channels,
//! the ledger and the children, and carries the effects out in order.
//!
//! What must stay true:
//! - no tokio, no channels, no ledger handle, no clock, no file system or process call in
//!   here: time comes with each input, and the few facts of the machine a decision needs
//!   (the current directory, whether a path is a directory, whether a CLI is installed,
//!   whether a directory is inside a git work tree) come through [`Facts`], which tests
//!   fake; git itself runs as an [`Effect::Workspace`], its outcome an
//!   [`Input::Workspace`];
//! - every change to a run goes through a [`Batch`] (ledger ops, then the events to publish
//!   once they are committed), so nothing reaches a subscriber that is not on disk;
//! - a refused request changes nothing; an accepted one is answered after its commit;
//! - the core matches no provider names: what it must know about a provider comes from
//!   [`crate::providers::traits`].
//!
//! Where each rule lives:
//!
//! | rule | file |
//! | --- | --- |
//! | admission: validation → route → a provider that can start → rails → money, idempotency; sub-runs (depth, workflow, cap inside the parent's) | `admission.rs` |
//! | launch, turns sent, the end of a run, the queue | `lifecycle.rs` |
//! | what each provider event does: turns, results, retries, follow-ups, max turns | `provider_events.rs` |
//! | the words of a failure: a child that ended by itself, a turn ended with an error | `causes.rs` |
//! | permission requests, answers, "allow always", policies; answers to requests a restart left pending, carried to the resumed session | `answers.rs`, `broker.rs` |
//! | approval rules (kept, removed, applied to requests) and the guard's flag | `rules.rs` |
//! | client requests: follow-up (kept in the ledger while queued), stop, complete, remove, kill-all, views | `requests.rs` |
//! | every timer: idle, hibernate, re-send, time box, answers, silence, stalled, routes, waits | `timers.rs` |
//! | money: fitting caps, reserving money for a turn, turns that wait in the queue for their money (a first turn, a follow-up; in order; `--no-queue` refusals name the runs holding it), booking usage, caps checked, budget sessions, config changes | `money.rs` |
//! | route cards and escalation offers | `routes.rs` |
//! | a restart: the runs a previous owner left put back where they were; what a stopping owner leaves | `restore.rs` |
//! | resume of an interrupted run (and of a hibernated one, with the user's words) | `resume.rs` |
//! | take-over: a run handed to the user in its CLI's own interface, and taken back with what happened there | `takeover.rs` |
//! | idle runs: hibernating (by time, or for the slot of a queued or `--no-queue` run: one planner, run where slots or the queue change), waking in the provider session | `hibernation.rs` |
//! | a turn the model API failed, held in `waiting_provider` and sent again | `resend.rs` |
//! | a run on a host whose connection dropped: `waiting_host`, reconnecting with a growing wait, then going on in its session there or failing | `host_drop.rs` |
//! | waits | `waits.rs` |
//! | one run in memory, its batches, its views | `run.rs` |
//! | rails and the queue order | `rails.rs` |
//! | wrap up, then stop: the wrap-up turn before the time box, at the last allowed turn, near the dollar cap, or on a soft stop; its bound | `wrap_up.rs` |
//! | workspaces: worktree or shared, waiting for a shared directory, making the worktree before the launch, the run's change, diff, merge, keep, discard, a pull request (`workspaces/pulls.rs`), the setup and the repository's scripts held for the user's approval, their teardown (`workspaces/scripts.rs`), removing runs (with unmerged work, or whose worktree is gone: released) | `workspaces.rs` |

mod admission;
mod answers;
pub(crate) mod broker;
mod causes;
mod hibernation;
pub mod host_drop;
mod lifecycle;
mod money;
pub(crate) mod prompts;
mod provider_events;
pub mod rails;
mod requests;
mod resend;
mod restore;
mod resume;
mod routes;
mod rules;
mod run;
mod takeover;
mod timers;
pub(crate) mod transcript;
mod waits;
mod workspaces;
mod wrap_up;

#[cfg(test)]
mod tests;

pub use hibernation::ROOM_DETAIL;
pub use money::SESSION_KEY;
pub use requests::{FOLLOW_UP_QUEUED, FOLLOW_UP_SENT};
pub use restore::{INTERRUPTED_DETAIL, INTERRUPTED_NO_SESSION_DETAIL};
pub use routes::memory_key as route_memory_key;
pub use rules::RULES_HIGH_WATER;
pub use run::{Batch, HIBERNATED_DETAIL, HIBERNATING_DETAIL, TurnOrigin, WAKING_DETAIL};
pub use takeover::{InteractiveDone, InteractiveJob, Interactively, TakenOver};
pub use waits::WaitAsk;
pub use workspaces::{Action as WorkspaceAction, PREPARE_WORKTREE_BOUND_MS, RUNNING_SETUP};
pub use wrap_up::STOPPED_SOFT;

/// The budget session runs belong to until the user starts another.
pub const DEFAULT_SESSION: &str = "default";
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use super::api::{Removed, Request, Response, RunSummary};
pub use super::reads::{Fetch, Fetched, LoadedSession, Query, REMOVE_PAGE, ResumeData, Startup};
use crate::config::{Config, Limits};
use crate::ledger::WriteOp;
use crate::providers::{LaunchError, LaunchSpec, ProviderCommand, RunProviderEvent};
use crate::run_state::RunState;
use crate::spec::SpecInput;
use crate::{DroverError, ErrorCode, UnixMillis};

use run::Run;
use waits::Waiter;

/// Who gets a reply: a token the driver maps to its channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplyTo(pub u64);

/// What the core may ask of the machine, synchronously: cheap, local facts, never the
/// ledger. The driver's implementation asks the file system and `PATH`; tests fake it.
pub trait Facts {
    /// The directory a relative `cwd` is resolved against.
    fn current_dir(&self) -> PathBuf;
    /// Whether `path` names an existing directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Whether a provider's CLI command is found (on `PATH`, or as a path).
    fn cli_found(&self, command: &str) -> bool;
    /// Why a sandboxed run cannot start here (`SANDBOX_UNAVAILABLE`: bubblewrap missing or
    /// unable to make its namespaces), or `None` when it can (docs/ARCHITECTURE.md
    /// §"The sandbox").
    fn sandbox_unavailable(&self) -> Option<DroverError>;
    /// The value of an environment variable of drover's (for the redactor: the values of
    /// the variables config names are secrets). None by default.
    fn env(&self, _name: &str) -> Option<String> {
        None
    }

    /// Whether `dir` is inside a git work tree (at a glance: a `.git` in it or above it).
    fn in_git_work_tree(&self, dir: &Path) -> bool;

    /// The git common directory of the repository `dir` is in: one for the main checkout
    /// and all its worktrees (what a repository-scoped rule names). None by default.
    fn repository_of(&self, _dir: &Path) -> Option<PathBuf> {
        None
    }
}

/// One thing for the core to decide on.
#[derive(Debug)]
pub enum Input {
    /// A client's request; its answer goes to `from`.
    Request {
        /// Who gets the answer.
        from: ReplyTo,
        /// The request.
        request: Request,
    },
    /// An adapter's event.
    Provider(RunProviderEvent),
    /// The outcome of an [`Effect::Launch`] (the driver reports it at once).
    Launched {
        /// The run whose adapter was started.
        run_id: String,
        /// Its pid, or why it could not start.
        outcome: Result<Launched, LaunchError>,
    },
    /// The answer to an [`Effect::Read`] of [`Read::Load`].
    Loaded {
        /// What the core was doing when it asked.
        then: Then,
        /// What the ledger gave back.
        answer: Result<Fetched, DroverError>,
    },
    /// The outcome of an [`Effect::Workspace`].
    Workspace(Box<WorkspaceDone>),
    /// The outcome of an [`Effect::Interactive`].
    Interactive(Box<InteractiveDone>),
    /// The outcome of an [`Effect::Reconnect`]: the host answered and the run's old group
    /// there is ended, or why not.
    Reconnected {
        /// The run whose host it is.
        run_id: String,
        /// `Err`: why the host did not answer.
        outcome: Result<(), String>,
    },
    /// The config file changed and was read again.
    Config(Box<Config>),
    /// The config file changed and could not be read (the refusal says why).
    ConfigRefused(DroverError),
    /// The ledger stopped being able to write (why), or can again (`None`).
    Ledger(Option<String>),
    /// Stop every run's CLI and wind down: a run in a turn is interrupted, every other
    /// run is left as it is for the next owner (docs/ARCHITECTURE.md §"A restart").
    Shutdown,
}

/// A started adapter, as the core knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Launched {
    /// The child's pid (its process group id).
    pub pid: Option<u32>,
}

/// How fresh the config must be before an input is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Look at the config file first, every time (a dispatch, a follow-up, a turn end…).
    Always,
    /// Look at it at most every half second (the hot path: streamed usage).
    Throttled,
    /// The config in force will do.
    Any,
}

impl Input {
    /// Whether the driver should look at the config file before handing this over.
    pub fn freshness(&self) -> Freshness {
        use crate::providers::ProviderEvent;
        match self {
            Input::Request {
                request:
                    Request::Dispatch { .. }
                    | Request::FollowUp { .. }
                    | Request::Resume { .. }
                    | Request::Wake { .. }
                    | Request::TakeOver { .. }
                    | Request::Route { .. }
                    | Request::Escalate { .. }
                    | Request::Retry { .. },
                ..
            } => Freshness::Always,
            // `drover status` (and the dashboard's link) asks how the owner is: a config
            // reload it refuses is part of the answer.
            Input::Request {
                request: Request::Ping,
                ..
            } => Freshness::Throttled,
            Input::Provider(e) => match e.event {
                ProviderEvent::TurnCompleted(_) => Freshness::Always,
                ProviderEvent::Usage { .. } => Freshness::Throttled,
                _ => Freshness::Any,
            },
            _ => Freshness::Any,
        }
    }
}

/// What the core asks the driver to do, in order.
#[derive(Debug)]
pub enum Effect {
    /// Write these ops; publish these events once they are committed. Batches of one turn
    /// of the driver's loop share one transaction.
    Commit(Batch),
    /// Answer a client: after everything committed so far, or at once.
    Reply {
        /// Who gets the answer.
        to: ReplyTo,
        /// The answer.
        answer: Result<Response, DroverError>,
        /// Wait until everything committed so far is on disk.
        after_commit: bool,
    },
    /// Start a run's adapter; report the outcome as [`Input::Launched`].
    Launch(Box<LaunchSpec>),
    /// Send a command to a run's adapter.
    Send {
        /// The run whose adapter gets it.
        run_id: String,
        /// The command.
        command: ProviderCommand,
    },
    /// Read the ledger off the dispatcher's task, after everything committed so far.
    Read(Read),
    /// Publish at once, before anything waiting for a commit: news of the owner itself
    /// ([`DispatchEvent::Health`]), which changes nothing in the ledger.
    Notice(Box<super::api::DispatchEvent>),
    /// Run git work for a run's workspace off the dispatcher's task; report the outcome
    /// as [`Input::Workspace`].
    Workspace(Box<WorkspaceJob>),
    /// Make a take-over's command, or read the CLI's record of the session, off the
    /// dispatcher's task; report the outcome as [`Input::Interactive`].
    Interactive(Box<InteractiveJob>),
    /// Reconnect to a run's host whose connection dropped, off the dispatcher's task;
    /// report the outcome as [`Input::Reconnected`].
    Reconnect(Box<host_drop::ReconnectJob>),
}

/// Git work for one run's workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceJob {
    /// The run whose workspace it is (empty for a prune at start).
    pub run_id: String,
    /// The git work.
    pub task: crate::workspace::Task,
    /// Where it runs: here, or on the run's host (docs/ARCHITECTURE.md §"Hosts").
    pub at: crate::workspace::git::Where,
    /// Who waits for the outcome (`diff`, `merge`, `keep`, `discard`).
    pub reply: Option<ReplyTo>,
    /// The run's row, for a run that is not in memory: published again once its
    /// workspace changed.
    pub row: Option<Box<RunSummary>>,
    /// For a task that removes the worktree: the repository's teardown, run first when
    /// its hash is the approved one (docs/ARCHITECTURE.md §"Workspaces").
    pub teardown: Option<crate::workspace::scripts::Teardown>,
}

/// What an [`Effect::Workspace`] came to, with what the job carried.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceDone {
    /// The run whose workspace it is.
    pub run_id: String,
    /// Who waits for the outcome.
    pub reply: Option<ReplyTo>,
    /// The run's row, for a run that is not in memory.
    pub row: Option<Box<RunSummary>>,
    /// The task that was carried out.
    pub task: crate::workspace::Task,
    /// What the task came to.
    pub outcome: Result<crate::workspace::Outcome, DroverError>,
    /// What the worktree's teardown came to, when one was due (for the run's notes).
    pub teardown: Option<String>,
}

impl WorkspaceJob {
    /// The job's outcome, to hand back to the core.
    pub fn done(self, outcome: Result<crate::workspace::Outcome, DroverError>) -> WorkspaceDone {
        WorkspaceDone {
            run_id: self.run_id,
            reply: self.reply,
            row: self.row,
            task: self.task,
            outcome,
            teardown: None,
        }
    }
}

/// A ledger read.
#[derive(Debug)]
pub enum Read {
    /// Answer a client from the ledger: the core has nothing more to decide.
    Answer {
        /// Who gets the answer.
        to: ReplyTo,
        /// What to read and answer with.
        query: Query,
    },
    /// Read, then give the answer back as [`Input::Loaded`] with `then`.
    Load {
        /// What to read.
        fetch: Fetch,
        /// What the core was doing.
        then: Then,
    },
}

/// What the core was doing when it asked for a read.
#[derive(Debug, Clone, PartialEq)]
pub enum Then {
    /// A dispatch whose idempotency key was not in memory.
    Dispatch {
        /// Who gets the answer.
        to: ReplyTo,
        /// The dispatch.
        input: Box<SpecInput>,
    },
    /// A wait naming runs that are not in memory: their rows from the ledger.
    Wait {
        /// Who gets the answer.
        to: ReplyTo,
        /// The wait.
        wait: waits::WaitAsk,
    },
    /// A `remove` of a run that is not in memory: its row from the ledger.
    RemoveOne {
        /// Who gets the answer.
        to: ReplyTo,
        /// The run to remove.
        run_id: String,
        /// Remove it even with unmerged work.
        force: bool,
    },
    /// `remove --finished`, a page at a time: what the pages before removed, and the
    /// last run of the page before (`None` on the first page).
    RemoveFinished {
        /// Who gets the answer.
        to: ReplyTo,
        /// Remove runs even with unmerged work.
        force: bool,
        /// What the pages before removed.
        so_far: Removed,
        /// The last run of the page before.
        before: Option<String>,
    },
    /// `budget_new` of a session that is not in memory: its record and spend from the
    /// ledger.
    BudgetNew {
        /// Who gets the answer.
        to: ReplyTo,
        /// The new session's name.
        name: String,
    },
    /// A workspace request on a run that is not in memory.
    Workspace {
        /// Who gets the answer.
        to: ReplyTo,
        /// The run whose worktree it is.
        run_id: String,
        /// What to do with its worktree.
        action: WorkspaceAction,
    },
}

/// The dispatcher's state.
pub struct Core {
    config: Config,
    facts: Box<dyn Facts + Send>,
    /// The time of the input being handled.
    now: UnixMillis,
    pid: u32,
    version: String,
    /// When the core started (the answer to `ping`).
    started_at: UnixMillis,
    runs: HashMap<String, Run>,
    /// Run ids in creation order.
    order: Vec<String>,
    queue: VecDeque<String>,
    waiters: Vec<Waiter>,
    next_id: u64,
    /// New run ids are stamped no earlier than this (after the ledger's newest run).
    id_floor: UnixMillis,
    /// When shutting down, the moment to give up waiting for children.
    shutdown_deadline: Option<UnixMillis>,
    money: money::Money,
    /// Remembered route choices: task class → `provider/model`.
    route_memory: HashMap<String, String>,
    /// The approval rules (loaded at start, changed by `rule_add` and `rule_remove`).
    rules: crate::rules::RuleSet,
    /// The repository scripts the user approved, by repository and kind (loaded at start,
    /// changed by `approve_scripts`).
    script_approvals: HashMap<
        (String, crate::workspace::scripts::ScriptKind),
        crate::workspace::scripts::ApprovedScript,
    >,
    /// The guard's extra command patterns, from `[guard] commands`.
    guard_extra: Vec<crate::rules::pattern::CommandPattern>,
    /// Replies showing a run whose launch is under way: sent once its outcome is in, so
    /// they show where the run is (starting, or failed).
    after_launch: Vec<(ReplyTo, String)>,
    /// The data directory (the default worktree root is under it).
    data_dir: PathBuf,
    /// Runs with a merge, keep or discard under way.
    workspace_busy: std::collections::HashSet<String>,
    /// Workspace jobs asked for whose outcome is not in yet (shutdown waits for them).
    jobs_in_flight: usize,
    /// The run whose open pull request the timer is reading again (one at a time), and
    /// when each run's was last asked for (a read that fails waits its turn again).
    pr_refresh: workspaces::PrRefresh,
    out: Vec<Effect>,
    /// Every secret of every input is redacted with this before it is stored or shown
    /// ([`crate::redact`]); built from the config and the environment it names.
    redactor: crate::redact::Redactor,
    /// Which commands are tests (`[evidence] tests`, docs/ARCHITECTURE.md §"Evidence").
    tests: crate::evidence::Classifier,
    /// The last config reload that was refused, while no good one followed.
    config_refused: Option<String>,
    /// Why the ledger cannot write, while it cannot: new work is refused
    /// (docs/ARCHITECTURE.md §"When the disk cannot write").
    ledger_unavailable: Option<String>,
}

/// How long shutdown waits for children to exit before giving up on them.
pub(super) const SHUTDOWN_GRACE_MS: i64 = 15_000;

impl Core {
    /// The core at `now`, from the config and what the ledger held at startup.
    pub fn new(
        config: Config,
        startup: Startup,
        facts: Box<dyn Facts + Send>,
        now: UnixMillis,
    ) -> Result<Core, DroverError> {
        let money = money::Money::new(&config, startup.session)?;
        crate::providers::registry::register_configured(&config);
        let redactor = crate::redact::Redactor::from_config(&config, |name| facts.env(name));
        let mut out = Vec::new();
        let mut jobs_in_flight = 0;
        if !startup.checkouts.is_empty() {
            // Worktrees deleted outside drover leave entries in their repository: gone.
            jobs_in_flight += 1;
            out.push(Effect::Workspace(Box::new(WorkspaceJob {
                run_id: String::new(),
                task: crate::workspace::Task::Prune {
                    checkouts: startup.checkouts,
                },
                at: crate::workspace::git::Where::Here,
                reply: None,
                row: None,
                teardown: None,
            })));
        }
        let mut rules = crate::rules::RuleSet::default();
        rules.given_up_to(startup.rules_high_water);
        for rule in startup.rules {
            // A rule this build cannot read (or one over the bound) is left out, not fatal.
            if let Err(e) = rules.add(rule) {
                tracing::warn!(error = %e, "an approval rule in the ledger is left out");
            }
        }
        let guard_extra = config.guard.patterns();
        let restored = startup.restored;
        let script_approvals = startup
            .script_approvals
            .into_iter()
            .map(|a| ((a.repository.clone(), a.kind), a))
            .collect();
        let mut core = Core {
            tests: crate::evidence::Classifier::new(&config.evidence.tests),
            rules,
            script_approvals,
            guard_extra,
            redactor,
            config_refused: None,
            ledger_unavailable: None,
            config,
            facts,
            now,
            pid: startup.pid,
            version: startup.version,
            started_at: now,
            runs: HashMap::new(),
            order: Vec::new(),
            queue: VecDeque::new(),
            waiters: Vec::new(),
            next_id: 0,
            id_floor: startup.newest_run_at.map_or(0, |at| at + 1),
            shutdown_deadline: None,
            money,
            route_memory: startup.route_memory.into_iter().collect(),
            after_launch: Vec::new(),
            data_dir: startup.data_dir,
            workspace_busy: Default::default(),
            jobs_in_flight,
            pr_refresh: Default::default(),
            out,
        };
        // The runs a previous owner left active, back where they were.
        let to_interrupt: Vec<String> = restored
            .into_iter()
            .filter_map(|data| core.restore(data))
            .collect();
        core.settle_restored(to_interrupt);
        Ok(core)
    }

    /// Decides on one input; returns what to do, in order.
    pub fn handle(&mut self, input: Input, now: UnixMillis) -> Vec<Effect> {
        self.now = now;
        match input {
            Input::Request { from, request } => self.on_request(from, request),
            Input::Provider(event) => self.on_provider_event(event),
            Input::Launched { run_id, outcome } => self.on_launched(&run_id, outcome),
            Input::Workspace(done) => self.on_workspace_done(*done),
            Input::Interactive(done) => self.on_interactive_done(*done),
            Input::Reconnected { run_id, outcome } => self.on_reconnected(&run_id, outcome),
            Input::Loaded { then, answer } => self.on_loaded(then, answer),
            Input::Config(config) => self.on_config(*config),
            Input::ConfigRefused(refusal) => self.on_config_refused(refusal),
            Input::Ledger(health) => self.on_ledger(health),
            Input::Shutdown => self.begin_shutdown(),
        }
        self.recheck_money();
        std::mem::take(&mut self.out)
    }

    /// Fires every timer due at `now`; returns what to do and when the next one is due.
    pub fn due(&mut self, now: UnixMillis) -> (Vec<Effect>, Option<UnixMillis>) {
        self.now = now;
        self.fire_timers();
        self.recheck_money();
        let next = self.next_deadline();
        (std::mem::take(&mut self.out), next)
    }

    /// Whether shutdown is done: no child is left and no git work is under way, or the
    /// grace period is over.
    pub fn shutdown_finished(&self, now: UnixMillis) -> bool {
        let Some(deadline) = self.shutdown_deadline else {
            return false;
        };
        let children = self.runs.values().any(|r| r.child.is_some());
        (!children && self.jobs_in_flight == 0) || now >= deadline
    }

    /// The last effects before the driver stops: every wait still open is answered.
    pub fn finish(&mut self, now: UnixMillis) -> Vec<Effect> {
        self.now = now;
        for w in std::mem::take(&mut self.waiters) {
            let outcome = self.wait_outcome(&w, true);
            self.reply(w.to, Ok(Response::Wait(outcome)));
        }
        std::mem::take(&mut self.out)
    }

    /// Every run id the core holds a child for (the driver's adapters must match).
    pub fn children(&self) -> impl Iterator<Item = &str> {
        self.runs
            .values()
            .filter(|r| r.child.is_some())
            .map(|r| r.id.as_str())
    }

    // ---- effects ----

    /// Adds a note to run `run_id` in its own batch; `false` when the run is not in
    /// memory (nothing is written).
    fn note_run(&mut self, run_id: &str, text: String) -> bool {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return false;
        };
        let mut batch = Batch::default();
        run.note(&mut batch, text, now);
        self.commit(batch);
        true
    }

    /// Queues a batch for the ledger; its events are published after the commit. The
    /// writer stores what it is given, so every op's text is redacted here — but a
    /// provider event's transcript entry, made of the event redacted where it came in
    /// (docs/ARCHITECTURE.md §"Secrets").
    fn commit(&mut self, mut batch: Batch) {
        for op in &mut batch.ops {
            let redacted_at_intake = matches!(
                op,
                WriteOp::AppendEvent(e) if e.kind == crate::dispatch::projections::TRANSCRIPT_EVENT
            );
            if !redacted_at_intake {
                op.redact(&self.redactor);
            }
        }
        if !batch.ops.is_empty() || !batch.events.is_empty() {
            self.out.push(Effect::Commit(batch));
        }
    }

    /// Answers after everything queued so far is committed. An answer showing a run whose
    /// launch is under way waits for the launch's outcome.
    fn reply(&mut self, to: ReplyTo, answer: Result<Response, DroverError>) {
        if let Ok(Response::Run(run)) = &answer
            && self.runs.get(&run.head.run_id).is_some_and(|r| r.launching)
        {
            self.after_launch.push((to, run.head.run_id.clone()));
            return;
        }
        self.out.push(Effect::Reply {
            to,
            answer,
            after_commit: true,
        });
    }

    /// Answers at once (a refusal that changed nothing).
    fn reply_now(&mut self, to: ReplyTo, answer: Result<Response, DroverError>) {
        self.out.push(Effect::Reply {
            to,
            answer,
            after_commit: false,
        });
    }

    fn send(&mut self, run_id: &str, command: ProviderCommand) {
        self.out.push(Effect::Send {
            run_id: run_id.to_string(),
            command,
        });
    }

    fn answer_from_ledger(&mut self, to: ReplyTo, query: Query) {
        self.out.push(Effect::Read(Read::Answer { to, query }));
    }

    fn load(&mut self, fetch: Fetch, then: Then) {
        self.out.push(Effect::Read(Read::Load { fetch, then }));
    }

    /// The owner's health, whole, as an event for every subscriber.
    fn health(&self) -> super::api::DispatchEvent {
        super::api::DispatchEvent::Health {
            config_refused: self.config_refused.clone(),
            ledger_unavailable: self.ledger_unavailable.clone(),
        }
    }

    /// Publishes the owner's health at once (it waits for no commit).
    fn notice_health(&mut self) {
        let health = self.health();
        self.out.push(Effect::Notice(Box::new(health)));
    }

    /// The ledger can no longer write (why), or can again: new work is refused meanwhile
    /// ([`Core::refuse_while_ledger_unavailable`]), and every subscriber is told.
    fn on_ledger(&mut self, health: Option<String>) {
        if self.ledger_unavailable == health {
            return;
        }
        match &health {
            Some(why) => {
                tracing::error!(%why, "the ledger cannot write: new work is refused until it can")
            }
            None => tracing::info!("the ledger writes again: new work is taken"),
        }
        self.ledger_unavailable = health;
        self.notice_health();
    }

    /// The refusal of a request that would change something while the ledger cannot
    /// write: nothing was changed. Reads, `stop` and `kill-all` are taken (the user stays
    /// in control of what runs; their record waits for the disk, like their answer).
    fn refuse_while_ledger_unavailable(&self, request: &Request) -> Option<DroverError> {
        let why = self.ledger_unavailable.as_ref()?;
        let taken = matches!(
            request,
            Request::Ping
                | Request::Runs { .. }
                | Request::Counts
                | Request::Show { .. }
                | Request::Transcript { .. }
                | Request::Diff { .. }
                | Request::Budget
                | Request::Routes
                | Request::Wait { .. }
                | Request::Rules
                | Request::Search { .. }
                | Request::Spend { .. }
                | Request::Focus { .. }
                | Request::Subscribe { .. }
                | Request::Stop { .. }
                | Request::KillAll { .. }
        );
        (!taken).then(|| ledger_unavailable(why))
    }

    // ---- small shared reads of state ----

    fn limits(&self) -> &Limits {
        &self.config.limits
    }

    fn shutting_down(&self) -> bool {
        self.shutdown_deadline.is_some()
    }

    /// A run's summary as a reply (`RUN_NOT_FOUND` when it is not in memory).
    fn summary_response(&self, run_id: &str) -> Result<Response, DroverError> {
        self.runs
            .get(run_id)
            .map(|r| Response::Run(Box::new(r.summary())))
            .ok_or_else(|| not_found(run_id))
    }

    /// Active runs, in creation order.
    fn active_ids(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|id| self.runs.get(*id).is_some_and(|r| r.state().is_active()))
            .cloned()
            .collect()
    }

    /// A fresh run id: short, sortable by creation, unique in this ledger (stamped after
    /// the ledger's newest run and checked against the runs in memory).
    fn new_run_id(&mut self) -> String {
        loop {
            self.next_id += 1;
            let stamp = self.now.max(self.id_floor).max(0) as u64;
            let id = format!(
                "r{}{:0>2}",
                crate::text::base36(stamp),
                crate::text::base36(self.next_id % 1296)
            );
            if !self.runs.contains_key(&id) {
                return id;
            }
        }
    }

    fn on_loaded(&mut self, then: Then, answer: Result<Fetched, DroverError>) {
        match then {
            Then::Dispatch { to, input } => self.dispatch_loaded(to, *input, answer),
            Then::Wait { to, wait } => self.wait_loaded(to, wait, answer),
            Then::RemoveOne { to, run_id, force } => {
                let result = answer.and_then(|fetched| match fetched {
                    Fetched::Summaries(rows) => self.remove_loaded(&run_id, rows, force),
                    other => Err(unexpected(&other)),
                });
                self.reply(to, result);
            }
            Then::RemoveFinished {
                to,
                force,
                so_far,
                before,
            } => match answer {
                Ok(Fetched::Summaries(rows)) => {
                    self.remove_finished(to, rows, force, so_far, before.is_none())
                }
                Ok(other) => self.reply(to, Err(unexpected(&other))),
                Err(e) => self.reply(to, Err(e)),
            },
            Then::Workspace { to, run_id, action } => match answer {
                Ok(Fetched::View(view)) => self.workspace_loaded(to, &run_id, action, *view),
                Ok(other) => self.reply_now(to, Err(unexpected(&other))),
                Err(e) => self.reply_now(to, Err(e)),
            },
            Then::BudgetNew { to, name } => match answer {
                Ok(Fetched::Session(session)) => self.budget_new_loaded(to, name, session),
                Ok(other) => self.reply(to, Err(unexpected(&other))),
                Err(e) => self.reply(to, Err(e)),
            },
        }
    }
}

fn unexpected(fetched: &Fetched) -> DroverError {
    DroverError::new(
        ErrorCode::Internal,
        format!("the ledger read answered in an unexpected shape ({fetched:?})"),
    )
}

pub(crate) fn not_found(run_id: &str) -> DroverError {
    DroverError::new(
        ErrorCode::RunNotFound,
        format!("no run {run_id}; list runs with `drover runs`"),
    )
}

/// `WORKFLOW_NOT_FOUND` for `workflow`.
pub(crate) fn workflow_not_found(workflow: &str) -> DroverError {
    DroverError::new(
        ErrorCode::WorkflowNotFound,
        format!(
            "no run is in workflow {workflow}; `drover runs` lists the runs with their workflows"
        ),
    )
}

/// The refusal of new work while the ledger cannot write (`why`).
pub(crate) fn ledger_unavailable(why: &str) -> DroverError {
    DroverError::new(
        ErrorCode::LedgerUnavailable,
        format!(
            "the ledger cannot write: {why}. Nothing was changed; drover tries the disk again by itself and takes work again as soon as it can write (`drover status` says when), then try again"
        ),
    )
}

pub(crate) fn not_active(run_id: &str, state: RunState) -> DroverError {
    let what_helps = match state {
        RunState::Interrupted => {
            format!("`drover resume {run_id}` goes on with it in its provider session")
        }
        s if s.is_terminal() => format!(
            "`drover retry {run_id}` or `drover escalate {run_id}` starts a new run from it"
        ),
        _ => "it is ending; `drover show RUN` says how it ended".replace("RUN", run_id),
    };
    DroverError::new(
        ErrorCode::RunNotActive,
        format!("run {run_id} is {state}, not active; {what_helps}"),
    )
}

/// The refusal for a request on a run the dispatcher does not hold, read from the ledger:
/// an interrupted run is resumable; a finished one — removed from the trays, or ended
/// before this drover started — takes no follow-up and offers no retry or escalation, so
/// only what does work is suggested.
pub(crate) fn not_held(run_id: &str, state: RunState, removed: bool) -> DroverError {
    if !state.is_terminal() {
        return not_active(run_id, state);
    }
    let why = if removed {
        "was removed from the trays"
    } else {
        "ended before this drover started"
    };
    DroverError::new(
        ErrorCode::RunNotActive,
        format!(
            "run {run_id} is {state} and {why}, so it takes no follow-up and cannot be retried or escalated; `drover show {run_id}` shows its task and result, and `drover dispatch` starts the task again as a new run"
        ),
    )
}

/// Ledger ops and events of one change, for tests and the driver.
impl Batch {
    /// The ops to write and the events to publish once they are committed.
    pub fn into_parts(self) -> (Vec<WriteOp>, Vec<super::api::DispatchEvent>) {
        (self.ops, self.events)
    }
}
