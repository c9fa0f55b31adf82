//! Permission requests and their answers (docs/ARCHITECTURE.md §"Permission prompts"): a
//! request from the provider is flagged by the guard or answered by an approval rule
//! (`rules.rs`), by the run's policy, by an earlier "allow always", or waits for the user;
//! an answer goes to the child, is recorded as a decision, and moves the run's states.
//!
//! A request a restart left pending has no CLI to hear its answer (docs/ARCHITECTURE.md
//! §"A restart"): each answer is kept as a line saying what was asked and how it was
//! answered, and once none is left pending the run is woken in its provider session with
//! one turn carrying them (`prompts::answers`); an "allow" also allows the same use once
//! when the resumed session asks for it again.
//!
//! What must stay true: an answer names the request it answers and lands on that request
//! or nowhere (the broker's rule); the answer is checked against the request's kind before
//! the request leaves the pending list; the run is `awaiting_permission` exactly while a
//! request is pending; a carried allow answers only the same use, once.

use serde_json::Value;

use super::lifecycle::TOOL_BOUND_MS;
use super::run::Batch;
use super::{Core, ReplyTo};
use crate::dispatch::api::DispatchEvent;
use crate::providers::{PermissionAnswer, PermissionRequest, ProviderCommand, RequestKind};
use crate::run_state::RunState;
use crate::spec::PermissionPolicy;
use crate::{DroverError, ErrorCode, UnixMillis};

