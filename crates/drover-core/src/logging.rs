//! Logs: `tracing` events to a daily-rolling file `drover.log.YYYY-MM-DD` (UTC date) in
//! the log directory, written by a background thread.
//!
//! What must stay true: nothing is ever written to the terminal (the dashboard owns it),
//! there are no ANSI colours in the file, log files are private to the user (0600), and
//! every line is redacted ([`crate::redact`]) before it is written; INFO lines hold no
//! task text and no tool input or output (that is for `debug`).
//! The level comes from `DROVER_LOG` in `EnvFilter` syntax (`debug`,
//! `drover=trace,info`); an invalid value falls back to `info` and says so in the log.

use crate::error::{DroverError, ErrorCode};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{RollingFileAppender, Rotation};
use tracing_subscriber::EnvFilter;

/// The environment variable holding the log filter.
pub const LEVEL_ENV: &str = "DROVER_LOG";
/// The filter used when `DROVER_LOG` is unset or invalid.
pub const DEFAULT_LEVEL: &str = "info";
/// Log files are named `<prefix>.YYYY-MM-DD`.
pub const FILE_PREFIX: &str = "drover.log";
/// Daily files kept; older ones are deleted when a new day starts.
pub const FILES_KEPT: usize = 14;
/// Lines waiting for the writer thread at most (more are dropped, as the appender does).
/// Its queue is allocated and touched whole when logging starts: the appender's default
/// of 128,000 lines is 4 MB of every process that logs, the owner's idle memory among
/// them.
pub const LINES_BUFFERED: usize = 4096;

/// Keeps the background writer alive: buffered lines are flushed when it drops, so the
/// caller holds it until the process ends.
#[must_use = "dropping the guard stops the log writer"]
#[derive(Debug)]
pub struct LogGuard {
    _worker: WorkerGuard,
}

/// Installs the global `tracing` subscriber writing to `log_dir` (created if missing).
/// Fails if the log file cannot be created or a subscriber is already installed.
pub fn init(log_dir: &Path) -> Result<LogGuard, DroverError> {
    let spec = std::env::var_os(LEVEL_ENV).map(|v| v.to_string_lossy().into_owned());
    let logger = build(log_dir, spec.as_deref())?;
    tracing::subscriber::set_global_default(logger.subscriber).map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot start logging: {e}; logging was already started"),
        )
    })?;
    for warning in logger.warnings {
        tracing::warn!("{warning}");
    }
    Ok(logger.guard)
}

/// A subscriber not yet installed, with what it should warn about once it is.
struct Logger<S> {
    subscriber: S,
    guard: LogGuard,
    warnings: Vec<String>,
}

fn build(
    log_dir: &Path,
    spec: Option<&str>,
) -> Result<Logger<impl tracing::Subscriber + Send + Sync + 'static>, DroverError> {
    let (filter, warning) = level_filter(spec);
    let mut warnings: Vec<String> = warning.into_iter().collect();
    let appender = RollingFileAppender::builder()
        .rotation(Rotation::DAILY)
        .filename_prefix(FILE_PREFIX)
        .max_log_files(FILES_KEPT)
        .build(log_dir)
        .map_err(|e| {
            let what = if crate::ledger::disk::state_of(log_dir).read_only {
                "the disk holding it is read-only"
            } else {
                "check the directory's permissions"
            };
            DroverError::new(
                ErrorCode::Internal,
                format!(
                    "cannot create a log file in {}: {e}; {what}",
                    log_dir.display()
                ),
            )
        })?;
    // The umask set at startup already makes new files 0600; this covers files created
    // before it (or by a caller that did not set it).
    warnings.extend(make_log_files_private(log_dir));
    // Redacted on the writer's thread, just before the file: a line's redaction (and the
    // rules' first build, in a process that logs) costs the thread that logged nothing.
    let (writer, worker) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LINES_BUFFERED)
        .finish(Redacting(appender));
    let subscriber = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(filter)
        .finish();
    Ok(Logger {
        subscriber,
        guard: LogGuard { _worker: worker },
        warnings,
    })
}

/// A log writer that redacts every line ([`crate::redact`]) before it reaches the file
/// (each line comes whole: the formatter writes an event at once, and the background
/// writer hands each on as it came).
struct Redacting<W>(W);

