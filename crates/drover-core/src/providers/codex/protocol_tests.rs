//! Table tests of the pure Codex protocol code: error classification, token counts, the
//! app-server state machine and the exec event reader, including hostile input. The
//! Codex lines here are shaped like what the pinned 0.171.0 wrote against the mock.

use serde_json::{Value, json};

use super::app_protocol::{AppState, Bounds};
use super::exec_protocol::ExecState;
use super::protocol::{
    ErrorClass, classify_message, classify_turn_error, openai_tokens, tool_of, usage_tokens,
    version_of,
};
use crate::money::catalog::Catalog;
use crate::providers::session::{Handshake, Protocol};
use crate::providers::{
    AlwaysOption, Ask, EditedFile, FileChange, LaunchSpec, PermissionAnswer, ProviderEvent,
    RequestKind, Tokens, TurnEnd,
};
use crate::spec::{Capability, PermissionPolicy};

fn class(status: Option<u16>, transient: bool) -> ErrorClass {
    ErrorClass { status, transient }
}

#[test]
fn turn_errors_are_classified_by_codex_error_info() {
    let table: Vec<(Value, ErrorClass)> = vec![
        // HTTP 500 after the retries (Codex's "high demand" message).
        (
            json!({"message": "We’re currently experiencing high demand, which may cause temporary errors.",
                   "codexErrorInfo": "internalServerError", "additionalDetails": null}),
            class(Some(500), true),
        ),
        (
            json!({"message": "Reconnecting... 1/2",
                   "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": 429}},
                   "additionalDetails": "exceeded retry limit, last status: 429 Too Many Requests"}),
            class(Some(429), true),
        ),
        (
            json!({"message": "exceeded retry limit, last status: 429 Too Many Requests",
                   "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}}}),
            class(Some(429), true),
        ),
        (
            json!({"message": "unexpected status 503 Service Unavailable: mock error 503",
                   "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 503}}}),
            class(Some(503), true),
        ),
        // A dropped connection with no status may pass.
        (
            json!({"message": "stream closed",
                   "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": null}}}),
            class(None, true),
        ),
        // A client error does not pass by waiting.
        (
            json!({"message": "unexpected status 401 Unauthorized",
                   "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 401}}}),
            class(Some(401), false),
        ),
        (
            json!({"message": "bad key", "codexErrorInfo": "unauthorized"}),
            class(None, false),
        ),
        (
            json!({"message": "slow down", "codexErrorInfo": "rateLimitExceeded"}),
            class(Some(429), true),
        ),
        (
            json!({"message": "busy", "codexErrorInfo": "serverOverloaded"}),
            class(None, true),
        ),
        (
            json!({"message": "too long", "codexErrorInfo": "contextWindowExceeded"}),
            class(None, false),
        ),
        // Hostile shapes: never a panic.
        (json!({"codexErrorInfo": {}}), class(None, false)),
        (json!({"codexErrorInfo": 7}), class(None, false)),
        (
            json!({"codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 99999}}}),
            class(None, true),
        ),
        (json!(null), class(None, false)),
        (json!([1, 2]), class(None, false)),
    ];
    for (error, expected) in table {
        assert_eq!(classify_turn_error(&error), expected, "{error}");
    }
}

#[test]
fn exec_error_messages_are_classified_by_their_text() {
    let table: Vec<(&str, ErrorClass)> = vec![
        (
            "exceeded retry limit, last status: 429 Too Many Requests",
            class(Some(429), true),
        ),
        (
            "Reconnecting... 1/2 (exceeded retry limit, last status: 429 Too Many Requests)",
            class(Some(429), true),
        ),
        (
            "We’re currently experiencing high demand, which may cause temporary errors.",
            class(Some(500), true),
        ),
        (
            "unexpected status 503 Service Unavailable: mock error 503, url: http://127.0.0.1:1/v1/responses",
            class(Some(503), true),
        ),
        (
            "unexpected status 400 Bad Request: nope",
            class(Some(400), false),
        ),
        ("stream disconnected before completion", class(None, true)),
        ("the model refused", class(None, false)),
        ("", class(None, false)),
        ("status", class(None, false)),
        ("status: 4290 status: 12", class(None, false)),
        ("status status: 502", class(Some(502), true)),
        ("statusé: 5ü", class(None, false)),
    ];
    for (text, expected) in table {
        assert_eq!(classify_message(text), expected, "{text:?}");
    }
}

#[test]
fn openai_usage_becomes_disjoint_classes() {
    let table: Vec<(Value, Tokens)> = vec![
        (
            json!({"input_tokens": 1000, "cached_input_tokens": 100, "output_tokens": 50,
                   "reasoning_output_tokens": 5}),
            Tokens {
                input: 900,
                output: 45,
                reasoning: 5,
                cache_read: 100,
                cache_write: 0,
            },
        ),
        (
            json!({"totalTokens": 1050, "inputTokens": 1000, "cachedInputTokens": 100,
                   "cacheWriteInputTokens": 0, "outputTokens": 50, "reasoningOutputTokens": 5}),
            Tokens {
                input: 900,
                output: 45,
                reasoning: 5,
                cache_read: 100,
                cache_write: 0,
            },
        ),
        // More cached than input, negative and non-numbers: clamped, never a panic.
        (
            json!({"input_tokens": 10, "cached_input_tokens": 50, "output_tokens": -3,
                   "reasoning_output_tokens": "x"}),
            Tokens {
                input: 0,
                output: 0,
                reasoning: 0,
                cache_read: 10,
                cache_write: 0,
            },
        ),
        (json!("nope"), Tokens::default()),
    ];
    for (usage, expected) in table {
        assert_eq!(usage_tokens(&usage), expected, "{usage}");
    }
}

#[test]
fn openai_counts_become_disjoint_classes() {
    let tokens = |input, output, reasoning, cache_read| Tokens {
        input,
        output,
        reasoning,
        cache_read,
        cache_write: 0,
    };
    // input 1000 of which 600 cached; output 500 of which 200 reasoning
    assert_eq!(
        openai_tokens(1_000, 600, 500, 200),
        tokens(400, 300, 200, 600)
    );
    // inconsistent reports never underflow
    assert_eq!(openai_tokens(10, 50, 5, 9), tokens(0, 0, 5, 10));
    // priced, the cached part is billed at the cache rate and reasoning as output
    let gpt = Catalog::embedded().price("codex", "gpt-5.5");
    let cost = gpt
        .cost(&openai_tokens(1_000_000, 400_000, 100_000, 50_000))
        .expect("gpt-5.5 is priced");
    // 600k × $5 + 400k × $0.50 + (50k + 50k) × $30, per million
    assert!((cost - (3.0 + 0.2 + 3.0)).abs() < 1e-9, "{cost}");
}

#[test]
fn tool_items_become_typed_asks() {
    let edited = |path: &str, change: FileChange| EditedFile {
        file_path: path.into(),
        change,
    };
    let table: Vec<(Value, Option<(&str, Ask)>)> = vec![
        (
            json!({"type": "commandExecution", "id": "c", "command": "/bin/bash -lc 'ls -la'", "cwd": "/w"}),
            Some((
                "shell",
                Ask::command("/bin/bash -lc 'ls -la'", Some("/w".into()), None),
            )),
        ),
        (
            json!({"type": "command_execution", "id": "c", "command": "echo 'unclosed"}),
            Some((
                "shell",
                Ask::Command {
                    command: "echo 'unclosed".into(),
                    words: None,
                    cwd: None,
                    reason: None,
                },
            )),
        ),
        (
            json!({"type": "commandExecution", "command": ["git", "commit", "-m", "a b"]}),
            Some((
                "shell",
                Ask::command_from_argv(
                    vec!["git".into(), "commit".into(), "-m".into(), "a b".into()],
                    None,
                    None,
                ),
            )),
        ),
        (
            json!({"type": "fileChange", "id": "p", "changes": [
                {"path": "/w/a.rs", "kind": {"type": "update", "move_path": null}, "diff": "@@ -1 +1 @@\n-a\n+b\n"},
                {"path": "/w/new.rs", "kind": {"type": "add"}, "diff": "fn main() {}\n"},
                {"path": "/w/old.rs", "kind": {"type": "delete"}, "diff": "gone\n"},
                {"path": "/w/from.rs", "kind": {"type": "update", "move_path": "/w/to.rs"}, "diff": ""},
                {"kind": {"type": "add"}}]}),
            Some((
                "apply_patch",
                Ask::FileEdit {
                    file_path: "/w/a.rs".into(),
                    change: FileChange::Diff {
                        diff: "@@ -1 +1 @@\n-a\n+b\n".into(),
                    },
                    other_files: vec![
                        edited(
                            "/w/new.rs",
                            FileChange::Content {
                                content: "fn main() {}\n".into(),
                            },
                        ),
                        edited("/w/old.rs", FileChange::Delete),
                        edited(
                            "/w/from.rs",
                            FileChange::Move {
                                to: "/w/to.rs".into(),
                                diff: String::new(),
                            },
                        ),
                    ],
                },
            )),
        ),
        // exec mode names the kind only.
        (
            json!({"type": "file_change", "id": "p", "changes": [{"path": "a.txt", "kind": "add"},
                                                                 {"path": "b.txt", "kind": "update"}]}),
            Some((
                "apply_patch",
                Ask::FileEdit {
                    file_path: "a.txt".into(),
                    change: FileChange::Described {
                        description: "a new file".into(),
                    },
                    other_files: vec![edited(
                        "b.txt",
                        FileChange::Described {
                            description: "changed".into(),
                        },
                    )],
                },
            )),
        ),
        (
            json!({"type": "mcpToolCall", "id": "m", "server": "github", "tool": "search", "arguments": {"q": "x"}}),
            Some((
                "mcp:github/search",
                Ask::McpTool {
                    server: "github".into(),
                    tool: "search".into(),
                    arguments: r#"{"q":"x"}"#.into(),
                },
            )),
        ),
        (
            json!({"type": "web_search", "id": "w", "query": "rust shell words"}),
            Some((
                "web_search",
                Ask::Other {
                    tool: "web_search".into(),
                    subject: Some("rust shell words".into()),
                    input: r#"{"query":"rust shell words"}"#.into(),
                },
            )),
        ),
        // Hostile shapes are shown as they came.
        (
            json!({"type": "commandExecution", "command": 5}),
            Some((
                "shell",
                Ask::Other {
                    tool: "shell".into(),
                    subject: None,
                    input: r#"{"type":"commandExecution","command":5}"#.into(),
                },
            )),
        ),
        (
            json!({"type": "fileChange", "changes": "x"}),
            Some((
                "apply_patch",
                Ask::Other {
                    tool: "apply_patch".into(),
                    subject: None,
                    input: r#""x""#.into(),
                },
            )),
        ),
        (json!({"type": "agentMessage", "text": "hi"}), None),
    ];
    for (item, expected) in table {
        let got = tool_of(&item);
        assert_eq!(
            got.as_ref().map(|(name, ask)| (name.as_str(), ask)),
            expected.as_ref().map(|(name, ask)| (*name, ask)),
            "{item}"
        );
    }
}

#[test]
fn the_version_is_read_from_the_user_agent() {
    assert_eq!(
        version_of("drover/0.171.0 (Debian 12.0.0; x86_64) dumb (drover; 0.1.0)").as_deref(),
        Some("0.171.0")
    );
    assert_eq!(version_of(""), None);
    assert_eq!(version_of("noslash"), None);
    assert_eq!(version_of("x/ y"), None);
}

// --- app-server -----------------------------------------------------------------------

const NOW: i64 = 1_000_000;
const THREAD: &str = "01a2-thread";
const TURN: &str = "01a2-turn";

fn spec(resume: Option<&str>) -> LaunchSpec {
    LaunchSpec {
        model: Some("gpt-5.5".into()),
        resume_session: resume.map(str::to_string),
        ..LaunchSpec::for_tests(
            "codex",
            "codex",
            PermissionPolicy::Ask,
            Capability::Workspace,
        )
    }
}

fn sent(state: &mut AppState) -> Vec<Value> {
    state
        .take_outgoing()
        .iter()
        .map(|l| serde_json::from_str(l).expect("drover writes JSON"))
        .collect()
}

fn line(state: &mut AppState, message: Value) -> Vec<ProviderEvent> {
    state.parse_line(&message.to_string(), NOW)
}

/// A state past the handshake with its thread open; the outgoing lines are drained.
fn open_thread(resume: Option<&str>) -> AppState {
    let mut state = AppState::new(&spec(resume), Bounds::default());
    state.start(NOW);
    let out = sent(&mut state);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["method"], "initialize");
    assert_eq!(out[0]["id"], 1);
    let events = line(
        &mut state,
        json!({"id": 1, "result": {"userAgent": "drover/0.171.0 (Linux)", "codexHome": "/c"}}),
    );
    // The loop sends `Ready` once the handshake is done, with this version.
    assert_eq!(events, vec![]);
    assert_eq!(state.handshake(), Handshake::Done);
    assert_eq!(state.version().as_deref(), Some("0.171.0"));
    let out = sent(&mut state);
    assert_eq!(out[0], json!({"jsonrpc": "2.0", "method": "initialized"}));
    match resume {
        None => {
            assert_eq!(out[1]["method"], "thread/start");
            assert_eq!(
                out[1]["params"],
                json!({"cwd": "/w", "approvalPolicy": "untrusted",
                       "sandbox": "workspace-write", "model": "gpt-5.5"})
            );
        }
        Some(thread) => {
            assert_eq!(out[1]["method"], "thread/resume");
            assert_eq!(out[1]["params"]["threadId"], thread);
        }
    }
    let events = line(
        &mut state,
        json!({"id": 2, "result": {"thread": {"id": THREAD}, "model": "gpt-5.5"}}),
    );
    assert_eq!(
        events,
        vec![ProviderEvent::Session {
            session_id: THREAD.into(),
            model: Some("gpt-5.5".into())
        }]
    );
    state
}

/// A state with a turn started and its id known.
fn turn_running() -> AppState {
    let mut state = open_thread(None);
    assert!(state.start_turn("Do it".into(), NOW).is_empty());
    let out = sent(&mut state);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["method"], "turn/start");
    assert_eq!(out[0]["params"]["threadId"], THREAD);
    assert_eq!(out[0]["params"]["input"][0]["text"], "Do it");
    let id = out[0]["id"].clone();
    assert!(
        line(
            &mut state,
            json!({"id": id, "result": {"turn": {"id": TURN}}})
        )
        .is_empty()
    );
    assert!(state.turn_open());
    state
}

fn completed(status: &str, error: Value) -> Value {
    json!({"method": "turn/completed", "params": {"threadId": THREAD,
        "turn": {"id": TURN, "items": [], "status": status, "error": error, "durationMs": 12}}})
}

fn token_update(input: u64, cached: u64, output: u64) -> Value {
    let breakdown = json!({"totalTokens": input + output, "inputTokens": input,
        "cachedInputTokens": cached, "cacheWriteInputTokens": 0, "outputTokens": output,
        "reasoningOutputTokens": 0});
    json!({"method": "thread/tokenUsage/updated", "params": {"threadId": THREAD, "turnId": TURN,
        "tokenUsage": {"total": breakdown, "last": breakdown, "modelContextWindow": 1000}}})
}

fn turn_end(events: &[ProviderEvent]) -> TurnEnd {
    let ends: Vec<&TurnEnd> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TurnCompleted(end) => Some(end),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 1, "{events:?}");
    ends[0].clone()
}

#[test]
fn a_turn_that_completes_reports_its_text_and_summed_tokens() {
    let mut state = turn_running();
    let events = line(
        &mut state,
        json!({"method": "item/completed", "params": {"threadId": THREAD, "turnId": TURN,
            "item": {"type": "agentMessage", "id": "m1", "text": "Hello"}}}),
    );
    assert_eq!(
        events,
        vec![ProviderEvent::AssistantText {
            text: "Hello".into()
        }]
    );
    let events = line(&mut state, token_update(1000, 100, 50));
    assert!(
        matches!(events[..], [ProviderEvent::Usage { .. }]),
        "{events:?}"
    );
    line(&mut state, token_update(500, 0, 20));
    let end = turn_end(&line(&mut state, completed("completed", Value::Null)));
    assert!(!end.is_error);
    assert_eq!(end.subtype, "success");
    assert_eq!(end.text.as_deref(), Some("Hello"));
    assert_eq!(end.session_id.as_deref(), Some(THREAD));
    let tokens = Tokens {
        input: 1400,
        output: 70,
        reasoning: 0,
        cache_read: 100,
        cache_write: 0,
    };
    assert_eq!(end.tokens, tokens);
    assert_eq!(end.model_usage.len(), 1);
    assert_eq!(end.model_usage[0].model, "gpt-5.5");
    assert_eq!(end.model_usage[0].tokens, tokens);
    assert_eq!(end.model_usage[0].cost_usd, None);
    assert_eq!(end.duration_ms, Some(12));
    assert!(!state.turn_open());
    // A second `turn/completed` for the same turn is not a second end.
    let events = line(&mut state, completed("completed", Value::Null));
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, ProviderEvent::TurnCompleted(_))),
        "{events:?}"
    );
}

