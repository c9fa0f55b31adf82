//! The provider session loop: one tokio task per run that owns a CLI child speaking a
//! line protocol over its stdio, and drives it through handshake → running → ending.
//!
//! A CLI supplies a [`Protocol`]: its command line, what its stdout lines mean, how
//! drover's commands and answers are written to its stdin, what its handshake is and
//! how a turn is interrupted. The protocol is pure (no I/O; the clock comes in as
//! `now`); this loop does the I/O: it spawns the child with [`process::spawn_spec`],
//! feeds the protocol the child's lines, drover's [`ProviderCommand`]s and the passing
//! of its deadlines, writes what the protocol queues to the child's stdin (through the
//! [`ProviderProcess`]'s writer task, so a child that stops reading never blocks the
//! loop) and forwards the protocol's events to the dispatcher. Claude Code's
//! stream-json (and the sim, which speaks it) and `codex app-server` run on it
//! (docs/PROVIDERS.md §"The session loop").
//!
//! What must stay true:
//! - the run's events start with `Ready`, sent by this loop once the protocol's
//!   [`Protocol::handshake`] is [`Handshake::Done`], and end with exactly one `Exited`,
//!   after which nothing is sent; a child that dies or closes stdout before the
//!   handshake is done, refuses it, or lets its deadline pass gets no `Ready`, only the
//!   protocol's notices and `Exited` with its stderr tail;
//! - events the protocol produces before the handshake is done are held and sent right
//!   after `Ready` (or before `Exited` when no `Ready` comes); commands that come
//!   before it are queued and carried out after it, in order (and dropped with the run
//!   when it ends first);
//! - every deadline the protocol names ([`Protocol::next_deadline`]) is kept: the loop
//!   wakes at it and [`Protocol::expire`] handles it, so a child that never answers
//!   cannot hang the run;
//! - on `Shutdown` a turn in flight is interrupted first ([`Protocol::interrupt`]; the
//!   child's descendants are noted for [`sweep`] before, since an interrupt may orphan a
//!   tool without ending it), and the loop waits for the turn to end, bounded by
//!   [`Timings::interrupt`]: Claude Code and Codex run tools in sessions of their own,
//!   which signals to the child's group would miss;
//! - the child is always ended through [`ProviderProcess::shutdown`] ([`end_child`]),
//!   which reaps it and sweeps its process group and whatever it started elsewhere,
//!   whether it exited by itself, closed stdout, failed the handshake, was asked to
//!   stop, or the dispatcher went away (the command sender or the event receiver
//!   dropped); stdout keeps being read and reported while it ends, but nothing is
//!   written to the child any more;
//! - nothing the child writes can make the task panic: a line too long to keep is a
//!   notice ([`line_events`]), and every other line is the protocol's, whose own
//!   invariant is that no line panics.
//!
//! OpenCode (HTTP and an event stream to `opencode serve`) and `codex exec` (a child
//! per turn, stdin closed) do not fit one stdio child per session; they share
//! [`end_child`], [`line_events`] and the `Exited` of an [`ExitReport`] with this loop
//! and keep loops of their own (docs/PROVIDERS.md §"The session loop").

use std::collections::VecDeque;
use std::time::Duration;

use tokio::process::ChildStdout;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::UnixMillis;
use crate::clock::now_millis;
use crate::providers::process::{
    self, ExitReport, Line, LineReader, MAX_LINE_BYTES, ProviderProcess, ShutdownTimings,
};
use crate::providers::sink::EventSink;
use crate::providers::{
    AdapterHandle, LaunchError, LaunchSpec, PermissionAnswer, ProviderCommand, ProviderEvent,
    ProviderEventSink, notice, sweep,
};

/// Where a protocol's handshake stands, as the session loop reads it after each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// The child has not answered yet: events are held and commands queued.
    Waiting,
    /// Answered: the loop sends `Ready` (once) and carries out the queued commands.
    Done,
    /// Refused, or not answered in time (a notice of the protocol's says which): the
    /// run ends without `Ready`.
    Failed,
}

