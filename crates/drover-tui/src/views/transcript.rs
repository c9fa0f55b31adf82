//! The full-screen transcript (`t`): a run's transcript as text to read
//! (docs/ARCHITECTURE.md §"Reading a transcript"): the agent's markdown drawn plainly,
//! each tool call one collapsed line that `space` expands to its input and output, a
//! cursor over the lines, a selection (`v`, then `j`/`k`) that `y` copies to the system
//! clipboard, `Y` copying the run's whole result block, `n`/`N` walking the lines that
//! match the dashboard's filter.
//!
//! What must stay true: what is copied is exactly the lines under the selection, as read
//! (no gutter, no decoration), whatever the width; the view draws the transcript as the
//! view model holds it now and follows its end while the cursor is on the last line; its
//! keys read the transcript the app handed it just before ([`TranscriptScreen::sync`]).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{DrawContext, Outcome, View, ViewCommand};
use crate::canvas::{clip_width, put_line, view_box};
use crate::keys::{Action, Context};
use crate::theme;
use crate::transcript::{Block, Item, blocks, layout};
use drover_core::text::{one_line, plural};

/// Lines a page key moves the cursor when nothing was drawn yet.
const PAGE_DEFAULT: usize = 10;
/// The width keys lay out at (what an item is does not depend on the width).
const KEYS_WIDTH: usize = 80;

/// The full-screen transcript of one run.
#[derive(Debug)]
pub struct TranscriptScreen {
    pub run_id: String,
    title: String,
    /// The transcript as the app last handed it (what keys read).
    entries: Vec<String>,
    /// The run's result block, when there is one.
    result: Option<String>,
    /// The dashboard's filter (`n`/`N` walk its matches).
    filter: String,
    /// The blocks whose tool call is expanded.
    expanded: BTreeSet<usize>,
    /// The line under the cursor; `None`: the last one, following new lines.
    cursor: Option<usize>,
    /// Where the selection started (`v`).
    anchor: Option<usize>,
    /// The first row drawn, and how many rows the last frame had for lines.
    top: Cell<usize>,
    page: Cell<usize>,
    /// The last frame's lines and what they were laid out from: a frame with nothing new
    /// lays nothing out again.
    drawn: RefCell<Option<(u64, std::sync::Arc<Vec<Item>>)>>,
}

impl TranscriptScreen {
    pub fn new(run_id: String, title: String) -> Self {
        TranscriptScreen {
            run_id,
            title,
            entries: Vec::new(),
            result: None,
            filter: String::new(),
            expanded: BTreeSet::new(),
            cursor: None,
            anchor: None,
            top: Cell::new(0),
            page: Cell::new(0),
            drawn: RefCell::new(None),
        }
    }

