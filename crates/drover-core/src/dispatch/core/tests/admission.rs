//! Admission in each outcome: accepted, queued, held, refused (per code), a repeated
//! idempotency key, a launch that fails.

use super::*;

#[test]
fn an_accepted_dispatch_launches_and_answers_once_the_launch_is_in() {
    let mut h = Harness::new("");
    let out = h.dispatch_with(|_| {});
    let run = out.run();
    assert_eq!(
        run.head.state,
        RunState::Starting,
        "the answer shows the launched run"
    );
    assert_eq!(out.launches.len(), 1);
    let spec = &out.launches[0];
    assert_eq!(spec.provider, "sim");
    assert_eq!(
        spec.cwd,
        PathBuf::from("/work"),
        "a missing cwd is the current dir"
    );
    assert_eq!(spec.scenario, None);
    assert_eq!(spec.resume_session, None);
    assert!(out.replies[0].2, "answered after the commit");
    assert!(
        out.ops.iter().any(|op| matches!(op, WriteOp::InsertRun(_))),
        "the run is written"
    );
    assert_eq!(h.live(&run.head.run_id).0, LiveStateKind::Preparing);
    assert_eq!(h.view(&run.head.run_id).pid, Some(100));
}

#[test]
fn a_full_rail_queues_and_the_queue_starts_when_a_slot_frees() {
    let mut h = Harness::new("[limits.per_provider]\nsim = 1\n");
    let first = h.running();
    let out = h.dispatch_with(|_| {});
    let queued = out.run();
    assert_eq!(queued.head.state, RunState::Queued);
    assert!(out.launches.is_empty());
    assert!(
        out.notes()
            .iter()
            .any(|n| n.starts_with("queued: sim already runs 1")),
        "{:?}",
        out.notes()
    );
    // The first run ends; its slot goes to the queued one.
    h.request(Request::Stop {
        run_id: first.clone(),
    });
    let out = h.exit(&first);
    assert_eq!(h.state(&first), RunState::Stopped);
    assert_eq!(out.launches.len(), 1, "the queued run is launched");
    assert_eq!(out.launches[0].run_id, queued.head.run_id);
    assert_eq!(h.state(&queued.head.run_id), RunState::Starting);
}

#[test]
fn a_dispatch_without_a_model_waits_on_a_route_card() {
    let mut h = Harness::new("");
    let out = h.dispatch_with(|s| s.model = Some("auto".into()));
    let run = out.run();
    assert_eq!(run.head.state, RunState::AwaitingRoute);
    assert!(out.launches.is_empty(), "a held run takes no slot");
    let card = h.view(&run.head.run_id).route.expect("a route card");
    assert_eq!(card.status, "open");
    assert!(!card.options.is_empty());
    // A pick starts it.
    let out = h.request(Request::Route {
        run_id: run.head.run_id.clone(),
        option: 1,
        remember: false,
    });
    assert_eq!(out.run().head.state, RunState::Starting);
    assert_eq!(out.launches.len(), 1);
    assert_eq!(h.view(&run.head.run_id).route.unwrap().status, "decided");
}

#[test]
fn refused_dispatches_create_nothing_and_say_why() {
    type Case = (&'static str, &'static str, fn(&mut SpecInput), ErrorCode);
    let cases: &[Case] = &[
        (
            "",
            "an empty task",
            |s| s.task = "  ".into(),
            ErrorCode::TaskRequired,
        ),
        (
            "",
            "a provider drover does not know",
            |s| s.provider = Some("nonesuch".into()),
            ErrorCode::InvalidProvider,
        ),
        (
            "",
            "a directory that does not exist",
            |s| s.cwd = Some("/nowhere".into()),
            ErrorCode::CwdInvalid,
        ),
        (
            "",
            "a provider whose CLI is not installed",
            |s| s.provider = Some("codex".into()),
            ErrorCode::ProviderUnavailable,
        ),
        (
            "",
            "a scenario the sim does not have",
            |s| s.scenario = Some("nope".into()),
            ErrorCode::ScenarioUnknown,
        ),
        (
            "",
            "a model the catalog does not list",
            |s| s.model = Some("sim-gigantic".into()),
            ErrorCode::ModelUnknown,
        ),
        (
            "[limits.per_provider]\nsim = 1\n",
            "a full rail without queueing",
            |s| s.queue_if_busy = Some(false),
            ErrorCode::MaxConcurrent,
        ),
        (
            "[limits]\nqueued_per_session = 0\n[limits.per_provider]\nsim = 1\n",
            "a full queue",
            |_| {},
            ErrorCode::QueueFull,
        ),
        (
            "[limits]\nheld_per_session = 0\n",
            "no room on route cards",
            |s| s.model = Some("auto".into()),
            ErrorCode::HeldFull,
        ),
    ];
    for (config, what, adjust, code) in cases {
        let mut h = Harness::new(config);
        // A rail of one is full once a run holds its slot (a rail of 0 is refused by
        // the config itself).
        let busy = if config.contains("[limits.per_provider]\nsim = 1") {
            vec![h.running()]
        } else {
            Vec::new()
        };
        let out = h.dispatch_with(adjust);
        assert_eq!(
            out.refusal().code,
            *code,
            "{what}: {}",
            out.refusal().message
        );
        assert!(!out.replies[0].2, "{what}: refused at once");
        assert!(
            out.ops.is_empty() && out.events.is_empty(),
            "{what}: nothing written"
        );
        assert_eq!(h.core.runs.len(), busy.len(), "{what}: nothing created");
        assert!(out.jobs.is_empty(), "{what}: no worktree made");
    }
}

