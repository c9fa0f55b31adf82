//! The attention line, above the footer: the oldest pending request of any run — the
//! run, the tool and its command or path (a question: its options, numbered) — and the
//! keys that answer it from the dashboard. It records what it drew, so those keys act on
//! exactly this request, and only once it has been on screen long enough to read
//! ([`crate::shown`]); a key that came sooner leaves "just changed — look again" in place
//! of the keys.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::app::{App, numbered_question};
use crate::canvas::{clip_width, put_line, width_of};
use crate::format;
use crate::keys::{Action, Context};
use crate::theme;
use drover_core::providers::RequestKind;
use drover_core::text::one_line;

/// Columns an option's label may take before it is clipped.
const OPTION_MAX: usize = 24;

pub fn draw(buf: &mut Buffer, area: Rect, app: &App) {
    if area.height == 0 {
        return;
    }
    let width = area.width as usize;
    let Some((entry, request)) = app.attention_next() else {
        app.attention_drawn(None);
        let waiting = app.model.counts().needs_you;
        let text = if waiting == 0 {
            " nothing waits for you".to_string()
        } else {
            format!(
                " no request waits for an answer · {waiting} run{} in Needs you",
                drover_core::text::plural(waiting)
            )
        };
        put_line(buf, area, 0, &Line::styled(text, theme::dim()));
        return;
    };
    let run_id = &entry.summary.head.run_id;
    app.attention_drawn(Some((run_id, &request.request_id)));
    let now = app.model.now;
    app.shown().drawn(request, now);
    let others = app.model.pending_total().saturating_sub(1);

    // The keys, at the right: what answers this request here.
    let key = |action: Action| app.keys.key_for(Context::Dashboard, action);
    let mut keys: Vec<(String, String)> = Vec::new();
    let question = numbered_question(request);
    let held = app.attention_held(&request.request_id);
    if app.attention_sending(&request.request_id) {
        keys.push((String::new(), "sending…".into()));
    } else if held {
        keys.push((String::new(), crate::shown::JUST_CHANGED.into()));
    } else {
        match (request.kind, question) {
            (RequestKind::Permission, _) => {
                if let Some(k) = key(Action::AttentionAllow) {
                    let word = if request.guard.is_some() {
                        "review"
                    } else {
                        "allow"
                    };
                    keys.push((k.to_string(), word.into()));
                }
                if let Some(k) = key(Action::AttentionDeny) {
                    keys.push((k.to_string(), "deny".into()));
                }
                if request.guard.is_none()
                    && let Some(k) = key(Action::AttentionRule)
                {
                    keys.push((k.to_string(), "rule".into()));
                }
            }
            (RequestKind::Question, Some(_)) => {
                if let Some(k) = key(Action::AttentionDeny) {
                    keys.push((k.to_string(), "dismiss".into()));
                }
            }
            (RequestKind::Question, None) => {}
        }
        if let Some(k) = key(Action::NextPending) {
            let word = if request.kind == RequestKind::Question && question.is_none() {
                "answer"
            } else {
                "open"
            };
            keys.push((k.to_string(), word.into()));
        }
    }
    let mut right: Vec<Span<'static>> = Vec::new();
    for (k, word) in &keys {
        right.push(Span::raw(" "));
        if !k.is_empty() {
            right.push(Span::styled(k.clone(), theme::key()));
            right.push(Span::styled(format!(" {word}"), theme::dim()));
        } else if held {
            right.push(Span::styled(word.clone(), theme::attention()));
        } else {
            right.push(Span::styled(word.clone(), theme::dim()));
        }
    }
    if others > 0 {
        right.push(Span::styled(format!("  +{others} waiting"), theme::dim()));
    }
    right.push(Span::raw(" "));
    let right_w: usize = right.iter().map(|s| width_of(&s.content)).sum();

    // The request, at the left, in what room is left; its countdown only when the
    // request fits beside it whole (the prompt, the row and the detail show it too).
    let head = format!(" ▶ {run_id} ");
    let natural = match (request.kind, question) {
        (RequestKind::Question, Some(q)) => {
            width_of(&format!("asks: {}", one_line(&q.question)))
                + q.options
                    .iter()
                    .take(9)
                    .map(|o| 4 + width_of(&clip_width(&one_line(&o.label), OPTION_MAX)))
                    .sum::<usize>()
        }
        (RequestKind::Question, None) => request.ask.questions().first().map_or_else(
            || width_of(&request.tool),
            |q| width_of(&format!("asks: {}", one_line(&q.question))),
        ),
        (RequestKind::Permission, _) => {
            request
                .guard
                .as_ref()
                .map_or(0, |r| width_of(&format!("flagged: {} · ", one_line(r))))
                + width_of(&request.tool)
                + 1
                + width_of(&one_line(&request.ask.summary()))
        }
    };
    let mut countdown = format!(
        " · {}",
        format::Deadline::Answer.words(request.expires_at, now)
    );
    if natural > width.saturating_sub(width_of(&head) + right_w + width_of(&countdown)) {
        countdown.clear();
    }
    let mut left: Vec<Span<'static>> = vec![Span::styled(head.clone(), theme::attention())];
    let mut room = width
        .saturating_sub(width_of(&head) + right_w + width_of(&countdown))
        .max(1);
    match (request.kind, question) {
        (RequestKind::Question, Some(q)) => {
            let asks = clip_width(&format!("asks: {}", one_line(&q.question)), room / 2 + 1);
            room = room.saturating_sub(width_of(&asks));
            left.push(Span::styled(asks, theme::text()));
            for (i, option) in q.options.iter().take(9).enumerate() {
                let number = format!("  {}", i + 1);
                let label = format!(" {}", clip_width(&one_line(&option.label), OPTION_MAX));
                let need = width_of(&number) + width_of(&label);
                if need > room {
                    if room >= 3 {
                        left.push(Span::styled("  …", theme::dim()));
                    }
                    break;
                }
                room -= need;
                left.push(Span::styled(number, theme::key()));
                left.push(Span::styled(label, theme::text()));
            }
        }
        (RequestKind::Question, None) => {
            let first = request
                .ask
                .questions()
                .first()
                .map_or_else(|| request.tool.clone(), |q| q.question.clone());
            left.push(Span::styled(
                clip_width(&format!("asks: {}", one_line(&first)), room),
                theme::text(),
            ));
        }
        (RequestKind::Permission, _) => {
            if let Some(reason) = &request.guard {
                let flag = clip_width(&format!("flagged: {} · ", one_line(reason)), room / 2 + 1);
                room = room.saturating_sub(width_of(&flag));
                left.push(Span::styled(flag, theme::error()));
            }
            let tool = format!("{} ", request.tool);
            let what = clip_width(
                &one_line(&request.ask.summary()),
                room.saturating_sub(width_of(&tool)),
            );
            left.push(Span::styled(tool, theme::attention()));
            left.push(Span::styled(what, theme::text()));
        }
    }
    left.push(Span::styled(countdown, theme::dim()));
    let left_w: usize = left.iter().map(|s| width_of(&s.content)).sum();
    let gap = width.saturating_sub(left_w + right_w);
    left.push(Span::raw(" ".repeat(gap)));
    left.extend(right);
    put_line(buf, area, 0, &Line::from(left));
}
