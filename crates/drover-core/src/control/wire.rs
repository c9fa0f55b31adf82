//! The control socket's wire format: JSON lines.
//!
//! Client → server: `{"id": N, "request": <Request>}` (`Request` is tagged by `method`
//! with its `params`). Server → client: `{"id": N, "ok": <value>}` or
//! `{"id": N, "error": {"code": "...", "message": "..."}}`; after a `subscribe`, one
//! `{"event": <DispatchEvent>, "pos": N}` per line (`pos`: its place in the owner's
//! numbered stream, see `feed`) and `{"lagged": K}` when K events were dropped for a slow
//! reader. A line the server cannot read as a request gets an error line with
//! `"id": null` when no id could be read.
//!
//! What must stay true: reading a line never holds more than its limit in memory (an
//! overlong line is skipped to its end and reported once), and [`LineReader::next`] is
//! cancel-safe, so callers may put it under a timeout.

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::dispatch::{DispatchEvent, Request};
use crate::error::{DroverError, ErrorCode};

/// The longest request line the server reads (1 MiB); longer ones are refused with
/// `INVALID_REQUEST`.
pub const MAX_REQUEST_LINE_BYTES: usize = 1024 * 1024;

/// The longest line a client reads (answers such as a run's whole event list can be big).
pub const MAX_ANSWER_LINE_BYTES: usize = 256 * 1024 * 1024;

/// One request as a client writes it.
#[derive(Debug, Clone, Serialize)]
pub struct ClientLine<'a> {
    /// The request's number, chosen by the client; the answer carries it back.
    pub id: u64,
    /// The request, tagged by `method` with its `params`.
    pub request: &'a Request,
}

/// One line the server writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[allow(
    clippy::large_enum_variant,
    reason = "a line is built, written and dropped one at a time; boxing would allocate per event"
)]
pub enum ServerLine {
    /// The request was carried out: `{"id": N, "ok": <value>}`.
    Ok {
        /// The id of the request answered.
        id: u64,
        /// The answer, as the request's JSON.
        ok: Value,
    },
    /// The request was refused, or the line was not a request: `{"id": N, "error": {…}}`.
    Error {
        /// The id of the request refused; `None` when the line had no readable id.
        id: Option<u64>,
        /// Why (code and sentence).
        error: DroverError,
    },
    /// A dispatcher event, after a `subscribe`: `{"event": …, "pos": N}`.
    Event {
        /// The event, as the dispatcher published it.
        event: DispatchEvent,
        /// The event's place in the owner's numbered stream.
        #[serde(skip_serializing_if = "Option::is_none")]
        pos: Option<u64>,
    },
    /// `{"lagged": K}`: K events were dropped because the client read too slowly.
    Lagged {
        /// How many events were dropped.
        lagged: u64,
    },
}

impl ServerLine {
    /// The line that answers request `id`: `Ok` with its value or `Error` with its
    /// refusal.
    pub fn answer(id: u64, result: Result<Value, DroverError>) -> ServerLine {
        match result {
            Ok(ok) => ServerLine::Ok { id, ok },
            Err(error) => ServerLine::Error {
                id: Some(id),
                error,
            },
        }
    }

    /// The line as written, newline included.
    pub fn to_line(&self) -> String {
        match serde_json::to_string(self) {
            Ok(mut text) => {
                text.push('\n');
                text
            }
            // Values are built from our own types; should one ever fail to serialize, the
            // client still gets a well-formed refusal instead of a broken line.
            Err(e) => {
                let id = match self {
                    ServerLine::Ok { id, .. } => Some(*id),
                    ServerLine::Error { id, .. } => *id,
                    _ => None,
                };
                let fallback = ServerLine::Error {
                    id,
                    error: DroverError::new(
                        ErrorCode::Internal,
                        format!("the answer could not be written as JSON: {e}"),
                    ),
                };
                serde_json::to_string(&fallback).unwrap_or_default() + "\n"
            }
        }
    }
}

/// A line the server could not take as a request: the id to answer (when one could be
/// read) and the refusal.
pub type Refusal = (Option<u64>, DroverError);

