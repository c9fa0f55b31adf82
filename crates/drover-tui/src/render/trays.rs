//! The left pane: tray headings and two lines per run — glyph, title, provider/model and
//! the cost/cap mini gauge; then the live line and, for a worktree run, its change
//! (`+12 −3 · 4 files`). Titles are cut by display width and the money is right-aligned
//! in a fixed width, so the columns line up whatever the title's script or the spend.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Widget};

use crate::canvas::{clip_width, put_line, width_of};
use crate::format;
use crate::keys::{Action, Context, KeyTable};
use crate::layout::Areas;
use crate::model::{Pane, Row, RunEntry, Tray, ViewModel};
use crate::theme;
use drover_core::dispatch::api::{SearchHit, SearchSource};
use drover_core::money::usd;
use drover_core::text::{one_line, provider_model};

pub fn draw(buf: &mut Buffer, areas: &Areas, model: &ViewModel, keys: &KeyTable) {
    if areas.detail.width > 0 {
        // The border between the panes is heavy while the detail pane has the focus.
        let (kind, style) = match model.focus {
            Pane::Detail => (BorderType::Thick, theme::focus()),
            Pane::List => (BorderType::Plain, theme::pane_border()),
        };
        Block::new()
            .borders(Borders::RIGHT)
            .border_type(kind)
            .border_style(style)
            .render(areas.trays, buf);
    }
    let area = areas.trays_inner;
    if model.rows().is_empty() {
        empty(buf, area, model, keys);
        return;
    }
    let mut y: u16 = 0;
    for row in model.rows().iter().skip(model.list_top) {
        if y >= area.height {
            break;
        }
        match row {
            Row::Header(tray, count) => {
                put_line(buf, area, y, &header(*tray, *count, area.width as usize));
                y += 1;
            }
            Row::Run(id) => {
                let Some(entry) = model.run(id) else {
                    continue;
                };
                let selected = model.selected() == Some(id.as_str());
                let indent = model.indent(id);
                let (first, mut second) = run_lines(entry, model.now, area.width as usize, indent);
                if let Some(hit) = model.found_line(id) {
                    second = found_line(hit, area.width as usize, indent);
                }
                put_line(buf, area, y, &first);
                put_line(buf, area, y + 1, &second);
                if selected {
                    let rows = 2.min(area.height - y);
                    buf.set_style(
                        Rect::new(area.x, area.y + y, area.width, rows),
                        theme::selected(),
                    );
                }
                y += 2;
            }
        }
    }
}

fn empty(buf: &mut Buffer, area: Rect, model: &ViewModel, keys: &KeyTable) {
    let lines: Vec<Line<'static>> = if model.run_count() == 0 {
        let key = keys
            .key_for(Context::Dashboard, Action::NewDispatch)
            .map_or_else(|| "n".to_string(), |k| k.to_string());
        vec![
            Line::styled(" No runs yet.", theme::title()),
            Line::from(vec![
                Span::styled(" Press ", theme::dim()),
                Span::styled(key, theme::key()),
                Span::styled(" to dispatch one.", theme::dim()),
            ]),
        ]
    } else {
        vec![Line::styled(
            format!(" No run matches “{}”.", one_line(&model.filter)),
            theme::dim(),
        )]
    };
    for (i, line) in lines.iter().enumerate() {
        put_line(buf, area, 1 + i as u16, line);
    }
}

fn header(tray: Tray, count: usize, width: usize) -> Line<'static> {
    let style = if tray == Tray::NeedsYou {
        theme::attention()
    } else {
        theme::title()
    };
    let text = format!(" {} ({count}) ", tray.title());
    let rule = "─".repeat(width.saturating_sub(width_of(&text) + 1));
    Line::from(vec![
        Span::styled(text, style),
        Span::styled(rule, theme::pane_border()),
    ])
}

