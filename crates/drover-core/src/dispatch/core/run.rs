//! One run as the dispatcher holds it in memory, and the batch of ledger writes and
//! published events that each change to it produces.
//!
//! What must stay true: every change to a run goes through a [`Batch`] — the ledger ops
//! and the events to publish after they commit — so nothing reaches a subscriber that is
//! not on disk; each run's ledger events get contiguous seqs from `next_seq`.

use serde_json::{Value, json};
use std::collections::VecDeque;

use super::Launched;
use super::broker::{Broker, Pending};
use super::transcript::TranscriptRing;
use crate::UnixMillis;
use crate::dispatch::api::{
    DispatchEvent, NoteView, PendingView, ResultView, RunSummary, RunView, TurnView,
};
use crate::dispatch::run_view::{RowState, RunDetails, RunFacts};
use crate::ledger::writer::NewEvent;
use crate::ledger::{DecisionRecord, RunPatch, TurnRecord, WriteOp, kind};
use crate::live_state::{self, Assignment, Cause, LiveState, LiveStateEvent, LiveStateKind};
use crate::providers::Tokens;
use crate::run_state::RunState;
use crate::spec::Spec;
use crate::workspace::WorkspaceView;

/// Ledger writes plus the events to publish once they are committed.
#[derive(Debug, Default)]
pub struct Batch {
    /// The ledger writes, committed in one transaction, in order.
    pub ops: Vec<WriteOp>,
    /// The events published once `ops` are committed, in order.
    pub events: Vec<DispatchEvent>,
}

/// Why and how a run is ending, kept while its child shuts down.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    pub state: RunState,
    pub reason: String,
    pub cause: Cause,
}

/// Where a turn came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOrigin {
    /// The first turn: the task as dispatched.
    Dispatch,
    /// A follow-up the user (or a script) sent.
    FollowUp,
    /// The one short turn asking for a missing `## Result` block.
    ResultRetry,
    /// The first turn after `drover resume`, or the turn that carries the answers given
    /// after a restart to the run's session.
    Resume,
    /// A turn the model API failed (after the CLI's own retries), sent again.
    Resend,
    /// A turn the user had in the CLI's own interface while the run was taken over.
    Interactive,
    /// drover's one turn asking the run to stop working and write its result block now
    /// (docs/ARCHITECTURE.md §"Wrap up, then stop"): never the user's words, not counted
    /// against max turns.
    WrapUp,
}

impl TurnOrigin {
    /// The origin's word in the ledger (`follow_up`).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnOrigin::Dispatch => "dispatch",
            TurnOrigin::FollowUp => "follow_up",
            TurnOrigin::ResultRetry => "result_retry",
            TurnOrigin::Resume => "resume",
            TurnOrigin::Resend => "resend",
            TurnOrigin::Interactive => "interactive",
            TurnOrigin::WrapUp => "wrap_up",
        }
    }
}

/// Why a run wraps up (docs/ARCHITECTURE.md §"Wrap up, then stop"), and so how it ends
/// when the wrap-up fails or overruns: as the limit would have ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrapReason {
    /// Its time box is near: the hard stop fails it (`timeout`).
    TimeBox,
    /// Its last allowed turn ended without a `done` result: the hard stop completes it
    /// (`max_turns`).
    MaxTurns,
    /// A turn ended with no result while its spend is within `wrap_up_usd` of its cap:
    /// the cap stops it (`budget_cap`).
    Budget,
    /// The user asked for a soft stop: the hard stop stops it (`user`).
    User,
}

impl WrapReason {
    /// How the run ends when the wrap-up gives no result: the limit's own end.
    pub fn hard_end(self) -> (RunState, &'static str, Cause) {
        match self {
            WrapReason::TimeBox => (RunState::Failed, "timeout", Cause::Failed),
            WrapReason::MaxTurns => (RunState::Completed, "max_turns", Cause::Completed),
            WrapReason::Budget => (RunState::Stopped, "budget_cap", Cause::Stopped),
            WrapReason::User => (RunState::Stopped, "user", Cause::Stopped),
        }
    }

    /// Why, in words, for the run's note.
    pub fn words(self) -> &'static str {
        match self {
            WrapReason::TimeBox => "its time box is near",
            WrapReason::MaxTurns => "its last allowed turn ended without a done result",
            WrapReason::Budget => "its spend is near its dollar cap",
            WrapReason::User => "you asked for a soft stop",
        }
    }
}

