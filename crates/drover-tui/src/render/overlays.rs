//! The views on the stack, drawn over the body: permission prompt and question, the
//! dispatch form, text boxes, confirmations and help.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Widget};

use super::{put_line, width_of, wrap};
use crate::app::App;
use crate::format;
use crate::keys::Context;
use crate::layout::centered;
use crate::theme;
use crate::views::diff::{DiffScreen, DiffState};
use crate::views::form::{AUTO_MODEL, DispatchForm, Field};
use crate::views::prompt::{PromptMode, PromptState, PromptView, questions};
use crate::views::route::{RouteState, RouteView};
use crate::views::{ConfirmView, HelpView, InputBox, InputPurpose, Overlay};
use drover_core::money::usd;
use drover_core::text::{clip, one_line};

pub fn draw(buf: &mut Buffer, body: Rect, overlay: &Overlay, app: &App) {
    match overlay {
        Overlay::Prompt(p) => prompt(buf, body, p, app),
        Overlay::Route(r) => route(buf, body, r, app),
        Overlay::Diff(d) => diff(buf, body, d),
        Overlay::Form(f) => form(buf, body, f),
        Overlay::Input(i) => input(buf, body, i),
        Overlay::Confirm(c) => confirm(buf, body, c),
        Overlay::Help(h) => help(buf, body, h, app),
    }
}

