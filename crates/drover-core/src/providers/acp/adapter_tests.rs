//! The ACP adapter against stand-in agents that are plain shell children: one that never
//! answers `initialize`, one that dies at once. Every wait is bounded.

use super::*;
use crate::providers::process::ShutdownTimings;
use crate::providers::{ProviderEvent, RunProviderEvent};
use crate::spec::{Capability, PermissionPolicy};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn spec(script: &str) -> LaunchSpec {
    LaunchSpec {
        args: vec!["-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        ..LaunchSpec::for_tests(
            "some-acp-agent",
            "/bin/sh",
            PermissionPolicy::Ask,
            Capability::Workspace,
        )
    }
}

fn timings(handshake: Duration) -> AcpTimings {
    AcpTimings {
        handshake,
        interrupt: Duration::from_millis(500),
        shutdown: ShutdownTimings {
            stdin_grace: Duration::from_millis(500),
            term_grace: Duration::from_millis(500),
            drain: Duration::from_millis(500),
        },
    }
}

/// Every event of the run until `Exited` (bounded).
async fn events_until_exit(
    mut rx: tokio::sync::mpsc::Receiver<RunProviderEvent>,
) -> Vec<ProviderEvent> {
    let mut events = Vec::new();
    let collect = async {
        while let Some(e) = rx.recv().await {
            let last = matches!(e.event, ProviderEvent::Exited { .. });
            events.push(e.event);
            if last {
                return;
            }
        }
    };
    tokio::time::timeout(WAIT, collect)
        .await
        .expect("the run ends with Exited in time");
    events
}

#[tokio::test]
async fn an_agent_that_never_answers_initialize_fails_the_run_with_the_cause() {
    let (sink, rx) = tokio::sync::mpsc::channel(64);
    // Reads everything, answers nothing (its stdout stays open).
    let handle = launch_with(
        spec("while IFS= read -r line; do :; done"),
        sink,
        timings(Duration::from_millis(300)),
    )
    .expect("started");
    let events = events_until_exit(rx).await;
    drop(handle);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Ready { .. })),
        "no Ready without a handshake: {events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(e, ProviderEvent::Notice { text } if text.contains("did not answer initialize within"))),
        "{events:?}"
    );
    assert!(matches!(events.last(), Some(ProviderEvent::Exited { .. })));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, ProviderEvent::Exited { .. }))
            .count(),
        1
    );
}

#[tokio::test]
async fn an_agent_that_dies_at_once_ends_the_run_with_its_stderr() {
    let (sink, rx) = tokio::sync::mpsc::channel(64);
    let handle = launch_with(
        spec("echo 'no credentials' >&2; exit 3"),
        sink,
        timings(Duration::from_secs(10)),
    )
    .expect("started");
    let events = events_until_exit(rx).await;
    drop(handle);
    match events.last() {
        Some(ProviderEvent::Exited {
            code, stderr_tail, ..
        }) => {
            assert_eq!(*code, Some(3));
            assert!(stderr_tail.contains("no credentials"), "{stderr_tail}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Ready { .. }))
    );
}
