use super::*;
use agent_client_protocol::v1::schema::{
    ContentChunk, Cost, Diff, Plan, PlanEntry, PlanEntryPriority, TextContent, ToolCallUpdate,
    ToolCallUpdateFields, Usage, UsageUpdate,
};
use serde_json::json;

fn options() -> Vec<PermissionOption> {
    vec![
        PermissionOption::new("a1", "Allow", PermissionOptionKind::AllowOnce),
        PermissionOption::new("a2", "Always allow", PermissionOptionKind::AllowAlways),
        PermissionOption::new("r1", "Reject", PermissionOptionKind::RejectOnce),
    ]
}

#[test]
fn drovers_answers_pick_the_agents_own_options() {
    let o = options();
    let pick = |a: PermissionAnswer| option_for(&o, &a).map(|id| id.map(|i| i.0.to_string()));
    assert_eq!(
        pick(PermissionAnswer::Allow { always: false }),
        Ok(Some("a1".into()))
    );
    assert_eq!(
        pick(PermissionAnswer::Allow { always: true }),
        Ok(Some("a2".into()))
    );
    assert_eq!(
        pick(PermissionAnswer::Deny { message: None }),
        Ok(Some("r1".into()))
    );
    assert!(
        pick(PermissionAnswer::Answer {
            answers: Default::default()
        })
        .is_err()
    );
    // Only "always" offered: allow once takes it; no reject: a denial is a cancel.
    let only = vec![PermissionOption::new(
        "x",
        "Always",
        PermissionOptionKind::AllowAlways,
    )];
    assert_eq!(
        option_for(&only, &PermissionAnswer::Allow { always: false })
            .map(|id| id.map(|i| i.0.to_string())),
        Ok(Some("x".into()))
    );
    assert_eq!(
        option_for(&only, &PermissionAnswer::Deny { message: None }),
        Ok(None)
    );
    assert!(always_option(&o).is_some_and(|a| a.sentence.contains("Always allow")));
    assert!(always_option(&only[..0]).is_none());
}

#[test]
fn tool_calls_are_typed_asks() {
    let ask = ask_of(
        ToolKind::Execute,
        "Run tests",
        Some(&json!({"command": "cargo test", "cwd": "/w"})),
        &[],
        &[],
    );
    assert!(
        matches!(&ask, Ask::Command { command, cwd, .. } if command == "cargo test" && cwd.as_deref() == Some("/w")),
        "{ask:?}"
    );
    let ask = ask_of(
        ToolKind::Execute,
        "Run",
        Some(&json!({"command": ["git", "status"]})),
        &[],
        &[],
    );
    assert!(
        matches!(&ask, Ask::Command { command, .. } if command == "git status"),
        "{ask:?}"
    );
    let diff = ToolCallContent::Diff(Diff::new("src/x.rs", "new\n").old_text("old\n".to_string()));
    let ask = ask_of(ToolKind::Edit, "Edit src/x.rs", None, &[], &[diff]);
    match ask {
        Ask::FileEdit {
            file_path,
            change: FileChange::Diff { diff },
            ..
        } => {
            assert_eq!(file_path, "src/x.rs");
            assert!(diff.contains("-old") && diff.contains("+new"), "{diff}");
        }
        other => panic!("{other:?}"),
    }
    let ask = ask_of(
        ToolKind::Fetch,
        "Fetch",
        Some(&json!({"url": "http://127.0.0.1/x"})),
        &[],
        &[],
    );
    assert_eq!(
        ask,
        Ask::Fetch {
            url: "http://127.0.0.1/x".into()
        }
    );
    let ask = ask_of(
        ToolKind::Read,
        "Read a.rs",
        Some(&json!({"path": "a.rs"})),
        &[],
        &[],
    );
    assert!(
        matches!(&ask, Ask::Other { subject: Some(s), .. } if s == "a.rs"),
        "{ask:?}"
    );
}

