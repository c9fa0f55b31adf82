//! `drover config path` and `drover config show [--json]`.
//!
//! `path` never reads the file, so it still answers when the file is broken (that is
//! when the user needs it most).

use super::output::write_stdout;
use clap::Subcommand;
use drover_core::config::Config;
use drover_core::error::DroverError;
use drover_core::paths::Paths;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the config file's path (it need not exist).
    Path {
        /// Print {"path": …} instead.
        #[arg(long)]
        json: bool,
    },
    /// Print the configuration in force: the defaults with your file merged over them.
    Show {
        /// Print JSON instead of TOML.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: ConfigCommand, paths: &Paths) -> Result<(), DroverError> {
    match command {
        ConfigCommand::Path { json: false } => {
            write_stdout(&format!("{}\n", paths.config_file.display()))
        }
        ConfigCommand::Path { json: true } => {
            super::output::print_json(&serde_json::json!({ "path": paths.config_file }))
        }
        ConfigCommand::Show { json } => {
            let config = Config::load(&paths.config_file)?;
            let text = if json {
                config.to_json_string()? + "\n"
            } else {
                config.to_toml_string()?
            };
            write_stdout(&text)
        }
    }
}
