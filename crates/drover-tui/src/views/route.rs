//! The route card: a run dispatched without a model is held until the user picks one of
//! the ranked options (or declines the card).
//!
//! What must stay true: a pick names an option number shown on this card; a refused
//! pick (`ROUTE_PICK_REFUSED`) is shown inline and the card stays open for another pick;
//! once the card is known to be decided, declined or expired, nothing more is sent; the
//! pick and decline keys, their hints and `1-9 choose` all follow [`RouteView::can_pick`].

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{DrawContext, Outcome, View, ViewCommand};
use crate::canvas::{clip_width, put_line, view_box, width_of, wrap};
use crate::event::ReplyTag;
use crate::format;
use crate::keys::{Action, Context};
use crate::layout::centered;
use crate::theme;
use drover_core::dispatch::Request;
use drover_core::dispatch::api::RouteCardView;
use drover_core::money::usd;
use drover_core::text::one_line;

/// Where the card stands, as far as this view knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteState {
    /// Waiting for the user's pick.
    Open,
    /// A pick (or the decline) was sent; waiting for the dispatcher.
    Sending(String),
    /// The dispatcher refused the pick; the card stays open.
    Refused(String),
    /// The card is no longer open; nothing is sent from here.
    Gone(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RouteView {
    pub run_id: String,
    /// The card, once fetched (the run's `show` view carries it).
    pub card: Option<RouteCardView>,
    /// The highlighted option (0-based).
    pub selected: usize,
    /// Remember the pick for this task class.
    pub remember: bool,
    pub state: RouteState,
    /// `d` was pressed once: the next `d` declines.
    pub confirm_decline: bool,
}

impl RouteView {
    pub fn new(run_id: impl Into<String>, card: Option<RouteCardView>) -> Self {
        let mut view = RouteView {
            run_id: run_id.into(),
            card: None,
            selected: 0,
            remember: false,
            state: RouteState::Open,
            confirm_decline: false,
        };
        view.set_card(card);
        view
    }

    /// Takes a fresher copy of the card (from a `show` answer).
    pub fn set_card(&mut self, card: Option<RouteCardView>) {
        let Some(card) = card else {
            return;
        };
        if self.card.is_none()
            && let Some(i) = card.options.iter().position(|o| o.recommended)
        {
            self.selected = i;
        }
        if card.status != "open" && matches!(self.state, RouteState::Open | RouteState::Refused(_))
        {
            self.state = RouteState::Gone(format!(
                "This card is no longer open ({}). Nothing was sent.",
                card.status
            ));
        } else if let (Some(refused), RouteState::Open) = (&card.refused, &self.state) {
            self.state = RouteState::Refused(refused.clone());
        }
        self.selected = self.selected.min(card.options.len().saturating_sub(1));
        self.card = Some(card);
    }

    /// Whether a pick may be sent now.
    pub fn can_pick(&self) -> bool {
        self.card.is_some() && matches!(self.state, RouteState::Open | RouteState::Refused(_))
    }

    fn option_count(&self) -> usize {
        self.card.as_ref().map_or(0, |c| c.options.len())
    }

    fn pick(&mut self) -> Outcome {
        if !self.can_pick() {
            return Outcome::stay();
        }
        let Some(option) = self
            .card
            .as_ref()
            .and_then(|c| c.options.get(self.selected))
        else {
            return Outcome::stay();
        };
        let number = option.number;
        self.state = RouteState::Sending(format!(
            "option {number}: {}/{}{}",
            option.provider,
            option.model,
            if self.remember { " (remembered)" } else { "" }
        ));
        Outcome::stay_with(ViewCommand::Request(
            ReplyTag::Route(self.run_id.clone()),
            Request::Route {
                run_id: self.run_id.clone(),
                option: number,
                remember: self.remember,
            },
        ))
    }
}

impl View for RouteView {
    fn context(&self) -> Context {
        Context::Route
    }

    /// A pick or the decline only while a pick may be sent ([`RouteView::can_pick`]).
    fn offers(&self, action: Action) -> bool {
        self.can_pick() || !matches!(action, Action::Pick | Action::Decline)
    }

    fn takes_digits(&self) -> bool {
        self.can_pick()
    }

    /// The card's time to pick.
    fn counts_down(&self) -> bool {
        true
    }

    fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome {
        if action != Some(Action::Decline) {
            self.confirm_decline = false;
        }
        if let KeyCode::Char(c @ '1'..='9') = key.code {
            let index = c as usize - '1' as usize;
            if index < self.option_count() {
                self.selected = index;
                return self.pick();
            }
            return Outcome::stay();
        }
        match action {
            Some(Action::Close) => Outcome::close(),
            Some(Action::NextRequest) => Outcome::stay_with(ViewCommand::NextPrompt {
                after: Some(self.run_id.clone()),
            }),
            Some(Action::SelectNext) => {
                if self.selected + 1 < self.option_count() {
                    self.selected += 1;
                }
                Outcome::stay()
            }
            Some(Action::SelectPrev) => {
                self.selected = self.selected.saturating_sub(1);
                Outcome::stay()
            }
            Some(Action::ToggleRemember) => {
                self.remember = !self.remember;
                Outcome::stay()
            }
            Some(action) if !self.offers(action) => Outcome::stay(),
            Some(Action::Pick) => self.pick(),
            Some(Action::Decline) if !self.confirm_decline => {
                self.confirm_decline = true;
                Outcome::stay()
            }
            Some(Action::Decline) => {
                self.confirm_decline = false;
                self.state = RouteState::Sending("decline".into());
                Outcome::stay_with(ViewCommand::Request(
                    ReplyTag::RouteDecline(self.run_id.clone()),
                    Request::RouteDecline {
                        run_id: self.run_id.clone(),
                    },
                ))
            }
            _ => Outcome::stay(),
        }
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, context: &DrawContext<'_>) {
        let model = context.model;
        let title_of_run = model
            .run(&self.run_id)
            .map(|e| clip_width(&one_line(&e.summary.head.title), 40))
            .unwrap_or_default();
        let outer_w = body.width.saturating_sub(4).min(110);
        let width = outer_w.saturating_sub(4) as usize;
        let mut lines: Vec<Line<'static>> = Vec::new();
        let mut foot: Vec<Line<'static>> = Vec::new();
        match &self.card {
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
                    let highlighted = i == self.selected;
                    let name = clip_width(&format!("{}/{}", o.provider, o.model), name_w);
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
                    Span::styled(if self.remember { "[x]" } else { "[ ]" }, theme::focus()),
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
        if self.confirm_decline {
            foot.push(Line::styled(
                "press d again to decline: the run is stopped (route_declined)",
                theme::warning(),
            ));
        }
        match &self.state {
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
        let inner = view_box(
            buf,
            area,
            format!("Route card · {title_of_run} ({})", self.run_id),
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
