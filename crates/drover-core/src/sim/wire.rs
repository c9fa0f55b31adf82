//! The Claude Code stream-json lines the simulated agent reads and writes.
//!
//! Owns the shape of every line: the ones written to stdout (system, assistant, user,
//! rate_limit_event, control_request, control_cancel_request, control_response, result)
//! and reading the ones that come in on stdin. Also the session's money (the running total
//! and the per-model usage a `result` reports) and the ids. What must stay true: the
//! shapes are the real CLI's (docs/PROVIDERS.md §"Claude Code"), nothing drover-specific; everything here
//! is pure except [`Ids::from_clock`], which only seeds the id generator.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

use super::scenario::Usage;
use crate::money::pricing::tidy_dollars;

/// Makes the ids the real CLI would: uuid-like session ids, `toolu_…`, `msg_…`.
/// Not cryptographic; ids only need to differ between sessions and within one.
#[derive(Debug, Clone)]
pub struct Ids {
    state: u64,
}

impl Ids {
    /// A generator that starts from `seed` (the same seed, the same ids).
    pub fn seeded(seed: u64) -> Ids {
        Ids { state: seed }
    }

    /// Seeded from the clock and the process id, so concurrent sims differ.
    pub fn from_clock() -> Ids {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ids::seeded(nanos ^ (u64::from(std::process::id()) << 32))
    }

    /// SplitMix64.
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A version-4-shaped uuid.
    pub fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0x0fff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    /// A tool-use id (`toolu_…`).
    pub fn tool_use_id(&mut self) -> String {
        format!("toolu_{:016x}{:08x}", self.next(), self.next() >> 32)
    }

    /// A message id (`msg_…`).
    pub fn message_id(&mut self) -> String {
        format!("msg_{:016x}{:08x}", self.next(), self.next() >> 32)
    }
}

/// The session's money: the running total and the usage of each model, as every `result`
/// reports them (`total_cost_usd`, `modelUsage`). Both are cumulative over the process's
/// turns (a turn's own tokens are the result's `usage`); a `--resume`d process starts
/// again from zero.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionSpend {
    total_usd: f64,
    per_model: BTreeMap<String, ModelSpend>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct ModelSpend {
    usage: Usage,
    cost_usd: f64,
}

impl SessionSpend {
    /// Books one message (or a turn's flat charge) on `model`.
    pub fn charge(&mut self, model: &str, usage: &Usage, cost_usd: f64) {
        self.total_usd += cost_usd;
        // The model's entry is looked up before one is made: a flood's thousands of
        // messages on one model make its name once.
        let spend = match self.per_model.get_mut(model) {
            Some(spend) => spend,
            None => self.per_model.entry(model.to_string()).or_default(),
        };
        spend.usage.add(usage);
        spend.cost_usd += cost_usd;
    }

    /// The session's running total, in dollars.
    pub fn total_usd(&self) -> f64 {
        tidy_dollars(self.total_usd)
    }

    /// `modelUsage`: every model the session used, with its tokens and dollars so far.
    pub fn model_usage(&self) -> Value {
        let map: Map<String, Value> = self
            .per_model
            .iter()
            .map(|(model, spend)| {
                (
                    model.clone(),
                    json!({
                        "inputTokens": spend.usage.input_tokens,
                        "outputTokens": spend.usage.output_tokens,
                        "cacheReadInputTokens": spend.usage.cache_read_input_tokens,
                        "cacheCreationInputTokens": spend.usage.cache_creation_input_tokens,
                        "webSearchRequests": 0,
                        "costUSD": tidy_dollars(spend.cost_usd),
                        "contextWindow": 200_000,
                    }),
                )
            })
            .collect();
        Value::Object(map)
    }
}

/// The `system` `init` line that opens a turn.
#[derive(Debug, Clone)]
pub struct InitFacts<'a> {
    /// The session id (uuid-shaped).
    pub session_id: &'a str,
    /// The model the session reports.
    pub model: &'a str,
    /// The tools listed (less the disallowed ones).
    pub tools: &'a [String],
    /// The permission mode's name (`default`, `acceptEdits`, …).
    pub permission_mode: &'a str,
    /// `claude_code_version`.
    pub version: &'a str,
    /// The working directory.
    pub cwd: &'a str,
}

