//! Table tests of the money decisions: no I/O, no clock.

mod budget;
mod catalog;
mod pricing;
