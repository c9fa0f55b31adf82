//! Tables of OpenCode server events (shapes seen from the pinned 1.18.33 against a mock
//! model API: a tool call with a permission, a 429 and 5xx retries, an exhausted retry,
//! an abort) and the drover events they must become.

use super::*;
use crate::providers::{AlwaysOption, FileChange, QuestionOption};
use serde_json::json;
use std::collections::BTreeMap;

const NOW: UnixMillis = 1_800_000_000_000;
const SID: &str = "ses_abc";

fn state() -> ParseState {
    ParseState::new(SID, Some("mock/mock-model"))
}

fn ev(kind: &str, properties: Value) -> String {
    json!({"id": "evt_1", "type": kind, "properties": properties}).to_string()
}

fn feed(state: &mut ParseState, events: &[String]) -> Vec<ProviderEvent> {
    events
        .iter()
        .flat_map(|e| parse_event(e, state, NOW + 1_000))
        .collect()
}

fn status(kind: &str) -> String {
    ev(
        "session.status",
        json!({"sessionID": SID, "status": {"type": kind}}),
    )
}

fn idle() -> Vec<String> {
    vec![
        status("idle"),
        ev("session.idle", json!({"sessionID": SID})),
    ]
}

fn user_message(id: &str, created: UnixMillis) -> String {
    ev(
        "message.updated",
        json!({"sessionID": SID, "info": {"id": id, "role": "user", "sessionID": SID,
               "time": {"created": created}}}),
    )
}

fn assistant(id: &str, created: UnixMillis, input: u64, output: u64, cost: f64) -> String {
    ev(
        "message.updated",
        json!({"sessionID": SID, "info": {"id": id, "role": "assistant", "sessionID": SID,
               "cost": cost, "modelID": "mock-model", "providerID": "mock",
               "tokens": {"input": input, "output": output, "reasoning": 0,
                          "cache": {"read": 0, "write": 0}},
               "time": {"created": created}}}),
    )
}

fn text_part(id: &str, message: &str, text: &str, finished: bool) -> String {
    let time = if finished {
        json!({"start": NOW, "end": NOW + 5})
    } else {
        json!({"start": NOW})
    };
    ev(
        "message.part.updated",
        json!({"part": {"id": id, "sessionID": SID, "messageID": message, "type": "text",
                        "text": text, "time": time}}),
    )
}

fn tool_part(message: &str, status: &str, extra: Value) -> String {
    let mut state = json!({"status": status, "input": {"command": "touch x"}});
    if let (Some(s), Some(extra)) = (state.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    ev(
        "message.part.updated",
        json!({"part": {"id": "prt_tool", "sessionID": SID, "messageID": message,
                        "type": "tool", "callID": "call_1", "tool": "bash", "state": state}}),
    )
}

fn completed(events: &[ProviderEvent]) -> Vec<&TurnEnd> {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TurnCompleted(end) => Some(end),
            _ => None,
        })
        .collect()
}

