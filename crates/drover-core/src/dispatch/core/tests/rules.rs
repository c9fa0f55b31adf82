//! Approval rules and the guard in the core (docs/ARCHITECTURE.md
//! §"Approval rules and the guard"): a rule answers a matching request at once as
//! `rule:<id>`, a rule made from a prompt answers the request on screen and others it
//! matches, a flagged request always asks.

use super::*;
use crate::dispatch::api::RuleAnswer;
use crate::rules::{RuleDecision, RuleKind, RuleSpec, Scope};

fn in_repo_shared(spec: &mut SpecInput) {
    spec.cwd = Some(PathBuf::from(REPO));
    spec.workspace = Some("shared".into());
}

fn repo_run(h: &mut Harness) -> String {
    let id = h.dispatch_with(in_repo_shared).run().head.run_id;
    h.provider(&id, ProviderEvent::Ready { version: None });
    id
}

fn spec(scope: Scope, kind: RuleKind, pattern: &str, decision: RuleDecision) -> RuleSpec {
    RuleSpec {
        scope,
        kind,
        pattern: pattern.into(),
        decision,
        run_id: None,
        repository: None,
    }
}

fn add(h: &mut Harness, rule: RuleSpec, answer: Option<(&str, &str)>) -> Out {
    h.request(Request::RuleAdd {
        rule,
        answer: answer.map(|(run_id, request_id)| RuleAnswer {
            run_id: run_id.into(),
            request_id: request_id.into(),
        }),
    })
}

