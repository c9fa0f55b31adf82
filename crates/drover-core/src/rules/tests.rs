//! Rules: matching, precedence, proposals and bounds, as tables.

use super::*;
use crate::providers::FileChange;

const WS: &str = "/src/app";

fn rule(id: u64, scope: Scope, kind: RuleKind, pattern: &str, decision: RuleDecision) -> Rule {
    Rule {
        id,
        scope,
        kind,
        pattern: pattern.into(),
        decision,
        run_id: (scope == Scope::Run).then(|| "r-1".to_string()),
        repository: (scope == Scope::Repository).then(|| "/src/app/.git".to_string()),
        created_at: 0,
    }
}

fn place<'a>(run_id: &'a str, repository: Option<&'a str>) -> Place<'a> {
    Place {
        run_id,
        repository,
        workspace: Some(Path::new(WS)),
    }
}

fn cmd(text: &str) -> Ask {
    Ask::command(text, None, None)
}

fn edit(path: &str) -> Ask {
    Ask::FileEdit {
        file_path: path.into(),
        change: FileChange::Delete,
        other_files: vec![],
    }
}

use RuleDecision::{Allow, Deny};
use RuleKind::*;
use Scope::*;

#[test]
fn rules_match_by_kind_and_pattern() {
    let here = place("r-1", Some("/src/app/.git"));
    // (rule, ask, decided)
    let table: Vec<(Rule, Ask, bool)> = vec![
        (
            rule(1, Everywhere, Command, "cargo test *", Allow),
            cmd("cargo test --lib x"),
            true,
        ),
        (
            rule(1, Everywhere, Command, "cargo test *", Allow),
            cmd("cargo test && curl x"),
            false,
        ),
        (
            rule(1, Everywhere, Command, "cargo test *", Allow),
            cmd("cd sub && cargo test"),
            true,
        ),
        (
            rule(1, Everywhere, Command, "cargo test *", Allow),
            cmd("bash -lc 'cargo test'"),
            true,
        ),
        (
            rule(1, Everywhere, Command, "cargo test *", Allow),
            cmd("cargo test > /etc/x"),
            false,
        ),
        (
            rule(1, Everywhere, Command, "cargo test *", Deny),
            cmd("ls && cargo test"),
            true,
        ),
        (
            rule(1, Everywhere, Command, "git status", Allow),
            cmd("git status"),
            true,
        ),
        (
            rule(1, Everywhere, Command, "git status", Allow),
            cmd("git status; rm x"),
            false,
        ),
        (
            rule(1, Everywhere, Command, "ls", Allow),
            cmd("echo 'open"),
            false,
        ),
        (
            rule(1, Everywhere, FileEdit, "src/**", Allow),
            edit("src/a/b.rs"),
            true,
        ),
        (
            rule(1, Everywhere, FileEdit, "src/**", Allow),
            edit("/src/app/src/x.rs"),
            true,
        ),
        (
            rule(1, Everywhere, FileEdit, "src/**", Allow),
            edit("/elsewhere/src/x.rs"),
            false,
        ),
        (
            rule(1, Everywhere, FileEdit, "src/**", Allow),
            edit("tests/x.rs"),
            false,
        ),
        (
            rule(1, Everywhere, FileEdit, "src/**", Allow),
            cmd("src/x"),
            false,
        ),
        (
            rule(1, Everywhere, Fetch, "https://docs.rs/*", Allow),
            Ask::Fetch {
                url: "https://docs.rs/x".into(),
            },
            true,
        ),
        (
            rule(1, Everywhere, McpTool, "github/*", Allow),
            Ask::McpTool {
                server: "github".into(),
                tool: "issue".into(),
                arguments: "{}".into(),
            },
            true,
        ),
        (
            rule(1, Everywhere, McpTool, "github/*", Allow),
            Ask::McpTool {
                server: "gitlab".into(),
                tool: "issue".into(),
                arguments: "{}".into(),
            },
            false,
        ),
        (
            rule(1, Everywhere, Any, "*", Allow),
            cmd("anything at all"),
            true,
        ),
        (
            rule(1, Everywhere, Any, "*", Allow),
            Ask::Question { questions: vec![] },
            false,
        ),
        (rule(1, Run, Command, "ls *", Allow), cmd("ls -la"), true),
        (
            rule(1, Repository, Command, "ls *", Allow),
            cmd("ls -la"),
            true,
        ),
    ];
    for (r, ask, decided) in table {
        let mut set = RuleSet::default();
        let text = format!("{} {:?} {}", r.pattern, r.decision, ask.summary());
        set.add(r).unwrap();
        assert_eq!(set.decide(&ask, &here).is_some(), decided, "{text}");
    }
}

