//! Table tests of the core: plain `#[test]`s, no child process, no tokio, no ledger, no
//! clock. A small harness plays the driver: it hands inputs to the [`Core`] at a time it
//! chooses, answers launches (as `providers::launch` would), and keeps what came out —
//! commits, replies, commands to adapters, ledger reads — for the cases to look at.

mod admission;
mod answers;
mod evidence;
mod host_drop;
mod idle;
mod lifecycle;
mod money;
mod restart;
mod rules;
mod secrets;
mod sub_runs;
mod timers;
mod workspaces;
mod wrap_up;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{
    Core, Effect, Facts, Fetch, Fetched, Input, Launched, Query, Read, ReplyTo, Startup, Then,
    TurnOrigin, WorkspaceJob,
};
use crate::config::Config;
use crate::dispatch::api::{DispatchEvent, Request, Response, RunSummary, RunView, WaitUntil};
use crate::dispatch::reads::{LoadedSession, ResumeData};
use crate::ledger::WriteOp;
use crate::live_state::{Cause, LiveStateKind};
use crate::providers::{
    Ask, LaunchError, LaunchSpec, PermissionAnswer, PermissionRequest, ProviderCommand,
    ProviderEvent, RequestKind, RunProviderEvent, Tokens, TurnEnd,
};
use crate::run_state::RunState;
use crate::spec::SpecInput;
use crate::{DroverError, ErrorCode, UnixMillis};

/// The time the tests start at (any fixed instant will do).
const T0: UnixMillis = 1_800_000_000_000;
const MIN: i64 = 60_000;

/// A machine with one work directory, and the CLIs named installed.
struct FakeFacts {
    clis: BTreeSet<String>,
    /// bubblewrap can run sandboxes.
    bwrap: bool,
}

impl Facts for FakeFacts {
    fn current_dir(&self) -> PathBuf {
        PathBuf::from("/work")
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.starts_with("/work")
    }
    fn cli_found(&self, command: &str) -> bool {
        self.clis.contains(command)
    }
    /// The fake machine has bubblewrap unless a test takes it away.
    fn sandbox_unavailable(&self) -> Option<crate::DroverError> {
        (!self.bwrap)
            .then(|| crate::DroverError::new(crate::ErrorCode::SandboxUnavailable, "no bwrap here"))
    }
    /// `/work/repo` (and below) is a git work tree.
    fn in_git_work_tree(&self, dir: &Path) -> bool {
        dir.starts_with(REPO)
    }
    /// Every directory of `/work/repo` (its worktrees too) is of one repository.
    fn repository_of(&self, dir: &Path) -> Option<PathBuf> {
        (dir.starts_with(REPO) || dir.starts_with("/data/worktrees"))
            .then(|| PathBuf::from(REPO).join(".git"))
    }
}

/// The fake machine's git work tree.
const REPO: &str = "/work/repo";

/// What one input (and the launches it led to) produced.
#[derive(Default)]
struct Out {
    ops: Vec<WriteOp>,
    events: Vec<DispatchEvent>,
    replies: Vec<(ReplyTo, Result<Response, DroverError>, bool)>,
    launches: Vec<LaunchSpec>,
    sends: Vec<(String, ProviderCommand)>,
    answers: Vec<(ReplyTo, Query)>,
    loads: Vec<(Fetch, Then)>,
    jobs: Vec<WorkspaceJob>,
    /// Take-over commands asked for and session records to read.
    pub interactive: Vec<super::InteractiveJob>,
    /// Reconnects to a host asked for.
    reconnects: Vec<super::host_drop::ReconnectJob>,
}

impl Out {
    /// The one reply this input gave.
    fn reply(&self) -> &Result<Response, DroverError> {
        assert_eq!(self.replies.len(), 1, "one reply expected");
        &self.replies[0].1
    }

    fn refusal(&self) -> &DroverError {
        match self.reply() {
            Err(e) => e,
            Ok(r) => panic!("expected a refusal, got {r:?}"),
        }
    }

    fn run(&self) -> RunSummary {
        match self.reply() {
            Ok(Response::Run(run)) => (**run).clone(),
            other => panic!("expected a run, got {other:?}"),
        }
    }