#[test]
fn an_approval_is_asked_and_answered_with_the_servers_id() {
    let table = [
        (PermissionAnswer::Allow { always: false }, "accept"),
        (PermissionAnswer::Allow { always: true }, "acceptForSession"),
        (
            PermissionAnswer::Deny {
                message: Some("no".into()),
            },
            "decline",
        ),
    ];
    for (answer, decision) in table {
        let mut state = turn_running();
        let events = line(
            &mut state,
            json!({"method": "item/commandExecution/requestApproval", "id": 0,
                "params": {"threadId": THREAD, "turnId": TURN, "itemId": "call_1",
                           "command": "/bin/bash -lc 'touch x'", "cwd": "/w", "reason": null}}),
        );
        let [ProviderEvent::PermissionRequested(request)] = &events[..] else {
            panic!("{events:?}");
        };
        assert_eq!(request.request_id, format!("{}-0", state.request_tag));
        assert_eq!(request.kind, RequestKind::Permission);
        assert_eq!(request.tool, "shell");
        assert_eq!(
            request.ask,
            Ask::Command {
                command: "/bin/bash -lc 'touch x'".into(),
                words: Some(vec!["/bin/bash".into(), "-lc".into(), "touch x".into()]),
                cwd: Some("/w".into()),
                reason: None,
            }
        );
        assert_eq!(
            request.always,
            Some(AlwaysOption::new(
                "allow the command `/bin/bash -lc 'touch x'` for the rest of this run"
            ))
        );
        assert_eq!(request.tool_use_id.as_deref(), Some("call_1"));
        state
            .answer(&format!("{}-0", state.request_tag), &answer)
            .unwrap();
        assert_eq!(
            sent(&mut state),
            vec![json!({"jsonrpc": "2.0", "id": 0, "result": {"decision": decision}})]
        );
        // Resolved after drover's answer: nothing more to say.
        let events = line(
            &mut state,
            json!({"method": "serverRequest/resolved", "params": {"threadId": THREAD, "requestId": 0}}),
        );
        assert!(events.is_empty(), "{events:?}");
        // A second answer finds nothing pending.
        assert!(
            state
                .answer(&format!("{}-0", state.request_tag), &answer)
                .is_err()
        );
    }
}

