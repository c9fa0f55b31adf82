//! The control server: accepts connections on the owner's socket and relays each request
//! line to the dispatcher, with a task per connection.
//!
//! What must stay true: requests on one connection are answered as they finish (a long
//! `wait` does not hold up a `ping` sent after it); a connection holds at most
//! [`MAX_IN_FLIGHT`] requests, [`bounds::MAX_PENDING_WAITS`] of them waits, and
//! [`wire::MAX_REQUEST_LINE_BYTES`] of one line; every list in a request is bounded and
//! its duplicates collapsed ([`bounds::check`]) before the dispatcher sees it; a
//! connection's `focus` is kept here, counted while the connection lives; a
//! subscriber that reads too slowly loses events (and is told how many), it never slows
//! the dispatcher; stopping the server closes every connection and removes the socket
//! file before the owner lock is released.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};

use super::Dispatcher;
use super::bounds;
use super::feed::{Feed, Live, Numbered};
use super::owner::OwnerLock;
use super::wire::{self, Line, LineReader, ServerLine};
use crate::dispatch::api::Subscribed;
use crate::dispatch::{DispatchEvent, Request};
use crate::error::{DroverError, ErrorCode};
use crate::paths::Paths;

/// Requests one connection may have in flight; beyond that its next line waits.
pub const MAX_IN_FLIGHT: usize = 64;

/// Lines queued for one connection's writer.
const OUT_QUEUE: usize = 1024;

/// A listening control socket. Stop it with [`ControlServer::stop`]; dropping it also
/// closes the socket and removes the file.
#[derive(Debug)]
pub struct ControlServer {
    socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    // Declared last: released only after `Drop` removed the socket file.
    _owner: OwnerLock,
}

/// Listens on `paths.socket_file` (mode 0600) and serves `dispatcher` until stopped.
/// Needs the owner lock, so only the owner ever creates the socket. Must be called
/// inside a tokio runtime.
pub fn serve<D: Dispatcher>(
    dispatcher: D,
    owner: OwnerLock,
    paths: &Paths,
) -> Result<ControlServer, DroverError> {
    let socket = paths.socket_file.clone();
    let listener = UnixListener::bind(&socket).map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!(
                "cannot listen on {}: {e}; check the data directory's permissions",
                socket.display()
            ),
        )
    })?;
    // The umask decided the mode at bind; make it private whatever the umask was.
    if let Err(e) = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)) {
        drop(listener);
        let _ = std::fs::remove_file(&socket);
        return Err(DroverError::new(
            ErrorCode::Internal,
            format!("cannot make {} private: {e}", socket.display()),
        ));
    }
    let uid = nix::unistd::getuid().as_raw();
    let epoch = format!("{}-{}", std::process::id(), crate::clock::now_millis());
    let feed = Feed::start(epoch, dispatcher.subscribe());
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(accept_loop(listener, dispatcher, feed, uid, stopped));
    tracing::info!(socket = %socket.display(), "control: listening");
    Ok(ControlServer {
        socket,
        stop: Some(stop),
        task: Some(task),
        _owner: owner,
    })
}

impl ControlServer {
    /// The socket file the server listens on.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Stops accepting, closes every connection, removes the socket file and releases
    /// the owner lock.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take()
            && let Err(e) = task.await
            && e.is_panic()
        {
            tracing::error!("control: the accept loop panicked");
        }
        // Drop removes the file, then releases the lock.
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        match std::fs::remove_file(&self.socket) {
            Ok(()) => tracing::info!(socket = %self.socket.display(), "control: stopped"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %e, "control: cannot remove the socket file"),
        }
    }
}

async fn accept_loop<D: Dispatcher>(
    listener: UnixListener,
    dispatcher: D,
    feed: Feed,
    uid: u32,
    mut stop: oneshot::Receiver<()>,
) {
    // Dropping this set (when the loop ends) aborts every connection.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection(stream, dispatcher.clone(), feed.clone(), uid));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "control: accept failed");
                    tokio::select! {
                        _ = &mut stop => break,
                        () = tokio::time::sleep(Duration::from_millis(100)) => {}
                    }
                }
            },
            Some(done) = connections.join_next(), if !connections.is_empty() => {
                if let Err(e) = done && e.is_panic() {
                    tracing::error!("control: a connection task panicked");
                }
            }
        }
    }
}

