//! The right pane: the selected run — state, spec summary, budget gauge, live state,
//! pending prompt, last result, notes — and below them the transcript tail, which follows
//! the end unless the user scrolled: the agent's text with its line breaks and markdown
//! drawn plainly, each tool call one line (`t` opens it full screen).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::canvas::{clip_width, put_line, width_of, wrap};
use crate::format;
use crate::model::{Pane, RunEntry, ViewModel, needs_you};
use crate::theme::{self, BudgetLevel};
use drover_core::money::usd;
use drover_core::providers::RequestKind;
use drover_core::text::{one_line, provider_model};

/// Notes shown (the newest).
const NOTES_SHOWN: usize = 3;
/// Lines one note may wrap to in the detail pane.
const NOTE_LINES: usize = 3;

pub fn draw(buf: &mut Buffer, area: Rect, model: &ViewModel) {
    let area = Rect::new(
        area.x + 1,
        area.y,
        area.width.saturating_sub(2),
        area.height,
    );
    let Some(entry) = model.selected_entry() else {
        put_line(
            buf,
            area,
            1,
            &Line::styled("Select a run to see it here.", theme::dim()),
        );
        return;
    };
    let width = area.width as usize;
    let mut lines = summary_lines(entry, model.now, width);
    // The transcript gets what is left, at least a third of the pane.
    let min_transcript = (area.height as usize / 3).max(3);
    let top_max = (area.height as usize).saturating_sub(min_transcript + 1);
    lines.truncate(top_max);
    let mut y = 0u16;
    for line in &lines {
        put_line(buf, area, y, line);
        y += 1;
    }
    let rest = Rect::new(area.x, area.y + y, area.width, area.height - y);
    let focused = model.focus == Pane::Detail;
    transcript(buf, rest, entry, model.transcript_scroll, focused);
}

