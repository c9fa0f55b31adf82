//! Starting an owner in the background (`drover serve` in a session of its own) and
//! asking whether one answers: what the dashboard, `drover serve --detach` and the MCP
//! server do when no owner runs.
//!
//! What must stay true: the background owner runs in a session of its own (closing the
//! terminal that started it does not end it), with its stdio going to `logs/owner.log`
//! under the data directory; a start returns only once the control socket answers, or
//! says why the owner did not come up; an owner already running is kept.

use serde::Serialize;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use super::ControlClient;
use crate::dispatch::api::Pong;
use crate::dispatch::{Request, Response};
use crate::error::{DroverError, ErrorCode};
use crate::paths::Paths;

/// How long a start waits for the new owner's socket to answer.
const COME_UP_WITHIN: Duration = Duration::from_secs(20);
/// How often a start asks whether the owner answers yet.
const POLL: Duration = Duration::from_millis(50);

/// The file a background owner's stdout and stderr go to.
pub fn owner_log(paths: &Paths) -> PathBuf {
    paths.log_dir.join("owner.log")
}

/// The owner of `paths`, when one answers on its socket.
pub async fn ping(paths: &Paths) -> Result<Option<Pong>, DroverError> {
    let Some(mut client) = ControlClient::connect(paths).await? else {
        return Ok(None);
    };
    match client.request(Request::Ping).await {
        Ok(Response::Pong(pong)) => Ok(Some(pong)),
        Ok(other) => Err(DroverError::new(
            ErrorCode::Internal,
            format!(
                "the owner answered ping with {other:?}; check that both are the same drover version"
            ),
        )),
        // A socket nobody answers on is an owner going away, or a stale file.
        Err(e) if matches!(e.code, ErrorCode::OwnerUnresponsive | ErrorCode::NoOwner) => Ok(None),
        Err(e) => Err(e),
    }
}

/// How a background start went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Started {
    /// The owner's process id (the one already running, or the one started).
    pub pid: u32,
    /// The socket it serves.
    pub socket: PathBuf,
    /// An owner was already running: nothing was started.
    pub already_running: bool,
}

/// Starts `drover serve` in the background for `paths` (in its own session, its stdio to
/// [`owner_log`]) and returns once its socket answers. An owner already running is kept.
pub async fn start_background(paths: &Paths) -> Result<Started, DroverError> {
    if let Some(pong) = ping(paths).await? {
        return Ok(Started {
            pid: pong.pid,
            socket: paths.socket_file.clone(),
            already_running: true,
        });
    }
    let exe = std::env::current_exe().map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot find the drover executable: {e}; run drover by its full path"),
        )
    })?;
    let log_path = owner_log(paths);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!(
                    "cannot open {}: {e}; check the data directory's permissions",
                    log_path.display()
                ),
            )
        })?;
    let err_log = log.try_clone().map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot share {}: {e}", log_path.display()),
        )
    })?;
    let mut command = std::process::Command::new(&exe);
    command
        .arg("serve")
        .env(crate::paths::HOME_ENV, &paths.data_dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log);
    // SAFETY: setsid is async-signal-safe and touches nothing of the parent's.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))
        });
    }
    let mut child = command.spawn().map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot start `{} serve`: {e}", exe.display()),
        )
    })?;
    let give_up = tokio::time::Instant::now() + COME_UP_WITHIN;
    let started = loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(DroverError::new(
                ErrorCode::OwnerUnresponsive,
                format!(
                    "the background drover ended at once ({status}): {}; see {}",
                    last_line(&log_path).unwrap_or_else(|| "it said nothing".into()),
                    log_path.display()
                ),
            ));
        }
        if let Some(pong) = ping(paths).await? {
            break Started {
                pid: pong.pid,
                socket: paths.socket_file.clone(),
                already_running: pong.pid != child.id(),
            };
        }
        if tokio::time::Instant::now() >= give_up {
            return Err(DroverError::new(
                ErrorCode::OwnerUnresponsive,
                format!(
                    "the background drover (pid {}) did not answer within {} s; see {}",
                    child.id(),
                    COME_UP_WITHIN.as_secs(),
                    log_path.display()
                ),
            ));
        }
        tokio::time::sleep(POLL).await;
    };
    // The owner outlives this process; should it end first, it is reaped here (not left
    // a zombie of a long-lived dashboard).
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(started)
}

fn last_line(path: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| crate::text::clip(l.trim(), 300))
}
