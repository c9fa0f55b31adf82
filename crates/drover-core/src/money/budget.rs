//! Budget decisions: what a new run may spend, whether a turn may start now, and what to do
//! after each usage row.
//!
//! Pure: no I/O and no clock. The driver keeps the numbers ([`SessionMoney`],
//! [`RunMoney`]), asks these functions, and carries out what they return. What must stay
//! true (docs/ARCHITECTURE.md §"Money"):
//! - a run's cap is its requested budget clamped into `[limits] budget_usd_min..max`
//!   ([`run_cap`]), then fitted into what the session's hard cap leaves after its spend, in
//!   whole cents rounded down ([`fit`]): granted as asked, lowered with a note, or refused
//!   with `BUDGET_EXCEEDED` when not a cent is left or the session is closed. Reservations
//!   never refuse a run: they are released as turns end, so a run waits for them;
//! - money is reserved for a turn, not for a run: a run in a turn reserves what its cap
//!   has left ([`RunMoney::reservation`]); a run waiting on the user, on a route card, idle,
//!   hibernated or queued reserves nothing;
//! - a turn starts only when what its run's cap has left is free in the session (the hard
//!   cap less spend and reservations, [`turn_fits`]); otherwise it waits, in order;
//! - spend counts every usage row of the session, removed runs included; the driver sums
//!   rows by budget session, never by what is on screen;
//! - after every usage row ([`after_usage`]): a run whose spend reached its cap is stopped
//!   (`budget_cap`); the session warning is given once; when the session's spend reaches
//!   the hard cap, every active, queued and held run of the session is stopped
//!   (`session_budget_cap`) and the session is closed to new dispatches until the cap is
//!   raised above its spend ([`SessionMoney::set_caps`]);
//! - with pricing enforced, a model without a price is refused up front
//!   (`BUDGET_UNPRICED`); otherwise it is flagged ([`check_price`]).

use serde::{Deserialize, Serialize};

use crate::config::Limits;
use crate::error::{DroverError, ErrorCode};
use crate::ledger::BudgetSessionRecord;
use crate::spec::clamp;

use super::dollars::usd;
use super::pricing::{DOLLAR_EPSILON, Price, tidy_dollars};

/// One run's money.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMoney {
    /// Its budget in dollars (whole cents).
    pub cap: f64,
    /// What its usage rows have booked so far.
    pub spent: f64,
}

impl RunMoney {
    /// What a run in a turn holds back from the session (and what a turn of it needs free
    /// to start): its cap minus its spend, not below 0.
    pub fn reservation(&self) -> f64 {
        tidy_dollars((self.cap - self.spent).max(0.0))
    }

    /// Whether its spend has reached its cap.
    pub fn is_out_of_money(&self) -> bool {
        reached(self.spent, self.cap)
    }

    /// Whether its spend has come within `reserve` (at most half its cap) of its cap: its
    /// next turn is the wrap-up (docs/ARCHITECTURE.md §"Wrap up, then stop"). A reserve of
    /// 0 never is.
    pub fn is_near_cap(&self, reserve: f64) -> bool {
        let reserve = reserve.min(self.cap / 2.0);
        reserve > 0.0 && reached(self.spent, self.cap - reserve)
    }
}

/// What the runs in a turn hold back: the sum of their reservations.
pub fn reserved<'a>(live_runs: impl IntoIterator<Item = &'a RunMoney>) -> f64 {
    tidy_dollars(live_runs.into_iter().map(RunMoney::reservation).sum())
}

/// One budget session's money.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMoney {
    /// The budget session's name (`default` unless the user started another).
    pub name: String,
    /// Booked spend of every run of the session, removed runs included.
    pub spent: f64,
    /// What runs in a turn hold back ([`reserved`]).
    pub reserved: f64,
    /// The spend at which the user is told, once.
    pub warning: f64,
    /// The spend at which everything stops.
    pub hard_cap: f64,
    /// The warning was given.
    pub warned: bool,
    /// The hard cap was reached: new dispatches are refused until it is raised.
    pub closed: bool,
}

