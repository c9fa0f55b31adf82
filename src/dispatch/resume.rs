//! `drover resume RUN`: a run that a drover restart left `interrupted` starts again in
//! the same provider session, and its next turn is recorded on the same run.
//!
//! The run is rebuilt in memory from its ledger rows (spec, turns, usage, notes, the
//! tail of its transcript), its live state is *reopened* (`ended` → `admitted`, the one
//! way out of `ended`, marked as such in its event stream), its end is cleared, and it
//! is launched like a queued run: fitted into its budget session again, and queued when
//! a rail is full. The adapter is started with the recorded provider session
//! (`LaunchSpec::resume_session`); once it is ready, the resume turn is sent.
//!
//! What must stay true: only an `interrupted` run with a recorded provider session is
//! resumed, on a provider drover can run; nothing is written for a refused resume; the
//! run keeps its id, its turns and its money, and its seqs go on from the ledger's.

use serde_json::{Value, json};

use super::actor::Actor;
use super::api::TranscriptFormat;
use super::lifecycle::PREPARE_BOUND_MS;
use super::prompts;
use super::rails::{self, Admission};
use super::requests::{RUNNABLE, not_found};
use super::run::{Batch, Run, Turn, TurnOrigin};
use super::transcript::TranscriptRing;
use crate::control::offline;
use crate::ledger::{RunPatch, WriteOp, kind};
use crate::run_state::RunState;
use crate::{DroverError, ErrorCode};

fn not_resumable(run_id: &str, why: impl std::fmt::Display) -> DroverError {
    DroverError::new(ErrorCode::RunNotResumable, format!("run {run_id} {why}"))
}

