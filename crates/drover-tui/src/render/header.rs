//! The header: the budget session and the counts on the first line; the session gauge
//! (spent, reserved, warning mark, hard cap) on the second, coloured by level — or, while
//! the owner does not answer, that drover is not running and the dashboard reconnects; while
//! its ledger cannot write, why, and that new work waits for it.
//! The gauge's level is the owner's word as much as its numbers (a session it says is
//! past its warning reads so), so the header and a budget note never disagree.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::canvas::put_line;
use crate::model::ViewModel;
use crate::theme::{self, BudgetLevel};
use drover_core::dispatch::api::BudgetView;
use drover_core::money::usd;
use drover_core::text::one_line;

pub fn draw(buf: &mut Buffer, area: Rect, model: &ViewModel) {
    let counts = model.counts();
    let session = model
        .budget
        .as_ref()
        .map_or("default", |b| b.session.as_str());
    let mut first = vec![
        Span::styled(" drover", theme::brand()),
        Span::styled("  session ", theme::dim()),
        Span::styled(session.to_string(), theme::title()),
        Span::styled("   ", theme::dim()),
    ];
    // The trays' own counts, in the trays' order.
    let need_word = if counts.needs_you == 1 {
        "needs"
    } else {
        "need"
    };
    let needs = format!("{} {need_word} you", counts.needs_you);
    first.push(if counts.needs_you > 0 {
        Span::styled(needs, theme::attention())
    } else {
        Span::raw(needs)
    });
    for (n, word) in [
        (counts.running, "running"),
        (counts.idle, "idle"),
        (counts.queued, "queued"),
    ] {
        first.push(Span::styled(" · ", theme::dim()));
        first.push(Span::raw(format!("{n} {word}")));
    }
    if !model.filter.is_empty() {
        first.push(Span::styled(
            format!("   filter: {}", one_line(&model.filter)),
            theme::focus(),
        ));
    }
    put_line(buf, area, 0, &Line::from(first));
    if let Some(since) = model.owner_gone_since {
        let gone_for = crate::format::duration(model.now - since);
        put_line(
            buf,
            area,
            1,
            &Line::from(vec![
                Span::styled(" drover is not running — reconnecting", theme::attention()),
                Span::styled(
                    format!(" ({gone_for}; `drover serve --detach` starts it)"),
                    theme::dim(),
                ),
            ]),
        );
    } else if let Some(why) = &model.ledger_unavailable {
        put_line(
            buf,
            area,
            1,
            &Line::from(vec![
                Span::styled(" ledger cannot write (new work waits): ", theme::error()),
                Span::styled(one_line(why), theme::error()),
            ]),
        );
    } else if let Some(budget) = &model.budget {
        put_line(buf, area, 1, &gauge_line(budget, area.width as usize));
    } else {
        put_line(
            buf,
            area,
            1,
            &Line::styled(" budget: reading…", theme::dim()),
        );
    }
}

/// The session gauge: ` budget [███▒▒│░░░░] $3.20 spent · $4.00 reserved · warn $8.00 ·
/// cap $25.00`, with a word when the warning or the cap is reached.
pub fn gauge_line(budget: &BudgetView, width: usize) -> Line<'static> {
    let level = session_level(budget);
    let label = " budget ";
    let full = gauge_tail(budget, level, false);
    let full_width: usize = full.iter().map(Span::width).sum();
    // Narrow terminals get the short words, so the level is never cut off.
    let tail = if label.len() + 3 + 12 + full_width > width {
        gauge_tail(budget, level, true)
    } else {
        full
    };
    let tail_width: usize = tail.iter().map(Span::width).sum();
    // The bar takes what is left, between 10 and 40 cells.
    let bar_cells = width
        .saturating_sub(label.len() + 3 + tail_width)
        .clamp(10, 40);
    let mut spans = vec![
        Span::styled(label, theme::dim()),
        Span::styled("[", theme::dim()),
    ];
    spans.extend(bar(budget, bar_cells, level));
    spans.push(Span::styled("] ", theme::dim()));
    spans.extend(tail);
    Line::from(spans)
}

/// Where the session stands: by its numbers, and at least what the owner says it reached
/// (its warning note, its closing at the cap), so the gauge never disagrees with a note.
fn session_level(budget: &BudgetView) -> BudgetLevel {
    let flagged = if budget.closed {
        BudgetLevel::Cap
    } else if budget.warned {
        BudgetLevel::Warning
    } else {
        BudgetLevel::Normal
    };
    BudgetLevel::of(budget.spent_usd, budget.warning_usd, budget.hard_cap_usd).max(flagged)
}

/// The words after the bar: spent, reserved, the warning and the cap, and the level when
/// it is reached (short forms for narrow terminals).
fn gauge_tail(budget: &BudgetView, level: BudgetLevel, short: bool) -> Vec<Span<'static>> {
    let mut tail = vec![
        Span::styled(usd(budget.spent_usd), theme::gauge_spent(level)),
        Span::styled(if short { " + " } else { " spent · " }, theme::dim()),
        Span::raw(usd(budget.reserved_usd)),
        Span::styled(if short { " res · " } else { " reserved · " }, theme::dim()),
    ];
    if !short {
        tail.push(Span::styled("warn ", theme::dim()));
        tail.push(Span::raw(usd(budget.warning_usd)));
        tail.push(Span::styled(" · ", theme::dim()));
    }
    tail.push(Span::styled("cap ", theme::dim()));
    tail.push(Span::raw(usd(budget.hard_cap_usd)));
    match (level, short) {
        (BudgetLevel::Normal, _) => {}
        (BudgetLevel::Warning, false) => {
            tail.push(Span::styled(" ⚠ warning reached", theme::warning()))
        }
        (BudgetLevel::Warning, true) => tail.push(Span::styled(" ⚠ warning", theme::warning())),
        (BudgetLevel::Cap, false) => tail.push(Span::styled(
            " ■ hard cap reached: new runs are refused",
            theme::error_bold(),
        )),
        (BudgetLevel::Cap, true) => tail.push(Span::styled(" ■ at cap", theme::error_bold())),
    }
    tail
}

/// The bar's cells: spent `█`, reserved `▒`, free `░`, with the warning mark `│`.
fn bar(budget: &BudgetView, cells: usize, level: BudgetLevel) -> Vec<Span<'static>> {
    let cap = budget.hard_cap_usd.max(0.01);
    let cell_of = |usd: f64| -> usize {
        let f = (usd / cap).clamp(0.0, 1.0);
        (f * cells as f64).round() as usize
    };
    let spent = if budget.spent_usd > 0.0 {
        cell_of(budget.spent_usd).max(1)
    } else {
        0
    }
    .min(cells);
    let reserved_end = cell_of(budget.spent_usd + budget.reserved_usd)
        .max(spent)
        .min(cells);
    let warn_at = cell_of(budget.warning_usd).min(cells.saturating_sub(1));
    let mut spans = Vec::new();
    let mut run = String::new();
    let mut run_style = None;
    for i in 0..cells {
        let (ch, style) = if i == warn_at && i >= spent {
            ('│', theme::warning())
        } else if i < spent {
            ('█', theme::gauge_spent(level))
        } else if i < reserved_end {
            ('▒', theme::gauge_reserved())
        } else {
            ('░', theme::dim())
        };
        if run_style != Some(style) && !run.is_empty() {
            spans.push(Span::styled(
                std::mem::take(&mut run),
                run_style.unwrap_or_default(),
            ));
        }
        run_style = Some(style);
        run.push(ch);
    }
    if !run.is_empty() {
        spans.push(Span::styled(run, run_style.unwrap_or_default()));
    }
    spans
}
