//! Client requests: each is checked, applied to run state, committed, then answered.
//!
//! What must stay true: a refused request changes nothing (nothing is created for a
//! refused dispatch); an accepted one is answered only after its writes are committed.

use serde_json::{Value, json};

use super::Reply;
use super::actor::Actor;
use super::api::{DispatchEvent, Request, TranscriptFormat};
use super::rails::{self, Admission};
use super::run::{Batch, Run, TurnOrigin};
use super::transcript::TranscriptRing;
use crate::control::offline;
use crate::ledger::{RunPatch, RunRecord, WriteOp, kind};
use crate::live_state::{Cause, LiveStateKind};
use crate::providers::{PermissionAnswer, ProviderCommand, RequestKind};
use crate::run_state::RunState;
use crate::spec::{self, PermissionPolicy, ProviderInfo, SpecInput, ValidationContext};
use crate::{DroverError, ErrorCode};

/// Providers drover can run today.
pub const RUNNABLE: &[&str] = &["claude-code", "codex", "sim", "opencode"];
/// Used when a dispatch names no provider.
const DEFAULT_PROVIDER: &str = "claude-code";
/// The budget session runs belong to until budget sessions land.
pub const DEFAULT_SESSION: &str = "default";
/// The longest a `wait` may block.
pub const WAIT_CAP_SECS: u64 = 3_600;

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, DroverError> {
    serde_json::to_value(v).map_err(|e| DroverError::new(ErrorCode::Internal, e.to_string()))
}

pub fn not_found(run_id: &str) -> DroverError {
    DroverError::new(
        ErrorCode::RunNotFound,
        format!("no run {run_id}; list runs with `drover runs`"),
    )
}

fn not_active(run_id: &str, state: RunState) -> DroverError {
    DroverError::new(
        ErrorCode::RunNotActive,
        format!("run {run_id} is {state}, not active; dispatch a new run instead"),
    )
}

impl Actor {
    pub fn handle_request(&mut self, request: Request, reply: Reply) {
        if self.shutdown_deadline.is_some() && !matches!(request, Request::Ping) {
            let _ = reply.send(Err(DroverError::new(
                ErrorCode::Internal,
                "drover is shutting down; start it again to act on runs",
            )));
            return;
        }
        let answer = match request {
            Request::Ping => Ok(json!({"pong": true, "pid": std::process::id()})),
            Request::Dispatch { spec } => return self.dispatch(*spec, reply),
            Request::Runs {
                state,
                include_removed,
            } => self.list_runs(state, include_removed),
            Request::Show { run_id } => self.show(&run_id),
            Request::Transcript { run_id, format } => self.transcript(&run_id, format),
            Request::FollowUp { run_id, text } => self.follow_up(&run_id, text),
            Request::Resume { run_id, text } => self.resume(&run_id, text),
            Request::Respond {
                run_id,
                request_id,
                answer,
            } => self.respond(&run_id, &request_id, answer),
            Request::Stop { run_id } => {
                self.end_if_active(&run_id, RunState::Stopped, "user", Cause::Stopped)
            }
            Request::Complete { run_id } => self.complete(&run_id),
            Request::Remove { run_id, finished } => self.remove(run_id.as_deref(), finished),
            Request::KillAll => {
                let active: Vec<String> = self
                    .order
                    .iter()
                    .filter(|id| self.runs.get(*id).is_some_and(|r| r.state.is_active()))
                    .cloned()
                    .collect();
                for id in &active {
                    self.end_run(id, RunState::Stopped, "user", Cause::Stopped);
                }
                Ok(json!({"stopped": active}))
            }
            Request::Wait {
                run_ids,
                until,
                any,
                timeout_secs,
            } => return self.register_wait(run_ids, until, any, timeout_secs, reply),
            Request::Subscribe { .. } => Ok(json!({"subscribed": true})),
            Request::Budget => self.budget_view().and_then(|b| to_value(&b)),
            Request::BudgetSet {
                warning_usd,
                hard_cap_usd,
            } => self.budget_set(warning_usd, hard_cap_usd),
            Request::BudgetNew { name } => self.budget_new(name),
            Request::Routes => Ok(self.open_routes()),
            Request::Route {
                run_id,
                option,
                remember,
            } => self.pick_route(&run_id, option, remember),
            Request::RouteDecline { run_id } => self.decline_route(&run_id),
            Request::Escalate {
                run_id,
                provider,
                model,
            } => self.escalate(
                &run_id,
                crate::route::EscalationKind::Escalate,
                provider,
                model,
            ),
            Request::Retry { run_id } => {
                self.escalate(&run_id, crate::route::EscalationKind::Retry, None, None)
            }
        };
        self.reply_after_commit(reply, answer);
    }

