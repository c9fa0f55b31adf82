//! One builder for a run's views ([`RunHead`], [`RunSummary`], [`RunView`]), wherever the
//! run is held: in the dispatcher's memory (a live run, `core::run`) or only in the ledger
//! (`projections`).
//!
//! Each holder fills a [`RunFacts`] (what every view of a run shows) and, for the full
//! view, a [`RunDetails`]; the shapes are made here once, so a field added to a view is
//! filled from both places or the build breaks. What must stay true: the spend a row
//! shows is the one `show` shows (`RunFacts::cost_usd`), while the run's budget counts
//! what is booked (`RunDetails::booked_usd`); what only a live dispatcher knows (pending
//! requests, stalled, queued follow-ups, the child's pid) is absent, not invented, for a
//! run read from the ledger.

use super::api::{
    DecisionView, NoteView, PendingView, ResultView, RouteCardView, RunBudget, RunHead, RunSummary,
    RunView, TurnView,
};
use crate::UnixMillis;
use crate::ledger::UsageRecord;
use crate::live_state::LiveState;
use crate::providers::Tokens;
use crate::route::Escalation;
use crate::run_state::RunState;
use crate::spec::Spec;
use crate::workspace::WorkspaceView;

/// What every view of a run is built from.
#[derive(Debug, Clone, Copy)]
pub struct RunFacts<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// Where the run is in the dispatcher.
    pub state: RunState,
    /// Why it ended, once it has.
    pub completion_reason: Option<&'a str>,
    /// The spec it was dispatched with (budget, task, cwd, policy, max turns).
    pub spec: &'a Spec,
    /// The provider it runs on.
    pub provider: &'a str,
    /// The model it runs on, once known.
    pub model: Option<&'a str>,
    /// Its title.
    pub title: &'a str,
    /// The run it was dispatched from (a sub-run), escalated or retried from.
    pub parent_run: Option<&'a str>,
    /// The workflow it belongs to.
    pub workflow_id: Option<&'a str>,
    /// What it is doing right now.
    pub live_state: Option<&'a LiveState>,
    /// Dollars the row shows: booked spend, plus what a turn in flight has streamed.
    pub cost_usd: f64,
    /// No provider event for a long while (only a live dispatcher knows).
    pub stalled: bool,
    /// When it was dispatched (ms since the epoch).
    pub created_at: UnixMillis,
    /// When it ended (ms since the epoch), once it has.
    pub finished_at: Option<UnixMillis>,
    /// How many parents up its lineage goes (0 for a top-level run).
    pub depth: u32,
    /// Where it works and what it changed there, when known.
    pub workspace: Option<&'a WorkspaceView>,
    /// How many events the ledger holds for it (its newest event's seq).
    pub rev: u64,
}

/// What a run's row adds to its head.
#[derive(Debug, Clone, Default)]
pub struct RowState {
    /// Requests waiting for the user's answer.
    pub pending: usize,
    /// Its last result asks the user for input.
    pub needs_input: bool,
    /// An escalation or retry is offered.
    pub escalation_offered: bool,
    /// Its repository's scripts wait for the user's approval.
    pub script_approval: bool,
    /// A follow-up handing its branch's conflict to it is offered.
    pub conflict_offered: bool,
    /// The status word of its last result.
    pub result_status: Option<String>,
}

