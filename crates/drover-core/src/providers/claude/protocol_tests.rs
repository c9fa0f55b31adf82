//! Tables of realistic stream-json lines (shapes from docs/PROVIDERS.md §"Claude Code" and the official
//! SDK's message parser) and the events they must become.

use super::*;
use crate::providers::{AlwaysOption, Ask, FileChange, PermissionAnswer, Question, QuestionOption};
use serde_json::json;
use std::collections::BTreeMap;

const NOW: UnixMillis = 1_700_000_000_000;

fn ask() -> ParseState {
    ParseState::new(PermissionPolicy::Ask)
}

fn parse(state: &mut ParseState, line: &str) -> Vec<ProviderEvent> {
    parse_line(line, state, NOW)
}

fn notice_text(events: &[ProviderEvent]) -> String {
    match events {
        [ProviderEvent::Notice { text }] => text.clone(),
        other => panic!("expected one notice, got {other:?}"),
    }
}

fn json_of(line: &str) -> Value {
    serde_json::from_str(line).expect("an encoded line is JSON")
}

const PERMISSION_REQUEST: &str = r#"{"type":"control_request","request_id":"12a3","request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash","input":{"command":"ls /tmp","description":"list"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls /tmp"}],"behavior":"allow","destination":"localSettings"}],"blocked_path":"/tmp","tool_use_id":"toolu_01"}}"#;

const QUESTION_REQUEST: &str = r#"{"type":"control_request","request_id":"q1","request":{"subtype":"can_use_tool","tool_name":"AskUserQuestion","input":{"questions":[{"question":"Which database?","header":"DB","options":[{"label":"Postgres","description":"relational"},{"label":"SQLite","description":"embedded"}],"multiSelect":false}]},"tool_use_id":"toolu_q"}}"#;

#[test]
fn lines_to_events() {
    let table: Vec<(&str, &str, Vec<ProviderEvent>)> = vec![
        (
            "init",
            r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"5f1e-aa","tools":["Bash","Read"],"mcp_servers":[],"model":"claude-sonnet-4-5","permissionMode":"default","apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","uuid":"u1"}"#,
            vec![ProviderEvent::Session {
                session_id: "5f1e-aa".into(),
                model: Some("claude-sonnet-4-5".into()),
            }],
        ),
        (
            "assistant text with usage",
            r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Planning next steps."}],"stop_reason":null,"usage":{"input_tokens":120,"output_tokens":45,"cache_creation_input_tokens":7924,"cache_read_input_tokens":13368,"service_tier":"standard"}},"parent_tool_use_id":null,"session_id":"5f1e-aa"}"#,
            vec![
                ProviderEvent::AssistantText {
                    text: "Planning next steps.".into(),
                },
                ProviderEvent::Usage {
                    model: Some("claude-sonnet-4-5".into()),
                    tokens: Tokens {
                        input: 120,
                        output: 45,
                        reasoning: 0,
                        cache_read: 13368,
                        cache_write: 7924,
                    },
                },
            ],
        ),
        (
            "thinking and tool use",
            r#"{"type":"assistant","message":{"id":"msg_2","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"héllo","signature":"sig"},{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"ls -la"}}]},"session_id":"5f1e-aa"}"#,
            vec![
                ProviderEvent::Thinking { chars: 5 },
                ProviderEvent::ToolStarted {
                    tool_use_id: "toolu_01".into(),
                    name: "Bash".into(),
                    ask: Ask::command("ls -la", None, None),
                },
            ],
        ),
        (
            "tool result, string content",
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"total 2\nREADME.md\nsrc\n","is_error":false}]},"session_id":"5f1e-aa"}"#,
            vec![ProviderEvent::ToolFinished {
                tool_use_id: "toolu_01".into(),
                is_error: false,
                exit_code: Some(0),
                summary: "total 2 (+2 lines)".into(),
            }],
        ),
        (
            "tool result, block content, error",
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_02","content":[{"type":"text","text":"\n  Exit code 1\n"}],"is_error":true}]}}"#,
            vec![ProviderEvent::ToolFinished {
                tool_use_id: "toolu_02".into(),
                is_error: true,
                exit_code: Some(1),
                summary: "Exit code 1".into(),
            }],
        ),
        (
            "tool result, image, no output",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{}}]},{"type":"tool_result","tool_use_id":"b"}]}}"#,
            vec![
                ProviderEvent::ToolFinished {
                    tool_use_id: "a".into(),
                    is_error: false,
                    exit_code: Some(0),
                    summary: "(image)".into(),
                },
                ProviderEvent::ToolFinished {
                    tool_use_id: "b".into(),
                    is_error: false,
                    exit_code: Some(0),
                    summary: "(no output)".into(),
                },
            ],
        ),
        (
            "a replayed user prompt carries nothing",
            r#"{"type":"user","message":{"role":"user","content":"fix it"},"session_id":"5f1e-aa"}"#,
            vec![],
        ),
        (
            "withdrawal of a request never seen",
            r#"{"type":"control_cancel_request","request_id":"gone"}"#,
            vec![],
        ),
        (
            "stream event",
            r#"{"type":"stream_event","uuid":"u","session_id":"s","event":{"type":"content_block_delta"}}"#,
            vec![],
        ),
        ("blank line", "   ", vec![]),
        (
            "hook noise",
            r#"{"type":"system","subtype":"hook_started","hook_name":"x"}"#,
            vec![],
        ),
        (
            "rate limit allowed without a limit before",
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1700003600},"uuid":"u","session_id":"s"}"#,
            vec![],
        ),
    ];
    for (name, line, expected) in table {
        assert_eq!(parse(&mut ask(), line), expected, "{name}");
    }
}

