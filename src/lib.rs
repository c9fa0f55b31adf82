//! drover, the command: the command line (`cli`), the MCP server (`mcp`) and the fuzz
//! entry points (`fuzz`), over `drover-core` (the engine) and `drover-tui` (the dashboard).
//! `src/main.rs` is a thin entry point.

/// This build's version and the commit it was built from (`0.1.0 (a1b2c3d)`; the commit is
/// named by this crate's build script).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("DROVER_COMMIT"), ")");

pub mod cli;
#[doc(hidden)]
pub mod fuzz;
pub mod mcp;
