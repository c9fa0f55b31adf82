//! Workspaces (issue 13): the workspace a dispatch gets, the worktree made before the
//! launch (and its bound), the run's change worked out after turns and file tools, a
//! shared directory waited for, diff / merge / keep / discard, removing runs with
//! unmerged work, escalation from a worktree run, resume in its worktree. The git work
//! itself is played here: each job's outcome is handed back as the driver would.

use super::*;
use crate::workspace::ops::{Created, ParentStart};
use crate::workspace::{
    ChangeStat, MergeHow, MergeView, Outcome, Task, WorkspaceMode, WorkspaceStatus, WorkspaceView,
};

/// The shipped workspaces config: shared runs wait for one another's directory.
const WAIT: &str = "[workspaces]\nshared_conflict = \"wait\"\n";

fn in_repo(spec: &mut SpecInput) {
    spec.cwd = Some(PathBuf::from(REPO));
}

/// A worktree as `git worktree add` made it for `run_id`.
fn made(run_id: &str) -> WorkspaceView {
    WorkspaceView {
        mode: WorkspaceMode::Worktree,
        status: WorkspaceStatus::Ready,
        dir: Some(format!("/data/worktrees/repo/{run_id}")),
        checkout: Some(REPO.into()),
        worktree: Some(format!("/data/worktrees/repo/{run_id}")),
        branch: Some(format!("drover/{run_id}-do-the-thing")),
        base_branch: Some("main".into()),
        base_commit: Some("c0ffee0000".into()),
        change: None,
        pr: None,
        host: None,
    }
}

fn change(files: u32, added: u64, removed: u64) -> ChangeStat {
    ChangeStat {
        files,
        added,
        removed,
    }
}

impl Harness {
    /// Hands a job's outcome back to the core.
    fn done(&mut self, job: WorkspaceJob, outcome: Result<Outcome, DroverError>) -> Out {
        self.feed(Input::Workspace(Box::new(job.done(outcome))))
    }

    /// A worktree run, its worktree made (`left_behind` uncommitted changes not carried):
    /// launched, not yet ready.
    fn worktree_run(&mut self, left_behind: usize) -> (String, Out) {
        let out = self.dispatch_with(in_repo);
        let id = out.run().head.run_id;
        let [job] = <[WorkspaceJob; 1]>::try_from(out.jobs).expect("one job: make the worktree");
        let workspace = made(&id);
        let out = self.done(
            job,
            Ok(Outcome::Created(Created {
                workspace,
                left_behind,
                carried: 0,
                from_run: None,
                ready: Default::default(),
            })),
        );
        (id, out)
    }

    /// A worktree run whose first turn ended done: idle, its change being worked out.
    fn idle_worktree_run(&mut self) -> (String, WorkspaceJob) {
        let (id, _) = self.worktree_run(0);
        self.provider(&id, ProviderEvent::Ready { version: None });
        let out = self.provider(&id, turn_done("## Result\nstatus: done\nsummary: did it\n"));
        assert_eq!(self.state(&id), RunState::Idle);
        let job = measure_job(&out);
        (id, job)
    }
}

fn measure_job(out: &Out) -> WorkspaceJob {
    match &out.jobs[..] {
        [job] if matches!(job.task, Task::Measure(_)) => job.clone(),
        other => panic!("expected one measure job, got {other:?}"),
    }
}

fn workspace_of(h: &Harness, run_id: &str) -> WorkspaceView {
    h.core.runs[run_id].workspace.clone()
}

/// The workspace the batch recorded for the run (the last `UpdateRun` with one).
fn saved(out: &Out, run_id: &str) -> Option<WorkspaceView> {
    out.ops.iter().rev().find_map(|op| match op {
        WriteOp::UpdateRun { run_id: id, patch } if id == run_id => patch
            .workspace
            .clone()
            .map(|v| serde_json::from_value(v).expect("a workspace")),
        _ => None,
    })
}

#[test]
fn a_writing_run_inside_a_work_tree_gets_a_worktree_by_default() {
    let mut h = Harness::new(WAIT);
    let out = h.dispatch_with(in_repo);
    let run = out.run();
    let id = run.head.run_id.clone();
    assert!(out.launches.is_empty(), "the launch waits for the worktree");
    assert_eq!(run.head.state, RunState::Starting);
    let live = run.head.live_state.as_ref().unwrap();
    assert_eq!(live.state, LiveStateKind::Preparing);
    assert_eq!(live.detail.as_deref(), Some("creating the worktree"));
    assert_eq!(
        live.bound,
        Some(T0 + super::super::PREPARE_WORKTREE_BOUND_MS)
    );
    let workspace = run.workspace.unwrap();
    assert_eq!(workspace.mode, WorkspaceMode::Worktree);
    assert_eq!(workspace.status, WorkspaceStatus::Preparing);
    let Task::Create(plan) = &out.jobs[0].task else {
        panic!("{:?}", out.jobs)
    };
    assert_eq!(plan.cwd, PathBuf::from(REPO));
    assert_eq!(plan.root, PathBuf::from("/data/worktrees"));
    assert_eq!(plan.branch, format!("drover/{id}-do-the-thing"));
    assert!(!plan.carry_changes);
    assert_eq!(plan.from, None);
    // The mode is kept with the spec.
    assert_eq!(
        h.core.runs[&id].spec.workspace,
        Some(WorkspaceMode::Worktree)
    );
}

