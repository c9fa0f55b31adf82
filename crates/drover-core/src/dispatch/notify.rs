//! The owner's notifications (docs/ARCHITECTURE.md §"Notifications"): when a run starts
//! needing you, the owner tells you through what `[notifications]` configures — a desktop
//! notification, a command, a webhook — whether or not a dashboard is open.
//!
//! It listens to the dispatcher's published events (committed first, like every
//! subscriber's), so the core stays pure and decides nothing here. A run needs you by
//! the Needs-you tray's one rule ([`RunSummary::needs_you`]); a run's need is noticed
//! when it starts or changes (one per run per need), and needs that start within
//! `batch_secs` of the first are sent as one message ([`Batcher`], pure, its time given).
//!
//! What must stay true: nothing here slows the owner — the events are read by a task of
//! its own, messages wait in a bounded queue whose oldest is dropped (and counted) when
//! full, each target is sent to on its own with a timeout, and a failure is logged; at
//! most [`RATE_MAX`] messages leave in [`RATE_WINDOW_MS`] (more needs wait and are merged
//! into the next); every text leaving is passed through the redactor; while a dashboard
//! attached to the owner says its terminal is focused ([`Focus`]), no desktop
//! notification is posted (the command and the webhook still are).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, watch};

use super::api::{DispatchEvent, Need, RunSummary};
use super::driver::Clock;
use crate::UnixMillis;
use crate::config::NotificationsConfig;
use crate::text::{clip, one_line};

/// Needs noticed this soon after the first are sent with it even with `batch_secs = 0`
/// (a permission's request arrives in the same commit as its run's change).
pub const SETTLE_MS: i64 = 250;
/// At most [`RATE_MAX`] messages leave within this window.
pub const RATE_WINDOW_MS: i64 = 3_600_000;
/// Messages per [`RATE_WINDOW_MS`].
pub const RATE_MAX: usize = 20;
/// Messages waiting to be sent at most; the oldest is dropped beyond.
pub const QUEUE_MAX: usize = 16;
/// How long one target may take to take one message.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// One run that started needing you.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Noticed {
    /// The run.
    pub run_id: String,
    /// Its title.
    pub title: String,
    /// Why it needs you.
    pub need: Need,
    /// Why, in words (`awaiting permission`, `needs input`, …).
    pub asks: String,
    /// For a permission: the tool that asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// For a permission: what it would run or touch (the command, the file, …), redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// One notification: what every target is given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// The ntfy topic, when configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// One line: `drover: RUN needs you` or `drover: 3 runs need you`.
    pub title: String,
    /// One line per run: `RUN · title — awaiting permission: Bash ls -la`.
    pub message: String,
    /// The runs, each with what it asks.
    pub runs: Vec<Noticed>,
}

impl Message {
    fn of(runs: Vec<Noticed>) -> Message {
        let redactor = crate::redact::global();
        let runs: Vec<Noticed> = runs
            .into_iter()
            .map(|mut n| {
                n.title = redactor.redact(&n.title).into_owned();
                n.command = n.command.map(|c| redactor.redact(&c).into_owned());
                n
            })
            .collect();
        let title = match runs.as_slice() {
            [one] => format!("drover: {} needs you", one.run_id),
            many => format!("drover: {} runs need you", many.len()),
        };
        let message = runs
            .iter()
            .map(|n| {
                let what = match (&n.tool, &n.command) {
                    (Some(tool), Some(command)) => {
                        format!(": {tool} {}", clip(&one_line(command), 120))
                    }
                    (Some(tool), None) => format!(": {tool}"),
                    _ => String::new(),
                };
                format!("{} · {} — {}{what}", n.run_id, clip(&n.title, 60), n.asks)
            })
            .collect::<Vec<_>>()
            .join("\n");
        Message {
            topic: None,
            title,
            message,
            runs,
        }
    }
}

/// Which runs need you and what waits to be sent: pure, its time given.
#[derive(Debug, Default)]
pub struct Batcher {
    batch_ms: i64,
    /// Each run's need as last seen (runs needing nothing are left out).
    needs: HashMap<String, Need>,
    /// Each run's title as last seen.
    titles: HashMap<String, String>,
    /// What waits to be sent, in the order noticed.
    pending: Vec<Noticed>,
    /// When the first of `pending` was noticed.
    opened: Option<UnixMillis>,
    /// When the messages of the rate window left.
    sent: VecDeque<UnixMillis>,
}