    fn notes(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                DispatchEvent::Note { note, .. } => Some(note.text.clone()),
                _ => None,
            })
            .collect()
    }

    fn sent(&self, run_id: &str) -> Vec<&ProviderCommand> {
        self.sends
            .iter()
            .filter(|(id, _)| id == run_id)
            .map(|(_, c)| c)
            .collect()
    }

    /// The prompts of the turns started on `run_id`, in order.
    fn prompts(&self, run_id: &str) -> Vec<String> {
        self.sent(run_id)
            .into_iter()
            .filter_map(|c| match c {
                ProviderCommand::StartTurn { prompt } => Some(prompt.clone()),
                _ => None,
            })
            .collect()
    }

    fn decisions(&self) -> Vec<(String, String)> {
        self.ops
            .iter()
            .filter_map(|op| match op {
                WriteOp::InsertDecision(d) => Some((d.who.clone(), d.decision.clone())),
                _ => None,
            })
            .collect()
    }
}

struct Harness {
    core: Core,
    /// What the core was started with (a restart starts a new one from it).
    config: Config,
    startup: Startup,
    now: UnixMillis,
    next_reply: u64,
    /// The next launch fails with this reason.
    fail_launch: Option<String>,
}

impl Harness {
    /// A core on the default config with `extra` TOML over it.
    fn new(extra: &str) -> Harness {
        Harness::with_session(extra, 0.0)
    }

    /// As [`Harness::new`], with `spent` already booked in the budget session. The fake
    /// machine's runs all work in one directory, so unless `extra` sets `[workspaces]`,
    /// shared runs may overlap there (`shared_conflict = "allow"`): waiting for a
    /// directory is the workspace tests' subject, not every test's.
    fn with_session(extra: &str, spent: f64) -> Harness {
        let text = if extra.contains("[workspaces]") {
            extra.to_string()
        } else {
            format!("{extra}\n[workspaces]\nshared_conflict = \"allow\"\n")
        };
        let config = Config::parse(&text, Path::new("config.toml")).expect("test config");
        let startup = Startup {
            pid: 4242,
            version: "test".into(),
            session: LoadedSession {
                name: "default".into(),
                spent,
                record: None,
            },
            route_memory: Vec::new(),
            rules: Vec::new(),
            script_approvals: Vec::new(),
            rules_high_water: 0,
            newest_run_at: None,
            data_dir: PathBuf::from("/data"),
            checkouts: Vec::new(),
            restored: Vec::new(),
        };
        let facts = FakeFacts {
            clis: ["claude".to_string(), "git".to_string()]
                .into_iter()
                .collect(),
            bwrap: true,
        };
        let core = Core::new(config.clone(), startup.clone(), Box::new(facts), T0).expect("core");
        Harness {
            core,
            config,
            startup,
            now: T0,
            next_reply: 0,
            fail_launch: None,
        }
    }

    /// What the ledger holds of `run_id` now, as a new owner reads it back (every change
    /// is committed before it is shown, so memory and ledger agree).
    fn ledger_copy(&self, run_id: &str) -> ResumeData {
        let run = &self.core.runs[run_id];
        let mut view = run.view();
        let pending = std::mem::take(&mut view.pending);
        let record = crate::ledger::RunRecord {
            run_id: run_id.to_string(),
            created_at: run.created_at,
            updated_at: run.created_at,
            finished_at: run.finished_at,
            state: run.state(),
            completion_reason: run.completion_reason.clone(),
            provider: run.spec.provider.clone(),
            model: run.model.clone(),
            title: run.spec.title.clone(),
            budget_session: run.session.clone(),
            workflow_id: run.spec.workflow_id.clone(),
            parent_run: run.spec.parent_run.clone(),
            idempotency_key: None,
            provider_session_id: run.provider_session_id.clone(),
            removed: false,
            spec: serde_json::to_value(&run.spec).unwrap(),
            live_state: run.live.clone(),
            result: run
                .last_result
                .as_ref()
                .map(|r| serde_json::to_value(r).unwrap()),
            workspace: serde_json::to_value(&run.workspace).ok(),
        };
        ResumeData {
            record,
            view,
            tail: run.transcript.lines().cloned().collect(),
            last_seq: run.next_seq - 1,
            session: LoadedSession {
                name: run.session.clone(),
                spent: 0.0,
                record: None,
            },
            follow_ups: run.follow_ups.iter().cloned().collect(),
            pending,
            turn_cut: run.turn_cut,
        }
    }

