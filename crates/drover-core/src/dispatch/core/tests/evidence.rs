//! Evidence (docs/ARCHITECTURE.md §"Evidence"): the commands a turn executed are kept with
//! their exit codes and the tests among them; a command refused (no exit code, an error)
//! is not; the run's view carries the line; a `done` whose test failed is offered a retry.

use super::*;

fn command(h: &mut Harness, id: &str, tool: &str, line: &str, exit: Option<i32>, error: bool) {
    h.provider(
        id,
        ProviderEvent::ToolStarted {
            tool_use_id: tool.into(),
            name: "Bash".into(),
            ask: Ask::command(line, None, None),
        },
    );
    h.provider(
        id,
        ProviderEvent::ToolFinished {
            tool_use_id: tool.into(),
            is_error: error,
            exit_code: exit,
            summary: "…".into(),
        },
    );
}

#[test]
fn a_turns_commands_and_tests_are_its_evidence() {
    let mut h = Harness::new("");
    let id = h.running();
    command(&mut h, &id, "t1", "ls src", Some(0), false);
    command(
        &mut h,
        &id,
        "t2",
        "cd crates && cargo test -p x",
        Some(101),
        true,
    );
    // Refused: no exit code with its error; it did not run.
    command(&mut h, &id, "t3", "rm -rf target", None, true);
    // A read is not a command.
    h.provider(
        &id,
        ProviderEvent::ToolStarted {
            tool_use_id: "t4".into(),
            name: "Read".into(),
            ask: Ask::other("Read", Some("src/lib.rs"), &serde_json::json!({})),
        },
    );
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: fixed\n"));
    let view = h.view(&id);
    let commands = &view.turns[0].commands;
    assert_eq!(
        commands
            .iter()
            .map(|c| (c.command.as_str(), c.exit_code, c.test.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("ls src", Some(0), None),
            (
                "cd crates && cargo test -p x",
                Some(101),
                Some("cargo test")
            ),
        ]
    );
    let evidence = view.evidence.expect("evidence once a turn ended");
    assert_eq!(
        evidence.line,
        "evidence: 2 commands · tests ran: cargo test (failed)"
    );
    assert!(evidence.warn);
    // The turn's row carries them.
    let WriteOp::UpsertTurn(row) = h.core.runs[&id].turns[0].record(&id) else {
        panic!("a turn's row")
    };
    assert_eq!(
        row.evidence,
        Some(serde_json::to_value(&view.turns[0].commands).unwrap())
    );
    // Said done while its test failed: a retry is offered on its own model, so it waits
    // in Needs you.
    let offer = view.escalation.expect("a retry offer");
    assert_eq!(offer.kind, crate::route::EscalationKind::Retry);
    assert!(
        offer
            .reason
            .starts_with("the run says done, but a test it ran failed"),
        "{}",
        offer.reason
    );

    // The next turn runs the test again and it passes: the offer is withdrawn.
    h.request(Request::FollowUp {
        run_id: id.clone(),
        text: "run the tests again".into(),
    });
    command(&mut h, &id, "t5", "cargo test -p x", Some(0), false);
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: green\n"));
    let view = h.view(&id);
    assert_eq!(
        view.evidence.expect("evidence").line,
        "evidence: 3 commands · tests ran: cargo test (passed)"
    );
    assert!(view.escalation.is_none());
}

#[test]
fn a_done_with_no_test_run_says_so() {
    let mut h = Harness::new("");
    let id = h.running();
    assert!(h.view(&id).evidence.is_none(), "no turn has ended yet");
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    let evidence = h.view(&id).evidence.expect("evidence");
    assert_eq!(
        evidence.line,
        "evidence: no command ran · done, but no test ran"
    );
    assert!(evidence.warn);
    assert!(
        h.view(&id).escalation.is_none(),
        "no test failed: nothing offered"
    );
}

#[test]
fn the_test_table_comes_from_config() {
    let mut h = Harness::new(
        "[evidence]\ntests = [{ pattern = \"make check *\", name = \"make check\" }]\n",
    );
    let id = h.running();
    command(&mut h, &id, "t1", "make check", Some(0), false);
    command(&mut h, &id, "t2", "cargo test", Some(0), false);
    h.provider(&id, turn_done("## Result\nstatus: done\nsummary: ok\n"));
    assert_eq!(
        h.view(&id).evidence.expect("evidence").line,
        "evidence: 2 commands · tests ran: make check (passed)"
    );
}