fn answered(out: &Out, run_id: &str) -> Vec<(String, PermissionAnswer)> {
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
fn a_rule_made_from_a_prompt_answers_it_and_the_next_run_in_the_repository() {
    let mut h = Harness::new("");
    let first = repo_run(&mut h);
    h.provider(&first, permission("p1", "cargo test --lib foo"));
    let mut rule = spec(
        Scope::Repository,
        RuleKind::Command,
        "cargo test *",
        RuleDecision::Allow,
    );
    rule.repository = None; // filled from the run on screen
    let out = add(&mut h, rule, Some((&first, "p1")));
    let Ok(Response::Rule(made)) = out.reply() else {
        panic!("a rule: {:?}", out.reply());
    };
    assert_eq!(made.id, 1);
    assert_eq!(made.repository.as_deref(), Some("/work/repo/.git"));
    assert!(
        out.ops
            .iter()
            .any(|op| matches!(op, WriteOp::PutRule(r) if r.id == 1))
    );
    assert_eq!(answered(&out, &first), [("p1".to_string(), allow())]);
    assert_eq!(out.decisions()[0].0, "rule:1");
    assert_eq!(h.state(&first), RunState::Running);
    assert!(
        h.core.runs[&first]
            .transcript
            .lines()
            .any(|l| l.starts_with("rule 1 allowed Bash: cargo test")),
        "the transcript says the rule answered: {:?}",
        h.core.runs[&first].transcript.lines().collect::<Vec<_>>()
    );

    // A second run in the same repository: answered at once, nothing pending.
    let second = repo_run(&mut h);
    let out = h.provider(&second, permission("p2", "cargo test"));
    assert_eq!(answered(&out, &second), [("p2".to_string(), allow())]);
    assert_eq!(
        out.decisions(),
        [(
            "rule:1".to_string(),
            "allow by rule 1 (`cargo test *`, repository /work/repo)".to_string()
        )]
    );
    assert!(h.view(&second).pending.is_empty());
    assert_eq!(h.view(&second).decisions[0].who, "rule:1");
    // A chain with another command, or a run elsewhere, still asks.
    h.provider(&second, permission("p3", "cargo test && curl example.com"));
    assert_eq!(h.view(&second).pending.len(), 1);
    let elsewhere = h.running();
    h.provider(&elsewhere, permission("p4", "cargo test"));
    assert_eq!(h.view(&elsewhere).pending.len(), 1);
}

#[test]
fn a_new_rule_answers_what_is_pending_across_runs() {
    let mut h = Harness::new("");
    let a = repo_run(&mut h);
    let b = repo_run(&mut h);
    h.provider(&a, permission("pa", "git status"));
    h.provider(&b, permission("pb", "git status"));
    h.provider(&b, permission("pc", "git push"));
    let out = add(
        &mut h,
        spec(
            Scope::Everywhere,
            RuleKind::Command,
            "git status",
            RuleDecision::Allow,
        ),
        Some((&a, "pa")),
    );
    assert_eq!(answered(&out, &a), [("pa".to_string(), allow())]);
    assert_eq!(answered(&out, &b), [("pb".to_string(), allow())]);
    let pending: Vec<String> = h
        .view(&b)
        .pending
        .iter()
        .map(|p| p.request_id.clone())
        .collect();
    assert_eq!(pending, ["pc"]);
}

#[test]
fn a_deny_rule_denies_and_the_narrowest_scope_decides() {
    let mut h = Harness::new("");
    let id = repo_run(&mut h);
    add(
        &mut h,
        spec(
            Scope::Everywhere,
            RuleKind::Command,
            "git push *",
            RuleDecision::Deny,
        ),
        None,
    );
    let out = h.provider(&id, permission("p1", "git push origin main"));
    let sent = answered(&out, &id);
    assert!(
        matches!(&sent[0].1, PermissionAnswer::Deny { message: Some(m) } if m.contains("rule 1")),
        "{sent:?}"
    );
    let mut run_rule = spec(
        Scope::Run,
        RuleKind::Command,
        "git push origin main",
        RuleDecision::Allow,
    );
    run_rule.run_id = Some(id.clone());
    add(&mut h, run_rule, None);
    let out = h.provider(&id, permission("p2", "git push origin main"));
    assert_eq!(answered(&out, &id), [("p2".to_string(), allow())]);
    assert_eq!(out.decisions()[0].0, "rule:2");
}

#[test]
fn a_flagged_request_asks_whatever_the_rules_and_always_say() {
    let mut h = Harness::new("[guard]\ncommands = [\"docker system prune *\"]\n");
    let id = repo_run(&mut h);
    add(
        &mut h,
        spec(Scope::Everywhere, RuleKind::Any, "*", RuleDecision::Allow),
        None,
    );
    // Anything else is allowed by the rule …
    let out = h.provider(&id, permission("p0", "ls"));
    assert_eq!(answered(&out, &id), [("p0".to_string(), allow())]);
    // … but a recursive delete outside the workspace asks, with the guard's reason.
    let out = h.provider(&id, permission("p1", "rm -rf /tmp/canary"));
    assert!(answered(&out, &id).is_empty());
    let pending = &h.view(&id).pending[0];
    assert_eq!(pending.request_id, "p1");
    assert!(
        pending
            .guard
            .as_deref()
            .unwrap()
            .contains("outside the workspace"),
        "{pending:?}"
    );
    // No rule may be made to answer it, and "always" is taken as once.
    let out = add(
        &mut h,
        spec(Scope::Run, RuleKind::Command, "rm *", RuleDecision::Allow),
        Some((&id, "p1")),
    );
    assert_eq!(out.refusal().code, ErrorCode::RuleInvalid);
    h.request(Request::Respond {
        run_id: id.clone(),
        request_id: "p1".into(),
        answer: PermissionAnswer::Allow { always: true },
    });
    h.provider(&id, permission("p2", "rm -rf /tmp/canary"));
    assert_eq!(h.view(&id).pending[0].request_id, "p2");
    // The config's own patterns are flagged too.
    h.provider(&id, permission("p3", "docker system prune -af"));
    assert!(
        h.view(&id).pending[1]
            .guard
            .as_deref()
            .unwrap()
            .contains("your config")
    );
}

#[test]
fn rules_are_listed_removed_and_refused_with_codes() {
    let mut h = Harness::new("");
    add(
        &mut h,
        spec(
            Scope::Everywhere,
            RuleKind::Fetch,
            "https://docs.rs/*",
            RuleDecision::Allow,
        ),
        None,
    );
    let Ok(Response::Rules(rules)) = h.request(Request::Rules).reply().clone() else {
        panic!("rules");
    };
    assert_eq!(rules.len(), 1);
    let cases: Vec<(RuleSpec, ErrorCode)> = vec![
        (
            spec(
                Scope::Everywhere,
                RuleKind::Command,
                "",
                RuleDecision::Allow,
            ),
            ErrorCode::RuleInvalid,
        ),
        (
            spec(
                Scope::Repository,
                RuleKind::Command,
                "ls",
                RuleDecision::Allow,
            ),
            ErrorCode::RuleInvalid,
        ),
        (
            RuleSpec {
                repository: Some("/elsewhere".into()),
                ..spec(
                    Scope::Repository,
                    RuleKind::Command,
                    "ls",
                    RuleDecision::Allow,
                )
            },
            ErrorCode::RuleInvalid,
        ),
        (
            RuleSpec {
                run_id: Some("r-nope".into()),
                ..spec(Scope::Run, RuleKind::Command, "ls", RuleDecision::Allow)
            },
            ErrorCode::RunNotFound,
        ),
        (
            spec(
                Scope::Everywhere,
                RuleKind::Command,
                "curl -H 'Authorization: Bearer sk-ant-api03-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' *",
                RuleDecision::Allow,
            ),
            ErrorCode::RuleInvalid,
        ),
    ];
    for (rule, code) in cases {
        let text = format!("{rule:?}");
        let out = add(&mut h, rule, None);
        assert_eq!(out.refusal().code, code, "{text}");
        assert!(out.ops.is_empty(), "{text}: nothing kept");
    }
    let out = h.request(Request::RuleRemove { id: 1 });
    assert!(
        out.ops
            .iter()
            .any(|op| matches!(op, WriteOp::DeleteRule(1)))
    );
    assert_eq!(
        h.request(Request::RuleRemove { id: 1 }).refusal().code,
        ErrorCode::RuleNotFound
    );
}

#[test]
fn a_removed_runs_rules_go_with_it_and_other_rules_stay() {
    let mut h = Harness::new("");
    let id = h.idle();
    let mut for_the_run = spec(Scope::Run, RuleKind::Command, "ls", RuleDecision::Allow);
    for_the_run.run_id = Some(id.clone());
    add(&mut h, for_the_run, None);
    add(
        &mut h,
        spec(
            Scope::Everywhere,
            RuleKind::Command,
            "pwd",
            RuleDecision::Allow,
        ),
        None,
    );
    h.request(Request::Complete { run_id: id.clone() });
    h.exit(&id);
    assert!(h.state(&id).is_terminal());
    let out = h.request(Request::Remove {
        run_id: Some(id.clone()),
        finished: false,
        force: false,
    });
    assert!(
        matches!(out.reply(), Ok(Response::Removed(_))),
        "{:?}",
        out.reply()
    );
    assert!(
        out.ops
            .iter()
            .any(|op| matches!(op, WriteOp::DeleteRule(1))),
        "the run's rule is deleted from the ledger: {:?}",
        out.ops
    );
    let Ok(Response::Rules(rules)) = h.request(Request::Rules).reply().clone() else {
        panic!("rules");
    };
    let left: Vec<u64> = rules.iter().map(|r| r.id).collect();
    assert_eq!(left, [2], "the rule for everywhere stays");
}

/// A run on a host works in the host's paths: a rule for this machine's repository does
/// not answer its request in a directory of the same path there.
#[test]
fn a_rule_for_this_machines_repository_does_not_hold_on_a_host() {
    let mut h = Harness::new("[hosts.box]\nssh = \"me@box\"\n");
    let here = repo_run(&mut h);
    h.provider(&here, permission("p1", "cargo test"));
    let mut rule = spec(
        Scope::Repository,
        RuleKind::Command,
        "cargo test *",
        RuleDecision::Allow,
    );
    rule.repository = None;
    add(&mut h, rule, Some((&here, "p1")));
    let there = h
        .dispatch_with(|s| {
            in_repo_shared(s);
            s.host = Some("box".into());
        })
        .run()
        .head
        .run_id;
    h.provider(&there, ProviderEvent::Ready { version: None });
    let out = h.provider(&there, permission("p2", "cargo test"));
    assert!(answered(&out, &there).is_empty(), "{:?}", out.decisions());
    assert_eq!(h.view(&there).pending.len(), 1);
}
