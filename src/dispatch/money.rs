//! Money in the dispatcher (DESIGN.md §6): the catalog, budget sessions, fitting a new
//! run's cap, booking usage as it streams and when a turn reports its cost, the caps
//! checked after every usage row, and the config re-read while running.
//!
//! What must stay true: the decisions are the pure ones in `crate::money`; this module
//! only feeds them the actor's numbers and carries out what they return. Streamed usage
//! is a provisional estimate held in memory until the turn reports what it cost; a turn
//! cut short books its streamed usage (estimated, or unpriced — never $0).

use serde_json::{Value, json};
use std::time::SystemTime;

use super::actor::Actor;
use super::api::{BudgetView, DispatchEvent};
use super::run::{Batch, Run};
use crate::config::Config;
use crate::ledger::{BudgetSessionRecord, DecisionRecord, UsageRecord, WriteOp};
use crate::live_state::Cause;
use crate::money::budget::{self, BudgetAction, Fit, RunMoney, SessionMoney};
use crate::money::catalog::Catalog;
use crate::money::pricing::{self, Price};
use crate::providers::{Tokens, TurnEnd};
use crate::run_state::RunState;
use crate::{DroverError, ErrorCode, UnixMillis};

/// The ledger meta key naming the budget session new runs count against.
const SESSION_KEY: &str = "budget_session";
/// On the hot path, the config file is looked at no more often than this.
const CONFIG_CHECK_MS: i64 = 500;

/// The money state the actor keeps.
pub struct Money {
    pub catalog: Catalog,
    /// Budget sessions seen since start, by name.
    pub sessions: std::collections::HashMap<String, SessionMoney>,
    pub current: String,
    /// Each session's provisional (streamed, not yet reported) spend, kept as runs add
    /// and settle it, so checking the caps after a usage row costs the same with 1 run
    /// or 100.
    provisional: std::collections::HashMap<String, f64>,
    config_mtime: Option<SystemTime>,
    config_checked_at: UnixMillis,
}

impl Money {
    pub fn new(config: &Config, current: String, now: UnixMillis) -> Result<Money, DroverError> {
        Ok(Money {
            catalog: Catalog::from_config(config)?,
            sessions: Default::default(),
            current,
            provisional: Default::default(),
            config_mtime: None,
            config_checked_at: now,
        })
    }
}

