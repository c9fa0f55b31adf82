//! The parsed `## Result` block and its status vocabulary.
//!
//! Owns the shape the dispatcher and the ledger keep for a turn's result. What must stay
//! true: every string is one line and within its cap ([`TEXT_MAX_CHARS`] for summary and
//! question, [`ITEM_MAX_CHARS`] per list item and for the raw status), and no list holds
//! more than [`LIST_MAX_ITEMS`] items.

use serde::{Deserialize, Serialize};

/// The longest summary or question kept, in characters.
pub const TEXT_MAX_CHARS: usize = 2_000;
/// The most items kept per list.
pub const LIST_MAX_ITEMS: usize = 50;
/// The longest list item (and raw status) kept, in characters.
pub const ITEM_MAX_CHARS: usize = 500;

/// What the worker reported at the end of its answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResultBlock {
    /// Whether a result heading was found at all (outside code blocks).
    pub found: bool,
    /// The status, when its value was one of the three words.
    pub status: Option<ResultStatus>,
    /// The status value as written, so an unreadable one can be shown.
    pub raw_status: Option<String>,
    /// The summary line, when the block had one.
    pub summary: Option<String>,
    /// What the worker changed, one item per line.
    pub changes: Vec<String>,
    /// The files it touched.
    pub files: Vec<String>,
    /// What it suggests doing next.
    pub follow_ups: Vec<String>,
    /// What the worker needs answered (with `needs_input`).
    pub question: Option<String>,
}

/// How the worker says the task went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    /// The task is done.
    Done,
    /// The worker could not go on (something is missing or failing).
    Blocked,
    /// The worker needs an answer from the user to go on (see `question`).
    NeedsInput,
}

impl ResultStatus {
    /// The status as the block writes it (`done`, `blocked`, `needs_input`).
    pub fn as_str(self) -> &'static str {
        match self {
            ResultStatus::Done => "done",
            ResultStatus::Blocked => "blocked",
            ResultStatus::NeedsInput => "needs_input",
        }
    }

    /// The status a value names, forgiving case, punctuation and separators (`Done.`,
    /// `NEEDS-INPUT`, `needs input`, `**blocked**: no key`): the first word decides, or
    /// the first two for "needs input". A value offering a choice (`done | blocked`, the
    /// template echoed back) names none.
    pub fn from_word(value: &str) -> Option<ResultStatus> {
        if value.contains('|') {
            return None;
        }
        let mut words = value
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty());
        let first = words.next()?.to_lowercase();
        match first.as_str() {
            "done" => Some(ResultStatus::Done),
            "blocked" => Some(ResultStatus::Blocked),
            "needsinput" => Some(ResultStatus::NeedsInput),
            "needs" => words
                .next()
                .filter(|w| w.eq_ignore_ascii_case("input"))
                .map(|_| ResultStatus::NeedsInput),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_are_read_forgivingly() {
        let cases: &[(&str, Option<ResultStatus>)] = &[
            ("done", Some(ResultStatus::Done)),
            ("Done.", Some(ResultStatus::Done)),
            ("DONE", Some(ResultStatus::Done)),
            ("**done**", Some(ResultStatus::Done)),
            ("`done`", Some(ResultStatus::Done)),
            ("[done]", Some(ResultStatus::Done)),
            ("done — all tests pass", Some(ResultStatus::Done)),
            ("blocked", Some(ResultStatus::Blocked)),
            ("Blocked: missing API key", Some(ResultStatus::Blocked)),
            ("needs_input", Some(ResultStatus::NeedsInput)),
            ("NEEDS_INPUT", Some(ResultStatus::NeedsInput)),
            ("needs input", Some(ResultStatus::NeedsInput)),
            ("needs-input", Some(ResultStatus::NeedsInput)),
            ("Needs Input.", Some(ResultStatus::NeedsInput)),
            ("needsinput", Some(ResultStatus::NeedsInput)),
            ("needs", None),
            ("needs review", None),
            ("not done", None),
            ("finished", None),
            ("done | blocked | needs_input", None),
            ("", None),
            ("...", None),
        ];
        for &(value, want) in cases {
            assert_eq!(ResultStatus::from_word(value), want, "{value:?}");
        }
    }

    #[test]
    fn status_serializes_in_snake_case() {
        for s in [
            ResultStatus::Done,
            ResultStatus::Blocked,
            ResultStatus::NeedsInput,
        ] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(ResultStatus::from_word(s.as_str()), Some(s));
        }
    }

    #[test]
    fn a_block_deserializes_from_partial_json() {
        let block: ResultBlock = serde_json::from_str(r#"{"found":true,"status":"done"}"#).unwrap();
        assert!(block.found);
        assert_eq!(block.status, Some(ResultStatus::Done));
        assert!(block.files.is_empty());
    }
}