#[test]
fn a_turn_with_a_tool_and_an_answer() {
    let mut s = state();
    s.begin_turn(NOW);
    let events = feed(
        &mut s,
        &[
            user_message("msg_u1", NOW + 10),
            status("busy"),
            assistant("msg_a1", NOW + 20, 0, 0, 0.0),
            tool_part("msg_a1", "pending", json!({})),
            tool_part("msg_a1", "running", json!({})),
            tool_part(
                "msg_a1",
                "completed",
                json!({"output": "done\nmore\n", "title": "touch x"}),
            ),
            assistant("msg_a1", NOW + 20, 1000, 100, 0.0012),
            assistant("msg_a2", NOW + 30, 0, 0, 0.0),
            text_part("prt_t1", "msg_a2", "All", false),
            text_part("prt_t1", "msg_a2", "All set.", true),
            assistant("msg_a2", NOW + 30, 1500, 120, 0.00174),
            // Repeated totals add nothing.
            assistant("msg_a2", NOW + 30, 1500, 120, 0.00174),
        ],
    );
    let usage = |input, output| ProviderEvent::Usage {
        model: Some("mock/mock-model".into()),
        tokens: Tokens {
            input,
            output,
            ..Tokens::default()
        },
    };
    assert_eq!(
        events,
        vec![
            ProviderEvent::ToolStarted {
                tool_use_id: "call_1".into(),
                name: "bash".into(),
                ask: Ask::command("touch x", None, None),
            },
            ProviderEvent::ToolFinished {
                tool_use_id: "call_1".into(),
                is_error: false,
                exit_code: Some(0),
                summary: "done (+1 line)".into(),
            },
            usage(1000, 100),
            ProviderEvent::AssistantText {
                text: "All set.".into()
            },
            usage(1500, 120),
        ]
    );
    let end = feed(&mut s, &idle());
    let ends = completed(&end);
    assert_eq!(ends.len(), 1, "one idle pair ends the turn once: {end:?}");
    let end = ends[0];
    assert!(!end.is_error && !end.transient);
    assert_eq!(end.subtype, "success");
    assert_eq!(end.text.as_deref(), Some("All set."));
    assert_eq!(end.session_id.as_deref(), Some(SID));
    assert_eq!(end.total_cost_usd, None);
    assert_eq!(end.tokens.input, 2500);
    assert_eq!(end.model_usage.len(), 1);
    assert_eq!(end.model_usage[0].model, "mock/mock-model");
    assert_eq!(end.model_usage[0].tokens.output, 220);
    let cost = end.model_usage[0].cost_usd.expect("a cost");
    assert!((cost - 0.00294).abs() < 1e-12, "{cost}");
    assert_eq!(end.duration_ms, Some(1_000));
    assert!(!s.turn_open());
}

#[test]
fn a_stale_idle_does_not_end_a_new_turn_nor_does_a_late_update_count_in_it() {
    let mut s = state();
    s.begin_turn(NOW);
    feed(
        &mut s,
        &[status("busy"), assistant("msg_a1", NOW + 10, 10, 5, 0.5)],
    );
    assert_eq!(completed(&feed(&mut s, &[status("idle")])).len(), 1);
    // The next turn is sent at once; the tail of the previous one arrives after it.
    s.begin_turn(NOW + 20);
    let late = feed(
        &mut s,
        &[
            ev("session.idle", json!({"sessionID": SID})),
            assistant("msg_a1", NOW + 10, 10, 5, 0.5),
            status("idle"),
        ],
    );
    assert_eq!(late, vec![], "nothing of the old turn counts: {late:?}");
    assert!(s.turn_open());
    let events = feed(
        &mut s,
        &[
            user_message("msg_u2", NOW + 25),
            assistant("msg_a2", NOW + 30, 7, 3, 0.25),
            status("idle"),
        ],
    );
    let ends = completed(&events);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].model_usage[0].cost_usd, Some(0.25));
    assert_eq!(ends[0].tokens.input, 7);
}

#[test]
fn messages_created_before_the_turn_are_not_its_own() {
    let mut s = state();
    s.begin_turn(NOW + 60_000);
    let events = feed(
        &mut s,
        &[
            assistant("msg_old", NOW, 10, 5, 0.5),
            text_part("prt_old", "msg_old", "old answer", true),
        ],
    );
    assert_eq!(events, vec![]);
}

#[test]
fn a_retry_holds_the_turn_until_the_api_answers() {
    let mut s = state();
    s.begin_turn(NOW);
    let retry = |attempt: u64, message: &str, next: Value| {
        ev(
            "session.status",
            json!({"sessionID": SID, "status": {"type": "retry", "attempt": attempt,
                   "message": message, "next": next}}),
        )
    };
    let events = feed(
        &mut s,
        &[
            status("busy"),
            retry(1, "mock error 429", json!(NOW + 2_000)),
            status("busy"),
            retry(2, "mock error 500", json!(NOW)), // already past: no bound
            retry(3, "", Value::Null),
            status("busy"),
        ],
    );
    assert_eq!(
        events,
        vec![
            ProviderEvent::RateLimited {
                until: Some(NOW + 2_000),
                detail: "mock error 429 (retry 1)".into(),
            },
            ProviderEvent::RateLimitCleared,
            ProviderEvent::RateLimited {
                until: None,
                detail: "mock error 500 (retry 2)".into(),
            },
            ProviderEvent::RateLimited {
                until: None,
                detail: "the model API asks to retry (retry 3)".into(),
            },
            ProviderEvent::RateLimitCleared,
        ]
    );
}