impl SessionMoney {
    /// A session with nothing spent or reserved.
    pub fn new(name: &str, warning: f64, hard_cap: f64) -> SessionMoney {
        SessionMoney::restore(name, 0.0, 0.0, warning, hard_cap)
    }

    /// A session as the ledger left it: past the warning counts as warned (the user is
    /// not told twice across a restart) and at the hard cap counts as closed.
    pub fn restore(
        name: &str,
        spent: f64,
        reserved: f64,
        warning: f64,
        hard_cap: f64,
    ) -> SessionMoney {
        SessionMoney {
            name: name.to_string(),
            spent,
            reserved,
            warning,
            hard_cap,
            warned: reached(spent, warning),
            closed: reached(spent, hard_cap),
        }
    }

    /// What is free for a turn to start now: the hard cap minus spend and reservations,
    /// in whole cents rounded down, not below 0.
    pub fn available(&self) -> f64 {
        cents_down(self.hard_cap - self.spent - self.reserved) / 100.0
    }

    /// New caps (`drover budget set`, or the config re-read). Raising the hard cap above
    /// the spend reopens a closed session; lowering it to the spend or below closes it
    /// and stops its runs. Raising the warning above the spend arms it again; lowering it
    /// to the spend gives it now. The spend judged is the booked spend plus
    /// `provisional` (what turns in flight have streamed), as [`after_usage`] judges it,
    /// so a warning given on streamed spend is not armed again by a new hard cap.
    pub fn set_caps(&mut self, warning: f64, hard_cap: f64, provisional: f64) -> Vec<BudgetAction> {
        self.warning = warning;
        self.hard_cap = hard_cap;
        let spent = self.spent + provisional;
        let mut actions = Vec::new();
        if reached(spent, warning) {
            if !self.warned {
                self.warned = true;
                actions.push(BudgetAction::Warn {
                    note: warning_note(self),
                });
            }
        } else {
            self.warned = false;
        }
        if reached(spent, hard_cap) {
            if !self.closed {
                self.closed = true;
                actions.push(BudgetAction::StopSession {
                    note: hard_cap_note(self),
                });
            }
        } else if self.closed {
            self.closed = false;
            actions.push(BudgetAction::Reopened {
                note: format!(
                    "budget session {} is open again: its hard cap is now {} ({} spent)",
                    self.name,
                    usd(hard_cap),
                    usd(self.spent)
                ),
            });
        }
        actions
    }
}

/// The warning and hard cap in force for a budget session: the ones set on the session
/// (`drover budget set`), else the config's `[limits]`.
pub fn session_caps(limits: &Limits, session: Option<&BudgetSessionRecord>) -> (f64, f64) {
    let warning = session
        .and_then(|s| s.warning_usd)
        .unwrap_or(limits.session_warning_usd);
    let hard_cap = session
        .and_then(|s| s.hard_cap_usd)
        .unwrap_or(limits.session_hard_cap_usd);
    (warning, hard_cap)
}

/// A run's cap before fitting: the requested budget clamped into the configured range
/// and rounded to whole cents, or the configured default when none was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunCap {
    /// The cap in US dollars, whole cents.
    pub cap: f64,
    /// What was asked for, when the clamp changed it.
    pub clamped_from: Option<f64>,
}

/// The cap for a requested budget under `limits` (the clamp the spec validation applies,
/// re-applied when a queued run starts under limits that changed since).
pub fn run_cap(requested: Option<f64>, limits: &Limits) -> RunCap {
    let mut clamps = Vec::new();
    let cap = clamp::dollars(
        "budget_usd",
        requested,
        (
            limits.budget_usd_min,
            limits.budget_usd_max,
            limits.budget_usd_default,
        ),
        &mut clamps,
    );
    RunCap {
        cap,
        clamped_from: if clamps.is_empty() { None } else { requested },
    }
}

/// What a new (or starting) run may spend.
#[derive(Debug, Clone, PartialEq)]
pub enum Fit {
    /// The cap as asked.
    Granted {
        /// The run's cap in US dollars, whole cents.
        cap: f64,
    },
    /// Less than asked: what the hard cap leaves after the session's spend, with a note
    /// for the user.
    Lowered {
        /// The run's cap in US dollars, whole cents: what the session has left.
        cap: f64,
        /// Why the cap was lowered, for the run's notes.
        note: String,
    },
    /// `BUDGET_EXCEEDED`: nothing is left after the spend, or the session is closed.
    Refused(DroverError),
}

