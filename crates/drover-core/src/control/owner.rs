//! One owner per data directory: an exclusive `flock` on `paths.lock_file`, held for the
//! owner's lifetime.
//!
//! The owner is the process that runs the dispatcher (the dashboard, `drover serve`, or a
//! `drover dispatch` with nobody else around). What must stay true:
//! - the lock is taken before the dispatcher opens the ledger, so a second process never
//!   runs recovery over a live owner's runs;
//! - only the lock holder creates or removes the socket file: a socket file found while
//!   the lock is free was left by a dead owner and is removed here;
//! - the kernel drops the lock when the process dies, however it dies, so a crash never
//!   leaves the directory locked.

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{DroverError, ErrorCode};
use crate::paths::Paths;

/// Proof that this process owns the data directory. Dropping it releases the lock.
#[derive(Debug)]
pub struct OwnerLock {
    _lock: Flock<File>,
}

impl OwnerLock {
    /// Takes the lock without waiting, writes this process's pid into the lock file and
    /// removes a stale socket file. Another live owner → `OWNER_RUNNING`.
    pub fn acquire(paths: &Paths) -> Result<OwnerLock, DroverError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false) // the live owner's pid stays readable until we hold the lock
            .mode(0o600)
            .open(&paths.lock_file)
            .map_err(|e| {
                DroverError::new(
                    ErrorCode::Internal,
                    format!(
                        "cannot open the lock file {}: {e}; check the data directory's permissions",
                        paths.lock_file.display()
                    ),
                )
            })?;
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((mut file, Errno::EWOULDBLOCK)) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                let who = if pid.parse::<u32>().is_ok() {
                    format!("another drover (pid {pid})")
                } else {
                    "another drover".to_string()
                };
                return Err(DroverError::new(
                    ErrorCode::OwnerRunning,
                    format!(
                        "{who} already owns {}; use it (every drover command talks to it), or stop it first",
                        paths.data_dir.display()
                    ),
                ));
            }
            Err((_, errno)) => {
                return Err(DroverError::new(
                    ErrorCode::Internal,
                    format!(
                        "cannot lock {}: {errno}; check the file system supports flock",
                        paths.lock_file.display()
                    ),
                ));
            }
        };
        // The pid is informational (the lock itself is what counts): a failure to write it
        // is logged, not fatal.
        let written = lock
            .set_len(0)
            .and_then(|()| lock.seek(SeekFrom::Start(0)).map(drop))
            .and_then(|()| write!(lock, "{}", std::process::id()))
            .and_then(|()| lock.flush());
        if let Err(e) = written {
            tracing::warn!(error = %e, "control: cannot write the pid into the lock file");
        }
        remove_stale_socket(&paths.socket_file)?;
        Ok(OwnerLock { _lock: lock })
    }
}

/// Whether the last owner of `paths` is gone: the lock file names a process that no
/// longer runs, so the kernel has freed its lock and any run the ledger still has active
/// was left by a crash (the next owner marks it interrupted). Only looks: `false` when
/// that cannot be told (no lock file, no pid in it) or the process still runs.
pub fn last_owner_gone(paths: &Paths) -> bool {
    let Ok(text) = std::fs::read_to_string(&paths.lock_file) else {
        return false;
    };
    match text.trim().parse::<i32>() {
        Ok(pid) if pid > 0 => !process_alive(pid),
        _ => false,
    }
}

/// Whether a process with this pid still runs (a zombie waiting for its parent does not).
pub fn process_alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state letter follows the command's closing parenthesis.
    match stat.rsplit_once(')') {
        Some((_, rest)) => !rest.trim_start().starts_with('Z'),
        None => false,
    }
}

/// Removes a socket file nobody serves (the lock holder calls this). Anything that is not
/// a socket is left alone and refused, so a misconfigured path never deletes user data.
fn remove_stale_socket(socket: &Path) -> Result<(), DroverError> {
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(DroverError::new(
                ErrorCode::Internal,
                format!(
                    "cannot inspect {}: {e}; check the data directory's permissions",
                    socket.display()
                ),
            ));
        }
    };
    if !meta.file_type().is_socket() {
        return Err(DroverError::new(
            ErrorCode::Internal,
            format!(
                "{} exists and is not a socket; move it away so drover can listen there",
                socket.display()
            ),
        ));
    }
    tracing::info!(socket = %socket.display(), "control: removing a stale socket file");
    match std::fs::remove_file(socket) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(DroverError::new(
            ErrorCode::Internal,
            format!(
                "cannot remove the stale socket {}: {e}; remove it by hand",
                socket.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_owner_is_gone_only_when_the_pid_it_wrote_no_longer_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths::under(tmp.path());
        assert!(!last_owner_gone(&paths), "no lock file: nothing to tell");
        // (what the lock file holds, gone)
        let cases = [
            (std::process::id().to_string(), false),
            // pid_max is at most 2^22: this one cannot run.
            (i32::MAX.to_string(), true),
            (String::new(), false),
            ("not a pid".to_string(), false),
            ("-1".to_string(), false),
            ("0".to_string(), false),
        ];
        for (text, gone) in cases {
            std::fs::write(&paths.lock_file, &text).unwrap();
            assert_eq!(last_owner_gone(&paths), gone, "{text:?}");
        }
        // A live owner holds the lock with its own pid in the file.
        let lock = OwnerLock::acquire(&paths).unwrap();
        assert!(!last_owner_gone(&paths));
        drop(lock);
        assert!(process_alive(std::process::id() as i32));
        assert!(!process_alive(i32::MAX));
    }

    #[test]
    fn a_second_owner_is_refused_until_the_first_lets_go() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths::under(tmp.path());
        let first = OwnerLock::acquire(&paths).unwrap();
        let pid = std::fs::read_to_string(&paths.lock_file).unwrap();
        assert_eq!(pid, std::process::id().to_string());

        // flock locks belong to the open file, so a second open in this process contends
        // exactly as another process would.
        let e = OwnerLock::acquire(&paths).unwrap_err();
        assert_eq!(e.code, ErrorCode::OwnerRunning);
        assert!(
            e.message.contains(&format!("pid {}", std::process::id())),
            "{}",
            e.message
        );
        assert!(
            e.message.contains(&*tmp.path().to_string_lossy()),
            "{}",
            e.message
        );
        // The refused attempt did not erase the owner's pid.
        assert_eq!(std::fs::read_to_string(&paths.lock_file).unwrap(), pid);

        drop(first);
        let _again = OwnerLock::acquire(&paths).unwrap();
    }

    #[test]
    fn a_stale_socket_is_removed_but_other_files_are_not() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths::under(tmp.path());
        // A socket file whose listener is gone, as a killed owner leaves it.
        drop(std::os::unix::net::UnixListener::bind(&paths.socket_file).unwrap());
        assert!(paths.socket_file.exists());
        let lock = OwnerLock::acquire(&paths).unwrap();
        assert!(!paths.socket_file.exists());
        drop(lock);

        std::fs::write(&paths.socket_file, "precious").unwrap();
        let e = OwnerLock::acquire(&paths).unwrap_err();
        assert_eq!(e.code, ErrorCode::Internal);
        assert!(e.message.contains("not a socket"), "{}", e.message);
        assert_eq!(
            std::fs::read_to_string(&paths.socket_file).unwrap(),
            "precious"
        );
    }
}
