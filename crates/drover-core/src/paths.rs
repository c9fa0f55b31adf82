//! Where drover keeps its files: the config file, the ledger, the logs, the control socket
//! and the owner lock.
//!
//! `DROVER_HOME`, when set and non-empty, holds everything (tests and side-by-side
//! installs use it); otherwise the platform directories of the `directories` crate are
//! used. Resolving paths touches nothing on disk; [`Paths::ensure_dirs`] creates the
//! private (0700) data and log directories.

use crate::error::{DroverError, ErrorCode};
use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The environment variable that puts every drover file under one directory.
pub const HOME_ENV: &str = "DROVER_HOME";

/// Every path drover reads or writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `$DROVER_HOME` when it was set; `None` for the platform directories.
    pub home: Option<PathBuf>,
    /// The user's config file (`config.toml`), merged over the embedded defaults.
    pub config_file: PathBuf,
    /// The private directory that holds the ledger, the logs, the socket and the lock.
    pub data_dir: PathBuf,
    /// Where log files go (`logs/` in the data directory).
    pub log_dir: PathBuf,
    /// The SQLite ledger (`ledger.sqlite3` in the data directory).
    pub ledger_file: PathBuf,
    /// The owner's control socket (`drover.sock` in the data directory).
    pub socket_file: PathBuf,
    /// The owner lock (`drover.lock` in the data directory), held by the process that
    /// owns the runs.
    pub lock_file: PathBuf,
}

impl Paths {
    /// `DROVER_HOME` if set and non-empty, else the platform's config and data
    /// directories for drover.
    pub fn resolve() -> Result<Paths, DroverError> {
        Paths::resolve_from(std::env::var_os(HOME_ENV))
    }

    /// As [`Paths::resolve`], with `home` the value of `DROVER_HOME` (`None`: unset).
    pub fn resolve_from(home: Option<OsString>) -> Result<Paths, DroverError> {
        if let Some(home) = home.filter(|h| !h.is_empty()) {
            let home = std::path::absolute(PathBuf::from(&home)).map_err(|e| {
                DroverError::new(
                    ErrorCode::ConfigUnreadable,
                    format!(
                        "cannot use {HOME_ENV}={}: {e}; set it to an absolute path",
                        PathBuf::from(home).display()
                    ),
                )
            })?;
            return Ok(Paths::under(&home));
        }
        let dirs = directories::ProjectDirs::from("dev", "drover", "drover").ok_or_else(|| {
            DroverError::new(
                ErrorCode::ConfigUnreadable,
                format!(
                    "cannot find your home directory to place drover's files; set HOME, or set {HOME_ENV} to a directory drover may use"
                ),
            )
        })?;
        Ok(Paths::in_dirs(
            None,
            dirs.config_dir().join("config.toml"),
            dirs.data_dir(),
        ))
    }

    /// Everything under `home`, as with `DROVER_HOME=home`.
    pub fn under(home: &Path) -> Paths {
        Paths::in_dirs(Some(home.to_path_buf()), home.join("config.toml"), home)
    }

    fn in_dirs(home: Option<PathBuf>, config_file: PathBuf, data_dir: &Path) -> Paths {
        Paths {
            home,
            config_file,
            data_dir: data_dir.to_path_buf(),
            log_dir: data_dir.join("logs"),
            ledger_file: data_dir.join("ledger.sqlite3"),
            socket_file: data_dir.join("drover.sock"),
            lock_file: data_dir.join("drover.lock"),
        }
    }

    /// Where the ssh control masters of `[hosts.<name>]` listen (`ssh/` in the data
    /// directory, mode 0700): docs/ARCHITECTURE.md §"Hosts".
    pub fn ssh_dir(&self) -> PathBuf {
        self.data_dir.join("ssh")
    }

    /// Creates the data and log directories, private to the user (mode 0700). A directory
    /// that already exists is left as it is.
    pub fn ensure_dirs(&self) -> Result<(), DroverError> {
        for dir in [&self.data_dir, &self.log_dir] {
            if dir.is_dir() {
                refuse_shared(dir)?;
                continue;
            }
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .and_then(|()| {
                    // The mode given to mkdir is filtered by the umask; make sure.
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                })
                .map_err(|e| {
                    DroverError::new(
                        ErrorCode::Internal,
                        format!(
                            "cannot create the directory {}: {e}; check its parent's permissions or set {HOME_ENV} to a writable directory",
                            dir.display()
                        ),
                    )
                })?;
        }
        Ok(())
    }
}