#[test]
fn updates_become_events_and_a_turn_ends_once_with_its_tools() {
    let mut u = Updates::default();
    let text = |t: &str| {
        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(
            t.to_string(),
        ))))
    };
    assert_eq!(
        u.read(text("Hello")),
        vec![ProviderEvent::AssistantText {
            text: "Hello".into()
        }]
    );
    let started = u.read(SessionUpdate::ToolCall(
        ToolCall::new("c1", "Edit src/x.rs").kind(ToolKind::Edit),
    ));
    assert!(
        matches!(&started[..], [ProviderEvent::ToolStarted { tool_use_id, name, .. }] if tool_use_id == "c1" && name == "Edit src/x.rs"),
        "{started:?}"
    );
    // The same call again starts nothing; its end comes once.
    assert!(
        u.read(SessionUpdate::ToolCall(ToolCall::new("c1", "Edit")))
            .is_empty()
    );
    let done = SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        "c1",
        ToolCallUpdateFields::new().status(ToolCallStatus::Completed),
    ));
    assert_eq!(u.read(done.clone()).len(), 1);
    assert!(u.read(done).is_empty());
    // A second call is left open by the agent: the turn's end ends it, failed.
    u.read(SessionUpdate::ToolCall(ToolCall::new("c2", "Bash")));
    let plan = u.read(SessionUpdate::Plan(Plan::new(vec![
        PlanEntry::new("read", PlanEntryPriority::High, PlanEntryStatus::Completed),
        PlanEntry::new("write", PlanEntryPriority::High, PlanEntryStatus::Pending),
    ])));
    assert_eq!(plan, vec![notice("plan: [x] read · [ ] write".into())]);
    u.read(SessionUpdate::UsageUpdate(
        UsageUpdate::new(10, 100).cost(Cost::new(0.5, "USD")),
    ));
    let response = PromptResponse::new(StopReason::EndTurn).usage(
        Usage::new(160, 100, 60)
            .thought_tokens(10u64)
            .cached_read_tokens(40u64),
    );
    let end = u.turn_end(&response, Some("m1"), "s1", 5);
    match &end[..] {
        [
            ProviderEvent::ToolFinished {
                tool_use_id,
                is_error: true,
                ..
            },
            ProviderEvent::TurnCompleted(t),
        ] => {
            assert_eq!(tool_use_id, "c2");
            assert!(!t.is_error);
            assert_eq!(t.text.as_deref(), Some("Hello"));
            assert_eq!(t.total_cost_usd, Some(0.5));
            assert_eq!(
                t.tokens,
                Tokens {
                    input: 60,
                    output: 50,
                    reasoning: 10,
                    cache_read: 40,
                    cache_write: 0
                }
            );
            assert_eq!(t.model_usage[0].model, "m1");
        }
        other => panic!("{other:?}"),
    }
    // A cost in another currency is not dollars.
    let mut u = Updates::default();
    u.read(SessionUpdate::UsageUpdate(
        UsageUpdate::new(1, 2).cost(Cost::new(3.0, "credits")),
    ));
    assert_eq!(u.cost_usd(), None);
}

#[test]
fn a_turn_with_neither_tokens_nor_money_is_booked_under_an_unpriceable_row() {
    let mut u = Updates::default();
    let end = u.turn_end(
        &PromptResponse::new(StopReason::EndTurn),
        Some("m1"),
        "s1",
        5,
    );
    let [ProviderEvent::TurnCompleted(t)] = &end[..] else {
        panic!("{end:?}");
    };
    assert_eq!(t.total_cost_usd, None);
    assert_eq!(t.model_usage.len(), 1, "{t:?}");
    assert_eq!(t.model_usage[0].model, format!("m1 {UNREPORTED}"));
    assert_eq!(t.model_usage[0].tokens, Tokens::default());
    // With a cost reported, the cost is the turn's money and no such row is added.
    let mut u = Updates::default();
    u.read(SessionUpdate::UsageUpdate(
        UsageUpdate::new(1, 2).cost(Cost::new(0.25, "USD")),
    ));
    let end = u.turn_end(&PromptResponse::new(StopReason::EndTurn), None, "s1", 5);
    let [ProviderEvent::TurnCompleted(t)] = &end[..] else {
        panic!("{end:?}");
    };
    assert!(t.model_usage.is_empty(), "{t:?}");
}

#[test]
fn a_call_announced_only_by_updates_starts_and_ends_once() {
    // Gemini CLI 0.61.0: the permission request's call, then one `completed` update
    // with its title, and no `tool_call`.
    let mut u = Updates::default();
    u.start_turn();
    let completed = SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        "g1",
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Completed)
            .title("touch a.txt".to_string())
            .kind(ToolKind::Execute),
    ));
    let events = u.read(completed.clone());
    assert!(
        matches!(&events[..], [
            ProviderEvent::ToolStarted { tool_use_id, name, .. },
            ProviderEvent::ToolFinished { tool_use_id: ended, is_error: false, .. },
        ] if tool_use_id == "g1" && name == "touch a.txt" && ended == "g1"),
        "{events:?}"
    );
    // The same update again neither starts nor ends it a second time.
    assert!(u.read(completed).is_empty());
    // An update without a title for a call never started is still nothing.
    assert!(
        u.read(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            "g2",
            ToolCallUpdateFields::new().status(ToolCallStatus::Completed),
        )))
        .is_empty()
    );
}

#[test]
fn tokens_reported_in_the_answers_meta_are_the_turns() {
    // Gemini CLI 0.61.0 reports a turn's tokens in `_meta.quota`, not in `usage`.
    let mut u = Updates::default();
    let meta = json!({"quota": {"token_count": {"input_tokens": 2400, "output_tokens": 160},
        "model_usage": [{"model": "gemini-2.5-pro",
                         "token_count": {"input_tokens": 2400, "output_tokens": 160}}]}});
    let response = PromptResponse::new(StopReason::EndTurn).meta(meta.as_object().cloned());
    let end = u.turn_end(&response, None, "s1", 5);
    let [ProviderEvent::TurnCompleted(t)] = &end[..] else {
        panic!("{end:?}")
    };
    assert_eq!((t.tokens.input, t.tokens.output), (2400, 160));
    assert_eq!(t.model_usage.len(), 1, "{t:?}");
    assert_eq!(t.model_usage[0].model, "gemini-2.5-pro");
    // The run's own model wins over the agent's word.
    let end = u.turn_end(&response, Some("m1"), "s1", 5);
    let [ProviderEvent::TurnCompleted(t)] = &end[..] else {
        panic!("{end:?}")
    };
    assert_eq!(t.model_usage[0].model, "m1");
}