/// Reads one client line: its id and request, or the `INVALID_REQUEST` refusal to send
/// back (carrying the id when the line had a readable one).
pub fn parse_request_line(line: &[u8]) -> Result<(u64, Request), Refusal> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        (
            None,
            invalid(format!(
                "the line is not JSON ({e}); send one {{\"id\": N, \"request\": {{\"method\": …}}}} object per line"
            )),
        )
    })?;
    let Value::Object(mut object) = value else {
        return Err((
            None,
            invalid(
                "the line is not a JSON object; send {\"id\": N, \"request\": {\"method\": …}}",
            ),
        ));
    };
    let Some(id) = object.get("id").and_then(Value::as_u64) else {
        return Err((
            None,
            invalid(
                "the request has no \"id\" (a non-negative integer); add one so its answer can be matched",
            ),
        ));
    };
    let Some(request) = object.remove("request") else {
        return Err((
            Some(id),
            invalid(
                "the line has no \"request\"; send {\"id\": N, \"request\": {\"method\": …, \"params\": …}}",
            ),
        ));
    };
    let request = decode_request(request).map_err(|e| {
        (
            Some(id),
            invalid(format!(
                "the request is not one drover knows ({e}); check the method name and its params"
            )),
        )
    })?;
    Ok((id, request))
}

/// A request, its `params` defaulted alike for every method: absent, `null` and `{}` mean
/// "no params" (a method without params accepts `{}`; one whose params all have
/// defaults accepts none).
fn decode_request(request: Value) -> Result<Request, serde_json::Error> {
    let first = serde_json::from_value::<Request>(request.clone());
    let Ok(Value::Object(mut object)) = Ok::<Value, ()>(request) else {
        return first;
    };
    if first.is_ok() {
        return first;
    }
    let retry = match object.get("params") {
        None | Some(Value::Null) => {
            object.insert("params".into(), Value::Object(Default::default()));
            true
        }
        Some(Value::Object(params)) if params.is_empty() => {
            object.remove("params");
            true
        }
        _ => false,
    };
    if !retry {
        return first;
    }
    serde_json::from_value::<Request>(Value::Object(object)).or(first)
}

fn invalid(message: impl Into<String>) -> DroverError {
    DroverError::new(ErrorCode::InvalidRequest, message)
}

/// A line read by the client, as it arrived.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "a line is read and handled one at a time; boxing would allocate per event"
)]
pub enum ClientSide {
    /// An answer to a request (or a refusal of a line without an id).
    Answer {
        /// The id of the request answered; `None` when the server could read none.
        id: Option<u64>,
        /// The answer's value, or the refusal.
        result: Result<Value, DroverError>,
    },
    /// A dispatcher event on a subscribed connection.
    Event {
        /// The event, as the dispatcher published it.
        event: DispatchEvent,
        /// Its place in the owner's numbered stream, when the server sent one.
        pos: Option<u64>,
    },
    /// This many events were dropped because the client read too slowly.
    Lagged(u64),
}

/// Reads one server line; `Err` holds what was wrong with it.
pub fn parse_server_line(line: &[u8]) -> Result<ClientSide, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut object) = value else {
        return Err("not a JSON object".into());
    };
    if let Some(event) = object.remove("event") {
        let pos = object.get("pos").and_then(Value::as_u64);
        return serde_json::from_value(event)
            .map(|event| ClientSide::Event { event, pos })
            .map_err(|e| format!("unknown event: {e}"));
    }
    if let Some(lagged) = object.get("lagged") {
        return lagged
            .as_u64()
            .map(ClientSide::Lagged)
            .ok_or_else(|| "\"lagged\" is not a count".to_string());
    }
    let id = object.get("id").and_then(Value::as_u64);
    if let Some(ok) = object.remove("ok") {
        return Ok(ClientSide::Answer { id, result: Ok(ok) });
    }
    if let Some(error) = object.remove("error") {
        let error: DroverError =
            serde_json::from_value(error).map_err(|e| format!("unreadable error: {e}"))?;
        return Ok(ClientSide::Answer {
            id,
            result: Err(error),
        });
    }
    Err("neither an answer, an event nor a lag report".into())
}

/// One line as read: its bytes (without the newline), or the news that it was longer
/// than the limit (its bytes were skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// The line's bytes, without the newline (and without a trailing `\r`).
    Complete(Vec<u8>),
    /// The line was longer than the limit; its bytes were skipped to its end.
    TooLong,
}

