//! Sub-runs (docs/ARCHITECTURE.md §"Agents as clients"): a dispatch naming a parent run is
//! one level deeper, in the parent's workflow, with a cap that fits what the parent has
//! left; past `max_depth`, or with too little left, it is refused.

use super::super::admission::{ParentFacts, SubRun, sub_run};
use super::*;

fn limits() -> crate::config::Limits {
    Config::parse("", Path::new("config.toml"))
        .expect("the default config")
        .limits
}

#[test]
fn the_rules_for_a_sub_run() {
    let limits = limits();
    let default = limits.budget_usd_default;
    let parent = |depth, workflow_id, left_usd| ParentFacts {
        run_id: "r-parent",
        depth,
        workflow_id,
        left_usd,
    };
    let input = |budget_usd: Option<f64>, workflow: Option<&str>| SpecInput {
        budget_usd,
        workflow_id: workflow.map(str::to_string),
        ..SpecInput::default()
    };
    // (parent, input, depth, workflow, cap, notes)
    let cases: Vec<(ParentFacts, SpecInput, u32, &str, f64, usize)> = vec![
        // A top-level parent with no workflow: its own id is the workflow.
        (
            parent(0, None, 100.0),
            input(None, None),
            1,
            "r-parent",
            default,
            0,
        ),
        (
            parent(1, Some("wf"), 100.0),
            input(Some(1.0), None),
            2,
            "wf",
            1.0,
            0,
        ),
        // The parent's workflow wins over another one asked for (noted).
        (
            parent(0, Some("wf"), 100.0),
            input(Some(1.0), Some("other")),
            1,
            "wf",
            1.0,
            1,
        ),
        // The asked cap is cut to what the parent has left (to the cent, down; noted).
        (
            parent(0, None, 0.759),
            input(Some(2.0), None),
            1,
            "r-parent",
            0.75,
            1,
        ),
    ];
    for (p, i, depth, workflow, cap, notes) in cases {
        let got: SubRun = sub_run(&p, &i, &limits).expect("admitted");
        assert_eq!(got.depth, depth, "{p:?}");
        assert_eq!(got.workflow_id, workflow, "{p:?}");
        assert!(
            (got.budget_usd - cap).abs() < 1e-9,
            "{p:?}: {}",
            got.budget_usd
        );
        assert_eq!(got.notes.len(), notes, "{p:?}: {:?}", got.notes);
    }
    // Refusals: too deep, too little left.
    let max = limits.max_depth;
    let e = sub_run(&parent(max, None, 100.0), &input(None, None), &limits).unwrap_err();
    assert_eq!(e.code, ErrorCode::MaxDepth);
    assert!(e.message.contains("max_depth"), "{}", e.message);
    let e = sub_run(&parent(0, None, 0.0), &input(None, None), &limits).unwrap_err();
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert!(e.message.contains("r-parent"), "{}", e.message);
}

#[test]
fn a_sub_run_records_its_parent_depth_and_workflow() {
    let mut h = Harness::new("");
    let parent = h.running();
    let out = h.dispatch_with(|s| s.parent_run = Some(parent.clone()));
    let child = out.run().head.run_id;
    let view = h.view(&child);
    assert_eq!(view.parent_run.as_deref(), Some(parent.as_str()));
    assert_eq!(view.depth, 1);
    assert_eq!(
        h.core.runs[&child].spec.workflow_id.as_deref(),
        Some(parent.as_str())
    );
    // Its cap and its live siblings' fit inside the parent's.
    let mut h = Harness::new("");
    let parent = h
        .dispatch_with(|s| s.budget_usd = Some(5.0))
        .run()
        .head
        .run_id;
    let first = h.dispatch_with(|s| {
        s.parent_run = Some(parent.clone());
        s.budget_usd = Some(2.0);
    });
    assert!((first.run().head.budget_usd - 2.0).abs() < 1e-9);
    let second = h.dispatch_with(|s| {
        s.parent_run = Some(parent.clone());
        s.budget_usd = Some(5.0);
    });
    assert!((second.run().head.budget_usd - 3.0).abs() < 1e-9);
    let third = h.dispatch_with(|s| s.parent_run = Some(parent.clone()));
    assert_eq!(third.refusal().code, ErrorCode::BudgetExceeded);
    // A grandchild of a grandchild… stops at max_depth.
    let mut h = Harness::new("[limits]\nmax_depth = 1\n");
    let parent = h.running();
    let child = h
        .dispatch_with(|s| s.parent_run = Some(parent.clone()))
        .run()
        .head
        .run_id;
    let out = h.dispatch_with(|s| s.parent_run = Some(child.clone()));
    assert_eq!(out.refusal().code, ErrorCode::MaxDepth);
    // An unknown parent is refused.
    let out = h.dispatch_with(|s| s.parent_run = Some("r-nope".into()));
    assert_eq!(out.refusal().code, ErrorCode::RunNotFound);
}

#[test]
fn a_sub_run_in_its_parents_shared_directory_does_not_wait_for_it() {
    let mut h = Harness::new("[workspaces]\ndefault = \"shared\"\nshared_conflict = \"wait\"\n");
    let parent = h.running();
    // Another run in the same directory waits for the parent …
    let other = h.dispatch_with(|_| {}).run();
    assert_eq!(
        h.live(&other.head.run_id).0,
        LiveStateKind::WaitingRepository
    );
    // … but the parent's own sub-run (which the parent waits for) starts.
    let out = h.dispatch_with(|s| s.parent_run = Some(parent.clone()));
    let child = out.run().head.run_id;
    assert_eq!(out.launches.len(), 1, "the sub-run is launched");
    assert_eq!(out.launches[0].run_id, child);
}