/// A wrap-up asked for: due (the turn in flight ends first) or sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrapUp {
    /// Why.
    pub reason: WrapReason,
    /// When the wrap-up turn was sent (`None` while the turn in flight goes on).
    pub sent_at: Option<UnixMillis>,
    /// The hard stop: the wrap-up turn's own bound once sent; while it waits for the turn
    /// in flight, the soft stop's bound (`None`: the run's other limits bound it).
    pub hard_at: Option<UnixMillis>,
}

/// The live line's detail while the wrap-up turn runs.
pub const WRAPPING_UP_DETAIL: &str = "writing the final answer";

/// Longest turn text kept.
pub const TURN_TEXT_MAX_CHARS: usize = 100_000;

#[derive(Debug, Clone)]
pub struct Turn {
    pub number: u32,
    pub origin: TurnOrigin,
    pub started_at: UnixMillis,
    pub ended_at: Option<UnixMillis>,
    pub prompt_preview: String,
    pub text: String,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    pub result: Option<Value>,
    /// The commands it executed (docs/ARCHITECTURE.md §"Evidence"), at most
    /// [`crate::evidence::COMMANDS_PER_TURN_MAX`].
    pub commands: Vec<crate::evidence::CommandRun>,
}

impl Turn {
    pub fn record(&self, run_id: &str) -> WriteOp {
        WriteOp::UpsertTurn(self.row(run_id))
    }

    fn row(&self, run_id: &str) -> Box<TurnRecord> {
        Box::new(TurnRecord {
            run_id: run_id.to_string(),
            number: self.number,
            origin: self.origin.as_str().to_string(),
            started_at: self.started_at,
            ended_at: self.ended_at,
            prompt_preview: self.prompt_preview.clone(),
            text: (!self.text.is_empty()).then(|| self.text.clone()),
            usage: serde_json::to_value(self.tokens).ok(),
            cost_usd: self.cost_usd,
            result: self.result.clone(),
            evidence: (!self.commands.is_empty())
                .then(|| serde_json::to_value(&self.commands).ok())
                .flatten(),
        })
    }

    /// The row recording the turn's end, with its agent text for the search index:
    /// `text` as the turn's `assistant_text` events gathered it (one per line, at most
    /// [`TURN_TEXT_MAX_CHARS`]), or `None` to have the writer read it from those events
    /// (docs/ARCHITECTURE.md §"Ledger").
    pub fn end_record(&self, run_id: &str, text: Option<String>) -> WriteOp {
        WriteOp::EndTurn {
            turn: self.row(run_id),
            text,
        }
    }

    pub fn view(&self) -> TurnView {
        TurnView {
            number: self.number,
            origin: self.origin.as_str().to_string(),
            started_at: self.started_at,
            ended_at: self.ended_at,
            prompt_preview: self.prompt_preview.clone(),
            text: (!self.text.is_empty()).then(|| self.text.clone()),
            tokens: self.tokens,
            cost_usd: self.cost_usd,
            result: self.result.clone(),
            commands: self.commands.clone(),
        }
    }
}

/// Repository scripts a run's new worktree holds that wait for the user's approval
/// before the run starts (docs/ARCHITECTURE.md §"Workspaces").
pub struct ScriptsAwaiting {
    /// What the user is shown (redacted).
    pub view: crate::dispatch::api::ScriptApprovalView,
    /// Every repository script found in the worktree (approved ones too), as read.
    pub found: Vec<crate::workspace::scripts::RepoScript>,
}

