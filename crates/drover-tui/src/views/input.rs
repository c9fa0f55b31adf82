//! A one-line text box on the stack, with its purpose: the follow-up box (what the run
//! should do next; it shows the run's question when it asked one) and the filter
//! (which filters the trays as the user types).
//!
//! What must stay true: a follow-up is sent once (keys wait while it is on its way) and
//! never empty; the filter applies as the user types, enter keeps it and esc restores
//! the one in force before the box opened.

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::text::TextField;
use super::{DrawContext, Outcome, View, ViewCommand};
use crate::canvas::{clip_width, put_line, view_box, wrap};
use crate::event::ReplyTag;
use crate::keys::{Action, Context};
use crate::layout::centered;
use crate::theme;
use drover_core::dispatch::Request;
use drover_core::text::one_line;

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
    /// `P` on a worktree run with no pull request yet: its title (the run's, to edit),
    /// and whether it opens as a draft (`tab` toggles).
    PullRequest { run_id: String, draft: bool },
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
}

impl View for InputBox {
    fn context(&self) -> Context {
        Context::Input
    }

    fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome {
        if let InputPurpose::PullRequest { run_id, draft } = &mut self.purpose {
            return match action {
                Some(Action::Close) => Outcome::close(),
                // As the rule chooser's scope: `tab` toggles (no text takes a tab).
                None if key.code == crossterm::event::KeyCode::Tab => {
                    *draft = !*draft;
                    Outcome::stay()
                }
                Some(Action::Submit) => {
                    let title = self.field.text.trim();
                    Outcome::close_with(ViewCommand::Request(
                        ReplyTag::Pr(run_id.clone()),
                        Request::Pr {
                            run_id: run_id.clone(),
                            draft: *draft,
                            title: (!title.is_empty()).then(|| title.to_string()),
                            force_with_lease: false,
                            refresh: false,
                        },
                    ))
                }
                _ => {
                    self.field.edit(key);
                    Outcome::stay()
                }
            };
        }
        match (&self.purpose, action) {
            (InputPurpose::Filter { previous }, Some(Action::Close)) => {
                Outcome::close_with(ViewCommand::SetFilter(previous.clone()))
            }
            (InputPurpose::Filter { .. }, Some(Action::Submit)) => Outcome::close(),
            (InputPurpose::Filter { .. }, _) => {
                if self.field.edit(key) {
                    Outcome::stay_with(ViewCommand::SetFilter(self.field.text.clone()))
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
                Outcome::stay_with(ViewCommand::Request(
                    ReplyTag::FollowUp(run_id.clone()),
                    Request::FollowUp {
                        run_id: run_id.clone(),
                        text: self.field.text.clone(),
                    },
                ))
            }
            (InputPurpose::FollowUp { .. } | InputPurpose::PullRequest { .. }, _) => {
                self.field.edit(key);
                Outcome::stay()
            }
        }
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, _context: &DrawContext<'_>) {
        let (title, intro): (String, Vec<String>) = match &self.purpose {
            InputPurpose::FollowUp {
                run_id,
                title,
                question,
            } => (
                format!(
                    "Follow-up · {} ({run_id})",
                    clip_width(&one_line(title), 40)
                ),
                question
                    .as_deref()
                    .map(|q| vec![format!("The run asks: {}", one_line(q))])
                    .unwrap_or_default(),
            ),
            InputPurpose::PullRequest { run_id, draft } => (
                format!("Pull request · {run_id}"),
                vec![format!(
                    "Its title (enter pushes the branch and opens it{}; tab: {}).",
                    if *draft { " as a draft" } else { "" },
                    if *draft {
                        "open it ready for review"
                    } else {
                        "open it as a draft"
                    }
                )],
            ),
            InputPurpose::Filter { .. } => (
                "Filter runs".to_string(),
                vec![
                    "Title, provider, model, state or run id; enter keeps it, esc restores.".into(),
                ],
            ),
        };
        let width = body.width.saturating_sub(4).min(90);
        let inner_w = width.saturating_sub(4) as usize;
        let intro_lines: Vec<String> = intro.iter().flat_map(|t| wrap(t, inner_w)).collect();
        // A refusal is shown whole, wrapped.
        let error_lines: Vec<String> = self
            .error
            .as_deref()
            .map(|e| wrap(&one_line(e), inner_w))
            .unwrap_or_default();
        let status_h = if self.error.is_some() {
            error_lines.len() as u16
        } else {
            u16::from(self.sending)
        };
        let height = intro_lines.len() as u16 + 2 + status_h + 2;
        let area = centered(body, width, height);
        let inner = view_box(buf, area, title);
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
                Span::raw(self.field.visible(inner_w.saturating_sub(3))),
                Span::styled("▏", theme::focus()),
            ]),
        );
        y += 1;
        if self.error.is_some() {
            for (i, l) in error_lines.iter().enumerate() {
                put_line(
                    buf,
                    inner,
                    y + 1 + i as u16,
                    &Line::styled(l.clone(), theme::error()),
                );
            }
        } else if self.sending {
            put_line(buf, inner, y + 1, &Line::styled("sending…", theme::focus()));
        }
    }
}
