//! `drover doctor`: what drover finds on this machine — each provider's CLI (the
//! configured command or the one on PATH), its version and whether drover was tested
//! with it, git and its version (worktree runs need it), the config, data and worktree
//! paths, whether a drover owns the data directory — and, for anything missing, the
//! command that fixes it.
//!
//! What must stay true: doctor only looks (a `--version` call per CLI, bounded in time,
//! and for a CLI that answers none the `package.json` of the npm package that installed
//! it); it never changes the machine or the data directory. A config file drover refuses does
//! not stop it: the refusal is reported (with its code and what to change) and the
//! providers are checked as the defaults name them.

use clap::Args;
use regex::Regex;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use super::headless::client_runtime;
use super::output::{JsonFlag, print_json, write_stdout};
use drover_core::config::{Config, SIM_PROVIDER};
use drover_core::control::ControlClient;
use drover_core::error::DroverError;
use drover_core::paths::Paths;
use drover_core::providers;

/// How long one `--version` call may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Look at this `[hosts.NAME]` instead: whether it answers, the provider CLIs and git
    /// found there with their versions.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// With --host: whether this directory exists there.
    #[arg(long, value_name = "DIR", requires = "host")]
    pub cwd: Option<String>,
    #[command(flatten)]
    pub output: JsonFlag,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderCheck {
    pub provider: String,
    pub enabled: bool,
    /// The command as configured.
    pub command: String,
    /// Where it was found, if it was.
    pub path: Option<PathBuf>,
    pub version: Option<String>,
    pub tested_version: Option<String>,
    /// `ok`, `untested-version`, `missing`, `no-version`, `disabled`.
    pub status: String,
    /// What to do about it, when something is wrong.
    pub fix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub version: String,
    pub config_file: PathBuf,
    pub config_exists: bool,
    /// Why drover refuses the config file, if it does (the checks below use the
    /// defaults then).
    pub config_error: Option<DroverError>,
    pub data_dir: PathBuf,
    pub ledger_file: PathBuf,
    pub ledger_exists: bool,
    pub log_dir: PathBuf,
    pub socket_file: PathBuf,
    /// The pid of the drover that owns the data directory, if one answers.
    pub owner_pid: Option<u64>,
    pub providers: Vec<ProviderCheck>,
    /// git, which worktree runs need.
    pub git: GitCheck,
    /// bubblewrap, which sandboxed runs need (`--sandbox`, `[limits] sandbox_auto`).
    pub bubblewrap: SandboxCheck,
    /// Where runs' worktrees go.
    pub worktrees: PathBuf,
}

/// git on this machine: worktree runs, their diffs and merges need it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GitCheck {
    pub path: Option<PathBuf>,
    pub version: Option<String>,
    /// The oldest version drover works with.
    pub minimum: String,
    /// `ok`, `too-old`, `missing`, `no-version`.
    pub status: String,
    pub fix: Option<String>,
}

/// bubblewrap on this machine: sandboxed runs need it (docs/ARCHITECTURE.md
/// §"The sandbox").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SandboxCheck {
    pub path: Option<PathBuf>,
    pub version: Option<String>,
    /// `ok` (it runs a sandbox here), `missing` (not on PATH), `unusable` (found, but it
    /// cannot make its namespaces here).
    pub status: String,
    pub fix: Option<String>,
}

/// Finds bubblewrap and probes it the way a sandboxed dispatch does.
pub fn check_bubblewrap() -> SandboxCheck {
    use drover_core::providers::sandbox;
    match sandbox::probe() {
        Ok(found) => SandboxCheck {
            path: Some(found.path),
            version: Some(found.version),
            status: "ok".into(),
            fix: None,
        },
        Err(e) => {
            let path = which::which(sandbox::BWRAP).ok();
            SandboxCheck {
                status: if path.is_some() {
                    "unusable"
                } else {
                    "missing"
                }
                .into(),
                path,
                version: None,
                fix: Some(e.message),
            }
        }
    }
}