pub struct Run {
    pub id: String,
    pub spec: Spec,
    pub session: String,
    /// Changed only by [`Run::set_state`], which checks the lifecycle table.
    state: RunState,
    pub completion_reason: Option<String>,
    pub created_at: UnixMillis,
    pub finished_at: Option<UnixMillis>,
    /// The run's time box ends here (created + max minutes).
    pub deadline: UnixMillis,
    pub live: Option<LiveState>,
    pub next_seq: u64,
    pub model: Option<String>,
    pub provider_session_id: Option<String>,
    /// The provider said its session cannot be gone on in from a new process
    /// ([`crate::providers::ProviderEvent::SessionNotResumable`]): never hibernated.
    pub not_resumable: bool,
    /// The run's adapter and child, once launched (until the child has exited).
    pub child: Option<Launched>,
    /// An [`super::Effect::Launch`] was asked for and its outcome is not in yet: the run
    /// holds its slot meanwhile.
    pub launching: bool,
    pub ready: bool,
    /// The last notice the adapter sent before `Ready` (why a handshake failed), kept
    /// for the note of a launch that fails.
    pub launch_notice: Option<String>,
    pub turns: Vec<Turn>,
    pub turn_in_flight: bool,
    pub follow_ups: VecDeque<String>,
    pub broker: Broker,
    pub notes: Vec<NoteView>,
    /// Who decided the run's requests: the last [`api::DECISIONS_SHOWN`].
    pub decisions: VecDeque<crate::dispatch::api::DecisionView>,
    pub transcript: TranscriptRing,
    pub last_result: Option<ResultView>,
    pub needs_input: bool,
    pub cost_usd: f64,
    /// Estimated spend of the turn in flight, from streamed usage; replaced by the
    /// turn's reported cost when it ends.
    pub provisional_usd: f64,
    /// The catalog price of the run's model, looked up once.
    pub price: Option<crate::money::pricing::Price>,
    pub cost_basis: String,
    /// The usage rows booked on this run, as written to the ledger (kept here so `show`
    /// answers with what the run's money already counts, before the ledger commits).
    pub usage: Vec<crate::ledger::UsageRecord>,
    pub tokens: Tokens,
    /// The provider session's running dollar total at the end of the last turn.
    pub last_total_cost: f64,
    pub last_event_at: UnixMillis,
    pub stalled: bool,
    pub idle_since: Option<UnixMillis>,
    pub rate_limited: bool,
    /// A tool is running inside the provider (its silence is not the model's).
    pub tool_open: bool,
    pub ending: Option<Ending>,
    /// The route card, for a run dispatched without a model.
    pub route: Option<crate::dispatch::api::RouteCardView>,
    /// What is offered now that the run has ended.
    pub escalation: Option<crate::route::Escalation>,
    /// How many escalations or retries led here.
    pub depth: u32,
    /// The first turn's prompt, built from the spec as the user wrote it (the spec kept
    /// here is redacted); taken when the child is ready.
    pub first_prompt: Option<String>,
    /// Where the run works (its worktree, or the shared directory) and what it changed.
    pub workspace: WorkspaceView,
    /// The worktree was made (or checked, for a resumed run) in this drover's life: the
    /// run may be launched in it.
    pub workspace_ready: bool,
    /// The dispatch asked for its workspace (`--workspace`); a worktree the default chose
    /// falls back to the shared directory when it cannot be made.
    pub workspace_asked: bool,
    /// Its worktree is being made (or checked) and must be by then; the run holds its
    /// slot meanwhile.
    pub preparing_until: Option<UnixMillis>,
    /// A shared run waiting for another writing run to leave its directory.
    pub waiting_for_dir: bool,
    /// Its new worktree's repository scripts wait for the user's approval.
    pub script_approval: Option<ScriptsAwaiting>,
    /// Its branch conflicts with its base: the follow-up that hands the conflict to it is
    /// offered (withdrawn by its next turn, or its end).
    pub conflict_offer: Option<crate::workspace::UpdateView>,
    /// The run an escalation or retry starts from (its branch, its uncommitted work).
    pub start_from: Option<crate::workspace::ops::ParentStart>,
    /// Working out the change is under way; `measure_again`: something changed since.
    pub measuring: bool,
    pub measure_again: bool,
    /// Tool calls in flight that may change files (edits, commands), by tool-use id:
    /// their end is a reason to work out the change.
    pub file_tools: std::collections::HashSet<String>,
    /// Idle and its child asked to shut down to hibernate (it holds its slot until the
    /// child has exited).
    pub hibernating: bool,
    /// Idle with no child: its provider session is kept, a follow-up wakes it there. It
    /// holds no slot and reserves nothing.
    pub hibernated: bool,
    /// Woken ahead of a follow-up (`wake`: the dashboard opened a follow-up box on it):
    /// its child is starting with no turn to send; once ready the run is idle and warm.
    /// It stays idle meanwhile (it reserves nothing), and a follow-up that comes before
    /// the child is ready waits in `wake`.
    pub warming: bool,
    /// When it was last woken ahead: its hibernation timer counts from then (its idle
    /// timeout still counts from `idle_since`).
    pub warmed_at: Option<UnixMillis>,
    /// `wake` came while its child was on its way out (hibernating): it is woken ahead
    /// once the child has exited.
    pub wake_ahead_asked: bool,
    /// The turn to send once the child woken from hibernation (or started again for a
    /// re-send) is ready.
    pub wake: Option<(String, TurnOrigin)>,
    /// Dispatched with `--no-queue` while idle runs filled its rail: `starting`, and
    /// waiting (at the back of the queue, not counted as queued) for the slot those runs
    /// give as they hibernate. It holds no slot until it is launched.
    pub waiting_for_room: bool,
    /// Waiting in the queue for this many dollars of its budget session to be free (its
    /// first turn, or an idle run's follow-up); the live line says so.
    pub money_wait: Option<f64>,
    /// The prompt of the last turn sent (a turn the model API failed is sent again).
    pub last_prompt: Option<String>,
    /// How many times the current turn was sent again after the model API failed it.
    pub resends: u32,
    /// The failed turn is held and sent again at this time.
    pub resend_at: Option<UnixMillis>,
    /// The connection to the run's host dropped: the owner reconnects
    /// (`host_drop.rs`).
    pub host_wait: Option<super::host_drop::HostWait>,
    /// Tries the last reconnect took: a CLI that drops again before it is ready goes on
    /// counting from there, so a host that answers but never keeps a run is given up on.
    pub host_tries: u32,
    /// `interrupted` with a turn in flight (only then does `resume` with no words send
    /// drover's own resume turn); set before the move to `interrupted`, recorded with it.
    pub turn_cut: bool,
    /// Answers given to requests a restart left pending (no CLI heard them), one line
    /// each: sent to the run's session in one turn once none is left pending.
    pub carried: Vec<String>,
    /// Taken over in its CLI's own interface (`takeover.rs`).
    pub taken_over: Option<super::takeover::TakenOver>,
    /// Asked to wrap up (`timers.rs`, docs/ARCHITECTURE.md §"Wrap up, then stop").
    pub wrap_up: Option<WrapUp>,
    /// Commands in flight, by tool-use id: their end, with its exit code, is evidence
    /// (docs/ARCHITECTURE.md §"Evidence").
    pub commands_open: std::collections::HashMap<String, String>,
}

