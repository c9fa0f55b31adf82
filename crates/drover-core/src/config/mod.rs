//! Configuration: the embedded defaults (`assets/default-config.toml`) with the user's
//! TOML file merged over them.
//!
//! What must stay true:
//! - the embedded file is the one source of default values: no struct here has serde
//!   defaults for a value the file sets, and the file sets every field;
//! - a [`Config`] that [`Config::load`] returns has passed the checks in [`validate`]
//!   (clamp ranges in order, money finite and non-negative, every non-sim provider has a
//!   command, every `[[catalog.models]]` entry merges cleanly over the embedded model
//!   catalog, so [`crate::money::Catalog::from_config`] cannot fail on it, and
//!   `[routing.classes.<class>]` names only task classes);
//! - every refusal is one line that names the user's file, the line and the key.
//!
//! Layout: this module holds the types; [`catalog`] the `[pricing]` and `[catalog]`
//! shapes; [`routing`] the `[routing]` shape; [`load`] reads, merges and turns serde errors into sentences; [`locate`] maps
//! keys and byte offsets to lines of a TOML document; [`validate`] holds the checks serde
//! cannot express.

pub mod catalog;
pub mod hosts;
pub mod keys;
pub mod limits;
mod load;
mod locate;
pub mod routing;
mod validate;

pub use catalog::{CatalogConfig, CatalogEntry, PricingConfig};
pub use hosts::HostConfig;
pub use limits::Limits;
pub use routing::{ClassRouting, RoutingConfig, RoutingMode};

use crate::error::{DroverError, ErrorCode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The embedded defaults, exactly as shipped.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("../../../../assets/default-config.toml");

/// The provider name of the simulated agent, the one provider whose `command` may be empty.
pub const SIM_PROVIDER: &str = "sim";

/// The merged configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[limits]`: every number drover enforces.
    pub limits: Limits,
    /// `[providers.<name>]`: how to start each provider's CLI, by provider name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// `[pricing]`: how usage is priced and whether prices are enforced.
    pub pricing: PricingConfig,
    /// `[catalog]`: models added to or changed in the embedded model catalog.
    pub catalog: CatalogConfig,
    /// `[routing]`: how a dispatch without a model is routed.
    pub routing: RoutingConfig,
    /// Dashboard key bindings over the built-in table, by context:
    /// `[keys.dashboard] "N" = "new_dispatch"` (`"none"` unbinds a key). Checked with the
    /// rest of the file against [`keys`]' vocabulary.
    #[serde(default)]
    pub keys: toml::Table,
    /// `[notifications]`: how the dashboard gets your attention.
    pub notifications: NotificationsConfig,
    /// `[workspaces]`: where runs work.
    pub workspaces: WorkspacesConfig,
    /// `[dashboard]`: how the dashboard reaches the runs.
    pub dashboard: DashboardConfig,
    /// `[redact]`: secrets to redact besides the built-in rules.
    pub redact: RedactConfig,
    /// `[mcp]`: drover's MCP server offered to runs.
    pub mcp: McpConfig,
    /// `[guard]`: commands the guard flags beyond its own list.
    pub guard: GuardConfig,
    /// `[evidence]`: which commands are tests.
    pub evidence: EvidenceConfig,
    /// `[hosts.<name>]`: machines, containers and pods a run's CLI can be sent to
    /// (docs/ARCHITECTURE.md §"Hosts"); none by default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, HostConfig>,
}

/// `[evidence]`: which of the commands a run executed are tests (docs/ARCHITECTURE.md
/// §"Evidence").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceConfig {
    /// The test commands, as command patterns with the name each is shown by; the first
    /// row that matches names the test.
    pub tests: Vec<crate::evidence::TestPattern>,
}

impl EvidenceConfig {
    /// At most this many rows.
    pub const MAX_TESTS: usize = 100;
}

/// `[guard]`: what the guard flags beyond its own list (docs/ARCHITECTURE.md
/// §"Approval rules and the guard").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardConfig {
    /// Command patterns (as in rules: `docker system prune *`) that always ask, whatever
    /// the rules and "allow always" say.
    pub commands: Vec<String>,
}

impl GuardConfig {
    /// At most this many extra patterns.
    pub const MAX_COMMANDS: usize = 100;

    /// The patterns compiled; the config was validated, so none fails (one that does is
    /// left out).
    pub fn patterns(&self) -> Vec<crate::rules::pattern::CommandPattern> {
        self.commands
            .iter()
            .filter_map(|c| crate::rules::pattern::CommandPattern::parse(c).ok())
            .collect()
    }
}

/// `[mcp]`: drover's MCP server offered to runs (docs/ARCHITECTURE.md §"Agents as clients").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Start each run's CLI with `drover mcp` configured as an MCP server, so the run can
    /// dispatch sub-runs of itself.
    pub expose_to_runs: bool,
}