/// Reads newline-terminated lines, holding at most `max` bytes of one line.
pub struct LineReader<R> {
    inner: BufReader<R>,
    max: usize,
    /// The line read so far (kept across calls so `next` is cancel-safe).
    partial: Vec<u8>,
    too_long: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of `inner` that holds at most `max` bytes of one line.
    pub fn new(inner: R, max: usize) -> Self {
        LineReader {
            inner: BufReader::new(inner),
            max,
            partial: Vec::new(),
            too_long: false,
        }
    }

    /// The next line, or `None` at the end of the stream. A last line without a newline
    /// still counts. A trailing `\r` is dropped.
    pub async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                if self.partial.is_empty() && !self.too_long {
                    return Ok(None);
                }
                return Ok(Some(self.take()));
            }
            let (chunk, used, complete) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (&available[..at], at + 1, true),
                None => (available, available.len(), false),
            };
            if !self.too_long {
                if self.partial.len() + chunk.len() > self.max {
                    self.too_long = true;
                    self.partial = Vec::new();
                } else {
                    self.partial.extend_from_slice(chunk);
                }
            }
            self.inner.consume(used);
            if complete {
                return Ok(Some(self.take()));
            }
        }
    }

    fn take(&mut self) -> Line {
        if std::mem::take(&mut self.too_long) {
            self.partial = Vec::new();
            return Line::TooLong;
        }
        let mut line = std::mem::take(&mut self.partial);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Line::Complete(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::api::WaitUntil;
    use serde_json::json;

    #[test]
    fn request_lines_parse_or_are_refused_with_a_stable_code() {
        let ok = parse_request_line(br#"{"id": 3, "request": {"method": "ping"}}"#);
        assert_eq!(ok, Ok((3, Request::Ping)));

        let wait = parse_request_line(
            br#"{"id": 4, "request": {"method": "wait", "params": {"run_ids": ["r1"], "any": true}}}"#,
        );
        assert_eq!(
            wait.map(|(_, request)| request),
            Ok(Request::Wait {
                run_ids: vec!["r1".into()],
                workflow: None,
                until: WaitUntil::Terminal,
                any: true,
                timeout_secs: None
            })
        );

        // A workflow scopes kill_all.
        let scoped = parse_request_line(
            br#"{"id": 8, "request": {"method": "kill_all", "params": {"workflow": "w1"}}}"#,
        );
        assert_eq!(
            scoped,
            Ok((
                8,
                Request::KillAll {
                    workflow: Some("w1".into())
                }
            ))
        );

        // (line, the id echoed back)
        let refused: &[(&[u8], Option<u64>)] = &[
            (b"not json", None),
            (b"[1, 2]", None),
            (br#"{"request": {"method": "ping"}}"#, None),
            (br#"{"id": -1, "request": {"method": "ping"}}"#, None),
            (br#"{"id": "a", "request": {"method": "ping"}}"#, None),
            (br#"{"id": 5}"#, Some(5)),
            (
                br#"{"id": 6, "request": {"method": "launch_missiles"}}"#,
                Some(6),
            ),
            (
                br#"{"id": 7, "request": {"method": "show", "params": {}}}"#,
                Some(7),
            ),
        ];
        for (line, id) in refused {
            let text = String::from_utf8_lossy(line);
            let (got_id, e) = parse_request_line(line).expect_err(&text);
            assert_eq!(got_id, *id, "{text}");
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{text}");
            assert!(!e.message.is_empty());
        }
    }

    #[test]
    fn params_default_alike_for_every_method() {
        // No params, `null` and `{}` are one request, whether the method takes no params
        // (ping, budget) or only ones with defaults (runs, kill_all, remove, subscribe, …).
        let cases = [
            ("ping", Request::Ping),
            ("kill_all", Request::KillAll { workflow: None }),
            ("budget", Request::Budget),
            ("counts", Request::Counts),
            ("routes", Request::Routes),
            (
                "runs",
                Request::Runs {
                    state: None,
                    include_removed: false,
                    workflow: None,
                    limit: None,
                    before: None,
                    search: None,
                },
            ),
            (
                "subscribe",
                Request::Subscribe {
                    run_ids: Vec::new(),
                    after: None,
                },
            ),
        ];
        for (method, want) in cases {
            for params in ["", r#", "params": null"#, r#", "params": {}"#] {
                let line = format!(r#"{{"id": 1, "request": {{"method": "{method}"{params}}}}}"#);
                assert_eq!(
                    parse_request_line(line.as_bytes()).map(|(_, r)| r),
                    Ok(want.clone()),
                    "{line}"
                );
            }
        }
        // A method that needs a param says so, however its params are left out.
        for params in ["", r#", "params": null"#, r#", "params": {}"#] {
            let line = format!(r#"{{"id": 1, "request": {{"method": "show"{params}}}}}"#);
            let (_, e) = parse_request_line(line.as_bytes()).expect_err(&line);
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{line}");
        }
    }

    #[test]
    fn server_lines_have_the_documented_shapes() {
        let cases = [
            (
                ServerLine::answer(1, Ok(json!({"pong": true}))),
                json!({"id": 1, "ok": {"pong": true}}),
            ),
            (
                ServerLine::answer(2, Err(DroverError::new(ErrorCode::RunNotFound, "no run"))),
                json!({"id": 2, "error": {"code": "RUN_NOT_FOUND", "message": "no run"}}),
            ),
            (
                ServerLine::Error {
                    id: None,
                    error: DroverError::new(ErrorCode::InvalidRequest, "bad"),
                },
                json!({"id": null, "error": {"code": "INVALID_REQUEST", "message": "bad"}}),
            ),
            (
                ServerLine::Event {
                    event: DispatchEvent::RunRemoved {
                        run_id: "r1".into(),
                    },
                    pos: None,
                },
                json!({"event": {"event": "run_removed", "run_id": "r1"}}),
            ),
            (
                ServerLine::Event {
                    event: DispatchEvent::RunRemoved {
                        run_id: "r1".into(),
                    },
                    pos: Some(12),
                },
                json!({"event": {"event": "run_removed", "run_id": "r1"}, "pos": 12}),
            ),
            (ServerLine::Lagged { lagged: 7 }, json!({"lagged": 7})),
        ];
        for (line, expected) in cases {
            let text = line.to_line();
            assert!(text.ends_with('\n') && !text[..text.len() - 1].contains('\n'));
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(value, expected);
        }
    }

    #[test]
    fn the_client_reads_back_what_the_server_writes() {
        let event = DispatchEvent::Transcript {
            run_id: "r1".into(),
            line: "hello".into(),
            seq: 7,
        };
        let cases = [
            (
                ServerLine::answer(1, Ok(json!([1, 2]))),
                ClientSide::Answer {
                    id: Some(1),
                    result: Ok(json!([1, 2])),
                },
            ),
            (
                ServerLine::answer(2, Ok(Value::Null)),
                ClientSide::Answer {
                    id: Some(2),
                    result: Ok(Value::Null),
                },
            ),
            (
                ServerLine::answer(3, Err(DroverError::new(ErrorCode::NoOwner, "x"))),
                ClientSide::Answer {
                    id: Some(3),
                    result: Err(DroverError::new(ErrorCode::NoOwner, "x")),
                },
            ),
            (
                ServerLine::Event {
                    event: event.clone(),
                    pos: Some(4),
                },
                ClientSide::Event {
                    event,
                    pos: Some(4),
                },
            ),
            (ServerLine::Lagged { lagged: 9 }, ClientSide::Lagged(9)),
        ];
        for (line, expected) in cases {
            assert_eq!(parse_server_line(line.to_line().as_bytes()), Ok(expected));
        }
        for bad in [
            &b"nope"[..],
            b"{}",
            br#"{"lagged": "x"}"#,
            br#"{"event": 1}"#,
        ] {
            assert!(parse_server_line(bad).is_err());
        }
    }

    async fn read_all(input: &[u8], max: usize) -> Vec<Line> {
        let mut reader = LineReader::new(input, max);
        let mut lines = Vec::new();
        while let Some(line) = reader.next().await.unwrap() {
            lines.push(line);
        }
        lines
    }

    #[tokio::test]
    async fn lines_are_bounded_and_an_overlong_one_is_skipped_to_its_end() {
        let long = vec![b'x'; 20];
        let mut input = b"ab\r\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nexactly10!\n\nlast");
        assert_eq!(
            read_all(&input, 10).await,
            vec![
                Line::Complete(b"ab".to_vec()),
                Line::TooLong,
                Line::Complete(b"exactly10!".to_vec()),
                Line::Complete(Vec::new()),
                Line::Complete(b"last".to_vec()),
            ]
        );
        assert_eq!(read_all(&long, 10).await, vec![Line::TooLong]);
        assert_eq!(read_all(b"", 10).await, Vec::<Line>::new());
    }
}