/// Finds git and checks its version against [`drover_core::workspace::git::MIN_VERSION`].
pub fn check_git() -> GitCheck {
    let (major, minor) = drover_core::workspace::git::MIN_VERSION;
    let minimum = format!("{major}.{minor}");
    let mut check = GitCheck {
        path: None,
        version: None,
        minimum: minimum.clone(),
        status: String::new(),
        fix: None,
    };
    let Ok(program) = which::which("git") else {
        check.status = "missing".into();
        check.fix = Some(format!(
            "install git {minimum} or newer (e.g. `apt-get install git`); without it every run shares its directory (--workspace shared)"
        ));
        return check;
    };
    check.version = version_of(&program, &["--version".to_string()]);
    check.path = Some(program);
    let parsed = check
        .version
        .as_deref()
        .and_then(drover_core::workspace::git::parse_version);
    check.status = match parsed {
        None => {
            check.fix = Some("`git --version` gave no version; check that git runs".into());
            "no-version".into()
        }
        Some(found) if found < drover_core::workspace::git::MIN_VERSION => {
            check.fix = Some(format!(
                "git {minimum} or newer is needed to merge worktree runs (`git merge-tree --write-tree`); upgrade git"
            ));
            "too-old".into()
        }
        Some(_) => "ok".into(),
    };
    check
}

pub fn run(args: DoctorArgs, paths: &Paths) -> Result<(), DroverError> {
    if let Some(host) = &args.host {
        return super::hosts::doctor(host, args.cwd.as_deref(), args.output.json, paths);
    }
    let (config, config_error) = match Config::load(&paths.config_file) {
        Ok(config) => (config, None),
        Err(refused) => (Config::defaults(), Some(refused)),
    };
    providers::registry::register_configured(&config);
    let self_exe = std::env::current_exe().ok();
    let owner_pid = client_runtime()?.block_on(async {
        let mut client = ControlClient::connect(paths).await.ok()??;
        let pong = client
            .request(drover_core::dispatch::Request::Ping)
            .await
            .ok()?;
        match pong {
            drover_core::dispatch::Response::Pong(p) => Some(u64::from(p.pid)),
            _ => None,
        }
    });
    let report = Report {
        version: env!("CARGO_PKG_VERSION").to_string(),
        config_exists: paths.config_file.is_file(),
        config_file: paths.config_file.clone(),
        config_error,
        data_dir: paths.data_dir.clone(),
        ledger_exists: paths.ledger_file.is_file(),
        ledger_file: paths.ledger_file.clone(),
        log_dir: paths.log_dir.clone(),
        socket_file: paths.socket_file.clone(),
        owner_pid,
        providers: config
            .providers
            .iter()
            .map(|(name, p)| {
                check_provider(
                    name,
                    p.enabled,
                    &p.command,
                    &p.args,
                    self_exe.as_deref(),
                    &paths.config_file,
                )
            })
            .collect(),
        git: check_git(),
        bubblewrap: check_bubblewrap(),
        worktrees: config.workspaces.root_in(&paths.data_dir),
    };
    if args.output.json {
        print_json(&report)
    } else {
        write_stdout(&render(&report))
    }
}

/// Whether the provider is the simulated agent run by this drover itself (nothing to find).
fn runs_as_drover(name: &str, command: &str) -> bool {
    command.is_empty() && name == SIM_PROVIDER
}

/// Whether doctor finds the provider's CLI (`command` on PATH, or as a path; the simulated
/// agent is always there), without asking it for its version.
pub fn cli_found(name: &str, command: &str) -> bool {
    runs_as_drover(name, command) || which::which(command).is_ok()
}