#[test]
fn result_fills_every_field_of_turn_end() {
    let line = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":3952,"duration_api_ms":12932,"num_turns":2,"result":"Done.\n\n## Result\nstatus: done","session_id":"5f1e-aa","total_cost_usd":0.10457895,"usage":{"input_tokens":2,"output_tokens":9,"cache_creation_input_tokens":7924,"cache_read_input_tokens":13368,"server_tool_use":{"web_search_requests":0}},"modelUsage":{"claude-sonnet-4-5":{"inputTokens":2,"outputTokens":9,"cacheReadInputTokens":13368,"cacheCreationInputTokens":7924,"webSearchRequests":0,"costUSD":0.1,"contextWindow":200000},"claude-haiku-4-5":{"inputTokens":300,"outputTokens":20,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":0.00457895}},"permission_denials":[{"tool_name":"Bash","tool_use_id":"t","tool_input":{}}],"terminal_reason":"completed","structured_output":{"ok":true},"uuid":"u"}"#;
    let events = parse(&mut ask(), line);
    let expected = TurnEnd {
        is_error: false,
        transient: false,
        subtype: "success".into(),
        text: Some("Done.\n\n## Result\nstatus: done".into()),
        session_id: Some("5f1e-aa".into()),
        total_cost_usd: Some(0.10457895),
        tokens: Tokens {
            input: 2,
            output: 9,
            reasoning: 0,
            cache_read: 13368,
            cache_write: 7924,
        },
        model_usage: vec![
            ModelUsage {
                model: "claude-haiku-4-5".into(),
                tokens: Tokens {
                    input: 300,
                    output: 20,
                    ..Tokens::default()
                },
                cost_usd: Some(0.00457895),
            },
            ModelUsage {
                model: "claude-sonnet-4-5".into(),
                tokens: Tokens {
                    input: 2,
                    output: 9,
                    reasoning: 0,
                    cache_read: 13368,
                    cache_write: 7924,
                },
                cost_usd: Some(0.1),
            },
        ],
        num_turns: Some(2),
        duration_ms: Some(3952),
        api_error_status: None,
        api_message: None,
        terminal_reason: Some("completed".into()),
        structured_output: Some(json!({"ok": true})),
        permission_denials: 1,
    };
    let mut end = match events.as_slice() {
        [ProviderEvent::TurnCompleted(end)] => end.clone(),
        other => panic!("expected TurnCompleted, got {other:?}"),
    };
    // The map's order is not the protocol's business.
    end.model_usage.sort_by(|a, b| a.model.cmp(&b.model));
    assert_eq!(end, expected);
}

#[test]
fn api_error_result() {
    let line = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"duration_ms":10,"num_turns":1,"session_id":"s","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0},"permission_denials":[],"api_error_status":529,"terminal_reason":"api_error","structured_output":null}"#;
    let events = parse(&mut ask(), line);
    let [ProviderEvent::TurnCompleted(end)] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert!(end.is_error);
    assert_eq!(end.subtype, "error_during_execution");
    assert_eq!(end.api_error_status, Some(529));
    assert_eq!(end.terminal_reason.as_deref(), Some("api_error"));
    assert_eq!(end.structured_output, None);
    assert_eq!(end.text, None);
    assert_eq!(end.total_cost_usd, Some(0.0));
    assert_eq!(end.permission_denials, 0);
}

