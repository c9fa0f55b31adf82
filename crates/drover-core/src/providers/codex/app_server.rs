//! The `codex app-server` driver: one tokio task per run that owns the child, feeds its
//! lines, drover's commands and the clock to [`AppState`], writes what it says to the
//! child and forwards its events.
//!
//! What must stay true:
//! - `Ready` is the run's first event (events the state produces before it are held);
//!   a child that refuses or does not answer the handshake within its bound gets no
//!   `Ready`, only notices and `Exited`;
//! - the task ends with exactly one `Exited`, after which nothing is sent;
//! - on `Shutdown` a turn in flight is interrupted first (approvals cancelled,
//!   `turn/interrupt`), bounded by `timings.interrupt`; then the child is always ended
//!   through [`ProviderProcess::shutdown`] (closing stdin ends the app-server), which
//!   reaps it and sweeps its group, whether it exited by itself, closed stdout, was
//!   asked to stop, or the dispatcher went away; the processes Codex started outside
//!   that group are noted before and killed after ([`sweep`]);
//! - nothing the child writes can make the task panic.

use tokio::process::ChildStdout;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::UnixMillis;
use crate::providers::process::{
    self, ExitReport, Line, LineReader, MAX_LINE_BYTES, ProviderProcess, ShutdownTimings,
};
use crate::providers::{
    AdapterHandle, LaunchError, LaunchSpec, ProviderCommand, ProviderEvent, ProviderEventSink,
};

use super::AdapterTimings;
use super::app_protocol::{AppState, Handshake};
use super::args;
use crate::clock::now_millis;
use crate::providers::notice;
use crate::providers::sink::EventSink;
use crate::providers::sweep;

