//! The simulated agent's interactive mode (`sim-agent --interactive --resume ID`): what a
//! run taken over in the sim's "own interface" talks to.
//!
//! It reads the user's lines from the terminal and answers each one: `write PATH WORDS…`
//! writes WORDS to PATH in the working directory (through [`super::act`], so nothing is
//! written outside it), anything else is echoed back. Each exchange is appended to the
//! session's transcript in Claude Code's shape (a `user` record, then an `assistant`
//! record with its model and usage), as the real CLI appends to its own; `/exit` or the
//! end of input leaves. What must stay true: the transcript is written before the answer
//! is shown, so what the user saw is on disk when they leave; a record that cannot be
//! written is said on stderr, never a crash.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::scenario::Usage;

/// The longest line read as one prompt.
const LINE_MAX_CHARS: usize = 10_000;

/// What the interactive mode needs.
#[derive(Debug, Clone)]
pub struct Interactive {
    /// The session taken over.
    pub session: String,
    /// Its transcript file.
    pub transcript: PathBuf,
    /// The model named in its records.
    pub model: String,
    /// The working directory (the run's).
    pub cwd: PathBuf,
}

/// Plays the interactive mode on `input` and `out`; returns the exit code.
pub async fn run(
    options: Interactive,
    input: impl AsyncBufRead + Unpin,
    out: &mut impl Write,
) -> i32 {
    let _ = writeln!(
        out,
        "drover sim · session {} · type a prompt; /exit leaves",
        options.session
    );
    let mut lines = input.lines();
    let mut count = 0u64;
    loop {
        let _ = write!(out, "> ");
        let _ = out.flush();
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) | Err(_) => break,
        };
        let prompt = crate::text::clip(line.trim(), LINE_MAX_CHARS);
        if prompt == "/exit" {
            break;
        }
        if prompt.is_empty() {
            continue;
        }
        count += 1;
        let answer = answer(&prompt, &options.cwd).await;
        let usage = Usage {
            input_tokens: 1_000 + prompt.chars().count().div_ceil(4) as u64,
            ..Usage::estimated_for(&answer)
        };
        if let Err(e) = record(&options, count, &prompt, &answer, usage) {
            let _ = writeln!(std::io::stderr(), "drover sim-agent: {e}");
        }
        let _ = writeln!(out, "{answer}");
    }
    0
}

/// The answer to one prompt.
async fn answer(prompt: &str, cwd: &Path) -> String {
    let Some(rest) = prompt.strip_prefix("write ") else {
        return format!("Heard you: {prompt}");
    };
    let (path, words) = rest.trim().split_once(' ').unwrap_or((rest.trim(), ""));
    let input = json!({"file_path": path, "content": format!("{words}\n")});
    match super::act::perform("Write", &input, false, cwd, "").await {
        Some(acted) if acted.is_error => format!("Could not write {path}: {}", acted.output),
        _ => format!("Wrote {path}."),
    }
}

/// An RFC 3339 stamp of now, in ms.
fn stamp() -> String {
    chrono::DateTime::from_timestamp_millis(crate::clock::now_millis())
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Appends one exchange to the transcript.
fn record(
    options: &Interactive,
    count: u64,
    prompt: &str,
    answer: &str,
    usage: Usage,
) -> Result<(), String> {
    let user = json!({
        "type": "user",
        "sessionId": options.session,
        "cwd": options.cwd.display().to_string(),
        "entrypoint": "cli",
        "timestamp": stamp(),
        "message": {"role": "user", "content": prompt},
    });
    let assistant = json!({
        "type": "assistant",
        "sessionId": options.session,
        "timestamp": stamp(),
        "message": {
            "id": format!("msg_sim_{}_{count}", crate::clock::now_millis()),
            "role": "assistant",
            "model": options.model,
            "content": [{"type": "text", "text": answer}],
            "usage": usage,
        },
    });
    let write = || -> std::io::Result<()> {
        if let Some(dir) = options.transcript.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&options.transcript)?;
        file.write_all(format!("{user}\n{assistant}\n").as_bytes())
    };
    write().map_err(|e| {
        format!(
            "cannot append to the transcript {}: {e}",
            options.transcript.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::interactive::{Record, read};

    #[tokio::test]
    async fn each_line_is_answered_and_recorded_as_claude_records_it() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let store = super::super::session::SessionStore::in_data_dir(home.path());
        let options = Interactive {
            session: "s-1".into(),
            transcript: store.transcript_of("s-1").unwrap(),
            model: "claude-sonnet-4-5".into(),
            cwd: work.path().to_path_buf(),
        };
        let input: &[u8] =
            b"hello there\n\nwrite notes.txt kept words\nwrite ../out.txt no\n/exit\nnot read\n";
        let mut out = Vec::new();
        assert_eq!(run(options, input, &mut out).await, 0);
        let shown = String::from_utf8(out).unwrap();
        assert!(shown.contains("Heard you: hello there"), "{shown}");
        assert!(shown.contains("Wrote notes.txt."), "{shown}");
        assert!(shown.contains("Could not write ../out.txt"), "{shown}");
        assert!(!shown.contains("not read"));
        assert_eq!(
            std::fs::read_to_string(work.path().join("notes.txt")).unwrap(),
            "kept words\n"
        );
        let env = std::collections::BTreeMap::from([(
            crate::paths::HOME_ENV.to_string(),
            home.path().display().to_string(),
        )]);
        let turns = read(Record::Sim, &env, "s-1", 0).unwrap();
        let prompts: Vec<_> = turns.iter().map(|t| t.prompt.as_str()).collect();
        assert_eq!(
            prompts,
            [
                "hello there",
                "write notes.txt kept words",
                "write ../out.txt no"
            ]
        );
        assert_eq!(turns[0].text, "Heard you: hello there");
        assert_eq!(turns[0].model.as_deref(), Some("claude-sonnet-4-5"));
        assert!(turns[0].tokens.input > 1_000 && turns[0].tokens.output > 0);
    }
}
