//! Key bindings as data: one table per context (the dashboard, a permission prompt, a
//! route card, the diff view, the dispatch form, a text box, a confirmation, help), used
//! both to handle keys and to draw the footer hints and the help overlay.
//!
//! What must stay true: a key does what the footer and help say it does, because all
//! three read the same [`KeyTable`]. Bindings are `key = "action_name"` pairs
//! ([`KeyTable::with_overrides`] reads them from a TOML table shaped like
//! `[keys.dashboard] "N" = "new_dispatch"`; `"none"` unbinds a key). Text boxes take
//! printable characters before the table is consulted, so only non-printing keys are
//! bound in text contexts.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::fmt;

/// Where keys are read: the top view of the stack, or the dashboard under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Context {
    Dashboard,
    Prompt,
    Form,
    Input,
    Confirm,
    Help,
    Route,
    Diff,
    Transcript,
}

impl Context {
    pub const ALL: [Context; 9] = [
        Context::Dashboard,
        Context::Prompt,
        Context::Route,
        Context::Diff,
        Context::Transcript,
        Context::Form,
        Context::Input,
        Context::Confirm,
        Context::Help,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Context::Dashboard => "dashboard",
            Context::Prompt => "prompt",
            Context::Form => "form",
            Context::Input => "input",
            Context::Confirm => "confirm",
            Context::Help => "help",
            Context::Route => "route",
            Context::Diff => "diff",
            Context::Transcript => "transcript",
        }
    }

    /// The heading of this context's section in the help overlay.
    pub fn heading(self) -> &'static str {
        match self {
            Context::Dashboard => "Dashboard",
            Context::Prompt => "Permission prompt / question",
            Context::Form => "New dispatch form",
            Context::Input => "Text box (follow-up, filter, message)",
            Context::Confirm => "Confirmation",
            Context::Help => "Help",
            Context::Route => "Route card (1-9 picks an option)",
            Context::Diff => "Diff view (a worktree run's change)",
            Context::Transcript => "Transcript (full screen)",
        }
    }

    fn from_name(name: &str) -> Option<Context> {
        Context::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// Everything a key can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    // dashboard
    SelectNext,
    SelectPrev,
    SelectFirst,
    SelectLast,
    ScrollUp,
    ScrollDown,
    FollowEnd,
    Open,
    NextPending,
    NewDispatch,
    FollowUp,
    Stop,
    Complete,
    Remove,
    RemoveFinished,
    KillAll,
    Filter,
    Help,
    Quit,
    Escalate,
    Resume,
    OpenDiff,
    /// Open the user's editor in the selected run's directory.
    OpenEditor,
    /// Open the user's shell in the selected run's directory.
    OpenShell,
    /// Take the selected idle run over in its CLI's own interface (`drover attach`).
    TakeOver,
    /// Move the focus between the run list and the selected run's detail pane.
    FocusPane,
    /// Bring the selected worktree run's branch up to date with its base.
    UpdateBranch,
    /// Dispatch the selected run's task again (the form, filled from its spec).
    Redispatch,
    /// Push the selected worktree run's branch and open its pull request (`drover pr`).
    PullRequest,
    /// Spend over time: per day for 30 days, by model and by repository (`drover spend`).
    Spend,
    /// Allow the request on the attention line, once.
    AttentionAllow,
    /// Deny the request on the attention line.
    AttentionDeny,
    /// The rule chooser for the request on the attention line.
    AttentionRule,
    /// Show every run again (the filter cleared).
    ClearFilter,
    // diff view
    NextFile,
    PrevFile,
    PageDown,
    PageUp,
    Merge,
    MergeSquash,
    Keep,
    Discard,
    Refresh,
    // transcript view
    /// Open the selected run's transcript full screen.
    OpenTranscript,
    /// Expand or collapse the tool call under the cursor.
    ToggleTool,
    /// Start (or drop) a selection of lines at the cursor.
    SelectLines,
    /// Copy the selection (or the line under the cursor) to the clipboard.
    Copy,
    /// Copy the run's whole result block to the clipboard.
    CopyResult,
    /// The next line matching the dashboard's filter.
    NextMatch,
    /// The previous line matching the dashboard's filter.
    PrevMatch,
    // prompt
    AllowOnce,
    AllowAlways,
    AddRule,
    Deny,
    DenyWithMessage,
    TypeAnswer,
    NextRequest,
    // route card
    Pick,
    ToggleRemember,
    Decline,
    // form and text boxes
    NextField,
    PrevField,
    ChoicePrev,
    ChoiceNext,
    Submit,
    // everywhere
    Confirm,
    Close,
}