/// `[workspaces]`: where runs work (docs/ARCHITECTURE.md §"Workspaces").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspacesConfig {
    /// The workspace of a run that can write, dispatched inside a git work tree, when the
    /// dispatch does not say (`--workspace`). Runs elsewhere, and read-only runs, share
    /// their directory.
    pub default: crate::workspace::WorkspaceMode,
    /// Where worktrees go (`<root>/<repository>/<run>`); empty: `worktrees/` in the data
    /// directory. An absolute path.
    pub root: String,
    /// What a shared run does when another run that can write works in the same
    /// directory: wait for it (live state `waiting_repository`), or start anyway.
    pub shared_conflict: SharedConflict,
    /// Directories of the checkout (relative paths: `node_modules`, `target`) linked into
    /// each new worktree instead of rebuilt there, when they exist.
    #[serde(default)]
    pub link: Vec<String>,
    /// A command (its words) run in each new worktree before the run's CLI starts; a
    /// failure fails the run's start with its exit code and the end of its output.
    #[serde(default)]
    pub setup: Vec<String>,
    /// How long `setup` may take.
    #[serde(default = "default_setup_timeout_secs")]
    pub setup_timeout_secs: u64,
    /// How often the state and checks of a run's open pull request are read again from
    /// the forge (one run at a time), in seconds; at least 30.
    #[serde(default = "default_pr_refresh_secs")]
    pub pr_refresh_secs: u64,
}

fn default_setup_timeout_secs() -> u64 {
    600
}

fn default_pr_refresh_secs() -> u64 {
    300
}

/// `[workspaces] shared_conflict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SharedConflict {
    /// Wait for the other run to end (live state `waiting_repository`, bounded by the
    /// run's max minutes).
    Wait,
    /// Start anyway: both runs work in the directory at once.
    Allow,
}

impl WorkspacesConfig {
    /// The worktree root: the configured one, else `worktrees/` under `data_dir`.
    pub fn root_in(&self, data_dir: &Path) -> std::path::PathBuf {
        if self.root.trim().is_empty() {
            data_dir.join("worktrees")
        } else {
            std::path::PathBuf::from(self.root.trim())
        }
    }
}

/// `[dashboard]`: how `drover` (the dashboard) reaches the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DashboardConfig {
    /// Who owns the runs the dashboard shows.
    pub owner: DashboardOwner,
    /// How long (milliseconds) a request must have been on screen, unchanged, before a
    /// dashboard key may answer it (at most [`DashboardConfig::MAX_ANSWER_GUARD_MS`]).
    pub answer_guard_ms: u64,
    /// Inside tmux, where `o` (editor) and `!` (shell) open: a new `window` named after
    /// the run, or a `split` beside the dashboard.
    pub open_in: crate::workspace::open::TmuxPlace,
}

impl DashboardConfig {
    /// The longest answer guard taken from config: five seconds.
    pub const MAX_ANSWER_GUARD_MS: u64 = 5_000;
}

/// Who owns the runs a dashboard shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DashboardOwner {
    /// A background `drover serve` (started when none runs): leaving the dashboard never
    /// stops a run.
    Background,
    /// The dashboard's own process: leaving it stops the active runs (after asking).
    InProcess,
}

/// `[redact]`: what counts as a secret besides the built-in rules ([`crate::redact`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactConfig {
    /// Environment variables whose values are redacted wherever they appear (the keys of
    /// each `[providers.<name>.env]` table count too).
    pub env: Vec<String>,
}

/// `[notifications]`: how drover gets your attention when a run starts needing you
/// (docs/ARCHITECTURE.md §"Notifications").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsConfig {
    /// The dashboard rings the terminal bell and posts an OSC 9 notification when a run
    /// starts needing you (a permission prompt, a question, a route card).
    pub enabled: bool,
    /// The owner posts a desktop notification (`notify-send`; quietly skipped where it is
    /// missing), unless a dashboard attached to it is focused.
    #[serde(default = "enabled_by_default")]
    pub desktop: bool,
    /// The owner runs this program and its arguments, with the message as its last
    /// argument and `DROVER_NOTIFICATION_*` in its environment. Empty: none. A program
    /// that is not there, or fails, is logged and skipped.
    #[serde(default)]
    pub command: Vec<String>,
    /// The owner POSTs each notification to this `http://` or `https://` address as JSON
    /// (ntfy-style: `title`, `message`, and each run with what it asks). Empty: none.
    #[serde(default)]
    pub webhook: String,
    /// The `topic` field of the webhook's JSON (ntfy publishes JSON posted to its root
    /// address to this topic). Empty: no such field.
    #[serde(default)]
    pub webhook_topic: String,
    /// Needs that start within this many seconds of the first are sent as one
    /// notification (0 to 3600).
    #[serde(default = "default_batch_secs")]
    pub batch_secs: u64,
}

fn default_batch_secs() -> u64 {
    5
}