/// The `system` `init` line.
pub fn system_init(facts: &InitFacts<'_>, uuid: String) -> Value {
    json!({
        "type": "system",
        "subtype": "init",
        "cwd": facts.cwd,
        "session_id": facts.session_id,
        "tools": facts.tools,
        "mcp_servers": [],
        "model": facts.model,
        "permissionMode": facts.permission_mode,
        "slash_commands": [],
        "apiKeySource": "none",
        "claude_code_version": facts.version,
        "output_style": "default",
        "agents": [],
        "uuid": uuid,
    })
}

/// The answer to the `initialize` handshake.
pub fn initialize_response(request_id: &str, model: &str) -> Value {
    control_success(
        request_id,
        json!({
            "commands": [],
            "output_style": "default",
            "available_output_styles": ["default"],
            "models": [{"value": model, "displayName": model, "description": "simulated"}],
        }),
    )
}

/// A successful answer to a control request.
pub fn control_success(request_id: &str, response: Value) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    })
}

/// A refused control request.
pub fn control_error(request_id: &str, error: &str) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": error},
    })
}

/// Who is talking and where, on every message line.
#[derive(Debug, Clone, Copy)]
pub struct Envelope<'a> {
    /// The session id.
    pub session_id: &'a str,
}

/// An assistant message with one content block: written as it is (typed, no `Value`
/// tree built for each of a flood's thousands of lines).
#[derive(Debug, serde::Serialize)]
pub struct Assistant<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: AssistantMessage<'a>,
    parent_tool_use_id: Option<()>,
    session_id: &'a str,
    uuid: String,
}

#[derive(Debug, serde::Serialize)]
struct AssistantMessage<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: [Block<'a>; 1],
    stop_reason: &'static str,
    stop_sequence: Option<()>,
    usage: &'a Usage,
}

/// A content block of an assistant message.
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block<'a> {
    /// The agent's text.
    Text {
        /// The text.
        text: &'a str,
    },
    /// The model's thinking.
    Thinking {
        /// What it thought.
        thinking: &'a str,
        /// Its signature (the sim's is `sim`).
        signature: &'static str,
    },
    /// A tool call.
    ToolUse {
        /// The call's id (`toolu_…`).
        id: &'a str,
        /// The tool.
        name: &'a str,
        /// Its input.
        input: &'a Value,
    },
}

/// An assistant message with one content block.
pub fn assistant<'a>(
    env: Envelope<'a>,
    message_id: String,
    uuid: String,
    model: &'a str,
    block: Block<'a>,
    usage: &'a Usage,
) -> Assistant<'a> {
    let stop_reason = if matches!(block, Block::ToolUse { .. }) {
        "tool_use"
    } else {
        "end_turn"
    };
    Assistant {
        kind: "assistant",
        message: AssistantMessage {
            id: message_id,
            kind: "message",
            role: "assistant",
            model,
            content: [block],
            stop_reason,
            stop_sequence: None,
            usage,
        },
        parent_tool_use_id: None,
        session_id: env.session_id,
        uuid,
    }
}

/// A `text` content block.
pub fn text_block(text: &str) -> Block<'_> {
    Block::Text { text }
}

/// A `thinking` content block.
pub fn thinking_block(text: &str) -> Block<'_> {
    Block::Thinking {
        thinking: text,
        signature: "sim",
    }
}

/// A `tool_use` content block.
pub fn tool_use_block<'a>(id: &'a str, name: &'a str, input: &'a Value) -> Block<'a> {
    Block::ToolUse { id, name, input }
}