fn label(text: &'static str) -> Span<'static> {
    Span::styled(format!("{text:<8}"), theme::dim())
}

fn summary_lines(
    entry: &RunEntry,
    now: drover_core::UnixMillis,
    width: usize,
) -> Vec<Line<'static>> {
    let run = &entry.summary;
    let detail = entry.detail.as_ref();
    let mut lines = Vec::new();
    let (glyph, glyph_style) = format::glyph(run);
    lines.push(Line::from(vec![
        Span::styled(format!("{glyph} "), glyph_style),
        Span::styled(
            clip_width(&one_line(&run.head.title), width.saturating_sub(2)),
            theme::title(),
        ),
    ]));
    // A run waiting on a question is asking, not awaiting a permission.
    let asks = run.head.state == drover_core::run_state::RunState::AwaitingPermission
        && entry
            .pending
            .first()
            .is_some_and(|p| p.kind == RequestKind::Question);
    let mut state = vec![
        label("state"),
        Span::raw(if asks {
            "asks you a question".to_string()
        } else {
            format::state_words(run.head.state, run.head.completion_reason.as_deref())
        }),
        Span::styled(format!(" · {} · ", run.head.run_id), theme::dim()),
        Span::styled(
            format!("{} ago", format::duration(now - run.head.created_at)),
            theme::dim(),
        ),
    ];
    if run.head.stalled {
        state.push(Span::styled(" · stalled", theme::warning()));
    }
    lines.push(Line::from(state));
    let mut spec = vec![
        label("spec"),
        Span::raw(provider_model(
            &run.head.provider,
            run.head.model.as_deref(),
        )),
    ];
    if run.sandbox {
        spec.push(Span::styled(" · ⊡ sandbox", theme::dim()));
    }
    if let Some(host) = &run.head.host {
        spec.push(Span::styled(format!(" · @{host}"), theme::dim()));
    }
    if let Some(d) = detail {
        let user_turns = d
            .turns
            .iter()
            .filter(|t| t.origin != "result_retry")
            .count();
        spec.push(Span::styled(
            format!(
                " · policy {} · turn {}/{}",
                d.policy, user_turns, d.max_turns
            ),
            theme::dim(),
        ));
        if d.queued_follow_ups > 0 {
            spec.push(Span::styled(
                format!(
                    " · {} follow-up{} queued",
                    d.queued_follow_ups,
                    drover_core::text::plural(d.queued_follow_ups)
                ),
                theme::dim(),
            ));
        }
    }
    lines.push(Line::from(spec));
    if let Some(d) = detail {
        lines.push(Line::from(vec![
            label("cwd"),
            Span::raw(clip_width(&one_line(&d.cwd), width.saturating_sub(8))),
        ]));
        lines.push(Line::from(vec![
            label("task"),
            Span::raw(clip_width(&one_line(&d.task), width.saturating_sub(8))),
        ]));
    }
    if let Some(ws) = run.workspace.as_ref().filter(|w| w.is_worktree()) {
        lines.push(work_line(ws, run.head.state, width));
        if let Some(pr) = &ws.pr {
            // `pr      https://…/pull/7 · open · checks 3/4`: the address whole (the
            // run's line has its state), the state after it when there is room.
            let words = pr.words();
            let state = words
                .split_once(" · ")
                .map_or(words.as_str(), |(_, rest)| rest)
                .to_string();
            let room = width.saturating_sub(8);
            let mut spans = vec![label("pr"), Span::raw(clip_width(&pr.url, room))];
            if width_of(&pr.url) + 3 + width_of(&state) <= room {
                spans.push(Span::styled(" · ", theme::dim()));
                spans.push(Span::styled(state, super::trays::pr_style(pr)));
            }
            lines.push(Line::from(spans));
        }
    }
    lines.push(budget_line(entry, width));
    if let Some(live) = &run.head.live_state {
        let mut spans = vec![label("live")];
        spans.extend(format::run_live_line(
            run,
            live,
            now,
            width.saturating_sub(8),
        ));
        lines.push(Line::from(spans));
    }
    if let Some(p) = entry.pending.first() {
        let what = match p.kind {
            RequestKind::Permission => {
                format!("{} wants: {}", p.tool, one_line(&p.ask.summary()))
            }
            RequestKind::Question => {
                let q = crate::views::prompt::questions(p)
                    .into_iter()
                    .next()
                    .map(|q| q.question)
                    .unwrap_or_default();
                format!("asks: {}", one_line(&q))
            }
        };
        let more = if entry.pending.len() > 1 {
            format!(" (+{} more)", entry.pending.len() - 1)
        } else {
            String::new()
        };
        // The countdown, when the request keeps a readable share of the line beside it
        // (the live line above counts down too).
        let mut suffix = format!(
            " · {}{more}",
            format::Deadline::Answer.words(p.expires_at, now)
        );
        if width.saturating_sub(8 + width_of(&suffix)) < width_of(&what).min(24) {
            suffix = more;
        }
        let room = width.saturating_sub(8 + width_of(&suffix));
        lines.push(Line::from(vec![
            Span::styled(format!("{:<8}", "prompt"), theme::attention()),
            Span::styled(clip_width(&what, room), theme::attention()),
            Span::styled(suffix, theme::dim()),
        ]));
    } else if let Some(need) = needs_you(run) {
        let how = match need {
            crate::model::Need::Route => " · enter opens the card",
            crate::model::Need::Escalation => " · e escalates or retries",
            crate::model::Need::Approval => " · enter shows them to approve",
            crate::model::Need::Conflict => " · enter sends it the follow-up to merge",
            _ => " · answer with a follow-up",
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{:<8}", "needs"), theme::attention()),
            Span::styled(need.words(), theme::attention()),
            Span::styled(how, theme::dim()),
        ]));
    }
    if let Some(result) = detail.and_then(|d| d.last_result.as_ref()) {
        let status = result.status.clone().unwrap_or_else(|| "?".into());
        let status_style = match status.as_str() {
            "done" => theme::success(),
            "blocked" => theme::error(),
            "needs_input" => theme::attention(),
            _ => theme::text(),
        };
        let summary = result
            .summary
            .as_deref()
            .map(one_line)
            .or_else(|| result.json.as_ref().map(|j| j.to_string()))
            .unwrap_or_default();
        lines.push(Line::from(vec![
            label("result"),
            Span::styled(status, status_style),
            Span::raw(" "),
            Span::raw(clip_width(&summary, width.saturating_sub(20))),
        ]));
        if let Some(q) = &result.question {
            lines.push(Line::from(vec![
                Span::raw(" ".repeat(8)),
                Span::styled("question: ", theme::attention()),
                Span::raw(clip_width(&one_line(q), width.saturating_sub(18))),
            ]));
        }
    }
    // What its commands show (docs/ARCHITECTURE.md §"Evidence"): amber for a `done` with
    // no test run, or a test that failed.
    if let Some(evidence) = detail.and_then(|d| d.evidence.as_ref()) {
        let style = if evidence.warn {
            theme::warning()
        } else {
            theme::text()
        };
        lines.push(Line::from(vec![
            Span::raw(" ".repeat(8)),
            Span::styled(clip_width(&evidence.line, width.saturating_sub(8)), style),
        ]));
    }
    if let Some(d) = detail {
        let skip = d.notes.len().saturating_sub(NOTES_SHOWN);
        for (i, note) in d.notes.iter().skip(skip).enumerate() {
            // Wrapped under its label, at most a few lines; its age after the last.
            let ago = format!(" · {} ago", format::duration(now - note.at));
            let text = format!("{}{ago}", one_line(&note.text));
            let mut pieces = wrap(&text, width.saturating_sub(8).max(10));
            if pieces.len() > NOTE_LINES {
                pieces.truncate(NOTE_LINES);
                if let Some(last) = pieces.last_mut() {
                    last.pop();
                    last.push('…');
                }
            }
            for (j, piece) in pieces.into_iter().enumerate() {
                lines.push(Line::from(vec![
                    if i == 0 && j == 0 {
                        label("notes")
                    } else {
                        Span::raw(" ".repeat(8))
                    },
                    Span::raw(piece),
                ]));
            }
        }
    }
    lines
}

