//! Provider-neutral child-process plumbing: spawn a provider CLI, write lines to it, read
//! its lines, keep its stderr tail, and end it.
//!
//! Every adapter (Claude Code, Codex, OpenCode, sim) starts its child here. What must
//! stay true:
//! - the child is the leader of a process group of its own (pgid = its pid), is killed
//!   when its `tokio::process::Child` is dropped, and gets SIGKILL when the thread that
//!   spawned it dies (`PR_SET_PDEATHSIG`, with a ppid check closing the fork race);
//! - signals only ever go to that group, and only while its leader is not yet reaped
//!   (the leader is watched with `waitid(WNOWAIT)`, so its pid cannot have been reused);
//! - [`ProviderProcess::shutdown`] always reaps the leader and leaves no process of the
//!   group behind, nor any it started elsewhere ([`sweep`]);
//! - reading never buffers without bound: a stdout line longer than its cap is skipped
//!   (reported as [`Line::TooLong`]), stderr keeps only a short tail, and invalid UTF-8 is
//!   replaced, never an error.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that spawned the child exits, not the
//! process: spawn from a runtime worker thread (an async task), never from a
//! `spawn_blocking` closure, whose thread goes away when idle.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{LaunchError, LaunchSpec, sandbox, sweep, transport};

/// The longest stdout line kept (a longer one is skipped whole).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// The longest stderr line read before it is skipped (the tail clips it further).
const MAX_STDERR_LINE_BYTES: usize = 64 * 1024;
/// How many stderr lines the tail keeps.
pub const STDERR_TAIL_LINES: usize = 20;
/// How many bytes of stderr the tail keeps.
pub const STDERR_TAIL_BYTES: usize = 4 * 1024;

/// How long each step of ending a child may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownTimings {
    /// After stdin is closed, before SIGTERM.
    pub stdin_grace: Duration,
    /// After SIGTERM, before SIGKILL.
    pub term_grace: Duration,
    /// How long to wait for the last output (stdout to EOF, the stderr tail) once the
    /// group is gone; a descendant that left the group could hold a pipe open forever.
    pub drain: Duration,
}

impl Default for ShutdownTimings {
    fn default() -> Self {
        ShutdownTimings {
            stdin_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(3),
            drain: Duration::from_secs(2),
        }
    }
}

/// How the child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitReport {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The last lines the child wrote to stderr.
    pub stderr_tail: String,
}

/// What the child is started as.
#[derive(Debug, Clone, Copy)]
pub struct ChildCommand<'a> {
    /// The executable (a path, or a name looked up on `PATH`).
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [String],
    /// Added to the inherited environment.
    pub env: &'a BTreeMap<String, String>,
    /// Its working directory; it must exist.
    pub cwd: &'a Path,
    /// The run the child belongs to ([`sweep`] tracks its processes by it).
    pub run_id: &'a str,
    /// Where its processes are noted ([`sweep`]), when the run has a journal.
    pub journal: Option<&'a sweep::ProcessJournal>,
    /// Run it under bubblewrap ([`sandbox`]): `bwrap` is then the child (the group's
    /// leader) and the command runs inside it.
    pub sandbox: Option<&'a sandbox::Sandbox>,
    /// Run it on another host ([`transport`]): the transport's local command (`ssh …`)
    /// is then the child, and `cwd` and `env` are the host's.
    pub transport: Option<&'a transport::Transport>,
}

/// A running provider child: the leader of its own process group.
#[derive(Debug)]
pub struct ProviderProcess {
    child: Child,
    pid: u32,
    stdin: StdinWriter,
    exit_watch: Option<ExitWatch>,
    stderr: StderrTail,
    /// Set once the leader is reaped: from then on its pid may be reused, so the group
    /// is never signalled again.
    reaped: bool,
    /// On another host: its transport and the pid file there holding the remote group's
    /// id, so ending the child ends that group there too.
    remote: Option<(transport::Transport, String)>,
}

/// The runtime an adapter's task runs on; a launch outside one is refused.
pub fn adapter_runtime(spec: &LaunchSpec) -> Result<tokio::runtime::Handle, LaunchError> {
    tokio::runtime::Handle::try_current().map_err(|_| LaunchError {
        command: spec.command.display().to_string(),
        reason: "no tokio runtime to run the adapter on".into(),
    })
}