#[test]
fn other_runs_share_their_directory() {
    type Adjust = Box<dyn Fn(&mut SpecInput)>;
    let cases: Vec<(&str, Adjust)> = vec![
        ("outside a work tree", Box::new(|_: &mut SpecInput| {})),
        (
            "read-only",
            Box::new(|s: &mut SpecInput| {
                in_repo(s);
                s.capability = Some("read-only".into());
            }),
        ),
        (
            "asked for",
            Box::new(|s: &mut SpecInput| {
                in_repo(s);
                s.workspace = Some("shared".into());
            }),
        ),
    ];
    for (name, adjust) in cases {
        let mut h = Harness::new(WAIT);
        let out = h.dispatch_with(|s| adjust(s));
        let ws = out.run().workspace.unwrap();
        assert_eq!(ws.mode, WorkspaceMode::Shared, "{name}");
        assert!(out.jobs.is_empty(), "{name}");
        assert_eq!(out.launches.len(), 1, "{name}: launched at once");
    }
    let mut h = Harness::new("[workspaces]\ndefault = \"shared\"\n");
    let out = h.dispatch_with(in_repo);
    assert_eq!(out.run().workspace.unwrap().mode, WorkspaceMode::Shared);
}

#[test]
fn a_worktree_asked_for_where_there_can_be_none_is_refused_with_nothing_made() {
    let mut h = Harness::new(WAIT);
    let out = h.dispatch_with(|s| s.workspace = Some("worktree".into()));
    let e = out.refusal();
    assert_eq!(e.code, ErrorCode::WorkspaceUnavailable);
    assert!(e.message.contains("not inside a git work tree"), "{e:?}");
    assert!(out.ops.is_empty());
    assert!(h.core.runs.is_empty());
}

#[test]
fn the_run_launches_in_its_worktree_with_notes_on_what_stayed_behind() {
    let mut h = Harness::new(WAIT);
    let (id, out) = h.worktree_run(3);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(
        out.launches[0].cwd,
        PathBuf::from(format!("/data/worktrees/repo/{id}"))
    );
    let notes = out.notes();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("works in its own worktree") && n.contains("made from main")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("3 uncommitted changes") && n.contains("--carry-changes")),
        "{notes:?}"
    );
    let ws = saved(&out, &id).expect("the workspace is recorded");
    assert_eq!(ws.status, WorkspaceStatus::Ready);
    assert_eq!(h.view(&id).workspace.unwrap().branch, ws.branch);
    // The launch's outcome: starting the provider, in the same `preparing` state.
    assert_eq!(
        h.live(&id),
        (
            LiveStateKind::Preparing,
            Some("starting the provider".into())
        )
    );
}

#[test]
fn a_worktree_asked_for_that_cannot_be_made_fails_the_run_with_its_cause() {
    let mut h = Harness::new(WAIT);
    let out = h.dispatch_with(|s| {
        in_repo(s);
        s.workspace = Some("worktree".into());
    });
    let id = out.run().head.run_id;
    let job = out.jobs[0].clone();
    let out = h.done(
        job,
        Err(DroverError::new(
            ErrorCode::WorkspaceUnavailable,
            "the repository /work/repo has no commit yet",
        )),
    );
    assert!(out.launches.is_empty());
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("workspace_error"));
    assert!(out.notes().iter().any(|n| n.contains("no commit yet")));
    assert_eq!(workspace_of(&h, &id).status, WorkspaceStatus::Failed);
}

