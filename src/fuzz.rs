//! Fuzz targets: one function per parser of outside input, each taking raw bytes.
//!
//! The same functions are driven three ways: `tests/fuzz.rs` replays the kept corpus
//! (`fuzz/corpus/<target>/`) and a bounded number of mutated inputs on the stable
//! toolchain (CI); `fuzz/` holds cargo-fuzz (libFuzzer) targets calling them on a nightly
//! toolchain; `scripts/fuzz.sh` runs long campaigns of either.
//!
//! What must stay true: a target never panics on any input, and it checks what its
//! parser promises (bounded output, answers that stay JSON); a new parser of outside
//! input gets a target here and a corpus directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_core::config::Config;
use drover_core::control::wire;
use drover_core::providers::claude::protocol as claude;
use drover_core::providers::codex::{app_protocol, exec_protocol};
use drover_core::providers::opencode::protocol as opencode;
use drover_core::providers::session::Protocol;
use drover_core::providers::{LaunchSpec, PermissionAnswer, ProviderEvent};
use drover_core::spec::{Capability, PermissionPolicy};

/// A fuzz target: it takes any bytes and must not panic.
pub type Target = fn(&[u8]);

/// Every target, by the name its corpus directory and cargo-fuzz binary carry.
pub const TARGETS: &[(&str, Target)] = &[
    ("claude_stream_json", claude_stream_json),
    ("codex_exec_jsonl", codex_exec_jsonl),
    ("codex_app_server", codex_app_server),
    ("opencode_events", opencode_events),
    ("acp_messages", acp_messages),
    ("result_block", result_block),
    ("socket_request", socket_request),
    ("config", config),
    ("redact", redact),
];

/// The target named `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The first byte picks a policy; the rest is the input.
fn policy_of(data: &[u8]) -> (PermissionPolicy, &[u8]) {
    match data.split_first() {
        Some((b, rest)) => (
            match b % 3 {
                0 => PermissionPolicy::Ask,
                1 => PermissionPolicy::Restricted,
                _ => PermissionPolicy::Auto,
            },
            rest,
        ),
        None => (PermissionPolicy::Ask, data),
    }
}

fn lines(data: &[u8]) -> impl Iterator<Item = String> + '_ {
    data.split(|b| *b == b'\n')
        .map(|l| String::from_utf8_lossy(l).into_owned())
}

/// What every adapter promises of the events it makes from its lines: bounded text.
/// `longest` is the longest line read so far: an event may carry what an earlier line
/// said (a turn's end carries the text of the message before it).
fn check_events(events: &[ProviderEvent], longest: usize) {
    for event in events {
        let size = serde_json::to_string(event).map_or(0, |s| s.len());
        // An event is built from the lines (plus fixed wording): never bigger than a
        // multiple of the longest.
        assert!(
            size <= 4 * longest + 16 * 1024,
            "an event of {size} bytes from lines of at most {longest}"
        );
    }
}

fn answers() -> [PermissionAnswer; 3] {
    [
        PermissionAnswer::Allow { always: true },
        PermissionAnswer::Deny {
            message: Some("no".into()),
        },
        PermissionAnswer::Answer {
            answers: BTreeMap::from([("q".to_string(), "a".to_string())]),
        },
    ]
}

/// Claude Code's stream-json stdout, line by line, then an answer to each request left.
pub fn claude_stream_json(data: &[u8]) {
    let (policy, data) = policy_of(data);
    let mut state = claude::ParseState::new(policy);
    let _ = state.initialize_request();
    let mut longest = 0;
    for (i, line) in lines(data).enumerate() {
        let events = claude::parse_line(&line, &mut state, (i as i64).saturating_mul(1000));
        longest = longest.max(line.len());
        check_events(&events, longest);
        for out in state.take_outgoing() {
            assert!(
                serde_json::from_str::<serde_json::Value>(&out).is_ok(),
                "{out}"
            );
        }
    }
    let pending: Vec<String> = state
        .pending_requests()
        .map(|r| r.request_id.clone())
        .collect();
    for (id, answer) in pending.iter().zip(answers().iter().cycle()) {
        if let Ok(line) = state.answer(id, answer) {
            assert!(
                serde_json::from_str::<serde_json::Value>(&line).is_ok(),
                "{line}"
            );
        }
    }
}

