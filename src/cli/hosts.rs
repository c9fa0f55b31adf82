//! `drover hosts [--json]`: the `[hosts.<name>]` of the config, how each is reached; and
//! `drover doctor --host NAME [--cwd DIR]`: what drover finds there — whether it answers,
//! each enabled provider's CLI with its version, git, and the directory a run would work
//! in (docs/ARCHITECTURE.md §"Hosts").
//!
//! What must stay true: both only look. `hosts` reads the config alone; the doctor runs
//! one bounded shell script on the host through the host's own transport (the one a run
//! uses), every word of it quoted for the host's shell.

use clap::Args;
use serde::Serialize;
use std::time::Duration;

use super::headless::runtime;
use super::output::{JsonFlag, print_json, write_stdout};
use drover_core::config::{Config, SIM_PROVIDER};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::paths::Paths;
use drover_core::providers::transport::Transport;

/// How long the doctor's look at a host may take (each CLI's `--version` included).
const DOCTOR_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Args)]
pub struct HostsArgs {
    #[command(flatten)]
    pub output: JsonFlag,
}

/// One host as `drover hosts --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostRow {
    pub name: String,
    /// `ssh`, `podman`, `docker` or `kubectl`.
    pub kind: String,
    /// `user@host[:port]`, the container's or the pod's name.
    pub target: String,
}

pub fn run(args: HostsArgs, paths: &Paths) -> Result<(), DroverError> {
    let config = Config::load(&paths.config_file)?;
    let rows: Vec<HostRow> = config
        .hosts
        .iter()
        .map(|(name, host)| HostRow {
            name: name.clone(),
            kind: host.kind().to_string(),
            target: host.target(),
        })
        .collect();
    if args.output.json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        return write_stdout(&format!(
            "no hosts: add a [hosts.NAME] table to {} (ssh = \"user@host\", container = \"NAME\" or kubectl = \"POD\")\n",
            paths.config_file.display()
        ));
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for row in &rows {
        out.push_str(&format!(
            "{:<width$}  {:<7}  {}\n",
            row.name, row.kind, row.target
        ));
    }
    write_stdout(&out)
}

/// One CLI looked for on the host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteCli {
    /// The provider (or `git`).
    pub name: String,
    /// The command looked for.
    pub command: String,
    /// Where the host's shell found it.
    pub path: Option<String>,
    /// The first line of its `--version`.
    pub version: Option<String>,
    /// `ok`, `missing`, `no-version`.
    pub status: String,
}

/// What `drover doctor --host NAME` finds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostReport {
    pub host: String,
    pub kind: String,
    pub target: String,
    /// The host ran the doctor's script.
    pub reachable: bool,
    /// Why not, in the transport's words.
    pub error: Option<String>,
    pub providers: Vec<RemoteCli>,
    pub git: Option<RemoteCli>,
    /// The directory asked about (`--cwd`), and whether it is one there.
    pub cwd: Option<String>,
    pub cwd_exists: Option<bool>,
}

/// The script the doctor runs on a host: a line per CLI (`cli NAME COMMAND PATH
/// VERSION`, tab-separated) and one for the directory.
fn doctor_script(clis: &[(String, String)], cwd: Option<&str>) -> String {
    let mut script = String::from(
        "probe() { p=$(command -v \"$2\" 2>/dev/null) || { printf 'cli\\t%s\\t%s\\t\\t\\n' \"$1\" \"$2\"; return; }; \
         v=$(\"$p\" --version </dev/null 2>/dev/null | head -n 1); \
         printf 'cli\\t%s\\t%s\\t%s\\t%s\\n' \"$1\" \"$2\" \"$p\" \"$v\"; }; printf 'reached\\n'; ",
    );
    for (name, command) in clis {
        script.push_str(&format!(
            "probe {} {}; ",
            shell_words::quote(name),
            shell_words::quote(command)
        ));
    }
    if let Some(dir) = cwd {
        script.push_str(&format!(
            "if [ -d {0} ]; then printf 'dir\\tyes\\n'; else printf 'dir\\tno\\n'; fi; ",
            shell_words::quote(dir)
        ));
    }
    script.push_str("exit 0");
    script
}

/// Reads what [`doctor_script`] printed.
fn read_report(report: &mut HostReport, stdout: &str) {
    for line in stdout.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields.as_slice() {
            ["reached"] => report.reachable = true,
            ["dir", answer] => report.cwd_exists = Some(*answer == "yes"),
            ["cli", name, command, path, version] => {
                let path = (!path.is_empty()).then(|| path.to_string());
                let version = (!version.trim().is_empty()).then(|| version.trim().to_string());
                let status = match (&path, &version) {
                    (None, _) => "missing",
                    (Some(_), None) => "no-version",
                    (Some(_), Some(_)) => "ok",
                };
                let cli = RemoteCli {
                    name: name.to_string(),
                    command: command.to_string(),
                    path,
                    version,
                    status: status.into(),
                };
                if *name == "git" {
                    report.git = Some(cli);
                } else {
                    report.providers.push(cli);
                }
            }
            _ => {}
        }
    }
}