/// The `user` line carrying a tool's result back to the model.
pub fn tool_result(
    env: Envelope<'_>,
    uuid: String,
    tool_use_id: &str,
    content: &str,
    is_error: bool,
) -> Value {
    json!({
        "type": "user",
        "message": {
            "role": "user",
            "content": [{
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": content,
                "is_error": is_error,
            }],
        },
        "parent_tool_use_id": null,
        "session_id": env.session_id,
        "uuid": uuid,
    })
}

/// What a `can_use_tool` request asks about.
#[derive(Debug, Clone)]
pub struct ToolPermission<'a> {
    /// The tool's name.
    pub tool_name: &'a str,
    /// The tool call's input (a JSON object).
    pub input: &'a Value,
    /// `permission_suggestions`: the rules "allow always" would add (see
    /// [`allow_rule_suggestion`]).
    pub suggestions: Value,
    /// The path outside the allowed directories that made the call ask, if any.
    pub blocked_path: Option<&'a str>,
    /// The id of the tool call the request is about.
    pub tool_use_id: &'a str,
}

/// The `control_request` line asking drover whether a tool call may run.
pub fn can_use_tool(request_id: &str, ask: &ToolPermission<'_>) -> Value {
    json!({
        "type": "control_request",
        "request_id": request_id,
        "request": {
            "subtype": "can_use_tool",
            "tool_name": ask.tool_name,
            "display_name": ask.tool_name,
            "input": ask.input,
            "permission_suggestions": ask.suggestions,
            "blocked_path": ask.blocked_path,
            "tool_use_id": ask.tool_use_id,
        },
    })
}

/// The suggestion the real CLI offers with a request: allow this tool (with this
/// command or path) from now on.
pub fn allow_rule_suggestion(tool_name: &str, rule_content: Option<&str>) -> Value {
    let rule = match rule_content {
        Some(content) => json!({"toolName": tool_name, "ruleContent": content}),
        None => json!({"toolName": tool_name}),
    };
    json!([{
        "type": "addRules",
        "rules": [rule],
        "behavior": "allow",
        "destination": "localSettings",
    }])
}

/// The `control_cancel_request` line withdrawing request `request_id`.
pub fn cancel_request(request_id: &str) -> Value {
    json!({"type": "control_cancel_request", "request_id": request_id})
}

/// `rate_limit_event`; `status` is `rejected`, `allowed` or `allowed_warning`.
pub fn rate_limit_event(env: Envelope<'_>, uuid: String, status: &str, resets_at: u64) -> Value {
    let mut info = json!({
        "status": status,
        "resetsAt": resets_at,
        "rateLimitType": "five_hour",
        "isUsingOverage": false,
    });
    if status == "allowed_warning" {
        info["utilization"] = json!(0.9);
    }
    json!({
        "type": "rate_limit_event",
        "rate_limit_info": info,
        "session_id": env.session_id,
        "uuid": uuid,
    })
}

/// The `system` `api_retry` notice the CLI writes before retrying a failed API call.
pub fn api_retry(
    env: Envelope<'_>,
    uuid: String,
    attempt: u32,
    retry_delay_ms: u64,
    error_status: u16,
) -> Value {
    let error = match error_status {
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({
        "type": "system",
        "subtype": "api_retry",
        "attempt": attempt,
        "max_retries": 10,
        "retry_delay_ms": retry_delay_ms,
        "error_status": error_status,
        "error": error,
        "session_id": env.session_id,
        "uuid": uuid,
    })
}

/// Everything a turn's `result` line reports.
#[derive(Debug, Clone)]
pub struct TurnResult<'a> {
    /// `success` or one of the `error_…` subtypes (see
    /// [`RESULT_SUBTYPES`](super::scenario::RESULT_SUBTYPES)).
    pub subtype: &'a str,
    /// Whether the result reports an error.
    pub is_error: bool,
    /// The result's text (the turn's final answer).
    pub text: &'a str,
    /// How many model requests the turn made (one, plus one after each tool result).
    pub num_turns: u32,
    /// How long the turn took, in milliseconds.
    pub duration_ms: u64,
    /// This turn's tokens.
    pub usage: &'a Usage,
    /// `[{tool_name, tool_use_id, tool_input}]` of this turn.
    pub permission_denials: &'a [Value],
    /// Why the turn ended (`completed`, `max_turns`, `api_error`, …).
    pub terminal_reason: &'a str,
    /// The model API's HTTP status, when the turn ended on an API error.
    pub api_error_status: Option<u16>,
}

