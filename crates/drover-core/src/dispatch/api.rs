//! The dispatcher API: the requests every front end sends (the dashboard, the headless
//! CLI through the control socket), the typed [`Response`] each gets back, and the views
//! inside it.
//!
//! What must stay true: the dashboard never knows more than a headless client could —
//! everything it shows comes from these types. In process they travel typed; only the
//! control socket turns them into JSON (serde on these same types, [`Request::decode`] on
//! the way back), so field names are part of the public interface.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::UnixMillis;
use crate::live_state::LiveState;
pub use crate::providers::interactive::InteractivePlan;
use crate::providers::{AlwaysOption, Ask, PermissionAnswer, RequestKind, Tokens};
use crate::run_state::RunState;
use crate::spec::SpecInput;
pub use crate::workspace::forge::{PrActionView, PrView, PushView};
pub use crate::workspace::{
    ChangeStat, DiffView, FileStat, MergeView, WorkspaceActionView, WorkspaceView,
};

/// One request to the dispatcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", content = "params", rename_all = "snake_case")]
pub enum Request {
    /// Is an owner there? Answered with [`Pong`].
    Ping,
    /// Validate and create a run; it starts, queues or waits on a route card.
    Dispatch {
        /// What to run.
        spec: Box<SpecInput>,
    },
    /// The runs list: every active run and the finished ones asked for, newest first.
    Runs {
        /// Only runs in this state.
        #[serde(default)]
        state: Option<RunState>,
        /// Keep runs removed from the trays.
        #[serde(default)]
        include_removed: bool,
        /// Only the runs of this workflow.
        #[serde(default)]
        workflow: Option<String>,
        /// Finished runs in the answer at most, newest finished first (every active run
        /// is always in it); `None`: every finished run.
        #[serde(default)]
        limit: Option<u32>,
        /// The next page: only finished runs that finished before this run did (and no
        /// active run: the first page had them).
        #[serde(default)]
        before: Option<String>,
        /// Only runs whose title, id, provider, model or state contains this text
        /// (case-insensitive), searched in the whole ledger.
        #[serde(default)]
        search: Option<String>,
    },
    /// How many runs the ledger holds in each state (read from its running counts, at the
    /// same cost at any history size).
    Counts,
    /// Everything about one run ([`RunView`]).
    Show {
        /// The run to show.
        run_id: String,
    },
    /// A run's transcript, in one of several formats.
    Transcript {
        /// The run whose transcript is read.
        run_id: String,
        /// Which form (default `tail`).
        #[serde(default)]
        format: TranscriptFormat,
    },
    /// Send the run its next turn: at once when it is idle, else queued behind the
    /// running turn.
    FollowUp {
        /// The run to send it to.
        run_id: String,
        /// The turn's prompt: non-blank, at most `[limits] task_max_chars` characters.
        text: String,
    },
    /// Go on with a run a restart interrupted (or a hibernated one) in its provider
    /// session, with a new turn; or send a turn held for the model API again now.
    Resume {
        /// The interrupted (or hibernated, or held) run.
        run_id: String,
        /// The turn's prompt. Absent, drover sends its own "continue" turn only for a
        /// run whose turn a restart cut short; any other run is refused with
        /// `FOLLOW_UP_NEEDED` (drover never speaks for the user) and nothing is sent.
        #[serde(default)]
        text: Option<String>,
    },
    /// Start a hibernated run's CLI in its provider session now, with no turn to send,
    /// so that the follow-up being written starts as it would on a warm run (the
    /// dashboard sends this as its follow-up box opens on a hibernated run). The run
    /// stays idle and reserves nothing; it hibernates again after `hibernate_after_secs`
    /// with no follow-up. Nothing happens to a run that is not hibernated, nor while a
    /// queued run waits or its rail has no room: the follow-up wakes it then.
    Wake {
        /// The hibernated run.
        run_id: String,
    },
    /// Take an idle run over in its CLI's own interactive interface (`drover attach`):
    /// its supervised child is shut down (its provider session kept), the run is marked
    /// taken over (it keeps its rail slot; drover sends it nothing), and the answer is
    /// the command that opens the interface. Answered with [`InteractivePlan`].
    TakeOver {
        /// The idle run.
        run_id: String,
    },
    /// The user left the CLI's own interface: what happened there is read into the
    /// ledger (turns marked `interactive`, their usage, the worktree's change) and drover
    /// supervises the run again, idle and hibernated.
    HandBack {
        /// The run taken over.
        run_id: String,
    },
    /// Answer a run's pending permission request or question.
    Respond {
        /// The run that asked.
        run_id: String,
        /// The request answered (its id as shown in `pending`).
        request_id: String,
        /// The answer.
        answer: PermissionAnswer,
    },
    /// Stop an active run (completion reason `user`).
    Stop {
        /// The run to stop.
        run_id: String,
    },
    /// Ask an active run to wrap up, a soft stop: one turn asking it to write its result
    /// block now, then it ends (completion reason `stopped_soft`; docs/ARCHITECTURE.md
    /// §"Wrap up, then stop").
    WrapUp {
        /// The run to wrap up.
        run_id: String,
    },
    /// End an idle run as completed.
    Complete {
        /// The idle run to end.
        run_id: String,
    },
    /// Remove one finished run from the trays, or every finished run. A run whose
    /// worktree holds unmerged work is refused (`UNMERGED_WORK`; left out of `finished`)
    /// unless `force`, which keeps the work on its branch.
    Remove {
        /// The run to remove; `None` with `finished`.
        #[serde(default)]
        run_id: Option<String>,
        /// Remove every finished run.
        #[serde(default)]
        finished: bool,
        /// Remove even a run whose worktree holds unmerged work (the work stays on its
        /// branch).
        #[serde(default)]
        force: bool,
    },
    /// What a worktree run changed against its base commit: its files with their counts
    /// and (unless `stat`) git's unified diff, of `file` or of every file.
    Diff {
        /// The worktree run.
        run_id: String,
        /// Only this file's patch.
        #[serde(default)]
        file: Option<String>,
        /// Only the file list and counts, no patch.
        #[serde(default)]
        stat: bool,
    },
    /// Merge a worktree run's work into its base branch in the user's checkout
    /// (uncommitted work is committed first, with `message` or the run's result summary).
    Merge {
        /// The worktree run whose work is merged.
        run_id: String,
        /// Merge as one squashed commit.
        #[serde(default)]
        squash: bool,
        /// The message of the commit of uncommitted work (and of the squashed commit).
        #[serde(default)]
        message: Option<String>,
    },
    /// Bring a worktree run's branch up to date with its base branch, inside its worktree
    /// (uncommitted work is committed onto the branch first): the base merged in, or the
    /// branch rebased on it. A conflict changes nothing and is answered with the files
    /// and the follow-up that hands it to the run.
    Update {
        /// The worktree run.
        run_id: String,
        /// Rebase the branch on its base instead of merging the base in.
        #[serde(default)]
        rebase: bool,
    },
    /// Approve (or refuse) the repository scripts a run waits on before it starts
    /// (docs/ARCHITECTURE.md §"Workspaces"): approved, their SHA-256 is kept for the
    /// repository and the setup runs; refused, the run starts without them.
    ApproveScripts {
        /// The run waiting.
        run_id: String,
        /// Approve them (`false`: refuse them).
        approve: bool,
    },
    /// Remove a finished run's worktree, keeping its branch (uncommitted work is committed
    /// onto it).
    Keep {
        /// The finished worktree run.
        run_id: String,
    },
    /// Remove a finished run's worktree and delete its branch.
    Discard {
        /// The finished worktree run.
        run_id: String,
    },
    /// Push a worktree run's branch to the repository's remote and open a pull request
    /// with the forge's CLI when it is on PATH (or, when the run has one open, read it
    /// again: the push brought the new commits to it).
    Pr {
        /// The worktree run.
        run_id: String,
        /// Open it as a draft.
        #[serde(default)]
        draft: bool,
        /// Its title (default: the run's title).
        #[serde(default)]
        title: Option<String>,
        /// Push with `--force-with-lease` (never `--force`).
        #[serde(default)]
        force_with_lease: bool,
        /// Only read the run's pull request again (state and checks): no push.
        #[serde(default)]
        refresh: bool,
    },
    /// Stop every active, queued and held run (of `workflow` alone, when named).
    KillAll {
        /// Only the runs of this workflow.
        #[serde(default)]
        workflow: Option<String>,
    },
    /// The current budget session's money: spent, reserved, caps.
    Budget,
    /// New caps for the current budget session (the one not given stays).
    BudgetSet {
        /// The new warning, in US dollars.
        #[serde(default)]
        warning_usd: Option<f64>,
        /// The new hard cap, in US dollars.
        #[serde(default)]
        hard_cap_usd: Option<f64>,
    },
    /// Start a new budget session; new runs count against it.
    BudgetNew {
        /// The new session's name (letters, digits, `-`, `_`, `.`; at most 64).
        name: String,
    },
    /// The open route cards.
    Routes,
    /// Pick option `option` (1-based) of a held run's route card.
    Route {
        /// The held run.
        run_id: String,
        /// The option's number on the card (1-based).
        option: u32,
        /// Take the same route for later dispatches of this task class, without a card.
        #[serde(default)]
        remember: bool,
    },
    /// Decline a held run's route card: the run is stopped (`route_declined`).
    RouteDecline {
        /// The held run.
        run_id: String,
    },
    /// A new run one tier up (or on the named provider/model), carrying the old result.
    Escalate {
        /// The run to escalate.
        run_id: String,
        /// The provider to escalate to; `None`: the offer's.
        #[serde(default)]
        provider: Option<String>,
        /// The model to escalate to; `None`: the offer's.
        #[serde(default)]
        model: Option<String>,
    },
    /// A new run on the same model after a transient failure.
    Retry {
        /// The run to retry.
        run_id: String,
    },
    /// Block until runs meet a condition, or the timeout passes.
    Wait {
        /// The runs to wait for (with `workflow`, these are added to its runs; without,
        /// at least one).
        #[serde(default)]
        run_ids: Vec<String>,
        /// Also every run of this workflow as it stands when the wait starts, however
        /// many (the owner looks them up: their ids are not sent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workflow: Option<String>,
        /// The condition (default `terminal`).
        #[serde(default)]
        until: WaitUntil,
        /// Done when any run meets the condition (default: all of them).
        #[serde(default)]
        any: bool,
        /// Give up after this many seconds (at most an hour, the default).
        #[serde(default)]
        timeout_secs: Option<u64>,
    },
    /// The approval rules, oldest first.
    Rules,
    /// Search everything the ledger holds (docs/ARCHITECTURE.md §"Ledger"): each run's
    /// task, follow-ups and results, and its transcript's agent text and tool calls.
    /// Answered with the matching lines, newest runs first, and those runs.
    Search {
        /// FTS5's query syntax: words, `"a phrase"`, `prefix*`, `AND`, `OR`, `NOT`,
        /// `NEAR(…)`; a query it cannot read is refused with `SEARCH_QUERY_INVALID`.
        query: String,
        /// Lines at most (default 50, at most 500).
        #[serde(default)]
        limit: Option<u32>,
    },
    /// Spend over time (docs/ARCHITECTURE.md §"Spend over time"): every usage row, summed
    /// by day, week, model, provider, repository, workflow or tag, each basis apart.
    Spend {
        /// What the rows are grouped by.
        #[serde(default)]
        by: SpendBy,
        /// Only usage from the start of this local day: `YYYY-MM-DD`, or `Nd` days before
        /// today (`0d` is today); anything else is refused with `INVALID_REQUEST`.
        #[serde(default)]
        since: Option<String>,
    },
    /// Whether a dashboard on this connection has the user's eye (its terminal is
    /// focused): while one does, the owner sends no desktop notification of its own
    /// (docs/ARCHITECTURE.md §"Notifications"). Taken on an event stream's connection and
    /// forgotten with it; answered with [`Pong`].
    Focus {
        /// The dashboard's terminal is focused.
        focused: bool,
    },
    /// Keep a new approval rule. With `answer`, the pending request it names (the one on
    /// screen) is answered by it at once; every other pending request it matches is too.
    RuleAdd {
        /// The rule to make.
        rule: crate::rules::RuleSpec,
        /// The pending request to answer with it at once.
        #[serde(default)]
        answer: Option<RuleAnswer>,
    },
    /// Forget approval rule `id`.
    RuleRemove {
        /// The rule's id.
        id: u64,
    },
    /// Start receiving [`DispatchEvent`]s (of these runs, or of all when empty): after
    /// `after` (the last position this client saw) when the owner can still replay from
    /// there, else from now (the answer says which).
    Subscribe {
        /// Only these runs' events; empty: every run's.
        #[serde(default)]
        run_ids: Vec<String>,
        /// The last position this client saw, to resume from.
        #[serde(default)]
        after: Option<StreamPosition>,
    },
}