impl Action {
    pub const ALL: [Action; 67] = [
        Action::SelectNext,
        Action::SelectPrev,
        Action::SelectFirst,
        Action::SelectLast,
        Action::ScrollUp,
        Action::ScrollDown,
        Action::FollowEnd,
        Action::Open,
        Action::NextPending,
        Action::NewDispatch,
        Action::FollowUp,
        Action::Stop,
        Action::Complete,
        Action::Remove,
        Action::RemoveFinished,
        Action::KillAll,
        Action::Filter,
        Action::Help,
        Action::Quit,
        Action::Escalate,
        Action::Resume,
        Action::OpenDiff,
        Action::OpenEditor,
        Action::OpenShell,
        Action::TakeOver,
        Action::FocusPane,
        Action::UpdateBranch,
        Action::Redispatch,
        Action::PullRequest,
        Action::Spend,
        Action::AttentionAllow,
        Action::AttentionDeny,
        Action::AttentionRule,
        Action::ClearFilter,
        Action::NextFile,
        Action::PrevFile,
        Action::PageDown,
        Action::PageUp,
        Action::Merge,
        Action::MergeSquash,
        Action::Keep,
        Action::Discard,
        Action::Refresh,
        Action::OpenTranscript,
        Action::ToggleTool,
        Action::SelectLines,
        Action::Copy,
        Action::CopyResult,
        Action::NextMatch,
        Action::PrevMatch,
        Action::Pick,
        Action::ToggleRemember,
        Action::Decline,
        Action::AllowOnce,
        Action::AllowAlways,
        Action::AddRule,
        Action::Deny,
        Action::DenyWithMessage,
        Action::TypeAnswer,
        Action::NextRequest,
        Action::NextField,
        Action::PrevField,
        Action::ChoicePrev,
        Action::ChoiceNext,
        Action::Submit,
        Action::Confirm,
        Action::Close,
    ];

