//! Every line a client sends `drover mcp` gets an answer: the lines in front of the MCP
//! session (rmcp), which by itself drops what does not parse and lines over its limit
//! without a word, so a client waiting on that id would wait forever.
//!
//! What must stay true: each line is judged here before the session sees it
//! ([`judge`], pure); a line that is not JSON (not UTF-8, a lone surrogate, a NUL or other
//! raw control character, nesting deeper than serde_json's limit, cut short, plain text)
//! is answered `-32700`; JSON that is no JSON-RPC message (not an object, no
//! `"jsonrpc": "2.0"`, an id that is neither a string nor a number, neither a method nor a
//! result) `-32600`; a request whose params do not fit its method `-32602`; a line over
//! [`MAX_LINE_BYTES`] `-32600`, read no further than the bound. The id is the request's
//! when one can be read (for a line cut short or over the bound, from its start), else
//! `null`. Only a message the session can read is passed on; blank lines are skipped.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line `drover mcp` reads (4 MiB: far above any task drover accepts).
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// JSON-RPC's code for a line that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for params that do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;

/// What becomes of one line.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A message the MCP session reads: passed on as it came.
    Forward,
    /// Nothing to answer (a blank line).
    Skip,
    /// The error response to write back.
    Answer(Value),
}

/// What [`read_line`] read.
#[derive(Debug, PartialEq)]
pub enum LineRead {
    /// A whole line (without its `\n`).
    Line(Vec<u8>),
    /// A line over [`MAX_LINE_BYTES`]: its first bytes (the rest was read past).
    TooLong(Vec<u8>),
    /// The client closed its side.
    Eof,
}

/// Reads the next line of `reader`, never holding more than `max` bytes of it.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<LineRead> {
    let mut line = Vec::new();
    let mut over = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            // The client closed its side; a last line without `\n` is still a line.
            return Ok(match (over, line.is_empty()) {
                (true, _) => LineRead::TooLong(line),
                (false, true) => LineRead::Eof,
                (false, false) => LineRead::Line(line),
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        let body = newline.map_or(available, |i| &available[..i]);
        if !over {
            let room = max.saturating_sub(line.len());
            if body.len() > room {
                line.extend_from_slice(&body[..room]);
                over = true;
            } else {
                line.extend_from_slice(body);
            }
        }
        reader.consume(take);
        if newline.is_some() {
            return Ok(if over {
                LineRead::TooLong(line)
            } else {
                LineRead::Line(line)
            });
        }
    }
}

/// The answer to a line over the bound (its first bytes in `start`).
pub fn too_long(start: &[u8], max: usize) -> Value {
    error(
        leading_id(start),
        INVALID_REQUEST,
        format!("the line is longer than {max} bytes, the most drover mcp reads; send less"),
    )
}

/// What to do with one line, as read (its `\n` gone).
pub fn judge(line: &[u8]) -> Verdict {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => {
            return Verdict::Answer(error(
                leading_id(line),
                PARSE_ERROR,
                format!(
                    "the line is not UTF-8 (at byte {}); send JSON-RPC as UTF-8 text",
                    e.valid_up_to()
                ),
            ));
        }
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            return Verdict::Answer(error(
                leading_id(line),
                PARSE_ERROR,
                format!("the line is not JSON: {e}; send one JSON-RPC message per line"),
            ));
        }
    };
    let Value::Object(message) = &value else {
        return Verdict::Answer(error(
            Value::Null,
            INVALID_REQUEST,
            "a JSON-RPC message is one object per line (batches are not taken)".to_string(),
        ));
    };
    let id = match message.get("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        Some(_) => {
            return Verdict::Answer(error(
                Value::Null,
                INVALID_REQUEST,
                "a request's id is a string or a number".to_string(),
            ));
        }
    };
    let answer_id = id.clone().unwrap_or(Value::Null);
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Verdict::Answer(error(
            answer_id,
            INVALID_REQUEST,
            "the message lacks \"jsonrpc\": \"2.0\"".to_string(),
        ));
    }
    let method = message.get("method");
    let is_response = message.contains_key("result") || message.contains_key("error");
    let method = match method {
        Some(Value::String(method)) => method.clone(),
        Some(_) => {
            return Verdict::Answer(error(
                answer_id,
                INVALID_REQUEST,
                "a request's method is a string".to_string(),
            ));
        }
        None if is_response && id.is_some() => String::new(),
        None => {
            return Verdict::Answer(error(
                answer_id,
                INVALID_REQUEST,
                "the message is neither a request (a method) nor a response (a result or \
                 an error to an id)"
                    .to_string(),
            ));
        }
    };
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(_) => Verdict::Forward,
        // A notification is never answered (JSON-RPC); the session decides what to make
        // of one it cannot read.
        Err(_) if id.is_none() => Verdict::Forward,
        Err(e) if method.is_empty() => Verdict::Answer(error(
            answer_id,
            INVALID_REQUEST,
            format!("the response cannot be read: {e}"),
        )),
        Err(e) => Verdict::Answer(error(
            answer_id,
            INVALID_PARAMS,
            format!("the params of {method} do not fit it: {e}"),
        )),
    }
}

