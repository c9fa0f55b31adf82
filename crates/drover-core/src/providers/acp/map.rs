//! What an ACP agent's messages mean to drover: `session/update` notifications into
//! provider events, a tool call into a typed [`Ask`], drover's answers onto the agent's
//! permission options, and a `session/prompt` answer into the turn's end.
//!
//! Pure (no I/O): the SDK has already parsed the JSON-RPC; this module only reads the
//! typed messages. What must stay true: nothing here panics on what an agent sends;
//! every text kept from the agent is clipped; a tool call's end is reported once, and
//! only for a call whose start was (docs/PROVIDERS.md §"ACP agents").

use std::collections::{BTreeMap, BTreeSet};

use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOption, PermissionOptionId, PermissionOptionKind, PlanEntryStatus,
    PromptResponse, SessionUpdate, StopReason, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolKind,
};
use serde_json::Value;

use crate::providers::ask::{Ask, FOR_THE_RUN, FileChange, replacement_diff};
use crate::providers::wire::{clip, first_line_summary};
use crate::providers::{
    AlwaysOption, ModelUsage, PermissionAnswer, ProviderEvent, Tokens, TurnEnd, notice,
};

/// The most characters of one turn's answer kept for its end.
const TURN_TEXT_MAX: usize = 64 * 1024;
/// The most characters of a tool's title kept as its name.
const TITLE_MAX: usize = 120;
/// The most characters of a plan's line.
const PLAN_MAX: usize = 600;
/// Marks the usage row of a turn whose agent reported neither tokens nor money.
pub const UNREPORTED: &str = "(usage not reported)";
/// The most tool calls remembered at once (a flood of starts cannot grow memory).
const TOOLS_MAX: usize = 4096;

/// What one session's updates have told so far.
#[derive(Debug, Default)]
pub struct Updates {
    /// The calls started and not yet ended: id → title.
    open_tools: BTreeMap<String, String>,
    /// The calls of this turn that ended (so an update cannot start one again).
    ended_tools: BTreeSet<String>,
    /// The agent's text in the turn in flight.
    text: String,
    /// The session's running cost in dollars, when the agent reports one in USD.
    cost_usd: Option<f64>,
}

impl Updates {
    /// Forgets the turn's text (a new turn starts).
    pub fn start_turn(&mut self) {
        self.text.clear();
        self.ended_tools.clear();
    }

    /// The session's running cost in dollars, as the agent last reported it.
    pub fn cost_usd(&self) -> Option<f64> {
        self.cost_usd
    }

