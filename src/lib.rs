//! drover: dispatch coding-agent runs and supervise them.
//!
//! The library holds everything; `src/main.rs` is a thin entry point. Decision code
//! (`dispatch::core` — every rule of a run's life —, `live_state`, `spec`,
//! `result_contract`, `money`, `route`) is pure: no I/O, no clock. The dispatcher's
//! driver carries out what the core decides; the ledger owns the SQLite file through one
//! writer thread.

pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod dispatch;
pub mod error;
#[doc(hidden)]
pub mod fuzz;
pub mod guard;
pub mod ledger;
pub mod live_state;
pub mod logging;
pub mod mcp;
pub mod money;
pub mod paths;
pub mod providers;
pub mod redact;
pub mod result_contract;
pub mod route;
pub mod rules;
pub mod run_state;
pub mod sim;
pub mod spec;
pub mod terminal;
pub mod tui;
pub mod workspace;

pub use error::{DroverError, ErrorCode, UnixMillis};

/// This build's version and the commit it was built from (`0.1.0 (a1b2c3d)`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("DROVER_COMMIT"), ")");