    /// The name used in the config file (`new_dispatch`).
    pub fn name(self) -> &'static str {
        match self {
            Action::SelectNext => "select_next",
            Action::SelectPrev => "select_prev",
            Action::SelectFirst => "select_first",
            Action::SelectLast => "select_last",
            Action::ScrollUp => "scroll_up",
            Action::ScrollDown => "scroll_down",
            Action::FollowEnd => "follow_end",
            Action::Open => "open",
            Action::NextPending => "next_pending",
            Action::NewDispatch => "new_dispatch",
            Action::FollowUp => "follow_up",
            Action::Stop => "stop",
            Action::Complete => "complete",
            Action::Remove => "remove",
            Action::RemoveFinished => "remove_finished",
            Action::KillAll => "kill_all",
            Action::Filter => "filter",
            Action::Help => "help",
            Action::Quit => "quit",
            Action::Escalate => "escalate",
            Action::Resume => "resume",
            Action::OpenDiff => "open_diff",
            Action::OpenEditor => "open_editor",
            Action::OpenShell => "open_shell",
            Action::TakeOver => "take_over",
            Action::FocusPane => "focus_pane",
            Action::UpdateBranch => "update_branch",
            Action::Redispatch => "redispatch",
            Action::PullRequest => "pull_request",
            Action::Spend => "spend",
            Action::AttentionAllow => "attention_allow",
            Action::AttentionDeny => "attention_deny",
            Action::AttentionRule => "attention_rule",
            Action::ClearFilter => "clear_filter",
            Action::NextFile => "next_file",
            Action::PrevFile => "prev_file",
            Action::PageDown => "page_down",
            Action::PageUp => "page_up",
            Action::Merge => "merge",
            Action::MergeSquash => "merge_squash",
            Action::Keep => "keep",
            Action::Discard => "discard",
            Action::Refresh => "refresh",
            Action::OpenTranscript => "open_transcript",
            Action::ToggleTool => "toggle_tool",
            Action::SelectLines => "select_lines",
            Action::Copy => "copy",
            Action::CopyResult => "copy_result",
            Action::NextMatch => "next_match",
            Action::PrevMatch => "prev_match",
            Action::Pick => "pick",
            Action::ToggleRemember => "toggle_remember",
            Action::Decline => "decline",
            Action::AllowOnce => "allow_once",
            Action::AllowAlways => "allow_always",
            Action::AddRule => "add_rule",
            Action::Deny => "deny",
            Action::DenyWithMessage => "deny_with_message",
            Action::TypeAnswer => "type_answer",
            Action::NextRequest => "next_request",
            Action::NextField => "next_field",
            Action::PrevField => "prev_field",
            Action::ChoicePrev => "choice_prev",
            Action::ChoiceNext => "choice_next",
            Action::Submit => "submit",
            Action::Confirm => "confirm",
            Action::Close => "close",
        }
    }

    /// What it does, for the help overlay.
    pub fn describe(self) -> &'static str {
        match self {
            Action::SelectNext => "select the next run",
            Action::SelectPrev => "select the previous run",
            Action::SelectFirst => "select the first run",
            Action::SelectLast => "select the last run",
            Action::ScrollUp => "scroll up (transcript, long input)",
            Action::ScrollDown => "scroll down (transcript, long input)",
            Action::FollowEnd => "follow the end of the transcript",
            Action::Open => "answer the selected run (prompt or follow-up)",
            Action::NextPending => "open the request on the attention line in full",
            Action::NewDispatch => "dispatch a new run",
            Action::FollowUp => "send a follow-up to the selected run",
            Action::Stop => "stop the selected run",
            Action::Complete => "complete the selected run",
            Action::Remove => "remove the selected finished run",
            Action::RemoveFinished => "remove every finished run",
            Action::KillAll => "stop every active run (asks first)",
            Action::Filter => "filter runs by title, provider, model or id",
            Action::Help => "show this help",
            Action::Quit => "leave; the runs go on (`drover shutdown` stops drover)",
            Action::Escalate => "take the escalation / retry offered to the selected run",
            Action::Resume => "resume an interrupted or hibernated run, or resend a held turn",
            Action::OpenDiff => "show the selected worktree run's diff (merge, keep, discard)",
            Action::OpenEditor => {
                "open your editor ($VISUAL, $EDITOR, vi) in the selected run's directory"
            }
            Action::OpenShell => "open your shell ($SHELL) in the selected run's directory",
            Action::TakeOver => {
                "take the selected idle run over in its CLI's own interface; leave it to hand back"
            }
            Action::FocusPane => {
                "focus the run list or the selected run's transcript (focused: enter reads it full screen, j/k scroll it)"
            }
            Action::UpdateBranch => {
                "merge the base branch into the selected worktree run's branch (a conflict: the follow-up)"
            }
            Action::Redispatch => "dispatch the selected run's task again (the form, filled in)",
            Action::PullRequest => {
                "push the selected worktree run's branch; open or update its pull request"
            }
            Action::Spend => "spend over time: each day of the last 30, by model, by repository",
            Action::AttentionAllow => "allow the request on the attention line once",
            Action::AttentionDeny => "deny the request on the attention line",
            Action::AttentionRule => {
                "make a rule from the request on the attention line (saving it answers the request)"
            }
            Action::ClearFilter => "clear the filter",
            Action::NextFile => "next changed file",
            Action::PrevFile => "previous changed file",
            Action::PageDown => "scroll down a page",
            Action::PageUp => "scroll up a page",
            Action::Merge => "merge the run's work into its base branch in your checkout",
            Action::MergeSquash => "merge it as one squashed commit",
            Action::Keep => "remove the worktree, keep the branch (a finished run)",
            Action::Discard => "delete the worktree and the branch (asks first)",
            Action::Refresh => "read the diff (and its pull request) again",
            Action::OpenTranscript => {
                "read the selected run's transcript full screen (select, copy, expand tool calls)"
            }
            Action::ToggleTool => "expand or collapse the tool call under the cursor",
            Action::SelectLines => {
                "start a selection at the cursor (j/k extend it); again to drop it"
            }
            Action::Copy => {
                "copy the selected lines (or the cursor's line) to the clipboard (OSC 52)"
            }
            Action::CopyResult => "copy the run's whole result block to the clipboard (OSC 52)",
            Action::NextMatch => "the next line matching the filter (/)",
            Action::PrevMatch => "the previous line matching the filter (/)",
            Action::Pick => "pick the highlighted option",
            Action::ToggleRemember => "remember the pick for this task class",
            Action::Decline => "decline the card (the run is stopped)",
            Action::AllowOnce => "allow this tool use once",
            Action::AllowAlways => "allow this exact request for the rest of this run",
            Action::AddRule => {
                "save an approval rule for requests like this (scope, pattern) and answer"
            }
            Action::Deny => "deny",
            Action::DenyWithMessage => "deny with a message to the model",
            Action::TypeAnswer => "type an answer to a question",
            Action::NextRequest => "show the next pending request",
            Action::NextField => "next field",
            Action::PrevField => "previous field",
            Action::ChoicePrev => "previous choice",
            Action::ChoiceNext => "next choice",
            Action::Submit => "send",
            Action::Confirm => "yes",
            Action::Close => "close / cancel",
        }
    }

    /// What the action does in `context`, for the help (the same action can read
    /// differently in a view: on a route card `j` moves to the next option, not run).
    pub fn describe_in(self, context: Context) -> &'static str {
        match (context, self) {
            (Context::Route, Action::SelectNext) => "highlight the next option",
            (Context::Route, Action::SelectPrev) => "highlight the previous option",
            (Context::Route, Action::NextRequest) => "show the next thing waiting for you",
            (Context::Prompt, Action::ScrollDown) => "scroll the request down",
            (Context::Prompt, Action::ScrollUp) => "scroll the request up",
            (Context::Help, Action::ScrollDown) => "scroll down",
            (Context::Help, Action::ScrollUp) => "scroll up",
            (Context::Transcript, Action::SelectNext) => "the next line",
            (Context::Transcript, Action::SelectPrev) => "the previous line",
            (Context::Transcript, Action::SelectFirst) => "the first line",
            (Context::Transcript, Action::SelectLast) => "the last line (follows new lines)",
            (Context::Transcript, Action::PageDown) => "a page down",
            (Context::Transcript, Action::PageUp) => "a page up",
            (Context::Transcript, Action::Close) => "leave (esc first drops a selection)",
            (Context::Confirm, Action::Confirm) => "yes (stopping a working run: wrap up first)",
            (Context::Confirm, Action::Stop) => "stopping a working run: stop it now",
            _ => self.describe(),
        }
    }

    /// The word in the footer, for actions worth a hint there.
    pub fn hint(self) -> Option<&'static str> {
        Some(match self {
            Action::Open => "answer",
            Action::NextPending => "open request",
            Action::NewDispatch => "new",
            Action::FollowUp => "follow-up",
            Action::Stop => "stop",
            Action::Complete => "complete",
            Action::Filter => "filter",
            Action::Help => "help",
            Action::Quit => "leave",
            Action::Escalate => "escalate",
            Action::Resume => "resume",
            Action::OpenDiff => "diff",
            Action::Redispatch => "again",
            Action::ClearFilter => "clear filter",
            Action::NextFile => "next file",
            Action::Merge => "merge",
            Action::MergeSquash => "squash",
            Action::Keep => "keep",
            Action::Discard => "discard",
            Action::ToggleTool => "expand",
            Action::SelectLines => "select",
            Action::Copy => "copy",
            Action::CopyResult => "copy result",
            Action::NextMatch => "next match",
            Action::Pick => "pick",
            Action::ToggleRemember => "remember",
            Action::Decline => "decline",
            Action::AllowOnce => "allow",
            Action::AllowAlways => "always",
            Action::AddRule => "rule",
            Action::Deny => "deny",
            Action::DenyWithMessage => "deny+msg",
            Action::TypeAnswer => "type answer",
            Action::NextRequest => "next",
            Action::NextField => "next field",
            Action::ChoiceNext => "change",
            Action::Submit => "send",
            Action::Confirm => "yes",
            Action::Close => "close",
            _ => return None,
        })
    }

    fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// One key with its modifiers (Shift is part of the character: `X`, not shift-x).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyCombo {
    pub code: KeyCode,
    pub ctrl: bool,
    pub alt: bool,
}

