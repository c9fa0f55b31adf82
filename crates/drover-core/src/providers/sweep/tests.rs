use super::*;

#[test]
fn stat_lines_are_read_past_odd_command_names() {
    let line =
        "4242 (we (ird) name) S 100 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 1000 10";
    assert_eq!(
        parse_stat(line),
        Some(Stat {
            ppid: 100,
            pgid: 4242,
            session: 4242,
            state: 'S',
            start: 777
        })
    );
    assert_eq!(parse_stat("garbage"), None);
    assert_eq!(parse_stat("1 (x) S 1"), None);
}

#[tokio::test]
async fn the_children_lists_find_the_tree_the_whole_of_proc_shows() {
    // bash → sh → sleep, and bash → sleep: two levels below the root.
    let mut child = tokio::process::Command::new("/bin/bash")
        .args(["-c", "sh -c 'sleep 97 & wait' & sleep 96 & wait"])
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("bash starts");
    let root = child.id().expect("a pid") as i32;
    let pids = |noted: Vec<Noted>| {
        let mut pids: Vec<i32> = noted.into_iter().map(|n| n.pid).collect();
        pids.sort_unstable();
        pids
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let walked = loop {
        let walked = pids(descendants(root));
        if walked.len() >= 3 {
            break walked;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the tree never showed three descendants: {walked:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(children_listed(), "this kernel lists children");
    assert_eq!(walked, pids(descendants_in(&all_processes(), root)));
    assert_eq!(walked.len(), 3, "{walked:?}");
    let _ = nix::sys::signal::killpg(Pid::from_raw(root), Signal::SIGKILL);
    let _ = child.wait().await;
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

/// What is left of a noted leader's group after a crash: the leader died with the owner
/// (its death signal) before its own child was noted.
#[test]
fn a_gone_leaders_group_is_ended_only_while_it_is_still_its_own() {
    let stat = |pgid: i32, start: u64, state: char| Stat {
        ppid: 1,
        pgid,
        session: 9,
        state,
        start,
    };
    let leader = Noted {
        pid: 500,
        pgid: 500,
        start: 1_000,
    };
    let member = |pid: i32, start: u64| Noted {
        pid,
        pgid: 500,
        start,
    };
    type Case = (&'static str, Vec<(i32, Stat)>, Noted, Vec<Noted>);
    let cases: Vec<Case> = vec![
        (
            "the leader is gone, its child lives on in its group",
            vec![(501, stat(500, 1_010, 'S')), (700, stat(700, 1_020, 'S'))],
            leader,
            vec![member(501, 1_010)],
        ),
        (
            "the leader is a zombie nobody reaped: it is gone, its child is not",
            vec![(500, stat(500, 1_000, 'Z')), (501, stat(500, 1_010, 'S'))],
            leader,
            vec![member(501, 1_010)],
        ),
        (
            "a zombie member is nobody's to kill",
            vec![(501, stat(500, 1_010, 'Z'))],
            leader,
            vec![],
        ),
        (
            "the pid lives on as another process: not the leader's group",
            vec![(500, stat(500, 5_000, 'S')), (501, stat(500, 5_010, 'S'))],
            leader,
            vec![],
        ),
        (
            "the leader itself lives: the noted process path ends it",
            vec![(500, stat(500, 1_000, 'S')), (501, stat(500, 1_010, 'S'))],
            leader,
            vec![],
        ),
        (
            "a member older than the leader is not of its making",
            vec![(501, stat(500, 900, 'S'))],
            leader,
            vec![],
        ),
        (
            "a noted process that led no group of its own takes no group with it",
            vec![(501, stat(500, 1_010, 'S'))],
            Noted {
                pid: 502,
                pgid: 500,
                start: 1_000,
            },
            vec![],
        ),
    ];
    for (what, table, noted, want) in cases {
        let table: HashMap<i32, Stat> = table.into_iter().collect();
        assert_eq!(orphaned_members(&table, &noted), want, "{what}");
    }
}

/// The crash the npm wrappers make likely: the wrapper (noted, the run's child) dies with
/// the owner, the native binary it started (same group, not noted yet) lives on; the
/// next owner's recovery ends it.
#[tokio::test]
async fn the_next_owner_ends_the_unnoted_child_of_a_leader_that_died() {
    let mut wrapper = tokio::process::Command::new("/bin/bash")
        .args(["-c", "sleep 96 & echo $!; wait"])
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("bash starts");
    let pid = wrapper.id().expect("a pid") as i32;
    let leader_stat = stat_of(pid).expect("the wrapper's stat");
    let mut out = tokio::io::BufReader::new(wrapper.stdout.take().unwrap());
    let mut line = String::new();
    use tokio::io::AsyncBufReadExt;
    tokio::time::timeout(std::time::Duration::from_secs(10), out.read_line(&mut line))
        .await
        .expect("the wrapper says its child's pid")
        .expect("read");
    let native: i32 = line.trim().parse().expect("a pid");
    let native_start = stat_of(native).expect("the child's stat").start;
    // The wrapper dies (as with its death signal) and is not reaped (as under an init
    // that reaps nothing: a zombie); its child is in its group still.
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stat_of(pid).is_some_and(|s| s.state != 'Z') {
        assert!(
            std::time::Instant::now() < deadline,
            "the wrapper did not die"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(stat_of(native).map(|s| s.pgid), Some(pid));
    let left = LeftOver {
        run_id: "r1".into(),
        boot_id: boot_id(),
        process: Noted {
            pid,
            pgid: pid,
            start: leader_stat.start,
        },
    };
    assert_eq!(end_left_over(&[left]), 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stat_of(native).is_some_and(|s| s.start == native_start && s.state != 'Z') {
        assert!(
            std::time::Instant::now() < deadline,
            "the wrapper's child outlived the recovery"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = wrapper.wait().await;
}

#[test]
fn a_killed_process_is_looked_at_soon_then_every_10_ms_for_about_half_a_second() {
    let gaps: Vec<u64> = kill_probe_gaps()
        .take(7)
        .map(|d| d.as_millis() as u64)
        .collect();
    assert_eq!(gaps, [1, 2, 4, 8, 10, 10, 10]);
    let total: Duration = kill_probe_gaps().take(53).sum();
    assert_eq!(total, Duration::from_millis(505));
}