#[test]
fn a_dispatch_that_cannot_start_says_what_to_do() {
    let mut h = Harness::new("");
    let e = h
        .dispatch_with(|s| s.provider = Some("codex".into()))
        .refusal()
        .clone();
    assert!(e.message.contains("`codex`"), "{}", e.message);
    assert!(e.message.contains("drover doctor"), "{}", e.message);
    let e = h
        .dispatch_with(|s| s.scenario = Some("tool-permision".into()))
        .refusal()
        .clone();
    assert_eq!(e.code, ErrorCode::ScenarioUnknown);
    assert!(
        e.message.contains("did you mean tool-permission?"),
        "{}",
        e.message
    );
    // A path names the sim's scenario file; the sim reads it.
    let run = h
        .dispatch_with(|s| s.scenario = Some("scenarios/mine.toml".into()))
        .run();
    assert_eq!(run.head.state, RunState::Starting);
    // A route across providers is not refused for the default provider's CLI: it offers
    // the providers that can run.
    let mut h = Harness::new("");
    h.core.facts = Box::new(FakeFacts {
        clis: ["codex".to_string(), "git".to_string()]
            .into_iter()
            .collect(),
        bwrap: true,
    });
    let out = h.dispatch_with(|s| {
        s.provider = None;
        s.model = Some("auto".into());
    });
    assert!(out.reply().is_ok(), "{:?}", out.reply());
    let e = h
        .dispatch_with(|s| s.provider = Some("claude-code".into()))
        .refusal()
        .clone();
    assert_eq!(e.code, ErrorCode::ProviderUnavailable);
    assert!(
        e.message
            .contains("npm install -g @anthropic-ai/claude-code@"),
        "{}",
        e.message
    );
}

#[test]
fn a_session_with_nothing_left_refuses_and_one_with_little_lowers_the_cap() {
    let mut h = Harness::with_session("", 25.0);
    let out = h.dispatch_with(|_| {});
    assert_eq!(out.refusal().code, ErrorCode::BudgetExceeded);
    assert!(h.core.runs.is_empty());

    let mut h = Harness::with_session("", 23.0);
    let run = h.dispatch_with(|_| {}).run();
    assert_eq!(
        run.head.budget_usd, 2.0,
        "lowered to what the hard cap leaves"
    );
    assert!(
        h.view(&run.head.run_id).budget.clamped_from == Some(5.0),
        "the asked-for cap is kept"
    );
}

#[test]
fn a_repeated_idempotency_key_returns_the_same_run() {
    let mut h = Harness::new("");
    // Not in memory: the ledger is asked first.
    let out = h.dispatch_with(|s| s.idempotency_key = Some("k1".into()));
    assert!(out.replies.is_empty() && h.core.runs.is_empty());
    let [(Fetch::ByIdempotencyKey { key, .. }, then)] = &out.loads[..] else {
        panic!("expected one idempotency read, got {:?}", out.loads);
    };
    assert_eq!(key, "k1");
    // The ledger has none: the run is admitted.
    let out = h.feed(Input::Loaded {
        then: then.clone(),
        answer: Ok(Fetched::Run(None)),
    });
    let first = out.run();
    // The same key again is answered from memory, nothing new is made.
    let out = h.dispatch_with(|s| s.idempotency_key = Some("k1".into()));
    assert_eq!(out.run().head.run_id, first.head.run_id);
    assert!(out.loads.is_empty() && out.launches.is_empty());
    assert_eq!(h.core.runs.len(), 1);
    // A key the ledger knows returns the ledger's run.
    let out = h.dispatch_with(|s| s.idempotency_key = Some("k2".into()));
    let (_, then) = out.loads[0].clone();
    let mut old = first.clone();
    old.head.run_id = "rold".into();
    let out = h.feed(Input::Loaded {
        then,
        answer: Ok(Fetched::Run(Some(Box::new(old)))),
    });
    assert_eq!(out.run().head.run_id, "rold");
    assert_eq!(h.core.runs.len(), 1);
}