#[test]
fn errors_end_the_turn_with_their_status_and_whether_they_pass() {
    let api_error = |status: Value, retryable: Value| {
        json!({"name": "APIError", "data": {"message": "mock error", "statusCode": status,
               "isRetryable": retryable, "responseHeaders": {}}})
    };
    let table = [
        // (error, subtype, status, transient)
        (
            api_error(json!(500), json!(true)),
            "APIError",
            Some(500),
            true,
        ),
        (
            api_error(json!(429), json!(false)),
            "APIError",
            Some(429),
            true,
        ),
        (
            api_error(json!(400), json!(false)),
            "APIError",
            Some(400),
            false,
        ),
        (
            api_error(json!(503), Value::Null),
            "APIError",
            Some(503),
            true,
        ),
        (
            json!({"name": "ProviderAuthError", "data": {"message": "no key"}}),
            "ProviderAuthError",
            None,
            false,
        ),
        (
            json!({"name": "MessageAbortedError", "data": {"message": "Aborted"}}),
            "interrupted",
            None,
            false,
        ),
        (json!({}), "UnknownError", None, false),
    ];
    for (error, subtype, status, transient) in table {
        let mut s = state();
        s.begin_turn(NOW);
        let mut events = feed(
            &mut s,
            &[
                status_event_busy(),
                ev("session.error", json!({"sessionID": SID, "error": error})),
            ],
        );
        events.extend(feed(&mut s, &idle()));
        // The failed message completes after the first idle; then idle comes again.
        events.extend(feed(&mut s, &idle()));
        let ends = completed(&events);
        assert_eq!(ends.len(), 1, "{error}: {events:?}");
        let end = ends[0];
        assert!(end.is_error, "{error}");
        assert_eq!(end.subtype, subtype, "{error}");
        assert_eq!(end.api_error_status, status, "{error}");
        assert_eq!(end.transient, transient, "{error}");
    }
}

fn status_event_busy() -> String {
    status("busy")
}

#[test]
fn an_error_on_the_message_alone_also_fails_the_turn() {
    let mut s = state();
    s.begin_turn(NOW);
    let failed = ev(
        "message.updated",
        json!({"sessionID": SID, "info": {"id": "msg_a1", "role": "assistant",
               "sessionID": SID, "cost": 0, "time": {"created": NOW + 5},
               "error": {"name": "APIError", "data": {"message": "boom", "statusCode": 502,
                          "isRetryable": true}}}}),
    );
    let mut events = feed(&mut s, &[failed]);
    events.extend(feed(&mut s, &idle()));
    let ends = completed(&events);
    assert_eq!(ends.len(), 1);
    assert!(ends[0].is_error && ends[0].transient);
    assert_eq!(ends[0].api_error_status, Some(502));
    assert_eq!(ends[0].text.as_deref(), Some("boom"));
    // No $0 row for a message that cost nothing and used nothing.
    assert!(ends[0].model_usage.is_empty(), "{:?}", ends[0].model_usage);
}

#[test]
fn a_failed_prompt_ends_the_turn_at_once() {
    let mut s = state();
    s.begin_turn(NOW);
    let events = s.fail_turn("HTTP 400", NOW + 5);
    let ends = completed(&events);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].subtype, "prompt_failed");
    assert_eq!(ends[0].text.as_deref(), Some("HTTP 400"));
    assert!(!s.turn_open());
}

const ASKED: &str = r#"{"id":"evt_9","type":"permission.asked","properties":{"id":"per_1","sessionID":"ses_abc","permission":"bash","patterns":["touch x"],"metadata":{"command":"touch x"},"always":["touch *"],"tool":{"messageID":"msg_a1","callID":"call_1"}}}"#;