#[test]
fn a_failed_turn_carries_the_model_apis_own_message() {
    // What the CLI writes once its retries of a 5xx are spent: `subtype` says success,
    // the message is in the API's JSON body inside `result`.
    let result = |text: &str, is_error: bool| {
        serde_json::json!({
            "type": "result", "subtype": "success", "is_error": is_error,
            "api_error_status": 500, "session_id": "s", "result": text,
        })
        .to_string()
    };
    let cases = [
        (
            r#"API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_1"}"#,
            true,
            Some("Internal server error"),
        ),
        ("API Error: 529 Overloaded", true, Some("Overloaded")),
        // What 2.1.197 writes once its retries of a 500 are spent.
        (
            "API Error: 500 mock error 500. This is a server-side issue, usually temporary — try again in a moment.",
            true,
            Some(
                "mock error 500. This is a server-side issue, usually temporary — try again in a moment.",
            ),
        ),
        (
            r#"API Error: 502 {"message":"bad gateway"}"#,
            true,
            Some("bad gateway"),
        ),
        (
            "API Error: Connection error.",
            true,
            Some("Connection error."),
        ),
        // Not an API error's text, or not a failure: nothing is read from it.
        ("Invalid API key · Please run /login", true, None),
        (r#"API Error: 500 {"type":"error""#, true, None),
        ("API Error: 500 ", true, None),
        ("API Error: 500 Overloaded", false, None),
    ];
    for (text, is_error, want) in cases {
        let events = parse(&mut ask(), &result(text, is_error));
        let Some(ProviderEvent::TurnCompleted(end)) = events.last() else {
            panic!("{events:?}");
        };
        assert_eq!(end.api_message.as_deref(), want, "{text}");
        assert_eq!(
            end.text.as_deref(),
            Some(text),
            "the text is kept as it came"
        );
    }
}

#[test]
fn usage_repeated_on_the_lines_of_one_message_is_reported_once() {
    let mut state = ask();
    let line = |content: &str, output: u64| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"msg_9","model":"m","content":[{content}],"usage":{{"input_tokens":10,"output_tokens":{output},"cache_read_input_tokens":5}}}}}}"#
        )
    };
    let usage = |events: Vec<ProviderEvent>| -> Vec<Tokens> {
        events
            .into_iter()
            .filter_map(|e| match e {
                ProviderEvent::Usage { tokens, .. } => Some(tokens),
                _ => None,
            })
            .collect()
    };
    let first = usage(parse(&mut state, &line(r#"{"type":"text","text":"a"}"#, 3)));
    let same = usage(parse(&mut state, &line(r#"{"type":"text","text":"b"}"#, 3)));
    let grown = usage(parse(&mut state, &line(r#"{"type":"text","text":"c"}"#, 7)));
    assert_eq!(
        first,
        vec![Tokens {
            input: 10,
            output: 3,
            cache_read: 5,
            ..Tokens::default()
        }]
    );
    assert_eq!(same, vec![]);
    assert_eq!(
        grown,
        vec![Tokens {
            output: 4,
            ..Tokens::default()
        }]
    );
    // A new message counts in full again.
    let next = usage(parse(
        &mut state,
        r#"{"type":"assistant","message":{"id":"msg_10","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}"#,
    ));
    assert_eq!(
        next,
        vec![Tokens {
            input: 1,
            output: 1,
            ..Tokens::default()
        }]
    );
}

#[test]
fn api_retry_is_a_rate_limit_only_for_429_529_and_overload() {
    let table: Vec<(&str, Vec<ProviderEvent>)> = vec![
        (
            r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1500,"error_status":429,"error":"rate_limit"}"#,
            vec![ProviderEvent::RateLimited {
                until: Some(NOW + 1500),
                detail: "API error 429 rate_limit, retry 2/10 in 1.5 s".into(),
            }],
        ),
        (
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":600,"error_status":529,"error":"overloaded"}"#,
            vec![ProviderEvent::RateLimited {
                until: Some(NOW + 600),
                detail: "API error 529 overloaded, retry 1/10 in 0.6 s".into(),
            }],
        ),
        (
            r#"{"type":"system","subtype":"api_retry","attempt":1,"error":"overloaded"}"#,
            vec![ProviderEvent::RateLimited {
                until: None,
                detail: "API error overloaded".into(),
            }],
        ),
        (
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":508,"error_status":500,"error":"server_error"}"#,
            vec![ProviderEvent::Notice {
                text: "API error 500 server_error, retry 1/10 in 0.5 s".into(),
            }],
        ),
    ];
    for (line, expected) in table {
        assert_eq!(parse(&mut ask(), line), expected, "{line}");
    }
}

#[test]
fn rate_limit_rejected_then_cleared() {
    let mut state = ask();
    let rejected = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1700003600,"rateLimitType":"five_hour"},"uuid":"u","session_id":"s"}"#;
    let allowed = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1700003600},"uuid":"u","session_id":"s"}"#;
    let warning = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","rateLimitType":"seven_day","utilization":0.9}}"#;
    assert_eq!(
        parse(&mut state, rejected),
        vec![ProviderEvent::RateLimited {
            until: Some(1_700_003_600_000),
            detail: "rate limit reached (five_hour)".into(),
        }]
    );
    assert_eq!(
        parse(&mut state, allowed),
        vec![ProviderEvent::RateLimitCleared]
    );
    assert_eq!(parse(&mut state, allowed), vec![]);
    assert_eq!(
        notice_text(&parse(&mut state, warning)),
        "nearing the rate limit (seven_day)"
    );
}

#[test]
fn an_answer_after_a_retry_clears_the_rate_limit() {
    let mut state = ask();
    parse(
        &mut state,
        r#"{"type":"system","subtype":"api_retry","retry_delay_ms":100,"error_status":429}"#,
    );
    let events = parse(
        &mut state,
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"back"}]}}"#,
    );
    assert_eq!(
        events,
        vec![
            ProviderEvent::RateLimitCleared,
            ProviderEvent::AssistantText {
                text: "back".into()
            }
        ]
    );
}