#[test]
fn a_file_change_approval_shows_the_changes_of_its_item() {
    let mut state = turn_running();
    let events = line(
        &mut state,
        json!({"method": "item/started", "params": {"threadId": THREAD, "turnId": TURN,
            "item": {"type": "fileChange", "id": "call_9", "status": "inProgress",
                     "changes": [{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "+a"}]}}}),
    );
    let [ProviderEvent::ToolStarted { name, .. }] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(name, "apply_patch");
    let events = line(
        &mut state,
        json!({"method": "item/fileChange/requestApproval", "id": "req-7",
               "params": {"threadId": THREAD, "turnId": TURN, "itemId": "call_9"}}),
    );
    let [ProviderEvent::PermissionRequested(request)] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(request.request_id, format!("{}-req-7", state.request_tag));
    assert_eq!(request.tool, "apply_patch");
    assert_eq!(
        request.ask,
        Ask::FileEdit {
            file_path: "/w/a.txt".into(),
            change: FileChange::Content {
                content: "+a".into()
            },
            other_files: vec![],
        }
    );
    assert_eq!(
        request.always,
        Some(AlwaysOption::new(
            "allow changes to `/w/a.txt` for the rest of this run"
        ))
    );
    state
        .answer(
            &format!("{}-req-7", state.request_tag),
            &PermissionAnswer::Allow { always: false },
        )
        .unwrap();
    assert_eq!(sent(&mut state)[0]["id"], "req-7");
}