/// The answer to one [`Request`]: which variant follows from the request (see
/// [`Request::decode`]). Serialized without a tag, as the view it carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Response {
    /// `ping`.
    Pong(Pong),
    /// The run a request created or changed: `dispatch`, `follow_up`, `resume`, `wake`,
    /// `respond`, `stop`, `complete`, `route`, `route_decline`, `escalate`, `retry`.
    Run(Box<RunSummary>),
    /// `runs`, newest first.
    Runs(Vec<RunSummary>),
    /// `counts`.
    Counts(RunCounts),
    /// `show`.
    Show(Box<RunView>),
    /// `transcript`.
    Transcript(Box<TranscriptView>),
    /// `remove`.
    Removed(Removed),
    /// `kill_all`.
    Stopped(Stopped),
    /// `wait`.
    Wait(WaitOutcome),
    /// `subscribe`.
    Subscribed(Subscribed),
    /// `budget`, `budget_set`, `budget_new`.
    Budget(Box<BudgetView>),
    /// `routes`.
    Routes(Vec<OpenRoute>),
    /// `diff`.
    Diff(Box<DiffView>),
    /// `merge`, `keep`, `discard`.
    Workspace(Box<WorkspaceActionView>),
    /// `pr`.
    Pr(Box<PrActionView>),
    /// `rules`.
    Rules(Vec<crate::rules::Rule>),
    /// `search`.
    Search(Box<SearchView>),
    /// `rule_add`, `rule_remove`: the rule made or forgotten.
    Rule(Box<crate::rules::Rule>),
    /// `take_over`: the command that opens the run's CLI in its own interface.
    TakeOver(Box<InteractivePlan>),
    /// `spend`.
    Spend(Box<SpendView>),
}