#[test]
fn a_permission_request_is_shown_once_and_answered_once() {
    let mut s = state();
    s.begin_turn(NOW);
    let events = feed(&mut s, &[ASKED.to_string(), ASKED.to_string()]);
    assert_eq!(
        events,
        vec![ProviderEvent::PermissionRequested(PermissionRequest {
            request_id: "per_1".into(),
            kind: RequestKind::Permission,
            tool: "bash".into(),
            ask: Ask::command("touch x", None, None),
            always: Some(AlwaysOption::new(
                "allow commands matching `touch *` for the rest of this run"
            )),
            tool_use_id: Some("call_1".into()),
            blocked_path: None,
        })]
    );
    // Answers to a permission must be allow or deny.
    let answers = PermissionAnswer::Answer {
        answers: Default::default(),
    };
    assert!(s.answer("per_1", &answers).is_err());
    let Outgoing::Permission(reply) = s
        .answer("per_1", &PermissionAnswer::Allow { always: false })
        .expect("pending")
    else {
        panic!("a permission gets a permission reply");
    };
    assert_eq!(
        reply,
        Reply {
            request_id: "per_1".into(),
            session_id: SID.into(),
            reply: "once",
            message: None,
        }
    );
    assert_eq!(reply_body(&reply), json!({"reply": "once"}));
    assert_eq!(legacy_reply_body(&reply), json!({"response": "once"}));
    assert!(
        s.answer("per_1", &PermissionAnswer::Allow { always: true })
            .is_err()
    );
    // Drover's own answer coming back withdraws nothing.
    let replied = ev(
        "permission.replied",
        json!({"sessionID": SID, "requestID": "per_1", "reply": "once"}),
    );
    assert_eq!(feed(&mut s, &[replied]), vec![]);
}

#[test]
fn answers_map_to_opencode_replies() {
    let table = [
        (PermissionAnswer::Allow { always: true }, "always", None),
        (PermissionAnswer::Allow { always: false }, "once", None),
        (
            PermissionAnswer::Deny {
                message: Some("not here".into()),
            },
            "reject",
            Some("not here"),
        ),
        (
            PermissionAnswer::Deny { message: None },
            "reject",
            Some(DEFAULT_DENIAL),
        ),
        (
            PermissionAnswer::Deny {
                message: Some("  ".into()),
            },
            "reject",
            Some(DEFAULT_DENIAL),
        ),
    ];
    for (answer, reply, message) in table {
        let mut s = state();
        feed(&mut s, &[ASKED.to_string()]);
        let Outgoing::Permission(got) = s.answer("per_1", &answer).expect("pending") else {
            panic!("a permission gets a permission reply");
        };
        assert_eq!(got.reply, reply, "{answer:?}");
        assert_eq!(got.message.as_deref(), message, "{answer:?}");
        let body = reply_body(&got);
        assert_eq!(body["reply"], reply);
        assert_eq!(body.get("message").and_then(Value::as_str), message);
    }
}

#[test]
fn a_request_settled_without_drover_is_withdrawn() {
    let mut s = state();
    feed(&mut s, &[ASKED.to_string()]);
    let replied = ev(
        "permission.replied",
        json!({"sessionID": SID, "requestID": "per_1", "reply": "reject"}),
    );
    assert_eq!(
        feed(&mut s, &[replied.clone(), replied]),
        vec![ProviderEvent::PermissionWithdrawn {
            request_id: "per_1".into()
        }]
    );
    // Older servers name it permissionID.
    feed(&mut s, &[ASKED.to_string()]);
    let older = ev(
        "permission.replied",
        json!({"sessionID": SID, "permissionID": "per_1", "response": "once"}),
    );
    assert_eq!(feed(&mut s, &[older]).len(), 1);
}