#[test]
fn what_cannot_be_understood_is_a_notice() {
    let long = format!("not json {}", "x".repeat(500));
    let table: Vec<(&str, &str)> = vec![
        (
            "hello world",
            "skipped a line that is not JSON: hello world",
        ),
        ("[1,2]", "skipped a JSON line that is not an object: [1,2]"),
        ("42", "skipped a JSON line that is not an object: 42"),
        (r#"{"no":"type"}"#, "skipped a JSON object without a type"),
        (
            r#"{"type":"brand_new"}"#,
            "skipped a line of unknown type brand_new",
        ),
        (
            r#"{"type":"system","subtype":"mystery"}"#,
            "skipped a system message of subtype mystery",
        ),
        (
            r#"{"type":"assistant"}"#,
            "skipped an assistant line without a message",
        ),
        (
            r#"{"type":"control_response","response":{"subtype":"success","request_id":"nobody"}}"#,
            "skipped a control response to an unknown request nobody",
        ),
    ];
    for (line, start) in table {
        let text = notice_text(&parse(&mut ask(), line));
        assert!(text.starts_with(start), "{line}: {text}");
    }
    let text = notice_text(&parse(&mut ask(), &long));
    assert!(text.chars().count() < 200, "clipped: {text}");
    assert!(text.ends_with('…'));
}

#[test]
fn permission_request_is_remembered_and_answered_once() {
    let mut state = ask();
    let events = parse(&mut state, PERMISSION_REQUEST);
    let expected = PermissionRequest {
        request_id: "12a3".into(),
        kind: RequestKind::Permission,
        tool: "Bash".into(),
        ask: Ask::command("ls /tmp", None, Some("list".into())),
        always: Some(AlwaysOption::new(
            "allow the Bash command `ls /tmp` for the rest of this run",
        )),
        tool_use_id: Some("toolu_01".into()),
        blocked_path: Some("/tmp".into()),
    };
    assert_eq!(events, vec![ProviderEvent::PermissionRequested(expected)]);
    assert!(state.take_outgoing().is_empty());
    assert_eq!(state.pending_requests().count(), 1);

    let line = state
        .answer("12a3", &PermissionAnswer::Allow { always: false })
        .expect("pending");
    assert_eq!(
        json_of(&line),
        json!({"type":"control_response","response":{"subtype":"success","request_id":"12a3",
               "response":{"behavior":"allow","updatedInput":{"command":"ls /tmp","description":"list"}}}})
    );
    assert_eq!(state.pending_requests().count(), 0);
    let again = state.answer("12a3", &PermissionAnswer::Allow { always: false });
    assert!(again.expect_err("answered already").contains("not pending"));
}

#[test]
fn answers_and_their_lines() {
    let mut answers = BTreeMap::new();
    answers.insert("Which database?".to_string(), "SQLite".to_string());
    let table: Vec<(&str, PermissionAnswer, Value)> = vec![
        (
            PERMISSION_REQUEST,
            PermissionAnswer::Allow { always: true },
            json!({"type":"control_response","response":{"subtype":"success","request_id":"12a3",
                   "response":{"behavior":"allow",
                     "updatedInput":{"command":"ls /tmp","description":"list"},
                     "updatedPermissions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls /tmp"}],
                       "behavior":"allow","destination":"session"}]}}}),
        ),
        (
            PERMISSION_REQUEST,
            PermissionAnswer::Deny {
                message: Some("not in /tmp".into()),
            },
            json!({"type":"control_response","response":{"subtype":"success","request_id":"12a3",
                   "response":{"behavior":"deny","message":"not in /tmp","interrupt":false}}}),
        ),
        (
            PERMISSION_REQUEST,
            PermissionAnswer::Deny { message: None },
            json!({"type":"control_response","response":{"subtype":"success","request_id":"12a3",
                   "response":{"behavior":"deny","message":"The user denied this.","interrupt":false}}}),
        ),
        (
            QUESTION_REQUEST,
            PermissionAnswer::Answer { answers },
            json!({"type":"control_response","response":{"subtype":"success","request_id":"q1",
                   "response":{"behavior":"allow","updatedInput":{
                     "questions":[{"question":"Which database?","header":"DB","options":[
                        {"label":"Postgres","description":"relational"},
                        {"label":"SQLite","description":"embedded"}],"multiSelect":false}],
                     "answers":{"Which database?":"SQLite"}}}}}),
        ),
    ];
    for (request, answer, expected) in table {
        let mut state = ask();
        let events = parse(&mut state, request);
        let [ProviderEvent::PermissionRequested(req)] = events.as_slice() else {
            panic!("{events:?}");
        };
        let line = state.answer(&req.request_id, &answer).expect("pending");
        assert_eq!(json_of(&line), expected, "{answer:?}");
    }
}

#[test]
fn a_question_is_a_question_and_a_permission_takes_no_answers() {
    let mut state = ask();
    let events = parse(&mut state, QUESTION_REQUEST);
    let [ProviderEvent::PermissionRequested(req)] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert_eq!(req.kind, RequestKind::Question);
    assert_eq!(req.tool, "AskUserQuestion");

    parse(&mut state, PERMISSION_REQUEST);
    let answers = PermissionAnswer::Answer {
        answers: BTreeMap::new(),
    };
    let refused = state.answer("12a3", &answers).expect_err("wrong kind");
    assert!(refused.contains("allow or deny"), "{refused}");
    // Still pending: a proper answer goes through.
    assert!(
        state
            .answer("12a3", &PermissionAnswer::Deny { message: None })
            .is_ok()
    );
}

#[test]
fn withdrawn_request_is_forgotten() {
    let mut state = ask();
    parse(&mut state, PERMISSION_REQUEST);
    assert_eq!(
        parse(
            &mut state,
            r#"{"type":"control_cancel_request","request_id":"12a3"}"#
        ),
        vec![ProviderEvent::PermissionWithdrawn {
            request_id: "12a3".into()
        }]
    );
    assert!(
        state
            .answer("12a3", &PermissionAnswer::Allow { always: false })
            .is_err()
    );
}