#[test]
fn a_worktree_the_default_chose_falls_back_to_the_shared_directory() {
    let mut h = Harness::new(WAIT);
    let out = h.dispatch_with(in_repo);
    let id = out.run().head.run_id;
    let job = out.jobs[0].clone();
    let out = h.done(
        job,
        Err(DroverError::new(
            ErrorCode::WorkspaceUnavailable,
            "the repository /work/repo has no commit yet",
        )),
    );
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].cwd, PathBuf::from(REPO));
    assert!(
        out.notes()
            .iter()
            .any(|n| n.contains("no commit yet") && n.contains("shares its directory")),
        "{:?}",
        out.notes()
    );
    let ws = workspace_of(&h, &id);
    assert_eq!(ws.mode, WorkspaceMode::Shared);
    assert_eq!(saved(&out, &id), Some(ws));
    let live: Vec<LiveStateKind> = out
        .events
        .iter()
        .filter_map(|e| match e {
            DispatchEvent::LiveState { live_state, .. } => Some(live_state.state),
            _ => None,
        })
        .collect();
    assert_eq!(live, [LiveStateKind::FallingBack, LiveStateKind::Preparing]);
}

#[test]
fn a_fallen_back_run_waits_for_a_writing_run_in_its_directory() {
    let mut h = Harness::new(WAIT);
    let holder = h.dispatch_with(in_repo);
    let holder_id = holder.run().head.run_id;
    // The first run falls back and works in the repository's directory.
    h.done(
        holder.jobs[0].clone(),
        Err(DroverError::new(
            ErrorCode::WorkspaceUnavailable,
            "no commit yet",
        )),
    );
    let second = h.dispatch_with(in_repo);
    let id = second.run().head.run_id;
    let out = h.done(
        second.jobs[0].clone(),
        Err(DroverError::new(
            ErrorCode::WorkspaceUnavailable,
            "no commit yet",
        )),
    );
    assert!(out.launches.is_empty());
    assert_eq!(h.state(&id), RunState::Queued);
    assert!(!h.core.runs[&id].holds_slot());
    assert_eq!(
        h.core.runs[&id].live.as_ref().unwrap().state,
        LiveStateKind::WaitingRepository
    );
    h.request(Request::Stop {
        run_id: holder_id.clone(),
    });
    let out = h.exit(&holder_id);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].run_id, id);
}

#[test]
fn making_the_worktree_is_bounded_and_a_late_one_is_discarded() {
    let mut h = Harness::new(WAIT);
    let out = h.dispatch_with(in_repo);
    let id = out.run().head.run_id;
    let job = out.jobs[0].clone();
    assert_eq!(
        h.next_deadline(),
        Some(T0 + super::super::PREPARE_WORKTREE_BOUND_MS)
    );
    let out = h.advance(super::super::PREPARE_WORKTREE_BOUND_MS);
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("workspace_timeout"));
    assert!(out.notes().iter().any(|n| n.contains("not ready after")));
    // It comes after all: nothing ran in it, so it goes.
    let out = h.done(
        job,
        Ok(Outcome::Created(Created {
            workspace: made(&id),
            left_behind: 0,
            carried: 0,
            from_run: None,
            ready: Default::default(),
        })),
    );
    assert!(out.launches.is_empty());
    assert!(
        matches!(&out.jobs[..], [j] if matches!(j.task, Task::Discard { .. })),
        "{:?}",
        out.jobs
    );
}

#[test]
fn stopping_a_run_while_its_worktree_is_made_ends_it_at_once() {
    let mut h = Harness::new(WAIT);
    let out = h.dispatch_with(in_repo);
    let id = out.run().head.run_id;
    let job = out.jobs[0].clone();
    h.request(Request::Stop { run_id: id.clone() });
    assert_eq!(h.state(&id), RunState::Stopped);
    let out = h.done(
        job,
        Ok(Outcome::Created(Created {
            workspace: made(&id),
            left_behind: 0,
            carried: 0,
            from_run: None,
            ready: Default::default(),
        })),
    );
    assert!(out.launches.is_empty());
    assert!(matches!(&out.jobs[..], [j] if matches!(j.task, Task::Discard { .. })));
}