/// [`spawn`] of the run's own command with `args`, in its working directory and with its
/// environment.
pub fn spawn_spec(
    spec: &LaunchSpec,
    args: &[String],
) -> Result<(ProviderProcess, LineReader<ChildStdout>), LaunchError> {
    spawn(ChildCommand {
        program: &spec.command,
        args,
        env: &spec.env,
        cwd: &spec.cwd,
        run_id: &spec.run_id,
        journal: spec.journal.as_ref(),
        transport: spec.transport.as_deref(),
        sandbox: spec.sandbox.as_ref(),
    })
}

/// Spawn `command` with piped stdio in a process group of its own. Returns the process
/// and a reader over its stdout.
pub fn spawn(
    command: ChildCommand<'_>,
) -> Result<(ProviderProcess, LineReader<ChildStdout>), LaunchError> {
    let fail = |reason: String| LaunchError {
        command: command.program.display().to_string(),
        reason,
    };
    // docs/ARCHITECTURE.md §"Hosts": the directory is the host's, checked there.
    if command.transport.is_none() && !command.cwd.is_dir() {
        return Err(fail(format!(
            "the working directory {} does not exist or is not a directory",
            command.cwd.display()
        )));
    }
    // A sandboxed child is `bwrap` running the command: one place for every provider, and
    // a sandbox that cannot be made refuses the start (never unsandboxed).
    let wrapped = match command.sandbox {
        Some(sandbox) => Some(
            sandbox
                .wrap(command.program, command.args, command.cwd)
                .map_err(|e| fail(format!("{}: {}", e.code, e.message)))?,
        ),
        None => None,
    };
    let (program, args) = match &wrapped {
        Some((bwrap, argv)) => (bwrap.as_path(), argv.as_slice()),
        None => (command.program, command.args),
    };
    // A run on another host is its transport's command running the CLI there, in a
    // session of its own whose id goes to a pid file there (docs/ARCHITECTURE.md
    // §"Hosts"); the sandbox applies on this machine only, so the two never meet.
    let remote = command
        .transport
        .map(|t| (t.clone(), transport::pid_file(command.run_id)));
    let hosted = remote
        .as_ref()
        .map(|(t, file)| t.wrap(program, args, command.cwd, command.env, Some(file)));
    let no_env = BTreeMap::new();
    let (program, args, local_env, local_cwd) = match &hosted {
        Some((local, argv)) => (local.as_path(), argv.as_slice(), &no_env, Path::new("/")),
        None => (program, args, command.env, command.cwd),
    };
    if let Some((t, _)) = &remote
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        let t = t.clone();
        runtime.spawn(async move { t.ensure_master().await });
    }
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(local_env)
        .current_dir(local_cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid); it allocates nothing, errors
    // included (`from_raw_os_error`).
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
            // The parent may have died between fork and prctl: then nobody would send
            // the signal, so refuse to run.
            if nix::unistd::getppid() != parent {
                return Err(io::Error::from_raw_os_error(Errno::ESRCH as i32));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| fail(e.to_string()))?;
    let Some(pid) = child.id() else {
        return Err(fail("the child exited before it could be watched".into()));
    };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(fail("the child's stdio pipes are missing".into()));
    };
    let exit_watch = ExitWatch::start(pid);
    sweep::register(command.run_id, pid, command.journal.cloned());
    let process = ProviderProcess {
        child,
        pid,
        stdin: StdinWriter::new(stdin),
        exit_watch: Some(exit_watch),
        stderr: StderrTail::collect(stderr),
        reaped: false,
        remote,
    };
    Ok((process, LineReader::new(stdout, MAX_LINE_BYTES)))
}

/// How the leader's exit is noticed without reaping it: a pidfd (readable once the
/// process has exited) watched by the runtime's reactor, so no thread waits per child;
/// on a kernel without pidfds (before Linux 5.3), a blocking `waitid(WNOWAIT)` on the
/// blocking pool.
#[derive(Debug)]
enum ExitWatch {
    Pidfd(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>),
    Blocking(JoinHandle<()>),
}

