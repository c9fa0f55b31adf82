//! The Claude Code adapter's driver: one tokio task per run that owns the child, feeds
//! stdout lines to [`protocol::parse_line`], turns [`ProviderCommand`]s into stdin lines
//! and forwards events to the dispatcher.
//!
//! What must stay true:
//! - the run's events start with `Ready` (after the `initialize` handshake) and end
//!   with exactly one `Exited`, after which nothing is sent; a child that dies, says
//!   nothing within the handshake bound, or refuses the handshake gets no `Ready`, only
//!   notices and `Exited` with its stderr tail;
//! - events seen before the handshake completes are held and sent after `Ready`;
//!   commands sent before it are queued and carried out after it;
//! - the child is always ended through [`ProviderProcess::shutdown`] (which reaps it
//!   and sweeps its process group), whether it exited by itself, closed stdout, was
//!   asked to stop, or the dispatcher went away (the command sender or the event
//!   receiver dropped); stdout keeps being read while it ends;
//! - nothing the child writes can make the task panic.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::process::ChildStdout;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::clock::now_millis;
use crate::providers::process::{
    self, ExitReport, Line, LineReader, MAX_LINE_BYTES, ProviderProcess, ShutdownTimings,
};
use crate::providers::sink::EventSink;
use crate::providers::{
    AdapterHandle, LaunchError, LaunchSpec, ProviderCommand, ProviderEvent, ProviderEventSink,
    notice,
};

use super::protocol::{self, Handshake, ParseState};
use super::{args, encode};

/// How long the adapter waits on its child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterTimings {
    /// For the answer to `initialize` (MCP servers can make the CLI slow to answer).
    pub handshake: Duration,
    /// For a turn in flight to end after an `interrupt`, before the child is ended.
    pub interrupt: Duration,
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

/// Start a Claude Code child for `spec` and its driver task, with the default timings.
/// Must be called inside a tokio runtime, from an async task (see [`process`] on the
/// parent-death signal).
pub fn launch(spec: LaunchSpec, sink: ProviderEventSink) -> Result<AdapterHandle, LaunchError> {
    launch_with(spec, sink, AdapterTimings::default())
}

/// [`launch`] with explicit timings (tests shorten them).
pub fn launch_with(
    spec: LaunchSpec,
    sink: ProviderEventSink,
    timings: AdapterTimings,
) -> Result<AdapterHandle, LaunchError> {
    let runtime = process::adapter_runtime(&spec)?;
    let (child, stdout) = process::spawn_spec(&spec, &args::build_args(&spec))?;
    let pid = child.pid();
    tracing::debug!(run_id = %spec.run_id, pid, "claude child started");
    let (commands, rx) = mpsc::unbounded_channel();
    let driver = Driver {
        out: EventSink::new(spec.run_id, sink),
        state: ParseState::new(spec.policy),
        ready: false,
        held: Vec::new(),
        child,
        stdout,
        commands: rx,
        timings,
        turn_open: false,
    };
    runtime.spawn(driver.run());
    Ok(AdapterHandle {
        commands,
        pid: Some(pid),
    })
}

/// Why the running phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Asked to, or nobody is left to talk to.
    Shutdown,
    /// The child exited, or closed stdout.
    ChildGone,
    /// The handshake failed or timed out (a notice says which).
    NoHandshake,
}

struct Driver {
    out: EventSink,
    state: ParseState,
    /// `Ready` was sent; until then events are held.
    ready: bool,
    held: Vec<ProviderEvent>,
    child: ProviderProcess,
    stdout: LineReader<ChildStdout>,
    commands: mpsc::UnboundedReceiver<ProviderCommand>,
    timings: AdapterTimings,
    /// A turn was sent and its `result` has not come yet.
    turn_open: bool,
}

impl Driver {
    async fn run(mut self) {
        let stop = match self.handshake().await {
            Ok(queued) => {
                self.emit(ProviderEvent::Ready {
                    version: self.state.version().map(str::to_string),
                })
                .await;
                for command in queued {
                    self.command(command).await;
                }
                self.running().await
            }
            Err(stop) => stop,
        };
        tracing::debug!(run_id = %self.out.run_id(), ?stop, "ending the claude child");
        let Driver {
            out,
            state,
            held,
            child,
            stdout,
            timings,
            ..
        } = self;
        let mut ending = Ending { out, state };
        // Held only when no `Ready` came: they go out without it.
        ending.out.send_all(held).await;
        let report = ending.close(child, stdout, timings.shutdown).await;
        ending
            .out
            .send(ProviderEvent::Exited {
                code: report.code,
                signal: report.signal,
                stderr_tail: report.stderr_tail,
            })
            .await;
    }

    /// Send `initialize` and wait for its answer. Returns the commands that came
    /// meanwhile, or why the run cannot go on.
    async fn handshake(&mut self) -> Result<VecDeque<ProviderCommand>, Stop> {
        let line = self.state.initialize_request();
        self.child.send_line(line);
        let deadline = Instant::now() + self.timings.handshake;
        let mut queued = VecDeque::new();
        loop {
            tokio::select! {
                line = self.stdout.next_line() => match line {
                    Ok(Some(line)) => {
                        self.line(line).await;
                        match self.state.handshake() {
                            Handshake::Waiting => {}
                            Handshake::Done => return Ok(queued),
                            // The parser's notice says why.
                            Handshake::Failed { .. } => return Err(Stop::NoHandshake),
                        }
                    }
                    _ => return Err(Stop::ChildGone),
                },
                command = self.commands.recv() => match command {
                    None | Some(ProviderCommand::Shutdown) => return Err(Stop::Shutdown),
                    Some(command) => queued.push_back(command),
                },
                () = self.child.exited() => return Err(Stop::ChildGone),
                () = tokio::time::sleep_until(deadline) => {
                    let secs = self.timings.handshake.as_secs_f64();
                    self.emit(notice(format!(
                        "the CLI did not answer the handshake within {secs:.1} s"
                    )))
                    .await;
                    return Err(Stop::NoHandshake);
                }
            }
            if !self.out.is_open() {
                return Err(Stop::Shutdown);
            }
        }
    }