#[test]
fn policies_without_prompts_answer_at_once() {
    let table: Vec<(PermissionPolicy, &str, Value, &str)> = vec![
        (
            PermissionPolicy::Auto,
            PERMISSION_REQUEST,
            json!({"type":"control_response","response":{"subtype":"success","request_id":"12a3",
                   "response":{"behavior":"allow","updatedInput":{"command":"ls /tmp","description":"list"}}}}),
            "allowed Bash without asking (policy auto)",
        ),
        (
            PermissionPolicy::Auto,
            QUESTION_REQUEST,
            json!({"type":"control_response","response":{"subtype":"success","request_id":"q1",
                   "response":{"behavior":"deny","message":policy::NO_ONE_TO_ASK,"interrupt":false}}}),
            "denied a question without asking (policy auto)",
        ),
        (
            PermissionPolicy::Restricted,
            PERMISSION_REQUEST,
            json!({"type":"control_response","response":{"subtype":"success","request_id":"12a3",
                   "response":{"behavior":"deny","message":policy::RESTRICTED_DENIAL,"interrupt":false}}}),
            "denied Bash without asking (policy restricted)",
        ),
    ];
    for (policy, request, reply, note) in table {
        let mut state = ParseState::new(policy);
        let events = parse(&mut state, request);
        assert_eq!(notice_text(&events), note);
        let outgoing = state.take_outgoing();
        assert_eq!(outgoing.len(), 1, "{policy:?}");
        assert_eq!(json_of(&outgoing[0]), reply, "{policy:?}");
        assert_eq!(state.pending_requests().count(), 0);
        // A withdrawal of an answered request says nothing.
        let cancel = r#"{"type":"control_cancel_request","request_id":"12a3"}"#;
        assert_eq!(parse(&mut state, cancel), vec![]);
    }
}

#[test]
fn control_requests_drover_does_not_handle_are_refused() {
    let mut state = ask();
    let events = parse(
        &mut state,
        r#"{"type":"control_request","request_id":"h7","request":{"subtype":"hook_callback","callback_id":"hook_0","input":{}}}"#,
    );
    assert_eq!(
        notice_text(&events),
        "refused a control request of subtype hook_callback"
    );
    assert_eq!(
        state
            .take_outgoing()
            .iter()
            .map(|l| json_of(l))
            .collect::<Vec<_>>(),
        vec![
            json!({"type":"control_response","response":{"subtype":"error","request_id":"h7",
                     "error":"drover does not handle control requests of subtype hook_callback"}})
        ]
    );
    let events = parse(
        &mut state,
        r#"{"type":"control_request","request_id":"h8","request":{"subtype":"can_use_tool","input":{}}}"#,
    );
    assert_eq!(
        notice_text(&events),
        "refused a permission request without a tool name"
    );
    assert_eq!(state.take_outgoing().len(), 1);
    assert_eq!(state.pending_requests().count(), 0);
}

#[test]
fn handshake_and_interrupt_responses_are_handled_here() {
    let mut state = ask();
    let init = json_of(&state.initialize_request());
    assert_eq!(init["request"]["subtype"], "initialize");
    let id = init["request_id"].as_str().expect("id").to_string();
    assert_eq!(state.handshake(), Handshake::Waiting);
    let response = json!({"type":"control_response","response":{"subtype":"success","request_id":id,
        "response":{"commands":[],"models":[],"account":{},"pid":42}}});
    assert_eq!(parse(&mut state, &response.to_string()), vec![]);
    assert_eq!(state.handshake(), Handshake::Done);
    // The same response again is unknown now.
    assert!(!parse(&mut state, &response.to_string()).is_empty());

    let interrupt = json_of(&state.interrupt_request());
    assert_eq!(interrupt["request"], json!({"subtype":"interrupt"}));
    let iid = interrupt["request_id"].as_str().expect("id").to_string();
    assert_ne!(iid, id);
    let refused = json!({"type":"control_response","response":{"subtype":"error","request_id":iid,
        "error":"no turn in flight"}});
    assert_eq!(
        notice_text(&parse(&mut state, &refused.to_string())),
        "the CLI refused the interrupt: no turn in flight"
    );

    let mut failing = ask();
    let id = json_of(&failing.initialize_request())["request_id"].clone();
    let refused = json!({"type":"control_response","response":{"subtype":"error","request_id":id,
        "error":"bad hooks"}});
    assert_eq!(
        notice_text(&parse(&mut failing, &refused.to_string())),
        "the CLI refused the handshake: bad hooks"
    );
    assert_eq!(failing.handshake(), Handshake::Failed);
}

#[test]
fn init_records_the_version_and_flags_an_unexpected_mode() {
    let mut state = ParseState::new(PermissionPolicy::Restricted);
    let events = parse(
        &mut state,
        r#"{"type":"system","subtype":"init","session_id":"s","model":"m","permissionMode":"default","claude_code_version":"2.1.197"}"#,
    );
    assert_eq!(state.version(), Some("2.1.197"));
    assert_eq!(events.len(), 2);
    assert_eq!(
        notice_text(&events[1..]),
        "the CLI runs in permission mode default, not dontAsk"
    );
}