/// Clears `area`, draws a titled border, returns the inside.
fn frame(buf: &mut Buffer, area: Rect, title: String) -> Rect {
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

fn prompt(buf: &mut Buffer, body: Rect, view: &PromptView, app: &App) {
    let model = &app.model;
    let total = model.pending_total().max(1);
    let title_of_run = model
        .run(&view.run_id)
        .map(|e| clip(&one_line(&e.summary.head.title), 40))
        .unwrap_or_default();
    let kind = if view.is_question() {
        "Question"
    } else {
        "Permission"
    };
    let outer_w = body.width.saturating_sub(4).min(110);
    // Inside: the border and a margin of one column on each side.
    let width = outer_w.saturating_sub(4) as usize;
    // Fixed lines at the top and bottom; the input (or the question) scrolls between.
    let mut head: Vec<Line<'static>> = Vec::new();
    let mut body_lines: Vec<Line<'static>> = Vec::new();
    let mut foot: Vec<Line<'static>> = Vec::new();
    let request = &view.request;
    if let Some(reason) = view.flagged() {
        // The guard's banner: red, above everything, with the reason.
        let text = format!(" ⚠ flagged: {} ", one_line(reason));
        for l in wrap(&text, width) {
            head.push(Line::styled(l, theme::danger_banner()));
        }
        head.push(Line::styled(
            "no rule or \"always\" answers this: allowing it takes y, then y again",
            theme::error(),
        ));
    }
    if view.is_question() {
        head.push(Line::from(vec![
            Span::styled("The run asks you", theme::attention()),
            Span::styled(format!(" (via {})", request.tool), theme::dim()),
        ]));
        let current = view.current_question();
        for q in questions(request) {
            let answered = view.answers.get(&q.question);
            let is_current = current.as_ref().is_some_and(|c| c.question == q.question);
            if let Some(h) = &q.header {
                body_lines.push(Line::styled(one_line(h), theme::dim()));
            }
            for (i, l) in wrap(&one_line(&q.question), width).into_iter().enumerate() {
                body_lines.push(Line::styled(
                    l,
                    if i == 0 && is_current {
                        theme::title()
                    } else {
                        theme::text()
                    },
                ));
            }
            for (i, option) in q.options.iter().enumerate() {
                let mut spans = vec![
                    Span::styled(format!("  {} ", i + 1), theme::key()),
                    Span::styled(one_line(&option.label), theme::focus()),
                ];
                if let Some(d) = &option.description {
                    spans.push(Span::styled(format!(" — {}", one_line(d)), theme::dim()));
                }
                body_lines.push(Line::from(spans));
            }
            if let Some(a) = answered {
                body_lines.push(Line::styled(
                    format!("  answered: {}", one_line(a)),
                    theme::success(),
                ));
            }
            body_lines.push(Line::raw(""));
        }
    } else {
        head.push(Line::from(vec![
            Span::styled(request.tool.clone(), theme::attention()),
            Span::styled(" wants to run with this input:", theme::text()),
        ]));
        let fields = format::ask_fields(&request.ask);
        let key_w = fields
            .iter()
            .map(|(k, _)| width_of(k))
            .max()
            .unwrap_or(0)
            .min(16);
        for (key, value) in fields {
            let room = width.saturating_sub(key_w + 4);
            let mut first = true;
            for raw in &value {
                for piece in wrap(raw, room) {
                    let label = if first {
                        format!("  {key:<key_w$}  ")
                    } else {
                        " ".repeat(key_w + 4)
                    };
                    first = false;
                    body_lines.push(Line::from(vec![
                        Span::styled(label, theme::dim()),
                        Span::raw(piece),
                    ]));
                }
            }
        }
        // A flagged request is never allowed "always": the offer is not shown.
        if let Some(always) = request.always.as_ref().filter(|_| view.flagged().is_none()) {
            body_lines.push(Line::raw(""));
            body_lines.push(Line::styled("allow always:", theme::dim()));
            for piece in wrap(&one_line(&always.sentence), width.saturating_sub(2)) {
                body_lines.push(Line::raw(format!("  {piece}")));
            }
        }
    }
    let expired = request.expires_at < model.now;
    foot.push(Line::from(vec![
        Span::styled(
            format::countdown(request.expires_at, model.now),
            if expired {
                theme::error()
            } else {
                theme::attention()
            },
        ),
        Span::styled(
            format!(
                " to answer (then denied) · asked {} ago · request {}",
                format::duration(model.now - request.created_at),
                request.request_id
            ),
            theme::dim(),
        ),
    ]));
    match &view.state {
        PromptState::Open => {}
        PromptState::Sending(how) => {
            foot.push(Line::styled(format!("sending: {how}…"), theme::focus()))
        }
        PromptState::Gone(why) => {
            for l in wrap(why, width) {
                foot.push(Line::styled(l, theme::error_bold()));
            }
        }
        PromptState::Failed(why) => {
            for l in wrap(why, width) {
                foot.push(Line::styled(l, theme::error()));
            }
        }
    }
    match &view.mode {
        PromptMode::Keys => {}
        PromptMode::DenyMessage(field) => {
            foot.push(Line::from(vec![
                Span::styled("deny, telling the model: ", theme::attention()),
                Span::raw(field.visible(width.saturating_sub(26))),
                Span::styled("▏", theme::focus()),
            ]));
        }
        PromptMode::FreeText(field) => {
            foot.push(Line::from(vec![
                Span::styled("your answer: ", theme::attention()),
                Span::raw(field.visible(width.saturating_sub(14))),
                Span::styled("▏", theme::focus()),
            ]));
        }
        PromptMode::ConfirmAllow => {
            foot.push(Line::styled(
                "Allow this flagged request once? y again allows it · any other key takes it back",
                theme::danger_banner(),
            ));
        }
        PromptMode::Rule(chooser) => {
            foot.push(Line::styled(
                "Save a rule and answer this request with it",
                theme::title(),
            ));
            let scopes: Vec<Span<'static>> = drover_core::rules::Scope::ALL
                .into_iter()
                .flat_map(|s| {
                    let words = match s {
                        drover_core::rules::Scope::Run => "this run",
                        drover_core::rules::Scope::Repository => "this repository",
                        drover_core::rules::Scope::Everywhere => "everywhere",
                    };
                    let style = if s == chooser.scope {
                        theme::selected()
                    } else {
                        theme::dim()
                    };
                    [Span::styled(format!(" {words} "), style), Span::raw(" ")]
                })
                .collect();
            let mut line = vec![Span::styled("  scope    ", theme::dim())];
            line.extend(scopes);
            foot.push(Line::from(line));
            foot.push(Line::from(vec![
                Span::styled("  decision ", theme::dim()),
                Span::styled(
                    format!(" {}", chooser.decision.as_str()),
                    match chooser.decision {
                        drover_core::rules::RuleDecision::Allow => theme::success(),
                        drover_core::rules::RuleDecision::Deny => theme::error(),
                    },
                ),
                Span::styled(format!("  ({})", chooser.kind.as_str()), theme::dim()),
            ]));
            foot.push(Line::from(vec![
                Span::styled("  pattern  ", theme::dim()),
                Span::raw(chooser.pattern.visible(width.saturating_sub(12))),
                Span::styled("▏", theme::focus()),
            ]));
            foot.push(Line::styled(
                "  tab scope · shift-tab allow/deny · type to edit · enter save and answer · esc back",
                theme::dim(),
            ));
        }
    }
    // As tall as the content (plus the scroll line), at most the body.
    let wanted = (head.len() + body_lines.len() + foot.len() + 2) as u16 + 2;
    let area = centered(body, outer_w, wanted.clamp(10, body.height.max(1)));
    let inner = frame(
        buf,
        area,
        format!(
            "{kind} · {title_of_run} ({}) · {total} pending",
            view.run_id
        ),
    );
    let height = inner.height as usize;
    let room = height.saturating_sub(head.len() + foot.len() + 1);
    let max_scroll = body_lines.len().saturating_sub(room);
    let scroll = (view.scroll as usize).min(max_scroll);
    let mut y = 0u16;
    for line in &head {
        put_line(buf, inner, y, line);
        y += 1;
    }
    for line in body_lines.iter().skip(scroll).take(room) {
        put_line(buf, inner, y, line);
        y += 1;
    }
    let more_below = body_lines.len() > scroll + room;
    let indicator = match (scroll > 0, more_below) {
        (false, false) => String::new(),
        (true, false) => format!("↑ {scroll} more above (k to scroll)"),
        (false, true) => format!(
            "↓ {} more below (j to scroll)",
            body_lines.len() - scroll - room
        ),
        (true, true) => format!(
            "↑ {scroll} above · ↓ {} below (j/k to scroll)",
            body_lines.len() - scroll - room
        ),
    };
    let foot_y = inner.height.saturating_sub(foot.len() as u16 + 1);
    put_line(buf, inner, foot_y, &Line::styled(indicator, theme::focus()));
    for (i, line) in foot.iter().enumerate() {
        put_line(buf, inner, foot_y + 1 + i as u16, line);
    }
}

/// A price per million tokens, or what stands for one.
fn price(option: &drover_core::route::RouteOption) -> String {
    if option.free {
        return "free".to_string();
    }
    match (option.input_per_mtok, option.output_per_mtok) {
        (Some(i), Some(o)) => format!("{} / {} per Mtok", usd(i), usd(o)),
        (Some(i), None) => format!("{} in per Mtok", usd(i)),
        (None, Some(o)) => format!("{} out per Mtok", usd(o)),
        (None, None) => "no price".to_string(),
    }
}

/// A context window in tokens: `200k ctx`, `1M ctx`.
fn context_words(tokens: Option<u64>) -> String {
    match tokens {
        None => "context ?".to_string(),
        Some(t) => format!("{} ctx", drover_core::route::tokens_short(t)),
    }
}

fn route(buf: &mut Buffer, body: Rect, view: &RouteView, app: &App) {
    let model = &app.model;
    let title_of_run = model
        .run(&view.run_id)
        .map(|e| clip(&one_line(&e.summary.head.title), 40))
        .unwrap_or_default();
    let outer_w = body.width.saturating_sub(4).min(110);
    let width = outer_w.saturating_sub(4) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut foot: Vec<Line<'static>> = Vec::new();
    match &view.card {
        None => lines.push(Line::styled("loading the route card…", theme::dim())),
        Some(card) => {
            lines.push(Line::from(vec![
                Span::styled("Pick a model for this run", theme::attention()),
                Span::styled(
                    format!(" (task class: {}; ranked, best first)", card.class),
                    theme::dim(),
                ),
            ]));
            lines.push(Line::raw(""));
            let name_w = card
                .options
                .iter()
                .map(|o| width_of(&format!("{}/{}", o.provider, o.model)))
                .max()
                .unwrap_or(0)
                .min(36);
            for (i, o) in card.options.iter().enumerate() {
                let highlighted = i == view.selected;
                let name = clip(&format!("{}/{}", o.provider, o.model), name_w);
                let mut spans = vec![
                    Span::styled(if highlighted { "› " } else { "  " }, theme::focus()),
                    Span::styled(format!("{} ", o.number), theme::key()),
                    Span::styled(if o.recommended { "★ " } else { "  " }, theme::attention()),
                    Span::styled(
                        format!("{name:<name_w$}"),
                        if highlighted {
                            theme::selected()
                        } else {
                            theme::text()
                        },
                    ),
                    Span::styled(format!("  {:<8}", o.tier), theme::dim()),
                    Span::styled(
                        format!("  {}", price(o)),
                        if o.free {
                            theme::success()
                        } else {
                            theme::text()
                        },
                    ),
                    Span::styled(
                        format!("  {}", context_words(o.context_window)),
                        theme::dim(),
                    ),
                ];
                if o.vision {
                    spans.push(Span::styled("  vision", theme::dim()));
                }
                lines.push(Line::from(spans));
                let reason = if o.recommended {
                    format!("recommended · {}", one_line(&o.reason))
                } else {
                    one_line(&o.reason)
                };
                for piece in wrap(&reason, width.saturating_sub(8)) {
                    lines.push(Line::styled(format!("        {piece}"), theme::dim()));
                }
            }
            if !card.left_out.is_empty() {
                lines.push(Line::raw(""));
                lines.push(Line::styled("not offered:", theme::dim()));
                for l in &card.left_out {
                    let text = format!("{} — {}", l.provider, one_line(&l.reason));
                    for piece in wrap(&text, width.saturating_sub(2)) {
                        lines.push(Line::styled(format!("  {piece}"), theme::dim()));
                    }
                }
            }
            lines.push(Line::raw(""));
            lines.push(Line::from(vec![
                Span::styled(if view.remember { "[x]" } else { "[ ]" }, theme::focus()),
                Span::styled(
                    format!(" remember this pick for {} tasks", card.class),
                    theme::text(),
                ),
            ]));
            let expired = card.expires_at < model.now;
            foot.push(Line::from(vec![
                Span::styled(
                    format::countdown(card.expires_at, model.now),
                    if expired {
                        theme::error()
                    } else {
                        theme::attention()
                    },
                ),
                Span::styled(
                    format!(
                        " to pick (then the run is stopped) · held {} · card {}",
                        format::duration(model.now - card.created_at),
                        card.route_id
                    ),
                    theme::dim(),
                ),
            ]));
        }
    }
    if view.confirm_decline {
        foot.push(Line::styled(
            "press d again to decline: the run is stopped (route_declined)",
            theme::warning(),
        ));
    }
    match &view.state {
        RouteState::Open => {}
        RouteState::Sending(what) => {
            foot.push(Line::styled(format!("sending: {what}…"), theme::focus()))
        }
        RouteState::Refused(why) => {
            for (i, l) in wrap(&format!("pick refused: {why}"), width)
                .into_iter()
                .enumerate()
            {
                foot.push(Line::styled(
                    l,
                    if i == 0 {
                        theme::error_bold()
                    } else {
                        theme::error()
                    },
                ));
            }
        }
        RouteState::Gone(why) => {
            for l in wrap(why, width) {
                foot.push(Line::styled(l, theme::error_bold()));
            }
        }
    }
    let wanted = (lines.len() + foot.len() + 1) as u16 + 2;
    let area = centered(body, outer_w, wanted.clamp(8, body.height.max(1)));
    let inner = frame(
        buf,
        area,
        format!("Route card · {title_of_run} ({})", view.run_id),
    );
    let room = (inner.height as usize).saturating_sub(foot.len() + 1);
    for (y, line) in lines.iter().take(room).enumerate() {
        put_line(buf, inner, y as u16, line);
    }
    let foot_y = inner.height.saturating_sub(foot.len() as u16);
    for (i, line) in foot.iter().enumerate() {
        put_line(buf, inner, foot_y + i as u16, line);
    }
}

/// `path` in at most `width` columns: its end kept (the file name), `…` in front.
fn path_fit(path: &str, width: usize) -> String {
    if width_of(path) <= width {
        return path.to_string();
    }
    let mut tail: Vec<char> = Vec::new();
    let mut used = 1;
    for c in path.chars().rev() {
        let w = width_of(c.encode_utf8(&mut [0; 4]));
        if used + w > width {
            break;
        }
        used += w;
        tail.push(c);
    }
    std::iter::once('…').chain(tail.into_iter().rev()).collect()
}

/// The diff view: the changed files on the left, the selected file's diff on the right.
fn diff(buf: &mut Buffer, body: Rect, view: &DiffScreen) {
    let title = format!(
        "Diff · {} ({})",
        clip(&one_line(&view.title), 40),
        view.run_id
    );
    let inner = frame(buf, body, title);
    if inner.height < 3 || inner.width < 20 {
        return;
    }
    let width = inner.width as usize;
    // The head line: branch against base, and the totals.
    let base = drover_core::workspace::short_commit(view.base_commit.as_deref());
    let mut head = vec![Span::styled(
        view.branch.clone().unwrap_or_else(|| "…".into()),
        theme::title(),
    )];
    head.push(Span::styled(
        match &view.base_branch {
            Some(b) => format!(" against {b} at {base}"),
            None => format!(" against {base}"),
        },
        theme::dim(),
    ));
    if let Some(change) = view.change {
        head.push(Span::styled(" · ", theme::dim()));
        head.push(Span::styled(
            format!("+{}", change.added),
            theme::diff_added(),
        ));
        head.push(Span::raw(" "));
        head.push(Span::styled(
            format!("−{}", change.removed),
            theme::diff_removed(),
        ));
        head.push(Span::styled(
            format!(
                " · {} file{}",
                change.files,
                drover_core::text::plural(change.files as usize)
            ),
            theme::dim(),
        ));
    }
    put_line(buf, inner, 0, &Line::from(head));

    let rows = inner.height.saturating_sub(2);
    let list_w = (inner.width / 3).clamp(20, 40).min(inner.width / 2);
    let list = Rect::new(inner.x, inner.y + 1, list_w, rows);
    let patch_area = Rect::new(
        inner.x + list_w + 1,
        inner.y + 1,
        inner.width.saturating_sub(list_w + 1),
        rows,
    );
    for y in 0..rows {
        put_line(
            buf,
            Rect::new(inner.x + list_w, inner.y + 1, 1, rows),
            y,
            &Line::styled("│", theme::pane_border()),
        );
    }

    // The file list, scrolled to keep the selection in view.
    let list_rows = rows as usize;
    let top = view.selected.saturating_sub(list_rows.saturating_sub(1));
    for (i, f) in view.files.iter().enumerate().skip(top).take(list_rows) {
        let selected = i == view.selected;
        let counts = if f.binary {
            vec![Span::styled(" bin", theme::dim())]
        } else {
            vec![
                Span::styled(format!(" +{}", f.added), theme::diff_added()),
                Span::styled(format!(" −{}", f.removed), theme::diff_removed()),
            ]
        };
        let counts_w: usize = counts.iter().map(Span::width).sum();
        let mark = format!(
            "{}{} ",
            if selected { '›' } else { ' ' },
            match f.status.as_str() {
                "added" => 'A',
                "deleted" => 'D',
                "renamed" => 'R',
                _ => ' ',
            }
        );
        let room = (list_w as usize).saturating_sub(counts_w + 3 + 1);
        let name = path_fit(&one_line(&f.path), room);
        let pad = (list_w as usize).saturating_sub(3 + width_of(&name) + counts_w);
        let mut spans = vec![
            Span::styled(mark, theme::focus()),
            Span::styled(
                name,
                if selected {
                    theme::title()
                } else {
                    theme::text()
                },
            ),
            Span::raw(" ".repeat(pad)),
        ];
        spans.extend(counts);
        let y = (i - top) as u16;
        put_line(buf, list, y, &Line::from(spans));
        if selected {
            buf.set_style(
                Rect::new(list.x, list.y + y, list.width, 1),
                theme::selected(),
            );
        }
    }
    if view.files.is_empty() && view.state != DiffState::Loading {
        put_line(
            buf,
            list,
            0,
            &Line::styled("no changed files", theme::dim()),
        );
    }

    // The selected file's diff.
    let room = patch_area.height as usize;
    let mut shown = 0;
    let mut total = 0;
    match (&view.patch, view.selected_file()) {
        (Some(patch), _) => {
            total = patch.lines.len();
            let top = view.scroll.min(total.saturating_sub(room));
            for (y, line) in patch.lines.iter().skip(top).take(room).enumerate() {
                put_line(
                    buf,
                    patch_area,
                    y as u16,
                    &Line::styled(line.clone(), theme::diff_line(line)),
                );
                shown = top + y + 1;
            }
            if patch.lines.is_empty() {
                put_line(
                    buf,
                    patch_area,
                    0,
                    &Line::styled("(no lines: a file whose mode changed)", theme::dim()),
                );
            }
        }
        (None, Some(_)) => put_line(
            buf,
            patch_area,
            0,
            &Line::styled("reading the diff…", theme::dim()),
        ),
        (None, None) => {
            let words = match view.state {
                DiffState::Loading => "reading the run's change…",
                _ => "The run changed nothing against its base.",
            };
            put_line(buf, patch_area, 0, &Line::styled(words, theme::dim()));
        }
    }

    // The foot: what is under way, or where the diff is scrolled to.
    let foot = match &view.state {
        DiffState::Sending(what) => Line::styled(format!("{what}…"), theme::focus()),
        DiffState::Failed(why) => Line::styled(clip(&one_line(why), width), theme::error()),
        DiffState::Loading | DiffState::Ready if total > room => Line::styled(
            format!(
                "lines {}–{shown} of {total}{} · ↑/↓ pgup/pgdn or the wheel to scroll",
                view.scroll.min(total.saturating_sub(room)) + 1,
                if view.patch.as_ref().is_some_and(|p| p.truncated) {
                    " (cut)"
                } else {
                    ""
                }
            ),
            theme::dim(),
        ),
        DiffState::Loading | DiffState::Ready => Line::raw(""),
    };
    put_line(buf, inner, inner.height - 1, &foot);
}

/// Models the picker lists under the model field, at most.
const PICKER_MAX: usize = 10;

fn form(buf: &mut Buffer, body: Rect, f: &DispatchForm) {
    let fields = f.fields();
    let outer_w = body.width.saturating_sub(4).min(90);
    // Inside: the border and a margin of one column on each side.
    let width = outer_w.saturating_sub(4) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    // Where the picker goes (under the focused model field), once the room is known.
    let mut picker_at = None;
    for field in &fields {
        let focused = f.focus == *field;
        let value = f.text_of(*field);
        let label_style = if focused {
            theme::focus()
        } else {
            theme::dim()
        };
        let mut spans = vec![
            Span::styled(if focused { "› " } else { "  " }, theme::focus()),
            Span::styled(format!("{:<10}", field.label()), label_style),
        ];
        let room = width.saturating_sub(16);
        if DispatchForm::is_choice(*field) {
            spans.push(Span::styled("‹ ", theme::dim()));
            spans.push(Span::styled(
                value,
                if focused {
                    theme::focus()
                } else {
                    theme::text()
                },
            ));
            spans.push(Span::styled(" ›", theme::dim()));
        } else if value.is_empty() {
            if focused {
                spans.push(Span::styled("▏", theme::focus()));
            }
            spans.push(Span::styled(f.placeholder(*field), theme::dim()));
        } else {
            let field_text = crate::views::text::TextField::new(value);
            spans.push(Span::raw(field_text.visible(room)));
            if focused {
                spans.push(Span::styled("▏", theme::focus()));
            }
        }
        lines.push(Line::from(spans));
        if focused && *field == Field::Model {
            picker_at = Some(lines.len());
        }
        if let Some(e) = f.error.as_ref().filter(|e| e.field == Some(*field)) {
            // In full, wrapped under its field.
            for l in wrap(
                &format!("{}: {}", e.code, e.message),
                width.saturating_sub(12),
            ) {
                lines.push(Line::from(vec![
                    Span::raw(" ".repeat(12)),
                    Span::styled(l, theme::error()),
                ]));
            }
        }
    }
    lines.push(Line::raw(""));
    if let Some(e) = f.error.as_ref().filter(|e| e.field.is_none()) {
        for l in wrap(&format!("{}: {}", e.code, e.message), width) {
            lines.push(Line::styled(l, theme::error()));
        }
    }
    lines.push(if f.sending {
        Line::styled("dispatching…", theme::focus())
    } else {
        Line::styled(
            "←/→ change a choice or pick a model · blank fields take the defaults",
            theme::dim(),
        )
    });
    if let Some(at) = picker_at {
        let mut picker = model_picker(f, width);
        // Short of room: the marked line alone (the provider default when none is).
        let room = (body.height as usize).saturating_sub(lines.len() + 2);
        if picker.len() > room {
            let marked = picker
                .iter()
                .position(|l| l.spans.get(1).is_some_and(|s| s.content == "› "))
                .unwrap_or(0);
            picker = vec![picker.swap_remove(marked)];
            picker.truncate(room);
        }
        lines.splice(at..at, picker);
    }
    let height = (lines.len() as u16 + 2).min(body.height);
    let area = centered(body, outer_w, height);
    let title = match &f.again {
        Some((run_id, _)) => format!("Dispatch again · the task of {run_id}"),
        None => "New dispatch".to_string(),
    };
    let inner = frame(buf, area, title);
    for (y, line) in lines.iter().enumerate() {
        put_line(buf, inner, y as u16, line);
    }
}

/// The model picker, under the focused model field: the provider's default, `auto` (a
/// route card), then each catalog model the chosen provider runs with its tier, price
/// per million tokens and vision; the one in the field is marked.
fn model_picker(f: &DispatchForm, width: usize) -> Vec<Line<'static>> {
    let typed = f.model.text.trim().to_string();
    let pad = " ".repeat(12);
    let mark = |on: bool| {
        if on {
            Span::styled("› ", theme::focus())
        } else {
            Span::raw("  ")
        }
    };
    let style = |on: bool| if on { theme::focus() } else { theme::text() };
    let mut lines = vec![
        Line::from(vec![
            Span::raw(pad.clone()),
            mark(typed.is_empty()),
            Span::styled("provider default", style(typed.is_empty())),
        ]),
        Line::from(vec![
            Span::raw(pad.clone()),
            mark(typed.eq_ignore_ascii_case(AUTO_MODEL)),
            Span::styled(AUTO_MODEL, style(typed.eq_ignore_ascii_case(AUTO_MODEL))),
            Span::styled(" — routed: held on a route card to pick from", theme::dim()),
        ]),
    ];
    let models = f.provider_models();
    let id_w = models
        .iter()
        .map(|m| m.id.chars().count())
        .max()
        .unwrap_or(0);
    let tier_w = models.iter().map(|m| m.tier.len()).max().unwrap_or(0);
    for m in models.iter().take(PICKER_MAX) {
        let on = m.id.eq_ignore_ascii_case(&typed);
        let text = format!(
            "{:<id_w$}  {:<tier_w$}  {}{}",
            m.id,
            m.tier,
            m.price,
            if m.vision { "  vision" } else { "" }
        );
        lines.push(Line::from(vec![
            Span::raw(pad.clone()),
            mark(on),
            Span::styled(clip(&text, width.saturating_sub(14)), style(on)),
        ]));
    }
    if models.len() > PICKER_MAX {
        lines.push(Line::styled(
            format!(
                "{pad}  … {} more: `drover models`",
                models.len() - PICKER_MAX
            ),
            theme::dim(),
        ));
    }
    if models.is_empty() {
        lines.push(Line::styled(
            format!("{pad}  (the catalog lists no model for this provider)"),
            theme::dim(),
        ));
    }
    lines
}

