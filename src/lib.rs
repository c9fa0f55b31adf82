//! drover, the command: the command line (`cli`), the MCP server (`mcp`) and the fuzz
//! entry points (`fuzz`), over `drover-core` (the engine) and `drover-tui` (the dashboard).
//! `src/main.rs` is a thin entry point.

pub mod cli;
#[doc(hidden)]
pub mod fuzz;
pub mod mcp;
