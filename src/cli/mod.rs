//! The command line: clap types for every subcommand and the driver that runs one.
//!
//! Each subcommand group lives in its own file with its own clap enum and `run`; this
//! module only lists them in [`Command`] and does what every subcommand shares: resolve
//! [`Paths`], create the data and log directories, start logging. Output that is data goes
//! to stdout (`--json` where it is data); refusals are returned as [`DroverError`] for
//! `main` to print.

mod budget;
pub mod config;
mod dashboard;
pub mod demo;
mod dispatch;
mod docs;
mod doctor;
pub mod exit;
mod headless;
mod hosts;
mod mcp;
mod models;
mod output;
pub mod owner;
mod render;
mod route;
mod rules;
pub mod runs;
pub mod serve;
pub mod sim;
mod spend;
mod workspace;

use clap::{CommandFactory, Parser, Subcommand};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::paths::Paths;
use std::io::{self, Write};

/// drover: dispatch coding-agent runs and supervise them.
///
/// Parsed through [`CliArgs`], where the subcommand is optional: no subcommand is
/// [`Command::Dashboard`].
#[derive(Debug)]
pub struct Cli {
    pub command: Command,
}

/// drover: dispatch coding-agent runs and supervise them. Without a subcommand, drover
/// opens the dashboard.
#[derive(Debug, Parser)]
#[command(
    name = "drover",
    version = crate::VERSION,
    about,
    long_about = None,
    after_help = exit::TABLE
)]
struct CliArgs {
    #[command(subcommand)]
    command: Option<Command>,
}

impl clap::CommandFactory for Cli {
    fn command() -> clap::Command {
        CliArgs::command()
    }

    fn command_for_update() -> clap::Command {
        CliArgs::command_for_update()
    }
}

impl clap::FromArgMatches for Cli {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let args = CliArgs::from_arg_matches(matches)?;
        Ok(Cli {
            command: args.command.unwrap_or(Command::Dashboard),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Cli::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Parser for Cli {}

impl Cli {
    /// The command lines a process that stays up is started with, told apart without
    /// clap: `drover` alone (the dashboard), `drover serve` (how a dashboard or a dispatch
    /// starts the background owner) and `drover warden` (the owner's warden). Building
    /// clap's tree of every subcommand and parsing runs code whose pages then stay resident
    /// for the life of the process (docs/ARCHITECTURE.md §"Memory"). `None` for any other
    /// command line: clap parses it, with its help and its errors.
    pub fn without_clap(args: &[std::ffi::OsString]) -> Option<Cli> {
        let words = args
            .iter()
            .skip(1)
            .map(|word| word.to_str())
            .collect::<Option<Vec<&str>>>()?;
        let command = match words.as_slice() {
            [] => Command::Dashboard,
            ["serve"] => Command::Serve(serve::ServeArgs {
                json: false,
                detach: false,
            }),
            ["warden"] => Command::Warden,
            _ => return None,
        };
        Some(Cli { command })
    }
}

/// Every subcommand group. A new group (serve, dispatch, runs, show, …) is a new file in
/// `src/cli/` with its own clap type and `run`, plus one variant here.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The dashboard (what `drover` with no subcommand runs).
    #[command(skip)]
    Dashboard,
    /// Where the config file is and what is in force.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Own the data directory with no dashboard: runs the dispatcher and listens for the
    /// headless commands and dashboards of other terminals (`--detach`: in the background).
    Serve(serve::ServeArgs),
    /// End the running drover: its runs in a turn are recorded as interrupted (and can be
    /// resumed), the others come back as they are with the next one; `--wait` waits until
    /// it is gone.
    Shutdown(owner::ShutdownArgs),
    /// Whether a drover runs for this data directory: its pid, version, uptime, and the
    /// runs by state.
    Status(owner::StatusArgs),
    /// Print a shell completion script: `drover completions bash > ~/.local/share/bash-completion/completions/drover`.
    Completions(docs::CompletionsArgs),
    /// Print drover's man page (roff): `drover man | man -l -`; `--dir DIR` writes one
    /// page per command (drover-serve.1, …) with FILES and ENVIRONMENT.
    Man(docs::ManArgs),
    /// What drover finds on this machine: each provider's CLI and version, the config and
    /// data paths, and how to fix what is missing.
    Doctor(doctor::DoctorArgs),
    /// The hosts of your config (`[hosts.NAME]`) a run can be sent to with
    /// `dispatch --host NAME`, and how each is reached.
    Hosts(hosts::HostsArgs),
    /// The budget session's money: spent, reserved, available, caps; `set` and `new`.
    Budget(budget::BudgetArgs),
    /// What was spent over time, from every run's usage: `--by
    /// day|week|model|provider|repository|workflow|tag`, `--since YYYY-MM-DD|Nd`; each
    /// basis (reported, estimated, unpriced) apart.
    Spend(spend::SpendArgs),
    /// The catalog: each model a provider can run, with its tier, price per million tokens
    /// and vision (`--provider P` for one provider's).
    Models(models::ModelsArgs),
    /// The dashboard on the simulated provider with a few runs already dispatched, in a
    /// throwaway data directory (unless DROVER_HOME is set): no CLI, no API key.
    Demo(demo::DemoArgs),
    /// An MCP server on stdin/stdout: an agent (Claude Code, Codex, OpenCode) dispatches
    /// runs, waits for them and reads their results; the person supervises them here.
    Mcp(mcp::McpArgs),
    /// Dispatch a run. With a drover running, it takes the run and this returns at once
    /// (unless --wait); otherwise this process runs it and follows it until it ends.
    #[command(after_help = exit::TABLE)]
    Dispatch(Box<dispatch::DispatchArgs>),
    #[command(flatten)]
    Run(runs::RunCommand),
    #[command(flatten)]
    Route(route::RouteCommand),
    #[command(flatten)]
    Workspace(workspace::WorkspaceCommand),
    /// The approval rules: `rules add --scope run|repository|everywhere --kind
    /// command|file-edit|fetch|mcp-tool|any --pattern P allow|deny`, `rules rm ID`.
    Rules(rules::RulesArgs),
    /// The simulated agent: a Claude-Code-compatible stream-json CLI driven by a scenario.
    #[command(hide = true)]
    SimAgent(sim::SimAgentArgs),
    /// The owner's warden: started by an owner with a pipe on stdin; when the owner's end
    /// closes, ends what its runs' CLIs left (docs/ARCHITECTURE.md §"A restart").
    #[command(hide = true)]
    Warden,
}

impl Command {
    /// Whether this command only reads: it must write nothing to the data directory.
    pub fn read_only(&self) -> bool {
        match self {
            Command::Config(_)
            | Command::Doctor(_)
            | Command::Hosts(_)
            | Command::SimAgent(_)
            | Command::Warden
            | Command::Status(_)
            | Command::Models(_)
            | Command::Completions(_)
            | Command::Man(_) => true,
            Command::Budget(args) => args.action.is_none(),
            Command::Spend(_) => true,
            Command::Run(command) => command.read_only(),
            Command::Route(command) => command.read_only(),
            Command::Workspace(command) => command.read_only(),
            Command::Rules(args) => args.read_only(),
            // `mcp` starts a background owner when none runs.
            Command::Dashboard
            | Command::Dispatch(_)
            | Command::Serve(_)
            | Command::Demo(_)
            | Command::Shutdown(_)
            | Command::Mcp(_) => false,
        }
    }

    /// The command's name, for the log (never its arguments).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Dashboard => "dashboard",
            Command::Config(_) => "config",
            Command::Serve(_) => "serve",
            Command::Doctor(_) => "doctor",
            Command::Hosts(_) => "hosts",
            Command::Budget(_) => "budget",
            Command::Spend(_) => "spend",
            Command::Models(_) => "models",
            Command::Mcp(_) => "mcp",
            Command::Demo(_) => "demo",
            Command::Dispatch(_) => "dispatch",
            Command::Run(command) => command.name(),
            Command::Route(command) => command.name(),
            Command::Workspace(command) => command.name(),
            Command::Rules(_) => "rules",
            Command::SimAgent(_) => "sim-agent",
            Command::Warden => "warden",
            Command::Shutdown(_) => "shutdown",
            Command::Status(_) => "status",
            Command::Completions(_) => "completions",
            Command::Man(_) => "man",
        }
    }
}