/// A run's second line while the filter found it in the search index: where the line
/// comes from and the words around the match, each match highlighted.
pub fn found_line(hit: &SearchHit, width: usize, indent: usize) -> Line<'static> {
    let lead = 3 + if indent == 0 { 0 } else { 2 * indent };
    let room = width.saturating_sub(lead + 1);
    // A tool call's line says so itself (`tool Bash: …`).
    let label = match hit.source {
        SearchSource::Tool => String::new(),
        source => format!("{}: ", source.as_str().replace('_', "-")),
    };
    let mut spans = vec![
        Span::raw(" ".repeat(lead)),
        Span::styled(label, theme::dim()),
    ];
    let mut used = width_of(&spans[1].content);
    // The first match is shown whatever comes before it: a long lead-in is cut to its
    // last few words (`…`).
    let mut at = 0;
    if let Some(&(start, end)) = hit.marks.first()
        && used + hit.line.get(..end).map_or(0, width_of) > room
    {
        let keep = hit.line[..start]
            .char_indices()
            .rev()
            .nth(LEAD_IN_CHARS)
            .map_or(0, |(i, _)| i);
        if keep > 0 {
            spans.push(Span::styled("…", theme::dim()));
            used += 1;
            at = keep;
        }
    }
    let mut push = |spans: &mut Vec<Span<'static>>, text: &str, style: ratatui::style::Style| {
        if used >= room || text.is_empty() {
            return;
        }
        let piece = clip_width(text, room - used);
        used += width_of(&piece);
        spans.push(Span::styled(piece, style));
    };
    for &(start, end) in &hit.marks {
        let (Some(before), Some(word)) = (hit.line.get(at..start), hit.line.get(start..end)) else {
            continue;
        };
        push(&mut spans, before, theme::text());
        push(&mut spans, word, theme::attention());
        at = end;
    }
    push(
        &mut spans,
        hit.line.get(at..).unwrap_or_default(),
        theme::text(),
    );
    Line::from(spans)
}

/// Characters of a found line kept before its first match when the line must be cut.
const LEAD_IN_CHARS: usize = 12;