impl KeyCombo {
    pub const fn plain(code: KeyCode) -> KeyCombo {
        KeyCombo {
            code,
            ctrl: false,
            alt: false,
        }
    }

    pub const fn char(c: char) -> KeyCombo {
        KeyCombo::plain(KeyCode::Char(c))
    }

    pub const fn ctrl(c: char) -> KeyCombo {
        KeyCombo {
            code: KeyCode::Char(c),
            ctrl: true,
            alt: false,
        }
    }

    /// The combo a key event is, with Shift folded into characters.
    pub fn of(event: &KeyEvent) -> KeyCombo {
        let code = match event.code {
            KeyCode::Char(c) if event.modifiers.contains(KeyModifiers::CONTROL) => {
                KeyCode::Char(c.to_ascii_lowercase())
            }
            // Some terminals report Shift-Tab as Tab with Shift.
            KeyCode::Tab if event.modifiers.contains(KeyModifiers::SHIFT) => KeyCode::BackTab,
            code => code,
        };
        KeyCombo {
            code,
            ctrl: event.modifiers.contains(KeyModifiers::CONTROL),
            alt: event.modifiers.contains(KeyModifiers::ALT),
        }
    }

    /// Parses `j`, `J`, `?`, `ctrl-c`, `alt-x`, `enter`, `esc`, `tab`, `backtab`, `up`,
    /// `down`, `left`, `right`, `pgup`, `pgdn`, `home`, `end`, `space`, `backspace`,
    /// `delete`, `f1`…`f12`.
    pub fn parse(text: &str) -> Option<KeyCombo> {
        use drover_core::config::keys::{KeyText, NamedKey};
        let (code, ctrl, alt) = match KeyText::parse(text)? {
            KeyText::Char { c, ctrl, alt } => (KeyCode::Char(c), ctrl, alt),
            KeyText::Named { key, ctrl, alt } => {
                let code = match key {
                    NamedKey::Enter => KeyCode::Enter,
                    NamedKey::Esc => KeyCode::Esc,
                    NamedKey::Tab => KeyCode::Tab,
                    NamedKey::BackTab => KeyCode::BackTab,
                    NamedKey::Up => KeyCode::Up,
                    NamedKey::Down => KeyCode::Down,
                    NamedKey::Left => KeyCode::Left,
                    NamedKey::Right => KeyCode::Right,
                    NamedKey::PageUp => KeyCode::PageUp,
                    NamedKey::PageDown => KeyCode::PageDown,
                    NamedKey::Home => KeyCode::Home,
                    NamedKey::End => KeyCode::End,
                    NamedKey::Backspace => KeyCode::Backspace,
                    NamedKey::Delete => KeyCode::Delete,
                    NamedKey::F(n) => KeyCode::F(n),
                };
                (code, ctrl, alt)
            }
        };
        Some(KeyCombo { code, ctrl, alt })
    }
}

