//! The route card: a run dispatched without a model is held until the user picks one of
//! the ranked options (or declines the card).
//!
//! What must stay true: a pick names an option number shown on this card; a refused
//! pick (`ROUTE_PICK_REFUSED`) is shown inline and the card stays open for another pick;
//! once the card is known to be decided, declined or expired, nothing more is sent.

use crossterm::event::{KeyCode, KeyEvent};

use super::{Outcome, ViewCommand};
use crate::event::ReplyTag;
use crate::keys::Action;
use drover_core::dispatch::Request;
use drover_core::dispatch::api::RouteCardView;

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

    pub fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome {
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
            Some(Action::NextRequest) => Outcome {
                close: false,
                command: Some(ViewCommand::NextPrompt {
                    after: Some(self.run_id.clone()),
                }),
            },
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
            _ if !self.can_pick() => Outcome::stay(),
            Some(Action::Pick) => self.pick(),
            Some(Action::Decline) if !self.confirm_decline => {
                self.confirm_decline = true;
                Outcome::stay()
            }
            Some(Action::Decline) => {
                self.confirm_decline = false;
                self.state = RouteState::Sending("decline".into());
                Outcome {
                    close: false,
                    command: Some(ViewCommand::Request(
                        ReplyTag::RouteDecline(self.run_id.clone()),
                        Request::RouteDecline {
                            run_id: self.run_id.clone(),
                        },
                    )),
                }
            }
            _ => Outcome::stay(),
        }
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
        Outcome {
            close: false,
            command: Some(ViewCommand::Request(
                ReplyTag::Route(self.run_id.clone()),
                Request::Route {
                    run_id: self.run_id.clone(),
                    option: number,
                    remember: self.remember,
                },
            )),
        }
    }
}