impl ExitWatch {
    fn start(pid: u32) -> ExitWatch {
        let pidfd = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::NONBLOCK).ok()
            })
            .and_then(|fd| {
                // SAFETY: `fd` is an `OwnedFd` moved into the `AsyncFd`: it is open, stays
                // open and names the same pidfd until the `AsyncFd` is dropped.
                unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        fd,
                        tokio::io::Interest::READABLE,
                    )
                }
                .ok()
            });
        match pidfd {
            Some(fd) => ExitWatch::Pidfd(fd),
            None => ExitWatch::Blocking(tokio::task::spawn_blocking(move || {
                wait_exited_unreaped(pid)
            })),
        }
    }

    /// Resolves once the process has exited. Cancel-safe.
    async fn exited(&mut self) {
        match self {
            // Readiness stays set once the process is gone; an error tells nothing more
            // and counts as exited (shutdown still signals the group before reaping).
            ExitWatch::Pidfd(fd) => {
                let _ = fd.readable().await;
            }
            ExitWatch::Blocking(handle) => {
                let _ = handle.await;
            }
        }
    }
}

/// Block until the process `pid` has exited, leaving it a zombie (not reaped), so its pid
/// and process group id stay ours until [`ProviderProcess::shutdown`] reaps it.
fn wait_exited_unreaped(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    loop {
        match waitid(
            Id::Pid(Pid::from_raw(raw)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
        ) {
            Err(Errno::EINTR) => continue,
            // Exited, or not our child any more (reaped elsewhere): either way, done.
            _ => return,
        }
    }
}

/// Wait (up to `limit`) until no process of group `pgid` exists any more. Polls: the
/// members are not our children, so there is nothing to wait on.
async fn wait_group_gone(pgid: u32, limit: Duration) {
    let Ok(raw) = i32::try_from(pgid) else { return };
    let probe = || nix::sys::signal::kill(Pid::from_raw(-raw), None) == Err(Errno::ESRCH);
    let poll = async {
        for gap in sweep::kill_probe_gaps() {
            if probe() {
                break;
            }
            tokio::time::sleep(gap).await;
        }
    };
    if tokio::time::timeout(limit, poll).await.is_err() {
        tracing::warn!(
            pgid,
            "a process of the child's group is still there after SIGKILL"
        );
    }
}

/// Send `signal` to the process group `pgid`. `false` when no process of it remains.
pub fn signal_group(pgid: u32, signal: Signal) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    killpg(Pid::from_raw(raw), signal).is_ok()
}

impl ProviderProcess {
    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Queue one line (a newline is added) for the child's stdin. `false` when stdin is
    /// closed or the child stopped reading for good.
    pub fn send_line(&self, line: String) -> bool {
        self.stdin.send(line)
    }

    /// Close stdin once the lines already queued are written.
    pub fn close_stdin(&mut self) {
        self.stdin.close();
    }

    /// Resolves once the child (the group leader) has exited. Cancel-safe: it can be a
    /// `select!` branch polled again and again.
    pub async fn exited(&mut self) {
        if let Some(watch) = self.exit_watch.as_mut() {
            // A watcher that failed tells nothing more: treat it as exited; `shutdown`
            // still signals the group before reaping.
            watch.exited().await;
            self.exit_watch = None;
        }
    }

    /// End the child and reap it: close stdin, wait `stdin_grace`, SIGTERM the group,
    /// wait `term_grace`, SIGKILL the group, wait for the leader; then SIGKILL whatever
    /// is left of the group, reap the leader, wait (up to `drain`) until no process of
    /// the group remains, and collect the stderr tail (waiting up to `drain` for stderr
    /// to close). Skips to the sweep if the child has already exited.
    pub async fn shutdown(mut self, timings: ShutdownTimings) -> ExitReport {
        // Noted while the child still parents them: ending it orphans them.
        sweep::note_now(self.pid);
        self.close_stdin();
        if tokio::time::timeout(timings.stdin_grace, self.exited())
            .await
            .is_err()
        {
            tracing::debug!(
                pid = self.pid,
                "child still running after stdin closed: SIGTERM"
            );
            // What it started since the first note (a tool in a session of its own) is
            // still its descendant now, and not once it is gone.
            sweep::note_now(self.pid);
            if let Some((host, file)) = &self.remote {
                host.signal_group(file, "TERM").await;
            }
            signal_group(self.pid, Signal::SIGTERM);
            if tokio::time::timeout(timings.term_grace, self.exited())
                .await
                .is_err()
            {
                tracing::debug!(pid = self.pid, "child still running after SIGTERM: SIGKILL");
                if let Some((host, file)) = &self.remote {
                    host.signal_group(file, "KILL").await;
                }
                // Frozen first, so it starts nothing between the last note and its end.
                signal_group(self.pid, Signal::SIGSTOP);
                sweep::note_now(self.pid);
                signal_group(self.pid, Signal::SIGKILL);
                self.exited().await;
            }
        }
        // The leader is a zombie at most, so the group id is still ours: sweep what it
        // left behind (background jobs of a tool call, say).
        signal_group(self.pid, Signal::SIGKILL);
        // And on its host, what is left of its group there.
        if let Some((host, file)) = self.remote.take() {
            host.end_group(&file).await;
        }
        let status = self.child.wait().await;
        self.reaped = status.is_ok();
        if self.reaped {
            // SIGKILL is delivered at once but a process takes a moment to die (and to
            // be reaped by its new parent). Only a probe from here on: the id may be
            // free now.
            wait_group_gone(self.pid, timings.drain).await;
        }
        // Whatever it started outside its group (a session of its own, an orphan the
        // owner adopted) goes too: the one sweep, for every provider.
        let pid = self.pid;
        let _ = tokio::task::spawn_blocking(move || sweep::finish(pid)).await;
        self.stdin.abort();
        let stderr_tail = self.stderr.finish(timings.drain).await;
        match status {
            Ok(status) => ExitReport {
                code: status.code(),
                signal: status.signal(),
                stderr_tail,
            },
            Err(e) => ExitReport {
                code: None,
                signal: None,
                stderr_tail: format!("{stderr_tail}\n(could not reap the child: {e})")
                    .trim_start()
                    .to_string(),
            },
        }
    }
}