/// Fits `requested_cap` (dollars, see [`run_cap`]) into what `session`'s hard cap leaves
/// after its spend. Reservations do not count here: a run whose cap is held by turns in
/// flight waits for them ([`turn_fits`]), it is not refused or cut down for them.
pub fn fit(requested_cap: f64, session: &SessionMoney) -> Fit {
    if session.closed {
        return Fit::Refused(DroverError::new(
            ErrorCode::BudgetExceeded,
            format!(
                "Budget session {} reached its hard cap of {} ({} spent); raise it with `drover budget set --hard AMOUNT` or start a new budget session with `drover budget new NAME`.",
                session.name,
                usd(session.hard_cap),
                usd(session.spent)
            ),
        ));
    }
    let requested_cents = if requested_cap.is_finite() {
        (requested_cap * 100.0).round().max(0.0)
    } else {
        0.0
    };
    let left_cents = cents_down(session.hard_cap - session.spent);
    let situation = format!(
        "{} spent under its {} hard cap",
        usd(session.spent),
        usd(session.hard_cap)
    );
    if left_cents < 1.0 {
        return Fit::Refused(DroverError::new(
            ErrorCode::BudgetExceeded,
            format!(
                "Budget session {} has nothing left for a new run ({situation}); raise the cap with `drover budget set --hard AMOUNT`, or start a new budget session with `drover budget new NAME`.",
                session.name
            ),
        ));
    }
    if requested_cents <= left_cents {
        return Fit::Granted {
            cap: requested_cents / 100.0,
        };
    }
    let cap = left_cents / 100.0;
    Fit::Lowered {
        cap,
        note: format!(
            "budget lowered from {} to {}: that is what budget session {} has left ({situation})",
            usd(requested_cents / 100.0),
            usd(cap),
            session.name
        ),
    }
}

/// Whether a turn needing `need` dollars (what its run's cap has left) may start now.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnFit {
    /// What it needs is free: it starts, and reserves it.
    Fits,
    /// Turns in flight hold the money: it waits until `need` is free.
    Waits {
        /// What it waits for, in whole cents.
        need: f64,
        /// What is free now.
        free: f64,
    },
}

/// Whether a turn needing `need` fits into what `session` has free now (the hard cap less
/// spend and reservations, [`SessionMoney::available`]), in whole cents.
pub fn turn_fits(need: f64, session: &SessionMoney) -> TurnFit {
    let need_cents = if need.is_finite() {
        (need * 100.0 - 1e-6).ceil().max(0.0)
    } else {
        0.0
    };
    let free = session.available();
    if need_cents <= (free * 100.0).round() {
        TurnFit::Fits
    } else {
        TurnFit::Waits {
            need: need_cents / 100.0,
            free,
        }
    }
}

/// The live line of a run waiting for `need` dollars of its budget session.
pub fn waiting_words(need: f64) -> String {
    format!("waiting for {} of budget", usd(need))
}

/// `BUDGET_EXCEEDED` for a dispatch that may not wait (`--no-queue`) and whose cap is not
/// free now; `holders` names the runs whose turns hold the money.
pub fn no_queue_refusal(cap: f64, session: &SessionMoney, holders: &str) -> DroverError {
    DroverError::new(
        ErrorCode::BudgetExceeded,
        format!(
            "Budget session {} has {} free and this run needs {} ({} spent, {} held by turns in flight, {} hard cap); dispatch it without --no-queue to let it wait for the money, or raise the cap with `drover budget set --hard AMOUNT`.{holders}",
            session.name,
            usd(session.available()),
            usd(cap),
            usd(session.spent),
            usd(session.reserved),
            usd(session.hard_cap)
        ),
    )
}