/// One CLI's conversation over its stdin and stdout, as the session loop drives it.
///
/// Pure: no I/O, and the clock comes in as `now`. What an implementation must keep
/// true: no input panics (what cannot be understood is a `Notice`); lines for the child
/// are only queued, and [`Protocol::take_outgoing`] hands them over in order; every
/// deadline it names is handled (and cleared) by [`Protocol::expire`] once `now` has
/// reached it; [`Protocol::handshake`] leaves `Waiting` at most once.
pub trait Protocol: Send + 'static {
    /// Who the loop's notices name: "the CLI", "Codex".
    const NAME: &'static str;

    /// The child's arguments (after the executable, the configured prefix included).
    fn args(&self, spec: &LaunchSpec) -> Vec<String>;

    /// Opens the conversation (queues the handshake's first lines). Called once,
    /// before anything else is fed in.
    fn start(&mut self, now: UnixMillis) -> Vec<ProviderEvent>;

    /// Where the handshake stands.
    fn handshake(&self) -> Handshake;

    /// The CLI's version as the handshake told it, for `Ready`.
    fn version(&self) -> Option<String>;

    /// One stdout line (without its newline), as the child wrote it.
    fn parse_line(&mut self, line: &str, now: UnixMillis) -> Vec<ProviderEvent>;

    /// Drover asks for a turn: sent now, or queued by the protocol until the CLI can
    /// take it. Only called once the handshake is done.
    fn start_turn(&mut self, prompt: String, now: UnixMillis) -> Vec<ProviderEvent>;

    /// Drover's answer to a request the protocol reported. `Err` holds the notice when
    /// it cannot apply (the request is not pending, or the answer does not fit it).
    fn answer(&mut self, request_id: &str, answer: &PermissionAnswer) -> Result<(), String>;

    /// Interrupt the turn in flight, if any (the session stays usable).
    fn interrupt(&mut self, now: UnixMillis) -> Vec<ProviderEvent>;

    /// A turn was started and has not ended (its `TurnCompleted` has not come).
    fn turn_open(&self) -> bool;

    /// The lines to write to the child, in order; each is written with a newline added.
    fn take_outgoing(&mut self) -> Vec<String>;

    /// The earliest instant something is waited on with a bound (a request's answer,
    /// the handshake), if any.
    fn next_deadline(&self) -> Option<UnixMillis> {
        None
    }

    /// What passing the deadlines up to `now` means; clears them.
    fn expire(&mut self, _now: UnixMillis) -> Vec<ProviderEvent> {
        Vec::new()
    }
}

/// How long the session loop waits on its child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// For a turn in flight to end after the interrupt at `Shutdown`, before the child
    /// is ended.
    pub interrupt: Duration,
    /// How the child is ended.
    pub shutdown: ShutdownTimings,
}

/// Starts `protocol`'s CLI for `spec` and the session loop's task. Must be called inside
/// a tokio runtime, from an async task (see [`process`] on the parent-death signal).
pub fn launch<P: Protocol>(
    spec: LaunchSpec,
    protocol: P,
    sink: ProviderEventSink,
    timings: Timings,
) -> Result<AdapterHandle, LaunchError> {
    let runtime = process::adapter_runtime(&spec)?;
    let (child, stdout) = process::spawn_spec(&spec, &protocol.args(&spec))?;
    let pid = child.pid();
    tracing::debug!(run_id = %spec.run_id, pid, cli = P::NAME, "provider child started");
    let (commands, rx) = mpsc::unbounded_channel();
    let session = Session {
        protocol,
        out: EventSink::new(spec.run_id, sink),
        child,
        stdout,
        commands: rx,
        timings,
        ready: false,
        held: Vec::new(),
        queued: VecDeque::new(),
    };
    runtime.spawn(session.run());
    Ok(AdapterHandle {
        commands,
        pid: Some(pid),
    })
}

/// Why the conversation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Asked to, or nobody is left to talk to.
    Shutdown,
    /// The child exited, or closed stdout.
    ChildGone,
    /// The handshake failed or timed out (a notice says which).
    NoHandshake,
}

/// One run's session: the child, its protocol, and what waits for the handshake.
struct Session<P> {
    protocol: P,
    out: EventSink,
    child: ProviderProcess,
    stdout: LineReader<ChildStdout>,
    commands: mpsc::UnboundedReceiver<ProviderCommand>,
    timings: Timings,
    /// `Ready` was sent; until then events are held and commands queued.
    ready: bool,
    held: Vec<ProviderEvent>,
    queued: VecDeque<ProviderCommand>,
}

