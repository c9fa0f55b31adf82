//! `drover resume RUN [TEXT]` (the dashboard's `R`): a run a restart interrupted goes on
//! in its provider session (docs/ARCHITECTURE.md §"A restart"); a hibernated run wakes
//! there with the user's words; a turn held for the model API is sent again now
//! (`resend.rs`).
//!
//! An interrupted run is put back in its session first — `interrupted` → `idle`,
//! hibernated, its live state reopened (`ended` → `admitted`, the one way out of `ended`,
//! marked as such in its event stream) — and then woken for the turn like any hibernated
//! run (`hibernation.rs`): fitted into its budget session, queued when a rail is full, its
//! worktree checked before its CLI starts in the recorded provider session.
//!
//! What must stay true: drover never speaks for the user. With no words, drover's own
//! resume turn ("drover was restarted during your last turn; continue it") goes only to a
//! run whose turn a restart cut short; any other run is refused with `FOLLOW_UP_NEEDED`
//! and nothing is sent (the dashboard opens its follow-up box instead). Only a run with a
//! recorded provider session is resumed, on a provider drover can run; nothing is written
//! for a refused resume; the run keeps its id, its turns and its money.

use super::run::{Batch, HIBERNATED_DETAIL, TurnOrigin};
use super::{Core, Query, ReplyTo, prompts};
use crate::run_state::RunState;
use crate::{DroverError, ErrorCode};

fn not_resumable(run_id: &str, why: impl std::fmt::Display) -> DroverError {
    DroverError::new(ErrorCode::RunNotResumable, format!("run {run_id} {why}"))
}

impl Core {
    /// `resume`: goes on with an interrupted or hibernated run, or re-sends a held turn.
    pub(super) fn resume(&mut self, to: ReplyTo, run_id: &str, text: Option<String>) {
        let words = text.filter(|t| !t.trim().is_empty());
        let max_chars = self.limits().task_max_chars;
        if words
            .as_ref()
            .is_some_and(|w| w.chars().count() > max_chars)
        {
            let e = DroverError::new(
                ErrorCode::TaskTooLong,
                format!("the resume prompt is longer than {max_chars} characters; shorten it"),
            );
            return self.reply(to, Err(e));
        }
        if let Some(refusal) = self.taken_over_refusal(run_id) {
            return self.reply_now(to, Err(refusal));
        }
        // A turn held after the model API failed it: the user's own turn, sent again now.
        if self.holds_resend(run_id) {
            self.resend_now(run_id);
            let answer = self.summary_response(run_id);
            return self.reply(to, answer);
        }
        let Some(run) = self.runs.get(run_id) else {
            // A finished run, or none: the ledger says which.
            return self.answer_from_ledger(
                to,
                Query::NotActive {
                    run_id: run_id.to_string(),
                },
            );
        };
        let state = run.state();
        let turn_cut = run.turn_cut;
        let carried = !run.carried.is_empty();
        let asleep = state == RunState::Idle
            && run.asleep()
            && run.wake.is_none()
            && run.ending.is_none()
            && run.host_wait.is_none();
        let result = match (state, words) {
            (RunState::Interrupted, Some(words)) => self.resume_interrupted(run_id, words),
            (RunState::Interrupted, None) if turn_cut => {
                self.resume_interrupted(run_id, prompts::resume())
            }
            (RunState::Interrupted, None) => Err(self.follow_up_needed(run_id)),
            // Answers given after a restart that could not be sent for money: the
            // user's words, sent now.
            (RunState::Idle, None) if asleep && carried => {
                self.deliver_carried(run_id);
                Ok(())
            }
            (RunState::Idle, None) if asleep => Err(self.follow_up_needed(run_id)),
            (RunState::Idle, Some(words)) if asleep => self.fit_follow_up(run_id).map(|()| {
                self.wake(run_id, words, TurnOrigin::Resume);
            }),
            (RunState::AwaitingPermission, _) => Err(not_resumable(
                run_id,
                format!(
                    "waits for your answer: `drover show {run_id}` lists the request and \
                     `drover respond {run_id} REQUEST allow|deny` answers it"
                ),
            )),
            (state, _) => Err(not_resumable(
                run_id,
                format!(
                    "is {state} in this drover; only a run interrupted by a restart of \
                     drover, a hibernated run or a turn held for the model API can be \
                     resumed (use follow-up on an idle run)"
                ),
            )),
        };
        let answer = result.and_then(|()| self.summary_response(run_id));
        self.reply(to, answer);
    }

    /// The refusal of `resume` with no words for a run whose turn was not cut short: it
    /// waits for the user's words, which drover does not write for them.
    fn follow_up_needed(&self, run_id: &str) -> DroverError {
        let Some(run) = self.runs.get(run_id) else {
            return super::not_found(run_id);
        };
        let asks = run
            .last_result
            .as_ref()
            .filter(|_| run.needs_input)
            .and_then(|r| r.question.as_deref())
            .map(|q| format!(" (its last result asks: {})", crate::text::clip(q, 120)))
            .unwrap_or_default();
        let what = if run.state() == RunState::Interrupted {
            "was not in a turn when drover was restarted"
        } else {
            "is hibernated between turns"
        };
        DroverError::new(
            ErrorCode::FollowUpNeeded,
            format!(
                "run {run_id} {what}: it waits for your words{asks}, and drover sends none of \
                 its own. Send them with `drover follow-up {run_id} \"…\"` (in the dashboard, \
                 R opens the follow-up box); nothing was sent"
            ),
        )
    }

    /// An interrupted run goes on in its provider session with `prompt`: back to idle
    /// (hibernated, its session kept), then woken for the turn.
    fn resume_interrupted(&mut self, run_id: &str, prompt: String) -> Result<(), DroverError> {
        let now = self.now;
        let Some(run) = self.runs.get(run_id) else {
            return Err(super::not_found(run_id));
        };
        let Some(session_id) = run.provider_session_id.clone() else {
            return Err(not_resumable(
                run_id,
                format!(
                    "was interrupted before its provider reported a session, so there is \
                     nothing to resume; `drover retry {run_id}` starts it again"
                ),
            ));
        };
        let provider = run.spec.provider.clone();
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
        if run.user_turns() >= run.spec.max_turns {
            return Err(DroverError::new(
                ErrorCode::MaxTurns,
                format!(
                    "run {run_id} has used its {} turns; dispatch a new run to go on",
                    run.spec.max_turns
                ),
            ));
        }
        self.fit_follow_up(run_id)?;
        let Some(run) = self.runs.get_mut(run_id) else {
            return Err(super::not_found(run_id));
        };
        let mut batch = Batch::default();
        let bound = now.saturating_add(super::answers::secs_ms(run.spec.idle_timeout_secs));
        run.reopen_live(&mut batch, bound, now);
        run.set_state(&mut batch, RunState::Idle, Some("resume"), now);
        run.hibernated = true;
        run.working(&mut batch, bound, HIBERNATED_DETAIL, now);
        run.note(
            &mut batch,
            format!("resumed in provider session {session_id}"),
            now,
        );
        run.touch(&mut batch);
        self.commit(batch);
        self.wake(run_id, prompt, TurnOrigin::Resume);
        Ok(())
    }
}