/// `codex exec --json` stdout (and the thread's rollout file), line by line, then the
/// child's exit.
pub fn codex_exec_jsonl(data: &[u8]) {
    let mut state = exec_protocol::ExecState::new(Some("gpt-5.5".into()), None, None);
    state.begin_turn();
    let mut longest = 0;
    for line in lines(data) {
        let events = state.parse_line(&line);
        longest = longest.max(line.len());
        check_events(&events, longest);
        // The same line as one of the thread's rollout file, which the exec task reads
        // for each model request's usage.
        let events = state.rollout_line(&line);
        check_events(&events, longest);
    }
    let _ = state.child_gone(Some(1), None, "stderr tail");
}

fn codex_spec(policy: PermissionPolicy) -> LaunchSpec {
    LaunchSpec {
        run_id: "r1".into(),
        provider: "codex".into(),
        command: PathBuf::from("codex"),
        args: vec![],
        env: BTreeMap::new(),
        cwd: PathBuf::from("/w"),
        model: Some("gpt-5.5".into()),
        effort: None,
        mode: None,
        policy,
        capability: Capability::Workspace,
        resume_session: None,
        resume_tokens: None,
        scenario: None,
        journal: None,
        transport: None,
        sandbox: None,
        mcp: None,
    }
}

/// `codex app-server` JSON-RPC lines, after the handshake and a turn were asked for.
pub fn codex_app_server(data: &[u8]) {
    let (policy, data) = policy_of(data);
    let mut state =
        app_protocol::AppState::new(&codex_spec(policy), app_protocol::Bounds::default());
    state.start(0);
    let _ = state.start_turn("go".into(), 0);
    let mut now = 0;
    let mut longest = 0;
    for line in lines(data) {
        now += 1000;
        let events = state.parse_line(&line, now);
        longest = longest.max(line.len());
        check_events(&events, longest);
        for out in state.take_outgoing() {
            assert!(
                serde_json::from_str::<serde_json::Value>(&out).is_ok(),
                "{out}"
            );
        }
    }
    for (i, answer) in answers().iter().enumerate() {
        let _ = state.answer(&i.to_string(), answer);
    }
    let _ = state.interrupt(now);
    let _ = state.expire(i64::MAX);
}

/// OpenCode's event stream (`data:` payloads) and its JSON answers.
pub fn opencode_events(data: &[u8]) {
    let mut state = opencode::ParseState::new("ses_1", Some("mock/mock-model"));
    state.begin_turn(0);
    let mut longest = 0;
    for (i, line) in lines(data).enumerate() {
        let payload = line.strip_prefix("data:").unwrap_or(&line);
        let events = opencode::parse_event(payload, &mut state, i as i64);
        longest = longest.max(line.len());
        check_events(&events, longest);
    }
    for (i, answer) in answers().iter().enumerate() {
        let _ = state.answer(&format!("per_{i}"), answer);
    }
    let _ = state.drain_pending();
    // An HTTP answer's body, read as the adapter reads it.
    let body: serde_json::Value = serde_json::from_slice(data).unwrap_or_default();
    let _ = body.get("id").and_then(serde_json::Value::as_str);
}

/// An ACP agent's lines as the ACP adapter reads them: the gate each line passes, then,
/// for a JSON-RPC message of a method it reads (`session/update`,
/// `session/request_permission`, a `session/prompt` answer), the SDK's typed message and
/// drover's mapping of it: events, the typed ask, the option each answer picks.
pub fn acp_messages(data: &[u8]) {
    use agent_client_protocol::v1::schema::{
        PromptResponse, RequestPermissionRequest, SessionNotification, ToolKind,
    };
    use drover_core::providers::acp::map::{self, Gate, Updates};
    let mut updates = Updates::default();
    let mut longest = 0;
    for line in lines(data) {
        longest = longest.max(line.len());
        match map::gate(&line) {
            Gate::Skip(why) | Gate::PassWithNotice(why) => {
                assert!(why.chars().count() < 300, "{why}")
            }
            Gate::Pass | Gate::Ignore => {}
        }
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let params = message.get("params").cloned().unwrap_or_default();
        match message.get("method").and_then(serde_json::Value::as_str) {
            Some("session/update") => {
                if let Ok(n) = serde_json::from_value::<SessionNotification>(params) {
                    check_events(&updates.read(n.update), longest);
                }
            }
            Some("session/request_permission") => {
                if let Ok(r) = serde_json::from_value::<RequestPermissionRequest>(params) {
                    let f = &r.tool_call.fields;
                    let ask = map::ask_of(
                        f.kind.unwrap_or(ToolKind::Other),
                        f.title.as_deref().unwrap_or("tool"),
                        f.raw_input.as_ref(),
                        f.locations.as_deref().unwrap_or_default(),
                        f.content.as_deref().unwrap_or_default(),
                    );
                    let _ = ask.summary();
                    let _ = map::always_option(&r.options);
                    for answer in answers() {
                        let _ = map::option_for(&r.options, &answer);
                    }
                }
            }
            _ => {
                if let Some(result) = message.get("result")
                    && let Ok(response) = serde_json::from_value::<PromptResponse>(result.clone())
                {
                    check_events(&updates.turn_end(&response, Some("m"), "s", 1), longest);
                }
            }
        }
    }
    check_events(&updates.turn_failed("end", None, 1), longest);
}