    /// What the keys read: the transcript as it is now, the run's result block and the
    /// dashboard's filter.
    pub fn sync<'a>(
        &mut self,
        entries: impl IntoIterator<Item = &'a String>,
        result: Option<String>,
        filter: &str,
    ) {
        self.entries = entries.into_iter().cloned().collect();
        self.result = result;
        self.filter = filter.to_string();
    }

    /// The line under the cursor (of `count`).
    fn at(&self, count: usize) -> usize {
        self.cursor
            .unwrap_or(usize::MAX)
            .min(count.saturating_sub(1))
    }

    /// The selected lines (the cursor's alone without a selection), first to last.
    fn selected(&self, count: usize) -> std::ops::RangeInclusive<usize> {
        let at = self.at(count);
        let from = self.anchor.map_or(at, |a| a.min(count.saturating_sub(1)));
        from.min(at)..=from.max(at)
    }

    fn items<'a>(
        &self,
        entries: impl IntoIterator<Item = &'a String>,
        width: usize,
    ) -> (Vec<Block>, Vec<Item>) {
        let placed = blocks(entries);
        let items = layout(&placed, width, |i| self.expanded.contains(&i));
        (placed.into_iter().map(|p| p.block).collect(), items)
    }

    /// The lines of `entries` at `width`, laid out again only when the entries (their
    /// count, first and last), the width or the expanded calls changed since last time.
    fn drawn_items(
        &self,
        entries: &std::collections::VecDeque<String>,
        width: usize,
    ) -> std::sync::Arc<Vec<Item>> {
        let mut h = DefaultHasher::new();
        (
            entries.len(),
            entries.front(),
            entries.back(),
            width,
            &self.expanded,
        )
            .hash(&mut h);
        let key = h.finish();
        if let Some((at, items)) = self.drawn.borrow().as_ref()
            && *at == key
        {
            return items.clone();
        }
        let items = std::sync::Arc::new(self.items(entries, width).1);
        *self.drawn.borrow_mut() = Some((key, items.clone()));
        items
    }

    fn move_to(&mut self, to: usize, count: usize) {
        self.cursor = if count == 0 || to + 1 >= count {
            None
        } else {
            Some(to)
        };
    }

    fn copy(&mut self, items: &[Item]) -> Outcome {
        if items.is_empty() {
            return Outcome::stay_with(ViewCommand::Flash("the transcript is empty".into()));
        }
        let range = self.selected(items.len());
        let n = range.end() - range.start() + 1;
        let text = items[range]
            .iter()
            .map(|i| i.copy.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        self.anchor = None;
        Outcome::stay_with(ViewCommand::Copy {
            text,
            what: format!("{n} line{}", plural(n)),
        })
    }

    fn find(&mut self, items: &[Item], forward: bool) -> Outcome {
        let needle = self.filter.trim().to_lowercase();
        if needle.is_empty() {
            return Outcome::stay_with(ViewCommand::Flash(
                "no filter to find: / sets one, then n and N walk its matches here".into(),
            ));
        }
        let count = items.len();
        let at = self.at(count);
        let found = (1..=count)
            .map(|step| {
                if forward {
                    (at + step) % count
                } else {
                    (at + count * 2 - step) % count
                }
            })
            .find(|&i| items[i].copy.to_lowercase().contains(&needle));
        match found {
            Some(i) => {
                self.move_to(i, count);
                Outcome::stay()
            }
            None => Outcome::stay_with(ViewCommand::Flash(format!(
                "no line of the transcript matches \"{}\"",
                clip_width(&one_line(&self.filter), 40)
            ))),
        }
    }
}

impl View for TranscriptScreen {
    fn context(&self) -> Context {
        Context::Transcript
    }

    fn offers(&self, action: Action) -> bool {
        match action {
            Action::CopyResult => self.result.is_some(),
            Action::NextMatch | Action::PrevMatch => !self.filter.trim().is_empty(),
            _ => true,
        }
    }

    fn handle_key(&mut self, action: Option<Action>, _key: &KeyEvent) -> Outcome {
        let Some(action) = action else {
            return Outcome::stay();
        };
        let (blocks, items) = self.items(&self.entries, KEYS_WIDTH);
        let count = items.len();
        let at = self.at(count);
        let page = match self.page.get() {
            0 => PAGE_DEFAULT,
            rows => rows.saturating_sub(1).max(1),
        };
        match action {
            Action::Close if self.anchor.is_some() => self.anchor = None,
            Action::Close => return Outcome::close(),
            Action::SelectNext => self.move_to(at + 1, count),
            Action::SelectPrev => self.move_to(at.saturating_sub(1), count),
            Action::SelectFirst => self.move_to(0, count),
            Action::SelectLast => self.cursor = None,
            Action::PageDown => self.move_to(at + page, count),
            Action::PageUp => self.move_to(at.saturating_sub(page), count),
            Action::SelectLines => {
                self.anchor = match self.anchor {
                    Some(_) => None,
                    None if count > 0 => Some(at),
                    None => None,
                }
            }
            Action::ToggleTool => {
                let Some(item) = items.get(at) else {
                    return Outcome::stay();
                };
                let block = item.block;
                if !matches!(blocks.get(block), Some(Block::Tool { .. })) {
                    return Outcome::stay_with(ViewCommand::Flash(
                        "space expands a tool call: move the cursor to one (▸)".into(),
                    ));
                }
                if !self.expanded.remove(&block) {
                    self.expanded.insert(block);
                }
                // The cursor stays on the call's first line.
                let (_, items) = self.items(&self.entries, KEYS_WIDTH);
                let first = items.iter().position(|i| i.block == block).unwrap_or(at);
                self.anchor = None;
                self.move_to(first, items.len());
            }
            Action::Copy => return self.copy(&items),
            Action::CopyResult => {
                return match &self.result {
                    Some(text) => {
                        let n = text.lines().count();
                        Outcome::stay_with(ViewCommand::Copy {
                            text: text.clone(),
                            what: format!("the result block ({n} line{})", plural(n)),
                        })
                    }
                    None => Outcome::stay_with(ViewCommand::Flash(
                        "this run has no result block yet".into(),
                    )),
                };
            }
            Action::NextMatch => return self.find(&items, true),
            Action::PrevMatch => return self.find(&items, false),
            _ => {}
        }
        Outcome::stay()
    }

