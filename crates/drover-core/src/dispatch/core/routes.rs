//! Route cards and escalation in the dispatcher (docs/ARCHITECTURE.md
//! §"Routing and route cards"): a dispatch without a model is routed — held behind a route
//! card (`ask`), taken at once (`auto`), or held only above a threshold (`ask-above`); a
//! pick is validated before it is accepted; a run that failed or ended blocked is offered
//! an escalation (or a retry).
//!
//! What must stay true: the decisions are `crate::route`'s; a refused pick leaves the card
//! open with its reason; every decision is in the ledger; a held run's card closes with
//! the run.

use serde_json::{Value, json};

use super::Core;
use super::rails::Admission;
use super::run::{Batch, Run};
use crate::dispatch::api::{OpenRoute, Response, RouteCardView};
use crate::ledger::{DecisionRecord, WriteOp};
use crate::live_state::{Cause, LiveStateKind};
use crate::route::{
    self, EscalationKind, ProviderAvailability, RouteDecision, RouteOption, RoutingPolicy,
    RunOutcome, TaskClass,
};
use crate::run_state::RunState;
use crate::spec::{Effort, Spec, SpecInput};
use crate::{DroverError, ErrorCode, UnixMillis};

/// What routing decided for a new run.
pub enum Routed {
    /// The spec names its model (or routing took one): go on to admission.
    Proceed(Vec<String>),
    /// Hold the run behind this card.
    Hold(RouteCardView, Vec<String>),
}

/// The ledger meta key holding a remembered route for a task class.
pub fn memory_key(class: TaskClass) -> String {
    format!("route_memory.{}", class.as_str())
}

/// Whether a dispatch asks to be routed: `--model auto`, or neither provider nor model.
pub fn wants_route(input: &SpecInput) -> bool {
    let blank = |v: &Option<String>| v.as_deref().is_none_or(|s| s.trim().is_empty());
    let auto = input
        .model
        .as_deref()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("auto"));
    auto || (blank(&input.model) && blank(&input.provider))
}

fn apply_option(spec: &mut Spec, option: &RouteOption) {
    spec.provider = option.provider.clone();
    spec.model = Some(option.model.clone());
    if let Some(effort) = option.effort.as_deref().and_then(Effort::from_word) {
        spec.effort = Some(effort);
    }
}

impl Core {
    /// Providers routing may offer, with the reason each one left out is left out. A
    /// provider offered only when named (the simulated agent) is left out otherwise.
    pub(super) fn routing_providers(&self, named: Option<&str>) -> Vec<ProviderAvailability> {
        self.config
            .providers
            .iter()
            .filter(|(name, _)| named.is_none_or(|n| n == name.as_str()))
            .map(|(name, p)| {
                let traits = crate::providers::traits(name);
                let reason = match traits {
                    _ if !p.enabled => Some("disabled in the config".to_string()),
                    None => Some("drover has no adapter for it".to_string()),
                    Some(t) if t.only_when_named && named.is_none() => Some(format!(
                        "{name} is offered only when named (--provider {name})"
                    )),
                    Some(t)
                        if t.needs_cli && !self.facts.cli_found(&cli_command(t, &p.command)) =>
                    {
                        Some(format!(
                            "its CLI (`{}`) is not installed",
                            cli_command(t, &p.command)
                        ))
                    }
                    Some(_) => None,
                };
                ProviderAvailability {
                    name: name.clone(),
                    available: reason.is_none(),
                    reason,
                }
            })
            .collect()
    }