/// What the full view of a run adds to what every view shows.
#[derive(Debug, Clone, Default)]
pub struct RunDetails {
    /// The weakest basis of its spend (`unpriced` < `estimated` < `reported` < `free`).
    pub cost_basis: String,
    /// Tokens over every turn.
    pub tokens: Tokens,
    /// Its turns, oldest first.
    pub turns: Vec<TurnView>,
    /// Requests waiting for the user's answer, oldest first.
    pub pending: Vec<PendingView>,
    /// The last result it gave.
    pub last_result: Option<ResultView>,
    /// Notes on the run, oldest first.
    pub notes: Vec<NoteView>,
    /// The provider's session id, once known.
    pub provider_session_id: Option<String>,
    /// Follow-ups queued behind a turn in flight.
    pub queued_follow_ups: usize,
    /// The pid of its child, while one runs.
    pub pid: Option<u32>,
    /// Dollars booked (what its budget counts).
    pub booked_usd: f64,
    /// Its usage rows, as booked.
    pub usage: Vec<UsageRecord>,
    /// Its route card, when it was routed.
    pub route: Option<RouteCardView>,
    /// The escalation or retry it is offered.
    pub escalation: Option<Escalation>,
    /// Its last decisions (permission answers and rules).
    pub decisions: Vec<DecisionView>,
    /// The repository scripts it waits for the user to approve (a live run only).
    pub script_approval: Option<super::api::ScriptApprovalView>,
    /// The conflict offered to it as a follow-up (a live run only).
    pub conflict_offer: Option<crate::workspace::UpdateView>,
}

impl RunFacts<'_> {
    /// The fields every view of the run starts with.
    pub fn head(&self) -> RunHead {
        RunHead {
            run_id: self.run_id.to_string(),
            state: self.state,
            completion_reason: self.completion_reason.map(str::to_string),
            provider: self.provider.to_string(),
            model: self.model.map(str::to_string),
            title: self.title.to_string(),
            live_state: self.live_state.cloned(),
            cost_usd: self.cost_usd,
            budget_usd: self.spec.budget_usd,
            stalled: self.stalled,
            created_at: self.created_at,
            finished_at: self.finished_at,
            owner_gone: false,
            rev: self.rev,
            host: self.spec.host.clone(),
        }
    }

    /// The run's row in a list.
    pub fn summary(&self, row: RowState) -> RunSummary {
        RunSummary {
            head: self.head(),
            pending: row.pending,
            needs_input: row.needs_input,
            escalation_offered: row.escalation_offered,
            script_approval: row.script_approval,
            conflict_offered: row.conflict_offered,
            workspace: self.workspace.cloned().map(Box::new),
            result_status: row.result_status,
            parent_run: self.parent_run.map(str::to_string),
            depth: self.depth,
            workflow_id: self.workflow_id.map(str::to_string),
            sandbox: self.spec.sandbox,
        }
    }

    /// Everything about the run, with what it needs of the user worked out.
    pub fn view(&self, details: RunDetails) -> RunView {
        let evidence = evidence_of(&details.turns, details.last_result.as_ref());
        RunView {
            head: self.head(),
            task: self.spec.task.clone(),
            cwd: self.spec.cwd.display().to_string(),
            policy: self.spec.policy.as_str().to_string(),
            sandbox: self.spec.sandbox,
            cost_basis: details.cost_basis,
            tokens: details.tokens,
            turns: details.turns,
            pending: details.pending,
            last_result: details.last_result,
            notes: details.notes,
            provider_session_id: details.provider_session_id,
            max_turns: self.spec.max_turns,
            queued_follow_ups: details.queued_follow_ups,
            pid: details.pid,
            budget: RunBudget::of(self.spec, details.booked_usd),
            usage: details.usage,
            route: details.route,
            escalation: details.escalation,
            depth: self.depth,
            parent_run: self.parent_run.map(str::to_string),
            workspace: self.workspace.cloned(),
            decisions: details.decisions,
            needs_you: None,
            evidence,
            script_approval: details.script_approval,
            conflict_offer: details.conflict_offer,
        }
        .with_need()
    }
}

/// What a run's commands show, once a turn has ended: every turn's commands, oldest
/// first, read against its latest result (`done` or not).
fn evidence_of(
    turns: &[TurnView],
    last_result: Option<&ResultView>,
) -> Option<crate::evidence::Evidence> {
    turns.iter().any(|t| t.ended_at.is_some()).then(|| {
        let done = last_result.and_then(|r| r.status.as_deref()) == Some("done");
        crate::evidence::Evidence::of(turns.iter().flat_map(|t| &t.commands), done)
    })
}
