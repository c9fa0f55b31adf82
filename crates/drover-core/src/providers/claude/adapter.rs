//! Claude Code's stream-json as a [`Protocol`] of the session loop ([`session`]), which
//! owns the child, the handshake → running → ending phases and their invariants.
//!
//! [`StreamJson`] adds to the pure [`ParseState`] what running a session needs: the
//! `initialize` handshake's bound, and whether a turn is in flight (a turn is open from
//! its `user` line to its `result`), so a `Shutdown` mid-turn sends `interrupt` first:
//! Claude Code runs a Bash tool in a session of its own, outside the child's process
//! group, so only an interrupt stops the tool; signals would leave it running. What must
//! stay true besides the loop's invariants: the handshake's notice names its bound, and
//! a turn counts as open until its `result` line, whatever else the CLI writes.

use std::time::Duration;

use crate::UnixMillis;
use crate::providers::process::ShutdownTimings;
use crate::providers::session::{self, Handshake, Protocol};
use crate::providers::{
    AdapterHandle, LaunchError, LaunchSpec, PermissionAnswer, ProviderEvent, ProviderEventSink,
    notice,
};
use crate::spec::PermissionPolicy;

use super::protocol::{self, ParseState};
use super::{args, encode};

/// How long the adapter waits on its child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterTimings {
    /// For the answer to `initialize` (MCP servers can make the CLI slow to answer).
    pub handshake: Duration,
    /// For a turn in flight to end after an `interrupt`, before the child is ended.
    pub interrupt: Duration,
    /// How the child is ended.
    pub shutdown: ShutdownTimings,
}

impl Default for AdapterTimings {
    fn default() -> Self {
        AdapterTimings {
            handshake: Duration::from_secs(60),
            interrupt: Duration::from_secs(3),
            shutdown: ShutdownTimings::default(),
        }
    }
}

/// Start a Claude Code child for `spec` on the session loop, with the default timings.
/// Must be called inside a tokio runtime, from an async task (see
/// [`crate::providers::process`] on the parent-death signal).
pub fn launch(spec: LaunchSpec, sink: ProviderEventSink) -> Result<AdapterHandle, LaunchError> {
    launch_with(spec, sink, AdapterTimings::default())
}

/// [`launch`] with explicit timings (tests shorten them).
pub fn launch_with(
    spec: LaunchSpec,
    sink: ProviderEventSink,
    timings: AdapterTimings,
) -> Result<AdapterHandle, LaunchError> {
    let protocol = StreamJson::new(spec.policy, timings.handshake);
    let timings = session::Timings {
        interrupt: timings.interrupt,
        shutdown: timings.shutdown,
    };
    session::launch(spec, protocol, sink, timings)
}

/// One Claude Code session as the loop drives it: the parse state, the handshake's
/// deadline and the turn in flight.
#[derive(Debug)]
pub struct StreamJson {
    state: ParseState,
    /// How long `initialize` may go unanswered.
    handshake_bound: Duration,
    /// When it stops waiting for the answer to `initialize` (set by `start`).
    handshake_deadline: Option<UnixMillis>,
    /// The deadline passed with no answer.
    timed_out: bool,
    /// A `user` line was sent and its `result` has not come yet.
    turn_open: bool,
    /// Lines of drover's commands, written before the parser's replies.
    outgoing: Vec<String>,
}

impl StreamJson {
    /// A session under `policy` whose handshake may take `handshake_bound`.
    pub fn new(policy: PermissionPolicy, handshake_bound: Duration) -> StreamJson {
        StreamJson {
            state: ParseState::new(policy),
            handshake_bound,
            handshake_deadline: None,
            timed_out: false,
            turn_open: false,
            outgoing: Vec::new(),
        }
    }
}

impl Protocol for StreamJson {
    const NAME: &'static str = "the CLI";

    fn args(&self, spec: &LaunchSpec) -> Vec<String> {
        args::build_args(spec)
    }

    fn start(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        let bound = i64::try_from(self.handshake_bound.as_millis()).unwrap_or(i64::MAX);
        self.handshake_deadline = Some(now.saturating_add(bound));
        let line = self.state.initialize_request();
        self.outgoing.push(line);
        Vec::new()
    }

    fn handshake(&self) -> Handshake {
        if self.timed_out {
            Handshake::Failed
        } else {
            self.state.handshake()
        }
    }

    fn version(&self) -> Option<String> {
        self.state.version().map(str::to_string)
    }

    fn parse_line(&mut self, line: &str, now: UnixMillis) -> Vec<ProviderEvent> {
        let events = protocol::parse_line(line, &mut self.state, now);
        if events
            .iter()
            .any(|e| matches!(e, ProviderEvent::TurnCompleted(_)))
        {
            self.turn_open = false;
        }
        events
    }

    fn start_turn(&mut self, prompt: String, _now: UnixMillis) -> Vec<ProviderEvent> {
        self.turn_open = true;
        self.outgoing.push(encode::user_turn(&prompt));
        Vec::new()
    }

    fn answer(&mut self, request_id: &str, answer: &PermissionAnswer) -> Result<(), String> {
        let line = self.state.answer(request_id, answer)?;
        self.outgoing.push(line);
        Ok(())
    }

    fn interrupt(&mut self, _now: UnixMillis) -> Vec<ProviderEvent> {
        let line = self.state.interrupt_request();
        self.outgoing.push(line);
        Vec::new()
    }

    fn turn_open(&self) -> bool {
        self.turn_open
    }

    fn take_outgoing(&mut self) -> Vec<String> {
        let mut lines = std::mem::take(&mut self.outgoing);
        lines.extend(self.state.take_outgoing());
        lines
    }

    fn next_deadline(&self) -> Option<UnixMillis> {
        match self.handshake() {
            Handshake::Waiting => self.handshake_deadline,
            Handshake::Done | Handshake::Failed => None,
        }
    }

    fn expire(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        let passed = self.handshake_deadline.is_some_and(|at| at <= now);
        if !passed || self.handshake() != Handshake::Waiting {
            return Vec::new();
        }
        self.timed_out = true;
        let secs = self.handshake_bound.as_secs_f64();
        vec![notice(format!(
            "the CLI did not answer the handshake within {secs:.1} s"
        ))]
    }
}

#[cfg(test)]
#[path = "adapter_tests.rs"]
mod tests;