    /// Routes a spec that asked for it: a remembered choice, the recommended option, or
    /// a route card.
    pub(super) fn route_spec(
        &mut self,
        input: &SpecInput,
        spec: &mut Spec,
        session: &str,
    ) -> Result<Routed, DroverError> {
        let mut notes = Vec::new();
        let class = route::classify(spec);
        spec.class = Some(class.as_str().to_string());
        let named = input.provider.as_deref().filter(|p| !p.trim().is_empty());
        let providers = self.routing_providers(named);
        let rules = RoutingPolicy::embedded();
        let routing = route::route(spec, class, &self.money.catalog, &providers, &rules);
        if routing.options.is_empty() {
            let why: Vec<String> = routing
                .left_out
                .iter()
                .map(|l| format!("{}: {}", l.provider, l.reason))
                .collect();
            return Err(DroverError::new(
                ErrorCode::NoRoute,
                format!(
                    "no provider can take this {} task ({}); install a provider CLI or name \
                     --provider and --model",
                    class.as_str(),
                    why.join("; ")
                ),
            ));
        }
        if let Some(memory) = self.route_memory.get(class.as_str()).cloned()
            && let Some(option) = routing
                .options
                .iter()
                .find(|o| format!("{}/{}", o.provider, o.model) == memory)
        {
            apply_option(spec, option);
            notes.push(format!(
                "route remembered for {} tasks: {memory}",
                class.as_str()
            ));
            return Ok(Routed::Proceed(notes));
        }
        let recommended = &routing.options[0];
        match route::decide(&self.config.routing, class, recommended) {
            RouteDecision::Take => {
                apply_option(spec, recommended);
                notes.push(format!(
                    "route decided automatically: {}/{}",
                    recommended.provider, recommended.model
                ));
                Ok(Routed::Proceed(notes))
            }
            RouteDecision::Hold => {
                let held = self
                    .runs
                    .values()
                    .filter(|r| r.session == session && r.state() == RunState::AwaitingRoute)
                    .count() as u32;
                if held >= self.limits().held_per_session {
                    return Err(DroverError::new(
                        ErrorCode::HeldFull,
                        format!(
                            "{held} runs already wait on route cards in budget session \
                             {session} (the limit); pick or decline some with `drover routes`"
                        ),
                    ));
                }
                let now = self.now;
                let expiry = super::answers::secs_ms(self.config.routing.card_expiry_secs);
                let card = RouteCardView {
                    route_id: String::new(),
                    class: class.as_str().to_string(),
                    status: "open".into(),
                    options: routing.options,
                    left_out: routing.left_out,
                    created_at: now,
                    expires_at: now + expiry,
                    decided_by: None,
                    decided_at: None,
                    refused: None,
                };
                Ok(Routed::Hold(card, notes))
            }
        }
    }