    /// drover dies (its CLIs with it) and a new owner starts, `ms` later: every active
    /// run is read back as the ledger holds it and put back. What the new core did first.
    fn restart_after(&mut self, ms: i64) -> Out {
        let mut restored: Vec<ResumeData> = self
            .core
            .order
            .iter()
            .filter(|id| self.core.runs[*id].state().is_active())
            .map(|id| self.ledger_copy(id))
            .collect();
        restored.sort_by_key(|d| d.record.created_at);
        self.now += ms;
        let mut startup = self.startup.clone();
        startup.restored = restored;
        let facts = FakeFacts {
            clis: ["claude".to_string(), "git".to_string()]
                .into_iter()
                .collect(),
            bwrap: true,
        };
        self.core =
            Core::new(self.config.clone(), startup, Box::new(facts), self.now).expect("core");
        let (effects, _) = self.core.due(self.now);
        let mut out = Out::default();
        self.carry(effects, &mut out);
        out
    }

    /// Hands `input` to the core and plays the driver for what comes out.
    fn feed(&mut self, input: Input) -> Out {
        let effects = self.core.handle(input, self.now);
        let mut out = Out::default();
        self.carry(effects, &mut out);
        out
    }

    /// Carries effects out in order, as the driver does: a launch's outcome is decided on
    /// at once, and what it leads to is carried out after what came before it.
    fn carry(&mut self, effects: Vec<Effect>, out: &mut Out) {
        let mut queue: std::collections::VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            match effect {
                Effect::Commit(batch) => {
                    let (ops, events) = batch.into_parts();
                    out.ops.extend(ops);
                    out.events.extend(events);
                }
                Effect::Notice(event) => out.events.push(*event),
                Effect::Reply {
                    to,
                    answer,
                    after_commit,
                } => out.replies.push((to, answer, after_commit)),
                Effect::Launch(spec) => {
                    let run_id = spec.run_id.clone();
                    out.launches.push(*spec);
                    let outcome = match self.fail_launch.take() {
                        Some(reason) => Err(LaunchError {
                            command: "cli".into(),
                            reason,
                        }),
                        None => Ok(Launched { pid: Some(100) }),
                    };
                    queue.extend(
                        self.core
                            .handle(Input::Launched { run_id, outcome }, self.now),
                    );
                }
                Effect::Send { run_id, command } => out.sends.push((run_id, command)),
                Effect::Read(Read::Answer { to, query }) => out.answers.push((to, query)),
                Effect::Read(Read::Load { fetch, then }) => out.loads.push((fetch, then)),
                Effect::Workspace(job) => out.jobs.push(*job),
                Effect::Interactive(job) => out.interactive.push(*job),
                Effect::Reconnect(job) => out.reconnects.push(*job),
            }
        }
        // Every run's events reach the ledger in seq order, with no gap.
        let mut last: std::collections::HashMap<String, u64> = Default::default();
        for op in &out.ops {
            if let WriteOp::AppendEvent(e) = op
                && let Some(prev) = last.insert(e.run_id.clone(), e.seq)
            {
                assert_eq!(
                    e.seq,
                    prev + 1,
                    "run {}: seq {} after {prev}",
                    e.run_id,
                    e.seq
                );
            }
        }
    }

    fn request(&mut self, request: Request) -> Out {
        self.next_reply += 1;
        let from = ReplyTo(self.next_reply);
        self.feed(Input::Request { from, request })
    }

    /// Moves the clock on by `ms` and fires what is due.
    fn advance(&mut self, ms: i64) -> Out {
        self.now += ms;
        let (effects, _) = self.core.due(self.now);
        let mut out = Out::default();
        self.carry(effects, &mut out);
        out
    }

    fn next_deadline(&mut self) -> Option<UnixMillis> {
        self.core.due(self.now).1
    }

    fn provider(&mut self, run_id: &str, event: ProviderEvent) -> Out {
        self.feed(Input::Provider(RunProviderEvent {
            run_id: run_id.into(),
            event,
        }))
    }

    /// Dispatches a sim run with `spec` adjusted by `f`; returns the reply's run.
    fn dispatch_with(&mut self, f: impl FnOnce(&mut SpecInput)) -> Out {
        let mut spec = SpecInput {
            provider: Some("sim".into()),
            task: "do the thing".into(),
            ..SpecInput::default()
        };
        f(&mut spec);
        self.request(Request::Dispatch {
            spec: Box::new(spec),
        })
    }

    fn dispatch(&mut self) -> String {
        self.dispatch_with(|_| {}).run().head.run_id
    }

    /// A run that is started and ready: its first turn is in flight.
    fn running(&mut self) -> String {
        let id = self.dispatch();
        self.provider(&id, ProviderEvent::Ready { version: None });
        id
    }

    /// `remove --finished`: what to do with the first page it asks the ledger for.
    fn remove_finished(&mut self) -> Then {
        let out = self.request(Request::Remove {
            run_id: None,
            finished: true,
            force: false,
        });
        let [(Fetch::FinishedRuns { before: None }, then)] = &out.loads[..] else {
            panic!("{:?}", out.loads)
        };
        then.clone()
    }

    /// A run whose first turn ended `done`: idle.
    fn idle(&mut self) -> String {
        let id = self.running();
        self.provider(&id, turn_done("## Result\nstatus: done\nsummary: did it\n"));
        assert_eq!(self.state(&id), RunState::Idle);
        id
    }

    fn state(&self, run_id: &str) -> RunState {
        self.core.runs[run_id].state()
    }

    fn view(&self, run_id: &str) -> RunView {
        self.core.runs[run_id].view()
    }

    fn live(&self, run_id: &str) -> (LiveStateKind, Option<String>) {
        let live = self.core.runs[run_id].live.clone().expect("a live state");
        (live.state, live.detail)
    }

    /// The run ends: its child exits.
    fn exit(&mut self, run_id: &str) -> Out {
        self.provider(
            run_id,
            ProviderEvent::Exited {
                code: Some(0),
                signal: None,
                stderr_tail: String::new(),
            },
        )
    }
}

