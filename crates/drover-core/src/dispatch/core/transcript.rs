//! The transcript ring of a live run: one-line summaries of its provider events, bounded
//! in lines and characters (docs/ARCHITECTURE.md §"Result contract"). The ledger keeps the
//! full events; the ring is what the dashboard and `transcript --format tail` show.

use std::collections::VecDeque;

use crate::providers::ProviderEvent;
use crate::text::{clip, one_line};

/// Longest single line kept in the ring.
pub(crate) const LINE_MAX_CHARS: usize = 300;

#[derive(Debug, Clone)]
pub struct TranscriptRing {
    lines: VecDeque<String>,
    chars: usize,
    max_lines: usize,
    max_chars: usize,
}

impl TranscriptRing {
    pub fn new(max_lines: usize, max_chars: usize) -> Self {
        TranscriptRing {
            lines: VecDeque::new(),
            chars: 0,
            max_lines: max_lines.max(1),
            max_chars: max_chars.max(1),
        }
    }

    /// Adds a line, evicting the oldest while either bound is exceeded.
    pub fn push(&mut self, line: String) {
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
    let line = match event {
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
        ProviderEvent::AssistantText { text } => format!("text: {}", one_line(text)),
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
    Some(clip(&line, LINE_MAX_CHARS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Ask;

    #[test]
    fn the_ring_keeps_at_most_its_lines_and_chars() {
        let mut r = TranscriptRing::new(3, 1_000);
        for i in 0..10 {
            r.push(format!("line {i}"));
        }
        assert_eq!(
            r.lines().cloned().collect::<Vec<_>>(),
            ["line 7", "line 8", "line 9"]
        );
        let mut r = TranscriptRing::new(100, 10);
        r.push("12345".into());
        r.push("67890".into());
        r.push("abc".into());
        assert_eq!(r.lines().cloned().collect::<Vec<_>>(), ["67890", "abc"]);
        assert_eq!(r.chars(), 8);
        // A single line longer than the char bound is still kept (it is the newest).
        r.push("x".repeat(50));
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn summaries_are_one_clipped_line() {
        let long = ProviderEvent::AssistantText {
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
