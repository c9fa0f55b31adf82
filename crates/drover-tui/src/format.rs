//! Words and numbers as the dashboard shows them: durations, countdowns, the live line,
//! state glyphs, and text from providers made safe for the screen. Money reads as
//! [`drover_core::money::usd`] and one-line text as [`drover_core::text`] everywhere.
//!
//! Pure functions of their inputs (`now` is passed in). What must stay true: text that
//! came from a provider or a user never reaches the screen with control characters in it
//! (an escape sequence in a transcript must not drive the terminal); every countdown says
//! what runs out ([`Deadline`]); a run in Needs you says why on its live line, hibernated
//! or not.

use ratatui::style::Style;
use ratatui::text::Span;
use serde_json::Value;

use super::theme;
use drover_core::UnixMillis;
use drover_core::dispatch::api::{Need, RunSummary};
use drover_core::live_state::{LiveState, LiveStateKind};
use drover_core::providers::Ask;
use drover_core::run_state::RunState;
use drover_core::text::one_line;

use super::canvas::clip_width;

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

/// What runs out when a live state's countdown reaches zero: each countdown on screen
/// says which (`time limit in 41m55s`, `answer in 9m48s`, an idle run `times out in
/// 18m25s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// The run's time box (`--max-minutes`): past it the run fails.
    TimeLimit,
    /// A pending request's expiry: unanswered, it is denied.
    Answer,
    /// An idle run's idle timeout: with no follow-up, it completes.
    IdleTimeout,
    /// A route card's expiry: unpicked, the run is stopped.
    RouteCard,
    /// How long a tool is expected to take.
    Tool,
    /// When a held turn is sent to the model provider again.
    Retry,
    /// How long making the workspace and starting the CLI may take.
    Start,
    /// How long ending the provider session may take.
    WrapUp,
}

impl Deadline {
    /// The deadline a live state's bound is, for a run in `state`.
    pub fn of(state: RunState, live: &LiveState) -> Deadline {
        match (state, live.state) {
            // The next reconnect, whether the run was in a turn or between turns.
            (_, LiveStateKind::WaitingHost) => Deadline::Retry,
            (RunState::AwaitingRoute, _) => Deadline::RouteCard,
            (RunState::AwaitingPermission, _) => Deadline::Answer,
            (RunState::Idle, _) => Deadline::IdleTimeout,
            (_, LiveStateKind::WaitingProvider) => Deadline::Retry,
            (_, LiveStateKind::Preparing | LiveStateKind::FallingBack) => Deadline::Start,
            (_, LiveStateKind::WrappingUp) => Deadline::WrapUp,
            (_, LiveStateKind::Working)
                if live
                    .detail
                    .as_deref()
                    .is_some_and(|d| d.starts_with("running a tool")) =>
            {
                Deadline::Tool
            }
            _ => Deadline::TimeLimit,
        }
    }

