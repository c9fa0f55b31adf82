//! Where a simulated session is in its scenario, kept on disk across processes, as the
//! real CLI keeps its sessions: a session resumed (`--resume ID`) by a new process goes
//! on at the turn after the last one it completed, not at the start of its script.
//!
//! One small JSON file per session id in the sim's session directory
//! (`<data dir>/sim-sessions/`: drover starts the sim with `DROVER_HOME` set to its own
//! data directory, so a throwaway owner's sessions stay in its directory): the scenario
//! it plays and how many of its turns have ended with a result. It is written after each
//! result line (to a temporary file, then renamed, so a reader never sees half of it).
//!
//! What must stay true: a file is only ever read back as untrusted input — an id that is
//! not a plain name (letters, digits, `-`, `_`) names no file, a file larger than
//! [`FILE_MAX_BYTES`], unreadable, not this shape, or of another scenario is ignored (the
//! session is then taken to have had its opening turn only, as before it had a file), and
//! the turn count is bounded; nothing here can stop a turn: a file that cannot be written
//! is a note on stderr.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The largest session file read back.
pub const FILE_MAX_BYTES: u64 = 4 * 1024;
/// The longest session id that names a file.
const ID_MAX_CHARS: usize = 128;
/// More turns than any scenario has: a count past it is not believed.
const TURNS_MAX: u64 = 100_000;

/// What one session file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SessionFile {
    /// The scenario the session plays (its name or path, as given to `--scenario`).
    scenario: String,
    /// How many turns ended with a result line.
    turns_done: u64,
}

/// The directory the sim keeps its sessions in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStore {
    dir: PathBuf,
}

impl SessionStore {
    /// The sessions of the sim under drover's data directory `data_dir`.
    pub fn in_data_dir(data_dir: &Path) -> SessionStore {
        SessionStore {
            dir: data_dir.join("sim-sessions"),
        }
    }

    /// The transcript of session `id` (in Claude Code's shape, one JSON record a line),
    /// if the id is a plain name: its interactive mode appends to it, as the real CLI's
    /// does to its own.
    pub fn transcript_of(&self, id: &str) -> Option<PathBuf> {
        self.file_of(id).map(|p| p.with_extension("jsonl"))
    }

    /// The file of session `id`, if the id is a plain name.
    fn file_of(&self, id: &str) -> Option<PathBuf> {
        let plain = !id.is_empty()
            && id.chars().count() <= ID_MAX_CHARS
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        plain.then(|| self.dir.join(format!("{id}.json")))
    }

    /// How many turns session `id` of `scenario` completed, if its file says so.
    pub fn turns_done(&self, id: &str, scenario: &str) -> Option<usize> {
        let path = self.file_of(id)?;
        let mut text = String::new();
        std::fs::File::open(&path)
            .ok()?
            .take(FILE_MAX_BYTES + 1)
            .read_to_string(&mut text)
            .ok()?;
        if text.len() as u64 > FILE_MAX_BYTES {
            return None;
        }
        let file: SessionFile = serde_json::from_str(&text).ok()?;
        if file.scenario != scenario || file.turns_done > TURNS_MAX {
            return None;
        }
        usize::try_from(file.turns_done).ok()
    }

    /// Records that session `id` of `scenario` has completed `turns_done` turns.
    pub fn record(&self, id: &str, scenario: &str, turns_done: usize) -> Result<(), String> {
        let Some(path) = self.file_of(id) else {
            return Err(format!(
                "session id `{}` is not a plain name: its place in the scenario is not kept",
                crate::text::clip(id, 40)
            ));
        };
        let body = serde_json::to_string(&SessionFile {
            scenario: scenario.to_string(),
            turns_done: turns_done as u64,
        })
        .map_err(|e| e.to_string())?;
        let write = || -> std::io::Result<()> {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)?;
            let temporary = path.with_extension(format!("json.{}.tmp", std::process::id()));
            std::fs::write(&temporary, body)?;
            std::fs::rename(&temporary, &path)
        };
        write().map_err(|e| format!("cannot keep the session in {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_session_is_read_back_and_bad_files_are_ignored() {
        let dir = tempfile::tempdir().expect("a dir");
        let store = SessionStore::in_data_dir(dir.path());
        assert_eq!(store.turns_done("s-1", "multi-turn"), None, "no file yet");
        store.record("s-1", "multi-turn", 2).expect("recorded");
        assert_eq!(store.turns_done("s-1", "multi-turn"), Some(2));
        store
            .record("s-1", "multi-turn", 3)
            .expect("recorded again");
        assert_eq!(store.turns_done("s-1", "multi-turn"), Some(3));
        assert_eq!(
            store.turns_done("s-1", "quick-success"),
            None,
            "another scenario's place is not this one's"
        );
        let path = dir.path().join("sim-sessions/s-1.json");
        for bad in [
            "not json".to_string(),
            r#"{"scenario":"multi-turn","turns_done":-1}"#.to_string(),
            r#"{"scenario":"multi-turn","turns_done":100001}"#.to_string(),
            format!(
                r#"{{"scenario":"multi-turn","turns_done":1,"pad":"{}"}}"#,
                "x".repeat(5000)
            ),
        ] {
            std::fs::write(&path, &bad).expect("written");
            assert_eq!(store.turns_done("s-1", "multi-turn"), None, "{bad:.60}");
        }
        for id in ["../s-1", "a/b", "", "s 1", &"x".repeat(129)] {
            assert_eq!(store.turns_done(id, "multi-turn"), None, "{id}");
            assert!(store.record(id, "multi-turn", 1).is_err(), "{id}");
        }
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sim-sessions"))
            .expect("the sessions dir")
            .map(|e| e.expect("an entry").file_name())
            .collect();
        assert_eq!(
            names,
            ["s-1.json"],
            "nothing else written, no temporary left"
        );
    }
}
