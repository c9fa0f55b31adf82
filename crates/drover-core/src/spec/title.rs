//! The run's title: what the trays show on one line.
//!
//! Owns title derivation. What must stay true: a title is one line, trimmed, with runs
//! of whitespace collapsed, at most [`TITLE_MAX_CHARS`] characters (cut on a char
//! boundary and ending in "…" when cut), and never empty for a task that has visible text.

use crate::text::{clip, has_visible_text, one_line};

/// The longest title, in characters.
pub const TITLE_MAX_CHARS: usize = 80;

/// The given title when it has visible text, else the first line of the task that does.
pub fn derive_title(given: Option<&str>, task: &str) -> String {
    let source = given
        .filter(|t| has_visible_text(t))
        .or_else(|| task.lines().find(|line| has_visible_text(line)))
        .unwrap_or_default();
    clip(&one_line(source), TITLE_MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_derived_and_fitted_to_one_short_line() {
        let long_line = "word ".repeat(40);
        let long_title = format!("{}…", "word ".repeat(16).trim_end());
        let multibyte = "é".repeat(100);
        let multibyte_title = format!("{}…", "é".repeat(79));
        let eighty = "a".repeat(80);
        let cases: Vec<(&str, Option<&str>, &str, String)> = vec![
            (
                "given title wins",
                Some("Fix login"),
                "do things",
                "Fix login".into(),
            ),
            (
                "given title is trimmed and collapsed",
                Some("  Fix \t the\n login  "),
                "x",
                "Fix the login".into(),
            ),
            (
                "blank title falls back to the task",
                Some(" \n "),
                "Fix it",
                "Fix it".into(),
            ),
            (
                "first line of the task",
                None,
                "Fix the bug\nthen test",
                "Fix the bug".into(),
            ),
            (
                "leading blank lines are skipped",
                None,
                "\n   \n\t\n  Refactor   the parser \r\nmore",
                "Refactor the parser".into(),
            ),
            (
                "long first line is cut inside 80",
                None,
                &long_line,
                long_title.clone(),
            ),
            (
                "given title too long",
                Some(&long_line),
                "short task",
                long_title,
            ),
            (
                "multibyte cut on a char boundary",
                None,
                &multibyte,
                multibyte_title,
            ),
            ("exactly 80 is kept", None, &eighty, eighty.clone()),
            (
                "control characters never reach the title",
                None,
                "\u{1b}[2Jclear\u{7}",
                "[2Jclear".into(),
            ),
        ];
        for (name, given, task, want) in cases {
            let got = derive_title(given, task);
            assert_eq!(got, want, "{name}");
            assert!(got.chars().count() <= TITLE_MAX_CHARS, "{name}");
            assert!(!got.contains('\n'), "{name}");
        }
    }
}
