//! Views on a stack above the dashboard — the permission prompt (and its question and
//! rule chooser modes), the route card, the diff view, the dispatch form, text boxes
//! (follow-up, filter), confirmations, help, the spend view and the full-screen transcript — and the [`View`] trait each implements.
//!
//! What must stay true: the top view gets every key first and handles it itself; it
//! says whether it is done ([`Outcome::close`]) and what it wants done as a typed
//! [`ViewCommand`] — it never talks to the dispatcher. It names the hints the footer
//! shows from the same rules its keys follow, and draws itself from a [`DrawContext`]
//! (no I/O). Answers come back to the view that asked through the app (by
//! [`crate::event::ReplyTag`]). The stack knows none of the views: it holds
//! `Box<dyn View>` and reaches a view by its type only for the app, which routes answers.
//! A new view is one file here (its `pub mod` line below) plus the place that opens it;
//! one with keys of its own adds its [`Context`] and bindings in [`crate::keys`].

pub mod confirm;
pub mod diff;
pub mod form;
pub mod help;
pub mod input;
pub mod prompt;
pub mod route;
pub mod scripts;
pub mod spend;
pub mod text;
pub mod transcript;

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use std::any::Any;
use std::fmt::Debug;

use crate::event::ReplyTag;
use crate::keys::{Action, Context, KeyTable};
use crate::model::ViewModel;
use confirm::ConfirmView;
use drover_core::dispatch::Request;

/// One view on the stack: its keys, the hints the footer shows for it, how it draws,
/// and when it is done (a key's [`Outcome`] closes it).
pub trait View: Any + Debug {
    /// The key table this view reads now.
    fn context(&self) -> Context;

    /// One key, with the action the key table gives it in [`View::context`]: what the
    /// view wants done, and whether it is done.
    fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome;

    /// Whether `action` does something here now. The footer leaves out the hints of
    /// actions a view does not offer (allowing a question, merging before the file list
    /// is in); a view whose keys depend on its state reads the same rule in
    /// [`View::handle_key`], so the hint and the key agree.
    fn offers(&self, _action: Action) -> bool {
        true
    }

    /// Whether number keys pick a choice here (the footer says `1-9 choose`).
    fn takes_digits(&self) -> bool {
        false
    }

    /// The footer's hints while this view is on top, as (key, word): `1-9 choose` when
    /// number keys pick, then its key table's hints for the actions it offers now.
    fn hints(&self, keys: &KeyTable) -> Vec<(String, &'static str)> {
        let mut hints = Vec::new();
        if self.takes_digits() {
            hints.push(("1-9".to_string(), "choose"));
        }
        hints.extend(keys.hint_words(self.context(), |action| self.offers(action)));
        hints
    }

    /// The mouse wheel over the view (`down`: towards the end). Nothing by default.
    fn wheel(&mut self, _down: bool) {}

    /// Whether this view shows a countdown (a frame is due every second while it is on
    /// the stack).
    fn counts_down(&self) -> bool {
        false
    }

    /// Draws the view over `body` (the area between the header and the attention line).
    fn draw(&self, buf: &mut Buffer, body: Rect, context: &DrawContext<'_>);
}

/// What a view may read while it draws: the view model and the key table; and where a
/// view that shows a pending request records that it drew it (the answer guard).
#[derive(Debug, Clone, Copy)]
pub struct DrawContext<'a> {
    pub model: &'a ViewModel,
    pub keys: &'a KeyTable,
    pub shown: &'a crate::shown::Shown,
}

/// What a view wants done.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewCommand {
    /// Send a request; the answer comes back with the tag.
    Request(ReplyTag, Request),
    /// Read a run's work again (the diff view's `r`): send the request, and read the run's
    /// pull request again too when it has one (docs/ARCHITECTURE.md §"Workspaces").
    Reread {
        /// The run.
        run_id: String,
        /// The view's own read.
        tag: ReplyTag,
        /// Its request.
        request: Request,
    },
    /// Leave the dashboard.
    Quit,
    /// Show only runs matching this text.
    SetFilter(String),
    /// Show the oldest pending request other than `after`.
    NextPrompt { after: Option<String> },
    /// Ask first (a confirmation on top of this view).
    Ask(ConfirmView),
    /// Put `text` on the system clipboard; `what` says what it was (`3 lines`).
    Copy { text: String, what: String },
    /// Say this on the flash line.
    Flash(String),
}

/// The result of a key.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The view is done: it leaves the stack.
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

    /// The view stays, and wants `command` done.
    pub fn stay_with(command: ViewCommand) -> Outcome {
        Outcome {
            close: false,
            command: Some(command),
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

/// The views over the dashboard, bottom first; the top one gets the keys. Views are
/// reached by position or by their type (the app routes an answer to the view that
/// asked for it).
#[derive(Debug, Default)]
pub struct ViewStack {
    views: Vec<Box<dyn View>>,
}

impl ViewStack {
    /// Puts `view` on top.
    pub fn push(&mut self, view: impl View) {
        self.views.push(Box::new(view));
    }

    /// Takes the top view off.
    pub fn pop(&mut self) {
        self.views.pop();
    }

    /// Takes the view at `at` off (nothing when there is none).
    pub fn remove(&mut self, at: usize) {
        if at < self.views.len() {
            self.views.remove(at);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.views.is_empty()
    }

    pub fn len(&self) -> usize {
        self.views.len()
    }

    /// Whether the view at `at` is the top one.
    pub fn is_top(&self, at: usize) -> bool {
        at + 1 == self.views.len()
    }

    pub fn top(&self) -> Option<&dyn View> {
        self.views.last().map(|v| &**v)
    }

    pub fn top_mut(&mut self) -> Option<&mut dyn View> {
        match self.views.last_mut() {
            Some(v) => Some(&mut **v),
            None => None,
        }
    }

    /// Every view, bottom first (the order they are drawn in).
    pub fn iter(&self) -> impl Iterator<Item = &dyn View> {
        self.views.iter().map(|v| &**v)
    }

    /// The top view, when it is a `T`.
    pub fn top_as<T: View>(&self) -> Option<&T> {
        self.views.last().and_then(|v| downcast(&**v))
    }

    /// The topmost `T` that `wanted` picks, and where it is.
    pub fn position<T: View>(&self, wanted: impl Fn(&T) -> bool) -> Option<usize> {
        self.views
            .iter()
            .rposition(|v| downcast::<T>(&**v).is_some_and(&wanted))
    }

    /// The topmost `T` that `wanted` picks.
    pub fn find<T: View>(&self, wanted: impl Fn(&T) -> bool) -> Option<&T> {
        self.views
            .iter()
            .rev()
            .filter_map(|v| downcast::<T>(&**v))
            .find(|v| wanted(v))
    }

    /// The view at `at`, when it is a `T`.
    pub fn get_mut<T: View>(&mut self, at: usize) -> Option<&mut T> {
        self.views.get_mut(at).and_then(|v| downcast_mut(&mut **v))
    }

    /// Every `T` on the stack, bottom first.
    pub fn each_mut<T: View>(&mut self) -> impl Iterator<Item = &mut T> {
        self.views.iter_mut().filter_map(|v| downcast_mut(&mut **v))
    }
}

fn downcast<T: View>(view: &dyn View) -> Option<&T> {
    let any: &dyn Any = view;
    any.downcast_ref()
}

fn downcast_mut<T: View>(view: &mut dyn View) -> Option<&mut T> {
    let any: &mut dyn Any = view;
    any.downcast_mut()
}

#[cfg(test)]
mod tests;
