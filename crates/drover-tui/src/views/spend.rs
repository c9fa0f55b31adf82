//! The spend view (`$`): a bar chart of what each of the last 30 days cost, and tables by
//! model and by repository — `drover spend` on screen
//! (docs/ARCHITECTURE.md §"Spend over time"). Its three reads go to the owner as it opens
//! (`Request::Spend`), each answer drawn as it comes.
//!
//! What must stay true: dollars drawn are the known ones (reported and estimated); usage
//! that could not be priced is counted in rows beside them, never drawn as $0.

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Bar, BarChart, BarGroup, Cell, Row, Table, Widget};

use super::{DrawContext, Outcome, View};
use crate::canvas::{put_line, view_box};
use crate::event::ReplyTag;
use crate::keys::{Action, Context};
use crate::theme;
use drover_core::dispatch::Request;
use drover_core::dispatch::api::{SpendBy, SpendRow, SpendView};
use drover_core::money::usd;

/// Days the chart shows, today the last.
pub const CHART_DAYS: u32 = 30;
/// Rows each table shows at most (the largest spend first).
const TABLE_ROWS: usize = 12;

/// One read of the view: not answered yet, answered, or refused (why).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Read {
    #[default]
    Waiting,
    Got(SpendView),
    Failed(String),
}

/// The spend view: per day (the last [`CHART_DAYS`]), by model, by repository.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpendScreen {
    pub days: Read,
    pub models: Read,
    pub repositories: Read,
}

impl SpendScreen {
    /// The three reads to send as the view opens.
    pub fn requests() -> Vec<(ReplyTag, Request)> {
        let since = Some(format!("{}d", CHART_DAYS - 1));
        [SpendBy::Day, SpendBy::Model, SpendBy::Repository]
            .into_iter()
            .map(|by| {
                (
                    ReplyTag::Spend(by),
                    Request::Spend {
                        by,
                        since: since.clone(),
                    },
                )
            })
            .collect()
    }

    /// An answer to one of [`SpendScreen::requests`].
    pub fn answer(&mut self, by: SpendBy, read: Read) {
        match by {
            SpendBy::Day => self.days = read,
            SpendBy::Model => self.models = read,
            SpendBy::Repository => self.repositories = read,
            _ => {}
        }
    }
}

impl View for SpendScreen {
    fn context(&self) -> Context {
        Context::Help
    }

    fn handle_key(&mut self, action: Option<Action>, _key: &KeyEvent) -> Outcome {
        match action {
            Some(Action::Close) => Outcome::close(),
            _ => Outcome::stay(),
        }
    }

    fn offers(&self, action: Action) -> bool {
        action == Action::Close
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, _context: &DrawContext<'_>) {
        let inner = view_box(buf, body, format!("Spend · the last {CHART_DAYS} days"));
        if inner.height < 6 || inner.width < 20 {
            return;
        }
        let [summary, chart, tables] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Percentage(40),
            Constraint::Min(6),
        ])
        .areas(inner);
        match &self.days {
            Read::Waiting => put_line(
                buf,
                summary,
                0,
                &Line::styled("reading the ledger…", theme::dim()),
            ),
            Read::Failed(why) => {
                put_line(buf, summary, 0, &Line::styled(why.clone(), theme::error()))
            }
            Read::Got(view) => {
                put_line(buf, summary, 0, &Line::raw(totals(&view.total)));
                if let Some(peak) = view.rows.iter().max_by(|a, b| a.usd().total_cmp(&b.usd()))
                    && peak.usd() > 0.0
                {
                    put_line(
                        buf,
                        summary,
                        1,
                        &Line::styled(
                            format!("busiest day {} · {}", peak.key, usd(peak.usd())),
                            theme::dim(),
                        ),
                    );
                }
                bar_chart(view, chart, buf);
            }
        }
        let [models, repositories] =
            Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(tables);
        table("by model", &self.models, models, buf);
        table("by repository", &self.repositories, repositories, buf);
    }
}

/// `$12.40 spent (reported $10.00 · estimated $2.40) · 3 unpriced rows · 42 runs`.
fn totals(total: &SpendRow) -> String {
    let mut line = format!(
        "{} spent (reported {} · estimated {})",
        usd(total.usd()),
        usd(total.reported_usd),
        usd(total.estimated_usd)
    );
    if total.unpriced_rows > 0 {
        line.push_str(&format!(
            " · {} unpriced row{} (cost unknown)",
            total.unpriced_rows,
            drover_core::text::plural(total.unpriced_rows as usize)
        ));
    }
    line.push_str(&format!(
        " · {} run{}",
        total.runs,
        drover_core::text::plural(total.runs as usize)
    ));
    line
}

/// One bar a day, in cents, labelled with the day of the month.
fn bar_chart(view: &SpendView, area: Rect, buf: &mut Buffer) {
    let days: Vec<&SpendRow> = view
        .rows
        .iter()
        .rev()
        .take(CHART_DAYS as usize)
        .rev()
        .collect();
    if days.is_empty() || area.height < 3 {
        return;
    }
    let n = days.len() as u16;
    let width = (area.width.saturating_sub(n.saturating_sub(1)) / n).max(1);
    let bars: Vec<Bar> = days
        .iter()
        .map(|d| {
            let cents = (d.usd() * 100.0).round().max(0.0) as u64;
            Bar::default()
                .value(cents)
                .text_value(String::new())
                .label(Line::from(d.key.get(8..10).unwrap_or("").to_string()))
                .style(theme::focus())
        })
        .collect();
    BarChart::default()
        .data(BarGroup::default().bars(&bars))
        .bar_width(width)
        .bar_gap(1)
        .render(area, buf);
}

/// A table of groups: name, dollars, each basis, runs.
fn table(title: &str, read: &Read, area: Rect, buf: &mut Buffer) {
    if area.height < 2 {
        return;
    }
    put_line(
        buf,
        area,
        0,
        &Line::styled(title.to_string(), theme::title()),
    );
    let rest = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    let view = match read {
        Read::Waiting => {
            put_line(buf, rest, 0, &Line::styled("reading…", theme::dim()));
            return;
        }
        Read::Failed(why) => {
            put_line(buf, rest, 0, &Line::styled(why.clone(), theme::error()));
            return;
        }
        Read::Got(view) if view.rows.is_empty() => {
            put_line(buf, rest, 0, &Line::styled("nothing spent", theme::dim()));
            return;
        }
        Read::Got(view) => view,
    };
    let rows = view.rows.iter().take(TABLE_ROWS).map(|r| {
        Row::new(vec![
            Cell::from(r.key.clone()),
            Cell::from(usd(r.usd())),
            Cell::from(usd(r.reported_usd)),
            Cell::from(usd(r.estimated_usd)),
            Cell::from(if r.unpriced_rows == 0 {
                "-".to_string()
            } else {
                r.unpriced_rows.to_string()
            }),
            Cell::from(r.runs.to_string()),
        ])
    });
    Table::new(
        rows,
        [
            Constraint::Fill(1),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(8),
            Constraint::Length(5),
        ],
    )
    .header(
        Row::new(["", "spent", "reported", "estimated", "unpriced", "runs"]).style(theme::dim()),
    )
    .render(rest, buf);
}
