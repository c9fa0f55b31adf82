//! Money in the dispatcher (docs/ARCHITECTURE.md §"Money"): the catalog, budget sessions,
//! fitting a new run's cap, holding a turn that does not fit in the queue until its money
//! is free, booking usage as it streams and when a turn reports its cost, the caps checked
//! after every usage row, and a changed config taking effect.
//!
//! What must stay true: the decisions are the pure ones in `crate::money`; this module
//! only feeds them the core's numbers and carries out what they return. Money is reserved
//! for a turn ([`Run::reserves`]); a first turn or a follow-up whose money is not free
//! waits in the queue with the amount on its live line, behind any run of its session
//! already waiting for money, and is looked at again whenever an input was handled
//! ([`Core::recheck_money`]). Streamed usage
//! is a provisional estimate held in memory until the turn reports what it cost; a turn
//! cut short books its streamed usage (estimated, or unpriced — never $0). Every budget
//! session the core decides on is in memory (the current one from the start, others
//! read from the ledger before they are used), together with its ledger record.

use serde_json::json;
use std::collections::HashMap;

use super::run::{Batch, Run};
use super::{Core, Fetch, Query, ReplyTo, Then};
use crate::config::Config;
use crate::dispatch::api::{BudgetView, DispatchEvent};
use crate::dispatch::reads::LoadedSession;
use crate::ledger::{BudgetSessionRecord, DecisionRecord, UsageRecord, WriteOp};
use crate::live_state::Cause;
use crate::money::budget::{self, BudgetAction, Fit, RunMoney, SessionMoney, TurnFit};
use crate::money::catalog::Catalog;
use crate::money::pricing::{self, Price};
use crate::providers::{Tokens, TurnEnd};
use crate::run_state::RunState;
use crate::{DroverError, ErrorCode};

/// The ledger meta key naming the budget session new runs count against.
pub const SESSION_KEY: &str = "budget_session";

/// A budget session as the core holds it: its money and its ledger record.
#[derive(Debug, Clone)]
struct Session {
    money: SessionMoney,
    record: Option<BudgetSessionRecord>,
    /// Its provisional (streamed, not yet reported) spend, kept as runs add and settle
    /// it, so checking the caps after a usage row costs the same with 1 run or 100.
    provisional: f64,
}

/// The money state the core keeps.
pub struct Money {
    pub catalog: Catalog,
    sessions: HashMap<String, Session>,
    /// The budget session new runs count against.
    pub current: String,
}

impl Money {
    pub fn new(config: &Config, current: LoadedSession) -> Result<Money, DroverError> {
        let mut money = Money {
            catalog: Catalog::from_config(config)?,
            sessions: HashMap::new(),
            current: current.name.clone(),
        };
        money.insert(&config.limits, current);
        Ok(money)
    }

    fn insert(&mut self, limits: &crate::config::Limits, loaded: LoadedSession) {
        let (warning, hard_cap) = budget::session_caps(limits, loaded.record.as_ref());
        let money = SessionMoney::restore(&loaded.name, loaded.spent, 0.0, warning, hard_cap);
        self.sessions.insert(
            loaded.name,
            Session {
                money,
                record: loaded.record,
                provisional: 0.0,
            },
        );
    }

    fn session(&self, name: &str) -> Option<&Session> {
        self.sessions.get(name)
    }
}

impl Core {
    /// Keeps a session read from the ledger (unless the core already holds it).
    pub(super) fn adopt_session(&mut self, loaded: LoadedSession) {
        if !self.money.sessions.contains_key(&loaded.name) {
            let limits = self.config.limits.clone();
            self.money.insert(&limits, loaded);
        }
    }

    /// The session, held in memory; one never read starts from nothing (a run can only
    /// belong to a session the core read first, so this is a fallback, logged).
    fn session_mut(&mut self, name: &str) -> &mut Session {
        if !self.money.sessions.contains_key(name) {
            tracing::warn!(
                session = name,
                "a budget session was used before it was read"
            );
            let limits = self.config.limits.clone();
            self.money.insert(
                &limits,
                LoadedSession {
                    name: name.to_string(),
                    spent: 0.0,
                    record: None,
                },
            );
        }
        self.money
            .sessions
            .get_mut(name)
            .expect("the session was just inserted")
    }

    /// What runs of `session` in a turn may still spend, counting their provisional spend.
    fn reserved_in(&self, session: &str) -> f64 {
        budget::reserved(
            self.runs
                .values()
                .filter(|r| r.session == session && r.reserves())
                .map(run_money)
                .collect::<Vec<_>>()
                .iter(),
        )
    }

