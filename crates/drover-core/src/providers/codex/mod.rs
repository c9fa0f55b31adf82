//! The Codex adapter: runs the `codex` CLI (docs/PROVIDERS.md §"Codex";
//! docs/ARCHITECTURE.md §"Providers").
//!
//! Two modes, chosen by the run's permission policy:
//! - `ask` runs one `codex app-server` per run (JSON-RPC over stdio), the mode in which
//!   Codex asks before running commands or changing files ([`app_server`]: the pure
//!   [`app_protocol`] on the session loop, [`crate::providers::session`]);
//! - `restricted` and `auto` run one `codex exec --json` child per turn, follow-ups with
//!   `exec … resume THREAD`; exec never asks ([`exec`], over the pure [`exec_protocol`]).
//!
//! A command that is Codex's npm launcher runs as the native binary behind it
//! ([`native`]): no Node process per child.
//!
//! [`args`] builds the command lines (the sandbox always comes from the capability),
//! [`encode`] the JSON-RPC lines, [`protocol`] what both modes read alike. What must stay
//! true is the adapter contract of [`crate::providers`]: exactly one `Exited` last, a
//! `Notice` for whatever cannot be understood, and no child outliving its run (every
//! child is started and ended through [`crate::providers::process`]).

pub mod app_protocol;
pub mod app_server;
pub mod args;
pub mod encode;
pub mod exec;
pub mod exec_protocol;
pub mod native;
pub mod protocol;

use std::time::Duration;

use crate::providers::process::ShutdownTimings;
use crate::providers::{AdapterHandle, LaunchError, LaunchSpec, ProviderEventSink};
use crate::spec::PermissionPolicy;

/// How long the adapter waits on Codex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterTimings {
    /// The app-server's client requests (handshake, thread, turn, interrupt).
    pub bounds: app_protocol::Bounds,
    /// For a turn in flight to end after an interrupt at shutdown, before the child is
    /// ended.
    pub interrupt: Duration,
    /// How each child is ended (the app-server, or a turn's exec child).
    pub shutdown: ShutdownTimings,
}

impl Default for AdapterTimings {
    fn default() -> Self {
        AdapterTimings {
            bounds: app_protocol::Bounds::default(),
            interrupt: Duration::from_secs(3),
            shutdown: ShutdownTimings::default(),
        }
    }
}

/// Start the Codex adapter for `spec` with the default timings. Must be called inside a
/// tokio runtime, from an async task (see [`crate::providers::process`] on the
/// parent-death signal).
pub fn launch(spec: LaunchSpec, sink: ProviderEventSink) -> Result<AdapterHandle, LaunchError> {
    launch_with(spec, sink, AdapterTimings::default())
}

/// [`launch`] with explicit timings (tests shorten them).
pub fn launch_with(
    spec: LaunchSpec,
    sink: ProviderEventSink,
    timings: AdapterTimings,
) -> Result<AdapterHandle, LaunchError> {
    let spec = native::unwrapped(spec);
    match spec.policy {
        PermissionPolicy::Ask => app_server::launch(spec, sink, timings),
        PermissionPolicy::Restricted | PermissionPolicy::Auto => exec::launch(spec, sink, timings),
    }
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod protocol_tests;

#[cfg(test)]
#[path = "adapter_tests.rs"]
mod adapter_tests;
