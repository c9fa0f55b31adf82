//! A one-shot command run to its end, bounded: its input written, each of its outputs
//! kept up to a limit, and the command killed when it overruns its time. The forge CLIs
//! (`gh`, `glab`) and a host's transport (a probe, a signal sent there) run this way.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a one-shot command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Its exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    /// Its stdout, at most the limit it was run with.
    pub stdout: String,
    /// Its stderr, at most the limit it was run with.
    pub stderr: String,
}

impl Output {
    /// Exited 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Why a one-shot command gave no [`Output`].
#[derive(Debug)]
pub enum Failed {
    /// It could not be started.
    Start(std::io::Error),
    /// It started, but could not be waited for.
    Wait(std::io::Error),
    /// It took longer than its time and was killed.
    TimedOut,
}

/// Runs `command` (its program, arguments, directory and environment set by the caller)
/// with `input` on its stdin (or stdin closed), keeping at most `stdout_limit` and
/// `stderr_limit` bytes of its outputs; killed (`kill_on_drop`) past `timeout`.
pub async fn run(
    command: &mut tokio::process::Command,
    input: Option<&[u8]>,
    stdout_limit: usize,
    stderr_limit: usize,
    timeout: Duration,
) -> Result<Output, Failed> {
    command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(Failed::Start)?;
    let stdin = child.stdin.take();
    let feed = async move {
        if let (Some(mut stdin), Some(bytes)) = (stdin, input) {
            // A command that stops reading early (an error) closes the pipe: fine.
            let _ = stdin.write_all(bytes).await;
            let _ = stdin.shutdown().await;
        }
    };
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let work = async {
        let ((), stdout, stderr) =
            tokio::join!(feed, kept(stdout, stdout_limit), kept(stderr, stderr_limit));
        let status = child.wait().await.map_err(Failed::Wait)?;
        Ok(Output {
            code: status.code(),
            stdout,
            stderr,
        })
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or(Err(Failed::TimedOut))
}

/// At most `limit` bytes of what `pipe` gives, as text.
async fn kept<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>, limit: usize) -> String {
    let mut kept = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(limit as u64).read_to_end(&mut kept).await;
    }
    String::from_utf8_lossy(&kept).into_owned()
}
