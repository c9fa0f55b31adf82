//! The control client: how a drover process that does not own the data directory talks
//! to the one that does.
//!
//! What must stay true: "nobody owns the directory" is a value (`connect` → `None`), not
//! an error, so callers can fall back to the ledger; every request has a deadline fitting
//! what it asks ([`request_timeout`]), so a hung owner never hangs a script; an answer is
//! matched to its request by id, so a late answer to a timed-out request is never taken
//! for the next one.

use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::wire::{self, ClientLine, ClientSide, Line, LineReader};
use crate::dispatch::api::{Response, StreamPosition, Subscribed};
use crate::dispatch::{DispatchEvent, Request};
use crate::error::{DroverError, ErrorCode};
use crate::paths::Paths;

/// Added to a `wait`'s own timeout: the owner answers when the wait times out, plus
/// whatever it takes to build the answer.
pub const WAIT_MARGIN: Duration = Duration::from_secs(10);
/// For `ping` and the acknowledgement of `subscribe`.
pub const QUICK_TIMEOUT: Duration = Duration::from_secs(10);
/// For questions (`runs`, `show`, `transcript`).
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// For requests that change runs (dispatch, stop, kill-all, …): these may wait on the
/// ledger and on children.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// For `merge`: git may check out much of a large tree.
pub const MERGE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a `pr` may take: a push (180 s), then up to two calls of the forge's CLI
/// (60 s each), with room to spare.
pub const PR_TIMEOUT: Duration = Duration::from_secs(330);

/// How long a client waits for the answer to `request`; `None` waits as long as it takes
/// (a `wait` without a timeout).
pub fn request_timeout(request: &Request) -> Option<Duration> {
    match request {
        Request::Wait {
            timeout_secs: Some(secs),
            ..
        } => Some(Duration::from_secs(*secs).saturating_add(WAIT_MARGIN)),
        Request::Wait {
            timeout_secs: None, ..
        } => None,
        Request::Ping | Request::Subscribe { .. } | Request::Focus { .. } => Some(QUICK_TIMEOUT),
        Request::Runs { .. }
        | Request::Counts
        | Request::Show { .. }
        | Request::Transcript { .. }
        | Request::Budget
        | Request::Routes
        | Request::Rules
        | Request::Search { .. }
        | Request::Spend { .. }
        | Request::Diff { .. } => Some(READ_TIMEOUT),
        Request::Dispatch { .. }
        | Request::FollowUp { .. }
        | Request::Resume { .. }
        | Request::Wake { .. }
        | Request::TakeOver { .. }
        | Request::HandBack { .. }
        | Request::Respond { .. }
        | Request::Stop { .. }
        | Request::WrapUp { .. }
        | Request::Complete { .. }
        | Request::Remove { .. }
        | Request::KillAll { .. }
        | Request::BudgetSet { .. }
        | Request::BudgetNew { .. }
        | Request::Route { .. }
        | Request::RouteDecline { .. }
        | Request::Escalate { .. }
        | Request::Retry { .. }
        | Request::ApproveScripts { .. }
        | Request::Keep { .. }
        | Request::Discard { .. }
        | Request::RuleAdd { .. }
        | Request::RuleRemove { .. } => Some(CHANGE_TIMEOUT),
        // A merge may bring a large work tree along.
        Request::Merge { .. } | Request::Update { .. } => Some(MERGE_TIMEOUT),
        // A push and the forge's CLI (each bounded on the owner's side).
        Request::Pr { .. } => Some(PR_TIMEOUT),
    }
}

/// A connection to the owner, for requests one at a time.
pub struct ControlClient {
    link: Link,
    writer: OwnedWriteHalf,
    next_id: u64,
}

/// The reading side and what error sentences need to name.
struct Link {
    reader: LineReader<OwnedReadHalf>,
    socket: PathBuf,
}

