//! A run's life after admission: its launch, the turns sent to it, the queue, and its end.
//!
//! What must stay true: every end has a reason and a live-state cause; a run with a
//! child ends only when the child has exited (the end is recorded then); the queue is
//! re-checked whenever a slot frees; a run being launched holds its slot. A launch
//! continues the recorded provider session only for a resumed run or one woken from
//! hibernation (`hibernation.rs`).

use serde_json::json;

use super::rails::{self, RailSlot};
use super::run::{Batch, Ending, Run, Turn, TurnOrigin};
use super::{Core, Effect, Launched, prompts};
use crate::live_state::{Cause, LiveStateKind};
use crate::providers::{LaunchError, LaunchSpec, ProviderCommand};
use crate::run_state::RunState;

/// How long the child may take to start and finish its handshake.
pub const PREPARE_BOUND_MS: i64 = 60_000;
/// How long one tool call may run before its live line shows it overdue.
pub const TOOL_BOUND_MS: i64 = 600_000;
/// How long a child may take to shut down while the run wraps up.
pub const WRAP_UP_BOUND_MS: i64 = 30_000;

impl Core {
    pub(super) fn slot_of(&self, run: &Run) -> RailSlot {
        self.slot_for(
            &run.spec.provider,
            &run.session,
            run.spec.workflow_id.clone(),
        )
    }

    /// The rails a run of `provider` in `session` belongs to.
    pub(super) fn slot_for(
        &self,
        provider: &str,
        session: &str,
        workflow: Option<String>,
    ) -> RailSlot {
        let env = self.config.providers.get(provider).map(|p| &p.env);
        RailSlot {
            account: env.and_then(|env| rails::account_of(provider, env)),
            provider: provider.to_string(),
            session: session.to_string(),
            workflow,
        }
    }

    pub(super) fn holding_slots(&self) -> Vec<RailSlot> {
        self.runs
            .values()
            .filter(|r| r.holds_slot())
            .map(|r| self.slot_of(r))
            .collect()
    }

    /// How many runs of `session` wait in the queue (a `--no-queue` run waiting for the
    /// slot of an idle run that hibernates for it is not queued, nor is an idle run whose
    /// follow-up waits).
    pub(super) fn queued_in(&self, session: &str) -> usize {
        self.queue
            .iter()
            .filter(|id| {
                self.runs.get(*id).is_some_and(|r| {
                    r.session == session && !r.waiting_for_room && r.state() != RunState::Idle
                })
            })
            .count()
    }

    /// Puts a run at the back of the queue (once), and makes room for it.
    pub(super) fn enqueue(&mut self, run_id: &str) {
        if !self.queue.iter().any(|id| id == run_id) {
            self.queue.push_back(run_id.to_string());
        }
        self.make_room();
    }

    /// Starts queued runs while their rails have room and their money is free (FIFO,
    /// skipping runs whose rail is full; money in order), then makes room for those still
    /// blocked. Called wherever a slot frees or the limits change, and after any input
    /// while a run waits for money (`money.rs`).
    pub(super) fn start_queued(&mut self) {
        if self.shutting_down() {
            return;
        }
        self.start_what_fits();
        self.make_room();
    }

    /// Starts queued runs in order while their rails have room and their money is free
    /// (`rails::next_in_order`); runs left waiting for money say how much on their live
    /// line.
    fn start_what_fits(&mut self) {
        loop {
            let holding = self.holding_slots();
            let ids: Vec<String> = self.queue.iter().cloned().collect();
            let mut queue = Vec::with_capacity(ids.len());
            let mut needs = Vec::with_capacity(ids.len());
            for id in &ids {
                let Some(run) = self.runs.get(id) else {
                    continue;
                };
                let (slot, holds_slot) = (self.slot_of(run), run.holds_slot());
                let need = self.money_short(id, false);
                queue.push(rails::Waiting {
                    slot,
                    holds_slot,
                    money_fits: need.is_none(),
                });
                needs.push((id.clone(), need));
            }
            let kept: Vec<String> = needs.iter().map(|(id, _)| id.clone()).collect();
            let Some(index) = rails::next_in_order(self.limits(), &holding, &queue) else {
                // What keeps a run with rail room back is money (its own, or that of a run
                // of its session ahead of it): its live line says how much it waits for.
                let mut short: Vec<String> = Vec::new();
                for (waiting, (id, need)) in queue.iter().zip(needs) {
                    let rail_room = waiting.holds_slot
                        || rails::blocked_by(self.limits(), &holding, &waiting.slot).is_none();
                    let session = &waiting.slot.session;
                    if !rail_room || (need.is_none() && !short.contains(session)) {
                        continue;
                    }
                    short.push(session.clone());
                    let need = need.or_else(|| self.turn_need(&id).map(|(_, n)| n));
                    if let Some(need) = need {
                        self.wait_for_money(&id, need);
                    }
                }
                return;
            };
            let id = kept[index].clone();
            self.queue.retain(|q| *q != id);
            self.start_from_queue(&id);
        }
    }