impl Drop for ProviderProcess {
    /// Dropped without [`ProviderProcess::shutdown`] (its task aborted, say): kill the
    /// whole group, not only the leader that `kill_on_drop` reaches. The leader is not
    /// reaped yet, so the group id is still ours.
    fn drop(&mut self) {
        if !self.reaped {
            signal_group(self.pid, Signal::SIGKILL);
        }
        if let Some((host, file)) = self.remote.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { host.end_group(&file).await });
        }
        // Already swept after a shutdown (then this finds nothing registered).
        sweep::finish(self.pid);
    }
}

/// Writes queued lines to the child's stdin from a task of its own, so a child that
/// stops reading can never block the adapter.
#[derive(Debug)]
struct StdinWriter {
    tx: Option<mpsc::UnboundedSender<String>>,
    task: JoinHandle<()>,
}

impl StdinWriter {
    fn new(mut stdin: ChildStdin) -> StdinWriter {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let task = tokio::spawn(async move {
            while let Some(mut line) = rx.recv().await {
                line.push('\n');
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
            // The sender is gone: dropping `stdin` closes the pipe.
        });
        StdinWriter { tx: Some(tx), task }
    }

    fn send(&self, line: String) -> bool {
        match &self.tx {
            Some(tx) => tx.send(line).is_ok(),
            None => false,
        }
    }

    fn close(&mut self) {
        self.tx = None;
    }

    fn abort(&self) {
        self.task.abort();
    }
}

/// One line read from a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// The line without its `\n` (and `\r`), invalid UTF-8 replaced.
    Text(String),
    /// A line longer than the cap, skipped whole.
    TooLong {
        /// Its length, without the newline.
        bytes: usize,
    },
}

