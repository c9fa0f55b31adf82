//! The help view: every binding of every context, read from the key table that handles
//! the keys (so help says what the keys do), each wrapped to the view's width (never cut),
//! scrolled with the scroll keys.
//!
//! What must stay true: every action bound in a context is listed under that context's
//! heading, with all its keys.

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{DrawContext, Outcome, View};
use crate::canvas::{put_line, view_box, wrap};
use crate::keys::{Action, Context};
use crate::layout::centered;
use crate::theme;

/// The help view: every binding of every context, from the key table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelpView {
    pub scroll: u16,
}

impl View for HelpView {
    fn context(&self) -> Context {
        Context::Help
    }

    fn handle_key(&mut self, action: Option<Action>, _key: &KeyEvent) -> Outcome {
        match action {
            Some(Action::Close) => Outcome::close(),
            Some(Action::ScrollDown) => {
                self.scroll = self.scroll.saturating_add(1);
                Outcome::stay()
            }
            Some(Action::ScrollUp) => {
                self.scroll = self.scroll.saturating_sub(1);
                Outcome::stay()
            }
            _ => Outcome::stay(),
        }
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, draw_context: &DrawContext<'_>) {
        let area = centered(body, body.width.saturating_sub(4).min(100), body.height);
        let inner = view_box(buf, area, "Keys".to_string());
        let width = inner.width as usize;
        let mut lines: Vec<Line<'static>> = Vec::new();
        for context in Context::ALL {
            if context == Context::Help {
                continue;
            }
            lines.push(Line::styled(context.heading(), theme::title()));
            for (keys, action) in draw_context.keys.actions(context) {
                binding(&mut lines, width, &keys, action.describe_in(context));
            }
            if matches!(context, Context::Dashboard) {
                binding(
                    &mut lines,
                    width,
                    "1-9",
                    "answer the question on the attention line by its choice's number",
                );
            }
            if matches!(context, Context::Prompt) {
                binding(
                    &mut lines,
                    width,
                    "1-9",
                    "pick a question's choice by its number",
                );
            }
            if matches!(context, Context::Input | Context::Form) {
                binding(
                    &mut lines,
                    width,
                    "ctrl-u/ctrl-w",
                    "clear the text / delete a word",
                );
            }
            lines.push(Line::raw(""));
        }
        for piece in wrap(
            "Mouse: click a run to select it; the wheel moves the selection or scrolls the transcript.",
            width,
        ) {
            lines.push(Line::styled(piece, theme::dim()));
        }
        let room = (inner.height as usize).saturating_sub(1);
        let scroll = (self.scroll as usize).min(lines.len().saturating_sub(room));
        for (i, line) in lines.iter().skip(scroll).take(room).enumerate() {
            put_line(buf, inner, i as u16, line);
        }
        let below = lines.len().saturating_sub(scroll + room);
        if below > 0 {
            put_line(
                buf,
                inner,
                room as u16,
                &Line::styled(format!("↓ {below} more (j to scroll)"), theme::focus()),
            );
        }
    }
}

/// One binding: its keys, then what it does, wrapped under itself in `width` columns.
fn binding(lines: &mut Vec<Line<'static>>, width: usize, keys: &str, what: &str) {
    const KEYS_W: usize = 16;
    for (i, piece) in wrap(what, width.saturating_sub(KEYS_W).max(10))
        .into_iter()
        .enumerate()
    {
        let keys = if i == 0 { keys } else { "" };
        lines.push(Line::from(vec![
            Span::styled(format!("  {keys:<14}"), theme::key()),
            Span::raw(piece),
        ]));
    }
}
