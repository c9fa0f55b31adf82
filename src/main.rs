//! The `drover` executable: file-mode and panic setup, then the command line.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    drover::paths::restrict_file_creation_mask();
    if let Err(e) = drover::terminal::install_panic_and_error_hooks() {
        eprintln!("error[{}]: {}", e.code, e.message);
        return ExitCode::FAILURE;
    }
    let cli = drover::cli::Cli::parse();
    match drover::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error[{}]: {}", e.code, e.message);
            ExitCode::from(drover::cli::exit_code(&e))
        }
    }
}
