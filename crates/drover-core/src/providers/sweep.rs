//! Nothing a provider CLI starts outlives drover: one provider-neutral tracker and sweep
//! for every adapter (Claude Code, Codex in both modes, OpenCode, the sim).
//!
//! How:
//! - the owner is a child subreaper ([`become_subreaper`], `PR_SET_CHILD_SUBREAPER`), so
//!   whatever a CLI starts, in whatever session or process group, stays a descendant of
//!   drover: when its parent dies it is re-parented to the owner, not to init;
//! - every child [`crate::providers::process`] spawns is registered here with its run
//!   ([`register`]); one scanner thread reads /proc about once a second and notes each
//!   run's descendants by pid and start time (a reused pid has another start time),
//!   reading down each child's tree by the kernel's children lists
//!   (`/proc/PID/task/TID/children`), so a look costs what the tree holds, not every
//!   process on the machine (the whole of /proc where the kernel keeps no lists), and
//!   an adapter notes them again right before it acts on a turn ([`note_now`]: an
//!   interrupt may orphan a command without ending it). What is noted goes to the run's
//!   [`ProcessJournal`] (the ledger's `processes` table), so a later owner can end it
//!   after a crash;
//! - when a child is ended ([`finish`]: stop, shutdown, SIGTERM of the owner, the child's
//!   own exit) every noted process still there, and every orphan of the child's group
//!   the owner adopted, is SIGKILLed (a noted process that leads its own group takes its
//!   group with it) and reaped;
//! - the scanner reaps the zombies of processes the owner adopted, never a child drover
//!   spawned itself (those are tokio's or std's to wait for);
//! - after a crash, [`end_left_over`] ends what is left of the processes the ledger
//!   noted — same boot, same pid, same start time — and of the group of a noted leader
//!   that died with the owner (its death signal) before its own children were noted (an
//!   npm wrapper's native binary, started less than a scan before the crash).
//!
//! (A cgroup per run would be exact; this machine's users rarely have a writable cgroup
//! v2 tree, and the subreaper holds everywhere, so it is the one way.)
//!
//! What must stay true: only processes noted as descendants of a run's child (or adopted
//! orphans of its process group, or after a crash the members left in the group of a
//! noted leader that is gone: a group id stays taken while a member lives) are ever
//! signalled, and only while they are the same process (same start time, same boot); a
//! direct child of drover is never reaped here.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, Once};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// A process noted for the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Noted {
    /// Its pid.
    pub pid: i32,
    /// Its process group (its own pid when it leads one, as a command in a session of
    /// its own does).
    pub pgid: i32,
    /// Its start time (clock ticks since boot), which a reused pid would not share.
    pub start: u64,
}

/// What the tracker tells a run's journal (the ledger's `processes` table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalEntry {
    /// These processes belong to the run (noted on this boot).
    Noted {
        /// The run they belong to.
        run_id: String,
        /// This boot's id (`/proc/sys/kernel/random/boot_id`).
        boot_id: String,
        /// The processes newly noted.
        processes: Vec<Noted>,
    },
    /// The run's child was ended and swept: nothing of it is left to end.
    Swept {
        /// The run.
        run_id: String,
    },
}

/// Where a run's noted processes are written; the dispatcher gives one to each launch
/// (each dispatcher has its own ledger).
#[derive(Clone)]
pub struct ProcessJournal(Arc<dyn Fn(JournalEntry) + Send + Sync>);

impl ProcessJournal {
    /// A journal that hands each entry to `write` (called from the scanner's thread and
    /// from the adapters' tasks).
    pub fn new(write: impl Fn(JournalEntry) + Send + Sync + 'static) -> ProcessJournal {
        ProcessJournal(Arc::new(write))
    }

    fn write(&self, entry: JournalEntry) {
        (self.0)(entry);
    }
}

impl std::fmt::Debug for ProcessJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProcessJournal")
    }
}

/// The most processes noted per run (a fork bomb is not kept in memory).
const MAX_NOTED: usize = 4096;
/// How often the scanner looks.
const SCAN_EVERY: Duration = Duration::from_millis(1000);

struct Tracked {
    run_id: String,
    noted: BTreeMap<i32, Noted>,
    journal: Option<ProcessJournal>,
}

#[derive(Default)]
struct Registry {
    /// By the leader's pid.
    runs: HashMap<i32, Tracked>,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| Mutex::new(Registry::default()));