#[test]
fn scopes_hold_where_they_say() {
    let mut set = RuleSet::default();
    set.add(rule(1, Run, Command, "ls", Allow)).unwrap();
    set.add(rule(2, Repository, Command, "pwd", Allow)).unwrap();
    let ls = cmd("ls");
    let pwd = cmd("pwd");
    assert_eq!(set.decide(&ls, &place("r-1", None)).map(|r| r.id), Some(1));
    assert!(set.decide(&ls, &place("r-2", None)).is_none());
    assert_eq!(
        set.decide(&pwd, &place("r-9", Some("/src/app/.git")))
            .map(|r| r.id),
        Some(2)
    );
    assert!(
        set.decide(&pwd, &place("r-9", Some("/src/other/.git")))
            .is_none()
    );
    assert!(set.decide(&pwd, &place("r-9", None)).is_none());
    assert_eq!(set.forget_run("r-1"), vec![1]);
    assert!(set.decide(&ls, &place("r-1", None)).is_none());
}

#[test]
fn the_narrowest_scope_decides_and_deny_beats_allow_within_it() {
    let here = place("r-1", Some("/src/app/.git"));
    let push = cmd("git push origin main");
    let mut set = RuleSet::default();
    set.add(rule(1, Everywhere, Command, "git push *", Deny))
        .unwrap();
    assert_eq!(set.decide(&push, &here).unwrap().decision, Deny);
    set.add(rule(2, Repository, Command, "git push *", Allow))
        .unwrap();
    assert_eq!(set.decide(&push, &here).unwrap().id, 2);
    set.add(rule(3, Repository, Command, "git *", Deny))
        .unwrap();
    assert_eq!(set.decide(&push, &here).unwrap().id, 3);
    set.add(rule(4, Run, Command, "git push origin main", Allow))
        .unwrap();
    assert_eq!(set.decide(&push, &here).unwrap().id, 4);
    assert_eq!(set.remove(4).unwrap().id, 4);
    assert_eq!(set.remove(4).unwrap_err().code, ErrorCode::RuleNotFound);
    assert_eq!(set.next_id(), 5, "a removed rule's id is not given again");
}