/// The request a new rule answers at once (`rule_add`'s `answer`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleAnswer {
    /// The run that asked.
    pub run_id: String,
    /// The request to answer.
    pub request_id: String,
}

/// The answer to `counts`: how many runs the ledger holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    /// Runs in the trays (not removed), by state; a state with none is left out.
    pub by_state: std::collections::BTreeMap<String, u64>,
    /// Runs removed from the trays (still in the ledger: their history and money count).
    pub removed: u64,
}

/// The answer to `ping`: who owns the data directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {
    /// Always `true`.
    pub pong: bool,
    /// The owner's process id.
    pub pid: u32,
    /// The owner's version, with the commit it was built from.
    #[serde(default)]
    pub version: String,
    /// When the owner's dispatcher started (Unix ms).
    #[serde(default)]
    pub started_at: UnixMillis,
    /// A config reload the owner refused (it keeps the config in force), until a good one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_refused: Option<String>,
    /// Why the ledger cannot write now (a full or read-only disk): the owner refuses new
    /// work until it can, and takes it again by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_unavailable: Option<String>,
}

/// The answer to `remove`: the runs that left the trays, and those left in them because
/// their worktree holds unmerged work (`remove --finished` without `force`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// The runs removed from the trays.
    pub removed: Vec<String>,
    /// Finished runs left in the trays because their worktree holds unmerged work.
    #[serde(default)]
    pub unmerged: Vec<String>,
    /// Removed runs whose branch keeps their unmerged work (`--force`): drover no longer
    /// lists them, git does.
    #[serde(default)]
    pub kept: Vec<KeptBranch>,
}

/// A removed run's branch that keeps its work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptBranch {
    /// The removed run.
    pub run_id: String,
    /// Its `drover/…` branch.
    pub branch: String,
}

/// The answer to `kill_all`: the runs asked to stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    /// The ids of the runs asked to stop.
    pub stopped: Vec<String>,
}

/// The answer to `subscribe` (the events follow on the same connection).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Subscribed {
    /// Always `true`.
    pub subscribed: bool,
    /// Where the owner's event stream stands as the subscription begins (absent from an
    /// owner that does not number its events).
    #[serde(default)]
    pub position: Option<StreamPosition>,
    /// The events after the client's `after` position follow, none missed: no snapshot
    /// is needed. False when there was no position, it was another owner's, or it is too
    /// old to replay.
    #[serde(default)]
    pub resumed: bool,
}

/// A place in one owner's event stream: its epoch (a new one each time an owner starts)
/// and an event's number in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamPosition {
    /// The owner's epoch: new each time an owner starts.
    pub epoch: String,
    /// The event's number in that epoch's stream.
    pub pos: u64,
}

/// One open route card in `drover routes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenRoute {
    /// The held run.
    pub run_id: String,
    /// Its title.
    pub title: String,
    /// Its route card.
    pub card: RouteCardView,
}

/// The answer to `transcript`: one field is filled, according to `format` — `lines` for
/// `tail` (one line per provider event) and `text` (each turn's text under a
/// `## turn N (origin)` line), `events` for `events`, `result` for `result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptView {
    /// The run whose transcript this is.
    pub run_id: String,
    /// The format asked for.
    pub format: TranscriptFormat,
    /// For `tail` and `text`: the lines.
    #[serde(default)]
    pub lines: Vec<String>,
    /// For `events`: every event the ledger holds for the run, oldest first.
    #[serde(default)]
    pub events: Vec<crate::ledger::EventRecord>,
    /// For `result`: the run's last result.
    #[serde(default)]
    pub result: Option<ResultView>,
    /// When retention pruned the run's events (its transcript lines and provider events
    /// are gone; turns, result, usage and decisions stay); absent when it never did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_pruned_at: Option<crate::UnixMillis>,
    /// For a `tail` read from the owner's memory of an active run: the seq of the
    /// ledger event holding its newest line. A live [`DispatchEvent::Transcript`] at most
    /// this is in `lines` (or older than them), however late it arrives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
}

impl Request {
    /// The runs list with every active run and no finished one (not removed, any
    /// workflow).
    pub fn active_runs() -> Request {
        Request::Runs {
            state: None,
            include_removed: false,
            workflow: None,
            limit: Some(0),
            before: None,
            search: None,
        }
    }

    /// Reads the JSON answer to this request (from the control socket) as its typed
    /// [`Response`].
    pub fn decode(&self, value: Value) -> Result<Response, serde_json::Error> {
        fn boxed<T: serde::de::DeserializeOwned>(v: Value) -> Result<Box<T>, serde_json::Error> {
            serde_json::from_value(v).map(Box::new)
        }
        Ok(match self {
            Request::Ping | Request::Focus { .. } => Response::Pong(serde_json::from_value(value)?),
            Request::Dispatch { .. }
            | Request::FollowUp { .. }
            | Request::Resume { .. }
            | Request::Wake { .. }
            | Request::HandBack { .. }
            | Request::Respond { .. }
            | Request::Stop { .. }
            | Request::WrapUp { .. }
            | Request::Complete { .. }
            | Request::Route { .. }
            | Request::RouteDecline { .. }
            | Request::Escalate { .. }
            | Request::Retry { .. }
            | Request::ApproveScripts { .. } => Response::Run(boxed(value)?),
            Request::Runs { .. } => Response::Runs(serde_json::from_value(value)?),
            Request::Counts => Response::Counts(serde_json::from_value(value)?),
            Request::Show { .. } => Response::Show(boxed(value)?),
            Request::Transcript { .. } => Response::Transcript(boxed(value)?),
            Request::Remove { .. } => Response::Removed(serde_json::from_value(value)?),
            Request::KillAll { .. } => Response::Stopped(serde_json::from_value(value)?),
            Request::Wait { .. } => Response::Wait(serde_json::from_value(value)?),
            Request::Subscribe { .. } => Response::Subscribed(serde_json::from_value(value)?),
            Request::Budget | Request::BudgetSet { .. } | Request::BudgetNew { .. } => {
                Response::Budget(boxed(value)?)
            }
            Request::Routes => Response::Routes(serde_json::from_value(value)?),
            Request::Diff { .. } => Response::Diff(boxed(value)?),
            Request::Merge { .. }
            | Request::Update { .. }
            | Request::Keep { .. }
            | Request::Discard { .. } => Response::Workspace(boxed(value)?),
            Request::Pr { .. } => Response::Pr(boxed(value)?),
            Request::Rules => Response::Rules(serde_json::from_value(value)?),
            Request::Search { .. } => Response::Search(boxed(value)?),
            Request::Spend { .. } => Response::Spend(boxed(value)?),
            Request::TakeOver { .. } => Response::TakeOver(boxed(value)?),
            Request::RuleAdd { .. } | Request::RuleRemove { .. } => Response::Rule(boxed(value)?),
        })
    }
}