static SCANNER: Once = Once::new();

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes this process a child subreaper, once: orphans of its descendants are re-parented
/// to it. Call it in the owner before the first child starts.
pub fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            tracing::warn!(error = %e, "cannot become a child subreaper; escaped processes go to init");
        }
    });
}

/// This boot's id (a pid and a start time only name the same process on the same boot).
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// One /proc/PID/stat, read: `(ppid, pgid, session, state, start time)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its parent's pid.
    pub ppid: i32,
    /// Its process group.
    pub pgid: i32,
    /// Its session (a command a CLI starts with `setsid` has one of its own).
    pub session: i32,
    /// `R`, `S`, `Z` (a zombie) …
    pub state: char,
    /// Clock ticks after boot.
    pub start: u64,
}

fn stat_of(pid: i32) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// The fields after the command name (which may hold spaces and parentheses): state,
/// ppid, pgrp, session, …; the start time is field 22 of the line.
fn parse_stat(stat: &str) -> Option<Stat> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every process on the machine: pid → stat.
pub fn all_processes() -> HashMap<i32, Stat> {
    let mut out = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        if let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
            && let Some(stat) = stat_of(pid)
        {
            out.insert(pid, stat);
        }
    }
    out
}

/// The descendants of `root` in `table` (not `root` itself).
fn descendants_in(table: &HashMap<i32, Stat>, root: i32) -> Vec<Noted> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (pid, stat) in table {
        children.entry(stat.ppid).or_default().push(*pid);
    }
    walk_down(root, |parent| {
        let listed = children.get(&parent).map_or(&[][..], Vec::as_slice);
        Some(
            listed
                .iter()
                .filter_map(|pid| table.get(pid).map(|stat| (*pid, *stat)))
                .collect(),
        )
    })
    .unwrap_or_default()
}

/// The descendants of `root` (not `root` itself), given each process's children with
/// their stat (`None`: they cannot be told), at most [`MAX_NOTED`].
fn walk_down(
    root: i32,
    mut children: impl FnMut(i32) -> Option<Vec<(i32, Stat)>>,
) -> Option<Vec<Noted>> {
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for (pid, stat) in children(parent)? {
            found.push(Noted {
                pid,
                pgid: stat.pgid,
                start: stat.start,
            });
            if found.len() >= MAX_NOTED {
                return Some(found);
            }
            queue.push(pid);
        }
    }
    Some(found)
}

/// The children of `pid` with their stat, from every one of its threads'
/// `/proc/PID/task/TID/children` (a child is listed under the thread that started it);
/// `None` when the kernel keeps no such lists (built without `CONFIG_PROC_CHILDREN`). A
/// process that is gone has none, and a child gone since it was listed is left out.
fn children_of(pid: i32) -> Option<Vec<(i32, Stat)>> {
    if !children_listed() {
        return None;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Some(Vec::new());
    };
    let mut children = Vec::new();
    for task in tasks.flatten() {
        // Unreadable: the thread ended while it was read.
        let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        children.extend(
            list.split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
                .filter_map(|child| stat_of(child).map(|stat| (child, stat))),
        );
    }
    Some(children)
}

/// Whether this kernel lists each process's children (`CONFIG_PROC_CHILDREN`, on in the
/// common distributions' kernels); asked once.
fn children_listed() -> bool {
    static LISTED: LazyLock<bool> = LazyLock::new(|| {
        let me = std::process::id();
        std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists()
    });
    *LISTED
}

/// The descendants of `root` (not `root` itself): read down from `root` by the
/// children lists, so it costs what the tree holds, not what the machine runs; the
/// whole of /proc where the kernel keeps no lists.
pub fn descendants(root: i32) -> Vec<Noted> {
    walk_down(root, children_of).unwrap_or_else(|| descendants_in(&all_processes(), root))
}

/// This process's children, with their stat: the owner's own children and the orphans
/// it adopted as a subreaper.
fn own_children() -> Vec<(i32, Stat)> {
    let me = std::process::id() as i32;
    children_of(me)
        .unwrap_or_else(|| all_processes().into_iter().collect())
        .into_iter()
        .filter(|(_, s)| s.ppid == me)
        .collect()
}

/// The descendants of `root` that are not in its process group (`root` leads its group).
pub fn escaped_descendants(root: u32) -> Vec<Noted> {
    let Ok(root) = i32::try_from(root) else {
        return Vec::new();
    };
    descendants(root)
        .into_iter()
        .filter(|n| n.pgid != root)
        .collect()
}