#[test]
fn tool_result_summaries() {
    let table: Vec<(Option<Value>, &str)> = vec![
        (None, "(no output)"),
        (Some(json!("")), "(no output)"),
        (Some(json!("one")), "one"),
        (Some(json!("\n\none\ntwo")), "one (+1 line)"),
        (
            Some(json!([{"type":"text","text":"a"},{"type":"text","text":"b\nc"}])),
            "a (+2 lines)",
        ),
        (Some(json!("x".repeat(300))), ""),
        (Some(json!({"odd":true})), "{\"odd\":true}"),
    ];
    for (content, expected) in table {
        let summary = tool_result_summary(content.as_ref());
        if expected.is_empty() {
            assert_eq!(summary.chars().count(), SUMMARY_CHARS, "{summary}");
            assert!(summary.ends_with('…'), "{summary}");
        } else {
            assert_eq!(summary, expected);
        }
    }
}

/// Lines captured from CLI 2.1.197 (policy restricted, mode dontAsk) against a loopback
/// mock model API; long fields trimmed.
const REAL_INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/tmp/cpwork","session_id":"f0a91d67-1fa3-4170-8642-5cf6e2d82007","model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","product_feedback_disabled":true,"uuid":"0dd428b1-646c-417f-adf2-89eeb8950332"}"#;
const REAL_DENIED: &str = r#"{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"toolu_mock1","decision_reason_type":"mode","message":"Permission to use Bash has been denied because Claude Code i","uuid":"c144693e-b048-411c-8c15-d432509e95db","session_id":"f0a91d67-1fa3-4170-8642-5cf6e2d82007"}"#;
const REAL_RESULT: &str = r#"{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":117,"duration_api_ms":59,"ttft_ms":75,"ttft_stream_ms":74,"time_to_request_ms":56,"num_turns":2,"result":"Listed /tmp.","stop_reason":"end_turn","session_id":"f0a91d67-1fa3-4170-8642-5cf6e2d82007","total_cost_usd":0.0011,"usage":{"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40,"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard","cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":0},"inference_geo":"","iterations":[],"speed":"standard"},"modelUsage":{"claude-opus-4-8[1m]":{"inputTokens":20,"outputTokens":40,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"webSearchRequests":0,"costUSD":0.0011,"contextWindow":1000000,"maxOutputTokens":64000}},"permission_denials":[{"tool_name":"Bash","tool_use_id":"toolu_mock1","tool_input":{"command":"ls /tmp","description":"list tmp"}}],"terminal_reason":"completed","fast_mode_state":"off","uuid":"f8c5210c-9a4a-4c23-97e6-ff094b801b51"}"#;

#[test]
fn lines_of_the_real_cli() {
    let mut state = ParseState::new(PermissionPolicy::Restricted);
    assert_eq!(
        parse(&mut state, REAL_INIT),
        vec![ProviderEvent::Session {
            session_id: "f0a91d67-1fa3-4170-8642-5cf6e2d82007".into(),
            model: Some("claude-opus-4-8[1m]".into()),
        }]
    );
    assert_eq!(state.version(), Some("2.1.197"));
    assert_eq!(
        notice_text(&parse(&mut state, REAL_DENIED)),
        "the CLI denied Bash (by mode)"
    );
    let events = parse(&mut state, REAL_RESULT);
    let [ProviderEvent::TurnCompleted(end)] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert_eq!(end.subtype, "success");
    assert_eq!(end.num_turns, Some(2));
    assert_eq!(end.api_error_status, None);
    assert_eq!(end.permission_denials, 1);
    assert_eq!(end.total_cost_usd, Some(0.0011));
    assert_eq!(
        end.tokens,
        Tokens {
            input: 20,
            output: 40,
            ..Tokens::default()
        }
    );
    assert_eq!(end.model_usage.len(), 1);
    assert_eq!(end.model_usage[0].model, "claude-opus-4-8[1m]");
}

#[test]
fn the_init_of_every_turn_reports_the_session_once() {
    let mut state = ask();
    let init = |model: &str| {
        format!(
            r#"{{"type":"system","subtype":"init","session_id":"s1","model":"{model}","permissionMode":"default"}}"#
        )
    };
    assert_eq!(parse(&mut state, &init("a")).len(), 1);
    assert_eq!(parse(&mut state, &init("a")), vec![]);
    assert_eq!(
        parse(&mut state, &init("b")),
        vec![ProviderEvent::Session {
            session_id: "s1".into(),
            model: Some("b".into())
        }]
    );
}

#[test]
fn model_usage_is_per_turn_though_the_cli_sends_running_totals() {
    // As CLI 2.1.197 reports two turns of one process: the second result's modelUsage
    // holds both turns.
    let result = |input: u64, output: u64, cost: f64, haiku: &str| {
        format!(
            r#"{{"type":"result","subtype":"success","is_error":false,"usage":{{"input_tokens":10,"output_tokens":20}},"modelUsage":{{"claude-sonnet-4-5":{{"inputTokens":{input},"outputTokens":{output},"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":{cost}}}{haiku}}}}}"#
        )
    };
    let usage_of = |events: Vec<ProviderEvent>| match events.as_slice() {
        [ProviderEvent::TurnCompleted(end)] => end.model_usage.clone(),
        other => panic!("{other:?}"),
    };
    let mut state = ask();
    let haiku = r#","claude-haiku-4-5":{"inputTokens":5,"outputTokens":1,"costUSD":0.0001}"#;
    let first = usage_of(parse(&mut state, &result(20, 40, 0.00066, haiku)));
    assert_eq!(first.len(), 2);
    let second = usage_of(parse(&mut state, &result(30, 60, 0.00099, haiku)));
    // Haiku did nothing in the second turn: left out.
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0].model, "claude-sonnet-4-5");
    assert_eq!(
        second[0].tokens,
        Tokens {
            input: 10,
            output: 20,
            ..Tokens::default()
        }
    );
    let cost = second[0].cost_usd.expect("a cost");
    assert!((cost - 0.00033).abs() < 1e-12, "{cost}");
}

