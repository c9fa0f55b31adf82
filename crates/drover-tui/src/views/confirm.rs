//! A confirmation on top of the stack: quitting with active runs, stopping every run,
//! discarding a run's work, removing a run with unmerged work; stopping a working run,
//! softly (wrap up, the confirm key) or now (`s` again).
//!
//! What must stay true: nothing happens without the confirm key; any other key leaves
//! it open, and close leaves without doing anything.

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::{DrawContext, Outcome, View, ViewCommand};
use crate::canvas::{put_line, view_box, wrap};
use crate::event::ReplyTag;
use crate::keys::{Action, Context};
use crate::layout::centered;
use crate::theme;
use drover_core::dispatch::Request;

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
    /// Push a run's branch with `--force-with-lease` (the remote's branch has commits it
    /// lacks), then open or update its pull request.
    ForcePush {
        run_id: String,
    },
    /// Remove every finished run left after `X`: those with unmerged work (kept on
    /// their branches).
    RemoveUnmerged,
    /// Stop a working run: wrap up first (the confirm key, docs/ARCHITECTURE.md
    /// §"Wrap up, then stop"), or stop it now (the stop key again).
    StopRun {
        run_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmView {
    pub what: Confirmable,
    pub message: String,
}

impl View for ConfirmView {
    fn context(&self) -> Context {
        Context::Confirm
    }

    fn offers(&self, action: Action) -> bool {
        action != Action::Stop || matches!(self.what, Confirmable::StopRun { .. })
    }

    fn handle_key(&mut self, action: Option<Action>, _key: &KeyEvent) -> Outcome {
        match (action, &self.what) {
            (Some(Action::Stop), Confirmable::StopRun { run_id }) => {
                return Outcome::close_with(ViewCommand::Request(
                    ReplyTag::Stop(run_id.clone()),
                    Request::Stop {
                        run_id: run_id.clone(),
                    },
                ));
            }
            (Some(Action::Stop), _) => return Outcome::stay(),
            _ => {}
        }
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
                Confirmable::ForcePush { run_id } => ViewCommand::Request(
                    ReplyTag::Pr(run_id.clone()),
                    Request::Pr {
                        run_id: run_id.clone(),
                        draft: false,
                        title: None,
                        force_with_lease: true,
                        refresh: false,
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
                Confirmable::StopRun { run_id } => ViewCommand::Request(
                    ReplyTag::WrapUp(run_id.clone()),
                    Request::WrapUp {
                        run_id: run_id.clone(),
                    },
                ),
                Confirmable::RemoveUnmerged => ViewCommand::Request(
                    ReplyTag::Remove,
                    Request::Remove {
                        run_id: None,
                        finished: true,
                        force: true,
                    },
                ),
            }),
            Some(Action::Close) => Outcome::close(),
            _ => Outcome::stay(),
        }
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, _context: &DrawContext<'_>) {
        let width = body.width.saturating_sub(4).min(70);
        let lines = wrap(&self.message, width.saturating_sub(4) as usize);
        let area = centered(body, width, lines.len() as u16 + 4);
        let title = match &self.what {
            Confirmable::StopRun { run_id } => format!("Stop {run_id}?"),
            _ => "Are you sure?".to_string(),
        };
        let inner = view_box(buf, area, title);
        for (i, l) in lines.iter().enumerate() {
            put_line(
                buf,
                inner,
                i as u16,
                &Line::styled(l.clone(), theme::attention()),
            );
        }
    }
}
