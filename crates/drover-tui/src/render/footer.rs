//! The footer: a config reload the owner refused (until a good one), the last action's
//! message (whole: wrapped on lines of its own above the hints when it is too long to
//! share their line, [`crate::model::ViewModel::flash_lines`]), then the key hints of the
//! context in force, taken from the key table that
//! handles the keys — the top view's own ([`crate::views::View::hints`]), or on the
//! dashboard only those that apply to the selected run (no `e` without an offer, no `R`
//! for a run that was not interrupted).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::app::App;
use crate::canvas::{clip_width, put_line, width_of};
use crate::keys::{Action, Context};
use crate::model::Pane;
use crate::theme;
use drover_core::run_state::RunState;
use drover_core::text::one_line;

pub fn draw(buf: &mut Buffer, area: Rect, app: &App) {
    let width = area.width as usize;
    let mut spans = Vec::new();
    let mut used = 0;
    let wrapped = app.model.flash_lines();
    if let (Some(lines), Some(flash)) = (&wrapped, &app.model.flash) {
        let style = if flash.error {
            theme::error()
        } else {
            theme::success()
        };
        for (i, l) in lines.iter().enumerate() {
            put_line(buf, area, i as u16, &Line::styled(format!(" {l}"), style));
        }
    }
    let hints_row = area.height.saturating_sub(1);
    if let Some(refused) = &app.model.config_refused {
        let text = clip_width(&one_line(refused), width.saturating_sub(4).max(10) / 2);
        used += width_of(&text) + 3;
        spans.push(Span::styled(format!(" {text} "), theme::error()));
        spans.push(Span::styled("│", theme::pane_border()));
    }
    if let Some(flash) = app.model.flash.as_ref().filter(|_| wrapped.is_none()) {
        let text = clip_width(&one_line(&flash.text), crate::model::flash_room(width));
        used += width_of(&text) + 3;
        spans.push(Span::styled(
            format!(" {text} "),
            if flash.error {
                theme::error()
            } else {
                theme::success()
            },
        ));
        spans.push(Span::styled("│", theme::pane_border()));
    }
    let hints = match app.views.top() {
        Some(top) => top.hints(&app.keys),
        // With the detail pane focused, `enter` reads the transcript full screen.
        None if app.model.focus == Pane::Detail => app
            .keys
            .hints(Context::Dashboard)
            .into_iter()
            .filter_map(|(key, action)| match action {
                Action::Open => app.model.selected_entry().map(|_| (key, "read")),
                _ if applies(app, action) => action.hint().map(|word| (key, word)),
                _ => None,
            })
            .collect(),
        None => app
            .keys
            .hint_words(Context::Dashboard, |action| applies(app, action)),
    };
    // Hints in table order while they fit; help (or close) is always kept, at the end.
    let keep_last = hints
        .iter()
        .rposition(|(_, word)| *word == "help" || *word == "close");
    let piece = |(key, word): &(String, &str)| width_of(key) + width_of(word) + 3;
    let reserved = keep_last.map_or(0, |i| piece(&hints[i]));
    let mut shown: Vec<usize> = Vec::new();
    for (i, hint) in hints.iter().enumerate() {
        if Some(i) == keep_last {
            continue;
        }
        if used + piece(hint) + reserved > width {
            break;
        }
        used += piece(hint);
        shown.push(i);
    }
    if let Some(i) = keep_last {
        // Keep the table's order: help goes where it stands among the shown hints.
        let at = shown.iter().position(|&j| j > i).unwrap_or(shown.len());
        shown.insert(at, i);
    }
    for i in shown {
        let (key, word) = &hints[i];
        spans.push(Span::raw(" "));
        spans.push(Span::styled(key.clone(), theme::key()));
        spans.push(Span::styled(format!(" {word} "), theme::dim()));
    }
    put_line(buf, area, hints_row, &Line::from(spans));
}

/// Whether a dashboard key's hint applies now: to the selected run, or to what waits.
fn applies(app: &App, action: Action) -> bool {
    let selected = app.model.selected_entry().map(|e| &e.summary);
    let state = selected.map(|s| s.head.state);
    match action {
        Action::Escalate => selected.is_some_and(|s| s.escalation_offered),
        Action::Resume => state == Some(RunState::Interrupted),
        Action::Complete => state == Some(RunState::Idle),
        Action::Stop | Action::FollowUp => state.is_some_and(|s| s.is_active()),
        Action::Open => selected.is_some_and(|s| s.needs_you().is_some()),
        Action::OpenDiff => {
            selected.is_some_and(|s| s.workspace.as_ref().is_some_and(|w| w.has_worktree()))
        }
        Action::Redispatch => selected.is_some(),
        Action::ClearFilter => !app.model.filter.is_empty(),
        Action::NextPending => app.model.pending_total() > 0 || app.model.counts().held > 0,
        _ => true,
    }
}