    /// The countdown to `bound`, labelled: `time limit in 41m55s`, or once passed
    /// `past its time limit by 12s`.
    pub fn words(self, bound: UnixMillis, now: UnixMillis) -> String {
        if bound >= now {
            // Rounded up, as [`countdown`] does.
            let left = duration(bound - now + 999);
            let label = match self {
                Deadline::TimeLimit => "time limit",
                Deadline::Answer => "answer",
                Deadline::IdleTimeout => "times out",
                Deadline::RouteCard => "card expiry",
                Deadline::Tool => "tool due",
                Deadline::Retry => "retry",
                Deadline::Start => "start due",
                Deadline::WrapUp => "wrap-up due",
            };
            format!("{label} in {left}")
        } else {
            let over = duration(now - bound);
            match self {
                Deadline::TimeLimit => format!("past its time limit by {over}"),
                Deadline::Answer => format!("answer overdue {over}"),
                Deadline::IdleTimeout => format!("timed out {over} ago"),
                Deadline::RouteCard => format!("card expired {over} ago"),
                Deadline::Tool => format!("tool overdue {over}"),
                Deadline::Retry => format!("retry due {over} ago"),
                Deadline::Start => format!("start overdue {over}"),
                Deadline::WrapUp => format!("wrap-up overdue {over}"),
            }
        }
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

/// The pieces of a live line: what leads (the state's words, or — for a run between
/// turns or waiting on the user — its detail alone, which says it), the detail, the time
/// in the state and the countdown to its bound.
struct LivePieces {
    lead: Span<'static>,
    detail: Option<Span<'static>>,
    time: Option<Span<'static>>,
    countdown: Option<Span<'static>>,
}

/// Why a run in Needs you waits for the user, for its live line, when its live detail
/// may not say (a hibernated run's detail says only that): `None` when the detail does.
fn waits_for_you(need: Option<Need>) -> Option<&'static str> {
    match need? {
        Need::Input => Some("needs your input"),
        Need::Blocked => Some("blocked: say how to go on"),
        Need::Escalation => Some("blocked: escalation offered"),
        Need::Conflict => Some("conflicts with its base: follow-up offered"),
        // These say why in their own detail (a request, a card, "interrupted by a restart").
        // (and the scripts to approve: "waiting for you to approve .drover/setup").
        Need::Permission | Need::Route | Need::Interrupted | Need::Approval => None,
    }
}

fn live_pieces(
    state: RunState,
    need: Option<Need>,
    live: &LiveState,
    now: UnixMillis,
) -> LivePieces {
    let style = match live.state {
        LiveStateKind::Working | LiveStateKind::WrappingUp => theme::active(),
        LiveStateKind::WaitingProvider
        | LiveStateKind::WaitingHost
        | LiveStateKind::WaitingDeploy
        | LiveStateKind::WaitingRepository
        | LiveStateKind::FallingBack => theme::warning(),
        LiveStateKind::Ended => theme::dim(),
        LiveStateKind::Admitted | LiveStateKind::Preparing => theme::text(),
    };
    let mut detail = live
        .detail
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .map(one_line);
    // An idle run that needs the user says why first, and then whether it sleeps.
    let needs_you = waits_for_you(need).filter(|_| state == RunState::Idle);
    if let Some(why) = needs_you {
        let asleep = detail.as_deref().and_then(|d| {
            [
                drover_core::dispatch::core::HIBERNATED_DETAIL,
                drover_core::dispatch::core::HIBERNATING_DETAIL,
                drover_core::dispatch::core::WAKING_DETAIL,
            ]
            .into_iter()
            .find(|words| d.starts_with(words))
            .map(|words| words.trim_start_matches("idle · "))
        });
        detail = Some(match asleep {
            Some(asleep) => format!("{why} · {asleep}"),
            None => why.to_string(),
        });
    }
    // Not in a turn (or held on a route card, or on its scripts' approval): "working" or
    // "admitted" is not what the user sees; the detail says what it is. An end with a detail (a restart's
    // interruption) says what happened in words too.
    // A run waiting for its scripts' approval leads with that, as a run in Needs you.
    let between_turns = need == Some(Need::Approval)
        || (live.state == LiveStateKind::Working
            && matches!(state, RunState::Idle | RunState::AwaitingPermission))
        || (live.state == LiveStateKind::Admitted && state == RunState::AwaitingRoute)
        || live.state == LiveStateKind::Ended;
    let (lead, detail) = match detail {
        Some(d) if between_turns => {
            // A hibernated run (its CLI shut down, its session kept) reads
            // "idle · hibernated", dimmed: nothing of it is working (nor while its CLI
            // starts again ahead of a follow-up, "idle · waking").
            let asleep = d.starts_with(drover_core::dispatch::core::HIBERNATED_DETAIL)
                || d.starts_with(drover_core::dispatch::core::HIBERNATING_DETAIL)
                || d.starts_with(drover_core::dispatch::core::WAKING_DETAIL);
            let lead_style = if needs_you.is_some() {
                theme::attention()
            } else if asleep {
                theme::dim()
            } else if state == RunState::Idle && !d.starts_with("needs") {
                theme::text()
            } else {
                theme::attention()
            };
            (Span::styled(d, lead_style), None)
        }
        detail => {
            let mut words = live.state.human().to_string();
            if let Some(cause) = live.cause {
                words.push_str(&format!(" ({})", cause.as_str()));
            }
            let lead = Span::styled(words, style);
            (lead, detail.map(|d| Span::raw(format!(": {d}"))))
        }
    };
    let (time, countdown) = if live.state.is_terminal() {
        (None, None)
    } else {
        let time = Span::styled(format!(" · {}", duration(now - live.since)), theme::dim());
        let deadline = Deadline::of(state, live);
        let countdown = live.bound.map(|bound| {
            Span::styled(
                format!(" · {}", deadline.words(bound, now)),
                if bound < now {
                    theme::error()
                } else {
                    theme::dim()
                },
            )
        });
        (Some(time), countdown)
    };
    LivePieces {
        lead,
        detail,
        time,
        countdown,
    }
}

/// The live line of a run: the state's words, its detail, time in the state and the
/// countdown to its bound, as styled spans (a run in a turn).
pub fn live_line(live: &LiveState, now: UnixMillis) -> Vec<Span<'static>> {
    live_line_fit(RunState::Running, live, now, usize::MAX)
}

