//! The driver against fake servers (`/bin/sh` scripts) for the ways a server can fail to
//! come up; the happy paths run against the real pinned server in `tests/peers`. Every
//! wait is bounded; nothing sleeps and hopes.

use super::*;
use crate::providers::{PermissionAnswer, RunProviderEvent};
use crate::spec::{Capability, PermissionPolicy};
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
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
        args: vec!["-c".into(), script.into()],
        cwd: PathBuf::from("/"),
        model: Some("mock/mock-model".into()),
        ..LaunchSpec::for_tests(
            "opencode",
            "/bin/sh",
            PermissionPolicy::Ask,
            Capability::Workspace,
        )
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
        assert_eq!(&*event.run_id, "r1");
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

/// A fake OpenCode HTTP server (axum on 127.0.0.1): records every request, streams the
/// events the test pushes on `/event`, refuses requests without basic auth, and has no
/// `/permission/{id}/reply` (404), like older servers.
mod fake {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::{Body, Bytes};
    use axum::extract::State;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    use axum::response::Response;
    use serde_json::{Value, json};
    use tokio::sync::mpsc;

    #[derive(Debug, Clone)]
    pub struct Request {
        pub method: String,
        pub path: String,
        pub body: Value,
    }

    #[derive(Default)]
    struct Shared {
        requests: Mutex<Vec<Request>>,
        events: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    }

    pub struct Server {
        pub port: u16,
        shared: Arc<Shared>,
        pub events: mpsc::UnboundedSender<String>,
    }

    impl Server {
        pub async fn start() -> Server {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a loopback port");
            let port = listener.local_addr().expect("its address").port();
            let (events, rx) = mpsc::unbounded_channel();
            let shared = Arc::new(Shared::default());
            *shared.events.lock().unwrap() = Some(rx);
            let app = Router::new().fallback(handle).with_state(shared.clone());
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            Server {
                port,
                shared,
                events,
            }
        }

        pub fn requests(&self) -> Vec<Request> {
            self.shared.requests.lock().unwrap().clone()
        }

        /// Waits (bounded) until a request to `path` came; all requests so far.
        pub async fn wait_for(&self, method: &str, path: &str) -> Vec<Request> {
            let found = super::eventually(|| {
                self.requests()
                    .iter()
                    .any(|r| r.method == method && r.path == path)
            })
            .await;
            assert!(found, "no {method} {path}: {:#?}", self.requests());
            self.requests()
        }
    }