/// Reads lines of at most `max_bytes` from a child's output. Cancel-safe: `next_line`
/// keeps its partial line in `self`, so it can be a `select!` branch.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: BufReader<R>,
    max_bytes: usize,
    buf: Vec<u8>,
    /// Bytes of an over-long line skipped so far (the line is being skipped when > 0).
    skipped: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of `reader`'s lines that skips any longer than `max_bytes`.
    pub fn new(reader: R, max_bytes: usize) -> LineReader<R> {
        LineReader {
            reader: BufReader::new(reader),
            max_bytes,
            buf: Vec::new(),
            skipped: 0,
        }
    }

    /// The next line, or `None` at end of input. A last line without a newline counts.
    pub async fn next_line(&mut self) -> io::Result<Option<Line>> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                return Ok(self.take_at_eof());
            }
            let (chunk, newline) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], true),
                None => (available, false),
            };
            let used = chunk.len() + usize::from(newline);
            if self.skipped > 0 || self.buf.len() + chunk.len() > self.max_bytes {
                self.skipped += self.buf.len() + chunk.len();
                self.buf.clear();
            } else {
                self.buf.extend_from_slice(chunk);
            }
            self.reader.consume(used);
            if newline {
                return Ok(Some(self.take_line()));
            }
        }
    }

    fn take_line(&mut self) -> Line {
        if self.skipped > 0 {
            let bytes = std::mem::take(&mut self.skipped);
            return Line::TooLong { bytes };
        }
        let mut bytes = std::mem::take(&mut self.buf);
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        Line::Text(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    fn take_at_eof(&mut self) -> Option<Line> {
        if self.skipped > 0 || !self.buf.is_empty() {
            Some(self.take_line())
        } else {
            None
        }
    }
}

/// The last lines of a child's stderr, collected by a task of its own.
#[derive(Debug)]
struct StderrTail {
    tail: Arc<Mutex<TailBuffer>>,
    task: JoinHandle<()>,
}

impl StderrTail {
    fn collect<R: AsyncRead + Unpin + Send + 'static>(stderr: R) -> StderrTail {
        let tail = Arc::new(Mutex::new(TailBuffer::new(
            STDERR_TAIL_LINES,
            STDERR_TAIL_BYTES,
        )));
        let shared = Arc::clone(&tail);
        let task = tokio::spawn(async move {
            let mut lines = LineReader::new(stderr, MAX_STDERR_LINE_BYTES);
            while let Ok(Some(line)) = lines.next_line().await {
                let text = match line {
                    Line::Text(text) => text,
                    Line::TooLong { bytes } => format!("[a stderr line of {bytes} bytes skipped]"),
                };
                lock(&shared).push(&text);
            }
        });
        StderrTail { tail, task }
    }

    /// Wait up to `wait` for stderr to close, then render the tail.
    async fn finish(&mut self, wait: Duration) -> String {
        if tokio::time::timeout(wait, &mut self.task).await.is_err() {
            self.task.abort();
        }
        lock(&self.tail).render()
    }
}

fn lock(tail: &Mutex<TailBuffer>) -> std::sync::MutexGuard<'_, TailBuffer> {
    tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keeps the last `max_lines` lines and at most `max_bytes` bytes of them (a single
/// longer line keeps its end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailBuffer {
    lines: VecDeque<String>,
    bytes: usize,
    max_lines: usize,
    max_bytes: usize,
}

impl TailBuffer {
    /// An empty tail of at most `max_lines` lines and `max_bytes` bytes.
    pub fn new(max_lines: usize, max_bytes: usize) -> TailBuffer {
        TailBuffer {
            lines: VecDeque::new(),
            bytes: 0,
            max_lines,
            max_bytes,
        }
    }

    /// Keeps `line` (its end, when it alone is over the byte cap), dropping the oldest
    /// lines until both caps hold.
    pub fn push(&mut self, line: &str) {
        if self.max_lines == 0 {
            return;
        }
        let line = keep_end(line, self.max_bytes).to_string();
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > self.max_lines || self.bytes > self.max_bytes {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    /// The kept lines joined with `\n`.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.bytes + self.lines.len());
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(line);
        }
        out
    }
}

