//! The `codex exec --json` mode: one tokio task per run, one child per turn.
//!
//! Not on the session loop ([`crate::providers::session`]): that loop owns one child
//! for the whole session, talks to it over stdin and waits on a handshake, while here a
//! child lives for one turn, gets its prompt on the command line with stdin closed, and
//! nothing is up between turns. What it shares with the loop: the child's start and end
//! ([`process::spawn_spec`], [`end_child`]), the reading of lines ([`line_events`]),
//! the run's `Exited` (from an [`ExitReport`]) and the [`EventSink`].
//!
//! What must stay true:
//! - `Ready` is sent at once (there is no handshake), and `Exited` exactly once, last,
//!   when drover shuts the run down (or the dispatcher goes away); it carries the last
//!   turn child's exit;
//! - turns run one at a time, in the order asked; the first starts a thread, the others
//!   continue it (`exec … resume THREAD`), as does every turn of a resumed run;
//! - every child is started with [`process::spawn_spec`] (stdin closed at once, which is
//!   what `</dev/null` gives) and always ended and reaped with
//!   [`ProviderProcess::shutdown`]; an `Interrupt` (or `Shutdown`) mid-turn ends the
//!   child's process group (and the processes Codex started outside it,
//!   [`crate::providers::sweep`]) and reports the turn ended (an error, not transient);
//! - [`AdapterHandle::pid`] is `None`: no child is up between turns, and each turn has
//!   a new one;
//! - nothing a child writes can make the task panic.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::process::ChildStdout;
use tokio::sync::mpsc;

use crate::providers::process::{
    self, ExitReport, Line, LineReader, ProviderProcess, ShutdownTimings,
};
use crate::providers::session::{end_child, line_events};
use crate::providers::sink::EventSink;
use crate::providers::{
    AdapterHandle, LaunchError, LaunchSpec, ProviderCommand, ProviderEvent, ProviderEventSink,
    notice,
};

use super::AdapterTimings;
use super::args;
use super::exec_protocol::ExecState;

/// Start the exec-mode session for `spec`. Fails at once when the working directory or
/// the executable is missing (each turn's child is started later).
pub fn launch(
    spec: LaunchSpec,
    sink: ProviderEventSink,
    timings: AdapterTimings,
) -> Result<AdapterHandle, LaunchError> {
    let fail = |reason: String| LaunchError {
        command: spec.command.display().to_string(),
        reason,
    };
    let runtime = process::adapter_runtime(&spec)?;
    if !spec.cwd.is_dir() {
        return Err(fail(format!(
            "the working directory {} does not exist or is not a directory",
            spec.cwd.display()
        )));
    }
    let found = if spec.command.components().count() > 1 {
        spec.command.is_file()
    } else {
        which::which(&spec.command).is_ok()
    };
    if !found {
        return Err(fail("no such executable".into()));
    }
    let (commands, rx) = mpsc::unbounded_channel();
    let state = ExecState::new(
        spec.model.clone(),
        spec.resume_session.clone(),
        spec.resume_tokens,
    );
    let session = ExecSession {
        out: EventSink::new(spec.run_id.clone(), sink),
        spec,
        state,
        commands: rx,
        timings,
        queued: VecDeque::new(),
        last_exit: None,
    };
    runtime.spawn(session.run());
    Ok(AdapterHandle {
        commands,
        pid: None,
    })
}

/// The child of the turn in flight.
struct TurnChild {
    process: ProviderProcess,
    stdout: LineReader<ChildStdout>,
}

/// One run's exec session: the thread's state across turns and the turns waiting.
struct ExecSession {
    out: EventSink,
    spec: LaunchSpec,
    state: ExecState,
    commands: mpsc::UnboundedReceiver<ProviderCommand>,
    timings: AdapterTimings,
    /// Turns asked for while one is in flight.
    queued: VecDeque<String>,
    last_exit: Option<ExitReport>,
}

/// What happened while a turn's child ran.
enum Happened {
    Line(Line),
    /// Stdout closed or the child exited.
    ChildDone,
    Command(Option<ProviderCommand>),
}