    /// Puts a new run behind its route card.
    pub(super) fn hold(&mut self, run_id: &str, mut card: RouteCardView) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        card.route_id = format!("route-{run_id}");
        let mut batch = Batch::default();
        run.event(&mut batch, "route", &card, now);
        let expires = card.expires_at;
        run.route = Some(card);
        run.set_state(&mut batch, RunState::AwaitingRoute, None, now);
        run.set_live(
            &mut batch,
            LiveStateKind::Admitted,
            Some(expires),
            Some("waiting for your route choice"),
            None,
            now,
        );
        self.commit(batch);
        self.check_waiters();
    }

    fn open_card(&self, run_id: &str) -> Result<&Run, DroverError> {
        let run = self
            .runs
            .get(run_id)
            .ok_or_else(|| super::not_found(run_id))?;
        match &run.route {
            Some(card) if card.status == "open" && run.state() == RunState::AwaitingRoute => {
                Ok(run)
            }
            _ => Err(DroverError::new(
                ErrorCode::RouteNotFound,
                format!("run {run_id} has no open route card; `drover routes` lists the open ones"),
            )),
        }
    }

    /// Records a route decision on the run's card and in the decisions table.
    fn decide_card(
        &mut self,
        run_id: &str,
        status: &str,
        who: &str,
        body: Value,
        batch: &mut Batch,
    ) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(card) = run.route.as_mut() else {
            return;
        };
        card.status = status.to_string();
        card.decided_by = Some(who.to_string());
        card.decided_at = Some(now);
        let route_id = card.route_id.clone();
        let snapshot = card.clone();
        run.event(batch, "route", &snapshot, now);
        batch
            .ops
            .push(WriteOp::InsertDecision(Box::new(DecisionRecord {
                run_id: Some(run_id.to_string()),
                at: now,
                kind: "route".into(),
                request_id: Some(route_id),
                who: who.into(),
                decision: status.into(),
                body,
            })));
        run.touch(batch);
    }

    /// `drover route RUN N [--remember]`.
    pub(super) fn pick_route(
        &mut self,
        run_id: &str,
        number: u32,
        remember: bool,
    ) -> Result<Response, DroverError> {
        // The catalog may have changed since the card was made: it is checked against
        // today's (the driver reads the config again before a pick).
        let run = self.open_card(run_id)?;
        let Some(card) = run.route.clone() else {
            return Err(super::not_found(run_id));
        };
        let option = card
            .options
            .iter()
            .find(|o| o.number == number)
            .cloned()
            .ok_or_else(|| {
                DroverError::new(
                    ErrorCode::RoutePickRefused,
                    format!(
                        "the route card of {run_id} has options 1 to {}; pick one of them",
                        card.options.len()
                    ),
                )
            })?;
        let class = TaskClass::parse(&card.class).unwrap_or(TaskClass::Code);
        let session = run.session.clone();
        let refusal = match route::validate_pick(
            &option,
            class,
            &self.money.catalog,
            self.config.pricing.enforce,
        ) {
            Err(e) => Some(e),
            Ok(()) => self
                .fit_run(
                    &session,
                    &option.provider,
                    Some(&option.model),
                    run.spec.budget_usd,
                )
                .err(),
        };
        if let Some(e) = refusal {
            if let Some(card) = self.runs.get_mut(run_id).and_then(|r| r.route.as_mut()) {
                card.refused = Some(format!("option {number}: {}", e.message));
            }
            if let Some(run) = self.runs.get_mut(run_id) {
                let mut batch = Batch::default();
                run.touch(&mut batch);
                self.commit(batch);
            }
            return Err(DroverError::new(
                ErrorCode::RoutePickRefused,
                format!(
                    "option {number} was refused ({}): {}; the card stays open",
                    e.code, e.message
                ),
            ));
        }
        let (cap, notes) = self.fit_run(
            &session,
            &option.provider,
            Some(&option.model),
            self.runs[run_id].spec.budget_usd,
        )?;
        let now = self.now;
        let mut batch = Batch::default();
        self.decide_card(
            run_id,
            "decided",
            "user",
            json!({"option": number, "provider": option.provider, "model": option.model, "remember": remember}),
            &mut batch,
        );
        if remember {
            let value = format!("{}/{}", option.provider, option.model);
            self.route_memory
                .insert(class.as_str().to_string(), value.clone());
            batch.ops.push(WriteOp::PutMeta {
                key: memory_key(class),
                value,
            });
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return Err(super::not_found(run_id));
        };
        apply_option(&mut run.spec, &option);
        run.model = run.spec.model.clone();
        run.price = None;
        run.spec.budget_usd = cap;
        run.note(
            &mut batch,
            format!(
                "route decided by user: {}/{}",
                option.provider, option.model
            ),
            now,
        );
        if remember {
            run.note(
                &mut batch,
                format!("remembered for {} tasks", class.as_str()),
                now,
            );
        }
        for note in notes {
            run.note(&mut batch, note, now);
        }
        batch.ops.push(WriteOp::UpdateRun {
            run_id: run_id.to_string(),
            patch: Box::new(crate::ledger::RunPatch {
                updated_at: now,
                model: run.model.clone(),
                ..Default::default()
            }),
        });
        run.set_state(&mut batch, RunState::Queued, Some("route decided"), now);
        self.commit(batch);
        self.admit_existing(run_id);
        self.summary_response(run_id)
    }

    /// Starts or queues a run that already exists (after its route was decided, or its
    /// directory came free); a shared run whose directory is in use waits for it first.
    pub(super) fn admit_existing(&mut self, run_id: &str) {
        if let Some(holder) = self.dir_holder(run_id) {
            return self.wait_for_dir(run_id, &holder);
        }
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        let slot = self.slot_of(run);
        let queued_in_session = self.queued_in(&run.session);
        match super::rails::admit(
            self.limits(),
            &self.holding_slots(),
            queued_in_session,
            &slot,
            true,
        ) {
            Admission::Start => self.launch(run_id, false),
            Admission::Queue(block) => {
                let now = self.now;
                if let Some(run) = self.runs.get_mut(run_id) {
                    let mut batch = Batch::default();
                    run.note(&mut batch, format!("queued: {}", block.describe()), now);
                    self.commit(batch);
                }
                self.enqueue(run_id);
            }
            Admission::Refuse(e) => {
                let now = self.now;
                if let Some(run) = self.runs.get_mut(run_id) {
                    let mut batch = Batch::default();
                    run.note(&mut batch, format!("not started: {}", e.message), now);
                    self.commit(batch);
                }
                self.finalize(run_id, RunState::Stopped, "queue_full", Cause::Refused);
            }
        }
    }

    /// `drover route RUN --decline`: the run is stopped (`route_declined`).
    pub(super) fn decline_route(&mut self, run_id: &str) -> Result<Response, DroverError> {
        self.open_card(run_id)?;
        let mut batch = Batch::default();
        self.decide_card(run_id, "declined", "user", json!({}), &mut batch);
        self.commit(batch);
        self.finalize(
            run_id,
            RunState::Stopped,
            "route_declined",
            Cause::Withdrawn,
        );
        self.summary_response(run_id)
    }

    /// Cards past their expiry stop their runs (`route_expired`).
    pub(super) fn expire_routes(&mut self, now: UnixMillis) {
        let expired: Vec<String> = self
            .runs
            .values()
            .filter(|r| {
                r.state() == RunState::AwaitingRoute
                    && r.route
                        .as_ref()
                        .is_some_and(|c| c.status == "open" && c.expires_at <= now)
            })
            .map(|r| r.id.clone())
            .collect();
        for id in expired {
            let mut batch = Batch::default();
            self.decide_card(&id, "expired", "timeout", json!({}), &mut batch);
            self.commit(batch);
            self.finalize(&id, RunState::Stopped, "route_expired", Cause::Withdrawn);
        }
    }

    /// The earliest open card expiry (a timer).
    pub(super) fn next_route_expiry(&self) -> Option<UnixMillis> {
        self.runs
            .values()
            .filter(|r| r.state() == RunState::AwaitingRoute)
            .filter_map(|r| {
                r.route
                    .as_ref()
                    .filter(|c| c.status == "open")
                    .map(|c| c.expires_at)
            })
            .min()
    }

    /// Closes the card of a held run that is being stopped.
    pub(super) fn close_card(&mut self, run_id: &str, batch: &mut Batch) {
        let open = self
            .runs
            .get(run_id)
            .and_then(|r| r.route.as_ref())
            .is_some_and(|c| c.status == "open");
        if open {
            self.decide_card(
                run_id,
                "closed",
                "system",
                json!({"why": "the run was stopped"}),
                batch,
            );
        }
    }

    /// `drover routes`: the open cards.
    pub(super) fn open_routes(&self) -> Vec<OpenRoute> {
        self.order
            .iter()
            .filter_map(|id| self.runs.get(id))
            .filter(|r| r.state() == RunState::AwaitingRoute)
            .filter_map(|r| {
                r.route.as_ref().map(|c| OpenRoute {
                    run_id: r.id.clone(),
                    title: r.spec.title.clone(),
                    card: c.clone(),
                })
            })
            .collect()
    }

    /// When a turn has ended and the run is idle, still warm: a turn that ended blocked
    /// (or `done` while a test it ran failed) is offered an escalation (a retry) at once,
    /// as when the run ends, so it waits in Needs you rather than in Idle; a later turn
    /// that ended otherwise withdraws the offer.
    pub(super) fn offer_on_turn_end(&mut self, run_id: &str) {
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        let status = run.last_result.as_ref().and_then(|r| r.status.as_deref());
        let blocked = status == Some("blocked");
        // A `done` whose tests failed is offered a retry (docs/ARCHITECTURE.md §"Evidence").
        let failed_tests = status == Some("done") && run.evidence().tests_failed();
        if blocked || failed_tests {
            self.offer_escalation(run_id);
        } else if run.escalation.is_some() {
            self.withdraw_offer(
                run_id,
                "its last turn did not end blocked or with a failing test",
            );
        }
    }

    /// Withdraws a run's escalation or retry offer (taken, or no longer standing): an
    /// empty `escalation_offer` event, so a view read from the ledger agrees.
    pub(super) fn withdraw_offer(&mut self, run_id: &str, why: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.escalation.take().is_none() {
            return;
        }
        let mut batch = Batch::default();
        run.event(&mut batch, "escalation_offer", &Value::Null, now);
        run.note(&mut batch, format!("offer withdrawn: {why}"), now);
        run.touch(&mut batch);
        self.commit(batch);
    }

    /// When a run has ended, or a warm run's turn ended blocked: what to offer (escalate
    /// one tier up, or retry). An offer already standing is not made twice.
    pub(super) fn offer_escalation(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        // A warm run is judged as if it ended now (its last result is what it has).
        let state = if run.state().is_terminal() {
            run.state().as_str()
        } else {
            RunState::Completed.as_str()
        };
        let outcome = RunOutcome {
            state,
            completion_reason: run.completion_reason.as_deref(),
            result_status: run.last_result.as_ref().and_then(|r| r.status.as_deref()),
            has_usable_result: run.last_result.is_some(),
            provider: &run.spec.provider,
            model: run.model.as_deref(),
            tests_failed: run.evidence().tests_failed(),
        };
        let mut providers = self.routing_providers(None);
        // The run's own provider is available to itself (the sim included).
        for p in providers.iter_mut().filter(|p| p.name == run.spec.provider) {
            p.available = true;
            p.reason = None;
        }
        let offer = route::escalation_offer(
            &outcome,
            &self.money.catalog,
            &RoutingPolicy::embedded(),
            &providers,
        );
        let Some(offer) = offer else {
            return;
        };
        if run.escalation.as_ref() == Some(&offer) {
            return;
        }
        if let Some(run) = self.runs.get_mut(run_id) {
            let mut batch = Batch::default();
            run.event(&mut batch, "escalation_offer", &offer, now);
            let what = match offer.kind {
                EscalationKind::Escalate => "escalation offered",
                EscalationKind::Retry => "retry offered",
            };
            run.note(
                &mut batch,
                format!(
                    "{what}: {}/{} ({})",
                    offer.to_provider, offer.to_model, offer.reason
                ),
                now,
            );
            run.escalation = Some(offer);
            run.touch(&mut batch);
            self.commit(batch);
        }
    }

    /// `drover escalate RUN [--provider P --model M]` and `drover retry RUN`: a new run that
    /// carries the task, the old result as context, the parent and depth + 1, with the same
    /// policy, capability and budget (fitted).
    pub(super) fn escalate(
        &mut self,
        run_id: &str,
        kind: EscalationKind,
        provider: Option<String>,
        model: Option<String>,
    ) -> Result<Response, DroverError> {
        let Some(run) = self.runs.get(run_id) else {
            return Err(super::not_found(run_id));
        };
        // An idle run (its turn over, still warm) or one a restart interrupted may go on
        // as a new run; it completes once the new one is admitted. A run in a turn, or
        // waiting on the user, may not.
        let warm = (run.state() == RunState::Idle && !run.turn_in_flight && run.ending.is_none())
            || run.state() == RunState::Interrupted;
        if run.state().is_active() && !warm {
            return Err(DroverError::new(
                ErrorCode::RunNotActive,
                format!(
                    "run {run_id} is still {}; escalate it once its turn is over (idle) \
                     or it has ended",
                    run.state()
                ),
            ));
        }
        let offer = run.escalation.clone();
        let (to_provider, to_model) = match (provider, model, &offer, kind) {
            (Some(p), Some(m), _, _) => (p, m),
            (None, None, Some(o), _) if o.kind == kind => {
                (o.to_provider.clone(), o.to_model.clone())
            }
            (None, None, _, EscalationKind::Retry) => (
                run.spec.provider.clone(),
                run.model.clone().unwrap_or_default(),
            ),
            _ => {
                return Err(DroverError::new(
                    ErrorCode::NoRoute,
                    format!(
                        "run {run_id} has no {} offer; name --provider and --model",
                        match kind {
                            EscalationKind::Escalate => "escalation",
                            EscalationKind::Retry => "retry",
                        }
                    ),
                ));
            }
        };
        let summary = run
            .last_result
            .as_ref()
            .and_then(|r| r.summary.clone())
            .unwrap_or_else(|| "it gave no usable result".to_string());
        let mut context = format!(
            "A previous attempt (run {run_id} on {}/{}) ended {} ({}): {summary}",
            run.spec.provider,
            run.model.as_deref().unwrap_or("its default model"),
            run.state(),
            run.completion_reason.as_deref().unwrap_or("no reason")
        );
        if let Some(old) = &run.spec.context {
            context = format!("{old}\n\n{context}");
        }
        let input = SpecInput {
            provider: Some(to_provider),
            model: Some(to_model).filter(|m| !m.is_empty()),
            effort: run.spec.effort.map(|e| e.as_str().to_string()),
            cwd: Some(run.spec.cwd.clone()),
            task: run.spec.task.clone(),
            context: Some(context),
            title: Some(run.spec.title.clone()),
            tags: run.spec.tags.clone(),
            capability: Some(run.spec.capability.as_str().to_string()),
            policy: Some(run.spec.policy.as_str().to_string()),
            budget_usd: Some(run.spec.budget_usd),
            max_turns: Some(i64::from(run.spec.max_turns)),
            max_minutes: Some(i64::from(run.spec.max_minutes)),
            idle_timeout_secs: Some(i64::try_from(run.spec.idle_timeout_secs).unwrap_or(i64::MAX)),
            workflow_id: run.spec.workflow_id.clone(),
            parent_run: Some(run_id.to_string()),
            scenario: run.spec.scenario.clone(),
            class: run.spec.class.clone(),
            output_schema: run.spec.output_schema.clone(),
            workspace: run.spec.workspace.map(|m| m.as_str().to_string()),
            ..SpecInput::default()
        };
        let depth = run.depth + 1;
        // A worktree run's successor starts on its branch, so its work carries over.
        let from = run
            .workspace
            .is_worktree()
            .then(|| crate::workspace::ops::ParentStart {
                run_id: run_id.to_string(),
                workspace: run.workspace.clone(),
            });
        let child_id = self.admit_with(input, from)?.head.run_id;
        let now = self.now;
        if let Some(child) = self.runs.get_mut(&child_id) {
            child.depth = depth;
            let mut batch = Batch::default();
            child.event(
                &mut batch,
                "lineage",
                &json!({"parent_run": run_id, "depth": depth, "kind": kind}),
                now,
            );
            self.commit(batch);
        }
        self.withdraw_offer(run_id, &format!("taken as {child_id}"));
        if warm {
            let reason = match kind {
                EscalationKind::Escalate => route::ESCALATED,
                EscalationKind::Retry => route::RETRIED,
            };
            self.end_run(run_id, RunState::Completed, reason, Cause::Completed);
        }
        self.summary_response(&child_id)
    }
}

/// The command whose presence says a provider's CLI is installed: the configured one, else
/// the provider's own.
pub(super) fn cli_command(traits: &crate::providers::ProviderTraits, configured: &str) -> String {
    if configured.is_empty() {
        traits.default_command.to_string()
    } else {
        configured.to_string()
    }
}
