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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use super::interactive::{Interactive, InteractivePlan, Record};
use super::{AdapterHandle, LaunchError, LaunchSpec, ProviderEventSink};
use crate::config::{ACP_PROTOCOL, Config, SIM_PROVIDER};

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
    // Agents that speak the Agent Client Protocol (docs/PROVIDERS.md §"ACP agents"):
    // one adapter, each started with its own command line (`[providers.NAME]`).
    acp_agent(ACP_AGENTS[0]),
    acp_agent(ACP_AGENTS[1]),
    acp_agent(ACP_AGENTS[2]),
    acp_agent(ACP_AGENTS[3]),
    acp_agent(ACP_AGENTS[4]),
    acp_agent(ACP_AGENTS[5]),
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

/// A built-in ACP agent: name, default command, npm package, tested version.
pub type AcpAgentRow = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
);

/// The built-in ACP agents: name, default command, the npm package that installs it,
/// and the version of that package `tests/peers/acp.rs` ran against the conformance
/// mocks (`None`: not run against them; docs/PROVIDERS.md §"ACP agents").
pub const ACP_AGENTS: [AcpAgentRow; 6] = [
    ("gemini", "gemini", "@google/gemini-cli", Some("0.61.0")),
    ("qwen", "qwen", "@qwen-code/qwen-code", None),
    ("copilot", "copilot", "@github/copilot", None),
    ("opencode-acp", "opencode", "opencode-ai", Some("1.18.33")),
    (
        "claude-acp",
        "claude-agent-acp",
        "@zed-industries/claude-agent-acp",
        Some("0.23.1"),
    ),
    (
        "codex-acp",
        "codex-acp",
        "@zed-industries/codex-acp",
        Some("0.16.0"),
    ),
];

/// Whether the provider is an ACP agent (built in, or added by the config).
pub fn is_acp(provider: &str) -> bool {
    ACP_AGENTS.iter().any(|(name, ..)| *name == provider)
        || CONFIGURED
            .read()
            .is_ok_and(|c| c.iter().any(|t| t.name == provider))
}

/// The command that installs the provider's CLI: its pinned version, else (an ACP agent
/// not yet run against the conformance mocks) its npm package's latest.
pub fn install_command(provider: &str) -> Option<String> {
    if let Some(pinned) = traits(provider).and_then(|t| t.pinned) {
        return Some(pinned.install_command());
    }
    npm_package(provider).map(|package| format!("npm install -g {package}"))
}

/// The npm package that installs the provider's CLI (pinned or not), if drover knows one.
pub fn npm_package(provider: &str) -> Option<&'static str> {
    traits(provider)
        .and_then(|t| t.pinned)
        .map(|p| p.package)
        .or_else(|| {
            ACP_AGENTS
                .iter()
                .find(|(name, ..)| *name == provider)
                .map(|(_, _, package, _)| *package)
        })
}

/// A built-in ACP agent's entry (an [`ACP_AGENTS`] row), pinned at the version the
/// conformance tests ran when there is one.
const fn acp_agent(row: AcpAgentRow) -> ProviderTraits {
    let (name, default_command, package, tested) = row;
    let pinned = match tested {
        Some(version) => Some(PinnedCli { package, version }),
        None => None,
    };
    acp_entry(name, default_command, pinned)
}

/// An ACP agent's entry: its name, the command it runs when the config names none, and
/// its npm package pinned at the version the conformance tests ran (`None`: not run
/// against them yet).
const fn acp_entry(
    name: &'static str,
    default_command: &'static str,
    pinned: Option<PinnedCli>,
) -> ProviderTraits {
    ProviderTraits {
        name,
        default_command,
        account_variable: None,
        // Offered by routing only when a dispatch names it: its models are its own.
        only_when_named: true,
        needs_cli: true,
        pinned,
        start: super::acp::launch,
        interactive: None,
    }
}

/// The ACP agents the config adds (`[providers.NAME] protocol = "acp"`), registered by
/// [`register_configured`]; each entry lives as long as the process.
static CONFIGURED: RwLock<Vec<&'static ProviderTraits>> = RwLock::new(Vec::new());