/// The two lines of a run's row; a sub-run's are indented `indent` steps under its
/// parent's (`↳` before its glyph).
pub fn run_lines(
    entry: &RunEntry,
    now: drover_core::UnixMillis,
    width: usize,
    indent: usize,
) -> (Line<'static>, Line<'static>) {
    let lead = if indent == 0 {
        String::new()
    } else {
        format!("{}↳ ", "  ".repeat(indent - 1))
    };
    let lead_w = width_of(&lead);
    let width = width.saturating_sub(lead_w);
    let run = &entry.summary;
    let (glyph, glyph_style) = format::glyph(run);
    let fraction = if run.head.budget_usd > 0.0 {
        run.head.cost_usd / run.head.budget_usd
    } else {
        0.0
    };
    // Right side: cost/cap and the mini gauge; provider/model when there is room. The
    // money is right-aligned in a fixed width, so the provider column stays put whatever
    // a run has spent (up to $99.99 of $99.99).
    let money = if width >= 50 {
        let spent = format!("{}/{}", usd(run.head.cost_usd), usd(run.head.budget_usd));
        format!("{spent:>13} {}", format::mini_bar(fraction, 5))
    } else {
        format!(
            "{:>6} {}",
            usd(run.head.cost_usd),
            format::mini_bar(fraction, 3)
        )
    };
    let provider = provider_model(&run.head.provider, run.head.model.as_deref());
    let show_provider = width >= 70;
    let right_width = width_of(&money)
        + if show_provider {
            width_of(&provider) + 2
        } else {
            0
        };
    let title_room = width.saturating_sub(3 + right_width + 2);
    let title = clip_width(&one_line(&run.head.title), title_room);
    let pad = width.saturating_sub(3 + width_of(&title) + right_width + 1);
    let mut first = vec![
        Span::raw(" "),
        Span::styled(lead, theme::dim()),
        Span::styled(glyph, glyph_style),
        Span::raw(" "),
        Span::styled(title, theme::title()),
        Span::raw(" ".repeat(pad)),
    ];
    if show_provider {
        first.push(Span::styled(provider, theme::dim()));
        first.push(Span::raw("  "));
    }
    let money_style = if fraction >= 1.0 {
        theme::error()
    } else if fraction >= 0.8 {
        theme::warning()
    } else {
        theme::dim()
    };
    first.push(Span::styled(money, money_style));

    let mut second = vec![Span::raw(" ".repeat(3 + lead_w))];
    let stalled = if run.head.stalled { " · stalled" } else { "" };
    // A run whose CLI is confined says so (docs/ARCHITECTURE.md §"The sandbox").
    let sandbox = if run.sandbox { " · ⊡ sandbox" } else { "" };
    // And a run on another host names it (docs/ARCHITECTURE.md §"Hosts").
    let host = run
        .head
        .host
        .as_deref()
        .map(|h| format!(" · @{h}"))
        .unwrap_or_default();
    // The run's change, right-aligned: `+12 −3 · 4 files` (the counts alone when narrow).
    let state_w = width_of(&format::state_words(
        run.head.state,
        run.head.completion_reason.as_deref(),
    ));
    let change: Vec<Span<'static>> = run
        .workspace
        .as_ref()
        .filter(|w| w.has_worktree())
        .and_then(|w| w.change)
        .filter(|c| !c.is_empty())
        .map(|c| {
            let mut spans = vec![
                Span::styled(format!("+{}", c.added), theme::diff_added()),
                Span::raw(" "),
                Span::styled(format!("−{}", c.removed), theme::diff_removed()),
            ];
            // The file count too, when there is room: beside a live line from 50 columns,
            // beside a finished run's state words when they fit.
            let files = format!(
                " · {} file{}",
                c.files,
                drover_core::text::plural(c.files as usize)
            );
            let counts_w: usize = spans.iter().map(Span::width).sum();
            let fits = if run.head.state.is_active() {
                width >= 50
            } else {
                3 + state_w + 1 + counts_w + width_of(&files) < width
            };
            if fits {
                spans.push(Span::styled(files, theme::dim()));
            }
            spans
        })
        .unwrap_or_default();
    // The run's pull request before its change: `PR #7 · open · checks 3/4`.
    let change: Vec<Span<'static>> = match run.workspace.as_ref().and_then(|w| w.pr.as_ref()) {
        Some(pr) => {
            let mut spans = vec![Span::styled(pr.words(), pr_style(pr))];
            if !change.is_empty() {
                // The counts alone beside it (the detail has the files).
                spans.push(Span::styled(" · ", theme::dim()));
                spans.extend(change.into_iter().take(3));
            }
            spans
        }
        None => change,
    };
    let change_w: usize = change.iter().map(Span::width).sum();
    let room = width.saturating_sub(
        3 + stalled.len()
            + width_of(sandbox)
            + width_of(&host)
            + if change_w > 0 { change_w + 2 } else { 0 },
    );
    match &run.head.live_state {
        Some(live) if run.head.state.is_active() => {
            second.extend(format::run_live_line(run, live, now, room))
        }
        _ => second.push(Span::styled(
            format::state_words(run.head.state, run.head.completion_reason.as_deref()),
            theme::dim(),
        )),
    }
    if run.sandbox {
        second.push(Span::styled(sandbox, theme::dim()));
    }
    if !host.is_empty() {
        second.push(Span::styled(host, theme::dim()));
    }
    if run.head.stalled {
        second.push(Span::styled(stalled, theme::warning()));
    }
    if change_w > 0 {
        let used: usize = second.iter().map(Span::width).sum();
        second.push(Span::raw(" ".repeat(
            (width + lead_w).saturating_sub(used + change_w + 1).max(1),
        )));
        second.extend(change);
    }
    (Line::from(first), Line::from(second))
}

/// A pull request's words: failed checks warn, merged and closed are dim.
pub(super) fn pr_style(pr: &drover_core::workspace::forge::PrView) -> ratatui::style::Style {
    use drover_core::workspace::forge::PrState;
    match pr.state {
        PrState::Open if pr.checks.is_some_and(|c| c.failed > 0) => theme::warning(),
        PrState::Open => theme::success(),
        PrState::Merged | PrState::Closed => theme::dim(),
    }
}