/// How to start one provider's CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The executable: a name looked up on PATH or a path. Empty for `sim` means this
    /// drover executable.
    pub command: String,
    /// Arguments put before drover's own.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to the child's inherited environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Whether runs may be dispatched to this provider; a disabled one is refused at
    /// dispatch and shown as disabled in the route card.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// A model turn with no word from the provider for this long (no tool running, no
    /// request waiting for an answer) fails the run as `timeout`, so a CLI that retries a
    /// dead API forever does not hold its slot. Absent or 0: no such timeout.
    #[serde(default)]
    pub silence_timeout_secs: Option<u64>,
    /// The protocol the command speaks, for a provider drover has no adapter of its own
    /// for: `acp` (the Agent Client Protocol) makes any agent that speaks it a provider
    /// (docs/PROVIDERS.md §"ACP agents"). Absent: the provider's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// For an ACP agent: the session mode (one of the ids its `session/new` answer
    /// offers, e.g. `plan`) drover sets with `session/set_mode` once the session is
    /// open (docs/PROVIDERS.md §"ACP agents"). Absent: the agent's current mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// The one value `[providers.<name>] protocol` takes.
pub const ACP_PROTOCOL: &str = "acp";

fn enabled_by_default() -> bool {
    true
}

impl Config {
    /// `provider`'s silence timeout in milliseconds, when it has one.
    pub fn silence_ms(&self, provider: &str) -> Option<i64> {
        self.providers
            .get(provider)
            .and_then(|p| p.silence_timeout_secs)
            .filter(|secs| *secs > 0)
            .map(|secs| i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX))
    }

    /// The embedded defaults alone (no user file).
    pub fn defaults() -> Config {
        // Parsed once per process: the dashboard and every command ask for it more than
        // once before their first output.
        static DEFAULTS: std::sync::LazyLock<Config> = std::sync::LazyLock::new(|| {
            toml::from_str(DEFAULT_CONFIG_TOML).expect("the embedded default config is valid")
        });
        DEFAULTS.clone()
    }

    /// Reads the user's file at `path` and merges it over the defaults. A missing file
    /// means the defaults. Refusals are `CONFIG_UNREADABLE` (the file cannot be read as
    /// text) or `CONFIG_INVALID` (bad TOML, an unknown key, a wrong type, values out of
    /// order), each one line naming the file, the line and the key.
    pub fn load(path: &Path) -> Result<Config, DroverError> {
        match load::read_user_file(path)? {
            Some(text) => Config::parse(&text, path),
            None => Ok(Config::defaults()),
        }
    }

    /// Merges `text`, the contents of the user's file, over the defaults. `path` is only
    /// used to name the file in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, DroverError> {
        load::parse_over_defaults(text, path)
    }

    /// The configuration as TOML, every key present (`drover config show`).
    pub fn to_toml_string(&self) -> Result<String, DroverError> {
        toml::to_string_pretty(self).map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!("cannot write the configuration as TOML: {e}"),
            )
        })
    }

    /// The configuration as pretty-printed JSON (`drover config show --json`).
    pub fn to_json_string(&self) -> Result<String, DroverError> {
        serde_json::to_string_pretty(self).map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!("cannot write the configuration as JSON: {e}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_defaults_parse_and_hold_the_design_numbers() {
        let c = Config::defaults();
        assert_eq!(c.limits.max_minutes_default, 45);
        assert_eq!(c.limits.per_provider["claude-code"], 3);
        assert_eq!(c.limits.per_provider["codex"], 4);
        assert_eq!(c.limits.session_hard_cap_usd, 25.0);
        assert!(c.providers.contains_key("sim"));
        assert!(!c.pricing.enforce);
        assert!(c.catalog.models.is_empty());
        assert_eq!(c.routing.mode, RoutingMode::Ask);
        assert_eq!(c.routing.ask_above_tier, crate::money::Tier::Standard);
        assert_eq!(c.routing.ask_above_price_per_mtok, None);
        assert_eq!(c.routing.card_expiry_secs, 1800);
        assert!(c.routing.classes.is_empty());
        assert_eq!(
            c.workspaces.default,
            crate::workspace::WorkspaceMode::Worktree
        );
        assert_eq!(c.workspaces.shared_conflict, SharedConflict::Wait);
        assert_eq!(
            c.workspaces.root_in(Path::new("/data")),
            Path::new("/data/worktrees")
        );
    }

    #[test]
    fn embedded_defaults_pass_the_semantic_checks() {
        let c = Config::parse("", Path::new("/p/config.toml")).unwrap();
        assert_eq!(c, Config::defaults());
    }

    /// The defaults file must set every field: the unknown-key message lists the known
    /// keys from it, and `config show` must show what is in force.
    #[test]
    fn embedded_defaults_set_every_field() {
        let from_file: toml::Table = toml::from_str(DEFAULT_CONFIG_TOML).unwrap();
        let round_trip: toml::Table =
            toml::from_str(&Config::defaults().to_toml_string().unwrap()).unwrap();
        assert_eq!(from_file, round_trip);
    }

    #[test]
    fn toml_and_json_output_round_trip() {
        let c = Config::defaults();
        let from_toml: Config = toml::from_str(&c.to_toml_string().unwrap()).unwrap();
        let from_json: Config = serde_json::from_str(&c.to_json_string().unwrap()).unwrap();
        assert_eq!(from_toml, c);
        assert_eq!(from_json, c);
    }
}