#[test]
fn a_failed_turn_withdraws_what_is_pending() {
    let mut state = ask();
    parse(&mut state, PERMISSION_REQUEST);
    parse(&mut state, QUESTION_REQUEST);
    let ok = r#"{"type":"result","subtype":"success","is_error":false}"#;
    let events = parse(&mut state, ok);
    assert!(matches!(
        events.as_slice(),
        [ProviderEvent::TurnCompleted(_)]
    ));
    assert_eq!(state.pending_requests().count(), 2);
    let interrupted = r#"{"type":"result","subtype":"error_during_execution","is_error":true}"#;
    let events = parse(&mut state, interrupted);
    assert_eq!(
        events[..2],
        [
            ProviderEvent::PermissionWithdrawn {
                request_id: "12a3".into()
            },
            ProviderEvent::PermissionWithdrawn {
                request_id: "q1".into()
            },
        ]
    );
    assert!(matches!(events[2], ProviderEvent::TurnCompleted(_)));
    assert_eq!(state.pending_requests().count(), 0);
}

/// A `can_use_tool` request for `tool` with `input` and `suggestions`.
fn can_use_tool(tool: &str, input: Value, suggestions: Value) -> String {
    json!({"type": "control_request", "request_id": "r1", "request": {
        "subtype": "can_use_tool", "tool_name": tool, "input": input,
        "permission_suggestions": suggestions, "tool_use_id": "toolu_9"}})
    .to_string()
}

#[test]
fn every_request_shape_becomes_its_typed_ask_and_always_sentence() {
    let bash_rule = |content: &str| {
        json!([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": content}],
                "behavior": "allow", "destination": "localSettings"}])
    };
    let edit_rule = json!([{"type": "addRules", "rules": [{"toolName": "Edit"}],
                            "behavior": "allow", "destination": "localSettings"},
                           {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]);
    let table: Vec<(&str, Value, Value, Ask, Option<&str>)> = vec![
        (
            "Bash",
            json!({"command": "cargo test --all", "description": "Run the tests"}),
            bash_rule("cargo test:*"),
            Ask::command("cargo test --all", None, Some("Run the tests".into())),
            Some("allow Bash commands starting with `cargo test` for the rest of this run"),
        ),
        (
            "Edit",
            json!({"file_path": "src/main.rs", "old_string": "a\n", "new_string": "b\n"}),
            edit_rule,
            Ask::FileEdit {
                file_path: "src/main.rs".into(),
                change: FileChange::Diff {
                    diff: "--- src/main.rs\n+++ src/main.rs\n@@ -1 +1 @@\n-a\n+b\n".into(),
                },
                other_files: vec![],
            },
            Some("allow every Edit use and every file edit for the rest of this run"),
        ),
        (
            "Write",
            json!({"file_path": "src/cache.rs", "content": "// cache\n"}),
            json!([]),
            Ask::FileEdit {
                file_path: "src/cache.rs".into(),
                change: FileChange::Content {
                    content: "// cache\n".into(),
                },
                other_files: vec![],
            },
            None,
        ),
        (
            "WebFetch",
            json!({"url": "https://docs.rs", "prompt": "read it"}),
            json!([{"type": "addRules", "rules": [{"toolName": "WebFetch", "ruleContent": "domain:docs.rs"}],
                    "behavior": "allow", "destination": "localSettings"}]),
            Ask::Fetch {
                url: "https://docs.rs".into(),
            },
            Some("allow WebFetch on `domain:docs.rs` for the rest of this run"),
        ),
        (
            "mcp__github__create_issue",
            json!({"title": "Bug", "body": "it broke"}),
            Value::Null,
            Ask::McpTool {
                server: "github".into(),
                tool: "create_issue".into(),
                arguments: r#"{"title":"Bug","body":"it broke"}"#.into(),
            },
            None,
        ),
        (
            "AskUserQuestion",
            json!({"questions": [{"question": "Which parts?", "header": "Parts", "multiSelect": true,
                                  "options": [{"label": "api", "description": "the HTTP API"},
                                              {"label": "cli"}]}]}),
            json!([]),
            Ask::Question {
                questions: vec![Question {
                    question: "Which parts?".into(),
                    header: Some("Parts".into()),
                    options: vec![
                        QuestionOption {
                            label: "api".into(),
                            description: Some("the HTTP API".into()),
                        },
                        QuestionOption {
                            label: "cli".into(),
                            description: None,
                        },
                    ],
                    multi_select: true,
                }],
            },
            None,
        ),
        (
            "Glob",
            json!({"pattern": "**/*.rs"}),
            json!([{"type": "addDirectories", "directories": ["/elsewhere"], "destination": "session"}]),
            Ask::Other {
                tool: "Glob".into(),
                subject: Some("**/*.rs".into()),
                input: r#"{"pattern":"**/*.rs"}"#.into(),
            },
            Some("allow work in `/elsewhere` for the rest of this run"),
        ),
    ];
    for (tool, input, suggestions, expected, always) in table {
        let mut state = ask();
        let events = parse(&mut state, &can_use_tool(tool, input.clone(), suggestions));
        let [ProviderEvent::PermissionRequested(request)] = events.as_slice() else {
            panic!("{tool}: {events:?}");
        };
        assert_eq!(request.ask, expected, "{tool}");
        assert_eq!(request.kind, expected.kind(), "{tool}");
        assert_eq!(
            request.always.as_ref().map(|a| a.sentence.as_str()),
            always,
            "{tool}"
        );
        let shown = serde_json::to_string(request).expect("serializes");
        assert!(!shown.contains("localSettings"), "{shown}");
        // The CLI gets its own input back, whatever drover showed.
        let line = state
            .answer("r1", &PermissionAnswer::Allow { always: false })
            .expect("pending");
        assert_eq!(
            json_of(&line)["response"]["response"]["updatedInput"],
            input,
            "{tool}"
        );
    }
}

