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
//! `resume` also wakes a hibernated run (`hibernation.rs`) and sends a turn held for the
//! model API again now (`resend.rs`).
//!
//! What must stay true: only an `interrupted` run with a recorded provider session is
//! resumed, on a provider drover can run; nothing is written for a refused resume; the
//! run keeps its id, its turns and its money, and its seqs go on from the ledger's.

use serde_json::Value;

use super::lifecycle::PREPARE_BOUND_MS;
use super::rails::{self, Admission};
use super::run::{Batch, Run, Turn, TurnOrigin};
use super::transcript::TranscriptRing;
use super::{Core, Fetch, ReplyTo, Then, not_found, prompts};
use crate::dispatch::api::Response;
use crate::dispatch::projections;
use crate::dispatch::reads::ResumeData;
use crate::run_state::RunState;
use crate::{DroverError, ErrorCode};

fn not_resumable(run_id: &str, why: impl std::fmt::Display) -> DroverError {
    DroverError::new(ErrorCode::RunNotResumable, format!("run {run_id} {why}"))
}

impl Core {
    /// `resume`: checks what memory can tell, then reads the run from the ledger.
    pub(super) fn resume(&mut self, to: ReplyTo, run_id: &str, text: Option<String>) {
        let prompt = match text {
            Some(text) if !text.trim().is_empty() => text,
            _ => prompts::resume(),
        };
        let max_chars = self.limits().task_max_chars;
        if prompt.chars().count() > max_chars {
            let e = DroverError::new(
                ErrorCode::TaskTooLong,
                format!("the resume prompt is longer than {max_chars} characters; shorten it"),
            );
            return self.reply(to, Err(e));
        }
        // A turn held after the model API failed it: sent again now.
        if self.holds_resend(run_id) {
            self.resend_now(run_id);
            let answer = self.summary_response(run_id);
            return self.reply(to, answer);
        }
        // A hibernated run: woken in its provider session with the resume prompt.
        if self
            .runs
            .get(run_id)
            .is_some_and(|r| r.asleep() && r.wake.is_none() && r.ending.is_none())
        {
            if let Err(e) = self.fit_follow_up(run_id) {
                return self.reply(to, Err(e));
            }
            self.wake(run_id, prompt, TurnOrigin::Resume);
            let answer = self.summary_response(run_id);
            return self.reply(to, answer);
        }
        if let Some(e) = self.in_memory_refusal(run_id) {
            return self.reply(to, Err(e));
        }
        self.load(
            Fetch::Resumable {
                run_id: run_id.to_string(),
            },
            Then::Resume {
                to,
                run_id: run_id.to_string(),
                prompt,
            },
        );
    }

    fn in_memory_refusal(&self, run_id: &str) -> Option<DroverError> {
        let run = self.runs.get(run_id)?;
        Some(not_resumable(
            run_id,
            format!(
                "is {} in this drover; only a run interrupted by a drover restart, a \
                 hibernated run or a turn held for the model API can be resumed (use \
                 follow-up on an idle run)",
                run.state()
            ),
        ))
    }

    /// The run as the ledger has it: rebuilt in memory and launched again.
    pub(super) fn resume_loaded(
        &mut self,
        run_id: &str,
        prompt: String,
        data: ResumeData,
    ) -> Result<Response, DroverError> {
        if self.shutting_down() {
            return Err(super::admission::shutting_down());
        }
        if let Some(e) = self.in_memory_refusal(run_id) {
            return Err(e);
        }
        let ResumeData {
            record,
            view,
            tail,
            last_seq,
            session,
            follow_ups,
        } = data;
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
            .config
            .providers
            .get(&provider)
            .is_some_and(|p| p.enabled);
        if crate::providers::traits(&provider).is_none() || !enabled {
            return Err(DroverError::new(
                ErrorCode::InvalidProvider,
                format!(
                    "run {run_id} ran on {provider}, which is disabled or unknown to this \
                     drover; enable it in the config to resume the run"
                ),
            ));
        }
        let spec = projections::stored_spec(&record)?;
        let user_turns = view
            .turns
            .iter()
            .filter(|t| {
                t.origin != TurnOrigin::ResultRetry.as_str()
                    && t.origin != TurnOrigin::Resend.as_str()
            })
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
        for line in tail {
            ring.push(line);
        }
        self.adopt_session(session);

        let now = self.now;
        let mut run = Run::restored(run_id.to_string(), spec, record.budget_session, now, ring);
        run.created_at = record.created_at;
        run.next_seq = last_seq + 1;
        run.live = record.live_state;
        run.model = record.model;
        run.provider_session_id = Some(session_id.clone());
        run.turns = view.turns.iter().map(Turn::from_view).collect();
        run.tokens = view.tokens;
        run.cost_usd = view.head.cost_usd;
        run.cost_basis = view.cost_basis;
        run.usage = view.usage;
        run.notes = view.notes;
        run.last_result = view.last_result;
        run.depth = view.depth;
        run.resume = Some(prompt);
        // Follow-ups it had queued behind a turn go out after the resume turn, in order.
        run.follow_ups = follow_ups.into();
        // A worktree run goes on in its worktree (checked before the launch).
        if let Some(workspace) = view.workspace.clone() {
            run.workspace = workspace;
        }

        // A full rail queues the resumed run; a full queue refuses it before anything
        // is written.
        let slot = self.slot_of(&run);
        let queued = self.queued_in(&slot.session);
        let admission = rails::admit(self.limits(), &self.holding_slots(), queued, &slot, true);
        if let Admission::Refuse(e) = admission {
            return Err(e);
        }

        let mut batch = Batch::default();
        run.set_state(&mut batch, RunState::Queued, Some("resume"), now);
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
            _ => self.enqueue(run_id),
        }
        self.summary_response(run_id)
    }
}

impl Turn {
    /// A turn as the ledger kept it (its origin word read back).
    fn from_view(view: &crate::dispatch::api::TurnView) -> Turn {
        let origin = match view.origin.as_str() {
            "follow_up" => TurnOrigin::FollowUp,
            "result_retry" => TurnOrigin::ResultRetry,
            "resume" => TurnOrigin::Resume,
            "resend" => TurnOrigin::Resend,
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
