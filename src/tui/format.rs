//! Words and numbers as the dashboard shows them: durations, countdowns, the live line,
//! state glyphs, and text from providers made safe for the screen. Money reads as
//! [`crate::money::usd`] and one-line text as [`crate::spec::text`] everywhere.
//!
//! Pure functions of their inputs (`now` is passed in). What must stay true: text that
//! came from a provider or a user never reaches the screen with control characters in it
//! (an escape sequence in a transcript must not drive the terminal).

use ratatui::style::Style;
use ratatui::text::Span;
use serde_json::Value;

use super::theme;
use crate::UnixMillis;
use crate::dispatch::api::RunSummary;
use crate::live_state::{LiveState, LiveStateKind};
use crate::providers::Ask;
use crate::run_state::RunState;
use crate::spec::text::{clip, one_line};

/// A compact duration: `0s`, `42s`, `3m05s`, `1h02m`, `2d03h`.
pub fn duration(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m{:02}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3_600, (s % 3_600) / 60),
        s => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3_600),
    }
}

/// Time to a deadline: `9m41s left`, or `overdue 12s` once it has passed.
pub fn countdown(bound: UnixMillis, now: UnixMillis) -> String {
    if bound >= now {
        // Round up, so a deadline 0.4 s away still says 1s and "0s left" means now.
        format!("{} left", duration(bound - now + 999))
    } else {
        format!("overdue {}", duration(now - bound))
    }
}