#[test]
fn allow_always_is_only_sent_when_codex_offers_it() {
    let mut state = turn_running();
    let events = line(
        &mut state,
        json!({"method": "item/commandExecution/requestApproval", "id": 3,
               "params": {"threadId": THREAD, "turnId": TURN, "itemId": "c", "command": "curl x",
                          "reason": "needs the network", "availableDecisions": ["accept", "cancel"]}}),
    );
    let [ProviderEvent::PermissionRequested(request)] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(
        request.ask,
        Ask::command("curl x", None, Some("needs the network".into()))
    );
    assert_eq!(request.always, None);
    state
        .answer(
            &format!("{}-3", state.request_tag),
            &PermissionAnswer::Allow { always: true },
        )
        .unwrap();
    assert_eq!(
        sent(&mut state),
        vec![json!({"jsonrpc": "2.0", "id": 3, "result": {"decision": "accept"}})]
    );
}

#[test]
fn a_request_the_server_resolves_by_itself_is_withdrawn() {
    let mut state = turn_running();
    line(
        &mut state,
        json!({"method": "item/commandExecution/requestApproval", "id": 4,
               "params": {"threadId": THREAD, "turnId": TURN, "itemId": "c", "command": "x"}}),
    );
    let events = line(
        &mut state,
        json!({"method": "serverRequest/resolved", "params": {"threadId": THREAD, "requestId": 4}}),
    );
    assert_eq!(
        events,
        vec![ProviderEvent::PermissionWithdrawn {
            request_id: format!("{}-4", state.request_tag)
        }]
    );
}