/// Registers the child `pid` of run `run_id` (just spawned: it leads its own group).
pub fn register(run_id: &str, pid: u32, journal: Option<ProcessJournal>) {
    let Ok(pid) = i32::try_from(pid) else { return };
    let Some(stat) = stat_of(pid) else { return };
    let leader = Noted {
        pid,
        pgid: stat.pgid,
        start: stat.start,
    };
    if let Some(journal) = &journal {
        journal.write(JournalEntry::Noted {
            run_id: run_id.to_string(),
            boot_id: boot_id(),
            processes: vec![leader],
        });
    }
    registry().runs.insert(
        pid,
        Tracked {
            run_id: run_id.to_string(),
            noted: BTreeMap::new(),
            journal,
        },
    );
    SCANNER.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("drover-sweep".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(SCAN_EVERY);
                    scan();
                }
            });
    });
}

/// Notes the descendants of every registered child, and reaps adopted zombies.
fn scan() {
    let leaders: Vec<i32> = registry().runs.keys().copied().collect();
    for leader in &leaders {
        // Read outside the lock: an adapter noting its own child never waits on a walk.
        let found = descendants(*leader);
        if let Some(tracked) = registry().runs.get_mut(leader) {
            note_into(tracked, found);
        }
    }
    reap_adopted(&own_children(), &leaders);
}

/// Adds `found` (`tracked`'s descendants now) to what is noted; forgets the noted ones
/// that are gone.
fn note_into(tracked: &mut Tracked, found: Vec<Noted>) {
    tracked
        .noted
        .retain(|pid, n| stat_of(*pid).is_some_and(|s| s.start == n.start));
    let mut new = Vec::new();
    for n in found {
        if tracked.noted.len() >= MAX_NOTED {
            break;
        }
        if tracked.noted.insert(n.pid, n) != Some(n) {
            new.push(n);
        }
    }
    if !new.is_empty()
        && let Some(journal) = &tracked.journal
    {
        journal.write(JournalEntry::Noted {
            run_id: tracked.run_id.clone(),
            boot_id: boot_id(),
            processes: new,
        });
    }
}

/// Notes the descendants of child `pid` now (before an interrupt, which may orphan a
/// command without ending it).
pub fn note_now(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    if !registry().runs.contains_key(&pid) {
        return;
    }
    let found = descendants(pid);
    if let Some(tracked) = registry().runs.get_mut(&pid) {
        note_into(tracked, found);
    }
}

/// The child `pid` has been reaped (or is about to be dropped): SIGKILL what is left of
/// its noted descendants and of the orphans of its group the owner adopted, reap them,
/// and tell the journal the run's processes are swept.
pub fn finish(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    let Some(tracked) = registry().runs.remove(&pid) else {
        return;
    };
    let mut targets: Vec<Noted> = tracked.noted.values().copied().collect();
    // Orphans of the child's group (or of a noted group) now parented by the owner.
    for (p, stat) in &own_children() {
        if *p != pid
            && (stat.pgid == pid
                || tracked
                    .noted
                    .values()
                    .any(|n| n.pgid == stat.pgid && n.pgid == n.pid))
        {
            targets.push(Noted {
                pid: *p,
                pgid: stat.pgid,
                start: stat.start,
            });
        }
    }
    kill_left(&targets);
    // Give the kills a moment to land (about half a second at most), then reap what the
    // owner adopted.
    for gap in kill_probe_gaps().take(53) {
        let alive = targets.iter().any(|n| {
            stat_of(n.pid).is_some_and(|s| s.start == n.start && s.state != 'Z' && s.state != 'X')
        });
        reap_noted(&targets);
        if !alive {
            break;
        }
        std::thread::sleep(gap);
    }
    reap_noted(&targets);
    if let Some(journal) = &tracked.journal {
        journal.write(JournalEntry::Swept {
            run_id: tracked.run_id,
        });
    }
}

/// The gaps between looks at processes just sent SIGKILL: one dies within a millisecond
/// or two, so the first looks come soon (a run's end waits for them), then every 10 ms.
pub fn kill_probe_gaps() -> impl Iterator<Item = Duration> {
    [1, 2, 4, 8]
        .into_iter()
        .chain(std::iter::repeat(10))
        .map(Duration::from_millis)
}

