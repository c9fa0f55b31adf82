//! Just enough Markdown to find blocks in a worker's answer: lines, code fences,
//! headings, horizontal rules and bullets.
//!
//! Owns line classification. What must stay true: every function is a single forward
//! pass over its line (hostile lines such as a megabyte of `#` cost their length, once),
//! slices are cut only at ASCII bytes so they stay on char boundaries, and nothing panics.

/// One line of the text: where it starts, where the next one starts, and its content
/// without the line ending (`\n` or `\r\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub start: usize,
    pub next: usize,
    pub text: &'a str,
}

/// The lines of `text` with their byte offsets.
pub fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    text.split_inclusive('\n')
        .scan(0, |offset: &mut usize, raw: &str| {
            let start = *offset;
            *offset += raw.len();
            let line = raw.strip_suffix('\n').unwrap_or(raw);
            let line = line.strip_suffix('\r').unwrap_or(line);
            Some(Line {
                start,
                next: *offset,
                text: line,
            })
        })
}

/// An open code fence: its marker (`` ` `` or `~`) and how many of them opened it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fence {
    marker: u8,
    len: usize,
}

/// Where a line stands with respect to code fences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceRole<'a> {
    /// Ordinary text, outside any fence.
    Outside,
    /// Opens a fence; `info` is what follows the marker (`json`, `rust`, or empty).
    Open { info: &'a str },
    /// Inside a fence.
    Inside,
    /// Closes the open fence.
    Close,
}

/// Follows code fences line by line. A fence that is never closed runs to the end of the
/// text, as in CommonMark.
#[derive(Debug, Clone, Default)]
pub struct FenceTracker {
    open: Option<Fence>,
}

impl FenceTracker {
    pub fn step<'a>(&mut self, line: &'a str) -> FenceRole<'a> {
        match self.open {
            Some(fence) => {
                let t = line.trim();
                if t.len() >= fence.len && t.bytes().all(|b| b == fence.marker) {
                    self.open = None;
                    FenceRole::Close
                } else {
                    FenceRole::Inside
                }
            }
            None => match opening_fence(line) {
                Some((fence, info)) => {
                    self.open = Some(fence);
                    FenceRole::Open { info }
                }
                None => FenceRole::Outside,
            },
        }
    }
}

fn opening_fence(line: &str) -> Option<(Fence, &str)> {
    let t = line.trim_start();
    let marker = *t.as_bytes().first()?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let len = t.bytes().take_while(|&b| b == marker).count();
    if len < 3 {
        return None;
    }
    let info = t[len..].trim();
    // "```inline``` code" is not a fence: a backtick fence's info has no backticks.
    if marker == b'`' && info.contains('`') {
        return None;
    }
    Some((Fence { marker, len }, info))
}

/// An ATX heading (`## Text ##`): its level (1–6) and its text.
pub fn atx_heading(line: &str) -> Option<(usize, &str)> {
    let t = line.trim_start();
    // Counting at most seven keeps a line of a million `#` cheap.
    let level = t.bytes().take(7).take_while(|&b| b == b'#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &t[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    // An optional closing sequence of `#`, set off by a space ("## C#" keeps its `#`).
    let without_closing = text.trim_end_matches('#');
    let text = if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
        without_closing.trim_end()
    } else {
        text
    };
    Some((level, text))
}

/// The level a bold pseudo-heading (`**Result**`) counts as: below every real heading, so
/// any heading ends its block.
pub const BOLD_HEADING_LEVEL: usize = 7;

/// The level of a result heading: `#` to `###` followed by "Result" (any case, optional
/// colon, optionally bold), or a line that is only a bold "Result".
pub fn result_heading(line: &str) -> Option<usize> {
    if let Some((level, text)) = atx_heading(line) {
        return (level <= 3 && is_result_word(text)).then_some(level);
    }
    let t = line.trim();
    let bold = (t.starts_with("**") && t.len() > 4) || (t.starts_with("__") && t.len() > 4);
    (bold && is_result_word(t)).then_some(BOLD_HEADING_LEVEL)
}

fn is_result_word(text: &str) -> bool {
    let emphasis = |c: char| c == '*' || c == '_';
    let text = text.trim().trim_matches(emphasis).trim();
    let text = text.strip_suffix(':').unwrap_or(text);
    text.trim()
        .trim_matches(emphasis)
        .trim()
        .eq_ignore_ascii_case("result")
}