#[test]
fn an_interrupt_cancels_pending_approvals_and_interrupts_the_turn() {
    let mut state = turn_running();
    line(
        &mut state,
        json!({"method": "item/commandExecution/requestApproval", "id": 0,
               "params": {"threadId": THREAD, "turnId": TURN, "itemId": "c", "command": "x"}}),
    );
    let events = state.interrupt(NOW);
    assert_eq!(
        events,
        vec![ProviderEvent::PermissionWithdrawn {
            request_id: format!("{}-0", state.request_tag)
        }]
    );
    let out = sent(&mut state);
    assert_eq!(
        out[0],
        json!({"jsonrpc": "2.0", "id": 0, "result": {"decision": "cancel"}})
    );
    assert_eq!(out[1]["method"], "turn/interrupt");
    assert_eq!(
        out[1]["params"],
        json!({"threadId": THREAD, "turnId": TURN})
    );
    let end = turn_end(&line(&mut state, completed("interrupted", Value::Null)));
    assert!(end.is_error);
    assert!(!end.transient);
    assert_eq!(end.subtype, "interrupted");
}

#[test]
fn an_interrupt_before_the_turn_id_is_known_is_sent_once_it_is() {
    let mut state = open_thread(None);
    state.start_turn("Go".into(), NOW);
    let id = sent(&mut state)[0]["id"].clone();
    assert!(state.interrupt(NOW).is_empty());
    assert!(sent(&mut state).is_empty(), "no turn id to interrupt yet");
    line(
        &mut state,
        json!({"id": id, "result": {"turn": {"id": TURN}}}),
    );
    let out = sent(&mut state);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["method"], "turn/interrupt");
    assert_eq!(out[0]["params"]["turnId"], TURN);
}

#[test]
fn a_retry_is_a_rate_limit_until_progress_and_exhausted_retries_are_transient() {
    let mut state = turn_running();
    let events = line(
        &mut state,
        json!({"method": "error", "params": {"threadId": THREAD, "turnId": TURN, "willRetry": true,
            "error": {"message": "Reconnecting... 1/2",
                      "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": 429}},
                      "additionalDetails": "exceeded retry limit, last status: 429 Too Many Requests"}}}),
    );
    let [ProviderEvent::RateLimited { until, detail }] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(*until, None);
    assert!(detail.contains("HTTP 429"), "{detail}");
    let events = line(
        &mut state,
        json!({"method": "item/started", "params": {"threadId": THREAD, "turnId": TURN,
            "item": {"type": "agentMessage", "id": "m", "text": ""}}}),
    );
    assert_eq!(events, vec![ProviderEvent::RateLimitCleared]);

    // Retries exhausted: the error, then the failed turn.
    let error = json!({"message": "We’re currently experiencing high demand, which may cause temporary errors.",
                       "codexErrorInfo": "internalServerError", "additionalDetails": null});
    let events = line(
        &mut state,
        json!({"method": "error", "params": {"threadId": THREAD, "turnId": TURN,
                                             "willRetry": false, "error": error}}),
    );
    assert!(
        matches!(events[..], [ProviderEvent::Notice { .. }]),
        "{events:?}"
    );
    let end = turn_end(&line(&mut state, completed("failed", error)));
    assert!(end.is_error);
    assert!(end.transient);
    assert_eq!(end.api_error_status, Some(500));
    assert!(end.text.unwrap().contains("high demand"));
}