/// Multi-line text, safe to draw: split into lines, tabs expanded, other control
/// characters replaced by spaces.
pub fn safe_lines(text: &str) -> Vec<String> {
    text.split('\n')
        .map(|line| {
            line.chars()
                .map(|c| match c {
                    '\t' => "    ".to_string(),
                    c if c.is_control() => " ".to_string(),
                    c => c.to_string(),
                })
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

/// The live line of a run: the state's words, its detail, time in the state and the
/// countdown to its bound, as styled spans.
pub fn live_line(live: &LiveState, now: UnixMillis) -> Vec<Span<'static>> {
    let style = match live.state {
        LiveStateKind::Working | LiveStateKind::WrappingUp => theme::active(),
        LiveStateKind::WaitingProvider
        | LiveStateKind::WaitingDeploy
        | LiveStateKind::WaitingRepository
        | LiveStateKind::FallingBack => theme::warning(),
        LiveStateKind::Ended => theme::dim(),
        LiveStateKind::Admitted | LiveStateKind::Preparing => theme::text(),
    };
    let detail = live.detail.as_deref().filter(|d| !d.trim().is_empty());
    // A hibernated run (its CLI shut down, its session kept) reads "idle · hibernated",
    // not "working": nothing of it is working.
    let asleep = detail.filter(|d| {
        live.state == LiveStateKind::Working
            && (d.starts_with(crate::dispatch::core::HIBERNATED_DETAIL)
                || d.starts_with(crate::dispatch::core::HIBERNATING_DETAIL))
    });
    let mut spans = match asleep {
        Some(words) => vec![Span::styled(one_line(words), theme::dim())],
        None => vec![Span::styled(live.state.human(), style)],
    };
    if let Some(cause) = live.cause {
        spans.push(Span::styled(format!(" ({})", cause.as_str()), theme::dim()));
    }
    if let Some(detail) = detail.filter(|_| asleep.is_none()) {
        spans.push(Span::styled(": ", style));
        spans.push(Span::raw(one_line(detail)));
    }
    if !live.state.is_terminal() {
        spans.push(Span::styled(
            format!(" · {}", duration(now - live.since)),
            theme::dim(),
        ));
        if let Some(bound) = live.bound {
            let overdue = bound < now;
            spans.push(Span::styled(
                format!(" · {}", countdown(bound, now)),
                if overdue {
                    theme::error()
                } else {
                    theme::dim()
                },
            ));
        }
    }
    spans
}

/// The live line fitted to `width` columns: the detail is shortened first, then the time
/// in state is dropped, so the state's words and the countdown stay visible.
pub fn live_line_fit(live: &LiveState, now: UnixMillis, width: usize) -> Vec<Span<'static>> {
    let spans = live_line(live, now);
    let total: usize = spans.iter().map(Span::width).sum();
    if total <= width {
        return spans;
    }
    let detail_at = spans.iter().position(|s| s.content == ": ");
    let Some(at) = detail_at else {
        return spans;
    };
    let mut spans = spans;
    let over = total - width;
    let detail_w = spans[at + 1].width();
    // Shorten the detail, unless too little of it would be left to read.
    if detail_w >= over + 8 {
        let keep = detail_w - over;
        let clipped = clip(&spans[at + 1].content, keep);
        spans[at + 1] = Span::styled(clipped, spans[at + 1].style);
        return spans;
    }
    // Not enough to cut from the detail: drop it, then the time in the state if needed.
    spans.drain(at..=at + 1);
    let total: usize = spans.iter().map(Span::width).sum();
    if total > width && !live.state.is_terminal() && spans.len() > 2 {
        let time_at = spans.len() - 1 - usize::from(live.bound.is_some());
        if spans[time_at].content.starts_with(" · ") {
            spans.remove(time_at);
        }
    }
    spans
}

/// The live line as plain text (for tests and narrow places).
pub fn live_text(live: &LiveState, now: UnixMillis) -> String {
    live_line(live, now)
        .iter()
        .map(|s| s.content.as_ref())
        .collect()
}

/// The glyph at the start of a run's row and its style.
pub fn glyph(run: &RunSummary) -> (&'static str, Style) {
    if run.head.state.is_active() && (run.pending > 0 || run.needs_input) {
        return ("!", theme::attention());
    }
    match run.head.state {
        RunState::Queued => ("…", theme::dim()),
        RunState::AwaitingRoute => ("?", theme::attention()),
        RunState::Starting => ("◔", theme::active()),
        RunState::Running if run.head.stalled => ("◌", theme::warning()),
        RunState::Running => ("●", theme::active()),
        RunState::AwaitingPermission => ("!", theme::attention()),
        RunState::Idle => ("○", theme::text()),
        RunState::Completed => ("✓", theme::success()),
        RunState::Failed => ("✗", theme::error()),
        RunState::Stopped => ("■", theme::dim()),
        RunState::Interrupted => ("↯", theme::warning()),
    }
}

/// The run state in words, with the end reason: `completed (max_turns)`.
pub fn state_words(state: RunState, reason: Option<&str>) -> String {
    let words = state.as_str().replace('_', " ");
    match reason {
        Some(reason) => format!("{words} ({reason})"),
        None => words,
    }
}

/// A small bar of `cells` cells, `fraction` of them filled: `▰▰▱▱▱`.
pub fn mini_bar(fraction: f64, cells: usize) -> String {
    let fraction = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let filled = if fraction > 0.0 {
        ((fraction * cells as f64).round() as usize).max(1)
    } else {
        0
    };
    let filled = filled.min(cells);
    "▰".repeat(filled) + &"▱".repeat(cells - filled)
}

/// A JSON value for a one-line place: strings as they are, the rest as compact JSON.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What a request asks, as labelled fields: each shown whole (text keeps its lines),
/// made safe for the screen.
pub fn ask_fields(ask: &Ask) -> Vec<(String, Vec<String>)> {
    let mut fields: Vec<(&str, String)> = Vec::new();
    match ask {
        Ask::Command {
            command,
            cwd,
            reason,
            ..
        } => {
            fields.push(("command", command.clone()));
            fields.extend(cwd.iter().map(|c| ("cwd", c.clone())));
            fields.extend(reason.iter().map(|r| ("reason", r.clone())));
        }
        Ask::FileEdit {
            file_path,
            change,
            other_files,
        } => {
            fields.push(("file", file_path.clone()));
            fields.push((change.label(), change.text()));
            for other in other_files {
                fields.push(("file", other.file_path.clone()));
                fields.push((other.change.label(), other.change.text()));
            }
        }
        Ask::Fetch { url } => fields.push(("url", url.clone())),
        Ask::McpTool {
            server,
            tool,
            arguments,
        } => {
            fields.push(("server", server.clone()));
            fields.push(("tool", tool.clone()));
            fields.push(("arguments", arguments.clone()));
        }
        Ask::Question { questions } => {
            fields.extend(questions.iter().map(|q| ("question", q.question.clone())));
        }
        Ask::Other { subject, input, .. } => {
            fields.extend(subject.iter().map(|s| ("subject", s.clone())));
            fields.push(("input", input.clone()));
        }
    }
    fields
        .into_iter()
        .map(|(label, text)| (label.to_string(), safe_lines(&text)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_are_compact() {
        let table = [
            (0, "0s"),
            (999, "0s"),
            (42_000, "42s"),
            (185_000, "3m05s"),
            (3_720_000, "1h02m"),
            (183_600_000, "2d03h"),
            (-5, "0s"),
        ];
        for (ms, words) in table {
            assert_eq!(duration(ms), words, "{ms}");
        }
    }

    #[test]
    fn countdowns_round_up_and_say_overdue() {
        assert_eq!(countdown(10_400, 10_000), "1s left");
        assert_eq!(countdown(10_000, 10_000), "0s left");
        assert_eq!(countdown(70_000, 10_000), "1m00s left");
        assert_eq!(countdown(10_000, 22_000), "overdue 12s");
    }

    #[test]
    fn the_live_line_has_words_detail_time_in_state_and_countdown() {
        let live = LiveState {
            state: LiveStateKind::Working,
            since: 0,
            bound: Some(600_000),
            detail: Some("running a tool:\u{1b}[2J Bash".into()),
            cause: None,
            seq: 3,
        };
        assert_eq!(
            live_text(&live, 12_000),
            "working: running a tool: [2J Bash · 12s · 9m48s left"
        );
        let ended = LiveState {
            state: LiveStateKind::Ended,
            since: 0,
            bound: None,
            detail: None,
            cause: Some(crate::live_state::Cause::Completed),
            seq: 9,
        };
        assert_eq!(live_text(&ended, 12_000), "ended (completed)");
    }

    #[test]
    fn a_long_live_line_keeps_its_words_and_countdown() {
        let live = LiveState {
            state: LiveStateKind::Working,
            since: 0,
            bound: Some(600_000),
            detail: Some("waiting for your answer: Bash".into()),
            cause: None,
            seq: 3,
        };
        let text = |w| -> String {
            live_line_fit(&live, 12_000, w)
                .iter()
                .map(|s| s.content.as_ref())
                .collect()
        };
        assert_eq!(
            text(200),
            "working: waiting for your answer: Bash · 12s · 9m48s left"
        );
        assert_eq!(text(48), "working: waiting for your an… · 12s · 9m48s left");
        assert_eq!(text(30), "working · 12s · 9m48s left");
        assert_eq!(text(20), "working · 9m48s left");
    }

    #[test]
    fn safe_lines_strip_control_characters_and_keep_lines() {
        assert_eq!(
            safe_lines("a\u{1b}[31mb\n\tc\r"),
            vec!["a [31mb".to_string(), "    c".to_string()]
        );
    }

    #[test]
    fn mini_bars_show_any_spend_and_never_overflow() {
        assert_eq!(mini_bar(0.0, 5), "▱▱▱▱▱");
        assert_eq!(mini_bar(0.01, 5), "▰▱▱▱▱");
        assert_eq!(mini_bar(0.5, 4), "▰▰▱▱");
        assert_eq!(mini_bar(3.0, 5), "▰▰▰▰▰");
        assert_eq!(mini_bar(f64::NAN, 3), "▱▱▱");
    }

    #[test]
    fn asks_show_as_labelled_fields() {
        let fields = ask_fields(&Ask::command(
            "cargo test --all\n  && echo ok",
            Some("/w".into()),
            Some("Run the tests".into()),
        ));
        assert_eq!(
            fields,
            vec![
                (
                    "command".to_string(),
                    vec!["cargo test --all".to_string(), "  && echo ok".to_string()]
                ),
                ("cwd".to_string(), vec!["/w".to_string()]),
                ("reason".to_string(), vec!["Run the tests".to_string()]),
            ]
        );
        let edit = Ask::FileEdit {
            file_path: "a.rs".into(),
            change: crate::providers::FileChange::Diff {
                diff: "-a\n+b\u{1b}[2J".into(),
            },
            other_files: vec![crate::providers::EditedFile {
                file_path: "b.rs".into(),
                change: crate::providers::FileChange::Delete,
            }],
        };
        assert_eq!(
            ask_fields(&edit),
            vec![
                ("file".to_string(), vec!["a.rs".to_string()]),
                (
                    "diff".to_string(),
                    vec!["-a".to_string(), "+b [2J".to_string()]
                ),
                ("file".to_string(), vec!["b.rs".to_string()]),
                ("deleted".to_string(), vec!["the whole file".to_string()]),
            ]
        );
        let other = Ask::other("Grep", Some("TODO"), &json!({"pattern": "TODO"}));
        assert_eq!(
            ask_fields(&other),
            vec![
                ("subject".to_string(), vec!["TODO".to_string()]),
                (
                    "input".to_string(),
                    vec![r#"{"pattern":"TODO"}"#.to_string()]
                ),
            ]
        );
    }
}
