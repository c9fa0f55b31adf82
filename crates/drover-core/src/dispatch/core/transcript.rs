//! The transcript ring of a live run: one entry per provider event worth one, bounded in
//! entries and characters (docs/ARCHITECTURE.md §"Result contract"). The ledger keeps the
//! full events; the ring is what the dashboard and `transcript --format tail` show.
//!
//! What must stay true: every entry is one line, clipped, except the agent's text, which
//! keeps its line breaks (so its lists and code blocks read as written) within
//! [`TEXT_MAX_LINES`] and [`TEXT_MAX_CHARS`]; no entry holds a control character but
//! those line breaks, so nothing a child wrote can reach a terminal as an escape.

use std::collections::VecDeque;

use crate::providers::ProviderEvent;
use crate::text::{clip_in_place, one_line};

/// Longest single line kept in the ring.
pub(crate) const LINE_MAX_CHARS: usize = 300;
/// Most characters of the agent's text kept in one entry.
pub(crate) const TEXT_MAX_CHARS: usize = 8_000;
/// Most lines of the agent's text kept in one entry.
pub(crate) const TEXT_MAX_LINES: usize = 300;

#[derive(Debug, Clone)]
pub struct TranscriptRing {
    lines: VecDeque<String>,
    chars: usize,
    max_lines: usize,
    max_chars: usize,
    /// The seq of the ledger event holding the newest line pushed: every line whose
    /// event's seq is at most this was pushed (and is held, unless evicted as older).
    last_seq: u64,
}

impl TranscriptRing {
    pub fn new(max_lines: usize, max_chars: usize) -> Self {
        TranscriptRing {
            lines: VecDeque::new(),
            chars: 0,
            max_lines: max_lines.max(1),
            max_chars: max_chars.max(1),
            last_seq: 0,
        }
    }

    /// Adds a line, held by the ledger event `seq`, evicting the oldest while either
    /// bound is exceeded.
    pub fn push(&mut self, line: String, seq: u64) {
        self.last_seq = self.last_seq.max(seq);
        self.chars += line.chars().count();
        self.lines.push_back(line);
        while self.lines.len() > self.max_lines
            || (self.chars > self.max_chars && self.lines.len() > 1)
        {
            if let Some(old) = self.lines.pop_front() {
                self.chars -= old.chars().count();
            }
        }
    }

    /// See [`TranscriptRing::push`]: a live line whose seq is at most this one is among
    /// the lines held now, or older than them.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn lines(&self) -> impl Iterator<Item = &String> {
        self.lines.iter()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    #[cfg(test)]
    pub fn chars(&self) -> usize {
        self.chars
    }
}

/// One line about a provider event, or `None` for events not worth a line.
pub fn summarize(event: &ProviderEvent) -> Option<String> {
    let mut line = match event {
        ProviderEvent::Ready { version } => format!(
            "ready{}",
            version
                .as_deref()
                .map(|v| format!(" ({v})"))
                .unwrap_or_default()
        ),
        ProviderEvent::Session { session_id, model } => format!(
            "session {session_id}{}",
            model
                .as_deref()
                .map(|m| format!(" on {m}"))
                .unwrap_or_default()
        ),
        ProviderEvent::AssistantText { text } => {
            return Some(text_entry(text));
        }
        ProviderEvent::Thinking { chars } => format!("thinking ({chars} chars)"),
        ProviderEvent::ToolStarted { name, ask, .. } => {
            format!("tool {name}: {}", one_line(&ask.summary()))
        }
        ProviderEvent::ToolFinished {
            is_error, summary, ..
        } => format!(
            "tool {}: {}",
            if *is_error { "failed" } else { "done" },
            one_line(summary)
        ),
        ProviderEvent::PermissionRequested(r) => format!(
            "asks {} {}: {}",
            match r.kind {
                crate::providers::RequestKind::Permission => "permission for",
                crate::providers::RequestKind::Question => "a question via",
            },
            r.tool,
            one_line(&r.ask.summary())
        ),
        ProviderEvent::PermissionWithdrawn { request_id } => {
            format!("withdrew request {request_id}")
        }
        ProviderEvent::Usage { .. } => return None,
        ProviderEvent::RateLimited { detail, .. } => format!("rate limited: {}", one_line(detail)),
        ProviderEvent::RateLimitCleared => "rate limit cleared".to_string(),
        ProviderEvent::TurnCompleted(end) => format!(
            "turn {}{}{}",
            if end.is_error { "failed: " } else { "done" },
            if end.is_error {
                end.subtype.as_str()
            } else {
                ""
            },
            end.total_cost_usd
                .map(|c| format!(" (session ${c:.4})"))
                .unwrap_or_default()
        ),
        ProviderEvent::Notice { text } => format!("note: {}", one_line(text)),
        ProviderEvent::SessionNotResumable { reason } => {
            format!("not resumable: {}", one_line(reason))
        }
        ProviderEvent::Exited {
            code,
            signal,
            stderr_tail,
        } => {
            let how = super::causes::exit_words(*code, *signal);
            match super::causes::last_stderr_line(stderr_tail) {
                Some(tail) => format!("process ended ({how}): {tail}"),
                None => format!("process ended ({how})"),
            }
        }
    };
    clip_in_place(&mut line, LINE_MAX_CHARS);
    Some(line)
}

