//! Drawing: the header, the trays, the detail pane, the attention line, the footer and
//! the views on the stack, from the [`App`]'s plain state.
//!
//! What must stay true: drawing reads the view model and nothing else — no I/O, no
//! awaiting, no clock (`model.now` is set by the driver) — and only lays out what fits
//! on screen (a 2,000-line transcript costs the lines shown, not 2,000).

mod attention;
mod detail;
mod footer;
mod header;
mod overlays;
mod trays;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::app::App;
use super::layout::Areas;

pub use header::gauge_line;

/// Draws one frame of the dashboard.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let area = frame.area();
    let areas = Areas::of(area);
    let buf = frame.buffer_mut();
    header::draw(buf, areas.header, &app.model);
    trays::draw(buf, &areas, &app.model, &app.keys);
    if areas.detail.width > 0 {
        detail::draw(buf, areas.detail, &app.model);
    }
    attention::draw(buf, areas.attention, app);
    footer::draw(buf, areas.footer, app);
    for overlay in &app.overlays {
        overlays::draw(buf, areas.body, overlay, app);
    }
}

/// Writes `line` into one row of `area`, clipped to its width: a line cut short ends
/// in `…`, so clipped text always says so.
fn put_line(buf: &mut Buffer, area: Rect, row: u16, line: &Line<'_>) {
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
fn width_of(text: &str) -> usize {
    Line::raw(text).width()
}

/// Wraps `text` at `width` columns, between words where it can (a word longer than a
/// line is cut).
pub(super) fn wrap(text: &str, width: usize) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::wrap;

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
