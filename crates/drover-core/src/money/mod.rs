//! Money: the model catalog, pricing usage into rows, and budget decisions
//! (docs/ARCHITECTURE.md §"Money").
//!
//! Owns what a model costs and what a run may spend. Pure throughout: no I/O, no clock;
//! the dispatcher keeps the numbers, asks these functions and does what they return.
//! What must stay true:
//! - usage that cannot be priced is recorded without a cost, never as $0;
//! - no run is granted a cap above what its session's hard cap leaves after spend, and no
//!   turn starts unless what its run's cap has left is free after the reservations of the
//!   turns in flight;
//! - the catalog built from a loaded config is valid (the loader checked it).
//!
//! Files: `catalog` (models, tiers, prices, resolution), `pricing` (tokens × price,
//! basis, Claude's per-turn split), `budget` (caps, fitting, whether a turn fits now, after-usage actions),
//! `dollars` (what a dollar amount is and how one reads: `$3.21`, `$0.075` per Mtok).

pub mod budget;
pub mod catalog;
pub mod dollars;
pub mod pricing;

#[cfg(test)]
mod tests;

pub use budget::{
    BudgetAction, Fit, RunCap, RunMoney, SessionMoney, StopReason, TurnFit, after_usage,
    check_price, fit, reserved, run_cap, session_caps, turn_fits,
};
pub use catalog::{Catalog, CatalogProblem, EMBEDDED_CATALOG_TOML, Model, Tier};
pub use dollars::{usd, usd_per_mtok};
pub use pricing::{
    Basis, ClaudeTurn, Fidelity, Part, Price, RunSpend, UsageDraft, claude_turn, estimated,
    reported, total_cost_delta, weakest_basis,
};
