//! A run's life in the dispatcher: admission, launch, turns, and its end.
//!
//! What must stay true: every end has a reason and a live-state cause; a run with a
//! child ends only when the child has exited (the end is recorded then); the queue is
//! re-checked whenever a slot frees.

use serde_json::json;

use super::actor::Actor;
use super::prompts;
use super::rails::{self, RailSlot};
use super::run::{Batch, Ending, Run, Turn, TurnOrigin};
use crate::live_state::{Cause, LiveStateKind};
use crate::providers::{self, LaunchSpec, ProviderCommand};
use crate::run_state::RunState;

/// How long the child may take to start and finish its handshake.
pub const PREPARE_BOUND_MS: i64 = 60_000;
/// How long one tool call may run before its live line shows it overdue.
pub const TOOL_BOUND_MS: i64 = 600_000;
/// How long a child may take to shut down while the run wraps up.
pub const WRAP_UP_BOUND_MS: i64 = 30_000;

impl Actor {
    pub fn slot_of(&self, run: &Run) -> RailSlot {
        let env = self
            .config()
            .providers
            .get(&run.spec.provider)
            .map(|p| &p.env);
        RailSlot {
            account: env.and_then(|env| rails::account_of(&run.spec.provider, env)),
            provider: run.spec.provider.clone(),
            session: run.session.clone(),
            workflow: run.spec.workflow_id.clone(),
        }
    }

    pub fn holding_slots(&self) -> Vec<RailSlot> {
        self.runs
            .values()
            .filter(|r| r.holds_slot())
            .map(|r| self.slot_of(r))
            .collect()
    }

    /// Starts queued runs while their rails have room (FIFO, skipping blocked ones).
    pub fn start_queued(&mut self) {
        if self.shutdown_deadline.is_some() {
            return;
        }
        loop {
            let holding = self.holding_slots();
            let queue: Vec<RailSlot> = self
                .queue
                .iter()
                .filter_map(|id| self.runs.get(id).map(|r| self.slot_of(r)))
                .collect();
            let Some(index) = rails::next_to_start(self.limits(), &holding, &queue) else {
                return;
            };
            let Some(id) = self.queue.remove(index) else {
                return;
            };
            self.launch(&id, true);
        }
    }

    /// Spawns the run's adapter: `starting`, live `preparing`. A run coming from the
    /// queue is first fitted again into what its budget session has left.
    pub fn launch(&mut self, run_id: &str, from_queue: bool) {
        let now = self.now();
        if from_queue && !self.refit(run_id) {
            return;
        }
        let Some(spec) = self.launch_spec(run_id) else {
            return;
        };
        let sink = self.provider_tx.clone();
        let launched = match spec.provider.as_str() {
            "claude-code" | "sim" => providers::claude::launch(spec, sink),
            "codex" => providers::codex::launch(spec, sink),
            "opencode" => providers::opencode::launch(spec, sink),
            other => Err(providers::LaunchError {
                command: other.to_string(),
                reason: "drover has no adapter for this provider yet".to_string(),
            }),
        };
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let mut batch = Batch::default();
        match launched {
            Ok(handle) => {
                run.adapter = Some(handle);
                run.set_state(&mut batch, RunState::Starting, None, now);
                run.set_live(
                    &mut batch,
                    LiveStateKind::Preparing,
                    Some(now + PREPARE_BOUND_MS),
                    Some("starting the provider"),
                    None,
                    now,
                );
                self.commit(batch);
            }
            Err(e) => {
                run.note(&mut batch, format!("launch failed: {e}"), now);
                self.commit(batch);
                self.finalize(run_id, RunState::Failed, "launch_error", Cause::Failed);
            }
        }
    }

    /// Fits a queued run's cap again as it starts. False when nothing is left: the run
    /// is stopped, never started.
    fn refit(&mut self, run_id: &str) -> bool {
        let now = self.now();
        let Some(run) = self.runs.get(run_id) else {
            return false;
        };
        let (session, provider, model, cap) = (
            run.session.clone(),
            run.spec.provider.clone(),
            run.model.clone(),
            run.spec.budget_usd,
        );
        match self.fit_run(&session, &provider, model.as_deref(), cap) {
            Ok((fitted, notes)) => {
                if let Some(run) = self.runs.get_mut(run_id) {
                    let mut batch = Batch::default();
                    run.spec.budget_usd = fitted;
                    for note in notes {
                        run.note(&mut batch, note, now);
                    }
                    self.commit(batch);
                }
                true
            }
            Err(e) => {
                if let Some(run) = self.runs.get_mut(run_id) {
                    let mut batch = Batch::default();
                    run.note(&mut batch, format!("not started: {}", e.message), now);
                    self.commit(batch);
                }
                self.finalize(run_id, RunState::Stopped, "budget_exceeded", Cause::Refused);
                false
            }
        }
    }

