//! The `drover` executable: file-mode and panic setup, then the command line.

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    drover_core::set_version(drover::VERSION);
    drover_core::paths::restrict_file_creation_mask();
    if let Err(e) = drover_tui::terminal::install_panic_and_error_hooks() {
        eprintln!("error[{}]: {}", e.code, e.message);
        return ExitCode::FAILURE;
    }
    let matches = drover::cli::Cli::command().get_matches();
    let json = drover::cli::json_requested(&matches);
    let cli = match drover::cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match drover::cli::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => {
            drover::cli::print_refusal(&e, json);
            ExitCode::from(drover::cli::exit::of_error(&e))
        }
    }
}