    fn end_if_active(
        &mut self,
        run_id: &str,
        state: RunState,
        reason: &str,
        cause: Cause,
    ) -> Result<Value, DroverError> {
        self.active_run(run_id)?;
        self.end_run(run_id, state, reason, cause);
        Ok(self.summary_value(run_id))
    }

    /// Ends an idle run as complete; a run still in a turn (or not started) is refused.
    fn complete(&mut self, run_id: &str) -> Result<Value, DroverError> {
        let run = self.active_run(run_id)?;
        if run.state != RunState::Idle || run.turn_in_flight {
            return Err(DroverError::new(
                ErrorCode::RunNotIdle,
                format!(
                    "run {run_id} is {}, not idle; wait for it with `drover wait {run_id} \
                     --until idle`, or end it now with `drover stop {run_id}`",
                    run.state
                ),
            ));
        }
        self.end_run(run_id, RunState::Completed, "complete", Cause::Completed);
        Ok(self.summary_value(run_id))
    }

    /// A run's summary as JSON (null when it is not in memory).
    pub fn summary_value(&self, run_id: &str) -> Value {
        self.runs
            .get(run_id)
            .and_then(|r| serde_json::to_value(r.summary()).ok())
            .unwrap_or(Value::Null)
    }

    /// The run, if it exists and is active; otherwise the right refusal.
    fn active_run(&self, run_id: &str) -> Result<&Run, DroverError> {
        match self.runs.get(run_id) {
            Some(run) if run.state.is_active() && run.ending.is_none() => Ok(run),
            Some(run) => Err(not_active(run_id, run.state)),
            None => match self.reader.run(run_id) {
                Ok(Some(record)) => Err(not_active(run_id, record.state)),
                _ => Err(not_found(run_id)),
            },
        }
    }

    fn provider_infos(&self) -> Vec<ProviderInfo> {
        self.config()
            .providers
            .iter()
            .filter(|(name, _)| RUNNABLE.contains(&name.as_str()))
            .map(|(name, p)| ProviderInfo {
                name: name.clone(),
                enabled: p.enabled,
                policies: PermissionPolicy::ALL.to_vec(),
            })
            .collect()
    }

