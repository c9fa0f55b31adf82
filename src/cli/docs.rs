//! `drover completions SHELL` and `drover man`: generated from the command line's own
//! definition (clap_complete, clap_mangen), so they never disagree with `--help`.
//!
//! What must stay true: `drover man --dir DIR` writes a page for every page any page names
//! (one per visible command, subcommands of subcommands included), and every page has
//! FILES and ENVIRONMENT sections.

use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

use drover_core::error::{DroverError, ErrorCode};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    pub shell: Shell,
}

/// The completion script for `args.shell`, generated from `cli` (drover's command line).
pub fn completions(args: &CompletionsArgs, mut cli: clap::Command) -> Result<(), DroverError> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cli, "drover", &mut out);
    super::output::write_stdout(&String::from_utf8_lossy(&out))
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command into DIR — drover.1, drover-serve.1, drover-rules-add.1,
    /// … every page the others name — instead of printing drover.1 (put DIR on your
    /// MANPATH as a `man1` directory, or read one with `man -l DIR/drover.1`).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `drover man`: drover.1 in roff on stdout, or (`--dir`) every page into a directory.
pub fn man(args: &ManArgs, cli: clap::Command) -> Result<(), DroverError> {
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    match &args.dir {
        None => super::output::write_stdout(&page(&cli)?),
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| cannot_write(dir, &e))?;
            let written = write_pages(&cli, dir)?;
            super::output::note(&format!(
                "wrote {written} man pages into {} (`man -l {}` reads one)",
                dir.display(),
                dir.join("drover.1").display()
            ));
            Ok(())
        }
    }
}

/// Writes the page of `cmd` and of every visible subcommand, recursively; how many.
fn write_pages(cmd: &clap::Command, dir: &Path) -> Result<usize, DroverError> {
    let mut written = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written += write_pages(sub, dir)?;
    }
    let file = dir.join(clap_mangen::Man::new(cmd.clone()).get_filename());
    std::fs::write(&file, page(cmd)?).map_err(|e| cannot_write(&file, &e))?;
    Ok(written + 1)
}

fn cannot_write(path: &Path, e: &std::io::Error) -> DroverError {
    DroverError::new(
        ErrorCode::InvalidRequest,
        format!(
            "cannot write {}: {e}; give --dir a directory you can write",
            path.display()
        ),
    )
}

/// One command's page: what clap_mangen makes of it, then FILES and ENVIRONMENT (the
/// same on every page), and SEE ALSO drover(1) on a subcommand's.
fn page(cmd: &clap::Command) -> Result<String, DroverError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!("cannot render the man page: {e}"),
            )
        })?;
    let mut text = String::from_utf8_lossy(&out).into_owned();
    text.push_str(FILES_AND_ENVIRONMENT);
    if cmd.get_display_name().is_some_and(|n| n != "drover") {
        text.push_str(".SH \"SEE ALSO\"\n\\fBdrover\\fR(1)\n");
    }
    Ok(text)
}

/// The FILES and ENVIRONMENT sections, in roff: where drover keeps its files
/// (docs/ARCHITECTURE.md §"Owner and clients", `drover_core::paths`).
const FILES_AND_ENVIRONMENT: &str = r#".SH FILES
.TP
\fI$DROVER_HOME/config.toml\fR, else \fI~/.config/drover/config.toml\fR
Your config, merged over drover's defaults (\fBdrover config\fR shows what is in force).
.TP
\fI$DROVER_HOME\fR, else \fI~/.local/share/drover\fR
The data directory (mode 0700): \fIledger.sqlite3\fR (every run, event, turn, usage row
and decision), \fIdrover.sock\fR (the owner's control socket), \fIdrover.lock\fR (the
owner lock), \fIlogs/\fR (daily log files, and \fIowner.log\fR of a background owner),
\fIworktrees/\fR (the runs' git worktrees), \fIsim\-sessions/\fR (the simulated agent's
sessions).
.SH ENVIRONMENT
.TP
\fBDROVER_HOME\fR
Puts every drover file (config, ledger, socket, logs, worktrees) under this directory.
.TP
\fBDROVER_LOG\fR
The log filter (e.g. \fIdebug\fR, \fIdrover_core=trace\fR); \fIinfo\fR when unset.
Logs go to files in the data directory, never to the terminal.
.TP
\fBDROVER_RUN_ID\fR
Set by drover for each run's CLI: a \fBdrover mcp\fR started inside the run dispatches
sub\-runs of it.
.TP
\fBDROVER_SIM_SCENARIO\fR
The simulated agent's scenario when the dispatch names none.
"#;

#[cfg(test)]
mod tests {
    use crate::cli::Cli;
    use clap::CommandFactory;

    #[test]
    fn completions_name_the_subcommands() {
        let mut out = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut Cli::command(),
            "drover",
            &mut out,
        );
        let bash = String::from_utf8(out).unwrap();
        for word in ["dispatch", "shutdown", "status", "wait"] {
            assert!(
                bash.contains(word),
                "{word} missing from the bash completions"
            );
        }
    }

    #[test]
    fn man_writes_every_page_the_pages_name_each_with_files_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        super::man(
            &super::ManArgs {
                dir: Some(dir.path().to_path_buf()),
            },
            Cli::command(),
        )
        .unwrap();
        let pages: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        for name in [
            "drover.1",
            "drover-serve.1",
            "drover-config.1",
            "drover-rules.1",
        ] {
            assert!(pages.contains(&name.to_string()), "{name}: {pages:?}");
        }
        assert!(!pages.iter().any(|p| p.contains("sim-agent")), "hidden");
        let named = regex::Regex::new(r"(drover(?:-[a-z]+)+)\(1\)").unwrap();
        for page in &pages {
            let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
            assert!(text.contains(".TH"), "{page} is roff");
            for section in [".SH FILES", ".SH ENVIRONMENT"] {
                assert!(text.contains(section), "{page}: {section}");
            }
            for found in named.captures_iter(&text.replace("\\-", "-")) {
                let wanted = format!("{}.1", &found[1]);
                assert!(
                    pages.contains(&wanted),
                    "{page} names {wanted}, which was not written"
                );
            }
        }
    }
}
