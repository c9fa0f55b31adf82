//! The providers drover has an adapter for, and the one provider-neutral way to start one.
//!
//! The dispatcher matches no provider names: what it must know about a provider (whether
//! drover can run it, which environment variable names its account, whether routing may
//! offer it unasked, whether it needs a CLI on `PATH`) is here, and [`launch`] picks the
//! adapter. What must stay true: a provider missing from [`PROVIDERS`] has no adapter and
//! is never launched; the simulated agent's command line is decided here, not by the
//! dispatcher.

use std::path::{Path, PathBuf};

use super::{AdapterHandle, LaunchError, LaunchSpec, ProviderEventSink};

/// Used when a dispatch names no provider.
pub const DEFAULT_PROVIDER: &str = "claude-code";

/// What the dispatcher may know about a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderTraits {
    pub name: &'static str,
    /// The command run when the config names none.
    pub default_command: &'static str,
    /// The environment variable that picks the provider's account (its config directory);
    /// runs of one account share the per-account rail.
    pub account_variable: Option<&'static str>,
    /// Routing offers it only when the dispatch names it.
    pub only_when_named: bool,
    /// It runs a CLI that must be installed (the simulated agent is this drover itself).
    pub needs_cli: bool,
}

/// Every provider drover has an adapter for.
pub const PROVIDERS: &[ProviderTraits] = &[
    ProviderTraits {
        name: "claude-code",
        default_command: "claude",
        account_variable: Some("CLAUDE_CONFIG_DIR"),
        only_when_named: false,
        needs_cli: true,
    },
    ProviderTraits {
        name: "codex",
        default_command: "codex",
        account_variable: Some("CODEX_HOME"),
        only_when_named: false,
        needs_cli: true,
    },
    ProviderTraits {
        name: "opencode",
        default_command: "opencode",
        account_variable: Some("OPENCODE_CONFIG"),
        only_when_named: false,
        needs_cli: true,
    },
    ProviderTraits {
        name: "sim",
        default_command: "",
        account_variable: None,
        only_when_named: true,
        needs_cli: false,
    },
];

/// The provider's traits, or `None` when drover has no adapter for it.
pub fn traits(provider: &str) -> Option<&'static ProviderTraits> {
    PROVIDERS.iter().find(|p| p.name == provider)
}

/// The names of every provider drover can run, for sentences.
pub fn runnable_names() -> Vec<&'static str> {
    PROVIDERS.iter().map(|p| p.name).collect()
}

/// What every launch shares: where adapters send their events, this executable (the
/// simulated agent is `<self_exe> sim-agent`) and the data directory (the simulated
/// agent keeps its sessions there).
#[derive(Debug, Clone)]
pub struct Launcher {
    pub self_exe: PathBuf,
    pub sink: ProviderEventSink,
    pub data_dir: PathBuf,
}

/// Starts the run's adapter. `spec.command` is the config's command (empty when the
/// config names none).
pub fn launch(mut spec: LaunchSpec, launcher: &Launcher) -> Result<AdapterHandle, LaunchError> {
    let sink = launcher.sink.clone();
    if let Some(server) = spec.mcp.as_mut()
        && server.command.as_os_str().is_empty()
    {
        server.command = launcher.self_exe.clone();
    }
    match spec.provider.as_str() {
        // The simulated agent calls no tools of its own choosing: no MCP server.
        "sim" => super::claude::launch(
            sim_command(
                LaunchSpec { mcp: None, ..spec },
                &launcher.self_exe,
                &launcher.data_dir,
            ),
            sink,
        ),
        "claude-code" => super::claude::launch(with_default_command(spec), sink),
        "codex" => super::codex::launch(with_default_command(spec), sink),
        "opencode" => super::opencode::launch(with_default_command(spec), sink),
        other => Err(LaunchError {
            command: other.to_string(),
            reason: format!(
                "drover has no adapter for this provider; use one of: {}",
                runnable_names().join(", ")
            ),
        }),
    }
}

fn with_default_command(mut spec: LaunchSpec) -> LaunchSpec {
    if spec.command.as_os_str().is_empty()
        && let Some(t) = traits(&spec.provider)
    {
        spec.command = t.default_command.into();
    }
    spec
}

/// The simulated agent speaks Claude Code's stream-json: it runs as this executable's
/// `sim-agent` (unless the config names another command), with the run's scenario, and
/// keeps its sessions in this drover's data directory (`DROVER_HOME` set to it, unless
/// the provider's configured environment sets it), so a throwaway owner's (the demo's)
/// stay in its own directory.
fn sim_command(mut spec: LaunchSpec, self_exe: &Path, data_dir: &Path) -> LaunchSpec {
    spec.env
        .entry(crate::paths::HOME_ENV.to_string())
        .or_insert_with(|| data_dir.display().to_string());
    if spec.command.as_os_str().is_empty() {
        spec.command = self_exe.to_path_buf();
        spec.args.insert(0, "sim-agent".to_string());
    }
    spec.args.push("--scenario".to_string());
    spec.args.push(
        spec.scenario
            .clone()
            .unwrap_or_else(|| "quick-success".to_string()),
    );
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Capability, PermissionPolicy};

    fn spec(provider: &str, command: &str, scenario: Option<&str>) -> LaunchSpec {
        LaunchSpec {
            run_id: "r1".into(),
            provider: provider.into(),
            command: command.into(),
            args: vec!["--flag".into()],
            env: Default::default(),
            cwd: "/tmp".into(),
            model: None,
            effort: None,
            policy: PermissionPolicy::Ask,
            capability: Capability::Workspace,
            resume_session: None,
            resume_tokens: None,
            scenario: scenario.map(str::to_string),
            mcp: None,
            journal: None,
        }
    }

    #[test]
    fn the_sim_runs_as_this_executable_with_its_scenario() {
        let data = Path::new("/data/drover");
        let s = sim_command(
            spec("sim", "", Some("hang")),
            Path::new("/bin/drover"),
            data,
        );
        assert_eq!(s.command, PathBuf::from("/bin/drover"));
        assert_eq!(s.args, ["sim-agent", "--flag", "--scenario", "hang"]);
        assert_eq!(
            s.env.get("DROVER_HOME").map(String::as_str),
            Some("/data/drover"),
            "its sessions are kept in this drover's data directory"
        );
        // A configured command is kept; the scenario still goes last.
        let mut configured = spec("sim", "/opt/sim", None);
        configured
            .env
            .insert("DROVER_HOME".into(), "/elsewhere".into());
        let s = sim_command(configured, Path::new("/bin/drover"), data);
        assert_eq!(s.command, PathBuf::from("/opt/sim"));
        assert_eq!(s.args, ["--flag", "--scenario", "quick-success"]);
        assert_eq!(
            s.env.get("DROVER_HOME").map(String::as_str),
            Some("/elsewhere"),
            "the configured environment wins"
        );
    }

    #[test]
    fn a_provider_without_a_command_runs_its_own_cli() {
        assert_eq!(
            with_default_command(spec("codex", "", None)).command,
            PathBuf::from("codex")
        );
        assert_eq!(
            with_default_command(spec("codex", "/x/codex", None)).command,
            PathBuf::from("/x/codex")
        );
    }

    #[test]
    fn only_known_providers_have_traits() {
        assert!(traits("claude-code").is_some_and(|t| t.needs_cli));
        assert!(traits("sim").is_some_and(|t| t.only_when_named && !t.needs_cli));
        assert!(traits("gemini").is_none());
    }
}