/// Takes the one view a [`Response`] variant carries (`$unbox` turns it into the view);
/// any other variant is an internal error: the dispatcher answered a request with the
/// wrong shape.
macro_rules! response_into {
    ($($name:ident => $variant:ident($v:ident) -> $ty:ty = $unbox:expr),* $(,)?) => {
        impl Response {
            $(
                /// The view this variant carries; `INTERNAL` for any other variant.
                pub fn $name(self) -> Result<$ty, crate::DroverError> {
                    match self {
                        Response::$variant($v) => Ok($unbox),
                        other => Err(wrong_shape(stringify!($variant), &other)),
                    }
                }
            )*
        }
    };
}

response_into! {
    into_run => Run(v) -> RunSummary = *v,
    into_runs => Runs(v) -> Vec<RunSummary> = v,
    into_counts => Counts(v) -> RunCounts = v,
    into_show => Show(v) -> RunView = *v,
    into_transcript => Transcript(v) -> TranscriptView = *v,
    into_removed => Removed(v) -> Removed = v,
    into_stopped => Stopped(v) -> Stopped = v,
    into_wait => Wait(v) -> WaitOutcome = v,
    into_budget => Budget(v) -> BudgetView = *v,
    into_routes => Routes(v) -> Vec<OpenRoute> = v,
    into_rules => Rules(v) -> Vec<crate::rules::Rule> = v,
    into_search => Search(v) -> SearchView = *v,
    into_spend => Spend(v) -> SpendView = *v,
    into_rule => Rule(v) -> crate::rules::Rule = *v,
    into_diff => Diff(v) -> DiffView = *v,
    into_workspace => Workspace(v) -> WorkspaceActionView = *v,
    into_pr => Pr(v) -> PrActionView = *v,
    into_take_over => TakeOver(v) -> InteractivePlan = *v,
}

fn wrong_shape(expected: &str, got: &Response) -> crate::DroverError {
    crate::DroverError::new(
        crate::ErrorCode::Internal,
        format!("the dispatcher answered with {got:?} where {expected} was expected"),
    )
}

impl Response {
    /// The JSON form, as the control socket and `--json` output carry it.
    pub fn to_json(&self) -> Value {
        // Our own view types always serialize (no maps with non-string keys).
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

pub use crate::ledger::{SearchHit, SearchSource, SpendBy, SpendRow, SpendView};

/// What `search` answers: the matching lines, newest runs first (within a run, latest
/// first), and each run they name, once, in the order of its first line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchView {
    /// The lines that matched, at most the limit asked.
    pub hits: Vec<SearchHit>,
    /// The runs of those lines, as `runs` shows them.
    pub runs: Vec<RunSummary>,
}

/// What `transcript` returns.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptFormat {
    /// The run's last parsed result block.
    Result,
    /// The assistant's text of every turn.
    Text,
    /// The transcript ring: one line per provider event.
    #[default]
    Tail,
    /// Every event in the ledger, as JSON.
    Events,
}

/// What a `wait` waits for.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WaitUntil {
    /// The turn ended and the run waits for a follow-up (or it has ended). A run waiting
    /// on a permission, a question or a route card is not idle.
    Idle,
    /// The run has ended.
    #[default]
    Terminal,
    /// Anything happened to the run.
    Event,
    /// The run needs you: a pending permission or question, a route card, a result that
    /// asks for input (or it has ended, and never will).
    NeedsYou,
    /// The run needs you, is idle, or has ended: whichever comes first (`dispatch --wait`).
    Settled,
}

impl WaitUntil {
    /// Whether `run` meets the condition. For [`WaitUntil::Event`] only the run's end
    /// does here; the dispatcher also counts each new event.
    pub fn met_by(self, run: &RunSummary) -> bool {
        self.met_when(run.head.state, run.pending, || run.needs_you().is_some())
    }

    /// [`WaitUntil::met_by`] from a run's state and its pending requests, asking whether
    /// it needs the user only when that decides (the dispatcher checks its waits on
    /// every turn of its loop, and a run's row costs more to make than to ask).
    pub fn met_when(
        self,
        state: RunState,
        pending: usize,
        needs_you: impl FnOnce() -> bool,
    ) -> bool {
        let ended = state.is_terminal();
        let idle = state == RunState::Idle && pending == 0;
        match self {
            WaitUntil::Terminal | WaitUntil::Event => ended,
            WaitUntil::Idle => ended || idle,
            WaitUntil::NeedsYou => ended || needs_you(),
            WaitUntil::Settled => ended || idle || needs_you(),
        }
    }

    /// The condition in words, for sentences (`the runs were not idle within 30 s`).
    pub fn words(self) -> &'static str {
        match self {
            WaitUntil::Idle => "idle",
            WaitUntil::Terminal => "finished",
            WaitUntil::Event => "changed",
            WaitUntil::NeedsYou => "in need of you",
            WaitUntil::Settled => "idle, finished or in need of you",
        }
    }
}

/// Why a run needs the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Need {
    /// A pending permission request or question.
    Permission,
    /// Its last result asks for input.
    Input,
    /// It waits on a route card.
    Route,
    /// Its last turn ended blocked (an idle run without an offer).
    Blocked,
    /// An escalation or retry is offered and not taken (a finished or an idle run).
    Escalation,
    /// A restart of drover cut its turn short (or found it with no session to go on
    /// in): the user resumes it, or stops it (docs/ARCHITECTURE.md §"A restart").
    Interrupted,
    /// Its new worktree's repository scripts (`.drover/setup`, `.drover/teardown`) were
    /// never approved, or changed since: the run waits to start until the user approves
    /// or refuses them (docs/ARCHITECTURE.md §"Workspaces").
    Approval,
    /// Bringing its branch up to date (`update`, or a merge) conflicts with its base: a
    /// follow-up asking it to merge the base and resolve the conflicts is offered (an
    /// idle run).
    Conflict,
}

