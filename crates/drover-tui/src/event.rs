//! The one event type of the dashboard and what the app asks the loop to do.
//!
//! Everything that can change what is on screen arrives as an [`AppEvent`] — a key, a
//! mouse action, a resize, a dispatcher event, the answer to a request, a periodic tick —
//! and goes through `App::handle`, which returns [`Effect`]s for the loop
//! ([`crate::runner`]) to carry out.
//! What must stay true: the app never awaits; requests to the dispatcher leave as
//! `Effect::Request` and come back as `AppEvent::Reply` with the [`ReplyTag`] they left
//! with, so each answer finds its way to the view that asked.

use crossterm::event::{KeyEvent, MouseEvent};
use tokio::sync::mpsc;

use drover_core::DroverError;
use drover_core::dispatch::{DispatchEvent, Request, Response};

/// Something happened.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "events are handled one at a time as they arrive; boxing would allocate per dispatcher event"
)]
pub enum AppEvent {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize {
        width: u16,
        height: u16,
    },
    /// A dispatcher event (published after the ledger committed it).
    Dispatch(DispatchEvent),
    /// The dispatcher's event stream skipped events: everything is fetched again.
    Lagged,
    /// The owner stopped answering (it stopped or crashed): the dashboard says so and
    /// reconnects by itself.
    OwnerGone,
    /// An owner answers (again). Unless `resumed` (the same owner replayed what was
    /// missed), everything is fetched again.
    OwnerBack {
        resumed: bool,
    },
    /// The answer to an `Effect::Request`.
    Reply {
        tag: ReplyTag,
        result: Result<Response, DroverError>,
    },
    /// The periodic safety-net refresh of runs and money.
    Tick,
    /// A stop signal (SIGTERM, SIGHUP) reached the dashboard: quit without asking.
    Terminate,
    /// A program opened in a run's directory ([`Effect::OpenIn`]) started beside the
    /// dashboard or came back: what to say of it, or why it failed.
    Opened(Result<String, String>),
}

/// Which request an answer belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyTag {
    Runs,
    /// The next page of finished runs (loaded on scroll).
    OlderRuns,
    /// A search of the ledger for the filter's text.
    FoundRuns(String),
    /// A search of the ledger's index (tasks, follow-ups, transcripts, results) for the
    /// filter's text.
    FoundLines(String),
    Budget,
    Show(String),
    Transcript(String),
    Dispatch,
    Respond {
        run_id: String,
        request_id: String,
    },
    FollowUp(String),
    Stop(String),
    /// A soft stop: the run wraps up, then stops.
    WrapUp(String),
    Complete(String),
    Remove,
    KillAll,
    Route(String),
    RouteDecline(String),
    Escalate(String),
    Resume(String),
    /// `wake` as a follow-up box opens on a hibernated run.
    Wake(String),
    /// A run's diff: the file list (`file` none) or one file's patch.
    Diff {
        run_id: String,
        file: Option<String>,
    },
    /// `pr`: the run's branch pushed, its pull request opened or read.
    Pr(String),
    /// The run's repository scripts approved (or refused).
    ApproveScripts {
        run_id: String,
        approve: bool,
    },
    /// `spend` by this grouping, for the spend view.
    Spend(drover_core::dispatch::api::SpendBy),
    /// `merge`, `keep` or `discard` of a run's worktree.
    WorkspaceAction {
        run_id: String,
        action: String,
    },
}

/// What the app asks of the loop.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send a request to the dispatcher; its answer comes back as `AppEvent::Reply`.
    Request { tag: ReplyTag, request: Request },
    /// Ring the bell and post a desktop notification (OSC 9) with this text.
    Notify(String),
    /// Leave the dashboard (active runs are stopped by the dispatcher's shutdown).
    Quit,
    /// Run a program of the user's in a run's directory (`o`, `!`): inside tmux in a new
    /// window or a split (the dashboard stays live), else in the foreground, the dashboard
    /// coming back as it was when it exits.
    OpenIn(OpenIn),
    /// Put this text on the system clipboard: the loop writes it to the terminal the
    /// dashboard owns as an OSC 52 sequence ([`crate::terminal::osc52`]).
    Copy(String),
}

/// A program to open in a run's directory ([`Effect::OpenIn`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenIn {
    /// The run whose directory it is.
    pub run_id: String,
    /// The editor or the shell.
    pub program: drover_core::workspace::open::Program,
    /// Its command line (inside tmux: the `tmux` command that opens it).
    pub argv: Vec<String>,
    /// The run's directory (the program's working directory).
    pub dir: std::path::PathBuf,
    /// It takes the terminal (outside tmux): the dashboard leaves its screen, waits for
    /// it to exit, and comes back as it was. Inside tmux it runs beside the dashboard.
    pub foreground: bool,
}

/// A cloneable sender of app events, for input threads and request tasks.
#[derive(Debug, Clone)]
pub struct AppEventSender {
    tx: mpsc::UnboundedSender<AppEvent>,
}

impl AppEventSender {
    pub fn new(tx: mpsc::UnboundedSender<AppEvent>) -> Self {
        AppEventSender { tx }
    }

    /// Sends an event; after the loop has ended, events are dropped.
    pub fn send(&self, event: AppEvent) {
        let _ = self.tx.send(event);
    }

    /// Whether the loop has ended (nobody listens any more).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
