//! The diff view (`D` on a run): a worktree run's changed files with their counts, the
//! selected file's unified diff (git's own, from the dispatcher's `diff`), and merge,
//! keep and discard. It covers the whole body: the file list on the left, the patch on
//! the right, scrolled by keys or the wheel.
//!
//! What must stay true: everything shown comes from `diff` answers (the file list, then
//! one file's patch at a time); a patch is shown only for the file it was asked for
//! (an answer for another file is dropped); discard asks first; while a merge, keep or
//! discard is on its way nothing more is sent; the lines kept are made safe for the
//! screen.

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::confirm::{ConfirmView, Confirmable};
use super::{DrawContext, Outcome, View, ViewCommand};
use crate::canvas::{clip_width, put_line, view_box, width_of, wrap};
use crate::event::ReplyTag;
use crate::keys::{Action, Context};
use crate::theme;
use drover_core::dispatch::Request;
use drover_core::dispatch::api::{ChangeStat, DiffView, FileStat, WorkspaceActionView};
use drover_core::text::one_line;

/// Lines a page key moves the diff.
pub const PAGE_LINES: usize = 10;
/// Lines a wheel step moves the diff.
pub const WHEEL_LINES: usize = 3;

/// Where the view stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffState {
    /// Waiting for the file list.
    Loading,
    Ready,
    /// The last request was refused (shown; the view stays).
    Failed(String),
    /// A merge, keep or discard was sent; waiting for its answer.
    Sending(String),
}

/// One file's patch, as lines safe to draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub path: String,
    pub lines: Vec<String>,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiffScreen {
    pub run_id: String,
    pub title: String,
    pub branch: Option<String>,
    pub base_branch: Option<String>,
    pub base_commit: Option<String>,
    pub change: Option<ChangeStat>,
    pub files: Vec<FileStat>,
    /// The file list is cut (more files than drover lists).
    pub files_truncated: bool,
    pub selected: usize,
    /// The first diff line shown.
    pub scroll: usize,
    /// The selected file's patch, once it came.
    pub patch: Option<Patch>,
    pub state: DiffState,
}

impl DiffScreen {
    pub fn new(run_id: impl Into<String>, title: impl Into<String>) -> DiffScreen {
        DiffScreen {
            run_id: run_id.into(),
            title: title.into(),
            branch: None,
            base_branch: None,
            base_commit: None,
            change: None,
            files: Vec::new(),
            files_truncated: false,
            selected: 0,
            scroll: 0,
            patch: None,
            state: DiffState::Loading,
        }
    }

    /// The request for the file list.
    pub fn list_request(&self) -> (ReplyTag, Request) {
        (
            ReplyTag::Diff {
                run_id: self.run_id.clone(),
                file: None,
            },
            Request::Diff {
                run_id: self.run_id.clone(),
                file: None,
                stat: true,
            },
        )
    }

    /// The request for the selected file's patch, if there is a file.
    pub fn file_request(&self) -> Option<(ReplyTag, Request)> {
        let path = self.files.get(self.selected)?.path.clone();
        Some((
            ReplyTag::Diff {
                run_id: self.run_id.clone(),
                file: Some(path.clone()),
            },
            Request::Diff {
                run_id: self.run_id.clone(),
                file: Some(path),
                stat: false,
            },
        ))
    }

    pub fn selected_file(&self) -> Option<&FileStat> {
        self.files.get(self.selected)
    }

    /// The file list came: the selection stays on the same path when it is still there.
    /// Returns the request for the selected file's patch.
    pub fn set_files(&mut self, view: DiffView) -> Option<(ReplyTag, Request)> {
        let keep = self.selected_file().map(|f| f.path.clone());
        self.branch = view.branch;
        self.base_branch = view.base_branch;
        self.base_commit = view.base_commit;
        self.change = Some(view.change);
        self.files_truncated = view.truncated;
        self.files = view.files;
        self.selected = keep
            .and_then(|p| self.files.iter().position(|f| f.path == p))
            .unwrap_or(0);
        if !matches!(self.state, DiffState::Sending(_)) {
            self.state = DiffState::Ready;
        }
        if self.files.is_empty() {
            self.patch = None;
            return None;
        }
        self.file_request()
    }