/// The last at most `max_bytes` bytes of `s`, cut at a character boundary.
fn keep_end(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut start = s.len() - max_bytes;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::kill;

    async fn read_all<R: AsyncRead + Unpin>(mut reader: LineReader<R>) -> Vec<Line> {
        let mut out = Vec::new();
        while let Some(line) = reader.next_line().await.expect("reading from memory") {
            out.push(line);
        }
        out
    }

    fn text(s: &str) -> Line {
        Line::Text(s.to_string())
    }

    #[tokio::test]
    async fn lines_split_on_newline_with_crlf_and_a_last_line_without_newline() {
        let input: &[u8] = b"one\r\ntwo\n\nthree";
        let lines = read_all(LineReader::new(input, 100)).await;
        assert_eq!(
            lines,
            vec![text("one"), text("two"), text(""), text("three")]
        );
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_skipped_and_reading_goes_on() {
        let long = "x".repeat(50);
        let input = format!("short\n{long}\nafter\n{long}");
        // A tiny buffer makes the long line arrive in many pieces.
        let reader = LineReader {
            reader: BufReader::with_capacity(7, input.as_bytes()),
            max_bytes: 10,
            buf: Vec::new(),
            skipped: 0,
        };
        let lines = read_all(reader).await;
        assert_eq!(
            lines,
            vec![
                text("short"),
                Line::TooLong { bytes: 50 },
                text("after"),
                Line::TooLong { bytes: 50 },
            ]
        );
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_cap_is_kept() {
        let input: &[u8] = b"0123456789\n01234567890\n";
        let lines = read_all(LineReader::new(input, 10)).await;
        assert_eq!(lines, vec![text("0123456789"), Line::TooLong { bytes: 11 }]);
    }

    #[tokio::test]
    async fn invalid_utf8_is_replaced_not_an_error() {
        let input: &[u8] = b"ok \xff\xfe end\n";
        let lines = read_all(LineReader::new(input, 100)).await;
        assert_eq!(lines, vec![text("ok \u{fffd}\u{fffd} end")]);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let mut tail = TailBuffer::new(3, 1000);
        for i in 0..10 {
            tail.push(&format!("line {i}"));
        }
        assert_eq!(tail.render(), "line 7\nline 8\nline 9");
    }

    #[test]
    fn tail_keeps_at_most_the_byte_cap() {
        let mut tail = TailBuffer::new(20, 10);
        tail.push("aaaa");
        tail.push("bbbb");
        tail.push("cccc");
        assert_eq!(tail.render(), "bbbb\ncccc");
        tail.push("0123456789abcdef");
        assert_eq!(tail.render(), "6789abcdef");
    }

    #[test]
    fn keep_end_cuts_at_a_char_boundary() {
        assert_eq!(keep_end("héllo", 4), "llo");
        assert_eq!(keep_end("abc", 4), "abc");
    }

    fn sh(script: &str) -> (Vec<String>, BTreeMap<String, String>) {
        (vec!["-c".to_string(), script.to_string()], BTreeMap::new())
    }

    fn spawn_sh(script: &str) -> (ProviderProcess, LineReader<ChildStdout>) {
        let (args, env) = sh(script);
        spawn(ChildCommand {
            program: Path::new("/bin/sh"),
            args: &args,
            env: &env,
            cwd: Path::new("/"),
            run_id: "test",
            journal: None,
            transport: None,
            sandbox: None,
        })
        .expect("spawning /bin/sh")
    }

    fn short() -> ShutdownTimings {
        ShutdownTimings {
            stdin_grace: Duration::from_millis(300),
            term_grace: Duration::from_millis(300),
            drain: Duration::from_secs(2),
        }
    }

    fn group_is_gone(pgid: u32) -> bool {
        kill(Pid::from_raw(-(pgid as i32)), None) == Err(Errno::ESRCH)
    }

    #[tokio::test]
    async fn spawn_fails_cleanly_for_a_missing_program_or_directory() {
        let env = BTreeMap::new();
        let err = spawn(ChildCommand {
            program: Path::new("/nonexistent/provider"),
            args: &[],
            env: &env,
            cwd: Path::new("/"),
            run_id: "test",
            journal: None,
            transport: None,
            sandbox: None,
        })
        .expect_err("no such program");
        assert_eq!(err.command, "/nonexistent/provider");
        let err = spawn(ChildCommand {
            program: Path::new("/bin/sh"),
            args: &[],
            env: &env,
            cwd: Path::new("/nonexistent/dir"),
            run_id: "test",
            journal: None,
            transport: None,
            sandbox: None,
        })
        .expect_err("no such directory");
        assert!(err.reason.contains("/nonexistent/dir"), "{err}");
    }

    #[tokio::test]
    async fn child_runs_in_its_own_group_with_env_and_cwd() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut env = BTreeMap::new();
        env.insert("DROVER_TEST_VALUE".to_string(), "forty two".to_string());
        let args = vec![
            "-c".to_string(),
            // $$ is the shell's pid; `ps -o pgid=` is not everywhere, /proc is.
            "echo \"$DROVER_TEST_VALUE\"; pwd; cut -d' ' -f5 /proc/$$/stat; echo $$".to_string(),
        ];
        let (process, mut stdout) = spawn(ChildCommand {
            program: Path::new("/bin/sh"),
            args: &args,
            env: &env,
            cwd: dir.path(),
            run_id: "test",
            journal: None,
            transport: None,
            sandbox: None,
        })
        .expect("spawn");
        let pid = process.pid();
        let mut lines = Vec::new();
        let read = async {
            while let Some(Line::Text(line)) = stdout.next_line().await.expect("read") {
                lines.push(line);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("the child prints and exits");
        let report = tokio::time::timeout(Duration::from_secs(10), process.shutdown(short()))
            .await
            .expect("shutdown of an exited child is quick");
        assert_eq!(report.code, Some(0));
        let cwd = dir.path().canonicalize().expect("canonical tempdir");
        assert_eq!(
            lines,
            vec![
                "forty two".to_string(),
                cwd.display().to_string(),
                pid.to_string(),
                pid.to_string()
            ]
        );
    }

    #[tokio::test]
    async fn stdin_lines_reach_the_child_and_closing_stdin_ends_it() {
        let (mut process, mut stdout) = spawn_sh("while read -r l; do echo \"got $l\"; done");
        assert!(process.send_line("hello".into()));
        let first = tokio::time::timeout(Duration::from_secs(10), stdout.next_line())
            .await
            .expect("an answer")
            .expect("read");
        assert_eq!(first, Some(text("got hello")));
        process.close_stdin();
        assert!(!process.send_line("late".into()));
        let report = tokio::time::timeout(Duration::from_secs(10), process.shutdown(short()))
            .await
            .expect("shutdown");
        // Ended by EOF (exit code 0), not by a signal after the grace.
        assert_eq!((report.code, report.signal), (Some(0), None));
    }

    #[tokio::test]
    async fn shutdown_escalates_to_sigkill_and_leaves_no_process_of_the_group() {
        // Ignores SIGTERM and stdin EOF, and leaves a background grandchild.
        let (process, mut stdout) =
            spawn_sh("trap '' TERM; sleep 1000 & echo started; while :; do sleep 1; done");
        let pgid = process.pid();
        let first = tokio::time::timeout(Duration::from_secs(10), stdout.next_line())
            .await
            .expect("started")
            .expect("read");
        assert_eq!(first, Some(text("started")));
        let report = tokio::time::timeout(Duration::from_secs(20), process.shutdown(short()))
            .await
            .expect("shutdown ends");
        assert_eq!(report.code, None);
        assert_eq!(report.signal, Some(Signal::SIGKILL as i32));
        assert!(group_is_gone(pgid), "a process of group {pgid} survived");
    }

    #[tokio::test]
    async fn sigterm_ends_a_child_that_ignores_stdin_and_the_group_is_swept() {
        let (process, mut stdout) =
            spawn_sh("sleep 1000 & echo started; while :; do sleep 1; done");
        let pgid = process.pid();
        let first = tokio::time::timeout(Duration::from_secs(10), stdout.next_line())
            .await
            .expect("started")
            .expect("read");
        assert_eq!(first, Some(text("started")));
        let report = tokio::time::timeout(Duration::from_secs(20), process.shutdown(short()))
            .await
            .expect("shutdown ends");
        assert_eq!(report.signal, Some(Signal::SIGTERM as i32));
        assert!(group_is_gone(pgid), "a process of group {pgid} survived");
    }

    #[tokio::test]
    async fn exit_code_and_stderr_tail_are_reported() {
        let (mut process, _stdout) =
            spawn_sh("for i in $(seq 1 30); do echo \"err $i\" >&2; done; exit 3");
        tokio::time::timeout(Duration::from_secs(10), process.exited())
            .await
            .expect("the child exits");
        // Polling again after it resolved returns at once.
        process.exited().await;
        let report = tokio::time::timeout(Duration::from_secs(10), process.shutdown(short()))
            .await
            .expect("shutdown");
        assert_eq!(report.code, Some(3));
        let expected: Vec<String> = (11..=30).map(|i| format!("err {i}")).collect();
        assert_eq!(report.stderr_tail, expected.join("\n"));
    }

    #[test]
    fn the_child_dies_with_the_thread_that_spawned_it() {
        // Spawn from a thread of its own, leak the handle (so kill_on_drop cannot act)
        // and let the thread end: PR_SET_PDEATHSIG must kill the child.
        let pid = std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let pid = runtime.block_on(async {
                let (process, stdout) = spawn_sh("while :; do sleep 1; done");
                let pid = process.pid();
                std::mem::forget(process);
                std::mem::forget(stdout);
                pid
            });
            // Do not wait for the exit watcher: the child outlives this thread.
            runtime.shutdown_background();
            pid
        })
        .join()
        .expect("spawning thread");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let status = nix::sys::wait::waitpid(Pid::from_raw(pid as i32), None);
            let _ = tx.send(status);
        });
        let status = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the child died when its spawning thread ended");
        assert_eq!(
            status,
            Ok(nix::sys::wait::WaitStatus::Signaled(
                Pid::from_raw(pid as i32),
                Signal::SIGKILL,
                false
            ))
        );
    }
}