impl<W: std::io::Write> std::io::Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let clean = crate::redact::global().redact(&text).into_owned();
        self.0.write_all(clean.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The filter for `spec`; the default filter and a warning when `spec` is invalid.
fn level_filter(spec: Option<&str>) -> (EnvFilter, Option<String>) {
    let default = || EnvFilter::new(DEFAULT_LEVEL);
    match spec.map(str::trim).filter(|s| !s.is_empty()) {
        None => (default(), None),
        Some(spec) => match EnvFilter::try_new(spec) {
            Ok(filter) => (filter, None),
            Err(e) => (
                default(),
                Some(format!(
                    "{LEVEL_ENV}={spec:?} is not a valid filter ({e}); logging at {DEFAULT_LEVEL}"
                )),
            ),
        },
    }
}

/// Sets mode 0600 on every drover log file in `log_dir`; returns what it could not fix.
fn make_log_files_private(log_dir: &Path) -> Vec<String> {
    let entries = match std::fs::read_dir(log_dir) {
        Ok(entries) => entries,
        Err(e) => return vec![format!("cannot list {}: {e}", log_dir.display())],
    };
    let mut problems = Vec::new();
    for entry in entries.flatten() {
        let is_log = entry.file_name().to_string_lossy().starts_with(FILE_PREFIX)
            && entry.file_type().is_ok_and(|t| t.is_file());
        if !is_log {
            continue;
        }
        let path = entry.path();
        if let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            problems.push(format!("cannot make {} private: {e}", path.display()));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_files(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(FILE_PREFIX)
            })
            .collect();
        files.sort();
        files
    }

    /// Logs `events` through a logger built for `spec` and returns the file's text.
    fn log_with(spec: Option<&str>, events: impl FnOnce()) -> (String, u32) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        let logger = build(&dir, spec).unwrap();
        let warnings = logger.warnings;
        tracing::subscriber::with_default(logger.subscriber, || {
            for w in &warnings {
                tracing::warn!("{w}");
            }
            events();
        });
        drop(logger.guard); // flushes
        let files = log_files(&dir);
        assert_eq!(files.len(), 1, "{files:?}");
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        let date = name.strip_prefix("drover.log.").unwrap();
        assert!(
            regex::Regex::new(r"^\d{4}-\d{2}-\d{2}$")
                .unwrap()
                .is_match(date),
            "{name}"
        );
        let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777;
        (std::fs::read_to_string(&files[0]).unwrap(), mode)
    }

    #[test]
    fn writes_a_private_dated_file_without_colours() {
        let (text, mode) = log_with(None, || {
            tracing::info!(run = 7, "dispatched");
            tracing::debug!("too chatty for the default level");
        });
        assert_eq!(mode, 0o600);
        assert!(text.contains("INFO"), "{text}");
        assert!(text.contains("dispatched run=7"), "{text}");
        assert!(!text.contains("too chatty"), "{text}");
        assert!(
            !text.contains('\u{1b}'),
            "ANSI escape in the log file: {text:?}"
        );
    }

    #[test]
    fn the_level_comes_from_the_spec() {
        let (text, _) = log_with(Some("debug"), || tracing::debug!("now visible"));
        assert!(text.contains("now visible"), "{text}");
        let (text, _) = log_with(Some("warn"), || tracing::info!("hidden"));
        assert!(!text.contains("hidden"), "{text}");
    }

    #[test]
    fn an_invalid_spec_falls_back_to_info_and_warns() {
        let (text, _) = log_with(Some("drover=loudest"), || {
            tracing::info!("info still logged");
            tracing::debug!("debug not logged");
        });
        assert!(text.contains("WARN"), "{text}");
        assert!(
            text.contains("DROVER_LOG=\"drover=loudest\" is not a valid filter"),
            "{text}"
        );
        assert!(text.contains("info still logged"), "{text}");
        assert!(!text.contains("debug not logged"), "{text}");
    }

    #[test]
    fn level_filter_accepts_envfilter_syntax() {
        let warns = |spec| level_filter(spec).1.is_some();
        assert!(!warns(None));
        assert!(!warns(Some("  ")));
        assert!(!warns(Some("drover=trace,info")));
        assert!(warns(Some("info,[{")));
    }

    #[test]
    fn an_existing_log_file_is_made_private() {
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join("drover.log.2020-01-01");
        std::fs::write(&old, "old\n").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        let other = tmp.path().join("notes.txt");
        std::fs::write(&other, "").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(make_log_files_private(tmp.path()).is_empty());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&old), 0o600);
        assert_eq!(mode(&other), 0o644);
    }
}
