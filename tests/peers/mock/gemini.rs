//! The Gemini API as Gemini CLI calls it (`GOOGLE_GEMINI_BASE_URL`, key in
//! `x-goog-api-key`): `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`, answered
//! with `GenerateContentResponse` events (`candidates[0].content.parts[]` text or
//! `functionCall`, the last with `finishReason` and `usageMetadata`); plus the unary
//! `generateContent` its helpers call (answered with a short JSON text: the user speaks
//! next) and `countTokens`.

use axum::http::Method;
use serde_json::{Value, json};

use super::{Reply, ReplyContext, ReplyKind, Route, SseEvent, ToolResult, halves};

pub fn route(method: &Method, path: &str, body: &Value) -> Route {
    let Some(call) = path
        .trim_end_matches('/')
        .strip_prefix("/v1beta/models/")
        .and_then(|rest| rest.rsplit_once(':'))
        .map(|(_, call)| call)
    else {
        return Route::Unknown;
    };
    match (method.as_str(), call) {
        ("POST", "streamGenerateContent") => Route::Model {
            side: !has_functions(body),
        },
        ("POST", "generateContent") => Route::Json(json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"text": "{\"reasoning\": \"the mock\", \"next_speaker\": \"user\"}"}
            ]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        })),
        ("POST", "countTokens") => Route::Json(json!({"totalTokens": 1000})),
        _ => Route::Unknown,
    }
}

/// Whether the request declares functions (an agent turn, not a side request).
fn has_functions(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| {
            tools.iter().any(|t| {
                t.get("functionDeclarations")
                    .and_then(Value::as_array)
                    .is_some_and(|f| !f.is_empty())
            })
        })
}

pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        500..=599 => "INTERNAL",
        401 | 403 => "PERMISSION_DENIED",
        _ => "INVALID_ARGUMENT",
    };
    json!({"error": {"code": status, "message": message, "status": kind}})
}

pub fn stream(reply: &Reply, cx: &ReplyContext<'_>) -> Vec<SseEvent> {
    let u = reply.usage;
    let usage = json!({
        "promptTokenCount": u.input + u.cache_read,
        "candidatesTokenCount": u.output,
        "cachedContentTokenCount": u.cache_read,
        "thoughtsTokenCount": u.reasoning,
        "totalTokenCount": u.input + u.cache_read + u.output + u.reasoning
    });
    let response_id = format!("mock-response-{:04}", cx.id);
    let event = |parts: Value, last: bool| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        let mut event = json!({"candidates": [], "modelVersion": "mock-model",
                               "responseId": response_id});
        if last {
            candidate["finishReason"] = json!("STOP");
            event["usageMetadata"] = usage.clone();
        }
        event["candidates"] = json!([candidate]);
        SseEvent::data(event)
    };
    match &reply.kind {
        ReplyKind::Text(text) => {
            let pieces = halves(text);
            let n = pieces.len();
            pieces
                .into_iter()
                .enumerate()
                .map(|(i, piece)| event(json!([{"text": piece}]), i + 1 == n))
                .collect()
        }
        // Gemini sends a call whole, in one part.
        ReplyKind::ToolCall { name, input } => vec![event(
            json!([{"functionCall": {"name": name, "args": input}}]),
            true,
        )],
        ReplyKind::Error { .. } => unreachable!("errors are not streamed"),
    }
}

/// The `functionResponse` parts after the last `model` content.
pub fn tool_results(body: &Value) -> Vec<ToolResult> {
    let Some(contents) = body.get("contents").and_then(Value::as_array) else {
        return Vec::new();
    };
    let start = contents
        .iter()
        .rposition(|c| c.get("role").and_then(Value::as_str) == Some("model"))
        .map_or(0, |p| p + 1);
    contents[start..]
        .iter()
        .filter_map(|c| c.get("parts").and_then(Value::as_array))
        .flatten()
        .filter_map(|p| p.get("functionResponse"))
        .map(|r| {
            let response = r.get("response").cloned().unwrap_or(Value::Null);
            ToolResult {
                call_id: r
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                content: match response.get("output").or(response.get("error")) {
                    Some(Value::String(s)) => s.clone(),
                    _ => response.to_string(),
                },
                is_error: response.get("error").is_some(),
            }
        })
        .collect()
}