pub fn config_mtime(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl Actor {
    /// Reads the current budget session and its spend from the ledger (at start).
    pub fn load_money(&mut self) -> Result<(), DroverError> {
        let current = self
            .reader
            .meta(SESSION_KEY)?
            .unwrap_or_else(|| super::requests::DEFAULT_SESSION.to_string());
        let mut money = Money::new(self.config(), current.clone(), self.now())?;
        money.config_mtime = config_mtime(&self.options.paths.config_file);
        self.money = Some(money);
        self.ensure_session(&current)?;
        Ok(())
    }

    pub fn money(&self) -> &Money {
        self.money.as_ref().expect("money is loaded at start")
    }

    fn money_mut(&mut self) -> &mut Money {
        self.money.as_mut().expect("money is loaded at start")
    }

    pub fn current_session(&self) -> String {
        self.money().current.clone()
    }

    /// The session's money, restored from the ledger the first time it is needed.
    fn ensure_session(&mut self, name: &str) -> Result<(), DroverError> {
        if self.money().sessions.contains_key(name) {
            return Ok(());
        }
        let spent: f64 = self
            .reader
            .usage(None)?
            .iter()
            .filter(|u| u.budget_session == name)
            .filter_map(|u| u.cost_usd)
            .sum();
        let record = self.reader.budget_session(name)?;
        let (warning, hard_cap) = budget::session_caps(self.limits(), record.as_ref());
        let session = SessionMoney::restore(name, spent, 0.0, warning, hard_cap);
        self.money_mut().sessions.insert(name.to_string(), session);
        Ok(())
    }

    /// What live runs of `session` may still spend, counting their provisional spend.
    fn reserved_in(&self, session: &str) -> f64 {
        budget::reserved(
            self.runs
                .values()
                .filter(|r| r.session == session && r.holds_slot())
                .map(run_money)
                .collect::<Vec<_>>()
                .iter(),
        )
    }

    fn provisional_in(&self, session: &str) -> f64 {
        self.money()
            .provisional
            .get(session)
            .copied()
            .unwrap_or(0.0)
    }

    /// Moves a run's provisional spend (and its session's total) by `delta`.
    fn add_provisional(&mut self, run_id: &str, delta: f64) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.provisional_usd += delta;
        let session = run.session.clone();
        let total = self.money_mut().provisional.entry(session).or_insert(0.0);
        *total = (*total + delta).max(0.0);
    }

    /// The run's provisional spend settles (its real cost was booked).
    fn settle_provisional(&mut self, run_id: &str) {
        let provisional = self.runs.get(run_id).map_or(0.0, |r| r.provisional_usd);
        self.add_provisional(run_id, -provisional);
    }

    /// The session as the budget decisions must see it now: booked plus provisional
    /// spend, and the live runs' reservations.
    fn session_now(&mut self, name: &str) -> Result<SessionMoney, DroverError> {
        self.ensure_session(name)?;
        let provisional = self.provisional_in(name);
        let reserved = self.reserved_in(name);
        let mut s = self.money().sessions[name].clone();
        s.spent += provisional;
        s.reserved = reserved;
        Ok(s)
    }

    /// The model a run uses when the spec names none: the catalog's default (pinned to
    /// the first visible model when the default is hidden, with a note).
    pub fn default_model(&self, provider: &str) -> (Option<String>, Option<String>) {
        let (model, note) = self.money().catalog.default_model(provider);
        (model.map(|m| m.id.clone()), note)
    }

    pub fn price_of(&self, provider: &str, model: Option<&str>) -> Price {
        match model {
            Some(m) => self.money().catalog.price(provider, m),
            None => Price::Unpriced,
        }
    }

    /// Checks the model's price and fits the run's cap into what its session has left.
    /// Returns the cap and the notes to keep on the run.
    pub fn fit_run(
        &mut self,
        session: &str,
        provider: &str,
        model: Option<&str>,
        requested_cap: f64,
    ) -> Result<(f64, Vec<String>), DroverError> {
        let mut notes = Vec::new();
        let enforce = self.config().pricing.enforce;
        let price = self.price_of(provider, model);
        if let Some(note) = budget::check_price(
            enforce,
            provider,
            model.unwrap_or("(the provider's default)"),
            &price,
        )? {
            notes.push(note);
        }
        let now = self.session_now(session)?;
        match budget::fit(requested_cap, &now) {
            Fit::Granted { cap } => Ok((cap, notes)),
            Fit::Lowered { cap, note } => {
                notes.push(note);
                Ok((cap, notes))
            }
            Fit::Refused(e) => Err(e),
        }
    }

    /// Tokens streamed during a turn: an estimate until the turn reports its cost.
    pub fn on_streamed_usage(&mut self, run_id: &str, model: Option<&str>, tokens: &Tokens) {
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
    pub fn book_turn(&mut self, run_id: &str, end: &TurnEnd, batch: &mut Batch) -> Option<f64> {
        let now = self.now();
        let run = self.runs.get(run_id)?;
        let provider = run.spec.provider.clone();
        let main_model = run.model.clone();
        let previous_total = run.last_total_cost;
        let turn_number = run.turns.last().map(|t| t.number);
        let session = run.session.clone();
        let turn = pricing::claude_turn(end, previous_total, main_model.as_deref(), |m| {
            self.money().catalog.price(&provider, m)
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
        if let Some(s) = self.money_mut().sessions.get_mut(&session) {
            s.spent += booked;
        }
        turn.charge.or(Some(booked))
    }

    /// A turn cut short: its streamed tokens are booked, estimated from the catalog when
    /// the model has a price, else unpriced (cost unknown, never $0).
    pub fn book_cut_turn(&mut self, run_id: &str, tokens: Tokens, turn: u32, batch: &mut Batch) {
        let now = self.now();
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
        if let Some(s) = self.money_mut().sessions.get_mut(&session) {
            s.spent += cost;
        }
    }

    /// The caps, checked after a usage row (booked or provisional) of `run_id`.
    pub fn check_money(&mut self, run_id: &str) {
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        if run.state.is_terminal() {
            return;
        }
        let session = run.session.clone();
        let money = run_money(run);
        // Reservations do not enter this decision: only spend (booked + provisional).
        if self.ensure_session(&session).is_err() {
            return;
        }
        let mut now = self.money().sessions[&session].clone();
        now.spent += self.provisional_in(&session);
        let actions = budget::after_usage(&money, &mut now);
        if let Some(s) = self.money_mut().sessions.get_mut(&session) {
            s.warned = now.warned;
            s.closed = now.closed;
        }
        self.apply_budget_actions(Some(run_id), &session, actions);
    }

    fn apply_budget_actions(
        &mut self,
        run_id: Option<&str>,
        session: &str,
        actions: Vec<BudgetAction>,
    ) {
        let now = self.now();
        for action in actions {
            match action {
                BudgetAction::StopRun { reason, note } => {
                    let Some(id) = run_id else { continue };
                    if let Some(run) = self.runs.get_mut(id) {
                        if run.ending.is_some() || run.state.is_terminal() {
                            continue;
                        }
                        let mut batch = Batch::default();
                        run.note(&mut batch, note, now);
                        self.commit(batch);
                    }
                    self.end_run(id, RunState::Stopped, reason.as_str(), Cause::Stopped);
                }
                BudgetAction::Warn { note } => self.budget_event(session, "warning", note, now),
                BudgetAction::Reopened { note } => {
                    self.budget_event(session, "reopened", note, now)
                }
                BudgetAction::StopSession { note } => {
                    self.budget_event(session, "hard_cap", note.clone(), now);
                    let doomed: Vec<String> = self
                        .order
                        .iter()
                        .filter(|id| {
                            self.runs.get(*id).is_some_and(|r| {
                                r.session == session && r.state.is_active() && r.ending.is_none()
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
    fn budget_event(&mut self, session: &str, decision: &str, note: String, now: UnixMillis) {
        let spent = self.money().sessions.get(session).map_or(0.0, |s| s.spent);
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

    pub fn budget_view(&mut self) -> Result<BudgetView, DroverError> {
        let session = self.current_session();
        let now = self.session_now(&session)?;
        let mut view = crate::control::offline::budget_from_ledger(
            &self.reader,
            &session,
            self.limits(),
            now.reserved,
        )?;
        view.spent_usd = now.spent;
        view.warning_usd = now.warning;
        view.hard_cap_usd = now.hard_cap;
        view.available_usd = now.available();
        view.warned = now.warned;
        view.closed = now.closed;
        Ok(view)
    }

    /// `drover budget set`: new caps for the current session.
    pub fn budget_set(
        &mut self,
        warning: Option<f64>,
        hard_cap: Option<f64>,
    ) -> Result<Value, DroverError> {
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
        let name = self.current_session();
        self.ensure_session(&name)?;
        let current = self.money().sessions[&name].clone();
        let warning = warning.unwrap_or(current.warning);
        let hard_cap = hard_cap.unwrap_or(current.hard_cap);
        if warning > hard_cap {
            return Err(DroverError::new(
                ErrorCode::InvalidSpec,
                format!(
                    "the warning ({}) must not be above the hard cap ({}); give both",
                    budget::usd(warning),
                    budget::usd(hard_cap)
                ),
            ));
        }
        let actions = self
            .money_mut()
            .sessions
            .get_mut(&name)
            .map(|s| s.set_caps(warning, hard_cap))
            .unwrap_or_default();
        let now = self.now();
        let created_at = self
            .reader
            .budget_session(&name)?
            .map_or(now, |r| r.created_at);
        self.commit(Batch {
            ops: vec![WriteOp::PutBudgetSession(BudgetSessionRecord {
                name: name.clone(),
                created_at,
                warning_usd: Some(warning),
                hard_cap_usd: Some(hard_cap),
            })],
            events: vec![],
        });
        self.apply_budget_actions(None, &name, actions);
        self.start_queued();
        serde_json::to_value(self.budget_view()?).map_err(internal)
    }

    /// `drover budget new NAME`: new runs count against a fresh budget session.
    pub fn budget_new(&mut self, name: String) -> Result<Value, DroverError> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(DroverError::new(
                ErrorCode::InvalidSpec,
                format!(
                    "{name:?} is not a budget session name: use up to 64 letters, digits, '-', \
                     '_' or '.'"
                ),
            ));
        }
        let now = self.now();
        let existing = self.reader.budget_session(&name)?;
        let mut ops = vec![WriteOp::PutMeta {
            key: SESSION_KEY.into(),
            value: name.clone(),
        }];
        if existing.is_none() {
            ops.push(WriteOp::PutBudgetSession(BudgetSessionRecord {
                name: name.clone(),
                created_at: now,
                warning_usd: None,
                hard_cap_usd: None,
            }));
        }
        self.commit(Batch {
            ops,
            events: vec![DispatchEvent::Budget {
                session: name.clone(),
                note: format!("new runs now count against budget session {name}"),
            }],
        });
        self.money_mut().current = name.clone();
        self.ensure_session(&name)?;
        serde_json::to_value(self.budget_view()?).map_err(internal)
    }

    /// Re-reads the config file when it changed: limits, caps, providers and the catalog
    /// take effect without a restart. A broken file is logged and the config in force is
    /// kept. On the hot path (usage rows) the file is looked at no more often than every
    /// half second; at a dispatch, follow-up or turn end, every time.
    pub fn refresh_config(&mut self, hot_path: bool) {
        let now = self.now();
        if hot_path && now - self.money().config_checked_at < CONFIG_CHECK_MS {
            return;
        }
        self.money_mut().config_checked_at = now;
        let path = self.options.paths.config_file.clone();
        let mtime = config_mtime(&path);
        if mtime == self.money().config_mtime {
            return;
        }
        self.money_mut().config_mtime = mtime;
        let loaded = Config::load(&path).and_then(|c| Catalog::from_config(&c).map(|cat| (c, cat)));
        match loaded {
            Ok((config, catalog)) => {
                tracing::info!(path = %path.display(), "config re-read");
                self.options.config = config;
                self.money_mut().catalog = catalog;
                let names: Vec<String> = self.money().sessions.keys().cloned().collect();
                for name in names {
                    let record = self.reader.budget_session(&name).ok().flatten();
                    let (warning, hard_cap) = budget::session_caps(self.limits(), record.as_ref());
                    let actions = self
                        .money_mut()
                        .sessions
                        .get_mut(&name)
                        .map(|s| {
                            if s.warning != warning || s.hard_cap != hard_cap {
                                s.set_caps(warning, hard_cap)
                            } else {
                                Vec::new()
                            }
                        })
                        .unwrap_or_default();
                    self.apply_budget_actions(None, &name, actions);
                }
                self.start_queued();
            }
            Err(e) => {
                tracing::warn!(code = %e.code, "{}; keeping the config in force", e.message);
            }
        }
    }
}

fn run_money(run: &Run) -> RunMoney {
    RunMoney {
        cap: run.spec.budget_usd,
        spent: run.cost_usd + run.provisional_usd,
    }
}

fn internal(e: serde_json::Error) -> DroverError {
    DroverError::new(ErrorCode::Internal, e.to_string())
}