/// Registers every `[providers.NAME]` with `protocol = "acp"` that drover has no entry
/// for, so it is launched with the ACP adapter. Called wherever a config is taken in
/// (the dispatcher's start, `doctor`, `models`); a name already known is left as it is.
pub fn register_configured(config: &Config) {
    for (name, provider) in &config.providers {
        if provider.protocol.as_deref() != Some(ACP_PROTOCOL) || traits(name).is_some() {
            continue;
        }
        let Ok(mut configured) = CONFIGURED.write() else {
            return;
        };
        if configured.iter().any(|t| t.name == name) {
            continue;
        }
        // One small entry per configured agent name, kept for the process's life.
        let name: &'static str = Box::leak(name.clone().into_boxed_str());
        configured.push(Box::leak(Box::new(acp_entry(name, "", None))));
    }
}

/// The provider's traits, or `None` when drover has no adapter for it.
pub fn traits(provider: &str) -> Option<&'static ProviderTraits> {
    PROVIDERS.iter().find(|p| p.name == provider).or_else(|| {
        CONFIGURED
            .read()
            .ok()
            .and_then(|c| c.iter().copied().find(|t| t.name == provider))
    })
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
    let mut names: Vec<&'static str> = PROVIDERS.iter().map(|p| p.name).collect();
    if let Ok(configured) = CONFIGURED.read() {
        names.extend(configured.iter().map(|t| t.name));
    }
    names
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
    // A run on a host is taken over there: its interface opens in a terminal on the host
    // in the run's directory there with the run's environment (docs/ARCHITECTURE.md
    // §"Hosts"); here the transport's client runs, in the data directory.
    // The session's record is read there too: `export_args` become the transport's
    // arguments that print it there (the CLI's export, or the record file).
    if let Some(transport) = &spec.transport {
        let record_script = if plan.export_args.is_empty() {
            super::interactive::host_record_script(how.record, &plan.env, session)
        } else {
            Some(super::transport::remote_command(
                &plan.program,
                &plan.export_args,
                &plan.cwd,
                &plan.env,
            ))
        };
        let (program, args) =
            transport.interactive(&plan.program, &plan.args, &plan.cwd, &plan.env);
        plan.export_args = record_script
            .map(|script| transport.command(&script).1)
            .unwrap_or_default();
        plan.program = program;
        plan.args = args;
        plan.env = BTreeMap::new();
        plan.cwd = data_dir.to_path_buf();
        plan.host = Some(transport.name.clone());
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
            mode: None,
            policy: PermissionPolicy::Ask,
            capability: Capability::Workspace,
            resume_session: None,
            resume_tokens: None,
            scenario: scenario.map(str::to_string),
            mcp: None,
            journal: None,
            transport: None,
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
        assert!(traits("gemini").is_some_and(|t| t.only_when_named && t.needs_cli));
        assert!(traits("nonesuch").is_none());
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
        // A package may serve two providers (`opencode-ai`: `opencode`, `opencode-acp`).
        let packages: std::collections::BTreeSet<&str> = pinned.iter().map(|p| p.package).collect();
        assert_eq!(
            packages.len() + tools.len(),
            pins.len(),
            "a provider for every pinned CLI"
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
            // An ACP agent not yet run against the mocks has no pin.
            assert!(
                provider.pinned.is_none() || provider.needs_cli,
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
        let err = launch(spec("nonesuch", "nonesuch", None), &launcher).expect_err("no adapter");
        assert_eq!(err.command, "nonesuch");
        assert!(
            err.reason.contains("claude-code, codex, opencode, gemini"),
            "{err}"
        );
    }

    #[test]
    fn a_configured_acp_agent_is_registered_once_and_launched_with_the_acp_adapter() {
        let mut config = Config::defaults();
        let mut agent = config.providers["codex"].clone();
        agent.command = "my-agent".into();
        agent.protocol = Some(ACP_PROTOCOL.into());
        config.providers.insert("my-agent".into(), agent.clone());
        // Not ACP: not registered.
        let mut other = agent;
        other.protocol = None;
        config.providers.insert("not-acp".into(), other);
        register_configured(&config);
        register_configured(&config);
        let t = traits("my-agent").expect("registered");
        assert!(t.needs_cli && t.only_when_named && t.pinned.is_none());
        assert!(is_acp("my-agent") && is_acp("gemini") && !is_acp("codex"));
        assert!(traits("not-acp").is_none() && !is_acp("not-acp"));
        assert_eq!(
            runnable_names()
                .iter()
                .filter(|n| **n == "my-agent")
                .count(),
            1
        );
    }
}