    fn launch_spec(&self, run_id: &str) -> Option<LaunchSpec> {
        let run = self.runs.get(run_id)?;
        let provider = self.config().providers.get(&run.spec.provider);
        let (command, mut args) = match provider {
            Some(p) if !p.command.is_empty() => (p.command.clone().into(), p.args.clone()),
            _ if run.spec.provider == "sim" => {
                let mut args = provider.map(|p| p.args.clone()).unwrap_or_default();
                args.insert(0, "sim-agent".to_string());
                (self.options.self_exe.clone(), args)
            }
            _ => (run.spec.provider.clone().into(), Vec::new()),
        };
        if run.spec.provider == "sim" {
            args.push("--scenario".to_string());
            args.push(
                run.spec
                    .scenario
                    .clone()
                    .unwrap_or_else(|| "quick-success".to_string()),
            );
        }
        Some(LaunchSpec {
            run_id: run.id.clone(),
            provider: run.spec.provider.clone(),
            command,
            args,
            env: provider.map(|p| p.env.clone()).unwrap_or_default(),
            cwd: run.spec.cwd.clone(),
            model: run.model.clone(),
            effort: run.spec.effort.map(|e| e.as_str().to_string()),
            policy: run.spec.policy,
            capability: run.spec.capability,
            // Only a resumed run continues its provider session; every other start is new.
            resume_session: run.resume.as_ref().and(run.provider_session_id.clone()),
            resume_tokens: run.resume.as_ref().map(|_| run.tokens),
            scenario: run.spec.scenario.clone(),
        })
    }

    /// Sends a turn to the child: `running`, live `working` "model turn".
    pub fn start_turn(&mut self, run_id: &str, prompt: String, origin: TurnOrigin) {
        let now = self.now();
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(adapter) = &run.adapter else {
            return;
        };
        if adapter
            .commands
            .send(ProviderCommand::StartTurn {
                prompt: prompt.clone(),
            })
            .is_err()
        {
            return; // the adapter is ending; its Exited event will end the run
        }
        let mut batch = Batch::default();
        let turn = Turn {
            number: run.turns.len() as u32 + 1,
            origin,
            started_at: now,
            ended_at: None,
            prompt_preview: prompts::preview(&prompt),
            text: String::new(),
            tokens: Default::default(),
            cost_usd: None,
            result: None,
        };
        batch.ops.push(turn.record(&run.id));
        run.event(
            &mut batch,
            "turn_started",
            &json!({"number": turn.number, "origin": origin.as_str(), "prompt": turn.prompt_preview}),
            now,
        );
        run.turns.push(turn);
        run.turn_in_flight = true;
        run.last_event_at = now;
        if run.state != RunState::Running {
            run.set_state(&mut batch, RunState::Running, None, now);
        }
        run.model_turn(&mut batch, now);
        self.commit(batch);
    }

    /// Ends a run. With a live child it asks the child to stop and records the end when
    /// the child has exited; without one it ends now.
    pub fn end_run(&mut self, run_id: &str, state: RunState, reason: &str, cause: Cause) {
        let now = self.now();
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.state.is_terminal() {
            return;
        }
        if run.ending.is_some() {
            // Already ending; a shutdown overrides a gentler end.
            if state == RunState::Interrupted
                && let Some(e) = run.ending.as_mut()
            {
                e.state = state;
                e.reason = reason.to_string();
            }
            return;
        }
        self.queue.retain(|id| id != run_id);
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let mut batch = Batch::default();
        for pending in run.broker.drain() {
            let message = format!("the run ended ({reason})");
            run.record_resolution(
                &mut batch,
                pending.request.request_id,
                "system",
                &format!("deny: {message}"),
                json!({"behavior": "deny", "message": message}),
                now,
            );
        }
        match &run.adapter {
            Some(adapter) => {
                run.ending = Some(Ending {
                    state,
                    reason: reason.to_string(),
                    cause,
                });
                let _ = adapter.commands.send(ProviderCommand::Shutdown);
                if state == RunState::Completed {
                    run.set_live(
                        &mut batch,
                        LiveStateKind::WrappingUp,
                        Some(now + WRAP_UP_BOUND_MS),
                        Some("ending the provider session"),
                        None,
                        now,
                    );
                }
                run.touch(&mut batch);
                self.commit(batch);
            }
            None => {
                self.close_card(run_id, &mut batch);
                self.commit(batch);
                self.finalize(run_id, state, reason, cause);
            }
        }
    }

    /// Records a run's end: final state, reason, live state `ended`. Frees its slot.
    pub fn finalize(&mut self, run_id: &str, state: RunState, reason: &str, cause: Cause) {
        let now = self.now();
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.state.is_terminal() {
            return;
        }
        let mut batch = Batch::default();
        run.adapter = None;
        run.turn_in_flight = false;
        run.ending = None;
        if run.live.is_none() {
            run.set_live(
                &mut batch,
                LiveStateKind::Admitted,
                Some(now),
                None,
                None,
                now,
            );
        }
        run.set_live(
            &mut batch,
            LiveStateKind::Ended,
            None,
            None,
            Some(cause),
            now,
        );
        run.set_state(&mut batch, state, Some(reason), now);
        self.commit(batch);
        self.offer_escalation(run_id);
        self.queue.retain(|id| id != run_id);
        self.start_queued();
        self.check_waiters();
    }
}