    /// The events of one `session/update`.
    pub fn read(&mut self, update: SessionUpdate) -> Vec<ProviderEvent> {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => match text_of(&chunk.content) {
                Some(text) if !text.is_empty() => {
                    if self.text.len() < TURN_TEXT_MAX {
                        self.text.push_str(&text);
                        if self.text.len() > TURN_TEXT_MAX {
                            self.text = crate::text::clip(&self.text, TURN_TEXT_MAX);
                        }
                    }
                    vec![ProviderEvent::AssistantText { text }]
                }
                _ => Vec::new(),
            },
            SessionUpdate::AgentThoughtChunk(chunk) => {
                let chars = text_of(&chunk.content).map_or(0, |t| t.chars().count());
                vec![ProviderEvent::Thinking { chars }]
            }
            SessionUpdate::ToolCall(call) => self.tool_call(call),
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                // A call the agent never announced with `tool_call`, whose update carries
                // a title, starts here (Gemini CLI 0.61.0 sends a call it asked about
                // only as updates: the permission request's, then `completed`).
                if update.fields.title.is_some()
                    && !self.open_tools.contains_key(&id)
                    && !self.ended_tools.contains(&id)
                    && let Ok(call) = ToolCall::try_from(update.clone())
                {
                    return self.tool_call(call);
                }
                let fields = update.fields;
                match fields.status {
                    Some(ToolCallStatus::Completed | ToolCallStatus::Failed) => {
                        let is_error = fields.status == Some(ToolCallStatus::Failed);
                        let summary = summary_of(
                            fields.content.as_deref().unwrap_or_default(),
                            fields.raw_output.as_ref(),
                        );
                        self.finish(id, is_error, summary)
                    }
                    _ => Vec::new(),
                }
            }
            SessionUpdate::Plan(plan) => {
                if plan.entries.is_empty() {
                    return Vec::new();
                }
                let entries: Vec<String> = plan
                    .entries
                    .iter()
                    .map(|e| {
                        let mark = match e.status {
                            PlanEntryStatus::Completed => "[x]",
                            PlanEntryStatus::InProgress => "[~]",
                            _ => "[ ]",
                        };
                        format!("{mark} {}", first_line_summary(&e.content, 200))
                    })
                    .collect();
                vec![notice(clip(
                    &format!("plan: {}", entries.join(" · ")),
                    PLAN_MAX,
                ))]
            }
            SessionUpdate::UsageUpdate(usage) => {
                if let Some(cost) = usage.cost
                    && cost.currency.eq_ignore_ascii_case("USD")
                    && cost.amount.is_finite()
                    && cost.amount >= 0.0
                {
                    self.cost_usd = Some(cost.amount);
                }
                Vec::new()
            }
            // The user's own words (a loaded session's replay), modes, commands, titles:
            // nothing for the transcript.
            _ => Vec::new(),
        }
    }

    fn tool_call(&mut self, call: ToolCall) -> Vec<ProviderEvent> {
        let id = call.tool_call_id.0.to_string();
        let name = clip(&one_line(&call.title), TITLE_MAX);
        let ask = ask_of(
            call.kind,
            &call.title,
            call.raw_input.as_ref(),
            &call.locations,
            &call.content,
        );
        let mut events = Vec::new();
        if self.open_tools.len() < TOOLS_MAX && !self.open_tools.contains_key(&id) {
            self.open_tools.insert(id.clone(), name.clone());
            events.push(ProviderEvent::ToolStarted {
                tool_use_id: id.clone(),
                name,
                ask,
            });
        }
        if matches!(
            call.status,
            ToolCallStatus::Completed | ToolCallStatus::Failed
        ) {
            let summary = summary_of(&call.content, call.raw_output.as_ref());
            events.extend(self.finish(id, call.status == ToolCallStatus::Failed, summary));
        }
        events
    }

    fn finish(&mut self, id: String, is_error: bool, summary: String) -> Vec<ProviderEvent> {
        if self.open_tools.remove(&id).is_none() {
            return Vec::new();
        }
        if self.ended_tools.len() < TOOLS_MAX {
            self.ended_tools.insert(id.clone());
        }
        vec![ProviderEvent::ToolFinished {
            tool_use_id: id,
            is_error,
            // ACP reports no exit code of its own.
            exit_code: None,
            summary,
        }]
    }

    /// The turn's end from the agent's answer to `session/prompt`: its stop reason, the
    /// tokens it reports (priced from the catalog under `model`), and the session's
    /// running cost when the agent reports one. The calls still open are ended as
    /// failed first (a turn that ends ends its tools).
    pub fn turn_end(
        &mut self,
        response: &PromptResponse,
        model: Option<&str>,
        session_id: &str,
        duration_ms: u64,
    ) -> Vec<ProviderEvent> {
        let mut events = self.close_tools("the turn ended");
        let (is_error, subtype) = match response.stop_reason {
            StopReason::EndTurn => (false, "success"),
            StopReason::MaxTokens => (true, "error_max_tokens"),
            StopReason::MaxTurnRequests => (true, "error_max_turns"),
            StopReason::Refusal => (true, "refusal"),
            StopReason::Cancelled => (false, "cancelled"),
            _ => (true, "error_during_execution"),
        };
        let quota = quota_of(response.meta.as_ref());
        let tokens = response
            .usage
            .as_ref()
            .map(|u| {
                let reasoning = u.thought_tokens.unwrap_or(0);
                let cache_read = u.cached_read_tokens.unwrap_or(0);
                let cache_write = u.cached_write_tokens.unwrap_or(0);
                Tokens {
                    input: u.input_tokens.saturating_sub(cache_read + cache_write),
                    output: u.output_tokens.saturating_sub(reasoning),
                    reasoning,
                    cache_read,
                    cache_write,
                }
            })
            .or(quota.as_ref().map(|q| q.tokens));
        // The run's model, else the one model the agent says it used.
        let model = model.or(quota.as_ref().and_then(|q| q.model.as_deref()));
        let model_usage = match (tokens, model) {
            (Some(tokens), Some(model)) => vec![ModelUsage {
                model: model.to_string(),
                tokens,
                cost_usd: None,
            }],
            // Neither tokens nor money came (codex-acp 0.16.0 reports neither): one row
            // under a name no catalog prices, so the turn is booked `unpriced`, never
            // $0 (docs/ARCHITECTURE.md §"Money").
            (None, _) if self.cost_usd.is_none() => vec![ModelUsage {
                model: format!("{} {UNREPORTED}", model.unwrap_or("the agent's model")),
                tokens: Tokens::default(),
                cost_usd: None,
            }],
            _ => Vec::new(),
        };
        let text = std::mem::take(&mut self.text);
        events.push(ProviderEvent::TurnCompleted(TurnEnd {
            is_error,
            subtype: subtype.to_string(),
            text: (!text.is_empty()).then_some(text),
            session_id: Some(session_id.to_string()),
            total_cost_usd: self.cost_usd,
            tokens: tokens.unwrap_or_default(),
            model_usage,
            duration_ms: Some(duration_ms),
            terminal_reason: Some(stop_word(&response.stop_reason).to_string()),
            ..TurnEnd::default()
        }));
        events
    }

    /// The turn's end when `session/prompt` was answered with an error (or not at all).
    pub fn turn_failed(
        &mut self,
        message: &str,
        session_id: Option<&str>,
        duration_ms: u64,
    ) -> Vec<ProviderEvent> {
        let mut events = self.close_tools("the turn failed");
        let text = std::mem::take(&mut self.text);
        events.push(ProviderEvent::TurnCompleted(TurnEnd {
            is_error: true,
            subtype: "error_during_execution".to_string(),
            text: Some(if text.is_empty() {
                clip(message, 2000)
            } else {
                text
            }),
            session_id: session_id.map(str::to_string),
            total_cost_usd: self.cost_usd,
            duration_ms: Some(duration_ms),
            api_message: Some(clip(message, 2000)),
            terminal_reason: Some("error".to_string()),
            ..TurnEnd::default()
        }));
        events
    }

    fn close_tools(&mut self, why: &str) -> Vec<ProviderEvent> {
        std::mem::take(&mut self.open_tools)
            .into_keys()
            .map(|tool_use_id| ProviderEvent::ToolFinished {
                tool_use_id,
                is_error: true,
                exit_code: None,
                summary: why.to_string(),
            })
            .collect()
    }
}