/// A JSON-RPC error response.
fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The top-level `"id"` of a line that cannot be parsed whole (cut short, too long, not
/// UTF-8), when its start shows one: a number or a string. `null` otherwise.
fn leading_id(line: &[u8]) -> Value {
    let mut depth = 0usize;
    let mut i = 0;
    while i < line.len() {
        match line[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let end = string_end(line, i);
                let Some(end) = end else { return Value::Null };
                if depth == 1 && &line[i..=end] == b"\"id\"" {
                    return id_after_key(&line[end + 1..]);
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    Value::Null
}

/// The index of the quote closing the string opened at `start`.
fn string_end(line: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < line.len() {
        match line[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The id value after `"id"`: `: 12` or `: "abc"`.
fn id_after_key(rest: &[u8]) -> Value {
    let rest = rest.trim_ascii_start();
    let Some(rest) = rest.strip_prefix(b":") else {
        return Value::Null;
    };
    let rest = rest.trim_ascii_start();
    let token = match rest.first() {
        Some(b'"') => match string_end(rest, 0) {
            Some(end) => &rest[..=end],
            None => return Value::Null,
        },
        Some(b'-' | b'0'..=b'9') => {
            let end = rest
                .iter()
                .position(|b| {
                    !(b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
                })
                .unwrap_or(rest.len());
            if end == rest.len() {
                // The number may go on past the cut.
                return Value::Null;
            }
            &rest[..end]
        }
        _ => return Value::Null,
    };
    match serde_json::from_slice::<Value>(token) {
        Ok(id @ (Value::String(_) | Value::Number(_))) => id,
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(line: &[u8]) -> (Value, i64) {
        match judge(line) {
            Verdict::Answer(v) => (v["id"].clone(), v["error"]["code"].as_i64().unwrap()),
            other => panic!(
                "{:?} was not answered: {other:?}",
                String::from_utf8_lossy(line)
            ),
        }
    }

    #[test]
    fn every_malformed_line_is_answered_with_its_code() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        // (line, the id answered, the code)
        let cases: Vec<(Vec<u8>, Value, i64)> = vec![
            // Not UTF-8.
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\xff\"}".to_vec(),
                json!(7),
                PARSE_ERROR,
            ),
            // A lone surrogate.
            (
                br#"{"jsonrpc":"2.0","id":8,"method":"\ud800"}"#.to_vec(),
                json!(8),
                PARSE_ERROR,
            ),
            // A raw NUL.
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"pi\x00ng\"}".to_vec(),
                json!(9),
                PARSE_ERROR,
            ),
            (b"\x00".to_vec(), Value::Null, PARSE_ERROR),
            // Nesting deeper than the parser goes.
            (deep.into_bytes(), Value::Null, PARSE_ERROR),
            // Cut short.
            (
                br#"{"jsonrpc":"2.0","id":"a1","method":"tools/li"#.to_vec(),
                json!("a1"),
                PARSE_ERROR,
            ),
            (
                br#"{"jsonrpc":"2.0","id":12"#.to_vec(),
                Value::Null,
                PARSE_ERROR,
            ),
            // Plain text.
            (b"hello there".to_vec(), Value::Null, PARSE_ERROR),
            // JSON, but no request.
            (b"42".to_vec(), Value::Null, INVALID_REQUEST),
            (b"[]".to_vec(), Value::Null, INVALID_REQUEST),
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_vec(),
                Value::Null,
                INVALID_REQUEST,
            ),
            (
                br#"{"id":3,"method":"ping"}"#.to_vec(),
                json!(3),
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#.to_vec(),
                json!(3),
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_vec(),
                Value::Null,
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":4,"method":5}"#.to_vec(),
                json!(4),
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":5}"#.to_vec(),
                json!(5),
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0"}"#.to_vec(),
                Value::Null,
                INVALID_REQUEST,
            ),
            // A known method whose params do not fit it.
            (
                br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":7}"#.to_vec(),
                json!(6),
                INVALID_PARAMS,
            ),
            (
                br#"{"jsonrpc":"2.0","id":6,"method":"ping","params":[1]}"#.to_vec(),
                json!(6),
                INVALID_PARAMS,
            ),
            // A response that is not one.
            (
                br#"{"jsonrpc":"2.0","id":6,"error":5}"#.to_vec(),
                json!(6),
                INVALID_REQUEST,
            ),
        ];
        for (line, id, code) in cases {
            assert_eq!(
                answered(&line),
                (id, code),
                "{:?}",
                String::from_utf8_lossy(&line)
            );
        }
    }

    #[test]
    fn messages_the_session_reads_go_on_and_blank_lines_are_skipped() {
        for line in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#[..],
            br#"{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{}}"#,
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\r",
            // An unknown method: the session answers -32601 itself.
            br#"{"jsonrpc":"2.0","id":3,"method":"no/such"}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            br#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
        ] {
            assert_eq!(
                judge(line),
                Verdict::Forward,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        assert_eq!(judge(b""), Verdict::Skip);
        assert_eq!(judge(b"  \r"), Verdict::Skip);
    }

    #[test]
    fn a_line_over_the_bound_is_cut_and_answered_with_the_id_its_start_shows() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "a".repeat(100)
        );
        let input = format!("{long}{{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\"}}\nlast");
        let mut reader = tokio::io::BufReader::with_capacity(16, input.as_bytes());
        let lines: Vec<LineRead> = runtime.block_on(async {
            let mut out = Vec::new();
            loop {
                match read_line(&mut reader, 64).await.unwrap() {
                    LineRead::Eof => break out,
                    line => out.push(line),
                }
            }
        });
        let [
            LineRead::TooLong(start),
            LineRead::Line(ping),
            LineRead::Line(last),
        ] = &lines[..]
        else {
            panic!("{lines:?}")
        };
        assert_eq!(start.len(), 64);
        let answer = too_long(start, 64);
        assert_eq!(answer["id"], 41);
        assert_eq!(answer["error"]["code"], INVALID_REQUEST);
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("64 bytes")
        );
        assert_eq!(judge(ping), Verdict::Forward);
        assert_eq!(last, b"last");
    }

    #[test]
    fn the_leading_id_is_only_the_top_level_one() {
        let cases: &[(&[u8], Value)] = &[
            (br#"{"jsonrpc":"2.0","id":12,"method":"x""#, json!(12)),
            (br#"{"id" : "abc","#, json!("abc")),
            (br#"{"params":{"id":5},"id":6,"#, json!(6)),
            (br#"{"params":{"id":5}"#, Value::Null),
            (br#"{"method":"\"id\":3","#, Value::Null),
            (br#"{"id":123"#, Value::Null),
            (br#"{"id":null,"#, Value::Null),
        ];
        for (line, id) in cases {
            assert_eq!(&leading_id(line), id, "{}", String::from_utf8_lossy(line));
        }
    }
}