/// Why a run is in Needs you, and since when (`show --json` → `needs_you`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeedsYou {
    /// Why the run waits for the user.
    pub reason: Need,
    /// When it started waiting: its oldest pending request, its route card, the end of
    /// its last turn, or its end.
    pub since: UnixMillis,
}

/// The Needs-you rule, on the facts both a row and a full view carry.
fn need_of(
    state: RunState,
    pending: usize,
    needs_input: bool,
    result_status: Option<&str>,
    offered: bool,
    approval: bool,
    conflict: bool,
) -> Option<Need> {
    if approval && state.is_active() {
        Some(Need::Approval)
    } else if state.is_terminal() {
        offered.then_some(Need::Escalation)
    } else if state == RunState::Interrupted {
        Some(Need::Interrupted)
    } else if state == RunState::AwaitingPermission || pending > 0 {
        Some(Need::Permission)
    } else if state == RunState::AwaitingRoute {
        Some(Need::Route)
    } else if state != RunState::Idle {
        // In a turn (or about to be): nothing to do until it ends.
        None
    } else if needs_input {
        Some(Need::Input)
    } else if conflict {
        Some(Need::Conflict)
    } else if offered {
        Some(Need::Escalation)
    } else if result_status == Some("blocked") {
        Some(Need::Blocked)
    } else {
        None
    }
}

impl Need {
    /// The reason in words, for the trays and sentences (`awaiting permission`, …).
    pub fn words(self) -> &'static str {
        match self {
            Need::Permission => "awaiting permission",
            Need::Input => "needs input",
            Need::Route => "held on a route card",
            Need::Blocked => "blocked",
            Need::Escalation => "escalation offered",
            Need::Interrupted => "interrupted by a restart",
            Need::Approval => "setup script to approve",
            Need::Conflict => "conflicts with its base: follow-up offered",
        }
    }
}

/// Finished runs on one page of a runs list (`drover runs`, the MCP `runs` tool) unless
/// the client asks for another size.
pub const DEFAULT_RUNS_PAGE: u32 = 50;

/// Which runs a `runs` request asks for (the fields of [`Request::Runs`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunsFilter {
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Keep runs removed from the trays.
    pub include_removed: bool,
    /// Only the runs of this workflow.
    pub workflow: Option<String>,
    /// Finished runs in the page at most; `None`: all.
    pub limit: Option<u32>,
    /// Only finished runs that finished before this run did (the next page).
    pub before: Option<String>,
    /// Only runs whose title, id, provider, model or state contains this text.
    pub search: Option<String>,
}

impl RunsFilter {
    /// The filter of a [`Request::Runs`] (`None` for any other request).
    pub fn of(request: &Request) -> Option<RunsFilter> {
        match request {
            Request::Runs {
                state,
                include_removed,
                workflow,
                limit,
                before,
                search,
            } => Some(RunsFilter {
                state: *state,
                include_removed: *include_removed,
                workflow: workflow.clone(),
                limit: *limit,
                before: before.clone(),
                search: search.clone(),
            }),
            _ => None,
        }
    }

    /// The [`Request::Runs`] of this filter.
    pub fn request(&self) -> Request {
        Request::Runs {
            state: self.state,
            include_removed: self.include_removed,
            workflow: self.workflow.clone(),
            limit: self.limit,
            before: self.before.clone(),
            search: self.search.clone(),
        }
    }

    /// The `before` of the page after `runs` (this filter's answer): its finished run
    /// that finished first, when the page is full (`limit` finished runs); `None` when it
    /// is not (it was the last page) or the filter has no limit.
    pub fn next_before<'a>(&self, runs: &'a [RunSummary]) -> Option<&'a str> {
        let limit = self.limit.filter(|l| *l > 0)? as usize;
        let finished: Vec<&RunSummary> =
            runs.iter().filter(|r| r.head.state.is_terminal()).collect();
        if finished.len() < limit {
            return None;
        }
        finished
            .into_iter()
            .min_by(|a, b| {
                (a.head.finished_at, &a.head.run_id).cmp(&(b.head.finished_at, &b.head.run_id))
            })
            .map(|r| r.head.run_id.as_str())
    }

    /// The ledger's page for this filter.
    pub fn page(&self) -> crate::ledger::RunsPage<'_> {
        crate::ledger::RunsPage {
            include_removed: self.include_removed,
            state: self.state,
            workflow: self.workflow.as_deref(),
            search: self.search.as_deref(),
            limit: self.limit,
            before: self.before.as_deref(),
        }
    }
}

impl RunSummary {
    /// A summary for tests: run `id` of the sim in `state`, created at 1,000, nothing else.
    #[doc(hidden)]
    pub fn example(id: &str, state: RunState) -> RunSummary {
        RunSummary {
            head: RunHead {
                run_id: id.to_string(),
                state,
                completion_reason: None,
                provider: "sim".into(),
                model: None,
                title: format!("run {id}"),
                live_state: None,
                cost_usd: 0.0,
                budget_usd: 5.0,
                stalled: false,
                created_at: 1_000,
                finished_at: None,
                owner_gone: false,
                rev: 0,
                host: None,
            },
            pending: 0,
            needs_input: false,
            escalation_offered: false,
            script_approval: false,
            conflict_offered: false,
            workspace: None,
            result_status: None,
            parent_run: None,
            depth: 0,
            workflow_id: None,
            sandbox: false,
        }
    }
}

impl RunSummary {
    /// Whether the run is in `workflow` (every run is, when none is named).
    pub fn in_workflow(&self, workflow: Option<&str>) -> bool {
        workflow.is_none_or(|w| self.workflow_id.as_deref() == Some(w))
    }

    /// What the run waits for from the user, if anything: the Needs-you tray's rule.
    pub fn needs_you(&self) -> Option<Need> {
        need_of(
            self.head.state,
            self.pending,
            self.needs_input,
            self.result_status.as_deref(),
            self.escalation_offered,
            self.script_approval,
            self.conflict_offered,
        )
    }
}

/// The answer to `wait`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitOutcome {
    /// The timeout passed before the condition was met.
    pub timed_out: bool,
    /// Each run waited for, as it is when the wait ends.
    pub runs: Vec<RunSummary>,
}

/// How many unpriced runs a [`BudgetView`] names (every dashboard reads it on attach).
pub const UNPRICED_SHOWN: usize = 20;