    fn dispatch(&mut self, input: SpecInput, reply: Reply) {
        match self.admit(input) {
            Ok(summary) => self.reply_after_commit(reply, Ok(summary)),
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    /// Validates and creates a run. Returns the run's summary.
    pub fn admit(&mut self, input: SpecInput) -> Result<Value, DroverError> {
        let now = self.now();
        if let Some(name) = input.provider.as_deref().map(str::trim)
            && !name.is_empty()
            && !RUNNABLE.contains(&name)
            && self.config().providers.contains_key(name)
        {
            return Err(DroverError::new(
                ErrorCode::InvalidProvider,
                format!(
                    "drover cannot run {name} yet (its adapter has not landed); use one of: {}",
                    RUNNABLE.join(", ")
                ),
            ));
        }
        if let Some(key) = input.idempotency_key.as_deref().filter(|k| !k.is_empty()) {
            let since = now - self.limits().idempotency_window_secs as i64 * 1000;
            if let Some(run) = self
                .runs
                .values()
                .find(|r| r.spec.idempotency_key.as_deref() == Some(key) && r.created_at >= since)
            {
                return to_value(&run.summary());
            }
            if let Some(record) = self.reader.run_by_idempotency_key(key, since)? {
                return to_value(&offline::summary_from_record(&self.reader, &record)?);
            }
        }
        self.refresh_config(false);
        let wants_route = super::routes::wants_route(&input);
        let mut input = input;
        if wants_route {
            // Validation must not read "auto" as a model name.
            input.model = None;
        }
        let providers = self.provider_infos();
        let current_dir = std::env::current_dir().unwrap_or_else(|_| "/".into());
        let dir_exists = |p: &std::path::Path| p.is_dir();
        let ctx = ValidationContext {
            limits: self.limits(),
            providers: &providers,
            default_provider: DEFAULT_PROVIDER,
            current_dir: &current_dir,
            dir_exists: &dir_exists,
            models: &self.money().catalog,
        };
        let mut spec = spec::validate(&input, &ctx)?;
        let session = self.current_session();
        let mut notes: Vec<String> = spec
            .clamps
            .iter()
            .map(|c| format!("clamped: {c}"))
            .collect();
        let mut hold = None;
        if wants_route {
            if input
                .provider
                .as_deref()
                .is_none_or(|p| p.trim().is_empty())
            {
                // Route across providers, not only the default one.
                spec.provider = String::new();
            }
            match self.route_spec(&input, &mut spec, &session)? {
                super::routes::Routed::Proceed(route_notes) => notes.extend(route_notes),
                super::routes::Routed::Hold(card, route_notes) => {
                    notes.extend(route_notes);
                    if spec.provider.is_empty()
                        && let Some(first) = card.options.first()
                    {
                        spec.provider = first.provider.clone();
                    }
                    hold = Some(card);
                }
            }
        }
        if spec.model.is_none() && hold.is_none() {
            let (model, note) = self.default_model(&spec.provider);
            spec.model = model;
            notes.extend(note);
        }
        // A held run takes no slot and no money until its route is decided.
        let admission = if hold.is_some() {
            Admission::Queue(rails::RailBlock::Session {
                session: session.clone(),
                limit: 0,
            })
        } else {
            let slot = rails::RailSlot {
                account: self
                    .config()
                    .providers
                    .get(&spec.provider)
                    .and_then(|p| rails::account_of(&spec.provider, &p.env)),
                provider: spec.provider.clone(),
                session: session.clone(),
                workflow: spec.workflow_id.clone(),
            };
            let queued_in_session = self
                .queue
                .iter()
                .filter(|id| self.runs.get(*id).is_some_and(|r| r.session == session))
                .count();
            rails::admit(
                self.limits(),
                &self.holding_slots(),
                queued_in_session,
                &slot,
                spec.queue_if_busy,
            )
        };
        if let Admission::Refuse(e) = admission {
            return Err(e);
        }
        if hold.is_none() {
            let (cap, fit_notes) = self.fit_run(
                &session,
                &spec.provider,
                spec.model.as_deref(),
                spec.budget_usd,
            )?;
            if cap != spec.budget_usd {
                spec.clamps.push(spec::Clamp {
                    field: "budget_usd".into(),
                    requested: spec.budget_usd.to_string(),
                    applied: format!("{cap:.2}"),
                });
                spec.budget_usd = cap;
            }
            notes.extend(fit_notes);
        }
        let id = self.new_run_id();
        let ring = TranscriptRing::new(
            self.limits().transcript_max_lines,
            self.limits().transcript_max_chars,
        );
        let mut run = Run::new(id.clone(), spec, session, now, ring);
        let mut batch = Batch::default();
        batch.ops.push(WriteOp::InsertRun(Box::new(RunRecord {
            run_id: id.clone(),
            created_at: now,
            updated_at: now,
            finished_at: None,
            state: RunState::Queued,
            completion_reason: None,
            provider: run.spec.provider.clone(),
            model: run.model.clone(),
            title: run.spec.title.clone(),
            budget_session: run.session.clone(),
            workflow_id: run.spec.workflow_id.clone(),
            parent_run: run.spec.parent_run.clone(),
            idempotency_key: run.spec.idempotency_key.clone(),
            provider_session_id: None,
            removed: false,
            spec: to_value(&run.spec)?,
            live_state: None,
            result: None,
        })));
        run.event(
            &mut batch,
            kind::RUN_STATE,
            &json!({"from": null, "to": "queued", "reason": "dispatched"}),
            now,
        );
        let deadline = run.deadline;
        run.set_live(
            &mut batch,
            LiveStateKind::Admitted,
            Some(deadline),
            None,
            None,
            now,
        );
        for note in notes {
            run.note(&mut batch, note, now);
        }
        if let Admission::Queue(block) = &admission
            && hold.is_none()
        {
            run.note(&mut batch, format!("queued: {}", block.describe()), now);
        }
        run.touch(&mut batch);
        self.runs.insert(id.clone(), run);
        self.order.push(id.clone());
        self.commit(batch);
        match (hold, admission) {
            (Some(card), _) => self.hold(&id, card),
            (None, Admission::Start) => self.launch(&id, false),
            (None, _) => self.queue.push_back(id.clone()),
        }
        // The answer shows where the run is now: starting, or queued.
        Ok(self.summary_value(&id))
    }

    fn list_runs(
        &self,
        state: Option<RunState>,
        include_removed: bool,
    ) -> Result<Value, DroverError> {
        let mut rows: Vec<_> = self
            .order
            .iter()
            .rev()
            .filter_map(|id| self.runs.get(id))
            .map(Run::summary)
            .collect();
        rows.extend(
            offline::run_summaries_from_ledger(&self.reader, None, include_removed)?
                .into_iter()
                .filter(|r| !self.runs.contains_key(&r.run_id)),
        );
        rows.retain(|r| state.is_none_or(|s| r.state == s));
        rows.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then(b.run_id.cmp(&a.run_id))
        });
        to_value(&rows)
    }

