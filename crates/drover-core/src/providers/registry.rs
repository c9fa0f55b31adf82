//! The providers drover has an adapter for, and the one provider-neutral way to start one.
//!
//! The dispatcher matches no provider names: what it must know about a provider (whether
//! drover can run it, which environment variable names its account, whether routing may
//! offer it unasked, whether it needs a CLI on `PATH`, which CLI version it was tested
//! with) is here, and [`launch`] starts the adapter its entry names. Registering a
//! provider is one [`ProviderTraits`] entry in [`PROVIDERS`] (docs/PROVIDERS.md
//! §"Adding a provider"). What must stay true: a provider missing from [`PROVIDERS`] has
//! no adapter and is never launched; the simulated agent's command line is decided here,
//! not by the dispatcher; a pinned CLI version is the one `tests/peers/package.json`
//! pins (a test checks it).

use std::path::{Path, PathBuf};

use super::interactive::{Interactive, InteractivePlan, Record};
use super::{AdapterHandle, LaunchError, LaunchSpec, ProviderEventSink};
use crate::config::SIM_PROVIDER;

/// Used when a dispatch names no provider.
pub const DEFAULT_PROVIDER: &str = "claude-code";

/// What the dispatcher may know about a provider, and how its adapter starts.
#[derive(Debug, Clone, Copy)]
pub struct ProviderTraits {
    /// The provider's name in config, catalog and dispatches (`claude-code`, …).
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
    /// The CLI's npm package at the version drover's conformance tests ran against;
    /// `None` when there is no CLI to install.
    pub pinned: Option<PinnedCli>,
    /// Starts the provider's adapter, its command resolved (see [`launch`]).
    pub start: fn(LaunchSpec, ProviderEventSink) -> Result<AdapterHandle, LaunchError>,
    /// How a run of it is taken over in the CLI's own interface; `None`: it cannot be.
    pub interactive: Option<Interactive>,
}

/// A provider CLI as the conformance tests pin it (`tests/peers/package.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedCli {
    /// The npm package that installs it.
    pub package: &'static str,
    /// The version the tests ran against.
    pub version: &'static str,
}

impl PinnedCli {
    /// The command that installs the pinned version.
    pub fn install_command(&self) -> String {
        format!("npm install -g {}@{}", self.package, self.version)
    }
}

/// Every provider drover has an adapter for.
pub const PROVIDERS: &[ProviderTraits] = &[
    ProviderTraits {
        name: "claude-code",
        default_command: "claude",
        account_variable: Some("CLAUDE_CONFIG_DIR"),
        only_when_named: false,
        needs_cli: true,
        pinned: Some(PinnedCli {
            package: "@anthropic-ai/claude-code",
            version: "2.1.197",
        }),
        start: super::claude::launch,
        interactive: Some(Interactive {
            args: super::claude::args::interactive_args,
            record: Record::Claude,
            env: None,
            export: None,
        }),
    },
    ProviderTraits {
        name: "codex",
        default_command: "codex",
        account_variable: Some("CODEX_HOME"),
        only_when_named: false,
        needs_cli: true,
        pinned: Some(PinnedCli {
            package: "@openai/codex",
            version: "0.171.0",
        }),
        start: super::codex::launch,
        interactive: Some(Interactive {
            args: super::codex::args::resume_args,
            record: Record::CodexRollout,
            env: None,
            export: None,
        }),
    },
    ProviderTraits {
        name: "opencode",
        default_command: "opencode",
        account_variable: Some("OPENCODE_CONFIG"),
        only_when_named: false,
        needs_cli: true,
        pinned: Some(PinnedCli {
            package: "opencode-ai",
            version: "1.18.33",
        }),
        start: super::opencode::launch,
        // Its sessions live in a database only its own `export` reads.
        interactive: Some(Interactive {
            args: super::opencode::launch::interactive_args,
            record: Record::OpenCodeExport,
            env: Some(super::opencode::launch::interactive_env),
            export: Some(super::opencode::launch::export_args),
        }),
    },
    ProviderTraits {
        name: SIM_PROVIDER,
        default_command: "",
        account_variable: None,
        only_when_named: true,
        needs_cli: false,
        pinned: None,
        // The simulated agent speaks Claude Code's stream-json.
        start: super::claude::launch,
        interactive: Some(Interactive {
            args: sim_interactive_args,
            record: Record::Sim,
            env: None,
            export: None,
        }),
    },
];

/// The provider's traits, or `None` when drover has no adapter for it.
pub fn traits(provider: &str) -> Option<&'static ProviderTraits> {
    PROVIDERS.iter().find(|p| p.name == provider)
}

