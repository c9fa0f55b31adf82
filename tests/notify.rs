//! The owner notifies with no dashboard attached (docs/ARCHITECTURE.md §"Notifications"):
//! a real `drover serve`, a sim run asking to run a command that carries a token, and
//! a real HTTP listener on 127.0.0.1 reading the webhook's request; the configured command
//! records its argument and environment to a file. The token reaches neither.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::Home;
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A GitHub token the redactor knows (its shape; not a real one).
const TOKEN: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";

/// A scenario whose one turn asks to run a command with the token in it.
fn scenario() -> String {
    format!(
        r#"description = "Asks to run a command that carries a token."
model = "claude-sonnet-4-5"

[[turns]]
status = "done"
summary = "Asked the API."

[[turns.steps]]
tool = "Bash"
input = {{ command = "curl -H 'Authorization: token {TOKEN}' https://api.github.com/user", description = "Ask the API" }}
needs_permission = true
output = "ok"
on_deny = "Understood."
"#
    )
}

/// Reads one HTTP request (head and `Content-Length` body) from the next connection,
/// answers 200, and returns its request line and body.
async fn one_request(listener: &tokio::net::TcpListener) -> (String, String) {
    let (mut socket, peer) = listener.accept().await.unwrap();
    assert!(peer.ip().is_loopback(), "{peer}");
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "the request ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
        if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&seen[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .expect("a Content-Length");
    while seen.len() < head_end + length {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "the body ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    socket
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let body = String::from_utf8_lossy(&seen[head_end..head_end + length]).to_string();
    (head.lines().next().unwrap_or_default().to_string(), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_reaches_the_webhook_and_the_command_with_no_dashboard() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let said = dir.path().join("said");
    let scenario_file = dir.path().join("asks.toml");
    std::fs::write(&scenario_file, scenario()).unwrap();
    let home = Home::with_config(&format!(
        r#"[notifications]
desktop = false
webhook = "http://127.0.0.1:{port}/"
webhook_topic = "drover-test"
batch_secs = 0
command = ["sh", "-c", "printf '%s|%s\n' \"$1\" \"$DROVER_NOTIFICATION_RUNS\" >> '{}'", "sh"]
"#,
        said.display()
    ));
    let serve = tokio::task::spawn_blocking(move || {
        let serve = home.serve();
        let run = home.dispatch(
            scenario_file.to_str().unwrap(),
            "Ask the API",
            &["--policy", "ask"],
        );
        (home, serve, run)
    });
    let request = tokio::time::timeout(Duration::from_secs(60), one_request(&listener));
    let ((line, body), (home, serve, run)) = (
        request.await.expect("the webhook was called within 60 s"),
        serve.await.unwrap(),
    );
    assert!(line.starts_with("POST / "), "{line}");
    assert!(!body.contains(TOKEN), "the token left the machine: {body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["topic"], "drover-test");
    assert_eq!(body["title"], format!("drover: {run} needs you"));
    let noticed = &body["runs"][0];
    assert_eq!(noticed["run_id"], run.as_str());
    assert_eq!(noticed["need"], "permission");
    assert_eq!(noticed["tool"], "Bash");
    let command = noticed["command"].as_str().unwrap();
    assert!(command.starts_with("curl -H"), "{command}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("awaiting permission: Bash curl"),
        "{body}"
    );

    // The command got the message's line last, and the runs in its environment.
    let deadline = Instant::now() + Duration::from_secs(30);
    let recorded = loop {
        let text = std::fs::read_to_string(&said).unwrap_or_default();
        if text.ends_with('\n') {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the command never wrote: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!recorded.contains(TOKEN), "{recorded}");
    let (argument, runs) = recorded.trim_end().split_once('|').unwrap();
    assert!(
        argument.starts_with(&format!(
            "{run} · Ask the API — awaiting permission: Bash curl"
        )),
        "{argument}"
    );
    assert_eq!(runs, run);

    tokio::task::spawn_blocking(move || {
        home.drover(&["stop", &run]);
        drop(serve);
    })
    .await
    .unwrap();
}

#[test]
fn a_webhook_that_is_no_address_is_refused_naming_the_key() {
    let home = Home::with_config("[notifications]\nwebhook = \"ntfy.sh/topic\"\n");
    let line = home.refused(&["config", "show"], "CONFIG_INVALID");
    assert!(
        line.contains("notifications.webhook") && line.contains("https://"),
        "{line}"
    );
    let home = Home::with_config("[notifications]\nbatch_secs = 7200\n");
    let line = home.refused(&["config", "show"], "CONFIG_INVALID");
    assert!(line.contains("notifications.batch_secs"), "{line}");
}