#[test]
fn a_failed_turn_without_an_error_object_uses_the_last_error_notification() {
    let mut state = turn_running();
    line(
        &mut state,
        json!({"method": "error", "params": {"threadId": THREAD, "turnId": TURN, "willRetry": false,
            "error": {"message": "unexpected status 503 Service Unavailable",
                      "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 503}}}}}),
    );
    let end = turn_end(&line(&mut state, completed("failed", Value::Null)));
    assert!(end.transient);
    assert_eq!(end.api_error_status, Some(503));
}

#[test]
fn client_requests_that_fail_or_go_unanswered_end_what_they_asked_for() {
    // An overloaded server refuses turn/start: the turn ends, transient.
    let mut state = open_thread(None);
    state.start_turn("Go".into(), NOW);
    let id = sent(&mut state)[0]["id"].clone();
    let end = turn_end(&line(
        &mut state,
        json!({"id": id, "error": {"code": -32001, "message": "Server overloaded; retry later."}}),
    ));
    assert!(end.is_error && end.transient, "{end:?}");
    assert!(end.text.unwrap().contains("-32001"));
    assert!(!state.turn_open());

    // Another error code is not transient.
    state.start_turn("Go".into(), NOW);
    let id = sent(&mut state)[0]["id"].clone();
    let end = turn_end(&line(
        &mut state,
        json!({"id": id, "error": {"code": -32600, "message": "Invalid request"}}),
    ));
    assert!(end.is_error && !end.transient, "{end:?}");

    // No answer to turn/start in time: the turn ends; a late turn/completed is dropped.
    let bounds = Bounds::default();
    state.start_turn("Go".into(), NOW);
    sent(&mut state);
    assert_eq!(state.next_deadline(), Some(NOW + bounds.turn_start));
    assert!(state.expire(NOW + bounds.turn_start - 1).is_empty());
    let end = turn_end(&state.expire(NOW + bounds.turn_start));
    assert!(end.is_error && end.transient, "{end:?}");
    assert_eq!(state.next_deadline(), None);
    let events = line(&mut state, completed("completed", Value::Null));
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, ProviderEvent::TurnCompleted(_))),
        "{events:?}"
    );

    // No answer to initialize: the handshake fails.
    let mut state = AppState::new(&spec(None), bounds);
    state.start(NOW);
    let events = state.expire(NOW + bounds.initialize);
    assert!(
        matches!(events[..], [ProviderEvent::Notice { .. }]),
        "{events:?}"
    );
    assert_eq!(state.handshake(), Handshake::Failed);

    // A refused thread/start ends every turn asked for.
    let mut state = AppState::new(&spec(None), bounds);
    state.start(NOW);
    line(&mut state, json!({"id": 1, "result": {}}));
    assert!(state.start_turn("Go".into(), NOW).is_empty());
    let events = line(
        &mut state,
        json!({"id": 2, "error": {"code": -32001, "message": "overloaded"}}),
    );
    let end = turn_end(&events);
    assert!(end.is_error && end.transient);
    let end = turn_end(&state.start_turn("Again".into(), NOW));
    assert!(end.is_error);
}

#[test]
fn a_resumed_run_resumes_its_thread() {
    let mut state = open_thread(Some(THREAD));
    state.start_turn("Carry on".into(), NOW);
    let out = sent(&mut state);
    assert_eq!(out[0]["params"]["threadId"], THREAD);
}

#[test]
fn a_resumed_threads_old_usage_is_not_booked_on_the_new_turn() {
    // After `thread/resume` Codex repeats the last turn's usage (with that turn's id)
    // before it answers `turn/start`: seen with the pinned 0.171.0.
    let mut state = open_thread(Some(THREAD));
    state.start_turn("Carry on".into(), NOW);
    let id = sent(&mut state)[0]["id"].clone();
    let mut old = token_update(1000, 0, 50);
    old["params"]["turnId"] = json!("old-turn");
    assert!(line(&mut state, old).is_empty());
    // This turn's own update may also come before the answer: it waits for the id.
    assert!(line(&mut state, token_update(300, 0, 7)).is_empty());
    let events = line(
        &mut state,
        json!({"id": id, "result": {"turn": {"id": TURN}}}),
    );
    assert!(
        matches!(events[..], [ProviderEvent::Usage { .. }]),
        "{events:?}"
    );
    line(&mut state, token_update(200, 0, 3));
    let end = turn_end(&line(&mut state, completed("completed", Value::Null)));
    assert_eq!(end.tokens.input, 500);
    assert_eq!(end.tokens.output, 10);
}

#[test]
fn a_long_stream_gives_a_sign_of_life_at_most_every_thirty_seconds() {
    use super::app_protocol::STREAMING_SIGN_MS;
    let mut state = turn_running();
    let delta = |text: &str| {
        json!({"method": "item/agentMessage/delta",
               "params": {"threadId": THREAD, "turnId": TURN, "itemId": "m", "delta": text}})
        .to_string()
    };
    assert!(state.parse_line(&delta("abc"), NOW + 1).is_empty());
    assert!(
        state
            .parse_line(&delta("de"), NOW + STREAMING_SIGN_MS - 1)
            .is_empty()
    );
    assert_eq!(
        state.parse_line(&delta("f"), NOW + STREAMING_SIGN_MS),
        vec![ProviderEvent::Thinking { chars: 6 }]
    );
    assert!(
        state
            .parse_line(&delta("g"), NOW + STREAMING_SIGN_MS + 1)
            .is_empty()
    );
    assert_eq!(
        state.parse_line(&delta("hi"), NOW + 2 * STREAMING_SIGN_MS),
        vec![ProviderEvent::Thinking { chars: 3 }]
    );
}

#[test]
fn turns_asked_before_the_thread_is_open_wait_for_it() {
    let mut state = AppState::new(&spec(None), Bounds::default());
    state.start(NOW);
    sent(&mut state);
    assert!(state.start_turn("Early".into(), NOW).is_empty());
    line(&mut state, json!({"id": 1, "result": {}}));
    let out = sent(&mut state);
    assert!(out.iter().all(|m| m["method"] != "turn/start"), "{out:?}");
    line(
        &mut state,
        json!({"id": 2, "result": {"thread": {"id": THREAD}}}),
    );
    let out = sent(&mut state);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["method"], "turn/start");
    assert_eq!(out[0]["params"]["input"][0]["text"], "Early");
}

#[test]
fn hostile_or_unknown_lines_are_notices_never_panics() {
    let mut state = turn_running();
    let hostile = [
        "not json",
        "[1,2,3]",
        "42",
        "\"text\"",
        "{}",
        r#"{"id": {}}"#,
        r#"{"id": 999, "result": {}}"#,
        r#"{"id": "x", "result": 1}"#,
        r#"{"method": 5}"#,
        r#"{"method": "totally/new"}"#,
        r#"{"method": "item/completed", "params": 7}"#,
        r#"{"method": "item/started", "params": {"item": []}}"#,
        r#"{"method": "thread/tokenUsage/updated", "params": {"tokenUsage": "x"}}"#,
        r#"{"method": "error", "params": null}"#,
        r#"{"method": "serverRequest/resolved", "params": {"requestId": null}}"#,
        r#"{"method": "turn/started", "params": {"turn": 3}}"#,
        "{\"method\": \"item/completed\", \"params\": {\"item\": {\"type\": \"agentMessage\", \"text\": \"\u{0}\u{ffff}\"}}}",
    ];
    for text in hostile {
        let events = state.parse_line(text, NOW);
        for event in &events {
            assert!(
                !matches!(event, ProviderEvent::TurnCompleted(_)),
                "{text}: {events:?}"
            );
        }
    }
    assert!(state.parse_line("   ", NOW).is_empty());
    assert!(matches!(
        state.parse_line("garbage", NOW)[..],
        [ProviderEvent::Notice { .. }]
    ));
    // A server request drover does not handle is refused, so Codex does not wait.
    let events = state.parse_line(
        r#"{"method": "item/tool/requestUserInput", "id": 11, "params": {}}"#,
        NOW,
    );
    assert!(
        matches!(events[..], [ProviderEvent::Notice { .. }]),
        "{events:?}"
    );
    let out = sent(&mut state);
    assert_eq!(out[0]["id"], 11);
    assert_eq!(out[0]["error"]["code"], -32601);
    // Quiet notifications say nothing.
    for method in [
        "item/agentMessage/delta",
        "thread/status/changed",
        "account/rateLimits/updated",
        "codex/event/task_started",
    ] {
        let events = line(&mut state, json!({"method": method, "params": {}}));
        assert!(events.is_empty(), "{method}: {events:?}");
    }
    // The turn still ends normally.
    assert!(!turn_end(&line(&mut state, completed("completed", Value::Null))).is_error);
}