impl Actor {
    pub fn resume(&mut self, run_id: &str, text: Option<String>) -> Result<Value, DroverError> {
        self.refresh_config(false);
        let prompt = match text {
            Some(text) if !text.trim().is_empty() => text,
            _ => prompts::resume(),
        };
        let max_chars = self.limits().task_max_chars;
        if prompt.chars().count() > max_chars {
            return Err(DroverError::new(
                ErrorCode::TaskTooLong,
                format!("the resume prompt is longer than {max_chars} characters; shorten it"),
            ));
        }
        if let Some(run) = self.runs.get(run_id) {
            return Err(not_resumable(
                run_id,
                format!(
                    "is {} in this drover; only a run interrupted by a drover restart can be \
                     resumed (use follow-up on an idle run)",
                    run.state
                ),
            ));
        }
        let record = self.reader.run(run_id)?.ok_or_else(|| not_found(run_id))?;
        if record.removed {
            return Err(not_found(run_id));
        }
        if record.state != RunState::Interrupted {
            return Err(not_resumable(
                run_id,
                format!(
                    "is {}; only a run interrupted by a drover restart can be resumed \
                     (`drover retry {run_id}` starts a new run on the same model)",
                    record.state
                ),
            ));
        }
        let Some(session_id) = record.provider_session_id.clone() else {
            return Err(not_resumable(
                run_id,
                format!(
                    "was interrupted before its provider reported a session, so there is \
                     nothing to resume; `drover retry {run_id}` starts it again"
                ),
            ));
        };
        let provider = record.provider.clone();
        let enabled = self
            .config()
            .providers
            .get(&provider)
            .is_some_and(|p| p.enabled);
        if !RUNNABLE.contains(&provider.as_str()) || !enabled {
            return Err(DroverError::new(
                ErrorCode::InvalidProvider,
                format!(
                    "run {run_id} ran on {provider}, which is disabled or unknown to this \
                     drover; enable it in the config to resume the run"
                ),
            ));
        }
        let spec = offline::stored_spec(&record)?;
        let view = offline::run_view_from_ledger(&self.reader, run_id)?;
        let user_turns = view
            .turns
            .iter()
            .filter(|t| t.origin != TurnOrigin::ResultRetry.as_str())
            .count() as u32;
        if user_turns >= spec.max_turns {
            return Err(DroverError::new(
                ErrorCode::MaxTurns,
                format!(
                    "run {run_id} has used its {} turns; dispatch a new run to go on",
                    spec.max_turns
                ),
            ));
        }
        let mut ring = TranscriptRing::new(
            self.limits().transcript_max_lines,
            self.limits().transcript_max_chars,
        );
        for line in
            offline::transcript_from_ledger(&self.reader, run_id, TranscriptFormat::Tail)?.lines
        {
            ring.push(line);
        }
        let next_seq = self.reader.last_seq(run_id)? + 1;

        let now = self.now();
        let mut run = Run::new(run_id.to_string(), spec, record.budget_session, now, ring);
        run.state = RunState::Interrupted;
        run.created_at = record.created_at;
        run.next_seq = next_seq;
        run.live = record.live_state;
        run.model = record.model;
        run.provider_session_id = Some(session_id.clone());
        run.turns = view.turns.iter().map(Turn::from_view).collect();
        run.tokens = view.tokens;
        run.cost_usd = view.cost_usd;
        run.cost_basis = view.cost_basis;
        run.usage = view.usage;
        run.notes = view.notes;
        run.last_result = view.last_result;
        run.depth = view.depth;
        run.resume = Some(prompt);

        // A full rail queues the resumed run; a full queue refuses it before anything
        // is written.
        let slot = self.slot_of(&run);
        let queued = self
            .queue
            .iter()
            .filter(|id| {
                self.runs
                    .get(*id)
                    .is_some_and(|r| r.session == slot.session)
            })
            .count();
        let admission = rails::admit(self.limits(), &self.holding_slots(), queued, &slot, true);
        if let Admission::Refuse(e) = admission {
            return Err(e);
        }

        let mut batch = Batch::default();
        run.event(
            &mut batch,
            kind::RUN_STATE,
            &json!({"from": "interrupted", "to": "queued", "reason": "resume"}),
            now,
        );
        run.state = RunState::Queued;
        batch.ops.push(WriteOp::UpdateRun {
            run_id: run_id.to_string(),
            patch: Box::new(RunPatch {
                updated_at: now,
                state: Some(RunState::Queued),
                reopened: true,
                ..RunPatch::default()
            }),
        });
        let deadline = run.deadline;
        run.reopen_live(&mut batch, deadline.min(now + PREPARE_BOUND_MS), now);
        // An offer made when the run ended no longer stands (the ledger's view reads the
        // last `escalation_offer` event; an empty one withdraws it).
        run.event(&mut batch, "escalation_offer", &Value::Null, now);
        run.note(
            &mut batch,
            format!("resumed in provider session {session_id}"),
            now,
        );
        if let Admission::Queue(block) = &admission {
            run.note(&mut batch, format!("queued: {}", block.describe()), now);
        }
        run.touch(&mut batch);
        self.runs.insert(run_id.to_string(), run);
        self.order.retain(|id| id != run_id);
        self.order.push(run_id.to_string());
        self.commit(batch);

        match admission {
            Admission::Start => self.launch(run_id, true),
            _ => self.queue.push_back(run_id.to_string()),
        }
        Ok(self.summary_value(run_id))
    }
}

impl Turn {
    /// A turn as the ledger kept it (its origin word read back).
    fn from_view(view: &super::api::TurnView) -> Turn {
        let origin = match view.origin.as_str() {
            "follow_up" => TurnOrigin::FollowUp,
            "result_retry" => TurnOrigin::ResultRetry,
            "resume" => TurnOrigin::Resume,
            _ => TurnOrigin::Dispatch,
        };
        Turn {
            number: view.number,
            origin,
            started_at: view.started_at,
            ended_at: view.ended_at,
            prompt_preview: view.prompt_preview.clone(),
            text: view.text.clone().unwrap_or_default(),
            tokens: view.tokens,
            cost_usd: view.cost_usd,
            result: view.result.clone(),
        }
    }
}