/// The live line's detail of an idle run whose child is shut down (docs/ARCHITECTURE.md
/// §"Idle runs").
pub const HIBERNATED_DETAIL: &str = "idle · hibernated";
/// The live line's detail of an idle run whose child is shutting down to hibernate.
pub const HIBERNATING_DETAIL: &str = "idle · hibernating";
/// The live line's detail of a hibernated run whose child is starting ahead of a
/// follow-up.
pub const WAKING_DETAIL: &str = "idle · waking";
/// The live line's detail of an idle run with a warm child, waiting for a follow-up.
pub const IDLE_DETAIL: &str = "idle: waiting for a follow-up";

impl Run {
    pub fn new(
        id: String,
        spec: Spec,
        session: String,
        now: UnixMillis,
        ring: TranscriptRing,
    ) -> Run {
        let deadline = now.saturating_add(i64::from(spec.max_minutes).saturating_mul(60_000));
        let spec_cwd = spec.cwd.clone();
        Run {
            id,
            model: spec.model.clone(),
            spec,
            session,
            state: RunState::Queued,
            completion_reason: None,
            created_at: now,
            finished_at: None,
            deadline,
            live: None,
            next_seq: 1,
            provider_session_id: None,
            not_resumable: false,
            child: None,
            launching: false,
            ready: false,
            launch_notice: None,
            turns: Vec::new(),
            turn_in_flight: false,
            follow_ups: VecDeque::new(),
            broker: Broker::default(),
            notes: Vec::new(),
            decisions: VecDeque::new(),
            transcript: ring,
            last_result: None,
            needs_input: false,
            cost_usd: 0.0,
            provisional_usd: 0.0,
            price: None,
            cost_basis: "free".to_string(),
            usage: Vec::new(),
            tokens: Tokens::default(),
            last_total_cost: 0.0,
            last_event_at: now,
            stalled: false,
            idle_since: None,
            rate_limited: false,
            tool_open: false,
            ending: None,
            route: None,
            escalation: None,
            depth: 0,
            first_prompt: None,
            workspace: WorkspaceView::shared(&spec_cwd),
            workspace_ready: false,
            workspace_asked: false,
            preparing_until: None,
            waiting_for_dir: false,
            script_approval: None,
            conflict_offer: None,
            start_from: None,
            measuring: false,
            measure_again: false,
            file_tools: Default::default(),
            hibernating: false,
            hibernated: false,
            warming: false,
            warmed_at: None,
            wake_ahead_asked: false,
            wake: None,
            waiting_for_room: false,
            money_wait: None,
            last_prompt: None,
            resends: 0,
            resend_at: None,
            host_wait: None,
            host_tries: 0,
            turn_cut: false,
            wrap_up: None,
            commands_open: Default::default(),
            carried: Vec::new(),
            taken_over: None,
        }
    }