    /// A run leaves the queue to start: an idle run's follow-up that waited for money is
    /// sent (waking it when it is hibernated); any other run is launched.
    fn start_from_queue(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let waited = run.money_wait.take().is_some();
        if waited && run.state() == RunState::Idle && run.wake.is_none() {
            let asleep = run.asleep();
            let mut batch = Batch::default();
            let Some(text) = run.take_follow_up(&mut batch, now) else {
                return;
            };
            self.commit(batch);
            if asleep {
                return self.wake(run_id, text, TurnOrigin::FollowUp);
            }
            return self.start_turn(run_id, text, TurnOrigin::FollowUp);
        }
        self.launch(run_id, true);
    }

    /// Asks for the run's adapter (its outcome comes back as [`super::Input::Launched`]).
    /// A run that does not come from the queue waits there when its money is not free
    /// (`money.rs`); one that comes from it is first fitted again into what its budget
    /// session has left; a worktree run gets its worktree first (the launch follows its
    /// outcome).
    pub(super) fn launch(&mut self, run_id: &str, from_queue: bool) {
        if !from_queue && let Some(need) = self.money_short(run_id, true) {
            return self.wait_for_money(run_id, need);
        }
        if let Some(run) = self.runs.get_mut(run_id) {
            run.money_wait = None;
        }
        // A hibernated run waking for a turn: its money was fitted with the follow-up.
        if self
            .runs
            .get(run_id)
            .is_some_and(|r| r.hibernated && r.wake.is_some())
        {
            return self.launch_woken(run_id);
        }
        if from_queue && !self.refit(run_id) {
            return;
        }
        if self.prepare_workspace(run_id) {
            return;
        }
        self.launch_now(run_id);
    }

    /// Asks for the run's adapter, its workspace being ready. Not while drover stops: the
    /// run is left as it is for the next owner.
    pub(super) fn launch_now(&mut self, run_id: &str) {
        if self.shutting_down() {
            return;
        }
        let Some(spec) = self.launch_spec(run_id) else {
            return;
        };
        if let Some(run) = self.runs.get_mut(run_id) {
            run.launching = true;
            run.waiting_for_room = false;
        }
        self.out.push(Effect::Launch(Box::new(spec)));
    }

    /// The launch's outcome: `starting`, live `preparing`; or the run fails
    /// (`launch_error`). Replies that waited for it go out then.
    pub(super) fn on_launched(&mut self, run_id: &str, outcome: Result<Launched, LaunchError>) {
        self.launch_outcome(run_id, outcome);
        let (ready, waiting) = std::mem::take(&mut self.after_launch)
            .into_iter()
            .partition(|(_, id)| id == run_id);
        self.after_launch = waiting;
        for (to, id) in ready {
            let answer = self.summary_response(&id);
            self.reply(to, answer);
        }
    }