/// The `result` line that ends a turn: the turn's own usage, the session's running total
/// and per-model usage.
pub fn result(env: Envelope<'_>, uuid: String, r: &TurnResult<'_>, spend: &SessionSpend) -> Value {
    json!({
        "type": "result",
        "subtype": r.subtype,
        "is_error": r.is_error,
        "duration_ms": r.duration_ms,
        "duration_api_ms": r.duration_ms,
        "num_turns": r.num_turns,
        "result": r.text,
        "session_id": env.session_id,
        "total_cost_usd": spend.total_usd(),
        "usage": r.usage,
        "modelUsage": spend.model_usage(),
        "permission_denials": r.permission_denials,
        "terminal_reason": r.terminal_reason,
        "api_error_status": r.api_error_status,
        "uuid": uuid,
    })
}

/// A line read from stdin.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// A user turn; `text` joins the message's text blocks.
    User {
        /// The message's text blocks, joined.
        text: String,
    },
    /// drover asks something of the CLI (`initialize`, `interrupt`, …).
    ControlRequest {
        /// The id to answer with.
        request_id: String,
        /// What is asked (`initialize`, `interrupt`, …).
        subtype: String,
        /// The whole `request` object.
        request: Value,
    },
    /// drover answers one of the CLI's requests.
    ControlResponse {
        /// The id of the CLI's request answered.
        request_id: String,
        /// The answer.
        reply: Reply,
    },
    /// A line the CLI does not act on (a cancel from drover, an unknown type).
    Ignored {
        /// What the line was, in a few words.
        what: String,
    },
    /// Not a JSON object, or an object that is not a message.
    Unreadable {
        /// What is wrong with it.
        reason: String,
    },
}

/// drover's answer to a `can_use_tool` request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Run the tool.
    Allow {
        /// The input to run it with instead of the model's (`updatedInput`).
        updated_input: Option<Value>,
        /// `updatedPermissions` (e.g. the suggestion applied by "allow always").
        updated_permissions: Vec<Value>,
    },
    /// Do not run the tool.
    Deny {
        /// What to tell the model.
        message: Option<String>,
        /// Also stop the turn.
        interrupt: bool,
    },
    /// An error response, or one this CLI cannot read: the tool is not run.
    Error {
        /// The error's text.
        message: String,
    },
}

/// Reads one stdin line.
pub fn parse_inbound(line: &str) -> Inbound {
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(e) => {
            return Inbound::Unreadable {
                reason: format!("not JSON ({e})"),
            };
        }
    };
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Inbound::Unreadable {
            reason: "a JSON line without a `type`".into(),
        };
    };
    match kind {
        "user" => Inbound::User {
            text: user_text(&value["message"]["content"]),
        },
        "control_request" => {
            let request = value.get("request").cloned().unwrap_or(Value::Null);
            Inbound::ControlRequest {
                request_id: string_of(&value["request_id"]),
                subtype: string_of(&request["subtype"]),
                request,
            }
        }
        "control_response" => {
            let response = &value["response"];
            Inbound::ControlResponse {
                request_id: string_of(&response["request_id"]),
                reply: reply_of(response),
            }
        }
        other => Inbound::Ignored {
            what: format!("a `{other}` line"),
        },
    }
}