impl<P: Protocol> Session<P> {
    async fn run(mut self) {
        let events = self.protocol.start(now_millis());
        self.flush();
        self.emit_all(events).await;
        let stop = self.converse().await;
        tracing::debug!(run_id = %self.out.run_id(), ?stop, cli = P::NAME, "ending the provider child");
        let Session {
            mut protocol,
            mut out,
            held,
            child,
            stdout,
            timings,
            ..
        } = self;
        // Held only when no `Ready` came: they go out without it.
        out.send_all(held).await;
        let report = end_child(child, stdout, timings.shutdown, &mut out, |line| {
            let events = line_events(line, |text| protocol.parse_line(text, now_millis()));
            // Nobody reads stdin any more: replies are dropped.
            protocol.take_outgoing();
            events
        })
        .await;
        out.send(report.into()).await;
    }

    /// The handshake and the running phase, until one of them stops.
    async fn converse(&mut self) -> Stop {
        loop {
            if let Some(stop) = self.settle().await {
                return stop;
            }
            let deadline = self.protocol.next_deadline().map(instant_of);
            tokio::select! {
                line = self.stdout.next_line() => match line {
                    Ok(Some(line)) => self.line(line).await,
                    // EOF (or a broken pipe): the child is ending or useless.
                    _ => return Stop::ChildGone,
                },
                command = self.commands.recv() => match command {
                    None => return Stop::Shutdown,
                    Some(ProviderCommand::Shutdown) => {
                        self.end_turn().await;
                        return Stop::Shutdown;
                    }
                    Some(command) if !self.ready => self.queued.push_back(command),
                    Some(command) => self.command(command).await,
                },
                () = self.child.exited() => {
                    self.read_what_it_wrote().await;
                    return Stop::ChildGone;
                }
                () = sleep_until(deadline) => {
                    let events = self.protocol.expire(now_millis());
                    self.flush();
                    self.emit_all(events).await;
                }
            }
        }
    }

    /// The child has exited: what it wrote before it exited is still in the pipe and is
    /// read now, in order, as if the exit had come last (a handshake answered just before
    /// the exit still counts). Bounded by `timings.shutdown.drain`: a descendant that left
    /// the group could hold the pipe open.
    async fn read_what_it_wrote(&mut self) {
        let drain = self.timings.shutdown.drain;
        let read = async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                self.line(line).await;
                if self.settle().await.is_some() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(drain, read).await;
    }

    /// After each step: sends `Ready` (and what waited for it) when the handshake is
    /// newly done; says why to stop when it failed or nobody listens any more.
    async fn settle(&mut self) -> Option<Stop> {
        match self.protocol.handshake() {
            Handshake::Failed => return Some(Stop::NoHandshake),
            Handshake::Done if !self.ready => {
                self.ready = true;
                let version = self.protocol.version();
                self.out.send(ProviderEvent::Ready { version }).await;
                let held = std::mem::take(&mut self.held);
                self.out.send_all(held).await;
                while let Some(command) = self.queued.pop_front() {
                    self.command(command).await;
                }
            }
            Handshake::Done | Handshake::Waiting => {}
        }
        (!self.out.is_open()).then_some(Stop::Shutdown)
    }

    /// Interrupts a turn in flight before the child is ended, and waits (bounded by
    /// `timings.interrupt`) for it to end, so the tool it runs stops with it.
    async fn end_turn(&mut self) {
        if !self.protocol.turn_open() {
            return;
        }
        // Before the interrupt: it may orphan a tool without ending it.
        sweep::note_now(self.child.pid());
        let events = self.protocol.interrupt(now_millis());
        let written = self.flush();
        self.emit_all(events).await;
        if !written {
            return;
        }
        let deadline = Instant::now() + self.timings.interrupt;
        while self.protocol.turn_open() {
            tokio::select! {
                line = self.stdout.next_line() => match line {
                    Ok(Some(line)) => self.line(line).await,
                    _ => return,
                },
                () = self.child.exited() => return,
                () = tokio::time::sleep_until(deadline) => {
                    let secs = self.timings.interrupt.as_secs_f64();
                    self.emit(notice(format!(
                        "{} did not end its turn within {secs:.1} s of an interrupt",
                        P::NAME
                    )))
                    .await;
                    return;
                }
            }
        }
    }