/// Finds one provider's CLI and asks it for its version.
pub fn check_provider(
    name: &str,
    enabled: bool,
    command: &str,
    args: &[String],
    self_exe: Option<&Path>,
    config_file: &Path,
) -> ProviderCheck {
    // The CLI version drover's conformance tests ran against, and how it installs.
    let pinned = providers::traits(name).and_then(|t| t.pinned);
    let tested = pinned.map(|p| p.version.to_string());
    let mut check = ProviderCheck {
        provider: name.to_string(),
        enabled,
        command: command.to_string(),
        path: None,
        version: None,
        tested_version: tested.clone(),
        status: String::new(),
        fix: None,
    };
    if !enabled {
        check.status = "disabled".into();
        return check;
    }
    let (program, version_args): (Option<PathBuf>, Vec<String>) = if runs_as_drover(name, command) {
        (
            self_exe.map(Path::to_path_buf),
            vec!["--version".to_string()],
        )
    } else if providers::registry::is_acp(name) {
        // An ACP agent's arguments start its protocol (`--acp`, `acp`):
        // its version is asked of the bare command.
        (which::which(command).ok(), vec!["--version".to_string()])
    } else {
        let mut all = args.to_vec();
        all.push("--version".to_string());
        (which::which(command).ok(), all)
    };
    let Some(program) = program else {
        check.status = "missing".into();
        let install = providers::registry::install_command(name)
            .map(|c| format!("install it with `{c}`, or "))
            .unwrap_or_default();
        check.fix = Some(format!(
            "`{command}` is not on PATH: {install}set `command` under [providers.{name}] in {}",
            config_file.display()
        ));
        return check;
    };
    check.path = Some(program.clone());
    check.version = version_of(&program, &version_args).or_else(|| {
        // Some CLIs answer no `--version` (claude-agent-acp, codex-acp): the version of
        // the npm package that installed them, read from its package.json.
        providers::registry::npm_package(name).and_then(|package| npm_version(&program, package))
    });
    check.status = match (&check.version, &tested) {
        (None, _) => {
            check.fix = Some(format!(
                "`{} --version` gave no version within {} s; check that it runs",
                program.display(),
                VERSION_TIMEOUT.as_secs()
            ));
            "no-version".into()
        }
        (Some(found), Some(tested)) if found != tested => {
            check.fix = Some(format!(
                "drover was tested with {name} {tested}; it may work with {found}, and \
                 `{}` installs the tested one",
                pinned.map(|p| p.install_command()).unwrap_or_default()
            ));
            "untested-version".into()
        }
        _ => "ok".into(),
    };
    check
}

/// The version in the `package.json` of the npm package `package` that `program` (an
/// npm bin link, or the file it points to) belongs to: the nearest directory above the
/// resolved file whose `package.json` names that package. Reads files only.
pub fn npm_version(program: &Path, package: &str) -> Option<String> {
    let file = std::fs::canonicalize(program).ok()?;
    file.ancestors().skip(1).take(8).find_map(|dir| {
        let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
        let manifest: serde_json::Value = serde_json::from_str(&text).ok()?;
        if manifest.get("name")?.as_str()? != package {
            return None;
        }
        parse_version(manifest.get("version")?.as_str()?)
    })
}

static SEMVER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)\b").expect("valid regex"));

/// The first version number `program --version` prints, waiting at most
/// [`VERSION_TIMEOUT`] (the child is killed by its pid after that).
fn version_of(program: &Path, args: &[String]) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    use std::io::Read;
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    parse_version(&out)
}

/// The first semantic version in a `--version` line (`2.1.197 (Claude Code)`,
/// `codex-cli 0.171.0`).
pub fn parse_version(text: &str) -> Option<String> {
    SEMVER.captures(text).map(|c| c[1].to_string())
}

