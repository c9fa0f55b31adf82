//! Permission requests and answers (docs/ARCHITECTURE.md §"Permission prompts"): the
//! request is shown, an answer lands on its request or nowhere, "allow always", the
//! policies, a withdrawn request.

use super::*;

fn respond(h: &mut Harness, run_id: &str, request_id: &str, answer: PermissionAnswer) -> Out {
    h.request(Request::Respond {
        run_id: run_id.into(),
        request_id: request_id.into(),
        answer,
    })
}

fn answers_sent(out: &Out, run_id: &str) -> Vec<(String, PermissionAnswer)> {
    out.sent(run_id)
        .into_iter()
        .filter_map(|c| match c {
            ProviderCommand::Answer { request_id, answer } => {
                Some((request_id.clone(), answer.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_request_waits_for_the_user_and_an_allow_goes_to_the_child() {
    let mut h = Harness::new("");
    let id = h.running();
    let out = h.provider(&id, permission("p1", "ls -la"));
    assert!(
        answers_sent(&out, &id).is_empty(),
        "nothing is answered for the user"
    );
    assert_eq!(h.state(&id), RunState::AwaitingPermission);
    assert_eq!(
        h.live(&id).1.as_deref(),
        Some("waiting for your answer: Bash")
    );
    assert!(out
        .events
        .iter()
        .any(|e| matches!(e, DispatchEvent::PermissionRequested { pending, .. } if pending.request_id == "p1")));
    let pending = &h.view(&id).pending[0];
    assert_eq!(pending.ask.summary(), "ls -la");
    assert_eq!(pending.expires_at - pending.created_at, 10 * MIN);

    let out = respond(&mut h, &id, "p1", allow());
    assert_eq!(answers_sent(&out, &id), [("p1".to_string(), allow())]);
    assert_eq!(out.decisions(), [("user".to_string(), "allow".to_string())]);
    assert_eq!(h.state(&id), RunState::Running);
    assert_eq!(h.live(&id).1.as_deref(), Some("running a tool: Bash"));
}

#[test]
fn an_answer_lands_on_its_own_request_or_nowhere() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(&id, permission("p1", "ls"));
    h.provider(&id, question("q1"));
    let cases: &[(&str, PermissionAnswer, ErrorCode)] = &[
        ("nope", allow(), ErrorCode::NoPendingRequest),
        (
            "p1",
            PermissionAnswer::Answer {
                answers: [("Which database?".to_string(), "pg".to_string())].into(),
            },
            ErrorCode::InvalidSpec,
        ),
    ];
    for (request_id, answer, code) in cases {
        let out = respond(&mut h, &id, request_id, answer.clone());
        assert_eq!(out.refusal().code, *code, "{request_id}");
        assert!(out.sends.is_empty(), "{request_id}: nothing sent");
    }
    assert_eq!(h.view(&id).pending.len(), 2, "both still pending");
    // The question answered, the permission denied: each on its own id.
    let out = respond(
        &mut h,
        &id,
        "q1",
        PermissionAnswer::Answer {
            answers: [("Which database?".to_string(), "pg".to_string())].into(),
        },
    );
    assert_eq!(answers_sent(&out, &id)[0].0, "q1");
    assert_eq!(h.state(&id), RunState::AwaitingPermission, "p1 still waits");
    respond(&mut h, &id, "p1", PermissionAnswer::Deny { message: None });
    assert_eq!(h.state(&id), RunState::Running);
    assert_eq!(
        h.live(&id).1.as_deref(),
        Some("model turn"),
        "a denial goes back to the model"
    );
    // Answering again is refused as already resolved.
    let out = respond(&mut h, &id, "p1", allow());
    assert_eq!(out.refusal().code, ErrorCode::PermissionAlreadyResolved);
}

#[test]
fn allow_always_answers_the_same_request_again_without_asking() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(&id, permission("p1", "cargo test"));
    respond(&mut h, &id, "p1", PermissionAnswer::Allow { always: true });
    let out = h.provider(&id, permission("p2", "cargo test"));
    assert_eq!(
        answers_sent(&out, &id),
        [("p2".to_string(), PermissionAnswer::Allow { always: true })]
    );
    assert_eq!(out.decisions()[0].0, "always");
    assert_eq!(h.state(&id), RunState::Running);
    // Another command still asks.
    h.provider(&id, permission("p3", "rm -rf target"));
    assert_eq!(h.state(&id), RunState::AwaitingPermission);
}

#[test]
fn policies_without_prompts_answer_by_themselves() {
    type Case = (&'static str, fn() -> ProviderEvent, bool);
    let cases: &[Case] = &[
        ("auto", || permission("p", "ls"), true),
        ("auto", || question("q"), false),
        ("restricted", || permission("p", "ls"), false),
    ];
    for (policy, event, allowed) in cases {
        let mut h = Harness::new("");
        let id = h
            .dispatch_with(|s| s.policy = Some(policy.to_string()))
            .run()
            .head
            .run_id;
        h.provider(&id, ProviderEvent::Ready { version: None });
        let out = h.provider(&id, event());
        let sent = answers_sent(&out, &id);
        assert_eq!(sent.len(), 1, "{policy}");
        assert_eq!(
            matches!(sent[0].1, PermissionAnswer::Allow { .. }),
            *allowed,
            "{policy}: {:?}",
            sent[0].1
        );
        assert_eq!(out.decisions()[0].0, "policy", "{policy}");
        assert_ne!(h.state(&id), RunState::AwaitingPermission, "{policy}");
    }
}

#[test]
fn a_withdrawn_request_leaves_the_list_as_the_providers_decision() {
    let mut h = Harness::new("");
    let id = h.running();
    h.provider(&id, permission("p1", "ls"));
    let out = h.provider(
        &id,
        ProviderEvent::PermissionWithdrawn {
            request_id: "p1".into(),
        },
    );
    assert_eq!(
        out.decisions(),
        [(
            "provider".to_string(),
            "withdrawn by the provider".to_string()
        )]
    );
    assert_eq!(h.state(&id), RunState::Running);
    let out = respond(&mut h, &id, "p1", allow());
    assert_eq!(out.refusal().code, ErrorCode::PermissionAlreadyResolved);
}

#[test]
fn an_answer_to_a_run_not_in_memory_is_refused_from_the_ledger() {
    let mut h = Harness::new("");
    let out = respond(&mut h, "rgone", "p1", allow());
    assert!(matches!(&out.answers[..], [(_, Query::NotActive { run_id })] if run_id == "rgone"));
    assert!(out.replies.is_empty());
}