impl ControlClient {
    /// Connects to the owner of `paths.data_dir`; `None` when nobody listens (no socket
    /// file, or one a dead owner left behind).
    pub async fn connect(paths: &Paths) -> Result<Option<ControlClient>, DroverError> {
        let socket = paths.socket_file.clone();
        let stream = match UnixStream::connect(&socket).await {
            Ok(stream) => stream,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None);
            }
            Err(e) => {
                return Err(DroverError::new(
                    ErrorCode::Internal,
                    format!(
                        "cannot connect to {}: {e}; check the file's owner and permissions",
                        socket.display()
                    ),
                ));
            }
        };
        // Only an owner of this user's is talked to: a socket another user serves (one
        // swapped into a shared directory, say) is refused.
        let me = nix::unistd::getuid().as_raw();
        match stream.peer_cred() {
            Ok(peer) if peer.uid() == me => {}
            Ok(peer) => {
                return Err(DroverError::new(
                    ErrorCode::SocketUntrusted,
                    format!(
                        "{} is served by user {}, not by you (user {me}); remove it and make the data directory private (chmod 700)",
                        socket.display(),
                        peer.uid()
                    ),
                ));
            }
            Err(e) => {
                return Err(DroverError::new(
                    ErrorCode::SocketUntrusted,
                    format!(
                        "cannot tell who serves {}: {e}; check the file's owner",
                        socket.display()
                    ),
                ));
            }
        }
        let (read, writer) = stream.into_split();
        Ok(Some(ControlClient {
            link: Link {
                reader: LineReader::new(read, wire::MAX_ANSWER_LINE_BYTES),
                socket,
            },
            writer,
            next_id: 1,
        }))
    }

    /// Sends one request and waits for its answer, within [`request_timeout`], read as
    /// the request's typed [`Response`]. For an event stream use
    /// [`ControlClient::subscribe`].
    pub async fn request(&mut self, request: Request) -> Result<Response, DroverError> {
        let value = self.request_json(request.clone()).await?;
        request.decode(value).map_err(|e| {
            self.link
                .unreadable(&format!("an answer in an unexpected shape: {e}"))
        })
    }

    /// [`ControlClient::request`], with the answer as the JSON the socket carried.
    pub async fn request_json(&mut self, request: Request) -> Result<Value, DroverError> {
        if matches!(request, Request::Subscribe { .. }) {
            return Err(DroverError::new(
                ErrorCode::Internal,
                "a subscription needs a connection of its own: use ControlClient::subscribe",
            ));
        }
        let limit = request_timeout(&request);
        self.request_within(request, limit).await
    }

    /// Turns this connection into an event stream: events of `run_ids` (every run when
    /// empty) from now on.
    pub async fn subscribe(self, run_ids: Vec<String>) -> Result<EventStream, DroverError> {
        Ok(self.subscribe_after(run_ids, None).await?.0)
    }

    /// Turns this connection into an event stream: the events after `after` (a position
    /// this client saw, see [`EventStream::position`]) when the owner can still replay
    /// them — the answer's `resumed` says so — else from now.
    pub async fn subscribe_after(
        mut self,
        run_ids: Vec<String>,
        after: Option<StreamPosition>,
    ) -> Result<(EventStream, Subscribed), DroverError> {
        let ack = self
            .request_within(Request::Subscribe { run_ids, after }, Some(QUICK_TIMEOUT))
            .await?;
        let subscribed: Subscribed = match serde_json::from_value(ack.clone()) {
            Ok(
                s @ Subscribed {
                    subscribed: true, ..
                },
            ) => s,
            _ => return Err(self.link.unreadable(&format!("unexpected answer {ack}"))),
        };
        let stream = EventStream {
            link: self.link,
            writer: self.writer,
            next_id: self.next_id,
            position: subscribed.position.clone(),
        };
        Ok((stream, subscribed))
    }

    /// Sends one request and waits at most `limit` for its answer.
    pub(crate) async fn request_within(
        &mut self,
        request: Request,
        limit: Option<Duration>,
    ) -> Result<Value, DroverError> {
        let id = self.next_id;
        self.next_id += 1;
        let exchange = async {
            let line = request_line(id, &request)?;
            self.writer
                .write_all(line.as_bytes())
                .await
                .map_err(|e| self.link.gone(&e.to_string()))?;
            self.link.answer(id).await
        };
        match limit {
            None => exchange.await,
            Some(limit) => match tokio::time::timeout(limit, exchange).await {
                Ok(answer) => answer,
                Err(_) => Err(DroverError::new(
                    ErrorCode::OwnerUnresponsive,
                    format!(
                        "the drover listening on {} did not answer within {}; check that it is still working, or restart it",
                        self.link.socket.display(),
                        seconds(limit)
                    ),
                )),
            },
        }
    }
}

/// `60 s`, or `0.05 s` for less than whole seconds.
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

impl Link {
    /// Reads until the answer to `id` arrives, skipping late answers to earlier requests.
    async fn answer(&mut self, id: u64) -> Result<Value, DroverError> {
        loop {
            match self.read().await? {
                None => return Err(self.gone("the connection was closed")),
                Some(ClientSide::Answer {
                    id: Some(got),
                    result,
                }) if got == id => return result,
                // The owner could not read our line at all: it is the one just sent.
                Some(ClientSide::Answer {
                    id: None,
                    result: Err(e),
                }) => return Err(e),
                Some(_) => continue,
            }
        }
    }

    async fn read(&mut self) -> Result<Option<ClientSide>, DroverError> {
        let line = match self.reader.next().await {
            Ok(Some(Line::Complete(line))) => line,
            Ok(Some(Line::TooLong)) => {
                return Err(self.unreadable(&format!(
                    "a line longer than {} bytes",
                    wire::MAX_ANSWER_LINE_BYTES
                )));
            }
            Ok(None) => return Ok(None),
            Err(e) => return Err(self.gone(&e.to_string())),
        };
        wire::parse_server_line(&line)
            .map(Some)
            .map_err(|what| self.unreadable(&what))
    }

    fn gone(&self, why: &str) -> DroverError {
        DroverError::new(
            ErrorCode::NoOwner,
            format!(
                "the drover listening on {} went away ({why}); check `drover runs`, then start `drover serve` again if needed",
                self.socket.display()
            ),
        )
    }