/// Whether the command line asked for JSON (`--json` on whichever subcommand has it), so
/// a refusal is printed as JSON too.
pub fn json_requested(matches: &clap::ArgMatches) -> bool {
    let own = matches
        .try_get_one::<bool>("json")
        .ok()
        .flatten()
        .copied()
        .unwrap_or(false);
    own || matches
        .subcommand()
        .is_some_and(|(_, sub)| json_requested(sub))
}

/// Prints a refusal on stderr: `error[CODE]: what to do`, or with `--json` the line
/// `{"error": {"code": …, "message": …}}`.
pub fn print_refusal(e: &DroverError, json: bool) {
    let text = if json {
        serde_json::json!({ "error": e }).to_string()
    } else {
        format!("error[{}]: {}", e.code, e.message)
    };
    // A refusal may quote what it was given (an id, a value): redacted like any output.
    let text = drover_core::redact::global().redact(&text);
    let _ = writeln!(io::stderr().lock(), "{text}");
}

/// Runs one parsed command line; the exit says how the runs it waited for ended.
pub fn run(cli: Cli) -> Result<exit::Exit, DroverError> {
    // A protocol child: stdout is the protocol, exit codes are its own, and it touches
    // neither the data directory nor the log file.
    if let Command::SimAgent(args) = cli.command {
        std::process::exit(sim::run(args));
    }
    // The warden writes nothing and logs nowhere: it waits for its owner's end.
    if let Command::Warden = cli.command {
        drover_core::control::warden::watch(io::stdin().lock());
        return Ok(exit::Exit::Done);
    }
    // Documentation touches neither the data directory nor the log.
    match &cli.command {
        Command::Completions(args) => {
            return docs::completions(args, Cli::command()).map(|()| exit::Exit::Done);
        }
        Command::Man(args) => {
            return docs::man(args, Cli::command()).map(|()| exit::Exit::Done);
        }
        _ => {}
    }
    let done = |r: Result<(), DroverError>| r.map(|()| exit::Exit::Done);
    // The demo picks its own (throwaway) directory; it is removed when `_demo_home` drops.
    let (paths, _demo_home) = match &cli.command {
        Command::Demo(_) => {
            let home = demo::home()?;
            (home.paths.clone(), Some(home))
        }
        _ => (Paths::resolve()?, None),
    };
    // The values config names are secrets wherever they appear (output and logs).
    if let Ok(config) = drover_core::config::Config::load(&paths.config_file) {
        drover_core::redact::install(drover_core::redact::Redactor::from_config(
            &config,
            |name| std::env::var(name).ok(),
        ));
    }
    // A command that only reads writes nothing to the data directory: no directory is
    // made, no log file opened (an owner it talks to logs on its side).
    let _log = if cli.command.read_only() {
        None
    } else {
        paths.ensure_dirs()?;
        // The log is optional: a directory it cannot be written in (a read-only disk) is
        // a warning, and the command goes on (its own refusals say what it cannot do).
        match drover_core::logging::init(&paths.log_dir) {
            Ok(log) => {
                // The command's name only: its arguments (a task, a follow-up) are content.
                tracing::info!(
                    version = crate::VERSION,
                    command = cli.command.name(),
                    "drover started"
                );
                tracing::debug!(command = ?cli.command, "arguments");
                Some(log)
            }
            Err(e) => {
                output::note(&format!(
                    "warning: {}; drover goes on without a log file",
                    e.message
                ));
                None
            }
        }
    };
    let result = match cli.command {
        Command::Dashboard => done(dashboard::run(&paths)),
        Command::Demo(args) => done(demo::run(args, &paths)),
        Command::Config(command) => done(config::run(command, &paths)),
        Command::Serve(args) => done(serve::run(args, &paths)),
        Command::Shutdown(args) => done(owner::shutdown(args, &paths)),
        Command::Status(args) => done(owner::status(args, &paths)),
        Command::Completions(_) | Command::Man(_) => Err(DroverError::new(
            ErrorCode::Internal,
            "completions and man are printed before the data directory is touched",
        )),
        Command::Doctor(args) => done(doctor::run(args, &paths)),
        Command::Hosts(args) => done(hosts::run(args, &paths)),
        Command::Budget(args) => done(budget::run(args, &paths)),
        Command::Spend(args) => done(spend::run(args, &paths)),
        Command::Models(args) => done(models::run(args, &paths)),
        Command::Mcp(args) => done(mcp::run(args, &paths)),
        Command::Dispatch(args) => dispatch::run(*args, &paths),
        Command::Run(command) => runs::run(command, &paths),
        Command::Route(command) => done(route::run(command, &paths)),
        Command::Workspace(command) => done(workspace::run(command, &paths)),
        Command::Rules(args) => done(rules::run(args, &paths)),
        Command::SimAgent(_) | Command::Warden => Err(DroverError::new(
            ErrorCode::Internal,
            "sim-agent and warden are handled before the data directory is touched",
        )),
    };
    if let Err(e) = &result {
        tracing::error!(code = %e.code, "{}", e.message);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn config_subcommands_parse() {
        let cli = Cli::try_parse_from(["drover", "config", "show", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Config(config::ConfigCommand::Show { json: true })
        ));
        let cli = Cli::try_parse_from(["drover", "config", "path"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Config(config::ConfigCommand::Path { json: false })
        ));
        assert!(Cli::try_parse_from(["drover", "config", "nope"]).is_err());
    }

    #[test]
    fn what_is_told_apart_without_clap_is_what_clap_parses() {
        let argv = |words: &[&str]| -> Vec<std::ffi::OsString> {
            std::iter::once("drover")
                .chain(words.iter().copied())
                .map(Into::into)
                .collect()
        };
        for words in [&[][..], &["serve"], &["warden"]] {
            let args = argv(words);
            let fast = Cli::without_clap(&args);
            let parsed = Cli::try_parse_from(&args).unwrap();
            assert_eq!(
                format!("{fast:?}"),
                format!("{:?}", Some(parsed)),
                "drover {words:?}"
            );
        }
        // Anything else is clap's: options, help, other commands, a mistyped word.
        for words in [
            &["serve", "--json"][..],
            &["serve", "--detach"],
            &["--help"],
            &["--version"],
            &["runs"],
            &["serv"],
            &["warden", "extra"],
        ] {
            assert!(
                Cli::without_clap(&argv(words)).is_none(),
                "drover {words:?}"
            );
        }
    }

    #[test]
    fn no_subcommand_is_the_dashboard_and_demo_is_a_subcommand() {
        let cli = Cli::try_parse_from(["drover"]).unwrap();
        assert!(matches!(cli.command, Command::Dashboard));
        let cli = Cli::try_parse_from(["drover", "demo"]).unwrap();
        assert!(matches!(cli.command, Command::Demo(_)));
        assert!(
            Cli::try_parse_from(["drover", "dashboard"]).is_err(),
            "not a word to type"
        );
    }
}
