//! What both Codex modes share when reading Codex's output: thread items as drover
//! events and typed asks, OpenAI token counts in drover's classes, and how a Codex error
//! is classified (a retry in progress, a transient failure, or a plain one).
//!
//! Pure: no I/O, no clock. What must stay true: nothing here panics on any JSON value
//! (every field is optional to the reader); a tool item becomes `ToolStarted` /
//! `ToolFinished` with the item's id, its typed ask the one an approval of the same item
//! shows; an HTTP status is only reported when Codex named it (or named the error class
//! it maps one status to: `internalServerError` is HTTP 500, whose message is "We're
//! currently experiencing high demand…"); OpenAI's overlapping token counts become
//! drover's disjoint classes without underflow.

use serde_json::{Value, json};

use crate::providers::ask::json_text;
use crate::providers::{
    Ask, EditedFile, FileChange, ModelUsage, ProviderEvent, Tokens, is_transient_status,
};

/// The one-line summaries and tool inputs are clipped to this many characters.
const SUMMARY_CHARS: usize = 200;

/// Codex's message for HTTP 500 (`CodexErr::InternalServerError`).
pub const HIGH_DEMAND: &str = "experiencing high demand";

/// A string field, or "".
pub fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A count field (a negative or non-number is 0).
fn count(value: &Value, keys: &[&str]) -> u64 {
    keys.iter()
        .find_map(|k| value.get(*k).and_then(Value::as_u64))
        .unwrap_or(0)
}

/// OpenAI's counts in drover's disjoint classes (docs/ARCHITECTURE.md §"Money"): OpenAI's
/// `input_tokens` include the cached ones and `output_tokens` include the reasoning ones.
/// OpenAI does not report cache writes.
pub fn openai_tokens(input: u64, cached_input: u64, output: u64, reasoning: u64) -> Tokens {
    let cache_read = cached_input.min(input);
    let reasoning = reasoning.min(output);
    Tokens {
        input: input - cache_read,
        output: output - reasoning,
        reasoning,
        cache_read,
        cache_write: 0,
    }
}

/// OpenAI usage (`input_tokens`/`inputTokens`, cached, output, reasoning; the cached and
/// reasoning counts are part of input and output) in drover's disjoint classes.
pub fn usage_tokens(usage: &Value) -> Tokens {
    openai_tokens(
        count(usage, &["input_tokens", "inputTokens"]),
        count(usage, &["cached_input_tokens", "cachedInputTokens"]),
        count(usage, &["output_tokens", "outputTokens"]),
        count(usage, &["reasoning_output_tokens", "reasoningOutputTokens"]),
    )
}

/// The turn's usage under the thread's model: none when no tokens were reported (no
/// row is booked for nothing) or the model is unknown (the tokens are then priced under
/// the run's model).
pub fn model_usage(model: Option<&str>, tokens: Tokens) -> Vec<ModelUsage> {
    match model {
        Some(model) if tokens != Tokens::default() => vec![ModelUsage {
            model: model.to_string(),
            tokens,
            cost_usd: None,
        }],
        _ => Vec::new(),
    }
}

/// How a Codex error reads to drover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorClass {
    /// The HTTP status, when Codex named it.
    pub status: Option<u16>,
    /// It may pass on its own (rate limit, overload, 5xx, a dropped connection).
    pub transient: bool,
}

/// Classify an app-server `TurnError` (`{message, codexErrorInfo, additionalDetails}`).
pub fn classify_turn_error(error: &Value) -> ErrorClass {
    let info = error.get("codexErrorInfo").unwrap_or(&Value::Null);
    let text = format!(
        "{} {}",
        str_of(error, "message"),
        str_of(error, "additionalDetails")
    );
    let from_text = classify_message(&text);
    match info {
        Value::String(kind) => match kind.as_str() {
            "rateLimitExceeded" => ErrorClass {
                status: from_text.status.or(Some(429)),
                transient: true,
            },
            "internalServerError" => ErrorClass {
                status: from_text.status.or(Some(500)),
                transient: true,
            },
            "serverOverloaded" | "flexUnavailable" | "policyCapacityUnavailable" => ErrorClass {
                status: from_text.status,
                transient: true,
            },
            _ => ErrorClass {
                status: from_text.status,
                transient: false,
            },
        },
        Value::Object(map) => {
            let Some((kind, detail)) = map.iter().next() else {
                return from_text;
            };
            let status = detail
                .get("httpStatusCode")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .or(from_text.status);
            let connection = matches!(
                kind.as_str(),
                "httpConnectionFailed"
                    | "responseStreamConnectionFailed"
                    | "responseStreamDisconnected"
                    | "responseTooManyFailedAttempts"
            );
            ErrorClass {
                status,
                // No status on a connection failure: the connection dropped, which may pass.
                transient: connection && status.is_none_or(is_transient_status),
            }
        }
        _ => from_text,
    }
}

