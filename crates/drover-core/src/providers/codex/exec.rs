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
//!   one that comes after the turn's end waits (bounded) for the child's own exit;
//! - [`AdapterHandle::pid`] is `None`: no child is up between turns, and each turn has
//!   a new one;
//! - each model request's usage is reported as it happens, read from the rollout file
//!   Codex keeps of the thread ([`Rollout`]): `--json` reports usage only at the turn's
//!   end, too late for a cap to stop a turn that keeps calling tools;
//! - nothing a child writes can make the task panic.

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
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
    let rollout = Rollout::new(codex_home(&spec.env));
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
        rollout,
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
    /// Codex's record of the thread, read for usage while a turn runs.
    rollout: Rollout,
}

/// What happened while a turn's child ran.
enum Happened {
    Line(Line),
    /// Time to read what the rollout file gained.
    RolloutTick,
    /// Stdout closed or the child exited.
    ChildDone,
    Command(Option<ProviderCommand>),
}

impl ExecSession {
    async fn run(mut self) {
        self.out.send(ProviderEvent::Ready { version: None }).await;
        let mut child: Option<TurnChild> = None;
        let mut rollout_tick = tokio::time::interval(ROLLOUT_POLL);
        rollout_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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
                    _ = rollout_tick.tick() => Happened::RolloutTick,
                },
                None => Happened::Command(self.commands.recv().await),
            };
            match happened {
                Happened::Line(line) => {
                    let events = self.parse(line);
                    self.out.send_all(events).await;
                }
                Happened::RolloutTick => {
                    let events = self.read_rollout();
                    self.out.send_all(events).await;
                }
                Happened::ChildDone => {
                    if let Some(running) = child.take() {
                        self.finish(running).await;
                    }
                }
                Happened::Command(None | Some(ProviderCommand::Shutdown)) => {
                    if let Some(running) = child.take() {
                        self.end(running).await;
                    }
                    break;
                }
                Happened::Command(Some(ProviderCommand::StartTurn { prompt })) => {
                    self.queued.push_back(prompt);
                }
                Happened::Command(Some(ProviderCommand::Interrupt)) => {
                    self.queued.clear();
                    if let Some(running) = child.take() {
                        self.end(running).await;
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
        // What the thread's record holds already belongs to the turns before this one.
        self.rollout.skip_to_end(self.state.thread_id());
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

    /// Ends the turn's child on drover's word: interrupted while its turn is open;
    /// once the turn has ended (`turn.completed` or `turn.failed` read), left to exit by
    /// itself, as it does right after (bounded by the shutdown's stdin grace, then the
    /// group is signalled as for any child). Signalling a child that is already on its
    /// way out only slows its exit (the `codex` launcher forwards the SIGTERM and
    /// waits on its child) and could cut short what Codex writes of the thread as it
    /// ends (`exec resume` reads it).
    async fn end(&mut self, running: TurnChild) {
        if self.state.turn_open() {
            self.interrupt(running).await;
        } else {
            self.finish(running).await;
        }
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

    /// The usage in what the rollout file gained since the last read.
    fn read_rollout(&mut self) -> Vec<ProviderEvent> {
        let lines = self.rollout.read_new(self.state.thread_id());
        lines
            .iter()
            .flat_map(|line| self.state.rollout_line(line))
            .collect()
    }
}

/// How often a running turn's rollout file is read for what it gained: well within one
/// model request (a step of a turn takes a request and a tool).
const ROLLOUT_POLL: Duration = Duration::from_millis(50);

/// Where Codex keeps its state: `CODEX_HOME` from the run's environment or drover's,
/// else `~/.codex` (`HOME` likewise); `None` when neither says.
fn codex_home(env: &std::collections::BTreeMap<String, String>) -> Option<PathBuf> {
    crate::providers::interactive::state_dir(env, "CODEX_HOME", ".codex")
}

/// The rollout file Codex keeps of a thread (`CODEX_HOME/sessions/YYYY/MM/DD/
/// rollout-…-THREAD.jsonl`, appended to by every turn of the thread, `exec resume`
/// included), read as it grows. Found once the thread's id is known; a missing or
/// unreadable file reads as nothing (usage then comes at the turn's end, as before).
struct Rollout {
    home: Option<PathBuf>,
    /// The file and the thread it is of.
    file: Option<(String, PathBuf)>,
    /// How far the file has been read.
    offset: u64,
    /// The start of a line not yet written out to its end.
    partial: Vec<u8>,
    /// Searches in a row that did not find the file: after [`SEARCHES_AT_ONCE`] of them
    /// it is looked for once in [`SEARCH_EVERY`] reads (a Codex that keeps no such file
    /// costs no directory walk every 50 ms).
    misses: u32,
}

/// Searches for the rollout file made on every read before they thin out (a new
/// thread's file appears as its turn starts).
const SEARCHES_AT_ONCE: u32 = 20;
/// Then one search in this many reads.
const SEARCH_EVERY: u32 = 20;

impl Rollout {
    fn new(home: Option<PathBuf>) -> Rollout {
        Rollout {
            home,
            file: None,
            offset: 0,
            partial: Vec::new(),
            misses: 0,
        }
    }

    /// The thread's file, found (once) under the sessions directory.
    fn file_of(&mut self, thread: &str) -> Option<PathBuf> {
        if let Some((of, path)) = &self.file
            && of == thread
        {
            return Some(path.clone());
        }
        let sessions = self.home.as_ref()?.join("sessions");
        self.misses = self.misses.saturating_add(1);
        if self.misses > SEARCHES_AT_ONCE && !self.misses.is_multiple_of(SEARCH_EVERY) {
            return None;
        }
        let suffix = format!("-{thread}.jsonl");
        let path = crate::providers::interactive::find_file(&sessions, 3, &|name| {
            name.starts_with("rollout-") && name.ends_with(&suffix)
        })?;
        self.misses = 0;
        self.file = Some((thread.to_string(), path.clone()));
        self.offset = 0;
        self.partial.clear();
        Some(path)
    }

    /// A turn starts: what the file of `thread` holds now is not read.
    fn skip_to_end(&mut self, thread: Option<&str>) {
        self.partial.clear();
        self.misses = 0;
        let Some(path) = thread.and_then(|t| self.file_of(t)) else {
            // A new thread: its file does not exist yet, and all of it will be this
            // turn's.
            self.file = None;
            self.offset = 0;
            return;
        };
        self.offset = std::fs::metadata(path).map_or(0, |m| m.len());
    }

    /// The whole lines the file gained since the last read.
    fn read_new(&mut self, thread: Option<&str>) -> Vec<String> {
        let Some(path) = thread.and_then(|t| self.file_of(t)) else {
            return Vec::new();
        };
        let Ok(mut file) = std::fs::File::open(&path) else {
            return Vec::new();
        };
        if file.metadata().is_ok_and(|m| m.len() < self.offset) {
            // Rewritten shorter: what it holds now was read, or is not this turn's.
            self.offset = file.metadata().map_or(0, |m| m.len());
            self.partial.clear();
            return Vec::new();
        }
        let mut gained = Vec::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err()
            || file.read_to_end(&mut gained).is_err()
        {
            return Vec::new();
        }
        self.offset += gained.len() as u64;
        self.partial.extend_from_slice(&gained);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let whole: Vec<u8> = self.partial.drain(..=end).collect();
        String::from_utf8_lossy(&whole)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const THREAD: &str = "01a23af6-48ae-74b1-8b92-a484f44ccf29";

    fn append(path: &Path, text: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn the_rollout_file_is_found_by_its_thread_and_read_line_by_line_as_it_grows() {
        let home = tempfile::tempdir().unwrap();
        let day = home.path().join("sessions/2026/12/03");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::create_dir_all(home.path().join("sessions/2026/12/02")).unwrap();
        append(
            &home
                .path()
                .join("sessions/2026/12/02/rollout-2026-12-02T10-00-00-other.jsonl"),
            "{\"other\":1}\n",
        );
        let mut rollout = Rollout::new(Some(home.path().to_path_buf()));
        // No thread yet, or no file yet: nothing.
        assert!(rollout.read_new(None).is_empty());
        assert!(rollout.read_new(Some(THREAD)).is_empty());

        let file = day.join(format!("rollout-2026-12-03T08-12-28-{THREAD}.jsonl"));
        append(&file, "{\"a\":1}\n{\"b\":2}\n{\"c\":");
        assert_eq!(rollout.read_new(Some(THREAD)), ["{\"a\":1}", "{\"b\":2}"]);
        // A line is read once it is whole.
        assert!(rollout.read_new(Some(THREAD)).is_empty());
        append(&file, "3}\n");
        assert_eq!(rollout.read_new(Some(THREAD)), ["{\"c\":3}"]);

        // A later turn of the thread reads only what it adds.
        append(&file, "{\"d\":4}\n");
        rollout.skip_to_end(Some(THREAD));
        append(&file, "{\"e\":5}\n");
        assert_eq!(rollout.read_new(Some(THREAD)), ["{\"e\":5}"]);

        // A file rewritten shorter is not read again from its start.
        std::fs::write(&file, "{\"g\":7}\n").unwrap();
        assert!(rollout.read_new(Some(THREAD)).is_empty());
        append(&file, "{\"h\":8}\n");
        assert_eq!(rollout.read_new(Some(THREAD)), ["{\"h\":8}"]);

        // A new thread's turn: its file is read from its start once it appears.
        rollout.skip_to_end(None);
        let other = "0bbbbbbb-48ae-74b1-8b92-a484f44ccf29";
        assert!(rollout.read_new(Some(other)).is_empty());
        append(
            &day.join(format!("rollout-2026-12-03T09-00-00-{other}.jsonl")),
            "{\"f\":6}\n",
        );
        assert_eq!(rollout.read_new(Some(other)), ["{\"f\":6}"]);
    }

    #[test]
    fn after_many_misses_the_rollout_file_is_searched_for_once_in_a_while() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("sessions/2026/12/03")).unwrap();
        let mut rollout = Rollout::new(Some(home.path().to_path_buf()));
        for _ in 0..SEARCHES_AT_ONCE {
            assert!(rollout.read_new(Some(THREAD)).is_empty());
        }
        let file = home
            .path()
            .join(format!("sessions/2026/12/03/rollout-x-{THREAD}.jsonl"));
        append(&file, "{\"a\":1}\n");
        let reads = (1..=SEARCH_EVERY)
            .position(|_| !rollout.read_new(Some(THREAD)).is_empty())
            .expect("found within one search interval");
        assert!(reads > 0, "searched again at once after many misses");
    }

    #[test]
    fn codex_home_is_the_runs_variable_then_home_dot_codex() {
        let mut env = std::collections::BTreeMap::new();
        env.insert("CODEX_HOME".to_string(), "/x/codex-home".to_string());
        env.insert("HOME".to_string(), "/x/home".to_string());
        assert_eq!(codex_home(&env), Some(PathBuf::from("/x/codex-home")));
        env.remove("CODEX_HOME");
        if std::env::var_os("CODEX_HOME").is_none() {
            assert_eq!(codex_home(&env), Some(PathBuf::from("/x/home/.codex")));
        }
    }
}
