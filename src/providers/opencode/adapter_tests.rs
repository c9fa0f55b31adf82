//! The driver against fake servers (`/bin/sh` scripts) for the ways a server can fail to
//! come up; the happy paths run against the real pinned server in `tests/peers`. Every
//! wait is bounded; nothing sleeps and hopes.

use super::*;
use crate::spec::{Capability, PermissionPolicy};
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Generous: a loaded CI machine is slow, and a hang still fails.
const WAIT: Duration = Duration::from_secs(20);

fn timings() -> AdapterTimings {
    AdapterTimings {
        start: Duration::from_millis(500),
        request: Duration::from_secs(2),
        stream_idle: Duration::from_secs(2),
        interrupt: Duration::from_millis(300),
        shutdown: ShutdownTimings {
            stdin_grace: Duration::from_millis(50),
            term_grace: Duration::from_millis(500),
            drain: Duration::from_secs(2),
        },
    }
}

/// A spec whose "opencode" is `/bin/sh -c SCRIPT`; drover's `serve --hostname 127.0.0.1
/// --port N` lands in `$0 … $4`, so `$4` is the port.
fn spec(script: &str) -> LaunchSpec {
    LaunchSpec {
        run_id: "r1".into(),
        provider: "opencode".into(),
        command: PathBuf::from("/bin/sh"),
        args: vec!["-c".into(), script.into()],
        env: BTreeMap::new(),
        cwd: PathBuf::from("/"),
        model: Some("mock/mock-model".into()),
        effort: None,
        policy: PermissionPolicy::Ask,
        capability: Capability::Workspace,
        resume_session: None,
        scenario: None,
    }
}

/// Every event up to and including `Exited`; then checks nothing follows.
async fn until_exited(rx: &mut mpsc::Receiver<RunProviderEvent>) -> Vec<ProviderEvent> {
    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no Exited within {WAIT:?}: {events:?}"))
            .unwrap_or_else(|| panic!("the adapter ended without Exited: {events:?}"));
        assert_eq!(event.run_id, "r1");
        let last = matches!(event.event, ProviderEvent::Exited { .. });
        events.push(event.event);
        if last {
            break;
        }
    }
    let after = tokio::time::timeout(WAIT, rx.recv()).await;
    assert!(
        matches!(after, Ok(None)),
        "nothing may follow Exited: {after:?}"
    );
    events
}

fn notices(events: &[ProviderEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::Notice { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn group_is_gone(pgid: u32) -> bool {
    kill(Pid::from_raw(-(pgid as i32)), None) == Err(Errno::ESRCH)
}

async fn run(script: &str) -> (Vec<ProviderEvent>, u32) {
    let (tx, mut rx) = mpsc::channel(64);
    let handle = launch_with(spec(script), tx, timings()).expect("the fake starts");
    let pid = handle.pid.expect("a pid");
    let events = until_exited(&mut rx).await;
    drop(handle);
    (events, pid)
}

#[tokio::test]
async fn a_server_that_never_listens_gets_no_ready_and_is_ended() {
    let (events, pid) = run("echo starting; sleep 30 & wait").await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Ready { .. })),
        "{events:?}"
    );
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("did not listen")),
        "{events:?}"
    );
    assert!(group_is_gone(pid), "the fake's group {pid} survived");
}

#[tokio::test]
async fn a_server_that_dies_at_start_reports_its_exit_and_stderr() {
    let (events, _) = run("echo 'fatal: bad config' >&2; exit 3").await;
    let Some(ProviderEvent::Exited {
        code, stderr_tail, ..
    }) = events.last()
    else {
        panic!("{events:?}");
    };
    assert_eq!(*code, Some(3));
    assert!(stderr_tail.contains("fatal: bad config"), "{stderr_tail:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Ready { .. })),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_server_that_claims_to_listen_but_does_not_answer_gets_no_ready() {
    // Says it listens on the port drover chose, where nothing listens.
    let (events, pid) =
        run("echo \"opencode server listening on http://127.0.0.1:$4\"; sleep 30 & wait").await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Ready { .. })),
        "{events:?}"
    );
    assert!(
        notices(&events).iter().any(|n| n.contains("event stream")),
        "{events:?}"
    );
    assert!(group_is_gone(pid), "the fake's group {pid} survived");
}

#[tokio::test]
async fn a_listening_line_for_another_host_is_not_trusted() {
    let (events, _) =
        run("echo 'opencode server listening on http://0.0.0.0:4096'; sleep 30 & wait").await;
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("did not listen")),
        "{events:?}"
    );
}

#[tokio::test]
async fn shutdown_before_the_server_listens_ends_it_at_once() {
    let (tx, mut rx) = mpsc::channel(64);
    let mut slow = timings();
    slow.start = Duration::from_secs(60);
    let handle = launch_with(spec("sleep 30 & wait"), tx, slow).expect("the fake starts");
    let pid = handle.pid.expect("a pid");
    handle
        .commands
        .send(ProviderCommand::Shutdown)
        .expect("the driver listens");
    // WAIT is well below the 60 s start bound: only the shutdown can end it in time.
    let events = until_exited(&mut rx).await;
    assert_eq!(events.len(), 1, "only Exited: {events:?}");
    assert!(group_is_gone(pid), "the fake's group {pid} survived");
}