#[test]
fn the_change_is_worked_out_after_a_turn_and_after_a_file_tool_one_at_a_time() {
    let mut h = Harness::new(WAIT);
    let (id, _) = h.worktree_run(0);
    h.provider(&id, ProviderEvent::Ready { version: None });
    // A file edit runs and finishes: its end is a reason to look.
    let edit = Ask::FileEdit {
        file_path: "src/main.rs".into(),
        change: crate::providers::FileChange::Content {
            content: "fn main() {}\n".into(),
        },
        other_files: vec![],
    };
    h.provider(
        &id,
        ProviderEvent::ToolStarted {
            tool_use_id: "t1".into(),
            name: "Write".into(),
            ask: edit,
        },
    );
    let out = h.provider(
        &id,
        ProviderEvent::ToolFinished {
            tool_use_id: "t1".into(),
            is_error: false,
            exit_code: Some(0),
            summary: "written".into(),
        },
    );
    let first = measure_job(&out);
    // A tool that changes nothing (a fetch) is no reason.
    h.provider(
        &id,
        ProviderEvent::ToolStarted {
            tool_use_id: "t2".into(),
            name: "WebFetch".into(),
            ask: Ask::Fetch {
                url: "http://127.0.0.1/".into(),
            },
        },
    );
    let out = h.provider(
        &id,
        ProviderEvent::ToolFinished {
            tool_use_id: "t2".into(),
            is_error: false,
            exit_code: Some(0),
            summary: "fetched".into(),
        },
    );
    assert!(out.jobs.is_empty());
    // The turn ends while the first look is under way: one more look after it.
    let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: did it\n"));
    assert!(out.jobs.is_empty(), "one look at a time");
    let out = h.done(first, Ok(Outcome::Measured(change(1, 1, 0))));
    let again = measure_job(&out);
    let row = out
        .events
        .iter()
        .find_map(|e| match e {
            DispatchEvent::RunChanged { run } => run.workspace.clone(),
            _ => None,
        })
        .expect("the run's row is published with its change");
    assert_eq!(row.change, Some(change(1, 1, 0)));
    assert_eq!(saved(&out, &id).unwrap().change, Some(change(1, 1, 0)));
    let out = h.done(again, Ok(Outcome::Measured(change(2, 12, 3))));
    assert!(out.jobs.is_empty());
    assert_eq!(
        h.core.runs[&id].summary().workspace.unwrap().change,
        Some(change(2, 12, 3))
    );
    // The same change again records nothing.
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "more".into(),
    });
    assert!(out.jobs.is_empty());
    let out = h.provider(&id, turn_done("## Result\nstatus: done\nsummary: again\n"));
    let job = measure_job(&out);
    let out = h.done(job, Ok(Outcome::Measured(change(2, 12, 3))));
    assert_eq!(saved(&out, &id), None);
}

#[test]
fn a_run_whose_worktree_vanished_fails_with_that_cause() {
    let mut h = Harness::new(WAIT);
    let (id, job) = h.idle_worktree_run();
    let out = h.done(
        job,
        Err(DroverError::new(
            ErrorCode::WorktreeMissing,
            "the run's worktree /data/worktrees/repo/x is gone (deleted outside drover)",
        )),
    );
    assert!(out.notes().iter().any(|n| n.contains("is gone")));
    assert!(
        out.sent(&id).contains(&&ProviderCommand::Shutdown),
        "its child is asked to stop"
    );
    h.exit(&id);
    assert_eq!(h.state(&id), RunState::Failed);
    assert_eq!(reason_of(&h, &id).as_deref(), Some("workspace_missing"));
    assert_eq!(workspace_of(&h, &id).status, WorkspaceStatus::Missing);
}

#[test]
fn a_shared_directory_in_use_by_a_writing_run_is_waited_for() {
    let mut h = Harness::new(WAIT);
    let first = h.running();
    let second = h.dispatch();
    assert_eq!(h.state(&second), RunState::Queued);
    assert_eq!(
        h.core.runs[&second].live.as_ref().unwrap().state,
        LiveStateKind::WaitingRepository
    );
    let (_, detail) = h.live(&second);
    assert!(
        detail.as_deref().is_some_and(|d| d.contains(&first)),
        "{detail:?}"
    );
    assert_eq!(
        h.core.runs[&second].live.as_ref().unwrap().bound,
        Some(T0 + 45 * MIN),
        "bounded by its time box"
    );
    assert!(!h.core.runs[&second].holds_slot());
    // A read-only run waits too; a worktree run does not.
    let reader = h
        .dispatch_with(|s| s.capability = Some("read-only".into()))
        .run();
    assert_eq!(
        reader.head.live_state.unwrap().state,
        LiveStateKind::WaitingRepository
    );
    // The first run ends: the oldest waiting run goes, and holds the directory for the
    // reader.
    h.request(Request::Stop {
        run_id: first.clone(),
    });
    let out = h.exit(&first);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].run_id, second);
    assert!(out.notes().iter().any(|n| n.contains("free now")));
    assert_eq!(
        h.core.runs[&reader.head.run_id]
            .live
            .as_ref()
            .unwrap()
            .state,
        LiveStateKind::WaitingRepository
    );
}

#[test]
fn an_idle_run_holds_no_directory_and_a_turn_that_ends_lets_the_waiter_go() {
    let mut h = Harness::new(WAIT);
    let idle = h.idle();
    // An idle run holds nothing: the next shared run starts at once.
    let out = h.dispatch_with(|_| {});
    assert_eq!(out.launches.len(), 1, "{:?}", out.notes());
    let busy = out.run().head.run_id;
    h.provider(&busy, ProviderEvent::Ready { version: None });
    // A third waits for the one in its turn, and goes when that turn ends.
    let waiter = h.dispatch();
    assert_eq!(
        h.core.runs[&waiter].live.as_ref().unwrap().state,
        LiveStateKind::WaitingRepository
    );
    let out = h.provider(
        &busy,
        turn_done("## Result\nstatus: done\nsummary: did it\n"),
    );
    assert_eq!(h.state(&busy), RunState::Idle);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(out.launches[0].run_id, waiter);
    assert_eq!(h.state(&idle), RunState::Idle);
}

