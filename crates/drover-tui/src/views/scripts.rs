//! The repository scripts a run waits on (enter on a run in Needs you whose reason is
//! `setup script to approve`): each `.drover/setup` or `.drover/teardown` the run's new
//! worktree holds that was never approved for the repository (shown whole) or changed
//! since (shown as its diff against the approved one), redacted by the owner.
//! The prompt's keys: allow (`y`) approves them — their hashes are kept and the setup
//! runs —, deny (`d`) starts the run without them, close leaves them waiting.
//!
//! What must stay true: nothing is approved or refused without its key; the lines drawn
//! are made safe for the screen; what is approved is what the owner showed (it approves
//! the hashes it holds for the run, not anything read here).

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{DrawContext, Outcome, View, ViewCommand};
use crate::canvas::{clip_width, put_line, view_box};
use crate::event::ReplyTag;
use crate::format::safe_lines;
use crate::keys::{Action, Context};
use crate::layout::centered;
use crate::theme;
use drover_core::dispatch::Request;
use drover_core::dispatch::api::ScriptApprovalView;

#[derive(Debug, Clone, PartialEq)]
pub struct ScriptsView {
    pub run_id: String,
    pub approval: ScriptApprovalView,
    /// The first line shown.
    pub scroll: usize,
}

impl ScriptsView {
    pub fn new(run_id: impl Into<String>, approval: ScriptApprovalView) -> ScriptsView {
        ScriptsView {
            run_id: run_id.into(),
            approval,
            scroll: 0,
        }
    }

    /// Everything the view shows, line by line: each script's heading, then its text or
    /// its diff.
    fn lines(&self) -> Vec<Line<'static>> {
        let mut lines = Vec::new();
        for script in &self.approval.scripts {
            let short: String = script.sha256.chars().take(12).collect();
            let why = if script.diff.is_some() {
                "changed since you approved it"
            } else {
                "never approved for this repository"
            };
            lines.push(Line::from(vec![
                Span::styled(script.path.clone(), theme::attention()),
                Span::styled(format!(" · {why} · sha256 {short}…"), theme::dim()),
            ]));
            let body = script.diff.as_deref().unwrap_or(&script.text);
            for line in safe_lines(body) {
                let style = match (script.diff.is_some(), line.chars().next()) {
                    (true, Some('+')) if !line.starts_with("+++") => theme::success(),
                    (true, Some('-')) if !line.starts_with("---") => theme::error(),
                    (true, Some('@')) => theme::dim(),
                    _ => theme::text(),
                };
                lines.push(Line::styled(format!("  {line}"), style));
            }
            lines.push(Line::raw(""));
        }
        lines
    }
}

impl View for ScriptsView {
    fn context(&self) -> Context {
        Context::Prompt
    }

    fn offers(&self, action: Action) -> bool {
        matches!(
            action,
            Action::AllowOnce
                | Action::Deny
                | Action::Close
                | Action::ScrollDown
                | Action::ScrollUp
        )
    }

    fn handle_key(&mut self, action: Option<Action>, _key: &KeyEvent) -> Outcome {
        let answer = |approve: bool| {
            Outcome::close_with(ViewCommand::Request(
                ReplyTag::ApproveScripts {
                    run_id: self.run_id.clone(),
                    approve,
                },
                Request::ApproveScripts {
                    run_id: self.run_id.clone(),
                    approve,
                },
            ))
        };
        match action {
            Some(Action::AllowOnce) => answer(true),
            Some(Action::Deny) => answer(false),
            Some(Action::Close) => Outcome::close(),
            Some(Action::ScrollDown) => {
                self.scroll = (self.scroll + 1).min(self.lines().len().saturating_sub(1));
                Outcome::stay()
            }
            Some(Action::ScrollUp) => {
                self.scroll = self.scroll.saturating_sub(1);
                Outcome::stay()
            }
            _ => Outcome::stay(),
        }
    }

    fn wheel(&mut self, down: bool) {
        self.scroll = if down {
            (self.scroll + 3).min(self.lines().len().saturating_sub(1))
        } else {
            self.scroll.saturating_sub(3)
        };
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, _context: &DrawContext<'_>) {
        let lines = self.lines();
        let width = body.width.saturating_sub(4).min(100);
        let height = (lines.len() as u16 + 6).min(body.height);
        let area = centered(body, width, height);
        let inner = view_box(
            buf,
            area,
            format!("{}: approve its repository's scripts?", self.run_id),
        );
        let room = inner.width as usize;
        put_line(
            buf,
            inner,
            0,
            &Line::styled(
                clip_width(
                    &format!(
                        "{} runs them only once you approve these exact scripts:",
                        self.approval.repository
                    ),
                    room,
                ),
                theme::text(),
            ),
        );
        let shown = inner.height.saturating_sub(3) as usize;
        for (row, line) in lines.iter().skip(self.scroll).take(shown).enumerate() {
            let clipped: Vec<Span<'static>> = line
                .spans
                .iter()
                .map(|s| Span::styled(clip_width(&s.content, room), s.style))
                .collect();
            let mut clipped = Line::from(clipped);
            clipped.style = line.style;
            put_line(buf, inner, row as u16 + 2, &clipped);
        }
        put_line(
            buf,
            inner,
            inner.height.saturating_sub(1),
            &Line::styled(
                clip_width(
                    "approved: its hash is kept, the setup runs, then the run starts · denied: the run starts without them",
                    room,
                ),
                theme::dim(),
            ),
        );
    }
}