    /// Moves a run's provisional spend (and its session's total) by `delta`.
    fn add_provisional(&mut self, run_id: &str, delta: f64) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.provisional_usd += delta;
        // The session is read already but for a slip (see `session_mut`): its name is
        // copied only then (this runs for every usage event a turn streams).
        let s = match self.money.sessions.get_mut(run.session.as_str()) {
            Some(s) => s,
            None => {
                let session = run.session.clone();
                self.session_mut(&session)
            }
        };
        s.provisional = (s.provisional + delta).max(0.0);
    }

    /// The run's provisional spend settles (its real cost was booked).
    fn settle_provisional(&mut self, run_id: &str) {
        let provisional = self.runs.get(run_id).map_or(0.0, |r| r.provisional_usd);
        self.add_provisional(run_id, -provisional);
    }

    /// The session as the budget decisions must see it now: booked plus provisional
    /// spend, and the live runs' reservations.
    fn session_now(&mut self, name: &str) -> SessionMoney {
        let reserved = self.reserved_in(name);
        let s = self.session_mut(name);
        let mut money = s.money.clone();
        money.spent += s.provisional;
        money.reserved = reserved;
        money
    }

    /// The model a run uses when the spec names none: the catalog's default (pinned to
    /// the first visible model when the default is hidden, with a note).
    pub(super) fn default_model(&self, provider: &str) -> (Option<String>, Option<String>) {
        let (model, note) = self.money.catalog.default_model(provider);
        (model.map(|m| m.id.clone()), note)
    }

    fn price_of(&self, provider: &str, model: Option<&str>) -> Price {
        match model {
            Some(m) => self.money.catalog.price(provider, m),
            None => Price::Unpriced,
        }
    }

    /// Checks the model's price and fits the run's cap into what its session has left.
    /// Returns the cap and the notes to keep on the run.
    pub(super) fn fit_run(
        &mut self,
        session: &str,
        provider: &str,
        model: Option<&str>,
        requested_cap: f64,
    ) -> Result<(f64, Vec<String>), DroverError> {
        let mut notes = Vec::new();
        let enforce = self.config.pricing.enforce;
        let price = self.price_of(provider, model);
        if let Some(note) = budget::check_price(
            enforce,
            provider,
            model.unwrap_or("(the provider's default)"),
            &price,
        )? {
            notes.push(note);
        }
        let now = self.session_now(session);
        match budget::fit(requested_cap, &now) {
            Fit::Granted { cap } => Ok((cap, notes)),
            Fit::Lowered { cap, note } => {
                notes.push(note);
                Ok((cap, notes))
            }
            Fit::Refused(mut e) => {
                e.message.push_str(&self.reservation_holders(session));
                Err(e)
            }
        }
    }

    /// The runs of `session` whose turns hold reservations, and how to release them, as a
    /// sentence to append to a `BUDGET_EXCEEDED` (empty when none holds any).
    fn reservation_holders(&self, session: &str) -> String {
        /// Runs named in full; the rest are counted.
        const NAMED: usize = 5;
        let mut holders: Vec<(&str, f64)> = self
            .order
            .iter()
            .filter_map(|id| self.runs.get(id))
            .filter(|r| r.session == session && r.reserves())
            .map(|r| (r.id.as_str(), run_money(r).reservation()))
            .filter(|(_, held)| *held > 0.0)
            .collect();
        if holders.is_empty() {
            return String::new();
        }
        holders.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut named: Vec<String> = holders
            .iter()
            .take(NAMED)
            .map(|(id, held)| format!("{id} ({})", crate::money::dollars::usd(*held)))
            .collect();
        if holders.len() > NAMED {
            named.push(format!("{} more", holders.len() - NAMED));
        }
        format!(
            " The money is held by turns in flight: {}; each is released when its turn \
             ends or waits on you, or now with `drover stop RUN`.",
            named.join(", ")
        )
    }

    /// A follow-up on an idle run: what its cap has left is fitted into what its budget
    /// session's hard cap leaves after spend. A lowered fit lowers the run's cap, with a
    /// note; nothing left (or a closed session) refuses the follow-up (`BUDGET_EXCEEDED`)
    /// and the run stays idle. Whether the money is free now is [`Core::money_short`]'s.
    pub(super) fn fit_follow_up(&mut self, run_id: &str) -> Result<(), DroverError> {
        let now = self.now;
        let Some(run) = self.runs.get(run_id) else {
            return Ok(());
        };
        let (session, provider, model) = (
            run.session.clone(),
            run.spec.provider.clone(),
            run.model.clone(),
        );
        let money = run_money(run);
        let left = money.reservation();
        let (fitted, notes) = self
            .fit_run(&session, &provider, model.as_deref(), left)
            .map_err(|e| {
                DroverError::new(
                    e.code,
                    format!(
                        "the follow-up was not sent and run {run_id} stays idle: {}",
                        e.message
                    ),
                )
            })?;
        let Some(run) = self.runs.get_mut(run_id) else {
            return Ok(());
        };
        if fitted < left {
            run.spec.budget_usd = ((money.spent + fitted) * 100.0).floor() / 100.0;
            let mut batch = Batch::default();
            for note in notes {
                run.note(&mut batch, note, now);
            }
            self.commit(batch);
        }
        Ok(())
    }

    /// Tokens streamed during a turn: an estimate until the turn reports its cost.
    pub(super) fn on_streamed_usage(&mut self, run_id: &str, model: Option<&str>, tokens: &Tokens) {
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        let price = match model {
            // The usual case: the run's own model, whose price is looked up once.
            None => run.price,
            Some(m) if Some(m) == run.model.as_deref() => run.price,
            Some(m) => Some(self.price_of(&run.spec.provider, Some(m))),
        };
        let price = match price {
            Some(p) => p,
            None => {
                let p = self.price_of(&run.spec.provider, run.model.as_deref());
                if let Some(run) = self.runs.get_mut(run_id) {
                    run.price = Some(p);
                }
                p
            }
        };
        if let Some(cost) = price.cost(tokens) {
            self.add_provisional(run_id, cost);
            self.check_money(run_id);
        }
    }

    /// Books a finished turn's usage rows; returns what the turn cost.
    pub(super) fn book_turn(
        &mut self,
        run_id: &str,
        end: &TurnEnd,
        batch: &mut Batch,
    ) -> Option<f64> {
        let now = self.now;
        let run = self.runs.get(run_id)?;
        let provider = run.spec.provider.clone();
        let main_model = run.model.clone();
        let previous_total = run.last_total_cost;
        let turn_number = run.turns.last().map(|t| t.number);
        let session = run.session.clone();
        let turn = pricing::claude_turn(end, previous_total, main_model.as_deref(), |m| {
            self.money.catalog.price(&provider, m)
        });
        let rows: Vec<UsageRecord> = turn
            .rows
            .into_iter()
            .map(|d| d.into_record(run_id, turn_number, now, &provider, &session))
            .collect();
        let booked: f64 = rows.iter().filter_map(|r| r.cost_usd).sum();
        self.settle_provisional(run_id);
        let run = self.runs.get_mut(run_id)?;
        run.last_total_cost = turn.running_total;
        run.cost_usd += booked;
        // A run starts at `free` (no usage), the neutral end of the basis order.
        run.cost_basis = pricing::weakest_basis(
            rows.iter()
                .map(|r| r.basis.as_str())
                .chain([run.cost_basis.as_str()]),
        )
        .to_string();
        run.usage.extend(rows.iter().cloned());
        for row in rows {
            batch.ops.push(WriteOp::InsertUsage(Box::new(row)));
        }
        self.session_mut(&session).money.spent += booked;
        turn.charge.or(Some(booked))
    }

    /// A turn cut short: its streamed tokens are booked, estimated from the catalog when
    /// the model has a price, else unpriced (cost unknown, never $0).
    pub(super) fn book_cut_turn(
        &mut self,
        run_id: &str,
        tokens: Tokens,
        turn: u32,
        batch: &mut Batch,
    ) {
        let now = self.now;
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        let price = self.price_of(&run.spec.provider, run.model.as_deref());
        let draft = pricing::estimated(
            run.model.as_deref(),
            tokens,
            &price,
            pricing::Fidelity::Partial,
            "streamed message usage (the turn never finished)",
        );
        let row = draft.into_record(run_id, Some(turn), now, &run.spec.provider, &run.session);
        let cost = row.cost_usd.unwrap_or(0.0);
        let session = run.session.clone();
        let basis = row.basis.clone();
        self.settle_provisional(run_id);
        if let Some(run) = self.runs.get_mut(run_id) {
            run.usage.push(row.clone());
            run.cost_usd += cost;
            run.cost_basis =
                pricing::weakest_basis([run.cost_basis.as_str(), basis.as_str()]).to_string();
            run.note(
                batch,
                format!("the turn ended early; its streamed usage is booked {basis}"),
                now,
            );
        }
        batch.ops.push(WriteOp::InsertUsage(Box::new(row)));
        self.session_mut(&session).money.spent += cost;
    }

    /// The caps, checked after a usage row (booked or provisional) of `run_id`.
    pub(super) fn check_money(&mut self, run_id: &str) {
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        if run.state().is_terminal() {
            return;
        }
        let session = run.session.clone();
        let money = run_money(run);
        // Reservations do not enter this decision: only spend (booked + provisional).
        let s = self.session_mut(&session);
        let mut now = s.money.clone();
        now.spent += s.provisional;
        let actions = budget::after_usage(&money, &mut now);
        s.money.warned = now.warned;
        s.money.closed = now.closed;
        self.apply_budget_actions(Some(run_id), &session, actions);
    }

    fn apply_budget_actions(
        &mut self,
        run_id: Option<&str>,
        session: &str,
        actions: Vec<BudgetAction>,
    ) {
        let now = self.now;
        for action in actions {
            match action {
                BudgetAction::StopRun { reason, note } => {
                    let Some(id) = run_id else { continue };
                    if let Some(run) = self.runs.get_mut(id) {
                        if run.ending.is_some() || run.state().is_terminal() {
                            continue;
                        }
                        let mut batch = Batch::default();
                        run.note(&mut batch, note, now);
                        self.commit(batch);
                    }
                    self.end_run(id, RunState::Stopped, reason.as_str(), Cause::Stopped);
                }
                BudgetAction::Warn { note } => self.budget_event(session, "warning", note),
                BudgetAction::Reopened { note } => self.budget_event(session, "reopened", note),
                BudgetAction::StopSession { note } => {
                    self.budget_event(session, "hard_cap", note.clone());
                    let doomed: Vec<String> = self
                        .order
                        .iter()
                        .filter(|id| {
                            self.runs.get(*id).is_some_and(|r| {
                                r.session == session && r.state().is_active() && r.ending.is_none()
                            })
                        })
                        .cloned()
                        .collect();
                    for id in doomed {
                        if let Some(run) = self.runs.get_mut(&id) {
                            let mut batch = Batch::default();
                            run.note(&mut batch, note.clone(), now);
                            self.commit(batch);
                        }
                        self.end_run(&id, RunState::Stopped, "session_budget_cap", Cause::Stopped);
                    }
                }
            }
        }
    }

    /// A budget session event: a decision row (not tied to a run) and a published note.
    fn budget_event(&mut self, session: &str, decision: &str, note: String) {
        let now = self.now;
        let spent = self.money.session(session).map_or(0.0, |s| s.money.spent);
        let mut batch = Batch::default();
        batch
            .ops
            .push(WriteOp::InsertDecision(Box::new(DecisionRecord {
                run_id: None,
                at: now,
                kind: "budget".into(),
                request_id: None,
                who: "system".into(),
                decision: decision.into(),
                body: json!({"session": session, "spent_usd": spent, "note": note}),
            })));
        batch.events.push(DispatchEvent::Budget {
            session: session.to_string(),
            note,
        });
        self.commit(batch);
    }

    /// `budget`: the current session's view. What only the ledger knows (each run's basis,
    /// the unpriced runs) is read there; the money is the core's.
    pub(super) fn budget_reply(&mut self, to: ReplyTo) {
        let session = self.money.current.clone();
        let now = self.session_now(&session);
        let overlay = BudgetView {
            session: session.clone(),
            spent_usd: now.spent,
            reserved_usd: now.reserved,
            available_usd: now.available(),
            warning_usd: now.warning,
            hard_cap_usd: now.hard_cap,
            runs_by_basis: Default::default(),
            unpriced_runs: Vec::new(),
            warned: now.warned,
            closed: now.closed,
            config_refused: self.config_refused.clone(),
            ledger_unavailable: self.ledger_unavailable.clone(),
        };
        self.answer_from_ledger(
            to,
            Query::Budget {
                overlay: Box::new(overlay),
            },
        );
    }

    /// `budget set`: new caps for the current session.
    pub(super) fn budget_set(
        &mut self,
        warning: Option<f64>,
        hard_cap: Option<f64>,
    ) -> Result<(), DroverError> {
        for (what, v) in [("warning", warning), ("hard cap", hard_cap)] {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(DroverError::new(
                    ErrorCode::InvalidSpec,
                    format!("the {what} must be a dollar amount of 0 or more, not {v}"),
                ));
            }
        }
        let name = self.money.current.clone();
        let now = self.now;
        let current = self.session_mut(&name).money.clone();
        let warning = warning.unwrap_or(current.warning);
        let hard_cap = hard_cap.unwrap_or(current.hard_cap);
        if warning > hard_cap {
            return Err(DroverError::new(
                ErrorCode::InvalidSpec,
                format!(
                    "the warning ({}) must not be above the hard cap ({}); give both",
                    crate::money::usd(warning),
                    crate::money::usd(hard_cap)
                ),
            ));
        }
        let s = self.session_mut(&name);
        let actions = s.money.set_caps(warning, hard_cap, s.provisional);
        let record = BudgetSessionRecord {
            name: name.clone(),
            created_at: s.record.as_ref().map_or(now, |r| r.created_at),
            warning_usd: Some(warning),
            hard_cap_usd: Some(hard_cap),
        };
        s.record = Some(record.clone());
        self.commit(Batch {
            ops: vec![WriteOp::PutBudgetSession(record)],
            events: vec![],
        });
        self.apply_budget_actions(None, &name, actions);
        self.start_queued();
        Ok(())
    }

    /// `budget new NAME`: new runs count against a fresh budget session (read from the
    /// ledger first, when the core does not hold it).
    pub(super) fn budget_new(&mut self, to: ReplyTo, name: String) {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            let e = DroverError::new(
                ErrorCode::InvalidSpec,
                format!(
                    "{name:?} is not a budget session name: use up to 64 letters, digits, '-', \
                     '_' or '.'"
                ),
            );
            return self.reply(to, Err(e));
        }
        match self.money.session(&name) {
            Some(s) => {
                let loaded = LoadedSession {
                    name: name.clone(),
                    spent: s.money.spent,
                    record: s.record.clone(),
                };
                self.budget_new_loaded(to, name, loaded);
            }
            None => self.load(
                Fetch::Session { name: name.clone() },
                Then::BudgetNew { to, name },
            ),
        }
    }

    pub(super) fn budget_new_loaded(&mut self, to: ReplyTo, name: String, loaded: LoadedSession) {
        let now = self.now;
        let mut ops = vec![WriteOp::PutMeta {
            key: SESSION_KEY.into(),
            value: name.clone(),
        }];
        self.adopt_session(loaded);
        let s = self.session_mut(&name);
        if s.record.is_none() {
            let record = BudgetSessionRecord {
                name: name.clone(),
                created_at: now,
                warning_usd: None,
                hard_cap_usd: None,
            };
            s.record = Some(record.clone());
            ops.push(WriteOp::PutBudgetSession(record));
        }
        self.commit(Batch {
            ops,
            events: vec![DispatchEvent::Budget {
                session: name.clone(),
                note: format!("new runs now count against budget session {name}"),
            }],
        });
        self.money.current = name;
        self.budget_reply(to);
    }

    /// A config that was read again: limits, caps, providers and the catalog take effect
    /// at once. One whose catalog is broken is logged and the config in force is kept.
    pub(super) fn on_config(&mut self, config: Config) {
        let catalog = match Catalog::from_config(&config) {
            Ok(catalog) => catalog,
            Err(e) => return self.on_config_refused(e),
        };
        if self.config_refused.take().is_some() {
            self.notice_health();
        }
        self.redactor = crate::redact::Redactor::from_config(&config, |name| self.facts.env(name));
        self.guard_extra = config.guard.patterns();
        self.tests = crate::evidence::Classifier::new(&config.evidence.tests);
        self.config = config;
        self.money.catalog = catalog;
        let names: Vec<String> = self.money.sessions.keys().cloned().collect();
        for name in names {
            let limits = self.config.limits.clone();
            let s = self.session_mut(&name);
            let (warning, hard_cap) = budget::session_caps(&limits, s.record.as_ref());
            let actions = if s.money.warning != warning || s.money.hard_cap != hard_cap {
                s.money.set_caps(warning, hard_cap, s.provisional)
            } else {
                Vec::new()
            };
            self.apply_budget_actions(None, &name, actions);
        }
        self.start_queued();
    }
}