/// A horizontal rule: three or more `-`, `*` or `_`, optionally spaced, nothing else.
pub fn is_rule(line: &str) -> bool {
    let t = line.trim();
    let Some(marker) = t.chars().next() else {
        return false;
    };
    if !matches!(marker, '-' | '*' | '_') {
        return false;
    }
    let mut count = 0;
    for c in t.chars() {
        if c == marker {
            count += 1;
        } else if c != ' ' && c != '\t' {
            return false;
        }
    }
    count >= 3
}

/// The text after a list marker (`-`, `*`, `+`, `•`, `1.`, `1)`), when the line has one.
pub fn strip_bullet(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let after = if let Some(rest) = t.strip_prefix(['-', '*', '+', '•']) {
        rest
    } else {
        let digits = t.bytes().take(10).take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        t[digits..].strip_prefix(['.', ')'])?
    };
    if after.is_empty() {
        return Some(after);
    }
    after.starts_with([' ', '\t']).then(|| after.trim_start())
}

/// Leading whitespace, in bytes.
pub fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_offsets_and_drop_crlf() {
        let text = "a\r\nbc\n\nd";
        let got: Vec<(usize, usize, &str)> =
            lines(text).map(|l| (l.start, l.next, l.text)).collect();
        assert_eq!(got, [(0, 3, "a"), (3, 6, "bc"), (6, 7, ""), (7, 8, "d")]);
        assert_eq!(lines("").count(), 0);
    }

    #[test]
    fn fences_open_and_close_with_matching_markers() {
        let mut t = FenceTracker::default();
        let roles: Vec<FenceRole> = [
            "text",
            "```json",
            "~~~",
            "``",
            "```",
            "after",
            "~~~~ rust",
            "```",
            "~~~",
            "~~~~",
            "```inline``` is not a fence",
            "  ```",
            "unterminated",
        ]
        .into_iter()
        .map(|l| t.step(l))
        .collect();
        use FenceRole::*;
        assert_eq!(
            roles,
            [
                Outside,
                Open { info: "json" },
                Inside,
                Inside,
                Close,
                Outside,
                Open { info: "rust" },
                Inside,
                Inside,
                Close,
                Outside,
                Open { info: "" },
                Inside,
            ]
        );
    }

    #[test]
    fn headings_have_a_level_and_text() {
        let cases: &[(&str, Option<(usize, &str)>)] = &[
            ("# Title", Some((1, "Title"))),
            ("## Result", Some((2, "Result"))),
            ("  ### Result ###", Some((3, "Result"))),
            ("## C#", Some((2, "C#"))),
            ("######", Some((6, ""))),
            ("#######", None),
            ("#hashtag", None),
            ("text # not", None),
            ("", None),
        ];
        for &(line, want) in cases {
            assert_eq!(atx_heading(line), want, "{line:?}");
        }
        let huge = "#".repeat(1_000_000);
        assert_eq!(atx_heading(&huge), None);
    }

    #[test]
    fn result_headings_are_levels_one_to_three_or_bold() {
        let cases: &[(&str, Option<usize>)] = &[
            ("## Result", Some(2)),
            ("# result", Some(1)),
            ("### RESULT:", Some(3)),
            ("## Result ##", Some(2)),
            ("## **Result**", Some(2)),
            ("#### Result", None),
            ("## Results", None),
            ("## Result of the run", None),
            ("**Result**", Some(BOLD_HEADING_LEVEL)),
            ("**Result:**", Some(BOLD_HEADING_LEVEL)),
            ("**Result**:", Some(BOLD_HEADING_LEVEL)),
            ("__Result__", Some(BOLD_HEADING_LEVEL)),
            ("Result:", None),
            ("Result", None),
            ("****", None),
            ("**", None),
        ];
        for &(line, want) in cases {
            assert_eq!(result_heading(line), want, "{line:?}");
        }
    }

    #[test]
    fn rules_are_three_or_more_of_one_marker() {
        for line in ["---", "***", "___", "- - -", " ----- ", "* * * *"] {
            assert!(is_rule(line), "{line:?}");
        }
        for line in ["--", "-", "-*-", "**status**", "- item", "", "—"] {
            assert!(!is_rule(line), "{line:?}");
        }
    }

    #[test]
    fn bullets_are_stripped_to_their_text() {
        let cases: &[(&str, Option<&str>)] = &[
            ("- a", Some("a")),
            ("  * b", Some("b")),
            ("+ c", Some("c")),
            ("• d", Some("d")),
            ("1. e", Some("e")),
            ("12) f", Some("f")),
            ("-", Some("")),
            ("-x", None),
            ("**status**: done", None),
            ("1.5 million", None),
            ("1234567890. too long", None),
            ("plain", None),
        ];
        for &(line, want) in cases {
            assert_eq!(strip_bullet(line), want, "{line:?}");
        }
    }
}