impl Core {
    /// A request from the provider: answered automatically, or put before the user.
    pub(super) fn on_permission_request(&mut self, run_id: &str, request: PermissionRequest) {
        let now = self.now;
        let permission_ms = secs_ms(self.limits().permission_timeout_secs);
        let question_ms = secs_ms(self.limits().question_timeout_secs);
        // The guard first: a flagged request always goes to the person.
        let flag = match request.kind {
            RequestKind::Permission => self.guard_reason(run_id, &request.ask),
            RequestKind::Question => None,
        };
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        // Asked again by a session resumed after a restart: the user's answer then.
        if run.broker.take_carried(&request) {
            let tool = request.tool.clone();
            return self.answer_request(
                run_id,
                request.request_id,
                PermissionAnswer::Allow { always: false },
                "user",
                &tool,
                CARRIED_ALLOW,
            );
        }
        if flag.is_none()
            && request.kind == RequestKind::Permission
            && run.spec.policy == PermissionPolicy::Ask
            && let Some(rule) = self.rule_for(run_id, &request.ask)
        {
            return self.answer_by_rule(run_id, request, &rule);
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        // Policies other than `ask` are enforced by the provider's own mode; a request that
        // still arrives is answered by the policy, not shown (a flagged one is shown under
        // `auto` too).
        let automatic = match run.spec.policy {
            PermissionPolicy::Ask if flag.is_none() && run.broker.allowed_always(&request) => {
                Some((PermissionAnswer::Allow { always: true }, "always"))
            }
            PermissionPolicy::Ask => None,
            PermissionPolicy::Auto if flag.is_some() => None,
            PermissionPolicy::Auto if request.kind == RequestKind::Permission => {
                Some((PermissionAnswer::Allow { always: false }, "policy"))
            }
            _ => Some((
                PermissionAnswer::Deny {
                    message: Some(format!(
                        "the {} policy does not allow this without asking",
                        run.spec.policy.as_str()
                    )),
                },
                "policy",
            )),
        };
        if let Some((answer, who)) = automatic {
            let how = describe_answer(&answer);
            let tool = request.tool.clone();
            return self.answer_request(run_id, request.request_id, answer, who, &tool, &how);
        }
        let tool = request.tool.clone();
        let kind = request.kind;
        let mut batch = Batch::default();
        let request_id = request.request_id.clone();
        let Some(mut pending) = run
            .broker
            .add(request, now, permission_ms, question_ms)
            .cloned()
        else {
            return;
        };
        if let Some(reason) = flag {
            run.broker.flag(&request_id, reason.clone());
            pending.guard = Some(reason);
        }
        let view = run.pending_view(&pending);
        run.event(&mut batch, "permission_requested", &view, now);
        batch.events.push(DispatchEvent::PermissionRequested {
            run_id: run_id.to_string(),
            pending: view,
        });
        if run.state() != RunState::AwaitingPermission {
            run.set_state(&mut batch, RunState::AwaitingPermission, None, now);
        } else {
            run.touch(&mut batch);
        }
        let detail = match kind {
            RequestKind::Permission => format!("waiting for your answer: {tool}"),
            RequestKind::Question => "waiting for your answer to a question".to_string(),
        };
        let bound = run.broker.next_expiry().unwrap_or(pending.expires_at);
        run.working(&mut batch, bound, &detail, now);
        self.commit(batch);
    }

    /// `respond`: the user's answer to one pending request.
    pub(super) fn respond(
        &mut self,
        to: ReplyTo,
        run_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
    ) {
        let result = self.take_answer(run_id, request_id, answer);
        let result = result.and_then(|()| self.summary_response(run_id));
        match result {
            Err(e) if e.code == ErrorCode::RunNotFound && !self.runs.contains_key(run_id) => self
                .answer_from_ledger(
                    to,
                    super::Query::NotActive {
                        run_id: run_id.to_string(),
                    },
                ),
            other => self.reply(to, other),
        }
    }

    pub(super) fn take_answer(
        &mut self,
        run_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
    ) -> Result<(), DroverError> {
        let Some(run) = self.runs.get_mut(run_id) else {
            return Err(super::not_found(run_id));
        };
        if !run.state().is_active() || run.ending.is_some() {
            return Err(super::not_active(run_id, run.state()));
        }
        // Check the answer fits the request before taking it off the list.
        if let Some(p) = run
            .broker
            .pending()
            .iter()
            .find(|p| p.request.request_id == request_id)
        {
            let fits = matches!(
                (p.request.kind, &answer),
                (RequestKind::Permission, PermissionAnswer::Allow { .. })
                    | (_, PermissionAnswer::Deny { .. })
                    | (RequestKind::Question, PermissionAnswer::Answer { .. })
                    | (RequestKind::Question, PermissionAnswer::Allow { .. })
            );
            if !fits {
                return Err(DroverError::new(
                    ErrorCode::InvalidSpec,
                    format!(
                        "request {request_id} asks for permission: answer allow, always or \
                         deny (answers are for questions)"
                    ),
                ));
            }
        }
        let pending = run.broker.take_for_answer(request_id)?;
        // A flagged request is allowed once at most: "always" is not remembered for it.
        if matches!(answer, PermissionAnswer::Allow { always: true }) && pending.guard.is_none() {
            run.broker.remember_always(&pending.request);
        }
        carry(run, &pending.request, &answer, "user");
        let tool = pending.request.tool.clone();
        let how = describe_answer(&answer);
        self.answer_request(
            run_id,
            pending.request.request_id.clone(),
            answer,
            "user",
            &tool,
            &how,
        );
        Ok(())
    }

    /// Sends an answer to the child, records the decision and updates the run's states.
    pub(super) fn answer_request(
        &mut self,
        run_id: &str,
        request_id: String,
        answer: PermissionAnswer,
        who: &str,
        tool: &str,
        how: &str,
    ) {
        let now = self.now;
        // The answer goes to the provider as given; its record is redacted.
        let how = self.redactor.redact(how).into_owned();
        let mut recorded = serde_json::to_value(&answer).unwrap_or(Value::Null);
        self.redactor.redact_json(&mut recorded);
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let has_child = run.child.is_some();
        let mut batch = Batch::default();
        run.record_resolution(&mut batch, request_id.clone(), who, &how, recorded, now);
        if run.broker.is_empty() && run.state() == RunState::AwaitingPermission && run.hibernated {
            // Put back after a restart: no CLI heard the requests; the answers go to the
            // run's session in one turn.
            run.touch(&mut batch);
            self.commit(batch);
            return self.deliver_carried(run_id);
        }
        if run.broker.is_empty() && run.state() == RunState::AwaitingPermission {
            run.set_state(&mut batch, RunState::Running, None, now);
            let allowed = !matches!(answer, PermissionAnswer::Deny { .. });
            let (bound, detail) = if allowed {
                (now + TOOL_BOUND_MS, format!("running a tool: {tool}"))
            } else {
                (run.deadline, "model turn".to_string())
            };
            let bound = bound.min(run.deadline);
            run.working(&mut batch, bound, &detail, now);
        } else {
            run.touch(&mut batch);
        }
        if has_child {
            self.send(run_id, ProviderCommand::Answer { request_id, answer });
        }
        self.commit(batch);
    }

    /// Denies every request of the run whose time is up. Returns whether any was.
    pub(super) fn deny_expired(&mut self, run_id: &str) -> bool {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return false;
        };
        let expired = run.broker.take_expired(now);
        let any = !expired.is_empty();
        for p in expired {
            // The time it had (a request shown again after a restart had it again).
            let timeout = match p.request.kind {
                RequestKind::Permission => self.limits().permission_timeout_secs,
                RequestKind::Question => self.limits().question_timeout_secs,
            };
            let within = crate::text::duration_words(secs_ms(timeout));
            let answer = PermissionAnswer::Deny {
                message: Some(format!("no answer within {within}")),
            };
            if let Some(run) = self.runs.get_mut(run_id) {
                carry(run, &p.request, &answer, "timeout");
            }
            let how = format!("deny: no answer within {within}");
            self.answer_request(
                run_id,
                p.request.request_id,
                answer,
                "timeout",
                &p.request.tool,
                &how,
            );
        }
        any
    }
}

