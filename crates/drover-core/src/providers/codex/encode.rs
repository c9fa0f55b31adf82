//! The JSON-RPC lines drover writes to `codex app-server` (one object each, no newline:
//! the writer adds it).
//!
//! Pure. What must stay true: client requests carry drover's own ids (numbers from 1,
//! separate from the server's request ids); an answer to a server request echoes that
//! request's id exactly as the server sent it (a number stays a number).

use serde_json::{Value, json};

/// A client request.
pub fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A client notification.
pub fn notification(method: &str) -> String {
    json!({"jsonrpc": "2.0", "method": method}).to_string()
}

/// The answer to a server request.
pub fn response(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// A refusal of a server request drover does not handle, so the server does not wait.
pub fn error_response(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// `initialize` params.
pub fn initialize_params() -> Value {
    json!({
        "clientInfo": {"name": "drover", "title": "drover", "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {"experimentalApi": false},
    })
}

/// What a thread is opened with: its working directory, approvals for anything not
/// known to be safe, the sandbox, and the model when the run names one.
pub fn thread_params(cwd: &str, sandbox: &str, model: Option<&str>) -> Value {
    let mut params = json!({"cwd": cwd, "approvalPolicy": "untrusted", "sandbox": sandbox});
    if let Some(model) = model {
        params["model"] = json!(model);
    }
    params
}

/// `thread/resume` params: the thread, with the same settings as a new one.
pub fn resume_params(thread_id: &str, cwd: &str, sandbox: &str, model: Option<&str>) -> Value {
    let mut params = thread_params(cwd, sandbox, model);
    params["threadId"] = json!(thread_id);
    params
}

/// `turn/start` params: one text input.
pub fn turn_params(thread_id: &str, prompt: &str, effort: Option<&str>) -> Value {
    let mut params = json!({
        "threadId": thread_id,
        "input": [{"type": "text", "text": prompt, "text_elements": []}],
    });
    if let Some(effort) = effort {
        params["effort"] = json!(effort);
    }
    params
}

/// `turn/interrupt` params.
pub fn interrupt_params(thread_id: &str, turn_id: &str) -> Value {
    json!({"threadId": thread_id, "turnId": turn_id})
}

/// The answer to an approval request.
pub fn decision(decision: &str) -> Value {
    json!({"decision": decision})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let line = request(3, "turn/start", turn_params("t1", "hi", None));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": 3, "method": "turn/start",
                   "params": {"threadId": "t1", "input": [{"type": "text", "text": "hi", "text_elements": []}]}})
        );
        let v: Value = serde_json::from_str(&response(&json!(0), decision("accept"))).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": 0, "result": {"decision": "accept"}})
        );
        let v: Value = serde_json::from_str(&response(&json!("a"), json!({}))).unwrap();
        assert_eq!(v["id"], "a");
        assert_eq!(
            resume_params("t", "/w", "read-only", Some("gpt-5.5")),
            json!({"threadId": "t", "cwd": "/w", "approvalPolicy": "untrusted",
                   "sandbox": "read-only", "model": "gpt-5.5"})
        );
        assert_eq!(
            thread_params("/w", "workspace-write", None),
            json!({"cwd": "/w", "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
        );
    }
}
