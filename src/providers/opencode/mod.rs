//! The opencode adapter (docs/PROVIDERS.md). Being built: until it lands, a launch is refused
//! with a clear reason.

use crate::providers::{AdapterHandle, LaunchError, LaunchSpec, ProviderEventSink};

/// Start a opencode child for `spec` and its driver task.
pub fn launch(spec: LaunchSpec, _sink: ProviderEventSink) -> Result<AdapterHandle, LaunchError> {
    Err(LaunchError {
        command: spec.command.display().to_string(),
        reason: "drover has no adapter for this provider yet".to_string(),
    })
}