/// `drover doctor --host NAME [--cwd DIR]`.
pub fn doctor(name: &str, cwd: Option<&str>, json: bool, paths: &Paths) -> Result<(), DroverError> {
    let config = Config::load(&paths.config_file)?;
    let transport = Transport::named(name, &config.hosts, &paths.ssh_dir())?;
    let host = config.hosts.get(name).cloned().unwrap_or_default();
    let mut clis: Vec<(String, String)> = config
        .providers
        .iter()
        .filter(|(provider, p)| p.enabled && provider.as_str() != SIM_PROVIDER)
        .map(|(provider, p)| {
            let command = if p.command.is_empty() {
                drover_core::providers::traits(provider)
                    .map(|t| t.default_command.to_string())
                    .unwrap_or_default()
            } else {
                p.command.clone()
            };
            (provider.clone(), command)
        })
        .filter(|(_, command)| !command.is_empty())
        .collect();
    clis.push(("git".into(), "git".into()));
    let script = doctor_script(&clis, cwd);
    let mut report = HostReport {
        host: name.to_string(),
        kind: host.kind().to_string(),
        target: host.target(),
        reachable: false,
        error: None,
        providers: Vec::new(),
        git: None,
        cwd: cwd.map(str::to_string),
        cwd_exists: None,
    };
    match runtime()?.block_on(transport.probe(&script, DOCTOR_TIMEOUT)) {
        Ok(out) => {
            read_report(&mut report, &out.stdout);
            if !report.reachable {
                let said = out.stderr.lines().last().unwrap_or("").trim().to_string();
                report.error = Some(if said.is_empty() {
                    format!("it exited {:?} without answering", out.code)
                } else {
                    said
                });
            }
        }
        Err(e) => report.error = Some(e),
    }
    // A refusal prints nothing on stdout: the one line says why and what to try.
    if !report.reachable {
        let try_it = match report.kind.as_str() {
            "ssh" => match host.port {
                Some(port) => format!(
                    "ssh -p {port} {} true",
                    host.ssh.clone().unwrap_or_default()
                ),
                None => format!("ssh {} true", host.ssh.clone().unwrap_or_default()),
            },
            "kubectl" => format!("kubectl exec {} -- true", report.target),
            engine => format!("{engine} exec {} true", report.target),
        };
        return Err(DroverError::new(
            ErrorCode::HostUnreachable,
            format!(
                "the host {name} ({}) did not answer: {}; check that `{try_it}` works from here",
                report.target,
                report.error.as_deref().unwrap_or("no answer"),
            ),
        ));
    }
    if json {
        print_json(&report)?;
    } else {
        write_stdout(&render(&report))?;
    }
    Ok(())
}

fn render(report: &HostReport) -> String {
    let mut out = format!(
        "host {} ({} {}): {}\n",
        report.host,
        report.kind,
        report.target,
        if report.reachable {
            "reachable".to_string()
        } else {
            format!(
                "unreachable — {}",
                report.error.as_deref().unwrap_or("no answer")
            )
        }
    );
    for cli in report.providers.iter().chain(report.git.iter()) {
        out.push_str(&format!(
            "  {:<14} {:<10} {}\n",
            cli.name,
            cli.status,
            match (&cli.path, &cli.version) {
                (Some(path), Some(version)) => format!("{path} · {version}"),
                (Some(path), None) => path.clone(),
                (None, _) => format!("`{}` not on the host's PATH", cli.command),
            }
        ));
    }
    if let (Some(dir), Some(exists)) = (&report.cwd, report.cwd_exists) {
        out.push_str(&format!(
            "  {:<14} {:<10} {dir}\n",
            "directory",
            if exists { "ok" } else { "missing" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The doctor's script, run by a real `sh` here, finds `sh` itself, misses a CLI
    /// that is nowhere, and tells a directory from a missing one.
    #[test]
    fn the_doctor_script_reports_clis_and_the_directory() {
        let clis = vec![
            ("git".to_string(), "git".to_string()),
            ("nothing".to_string(), "no-such-cli-anywhere".to_string()),
        ];
        for (dir, exists) in [("/", true), ("/no/such/dir", false)] {
            let out = std::process::Command::new("sh")
                .args(["-c", &doctor_script(&clis, Some(dir))])
                .output()
                .expect("sh runs");
            let mut report = HostReport {
                host: "h".into(),
                kind: "ssh".into(),
                target: "t".into(),
                reachable: false,
                error: None,
                providers: Vec::new(),
                git: None,
                cwd: Some(dir.into()),
                cwd_exists: None,
            };
            read_report(&mut report, &String::from_utf8_lossy(&out.stdout));
            assert!(report.reachable);
            assert_eq!(report.cwd_exists, Some(exists));
            let git = report.git.as_ref().expect("git line");
            assert_eq!(git.status, "ok", "{git:?}");
            assert!(
                git.version
                    .as_deref()
                    .is_some_and(|v| v.starts_with("git version"))
            );
            assert_eq!(report.providers[0].status, "missing");
            assert_eq!(report.providers[0].path, None);
        }
    }
}