/// The money of one budget session (`drover budget`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetView {
    /// The budget session's name.
    pub session: String,
    /// Booked spend of every run of the session (removed runs included).
    pub spent_usd: f64,
    /// What runs in a turn hold back: each one's cap minus its spend (money is reserved for
    /// a turn, docs/ARCHITECTURE.md §"Money").
    pub reserved_usd: f64,
    /// What is free for a turn to start now: hard cap minus spent and reserved (not below
    /// zero).
    pub available_usd: f64,
    /// The session's warning, in US dollars.
    pub warning_usd: f64,
    /// The session's hard cap, in US dollars.
    pub hard_cap_usd: f64,
    /// How many runs have each weakest cost basis.
    pub runs_by_basis: std::collections::BTreeMap<String, usize>,
    /// Runs with usage that could not be priced: the newest [`UNPRICED_SHOWN`], newest
    /// first (`runs_by_basis` counts them all).
    pub unpriced_runs: Vec<String>,
    /// The warning was given.
    pub warned: bool,
    /// The hard cap was reached: dispatches are refused until it is raised.
    pub closed: bool,
    /// The config file changed and the new one was refused (why, in one line): the owner
    /// keeps the config it had. Cleared by the next good read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_refused: Option<String>,
    /// Why the ledger cannot write now; `None` while it can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_unavailable: Option<String>,
}

impl RunBudget {
    /// A run's money from its spec (the cap, and what was asked when it was lowered) and
    /// its booked spend.
    pub fn of(spec: &crate::spec::Spec, spent: f64) -> RunBudget {
        RunBudget {
            cap: spec.budget_usd,
            spent,
            remaining: (spec.budget_usd - spent).max(0.0),
            clamped_from: spec
                .clamps
                .iter()
                .rev()
                .find(|c| c.field == "budget_usd")
                .and_then(|c| c.requested.trim_start_matches('$').parse().ok()),
        }
    }
}

/// One run's money (`show --json` → `budget`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunBudget {
    /// The run's dollar cap (whole cents).
    pub cap: f64,
    /// What the run's usage rows have booked, in US dollars.
    pub spent: f64,
    /// What its cap has left, in US dollars (not below 0).
    pub remaining: f64,
    /// What was asked for, when the cap was lowered to fit the session.
    pub clamped_from: Option<f64>,
}

/// What every view of a run starts with: who it is, where it stands, what it has spent.
/// Flattened into [`RunSummary`] and [`RunView`], so their JSON carries these fields at
/// the top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunHead {
    /// The run's id.
    pub run_id: String,
    /// Its run state.
    pub state: RunState,
    /// Why it finished; `None` while it is not finished.
    pub completion_reason: Option<String>,
    /// The provider's configured name.
    pub provider: String,
    /// The catalog id of the model; `None` for the provider's default (or not routed
    /// yet).
    pub model: Option<String>,
    /// Its title: one line, at most 80 characters.
    pub title: String,
    /// What it is doing right now, with a deadline; `None` before its first assignment.
    pub live_state: Option<LiveState>,
    /// What it has booked so far, in US dollars.
    pub cost_usd: f64,
    /// Its cap, in US dollars.
    pub budget_usd: f64,
    /// No provider event for `[limits] stalled_after_secs`: flagged, not killed.
    pub stalled: bool,
    /// When it was dispatched, in ms since the Unix epoch.
    pub created_at: UnixMillis,
    /// When it finished, in ms since the Unix epoch; `None` while it is not finished.
    pub finished_at: Option<UnixMillis>,
    /// Read from the ledger with no drover owning it (the owner lock is free), the run is
    /// still active there: its owner ended without ending it (a crash). The next drover
    /// to start puts it back where it was (docs/ARCHITECTURE.md §"A restart").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owner_gone: bool,
    /// How many events the ledger holds for the run (its newest event's seq): of two
    /// views of one run, the one with the lower `rev` is the older, wherever each came
    /// from (an event, a reply, a read of the ledger), and must not replace the newer.
    #[serde(default)]
    pub rev: u64,
    /// The host its CLI runs on (docs/ARCHITECTURE.md §"Hosts"), shown as `@name`; `None`
    /// on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// One row in a list of runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Who the run is, where it stands and what it has spent.
    #[serde(flatten)]
    pub head: RunHead,
    /// How many permission requests and questions wait for an answer.
    pub pending: usize,
    /// Its last result asks for input (`needs_input`) and the run is still active.
    pub needs_input: bool,
    /// An escalation or retry is offered (the run shows in Needs you).
    #[serde(default)]
    pub escalation_offered: bool,
    /// Its repository's scripts wait for the user's approval before it starts (the run
    /// shows in Needs you; the view's `script_approval` has them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub script_approval: bool,
    /// Its branch conflicts with its base and the follow-up that hands the conflict to it
    /// is offered (the run shows in Needs you; the view's `conflict_offer` has it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub conflict_offered: bool,
    /// Where the run works and what it changed there (boxed: rows travel in every
    /// `run_changed` event).
    #[serde(default)]
    pub workspace: Option<Box<WorkspaceView>>,
    /// The status word of the run's last result (`done`, `blocked`, `needs_input`, …).
    #[serde(default)]
    pub result_status: Option<String>,
    /// The run this one was dispatched from (a sub-run), escalated or retried from.
    #[serde(default)]
    pub parent_run: Option<String>,
    /// How many parents up the run's lineage goes (0 for a top-level run).
    #[serde(default)]
    pub depth: u32,
    /// The workflow it belongs to, if any.
    #[serde(default)]
    pub workflow_id: Option<String>,
    /// Its CLI runs in a sandbox (docs/ARCHITECTURE.md §"The sandbox").
    #[serde(default)]
    pub sandbox: bool,
}