/// The transcript entry of the agent's text (`text: ` and its lines, kept as
/// [`push_kept_lines`] keeps them), bounded by [`TEXT_MAX_CHARS`]. The ledger keeps no
/// copy of it: a transcript read from the ledger makes it again from the event's text.
/// Made in one buffer (it is made for every message the agent writes).
pub(crate) fn text_entry(text: &str) -> String {
    const PREFIX: &str = "text: ";
    let mut out = String::with_capacity(PREFIX.len() + text.len().min(TEXT_MAX_CHARS * 4));
    out.push_str(PREFIX);
    push_kept_lines(&mut out, text);
    crate::text::clip_in_place(&mut out, TEXT_MAX_CHARS);
    out
}

/// Appends the agent's text to `out` with its line breaks: each line without control
/// characters (a tab becomes four spaces) and trailing blanks, runs of blank lines as
/// one, at most [`TEXT_MAX_LINES`] lines ("…" where it was cut; the caller clips the
/// characters).
fn push_kept_lines(out: &mut String, text: &str) {
    let start = out.len();
    let mut line = String::new();
    let mut lines = 0;
    let mut blank_before = false;
    for raw in text.lines() {
        line.clear();
        for c in raw.chars() {
            match c {
                '\t' => line.push_str("    "),
                c if c.is_control() => {}
                c => line.push(c),
            }
        }
        let line = line.trim_end();
        let written = out.len() > start;
        if line.is_empty() {
            blank_before = written;
            continue;
        }
        if lines + usize::from(blank_before) >= TEXT_MAX_LINES
            || out.len() - start > TEXT_MAX_CHARS * 4
        {
            out.push_str("\n…");
            break;
        }
        if written {
            out.push('\n');
            if blank_before {
                out.push('\n');
                lines += 1;
            }
        }
        blank_before = false;
        out.push_str(line);
        lines += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Ask;

    #[test]
    fn the_ring_keeps_at_most_its_lines_and_chars() {
        let mut r = TranscriptRing::new(3, 1_000);
        for i in 0..10 {
            r.push(format!("line {i}"), i + 1);
        }
        assert_eq!(
            r.lines().cloned().collect::<Vec<_>>(),
            ["line 7", "line 8", "line 9"]
        );
        assert_eq!(r.last_seq(), 10);
        let mut r = TranscriptRing::new(100, 10);
        r.push("12345".into(), 1);
        r.push("67890".into(), 2);
        r.push("abc".into(), 3);
        assert_eq!(r.lines().cloned().collect::<Vec<_>>(), ["67890", "abc"]);
        assert_eq!(r.chars(), 8);
        // A single line longer than the char bound is still kept (it is the newest).
        r.push("x".repeat(50), 4);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn the_agents_text_keeps_its_line_breaks_and_nothing_else() {
        let text = ProviderEvent::AssistantText {
            text: "\n## Plan\r\n\n\n\n- one\x1b[2J\n\t- two\u{9b}31m  \n\n```rust\nfn main() {}\n```\n\n"
                .into(),
        };
        assert_eq!(
            summarize(&text).unwrap(),
            "text: ## Plan\n\n- one[2J\n    - two31m\n\n```rust\nfn main() {}\n```"
        );
        // Bounded in lines and in characters, and says where it was cut.
        let many = summarize(&ProviderEvent::AssistantText {
            text: "line\n".repeat(TEXT_MAX_LINES * 3),
        })
        .unwrap();
        assert_eq!(many.lines().count(), TEXT_MAX_LINES + 1);
        assert!(many.ends_with("\n…"));
        let wide = summarize(&ProviderEvent::AssistantText {
            text: "word ".repeat(TEXT_MAX_CHARS),
        })
        .unwrap();
        assert!(wide.chars().count() <= TEXT_MAX_CHARS);
        assert!(wide.ends_with('…'));
    }

    #[test]
    fn summaries_are_one_clipped_line() {
        let long = ProviderEvent::Notice {
            text: "a\nb ".repeat(500),
        };
        let line = summarize(&long).unwrap();
        assert!(!line.contains('\n'));
        assert!(line.chars().count() <= LINE_MAX_CHARS);
        assert_eq!(
            summarize(&ProviderEvent::ToolStarted {
                tool_use_id: "t".into(),
                name: "Bash".into(),
                ask: Ask::command("ls /tmp", None, Some("list".into())),
            })
            .unwrap(),
            "tool Bash: ls /tmp"
        );
        assert_eq!(
            summarize(&ProviderEvent::Exited {
                code: Some(3),
                signal: None,
                stderr_tail: "boom\npanic: bad".into()
            })
            .unwrap(),
            "process ended (exit code 3): panic: bad"
        );
        assert!(
            summarize(&ProviderEvent::Usage {
                model: None,
                tokens: Default::default()
            })
            .is_none()
        );
    }
}
