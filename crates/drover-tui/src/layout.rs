//! Where each part of the dashboard goes at a given terminal size. Pure, so drawing and
//! mouse hit-testing agree on every rectangle.
//!
//! Shape: two header lines (budget session, counts; the session gauge), the body split
//! into the trays (left) and the detail pane (right), the attention line (the oldest
//! request waiting for the user), the footer: one line of key hints, with the last
//! action's message wrapped above it when it is too long to share that line. The
//! left pane is 40 columns at 80 wide and grows to 45 % of wider terminals (at most 80).

use ratatui::layout::Rect;

/// Lines of the header.
pub const HEADER_LINES: u16 = 2;

/// The rectangles of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub body: Rect,
    /// The left pane with its right border.
    pub trays: Rect,
    /// Inside the left pane's border: the tray rows.
    pub trays_inner: Rect,
    /// The right pane (empty when the terminal is too narrow for it).
    pub detail: Rect,
    /// The line above the footer: the oldest pending request of any run (empty when the
    /// terminal has no line to spare for it).
    pub attention: Rect,
    pub footer: Rect,
}

impl Areas {
    /// The rectangles with a one-line footer.
    pub fn of(area: Rect) -> Areas {
        Areas::with_footer(area, 1)
    }

    /// The rectangles with a footer of `footer_lines` lines (at least one, while the
    /// screen has a line below the header; never more than leaves the body a line).
    pub fn with_footer(area: Rect, footer_lines: u16) -> Areas {
        let header_h = HEADER_LINES.min(area.height);
        let below_header = area.height - header_h;
        let footer_h = if below_header == 0 {
            0
        } else {
            footer_lines.clamp(1, below_header.saturating_sub(2).max(1))
        };
        // The attention line, when at least one body line is left beside it.
        let attention_h = u16::from(area.height > header_h + footer_h + 1);
        let body_h = area.height - header_h - footer_h - attention_h;
        let header = Rect::new(area.x, area.y, area.width, header_h);
        let body = Rect::new(area.x, area.y + header_h, area.width, body_h);
        let attention = Rect::new(area.x, area.y + header_h + body_h, area.width, attention_h);
        let footer = Rect::new(
            area.x,
            area.y + header_h + body_h + attention_h,
            area.width,
            footer_h,
        );
        let left_w = if area.width < 60 {
            area.width
        } else if area.width < 90 {
            40
        } else {
            (area.width * 45 / 100).clamp(40, 80)
        };
        let trays = Rect::new(body.x, body.y, left_w, body.height);
        // The border is one column on the right, when there is a detail pane.
        let has_detail = area.width > left_w;
        let trays_inner = Rect::new(
            trays.x,
            trays.y,
            trays.width.saturating_sub(u16::from(has_detail)),
            trays.height,
        );
        let detail = Rect::new(
            body.x + left_w,
            body.y,
            area.width.saturating_sub(left_w),
            body.height,
        );
        Areas {
            header,
            body,
            trays,
            trays_inner,
            detail,
            attention,
            footer,
        }
    }
}

/// A rectangle of `width`×`height` centred in `area` (shrunk to fit).
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panes_tile_the_screen_from_80x24_up() {
        for (w, h) in [(80, 24), (100, 30), (120, 40), (200, 60), (50, 10)] {
            let a = Areas::of(Rect::new(0, 0, w, h));
            assert_eq!(
                a.header.height + a.body.height + a.attention.height + a.footer.height,
                h
            );
            assert_eq!(a.attention.y + a.attention.height, a.footer.y, "{w}x{h}");
            assert_eq!(a.trays.width + a.detail.width, w, "{w}x{h}");
            assert!(a.trays_inner.width <= a.trays.width);
        }
        let a = Areas::of(Rect::new(0, 0, 80, 24));
        assert_eq!((a.trays.width, a.detail.width, a.body.height), (40, 40, 20));
        assert_eq!(a.attention.height, 1);
        let a = Areas::of(Rect::new(0, 0, 200, 60));
        assert_eq!(a.trays.width, 80);
    }
}