    async fn line(&mut self, line: Line) {
        let protocol = &mut self.protocol;
        let events = line_events(line, |text| protocol.parse_line(text, now_millis()));
        self.flush();
        self.emit_all(events).await;
    }

    /// Carries out a command other than `Shutdown` (which the loops handle).
    async fn command(&mut self, command: ProviderCommand) {
        let now = now_millis();
        let events = match command {
            ProviderCommand::StartTurn { prompt } => self.protocol.start_turn(prompt, now),
            ProviderCommand::Answer { request_id, answer } => {
                match self.protocol.answer(&request_id, &answer) {
                    Ok(()) => Vec::new(),
                    Err(text) => vec![notice(text)],
                }
            }
            ProviderCommand::Interrupt => self.protocol.interrupt(now),
            ProviderCommand::Shutdown => Vec::new(),
        };
        if !self.flush() {
            self.emit(notice(format!(
                "could not write to {}: its stdin is closed",
                P::NAME
            )))
            .await;
        }
        self.emit_all(events).await;
    }

    /// Writes what the protocol has to say to the child. `false` when a line could not
    /// be written (stdin is closed).
    fn flush(&mut self) -> bool {
        let mut written = true;
        for line in self.protocol.take_outgoing() {
            written &= self.child.send_line(line);
        }
        if !written {
            tracing::debug!(run_id = %self.out.run_id(), cli = P::NAME, "the child's stdin is closed");
        }
        written
    }

    async fn emit_all(&mut self, events: Vec<ProviderEvent>) {
        for event in events {
            self.emit(event).await;
        }
    }

    async fn emit(&mut self, event: ProviderEvent) {
        if self.ready {
            self.out.send(event).await;
        } else {
            self.held.push(event);
        }
    }
}

/// Ends `child` through [`ProviderProcess::shutdown`] (its whole group, reaped, and what
/// it started elsewhere swept) while its stdout is still read: each line goes through
/// `parse` and its events to `out`. Once the group is gone, what is left in the pipe is
/// read too, bounded by `timings.drain` (a descendant that left the group could hold
/// the pipe open forever). The one way every adapter ends a child it read.
pub async fn end_child(
    child: ProviderProcess,
    mut stdout: LineReader<ChildStdout>,
    timings: ShutdownTimings,
    out: &mut EventSink,
    mut parse: impl FnMut(Line) -> Vec<ProviderEvent>,
) -> ExitReport {
    let shutdown = child.shutdown(timings);
    tokio::pin!(shutdown);
    let mut eof = false;
    let report = loop {
        tokio::select! {
            report = &mut shutdown => break report,
            line = stdout.next_line(), if !eof => match line {
                Ok(Some(line)) => out.send_all(parse(line)).await,
                _ => eof = true,
            },
        }
    };
    if !eof {
        // The group is gone; what it wrote is still in the pipe.
        let drain = async {
            while let Ok(Some(line)) = stdout.next_line().await {
                out.send_all(parse(line)).await;
            }
        };
        if tokio::time::timeout(timings.drain, drain).await.is_err() {
            tracing::warn!(run_id = %out.run_id(), "the child's stdout stayed open after it ended");
        }
    }
    report
}

/// The events of one stdout line: `parse`'s for a line of text, a notice for a line too
/// long to keep (it was skipped whole).
pub fn line_events(
    line: Line,
    parse: impl FnOnce(&str) -> Vec<ProviderEvent>,
) -> Vec<ProviderEvent> {
    match line {
        Line::Text(text) => parse(&text),
        Line::TooLong { bytes } => vec![notice(format!(
            "skipped a line of {bytes} bytes (the limit is {} MB)",
            MAX_LINE_BYTES / (1024 * 1024)
        ))],
    }
}

impl From<ExitReport> for ProviderEvent {
    /// The run's last event, from how its child ended.
    fn from(report: ExitReport) -> ProviderEvent {
        ProviderEvent::Exited {
            code: report.code,
            signal: report.signal,
            stderr_tail: report.stderr_tail,
        }
    }
}

/// The instant of a wall-clock deadline (now, when it has passed).
fn instant_of(deadline: UnixMillis) -> Instant {
    let wait = deadline.saturating_sub(now_millis()).max(0);
    Instant::now() + Duration::from_millis(u64::try_from(wait).unwrap_or(0))
}

/// Resolves at `deadline`; never without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
