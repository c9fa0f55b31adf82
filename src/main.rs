//! The `drover` executable: file-mode and panic setup, then the command line.

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    drover_core::resident::limit_heap_arenas();
    drover_core::set_version(drover::VERSION);
    drover_core::paths::restrict_file_creation_mask();
    if let Err(e) = drover_tui::terminal::install_panic_and_error_hooks() {
        eprintln!("error[{}]: {}", e.code, e.message);
        return ExitCode::FAILURE;
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (cli, json) = match drover::cli::Cli::without_clap(&args) {
        Some(cli) => (cli, false),
        None => {
            let matches = drover::cli::Cli::command().get_matches_from(args);
            let json = drover::cli::json_requested(&matches);
            match drover::cli::Cli::from_arg_matches(&matches) {
                Ok(cli) => (cli, json),
                Err(e) => e.exit(),
            }
        }
    };
    match drover::cli::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => {
            drover::cli::print_refusal(&e, json);
            ExitCode::from(drover::cli::exit::of_error(&e))
        }
    }
}
