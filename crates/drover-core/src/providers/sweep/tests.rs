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