fn input(buf: &mut Buffer, body: Rect, i: &InputBox) {
    let (title, intro): (String, Vec<String>) = match &i.purpose {
        InputPurpose::FollowUp {
            run_id,
            title,
            question,
        } => (
            format!("Follow-up · {} ({run_id})", clip(&one_line(title), 40)),
            question
                .as_deref()
                .map(|q| vec![format!("The run asks: {}", one_line(q))])
                .unwrap_or_default(),
        ),
        InputPurpose::Filter { .. } => (
            "Filter runs".to_string(),
            vec!["Title, provider, model, state or run id; enter keeps it, esc restores.".into()],
        ),
    };
    let width = body.width.saturating_sub(4).min(90);
    let inner_w = width.saturating_sub(4) as usize;
    let intro_lines: Vec<String> = intro.iter().flat_map(|t| wrap(t, inner_w)).collect();
    let height = intro_lines.len() as u16 + 2 + u16::from(i.error.is_some() || i.sending) + 2;
    let area = centered(body, width, height);
    let inner = frame(buf, area, title);
    let mut y = 0u16;
    for l in &intro_lines {
        put_line(buf, inner, y, &Line::styled(l.clone(), theme::attention()));
        y += 1;
    }
    put_line(
        buf,
        inner,
        y,
        &Line::from(vec![
            Span::styled("› ", theme::focus()),
            Span::raw(i.field.visible(inner_w.saturating_sub(3))),
            Span::styled("▏", theme::focus()),
        ]),
    );
    y += 1;
    if let Some(e) = &i.error {
        put_line(
            buf,
            inner,
            y + 1,
            &Line::styled(clip(e, inner_w), theme::error()),
        );
    } else if i.sending {
        put_line(buf, inner, y + 1, &Line::styled("sending…", theme::focus()));
    }
}

