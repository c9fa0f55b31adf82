//! Admission (docs/ARCHITECTURE.md §"Run lifecycle", §"Rails and the queue", §"Money",
//! §"Routing and route cards"): a dispatch is validated, routed, put on its rails and
//! fitted into its budget session; then it starts, waits in the queue (for a slot, or for
//! the money of its first turn), or waits on a route card. A repeated idempotency key
//! returns the run it made.
//!
//! A `--no-queue` dispatch on a full rail is refused (`MAX_CONCURRENT`) unless idle runs
//! hibernating would give it a slot ([`Core::room_plan`], the planner queued runs use):
//! then it is `starting`, waiting for those runs' children to exit, and starts then. One
//! whose cap is not free now (turns in flight hold the money) is refused
//! (`BUDGET_EXCEEDED`, naming those runs).
//!
//! What must stay true: nothing is created for a refused dispatch (its refusal is sent at
//! once) — no run, no worktree, no branch — and a dispatch that could not start is refused
//! before anything is made (an unknown scenario, a cwd that does not exist, a provider whose
//! CLI is not found: `PROVIDER_UNAVAILABLE`); an accepted one is answered after its first
//! writes are committed, showing where the run is now (starting, queued, or held).

use serde_json::json;

use super::rails::{self, Admission};
use super::routes::{self, Routed};
use super::run::{Batch, Run};
use super::transcript::TranscriptRing;
use super::{Core, Fetch, Fetched, ReplyTo, Then};
use crate::dispatch::api::{Response, RunSummary};
use crate::ledger::{RunRecord, WriteOp, kind};
use crate::live_state::LiveStateKind;
use crate::providers::{self, DEFAULT_PROVIDER};
use crate::run_state::RunState;
use crate::spec::{self, PermissionPolicy, ProviderInfo, SpecInput, ValidationContext};
use crate::workspace::ops::ParentStart;
use crate::workspace::{WorkspaceMode, WorkspaceView};
use crate::{DroverError, ErrorCode};

impl Core {
    /// `dispatch`: a repeated idempotency key first (in memory, then in the ledger), then
    /// admission.
    pub(super) fn dispatch(&mut self, to: ReplyTo, input: SpecInput) {
        if let Some(key) = input.idempotency_key.clone().filter(|k| !k.is_empty()) {
            if let Some(run) = self.idempotent_run(&key) {
                let summary = run.summary();
                return self.reply(to, Ok(Response::Run(Box::new(summary))));
            }
            let since = self.idempotency_since();
            return self.load(
                Fetch::ByIdempotencyKey { key, since },
                Then::Dispatch {
                    to,
                    input: Box::new(input),
                },
            );
        }
        self.admit_and_reply(to, input);
    }

    /// The ledger answered about an idempotency key that was not in memory.
    pub(super) fn dispatch_loaded(
        &mut self,
        to: ReplyTo,
        input: SpecInput,
        answer: Result<Fetched, DroverError>,
    ) {
        if self.shutting_down() {
            return self.reply_now(to, Err(shutting_down()));
        }
        match answer {
            Ok(Fetched::Run(Some(summary))) => self.reply(to, Ok(Response::Run(summary))),
            Ok(Fetched::Run(None)) => {
                // The same key may have been admitted in memory meanwhile.
                let key = input.idempotency_key.clone().unwrap_or_default();
                match self.idempotent_run(&key) {
                    Some(run) => {
                        let summary = run.summary();
                        self.reply(to, Ok(Response::Run(Box::new(summary))))
                    }
                    None => self.admit_and_reply(to, input),
                }
            }
            Ok(other) => self.reply_now(to, Err(super::unexpected(&other))),
            Err(e) => self.reply_now(to, Err(e)),
        }
    }

    fn idempotency_since(&self) -> i64 {
        self.now.saturating_sub(super::answers::secs_ms(
            self.limits().idempotency_window_secs,
        ))
    }

    fn idempotent_run(&self, key: &str) -> Option<&Run> {
        let since = self.idempotency_since();
        self.runs
            .values()
            .find(|r| r.spec.idempotency_key.as_deref() == Some(key) && r.created_at >= since)
    }

    fn admit_and_reply(&mut self, to: ReplyTo, input: SpecInput) {
        match self.admit(input) {
            Ok(summary) => self.reply(to, Ok(Response::Run(Box::new(summary)))),
            Err(e) => self.reply_now(to, Err(e)),
        }
    }

    fn provider_infos(&self) -> Vec<ProviderInfo> {
        self.config
            .providers
            .iter()
            .filter(|(name, _)| providers::traits(name).is_some())
            .map(|(name, p)| ProviderInfo {
                name: name.clone(),
                enabled: p.enabled,
                policies: PermissionPolicy::ALL.to_vec(),
            })
            .collect()
    }

