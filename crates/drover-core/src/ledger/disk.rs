//! Words for a commit the disk refused: a read-only or full filesystem is named as such,
//! with the directory, whatever SQLite's own words were (after an I/O error ext4 remounts
//! read-only, and SQLite then says only "disk I/O error").
//!
//! What must stay true: [`describe`] is pure (the filesystem's state comes in as
//! [`DiskState`]); [`state_of`] asks the filesystem and says nothing when it cannot.

use std::path::Path;

/// What the filesystem holding the ledger says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskState {
    /// It is mounted read-only.
    pub read_only: bool,
    /// It has no block left for drover.
    pub full: bool,
}

/// The filesystem state of the directory `dir` (all false when it cannot be read).
pub fn state_of(dir: &Path) -> DiskState {
    match nix::sys::statvfs::statvfs(dir) {
        Ok(s) => DiskState {
            read_only: s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY),
            full: s.blocks_available() == 0,
        },
        Err(_) => DiskState::default(),
    }
}

/// Why a commit failed, in words: SQLite's `message`, with the disk named when it is
/// read-only or full.
pub fn describe(message: &str, dir: &Path, state: DiskState) -> String {
    let lower = message.to_lowercase();
    if state.read_only || lower.contains("readonly") || lower.contains("read-only") {
        format!(
            "the disk holding {} is read-only ({message}): nothing was recorded; make it \
             writable again (a filesystem remounted read-only after an I/O error needs a \
             check first)",
            dir.display()
        )
    } else if state.full || lower.contains("disk is full") {
        format!(
            "the disk holding {} is full ({message}): nothing was recorded; free space on it",
            dir.display()
        )
    } else {
        message.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_or_full_disk_is_named_with_its_directory() {
        let dir = Path::new("/data/drover");
        let ro = DiskState {
            read_only: true,
            full: false,
        };
        let full = DiskState {
            read_only: false,
            full: true,
        };
        let fine = DiskState::default();
        // (sqlite's words, the disk, words the answer holds)
        let cases = [
            (
                "disk I/O error",
                ro,
                "/data/drover is read-only (disk I/O error)",
            ),
            (
                "attempt to write a readonly database",
                fine,
                "/data/drover is read-only",
            ),
            ("database or disk is full", fine, "/data/drover is full"),
            (
                "disk I/O error",
                full,
                "is full (disk I/O error): nothing was recorded",
            ),
            ("database is locked", fine, "database is locked"),
        ];
        for (message, state, words) in cases {
            let said = describe(message, dir, state);
            assert!(said.contains(words), "{message}: {said}");
        }
        assert_eq!(
            describe("database is locked", dir, fine),
            "database is locked"
        );
    }

    #[test]
    fn the_state_of_a_writable_directory_is_neither() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!state_of(dir.path()).read_only);
        assert_eq!(state_of(Path::new("/no/such/dir")), DiskState::default());
    }
}
