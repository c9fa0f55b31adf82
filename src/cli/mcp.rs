//! `drover mcp`: the MCP server over stdio ([`crate::mcp`]), for agents that dispatch and
//! supervise runs.

use clap::Args;

use super::headless::runtime;
use crate::mcp::{DroverMcp, RUN_ID_ENV, serve_stdio};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::paths::Paths;

#[derive(Debug, Args)]
pub struct McpArgs {}

/// `drover mcp`.
pub fn run(_args: McpArgs, paths: &Paths) -> Result<(), DroverError> {
    let caller_dir = std::env::current_dir().map_err(|e| {
        DroverError::new(
            ErrorCode::CwdInvalid,
            format!(
                "cannot read the current directory: {e}; start drover mcp somewhere that exists"
            ),
        )
    })?;
    let calling_run = std::env::var(RUN_ID_ENV)
        .ok()
        .map(|id| id.trim().to_string())
        .filter(|id| !id.is_empty());
    let server = DroverMcp::new(paths.clone(), calling_run, caller_dir);
    runtime()?.block_on(serve_stdio(server))
}