    /// A file's patch came; kept only when it is the selected file's.
    pub fn set_patch(&mut self, view: DiffView) {
        let Some(path) = view.file else {
            return;
        };
        if self.selected_file().map(|f| &f.path) != Some(&path) {
            return;
        }
        let same = self.patch.as_ref().is_some_and(|p| p.path == path);
        let mut lines = view
            .patch
            .as_deref()
            .map(crate::format::safe_lines)
            .unwrap_or_default();
        // git ends its diff with a newline: no empty last line.
        if lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        if !same {
            self.scroll = 0;
        }
        self.scroll = self.scroll.min(lines.len().saturating_sub(1));
        self.patch = Some(Patch {
            path,
            lines,
            truncated: view.truncated,
        });
    }

    /// A request of this view was refused.
    pub fn failed(&mut self, why: String) {
        self.state = DiffState::Failed(why);
    }

    /// A merge, keep or discard was done: the view says so (the app closes it when the
    /// worktree is gone).
    pub fn acted(&mut self, _view: &WorkspaceActionView) {
        self.state = DiffState::Ready;
    }

    fn busy(&self) -> bool {
        matches!(self.state, DiffState::Sending(_))
    }

    fn scroll_by(&mut self, delta: isize) {
        let max = self
            .patch
            .as_ref()
            .map_or(0, |p| p.lines.len().saturating_sub(1));
        let to = (self.scroll as isize + delta).clamp(0, max as isize);
        self.scroll = to as usize;
    }

    fn select(&mut self, delta: isize) -> Outcome {
        if self.files.is_empty() {
            return Outcome::stay();
        }
        let n = self.files.len() as isize;
        let to = (self.selected as isize + delta).rem_euclid(n) as usize;
        if to == self.selected {
            return Outcome::stay();
        }
        self.selected = to;
        self.scroll = 0;
        self.patch = None;
        match self.file_request() {
            Some((tag, request)) => Outcome::stay_with(ViewCommand::Request(tag, request)),
            None => Outcome::stay(),
        }
    }

    fn send(&mut self, what: &str, tag: ReplyTag, request: Request) -> Outcome {
        self.state = DiffState::Sending(what.to_string());
        Outcome::stay_with(ViewCommand::Request(tag, request))
    }
}

impl View for DiffScreen {
    fn context(&self) -> Context {
        Context::Diff
    }

    /// Nothing to merge, keep or discard while the file list is not in.
    fn offers(&self, action: Action) -> bool {
        !(self.state == DiffState::Loading
            && matches!(
                action,
                Action::Merge | Action::MergeSquash | Action::Keep | Action::Discard
            ))
    }

    fn wheel(&mut self, down: bool) {
        let step = WHEEL_LINES as isize;
        self.scroll_by(if down { step } else { -step });
    }

    fn handle_key(&mut self, action: Option<Action>, _key: &KeyEvent) -> Outcome {
        let run_id = self.run_id.clone();
        let tag = |action: &str| ReplyTag::WorkspaceAction {
            run_id: run_id.clone(),
            action: action.to_string(),
        };
        match action {
            Some(Action::Close) => Outcome::close(),
            Some(Action::ScrollDown) => {
                self.scroll_by(1);
                Outcome::stay()
            }
            Some(Action::ScrollUp) => {
                self.scroll_by(-1);
                Outcome::stay()
            }
            Some(Action::PageDown) => {
                self.scroll_by(PAGE_LINES as isize);
                Outcome::stay()
            }
            Some(Action::PageUp) => {
                self.scroll_by(-(PAGE_LINES as isize));
                Outcome::stay()
            }
            Some(Action::NextFile) => self.select(1),
            Some(Action::PrevFile) => self.select(-1),
            Some(Action::Refresh) if !self.busy() => {
                let (tag, request) = self.list_request();
                Outcome::stay_with(ViewCommand::Reread {
                    run_id: self.run_id.clone(),
                    tag,
                    request,
                })
            }
            Some(Action::Merge | Action::MergeSquash) if !self.busy() => {
                let squash = action == Some(Action::MergeSquash);
                let into = self
                    .base_branch
                    .clone()
                    .unwrap_or_else(|| "its base".into());
                self.send(
                    &format!(
                        "merging into {into}{}",
                        if squash { " as one commit" } else { "" }
                    ),
                    tag("merge"),
                    Request::Merge {
                        run_id: self.run_id.clone(),
                        squash,
                        message: None,
                    },
                )
            }
            Some(Action::Keep) if !self.busy() => self.send(
                "keeping the branch",
                tag("keep"),
                Request::Keep {
                    run_id: self.run_id.clone(),
                },
            ),
            Some(Action::Discard) if !self.busy() => {
                let branch = self.branch.clone().unwrap_or_else(|| "its branch".into());
                let change = self
                    .change
                    .filter(|c| !c.is_empty())
                    .map(|c| format!(" ({})", c.words()))
                    .unwrap_or_default();
                Outcome::stay_with(ViewCommand::Ask(ConfirmView {
                    what: Confirmable::Discard {
                        run_id: self.run_id.clone(),
                    },
                    message: format!(
                        "Discard {}'s work{change}? Its worktree and the branch {branch} are deleted; this cannot be undone.",
                        self.run_id
                    ),
                }))
            }
            _ => Outcome::stay(),
        }
    }

