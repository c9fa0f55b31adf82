//! Views on a stack above the dashboard: the permission prompt, the route card, the diff
//! view, the dispatch form, text boxes (follow-up, filter), confirmations and help.
//!
//! What must stay true: the top view gets every key first and handles it itself; it
//! says whether it is done ([`Outcome::close`]) and what it wants done as a typed
//! [`ViewCommand`] — it never talks to the dispatcher. Answers come back to the view that
//! asked through the app (by [`crate::event::ReplyTag`]).

pub mod diff;
pub mod form;
pub mod prompt;
pub mod route;
pub mod text;

use crossterm::event::KeyEvent;

use crate::event::ReplyTag;
use crate::keys::{Action, Context};
use diff::DiffScreen;
use drover_core::dispatch::Request;
use form::DispatchForm;
use prompt::PromptView;
use route::RouteView;
use text::TextField;

/// What a view wants done.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewCommand {
    /// Send a request; the answer comes back with the tag.
    Request(ReplyTag, Request),
    /// Leave the dashboard.
    Quit,
    /// Show only runs matching this text.
    SetFilter(String),
    /// Show the oldest pending request other than `after`.
    NextPrompt { after: Option<String> },
    /// Ask first (a confirmation on top of this view).
    Ask(ConfirmView),
}

/// The result of a key.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub close: bool,
    pub command: Option<ViewCommand>,
}

impl Outcome {
    pub fn stay() -> Outcome {
        Outcome {
            close: false,
            command: None,
        }
    }

    pub fn close() -> Outcome {
        Outcome {
            close: true,
            command: None,
        }
    }

    pub fn close_with(command: ViewCommand) -> Outcome {
        Outcome {
            close: true,
            command: Some(command),
        }
    }
}

/// What a text box is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputPurpose {
    FollowUp {
        run_id: String,
        title: String,
        /// The run's question (status `needs_input`), shown above the box.
        question: Option<String>,
    },
    Filter {
        /// The filter before the box opened (Esc restores it).
        previous: String,
    },
}

/// A one-line text box with a purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputBox {
    pub purpose: InputPurpose,
    pub field: TextField,
    pub error: Option<String>,
    pub sending: bool,
}

impl InputBox {
    pub fn new(purpose: InputPurpose, text: impl Into<String>) -> Self {
        InputBox {
            purpose,
            field: TextField::new(text),
            error: None,
            sending: false,
        }
    }

    pub fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome {
        match (&self.purpose, action) {
            (InputPurpose::Filter { previous }, Some(Action::Close)) => {
                Outcome::close_with(ViewCommand::SetFilter(previous.clone()))
            }
            (InputPurpose::Filter { .. }, Some(Action::Submit)) => Outcome::close(),
            (InputPurpose::Filter { .. }, _) => {
                if self.field.edit(key) {
                    Outcome {
                        close: false,
                        command: Some(ViewCommand::SetFilter(self.field.text.clone())),
                    }
                } else {
                    Outcome::stay()
                }
            }
            (InputPurpose::FollowUp { .. }, Some(Action::Close)) => Outcome::close(),
            (InputPurpose::FollowUp { .. }, _) if self.sending => Outcome::stay(),
            (InputPurpose::FollowUp { run_id, .. }, Some(Action::Submit)) => {
                if self.field.text.trim().is_empty() {
                    self.error = Some("type what the run should do next".into());
                    return Outcome::stay();
                }
                self.sending = true;
                self.error = None;
                Outcome {
                    close: false,
                    command: Some(ViewCommand::Request(
                        ReplyTag::FollowUp(run_id.clone()),
                        Request::FollowUp {
                            run_id: run_id.clone(),
                            text: self.field.text.clone(),
                        },
                    )),
                }
            }
            (InputPurpose::FollowUp { .. }, _) => {
                self.field.edit(key);
                Outcome::stay()
            }
        }
    }
}

