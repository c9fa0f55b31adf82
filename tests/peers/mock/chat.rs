//! The OpenAI chat completions API as OpenCode's openai-compatible provider calls it:
//! `POST /v1/chat/completions` with `stream: true`, answered with `chat.completion.chunk`
//! events (a role chunk, content or `tool_calls` deltas, a `finish_reason` chunk, a usage
//! chunk with empty `choices`) and `[DONE]`; plus the model list.

use axum::http::Method;
use serde_json::{Value, json};

use super::{
    Reply, ReplyContext, ReplyKind, Route, SseEvent, ToolResult, content_text, halves, has_tools,
};

pub fn route(method: &Method, path: &str, body: &Value) -> Route {
    match (method.as_str(), path.trim_end_matches('/')) {
        ("POST", "/v1/chat/completions") => Route::Model {
            side: !has_tools(body),
        },
        ("GET", "/v1/models") => Route::Json(json!({
            "object": "list",
            "data": [{"id": "mock-model", "object": "model", "created": 1_700_000_000, "owned_by": "mock"}]
        })),
        _ => Route::Unknown,
    }
}

pub fn stream(reply: &Reply, cx: &ReplyContext<'_>) -> Vec<SseEvent> {
    let id = format!("chatcmpl-mock-{:04}", cx.id);
    let model = cx
        .request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock-model");
    let chunk = |choices: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000,
               "model": model, "choices": choices})
    };
    let mut events = vec![SseEvent::data(chunk(json!([
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}
    ])))];
    let finish = match &reply.kind {
        ReplyKind::Text(text) => {
            for piece in halves(text) {
                events.push(SseEvent::data(chunk(json!([
                    {"index": 0, "delta": {"content": piece}, "finish_reason": null}
                ]))));
            }
            "stop"
        }
        ReplyKind::ToolCall { name, input } => {
            let call_id = format!("call_mock_{:04}", cx.id);
            events.push(SseEvent::data(chunk(json!([
                {"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "id": call_id, "type": "function",
                     "function": {"name": name, "arguments": ""}}
                ]}, "finish_reason": null}
            ]))));
            for piece in halves(&input.to_string()) {
                events.push(SseEvent::data(chunk(json!([
                    {"index": 0, "delta": {"tool_calls": [
                        {"index": 0, "function": {"arguments": piece}}
                    ]}, "finish_reason": null}
                ]))));
            }
            "tool_calls"
        }
        ReplyKind::Error { .. } => unreachable!("errors are not streamed"),
    };
    events.push(SseEvent::data(chunk(json!([
        {"index": 0, "delta": {}, "finish_reason": finish}
    ]))));
    let u = reply.usage;
    let mut usage = chunk(json!([]));
    usage["usage"] = json!({
        "prompt_tokens": u.input, "completion_tokens": u.output,
        "total_tokens": u.input + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cache_read},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning}
    });
    events.push(SseEvent::data(usage));
    events.push(SseEvent::raw("[DONE]"));
    events
}

/// The `tool` role messages after the last assistant message.
pub fn tool_results(body: &Value) -> Vec<ToolResult> {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Vec::new();
    };
    let start = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .map_or(0, |p| p + 1);
    messages[start..]
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|m| ToolResult {
            call_id: m
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            content: m.get("content").map(content_text).unwrap_or_default(),
            is_error: false,
        })
        .collect()
}