    /// The diff view: the changed files on the left, the selected file's diff on the right.
    fn draw(&self, buf: &mut Buffer, body: Rect, _context: &DrawContext<'_>) {
        let title = format!(
            "Diff · {} ({})",
            clip_width(&one_line(&self.title), 40),
            self.run_id
        );
        let inner = view_box(buf, body, title);
        if inner.height < 3 || inner.width < 20 {
            return;
        }
        let width = inner.width as usize;
        // The head line: branch against base, and the totals.
        let base = drover_core::workspace::short_commit(self.base_commit.as_deref());
        let mut head = vec![Span::styled(
            self.branch.clone().unwrap_or_else(|| "…".into()),
            theme::title(),
        )];
        head.push(Span::styled(
            match &self.base_branch {
                Some(b) => format!(" against {b} at {base}"),
                None => format!(" against {base}"),
            },
            theme::dim(),
        ));
        if let Some(change) = self.change {
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

        // The foot (drawn last): a refusal in full, wrapped — up to half the view — so it
        // sizes the rows above it.
        let foot: Vec<Line<'static>> = match &self.state {
            DiffState::Failed(why) => {
                let mut lines: Vec<Line<'static>> = wrap(&one_line(why), width)
                    .into_iter()
                    .map(|l| Line::styled(l, theme::error()))
                    .collect();
                lines.truncate((inner.height as usize / 2).max(1));
                lines
            }
            _ => vec![Line::raw("")],
        };
        let foot_h = foot.len() as u16;
        let rows = inner.height.saturating_sub(1 + foot_h);
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

        // The file list, scrolled to keep the selection in self.
        let list_rows = rows as usize;
        let top = self.selected.saturating_sub(list_rows.saturating_sub(1));
        for (i, f) in self.files.iter().enumerate().skip(top).take(list_rows) {
            let selected = i == self.selected;
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
        if self.files.is_empty() && self.state != DiffState::Loading {
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
        match (&self.patch, self.selected_file()) {
            (Some(patch), _) => {
                total = patch.lines.len();
                let top = self.scroll.min(total.saturating_sub(room));
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
                let words = match self.state {
                    DiffState::Loading => "reading the run's change…",
                    _ => "The run changed nothing against its base.",
                };
                put_line(buf, patch_area, 0, &Line::styled(words, theme::dim()));
            }
        }

        // The foot: what is under way, why it was refused, or where the diff is scrolled to.
        let foot = match &self.state {
            DiffState::Failed(_) => foot,
            DiffState::Sending(what) => vec![Line::styled(format!("{what}…"), theme::focus())],
            DiffState::Loading | DiffState::Ready if total > room => vec![Line::styled(
                format!(
                    "lines {}–{shown} of {total}{} · ↑/↓ pgup/pgdn or the wheel to scroll",
                    self.scroll.min(total.saturating_sub(room)) + 1,
                    if self.patch.as_ref().is_some_and(|p| p.truncated) {
                        " (cut)"
                    } else {
                        ""
                    }
                ),
                theme::dim(),
            )],
            DiffState::Loading | DiffState::Ready => Vec::new(),
        };
        let foot_y = inner.height.saturating_sub(foot_h);
        for (i, line) in foot.iter().enumerate() {
            put_line(buf, inner, foot_y + i as u16, line);
        }
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