#[test]
fn an_errored_turn_withdraws_what_is_pending() {
    let mut s = state();
    s.begin_turn(NOW);
    let mut events = feed(
        &mut s,
        &[
            ASKED.to_string(),
            ev(
                "session.error",
                json!({"sessionID": SID, "error": {"name": "MessageAbortedError",
                                                    "data": {"message": "Aborted"}}}),
            ),
        ],
    );
    events.extend(feed(&mut s, &idle()));
    assert!(events.contains(&ProviderEvent::PermissionWithdrawn {
        request_id: "per_1".into()
    }));
    assert!(s.drain_pending().is_empty());
}

#[test]
fn other_sessions_are_ignored() {
    let mut s = state();
    s.begin_turn(NOW);
    let other = "ses_other";
    let events = feed(
        &mut s,
        &[
            ev(
                "session.status",
                json!({"sessionID": other, "status": {"type": "busy"}}),
            ),
            ev("session.idle", json!({"sessionID": other})),
            ev(
                "session.error",
                json!({"sessionID": other, "error": {"name": "APIError"}}),
            ),
            ASKED.replace(SID, other),
            ev(
                "message.updated",
                json!({"info": {"id": "m", "role": "assistant", "sessionID": other}}),
            ),
            ev(
                "message.part.updated",
                json!({"part": {"id": "p", "messageID": "m", "sessionID": other,
                                "type": "text", "text": "x", "time": {"end": 1}}}),
            ),
        ],
    );
    assert_eq!(events, vec![]);
    assert!(s.turn_open());
}

#[test]
fn a_model_other_than_the_one_asked_for_is_reported() {
    let mut s = state();
    s.begin_turn(NOW);
    let events = feed(
        &mut s,
        &[ev(
            "message.updated",
            json!({"info": {"id": "m1", "role": "assistant", "sessionID": SID,
                            "providerID": "anthropic", "modelID": "claude-sonnet-5-5",
                            "time": {"created": NOW + 5}}}),
        )],
    );
    assert_eq!(
        events,
        vec![ProviderEvent::Session {
            session_id: SID.into(),
            model: Some("anthropic/claude-sonnet-5-5".into()),
        }]
    );
}

#[test]
fn reasoning_and_unfinished_text_are_reported_once() {
    let mut s = state();
    s.begin_turn(NOW);
    let reasoning = ev(
        "message.part.updated",
        json!({"part": {"id": "prt_r", "sessionID": SID, "messageID": "msg_a1",
                        "type": "reasoning", "text": "hmm…", "time": {"start": 1, "end": 2}}}),
    );
    let mut events = feed(
        &mut s,
        &[
            status("busy"),
            reasoning.clone(),
            reasoning,
            text_part("prt_t", "msg_a1", "never marked finished", false),
        ],
    );
    events.extend(feed(&mut s, &idle()));
    assert_eq!(events[0], ProviderEvent::Thinking { chars: 4 });
    assert_eq!(
        events[1],
        ProviderEvent::AssistantText {
            text: "never marked finished".into()
        }
    );
    assert_eq!(
        completed(&events)[0].text.as_deref(),
        Some("never marked finished")
    );
}

#[test]
fn a_tool_error_and_a_tool_seen_only_at_its_end() {
    let mut s = state();
    s.begin_turn(NOW);
    let events = feed(
        &mut s,
        &[tool_part(
            "msg_a1",
            "error",
            json!({"error": "The user rejected permission to use this specific tool call."}),
        )],
    );
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        matches!(&events[0], ProviderEvent::ToolStarted { tool_use_id, .. } if tool_use_id == "call_1")
    );
    assert!(
        matches!(&events[1], ProviderEvent::ToolFinished { is_error: true, summary, .. }
        if summary.contains("rejected"))
    );
}