    fn show(&self, run_id: &str) -> Result<Value, DroverError> {
        match self.runs.get(run_id) {
            Some(run) => to_value(&run.view()),
            None => to_value(&offline::run_view_from_ledger(&self.reader, run_id)?),
        }
    }

    fn transcript(&self, run_id: &str, format: TranscriptFormat) -> Result<Value, DroverError> {
        // The ring is in memory; everything else is in the ledger, committed turn by turn.
        match self.runs.get(run_id) {
            Some(run) if format == TranscriptFormat::Tail => to_value(&offline::TranscriptView {
                run_id: run_id.to_string(),
                format,
                lines: run.transcript.lines().cloned().collect(),
                events: Vec::new(),
                result: None,
            }),
            _ => to_value(&offline::transcript_from_ledger(
                &self.reader,
                run_id,
                format,
            )?),
        }
    }

    fn follow_up(&mut self, run_id: &str, text: String) -> Result<Value, DroverError> {
        self.refresh_config(false);
        if text.trim().is_empty() {
            return Err(DroverError::new(
                ErrorCode::TaskRequired,
                "the follow-up is empty; say what the run should do next",
            ));
        }
        let max_chars = self.limits().task_max_chars;
        if text.chars().count() > max_chars {
            return Err(DroverError::new(
                ErrorCode::TaskTooLong,
                format!("the follow-up is longer than {max_chars} characters; shorten it"),
            ));
        }
        let now = self.now();
        let run = self.active_run(run_id)?;
        let planned = run.user_turns() + run.follow_ups.len() as u32;
        if planned >= run.spec.max_turns {
            return Err(DroverError::new(
                ErrorCode::MaxTurns,
                format!(
                    "run {run_id} has used its {} turns; dispatch a new run to go on",
                    run.spec.max_turns
                ),
            ));
        }
        let idle = run.state == RunState::Idle && !run.turn_in_flight;
        if idle {
            self.start_turn(run_id, text, TurnOrigin::FollowUp);
        } else if let Some(run) = self.runs.get_mut(run_id) {
            let mut batch = Batch::default();
            run.follow_ups.push_back(text);
            run.note(
                &mut batch,
                "follow-up queued until the current turn ends",
                now,
            );
            run.touch(&mut batch);
            self.commit(batch);
        }
        Ok(self.summary_value(run_id))
    }