fn turn_done(text: &str) -> ProviderEvent {
    ProviderEvent::TurnCompleted(TurnEnd {
        subtype: "success".into(),
        text: Some(text.into()),
        ..TurnEnd::default()
    })
}

fn permission(id: &str, command: &str) -> ProviderEvent {
    ProviderEvent::PermissionRequested(PermissionRequest {
        request_id: id.into(),
        kind: RequestKind::Permission,
        tool: "Bash".into(),
        ask: Ask::command(command, None, None),
        always: None,
        tool_use_id: None,
        blocked_path: None,
    })
}

fn question(id: &str) -> ProviderEvent {
    let ask = Ask::Question {
        questions: vec![crate::providers::Question {
            question: "Which database?".into(),
            header: None,
            options: Vec::new(),
            multi_select: false,
        }],
    };
    ProviderEvent::PermissionRequested(PermissionRequest {
        request_id: id.into(),
        kind: RequestKind::Question,
        tool: "AskUserQuestion".into(),
        ask,
        always: None,
        tool_use_id: None,
        blocked_path: None,
    })
}

fn usage(output: u64) -> ProviderEvent {
    ProviderEvent::Usage {
        model: None,
        tokens: Tokens {
            output,
            ..Tokens::default()
        },
    }
}

fn cause_of(h: &Harness, run_id: &str) -> Option<Cause> {
    h.core.runs[run_id].live.as_ref().and_then(|l| l.cause)
}

fn reason_of(h: &Harness, run_id: &str) -> Option<String> {
    h.core.runs[run_id].completion_reason.clone()
}

fn allow() -> PermissionAnswer {
    PermissionAnswer::Allow { always: false }
}

fn wait_request(run_id: &str, until: WaitUntil) -> Request {
    Request::Wait {
        run_ids: vec![run_id.into()],
        workflow: None,
        until,
        any: false,
        timeout_secs: Some(60),
    }
}
