//! The control socket end to end, over real Unix sockets in a temp directory, against a
//! fake dispatcher (and once against the real `dispatch::start`).
//!
//! Every wait is bounded by [`within`]; no test sleeps to let something happen. Tests that
//! depend on task interleaving (lag, ordering) run on the current-thread runtime, where
//! nothing else runs between two synchronous sends.

use serde_json::{Value, json};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, broadcast};

use super::wire::{Line, LineReader, MAX_REQUEST_LINE_BYTES};
use super::*;
use crate::dispatch::DispatchEvent;
use crate::dispatch::api::WaitUntil;

/// A stand-in for the dispatcher: answers from a fixed script and publishes whatever
/// the test sends on `events`.
#[derive(Clone)]
struct Fake {
    events: broadcast::Sender<Published>,
    /// The connections' focus, as the real dispatcher's handle keeps it.
    focus: crate::dispatch::notify::Focus,
    /// `wait` answers once this is notified.
    release: Arc<Notify>,
}

impl Dispatcher for Fake {
    fn request(&self, request: Request) -> impl Future<Output = Result<Value, DroverError>> + Send {
        let release = self.release.clone();
        async move {
            match request {
                Request::Ping => Ok(json!({"pong": true})),
                Request::Show { run_id } if run_id == "missing" => Err(DroverError::new(
                    ErrorCode::RunNotFound,
                    "there is no run missing",
                )),
                Request::Show { run_id } => Ok(json!({"run_id": run_id})),
                Request::Wait { .. } => {
                    release.notified().await;
                    Ok(json!({"timed_out": false, "runs": []}))
                }
                // Never answers: for the client's deadline.
                Request::Stop { .. } => std::future::pending().await,
                other => Ok(json!({"echo": other})),
            }
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.events.subscribe()
    }

    fn focus(&self) -> Option<crate::dispatch::notify::Focus> {
        Some(self.focus.clone())
    }
}

struct Owner {
    _dir: tempfile::TempDir,
    paths: Paths,
    server: ControlServer,
    events: broadcast::Sender<Published>,
    release: Arc<Notify>,
    focus: crate::dispatch::notify::Focus,
}

fn start_owner(event_capacity: usize) -> Owner {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under(dir.path());
    let (events, _) = broadcast::channel(event_capacity);
    let release = Arc::new(Notify::new());
    let focus = crate::dispatch::notify::Focus::default();
    let fake = Fake {
        events: events.clone(),
        release: release.clone(),
        focus: focus.clone(),
    };
    let server = serve(fake, OwnerLock::acquire(&paths).unwrap(), &paths).unwrap();
    Owner {
        _dir: dir,
        paths,
        server,
        events,
        release,
        focus,
    }
}

/// Fails the test instead of hanging when something that must happen does not.
async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn client(owner: &Owner) -> ControlClient {
    within("connect", ControlClient::connect(&owner.paths))
        .await
        .unwrap()
        .expect("an owner listens")
}

fn line_event(run_id: &str, line: &str) -> DispatchEvent {
    DispatchEvent::Transcript {
        run_id: run_id.into(),
        line: line.into(),
        seq: 0,
    }
}

/// A connection that speaks raw lines, to see exactly what the server writes.
struct Raw {
    reader: LineReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl Raw {
    async fn connect(owner: &Owner) -> Raw {
        let stream = UnixStream::connect(&owner.paths.socket_file).await.unwrap();
        let (read, writer) = stream.into_split();
        Raw {
            reader: LineReader::new(read, usize::MAX),
            writer,
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        within("write", self.writer.write_all(bytes)).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        match within("a line from the server", self.reader.next()).await {
            Ok(Some(Line::Complete(line))) => serde_json::from_slice(&line).unwrap(),
            other => panic!("expected a line, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn requests_and_refusals_round_trip_over_the_socket() {
    let owner = start_owner(16);
    let mut client = client(&owner).await;
    assert_eq!(
        client.request_json(Request::Ping).await.unwrap(),
        json!({"pong": true})
    );
    assert_eq!(
        client
            .request_json(Request::Show {
                run_id: "r1".into()
            })
            .await
            .unwrap(),
        json!({"run_id": "r1"})
    );
    let e = client
        .request_json(Request::Show {
            run_id: "missing".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        e,
        DroverError::new(ErrorCode::RunNotFound, "there is no run missing")
    );
    // The connection is still good after a refusal.
    let echoed = client
        .request_json(Request::Remove {
            run_id: None,
            finished: true,
            force: false,
        })
        .await
        .unwrap();
    assert_eq!(
        echoed,
        json!({"echo": {"method": "remove", "params": {"run_id": null, "finished": true, "force": false}}})
    );
}

#[tokio::test]
async fn bad_lines_get_an_error_line_and_the_connection_goes_on() {
    let owner = start_owner(16);
    let mut raw = Raw::connect(&owner).await;
    raw.send(b"this is not json\n").await;
    let line = raw.next().await;
    assert_eq!(line["id"], Value::Null);
    assert_eq!(line["error"]["code"], "INVALID_REQUEST");
    assert!(
        line["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON")
    );

    raw.send(b"{\"id\": 7, \"request\": {\"method\": \"launch\"}}\n")
        .await;
    let line = raw.next().await;
    assert_eq!(line["id"], 7);
    assert_eq!(line["error"]["code"], "INVALID_REQUEST");

    // Blank lines are skipped, CRLF is accepted.
    raw.send(b"\n  \n{\"id\": 8, \"request\": {\"method\": \"ping\"}}\r\n")
        .await;
    assert_eq!(raw.next().await, json!({"id": 8, "ok": {"pong": true}}));
}

#[tokio::test]
async fn an_overlong_line_is_refused_and_the_next_one_is_served() {
    let owner = start_owner(16);
    let mut raw = Raw::connect(&owner).await;
    let mut long = vec![b'x'; MAX_REQUEST_LINE_BYTES + 1];
    long.push(b'\n');
    long.extend_from_slice(b"{\"id\": 2, \"request\": {\"method\": \"ping\"}}\n");
    raw.send(&long).await;
    let line = raw.next().await;
    assert_eq!(line["id"], Value::Null);
    assert_eq!(line["error"]["code"], "INVALID_REQUEST");
    assert!(
        line["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&MAX_REQUEST_LINE_BYTES.to_string())
    );
    assert_eq!(raw.next().await, json!({"id": 2, "ok": {"pong": true}}));
}

#[tokio::test]
async fn answers_on_one_connection_come_as_they_finish() {
    let owner = start_owner(16);
    let mut raw = Raw::connect(&owner).await;
    raw.send(
        b"{\"id\": 1, \"request\": {\"method\": \"wait\", \"params\": {\"run_ids\": [\"r1\"]}}}\n",
    )
    .await;
    raw.send(b"{\"id\": 2, \"request\": {\"method\": \"ping\"}}\n")
        .await;
    // The wait is held by the fake; the ping behind it is answered first.
    assert_eq!(raw.next().await, json!({"id": 2, "ok": {"pong": true}}));
    owner.release.notify_one();
    assert_eq!(
        raw.next().await,
        json!({"id": 1, "ok": {"timed_out": false, "runs": []}})
    );
}

#[tokio::test]
async fn a_subscription_gets_only_the_runs_it_asked_for() {
    let owner = start_owner(16);
    let mut only_a = within(
        "subscribe",
        client(&owner).await.subscribe(vec!["a".into()]),
    )
    .await
    .unwrap();
    let mut all = within("subscribe", client(&owner).await.subscribe(vec![]))
        .await
        .unwrap();
    for (run, line) in [("b", "b1"), ("a", "a1"), ("b", "b2"), ("a", "a2")] {
        owner
            .events
            .send(Published::new(line_event(run, line)))
            .unwrap();
    }
    // Filtered: a1 then a2 with nothing in between, so both b events were held back.
    for expected in ["a1", "a2"] {
        let item = within("event", only_a.next()).await.unwrap();
        assert_eq!(item, Some(StreamItem::Event(line_event("a", expected))));
    }
    for (run, line) in [("b", "b1"), ("a", "a1"), ("b", "b2"), ("a", "a2")] {
        let item = within("event", all.next()).await.unwrap();
        assert_eq!(item, Some(StreamItem::Event(line_event(run, line))));
    }
}

#[tokio::test]
async fn a_lagging_subscriber_is_told_how_much_it_missed_and_goes_on() {
    // Capacity 4: ten events sent at once (nothing runs in between on this runtime)
    // leave the last four for a subscriber that had read none.
    let owner = start_owner(4);
    let mut stream = within("subscribe", client(&owner).await.subscribe(vec![]))
        .await
        .unwrap();
    for n in 1..=10 {
        owner
            .events
            .send(Published::new(line_event("r1", &n.to_string())))
            .unwrap();
    }
    assert_eq!(
        within("lag report", stream.next()).await.unwrap(),
        Some(StreamItem::Lagged(6))
    );
    for n in 7..=10 {
        assert_eq!(
            within("event", stream.next()).await.unwrap(),
            Some(StreamItem::Event(line_event("r1", &n.to_string())))
        );
    }
}

#[tokio::test]
async fn an_event_stream_connection_refuses_further_requests() {
    let owner = start_owner(16);
    let mut raw = Raw::connect(&owner).await;
    raw.send(b"{\"id\": 1, \"request\": {\"method\": \"subscribe\", \"params\": {\"run_ids\": [\"r1\"]}}}\n")
        .await;
    let ack = raw.next().await;
    assert_eq!(ack["id"], 1);
    assert_eq!(ack["ok"]["subscribed"], true);
    assert_eq!(ack["ok"]["resumed"], false, "no position was given");
    assert_eq!(ack["ok"]["position"]["pos"], 0, "no event yet");
    raw.send(b"{\"id\": 2, \"request\": {\"method\": \"ping\"}}\n")
        .await;
    let line = raw.next().await;
    assert_eq!(line["id"], 2);
    assert_eq!(line["error"]["code"], "INVALID_REQUEST");
    // The stream itself still flows.
    owner
        .events
        .send(Published::new(line_event("r1", "still here")))
        .unwrap();
    assert_eq!(
        raw.next().await,
        json!({"event": {"event": "transcript", "run_id": "r1", "line": "still here"}, "pos": 1})
    );
}

#[tokio::test]
async fn the_socket_is_private_to_the_user() {
    let owner = start_owner(16);
    let meta = std::fs::symlink_metadata(&owner.paths.socket_file).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(owner.server.socket_path(), owner.paths.socket_file);
}

#[tokio::test]
async fn a_second_owner_is_refused_while_the_first_serves() {
    let owner = start_owner(16);
    let e = OwnerLock::acquire(&owner.paths).unwrap_err();
    assert_eq!(e.code, ErrorCode::OwnerRunning);
    // The refused attempt left the live socket alone.
    assert!(
        client(&owner)
            .await
            .request_json(Request::Ping)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn stopping_closes_connections_removes_the_socket_and_frees_the_directory() {
    let Owner {
        _dir,
        paths,
        server,
        events,
        ..
    } = start_owner(16);
    let mut waiting = within("connect", ControlClient::connect(&paths))
        .await
        .unwrap()
        .unwrap();
    let mut raw_stream = within("subscribe", ControlClient::connect(&paths))
        .await
        .unwrap()
        .unwrap()
        .subscribe(vec![])
        .await
        .unwrap();
    // A wait nobody will release, in flight when the server stops.
    let pending = tokio::spawn(async move {
        waiting
            .request_json(Request::Wait {
                run_ids: vec!["r1".into()],
                workflow: None,
                until: WaitUntil::Terminal,
                any: false,
                timeout_secs: None,
            })
            .await
    });
    within("stop", server.stop()).await;
    assert!(!paths.socket_file.exists());
    let e = within("the pending request", pending)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NoOwner, "{}", e.message);
    assert_eq!(within("end of stream", raw_stream.next()).await, Ok(None));
    assert!(ControlClient::connect(&paths).await.unwrap().is_none());
    drop(events);
    // The lock went with the server.
    let _next_owner = OwnerLock::acquire(&paths).unwrap();
}

#[tokio::test]
async fn connect_finds_no_owner_without_a_socket_or_with_a_stale_one() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under(dir.path());
    assert!(ControlClient::connect(&paths).await.unwrap().is_none());
    // A socket file whose listener is gone, as a killed owner leaves it.
    drop(std::os::unix::net::UnixListener::bind(&paths.socket_file).unwrap());
    assert!(paths.socket_file.exists());
    assert!(ControlClient::connect(&paths).await.unwrap().is_none());
}

#[tokio::test]
async fn a_request_the_owner_never_answers_times_out() {
    let owner = start_owner(16);
    let mut client = client(&owner).await;
    // The fake never answers a stop, so the deadline always fires, whatever its length.
    let stop = Request::Stop {
        run_id: "r1".into(),
    };
    let e = client
        .request_within(stop, Some(Duration::from_millis(50)))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::OwnerUnresponsive);
    assert!(e.message.contains("within 0.05 s"), "{}", e.message);
    // The late answer would carry the old id; the next request is matched by its own.
    assert_eq!(
        client.request_json(Request::Ping).await.unwrap(),
        json!({"pong": true})
    );
}

#[tokio::test]
async fn the_host_owns_the_directory_with_the_real_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under(dir.path());
    let options = crate::dispatch::DispatcherOptions {
        paths: paths.clone(),
        config: crate::config::Config::defaults(),
        self_exe: std::env::current_exe().unwrap(),
        // This test binary is not drover: it has no `warden` command.
        warden: false,
        ledger_gate: None,
    };
    let host = within("host start", Host::start(options.clone()))
        .await
        .unwrap();
    assert_eq!(host.socket_path(), paths.socket_file);
    let mut client = client_for(&paths).await;
    let pong = within("ping", client.request_json(Request::Ping))
        .await
        .unwrap();
    assert_eq!(pong["pong"], true);
    assert_eq!(pong["pid"], std::process::id());
    let e = within("second host", Host::start(options))
        .await
        .err()
        .expect("a second owner is refused");
    assert_eq!(e.code, ErrorCode::OwnerRunning);
    within("shutdown", host.shutdown()).await;
    assert!(!paths.socket_file.exists());
    assert!(ControlClient::connect(&paths).await.unwrap().is_none());
}

async fn client_for(paths: &Paths) -> ControlClient {
    within("connect", ControlClient::connect(paths))
        .await
        .unwrap()
        .expect("an owner listens")
}

#[tokio::test]
async fn a_client_that_reconnects_gets_what_it_missed_once_and_in_order() {
    let owner = start_owner(64);
    let mut stream = within("subscribe", client(&owner).await.subscribe(vec![]))
        .await
        .unwrap();
    for n in 1..=2 {
        owner
            .events
            .send(Published::new(line_event("r1", &n.to_string())))
            .unwrap();
    }
    for n in 1..=2 {
        assert_eq!(
            within("event", stream.next()).await.unwrap(),
            Some(StreamItem::Event(line_event("r1", &n.to_string())))
        );
    }
    let seen = stream.position().cloned().expect("a numbered stream");
    assert_eq!(seen.pos, 2);
    // The connection drops; the owner goes on publishing.
    drop(stream);
    for n in 3..=4 {
        owner
            .events
            .send(Published::new(line_event("r1", &n.to_string())))
            .unwrap();
    }
    let (mut back, ack) = within(
        "subscribe again",
        client(&owner)
            .await
            .subscribe_after(vec![], Some(seen.clone())),
    )
    .await
    .unwrap();
    assert!(ack.resumed, "{ack:?}");
    for n in 3..=4 {
        assert_eq!(
            within("missed event", back.next()).await.unwrap(),
            Some(StreamItem::Event(line_event("r1", &n.to_string())))
        );
    }
    // Nothing is repeated: the next thing is the next new event.
    owner
        .events
        .send(Published::new(line_event("r1", "5")))
        .unwrap();
    assert_eq!(
        within("new event", back.next()).await.unwrap(),
        Some(StreamItem::Event(line_event("r1", "5")))
    );
    // A position from another owner (a restart) is not resumed: take a snapshot.
    let stranger = crate::dispatch::api::StreamPosition {
        epoch: "another-owner".into(),
        pos: 2,
    };
    let (_, ack) = within(
        "subscribe with a stranger's position",
        client(&owner).await.subscribe_after(vec![], Some(stranger)),
    )
    .await
    .unwrap();
    assert!(!ack.resumed);
    assert_eq!(ack.position.unwrap().pos, 5);
}

/// Polls (bounded) until the owner's focus reads `want`.
async fn focus_reads(owner: &Owner, want: bool) {
    within(&format!("focus {want}"), async {
        while owner.focus.any() != want {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_dashboards_focus_is_kept_on_its_event_stream_and_lost_with_it() {
    let owner = start_owner(16);
    let mut stream = within("subscribe", client(&owner).await.subscribe(vec![]))
        .await
        .unwrap();
    within("focus", stream.focus(true)).await.unwrap();
    focus_reads(&owner, true).await;
    // The stream goes on, the focus's answer skipped.
    owner
        .events
        .send(Published::new(line_event("r1", "1")))
        .unwrap();
    assert_eq!(
        within("event", stream.next()).await.unwrap(),
        Some(StreamItem::Event(line_event("r1", "1")))
    );
    within("unfocus", stream.focus(false)).await.unwrap();
    focus_reads(&owner, false).await;
    // A dashboard that goes away (closed, crashed) stops counting with its connection.
    within("focus", stream.focus(true)).await.unwrap();
    focus_reads(&owner, true).await;
    drop(stream);
    focus_reads(&owner, false).await;
}
