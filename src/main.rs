//! The `drover` executable: file-mode and panic setup, then the command line.

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    limit_malloc_arenas();
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

/// glibc gives every thread that allocates an arena of its own (up to eight per core),
/// each holding freed memory apart from the others: the tokio workers, the blocking
/// threads, the ledger writer and the log thread. drover's threads mostly wait on I/O, so
/// two arenas serve them; the owner with 48 active runs holds about 1 MiB less
/// (docs/ARCHITECTURE.md §"Memory"). Called first, before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; it is called before any other
    // thread exists, so no allocation runs concurrently.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}
