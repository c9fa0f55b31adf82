//! `codex exec --json` output as drover events: one child per turn, one JSON object per
//! line (docs/PROVIDERS.md §"codex exec").
//!
//! Pure: no I/O, no clock. The state lives for the whole run (the thread id and the
//! thread's token total carry from turn to turn); [`ExecState::begin_turn`] opens each
//! turn. What must stay true:
//! - every turn ends in exactly one `TurnCompleted`: from `turn.completed` or
//!   `turn.failed`, or — when the child ends without either — from
//!   [`ExecState::child_gone`] or [`ExecState::interrupted`];
//! - `turn.completed` usage is the *thread's* running total (a resumed exec counts the
//!   turns before it; checked against the pinned 0.171.0), so a turn's tokens are the
//!   growth since the previous turn's total. A thread resumed after a drover restart
//!   starts from the tokens drover already booked on the run (`LaunchSpec::
//!   resume_tokens`): tokens of a turn cut short by the restart, never booked, are
//!   booked on the first resumed turn; nothing is booked twice;
//! - each model request's usage streams as `Usage` from Codex's rollout file
//!   ([`ExecState::rollout_line`]), provisional until the turn's end books the growth
//!   of the running total;
//! - "Reconnecting… n/m (…)" errors are retries in progress (`RateLimited`); progress
//!   after them clears it;
//! - nothing codex writes panics; a line that cannot be understood is a `Notice`.

use serde_json::Value;

use crate::providers::{ProviderEvent, Tokens, TurnEnd, notice};

use super::protocol::{
    ErrorClass, classify_message, clip, is_retry_message, item_completed, item_started,
    model_usage, rate_limited, str_of, usage_tokens,
};

/// What a run's exec turns have in common, and the turn in flight.
#[derive(Debug, Default)]
pub struct ExecState {
    model: Option<String>,
    thread_id: Option<String>,
    /// The thread's token total after the last turn that reported one.
    thread_total: Option<Tokens>,
    turn: Option<ExecTurn>,
    rate_limited: bool,
}

#[derive(Debug, Default)]
struct ExecTurn {
    text: Option<String>,
    /// The last error Codex reported (not a retry).
    error: Option<(String, ErrorClass)>,
}

impl ExecState {
    /// `thread`: continue this Codex thread (a resumed run), whose tokens booked so far
    /// are `booked` (the thread's total as far as drover knows).
    pub fn new(model: Option<String>, thread: Option<String>, booked: Option<Tokens>) -> ExecState {
        ExecState {
            model,
            thread_total: booked.filter(|_| thread.is_some()),
            thread_id: thread,
            ..ExecState::default()
        }
    }

    /// The thread the next turn continues (`exec … resume THREAD`), if any yet.
    pub fn thread_id(&self) -> Option<&str> {
        self.thread_id.as_deref()
    }

    /// A turn is in flight (its child started and no end was reported yet).
    pub fn turn_open(&self) -> bool {
        self.turn.is_some()
    }

    /// A child was started for a new turn.
    pub fn begin_turn(&mut self) {
        self.turn = Some(ExecTurn::default());
        self.rate_limited = false;
    }

