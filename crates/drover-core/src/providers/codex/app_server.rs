//! The `codex app-server` mode: one app-server child per run, driven by the session
//! loop ([`crate::providers::session`]) over the pure [`AppState`], its [`Protocol`].
//!
//! The loop's invariants hold as they are (exactly one `Exited` last, events held until
//! `Ready`, commands queued until it, the child always ended through
//! [`crate::providers::process::ProviderProcess::shutdown`], nothing the child writes
//! can panic the task). What this mode adds: the handshake and every client request are
//! bounded by [`super::AdapterTimings::bounds`] (the state's deadlines, kept by the
//! loop); on `Shutdown` a turn in flight is interrupted first (approvals cancelled,
//! `turn/interrupt`), bounded by `timings.interrupt`, and closing stdin then ends the
//! app-server; the processes Codex started outside its group are noted before the
//! interrupt and killed after ([`crate::providers::sweep`]).
//!
//! [`Protocol`]: crate::providers::session::Protocol

use crate::providers::session;
use crate::providers::{AdapterHandle, LaunchError, LaunchSpec, ProviderEventSink};

use super::AdapterTimings;
use super::app_protocol::AppState;

/// Start `codex app-server` for `spec` on the session loop.
pub fn launch(
    spec: LaunchSpec,
    sink: ProviderEventSink,
    timings: AdapterTimings,
) -> Result<AdapterHandle, LaunchError> {
    let state = AppState::new(&spec, timings.bounds);
    let timings = session::Timings {
        interrupt: timings.interrupt,
        shutdown: timings.shutdown,
    };
    session::launch(spec, state, sink, timings)
}