fn string_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The text of a user message: a string, or the text blocks of an array.
fn user_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn reply_of(response: &Value) -> Reply {
    if response["subtype"] != "success" {
        let message = response["error"]
            .as_str()
            .unwrap_or("the permission request failed")
            .to_string();
        return Reply::Error { message };
    }
    let decision = &response["response"];
    match decision["behavior"].as_str() {
        Some("allow") => Reply::Allow {
            updated_input: decision
                .get("updatedInput")
                .filter(|input| input.is_object())
                .cloned(),
            updated_permissions: decision["updatedPermissions"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        },
        Some("deny") => Reply::Deny {
            message: decision["message"]
                .as_str()
                .filter(|m| !m.trim().is_empty())
                .map(str::to_string),
            interrupt: decision["interrupt"].as_bool().unwrap_or(false),
        },
        other => Reply::Error {
            message: format!(
                "a permission answer needs behavior allow or deny, found {}",
                other.unwrap_or("none")
            ),
        },
    }
}

/// The allow rules an answer adds (`updatedPermissions` of type `addRules`, behavior
/// `allow`), as `(toolName, ruleContent)`.
pub fn added_allow_rules(updated_permissions: &[Value]) -> Vec<(String, Option<String>)> {
    updated_permissions
        .iter()
        .filter(|update| update["type"] == "addRules" && update["behavior"] == "allow")
        .filter_map(|update| update["rules"].as_array())
        .flatten()
        .filter_map(|rule| {
            let tool = rule["toolName"].as_str()?;
            Some((
                tool.to_string(),
                rule["ruleContent"].as_str().map(str::to_string),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_look_like_the_real_ones_and_differ() {
        let mut ids = Ids::seeded(7);
        let a = ids.uuid();
        let b = ids.uuid();
        assert_ne!(a, b);
        let parts: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{a}");
        assert_eq!(&a[14..15], "4", "{a}");
        assert!(a.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        let tool = ids.tool_use_id();
        assert!(tool.starts_with("toolu_") && tool.len() == 30, "{tool}");
        assert!(ids.message_id().starts_with("msg_"));
        assert_ne!(Ids::seeded(1).uuid(), Ids::seeded(2).uuid());
    }

    #[test]
    fn spend_is_a_running_total_split_by_model() {
        let mut spend = SessionSpend::default();
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 2,
            ..Usage::default()
        };
        for _ in 0..20 {
            spend.charge("sonnet", &usage, 0.05);
        }
        spend.charge("haiku", &Usage::default(), 0.25);
        assert_eq!(spend.total_usd(), 1.25);
        let models = spend.model_usage();
        assert_eq!(models["sonnet"]["costUSD"], json!(1.0));
        assert_eq!(models["sonnet"]["inputTokens"], json!(200));
        assert_eq!(models["sonnet"]["outputTokens"], json!(40));
        assert_eq!(models["haiku"]["costUSD"], json!(0.25));
        let sum: f64 = models
            .as_object()
            .unwrap()
            .values()
            .map(|m| m["costUSD"].as_f64().unwrap())
            .sum();
        assert_eq!(sum, spend.total_usd());
    }

    #[test]
    fn user_lines_take_a_string_or_text_blocks() {
        assert_eq!(
            parse_inbound(r#"{"type":"user","message":{"role":"user","content":"hi"}}"#),
            Inbound::User { text: "hi".into() }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]},"parent_tool_use_id":null,"session_id":"default"}"#
            ),
            Inbound::User {
                text: "a\nb".into()
            }
        );
    }

    #[test]
    fn control_lines_are_read() {
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_request","request_id":"req_init","request":{"subtype":"initialize","hooks":null}}"#
            ),
            Inbound::ControlRequest {
                request_id: "req_init".into(),
                subtype: "initialize".into(),
                request: json!({"subtype": "initialize", "hooks": null}),
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{"behavior":"allow","updatedInput":{"command":"ls"},"updatedPermissions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls"}],"behavior":"allow","destination":"session"}]}}}"#
            ),
            Inbound::ControlResponse {
                request_id: "r1".into(),
                reply: Reply::Allow {
                    updated_input: Some(json!({"command": "ls"})),
                    updated_permissions: vec![
                        json!({"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls"}],"behavior":"allow","destination":"session"})
                    ],
                },
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"success","request_id":"r2","response":{"behavior":"deny","message":"no","interrupt":true}}}"#
            ),
            Inbound::ControlResponse {
                request_id: "r2".into(),
                reply: Reply::Deny {
                    message: Some("no".into()),
                    interrupt: true
                },
            }
        );
        assert!(matches!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"error","request_id":"r3","error":"boom"}}"#
            ),
            Inbound::ControlResponse { reply: Reply::Error { message }, .. } if message == "boom"
        ));
        assert!(matches!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"success","request_id":"r4","response":{}}}"#
            ),
            Inbound::ControlResponse {
                reply: Reply::Error { .. },
                ..
            }
        ));
    }

    #[test]
    fn other_lines_are_ignored_or_unreadable() {
        assert!(matches!(
            parse_inbound(r#"{"type":"control_cancel_request","request_id":"x"}"#),
            Inbound::Ignored { .. }
        ));
        assert!(matches!(parse_inbound("nope"), Inbound::Unreadable { .. }));
        assert!(matches!(parse_inbound("[1]"), Inbound::Unreadable { .. }));
    }

    #[test]
    fn allow_rules_come_from_add_rules_updates_only() {
        let updates = vec![
            json!({"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls"},{"toolName":"Read"}],"behavior":"allow","destination":"session"}),
            json!({"type":"addRules","rules":[{"toolName":"Write"}],"behavior":"deny","destination":"session"}),
            json!({"type":"setMode","mode":"acceptEdits","destination":"session"}),
        ];
        assert_eq!(
            added_allow_rules(&updates),
            vec![
                ("Bash".to_string(), Some("ls".to_string())),
                ("Read".to_string(), None)
            ]
        );
    }

    #[test]
    fn lines_have_the_real_shapes() {
        let env = Envelope { session_id: "s1" };
        let usage = Usage {
            input_tokens: 3,
            ..Usage::default()
        };
        let input = json!({"command": "ls"});
        let line = assistant(
            env,
            "msg_1".into(),
            "u".into(),
            "m",
            tool_use_block("toolu_1", "Bash", &input),
            &usage,
        );
        // Written field by field in the real CLI's order.
        assert_eq!(
            serde_json::to_string(&line).unwrap(),
            r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}},"parent_tool_use_id":null,"session_id":"s1","uuid":"u"}"#
        );
        let line = serde_json::to_value(&line).unwrap();
        assert_eq!(line["message"]["content"][0]["name"], "Bash");
        assert_eq!(line["message"]["stop_reason"], "tool_use");
        assert_eq!(line["message"]["usage"]["input_tokens"], 3);
        assert_eq!(line["session_id"], "s1");
        let text = assistant(
            env,
            "msg_2".into(),
            "v".into(),
            "m",
            text_block("hi"),
            &usage,
        );
        let text = serde_json::to_value(&text).unwrap();
        assert_eq!(
            text["message"]["content"][0],
            json!({"type": "text", "text": "hi"})
        );
        assert_eq!(text["message"]["stop_reason"], "end_turn");
        let thinking = serde_json::to_value(thinking_block("hm")).unwrap();
        assert_eq!(
            thinking,
            json!({"type": "thinking", "thinking": "hm", "signature": "sim"})
        );

        let ask = can_use_tool(
            "r1",
            &ToolPermission {
                tool_name: "Bash",
                input: &json!({"command": "ls /tmp"}),
                suggestions: allow_rule_suggestion("Bash", Some("ls /tmp")),
                blocked_path: Some("/tmp"),
                tool_use_id: "toolu_01",
            },
        );
        assert_eq!(
            ask,
            json!({"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash","input":{"command":"ls /tmp"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls /tmp"}],"behavior":"allow","destination":"localSettings"}],"blocked_path":"/tmp","tool_use_id":"toolu_01"}})
        );
        assert_eq!(
            initialize_response("req_init", "m")["response"]["request_id"],
            "req_init"
        );
        assert_eq!(
            rate_limit_event(env, "u".into(), "rejected", 99)["rate_limit_info"]["resetsAt"],
            99
        );
        assert_eq!(
            api_retry(env, "u".into(), 1, 5, 529)["error"],
            "overloaded_error"
        );
    }
}