/// Aborts the task when dropped, so an aborted connection takes its helpers with it.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn connection<D: Dispatcher>(stream: UnixStream, dispatcher: D, feed: Feed, uid: u32) {
    match stream.peer_cred() {
        Ok(peer) if peer.uid() == uid => {}
        Ok(peer) => {
            tracing::warn!(
                peer_uid = peer.uid(),
                peer_pid = ?peer.pid(),
                "control: refused a peer of another user"
            );
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "control: cannot read the peer's credentials");
            return;
        }
    }
    let (read, write) = stream.into_split();
    let (out, lines) = mpsc::channel(OUT_QUEUE);
    tokio::join!(
        read_requests(read, dispatcher, feed, out),
        write_lines(write, lines)
    );
}

/// Reads request lines until the client closes its side, then lets the requests in
/// flight finish (their answers are still written).
async fn read_requests<D: Dispatcher>(
    read: OwnedReadHalf,
    dispatcher: D,
    feed: Feed,
    out: mpsc::Sender<String>,
) {
    let mut reader = LineReader::new(read, wire::MAX_REQUEST_LINE_BYTES);
    // This connection's say in whether a dashboard is focused; gone with it.
    let mut focus = dispatcher.focus().map(|f| f.hold());
    let mut requests = JoinSet::new();
    let mut events: Option<AbortOnDrop> = None;
    let waits = Arc::new(AtomicUsize::new(0));
    loop {
        let line = tokio::select! {
            line = reader.next() => line,
            // The event stream ended (the dispatcher is gone, or the writer is): so does
            // the connection.
            () = stream_ended(&mut events) => break,
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "control: read failed");
                break;
            }
        };
        let parsed = match line {
            Line::TooLong => {
                let error = DroverError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "the line is longer than {} bytes; send a shorter request",
                        wire::MAX_REQUEST_LINE_BYTES
                    ),
                );
                if send(&out, ServerLine::Error { id: None, error }).await {
                    continue;
                }
                break;
            }
            Line::Complete(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Complete(bytes) => wire::parse_request_line(&bytes),
        };
        let (id, request) = match parsed.and_then(|(id, request)| {
            bounds::check(&request)
                .map(|request| (id, request))
                .map_err(|error| (Some(id), error))
        }) {
            Ok(parsed) => parsed,
            Err((id, error)) => {
                if send(&out, ServerLine::Error { id, error }).await {
                    continue;
                }
                break;
            }
        };
        if let Request::Focus { focused } = request {
            // Taken on any connection, an event stream's too: it lasts as long as it.
            if let Some(hold) = focus.as_mut() {
                hold.set(focused);
            }
            let answer = dispatcher.request(Request::Ping).await;
            if send(&out, ServerLine::answer(id, answer)).await {
                continue;
            }
            break;
        }
        if events.is_some() {
            let error = DroverError::new(
                ErrorCode::InvalidRequest,
                "this connection is an event stream; open another connection for requests",
            );
            if send(
                &out,
                ServerLine::Error {
                    id: Some(id),
                    error,
                },
            )
            .await
            {
                continue;
            }
            break;
        }
        if let Request::Subscribe { run_ids, after } = request {
            // Taken under the feed's lock: the replay and the live events neither overlap
            // nor leave a gap.
            let subscription = feed.subscribe(after.as_ref());
            let ack = Subscribed {
                subscribed: true,
                position: Some(subscription.position),
                resumed: subscription.resumed,
            };
            let ack = ServerLine::answer(id, Ok(serde_json::to_value(ack).unwrap_or_default()));
            if !send(&out, ack).await {
                break;
            }
            events = Some(AbortOnDrop(tokio::spawn(forward_events(
                subscription.replay,
                subscription.live,
                run_ids,
                out.clone(),
            ))));
            continue;
        }
        let wait = matches!(request, Request::Wait { .. });
        if wait && waits.load(Ordering::Acquire) >= bounds::MAX_PENDING_WAITS {
            let error = DroverError::new(
                ErrorCode::TooManyWaits,
                format!(
                    "this connection already has {} waits pending; wait for one to finish or name several runs in one wait",
                    bounds::MAX_PENDING_WAITS
                ),
            );
            if send(
                &out,
                ServerLine::Error {
                    id: Some(id),
                    error,
                },
            )
            .await
            {
                continue;
            }
            break;
        }
        while requests.len() >= MAX_IN_FLIGHT {
            requests.join_next().await;
        }
        let dispatcher = dispatcher.clone();
        let out = out.clone();
        let pending = wait.then(|| PendingWait::new(&waits));
        requests.spawn(async move {
            let result = dispatcher.request(request).await;
            send(&out, ServerLine::answer(id, result)).await;
            drop(pending);
        });
        // Reap what finished so the set does not grow on a long-lived connection.
        while requests.try_join_next().is_some() {}
    }
    drop(events);
    drop(out);
    while requests.join_next().await.is_some() {}
}