    fn unreadable(&self, what: &str) -> DroverError {
        DroverError::new(
            ErrorCode::Internal,
            format!(
                "the drover listening on {} sent {what}; check that both are the same drover version",
                self.socket.display()
            ),
        )
    }
}

/// What an event stream delivers.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "items are handed out one at a time, never stored in bulk; boxing would allocate per event"
)]
pub enum StreamItem {
    /// An event, in the order the dispatcher published it.
    Event(DispatchEvent),
    /// This many events were dropped because the stream was read too slowly.
    Lagged(u64),
}

/// A subscribed connection: events as the dispatcher publishes them.
pub struct EventStream {
    link: Link,
    // Closing our side would end the subscription: keep it open while we read.
    writer: OwnedWriteHalf,
    /// The id of the next line this stream sends (`focus`).
    next_id: u64,
    /// The last position seen (the subscription's start, then each event's).
    position: Option<StreamPosition>,
}

impl EventStream {
    /// Where this stream stands: after the last event it delivered (subscribe again
    /// after it to miss nothing). `None` from an owner that does not number its events.
    pub fn position(&self) -> Option<&StreamPosition> {
        self.position.as_ref()
    }

    /// Tells the owner whether the dashboard reading this stream is focused
    /// (`Request::Focus`, kept for as long as this connection lives). Its answer is not
    /// waited for: [`EventStream::next`] skips it.
    pub async fn focus(&mut self, focused: bool) -> Result<(), DroverError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request::Focus { focused };
        let line = request_line(id, &request)?;
        self.writer
            .write_all(line.as_bytes())
            .await
            .map_err(|e| self.link.gone(&e.to_string()))
    }

    /// The next event, or `None` when the owner closed the stream (it stopped). Cancel-safe.
    pub async fn next(&mut self) -> Result<Option<StreamItem>, DroverError> {
        loop {
            match self.link.read().await? {
                None => return Ok(None),
                Some(ClientSide::Event { event, pos }) => {
                    if let (Some(pos), Some(at)) = (pos, self.position.as_mut()) {
                        at.pos = pos;
                    }
                    return Ok(Some(StreamItem::Event(event)));
                }
                Some(ClientSide::Lagged(count)) => return Ok(Some(StreamItem::Lagged(count))),
                Some(ClientSide::Answer { .. }) => continue,
            }
        }
    }
}

/// The line that carries request `id` to the owner: its JSON and a newline.
fn request_line(id: u64, request: &Request) -> Result<String, DroverError> {
    let mut line = serde_json::to_string(&ClientLine { id, request }).map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot write the request as JSON: {e}"),
        )
    })?;
    line.push('\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::api::{TranscriptFormat, WaitUntil};
    use crate::providers::PermissionAnswer;

    fn wait(timeout_secs: Option<u64>) -> Request {
        Request::Wait {
            run_ids: vec!["r1".into()],
            workflow: None,
            until: WaitUntil::Terminal,
            any: false,
            timeout_secs,
        }
    }

    #[test]
    fn each_request_gets_a_deadline_that_fits_it() {
        let run_id = || "r1".to_string();
        let cases = [
            (Request::Ping, Some(QUICK_TIMEOUT)),
            (
                Request::Subscribe {
                    run_ids: vec![],
                    after: None,
                },
                Some(QUICK_TIMEOUT),
            ),
            (
                Request::Runs {
                    state: None,
                    include_removed: false,
                    workflow: None,
                    limit: None,
                    before: None,
                    search: None,
                },
                Some(READ_TIMEOUT),
            ),
            (Request::Show { run_id: run_id() }, Some(READ_TIMEOUT)),
            (
                Request::Transcript {
                    run_id: run_id(),
                    format: TranscriptFormat::Events,
                },
                Some(READ_TIMEOUT),
            ),
            (
                Request::Dispatch {
                    spec: Box::default(),
                },
                Some(CHANGE_TIMEOUT),
            ),
            (
                Request::FollowUp {
                    run_id: run_id(),
                    text: "more".into(),
                },
                Some(CHANGE_TIMEOUT),
            ),
            (
                Request::Respond {
                    run_id: run_id(),
                    request_id: "q".into(),
                    answer: PermissionAnswer::Allow { always: false },
                },
                Some(CHANGE_TIMEOUT),
            ),
            (Request::Stop { run_id: run_id() }, Some(CHANGE_TIMEOUT)),
            (Request::Complete { run_id: run_id() }, Some(CHANGE_TIMEOUT)),
            (
                Request::Remove {
                    run_id: None,
                    finished: true,
                    force: false,
                },
                Some(CHANGE_TIMEOUT),
            ),
            (Request::KillAll { workflow: None }, Some(CHANGE_TIMEOUT)),
            (wait(Some(30)), Some(Duration::from_secs(40))),
            (wait(Some(0)), Some(WAIT_MARGIN)),
            (wait(Some(u64::MAX)), Some(Duration::MAX)),
            (wait(None), None),
        ];
        for (request, expected) in cases {
            assert_eq!(request_timeout(&request), expected, "{request:?}");
        }
    }
}