#[test]
fn a_launch_that_fails_fails_the_run_with_its_cause() {
    let mut h = Harness::new("");
    h.fail_launch = Some("No such file or directory".into());
    let out = h.dispatch_with(|_| {});
    let run = out.run();
    assert_eq!(run.head.state, RunState::Failed);
    assert_eq!(run.head.completion_reason.as_deref(), Some("launch_error"));
    assert!(
        out.notes()
            .iter()
            .any(|n| n.contains("launch failed") && n.contains("No such file")),
        "{:?}",
        out.notes()
    );
    assert_eq!(cause_of(&h, &run.head.run_id), Some(Cause::Failed));
    assert!(h.core.runs[&run.head.run_id].child.is_none());
}

#[test]
fn runs_and_views_of_runs_not_in_memory_are_read_from_the_ledger() {
    let mut h = Harness::new("");
    let id = h.dispatch();
    let out = h.request(Request::Show {
        run_id: "rgone".into(),
    });
    assert!(matches!(&out.answers[..], [(_, Query::Show { run_id })] if run_id == "rgone"));
    let out = h.request(Request::Runs {
        state: None,
        include_removed: false,
        workflow: None,
        limit: None,
        before: None,
        search: None,
    });
    match &out.answers[..] {
        [(_, Query::Runs { live, .. })] => {
            assert_eq!(live.len(), 1);
            assert_eq!(live[0].head.run_id, id);
        }
        other => panic!("expected a runs read, got {other:?}"),
    }
    let out = h.request(Request::Stop {
        run_id: "rgone".into(),
    });
    assert!(matches!(&out.answers[..], [(_, Query::NotActive { .. })]));
    // A retry of a run drover does not hold is answered from the ledger too: the run may
    // be there (removed), and the refusal says what works.
    let out = h.request(Request::Retry {
        run_id: "rgone".into(),
    });
    assert!(matches!(&out.answers[..], [(_, Query::NotActive { .. })]));
    let e = super::super::not_held("rgone", RunState::Completed, true);
    assert_eq!(e.code, ErrorCode::RunNotActive);
    assert!(!e.message.contains("retry rgone"), "{}", e.message);
    assert!(e.message.contains("`drover show rgone`"), "{}", e.message);
    // A run in memory is answered from memory.
    let out = h.request(Request::Show { run_id: id });
    assert!(out.answers.is_empty());
    assert!(matches!(out.reply(), Ok(Response::Show(_))));
}

/// docs/ARCHITECTURE.md §"The sandbox": asked, or put on an `auto` run by `sandbox_auto`,
/// or inherited by a sub-run; carried to the launch with the run's directory, the
/// configured network and what it hides; refused, nothing made, where bubblewrap cannot
/// run.
#[test]
fn a_sandbox_is_asked_put_on_auto_runs_inherited_and_refused_without_bubblewrap() {
    let mut h = Harness::new("[limits]\nsandbox_auto = true\nsandbox_network = false\n");
    // Not asked, not auto: no sandbox.
    let out = h.dispatch_with(|_| {});
    assert!(!out.run().sandbox);
    assert!(out.launches.iter().all(|l| l.sandbox.is_none()));
    // Asked.
    let out = h.dispatch_with(|s| s.sandbox = Some(true));
    let run = out.run();
    assert!(run.sandbox);
    assert!(
        h.core.runs[&run.head.run_id].spec.sandbox,
        "kept in the spec"
    );
    let launch = out
        .launches
        .iter()
        .find(|l| l.run_id == run.head.run_id)
        .expect("launched");
    let sandbox = launch.sandbox.as_ref().expect("launched in a sandbox");
    assert!(!sandbox.network, "[limits] sandbox_network = false");
    assert_eq!(sandbox.work_dir, launch.cwd);
    assert!(
        sandbox.hidden.contains(&h.core.data_dir),
        "{:?}",
        sandbox.hidden
    );
    // `auto` with `sandbox_auto`: sandboxed without asking.
    let auto = h.dispatch_with(|s| s.policy = Some("auto".into())).run();
    assert!(auto.sandbox);
    // A sub-run of a sandboxed run is sandboxed too.
    let child = h
        .dispatch_with(|s| s.parent_run = Some(run.head.run_id.clone()))
        .run();
    assert!(child.sandbox);

    // No bubblewrap: refused with its code, and nothing is made.
    h.core.facts = Box::new(FakeFacts {
        clis: ["claude".to_string(), "git".to_string()]
            .into_iter()
            .collect(),
        bwrap: false,
    });
    let before = h.core.runs.len();
    let asked = h.dispatch_with(|s| s.sandbox = Some(true));
    assert_eq!(asked.refusal().code, ErrorCode::SandboxUnavailable);
    let auto = h.dispatch_with(|s| s.policy = Some("auto".into()));
    assert_eq!(auto.refusal().code, ErrorCode::SandboxUnavailable);
    assert!(auto.ops.is_empty() && auto.launches.is_empty());
    assert_eq!(h.core.runs.len(), before);
    // A run not to be sandboxed still goes.
    assert!(h.dispatch_with(|_| {}).reply().is_ok());
}