/// One `wait` in flight on a connection, counted while it lives.
struct PendingWait(Arc<AtomicUsize>);

impl PendingWait {
    fn new(count: &Arc<AtomicUsize>) -> PendingWait {
        count.fetch_add(1, Ordering::AcqRel);
        PendingWait(Arc::clone(count))
    }
}

impl Drop for PendingWait {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Completes when the connection's event stream has ended; never without one.
async fn stream_ended(events: &mut Option<AbortOnDrop>) {
    match events {
        Some(task) => {
            let _ = (&mut task.0).await;
        }
        None => std::future::pending().await,
    }
}

/// Queues a line for the writer; false when the writer is gone.
async fn send(out: &mpsc::Sender<String>, line: ServerLine) -> bool {
    out.send(line.to_line()).await.is_ok()
}

/// Whether a subscriber asked for this event (an empty filter means every run).
pub(crate) fn wanted(run_ids: &[String], event: &DispatchEvent) -> bool {
    run_ids.is_empty() || run_ids.iter().any(|id| id == event.run_id())
}

async fn forward_events(
    replay: Vec<Numbered>,
    mut live: broadcast::Receiver<Live>,
    run_ids: Vec<String>,
    out: mpsc::Sender<String>,
) {
    for (pos, event) in replay {
        if wanted(&run_ids, &event)
            && !send(
                &out,
                ServerLine::Event {
                    event: Arc::unwrap_or_clone(event),
                    pos: Some(pos),
                },
            )
            .await
        {
            return;
        }
    }
    loop {
        let line = match live.recv().await {
            Ok(Live::Event(pos, event)) if wanted(&run_ids, &event) => ServerLine::Event {
                event: Arc::unwrap_or_clone(event),
                pos: Some(pos),
            },
            Ok(Live::Event(..)) => continue,
            Ok(Live::Lost(lagged)) | Err(RecvError::Lagged(lagged)) => {
                ServerLine::Lagged { lagged }
            }
            Err(RecvError::Closed) => return,
        };
        if !send(&out, line).await {
            return;
        }
    }
}

/// Writes queued lines, flushing whenever the queue runs dry; ends when every sender is
/// gone or the client stops reading.
async fn write_lines(write: OwnedWriteHalf, mut lines: mpsc::Receiver<String>) {
    let mut write = BufWriter::new(write);
    while let Some(line) = lines.recv().await {
        let mut result = write.write_all(line.as_bytes()).await;
        while result.is_ok()
            && let Ok(more) = lines.try_recv()
        {
            result = write.write_all(more.as_bytes()).await;
        }
        if let Err(e) = result.and(write.flush().await) {
            tracing::debug!(error = %e, "control: write failed");
            return;
        }
    }
    let _ = write.shutdown().await;
}
