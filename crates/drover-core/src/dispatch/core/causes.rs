//! The words of a failure: the note a run gets when its child ends on its own (before or
//! after its handshake) and when the provider ends a turn with an error.
//!
//! What must stay true: a note names what the user can act on — the exit status, the
//! child's last stderr line (quoted), why a handshake failed, the HTTP status and the
//! model API's own message — and never the result's subtype where it means nothing
//! (Claude reports a failed API call as `subtype: success`, `is_error: true`); each
//! quoted piece is one line and bounded.

use crate::providers::TurnEnd;
use crate::text::{clip, one_line};

/// The most characters a quoted piece (a stderr line, an API message) keeps.
const QUOTE_MAX_CHARS: usize = 200;

/// How a child ended: `exit code 1`, `signal 9`.
pub(crate) fn exit_words(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown status".to_string(),
    }
}

/// The last line of a stderr tail with something to read, on one line.
pub(crate) fn last_stderr_line(stderr_tail: &str) -> Option<String> {
    stderr_tail
        .lines()
        .rev()
        .map(one_line)
        .find(|line| !line.is_empty())
}

/// The note of a child that ended by itself. `ready`: its handshake was done;
/// `launch_notice`: what the adapter said before `Ready` (a refused or unanswered
/// handshake).
pub(super) fn exit_note(
    ready: bool,
    launch_notice: Option<&str>,
    code: Option<i32>,
    signal: Option<i32>,
    stderr_tail: &str,
) -> String {
    let how = exit_words(code, signal);
    let mut note = if ready {
        format!("the provider process ended unexpectedly ({how})")
    } else {
        match launch_notice.map(one_line).filter(|n| !n.is_empty()) {
            Some(why) => format!(
                "the provider did not start: {} ({how})",
                clip(&why, QUOTE_MAX_CHARS)
            ),
            None => format!("the provider did not start ({how})"),
        }
    };
    match last_stderr_line(stderr_tail) {
        Some(line) => {
            note.push_str(&format!(
                "; its last stderr line: \"{}\"",
                clip(&line, QUOTE_MAX_CHARS)
            ));
        }
        None => note.push_str("; it wrote nothing to stderr"),
    }
    note
}

/// The note of a turn the provider ended with an error.
pub(super) fn turn_error_note(end: &TurnEnd) -> String {
    let words = end
        .api_message
        .as_deref()
        .or(end.text.as_deref())
        .map(one_line)
        .filter(|w| !w.is_empty())
        .map(|w| clip(&w, QUOTE_MAX_CHARS));
    match (end.api_error_status, words) {
        (Some(status), Some(words)) => format!("the model API failed with HTTP {status}: {words}"),
        (Some(status), None) => format!("the model API failed with HTTP {status}"),
        (None, words) => {
            // A subtype that says nothing about the failure is left out.
            let subtype = Some(end.subtype.trim())
                .filter(|s| !s.is_empty() && !matches!(*s, "success" | "unknown"));
            let said: Vec<String> = subtype
                .map(str::to_string)
                .into_iter()
                .chain(words)
                .collect();
            if said.is_empty() {
                "the provider ended the turn with an error".to_string()
            } else {
                format!(
                    "the provider ended the turn with an error: {}",
                    said.join(": ")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_ends_by_itself_is_told_with_its_last_stderr_line() {
        type Case = (
            bool,
            Option<&'static str>,
            Option<i32>,
            Option<i32>,
            &'static str,
            &'static str,
        );
        let cases: &[Case] = &[
            (
                false,
                None,
                Some(1),
                None,
                "starting\nInvalid API key · Please run /login\n\n",
                "the provider did not start (exit code 1); its last stderr line: \"Invalid API key · Please run /login\"",
            ),
            (
                false,
                Some("the CLI did not answer the handshake within 60.0 s"),
                None,
                Some(9),
                "",
                "the provider did not start: the CLI did not answer the handshake within 60.0 s (signal 9); it wrote nothing to stderr",
            ),
            (
                false,
                Some("the CLI refused the handshake:\n  unknown option"),
                Some(2),
                None,
                "error: unknown option '--input-format'\r\n",
                "the provider did not start: the CLI refused the handshake: unknown option (exit code 2); its last stderr line: \"error: unknown option '--input-format'\"",
            ),
            (
                false,
                Some("   "),
                None,
                None,
                "  \n\t\n",
                "the provider did not start (unknown status); it wrote nothing to stderr",
            ),
            (
                true,
                Some("ignored once ready"),
                Some(1),
                None,
                "Error: simulated crash",
                "the provider process ended unexpectedly (exit code 1); its last stderr line: \"Error: simulated crash\"",
            ),
        ];
        for (ready, notice, code, signal, tail, want) in cases {
            assert_eq!(
                exit_note(*ready, *notice, *code, *signal, tail),
                *want,
                "{tail:?}"
            );
        }
    }

    #[test]
    fn a_long_stderr_line_is_clipped() {
        let tail = "x".repeat(10_000);
        let note = exit_note(false, None, Some(1), None, &tail);
        assert!(note.chars().count() < 300, "{note}");
    }

    #[test]
    fn a_failed_turn_names_the_http_status_and_the_apis_message() {
        let end =
            |subtype: &str, text: Option<&str>, status: Option<u16>, api: Option<&str>| TurnEnd {
                is_error: true,
                subtype: subtype.into(),
                text: text.map(str::to_string),
                api_error_status: status,
                api_message: api.map(str::to_string),
                ..TurnEnd::default()
            };
        let cases = [
            // Claude after its retries: `subtype: success`, the message read from the JSON.
            (
                end(
                    "success",
                    Some(
                        r#"API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
                    ),
                    Some(500),
                    Some("Internal server error"),
                ),
                "the model API failed with HTTP 500: Internal server error",
            ),
            (
                end(
                    "error_during_execution",
                    Some("API Error: 529 Overloaded"),
                    Some(529),
                    Some("Overloaded"),
                ),
                "the model API failed with HTTP 529: Overloaded",
            ),
            // Codex and OpenCode give the message as the text.
            (
                end(
                    "failed",
                    Some("unexpected status 502 Bad Gateway"),
                    Some(502),
                    None,
                ),
                "the model API failed with HTTP 502: unexpected status 502 Bad Gateway",
            ),
            (
                end("success", None, Some(503), None),
                "the model API failed with HTTP 503",
            ),
            (
                end(
                    "success",
                    Some("Invalid API key · Please run /login"),
                    None,
                    None,
                ),
                "the provider ended the turn with an error: Invalid API key · Please run /login",
            ),
            (
                end("error_max_turns", None, None, None),
                "the provider ended the turn with an error: error_max_turns",
            ),
            (
                end("error_during_execution", Some("tool\nfailed"), None, None),
                "the provider ended the turn with an error: error_during_execution: tool failed",
            ),
            (
                end("success", Some("  "), None, None),
                "the provider ended the turn with an error",
            ),
        ];
        for (end, want) in cases {
            assert_eq!(turn_error_note(&end), want, "{end:?}");
        }
    }
}