/// What a person calls the provider's CLI (`claude`, `codex`): its default command, else
/// the provider's name (`sim`).
pub fn cli_name(provider: &str) -> &str {
    traits(provider)
        .map(|t| t.default_command)
        .filter(|c| !c.is_empty())
        .unwrap_or(provider)
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
    /// This drover's executable (drover's MCP server and the simulated agent run it).
    pub self_exe: PathBuf,
    /// Where every run's adapter sends its events.
    pub sink: ProviderEventSink,
    /// The owner's data directory.
    pub data_dir: PathBuf,
}

/// Starts the run's adapter. `spec.command` is the config's command (empty when the
/// config names none).
pub fn launch(spec: LaunchSpec, launcher: &Launcher) -> Result<AdapterHandle, LaunchError> {
    let Some(provider) = traits(&spec.provider) else {
        return Err(LaunchError {
            command: spec.provider,
            reason: format!(
                "drover has no adapter for this provider; use one of: {}",
                runnable_names().join(", ")
            ),
        });
    };
    let mut spec = resolved(spec, &launcher.self_exe, &launcher.data_dir);
    super::sandbox::for_cli(&mut spec);
    (provider.start)(spec, launcher.sink.clone())
}

/// The command that takes run `spec.run_id` over in its CLI's own interface on
/// `session`, its command resolved as [`launch`] resolves it; or why there is none.
pub fn interactive(
    spec: LaunchSpec,
    session: &str,
    self_exe: &Path,
    data_dir: &Path,
) -> Result<(InteractivePlan, Record), String> {
    let Some(how) = traits(&spec.provider).and_then(|t| t.interactive) else {
        return Err(format!(
            "drover cannot take a {} run over in its CLI's own interface",
            spec.provider
        ));
    };
    let mut spec = resolved(spec, self_exe, data_dir);
    super::sandbox::for_cli(&mut spec);
    let mut plan = super::interactive::plan(&spec, session, &how);
    // A sandboxed run is taken over in the same sandbox.
    if let Some(sandbox) = &spec.sandbox {
        let (bwrap, args) = sandbox
            .wrap(&plan.program, &plan.args, &plan.cwd)
            .map_err(|e| format!("{}: {}", e.code, e.message))?;
        plan.program = bwrap;
        plan.args = args;
    }
    Ok((plan, how.record))
}

/// The spec with its commands resolved: the simulated agent's, or the provider's
/// default when the config names none; drover's MCP server is this drover.
fn resolved(mut spec: LaunchSpec, self_exe: &Path, data_dir: &Path) -> LaunchSpec {
    if let Some(server) = spec.mcp.as_mut()
        && server.command.as_os_str().is_empty()
    {
        server.command = self_exe.to_path_buf();
    }
    if spec.provider == SIM_PROVIDER {
        // The simulated agent calls no tools of its own choosing: no MCP server.
        sim_command(LaunchSpec { mcp: None, ..spec }, self_exe, data_dir)
    } else {
        with_default_command(spec)
    }
}

/// The simulated agent's interactive mode: it reads the user's lines from the terminal.
fn sim_interactive_args(spec: &LaunchSpec, session: &str) -> Vec<String> {
    let mut args = spec.args.clone();
    args.push("--interactive".into());
    args.push(format!("--resume={session}"));
    if let Some(model) = &spec.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    args
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
            sandbox: None,
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

    #[test]
    fn the_pinned_clis_are_the_conformance_tests_pins() {
        let manifest: serde_json::Value =
            serde_json::from_str(include_str!("../../../../tests/peers/package.json"))
                .expect("tests/peers/package.json is JSON");
        let pins = manifest["dependencies"]
            .as_object()
            .expect("tests/peers/package.json has dependencies");
        let pinned: Vec<PinnedCli> = PROVIDERS.iter().filter_map(|p| p.pinned).collect();
        // Besides the provider CLIs: the MCP Inspector that `drover mcp` is tested under.
        let tools = ["@modelcontextprotocol/inspector"];
        assert!(tools.iter().all(|t| pins.contains_key(*t)));
        assert_eq!(
            pinned.len() + tools.len(),
            pins.len(),
            "one provider per pinned CLI"
        );
        for cli in pinned {
            assert_eq!(
                pins.get(cli.package).and_then(|v| v.as_str()),
                Some(cli.version),
                "{}",
                cli.package
            );
        }
        for provider in PROVIDERS {
            assert_eq!(
                provider.pinned.is_some(),
                provider.needs_cli,
                "{}",
                provider.name
            );
        }
    }

    #[tokio::test]
    async fn a_provider_without_an_entry_is_never_launched() {
        let (sink, _rx) = tokio::sync::mpsc::channel(1);
        let launcher = Launcher {
            self_exe: "/bin/false".into(),
            sink,
            data_dir: "/tmp".into(),
        };
        let err = launch(spec("gemini", "gemini", None), &launcher).expect_err("no adapter");
        assert_eq!(err.command, "gemini");
        assert!(
            err.reason.contains("claude-code, codex, opencode, sim"),
            "{err}"
        );
    }
}