    /// A run read back from the ledger after a restart: in memory again, in the state the
    /// ledger holds for it, which [`Run::set_state`] then moves on. Its clocks (time box,
    /// idle timeout) count from `now`.
    pub fn restored(
        id: String,
        spec: Spec,
        session: String,
        state: RunState,
        now: UnixMillis,
        ring: TranscriptRing,
    ) -> Run {
        Run {
            state,
            ..Run::new(id, spec, session, now, ring)
        }
    }

    /// Where the run is in the dispatcher.
    pub fn state(&self) -> RunState {
        self.state
    }

    /// Turns drover sent for the user: result retries, re-sends and the turns the user
    /// had in the CLI's own interface (a take-over) do not count against max turns.
    /// What its commands show so far (docs/ARCHITECTURE.md §"Evidence").
    pub fn evidence(&self) -> crate::evidence::Evidence {
        let done = self.last_result.as_ref().and_then(|r| r.status.as_deref()) == Some("done");
        crate::evidence::Evidence::of(self.turns.iter().flat_map(|t| &t.commands), done)
    }

    pub fn user_turns(&self) -> u32 {
        self.turns
            .iter()
            .filter(|t| {
                !matches!(
                    t.origin,
                    TurnOrigin::ResultRetry
                        | TurnOrigin::Resend
                        | TurnOrigin::Interactive
                        | TurnOrigin::WrapUp
                )
            })
            .count() as u32
    }

    /// When this run's silence timeout (`silence` ms) falls due: only while the model
    /// itself owes an answer (a turn in flight, no tool running, no request waiting for
    /// the user, not already ending).
    pub fn silence_deadline(&self, silence: Option<i64>) -> Option<UnixMillis> {
        let owed = self.turn_in_flight
            && !self.tool_open
            && self.broker.is_empty()
            && self.ending.is_none()
            && self.child.is_some();
        silence.filter(|_| owed).map(|ms| self.last_event_at + ms)
    }

    pub fn holds_slot(&self) -> bool {
        self.taken_over.is_some()
            || self.launching
            || self.preparing_until.is_some()
            || (!self.hibernated
                && !self.waiting_for_room
                && matches!(
                    self.state,
                    RunState::Starting
                        | RunState::Running
                        | RunState::Idle
                        | RunState::AwaitingPermission
                ))
    }

    /// Whether the run holds back what its cap has left from its budget session: money is
    /// reserved for a turn (docs/ARCHITECTURE.md §"Money"): while it starts for one, is in
    /// one, or is being woken for one — not while it waits on the user, is idle or
    /// hibernated, queued or held on a route card.
    pub fn reserves(&self) -> bool {
        self.holds_slot()
            && match self.state {
                // Queued and holding its slot: its launch (or its worktree) is under way.
                RunState::Queued | RunState::Starting | RunState::Running => true,
                RunState::Idle => self.wake.is_some(),
                _ => false,
            }
    }

    /// Idle with no warm child to take a turn: hibernated, hibernating, or woken ahead
    /// and still starting. A turn for it waits in `wake`.
    pub fn asleep(&self) -> bool {
        self.hibernated || self.hibernating || self.warming
    }

    /// An idle run with a warm child that could be hibernated: its turn is over, nothing
    /// waits on it, its provider reported the session to wake it in.
    pub fn can_hibernate(&self) -> bool {
        self.state == RunState::Idle
            && !self.turn_in_flight
            && self.ready
            && self.child.is_some()
            && !self.launching
            && !self.hibernating
            && self.ending.is_none()
            && self.follow_ups.is_empty()
            && self.wake.is_none()
            && self.broker.is_empty()
            && self.provider_session_id.is_some()
            && !self.not_resumable
    }