/// `work    drover/r1-fix (from main) · +12 −3 · 4 files · D diff`: a worktree run's
/// branch, base and change, or where its worktree went (for a run that has not started
/// yet, when it will be made).
fn work_line(
    ws: &drover_core::workspace::WorkspaceView,
    state: drover_core::run_state::RunState,
    width: usize,
) -> Line<'static> {
    use drover_core::run_state::RunState;
    use drover_core::workspace::WorkspaceStatus;
    let base = ws
        .base_branch
        .as_deref()
        .map(|b| format!(" (from {b})"))
        .unwrap_or_default();
    let branch = format!(
        "{}{base}",
        ws.branch.as_deref().unwrap_or("a worktree of its own")
    );
    // What follows the branch, most telling first; the rest goes when room is short.
    let mut tail: Vec<Vec<Span<'static>>> = Vec::new();
    match ws.status {
        WorkspaceStatus::Ready => match ws.change {
            Some(c) if !c.is_empty() => {
                tail.push(vec![
                    Span::styled(" · ", theme::dim()),
                    Span::styled(format!("+{}", c.added), theme::diff_added()),
                    Span::raw(" "),
                    Span::styled(format!("−{}", c.removed), theme::diff_removed()),
                ]);
                tail.push(vec![Span::styled(
                    format!(
                        " · {} file{}",
                        c.files,
                        drover_core::text::plural(c.files as usize)
                    ),
                    theme::dim(),
                )]);
                tail.push(vec![Span::styled(" · D diff", theme::dim())]);
            }
            // Before its first change, or since its last merge: the same to the user.
            Some(_) => tail.push(vec![Span::styled(" · nothing to merge", theme::dim())]),
            None => {}
        },
        WorkspaceStatus::Preparing => tail.push(vec![Span::styled(
            match state {
                RunState::AwaitingRoute => " · made once a model is picked",
                RunState::Queued => " · made once it starts",
                _ => " · making the worktree",
            },
            theme::dim(),
        )]),
        other => tail.push(vec![Span::styled(
            format!(" · {}", other.as_str()),
            theme::warning(),
        )]),
    }
    let room = width.saturating_sub(8);
    let keep_branch = width_of(&branch).min(24);
    while tail.len() > 1 {
        let tail_w: usize = tail.iter().flatten().map(Span::width).sum();
        if keep_branch + tail_w <= room {
            break;
        }
        tail.pop();
    }
    let tail_w: usize = tail.iter().flatten().map(Span::width).sum();
    let mut spans = vec![
        label("work"),
        Span::raw(clip_width(&branch, room.saturating_sub(tail_w))),
    ];
    spans.extend(tail.into_iter().flatten());
    Line::from(spans)
}