/// The up-front price check of a dispatch: `Ok(None)` for a priced or free model;
/// `Ok(Some(note))` for an unpriced one when pricing is not enforced (its usage will be
/// recorded unpriced and flagged); `BUDGET_UNPRICED` when it is.
pub fn check_price(
    enforce: bool,
    provider: &str,
    model: &str,
    price: &Price,
) -> Result<Option<String>, DroverError> {
    if *price != Price::Unpriced {
        return Ok(None);
    }
    if enforce {
        return Err(DroverError::new(
            ErrorCode::BudgetUnpriced,
            format!(
                "Model {model} of provider {provider} has no price in the model catalog and pricing is enforced; add its prices under [[catalog.models]] in your config, pick a priced model, or set `pricing.enforce = false`."
            ),
        ));
    }
    Ok(Some(format!(
        "model {model} of provider {provider} has no price in the model catalog: its usage is recorded as unpriced and does not count against the budget"
    )))
}

/// Why a run is stopped for money (its completion reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The run spent its own cap.
    BudgetCap,
    /// Its budget session reached the hard cap.
    SessionBudgetCap,
}

impl StopReason {
    /// The reason as the ledger and the API write it (`budget_cap`,
    /// `session_budget_cap`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::BudgetCap => "budget_cap",
            StopReason::SessionBudgetCap => "session_budget_cap",
        }
    }
}

/// What the driver must do about money.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum BudgetAction {
    /// Stop the run whose usage row this was, mid-turn, with `reason`.
    StopRun {
        /// The run's completion reason.
        reason: StopReason,
        /// What to tell the user.
        note: String,
    },
    /// Tell the user the session passed its warning (once).
    Warn {
        /// What to tell the user.
        note: String,
    },
    /// Stop every active, queued and held run of the session (`session_budget_cap`);
    /// the session is closed to new dispatches.
    StopSession {
        /// What to tell the user.
        note: String,
    },
    /// The session accepts dispatches again.
    Reopened {
        /// What to tell the user.
        note: String,
    },
}

/// Decides, after a usage row was booked on `run` and `session` (both `spent` already
/// include it), what must happen. Updates `session.warned` and `session.closed`.
pub fn after_usage(run: &RunMoney, session: &mut SessionMoney) -> Vec<BudgetAction> {
    let mut actions = Vec::new();
    if !session.warned && reached(session.spent, session.warning) {
        session.warned = true;
        actions.push(BudgetAction::Warn {
            note: warning_note(session),
        });
    }
    let out_of_money = run.is_out_of_money();
    if out_of_money {
        actions.push(BudgetAction::StopRun {
            reason: StopReason::BudgetCap,
            note: format!(
                "the run spent {} of its {} budget",
                usd(run.spent),
                usd(run.cap)
            ),
        });
    }
    if reached(session.spent, session.hard_cap) {
        if !session.closed {
            session.closed = true;
            actions.push(BudgetAction::StopSession {
                note: hard_cap_note(session),
            });
        } else if !out_of_money {
            // A row from a run of a closed session: it is one of those being stopped.
            actions.push(BudgetAction::StopRun {
                reason: StopReason::SessionBudgetCap,
                note: hard_cap_note(session),
            });
        }
    }
    actions
}

fn warning_note(session: &SessionMoney) -> String {
    format!(
        "budget session {} has spent {}, past its {} warning (hard cap {})",
        session.name,
        usd(session.spent),
        usd(session.warning),
        usd(session.hard_cap)
    )
}

fn hard_cap_note(session: &SessionMoney) -> String {
    format!(
        "budget session {} reached its {} hard cap ({} spent): its runs are stopped and new dispatches are refused until the cap is raised",
        session.name,
        usd(session.hard_cap),
        usd(session.spent)
    )
}

/// Whether `spent` has reached `limit` (float noise forgiven).
fn reached(spent: f64, limit: f64) -> bool {
    spent + DOLLAR_EPSILON >= limit
}

/// Whole cents in `dollars`, rounded down (float noise forgiven), not below 0.
fn cents_down(dollars: f64) -> f64 {
    if !dollars.is_finite() {
        return 0.0;
    }
    (dollars * 100.0 + 1e-6).floor().max(0.0)
}