    fn wheel(&mut self, down: bool) {
        let count = self.items(&self.entries, KEYS_WIDTH).1.len();
        let at = self.at(count);
        if down {
            self.move_to(at + 3, count);
        } else {
            self.move_to(at.saturating_sub(3), count);
        }
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, context: &DrawContext<'_>) {
        let title = format!(
            "Transcript · {} ({})",
            clip_width(&one_line(&self.title), 40),
            self.run_id
        );
        let inner = view_box(buf, body, title);
        if inner.height < 2 || inner.width < 12 {
            return;
        }
        // Two columns of gutter: the cursor (›) and the selection (▌).
        let width = inner.width as usize - 2;
        let items = match context.model.run(&self.run_id) {
            Some(entry) => self.drawn_items(&entry.transcript, width),
            None => std::sync::Arc::new(self.items(&self.entries, width).1),
        };
        let count = items.len();
        let room = inner.height as usize - 1;
        self.page.set(room);
        let at = self.at(count);
        let selected = self.anchor.map(|_| self.selected(count));
        // Rows of every line, and where the cursor's line is.
        let mut rows: Vec<(usize, usize, &Line<'static>)> = Vec::new();
        let mut cursor_rows = (0, 0);
        for (i, item) in items.iter().enumerate() {
            if i == at {
                cursor_rows.0 = rows.len();
            }
            for (r, row) in item.rows.iter().enumerate() {
                rows.push((i, r, row));
            }
            if i == at {
                cursor_rows.1 = rows.len();
            }
        }
        let bottom = rows.len().saturating_sub(room);
        let mut top = if self.cursor.is_none() {
            bottom
        } else {
            self.top.get().min(bottom)
        };
        if cursor_rows.0 < top {
            top = cursor_rows.0;
        } else if cursor_rows.1 > top + room {
            top = (cursor_rows.1 - room).min(cursor_rows.0);
        }
        self.top.set(top);
        for (y, (i, r, row)) in rows.iter().skip(top).take(room).enumerate() {
            let in_selection = selected.as_ref().is_some_and(|s| s.contains(i));
            let mark = match (*i == at && *r == 0, in_selection) {
                (true, _) => Span::styled("›", theme::focus()),
                (false, true) => Span::styled("▌", theme::focus()),
                (false, false) => Span::raw(" "),
            };
            let mut spans = vec![mark, Span::raw(" ")];
            spans.extend(row.spans.iter().cloned());
            let mut line = Line::from(spans);
            if in_selection {
                line = line.patch_style(theme::selected());
            }
            put_line(buf, inner, y as u16, &line);
        }
        let status = if count == 0 {
            match context.model.run(&self.run_id) {
                Some(e) if !e.transcript_loaded => "reading…".to_string(),
                _ => "nothing yet".to_string(),
            }
        } else {
            let mut words = format!(
                "line {} of {count}{}",
                at + 1,
                if self.cursor.is_none() {
                    " · following"
                } else {
                    ""
                }
            );
            if let Some(s) = &selected {
                let n = s.end() - s.start() + 1;
                words.push_str(&format!(" · {n} line{} selected: y copies", plural(n)));
            }
            words
        };
        put_line(
            buf,
            inner,
            inner.height - 1,
            &Line::styled(clip_width(&status, inner.width as usize), theme::dim()),
        );
    }
}