impl Core {
    /// What a turn of `run_id` needs free to start: what its cap has left.
    pub(super) fn turn_need(&self, run_id: &str) -> Option<(String, f64)> {
        let run = self.runs.get(run_id)?;
        Some((run.session.clone(), run_money(run).reservation()))
    }

    /// Whether a run of `session` already waits in the queue for money (a new turn waits
    /// behind it: money goes in order).
    fn money_waiters_in(&self, session: &str, besides: &str) -> bool {
        self.queue.iter().any(|id| {
            id != besides
                && self
                    .runs
                    .get(id)
                    .is_some_and(|r| r.session == session && r.money_wait.is_some())
        })
    }

    /// What a turn of `run_id` must wait for before it may start — what its cap has left,
    /// at most what the hard cap leaves after spend (its cap is lowered to that as it
    /// starts) — when that is not free in its budget session now, or when runs of its
    /// session wait for money ahead of it (`in_order`). `None`: it may start (a closed
    /// session, or one with nothing left, refuses it as it starts).
    pub(super) fn money_short(&mut self, run_id: &str, in_order: bool) -> Option<f64> {
        let (session, need) = self.turn_need(run_id)?;
        let now = self.session_now(&session);
        let left = ((now.hard_cap - now.spent) * 100.0 + 1e-6).floor() / 100.0;
        if now.closed || left < 0.01 {
            return None;
        }
        match budget::turn_fits(need.min(left), &now) {
            TurnFit::Waits { need, .. } => Some(need),
            TurnFit::Fits if in_order && self.money_waiters_in(&session, run_id) => Some(need),
            TurnFit::Fits => None,
        }
    }