#[test]
fn hostile_or_odd_events_become_notices_never_panics() {
    let long = "x".repeat(10_000);
    let table: Vec<(String, &str)> = vec![
        ("not json".into(), "not JSON"),
        ("[1,2]".into(), "not a JSON object"),
        ("42".into(), "not a JSON object"),
        ("{}".into(), "without a type"),
        (r#"{"type":7}"#.into(), "without a type"),
        (ev("something.new", json!({})), "unknown type something.new"),
        (ev("message.updated", json!({})), "without its info"),
        (
            ev("message.updated", json!({"info": {"sessionID": SID}})),
            "without a message id",
        ),
        (
            ev(
                "message.updated",
                json!({"info": {"sessionID": SID, "id": "m", "role": "system"}}),
            ),
            "role system",
        ),
        (
            ev("message.part.updated", json!({"part": 3})),
            "without its part",
        ),
        (
            ev("message.part.updated", json!({"part": {"sessionID": SID}})),
            "without an id",
        ),
        (
            ev(
                "session.status",
                json!({"sessionID": SID, "status": {"type": "dreaming"}}),
            ),
            "type dreaming",
        ),
        (
            ev("session.status", json!({"sessionID": SID})),
            "without its status",
        ),
        (
            ev("permission.asked", json!({"sessionID": SID})),
            "without an id",
        ),
        (
            ev("permission.asked", json!({"sessionID": SID, "id": "per_x"})),
            "names no permission",
        ),
        (
            ev("permission.replied", json!({"sessionID": SID})),
            "without a request id",
        ),
        (
            ev("session.error", json!({"error": {"name": "Boom"}})),
            "OpenCode reports an error: Boom",
        ),
        (
            ev("question.asked", json!({"sessionID": SID})),
            "question without an id",
        ),
        (
            ev("question.asked", json!({"sessionID": SID, "id": "que_x"})),
            "asks nothing",
        ),
        (ev(&long, json!({})), "unknown type"),
        (long.clone(), "not JSON"),
    ];
    for (event, expected) in table {
        let mut s = state();
        s.begin_turn(NOW);
        let events = parse_event(&event, &mut s, NOW);
        match events.as_slice() {
            [ProviderEvent::Notice { text }] => {
                assert!(text.contains(expected), "{text:?} for {}", clip(&event, 80));
                assert!(text.chars().count() < 300, "{text:?}");
            }
            other => panic!("expected one notice for {}: {other:?}", clip(&event, 80)),
        }
    }
    // Odd values inside known events are taken as absent.
    let mut s = state();
    s.begin_turn(NOW);
    let odd = [
        ev(
            "message.updated",
            json!({"info": {"id": "m", "role": "assistant", "sessionID": SID,
                            "cost": -5, "tokens": {"input": -1, "output": 1.5, "cache": "x"},
                            "time": {"created": "yesterday"}}}),
        ),
        ev(
            "session.status",
            json!({"sessionID": SID, "status": {"type": "retry", "attempt": -1,
                                                "next": 1e300, "message": 5}}),
        ),
        ev(
            "message.part.updated",
            json!({"part": {"id": "p", "messageID": "m", "sessionID": SID, "type": "tool",
                            "state": "running"}}),
        ),
        String::new(),
        "   ".into(),
    ];
    for event in odd {
        let _ = parse_event(&event, &mut s, NOW);
    }
    // An unknown type is reported once, not every time.
    let mut s = state();
    let again = ev("brand.new", json!({}));
    assert_eq!(parse_event(&again, &mut s, NOW).len(), 1);
    assert_eq!(parse_event(&again, &mut s, NOW), vec![]);
}

#[test]
fn prompts_name_the_model_when_drover_has_one() {
    assert_eq!(
        prompt_body("hi", Some("mock/mock-model")),
        json!({"parts": [{"type": "text", "text": "hi"}],
               "model": {"providerID": "mock", "modelID": "mock-model"}})
    );
    assert_eq!(
        prompt_body("hi", Some("openrouter/anthropic/claude")),
        json!({"parts": [{"type": "text", "text": "hi"}],
               "model": {"providerID": "openrouter", "modelID": "anthropic/claude"}})
    );
    for model in [None, Some("bare"), Some("/x"), Some("x/")] {
        assert_eq!(
            prompt_body("hi", model),
            json!({"parts": [{"type": "text", "text": "hi"}]}),
            "{model:?}"
        );
    }
}

const QUESTION: &str = r#"{"id":"evt_q","type":"question.asked","properties":{"id":"que_1","sessionID":"ses_abc","questions":[{"question":"Which colour?","header":"Colour","options":[{"label":"Blue","description":"calm"},{"label":"Red","description":"loud"}]},{"question":"How big?","header":"Size","options":[{"label":"S","description":""}]}],"tool":{"messageID":"msg_a1","callID":"call_q"}}}"#;

#[test]
fn a_question_is_shown_and_answered_by_question_text_or_header() {
    let mut s = state();
    s.begin_turn(NOW);
    let events = feed(&mut s, &[QUESTION.to_string(), QUESTION.to_string()]);
    let [ProviderEvent::PermissionRequested(request)] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert_eq!(request.kind, RequestKind::Question);
    assert_eq!(request.tool, "question");
    assert_eq!(request.tool_use_id.as_deref(), Some("call_q"));
    assert_eq!(request.ask.questions()[0].header.as_deref(), Some("Colour"));
    assert_eq!(request.ask.summary(), "Which colour?");
    assert!(
        s.answer("que_1", &PermissionAnswer::Allow { always: false })
            .is_err(),
        "a question takes answers"
    );
    let answers = BTreeMap::from([
        ("Which colour?".to_string(), "Blue".to_string()),
        ("Size".to_string(), "S".to_string()),
    ]);
    assert_eq!(
        s.answer("que_1", &PermissionAnswer::Answer { answers }),
        Ok(Outgoing::QuestionReply {
            request_id: "que_1".into(),
            body: json!({"answers": [["Blue"], ["S"]]}),
        })
    );
}

#[test]
fn a_denied_question_hands_the_reason_on_or_is_dismissed() {
    let mut s = state();
    feed(&mut s, &[QUESTION.to_string()]);
    assert_eq!(
        s.answer(
            "que_1",
            &PermissionAnswer::Deny {
                message: Some("decide yourself".into())
            }
        ),
        Ok(Outgoing::QuestionReply {
            request_id: "que_1".into(),
            body: json!({"answers": [["decide yourself"], ["decide yourself"]]}),
        })
    );
    feed(&mut s, &[QUESTION.to_string()]);
    assert_eq!(
        s.answer("que_1", &PermissionAnswer::Deny { message: None }),
        Ok(Outgoing::QuestionReject {
            request_id: "que_1".into()
        })
    );
    // Settled elsewhere: withdrawn.
    feed(&mut s, &[QUESTION.to_string()]);
    let rejected = ev(
        "question.rejected",
        json!({"sessionID": SID, "requestID": "que_1"}),
    );
    assert_eq!(
        feed(&mut s, &[rejected]),
        vec![ProviderEvent::PermissionWithdrawn {
            request_id: "que_1".into()
        }]
    );
}

#[test]
fn a_long_stream_of_deltas_gives_a_sign_of_life_now_and_then() {
    let mut s = state();
    s.begin_turn(NOW);
    let delta = |text: &str| {
        ev(
            "message.part.delta",
            json!({"sessionID": SID, "messageID": "msg_a1", "partID": "prt_1",
                   "field": "text", "delta": text}),
        )
    };
    assert_eq!(parse_event(&status("busy"), &mut s, NOW), vec![]);
    assert_eq!(parse_event(&delta("ab"), &mut s, NOW + 1), vec![]);
    assert_eq!(parse_event(&delta("cd"), &mut s, NOW + 30_000), vec![]);
    assert_eq!(
        parse_event(&delta("ef"), &mut s, NOW + PROGRESS_EVERY_MS - 1),
        vec![]
    );
    let later = parse_event(&delta("gh"), &mut s, NOW + PROGRESS_EVERY_MS);
    assert_eq!(
        later,
        vec![ProviderEvent::Notice {
            text: "the model is still answering (8 characters in the last minute or so)".into()
        }]
    );
    // Other sessions' deltas say nothing.
    let other = ev(
        "message.part.delta",
        json!({"sessionID": "ses_other", "messageID": "m", "delta": "x"}),
    );
    assert_eq!(
        parse_event(&other, &mut s, NOW + 10 * PROGRESS_EVERY_MS),
        vec![]
    );
}

#[test]
fn every_permission_shape_becomes_its_typed_ask_and_always_sentence() {
    let asked = |permission: &str, rest: Value| {
        let mut props = json!({"id": "per_9", "sessionID": SID, "permission": permission,
                               "tool": {"messageID": "msg_a1", "callID": "call_9"}});
        if let (Some(p), Some(rest)) = (props.as_object_mut(), rest.as_object()) {
            for (k, v) in rest {
                p.insert(k.clone(), v.clone());
            }
        }
        ev("permission.asked", props)
    };
    let table: Vec<(String, Ask, Option<&str>)> = vec![
        (
            asked(
                "bash",
                json!({"patterns": ["git status"], "metadata": {"command": "git status"},
                       "always": ["git status *"]}),
            ),
            Ask::command("git status", None, None),
            Some("allow commands matching `git status *` for the rest of this run"),
        ),
        (
            asked(
                "edit",
                json!({"patterns": ["a.txt"], "always": ["*"],
                       "metadata": {"filepath": "/w/a.txt", "diff": "-a\n+b\n"}}),
            ),
            Ask::FileEdit {
                file_path: "/w/a.txt".into(),
                change: FileChange::Diff {
                    diff: "-a\n+b\n".into(),
                },
                other_files: vec![],
            },
            Some("allow all file edits for the rest of this run"),
        ),
        (
            asked(
                "webfetch",
                json!({"patterns": ["https://opencode.ai"], "always": ["*"],
                       "metadata": {"url": "https://opencode.ai", "format": "markdown"}}),
            ),
            Ask::Fetch {
                url: "https://opencode.ai".into(),
            },
            Some("allow all web fetches for the rest of this run"),
        ),
        (
            asked("doom_loop", json!({"patterns": ["read"], "always": []})),
            Ask::Other {
                tool: "doom_loop".into(),
                subject: Some("read".into()),
                input: r#"{"patterns":["read"]}"#.into(),
            },
            None,
        ),
    ];
    for (event, expected, always) in table {
        let mut s = state();
        let events = feed(&mut s, &[event]);
        let [ProviderEvent::PermissionRequested(request)] = events.as_slice() else {
            panic!("{events:?}");
        };
        assert_eq!(request.ask, expected);
        assert_eq!(request.kind, RequestKind::Permission);
        assert_eq!(request.tool_use_id.as_deref(), Some("call_9"));
        assert_eq!(request.always.as_ref().map(|a| a.sentence.as_str()), always);
    }
}

#[test]
fn a_multiple_choice_question_takes_several_labels() {
    let asked = ev(
        "question.asked",
        json!({"id": "que_2", "sessionID": SID, "questions": [
            {"question": "Which parts?", "header": "Parts", "multiple": true,
             "options": [{"label": "api", "description": "the API"}, {"label": "cli", "description": ""}]},
            {"question": "Anything else?", "options": []}]}),
    );
    let mut s = state();
    let events = feed(&mut s, &[asked]);
    let [ProviderEvent::PermissionRequested(request)] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert_eq!(
        request.ask,
        Ask::Question {
            questions: vec![
                Question {
                    question: "Which parts?".into(),
                    header: Some("Parts".into()),
                    options: vec![
                        QuestionOption {
                            label: "api".into(),
                            description: Some("the API".into()),
                        },
                        QuestionOption {
                            label: "cli".into(),
                            description: None,
                        },
                    ],
                    multi_select: true,
                },
                Question {
                    question: "Anything else?".into(),
                    header: None,
                    options: vec![],
                    multi_select: false,
                },
            ],
        }
    );
    let answers = BTreeMap::from([
        ("Parts".to_string(), "api, cli".to_string()),
        ("Anything else?".to_string(), "no, thanks".to_string()),
    ]);
    assert_eq!(
        s.answer("que_2", &PermissionAnswer::Answer { answers }),
        Ok(Outgoing::QuestionReply {
            request_id: "que_2".into(),
            body: json!({"answers": [["api", "cli"], ["no, thanks"]]}),
        })
    );
}