    /// Appends one event to the run's ordered stream. The body is serialized here, once.
    pub fn event(
        &mut self,
        batch: &mut Batch,
        kind: &'static str,
        body: &impl serde::Serialize,
        at: UnixMillis,
    ) {
        self.append(batch, kind, body, at, false);
    }

    /// Appends one event, saying whether it is a tool call the search index holds
    /// ([`NewEvent::tool_call`]: the writer indexes its line with it).
    pub fn append(
        &mut self,
        batch: &mut Batch,
        kind: &'static str,
        body: &impl serde::Serialize,
        at: UnixMillis,
        tool_call: bool,
    ) {
        match serde_json::to_string(body) {
            Ok(body_json) => {
                batch.ops.push(WriteOp::AppendEvent(NewEvent {
                    run_id: self.id.clone(),
                    seq: self.next_seq,
                    kind: kind.into(),
                    at,
                    body_json,
                    tool_call,
                }));
                self.next_seq += 1;
            }
            Err(e) => tracing::error!(run = %self.id, error = %e, "cannot serialize an event"),
        }
    }

    pub fn note(&mut self, batch: &mut Batch, text: impl Into<String>, at: UnixMillis) {
        let note = NoteView {
            at,
            text: text.into(),
        };
        self.event(batch, kind::NOTE, &json!({"text": note.text}), at);
        self.notes.push(note.clone());
        batch.events.push(DispatchEvent::Note {
            run_id: self.id.clone(),
            note,
        });
    }

    /// Adds a line of drover's own to the run's transcript (a rule's answer, its setup's
    /// output): recorded as a `transcript` event, kept in the ring, and published.
    pub fn transcript_line(&mut self, batch: &mut Batch, line: String, at: UnixMillis) {
        self.event(batch, "transcript", &json!({ "line": line }), at);
        let seq = self.next_seq - 1;
        self.transcript.push(line.clone(), seq);
        batch.events.push(DispatchEvent::Transcript {
            run_id: self.id.clone(),
            line,
            seq,
        });
    }

    /// Moves the live state; a refused assignment is logged and changes nothing.
    pub fn set_live(
        &mut self,
        batch: &mut Batch,
        state: LiveStateKind,
        bound: Option<UnixMillis>,
        detail: Option<&str>,
        cause: Option<Cause>,
        now: UnixMillis,
    ) {
        // Wrapping up, the live line stays on the wrap-up until the run ends: the wrap-up
        // turn's tools and prompts do not move it back to `working`.
        if self
            .live
            .as_ref()
            .is_some_and(|l| l.state == LiveStateKind::WrappingUp)
            && state != LiveStateKind::Ended
        {
            return;
        }
        let assignment = Assignment {
            expected_seq: self.live.as_ref().map_or(0, |l| l.seq),
            state,
            bound: bound.map(|b| b.max(now)),
            detail: detail.map(str::to_string),
            cause,
            reopen: false,
        };
        self.apply_live(batch, &assignment, now);
    }

    fn apply_live(&mut self, batch: &mut Batch, assignment: &Assignment, now: UnixMillis) {
        let state = assignment.state;
        match live_state::assign(self.live.as_ref(), assignment, now) {
            Ok(next) => {
                let stored = LiveStateEvent::accepted(assignment, &next, now);
                let body = serde_json::to_value(&stored).unwrap_or(Value::Null);
                self.event(batch, kind::LIVE_STATE, &body, now);
                batch.ops.push(WriteOp::UpdateRun {
                    run_id: self.id.clone(),
                    patch: Box::new(RunPatch {
                        updated_at: now,
                        live_state: Some(next.clone()),
                        ..RunPatch::default()
                    }),
                });
                batch.events.push(DispatchEvent::LiveState {
                    run_id: self.id.clone(),
                    live_state: next.clone(),
                });
                self.live = Some(next);
            }
            Err(refusal) => {
                tracing::warn!(run = %self.id, %refusal, ?state, "live-state change refused");
            }
        }
    }

    /// `working` with `detail` until `bound`.
    pub fn working(&mut self, batch: &mut Batch, bound: UnixMillis, detail: &str, now: UnixMillis) {
        self.set_live(
            batch,
            LiveStateKind::Working,
            Some(bound),
            Some(detail),
            None,
            now,
        );
    }