/// `budget  [████░░░░░░] $0.12 of $5.00 (reported)`.
fn budget_line(entry: &RunEntry, width: usize) -> Line<'static> {
    let run = &entry.summary;
    let cap = run.head.budget_usd.max(0.01);
    let level = BudgetLevel::of(run.head.cost_usd, cap * 0.8, cap);
    let cells = width.saturating_sub(36).clamp(5, 20);
    let filled = if run.head.cost_usd > 0.0 {
        (((run.head.cost_usd / cap).clamp(0.0, 1.0) * cells as f64).round() as usize).max(1)
    } else {
        0
    }
    .min(cells);
    let basis = entry
        .detail
        .as_ref()
        .map(|d| format!(" ({})", d.cost_basis))
        .unwrap_or_default();
    Line::from(vec![
        label("budget"),
        Span::styled("[", theme::dim()),
        Span::styled("█".repeat(filled), theme::gauge_spent(level)),
        Span::styled("░".repeat(cells - filled), theme::dim()),
        Span::styled("] ", theme::dim()),
        Span::styled(usd(run.head.cost_usd), theme::gauge_spent(level)),
        Span::raw(format!(" of {}", usd(run.head.budget_usd))),
        Span::styled(basis, theme::dim()),
    ])
}

/// The transcript under its rule, heavy while the pane has the focus (`tab`), when `enter`
/// reads it full screen.
fn transcript(
    buf: &mut Buffer,
    area: Rect,
    entry: &RunEntry,
    scroll: Option<usize>,
    focused: bool,
) {
    if area.height < 2 {
        return;
    }
    let lines = &entry.transcript;
    let room = (area.height - 1) as usize;
    let bottom = lines.len().saturating_sub(room);
    let top = scroll.map_or(bottom, |s| s.min(bottom));
    let following = scroll.is_none() || top == bottom;
    let where_ = if lines.is_empty() {
        if entry.transcript_loaded {
            " (empty)".to_string()
        } else {
            " (reading…)".to_string()
        }
    } else if following {
        format!(" ({} lines, following)", lines.len())
    } else {
        format!(
            " (lines {}–{} of {}, scrolled)",
            top + 1,
            (top + room).min(lines.len()),
            lines.len()
        )
    };
    let (title, mark, style) = if focused {
        (
            format!("━━ transcript{where_} · enter: full screen "),
            "━",
            theme::focus(),
        )
    } else {
        (format!("── transcript{where_} "), "─", theme::pane_border())
    };
    let rule = mark.repeat((area.width as usize).saturating_sub(width_of(&title)));
    put_line(
        buf,
        area,
        0,
        &Line::from(vec![Span::styled(title, style), Span::styled(rule, style)]),
    );
    // The agent's text as it reads, each tool call one line (docs/ARCHITECTURE.md
    // §"Reading a transcript"); only the blocks shown are laid out.
    let width = area.width as usize;
    let placed = crate::transcript::blocks(lines);
    let rows_of = |i: usize| -> Vec<Line<'static>> {
        crate::transcript::layout_block(&placed[i].block, i, width, false)
            .into_iter()
            .flat_map(|item| item.rows)
            .collect()
    };
    let mut shown: Vec<Line<'static>> = Vec::new();
    if following {
        // From the end back, until the pane is full.
        for i in (0..placed.len()).rev() {
            let mut rows = rows_of(i);
            rows.append(&mut shown);
            shown = rows;
            if shown.len() >= room {
                break;
            }
        }
        let extra = shown.len().saturating_sub(room);
        shown.drain(..extra);
    } else {
        let first = placed.partition_point(|p| p.first_entry < top);
        for i in first..placed.len() {
            shown.extend(rows_of(i));
            if shown.len() >= room {
                break;
            }
        }
        shown.truncate(room);
    }
    for (i, line) in shown.iter().enumerate() {
        put_line(buf, area, 1 + i as u16, line);
    }
}