impl fmt::Display for KeyCombo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        if self.alt {
            f.write_str("alt-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => f.write_str("enter"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::BackTab => f.write_str("shift-tab"),
            KeyCode::Up => f.write_str("↑"),
            KeyCode::Down => f.write_str("↓"),
            KeyCode::Left => f.write_str("←"),
            KeyCode::Right => f.write_str("→"),
            KeyCode::PageUp => f.write_str("pgup"),
            KeyCode::PageDown => f.write_str("pgdn"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::Backspace => f.write_str("backspace"),
            KeyCode::Delete => f.write_str("delete"),
            KeyCode::F(n) => write!(f, "f{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// One binding: a key and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub key: KeyCombo,
    pub action: Action,
}

const fn bind(key: KeyCombo, action: Action) -> Binding {
    Binding { key, action }
}

use Action as A;
use KeyCode as K;

/// The shipped bindings. The first key of an action is the one hints show.
#[rustfmt::skip]
const DASHBOARD: &[Binding] = &[
    bind(KeyCombo::char('n'), A::NewDispatch),
    bind(KeyCombo::char('p'), A::NextPending),
    bind(KeyCombo::plain(K::Enter), A::Open),
    bind(KeyCombo::char('f'), A::FollowUp),
    bind(KeyCombo::char('s'), A::Stop),
    bind(KeyCombo::char('c'), A::Complete),
    bind(KeyCombo::char('/'), A::Filter),
    bind(KeyCombo::char('?'), A::Help),
    bind(KeyCombo::char('q'), A::Quit),
    bind(KeyCombo::ctrl('c'), A::Quit),
    bind(KeyCombo::char('j'), A::SelectNext),
    bind(KeyCombo::plain(K::Down), A::SelectNext),
    bind(KeyCombo::char('k'), A::SelectPrev),
    bind(KeyCombo::plain(K::Up), A::SelectPrev),
    bind(KeyCombo::char('g'), A::SelectFirst),
    bind(KeyCombo::plain(K::Home), A::SelectFirst),
    bind(KeyCombo::char('G'), A::SelectLast),
    bind(KeyCombo::plain(K::End), A::SelectLast),
    bind(KeyCombo::plain(K::PageUp), A::ScrollUp),
    bind(KeyCombo::plain(K::PageDown), A::ScrollDown),
    bind(KeyCombo::char('F'), A::FollowEnd),
    bind(KeyCombo::char('x'), A::Remove),
    bind(KeyCombo::char('X'), A::RemoveFinished),
    bind(KeyCombo::char('K'), A::KillAll),
    bind(KeyCombo::char('e'), A::Escalate),
    bind(KeyCombo::char('R'), A::Resume),
    bind(KeyCombo::char('D'), A::OpenDiff),
    bind(KeyCombo::char('t'), A::OpenTranscript),
    bind(KeyCombo::plain(K::Tab), A::FocusPane),
    bind(KeyCombo::char('o'), A::OpenEditor),
    bind(KeyCombo::char('!'), A::OpenShell),
    bind(KeyCombo::char('T'), A::TakeOver),
    bind(KeyCombo::char('u'), A::UpdateBranch),
    bind(KeyCombo::char('r'), A::Redispatch),
    bind(KeyCombo::char('P'), A::PullRequest),
    bind(KeyCombo::char('$'), A::Spend),
    bind(KeyCombo::char('y'), A::AttentionAllow),
    bind(KeyCombo::char('d'), A::AttentionDeny),
    bind(KeyCombo::char('a'), A::AttentionRule),
    bind(KeyCombo::plain(K::Esc), A::ClearFilter),
];

#[rustfmt::skip]
const DIFF: &[Binding] = &[
    bind(KeyCombo::char('m'), A::Merge),
    bind(KeyCombo::char('M'), A::MergeSquash),
    bind(KeyCombo::char('k'), A::Keep),
    bind(KeyCombo::char('x'), A::Discard),
    bind(KeyCombo::plain(K::Tab), A::NextFile),
    bind(KeyCombo::plain(K::Right), A::NextFile),
    bind(KeyCombo::plain(K::BackTab), A::PrevFile),
    bind(KeyCombo::plain(K::Left), A::PrevFile),
    bind(KeyCombo::plain(K::Down), A::ScrollDown),
    bind(KeyCombo::plain(K::Up), A::ScrollUp),
    bind(KeyCombo::plain(K::PageDown), A::PageDown),
    bind(KeyCombo::char(' '), A::PageDown),
    bind(KeyCombo::plain(K::PageUp), A::PageUp),
    bind(KeyCombo::char('r'), A::Refresh),
    bind(KeyCombo::plain(K::Esc), A::Close),
    bind(KeyCombo::char('q'), A::Close),
];

#[rustfmt::skip]
const TRANSCRIPT: &[Binding] = &[
    bind(KeyCombo::char(' '), A::ToggleTool),
    bind(KeyCombo::char('v'), A::SelectLines),
    bind(KeyCombo::char('y'), A::Copy),
    bind(KeyCombo::char('Y'), A::CopyResult),
    bind(KeyCombo::char('n'), A::NextMatch),
    bind(KeyCombo::char('N'), A::PrevMatch),
    bind(KeyCombo::plain(K::Esc), A::Close),
    bind(KeyCombo::char('q'), A::Close),
    bind(KeyCombo::char('j'), A::SelectNext),
    bind(KeyCombo::plain(K::Down), A::SelectNext),
    bind(KeyCombo::char('k'), A::SelectPrev),
    bind(KeyCombo::plain(K::Up), A::SelectPrev),
    bind(KeyCombo::char('g'), A::SelectFirst),
    bind(KeyCombo::plain(K::Home), A::SelectFirst),
    bind(KeyCombo::char('G'), A::SelectLast),
    bind(KeyCombo::plain(K::End), A::SelectLast),
    bind(KeyCombo::plain(K::PageDown), A::PageDown),
    bind(KeyCombo::plain(K::PageUp), A::PageUp),
];

#[rustfmt::skip]
const ROUTE: &[Binding] = &[
    bind(KeyCombo::plain(K::Enter), A::Pick),
    bind(KeyCombo::char('r'), A::ToggleRemember),
    bind(KeyCombo::char('d'), A::Decline),
    bind(KeyCombo::plain(K::Tab), A::NextRequest),
    bind(KeyCombo::plain(K::Esc), A::Close),
    bind(KeyCombo::char('j'), A::SelectNext),
    bind(KeyCombo::plain(K::Down), A::SelectNext),
    bind(KeyCombo::char('k'), A::SelectPrev),
    bind(KeyCombo::plain(K::Up), A::SelectPrev),
];

#[rustfmt::skip]
const PROMPT: &[Binding] = &[
    bind(KeyCombo::char('y'), A::AllowOnce),
    bind(KeyCombo::char('a'), A::AddRule),
    bind(KeyCombo::char('A'), A::AllowAlways),
    bind(KeyCombo::char('d'), A::Deny),
    bind(KeyCombo::char('m'), A::DenyWithMessage),
    bind(KeyCombo::char('t'), A::TypeAnswer),
    bind(KeyCombo::plain(K::Tab), A::NextRequest),
    bind(KeyCombo::plain(K::Esc), A::Close),
    bind(KeyCombo::char('j'), A::ScrollDown),
    bind(KeyCombo::plain(K::Down), A::ScrollDown),
    bind(KeyCombo::plain(K::PageDown), A::ScrollDown),
    bind(KeyCombo::char('k'), A::ScrollUp),
    bind(KeyCombo::plain(K::Up), A::ScrollUp),
    bind(KeyCombo::plain(K::PageUp), A::ScrollUp),
];

#[rustfmt::skip]
const FORM: &[Binding] = &[
    bind(KeyCombo::plain(K::Enter), A::Submit),
    bind(KeyCombo::plain(K::Tab), A::NextField),
    bind(KeyCombo::plain(K::Down), A::NextField),
    bind(KeyCombo::plain(K::BackTab), A::PrevField),
    bind(KeyCombo::plain(K::Up), A::PrevField),
    bind(KeyCombo::plain(K::Right), A::ChoiceNext),
    bind(KeyCombo::plain(K::Left), A::ChoicePrev),
    bind(KeyCombo::plain(K::Esc), A::Close),
];

#[rustfmt::skip]
const INPUT: &[Binding] = &[
    bind(KeyCombo::plain(K::Enter), A::Submit),
    bind(KeyCombo::plain(K::Esc), A::Close),
];

#[rustfmt::skip]
const CONFIRM: &[Binding] = &[
    bind(KeyCombo::char('y'), A::Confirm),
    bind(KeyCombo::plain(K::Enter), A::Confirm),
    bind(KeyCombo::char('s'), A::Stop),
    bind(KeyCombo::char('n'), A::Close),
    bind(KeyCombo::plain(K::Esc), A::Close),
];

#[rustfmt::skip]
const HELP: &[Binding] = &[
    bind(KeyCombo::plain(K::Esc), A::Close),
    bind(KeyCombo::char('?'), A::Close),
    bind(KeyCombo::char('q'), A::Close),
    bind(KeyCombo::char('j'), A::ScrollDown),
    bind(KeyCombo::plain(K::Down), A::ScrollDown),
    bind(KeyCombo::char('k'), A::ScrollUp),
    bind(KeyCombo::plain(K::Up), A::ScrollUp),
];

fn shipped(context: Context) -> &'static [Binding] {
    match context {
        Context::Dashboard => DASHBOARD,
        Context::Prompt => PROMPT,
        Context::Form => FORM,
        Context::Input => INPUT,
        Context::Confirm => CONFIRM,
        Context::Help => HELP,
        Context::Route => ROUTE,
        Context::Diff => DIFF,
        Context::Transcript => TRANSCRIPT,
    }
}

/// The bindings in force, per context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTable {
    tables: Vec<(Context, Vec<Binding>)>,
}

impl Default for KeyTable {
    fn default() -> Self {
        KeyTable::defaults()
    }
}

impl KeyTable {
    /// The shipped bindings.
    pub fn defaults() -> KeyTable {
        KeyTable {
            tables: Context::ALL
                .into_iter()
                .map(|c| (c, shipped(c).to_vec()))
                .collect(),
        }
    }