/// Start `codex app-server` for `spec` and its driver task.
pub fn launch(
    spec: LaunchSpec,
    sink: ProviderEventSink,
    timings: AdapterTimings,
) -> Result<AdapterHandle, LaunchError> {
    let runtime = process::adapter_runtime(&spec)?;
    let (child, stdout) = process::spawn_spec(&spec, &args::app_server_args(&spec))?;
    let pid = child.pid();
    tracing::debug!(run_id = %spec.run_id, pid, "codex app-server started");
    let mut state = AppState::new(&spec, timings.bounds);
    state.start(now_millis());
    let (commands, rx) = mpsc::unbounded_channel();
    let driver = Driver {
        out: EventSink::new(spec.run_id, sink),
        state,
        ready: false,
        held: Vec::new(),
        child,
        stdout,
        commands: rx,
        timings,
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
    state: AppState,
    /// `Ready` was sent; until then events are held.
    ready: bool,
    held: Vec<ProviderEvent>,
    child: ProviderProcess,
    stdout: LineReader<ChildStdout>,
    commands: mpsc::UnboundedReceiver<ProviderCommand>,
    timings: AdapterTimings,
}

/// The instant of a wall-clock deadline.
fn instant_of(deadline: UnixMillis) -> Instant {
    let wait = deadline.saturating_sub(now_millis()).max(0);
    Instant::now() + std::time::Duration::from_millis(wait as u64)
}

impl Driver {
    async fn run(mut self) {
        self.flush();
        let stop = self.running().await;
        tracing::debug!(run_id = %self.out.run_id(), ?stop, "ending codex app-server");
        // What Codex starts in sessions of its own is ended by the one sweep (see
        // [`sweep`]), run by the child's shutdown.
        let Driver {
            mut out,
            mut state,
            held,
            child,
            stdout,
            timings,
            ..
        } = self;
        // Held only when no `Ready` came: they go out without it.
        out.send_all(held).await;
        let report = close(&mut out, &mut state, child, stdout, timings.shutdown).await;
        out.send(ProviderEvent::Exited {
            code: report.code,
            signal: report.signal,
            stderr_tail: report.stderr_tail,
        })
        .await;
    }

    async fn running(&mut self) -> Stop {
        loop {
            let deadline = self.state.next_deadline().map(instant_of);
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
                () = sleep_until(deadline) => {
                    let events = self.state.expire(now_millis());
                    self.emit_all(events).await;
                }
            }
            if *self.state.handshake() == Handshake::Failed {
                return Stop::NoHandshake;
            }
            if !self.out.is_open() {
                return Stop::Shutdown;
            }
        }
    }

    /// Ends a turn in flight before the child is ended, so a tool Codex runs stops with
    /// it; bounded by `timings.interrupt`.
    async fn interrupt_turn(&mut self) {
        if !self.state.turn_open() {
            return;
        }
        // Before the interrupt: it may orphan a command without ending it.
        sweep::note_now(self.child.pid());
        let events = self.state.interrupt(now_millis());
        self.flush();
        self.emit_all(events).await;
        let deadline = Instant::now() + self.timings.interrupt;
        while self.state.turn_open() {
            tokio::select! {
                line = self.stdout.next_line() => match line {
                    Ok(Some(line)) => self.line(line).await,
                    _ => return,
                },
                () = self.child.exited() => return,
                () = tokio::time::sleep_until(deadline) => {
                    let secs = self.timings.interrupt.as_secs_f64();
                    self.emit(notice(format!(
                        "Codex did not end its turn within {secs:.1} s of an interrupt"
                    )))
                    .await;
                    return;
                }
            }
        }
    }

    async fn line(&mut self, line: Line) {
        let events = parse(&mut self.state, line);
        self.flush();
        self.emit_all(events).await;
    }

    async fn command(&mut self, command: ProviderCommand) {
        let now = now_millis();
        let events = match command {
            ProviderCommand::StartTurn { prompt } => self.state.start_turn(prompt, now),
            ProviderCommand::Answer { request_id, answer } => {
                match self.state.answer(&request_id, &answer) {
                    Ok(()) => Vec::new(),
                    Err(text) => vec![notice(text)],
                }
            }
            ProviderCommand::Interrupt => self.state.interrupt(now),
            // Handled by the loop.
            ProviderCommand::Shutdown => Vec::new(),
        };
        self.flush();
        self.emit_all(events).await;
    }

    /// Writes what the state has to say to the child.
    fn flush(&mut self) {
        for line in self.state.take_outgoing() {
            if !self.child.send_line(line) {
                tracing::debug!(run_id = %self.out.run_id(), "codex app-server stdin is closed");
            }
        }
    }

    async fn emit_all(&mut self, events: Vec<ProviderEvent>) {
        for event in events {
            self.emit(event).await;
        }
    }

    async fn emit(&mut self, event: ProviderEvent) {
        if self.ready {
            return self.out.send(event).await;
        }
        if matches!(event, ProviderEvent::Ready { .. }) {
            self.ready = true;
            self.out.send(event).await;
            let held = std::mem::take(&mut self.held);
            self.out.send_all(held).await;
        } else {
            self.held.push(event);
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The last phase: the child is being ended; its output is still read and reported,
/// but nothing is written to it any more.
async fn close(
    out: &mut EventSink,
    state: &mut AppState,
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
                Ok(Some(line)) => {
                    let events = parse(state, line);
                    state.take_outgoing();
                    out.send_all(events).await;
                }
                _ => eof = true,
            },
        }
    };
    if !eof {
        // The group is gone; what it wrote is still in the pipe.
        let drain = async {
            while let Ok(Some(line)) = stdout.next_line().await {
                let events = parse(state, line);
                state.take_outgoing();
                out.send_all(events).await;
            }
        };
        if tokio::time::timeout(timings.drain, drain).await.is_err() {
            tracing::warn!(run_id = %out.run_id(), "codex app-server stdout stayed open after it ended");
        }
    }
    report
}

fn parse(state: &mut AppState, line: Line) -> Vec<ProviderEvent> {
    match line {
        Line::Text(text) => state.parse_line(&text, now_millis()),
        Line::TooLong { bytes } => vec![notice(format!(
            "skipped a line of {bytes} bytes (the limit is {} MB)",
            MAX_LINE_BYTES / (1024 * 1024)
        ))],
    }
}