    /// `BUDGET_EXCEEDED` for a `--no-queue` dispatch with a cap of `cap` that may not wait
    /// for the money it needs; `None` when it may start now.
    pub(super) fn no_queue_money(&mut self, session: &str, cap: f64) -> Option<DroverError> {
        let now = self.session_now(session);
        let waits = matches!(budget::turn_fits(cap, &now), TurnFit::Waits { .. })
            || self.money_waiters_in(session, "");
        waits.then(|| budget::no_queue_refusal(cap, &now, &self.reservation_holders(session)))
    }

    /// A run whose turn waits for `need` dollars: in the queue (once), the amount on its
    /// live line (a new run: `admitted`, "queued: waiting for $4.20 of budget"; an idle
    /// run's follow-up: its idle line says so).
    pub(super) fn wait_for_money(&mut self, run_id: &str, need: f64) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let changed = run.money_wait != Some(need);
        run.money_wait = Some(need);
        if changed {
            let words = budget::waiting_words(need);
            let mut batch = Batch::default();
            if run.state() == RunState::Idle {
                let bound = run
                    .idle_since
                    .unwrap_or(now)
                    .saturating_add(super::answers::secs_ms(run.spec.idle_timeout_secs));
                let idle = if run.asleep() {
                    super::run::HIBERNATED_DETAIL
                } else {
                    "idle"
                };
                run.working(
                    &mut batch,
                    bound,
                    &format!("{idle}: a follow-up is {words}"),
                    now,
                );
            } else {
                let deadline = run.deadline;
                let kind = run
                    .live
                    .as_ref()
                    .map_or(crate::live_state::LiveStateKind::Admitted, |l| l.state);
                run.set_live(
                    &mut batch,
                    kind,
                    Some(deadline),
                    Some(&format!("queued: {words}")),
                    None,
                    now,
                );
            }
            run.touch(&mut batch);
            self.commit(batch);
        }
        if !self.queue.iter().any(|id| id == run_id) {
            self.queue.push_back(run_id.to_string());
        }
    }

    /// Money may have been released by what was just handled (a turn ended or waits on the
    /// user, a run ended, the caps changed): runs waiting for it are looked at again.
    pub(super) fn recheck_money(&mut self) {
        let waiting = self
            .queue
            .iter()
            .any(|id| self.runs.get(id).is_some_and(|r| r.money_wait.is_some()));
        if waiting {
            self.start_queued();
        }
    }
}

impl Core {
    /// The config file changed and could not be taken: the config in force stays, and
    /// the refusal is kept (the `budget` view's `config_refused`) and published, so the
    /// dashboard's footer and `drover status` can show it, not only the log.
    pub(super) fn on_config_refused(&mut self, refusal: DroverError) {
        tracing::warn!(code = %refusal.code, "{}; keeping the config in force", refusal.message);
        let message = format!(
            "config not reloaded: {} (the config in force is kept)",
            refusal.message
        );
        if self.config_refused.as_deref() == Some(message.as_str()) {
            return;
        }
        self.config_refused = Some(message);
        self.notice_health();
    }
}

fn run_money(run: &Run) -> RunMoney {
    RunMoney {
        cap: run.spec.budget_usd,
        spent: run.cost_usd + run.provisional_usd,
    }
}