/// The tokens a turn's answer reports in its `_meta` rather than in `usage`, as Gemini
/// CLI 0.61.0 does: `_meta.quota.token_count {input_tokens, output_tokens}` for the
/// turn, and `model_usage[].model` naming the models it used.
#[derive(Debug, Clone, PartialEq)]
struct Quota {
    tokens: Tokens,
    /// The model, when the agent names exactly one.
    model: Option<String>,
}

fn quota_of(meta: Option<&serde_json::Map<String, Value>>) -> Option<Quota> {
    let quota = meta?.get("quota")?;
    let count = quota.get("token_count")?;
    let input = count.get("input_tokens")?.as_u64()?;
    let output = count
        .get("output_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let models: Vec<&str> = quota
        .get("model_usage")
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .filter_map(|r| r.get("model").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    Some(Quota {
        tokens: Tokens {
            input,
            output,
            ..Tokens::default()
        },
        model: match models[..] {
            [one] => Some(clip(one, TITLE_MAX)),
            _ => None,
        },
    })
}

fn stop_word(reason: &StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::MaxTurnRequests => "max_turn_requests",
        StopReason::Refusal => "refusal",
        StopReason::Cancelled => "cancelled",
        _ => "other",
    }
}

fn text_of(block: &ContentBlock) -> Option<String> {
    match block {
        ContentBlock::Text(t) => Some(t.text.clone()),
        _ => None,
    }
}

fn one_line(s: &str) -> String {
    crate::text::one_line(s)
}

/// One line about a tool's result: its first text content, else its raw output.
fn summary_of(content: &[ToolCallContent], raw_output: Option<&Value>) -> String {
    for c in content {
        match c {
            ToolCallContent::Content(c) => {
                if let Some(text) = text_of(&c.content) {
                    return first_line_summary(&text, 200);
                }
            }
            ToolCallContent::Diff(d) => return format!("edited {}", d.path.display()),
            _ => {}
        }
    }
    match raw_output {
        Some(Value::String(s)) => first_line_summary(s, 200),
        Some(Value::Null) | None => String::new(),
        Some(v) => first_line_summary(&v.to_string(), 200),
    }
}

/// A string field of the tool's raw input, the first of `keys` present.
fn input_str<'a>(input: Option<&'a Value>, keys: &[&str]) -> Option<&'a str> {
    let map = input?.as_object()?;
    keys.iter().find_map(|k| map.get(*k)?.as_str())
}