    /// Back to `working` on a model turn, bounded by the run's time box.
    pub fn model_turn(&mut self, batch: &mut Batch, now: UnixMillis) {
        let deadline = self.deadline;
        self.working(batch, deadline, "model turn", now);
    }

    /// Moves the run state (with its end reason when it ends): the one place a run's state
    /// changes. A move the lifecycle table ([`RunState::allowed`]) refuses is not applied:
    /// it is logged with the run and both states, and `false` is returned.
    pub fn set_state(
        &mut self,
        batch: &mut Batch,
        state: RunState,
        reason: Option<&str>,
        now: UnixMillis,
    ) -> bool {
        let from = self.state;
        if !RunState::allowed(from, state) {
            tracing::error!(
                run = %self.id,
                from = %from,
                to = %state,
                reason = reason.unwrap_or_default(),
                "a run state change the lifecycle table refuses was not applied"
            );
            return false;
        }
        // Resuming an interrupted run reopens it: an end a drover before this one wrote
        // on its row (when `interrupted` was an end) is forgotten.
        let reopened = from == RunState::Interrupted;
        if reopened {
            self.finished_at = None;
            self.completion_reason = None;
            self.turn_cut = false;
        }
        self.state = state;
        if state.is_terminal() {
            self.finished_at = Some(now);
            self.completion_reason = reason.map(str::to_string);
        }
        if state == RunState::Idle {
            self.idle_since = Some(now);
        } else {
            self.idle_since = None;
        }
        let mut body = json!({"from": from.as_str(), "to": state.as_str(), "reason": reason});
        if state == RunState::Interrupted {
            body["turn_cut"] = json!(self.turn_cut);
        }
        self.event(batch, kind::RUN_STATE, &body, now);
        batch.ops.push(WriteOp::UpdateRun {
            run_id: self.id.clone(),
            patch: Box::new(RunPatch {
                updated_at: now,
                state: Some(state),
                completion_reason: self
                    .completion_reason
                    .clone()
                    .filter(|_| state.is_terminal()),
                finished_at: self.finished_at.filter(|_| state.is_terminal()),
                reopened,
                ..RunPatch::default()
            }),
        });
        batch.events.push(DispatchEvent::RunChanged {
            run: self.summary(),
        });
        true
    }

    /// Opens a new segment of an ended run's live state (`drover resume`): `admitted`
    /// again, with `bound`, the end forgotten in memory.
    pub fn reopen_live(&mut self, batch: &mut Batch, bound: UnixMillis, now: UnixMillis) {
        let assignment = Assignment {
            expected_seq: self.live.as_ref().map_or(0, |l| l.seq),
            state: LiveStateKind::Admitted,
            bound: Some(bound.max(now)),
            detail: Some("resumed".to_string()),
            cause: None,
            reopen: self.live.is_some(),
        };
        self.finished_at = None;
        self.completion_reason = None;
        self.escalation = None;
        self.apply_live(batch, &assignment, now);
    }

    /// Publishes the run's row again (cost, flags) without a state change.
    pub fn touch(&self, batch: &mut Batch) {
        batch.events.push(DispatchEvent::RunChanged {
            run: self.summary(),
        });
    }

    /// The next queued follow-up, taken off the queue and recorded as sent.
    pub fn take_follow_up(&mut self, batch: &mut Batch, now: UnixMillis) -> Option<String> {
        let next = self.follow_ups.pop_front()?;
        self.event(batch, kind::FOLLOW_UP_SENT, &Value::Null, now);
        Some(next)
    }

    /// Denies every pending request for `message` (no CLI is left to hear them), each
    /// recorded as drover's decision.
    pub fn deny_all_pending(&mut self, batch: &mut Batch, message: &str, now: UnixMillis) {
        for pending in self.broker.drain() {
            self.record_resolution(
                batch,
                pending.request.request_id,
                "system",
                &format!("deny: {message}"),
                json!({"behavior": "deny", "message": message}),
                now,
            );
        }
    }