impl Core {
    /// Tells a run put back after a restart the answers to what it asked: idle again, it
    /// is woken in its provider session with one turn carrying them. When its budget
    /// session has nothing left for the turn, the answers stay kept (a note says so) and
    /// `resume` sends them later.
    pub(super) fn deliver_carried(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.carried.is_empty() {
            return;
        }
        let mut batch = Batch::default();
        if run.state() == RunState::AwaitingPermission {
            run.set_state(&mut batch, RunState::Idle, Some("answered"), now);
            let bound = now.saturating_add(secs_ms(run.spec.idle_timeout_secs));
            run.working(&mut batch, bound, super::run::HIBERNATED_DETAIL, now);
        }
        self.commit(batch);
        if let Err(e) = self.fit_follow_up(run_id) {
            if let Some(run) = self.runs.get_mut(run_id) {
                let mut batch = Batch::default();
                run.note(
                    &mut batch,
                    format!(
                        "your answers are kept, but the turn that tells the run was not sent                          ({}); `drover resume {run_id}` sends it",
                        e.message
                    ),
                    now,
                );
                self.commit(batch);
            }
            return;
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let prompt = super::prompts::answers(&std::mem::take(&mut run.carried));
        self.wake(run_id, prompt, super::run::TurnOrigin::Resume);
    }
}

/// How a request asked again by a session resumed after a restart reads when the user's
/// answer of the same use before it allows it.
pub const CARRIED_ALLOW: &str = "allow (answered before drover was restarted)";

/// Keeps an answer to a request no CLI heard (a run put back after a restart) for the
/// turn that tells the run's session; an allow is carried to it too.
fn carry(
    run: &mut super::run::Run,
    request: &PermissionRequest,
    answer: &PermissionAnswer,
    who: &str,
) {
    if !run.hibernated || run.state() != RunState::AwaitingPermission {
        return;
    }
    run.carried
        .push(super::prompts::answered(request, answer, who));
    if matches!(answer, PermissionAnswer::Allow { .. }) {
        run.broker.carry_allow(request);
    }
}

/// Seconds from config as milliseconds, saturating (never a wrapped, negative bound).
pub(super) fn secs_ms(secs: u64) -> UnixMillis {
    crate::clock::secs_millis(secs)
}

/// How an answer reads in the ledger and the transcript.
pub fn describe_answer(answer: &PermissionAnswer) -> String {
    match answer {
        PermissionAnswer::Allow { always: false } => "allow".into(),
        PermissionAnswer::Allow { always: true } => "allow always".into(),
        PermissionAnswer::Deny { message: None } => "deny".into(),
        PermissionAnswer::Deny { message: Some(m) } => format!("deny: {m}"),
        PermissionAnswer::Answer { answers } => format!(
            "answer: {}",
            answers
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