impl ExecSession {
    async fn run(mut self) {
        self.out.send(ProviderEvent::Ready { version: None }).await;
        let mut child: Option<TurnChild> = None;
        loop {
            if child.is_none()
                && let Some(prompt) = self.queued.pop_front()
            {
                child = self.start_turn(&prompt).await;
                continue;
            }
            let happened = match &mut child {
                Some(running) => tokio::select! {
                    line = running.stdout.next_line() => match line {
                        Ok(Some(line)) => Happened::Line(line),
                        _ => Happened::ChildDone,
                    },
                    () = running.process.exited() => Happened::ChildDone,
                    command = self.commands.recv() => Happened::Command(command),
                },
                None => Happened::Command(self.commands.recv().await),
            };
            match happened {
                Happened::Line(line) => {
                    let events = self.parse(line);
                    self.out.send_all(events).await;
                }
                Happened::ChildDone => {
                    if let Some(running) = child.take() {
                        self.finish(running).await;
                    }
                }
                Happened::Command(None | Some(ProviderCommand::Shutdown)) => {
                    if let Some(running) = child.take() {
                        self.interrupt(running).await;
                    }
                    break;
                }
                Happened::Command(Some(ProviderCommand::StartTurn { prompt })) => {
                    self.queued.push_back(prompt);
                }
                Happened::Command(Some(ProviderCommand::Interrupt)) => {
                    self.queued.clear();
                    if let Some(running) = child.take() {
                        self.interrupt(running).await;
                    }
                }
                Happened::Command(Some(ProviderCommand::Answer { request_id, .. })) => {
                    self.out
                        .send(notice(format!(
                            "codex exec asks nothing: there is no request {request_id} to answer"
                        )))
                        .await;
                }
            }
            if !self.out.is_open() {
                if let Some(running) = child.take() {
                    self.interrupt(running).await;
                }
                break;
            }
        }
        let report = self.last_exit.take().unwrap_or(ExitReport {
            code: None,
            signal: None,
            stderr_tail: String::new(),
        });
        self.out.send(report.into()).await;
    }

    async fn start_turn(&mut self, prompt: &str) -> Option<TurnChild> {
        let argv = args::exec_args(&self.spec, self.state.thread_id(), prompt);
        self.state.begin_turn();
        match process::spawn_spec(&self.spec, &argv) {
            Ok((mut process, stdout)) => {
                // Codex exec reads stdin to its end before it starts: give it none.
                process.close_stdin();
                tracing::debug!(run_id = %self.out.run_id(), pid = process.pid(), "codex exec started");
                Some(TurnChild { process, stdout })
            }
            Err(e) => {
                let events = self.state.child_gone(None, None, &e.to_string());
                self.out.send_all(events).await;
                None
            }
        }
    }

    /// The turn's child ended by itself (or closed stdout): end and reap it while what
    /// it still writes is read, and end the turn if it did not say it ended.
    async fn finish(&mut self, running: TurnChild) {
        let state = &mut self.state;
        let report = end_child(
            running.process,
            running.stdout,
            self.timings.shutdown,
            &mut self.out,
            |line| line_events(line, |text| state.parse_line(text)),
        )
        .await;
        let events = self
            .state
            .child_gone(report.code, report.signal, &report.stderr_tail);
        self.last_exit = Some(report);
        self.out.send_all(events).await;
    }

    /// End the turn's child now (its whole group) and report the turn interrupted.
    async fn interrupt(&mut self, running: TurnChild) {
        let timings = ShutdownTimings {
            // stdin is closed since the start: go straight to SIGTERM.
            stdin_grace: Duration::ZERO,
            ..self.timings.shutdown
        };
        // What it started in sessions of its own goes with it (the one sweep, run by the
        // shutdown: see `providers::sweep`).
        let report = running.process.shutdown(timings).await;
        self.last_exit = Some(report);
        let events = self.state.interrupted();
        self.out.send_all(events).await;
    }

    fn parse(&mut self, line: Line) -> Vec<ProviderEvent> {
        line_events(line, |text| self.state.parse_line(text))
    }
}