    fn respond(
        &mut self,
        run_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
    ) -> Result<Value, DroverError> {
        self.active_run(run_id)?;
        let now = self.now();
        let Some(run) = self.runs.get_mut(run_id) else {
            return Err(not_found(run_id));
        };
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
        if matches!(answer, PermissionAnswer::Allow { always: true }) {
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
            now,
        );
        Ok(self.summary_value(run_id))
    }

    /// Sends an answer to the child, records the decision and updates the run's states.
    #[allow(clippy::too_many_arguments)]
    pub fn answer_request(
        &mut self,
        run_id: &str,
        request_id: String,
        answer: PermissionAnswer,
        who: &str,
        tool: &str,
        how: &str,
        now: crate::UnixMillis,
    ) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if let Some(adapter) = &run.adapter {
            let _ = adapter.commands.send(ProviderCommand::Answer {
                request_id: request_id.clone(),
                answer: answer.clone(),
            });
        }
        let mut batch = Batch::default();
        run.record_resolution(
            &mut batch,
            request_id,
            who,
            how,
            serde_json::to_value(&answer).unwrap_or(Value::Null),
            now,
        );
        if run.broker.is_empty() && run.state == RunState::AwaitingPermission {
            run.set_state(&mut batch, RunState::Running, None, now);
            let allowed = !matches!(answer, PermissionAnswer::Deny { .. });
            let (bound, detail) = if allowed {
                (
                    now + super::lifecycle::TOOL_BOUND_MS,
                    format!("running a tool: {tool}"),
                )
            } else {
                (run.deadline, "model turn".to_string())
            };
            let bound = bound.min(run.deadline);
            run.set_live(
                &mut batch,
                LiveStateKind::Working,
                Some(bound),
                Some(&detail),
                None,
                now,
            );
        } else {
            run.touch(&mut batch);
        }
        self.commit(batch);
    }

    fn remove(&mut self, run_id: Option<&str>, finished: bool) -> Result<Value, DroverError> {
        let now = self.now();
        let targets: Vec<String> = match (run_id, finished) {
            (Some(id), _) => {
                match self.runs.get(id) {
                    Some(run) if run.state.is_active() => {
                        return Err(DroverError::new(
                            ErrorCode::RunNotActive,
                            format!(
                                "run {id} is still {}; stop it first, then remove it",
                                run.state
                            ),
                        ));
                    }
                    Some(_) => {}
                    None => match self.reader.run(id)? {
                        Some(r) if r.state.is_active() => return Err(not_active(id, r.state)),
                        Some(_) => {}
                        None => return Err(not_found(id)),
                    },
                }
                vec![id.to_string()]
            }
            (None, true) => {
                let mut ids: Vec<String> = self
                    .runs
                    .values()
                    .filter(|r| r.state.is_terminal())
                    .map(|r| r.id.clone())
                    .collect();
                ids.extend(
                    self.reader
                        .runs(false)?
                        .into_iter()
                        .filter(|r| r.state.is_terminal() && !self.runs.contains_key(&r.run_id))
                        .map(|r| r.run_id),
                );
                ids
            }
            (None, false) => {
                return Err(DroverError::new(
                    ErrorCode::InvalidSpec,
                    "name a run to remove, or pass --finished to remove every finished run",
                ));
            }
        };
        let mut batch = Batch::default();
        for id in &targets {
            batch.ops.push(WriteOp::UpdateRun {
                run_id: id.clone(),
                patch: Box::new(RunPatch {
                    updated_at: now,
                    removed: Some(true),
                    ..RunPatch::default()
                }),
            });
            batch
                .events
                .push(DispatchEvent::RunRemoved { run_id: id.clone() });
            self.runs.remove(id);
        }
        self.order.retain(|id| !targets.contains(id));
        self.commit(batch);
        Ok(json!({"removed": targets}))
    }
}

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