/// SIGKILL what is left of `noted`, each only if it is still the same process. A noted
/// process that leads its own group takes its group with it: a command's shell may have
/// started more of it after it was noted.
pub fn kill_left(noted: &[Noted]) {
    for process in noted {
        if stat_of(process.pid).is_some_and(|s| s.start == process.start) {
            tracing::debug!(pid = process.pid, "killing a process the CLI left behind");
            if process.pgid == process.pid {
                // Still alive, so its group id is still its own, never a reused one.
                let _ = killpg(Pid::from_raw(process.pgid), Signal::SIGKILL);
            }
            let _ = kill(Pid::from_raw(process.pid), Signal::SIGKILL);
        }
    }
}

/// Reaps those of `noted` that are zombies the owner adopted (never a child of its own:
/// a noted process was a descendant of a provider child, not a child of drover).
fn reap_noted(noted: &[Noted]) {
    let me = std::process::id() as i32;
    for n in noted {
        if stat_of(n.pid).is_some_and(|s| s.start == n.start && s.ppid == me && s.state == 'Z') {
            let _ = waitpid(Pid::from_raw(n.pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// Reaps zombies the owner adopted: of `children` (this process's), those in another
/// session (drover never starts a child in a session of its own), or in the group of a
/// registered child without being that child.
fn reap_adopted(children: &[(i32, Stat)], leaders: &[i32]) {
    let me = std::process::id() as i32;
    let Some(mine) = stat_of(me) else { return };
    for (pid, stat) in children {
        let adopted = stat.session != mine.session
            || (leaders.contains(&stat.pgid) && !leaders.contains(pid));
        if stat.ppid == me && stat.state == 'Z' && adopted {
            let _ = waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// A process a crashed owner noted in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOver {
    /// The run it was noted for.
    pub run_id: String,
    /// The boot it was noted on (a process of another boot is long gone).
    pub boot_id: String,
    /// The process, as noted.
    pub process: Noted,
}

/// Ends what is left of `noted` (after a crash): each process on this boot whose pid
/// still has the noted start time gets SIGKILL (its group too when it led one), and so
/// does what is left of the group of a noted leader that is gone ([`orphaned_members`]:
/// a CLI's child started in the last second before the crash was not noted yet, and the
/// leader itself died with the owner). Returns how many were ended. Nothing else is
/// ever signalled.
pub fn end_left_over(noted: &[LeftOver]) -> usize {
    let boot = boot_id();
    let table = all_processes();
    let mut ended = 0;
    for left in noted {
        if left.boot_id != boot || left.process.pid <= 1 {
            continue;
        }
        if table
            .get(&left.process.pid)
            .is_some_and(|s| s.start == left.process.start && s.state != 'Z')
        {
            tracing::info!(run = %left.run_id, pid = left.process.pid, "ending a process a crashed drover left");
            kill_left(std::slice::from_ref(&left.process));
            ended += 1;
            continue;
        }
        let members = orphaned_members(&table, &left.process);
        if !members.is_empty() {
            tracing::info!(run = %left.run_id, pgid = left.process.pid, members = members.len(), "ending what is left of the group of a process a crashed drover left");
            kill_left(&members);
            ended += members.len();
        }
    }
    ended
}

/// The processes still in the group `leader` led, once `leader` is gone (exited, or a
/// zombie nobody reaped: an init that does not reap leaves one): every live member of
/// group `leader.pid` that started no earlier than it. A group id stays taken while any
/// member lives, so these are the leader's own (what it started before it was noted,
/// like the native binary an npm wrapper starts); when the pid lives on as another
/// process (another start time), or the leader itself still runs (then it is ended with
/// its group as a noted process), nothing is returned, as for a leader that led no
/// group of its own.
fn orphaned_members(table: &HashMap<i32, Stat>, leader: &Noted) -> Vec<Noted> {
    let gone = match table.get(&leader.pid) {
        None => true,
        Some(s) => s.start == leader.start && matches!(s.state, 'Z' | 'X'),
    };
    if leader.pgid != leader.pid || !gone {
        return Vec::new();
    }
    let mut members: Vec<Noted> = table
        .iter()
        .filter(|(pid, s)| {
            **pid != leader.pid
                && s.pgid == leader.pid
                && s.start >= leader.start
                && !matches!(s.state, 'Z' | 'X')
        })
        .map(|(pid, s)| Noted {
            pid: *pid,
            pgid: s.pgid,
            start: s.start,
        })
        .collect();
    members.sort_by_key(|n| n.pid);
    members
}

#[cfg(test)]
mod tests;
