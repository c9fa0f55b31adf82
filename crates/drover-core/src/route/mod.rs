//! Routing (docs/ARCHITECTURE.md §"Routing and route cards"): which provider and model a
//! dispatch without one should run on, whether it waits behind a route card, whether a pick
//! is acceptable, and what a finished run is offered next (retry or escalation).
//!
//! Pure throughout: no I/O, no clock. The dispatcher classifies the spec, asks [`route`]
//! for the ranked options, [`decide`]s whether to hold, checks picks with
//! [`validate_pick`] (then rails and budget itself), and asks [`escalation_offer`] when a
//! run ends. What must stay true:
//! - options only name visible catalog models of available providers, at most
//!   [`MAX_OPTIONS`], numbered from 1, the first recommended;
//! - a class that needs vision is never offered, nor accepts, a model without it;
//! - a run stopped by the user or for money is offered nothing.
//!
//! Files: `class` (task classes, classification), `policy` (the routing table and ladder of
//! `assets/routing.toml`), `router` (options), `pick` (pick validation and the routing
//! mode decision), `escalation` (retry and escalation offers).

pub mod class;
pub mod escalation;
pub mod pick;
pub mod policy;
pub mod router;

#[cfg(test)]
mod tests;

pub use crate::config::{ClassRouting, RoutingConfig, RoutingMode};
pub use class::{TaskClass, classify, classify_text};
pub use escalation::{
    ESCALATED, Escalation, EscalationKind, LAUNCH_ERROR, NO_OFFER_REASONS, RETRIED, RunOutcome,
    TRANSIENT_REASONS, escalation_offer,
};
pub use pick::{RouteDecision, decide, hold_reason, mode_for, validate_pick, validate_pick_with};
pub use policy::{ClassPolicy, EMBEDDED_ROUTING_TOML, Ladder, RoutingPolicy};
pub use router::{
    LeftOut, MAX_OPTIONS, ProviderAvailability, RouteOption, Routing, route, tokens_short,
};