    fn launch_outcome(&mut self, run_id: &str, outcome: Result<Launched, LaunchError>) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.launching = false;
        if run.state().is_terminal() {
            // Ended while its launch was under way: the child is not wanted.
            if outcome.is_ok() {
                self.send(run_id, ProviderCommand::Shutdown);
            }
            return;
        }
        let mut batch = Batch::default();
        match outcome {
            // Woken ahead of a follow-up: idle (its live line says it is waking) until
            // its child is ready.
            Ok(child) if run.warming && run.wake.is_none() => {
                run.child = Some(child);
                run.touch(&mut batch);
                self.commit(batch);
            }
            Err(e) if run.warming => {
                self.commit(batch);
                self.warm_failed(run_id, format!("launch failed: {e}"));
            }
            Ok(child) => {
                run.child = Some(child);
                if run.state() != RunState::Starting {
                    run.set_state(&mut batch, RunState::Starting, None, now);
                }
                // A turn held for the model provider stays `waiting_provider` (the live
                // state goes from there to `working` only) while its CLI starts again.
                let held = run
                    .live
                    .as_ref()
                    .is_some_and(|l| l.state == LiveStateKind::WaitingProvider);
                let (kind, detail) = if held {
                    (
                        LiveStateKind::WaitingProvider,
                        "starting the provider again to send the turn",
                    )
                } else {
                    (LiveStateKind::Preparing, "starting the provider")
                };
                run.set_live(
                    &mut batch,
                    kind,
                    Some(now + PREPARE_BOUND_MS),
                    Some(detail),
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

    /// Fits a queued run's cap again as it starts (into what the hard cap leaves after
    /// spend). False when nothing is left: the run is stopped, never started.
    fn refit(&mut self, run_id: &str) -> bool {
        let now = self.now;
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

    pub(super) fn launch_spec(&self, run_id: &str) -> Option<LaunchSpec> {
        let run = self.runs.get(run_id)?;
        let provider = self.config.providers.get(&run.spec.provider);
        let continues = run.wake.is_some() || run.warming;
        Some(LaunchSpec {
            run_id: run.id.clone(),
            provider: run.spec.provider.clone(),
            command: provider
                .map(|p| p.command.clone())
                .unwrap_or_default()
                .into(),
            args: provider.map(|p| p.args.clone()).unwrap_or_default(),
            env: child_env(provider.map(|p| &p.env), &run.id),
            cwd: run.work_dir(),
            model: run.model.clone(),
            effort: run.spec.effort.map(|e| e.as_str().to_string()),
            mode: provider.and_then(|p| p.mode.clone()),
            policy: run.spec.policy,
            capability: run.spec.capability,
            // Only a woken (or woken ahead, or resumed) run continues its provider
            // session; every other start is new.
            resume_session: continues.then(|| run.provider_session_id.clone()).flatten(),
            resume_tokens: continues.then_some(run.tokens),
            scenario: run.spec.scenario.clone(),
            // drover's MCP server reaches the owner through its socket here: not from
            // another host (docs/ARCHITECTURE.md §"Hosts").
            mcp: (self.config.mcp.expose_to_runs && run.spec.host.is_none())
                .then(|| mcp_server(&self.data_dir, &run.id)),
            journal: None,
            transport: self.transport_of(run),
            sandbox: run.spec.sandbox.then(|| self.sandbox_of(run)),
        })
    }

    /// The transport to a run's host (docs/ARCHITECTURE.md §"Hosts"), `None` for a run on
    /// this machine (or one whose host left the config: its launch then runs here no
    /// more than it ran there — it fails, naming the host).
    pub(super) fn transport_of(
        &self,
        run: &super::run::Run,
    ) -> Option<Box<crate::providers::transport::Transport>> {
        let host = run.spec.host.as_deref()?;
        let config = self.config.hosts.get(host).cloned().unwrap_or_default();
        Some(Box::new(crate::providers::transport::Transport::of(
            host,
            &config,
            &crate::paths::Paths::under(&self.data_dir).ssh_dir(),
        )))
    }

    /// What a sandboxed run's CLI may see and change (docs/ARCHITECTURE.md
    /// §"The sandbox"): its worktree (whole) or a shared run's cwd, read-write; the user's
    /// checkout (for a worktree run), the worktrees root and drover's data directory
    /// hidden, but the owner's socket and config (drover's MCP server in the run reaches
    /// the owner through them).
    fn sandbox_of(&self, run: &super::run::Run) -> crate::providers::sandbox::Sandbox {
        let worktree = run
            .workspace
            .is_worktree()
            .then(|| run.workspace.worktree.clone())
            .flatten();
        let mut hidden = Vec::new();
        if worktree.is_some() {
            hidden.extend(
                run.workspace
                    .checkout
                    .as_ref()
                    .map(std::path::PathBuf::from),
            );
        }
        hidden.push(self.config.workspaces.root_in(&self.data_dir));
        hidden.push(self.data_dir.clone());
        let paths = crate::paths::Paths::under(&self.data_dir);
        crate::providers::sandbox::Sandbox {
            network: self.config.limits.sandbox_network,
            work_dir: worktree
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| run.work_dir()),
            hidden,
            writable: Vec::new(),
            readable: vec![paths.socket_file, paths.config_file],
            home: None,
        }
    }

    /// Sends a turn to the child: `running`, live `working` "model turn".
    pub(super) fn start_turn(&mut self, run_id: &str, prompt: String, origin: TurnOrigin) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.child.is_none() {
            return;
        }
        // A new turn withdraws the conflict's follow-up offer (this turn may be it).
        run.conflict_offer = None;
        let mut batch = Batch::default();
        let turn = Turn {
            number: run.turns.len() as u32 + 1,
            origin,
            started_at: now,
            ended_at: None,
            prompt_preview: self
                .redactor
                .redact(&prompts::preview(&prompt))
                .into_owned(),
            text: String::new(),
            tokens: Default::default(),
            cost_usd: None,
            result: None,
            commands: Vec::new(),
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
        if origin != TurnOrigin::Resend {
            run.resends = 0;
        }
        run.resend_at = None;
        run.last_prompt = Some(prompt.clone());
        run.last_event_at = now;
        if run.state() != RunState::Running {
            run.set_state(&mut batch, RunState::Running, None, now);
        }
        if origin == TurnOrigin::WrapUp {
            // The wrap-up's own bound starts as it is sent (docs/ARCHITECTURE.md
            // §"Wrap up, then stop").
            let bound = now.saturating_add(super::answers::secs_ms(
                self.config.limits.wrap_up_bound_secs,
            ));
            if let Some(wrap) = run.wrap_up.as_mut() {
                wrap.sent_at = Some(now);
                wrap.hard_at = Some(bound);
            }
            run.set_live(
                &mut batch,
                LiveStateKind::WrappingUp,
                Some(bound),
                Some(super::run::WRAPPING_UP_DETAIL),
                None,
                now,
            );
        } else {
            run.model_turn(&mut batch, now);
        }
        self.send(run_id, ProviderCommand::StartTurn { prompt });
        self.commit(batch);
    }

    /// Ends a run. With a live child it asks the child to stop and records the end when
    /// the child has exited; without one it ends now.
    pub(super) fn end_run(&mut self, run_id: &str, state: RunState, reason: &str, cause: Cause) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.state().is_terminal() || run.state() == state {
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
        run.deny_all_pending(&mut batch, &format!("the run ended ({reason})"), now);
        if run.child.is_some() {
            run.ending = Some(Ending {
                state,
                reason: reason.to_string(),
                cause,
            });
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
            self.send(run_id, ProviderCommand::Shutdown);
            self.commit(batch);
        } else {
            self.close_card(run_id, &mut batch);
            self.commit(batch);
            self.finalize(run_id, state, reason, cause);
        }
    }

    /// Records a run's end (or its interruption by a restart): final state, reason, live
    /// state `ended`. Frees its slot.
    pub(super) fn finalize(&mut self, run_id: &str, state: RunState, reason: &str, cause: Cause) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.state().is_terminal() || run.state() == state {
            return;
        }
        let mut batch = Batch::default();
        run.child = None;
        run.launching = false;
        run.turn_in_flight = false;
        run.ending = None;
        run.preparing_until = None;
        run.waiting_for_dir = false;
        run.file_tools.clear();
        if run.host_wait.is_some() {
            self.end_left_while_waiting(run_id);
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
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
        // An interrupted run's live line says what happened, in words.
        let detail = (state == RunState::Interrupted).then_some(
            if reason == super::host_drop::HOST_DROPPED_REASON {
                super::host_drop::HOST_DROPPED_DETAIL
            } else if run.turn_cut {
                super::restore::INTERRUPTED_DETAIL
            } else {
                super::restore::INTERRUPTED_NO_SESSION_DETAIL
            },
        );
        // (An interrupted run stopped or completed has ended already.)
        if run
            .live
            .as_ref()
            .is_none_or(|l| l.state != LiveStateKind::Ended)
        {
            run.set_live(
                &mut batch,
                LiveStateKind::Ended,
                None,
                detail,
                Some(cause),
                now,
            );
        }
        run.set_state(&mut batch, state, Some(reason), now);
        self.commit(batch);
        // An interrupted run is resumed, not escalated.
        if state != RunState::Interrupted {
            self.offer_escalation(run_id);
        }
        // What it left in its worktree, for review.
        self.measure(run_id);
        self.queue.retain(|id| id != run_id);
        self.release_dir_waiters();
        self.start_queued();
        self.check_waiters();
    }
}

/// drover's MCP server for a run's CLI (`[mcp] expose_to_runs`): `drover mcp` on this data
/// directory, as started inside the run (its sub-runs are the run's).
fn mcp_server(data_dir: &std::path::Path, run_id: &str) -> crate::providers::McpServer {
    crate::providers::McpServer {
        command: std::path::PathBuf::new(),
        args: vec!["mcp".to_string()],
        env: std::collections::BTreeMap::from([
            (
                crate::paths::HOME_ENV.to_string(),
                data_dir.display().to_string(),
            ),
            (crate::providers::RUN_ID_ENV.to_string(), run_id.to_string()),
        ]),
    }
}

/// A run's child environment: the provider's configured variables and the run's id
/// ([`crate::providers::RUN_ID_ENV`]), so a `drover mcp` started inside the run dispatches
/// sub-runs of it.
fn child_env(
    configured: Option<&std::collections::BTreeMap<String, String>>,
    run_id: &str,
) -> std::collections::BTreeMap<String, String> {
    let mut env = configured.cloned().unwrap_or_default();
    env.insert(crate::providers::RUN_ID_ENV.to_string(), run_id.to_string());
    env
}