    async fn handle(
        State(shared): State<Arc<Shared>>,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> Response {
        let path = uri.path().to_string();
        shared.requests.lock().unwrap().push(Request {
            method: method.to_string(),
            path: path.clone(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        let authorized = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("Basic "));
        if !authorized {
            return reply(StatusCode::UNAUTHORIZED, json!("unauthorized"));
        }
        match (method.as_str(), path.as_str()) {
            ("GET", "/event") => {
                let Some(rx) = shared.events.lock().unwrap().take() else {
                    return reply(StatusCode::CONFLICT, json!("one stream only"));
                };
                let first = "data: {\"type\":\"server.connected\",\"properties\":{}}\n\n";
                let stream = futures_util::stream::unfold(
                    (Some(first.to_string()), rx),
                    |(first, mut rx)| async move {
                        if let Some(first) = first {
                            return Some((Ok::<_, std::io::Error>(Bytes::from(first)), (None, rx)));
                        }
                        let data = rx.recv().await?;
                        Some((Ok(Bytes::from(format!("data: {data}\n\n"))), (None, rx)))
                    },
                );
                let mut response = Response::new(Body::from_stream(stream));
                response.headers_mut().insert(
                    "content-type",
                    axum::http::HeaderValue::from_static("text/event-stream"),
                );
                response
            }
            ("POST", "/session") => reply(StatusCode::OK, json!({"id": "ses_fake"})),
            ("GET", "/global/health") => {
                reply(StatusCode::OK, json!({"healthy": true, "version": "9.9.9"}))
            }
            ("POST", "/session/ses_fake/prompt_async") => {
                reply(StatusCode::NO_CONTENT, Value::Null)
            }
            ("POST", "/session/ses_fake/abort") => reply(StatusCode::OK, json!(true)),
            ("POST", p) if p.starts_with("/session/ses_fake/permissions/") => {
                reply(StatusCode::OK, json!(true))
            }
            _ => reply(StatusCode::NOT_FOUND, json!({"error": "no such route"})),
        }
    }

    fn reply(status: StatusCode, body: Value) -> Response {
        let mut response = if body.is_null() {
            Response::new(Body::empty())
        } else {
            Response::new(Body::from(body.to_string()))
        };
        *response.status_mut() = status;
        response
    }
}

/// Polls `done` every 20 ms for up to [`WAIT`].
async fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

async fn next_event(rx: &mut mpsc::Receiver<RunProviderEvent>) -> ProviderEvent {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("an event in time")
        .expect("the adapter is running")
        .event
}

#[tokio::test]
async fn a_turn_against_a_fake_server_answers_over_the_older_route_aborts_and_ends_with_the_stream()
{
    let server = fake::Server::start().await;
    let script = format!(
        "echo \"opencode server listening on http://127.0.0.1:{}\"; sleep 30 & wait",
        server.port
    );
    let (tx, mut rx) = mpsc::channel(64);
    let handle = launch_with(spec(&script), tx, timings()).expect("the fake starts");
    assert_eq!(
        next_event(&mut rx).await,
        ProviderEvent::Ready {
            version: Some("9.9.9".into())
        }
    );
    assert_eq!(
        next_event(&mut rx).await,
        ProviderEvent::Session {
            session_id: "ses_fake".into(),
            model: Some("mock/mock-model".into())
        }
    );
    let requests = server.requests();
    assert_eq!(requests[1].path, "/session", "{requests:#?}");
    assert_eq!(requests[1].body, json!({"title": "drover r1"}));

    let send = |command| handle.commands.send(command).expect("the driver listens");
    send(ProviderCommand::StartTurn {
        prompt: "Do it".into(),
    });
    let requests = server
        .wait_for("POST", "/session/ses_fake/prompt_async")
        .await;
    let prompt = requests.last().unwrap();
    assert_eq!(
        prompt.body,
        json!({"parts": [{"type": "text", "text": "Do it"}],
               "model": {"providerID": "mock", "modelID": "mock-model"}})
    );

    let push = |event: Value| server.events.send(event.to_string()).expect("the stream");
    push(json!({"type": "session.status",
                "properties": {"sessionID": "ses_fake", "status": {"type": "busy"}}}));
    push(json!({"type": "permission.asked",
                "properties": {"id": "per_1", "sessionID": "ses_fake", "permission": "bash",
                               "patterns": ["rm x"], "metadata": {}, "always": ["rm *"]}}));
    let ProviderEvent::PermissionRequested(request) = next_event(&mut rx).await else {
        panic!("a permission request");
    };
    assert_eq!(request.request_id, "per_1");
    send(ProviderCommand::Answer {
        request_id: "per_1".into(),
        answer: PermissionAnswer::Deny {
            message: Some("not that".into()),
        },
    });
    let requests = server
        .wait_for("POST", "/session/ses_fake/permissions/per_1")
        .await;
    let tried = requests
        .iter()
        .position(|r| r.path == "/permission/per_1/reply")
        .expect("the current route first");
    assert_eq!(
        requests[tried].body,
        json!({"reply": "reject", "message": "not that"})
    );
    assert_eq!(requests.last().unwrap().body, json!({"response": "reject"}));

    send(ProviderCommand::Interrupt);
    server.wait_for("POST", "/session/ses_fake/abort").await;
    push(json!({"type": "session.error",
                "properties": {"sessionID": "ses_fake",
                               "error": {"name": "MessageAbortedError",
                                         "data": {"message": "Aborted"}}}}));
    push(json!({"type": "session.idle", "properties": {"sessionID": "ses_fake"}}));
    let ProviderEvent::TurnCompleted(end) = next_event(&mut rx).await else {
        panic!("the turn ends");
    };
    assert!(end.is_error && !end.transient, "{end:?}");
    assert_eq!(end.subtype, "interrupted");

    // The stream ends: the run ends, with a notice saying so, and Exited last.
    let fake::Server { events, .. } = server;
    drop(events);
    let rest = until_exited(&mut rx).await;
    assert!(
        notices(&rest)
            .iter()
            .any(|n| n.contains("event stream ended")),
        "{rest:?}"
    );
    drop(handle);
}