    /// A run on a host (docs/ARCHITECTURE.md §"Hosts"): the host is configured
    /// (`HOST_UNKNOWN`), and it asks for nothing that runs only on this machine
    /// (`HOST_UNSUPPORTED`: a sandbox); it works in its directory there, or in a
    /// worktree made there when `--workspace worktree` asks for one.
    fn host_admits(&self, host: &str, spec: &mut crate::spec::Spec) -> Result<(), DroverError> {
        if !self.config.hosts.contains_key(host) {
            return Err(crate::providers::transport::unknown_host(
                host,
                &self.config.hosts,
            ));
        }
        if spec.sandbox {
            return Err(DroverError::new(
                ErrorCode::HostUnsupported,
                format!(
                    "a run on the host {host} cannot be sandboxed: bubblewrap wraps runs on this machine only; dispatch it without --sandbox (with `[limits] sandbox_auto` on, give it another policy than auto)"
                ),
            ));
        }
        if spec.provider == "opencode" {
            return Err(DroverError::new(
                ErrorCode::HostUnsupported,
                crate::providers::opencode::adapter::opencode_on_host(host),
            ));
        }
        // A worktree there only when asked for: whether the directory there is in a git
        // work tree is learnt when the worktree is made (a failure fails the run, with
        // git's words), not at admission (docs/ARCHITECTURE.md §"Hosts").
        if spec.workspace != Some(crate::workspace::WorkspaceMode::Worktree) {
            spec.workspace = Some(crate::workspace::WorkspaceMode::Shared);
        }
        Ok(())
    }

    /// `PROVIDER_UNAVAILABLE` when `provider` runs a CLI that is not found: the run could
    /// not start, so nothing is made for it (a run held on a route card is offered only
    /// providers that can run).
    fn provider_unavailable(&self, provider: &str) -> Option<DroverError> {
        let traits = providers::traits(provider).filter(|t| t.needs_cli)?;
        let configured = self.config.providers.get(provider)?;
        let command = routes::cli_command(traits, &configured.command);
        if self.facts.cli_found(&command) {
            return None;
        }
        let install = traits
            .pinned
            .as_ref()
            .map(|p| format!("install it (`{}`), ", p.install_command()))
            .unwrap_or_default();
        Some(DroverError::new(
            ErrorCode::ProviderUnavailable,
            format!(
                "Provider {provider} cannot start: its CLI `{command}` is not found; {install}set its path with `command` under [providers.{provider}], or dispatch to another provider (`drover doctor` lists what is installed)."
            ),
        ))
    }

    /// Validates and creates a run. Returns the run's summary. A dispatch that names a
    /// parent run is a sub-run of it ([`sub_run`]): one level deeper, in its workflow,
    /// with a cap that fits what the parent has left.
    pub(super) fn admit(&mut self, input: SpecInput) -> Result<RunSummary, DroverError> {
        let Some(parent_id) = input.parent_run.clone().filter(|p| !p.trim().is_empty()) else {
            return self.admit_with(input, None);
        };
        let Some(parent) = self.runs.get(&parent_id) else {
            return Err(DroverError::new(
                ErrorCode::RunNotFound,
                format!(
                    "no run {parent_id} to dispatch a sub-run of; name a run `drover runs` lists, or leave the parent out"
                ),
            ));
        };
        let reserved: f64 = self
            .runs
            .values()
            .filter(|r| {
                r.spec.parent_run.as_deref() == Some(parent_id.as_str()) && !r.state().is_terminal()
            })
            .map(|r| (r.spec.budget_usd - r.cost_usd - r.provisional_usd).max(0.0))
            .sum();
        let lineage = sub_run(
            &ParentFacts {
                run_id: &parent_id,
                depth: parent.depth,
                workflow_id: parent.spec.workflow_id.as_deref(),
                left_usd: parent.spec.budget_usd
                    - parent.cost_usd
                    - parent.provisional_usd
                    - reserved,
            },
            &input,
            self.limits(),
        )?;
        let mut input = input;
        input.workflow_id = Some(lineage.workflow_id.clone());
        input.budget_usd = Some(lineage.budget_usd);
        // A sandboxed run's sub-runs are sandboxed too: dispatching one is no way out.
        if parent.spec.sandbox {
            input.sandbox = Some(true);
        }
        let id = self.admit_with(input, None)?.head.run_id;
        let now = self.now;
        if let Some(child) = self.runs.get_mut(&id) {
            child.depth = lineage.depth;
            let mut batch = Batch::default();
            child.event(
                &mut batch,
                "lineage",
                &json!({"parent_run": parent_id, "depth": lineage.depth, "kind": "sub_run"}),
                now,
            );
            for note in lineage.notes {
                child.note(&mut batch, note, now);
            }
            child.touch(&mut batch);
            self.commit(batch);
        }
        self.runs
            .get(&id)
            .map(Run::summary)
            .ok_or_else(|| super::not_found(&id))
    }

