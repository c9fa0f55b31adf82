//! Drawing primitives every part of the screen shares — the dashboard's panes and the
//! views on the stack alike: a line clipped to its row, text clipped and wrapped by
//! display width (a wide character takes two columns), and the bordered box a view draws
//! in.
//!
//! What must stay true: these only write into the [`Buffer`] they are given (no I/O, no
//! state); a line cut short ends in `…`, so clipped text always says so.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Widget};

use crate::theme;

/// Writes `line` into one row of `area`, clipped to its width: a line cut short ends
/// in `…`, so clipped text always says so.
pub fn put_line(buf: &mut Buffer, area: Rect, row: u16, line: &Line<'_>) {
    if row >= area.height || area.width == 0 {
        return;
    }
    buf.set_line(area.x, area.y + row, line, area.width);
    // Trailing blanks cut off say nothing; anything else cut off gets its mark.
    let shown: String = line
        .spans
        .iter()
        .map(|s| s.content.as_ref())
        .collect::<String>()
        .trim_end()
        .to_string();
    if width_of(&shown) > area.width as usize {
        let x = area.x + area.width - 1;
        buf[(x, area.y + row)].set_symbol("…");
    }
}

/// Display width of a string (the terminal's columns).
pub fn width_of(text: &str) -> usize {
    Line::raw(text).width()
}

/// `text` cut to at most `cols` terminal columns (display width: a CJK character or an
/// emoji takes two), ending in `…` when something was cut.
pub fn clip_width(text: &str, cols: usize) -> String {
    if width_of(text) <= cols {
        return text.to_string();
    }
    if cols == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for ch in text.chars() {
        let w = width_of(ch.encode_utf8(&mut [0; 4]));
        if used + w > cols - 1 {
            break;
        }
        out.push(ch);
        used += w;
    }
    let mut out = out.trim_end().to_string();
    out.push('…');
    out
}

/// Wraps `text` at `width` columns, between words where it can (a word longer than a
/// line is cut).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    let mut line = String::new();
    let mut line_w = 0;
    for word in text.split_inclusive(' ') {
        let word_w = width_of(word);
        let bare_w = width_of(word.trim_end_matches(' '));
        if line_w > 0 && line_w + bare_w > width {
            out.push(std::mem::take(&mut line).trim_end().to_string());
            line_w = 0;
        }
        if word_w <= width.saturating_sub(line_w) || bare_w <= width.saturating_sub(line_w) {
            line.push_str(word);
            line_w += word_w;
            continue;
        }
        // Longer than a line: cut it.
        for ch in word.chars() {
            let w = width_of(ch.encode_utf8(&mut [0; 4]));
            if line_w + w > width {
                out.push(std::mem::take(&mut line));
                line_w = 0;
            }
            line.push(ch);
            line_w += w;
        }
    }
    out.push(line.trim_end().to_string());
    out
}

/// The box a view on the stack draws in: clears `area`, draws a titled border, returns
/// the inside (less a margin of one column on each side).
pub fn view_box(buf: &mut Buffer, area: Rect, title: String) -> Rect {
    Clear.render(area, buf);
    let block = Block::bordered()
        .border_style(theme::overlay_border())
        .title(Span::styled(format!(" {title} "), theme::title()));
    let inner = block.inner(area);
    block.render(area, buf);
    Rect::new(
        inner.x + 1,
        inner.y,
        inner.width.saturating_sub(2),
        inner.height,
    )
}

#[cfg(test)]
mod tests {
    use super::{clip_width, width_of, wrap};

    #[test]
    fn clipping_counts_columns_not_characters() {
        assert_eq!(clip_width("short", 10), "short");
        assert_eq!(clip_width("abcdefghij", 5), "abcd…");
        let wide = "修复登录页面的重定向";
        let cut = clip_width(wide, 9);
        assert_eq!(cut, "修复登录…");
        assert!(width_of(&cut) <= 9);
        for cols in 0..12 {
            assert!(
                width_of(&clip_width("🚀🚀🚀 go 修复", cols)) <= cols,
                "{cols}"
            );
        }
    }

    #[test]
    fn wrapping_breaks_between_words_and_cuts_only_long_ones() {
        assert_eq!(
            wrap("clamped: budget $40.00 to $25.00", 20),
            ["clamped: budget", "$40.00 to $25.00"]
        );
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 4), [""]);
        for text in ["a b c d e f g", "one twothreefour five", "  lead"] {
            for piece in wrap(text, 5) {
                assert!(piece.chars().count() <= 5, "{text:?} → {piece:?}");
            }
        }
    }
}