    pub fn bindings(&self, context: Context) -> &[Binding] {
        self.tables
            .iter()
            .find(|(c, _)| *c == context)
            .map_or(&[], |(_, b)| b.as_slice())
    }

    /// What `event` does in `context`.
    pub fn action(&self, context: Context, event: &KeyEvent) -> Option<Action> {
        let combo = KeyCombo::of(event);
        self.bindings(context)
            .iter()
            .find(|b| b.key == combo)
            .map(|b| b.action)
    }

    /// The first key bound to `action` in `context`.
    pub fn key_for(&self, context: Context, action: Action) -> Option<KeyCombo> {
        self.bindings(context)
            .iter()
            .find(|b| b.action == action)
            .map(|b| b.key)
    }

    /// Every key bound to `action` in `context`, as `j/↓`.
    pub fn keys_text(&self, context: Context, action: Action) -> String {
        self.bindings(context)
            .iter()
            .filter(|b| b.action == action)
            .map(|b| b.key.to_string())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The footer hints of `context`: (first key, action) for each action with a hint
    /// word, in table order, each action once.
    pub fn hints(&self, context: Context) -> Vec<(String, Action)> {
        let mut seen = Vec::new();
        let mut hints = Vec::new();
        for b in self.bindings(context) {
            if seen.contains(&b.action) {
                continue;
            }
            seen.push(b.action);
            if b.action.hint().is_some() {
                hints.push((b.key.to_string(), b.action));
            }
        }
        hints
    }

    /// The footer's hints of `context` as (first key, word), in table order, for the
    /// actions `shown` keeps (those that do something now).
    pub fn hint_words(
        &self,
        context: Context,
        shown: impl Fn(Action) -> bool,
    ) -> Vec<(String, &'static str)> {
        self.hints(context)
            .into_iter()
            .filter(|(_, action)| shown(*action))
            .filter_map(|(key, action)| action.hint().map(|word| (key, word)))
            .collect()
    }

    /// The actions of `context` with all their keys, in table order (for help).
    pub fn actions(&self, context: Context) -> Vec<(String, Action)> {
        let mut seen = Vec::new();
        for b in self.bindings(context) {
            if !seen.contains(&b.action) {
                seen.push(b.action);
            }
        }
        seen.into_iter()
            .map(|a| (self.keys_text(context, a), a))
            .collect()
    }

    /// Applies `[keys.<context>] "<key>" = "<action>"` overrides (`"none"` unbinds the
    /// key). An unknown context, key or action is refused with a sentence naming it.
    pub fn with_overrides(mut self, keys: &toml::Table) -> Result<KeyTable, String> {
        for (context_name, table) in keys {
            let context = Context::from_name(context_name).ok_or_else(|| {
                format!(
                    "[keys.{context_name}]: no such context; use one of {}",
                    Context::ALL.map(Context::name).join(", ")
                )
            })?;
            let table = table.as_table().ok_or_else(|| {
                format!("[keys.{context_name}] must be a table of key = \"action\"")
            })?;
            let bindings = &mut self
                .tables
                .iter_mut()
                .find(|(c, _)| *c == context)
                .expect("every context has a table")
                .1;
            for (key_text, action) in table {
                let key = KeyCombo::parse(key_text).ok_or_else(|| {
                    format!("[keys.{context_name}] \"{key_text}\": not a key (try \"x\", \"X\", \"ctrl-x\", \"enter\", \"f2\")")
                })?;
                let action_name = action.as_str().ok_or_else(|| {
                    format!("[keys.{context_name}] \"{key_text}\" must name an action as a string")
                })?;
                bindings.retain(|b| b.key != key);
                if action_name == "none" {
                    continue;
                }
                let action = Action::from_name(action_name).ok_or_else(|| {
                    format!("[keys.{context_name}] \"{key_text}\": no action `{action_name}`")
                })?;
                bindings.insert(0, bind(key, action));
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_the_configs_vocabulary() {
        use drover_core::config::keys;
        assert_eq!(Context::ALL.map(Context::name), keys::CONTEXTS);
        assert_eq!(Action::ALL.map(Action::name), keys::ACTIONS);
    }

    fn key(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn shifted_characters_and_control_keys_match_their_bindings() {
        let t = KeyTable::defaults();
        let d = Context::Dashboard;
        assert_eq!(
            t.action(d, &key(K::Char('X'), KeyModifiers::SHIFT)),
            Some(A::RemoveFinished)
        );
        assert_eq!(
            t.action(d, &key(K::Char('x'), KeyModifiers::NONE)),
            Some(A::Remove)
        );
        assert_eq!(
            t.action(d, &key(K::Char('c'), KeyModifiers::CONTROL)),
            Some(A::Quit)
        );
        assert_eq!(
            t.action(d, &key(K::Char('c'), KeyModifiers::NONE)),
            Some(A::Complete)
        );
        assert_eq!(
            t.action(Context::Form, &key(K::Tab, KeyModifiers::SHIFT)),
            Some(A::PrevField)
        );
        assert_eq!(t.action(d, &key(K::Char('z'), KeyModifiers::NONE)), None);
    }

    #[test]
    fn keys_parse_and_print_back() {
        for text in [
            "j", "X", "?", "ctrl-c", "enter", "esc", "tab", "pgup", "f2", "space",
        ] {
            let combo = KeyCombo::parse(text).unwrap_or_else(|| panic!("{text}"));
            let again = KeyCombo::parse(&combo.to_string().replace('↑', "up"));
            assert_eq!(again, Some(combo), "{text}");
        }
        assert_eq!(KeyCombo::parse("Ctrl-C"), Some(KeyCombo::ctrl('c')));
        assert_eq!(KeyCombo::parse("bogus"), None);
        assert_eq!(KeyCombo::parse("f13"), None);
    }

    #[test]
    fn hints_come_from_the_table_first_key_first() {
        let t = KeyTable::defaults();
        let hints = t.hints(Context::Dashboard);
        assert_eq!(hints[0], ("n".to_string(), A::NewDispatch));
        assert!(hints.contains(&("?".to_string(), A::Help)));
        assert!(hints.contains(&("q".to_string(), A::Quit)));
        // ctrl-c is a second key for quit: hinted once, by its first key.
        assert_eq!(hints.iter().filter(|(_, a)| *a == A::Quit).count(), 1);
        assert_eq!(t.keys_text(Context::Dashboard, A::Quit), "q/ctrl-c");
    }

    #[test]
    fn overrides_rebind_unbind_and_refuse_mistakes() {
        let keys: toml::Table = toml::from_str(
            "[dashboard]\nN = \"new_dispatch\"\nn = \"none\"\n[prompt]\nY = \"allow_always\"\n",
        )
        .unwrap();
        let t = KeyTable::defaults().with_overrides(&keys).unwrap();
        let d = Context::Dashboard;
        assert_eq!(
            t.action(d, &key(K::Char('N'), KeyModifiers::SHIFT)),
            Some(A::NewDispatch)
        );
        assert_eq!(t.action(d, &key(K::Char('n'), KeyModifiers::NONE)), None);
        assert_eq!(t.hints(d)[0], ("N".to_string(), A::NewDispatch));
        assert_eq!(
            t.action(Context::Prompt, &key(K::Char('Y'), KeyModifiers::SHIFT)),
            Some(A::AllowAlways)
        );
        for bad in [
            "[nowhere]\nx = \"stop\"",
            "[dashboard]\nbogus-key = \"stop\"",
            "[dashboard]\nx = \"explode\"",
            "[dashboard]\nx = 3",
        ] {
            let keys: toml::Table = toml::from_str(bad).unwrap();
            assert!(KeyTable::defaults().with_overrides(&keys).is_err(), "{bad}");
        }
    }

    #[test]
    fn no_key_is_bound_twice_in_a_context() {
        let t = KeyTable::defaults();
        for context in Context::ALL {
            let keys: Vec<KeyCombo> = t.bindings(context).iter().map(|b| b.key).collect();
            for (i, k) in keys.iter().enumerate() {
                assert!(!keys[..i].contains(k), "{k} twice in {context:?}");
            }
        }
    }

    #[test]
    fn every_action_has_a_name_that_reads_back() {
        for action in Action::ALL {
            assert_eq!(Action::from_name(action.name()), Some(action));
            assert!(!action.describe().is_empty());
        }
    }
}
