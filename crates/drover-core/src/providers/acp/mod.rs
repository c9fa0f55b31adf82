//! Any agent that speaks the Agent Client Protocol (ACP): JSON-RPC over the agent's
//! stdio, with drover as the client (docs/PROVIDERS.md §"ACP agents").
//!
//! One child per run, started with its configured command and arguments in the run's
//! directory; the `agent-client-protocol` SDK carries the JSON-RPC, [`client`] owns the
//! child and the phases (`initialize`, `session/new` or `session/load`, the model's
//! pick, the configured session mode (`session/set_mode`), `Ready`; `session/prompt` per turn; `session/cancel` for an interrupt) and
//! [`map`] reads what the agent says. The adapter contract holds as for every provider
//! (`providers/mod.rs`). drover advertises no file-system or terminal client methods:
//! the agent works in its own process, confined by its own sandbox and by the
//! permission requests it sends, which go through drover's broker like every other
//! provider's.

mod client;
pub mod map;

pub use client::AcpTimings;
pub use map::MAX_NOTIFICATION_BYTES;

use tokio::sync::mpsc;

use crate::providers::process;
use crate::providers::{AdapterHandle, LaunchError, LaunchSpec, ProviderEventSink};

/// Starts the run's ACP agent with the default timings. Must be called inside a tokio
/// runtime, from an async task (see [`crate::providers::process`] on the parent-death
/// signal).
pub fn launch(spec: LaunchSpec, sink: ProviderEventSink) -> Result<AdapterHandle, LaunchError> {
    launch_with(spec, sink, AcpTimings::default())
}

/// [`launch`] with explicit timings (tests shorten them).
pub fn launch_with(
    spec: LaunchSpec,
    sink: ProviderEventSink,
    timings: AcpTimings,
) -> Result<AdapterHandle, LaunchError> {
    let runtime = process::adapter_runtime(&spec)?;
    // The agent's command line is the configured one: ACP needs no flags of drover's.
    let (child, stdout) = process::spawn_spec(&spec, &spec.args)?;
    let pid = child.pid();
    tracing::debug!(run_id = %spec.run_id, pid, "ACP agent started");
    let (commands, rx) = mpsc::unbounded_channel();
    client::spawn(&runtime, spec, timings, child, stdout, rx, sink);
    Ok(AdapterHandle {
        commands,
        pid: Some(pid),
    })
}

#[cfg(test)]
#[path = "adapter_tests.rs"]
mod adapter_tests;
