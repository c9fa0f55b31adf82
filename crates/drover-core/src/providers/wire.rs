//! Small readers of provider JSON shared by the adapters' pure protocol modules: fields
//! that may be missing or of the wrong type (untrusted input never panics), provider
//! text folded and clipped for one-line notices, and the one-line summary of a tool's
//! output.
//!
//! What must stay true: nothing here panics on any input; a clipped quote is one line
//! and ends in `…` when something was cut (the one clip of [`crate::text`]).

use serde_json::{Map, Value};

use crate::text;

/// A string field; `None` when missing or not a string.
pub fn str_at<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// A non-negative integer field (a float with no fraction counts).
pub fn u64_at(map: &Map<String, Value>, key: &str) -> Option<u64> {
    let value = map.get(key)?;
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}

/// A number field; `None` when missing or not a number.
pub fn f64_at(map: &Map<String, Value>, key: &str) -> Option<f64> {
    map.get(key).and_then(Value::as_f64)
}

/// `s` on one line (runs of whitespace and control characters become one space), cut
/// to at most `max` characters with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    text::clip(&text::one_line(s), max)
}

/// One line about a tool's output: its first non-empty line, clipped to `max`
/// characters, and how many lines more (`total 2 (+2 lines)`); `(no output)` when it
/// has no visible line.
pub fn first_line_summary(output: &str, max: usize) -> String {
    let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else {
        return "(no output)".to_string();
    };
    let more = lines.count();
    let first = clip(first, max);
    match more {
        0 => first,
        1 => format!("{first} (+1 line)"),
        n => format!("{first} (+{n} lines)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_one_line_and_ends_in_an_ellipsis_when_cut() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdef", 3), "ab…");
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("x\u{1b}[31my", 20), "x [31my");
    }

    #[test]
    fn first_line_summaries() {
        let table = [
            ("", 10, "(no output)"),
            ("  \n\n", 10, "(no output)"),
            ("one", 10, "one"),
            ("\n\none\ntwo", 10, "one (+1 line)"),
            ("total 2\nREADME.md\nsrc\n", 10, "total 2 (+2 lines)"),
            ("abcdef\nx", 3, "ab… (+1 line)"),
        ];
        for (output, max, expected) in table {
            assert_eq!(first_line_summary(output, max), expected, "{output:?}");
        }
    }
}