    /// Records how a pending request left the list: the decision row, an event in the
    /// run's stream, and the published resolution.
    pub fn record_resolution(
        &mut self,
        batch: &mut Batch,
        request_id: String,
        who: &str,
        decision: &str,
        body: Value,
        now: UnixMillis,
    ) {
        if self.decisions.len() >= crate::dispatch::api::DECISIONS_SHOWN {
            self.decisions.pop_front();
        }
        self.decisions
            .push_back(crate::dispatch::api::DecisionView {
                at: now,
                request_id: Some(request_id.clone()),
                who: who.to_string(),
                decision: decision.to_string(),
            });
        batch
            .ops
            .push(WriteOp::InsertDecision(Box::new(DecisionRecord {
                run_id: Some(self.id.clone()),
                at: now,
                kind: "permission".into(),
                request_id: Some(request_id.clone()),
                who: who.into(),
                decision: decision.into(),
                body,
            })));
        self.event(
            batch,
            "permission_resolved",
            &json!({"request_id": request_id, "who": who, "decision": decision}),
            now,
        );
        batch.events.push(DispatchEvent::PermissionResolved {
            run_id: self.id.clone(),
            request_id,
            how: decision.to_string(),
        });
    }

    pub fn pending_view(&self, p: &Pending) -> PendingView {
        PendingView {
            request_id: p.request.request_id.clone(),
            kind: p.request.kind,
            tool: p.request.tool.clone(),
            ask: p.request.ask.clone(),
            always: p.request.always.clone(),
            created_at: p.created_at,
            expires_at: p.expires_at,
            guard: p.guard.clone(),
        }
    }

    /// What every view of the run is built from: its spend counts what the turn in flight
    /// has streamed so far.
    fn facts(&self) -> RunFacts<'_> {
        RunFacts {
            run_id: &self.id,
            state: self.state,
            completion_reason: self.completion_reason.as_deref(),
            spec: &self.spec,
            provider: &self.spec.provider,
            model: self.model.as_deref(),
            title: &self.spec.title,
            parent_run: self.spec.parent_run.as_deref(),
            workflow_id: self.spec.workflow_id.as_deref(),
            live_state: self.live.as_ref(),
            cost_usd: self.cost_usd + self.provisional_usd,
            stalled: self.stalled,
            created_at: self.created_at,
            finished_at: self.finished_at,
            depth: self.depth,
            workspace: Some(&self.workspace),
            rev: self.next_seq - 1,
        }
    }

    /// The run's row.
    pub fn summary(&self) -> RunSummary {
        self.facts().summary(RowState {
            pending: self.broker.pending().len(),
            needs_input: self.needs_input,
            escalation_offered: self.escalation.is_some(),
            script_approval: self.script_approval.is_some(),
            conflict_offered: self.conflict_offer.is_some() && self.state.is_active(),
            result_status: self.last_result.as_ref().and_then(|r| r.status.clone()),
        })
    }

    /// The directory the run's child works in: its worktree's, or the one it was given.
    pub fn work_dir(&self) -> std::path::PathBuf {
        match (&self.workspace.dir, self.workspace.is_worktree()) {
            (Some(dir), true) => std::path::PathBuf::from(dir),
            _ => self.spec.cwd.clone(),
        }
    }

    /// Records the run's workspace as it is now: the ledger row and a published row.
    pub fn save_workspace(&self, batch: &mut Batch, now: UnixMillis) {
        batch.ops.push(WriteOp::UpdateRun {
            run_id: self.id.clone(),
            patch: Box::new(RunPatch {
                updated_at: now,
                workspace: serde_json::to_value(&self.workspace).ok(),
                ..RunPatch::default()
            }),
        });
        self.touch(batch);
    }

    /// Everything about the run. The row's spend (what the turn in flight has streamed
    /// included) is the view's, so `runs` and `show` agree; `usage` lists what is booked.
    pub fn view(&self) -> RunView {
        self.facts().view(RunDetails {
            cost_basis: self.cost_basis.clone(),
            tokens: self.tokens,
            turns: self.turns.iter().map(Turn::view).collect(),
            pending: self
                .broker
                .pending()
                .iter()
                .map(|p| self.pending_view(p))
                .collect(),
            last_result: self.last_result.clone(),
            notes: self.notes.clone(),
            provider_session_id: self.provider_session_id.clone(),
            queued_follow_ups: self.follow_ups.len(),
            pid: self.child.and_then(|c| c.pid),
            booked_usd: self.cost_usd,
            usage: self.usage.clone(),
            route: self.route.clone(),
            escalation: self.escalation.clone(),
            decisions: self.decisions.iter().cloned().collect(),
            script_approval: self.script_approval.as_ref().map(|a| a.view.clone()),
            conflict_offer: self
                .conflict_offer
                .clone()
                .filter(|_| self.state.is_active()),
        })
    }
}
