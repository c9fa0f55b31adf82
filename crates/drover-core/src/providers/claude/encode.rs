//! The lines drover writes to a Claude Code child's stdin (one JSON object each, no
//! newline: the writer adds it).
//!
//! Pure. What must stay true: the shapes are the CLI's control protocol as the official
//! SDK writes them (`control_request` / `control_response` with `subtype` `success` or
//! `error`, `behavior` `allow` with `updatedInput` and optional `updatedPermissions`,
//! `behavior` `deny` with `message` and `interrupt`).

use serde_json::{Value, json};

/// The handshake that opens the control protocol.
pub fn initialize(request_id: &str) -> String {
    control_request(request_id, json!({"subtype": "initialize", "hooks": null}))
}

/// Interrupt the turn in flight.
pub fn interrupt(request_id: &str) -> String {
    control_request(request_id, json!({"subtype": "interrupt"}))
}

/// One user turn.
pub fn user_turn(prompt: &str) -> String {
    json!({
        "type": "user",
        "message": {"role": "user", "content": prompt},
        "parent_tool_use_id": null,
        "session_id": "default",
    })
    .to_string()
}

/// Allow a `can_use_tool` request, running the tool with `updated_input` (the request's
/// own input when nothing was edited) and applying `updated_permissions` if any.
pub fn allow(
    request_id: &str,
    updated_input: &Value,
    updated_permissions: Option<Value>,
) -> String {
    let mut response = json!({"behavior": "allow", "updatedInput": updated_input});
    if let (Some(permissions), Some(map)) = (updated_permissions, response.as_object_mut()) {
        map.insert("updatedPermissions".into(), permissions);
    }
    control_success(request_id, response)
}

/// Deny a `can_use_tool` request; the model reads `message`, and the turn goes on.
pub fn deny(request_id: &str, message: &str) -> String {
    control_success(
        request_id,
        json!({"behavior": "deny", "message": message, "interrupt": false}),
    )
}

/// Refuse a control request drover does not handle, so the CLI does not wait for it.
pub fn error_response(request_id: &str, error: &str) -> String {
    json!({
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": error},
    })
    .to_string()
}

fn control_request(request_id: &str, request: Value) -> String {
    json!({"type": "control_request", "request_id": request_id, "request": request}).to_string()
}

fn control_success(request_id: &str, response: Value) -> String {
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> Value {
        assert!(!line.contains('\n'), "one line: {line}");
        serde_json::from_str(line).expect("valid JSON")
    }

    #[test]
    fn shapes() {
        let input = json!({"command": "ls /tmp", "description": "list"});
        let table = [
            (
                initialize("req_1"),
                json!({"type":"control_request","request_id":"req_1",
                       "request":{"subtype":"initialize","hooks":null}}),
            ),
            (
                interrupt("req_2"),
                json!({"type":"control_request","request_id":"req_2",
                       "request":{"subtype":"interrupt"}}),
            ),
            (
                user_turn("fix \"it\"\nplease"),
                json!({"type":"user","message":{"role":"user","content":"fix \"it\"\nplease"},
                       "parent_tool_use_id":null,"session_id":"default"}),
            ),
            (
                allow("12a3", &input, None),
                json!({"type":"control_response","response":{"subtype":"success",
                       "request_id":"12a3","response":{"behavior":"allow",
                       "updatedInput":{"command":"ls /tmp","description":"list"}}}}),
            ),
            (
                allow("12a3", &input, Some(json!([{"type":"addRules"}]))),
                json!({"type":"control_response","response":{"subtype":"success",
                       "request_id":"12a3","response":{"behavior":"allow",
                       "updatedInput":{"command":"ls /tmp","description":"list"},
                       "updatedPermissions":[{"type":"addRules"}]}}}),
            ),
            (
                deny("12a3", "why"),
                json!({"type":"control_response","response":{"subtype":"success",
                       "request_id":"12a3","response":{"behavior":"deny","message":"why",
                       "interrupt":false}}}),
            ),
            (
                error_response("h1", "unsupported"),
                json!({"type":"control_response","response":{"subtype":"error",
                       "request_id":"h1","error":"unsupported"}}),
            ),
        ];
        for (line, expected) in table {
            assert_eq!(parsed(&line), expected, "{line}");
        }
    }
}