#[test]
fn tool_items_start_and_finish_with_their_outcome() {
    let mut state = turn_running();
    let item = |status: &str, exit: Value| {
        json!({"type": "commandExecution", "id": "call_1", "command": "ls", "cwd": "/w",
               "status": status, "exitCode": exit, "aggregatedOutput": "a"})
    };
    let events = line(
        &mut state,
        json!({"method": "item/started", "params": {"threadId": THREAD, "turnId": TURN,
                                                    "item": item("inProgress", Value::Null)}}),
    );
    assert_eq!(
        events,
        vec![ProviderEvent::ToolStarted {
            tool_use_id: "call_1".into(),
            name: "shell".into(),
            ask: Ask::command("ls", Some("/w".into()), None),
        }]
    );
    let table = [
        ("completed", json!(0), false, Some(0), "exit 0"),
        ("failed", json!(2), true, Some(2), "exit 2"),
        ("declined", Value::Null, true, None, "declined"),
    ];
    for (status, exit, is_error, exit_code, summary) in table {
        let events = line(
            &mut state,
            json!({"method": "item/completed", "params": {"threadId": THREAD, "turnId": TURN,
                                                          "item": item(status, exit)}}),
        );
        assert_eq!(
            events,
            vec![ProviderEvent::ToolFinished {
                tool_use_id: "call_1".into(),
                is_error,
                exit_code,
                summary: summary.into(),
            }],
            "{status}"
        );
    }
}

// --- exec -------------------------------------------------------------------------------

fn exec_lines(state: &mut ExecState, lines: &[Value]) -> Vec<ProviderEvent> {
    lines
        .iter()
        .flat_map(|l| state.parse_line(&l.to_string()))
        .collect()
}

/// A `token_count` line of Codex's rollout file, as the pinned 0.171.0 writes it.
fn rollout_token_count(total_input: u64, input: u64, cached: u64, output: u64) -> String {
    let usage = |input: u64| {
        json!({"input_tokens": input, "cached_input_tokens": cached, "cache_write_input_tokens": 0,
               "output_tokens": output, "reasoning_output_tokens": 0, "total_tokens": input + output})
    };
    json!({"timestamp": "2026-12-03T08:12:28.999Z", "ordinal": 13, "type": "event_msg",
           "payload": {"type": "token_count",
                       "info": {"total_token_usage": usage(total_input), "last_token_usage": usage(input),
                                "last_usage_includes_reasoning": false, "model_context_window": 258400},
                       "rate_limits": {"limit_id": "codex", "primary": null}}})
    .to_string()
}

#[test]
fn exec_rollout_token_counts_stream_each_requests_usage_while_a_turn_is_open() {
    let mut state = ExecState::new(Some("gpt-5.5".into()), None, None);
    // No turn open: nothing (a line read late, after its turn ended, is not counted).
    assert!(
        state
            .rollout_line(&rollout_token_count(6000, 6000, 0, 0))
            .is_empty()
    );
    state.begin_turn();
    assert_eq!(
        state.rollout_line(&rollout_token_count(12000, 6000, 1000, 40)),
        vec![ProviderEvent::Usage {
            model: Some("gpt-5.5".into()),
            tokens: Tokens {
                input: 5000,
                output: 40,
                cache_read: 1000,
                ..Tokens::default()
            }
        }]
    );
    // The rest of the file is Codex's business: skipped without a notice.
    for line in [
        json!({"type": "session_meta", "payload": {"id": THREAD}}).to_string(),
        json!({"type": "event_msg", "payload": {"type": "token_count", "info": null}}).to_string(),
        json!({"type": "event_msg", "payload": {"type": "agent_message", "message": "hi"}})
            .to_string(),
        json!({"type": "response_item", "payload": {"type": "message"}}).to_string(),
        "{\"type\":\"event_msg\",\"payl".to_string(),
        "not json".to_string(),
        String::new(),
    ] {
        assert!(state.rollout_line(&line).is_empty(), "{line}");
    }
}

#[test]
fn exec_turns_book_the_growth_of_the_threads_running_total() {
    let mut state = ExecState::new(Some("gpt-5.5".into()), None, None);
    let usage = |input: u64, output: u64| {
        json!({"type": "turn.completed", "usage": {"input_tokens": input, "cached_input_tokens": 0,
               "cache_write_input_tokens": 0, "output_tokens": output, "reasoning_output_tokens": 0}})
    };
    state.begin_turn();
    let events = exec_lines(
        &mut state,
        &[
            json!({"type": "thread.started", "thread_id": THREAD}),
            json!({"type": "turn.started"}),
            json!({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "one"}}),
            usage(1000, 50),
        ],
    );
    assert_eq!(
        events[0],
        ProviderEvent::Session {
            session_id: THREAD.into(),
            model: Some("gpt-5.5".into())
        }
    );
    let end = turn_end(&events);
    assert_eq!(end.text.as_deref(), Some("one"));
    assert_eq!(end.tokens.input, 1000);
    assert_eq!(end.model_usage[0].tokens.output, 50);
    assert_eq!(state.thread_id(), Some(THREAD));

    // The resumed exec says the same thread started (no new Session) and reports the
    // thread's total.
    state.begin_turn();
    let events = exec_lines(
        &mut state,
        &[
            json!({"type": "thread.started", "thread_id": THREAD}),
            usage(2500, 80),
        ],
    );
    assert_eq!(events.len(), 1, "{events:?}");
    let end = turn_end(&events);
    assert_eq!(end.tokens.input, 1500);
    assert_eq!(end.tokens.output, 30);
    assert_eq!(end.session_id.as_deref(), Some(THREAD));
    assert!(!state.turn_open());
}