    /// [`Core::admit`], for a run that starts from another run's work (an escalation or
    /// retry of a worktree run starts on its branch).
    pub(super) fn admit_with(
        &mut self,
        input: SpecInput,
        from: Option<ParentStart>,
    ) -> Result<RunSummary, DroverError> {
        let now = self.now;
        if let Some(name) = input.provider.as_deref().map(str::trim)
            && !name.is_empty()
            && providers::traits(name).is_none()
            && self.config.providers.contains_key(name)
        {
            return Err(DroverError::new(
                ErrorCode::InvalidProvider,
                format!(
                    "drover has no adapter for {name}; use one of: {}",
                    providers::registry::runnable_names().join(", ")
                ),
            ));
        }
        let wants_route = routes::wants_route(&input);
        let mut input = input;
        if wants_route {
            // Validation must not read "auto" as a model name.
            input.model = None;
        }
        let providers = self.provider_infos();
        let current_dir = self.facts.current_dir();
        let facts = &self.facts;
        let dir_exists = |p: &std::path::Path| facts.is_dir(p);
        let ctx = ValidationContext {
            limits: &self.config.limits,
            providers: &providers,
            default_provider: DEFAULT_PROVIDER,
            current_dir: &current_dir,
            dir_exists: &dir_exists,
            models: &self.money.catalog,
        };
        let mut spec = spec::validate(&input, &ctx)?;
        // docs/ARCHITECTURE.md §"The sandbox": never run unsandboxed what was to be
        // sandboxed.
        if spec.policy == PermissionPolicy::Auto && self.config.limits.sandbox_auto {
            spec.sandbox = true;
        }
        if spec.sandbox
            && let Some(e) = self.facts.sandbox_unavailable()
        {
            return Err(e);
        }
        if let Some(host) = spec.host.clone() {
            self.host_admits(&host, &mut spec)?;
        }
        let asked = spec.workspace.is_some();
        let mode = self.workspace_mode(&spec, from.as_ref())?;
        spec.workspace = Some(mode);
        let session = self.money.current.clone();
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
                Routed::Proceed(route_notes) => notes.extend(route_notes),
                Routed::Hold(card, route_notes) => {
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
        // On a host, the CLI is looked for there (`drover doctor --host`), not here.
        if hold.is_none()
            && spec.host.is_none()
            && let Some(e) = self.provider_unavailable(&spec.provider)
        {
            return Err(e);
        }
        if spec.model.is_none() && hold.is_none() {
            let (model, note) = self.default_model(&spec.provider);
            spec.model = model;
            notes.extend(note);
        }
        // A held run takes no slot and no money until its route is decided.
        let mut room = None;
        let admission = if hold.is_some() {
            Admission::Queue(rails::RailBlock::Session {
                session: session.clone(),
                limit: 0,
            })
        } else {
            let slot = self.slot_for(&spec.provider, &session, spec.workflow_id.clone());
            let holding = self.holding_slots();
            match rails::admit(
                self.limits(),
                &holding,
                self.queued_in(&session),
                &slot,
                spec.queue_if_busy,
            ) {
                // `--no-queue` on a rail that idle runs fill: not refused when their
                // hibernating gives it a slot; it starts once they have.
                Admission::Refuse(e) if !spec.queue_if_busy => {
                    match (
                        rails::blocked_by(self.limits(), &holding, &slot),
                        self.room_plan(Some(&slot)).filter(|p| p.extra_starts),
                    ) {
                        (Some(block), Some(plan)) => {
                            room = Some(plan);
                            Admission::Queue(block)
                        }
                        _ => Admission::Refuse(e),
                    }
                }
                admission => admission,
            }
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
            // Money is reserved for a turn: a run whose cap is not free now waits for it in
            // the queue, unless it may not wait.
            if !spec.queue_if_busy
                && let Some(e) = self.no_queue_money(&session, spec.budget_usd)
            {
                return Err(e);
            }
        }
        // The provider gets the task as written; what is stored and shown is redacted.
        let first_prompt = super::prompts::first_turn(&spec);
        let spec = self.redactor.redact_serde(spec);
        let spec_json = serde_json::to_value(&spec)
            .map_err(|e| DroverError::new(ErrorCode::Internal, e.to_string()))?;
        let id = self.new_run_id();
        let ring = TranscriptRing::new(
            self.limits().transcript_max_lines,
            self.limits().transcript_max_chars,
        );
        let mut run = Run::new(id.clone(), spec, session, now, ring);
        run.first_prompt = Some(first_prompt);
        run.workspace_asked = asked;
        if mode == WorkspaceMode::Worktree {
            run.workspace = WorkspaceView::preparing();
            run.start_from = from;
        }
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
            spec: spec_json,
            live_state: None,
            result: None,
            workspace: serde_json::to_value(&run.workspace).ok(),
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
            && room.is_none()
        {
            run.note(&mut batch, format!("queued: {}", block.describe()), now);
        }
        run.touch(&mut batch);
        self.runs.insert(id.clone(), run);
        self.order.push(id.clone());
        self.commit(batch);
        let holder = self.dir_holder(&id);
        match (hold, admission, holder) {
            (Some(card), _, _) => self.hold(&id, card),
            // Its directory is in use by another writing run: it waits (no slot yet).
            (None, _, Some(holder)) => self.wait_for_dir(&id, &holder),
            (None, Admission::Start, None) => self.launch(&id, false),
            (None, Admission::Queue(block), None) => match room {
                Some(plan) => self.wait_for_room(&id, &block, &plan),
                None => self.enqueue(&id),
            },
            (None, Admission::Refuse(_), None) => {}
        }
        // The answer shows where the run is now: starting (or waiting for the slot idle
        // runs give as they hibernate), or queued.
        self.runs
            .get(&id)
            .map(Run::summary)
            .ok_or_else(|| super::not_found(&id))
    }
}

/// What a sub-run's admission needs to know of its parent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ParentFacts<'a> {
    pub run_id: &'a str,
    pub depth: u32,
    pub workflow_id: Option<&'a str>,
    /// The parent's cap less its spend and its live sub-runs' reservations.
    pub left_usd: f64,
}

