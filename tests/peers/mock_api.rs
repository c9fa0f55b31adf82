//! The mock model APIs' own behaviour, checked with a plain HTTP client: the event
//! sequences each API streams, errors with their retry hints, recording, the script's
//! order, side requests, unknown paths and bounded delays.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mock::{MockApi, Protocol, Reply, ReplyKind, Served, UNSCRIPTED_TEXT, Usage};

const TIMEOUT: Duration = Duration::from_secs(10);

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .expect("an HTTP client")
}

/// `(event name, data)` pairs of a server-sent event body.
fn sse(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = None;
            let mut data = String::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (name, data)
        })
        .collect()
}

/// The text an Anthropic stream carries (its `text_delta`s joined).
fn streamed_text(body: &str) -> String {
    sse(body)
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|d| d["delta"]["text"].as_str().map(str::to_string))
        .collect()
}

async fn post(
    mock: &MockApi,
    path: &str,
    body: Value,
) -> (u16, reqwest::header::HeaderMap, String) {
    let response = client()
        .post(format!("{}{path}", mock.url()))
        .json(&body)
        .send()
        .await
        .expect("the mock answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.expect("a body"))
}

fn tools() -> Value {
    json!([{"name": "Bash", "input_schema": {"type": "object"}}])
}

#[tokio::test]
async fn anthropic_streams_text_and_tool_calls_in_the_messages_api_event_order() {
    let usage = Usage {
        input: 10,
        output: 20,
        cache_read: 3,
        cache_write: 4,
        reasoning: 0,
    };
    let mock = MockApi::start(
        Protocol::AnthropicMessages,
        [
            Reply::text("Hello there").usage(usage),
            Reply::tool_call("Bash", json!({"command": "ls"})),
        ],
    )
    .await;
    let request = json!({"model": "claude-sonnet-4-5", "stream": true, "tools": tools(),
                         "messages": [{"role": "user", "content": "hi"}]});
    let (status, headers, body) = post(&mock, "/v1/messages?beta=true", request.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/event-stream");
    let events = sse(&body);
    let names: Vec<&str> = events.iter().filter_map(|(n, _)| n.as_deref()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let data: Vec<Value> = events
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(data[0]["message"]["model"], "claude-sonnet-4-5");
    assert_eq!(data[0]["message"]["usage"]["input_tokens"], 10);
    assert_eq!(data[0]["message"]["usage"]["cache_read_input_tokens"], 3);
    assert_eq!(
        data[0]["message"]["usage"]["cache_creation_input_tokens"],
        4
    );
    let text: String = data[2..4]
        .iter()
        .map(|d| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello there");
    assert_eq!(data[5]["delta"]["stop_reason"], "end_turn");
    assert_eq!(data[5]["usage"]["output_tokens"], 20);

    let (_, _, body) = post(&mock, "/v1/messages?beta=true", request).await;
    let data: Vec<Value> = sse(&body)
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(data[1]["content_block"]["type"], "tool_use");
    assert_eq!(data[1]["content_block"]["name"], "Bash");
    let input: String = data[2..4]
        .iter()
        .map(|d| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&input).unwrap(),
        json!({"command": "ls"})
    );
    assert_eq!(data[5]["delta"]["stop_reason"], "tool_use");

    let recorded = mock.requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].path, "/v1/messages?beta=true");
    assert_eq!(recorded[0].body["messages"][0]["content"], "hi");
    assert!(matches!(
        recorded[1].served,
        Served::Scripted { index: 1, .. }
    ));
}

#[tokio::test]
async fn errors_carry_the_api_error_body_and_the_retry_hint() {
    let mock = MockApi::start(
        Protocol::AnthropicMessages,
        [
            Reply::error(429).retry_after(Duration::from_millis(1500)),
            Reply::error(529),
        ],
    )
    .await;
    let request = json!({"tools": tools(), "messages": []});
    let (status, headers, body) = post(&mock, "/v1/messages", request.clone()).await;
    assert_eq!(status, 429);
    assert_eq!(headers["retry-after"], "2");
    assert_eq!(headers["retry-after-ms"], "1500");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let (status, headers, body) = post(&mock, "/v1/messages", request).await;
    assert_eq!(status, 529);
    assert!(headers.get("retry-after").is_none());
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["type"],
        "overloaded_error"
    );

    let openai = MockApi::start(Protocol::OpenAiResponses, [Reply::error(500)]).await;
    let (status, _, body) = post(
        &openai,
        "/v1/responses",
        json!({"tools": [{"type": "function"}]}),
    )
    .await;
    assert_eq!(status, 500);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["type"],
        "server_error"
    );
}