/// The `## Result` block (markdown) and a JSON result.
pub fn result_block(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let block = drover_core::result_contract::parse_result(&text);
    use drover_core::result_contract::{ITEM_MAX_CHARS, LIST_MAX_ITEMS, TEXT_MAX_CHARS};
    for text in [&block.summary, &block.question].into_iter().flatten() {
        assert!(
            text.chars().count() <= TEXT_MAX_CHARS && !text.contains('\n'),
            "{text:?}"
        );
    }
    for list in [&block.changes, &block.files, &block.follow_ups] {
        assert!(list.len() <= LIST_MAX_ITEMS);
        assert!(list.iter().all(|i| i.chars().count() <= ITEM_MAX_CHARS));
    }
    let _ = drover_core::result_contract::parse_json_result(&text);
}

/// One control-socket request line, then the bounds the server holds it to.
pub fn socket_request(data: &[u8]) {
    // As the server reads a line: parsed, then bounded; a refusal is answered.
    let refusal = match wire::parse_request_line(data) {
        Ok((id, request)) => match drover_core::control::bounds::check(&request) {
            Ok(request) => {
                let _ = serde_json::to_string(&request);
                return;
            }
            Err(error) => (Some(id), error),
        },
        Err(refusal) => refusal,
    };
    check_refusal(refusal);
}

/// The answer the server sends for a refused line is one well-formed JSON line:
/// `{"id": N or null, "error": {"code": INVALID_REQUEST or REQUEST_TOO_LARGE, "message":
/// one sentence}}`, bounded.
fn check_refusal((id, error): wire::Refusal) {
    let written = wire::ServerLine::Error { id, error }.to_line();
    let line = written
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("an answer ends its line: {written:?}"));
    assert!(!line.contains('\n'), "an answer is one line: {written:?}");
    assert!(line.len() <= 64 * 1024, "an answer of {} bytes", line.len());
    let answer: serde_json::Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("the answer is not JSON ({e}): {line}"));
    let mut keys: Vec<&String> = answer
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    keys.sort();
    assert_eq!(keys, ["error", "id"], "{line}");
    assert_eq!(
        answer["id"].as_u64(),
        id,
        "the answer carries the line's id: {line}"
    );
    let code = answer["error"]["code"].as_str().unwrap_or_default();
    assert!(
        code == "INVALID_REQUEST" || code == "REQUEST_TOO_LARGE",
        "a refused line is INVALID_REQUEST or REQUEST_TOO_LARGE: {line}"
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.trim().is_empty(), "a refusal says why: {line}");
}

/// The user's config file.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = Config::parse(&text, Path::new("/fuzz/config.toml")) {
        assert!(
            !e.message.contains('\n'),
            "a refusal is one line: {}",
            e.message
        );
    }
}

/// The redactor: a secret planted anywhere in the input (a configured value and one a
/// rule finds) is gone from its output, which never grows without bound, and a second
/// pass changes nothing.
pub fn redact(data: &[u8]) {
    const VALUE: &str = "fuzz-secret-value-1234";
    // A GitHub token, which a rule of the set (not a configured value) finds.
    const TOKEN: &str = "ghp_R4nd0mT0k3nF0rT3st1ngDr0v3rXyZ123456";
    let input = String::from_utf8_lossy(data);
    // Both secrets planted, each on a line of its own, where the first byte says.
    let mut at = data
        .first()
        .map_or(0, |b| usize::from(*b) * input.len() / 255);
    while !input.is_char_boundary(at) {
        at -= 1;
    }
    let text = format!("{}\n{VALUE}\n{TOKEN}\n{}", &input[..at], &input[at..]);
    let redactor = drover_core::redact::Redactor::with_values([VALUE.to_string()]);
    let once = redactor.redact(&text);
    assert!(
        !once.contains(VALUE) && !once.contains(TOKEN),
        "a planted secret is still there: {once:?}"
    );
    assert!(once.len() <= text.len() + 16 * (text.len() / 8 + 1));
    let twice = redactor.redact(&once);
    assert_eq!(once, twice, "redacting twice changed {once:?}");
}