/// Where a sub-run goes: its depth, workflow and cap, and notes for its history.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SubRun {
    pub depth: u32,
    pub workflow_id: String,
    pub budget_usd: f64,
    pub notes: Vec<String>,
}

/// The rules for a run dispatched with a parent (docs/ARCHITECTURE.md
/// §"Agents as clients"): one level deeper than the parent, refused past `max_depth`
/// (`MAX_DEPTH`); in the parent's workflow (the parent's own id when it has none), so the
/// per-workflow rail bounds the fan-out; a cap (the asked one, else the default) that fits
/// what the parent has left, refused (`BUDGET_EXCEEDED`) when that is under the smallest
/// cap a run may have.
pub(super) fn sub_run(
    parent: &ParentFacts<'_>,
    input: &SpecInput,
    limits: &crate::config::Limits,
) -> Result<SubRun, DroverError> {
    let depth = parent.depth + 1;
    if depth > limits.max_depth {
        return Err(DroverError::new(
            ErrorCode::MaxDepth,
            format!(
                "run {} is at depth {}: a sub-run of it would nest deeper than max_depth = {}; do the work in that run, or raise [limits] max_depth",
                parent.run_id, parent.depth, limits.max_depth
            ),
        ));
    }
    let mut notes = Vec::new();
    let workflow_id = parent.workflow_id.unwrap_or(parent.run_id).to_string();
    if let Some(asked) = input.workflow_id.as_deref().map(str::trim)
        && !asked.is_empty()
        && asked != workflow_id
    {
        notes.push(format!(
            "workflow: {workflow_id}, its parent's (not {asked})"
        ));
    }
    let left = (parent.left_usd * 100.0).floor() / 100.0;
    if left < limits.budget_usd_min {
        return Err(DroverError::new(
            ErrorCode::BudgetExceeded,
            format!(
                "parent run {} has ${:.2} left, under the smallest cap a run may have (${:.2}); raise the parent's budget or let it finish",
                parent.run_id,
                parent.left_usd.max(0.0),
                limits.budget_usd_min
            ),
        ));
    }
    let asked = input.budget_usd.unwrap_or(limits.budget_usd_default);
    let budget_usd = if asked > left {
        notes.push(format!(
            "budget: ${left:.2}, what parent run {} has left (asked ${asked:.2})",
            parent.run_id
        ));
        left
    } else {
        asked
    };
    Ok(SubRun {
        depth,
        workflow_id,
        budget_usd,
        notes,
    })
}

pub(super) fn shutting_down() -> DroverError {
    DroverError::new(
        ErrorCode::Internal,
        "drover is shutting down; start it again to act on runs",
    )
}