/// Everything about one run (`drover show --json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    /// Who the run is, where it stands and what it has spent.
    #[serde(flatten)]
    pub head: RunHead,
    /// The task, redacted.
    pub task: String,
    /// The directory it was dispatched in (absolute).
    pub cwd: String,
    /// Its permission policy (`ask`, `restricted`, `auto`).
    pub policy: String,
    /// Its CLI runs in a sandbox (docs/ARCHITECTURE.md §"The sandbox").
    #[serde(default)]
    pub sandbox: bool,
    /// The weakest basis of the run's spend: `reported`, `estimated`, `free`, `unpriced`.
    pub cost_basis: String,
    /// Its tokens over every turn.
    pub tokens: Tokens,
    /// Its turns, in order.
    pub turns: Vec<TurnView>,
    /// Requests waiting for an answer, oldest first.
    pub pending: Vec<PendingView>,
    /// Its latest result.
    pub last_result: Option<ResultView>,
    /// Its notes, oldest first.
    pub notes: Vec<NoteView>,
    /// The provider's session id, once the provider reported one.
    pub provider_session_id: Option<String>,
    /// How many user turns it may take.
    pub max_turns: u32,
    /// Follow-ups queued behind the running turn.
    pub queued_follow_ups: usize,
    /// The provider child's pid (its process group id) while it runs.
    pub pid: Option<u32>,
    /// Its money.
    pub budget: RunBudget,
    /// Every usage row booked on the run, oldest first.
    pub usage: Vec<crate::ledger::UsageRecord>,
    /// The route card of a run dispatched without a model (open or decided).
    pub route: Option<RouteCardView>,
    /// What to do about a run that failed or ended blocked: escalate or retry.
    pub escalation: Option<crate::route::Escalation>,
    /// How many escalations or retries led to this run (0 for a fresh dispatch).
    pub depth: u32,
    /// The run it was escalated or retried from, or dispatched from (a sub-run).
    pub parent_run: Option<String>,
    /// Where the run works (its worktree, branch and base) and what it changed there.
    #[serde(default)]
    pub workspace: Option<WorkspaceView>,
    /// Who decided the run's requests, oldest first (the last [`DECISIONS_SHOWN`]).
    #[serde(default)]
    pub decisions: Vec<DecisionView>,
    /// Why the run is in Needs you and since when; `null` when it waits for nothing.
    #[serde(default)]
    pub needs_you: Option<NeedsYou>,
    /// What its commands show (docs/ARCHITECTURE.md §"Evidence"): how many ran, the
    /// tests among them and how they ended, and the line that says so; `null` until a
    /// turn has ended.
    #[serde(default)]
    pub evidence: Option<crate::evidence::Evidence>,
    /// The repository scripts the run waits for the user to approve before it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_approval: Option<ScriptApprovalView>,
    /// The conflict of its branch with its base, and the follow-up offered to hand it to
    /// the run (`enter` on it in Needs you sends it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_offer: Option<crate::workspace::UpdateView>,
}

/// Repository scripts waiting for the user's approval (docs/ARCHITECTURE.md
/// §"Workspaces"): `drover approve-scripts RUN`, or enter on the run in Needs you.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptApprovalView {
    /// The repository (the top of the user's checkout).
    pub repository: String,
    /// Each script waiting: never approved, or changed since.
    pub scripts: Vec<ScriptAskView>,
    /// Since when the run waits (ms since the epoch).
    pub since: UnixMillis,
}

/// One repository script to approve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptAskView {
    /// `setup` or `teardown`.
    pub kind: crate::workspace::scripts::ScriptKind,
    /// Where it is in the repository (`.drover/setup`).
    pub path: String,
    /// The SHA-256 of its bytes (what an approval records).
    pub sha256: String,
    /// Its text, redacted.
    pub text: String,
    /// Its diff against the version approved before (redacted); `None` the first time.
    pub diff: Option<String>,
}

impl RunView {
    /// Why the run needs the user now, and since when (the rule of
    /// [`RunSummary::needs_you`]); set as `needs_you` by whoever builds the view.
    pub fn need_now(&self) -> Option<NeedsYou> {
        let status = self.last_result.as_ref().and_then(|r| r.status.as_deref());
        let needs_input = self.head.state.is_active() && status == Some("needs_input");
        let reason = need_of(
            self.head.state,
            self.pending.len(),
            needs_input,
            status,
            self.escalation.is_some(),
            self.script_approval.is_some(),
            self.conflict_offer.is_some(),
        )?;
        let last_turn_end = self.turns.iter().rev().find_map(|t| t.ended_at);
        let live_since = self.head.live_state.as_ref().map(|l| l.since);
        let since = match reason {
            Need::Permission => self.pending.iter().map(|p| p.created_at).min(),
            Need::Route => self.route.as_ref().map(|r| r.created_at),
            Need::Input | Need::Blocked => last_turn_end,
            Need::Escalation => self.head.finished_at.or(last_turn_end),
            Need::Interrupted => live_since,
            Need::Approval => self.script_approval.as_ref().map(|a| a.since),
            Need::Conflict => last_turn_end,
        }
        .or(live_since)
        .unwrap_or(self.head.created_at);
        Some(NeedsYou { reason, since })
    }

    /// The view with its `needs_you` filled in.
    pub fn with_need(mut self) -> RunView {
        self.needs_you = self.need_now();
        self
    }
}

/// How many of a run's decisions `show` carries.
pub const DECISIONS_SHOWN: usize = 50;

/// A held run's route card (`show --json` → `route`, `drover routes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteCardView {
    /// The card's id.
    pub route_id: String,
    /// The task class the options were chosen for.
    pub class: String,
    /// `open`, `decided`, `declined`, `expired`, `closed`.
    pub status: String,
    /// The options offered, most suitable first.
    pub options: Vec<crate::route::RouteOption>,
    /// Providers not offered, and why.
    pub left_out: Vec<crate::route::LeftOut>,
    /// When the card opened, in ms since the Unix epoch.
    pub created_at: UnixMillis,
    /// When it closes unanswered (as declined, `route_expired`), in ms since the Unix
    /// epoch.
    pub expires_at: UnixMillis,
    /// Who decided it (`user`, `timeout`, …); `None` while it is open.
    pub decided_by: Option<String>,
    /// When it was decided, in ms since the Unix epoch.
    pub decided_at: Option<UnixMillis>,
    /// Why the last pick was refused (the card stays open).
    pub refused: Option<String>,
}

/// One turn of a run (`show --json` → `turns`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnView {
    /// 1, 2, 3, … per run.
    pub number: u32,
    /// Where the turn came from: `dispatch`, `follow_up`, `result_retry`, `resume`, `resend`.
    pub origin: String,
    /// When it started, in ms since the Unix epoch.
    pub started_at: UnixMillis,
    /// When it ended, in ms since the Unix epoch; `None` while it runs.
    pub ended_at: Option<UnixMillis>,
    /// The prompt on one line, at most 200 characters.
    pub prompt_preview: String,
    /// What the agent answered; `None` when it said nothing.
    pub text: Option<String>,
    /// The turn's tokens.
    pub tokens: Tokens,
    /// What the turn cost in US dollars, when known.
    pub cost_usd: Option<f64>,
    /// The turn's result, as JSON: its parsed `## Result` block or, with an output
    /// schema, its JSON answer.
    pub result: Option<Value>,
    /// The commands the turn executed, with their exit codes (docs/ARCHITECTURE.md
    /// §"Evidence").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<crate::evidence::CommandRun>,
}

