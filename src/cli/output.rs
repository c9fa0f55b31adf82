//! What the command line prints: data on stdout (`--json` as one line of the API's JSON),
//! one-line notes on stderr, everything through the redactor's configured values (the
//! owner redacted what it sends), and a closed pipe is not an error. Every subcommand
//! prints through here.

use clap::Args;
use serde::Serialize;
use std::io::{self, Write};

use drover_core::error::{DroverError, ErrorCode};

/// `--json` on every run command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Args)]
pub struct JsonFlag {
    /// Print the answer as one JSON line (the dispatcher API's shape).
    #[arg(long)]
    pub json: bool,
}

/// Writes `text` to stdout. A closed pipe (`drover … | head`) is not an error.
pub(crate) fn write_stdout(text: &str) -> Result<(), DroverError> {
    // What the owner sent was redacted where it came in; the configured values are
    // hidden once more here (a value named after the text was stored), and no rule is
    // built to print (docs/ARCHITECTURE.md §"Secrets").
    let text = drover_core::redact::global().values_only().redact(text);
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(DroverError::new(
            ErrorCode::Internal,
            format!("cannot write to standard output: {e}"),
        )),
    }
}

/// Prints a value as one JSON line: `--json` output is the API's JSON exactly.
pub(crate) fn print_json(value: &impl Serialize) -> Result<(), DroverError> {
    let text = serde_json::to_string(value).map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot write the answer as JSON: {e}"),
        )
    })?;
    write_stdout(&(text + "\n"))
}

/// One line for the person at the terminal, on stderr. A closed stderr is not an error.
pub(crate) fn note(text: &str) {
    let text = drover_core::redact::global().values_only().redact(text);
    let _ = writeln!(io::stderr().lock(), "{text}");
}