#[test]
fn an_exec_thread_resumed_after_a_restart_counts_from_what_drover_booked() {
    use crate::providers::Tokens;
    let booked = Tokens {
        input: 1000,
        output: 50,
        ..Tokens::default()
    };
    let mut state = ExecState::new(None, Some(THREAD.into()), Some(booked));
    state.begin_turn();
    let events = exec_lines(
        &mut state,
        &[
            json!({"type": "thread.started", "thread_id": THREAD}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 1600, "cached_input_tokens": 0,
                   "output_tokens": 70, "reasoning_output_tokens": 0}}),
        ],
    );
    let end = turn_end(&events);
    assert_eq!(
        end.tokens.input, 600,
        "only the growth past the booked total"
    );
    assert_eq!(end.tokens.output, 20);
}

#[test]
fn exec_retries_and_failures() {
    let mut state = ExecState::new(None, Some(THREAD.into()), None);
    state.begin_turn();
    let events = exec_lines(
        &mut state,
        &[
            json!({"type": "thread.started", "thread_id": THREAD}),
            json!({"type": "error", "message": "Reconnecting... 1/2 (exceeded retry limit, last status: 429 Too Many Requests)"}),
        ],
    );
    let [ProviderEvent::RateLimited { detail, .. }] = &events[..] else {
        panic!("{events:?}");
    };
    assert!(detail.contains("429"), "{detail}");
    let events = exec_lines(
        &mut state,
        &[
            json!({"type": "error", "message": "Reconnecting... 2/2 (We’re currently experiencing high demand, which may cause temporary errors.)"}),
            json!({"type": "error", "message": "We’re currently experiencing high demand, which may cause temporary errors."}),
            json!({"type": "turn.failed", "error": {"message": "We’re currently experiencing high demand, which may cause temporary errors."}}),
        ],
    );
    let end = turn_end(&events);
    assert!(end.is_error && end.transient);
    assert_eq!(end.api_error_status, Some(500));
    assert!(end.model_usage.is_empty());
    // The child exits 1 after it: the turn already ended, nothing more.
    assert!(state.child_gone(Some(1), None, "boom").is_empty());

    // A retry then progress clears the rate limit.
    state.begin_turn();
    let events = exec_lines(
        &mut state,
        &[
            json!({"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion)"}),
            json!({"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": "ok"}}),
        ],
    );
    assert!(matches!(events[0], ProviderEvent::RateLimited { .. }));
    assert_eq!(events[1], ProviderEvent::RateLimitCleared);

    // A child that ends without saying the turn ended.
    let end = turn_end(&state.child_gone(Some(2), None, "line one\nit broke\n"));
    assert!(end.is_error && !end.transient);
    assert!(end.text.unwrap().contains("it broke"));

    // An interrupted turn.
    state.begin_turn();
    let end = turn_end(&state.interrupted());
    assert!(end.is_error && !end.transient);
    assert_eq!(end.subtype, "interrupted");
    assert!(state.interrupted().is_empty());
}

#[test]
fn exec_hostile_lines_are_notices() {
    let mut state = ExecState::new(None, None, None);
    state.begin_turn();
    for text in [
        "not json",
        "[]",
        "7",
        "{}",
        r#"{"type": 5}"#,
        r#"{"type": "brand.new"}"#,
        r#"{"type": "item.completed", "item": 3}"#,
        r#"{"type": "thread.started", "thread_id": 5}"#,
        r#"{"type": "item.started", "item": {"type": "command_execution"}}"#,
    ] {
        let events = state.parse_line(text);
        assert!(
            events.iter().all(|e| !matches!(
                e,
                ProviderEvent::TurnCompleted(_) | ProviderEvent::Session { .. }
            )),
            "{text}: {events:?}"
        );
    }
    assert!(matches!(
        state.parse_line("not json")[..],
        [ProviderEvent::Notice { .. }]
    ));
    assert!(state.turn_open());
    // turn.completed with broken usage still ends the turn, with no tokens.
    let end = turn_end(&state.parse_line(r#"{"type": "turn.completed", "usage": "x"}"#));
    assert_eq!(end.tokens, Tokens::default());
    assert!(end.model_usage.is_empty());
}

#[test]
fn a_request_of_a_later_codex_process_never_has_an_earlier_ones_id() {
    // Codex numbers its requests afresh in every process; the run (its broker, its
    // ledger) outlives the process across a wake or a restart.
    let ask = json!({"method": "item/commandExecution/requestApproval", "id": 0,
        "params": {"threadId": THREAD, "turnId": TURN, "itemId": "c", "command": "x"}});
    let ids: Vec<String> = (0..50)
        .map(|_| {
            let mut state = turn_running();
            let events = line(&mut state, ask.clone());
            let [ProviderEvent::PermissionRequested(request)] = &events[..] else {
                panic!("{events:?}");
            };
            request.request_id.clone()
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "{ids:?}");
}