/// A request waiting for the user's answer (`show --json` → `pending`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingView {
    /// The request's id, as `respond` names it.
    pub request_id: String,
    /// A permission request or a question.
    pub kind: RequestKind,
    /// The tool that asks (`Bash`, `Edit`, `AskUserQuestion`, …).
    pub tool: String,
    /// What is asked, typed by the provider's adapter (under the key `input`, as
    /// `show --json` has always named it).
    #[serde(rename = "input")]
    pub ask: Ask,
    /// What "allow always" would allow, when the provider offers it.
    pub always: Option<AlwaysOption>,
    /// When it was asked, in ms since the Unix epoch.
    pub created_at: UnixMillis,
    /// When it is denied unanswered, in ms since the Unix epoch.
    pub expires_at: UnixMillis,
    /// The guard's reason, when it flagged the request as able to destroy work or leak
    /// secrets: no rule or "always" answers it, and a front end shows the reason in red
    /// and asks for a confirming key before allowing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
}

/// One decision on a run's request: who decided (`user`, `rule:<id>`, `always`,
/// `policy`, `timeout`, …) and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionView {
    /// When it was decided, in ms since the Unix epoch.
    pub at: UnixMillis,
    /// The request decided.
    pub request_id: Option<String>,
    /// Who decided: `user`, `rule:<id>`, `always`, `policy`, `timeout`, …
    pub who: String,
    /// What was decided (`allow`, `deny: …`, …).
    pub decision: String,
}

/// A run's result: its last `## Result` block, or its JSON answer (`show --json` →
/// `last_result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultView {
    /// The status word (`done`, `blocked`, `needs_input`, or the word as written when it
    /// is none of them).
    pub status: Option<String>,
    /// The summary line.
    pub summary: Option<String>,
    /// What the worker needs answered (with `needs_input`).
    pub question: Option<String>,
    /// The files it touched.
    pub files: Vec<String>,
    /// What it changed.
    pub changes: Vec<String>,
    /// What it suggests doing next.
    pub follow_ups: Vec<String>,
    /// For runs with an output schema: the JSON answer.
    pub json: Option<Value>,
}

impl From<crate::result_contract::ResultBlock> for ResultView {
    /// A parsed `## Result` block as the run's result (an unknown status word is kept).
    fn from(block: crate::result_contract::ResultBlock) -> ResultView {
        ResultView {
            status: block
                .status
                .map(|s| s.as_str().to_string())
                .or(block.raw_status),
            summary: block.summary,
            question: block.question,
            files: block.files,
            changes: block.changes,
            follow_ups: block.follow_ups,
            json: None,
        }
    }
}

/// A note on a run: something the user should know (a clamp, a lowered budget, a retry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoteView {
    /// When it was made, in ms since the Unix epoch.
    pub at: UnixMillis,
    /// One line.
    pub text: String,
}

/// What subscribers hear, published only after the ledger acknowledged it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum DispatchEvent {
    /// A run's row changed (state, money, live state, result, …).
    RunChanged {
        /// The run's row as it is now.
        run: RunSummary,
    },
    /// A run's live state changed.
    LiveState {
        /// The run it is about.
        run_id: String,
        /// Its new live state.
        live_state: LiveState,
    },
    /// A run's transcript has a new line.
    Transcript {
        /// The run it is about.
        run_id: String,
        /// The line: one provider event, summarised.
        line: String,
        /// The seq of the run's ledger event that holds the line (0: not told). A
        /// transcript tail read from the owner's memory names the newest it holds
        /// ([`TranscriptView::last_seq`]): a line at most that is already in it.
        #[serde(default, skip_serializing_if = "is_zero")]
        seq: u64,
    },
    /// A run asks for permission or a question's answer.
    PermissionRequested {
        /// The run it is about.
        run_id: String,
        /// The request, as `show` lists it.
        pending: PendingView,
    },
    /// A pending request was answered, withdrawn or timed out.
    PermissionResolved {
        /// The run it is about.
        run_id: String,
        /// The request's id.
        request_id: String,
        /// How, in words (`allow`, `deny: …`, `withdrawn by the provider`, …).
        how: String,
    },
    /// A note was added to a run.
    Note {
        /// The run it is about.
        run_id: String,
        /// The note, as `show` lists it.
        note: NoteView,
    },
    /// A run was removed from the trays.
    RunRemoved {
        /// The run it is about.
        run_id: String,
    },
    /// The budget session's money changed in a way the user must hear about: the
    /// warning, the hard cap, a reopened session. Not about one run (`run_id()` is "").
    Budget {
        /// The budget session.
        session: String,
        /// What happened, in one line.
        note: String,
    },
    /// The owner's own health changed: a config reload was refused (the message), or a
    /// good one cleared it (`None`); the ledger stopped being able to write, or can again.
    /// Each carries the whole health. Not about one run (`run_id()` is "").
    Health {
        /// Why the reload was refused; `None` once a good config is read.
        config_refused: Option<String>,
        /// Why the ledger cannot write; `None` while it can.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ledger_unavailable: Option<String>,
    },
}

impl DispatchEvent {
    /// The run the event is about; `""` for [`DispatchEvent::Budget`] and
    /// [`DispatchEvent::Health`].
    pub fn run_id(&self) -> &str {
        match self {
            DispatchEvent::RunChanged { run } => &run.head.run_id,
            DispatchEvent::LiveState { run_id, .. }
            | DispatchEvent::Transcript { run_id, .. }
            | DispatchEvent::PermissionRequested { run_id, .. }
            | DispatchEvent::PermissionResolved { run_id, .. }
            | DispatchEvent::Note { run_id, .. }
            | DispatchEvent::RunRemoved { run_id } => run_id,
            DispatchEvent::Budget { .. } | DispatchEvent::Health { .. } => "",
        }
    }
}

/// Whether a number is 0 (a field left out of the JSON when it is).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_met_by_the_state_pending_requests_and_need_its_condition_names() {
        use RunState::{Completed, Idle, Running};
        use WaitUntil::{Event, Idle as IdleWait, NeedsYou, Settled, Terminal};
        // (until, state, pending, needs you, met)
        let cases = [
            (Terminal, Running, 0, true, false),
            (Terminal, Completed, 0, false, true),
            (Event, Idle, 0, false, false),
            (IdleWait, Idle, 0, false, true),
            (IdleWait, Idle, 1, false, false),
            (IdleWait, Completed, 1, false, true),
            (NeedsYou, Running, 1, true, true),
            (NeedsYou, Idle, 0, false, false),
            (Settled, Running, 0, false, false),
            (Settled, Running, 1, true, true),
            (Settled, Idle, 0, false, true),
        ];
        for (until, state, pending, needs_you, met) in cases {
            assert_eq!(
                until.met_when(state, pending, || needs_you),
                met,
                "{until:?} with {state:?}, {pending} pending, needs you: {needs_you}"
            );
        }
        // Whether the run needs the user is only asked when it decides.
        let asked = std::cell::Cell::new(false);
        assert!(IdleWait.met_when(Idle, 0, || {
            asked.set(true);
            true
        }));
        assert!(!asked.get());
    }
}
