//! The OpenAI Responses API as Codex calls it: `POST /v1/responses` with `stream: true`,
//! answered with `response.created`, `response.output_item.added`, the item's deltas
//! (`response.output_text.delta` or `response.function_call_arguments.delta`),
//! `response.output_item.done` and `response.completed` (with the response id and usage);
//! plus the model list.

use axum::http::Method;
use serde_json::{Value, json};

use super::{
    Reply, ReplyContext, ReplyKind, Route, SseEvent, ToolResult, content_text, halves, has_tools,
};

pub fn route(method: &Method, path: &str, body: &Value) -> Route {
    match (method.as_str(), path.trim_end_matches('/')) {
        ("POST", "/v1/responses") => Route::Model {
            side: !has_tools(body),
        },
        ("GET", "/v1/models") => Route::Json(json!({
            "object": "list",
            "data": [{"id": "gpt-5.5", "object": "model", "created": 1_700_000_000, "owned_by": "mock"}]
        })),
        _ => Route::Unknown,
    }
}

pub fn stream(reply: &Reply, cx: &ReplyContext<'_>) -> Vec<SseEvent> {
    let response_id = format!("resp_mock_{:04}", cx.id);
    let model = cx
        .request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("gpt-5.5");
    let shell = |status: &str, output: Value, usage: Value| {
        json!({"id": response_id, "object": "response", "created_at": 1_700_000_000,
               "status": status, "model": model, "output": output, "usage": usage})
    };
    let mut seq = 0u64;
    let mut next = |mut event: Value| {
        event["sequence_number"] = json!(seq);
        seq += 1;
        event
    };
    let mut events = Vec::new();
    let mut push = |name: &'static str, event: Value| {
        let event = next(event);
        events.push(SseEvent::named(name, event));
    };
    push(
        "response.created",
        json!({"type": "response.created", "response": shell("in_progress", json!([]), Value::Null)}),
    );
    let item = match &reply.kind {
        ReplyKind::Text(text) => {
            let id = format!("msg_mock_{:04}", cx.id);
            push(
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"id": id, "type": "message", "status": "in_progress",
                                "role": "assistant", "content": []}}),
            );
            push(
                "response.content_part.added",
                json!({"type": "response.content_part.added", "item_id": id, "output_index": 0,
                       "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            for piece in halves(text) {
                push(
                    "response.output_text.delta",
                    json!({"type": "response.output_text.delta", "item_id": id, "output_index": 0,
                           "content_index": 0, "delta": piece}),
                );
            }
            push(
                "response.output_text.done",
                json!({"type": "response.output_text.done", "item_id": id, "output_index": 0,
                       "content_index": 0, "text": text}),
            );
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            push(
                "response.content_part.done",
                json!({"type": "response.content_part.done", "item_id": id, "output_index": 0,
                       "content_index": 0, "part": part}),
            );
            json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
                   "content": [part]})
        }
        ReplyKind::ToolCall { name, input } => {
            let id = format!("fc_mock_{:04}", cx.id);
            let call_id = format!("call_mock_{:04}", cx.id);
            push(
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"id": id, "type": "function_call", "status": "in_progress",
                                "call_id": call_id, "name": name, "arguments": ""}}),
            );
            for piece in halves(&input.to_string()) {
                push(
                    "response.function_call_arguments.delta",
                    json!({"type": "response.function_call_arguments.delta", "item_id": id,
                           "output_index": 0, "delta": piece}),
                );
            }
            let arguments = input.to_string();
            push(
                "response.function_call_arguments.done",
                json!({"type": "response.function_call_arguments.done", "item_id": id,
                       "output_index": 0, "arguments": arguments}),
            );
            json!({"id": id, "type": "function_call", "status": "completed", "call_id": call_id,
                   "name": name, "arguments": arguments})
        }
        ReplyKind::Error { .. } => unreachable!("errors are not streamed"),
    };
    push(
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    );
    let u = reply.usage;
    let usage = json!({
        "input_tokens": u.input, "input_tokens_details": {"cached_tokens": u.cache_read},
        "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": u.input + u.output
    });
    push(
        "response.completed",
        json!({"type": "response.completed", "response": shell("completed", json!([item]), usage)}),
    );
    events
}

/// The `function_call_output` items after the last assistant item of `input`.
pub fn tool_results(body: &Value) -> Vec<ToolResult> {
    let Some(items) = body.get("input").and_then(Value::as_array) else {
        return Vec::new();
    };
    let start = items
        .iter()
        .rposition(|i| {
            i.get("role").and_then(Value::as_str) == Some("assistant")
                || i.get("type").and_then(Value::as_str) == Some("function_call")
        })
        .map_or(0, |p| p + 1);
    items[start..]
        .iter()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call_output"))
        .map(|i| ToolResult {
            call_id: i
                .get("call_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            content: match i.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => content_text(other),
                None => String::new(),
            },
            is_error: false,
        })
        .collect()
}