/// A run's live line, fitted to `width` columns ([`live_line_fit`]); a run in Needs you
/// between turns leads with why it needs you, hibernated or not.
pub fn run_live_line(
    run: &RunSummary,
    live: &LiveState,
    now: UnixMillis,
    width: usize,
) -> Vec<Span<'static>> {
    fit(
        live_pieces(run.head.state, run.needs_you(), live, now),
        width,
    )
}

/// The live line of a run in `state`, fitted to `width` columns: the time in the state
/// goes first, then the detail is shortened (to no less than a few words' worth) or
/// dropped, then the countdown goes; what leads is clipped last, with `…`.
pub fn live_line_fit(
    state: RunState,
    live: &LiveState,
    now: UnixMillis,
    width: usize,
) -> Vec<Span<'static>> {
    fit(live_pieces(state, None, live, now), width)
}

/// The pieces of a live line fitted to `width` (see [`live_line_fit`]).
fn fit(pieces: LivePieces, width: usize) -> Vec<Span<'static>> {
    let LivePieces {
        mut lead,
        mut detail,
        mut time,
        mut countdown,
    } = pieces;
    fn w(s: &Option<Span<'static>>) -> usize {
        s.as_ref().map_or(0, Span::width)
    }
    fn total(
        lead: &Span<'static>,
        d: &Option<Span<'static>>,
        t: &Option<Span<'static>>,
        c: &Option<Span<'static>>,
    ) -> usize {
        lead.width() + w(d) + w(t) + w(c)
    }
    if total(&lead, &detail, &time, &countdown) > width {
        time = None;
    }
    let over = total(&lead, &detail, &time, &countdown).saturating_sub(width);
    if over > 0
        && let Some(d) = detail.as_mut()
    {
        let keep = d.width().saturating_sub(over);
        if keep >= 10 {
            *d = Span::styled(clip_width(&d.content, keep), d.style);
        } else {
            detail = None;
        }
    }
    // What leads (why the run waits, when a detail leads) is kept whole before the
    // countdown: the countdown goes first.
    if total(&lead, &detail, &time, &countdown) > width {
        countdown = None;
    }
    if lead.width() > width {
        lead = Span::styled(clip_width(&lead.content, width), lead.style);
    }
    [Some(lead), detail, time, countdown]
        .into_iter()
        .flatten()
        .collect()
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
    // Its host's connection dropped and drover reconnects (docs/ARCHITECTURE.md §"Hosts").
    if run.head.state.is_active()
        && run
            .head
            .live_state
            .as_ref()
            .is_some_and(|l| l.state == drover_core::live_state::LiveStateKind::WaitingHost)
    {
        return ("↻", theme::warning());
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
    let reason = match reason {
        // A reason that only says the state again says nothing.
        None | Some("complete" | "completed" | "done" | "stopped" | "failed") => None,
        Some(r) if r == state.as_str() => None,
        Some("user") => Some("by you".to_string()),
        Some(r) => Some(r.to_string()),
    };
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
    fn each_deadline_says_what_runs_out_and_when_it_passed() {
        let at = |state, kind, detail: Option<&str>| {
            Deadline::of(
                state,
                &LiveState {
                    state: kind,
                    since: 0,
                    bound: Some(1),
                    detail: detail.map(str::to_string),
                    cause: None,
                    seq: 1,
                },
            )
        };
        use LiveStateKind as K;
        let table = [
            (
                at(RunState::Running, K::Working, Some("model turn")),
                "time limit in 1m00s",
                "past its time limit by 12s",
            ),
            (
                at(RunState::Running, K::Working, Some("running a tool: Bash")),
                "tool due in 1m00s",
                "tool overdue 12s",
            ),
            (
                at(RunState::AwaitingPermission, K::Working, None),
                "answer in 1m00s",
                "answer overdue 12s",
            ),
            (
                at(RunState::Idle, K::Working, Some("idle · hibernated")),
                "times out in 1m00s",
                "timed out 12s ago",
            ),
            (
                at(RunState::AwaitingRoute, K::Admitted, None),
                "card expiry in 1m00s",
                "card expired 12s ago",
            ),
            (
                at(RunState::Queued, K::Admitted, None),
                "time limit in 1m00s",
                "past its time limit by 12s",
            ),
            (
                at(RunState::Running, K::WaitingProvider, None),
                "retry in 1m00s",
                "retry due 12s ago",
            ),
            (
                at(RunState::Idle, K::WaitingHost, Some("buildbox")),
                "retry in 1m00s",
                "retry due 12s ago",
            ),
            (
                at(RunState::Starting, K::Preparing, None),
                "start due in 1m00s",
                "start overdue 12s",
            ),
            (
                at(RunState::Running, K::WrappingUp, None),
                "wrap-up due in 1m00s",
                "wrap-up overdue 12s",
            ),
        ];
        for (deadline, ahead, passed) in table {
            assert_eq!(deadline.words(70_000, 10_000), ahead, "{deadline:?}");
            assert_eq!(deadline.words(10_000, 22_000), passed, "{deadline:?}");
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
            "working: running a tool: [2J Bash · 12s · tool due in 9m48s"
        );
        let ended = LiveState {
            state: LiveStateKind::Ended,
            since: 0,
            bound: None,
            detail: None,
            cause: Some(drover_core::live_state::Cause::Completed),
            seq: 9,
        };
        assert_eq!(live_text(&ended, 12_000), "ended (completed)");
    }

    #[test]
    fn a_long_live_line_keeps_its_words_before_its_countdown() {
        let live = LiveState {
            state: LiveStateKind::Working,
            since: 0,
            bound: Some(600_000),
            detail: Some("running a tool: Bash".into()),
            cause: None,
            seq: 3,
        };
        let text_in = |state, live: &LiveState, w| -> String {
            live_line_fit(state, live, 12_000, w)
                .iter()
                .map(|s| s.content.as_ref())
                .collect()
        };
        let text = |w| text_in(RunState::Running, &live, w);
        assert_eq!(
            text(200),
            "working: running a tool: Bash · 12s · tool due in 9m48s"
        );
        // The time in the state goes first, then the detail shortens, then it goes.
        assert_eq!(text(45), "working: running a tool:… · tool due in 9m48s");
        assert_eq!(text(40), "working: running a… · tool due in 9m48s");
        assert_eq!(text(30), "working · tool due in 9m48s");
        assert_eq!(text(12), "working");
        // Waiting on the user, or between turns: the detail leads, no "working"; it is
        // kept whole before the countdown, and cut last.
        let asking = LiveState {
            detail: Some("waiting for your answer: Bash".into()),
            ..live.clone()
        };
        let ask = |w| text_in(RunState::AwaitingPermission, &asking, w);
        assert_eq!(
            ask(200),
            "waiting for your answer: Bash · 12s · answer in 9m48s"
        );
        assert_eq!(ask(50), "waiting for your answer: Bash · answer in 9m48s");
        assert_eq!(ask(40), "waiting for your answer: Bash");
        assert_eq!(ask(20), "waiting for your an…");
        let idle = LiveState {
            detail: Some("idle: waiting for a follow-up".into()),
            ..live.clone()
        };
        assert_eq!(
            text_in(RunState::Idle, &idle, 50),
            "idle: waiting for a follow-up · times out in 9m48s"
        );
        assert_eq!(
            text_in(RunState::Idle, &idle, 40),
            "idle: waiting for a follow-up"
        );
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
            change: drover_core::providers::FileChange::Diff {
                diff: "-a\n+b\u{1b}[2J".into(),
            },
            other_files: vec![drover_core::providers::EditedFile {
                file_path: "b.rs".into(),
                change: drover_core::providers::FileChange::Delete,
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
