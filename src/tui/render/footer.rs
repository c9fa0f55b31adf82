//! The footer: the last action's message, then the key hints of the context in force,
//! taken from the key table that handles the keys.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{put_line, width_of};
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::theme;

pub fn draw(buf: &mut Buffer, area: Rect, app: &App) {
    let width = area.width as usize;
    let mut spans = Vec::new();
    let mut used = 0;
    if let Some(flash) = &app.model.flash {
        let text = format::clip(
            &format::one_line(&flash.text),
            width.saturating_sub(4).max(10) * 2 / 3,
        );
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
    let mut hints: Vec<(String, &str)> = app
        .keys
        .hints(app.context())
        .into_iter()
        .filter(|(_, action)| !app.overlays.last().is_some_and(|top| top.hides(*action)))
        .filter_map(|(key, action)| action.hint().map(|word| (key, word)))
        .collect();
    if app.overlays.last().is_some_and(|top| top.takes_digits()) {
        hints.insert(0, ("1-9".to_string(), "choose"));
    }
    for (i, (key, word)) in hints.iter().enumerate() {
        let piece = width_of(key) + width_of(word) + 3;
        // Keep room for the last hint (help or close) when the line is short.
        let last = i + 1 == hints.len();
        if used + piece > width && !last {
            continue;
        }
        if used + piece > width {
            break;
        }
        used += piece;
        spans.push(Span::raw(" "));
        spans.push(Span::styled(key.clone(), theme::key()));
        spans.push(Span::styled(format!(" {word} "), theme::dim()));
    }
    put_line(buf, area, 0, &Line::from(spans));
}