/// Classify an error from its text alone (exec mode, whose errors are only messages):
/// "last status: 429 Too Many Requests", "unexpected status 503 Service Unavailable",
/// Codex's HTTP 500 message, a stream that disconnected.
pub fn classify_message(text: &str) -> ErrorClass {
    let status = status_in(text).or_else(|| text.contains(HIGH_DEMAND).then_some(500));
    let transient = match status {
        Some(status) => is_transient_status(status),
        None => {
            let lower = text.to_ascii_lowercase();
            lower.contains("stream disconnected")
                || lower.contains("error sending request")
                || lower.contains("connection")
                || lower.contains("timed out")
        }
    };
    ErrorClass { status, transient }
}

/// The HTTP status named in an error text ("status: 429", "status 503").
fn status_in(text: &str) -> Option<u16> {
    let mut rest = text;
    while let Some(at) = rest.find("status") {
        rest = &rest[at + "status".len()..];
        let digits: String = rest
            .trim_start_matches([':', ' '])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.len() == 3
            && let Ok(status) = digits.parse::<u16>()
            && (100..=599).contains(&status)
        {
            return Some(status);
        }
    }
    None
}

/// A "Reconnecting... 1/5 (…)" message: Codex is retrying the model request.
pub fn is_retry_message(text: &str) -> bool {
    text.starts_with("Reconnecting")
}

/// The `RateLimited` event for a retry Codex announced.
pub fn rate_limited(message: &str, class: &ErrorClass) -> ProviderEvent {
    let status = class
        .status
        .map(|s| format!("HTTP {s}; "))
        .unwrap_or_default();
    ProviderEvent::RateLimited {
        // Codex honours a retry-after hint but does not say what it was.
        until: None,
        detail: clip(&format!("Codex is retrying ({status}{message})")),
    }
}

/// A tool item's name and typed ask, when the item is a tool (`type` in app-server
/// camel case or exec snake case).
pub fn tool_of(item: &Value) -> Option<(String, Ask)> {
    let kind = str_of(item, "type");
    match kind {
        "commandExecution" | "command_execution" => Some(("shell".into(), command_ask(item, None))),
        "fileChange" | "file_change" => Some(("apply_patch".into(), file_change_ask(item))),
        "mcpToolCall" | "mcp_tool_call" => {
            let (server, tool) = (str_of(item, "server"), str_of(item, "tool"));
            let arguments = json_text(item.get("arguments").unwrap_or(&Value::Null));
            let ask = if server.is_empty() || tool.is_empty() {
                Ask::other("mcp", None, item)
            } else {
                Ask::McpTool {
                    server: server.to_string(),
                    tool: tool.to_string(),
                    arguments,
                }
            };
            Some((format!("mcp:{server}/{tool}"), ask))
        }
        "webSearch" | "web_search" => {
            let query = item.get("query").cloned().unwrap_or(Value::Null);
            let ask = Ask::other("web_search", query.as_str(), &json!({ "query": query }));
            Some(("web_search".into(), ask))
        }
        _ => None,
    }
}

/// The command of a command item or approval (`command` as text, or as argv on older
/// servers) with its `cwd`; an item without a command is shown as it came.
pub fn command_ask(params: &Value, reason: Option<String>) -> Ask {
    let cwd = Some(str_of(params, "cwd"))
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    match params.get("command") {
        Some(Value::String(command)) => Ask::command(command, cwd, reason),
        Some(Value::Array(argv)) if argv.iter().all(Value::is_string) => Ask::command_from_argv(
            argv.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            cwd,
            reason,
        ),
        _ => Ask::other("shell", reason.as_deref(), params),
    }
}

/// The typed ask of a file change item (its first file, the others in `other_files`);
/// one that names no file is shown as it came.
pub fn file_change_ask(item: &Value) -> Ask {
    match changes_to_ask(changes_of(item)) {
        Some(ask) => ask,
        None => Ask::other("apply_patch", None, item.get("changes").unwrap_or(item)),
    }
}

/// A patch's files as a file edit: the first file, the others in `other_files`.
pub fn changes_to_ask(mut files: Vec<EditedFile>) -> Option<Ask> {
    if files.is_empty() {
        return None;
    }
    let first = files.remove(0);
    Some(Ask::FileEdit {
        file_path: first.file_path,
        change: first.change,
        other_files: files,
    })
}

