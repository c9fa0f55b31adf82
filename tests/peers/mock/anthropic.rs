//! The Anthropic Messages API as Claude Code calls it: `POST /v1/messages?beta=true` with
//! `stream: true`, answered with `message_start`, `content_block_start`,
//! `content_block_delta` (`text_delta` or `input_json_delta`), `content_block_stop`,
//! `message_delta` (stop reason and output usage) and `message_stop`; plus token counts
//! and the model list.

use axum::http::Method;
use serde_json::{Value, json};

use super::{
    Reply, ReplyContext, ReplyKind, Route, SseEvent, ToolResult, content_text, halves, has_tools,
};

pub fn route(method: &Method, path: &str, body: &Value) -> Route {
    match (method.as_str(), path.trim_end_matches('/')) {
        ("POST", "/v1/messages") => Route::Model {
            side: !has_tools(body),
        },
        ("POST", "/v1/messages/count_tokens") => Route::Json(json!({"input_tokens": 1000})),
        ("GET", "/v1/models") => Route::Json(json!({
            "data": [{"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5",
                      "created_at": "2025-09-29T00:00:00Z"}],
            "has_more": false, "first_id": "claude-sonnet-4-5", "last_id": "claude-sonnet-4-5"
        })),
        _ => Route::Unknown,
    }
}

pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        401 => "authentication_error",
        _ => "invalid_request_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

pub fn stream(reply: &Reply, cx: &ReplyContext<'_>) -> Vec<SseEvent> {
    let model = cx
        .request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("claude-sonnet-4-5");
    let usage = reply.usage;
    let mut events = vec![SseEvent::named(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_mock_{:04}", cx.id), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage.input, "output_tokens": 1,
                      "cache_creation_input_tokens": usage.cache_write,
                      "cache_read_input_tokens": usage.cache_read}}}),
    )];
    let stop_reason = match &reply.kind {
        ReplyKind::Text(text) => {
            events.push(SseEvent::named(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}),
            ));
            for piece in halves(text) {
                events.push(SseEvent::named(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": piece}}),
                ));
            }
            "end_turn"
        }
        ReplyKind::ToolCall { name, input } => {
            events.push(SseEvent::named(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "tool_use", "id": format!("toolu_mock_{:04}", cx.id),
                                         "name": name, "input": {}}}),
            ));
            for piece in halves(&input.to_string()) {
                events.push(SseEvent::named(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "input_json_delta", "partial_json": piece}}),
                ));
            }
            "tool_use"
        }
        ReplyKind::Error { .. } => unreachable!("errors are not streamed"),
    };
    events.push(SseEvent::named(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(SseEvent::named(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": usage.output}}),
    ));
    events.push(SseEvent::named(
        "message_stop",
        json!({"type": "message_stop"}),
    ));
    events
}

/// The `tool_result` blocks of the last user message.
pub fn tool_results(body: &Value) -> Vec<ToolResult> {
    let Some(last) = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
    else {
        return Vec::new();
    };
    if last.get("role").and_then(Value::as_str) != Some("user") {
        return Vec::new();
    }
    last.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .map(|b| ToolResult {
            call_id: b
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            content: b.get("content").map(content_text).unwrap_or_default(),
            is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
        })
        .collect()
}