#[test]
fn the_proposed_pattern_covers_the_same_work() {
    let table: Vec<(Ask, Option<(RuleKind, &str)>)> = vec![
        (cmd("cargo test --lib foo"), Some((Command, "cargo test *"))),
        (cmd("git status"), Some((Command, "git status"))),
        (cmd("ls -la"), Some((Command, "ls *"))),
        (cmd("ls"), Some((Command, "ls"))),
        (cmd("/usr/bin/make -j4"), Some((Command, "make *"))),
        (
            cmd("bash -lc 'npm run build'"),
            Some((Command, "npm run *")),
        ),
        (
            cmd("cd sub && cargo fmt --check"),
            Some((Command, "cargo fmt *")),
        ),
        (edit("src/tui/app.rs"), Some((FileEdit, "src/tui/**"))),
        (edit("/src/app/README.md"), Some((FileEdit, "README.md"))),
        (edit("/etc/x"), None),
        (
            Ask::Fetch {
                url: "https://docs.rs/serde/latest".into(),
            },
            Some((Fetch, "https://docs.rs/*")),
        ),
        (
            Ask::McpTool {
                server: "gh".into(),
                tool: "pr".into(),
                arguments: "{}".into(),
            },
            Some((McpTool, "gh/pr")),
        ),
        (Ask::Question { questions: vec![] }, None),
        (
            Ask::other("Grep", Some("a*b"), &serde_json::json!({})),
            Some((Any, "a[*]b")),
        ),
    ];
    for (ask, expected) in table {
        let got = propose(&ask, Some(Path::new(WS)));
        assert_eq!(
            got.as_ref().map(|(k, p)| (*k, p.as_str())),
            expected,
            "{ask:?}"
        );
        // What is proposed matches the request it came from.
        if let Some((kind, pattern)) = got {
            let mut set = RuleSet::default();
            set.add(Rule {
                kind,
                pattern,
                ..rule(1, Everywhere, kind, "*", Allow)
            })
            .unwrap();
            assert!(set.decide(&ask, &place("r", None)).is_some(), "{ask:?}");
        }
    }
}

#[test]
fn bad_rules_are_refused_with_a_code() {
    let spec = |scope, kind, pattern: &str| RuleSpec {
        scope,
        kind,
        pattern: pattern.into(),
        decision: Allow,
        run_id: None,
        repository: None,
    };
    for (s, code) in [
        (spec(Everywhere, Command, ""), ErrorCode::RuleInvalid),
        (spec(Everywhere, Command, "ls 'x"), ErrorCode::RuleInvalid),
        (
            spec(Everywhere, FileEdit, "/abs/**"),
            ErrorCode::RuleInvalid,
        ),
        (
            spec(Everywhere, Fetch, &"a".repeat(MAX_PATTERN_CHARS + 1)),
            ErrorCode::RuleInvalid,
        ),
        (spec(Run, Command, "ls"), ErrorCode::RuleInvalid),
        (spec(Repository, Command, "ls"), ErrorCode::RuleInvalid),
    ] {
        assert_eq!(RuleSet::check(&s).unwrap_err().code, code, "{s:?}");
    }
    assert!(RuleSet::check(&spec(Everywhere, Command, "ls *")).is_ok());
    assert_eq!(
        Scope::parse("galaxy").unwrap_err().code,
        ErrorCode::RuleInvalid
    );
    assert_eq!(RuleKind::parse("file-edit").unwrap(), FileEdit);
    assert_eq!(
        RuleDecision::parse("maybe").unwrap_err().code,
        ErrorCode::RuleInvalid
    );
    let mut set = RuleSet::default();
    for id in 0..MAX_RULES as u64 {
        set.add(rule(id, Everywhere, Command, "ls", Allow)).unwrap();
    }
    assert_eq!(
        set.add(rule(9_999, Everywhere, Command, "ls", Allow))
            .unwrap_err()
            .code,
        ErrorCode::TooManyRules
    );
}

#[test]
fn an_id_is_never_given_twice() {
    let mut set = RuleSet::default();
    assert_eq!(set.next_id(), 1);
    for id in [1, 2] {
        set.add(rule(
            id,
            Scope::Run,
            RuleKind::Command,
            "ls",
            RuleDecision::Allow,
        ))
        .unwrap();
    }
    assert_eq!(set.next_id(), 3);
    set.remove(2).unwrap();
    assert_eq!(set.next_id(), 3, "the removed rule's id stays given");
    set.forget_run("r-1");
    assert!(set.is_empty());
    assert_eq!(set.next_id(), 3, "so do a removed run's");
    // What the ledger says was given before counts, and never lowers it.
    set.given_up_to(9);
    assert_eq!(set.next_id(), 10);
    set.given_up_to(4);
    assert_eq!(set.next_id(), 10);
}