/// A file change's files and how each changes. `kind` is a string in exec mode (which
/// gives no diff) and `{type, move_path}` in the app-server, whose `diff` is the new
/// content of an added file and a unified diff of an updated one. Entries without a
/// path are left out.
pub fn changes_of(item: &Value) -> Vec<EditedFile> {
    item.get("changes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let path = str_of(c, "path");
            if path.is_empty() {
                return None;
            }
            let (kind, moved_to) = match c.get("kind") {
                Some(Value::String(k)) => (k.as_str(), ""),
                Some(other) => (
                    str_of(other, "type"),
                    [str_of(other, "move_path"), str_of(other, "movePath")]
                        .into_iter()
                        .find(|p| !p.is_empty())
                        .unwrap_or(""),
                ),
                None => ("", ""),
            };
            let diff = c.get("diff").and_then(Value::as_str);
            let change = match (kind, diff) {
                ("delete", _) => FileChange::Delete,
                ("add", Some(content)) => FileChange::Content {
                    content: content.to_string(),
                },
                ("add", None) => FileChange::Described {
                    description: "a new file".into(),
                },
                (_, diff) if !moved_to.is_empty() => FileChange::Move {
                    to: moved_to.to_string(),
                    diff: diff.unwrap_or("").to_string(),
                },
                (_, Some(diff)) => FileChange::Diff {
                    diff: diff.to_string(),
                },
                (_, None) => FileChange::Described {
                    description: "changed".into(),
                },
            };
            Some(EditedFile {
                file_path: path.to_string(),
                change,
            })
        })
        .collect()
}

/// The events of an item that started.
pub fn item_started(item: &Value) -> Vec<ProviderEvent> {
    match tool_of(item) {
        Some((name, ask)) => vec![ProviderEvent::ToolStarted {
            tool_use_id: str_of(item, "id").to_string(),
            name,
            ask,
        }],
        None => Vec::new(),
    }
}

/// The events of an item that completed, and the agent's message text if it was one.
pub fn item_completed(item: &Value) -> (Vec<ProviderEvent>, Option<String>) {
    let kind = str_of(item, "type");
    match kind {
        "agentMessage" | "agent_message" => {
            let text = str_of(item, "text").to_string();
            if text.is_empty() {
                return (Vec::new(), None);
            }
            (
                vec![ProviderEvent::AssistantText { text: text.clone() }],
                Some(text),
            )
        }
        "reasoning" => {
            let chars = ["text", "summary", "content"]
                .iter()
                .map(|k| match item.get(*k) {
                    Some(Value::String(s)) => s.chars().count(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|s| s.chars().count())
                        .sum(),
                    _ => 0,
                })
                .sum();
            (vec![ProviderEvent::Thinking { chars }], None)
        }
        "error" => (
            vec![ProviderEvent::Notice {
                text: clip(&format!("Codex: {}", str_of(item, "message"))),
            }],
            None,
        ),
        _ if tool_of(item).is_some() => {
            let status = str_of(item, "status");
            let exit = item
                .get("exit_code")
                .or_else(|| item.get("exitCode"))
                .and_then(Value::as_i64);
            let failed = matches!(status, "failed" | "declined")
                || exit.is_some_and(|code| code != 0)
                || item.get("error").is_some_and(|e| !e.is_null());
            let summary = match (status, exit) {
                ("declined", _) => "declined".to_string(),
                (_, Some(code)) => format!("exit {code}"),
                ("", None) => "done".to_string(),
                (status, None) => status.to_string(),
            };
            (
                vec![ProviderEvent::ToolFinished {
                    tool_use_id: str_of(item, "id").to_string(),
                    is_error: failed,
                    exit_code: exit.and_then(|code| i32::try_from(code).ok()),
                    summary: clip(&summary),
                }],
                None,
            )
        }
        _ => (Vec::new(), None),
    }
}

/// On one line, at most `SUMMARY_CHARS` characters.
pub fn clip(text: &str) -> String {
    crate::providers::wire::clip(text, SUMMARY_CHARS)
}

/// The version in a `userAgent` such as `drover/0.171.0 (Debian 12; x86_64) …`.
pub fn version_of(user_agent: &str) -> Option<String> {
    let first = user_agent.split_whitespace().next()?;
    let version = first.split_once('/')?.1;
    (!version.is_empty()).then(|| version.to_string())
}