/// What a confirmation confirms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmable {
    Quit,
    KillAll,
    /// Delete a finished run's worktree and branch.
    Discard {
        run_id: String,
    },
    /// Remove a finished run whose worktree holds unmerged work (kept on its branch).
    Remove {
        run_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmView {
    pub what: Confirmable,
    pub message: String,
}

impl ConfirmView {
    pub fn handle_key(&mut self, action: Option<Action>) -> Outcome {
        match action {
            Some(Action::Confirm) => Outcome::close_with(match &self.what {
                Confirmable::Quit => ViewCommand::Quit,
                Confirmable::KillAll => {
                    ViewCommand::Request(ReplyTag::KillAll, Request::KillAll { workflow: None })
                }
                Confirmable::Discard { run_id } => ViewCommand::Request(
                    ReplyTag::WorkspaceAction {
                        run_id: run_id.clone(),
                        action: "discard".into(),
                    },
                    Request::Discard {
                        run_id: run_id.clone(),
                    },
                ),
                Confirmable::Remove { run_id } => ViewCommand::Request(
                    ReplyTag::Remove,
                    Request::Remove {
                        run_id: Some(run_id.clone()),
                        finished: false,
                        force: true,
                    },
                ),
            }),
            Some(Action::Close) => Outcome::close(),
            _ => Outcome::stay(),
        }
    }
}

/// The help overlay: every binding of every context, from the key table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelpView {
    pub scroll: u16,
}

impl HelpView {
    pub fn handle_key(&mut self, action: Option<Action>) -> Outcome {
        match action {
            Some(Action::Close) => Outcome::close(),
            Some(Action::ScrollDown) => {
                self.scroll = self.scroll.saturating_add(1);
                Outcome::stay()
            }
            Some(Action::ScrollUp) => {
                self.scroll = self.scroll.saturating_sub(1);
                Outcome::stay()
            }
            _ => Outcome::stay(),
        }
    }
}

/// One view on the stack.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Prompt(PromptView),
    Route(RouteView),
    Diff(DiffScreen),
    Form(DispatchForm),
    Input(InputBox),
    Confirm(ConfirmView),
    Help(HelpView),
}

impl Overlay {
    /// The key table this view reads.
    pub fn context(&self) -> Context {
        match self {
            Overlay::Prompt(p) => p.context(),
            Overlay::Route(_) => Context::Route,
            Overlay::Diff(_) => Context::Diff,
            Overlay::Form(_) => Context::Form,
            Overlay::Input(_) => Context::Input,
            Overlay::Confirm(_) => Context::Confirm,
            Overlay::Help(_) => Context::Help,
        }
    }

    /// Whether the footer should leave out the hint of `action` (an action that means
    /// nothing for this view: allowing a question, typing an answer to a permission).
    pub fn hides(&self, action: Action) -> bool {
        match self {
            Overlay::Prompt(p) if p.context() == Context::Prompt => {
                let answers = matches!(
                    action,
                    Action::AllowOnce
                        | Action::AllowAlways
                        | Action::AddRule
                        | Action::Deny
                        | Action::DenyWithMessage
                        | Action::TypeAnswer
                );
                if !p.can_answer() {
                    answers
                } else if p.is_question() {
                    matches!(
                        action,
                        Action::AllowOnce | Action::AllowAlways | Action::AddRule
                    )
                } else if p.flagged().is_some() {
                    matches!(action, Action::TypeAnswer | Action::AddRule)
                } else {
                    action == Action::TypeAnswer
                }
            }
            Overlay::Route(r) => !r.can_pick() && matches!(action, Action::Pick | Action::Decline),
            // Nothing to merge, keep or discard while the file list is not in.
            Overlay::Diff(d) => {
                d.state == diff::DiffState::Loading
                    && matches!(
                        action,
                        Action::Merge | Action::MergeSquash | Action::Keep | Action::Discard
                    )
            }
            _ => false,
        }
    }

    /// Whether number keys pick a choice here (a question).
    pub fn takes_digits(&self) -> bool {
        matches!(self, Overlay::Prompt(p)
            if p.is_question() && p.can_answer() && p.context() == Context::Prompt)
            || matches!(self, Overlay::Route(r) if r.can_pick())
    }

    pub fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome {
        match self {
            Overlay::Prompt(v) => v.handle_key(action, key),
            Overlay::Route(v) => v.handle_key(action, key),
            Overlay::Diff(v) => v.handle_key(action),
            Overlay::Form(v) => v.handle_key(action, key),
            Overlay::Input(v) => v.handle_key(action, key),
            Overlay::Confirm(v) => v.handle_key(action),
            Overlay::Help(v) => v.handle_key(action),
        }
    }
}

#[cfg(test)]
mod tests;
