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

/// Writes `line` into one row of `area`, clipped to its width.
fn put_line(buf: &mut Buffer, area: Rect, row: u16, line: &Line<'_>) {
    if row >= area.height || area.width == 0 {
        return;
    }
    buf.set_line(area.x, area.y + row, line, area.width);
}

/// Display width of a string (the terminal's columns).
fn width_of(text: &str) -> usize {
    Line::raw(text).width()
}