fn confirm(buf: &mut Buffer, body: Rect, c: &ConfirmView) {
    let width = body.width.saturating_sub(4).min(70);
    let lines = wrap(&c.message, width.saturating_sub(4) as usize);
    let area = centered(body, width, lines.len() as u16 + 4);
    let inner = frame(buf, area, "Are you sure?".to_string());
    for (i, l) in lines.iter().enumerate() {
        put_line(
            buf,
            inner,
            i as u16,
            &Line::styled(l.clone(), theme::attention()),
        );
    }
}

fn help(buf: &mut Buffer, body: Rect, h: &HelpView, app: &App) {
    let area = centered(body, body.width.saturating_sub(4).min(100), body.height);
    let inner = frame(buf, area, "Keys".to_string());
    let mut lines: Vec<Line<'static>> = Vec::new();
    for context in Context::ALL {
        if context == Context::Help {
            continue;
        }
        lines.push(Line::styled(context.heading(), theme::title()));
        for (keys, action) in app.keys.actions(context) {
            lines.push(Line::from(vec![
                Span::styled(format!("  {keys:<14}"), theme::key()),
                Span::raw(action.describe_in(context)),
            ]));
        }
        if matches!(context, Context::Dashboard) {
            lines.push(Line::from(vec![
                Span::styled(format!("  {:<14}", "1-9"), theme::key()),
                Span::raw("answer the question on the attention line by its choice's number"),
            ]));
        }
        if matches!(context, Context::Prompt) {
            lines.push(Line::from(vec![
                Span::styled(format!("  {:<14}", "1-9"), theme::key()),
                Span::raw("pick a question's choice by its number"),
            ]));
        }
        if matches!(context, Context::Input | Context::Form) {
            lines.push(Line::from(vec![
                Span::styled(format!("  {:<14}", "ctrl-u/ctrl-w"), theme::key()),
                Span::raw("clear the text / delete a word"),
            ]));
        }
        lines.push(Line::raw(""));
    }
    lines.push(Line::styled(
        "Mouse: click a run to select it; the wheel moves the selection or scrolls the transcript.",
        theme::dim(),
    ));
    let room = (inner.height as usize).saturating_sub(1);
    let scroll = (h.scroll as usize).min(lines.len().saturating_sub(room));
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