fn render(report: &Report) -> String {
    let mut out = String::new();
    let yes_no = |b: bool| if b { "" } else { " (not created yet)" };
    out.push_str(&format!("drover {}\n", report.version));
    out.push_str(&format!(
        "config   {}{}\n",
        report.config_file.display(),
        match (&report.config_error, report.config_exists) {
            (Some(_), _) =>
                " (refused: drover does not start with it; the defaults are checked below)",
            (None, true) => "",
            (None, false) => " (none: the defaults apply)",
        }
    ));
    if let Some(e) = &report.config_error {
        out.push_str(&format!(
            "{:<8} fix: error[{}]: {}\n",
            "", e.code, e.message
        ));
    }
    out.push_str(&format!("data     {}\n", report.data_dir.display()));
    out.push_str(&format!(
        "ledger   {}{}\n",
        report.ledger_file.display(),
        yes_no(report.ledger_exists)
    ));
    out.push_str(&format!("logs     {}\n", report.log_dir.display()));
    out.push_str(&match report.owner_pid {
        Some(pid) => format!("owner    drover pid {pid} owns this data directory\n"),
        None => "owner    none (start `drover serve` or the dashboard)\n".to_string(),
    });
    out.push_str(&format!("worktrees {}\n", report.worktrees.display()));
    let git = &report.git;
    let found = match (&git.path, &git.version) {
        (Some(path), Some(v)) => format!("{} {v}", path.display()),
        (Some(path), None) => path.display().to_string(),
        (None, _) => "`git` not found".to_string(),
    };
    out.push_str(&format!("{:<12} {:<17} {found}\n", "git", git.status));
    if let Some(fix) = &git.fix {
        out.push_str(&format!("{:<12} fix: {fix}\n", ""));
    }
    let bwrap = &report.bubblewrap;
    let found = match (&bwrap.path, &bwrap.version) {
        (Some(path), Some(v)) => format!("{} {v}", path.display()),
        (Some(path), None) => path.display().to_string(),
        (None, _) => "`bwrap` not found (sandboxed runs are refused)".to_string(),
    };
    out.push_str(&format!(
        "{:<12} {:<17} {found}\n",
        "bubblewrap", bwrap.status
    ));
    if let Some(fix) = &bwrap.fix {
        out.push_str(&format!("{:<12} fix: {fix}\n", ""));
    }
    for p in &report.providers {
        let found = match (&p.path, &p.version) {
            (Some(path), Some(v)) => format!("{} {v}", path.display()),
            (Some(path), None) => path.display().to_string(),
            (None, _) => format!("`{}` not found", p.command),
        };
        out.push_str(&format!("{:<12} {:<17} {found}\n", p.provider, p.status));
        if let Some(fix) = &p.fix {
            out.push_str(&format!("{:<12} fix: {fix}\n", ""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_each_clis_own_words() {
        let cases = [
            ("2.1.197 (Claude Code)\n", Some("2.1.197")),
            ("codex-cli 0.171.0\n", Some("0.171.0")),
            ("1.18.33\n", Some("1.18.33")),
            ("drover 0.1.0-sim\n", Some("0.1.0-sim")),
            ("no version here\n", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_version(text).as_deref(), want, "{text:?}");
        }
    }

    #[test]
    fn a_missing_cli_says_how_to_install_it() {
        let check = check_provider(
            "codex",
            true,
            "definitely-not-a-command-drover",
            &[],
            None,
            Path::new("/home/me/.config/drover/config.toml"),
        );
        assert_eq!(check.status, "missing");
        let fix = check.fix.unwrap();
        assert!(
            fix.contains("npm install -g @openai/codex@0.171.0"),
            "{fix}"
        );
        assert!(fix.contains("[providers.codex]"), "{fix}");
        // An ACP agent not pinned yet: its package, and no tested version claimed.
        let check = check_provider(
            "qwen",
            true,
            "definitely-not-a-command-drover",
            &["--experimental-acp".to_string()],
            None,
            Path::new("/home/me/.config/drover/config.toml"),
        );
        assert_eq!(check.status, "missing");
        assert_eq!(check.tested_version, None);
        let fix = check.fix.unwrap();
        assert!(fix.contains("npm install -g @qwen-code/qwen-code"), "{fix}");
        assert!(fix.contains("[providers.qwen]"), "{fix}");
        // A pinned ACP agent: the tested version is installed.
        let check = check_provider(
            "gemini",
            true,
            "definitely-not-a-command-drover",
            &["--acp".to_string()],
            None,
            Path::new("/home/me/.config/drover/config.toml"),
        );
        assert_eq!(check.tested_version.as_deref(), Some("0.61.0"));
        let fix = check.fix.unwrap();
        assert!(
            fix.contains("npm install -g @google/gemini-cli@0.61.0"),
            "{fix}"
        );
    }

    #[test]
    fn a_clis_npm_package_gives_its_version_when_it_answers_none() {
        let root = tempfile::tempdir().unwrap();
        let package = root.path().join("node_modules/@scope/agent");
        std::fs::create_dir_all(package.join("dist")).unwrap();
        std::fs::write(
            package.join("package.json"),
            r#"{"name": "@scope/agent", "version": "0.23.1"}"#,
        )
        .unwrap();
        std::fs::write(package.join("dist/index.js"), "").unwrap();
        // A nested package.json of another name is passed over.
        std::fs::write(package.join("dist/package.json"), r#"{"name": "dist"}"#).unwrap();
        let bin = root.path().join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink("../@scope/agent/dist/index.js", bin.join("agent")).unwrap();
        assert_eq!(
            npm_version(&bin.join("agent"), "@scope/agent").as_deref(),
            Some("0.23.1")
        );
        assert_eq!(npm_version(&bin.join("agent"), "@other/agent"), None);
        assert_eq!(
            npm_version(&root.path().join("missing"), "@scope/agent"),
            None
        );
    }

    #[test]
    fn a_disabled_provider_is_not_looked_for() {
        let check = check_provider("opencode", false, "opencode", &[], None, Path::new("c"));
        assert_eq!(check.status, "disabled");
        assert_eq!(check.path, None);
    }
}
