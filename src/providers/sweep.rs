//! Processes a provider CLI starts outside its own process group, found and ended with
//! it (Codex and OpenCode both do; Claude Code's Bash tool too, which its interrupt ends).
//!
//! Codex runs each command in a session of its own (`codex-linux-sandbox`, then the
//! shell; seen in /proc with the pinned 0.171.0), so ending the child's process group
//! ([`crate::providers::process`]) does not reach them. Codex is meant to end them on
//! `turn/interrupt`, but under load a command stopped mid-turn sometimes outlived the
//! interrupted turn and the app-server (2 runs in 6 of the peers suite), and noting the
//! descendants only after the interrupt still missed them (the interrupt can orphan a
//! command without ending it). So the descendants outside the child's group are noted
//! before the interrupt and again before the child is ended, and whatever of them is
//! still there once the child is gone is killed.
//!
//! What must stay true: only processes noted as descendants of the child are signalled,
//! and only while they are the same process (same start time in /proc), so a reused pid
//! is never hit.

use std::collections::BTreeMap;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// A process noted for the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Noted {
    pid: i32,
    /// Its process group (its own pid when it leads one, as a command in a session of
    /// its own does).
    pgid: i32,
    /// Its start time (clock ticks since boot), which a reused pid would not share.
    start: u64,
}

/// `(ppid, pgid, start time)` of a process, from `/proc/PID/stat`.
fn stat_of(pid: i32) -> Option<(i32, i32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// The fields after the command name (which may hold spaces and parentheses): state,
/// ppid, pgrp, …; the start time is field 22 of the line.
fn parse_stat(stat: &str) -> Option<(i32, i32, u64)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let pgid = fields.get(2)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((ppid, pgid, start))
}

/// The descendants of `root` that are not in its process group (`root` leads its group).
pub fn escaped_descendants(root: u32) -> Vec<Noted> {
    let Ok(root) = i32::try_from(root) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: BTreeMap<i32, Vec<(i32, i32, u64)>> = BTreeMap::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some((ppid, pgid, start)) = stat_of(pid) {
            children.entry(ppid).or_default().push((pid, pgid, start));
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for &(pid, pgid, start) in children.get(&parent).map_or(&[][..], Vec::as_slice) {
            if pgid != root {
                found.push(Noted { pid, pgid, start });
            }
            queue.push(pid);
        }
    }
    found
}

/// SIGKILL what is left of `noted`, each only if it is still the same process. A noted
/// process that leads its own group takes its group with it: a command's shell may have
/// started more of it after it was noted.
pub fn kill_left(noted: &[Noted]) {
    for process in noted {
        if stat_of(process.pid).is_some_and(|(_, _, start)| start == process.start) {
            tracing::debug!(pid = process.pid, "killing a process the CLI left behind");
            if process.pgid == process.pid {
                // Still alive, so its group id is still its own, never a reused one.
                let _ = killpg(Pid::from_raw(process.pgid), Signal::SIGKILL);
            }
            let _ = kill(Pid::from_raw(process.pid), Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_past_odd_command_names() {
        let line = "4242 (we (ird) name) S 100 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 1000 10";
        assert_eq!(parse_stat(line), Some((100, 4242, 777)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
    }

    #[tokio::test]
    async fn a_descendant_in_a_session_of_its_own_is_found_and_killed() {
        // A shell (own group) that starts `setsid sleep` (a new session) and waits.
        let mut child = tokio::process::Command::new("/bin/bash")
            .args(["-c", "setsid sleep 97 & echo $!; wait"])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("bash starts");
        let root = child.id().expect("a pid");
        let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        use tokio::io::AsyncBufReadExt;
        tokio::time::timeout(std::time::Duration::from_secs(10), out.read_line(&mut line))
            .await
            .expect("the shell says its job's pid")
            .expect("read");
        let sleeper: i32 = line.trim().parse().expect("a pid");
        // setsid may fork once more: wait until the session leader is the sleeper's.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let noted = loop {
            let noted = escaped_descendants(root);
            if !noted.is_empty() {
                break noted;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no escaped descendant found"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        assert!(
            noted.iter().any(|n| n.pid == sleeper),
            "{noted:?} vs {sleeper}"
        );
        let _ = child.start_kill();
        let _ = child.wait().await;
        // The shell is gone; its escaped job is not.
        assert!(stat_of(sleeper).is_some());
        kill_left(&noted);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while stat_of(sleeper).is_some_and(|_| {
            std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
                .map(|s| {
                    !s.rsplit_once(')')
                        .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                })
                .unwrap_or(false)
        }) {
            assert!(
                std::time::Instant::now() < deadline,
                "the job survived the sweep"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}
