//! drover-core: everything of drover but the terminal UI and the command line.
//!
//! Decision code (`dispatch::core` — every rule of a run's life —, `live_state`,
//! `run_state`, `spec`, `result_contract`, `money`, `route`) is pure: no I/O, no clock. The
//! dispatcher's driver carries out what the core decides; the ledger owns the SQLite file
//! through one writer thread; `providers` runs the agent CLIs as children; `control` is the
//! owner's socket server and its client. Nothing here depends on ratatui, crossterm, clap
//! or rmcp (`cargo tree -p drover-core` shows it); the dashboard (`drover-tui`) and the
//! command line (`drover`) are clients of the dispatcher API built on top. Every public
//! item says what it is (`missing_docs` is denied); docs/ARCHITECTURE.md maps the modules.

#![deny(missing_docs)]

pub mod clock;
pub mod config;
pub mod control;
pub mod dispatch;
pub mod error;
pub mod evidence;
pub mod guard;
pub mod ledger;
pub mod live_state;
pub mod logging;
pub mod money;
pub mod one_shot;
pub mod paths;
pub mod providers;
pub mod redact;
pub mod resident;
pub mod result_contract;
pub mod route;
pub mod rules;
pub mod run_state;
pub mod sim;
pub mod spec;
pub mod text;
pub mod workspace;

pub use error::{DroverError, ErrorCode, UnixMillis};

static VERSION: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// The version this process reports (the owner's `status`): the one the binary named at its
/// start with [`set_version`] (`0.1.0 (a1b2c3d)`, with the commit it was built from), or the
/// package version alone where nothing named one (a test). Named at run time so that a new
/// commit rebuilds the small `drover` crate only, not this one.
pub fn version() -> &'static str {
    VERSION.get().copied().unwrap_or(env!("CARGO_PKG_VERSION"))
}

/// Names this build's version for [`version`]; the first call wins.
pub fn set_version(version: &'static str) {
    let _ = VERSION.set(version);
}