    async fn running(&mut self) -> Stop {
        loop {
            tokio::select! {
                line = self.stdout.next_line() => match line {
                    Ok(Some(line)) => self.line(line).await,
                    // EOF (or a broken pipe): the child is ending or useless.
                    _ => return Stop::ChildGone,
                },
                command = self.commands.recv() => match command {
                    None => return Stop::Shutdown,
                    Some(ProviderCommand::Shutdown) => {
                        self.interrupt_turn().await;
                        return Stop::Shutdown;
                    }
                    Some(command) => self.command(command).await,
                },
                () = self.child.exited() => return Stop::ChildGone,
            }
            if !self.out.is_open() {
                return Stop::Shutdown;
            }
        }
    }

    /// Ends a turn in flight with an `interrupt` before the child is ended: Claude Code
    /// runs a Bash tool in a session of its own, outside the child's process group, so
    /// only an interrupt stops the tool; signals would leave it running. Bounded by
    /// `timings.interrupt`.
    async fn interrupt_turn(&mut self) {
        if !self.turn_open {
            return;
        }
        let line = self.state.interrupt_request();
        if !self.child.send_line(line) {
            return;
        }
        let deadline = Instant::now() + self.timings.interrupt;
        while self.turn_open {
            tokio::select! {
                line = self.stdout.next_line() => match line {
                    Ok(Some(line)) => self.line(line).await,
                    _ => return,
                },
                () = self.child.exited() => return,
                () = tokio::time::sleep_until(deadline) => {
                    let secs = self.timings.interrupt.as_secs_f64();
                    self.emit(notice(format!(
                        "the CLI did not end its turn within {secs:.1} s of an interrupt"
                    )))
                    .await;
                    return;
                }
            }
        }
    }

    async fn line(&mut self, line: Line) {
        let events = parse(&mut self.state, line);
        for reply in self.state.take_outgoing() {
            self.child.send_line(reply);
        }
        for event in events {
            self.emit(event).await;
        }
    }

    async fn command(&mut self, command: ProviderCommand) {
        let line = match command {
            ProviderCommand::StartTurn { prompt } => {
                self.turn_open = true;
                encode::user_turn(&prompt)
            }
            ProviderCommand::Answer { request_id, answer } => {
                match self.state.answer(&request_id, &answer) {
                    Ok(line) => line,
                    Err(text) => return self.emit(notice(text)).await,
                }
            }
            ProviderCommand::Interrupt => self.state.interrupt_request(),
            // Handled by the loops.
            ProviderCommand::Shutdown => return,
        };
        if !self.child.send_line(line) {
            self.emit(notice(
                "could not write to the CLI: its stdin is closed".into(),
            ))
            .await;
        }
    }

    async fn emit(&mut self, event: ProviderEvent) {
        if matches!(event, ProviderEvent::TurnCompleted(_)) {
            self.turn_open = false;
        }
        if !self.ready {
            if matches!(event, ProviderEvent::Ready { .. }) {
                self.ready = true;
                self.out.send(event).await;
                let held = std::mem::take(&mut self.held);
                self.out.send_all(held).await;
            } else {
                self.held.push(event);
            }
            return;
        }
        self.out.send(event).await;
    }
}

/// The last phase: the child is being ended; its output is still read and reported,
/// but nothing is written to it any more.
struct Ending {
    out: EventSink,
    state: ParseState,
}

impl Ending {
    async fn close(
        &mut self,
        child: ProviderProcess,
        mut stdout: LineReader<ChildStdout>,
        timings: ShutdownTimings,
    ) -> ExitReport {
        let shutdown = child.shutdown(timings);
        tokio::pin!(shutdown);
        let mut eof = false;
        let report = loop {
            tokio::select! {
                report = &mut shutdown => break report,
                line = stdout.next_line(), if !eof => match line {
                    Ok(Some(line)) => self.line(line).await,
                    _ => eof = true,
                },
            }
        };
        if !eof {
            // The group is gone; what it wrote is still in the pipe.
            let drain = async {
                while let Ok(Some(line)) = stdout.next_line().await {
                    self.line(line).await;
                }
            };
            if tokio::time::timeout(timings.drain, drain).await.is_err() {
                tracing::warn!(run_id = %self.out.run_id(), "the child's stdout stayed open after it ended");
            }
        }
        report
    }

    async fn line(&mut self, line: Line) {
        let events = parse(&mut self.state, line);
        // Nobody reads stdin any more: replies are dropped.
        self.state.take_outgoing();
        self.out.send_all(events).await;
    }
}

fn parse(state: &mut ParseState, line: Line) -> Vec<ProviderEvent> {
    match line {
        Line::Text(text) => protocol::parse_line(&text, state, now_millis()),
        Line::TooLong { bytes } => vec![notice(format!(
            "skipped a line of {bytes} bytes (the limit is {} MB)",
            MAX_LINE_BYTES / (1024 * 1024)
        ))],
    }
}

#[cfg(test)]
#[path = "adapter_tests.rs"]
mod tests;
