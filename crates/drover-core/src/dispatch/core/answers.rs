//! Permission requests and their answers (docs/ARCHITECTURE.md §"Permission prompts"): a
//! request from the provider is flagged by the guard or answered by an approval rule
//! (`rules.rs`), by the run's policy, by an earlier "allow always", or waits for the user;
//! an answer goes to the child, is recorded as a decision, and moves the run's states.
//!
//! What must stay true: an answer names the request it answers and lands on that request
//! or nowhere (the broker's rule); the answer is checked against the request's kind before
//! the request leaves the pending list; the run is `awaiting_permission` exactly while a
//! request is pending.

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
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
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
            let within = crate::text::duration_words(p.expires_at - p.created_at);
            let answer = PermissionAnswer::Deny {
                message: Some(format!("no answer within {within}")),
            };
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