/// Assistant lines the typed reading takes, and lines it must leave to the general way
/// (where a typed read would differ): each gives the same events and leaves the same
/// state both ways, and the typed way is taken exactly where it can be.
#[test]
fn an_assistant_line_reads_the_same_typed_as_through_a_value() {
    // (line, read the typed way)
    let lines: Vec<(&str, bool)> = vec![
        (
            r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Planning next steps."}],"stop_reason":null,"usage":{"input_tokens":120,"output_tokens":45,"cache_creation_input_tokens":7924,"cache_read_input_tokens":13368,"service_tier":"standard","server_tool_use":{"web_search_requests":0}}},"parent_tool_use_id":null,"session_id":"5f1e-aa"}"#,
            true,
        ),
        // The same message again, grown: only the growth is reported.
        (
            r#"{"type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"line one\nline \"two\" \u00e9 \ud83d\ude00"}],"usage":{"input_tokens":120,"output_tokens":60}}}"#,
            true,
        ),
        (
            r#"{"message":{"content":[{"type":"thinking","thinking":"héllo","signature":"sig"},{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"ls -la","description":"list"}},{"type":"redacted_thinking"},{"type":"server_tool_use","id":"s","name":"web_search","input":{}}],"model":"m","id":"msg_2"},"type":"assistant"}"#,
            true,
        ),
        (
            r#"{"type":"assistant","error":"rate_limit","message":{"id":"msg_3","content":[{"type":"tool_use","name":"Bash","input":null},{"text":"no type"},{"type":"text","text":""}],"usage":null}}"#,
            true,
        ),
        (r#"{"type":"assistant"}"#, true),
        (r#"{"type":"assistant","message":null}"#, true),
        (
            r#"{"type":"assistant","message":{"id":null,"content":null,"usage":{"input_tokens":null,"output_tokens":2}}}"#,
            true,
        ),
        // Left to the general way: a float count, a block or message that is no object
        // (an array a derived struct would read field by field), a non-string field,
        // a key given twice, a line that is no object, not JSON, or of another type.
        (
            r#"{"type":"assistant","message":{"id":"msg_4","content":[],"usage":{"input_tokens":3.0,"output_tokens":1}}}"#,
            false,
        ),
        (
            r#"{"type":"assistant","message":{"id":"msg_5","content":[["text","smuggled"],{"type":"text","text":"kept"}]}}"#,
            false,
        ),
        (r#"{"type":"assistant","message":["msg_6","m",[]]}"#, false),
        (
            r#"{"type":"assistant","message":{"id":"msg_7","content":[],"usage":[1,2,3,4]}}"#,
            false,
        ),
        (
            r#"{"type":"assistant","message":{"id":7,"content":[{"type":"text","text":"id is a number"}]}}"#,
            false,
        ),
        (
            r#"{"type":"assistant","error":{"code":1},"message":{"content":[{"type":5,"text":"x"}]}}"#,
            false,
        ),
        (
            r#"{"type":"assistant","message":{"id":"msg_8","content":{"type":"text","text":"not an array"}}}"#,
            false,
        ),
        (
            r#"{"type":"assistant","message":{"id":"a","id":"b","content":[{"type":"text","text":"twice"}],"usage":{"output_tokens":1}}}"#,
            false,
        ),
        (r#"["assistant",{"content":[]}]"#, false),
        (
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"cut"#,
            false,
        ),
        (
            r#"{"type":"user","message":{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#,
            false,
        ),
        (
            r#"{"type":"assistant","message":{"id":"msg_9","content":[{"type":"text","text":"bad \ud800 surrogate"}]}}"#,
            false,
        ),
    ];
    let mut typed_state = ask();
    let mut value_state = ask();
    for (i, (line, typed)) in lines.iter().enumerate() {
        // A rate limit before every other line: both ways clear it the same.
        typed_state.rate_limited = i % 2 == 0;
        value_state.rate_limited = i % 2 == 0;
        let mut probe = typed_state.clone();
        assert_eq!(
            typed_assistant(line, &mut probe).is_some(),
            *typed,
            "line {i} read the typed way: {line}"
        );
        let by_type = parse(&mut typed_state, line);
        let by_value = parse_value_line(line, &mut value_state, NOW);
        assert_eq!(by_type, by_value, "line {i}: {line}");
        assert_eq!(
            typed_state.streamed_usage, value_state.streamed_usage,
            "line {i}"
        );
        assert_eq!(
            typed_state.rate_limited, value_state.rate_limited,
            "line {i}"
        );
    }
}