    /// One stdout line of the turn's child.
    pub fn parse_line(&mut self, line: &str) -> Vec<ProviderEvent> {
        let line = line.trim();
        if line.is_empty() {
            return Vec::new();
        }
        let event = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => {
                return vec![notice(format!(
                    "skipped a line codex exec wrote that is not a JSON event: {}",
                    clip(line)
                ))];
            }
        };
        let mut events = Vec::new();
        match str_of(&event, "type") {
            "thread.started" => {
                let thread = str_of(&event, "thread_id");
                if !thread.is_empty() && self.thread_id.as_deref() != Some(thread) {
                    if self.thread_id.is_some() {
                        // A different thread: its total starts again.
                        self.thread_total = None;
                    }
                    self.thread_id = Some(thread.to_string());
                    events.push(ProviderEvent::Session {
                        session_id: thread.to_string(),
                        model: self.model.clone(),
                    });
                }
            }
            "turn.started" | "item.updated" => {}
            "item.started" => {
                self.progress(&mut events);
                events.extend(item_started(event.get("item").unwrap_or(&Value::Null)));
            }
            "item.completed" => {
                self.progress(&mut events);
                let (more, text) = item_completed(event.get("item").unwrap_or(&Value::Null));
                events.extend(more);
                if let (Some(text), Some(turn)) = (text, &mut self.turn) {
                    turn.text = Some(text);
                }
            }
            "turn.completed" => {
                self.progress(&mut events);
                let Some(turn) = self.turn.take() else {
                    return vec![notice("codex exec ended a turn twice; ignored".into())];
                };
                let total = event.get("usage").map(usage_tokens).unwrap_or_default();
                let tokens = match &self.thread_total {
                    Some(before) => total.saturating_sub(before),
                    None => total,
                };
                self.thread_total = Some(total);
                events.push(ProviderEvent::TurnCompleted(TurnEnd {
                    subtype: "success".into(),
                    text: turn.text,
                    session_id: self.thread_id.clone(),
                    tokens,
                    model_usage: model_usage(self.model.as_deref(), tokens),
                    ..TurnEnd::default()
                }));
            }
            "turn.failed" => {
                let Some(turn) = self.turn.take() else {
                    return vec![notice(
                        "codex exec failed a turn that had ended; ignored".into(),
                    )];
                };
                let message = event
                    .get("error")
                    .map(|e| str_of(e, "message").to_string())
                    .filter(|m| !m.is_empty())
                    .or_else(|| turn.error.as_ref().map(|(m, _)| m.clone()))
                    .unwrap_or_default();
                let class = classify_message(&message);
                events.push(ProviderEvent::TurnCompleted(TurnEnd {
                    is_error: true,
                    subtype: "failed".into(),
                    text: (!message.is_empty()).then_some(message),
                    session_id: self.thread_id.clone(),
                    api_error_status: class.status,
                    transient: class.transient,
                    ..TurnEnd::default()
                }));
            }
            "error" => {
                let message = str_of(&event, "message");
                let class = classify_message(message);
                if is_retry_message(message) {
                    self.rate_limited = true;
                    events.push(rate_limited(message, &class));
                } else {
                    if let Some(turn) = &mut self.turn {
                        turn.error = Some((message.to_string(), class));
                    }
                    events.push(notice(clip(&format!("Codex: {message}"))));
                }
            }
            other => events.push(notice(format!(
                "codex exec wrote an event drover does not read: {}",
                clip(other)
            ))),
        }
        events
    }

    /// The turn's child ended; if the turn never reported its end, it ends now as an
    /// error (transient when the last error Codex reported was).
    pub fn child_gone(
        &mut self,
        code: Option<i32>,
        signal: Option<i32>,
        stderr_tail: &str,
    ) -> Vec<ProviderEvent> {
        let Some(turn) = self.turn.take() else {
            return Vec::new();
        };
        let how = match (code, signal) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(signal)) => format!("signal {signal}"),
            (None, None) => "no exit status".to_string(),
        };
        let (message, class) = match turn.error {
            Some((message, class)) => (message, class),
            None => (
                format!(
                    "codex exec ended without finishing its turn ({how}){}",
                    tail_of(stderr_tail)
                ),
                ErrorClass {
                    status: None,
                    transient: false,
                },
            ),
        };
        vec![ProviderEvent::TurnCompleted(TurnEnd {
            is_error: true,
            subtype: "exited".into(),
            text: Some(message),
            session_id: self.thread_id.clone(),
            api_error_status: class.status,
            transient: class.transient,
            ..TurnEnd::default()
        })]
    }

    /// The turn was interrupted (its child ended by drover).
    pub fn interrupted(&mut self) -> Vec<ProviderEvent> {
        let Some(turn) = self.turn.take() else {
            return Vec::new();
        };
        vec![ProviderEvent::TurnCompleted(TurnEnd {
            is_error: true,
            subtype: "interrupted".into(),
            text: turn.text,
            session_id: self.thread_id.clone(),
            ..TurnEnd::default()
        })]
    }

    /// One line of Codex's own record of the thread (its rollout file, which the exec
    /// task reads as it grows): a `token_count` event is one model request's usage
    /// (`info.last_token_usage`), reported as `Usage` while a turn is open. `codex exec
    /// --json` reports usage only when its turn ends, too late for a cap to stop a turn
    /// that keeps calling tools (docs/ARCHITECTURE.md §"Money"); the turn's end still
    /// books what it cost. Every other line of the file is skipped without a word: the
    /// file is Codex's, not a protocol drover speaks.
    pub fn rollout_line(&mut self, line: &str) -> Vec<ProviderEvent> {
        if self.turn.is_none() {
            return Vec::new();
        }
        let Ok(event) = serde_json::from_str::<Value>(line.trim()) else {
            return Vec::new();
        };
        let payload = event.get("payload").unwrap_or(&Value::Null);
        if str_of(&event, "type") != "event_msg" || str_of(payload, "type") != "token_count" {
            return Vec::new();
        }
        let Some(last) = payload.get("info").and_then(|i| i.get("last_token_usage")) else {
            return Vec::new();
        };
        let tokens = usage_tokens(last);
        if tokens == Tokens::default() {
            return Vec::new();
        }
        vec![ProviderEvent::Usage {
            model: self.model.clone(),
            tokens,
        }]
    }

    fn progress(&mut self, events: &mut Vec<ProviderEvent>) {
        if std::mem::take(&mut self.rate_limited) {
            events.push(ProviderEvent::RateLimitCleared);
        }
    }
}

fn tail_of(stderr: &str) -> String {
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    match last {
        Some(line) => format!(": {}", clip(line.trim())),
        None => String::new(),
    }
}