#[tokio::test]
async fn side_requests_unknown_paths_and_an_empty_script_are_answered_and_recorded() {
    let mock = MockApi::start(Protocol::AnthropicMessages, [Reply::text("scripted")]).await;
    // No tools: a side request (a title, a summary) leaves the script alone.
    let (status, _, body) = post(&mock, "/v1/messages", json!({"messages": []})).await;
    assert_eq!(status, 200);
    assert_eq!(streamed_text(&body), "Mock side answer");
    assert_eq!(mock.remaining(), 1);
    let (status, _, body) = post(&mock, "/v1/messages/count_tokens", json!({})).await;
    assert_eq!((status, body.as_str()), (200, r#"{"input_tokens":1000}"#));
    let (status, _, _) = post(&mock, "/v1/nowhere", json!({})).await;
    assert_eq!(status, 404);
    let request = json!({"tools": tools(), "messages": []});
    let (_, _, body) = post(&mock, "/v1/messages", request.clone()).await;
    assert_eq!(streamed_text(&body), "scripted");
    mock.push([Reply::text("pushed")]);
    let (_, _, body) = post(&mock, "/v1/messages", request.clone()).await;
    assert_eq!(streamed_text(&body), "pushed");
    let (status, _, body) = post(&mock, "/v1/messages", request).await;
    assert_eq!(status, 200);
    assert_eq!(streamed_text(&body), UNSCRIPTED_TEXT);
    let served: Vec<Served> = mock.requests().into_iter().map(|r| r.served).collect();
    assert!(matches!(
        served.as_slice(),
        [
            Served::Side,
            Served::Auxiliary,
            Served::Unknown,
            Served::Scripted { index: 0, .. },
            Served::Scripted { index: 1, .. },
            Served::Unscripted
        ]
    ));
    assert_eq!(mock.model_requests().len(), 3);
}

#[tokio::test]
async fn responses_stream_a_function_call_and_complete_with_usage() {
    let mock = MockApi::start(
        Protocol::OpenAiResponses,
        [
            Reply::tool_call("exec_command", json!({"cmd": "ls"})).usage(Usage {
                input: 7,
                output: 9,
                cache_read: 2,
                cache_write: 0,
                reasoning: 1,
            }),
        ],
    )
    .await;
    let (status, _, body) = post(
        &mock,
        "/v1/responses",
        json!({"model": "gpt-5.5", "stream": true, "tools": [{"type": "function", "name": "exec_command"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let events = sse(&body);
    let data: Vec<Value> = events
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    for ((name, _), d) in events.iter().zip(&data) {
        assert_eq!(
            name.as_deref(),
            d["type"].as_str(),
            "the event name is its type"
        );
    }
    let types: Vec<&str> = data.iter().filter_map(|d| d["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"response.created"));
    assert_eq!(types.last(), Some(&"response.completed"));
    let done = data
        .iter()
        .find(|d| d["type"] == "response.output_item.done")
        .unwrap();
    assert_eq!(done["item"]["type"], "function_call");
    assert_eq!(done["item"]["name"], "exec_command");
    let arguments: Value =
        serde_json::from_str(done["item"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"cmd": "ls"}));
    let completed = data.last().unwrap();
    assert!(completed["response"]["id"].is_string());
    assert_eq!(completed["response"]["usage"]["input_tokens"], 7);
    assert_eq!(
        completed["response"]["usage"]["input_tokens_details"]["cached_tokens"],
        2
    );
    assert_eq!(
        completed["response"]["usage"]["output_tokens_details"]["reasoning_tokens"],
        1
    );
    let follow_up = json!({"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}
    ]});
    let results = crate::mock::responses::tool_results(&follow_up);
    assert_eq!(results.len(), 1);
    assert_eq!(
        (results[0].call_id.as_str(), results[0].content.as_str()),
        ("call_1", "a.txt")
    );
}

#[tokio::test]
async fn chat_completions_stream_tool_call_deltas_a_usage_chunk_and_done() {
    let mock = MockApi::start(
        Protocol::OpenAiChat,
        [Reply::tool_call(
            "bash",
            json!({"command": "ls", "description": "list"}),
        )],
    )
    .await;
    let (status, _, body) = post(
        &mock,
        "/v1/chat/completions",
        json!({"model": "mock-model", "stream": true, "tools": [{"type": "function"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let events = sse(&body);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let arguments: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        json!({"command": "ls", "description": "list"})
    );
    assert_eq!(
        chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
        "bash"
    );
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 1000);
    assert_eq!(usage["usage"]["completion_tokens"], 100);
}

#[tokio::test]
async fn gemini_streams_text_and_a_whole_function_call_with_usage_last() {
    let mock = MockApi::start(
        Protocol::Gemini,
        [
            Reply::text("Hello there"),
            Reply::tool_call(
                "run_shell_command",
                json!({"command": "ls", "description": "list"}),
            ),
            Reply::error(429),
        ],
    )
    .await;
    let path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";
    let turn = json!({"contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]});
    let events = |body: &str| -> Vec<Value> {
        sse(body)
            .iter()
            .map(|(_, d)| serde_json::from_str(d).unwrap())
            .collect()
    };
    let (status, _, body) = post(&mock, path, turn.clone()).await;
    assert_eq!(status, 200);
    let text = events(&body);
    let joined: String = text
        .iter()
        .filter_map(|e| e["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(joined, "Hello there");
    // Only the last event ends the answer and carries its usage.
    let last = text.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["promptTokenCount"], 1000);
    assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 100);
    assert!(
        text[..text.len() - 1]
            .iter()
            .all(|e| e.get("usageMetadata").is_none())
    );

    let (_, _, body) = post(&mock, path, turn.clone()).await;
    let call = events(&body);
    assert_eq!(call.len(), 1);
    assert_eq!(
        call[0]["candidates"][0]["content"]["parts"][0]["functionCall"],
        json!({"name": "run_shell_command", "args": {"command": "ls", "description": "list"}})
    );

    let (status, _, body) = post(&mock, path, turn).await;
    assert_eq!(status, 429);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["status"], "RESOURCE_EXHAUSTED");

    // Helpers' unary calls are answered and leave the script alone.
    let (status, _, body) = post(
        &mock,
        "/v1beta/models/gemini-2.5-flash:generateContent",
        json!({"contents": []}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(body.contains("next_speaker"), "{body}");
    let (status, _, _) = post(&mock, "/v1beta/models/x:countTokens", json!({})).await;
    assert_eq!(status, 200);

    let follow_up = json!({"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "run_shell_command", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "run_shell_command",
            "response": {"error": "Tool was canceled by the user."}}}]}
    ]});
    let results = crate::mock::gemini::tool_results(&follow_up);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].call_id, "c1");
    assert_eq!(results[0].content, "Tool was canceled by the user.");
    assert!(results[0].is_error);
}

#[tokio::test]
async fn a_delayed_reply_waits_and_ends_when_the_mock_is_dropped() {
    let mock = MockApi::start(
        Protocol::AnthropicMessages,
        [
            Reply::text("late").delay(Duration::from_millis(300)),
            Reply::text("never").delay(Duration::from_secs(120)),
        ],
    )
    .await;
    let request = json!({"tools": tools(), "messages": []});
    let (status, _, _) = post(&mock, "/v1/messages", request.clone()).await;
    assert_eq!(status, 200);

    let url = format!("{}/v1/messages", mock.url());
    let pending = tokio::spawn(async move {
        client()
            .post(url)
            .json(&request)
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    mock.wait_for_model_requests(2, TIMEOUT).await;
    assert!(matches!(
        &mock.requests()[1].served,
        Served::Scripted { reply, .. } if reply.kind == ReplyKind::Text("never".into())
    ));
    drop(mock);
    let answered = tokio::time::timeout(TIMEOUT, pending)
        .await
        .expect("a dropped mock ends its delayed replies")
        .expect("the request task");
    assert_eq!(answered.ok(), Some(503));
}
