//! Drawing: the header, the trays, the detail pane, the attention line, the footer, then
//! each view on the stack over the body, bottom first (each view draws itself:
//! [`crate::views::View::draw`]), from the [`App`]'s plain state.
//!
//! What must stay true: drawing reads the view model and nothing else — no I/O, no
//! awaiting, no clock (`model.now` is set by the loop) — and records only what it drew
//! (the attention line's request, each request in a prompt: [`crate::shown`]); it only
//! lays out what fits on screen (a 2,000-line transcript costs the lines shown, not
//! 2,000). Nothing here knows which views are on the stack.

mod attention;
mod detail;
mod footer;
mod header;
mod trays;

use ratatui::Frame;

use super::app::App;
use super::layout::Areas;
use super::views::DrawContext;

pub use header::gauge_line;

/// Draws one frame of the dashboard.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    app.shown().begin_frame();
    let area = frame.area();
    let areas = Areas::with_footer(area, app.model.footer_lines());
    let buf = frame.buffer_mut();
    header::draw(buf, areas.header, &app.model);
    trays::draw(buf, &areas, &app.model, &app.keys);
    if areas.detail.width > 0 {
        detail::draw(buf, areas.detail, &app.model);
    }
    attention::draw(buf, areas.attention, app);
    footer::draw(buf, areas.footer, app);
    let context = DrawContext {
        model: &app.model,
        keys: &app.keys,
        shown: app.shown(),
    };
    for view in app.views.iter() {
        view.draw(buf, areas.body, &context);
    }
}
