//! `drover completions SHELL` and `drover man`: generated from the command line's own
//! definition (clap_complete, clap_mangen), so they never disagree with `--help`.

use clap::{Args, ValueEnum};

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

/// The man page of `cli` (drover's command line), in roff.
pub fn man(cli: clap::Command) -> Result<(), DroverError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cli).render(&mut out).map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot render the man page: {e}"),
        )
    })?;
    super::output::write_stdout(&String::from_utf8_lossy(&out))
}

#[cfg(test)]
mod tests {
    use crate::cli::Cli;
    use clap::CommandFactory;

    #[test]
    fn completions_name_the_subcommands_and_the_man_page_is_roff() {
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
        let mut out = Vec::new();
        clap_mangen::Man::new(Cli::command())
            .render(&mut out)
            .unwrap();
        let man = String::from_utf8(out).unwrap();
        assert!(
            man.starts_with(".ie") || man.contains(".TH drover"),
            "{}",
            &man[..80]
        );
    }
}