/// What a tool call asks, typed from its kind, title, raw input, locations and content.
pub fn ask_of(
    kind: ToolKind,
    title: &str,
    raw_input: Option<&Value>,
    locations: &[ToolCallLocation],
    content: &[ToolCallContent],
) -> Ask {
    let path = || {
        input_str(raw_input, &["file_path", "path", "filePath", "abs_path"])
            .map(str::to_string)
            .or_else(|| locations.first().map(|l| l.path.display().to_string()))
    };
    match kind {
        ToolKind::Execute => {
            let argv = raw_input
                .and_then(|v| v.get("command"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                });
            let cwd = input_str(raw_input, &["cwd", "workdir"]).map(str::to_string);
            let reason = input_str(raw_input, &["description", "reason"]).map(str::to_string);
            match (argv, input_str(raw_input, &["command", "cmd"])) {
                (Some(argv), _) if !argv.is_empty() => Ask::command_from_argv(argv, cwd, reason),
                (_, Some(command)) => Ask::command(command, cwd, reason),
                _ => Ask::command(&one_line(title), cwd, reason),
            }
        }
        ToolKind::Edit | ToolKind::Delete => {
            let diff = content.iter().find_map(|c| match c {
                ToolCallContent::Diff(d) => Some(d),
                _ => None,
            });
            let file_path = diff
                .map(|d| d.path.display().to_string())
                .or_else(path)
                .unwrap_or_else(|| one_line(title));
            let change = if kind == ToolKind::Delete {
                FileChange::Delete
            } else if let Some(d) = diff {
                match &d.old_text {
                    Some(old) => FileChange::Diff {
                        diff: replacement_diff(&file_path, old, &d.new_text),
                    },
                    None => FileChange::Content {
                        content: d.new_text.clone(),
                    },
                }
            } else {
                FileChange::Described {
                    description: one_line(title),
                }
            };
            Ask::FileEdit {
                file_path,
                change,
                other_files: Vec::new(),
            }
        }
        ToolKind::Fetch => match input_str(raw_input, &["url", "uri"]) {
            Some(url) => Ask::Fetch {
                url: url.to_string(),
            },
            None => Ask::other(&one_line(title), None, raw_input.unwrap_or(&Value::Null)),
        },
        _ => {
            let subject = path().or_else(|| {
                input_str(raw_input, &["pattern", "query", "prompt"]).map(str::to_string)
            });
            Ask::other(
                &clip(&one_line(title), TITLE_MAX),
                subject.as_deref(),
                raw_input.unwrap_or(&Value::Null),
            )
        }
    }
}

/// The largest notification kept: a bigger one is skipped whole with a notice (a line's
/// own bound is the reader's, for responses that carry a session).
pub const MAX_NOTIFICATION_BYTES: usize = 1024 * 1024;

/// What becomes of one stdout line before the SDK reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Handed to the SDK as it is.
    Pass,
    /// Handed to the SDK (which answers it as JSON-RPC says), with a notice: it is not
    /// a JSON-RPC message.
    PassWithNotice(String),
    /// Not handed on: a notice says why (a notification too big to keep).
    Skip(String),
    /// Nothing at all (a blank line).
    Ignore,
}

/// Looks at one line from the agent: blank lines are ignored, a notification over
/// [`MAX_NOTIFICATION_BYTES`] is skipped, a line that is not a JSON object is noted.
pub fn gate(line: &str) -> Gate {
    if line.trim().is_empty() {
        return Gate::Ignore;
    }
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(message)) => {
            let notification = message.get("id").is_none() && message.contains_key("method");
            if notification && line.len() > MAX_NOTIFICATION_BYTES {
                let method = message.get("method").and_then(Value::as_str).unwrap_or("?");
                return Gate::Skip(format!(
                    "skipped a {} notification of {} bytes (the limit is {} KiB)",
                    clip(method, 60),
                    line.len(),
                    MAX_NOTIFICATION_BYTES / 1024
                ));
            }
            Gate::Pass
        }
        _ => Gate::PassWithNotice(format!(
            "the agent wrote a line that is not JSON-RPC: {}",
            clip(line, 120)
        )),
    }
}

/// The agent's "allow always", as a sentence, when it offers one.
pub fn always_option(options: &[PermissionOption]) -> Option<AlwaysOption> {
    options
        .iter()
        .find(|o| o.kind == PermissionOptionKind::AllowAlways)
        .map(|o| {
            AlwaysOption::new(format!(
                "the agent's own \"{}\", {FOR_THE_RUN}",
                clip(&one_line(&o.name), 80)
            ))
        })
}

/// The agent's option that carries drover's answer: allow once or always (the other
/// when only one is offered), reject once (else always). `Ok(None)`: a denial with no
/// reject option, answered as cancelled. `Err`: the answer does not fit a permission.
pub fn option_for(
    options: &[PermissionOption],
    answer: &PermissionAnswer,
) -> Result<Option<PermissionOptionId>, String> {
    let find = |kinds: &[PermissionOptionKind]| {
        kinds.iter().find_map(|k| {
            options
                .iter()
                .find(|o| o.kind == *k)
                .map(|o| o.option_id.clone())
        })
    };
    match answer {
        PermissionAnswer::Allow { always: true } => find(&[
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::AllowOnce,
        ])
        .map(Some)
        .ok_or_else(|| "the agent offered no option that allows this".to_string()),
        PermissionAnswer::Allow { always: false } => find(&[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ])
        .map(Some)
        .ok_or_else(|| "the agent offered no option that allows this".to_string()),
        PermissionAnswer::Deny { .. } => Ok(find(&[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ])),
        PermissionAnswer::Answer { .. } => {
            Err("an ACP permission request takes allow or deny, not answers".to_string())
        }
    }
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