#[test]
fn a_shared_directory_may_be_shared_at_once_when_the_config_allows() {
    let mut h = Harness::new("[workspaces]\nshared_conflict = \"allow\"\n");
    h.running();
    let out = h.dispatch_with(|_| {});
    assert_eq!(out.launches.len(), 1);
}

#[test]
fn waiting_for_a_directory_ends_with_the_time_box() {
    let mut h = Harness::new(WAIT);
    h.running();
    let waiting = h
        .dispatch_with(|s| s.max_minutes = Some(5))
        .run()
        .head
        .run_id;
    let out = h.advance(5 * MIN);
    assert_eq!(h.state(&waiting), RunState::Failed);
    assert_eq!(reason_of(&h, &waiting).as_deref(), Some("repository_busy"));
    assert!(
        out.notes()
            .iter()
            .any(|n| n.contains("--workspace worktree"))
    );
}

#[test]
fn merge_waits_for_the_turn_and_goes_at_most_once_at_a_time() {
    let mut h = Harness::new(WAIT);
    let (id, _) = h.worktree_run(0);
    h.provider(&id, ProviderEvent::Ready { version: None });
    let out = h.request(Request::Merge {
        run_id: id.clone(),
        squash: false,
        message: None,
    });
    assert_eq!(out.refusal().code, ErrorCode::RunActive);
    assert!(out.jobs.is_empty());
    let out = h.provider(
        &id,
        turn_done("## Result\nstatus: done\nsummary: Greeting fixed\n"),
    );
    let measuring = measure_job(&out);
    let out = h.request(Request::Merge {
        run_id: id.clone(),
        squash: true,
        message: None,
    });
    assert!(out.replies.is_empty(), "answered when git is done");
    let [job] = <[WorkspaceJob; 1]>::try_from(out.jobs).unwrap();
    let Task::Merge { ask, .. } = &job.task else {
        panic!("{job:?}")
    };
    assert!(ask.squash);
    assert!(!ask.clean_up, "an idle run goes on in its worktree");
    assert!(
        ask.message.starts_with("Greeting fixed"),
        "{:?}",
        ask.message
    );
    assert!(ask.message.ends_with(&format!("drover run {id}")));
    let out = h.request(Request::Merge {
        run_id: id.clone(),
        squash: false,
        message: None,
    });
    assert_eq!(out.refusal().code, ErrorCode::WorkspaceBusy);
    let mut after = workspace_of(&h, &id);
    after.change = Some(ChangeStat::default());
    let merged = MergeView {
        how: MergeHow::Squash,
        commit: "abcdef1234567".into(),
        into: "main".into(),
        files: vec!["src/main.rs".into()],
        checkout_updated: true,
        cleaned_up: false,
    };
    let out = h.done(job, Ok(Outcome::Merged(after, merged.clone())));
    match out.reply() {
        Ok(Response::Workspace(view)) => {
            assert_eq!(view.action, "merge");
            assert_eq!(view.merge.as_ref(), Some(&merged));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        out.notes()
            .iter()
            .any(|n| n.contains("merged into main (one squashed commit)"))
    );
    // A look at the change started before the merge is taken again after it.
    let out = h.done(measuring, Ok(Outcome::Measured(change(1, 1, 0))));
    measure_job(&out);
}

#[test]
fn a_refused_merge_changes_nothing_and_says_why() {
    let mut h = Harness::new(WAIT);
    let (id, _) = h.idle_worktree_run();
    let before = workspace_of(&h, &id);
    let out = h.request(Request::Merge {
        run_id: id.clone(),
        squash: false,
        message: Some("Mine".into()),
    });
    let job = out.jobs[0].clone();
    let out = h.done(
        job,
        Err(DroverError::new(
            ErrorCode::MergeConflict,
            "drover/x conflicts with main in app.txt; nothing was changed",
        )),
    );
    assert_eq!(out.refusal().code, ErrorCode::MergeConflict);
    assert!(out.ops.is_empty());
    assert_eq!(workspace_of(&h, &id), before);
    // The run is free for another try.
    let out = h.request(Request::Merge {
        run_id: id,
        squash: false,
        message: None,
    });
    assert_eq!(out.jobs.len(), 1);
}

#[test]
fn keep_and_discard_need_a_finished_worktree_run() {
    let mut h = Harness::new(WAIT);
    let shared = h.idle();
    for request in [
        Request::Diff {
            run_id: shared.clone(),
            file: None,
            stat: false,
        },
        Request::Merge {
            run_id: shared.clone(),
            squash: false,
            message: None,
        },
    ] {
        let out = h.request(request);
        let e = out.refusal();
        assert_eq!(e.code, ErrorCode::NoWorktree);
        assert!(e.message.contains("shared directory"), "{e:?}");
    }
    let (id, _) = h.idle_worktree_run();
    let out = h.request(Request::Discard { run_id: id.clone() });
    assert_eq!(out.refusal().code, ErrorCode::RunActive);
    h.request(Request::Complete { run_id: id.clone() });
    h.exit(&id);
    let out = h.request(Request::Discard { run_id: id.clone() });
    let job = out.jobs[0].clone();
    assert!(matches!(job.task, Task::Discard { .. }));
    let mut after = workspace_of(&h, &id);
    after.status = WorkspaceStatus::Discarded;
    let out = h.done(job, Ok(Outcome::Discarded(after)));
    assert!(matches!(out.reply(), Ok(Response::Workspace(v)) if v.action == "discard"));
    assert_eq!(workspace_of(&h, &id).status, WorkspaceStatus::Discarded);
    let out = h.request(Request::Keep { run_id: id.clone() });
    let e = out.refusal();
    assert_eq!(e.code, ErrorCode::NoWorktree);
    assert!(e.message.contains("discarded"), "{e:?}");
}

#[test]
fn a_diff_of_a_run_not_in_memory_is_read_from_the_ledger_first() {
    let mut h = Harness::new(WAIT);
    let out = h.request(Request::Diff {
        run_id: "rold".into(),
        file: Some("a.txt".into()),
        stat: false,
    });
    let [(Fetch::View { run_id }, then)] = &out.loads[..] else {
        panic!("{:?}", out.loads)
    };
    assert_eq!(run_id, "rold");
    // The ledger's view: a finished worktree run.
    let (id, _) = h.idle_worktree_run();
    let mut view = h.view(&id);
    view.head.run_id = "rold".into();
    view.head.state = RunState::Completed;
    let out = h.feed(Input::Loaded {
        then: then.clone(),
        answer: Ok(Fetched::View(Box::new(view))),
    });
    let [job] = <[WorkspaceJob; 1]>::try_from(out.jobs).unwrap();
    assert!(matches!(&job.task, Task::Diff { file: Some(f), stat: false, .. } if f == "a.txt"));
    assert!(
        job.row.is_some(),
        "the row goes along for a run not in memory"
    );
    let diff = crate::workspace::DiffView {
        run_id: "rold".into(),
        branch: None,
        base_branch: None,
        base_commit: None,
        change: change(1, 1, 0),
        files: vec![],
        file: Some("a.txt".into()),
        patch: Some("diff --git a/a.txt b/a.txt\n".into()),
        truncated: false,
    };
    let out = h.done(job, Ok(Outcome::Diff(Box::new(diff.clone()))));
    assert_eq!(out.reply(), &Ok(Response::Diff(Box::new(diff))));
}

#[test]
fn removing_a_run_with_unmerged_work_needs_force_and_keeps_the_work() {
    let mut h = Harness::new(WAIT);
    let (id, job) = h.idle_worktree_run();
    h.done(job, Ok(Outcome::Measured(change(2, 5, 1))));
    h.request(Request::Complete { run_id: id.clone() });
    let out = h.exit(&id);
    let final_look = measure_job(&out);
    h.done(final_look, Ok(Outcome::Measured(change(2, 5, 1))));
    let out = h.request(Request::Remove {
        run_id: Some(id.clone()),
        finished: false,
        force: false,
    });
    let e = out.refusal();
    assert_eq!(e.code, ErrorCode::UnmergedWork);
    assert!(e.message.contains("+5 −1 · 2 files"), "{e:?}");
    assert!(e.message.contains("--force"), "{e:?}");
    assert!(h.core.runs.contains_key(&id));
    // --finished leaves it in the trays and says so.
    let then = h.remove_finished();
    let out = h.feed(Input::Loaded {
        then,
        answer: Ok(Fetched::Summaries(Vec::new())),
    });
    match out.reply() {
        Ok(Response::Removed(r)) => {
            assert!(r.removed.is_empty());
            assert_eq!(r.unmerged, vec![id.clone()]);
        }
        other => panic!("{other:?}"),
    }
    let branch = h.view(&id).workspace.and_then(|w| w.branch);
    assert!(branch.is_some());
    let out = h.request(Request::Remove {
        run_id: Some(id.clone()),
        finished: false,
        force: true,
    });
    match out.reply() {
        Ok(Response::Removed(r)) => {
            assert_eq!(r.removed, vec![id.clone()]);
            assert_eq!(
                r.kept
                    .iter()
                    .map(|k| Some(k.branch.clone()))
                    .collect::<Vec<_>>(),
                vec![branch],
                "and says on which branch"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&out.jobs[..], [j] if matches!(j.task, Task::Keep { .. })),
        "the work is kept on its branch: {:?}",
        out.jobs
    );
}

#[test]
fn removing_a_run_whose_worktree_is_gone_releases_its_branch() {
    // Its worktree vanished, or was kept: git decides whether its branch holds commits.
    for status in [WorkspaceStatus::Missing, WorkspaceStatus::Kept] {
        let mut h = Harness::new(WAIT);
        let (id, job) = h.idle_worktree_run();
        h.done(job, Ok(Outcome::Measured(change(1, 1, 0))));
        h.request(Request::Complete { run_id: id.clone() });
        let out = h.exit(&id);
        h.done(measure_job(&out), Ok(Outcome::Measured(change(1, 1, 0))));
        if let Some(run) = h.core.runs.get_mut(&id) {
            run.workspace.status = status;
        }
        let out = h.request(Request::Remove {
            run_id: Some(id.clone()),
            finished: false,
            force: false,
        });
        assert!(
            matches!(out.reply(), Ok(Response::Removed(r)) if r.kept.is_empty()),
            "{status:?}: {:?}",
            out.reply()
        );
        let [job] = &out.jobs[..] else {
            panic!("{status:?}: {:?}", out.jobs)
        };
        let Task::Release(ws) = &job.task else {
            panic!("{status:?}: {job:?}")
        };
        let mut released = ws.clone();
        released.status = WorkspaceStatus::Discarded;
        let out = h.done(job.clone(), Ok(Outcome::Released(released)));
        assert!(
            out.ops
                .iter()
                .any(|op| matches!(op, WriteOp::UpdateRun { patch, .. }
                if patch.workspace.as_ref().is_some_and(|w| w["status"] == "discarded"))),
            "{status:?}: recorded in the ledger"
        );
    }
}

#[test]
fn removing_a_run_with_a_clean_worktree_discards_it() {
    let mut h = Harness::new(WAIT);
    let (id, job) = h.idle_worktree_run();
    h.done(job, Ok(Outcome::Measured(ChangeStat::default())));
    h.request(Request::Complete { run_id: id.clone() });
    let out = h.exit(&id);
    h.done(
        measure_job(&out),
        Ok(Outcome::Measured(ChangeStat::default())),
    );
    let out = h.request(Request::Remove {
        run_id: Some(id),
        finished: false,
        force: false,
    });
    assert!(matches!(&out.jobs[..], [j] if matches!(j.task, Task::Discard { .. })));
}

#[test]
fn an_escalation_of_a_worktree_run_starts_on_its_branch() {
    let mut h = Harness::new(WAIT);
    let (id, job) = h.idle_worktree_run();
    h.done(job, Ok(Outcome::Measured(change(1, 3, 0))));
    h.request(Request::Complete { run_id: id.clone() });
    h.exit(&id);
    let out = h.request(Request::Retry { run_id: id.clone() });
    let child = out.run().head.run_id;
    let create = out
        .jobs
        .iter()
        .find_map(|j| match &j.task {
            Task::Create(plan) if j.run_id == child => Some(plan.clone()),
            _ => None,
        })
        .expect("the child's worktree is made");
    assert_eq!(
        create.from,
        Some(ParentStart {
            run_id: id.clone(),
            workspace: workspace_of(&h, &id),
        })
    );
    let out = h.done(
        out.jobs.into_iter().find(|j| j.run_id == child).unwrap(),
        Ok(Outcome::Created(Created {
            workspace: made(&child),
            left_behind: 0,
            carried: 1,
            from_run: Some(id.clone()),
            ready: Default::default(),
        })),
    );
    let notes = out.notes();
    assert!(
        notes
            .iter()
            .any(|n| n.contains(&format!("started from run {id}'s branch"))),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("brought 1 uncommitted change along")),
        "{notes:?}"
    );
}

#[test]
fn a_worktree_run_put_back_after_a_restart_goes_on_in_its_worktree_once_it_is_checked() {
    let mut h = Harness::new(WAIT);
    let (id, job) = h.idle_worktree_run();
    h.done(job, Ok(Outcome::Measured(change(1, 1, 0))));
    h.provider(
        &id,
        ProviderEvent::Session {
            session_id: "sess-1".into(),
            model: None,
        },
    );
    let out = h.restart_after(MIN);
    assert!(
        out.launches.is_empty() && out.jobs.is_empty(),
        "back asleep"
    );
    assert!(h.core.runs[&id].hibernated);
    let out = h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "go on".into(),
    });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    assert!(
        out.launches.is_empty(),
        "not before its worktree is checked"
    );
    let [job] = <[WorkspaceJob; 1]>::try_from(out.jobs).unwrap();
    assert!(matches!(job.task, Task::Check(_)));
    assert_eq!(
        h.live(&id),
        (
            LiveStateKind::Preparing,
            Some("checking the run's worktree".into())
        )
    );
    let out = h.done(job, Ok(Outcome::Checked));
    assert_eq!(out.launches.len(), 1);
    assert_eq!(
        out.launches[0].cwd,
        PathBuf::from(format!("/data/worktrees/repo/{id}"))
    );
    assert_eq!(out.launches[0].resume_session.as_deref(), Some("sess-1"));
    let out = h.provider(&id, ProviderEvent::Ready { version: None });
    assert_eq!(out.prompts(&id), ["go on"]);
}