/// A data directory others may write to is refused: its socket or ledger could be
/// swapped under the owner.
fn refuse_shared(dir: &Path) -> Result<(), DroverError> {
    let mode = std::fs::metadata(dir)
        .map(|m| m.permissions().mode())
        .unwrap_or(0);
    if mode & 0o022 == 0 {
        return Ok(());
    }
    Err(DroverError::new(
        ErrorCode::DataDirUnsafe,
        format!(
            "{} is writable by {} (mode {:o}), so its control socket could be swapped; make it private with `chmod 700 {}` and run drover again",
            dir.display(),
            if mode & 0o002 != 0 {
                "every user"
            } else {
                "its group"
            },
            mode & 0o777,
            dir.display()
        ),
    ))
}

/// Makes every file and directory drover creates private to the user (umask 077). Call
/// once at startup, before any thread starts.
pub fn restrict_file_creation_mask() {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drover_home_holds_every_file() {
        let p = Paths::resolve_from(Some("/srv/dr".into())).unwrap();
        assert_eq!(p, Paths::under(Path::new("/srv/dr")));
        assert_eq!(p.home.as_deref(), Some(Path::new("/srv/dr")));
        assert_eq!(p.config_file, Path::new("/srv/dr/config.toml"));
        assert_eq!(p.data_dir, Path::new("/srv/dr"));
        assert_eq!(p.log_dir, Path::new("/srv/dr/logs"));
        assert_eq!(p.ledger_file, Path::new("/srv/dr/ledger.sqlite3"));
        assert_eq!(p.socket_file, Path::new("/srv/dr/drover.sock"));
        assert_eq!(p.lock_file, Path::new("/srv/dr/drover.lock"));
    }

    #[test]
    fn a_relative_drover_home_is_made_absolute() {
        let p = Paths::resolve_from(Some("rel/home".into())).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(p.config_file, cwd.join("rel/home/config.toml"));
    }

    #[test]
    fn without_drover_home_the_platform_directories_are_used() {
        for unset in [None, Some(OsString::new())] {
            let resolved = Paths::resolve_from(unset);
            let Some(dirs) = directories::ProjectDirs::from("dev", "drover", "drover") else {
                // No home directory in this environment: the refusal says what to set.
                let e = resolved.unwrap_err();
                assert_eq!(e.code, ErrorCode::ConfigUnreadable);
                assert!(e.message.contains(HOME_ENV), "{}", e.message);
                continue;
            };
            let p = resolved.unwrap();
            assert_eq!(p.home, None);
            assert_eq!(p.config_file, dirs.config_dir().join("config.toml"));
            assert_eq!(p.data_dir, dirs.data_dir());
            assert_eq!(p.log_dir, dirs.data_dir().join("logs"));
            assert_eq!(p.ledger_file, dirs.data_dir().join("ledger.sqlite3"));
            assert_eq!(p.socket_file, dirs.data_dir().join("drover.sock"));
            assert_eq!(p.lock_file, dirs.data_dir().join("drover.lock"));
        }
    }

    #[test]
    fn ensure_dirs_creates_private_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let p = Paths::under(&tmp.path().join("nested/home"));
        p.ensure_dirs().unwrap();
        for dir in [&p.data_dir, &p.log_dir] {
            let mode = std::fs::metadata(dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        }
        // idempotent
        p.ensure_dirs().unwrap();
    }

    #[test]
    fn a_data_directory_others_may_write_is_refused_with_how_to_fix_it() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir(&home).unwrap();
        for mode in [0o777, 0o775] {
            std::fs::set_permissions(&home, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = Paths::under(&home).ensure_dirs().unwrap_err();
            assert_eq!(e.code, ErrorCode::DataDirUnsafe);
            assert!(e.message.contains("chmod 700"), "{}", e.message);
        }
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
        Paths::under(&home).ensure_dirs().unwrap();
    }

    #[test]
    fn ensure_dirs_names_the_directory_it_cannot_create() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let e = Paths::under(&file.join("home")).ensure_dirs().unwrap_err();
        assert!(
            e.message.contains(&*file.join("home").to_string_lossy()),
            "{}",
            e.message
        );
    }
}
