//! The owner's warden: a small process (`drover warden`) that outlives the owner only to
//! end what the owner's runs left when the owner dies without shutting them down (SIGKILL,
//! a crash, the OOM killer), without waiting for a next owner to start
//! (docs/ARCHITECTURE.md §"A restart").
//!
//! How: the owner starts it with a pipe on its stdin, writes the ledger's path as one
//! line, and holds the pipe open for its whole life. A clean stop, once every run's CLI
//! is shut down, writes `stop` and closes the pipe: the warden exits and touches nothing
//! (the stop's own shutdown ends what it started, in its order). When the pipe's end
//! closes with no `stop` — the owner's process ended otherwise — the warden reads the
//! ledger's `processes` table (read-only) and ends what is left of each noted process
//! with the crash recovery's rules ([`sweep::end_left_over`]: same boot, pid and start
//! time, and what is left of a gone leader's group), then exits.
//!
//! What must stay true: the warden signals nothing a run's children did not start; it
//! writes nothing (the next owner's recovery owns the ledger); it is in a process group
//! of its own and ignores SIGINT and SIGHUP, so the Ctrl-C or hangup that stops the owner
//! does not take the warden first; it has no parent-death signal.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use crate::ledger::LedgerReader;
use crate::providers::sweep;

/// The warden the owner started: dropping the pipe (or the owner's death) sets it off.
pub struct Warden {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl Warden {
    /// Starts `<exe> warden` for the ledger at `ledger`. A warden that cannot start is
    /// logged and the owner goes on without it (the next owner's recovery still ends what
    /// a crash left).
    pub fn start(exe: &Path, ledger: &Path) -> Option<Warden> {
        use std::os::unix::process::CommandExt;
        let spawned = Command::new(exe)
            .arg("warden")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                tracing::warn!(error = %e, exe = %exe.display(), "cannot start the warden; a crash's leftovers wait for the next owner");
                return None;
            }
        };
        let mut pipe = child.stdin.take()?;
        if let Err(e) = writeln!(pipe, "{}", ledger.display()) {
            tracing::warn!(error = %e, "the warden did not take the ledger's path");
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        tracing::debug!(pid = child.id(), "warden started");
        Some(Warden {
            child,
            pipe: Some(pipe),
        })
    }

    /// The owner stops cleanly (its runs' CLIs are shut down): tell the warden so, close
    /// the pipe and wait (bounded) for it to exit.
    pub fn stop(mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = writeln!(pipe, "{STOP}");
        }
        for _ in 0..200 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        tracing::warn!(
            pid = self.child.id(),
            "the warden did not exit within 2 s; ending it"
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a clean stop writes to the warden before it closes the pipe.
const STOP: &str = "stop";

/// The warden's side (`drover warden`): reads the ledger's path from `input`, waits for
/// the end of `input` (the owner's end), then — unless the owner said it stopped cleanly
/// — ends what the owner's runs left. Returns how many processes it ended.
pub fn watch(input: impl BufRead) -> usize {
    ignore_stop_signals();
    let mut lines = input.lines();
    let Some(Ok(ledger)) = lines.next() else {
        return 0;
    };
    let ledger = PathBuf::from(ledger);
    // Nothing more comes but a clean stop's word: this returns when the owner's end of
    // the pipe closes.
    for line in lines {
        match line {
            Ok(line) if line == STOP => return 0,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    end_what_was_left(&ledger)
}

/// Ends what is left of the processes the ledger at `ledger` notes.
fn end_what_was_left(ledger: &Path) -> usize {
    let noted = match LedgerReader::open(ledger).and_then(|r| r.noted_processes()) {
        Ok(noted) => noted,
        Err(e) => {
            tracing::warn!(error = %e, ledger = %ledger.display(), "warden: cannot read the noted processes");
            return 0;
        }
    };
    sweep::end_left_over(&noted)
}

fn ignore_stop_signals() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for sig in [Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: installing SIG_IGN runs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
}