/// The Pr jobs among `out`'s workspace jobs.
fn pr_jobs(out: &Out) -> Vec<WorkspaceJob> {
    out.jobs
        .iter()
        .filter(|j| matches!(j.task, Task::Pr { .. }))
        .cloned()
        .collect()
}

/// `run_id`'s workspace with a pull request in `state`, read at `at`.
fn with_pr(run_id: &str, state: crate::workspace::forge::PrState, at: UnixMillis) -> WorkspaceView {
    use crate::workspace::forge::{Forge, PrView};
    WorkspaceView {
        pr: Some(PrView {
            forge: Forge::Github,
            number: 7,
            url: "https://github.com/test/repo/pull/7".into(),
            state,
            draft: false,
            checks: None,
            updated_at: at,
        }),
        ..made(run_id)
    }
}

/// An open pull request is read again on the timer (`[workspaces] pr_refresh_secs`),
/// not before its period, one read at a time; a read that fails is asked again a period
/// later (not at once, and with no note); once merged it is read no more.
#[test]
fn an_open_pull_request_is_read_again_on_its_timer_one_at_a_time() {
    use crate::workspace::forge::{PrDone, PrState, PushView};
    let mut h = Harness::new("[workspaces]\nshared_conflict = \"wait\"\npr_refresh_secs = 60\n");
    let (id, job) = h.idle_worktree_run();
    h.done(job, Ok(Outcome::Measured(change(1, 1, 0))));
    let out = h.request(Request::Pr {
        run_id: id.clone(),
        draft: false,
        title: None,
        force_with_lease: false,
        refresh: false,
    });
    let [job] = <[WorkspaceJob; 1]>::try_from(pr_jobs(&out)).expect("one push");
    let opened = PrDone {
        workspace: with_pr(&id, PrState::Open, h.now),
        push: Some(PushView {
            remote: "origin".into(),
            branch: format!("drover/{id}-do-the-thing"),
            commit: "c0ffee1111".into(),
            forced: false,
            compare_url: None,
        }),
        created: true,
        forge_cli_missing: None,
    };
    h.done(job, Ok(Outcome::Pr(Box::new(opened))));

    // Not before its period.
    assert!(pr_jobs(&h.advance(59_000)).is_empty());
    let out = h.advance(1_000);
    let [read] = <[WorkspaceJob; 1]>::try_from(pr_jobs(&out)).expect("read again at 60 s");
    assert!(matches!(&read.task, Task::Pr { ask, .. } if ask.refresh));
    // One at a time: nothing more while it is under way.
    assert!(pr_jobs(&h.advance(120_000)).is_empty());
    let notes_before = h.core.runs[&id].notes.len();
    let out = h.done(
        read,
        Err(DroverError::new(ErrorCode::ForgeFailed, "gh: HTTP 502")),
    );
    assert!(
        pr_jobs(&out).is_empty(),
        "a failed read is not asked again at once"
    );
    assert_eq!(
        h.core.runs[&id].notes.len(),
        notes_before,
        "no note for the timer"
    );
    assert!(pr_jobs(&h.advance(59_000)).is_empty());
    let out = h.advance(1_000);
    let [read] = <[WorkspaceJob; 1]>::try_from(pr_jobs(&out)).expect("asked again a period on");
    let merged = PrDone {
        workspace: with_pr(&id, PrState::Merged, h.now),
        push: None,
        created: false,
        forge_cli_missing: None,
    };
    let out = h.done(read, Ok(Outcome::Pr(Box::new(merged))));
    let saved = saved(&out, &id).expect("the pull request's state kept");
    assert_eq!(saved.pr.map(|p| p.state), Some(PrState::Merged));
    // Merged: read no more.
    assert!(pr_jobs(&h.advance(600_000)).is_empty());
}