impl Batcher {
    /// A batcher that merges needs within `batch_secs`.
    pub fn new(batch_secs: u64) -> Batcher {
        let mut batcher = Batcher::default();
        batcher.set_batch_secs(batch_secs);
        batcher
    }

    /// A new batch window (a config reload).
    pub fn set_batch_secs(&mut self, batch_secs: u64) {
        self.batch_ms = i64::try_from(batch_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    }

    /// Takes one published event in.
    pub fn observe(&mut self, event: &DispatchEvent, now: UnixMillis) {
        match event {
            DispatchEvent::RunChanged { run } => self.changed(run, now),
            DispatchEvent::PermissionRequested { run_id, pending } => {
                let tool = Some(pending.tool.clone());
                let command = Some(pending.ask.summary()).filter(|c| !c.is_empty());
                if self.needs.get(run_id) != Some(&Need::Permission) {
                    self.needs.insert(run_id.clone(), Need::Permission);
                    self.notice(run_id, Need::Permission, now);
                }
                // The run's first request is what the message names.
                if let Some(noticed) = self
                    .pending
                    .iter_mut()
                    .find(|n| n.run_id == *run_id && n.need == Need::Permission)
                    && noticed.tool.is_none()
                {
                    noticed.tool = tool;
                    noticed.command = command;
                }
            }
            DispatchEvent::RunRemoved { run_id } => {
                self.needs.remove(run_id);
                self.titles.remove(run_id);
                self.pending.retain(|n| n.run_id != *run_id);
            }
            _ => {}
        }
    }

    fn changed(&mut self, run: &RunSummary, now: UnixMillis) {
        let run_id = &run.head.run_id;
        self.titles.insert(run_id.clone(), run.head.title.clone());
        match run.needs_you() {
            Some(need) if self.needs.get(run_id) != Some(&need) => {
                self.needs.insert(run_id.clone(), need);
                self.notice(run_id, need, now);
            }
            Some(_) => {}
            None => {
                self.needs.remove(run_id);
                // A need answered before it was sent is not sent.
                self.pending.retain(|n| n.run_id != *run_id);
                if run.head.state.is_terminal() {
                    self.titles.remove(run_id);
                }
            }
        }
    }

    fn notice(&mut self, run_id: &str, need: Need, now: UnixMillis) {
        // One line a run: its newest need replaces one not sent yet.
        self.pending.retain(|n| n.run_id != run_id);
        self.pending.push(Noticed {
            run_id: run_id.to_string(),
            title: self.titles.get(run_id).cloned().unwrap_or_default(),
            need,
            asks: need.words().to_string(),
            tool: None,
            command: None,
        });
        self.opened.get_or_insert(now);
    }

    /// When the next message is due; `None` while nothing waits.
    pub fn next_due(&self) -> Option<UnixMillis> {
        let opened = self.opened?;
        let batched = opened.saturating_add(self.batch_ms.max(SETTLE_MS));
        let rate_free = if self.sent.len() >= RATE_MAX {
            self.sent
                .front()
                .map_or(batched, |first| first.saturating_add(RATE_WINDOW_MS))
        } else {
            batched
        };
        Some(batched.max(rate_free))
    }

    /// The message due at `now`, if one is.
    pub fn take_due(&mut self, now: UnixMillis) -> Option<Message> {
        while self
            .sent
            .front()
            .is_some_and(|at| now.saturating_sub(*at) >= RATE_WINDOW_MS)
        {
            self.sent.pop_front();
        }
        if self.next_due().is_none_or(|due| due > now) {
            return None;
        }
        self.opened = None;
        let runs = std::mem::take(&mut self.pending);
        if runs.is_empty() {
            return None;
        }
        self.sent.push_back(now);
        Some(Message::of(runs))
    }
}

/// Whether a dashboard attached to the owner has the user's eye: how many connections
/// said their terminal is focused and have not said otherwise nor closed.
#[derive(Debug, Clone, Default)]
pub struct Focus(Arc<AtomicUsize>);

impl Focus {
    /// Whether any attached dashboard is focused.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }

    /// One connection's say in it; it counts while the hold is focused and alive.
    pub fn hold(&self) -> FocusHold {
        FocusHold {
            focus: self.clone(),
            focused: false,
        }
    }
}

/// One connection's focus (see [`Focus::hold`]); dropped with the connection.
#[derive(Debug)]
pub struct FocusHold {
    focus: Focus,
    focused: bool,
}

impl FocusHold {
    /// The connection's dashboard is (no longer) focused.
    pub fn set(&mut self, focused: bool) {
        if focused != self.focused {
            self.focused = focused;
            if focused {
                self.focus.0.fetch_add(1, Ordering::AcqRel);
            } else {
                self.focus.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

impl Drop for FocusHold {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// Messages waiting for the sender: bounded, the oldest dropped (and counted) when full.
#[derive(Default)]
struct Outbox {
    queue: Mutex<VecDeque<Message>>,
    wake: tokio::sync::Notify,
    dropped: AtomicU64,
}

impl Outbox {
    fn push(&self, message: Message) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.push_back(message);
        if queue.len() > QUEUE_MAX {
            queue.pop_front();
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(
                dropped,
                "notify: the targets are slower than the needs; the oldest notification was dropped"
            );
        }
        drop(queue);
        self.wake.notify_one();
    }

    async fn pop(&self) -> Message {
        loop {
            let next = self
                .queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
            if let Some(message) = next {
                return message;
            }
            self.wake.notified().await;
        }
    }
}

/// Starts the notifier: one task reads the events and batches, another sends. Both end
/// when the returned handle is aborted (the owner stopping) or the events end.
pub fn spawn(
    config: watch::Receiver<NotificationsConfig>,
    events: broadcast::Receiver<super::Published>,
    focus: Focus,
    clock: Clock,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let outbox = Arc::new(Outbox::default());
        let sender = tokio::spawn(send_loop(outbox.clone(), config.clone(), focus));
        watch_loop(config, events, outbox, clock).await;
        sender.abort();
    })
}

async fn watch_loop(
    mut config: watch::Receiver<NotificationsConfig>,
    mut events: broadcast::Receiver<super::Published>,
    outbox: Arc<Outbox>,
    clock: Clock,
) {
    let mut batcher = Batcher::new(config.borrow_and_update().batch_secs);
    let mut config_open = true;
    loop {
        let due = batcher.next_due();
        let sleep = async {
            match due {
                Some(at) => tokio::time::sleep_until(clock.instant_at(at)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) => batcher.observe(&event, clock.now()),
                Err(broadcast::error::RecvError::Lagged(lost)) => {
                    tracing::warn!(lost, "notify: events were lost; needs among them may go unnoticed");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            changed = config.changed(), if config_open => match changed {
                Ok(()) => batcher.set_batch_secs(config.borrow_and_update().batch_secs),
                Err(_) => config_open = false,
            },
            () = sleep => {}
        }
        if let Some(message) = batcher.take_due(clock.now()) {
            outbox.push(message);
        }
    }
}

async fn send_loop(
    outbox: Arc<Outbox>,
    config: watch::Receiver<NotificationsConfig>,
    focus: Focus,
) {
    // Made at the first message with a webhook to send to, not at the owner's start:
    // most owners never send one, and making it runs code (the system's proxy settings,
    // a header map) whose pages would stay resident in the owner for nothing
    // (docs/ARCHITECTURE.md §"Memory").
    let mut client: Option<Option<reqwest::Client>> = None;
    loop {
        let mut message = outbox.pop().await;
        let config = config.borrow().clone();
        message.topic = Some(config.webhook_topic.clone()).filter(|t| !t.is_empty());
        let desktop = config.desktop && !focus.any();
        // Each target on its own, each bounded: one that hangs never holds the others.
        tokio::join!(
            async {
                if desktop {
                    desktop_notification(&message).await;
                }
            },
            run_command(&config.command, &message),
            async {
                if !config.webhook.is_empty()
                    && let Some(client) = client.get_or_insert_with(webhook_client)
                {
                    post(client, &config.webhook, &message).await;
                }
            },
        );
    }
}

/// The webhook's HTTP client: bounded by [`SEND_TIMEOUT`], following no redirect. `None`
/// (said once in the log) when none can be made.
fn webhook_client() -> Option<reqwest::Client> {
    let client = reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build();
    match client {
        Ok(client) => Some(client),
        Err(e) => {
            tracing::warn!(error = %e, "notify: no HTTP client; the webhook is not sent to");
            None
        }
    }
}

/// `notify-send TITLE MESSAGE`, when it is there.
async fn desktop_notification(message: &Message) {
    let Ok(program) = which::which("notify-send") else {
        return;
    };
    let argv = [
        program.to_string_lossy().into_owned(),
        "--app-name=drover".into(),
        message.title.clone(),
    ];
    run_bounded(&argv, message, "desktop").await;
}

/// `[notifications] command`, with the message's one line last.
async fn run_command(command: &[String], message: &Message) {
    if command.is_empty() {
        return;
    }
    run_bounded(command, message, "command").await;
}

/// Runs `argv` with the message's one line as its last argument and the message in its
/// environment; ends it when it overruns [`SEND_TIMEOUT`].
async fn run_bounded(argv: &[String], message: &Message, what: &str) {
    let Some((program, args)) = argv.split_first() else {
        return;
    };
    let line = clip(&one_line(&message.message.replace('\n', " · ")), 300);
    let runs: Vec<&str> = message.runs.iter().map(|n| n.run_id.as_str()).collect();
    let spawned = tokio::process::Command::new(program)
        .args(args)
        .arg(&line)
        .env("DROVER_NOTIFICATION_TITLE", &message.title)
        .env("DROVER_NOTIFICATION_MESSAGE", &message.message)
        .env("DROVER_NOTIFICATION_RUNS", runs.join(" "))
        .env(
            "DROVER_NOTIFICATION_JSON",
            serde_json::to_string(message).unwrap_or_default(),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            tracing::warn!(error = %e, program = %program, "notify: the {what} did not start");
            return;
        }
    };
    match tokio::time::timeout(SEND_TIMEOUT, child.wait()).await {
        Ok(Ok(status)) if status.success() => {}
        Ok(Ok(status)) => tracing::warn!(%status, program = %program, "notify: the {what} failed"),
        Ok(Err(e)) => tracing::warn!(error = %e, "notify: the {what} could not be waited for"),
        Err(_) => {
            tracing::warn!(program = %program, "notify: the {what} overran its time and was ended");
            let _ = child.kill().await;
        }
    }
}

/// POSTs the message as JSON.
async fn post(client: &reqwest::Client, url: &str, message: &Message) {
    match client.post(url).json(message).send().await {
        Ok(answer) if answer.status().is_success() => {}
        Ok(answer) => {
            tracing::warn!(status = %answer.status(), "notify: the webhook refused the notification")
        }
        Err(e) => {
            tracing::warn!(error = %e.without_url(), "notify: the webhook could not be reached")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::api::PendingView;
    use crate::providers::{Ask, RequestKind};
    use crate::run_state::RunState;

    fn summary(id: &str, state: RunState) -> RunSummary {
        let mut run = RunSummary::example(id, state);
        run.head.title = format!("task {id}");
        run
    }

    fn asking(id: &str, command: &str) -> DispatchEvent {
        DispatchEvent::PermissionRequested {
            run_id: id.into(),
            pending: PendingView {
                request_id: format!("req-{id}"),
                kind: RequestKind::Permission,
                tool: "Bash".into(),
                ask: Ask::Command {
                    command: command.into(),
                    words: None,
                    cwd: None,
                    reason: None,
                },
                always: None,
                created_at: 0,
                expires_at: 0,
                guard: None,
            },
        }
    }

    fn changed(run: RunSummary) -> DispatchEvent {
        DispatchEvent::RunChanged { run }
    }

    #[test]
    fn one_message_per_run_per_need_and_needs_within_the_batch_merged() {
        let mut b = Batcher::new(5);
        let mut waiting = summary("a", RunState::AwaitingPermission);
        waiting.pending = 1;
        b.observe(&changed(waiting.clone()), 1_000);
        b.observe(&asking("a", "ls -la"), 1_000);
        // A second request, and the run's row again: the same need, nothing new.
        b.observe(&asking("a", "cat README.md"), 2_000);
        b.observe(&changed(waiting.clone()), 2_000);
        // Another run asks within the batch.
        let mut input = summary("b", RunState::Idle);
        input.needs_input = true;
        b.observe(&changed(input.clone()), 4_000);
        assert_eq!(b.next_due(), Some(6_000));
        assert_eq!(b.take_due(5_999), None);
        let message = b.take_due(6_000).expect("a message");
        assert_eq!(message.title, "drover: 2 runs need you");
        assert_eq!(
            message.message,
            "a · task a — awaiting permission: Bash ls -la\nb · task b — needs input"
        );
        assert_eq!(b.next_due(), None);
        // Still the same needs: nothing more.
        b.observe(&changed(waiting.clone()), 7_000);
        b.observe(&changed(input), 7_000);
        assert_eq!(b.take_due(20_000), None);
        // Answered, then asking again: a new need, a new message.
        b.observe(&changed(summary("a", RunState::Running)), 21_000);
        b.observe(&changed(waiting), 22_000);
        assert_eq!(b.next_due(), Some(27_000));
        let again = b.take_due(27_000).expect("a message");
        assert_eq!(again.title, "drover: a needs you");
    }

    #[test]
    fn a_need_answered_before_its_batch_closes_is_not_sent() {
        let mut b = Batcher::new(5);
        let mut held = summary("r", RunState::AwaitingRoute);
        b.observe(&changed(held.clone()), 0);
        held.head.state = RunState::Queued;
        b.observe(&changed(held), 1_000);
        assert_eq!(b.take_due(10_000), None);
    }

    #[test]
    fn interrupted_runs_offers_and_blocked_results_are_needs_too() {
        let mut b = Batcher::new(0);
        b.observe(&changed(summary("i", RunState::Interrupted)), 0);
        let mut offered = summary("o", RunState::Failed);
        offered.escalation_offered = true;
        b.observe(&changed(offered), 0);
        let mut blocked = summary("k", RunState::Idle);
        blocked.result_status = Some("blocked".into());
        b.observe(&changed(blocked), 0);
        // Even with no batch, a moment for a request to follow its run's change.
        assert_eq!(b.next_due(), Some(SETTLE_MS));
        let message = b.take_due(SETTLE_MS).expect("a message");
        let needs: Vec<Need> = message.runs.iter().map(|n| n.need).collect();
        assert_eq!(needs, [Need::Interrupted, Need::Escalation, Need::Blocked]);
    }

    #[test]
    fn the_rate_limit_holds_needs_back_and_merges_them() {
        let mut b = Batcher::new(0);
        for i in 0..RATE_MAX {
            let at = i as i64 * 1_000;
            b.observe(
                &changed(summary(&format!("r{i}"), RunState::Interrupted)),
                at,
            );
            assert!(b.take_due(at + SETTLE_MS).is_some(), "message {i}");
        }
        b.observe(&changed(summary("late-1", RunState::Interrupted)), 30_000);
        b.observe(&changed(summary("late-2", RunState::Interrupted)), 40_000);
        // The window's first message left at 250 ms: the next may leave an hour after.
        assert_eq!(b.next_due(), Some(SETTLE_MS + RATE_WINDOW_MS));
        assert_eq!(b.take_due(RATE_WINDOW_MS), None);
        let merged = b
            .take_due(SETTLE_MS + RATE_WINDOW_MS)
            .expect("the held needs");
        assert_eq!(merged.title, "drover: 2 runs need you");
    }

    #[test]
    fn a_secret_in_the_command_is_redacted() {
        let mut b = Batcher::new(0);
        let mut waiting = summary("s", RunState::AwaitingPermission);
        waiting.pending = 1;
        b.observe(&changed(waiting), 0);
        let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
        b.observe(
            &asking(
                "s",
                &format!("curl -H 'Authorization: token {token}' https://api.github.com"),
            ),
            0,
        );
        let message = b.take_due(SETTLE_MS).expect("a message");
        let json = serde_json::to_string(&message).unwrap_or_default();
        assert!(!json.contains(token), "{json}");
        assert!(!message.message.contains(token), "{}", message.message);
        assert!(message.message.contains("curl"), "{}", message.message);
    }

    #[test]
    fn focus_counts_live_holds_only() {
        let focus = Focus::default();
        let mut one = focus.hold();
        let mut two = focus.hold();
        assert!(!focus.any());
        one.set(true);
        two.set(true);
        two.set(true);
        assert!(focus.any());
        one.set(false);
        assert!(focus.any());
        drop(two);
        assert!(!focus.any());
        drop(one);
        assert!(!focus.any());
    }
}
