//! The permission prompt: one pending request of one run — a tool asking to run, or a
//! question for the user — answered by keyboard.
//!
//! What must stay true: an answer names the request id this view shows, never another;
//! once the request is known to be gone (answered elsewhere, withdrawn, timed out, or
//! refused as such by the dispatcher) the view says so and sends nothing more for it;
//! a question is answered with one of its own choices or with typed text; what is shown
//! comes from the typed ask alone; a request the guard flagged shows its reason in red
//! and is allowed only after a second, confirming key, and no rule is made from it; the
//! rule chooser (`a`) saves a rule and answers this request with it, in one request.

use crossterm::event::{KeyCode, KeyEvent};
use std::collections::BTreeMap;

use super::text::TextField;
use super::{Outcome, ViewCommand};
use crate::event::ReplyTag;
use crate::keys::{Action, Context};
use drover_core::dispatch::Request;
use drover_core::dispatch::api::{PendingView, RuleAnswer};
use drover_core::providers::{PermissionAnswer, Question, RequestKind};
use drover_core::rules::{RuleDecision, RuleKind, RuleSpec, Scope};

/// Where the request stands, as far as this view knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptState {
    /// Waiting for the user's answer.
    Open,
    /// An answer was sent; waiting for the dispatcher to take it.
    Sending(String),
    /// The request is no longer pending; nothing is sent from here.
    Gone(String),
    /// The answer was refused for another reason; the user may answer again.
    Failed(String),
}

/// Keys, or one of the text boxes of the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptMode {
    Keys,
    DenyMessage(TextField),
    FreeText(TextField),
    /// The rule chooser (`a`): a scope and a pattern to edit.
    Rule(RuleChooser),
    /// A flagged request: the allow key was pressed once; the same key again allows it.
    ConfirmAllow,
}

/// The rule chooser: a rule for requests like the one on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleChooser {
    pub scope: Scope,
    pub kind: RuleKind,
    pub decision: RuleDecision,
    pub pattern: TextField,
}

impl RuleChooser {
    /// The chooser for `request`, its pattern proposed (`cargo test *` for
    /// `cargo test --lib foo`); `None` for what no rule answers (a question).
    pub fn for_request(request: &PendingView, workspace: Option<&std::path::Path>) -> Option<Self> {
        let (kind, pattern) = drover_core::rules::propose(&request.ask, workspace)?;
        Some(RuleChooser {
            scope: Scope::Repository,
            kind,
            decision: RuleDecision::Allow,
            pattern: TextField::new(pattern),
        })
    }

    /// The next scope (`tab`): run → repository → everywhere → run.
    pub fn next_scope(&mut self) {
        self.scope = match self.scope {
            Scope::Run => Scope::Repository,
            Scope::Repository => Scope::Everywhere,
            Scope::Everywhere => Scope::Run,
        };
    }
}

/// What a flagged request's prompt says when `a` is pressed on it.
pub const FLAGGED_NO_RULE: &str =
    "No rule answers a flagged request: allow it once (y, then y again to confirm) or deny it.";

/// The questions of a question request (one made up of the tool's name when the
/// provider sent none it could read, so typed text can still answer it).
pub fn questions(request: &PendingView) -> Vec<Question> {
    let found = request.ask.questions();
    if found.is_empty() {
        vec![Question {
            question: request.tool.clone(),
            header: None,
            options: Vec::new(),
            multi_select: false,
        }]
    } else {
        found.to_vec()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PromptView {
    pub run_id: String,
    pub request: PendingView,
    pub state: PromptState,
    pub mode: PromptMode,
    /// Lines of the input scrolled past.
    pub scroll: u16,
    /// Answers given so far to a multi-question request, keyed by question text.
    pub answers: BTreeMap<String, String>,
    /// The run's workspace (file-edit rules are proposed relative to it).
    pub workspace: Option<std::path::PathBuf>,
}

/// The prompt of `request` with its rule chooser open, as `a` opens it: for a front end
/// that shows a request elsewhere (the dashboard's attention line) and binds `a` to it.
/// A flagged request or a question opens as the prompt, saying why there is no chooser.
pub fn rule_chooser(
    run_id: impl Into<String>,
    request: PendingView,
    workspace: Option<std::path::PathBuf>,
) -> super::Overlay {
    let mut view = PromptView::new(run_id, request);
    view.workspace = workspace;
    view.open_chooser();
    super::Overlay::Prompt(view)
}

impl PromptView {
    pub fn new(run_id: impl Into<String>, request: PendingView) -> Self {
        PromptView {
            run_id: run_id.into(),
            request,
            state: PromptState::Open,
            mode: PromptMode::Keys,
            scroll: 0,
            answers: BTreeMap::new(),
            workspace: None,
        }
    }

    /// The guard's reason, when it flagged the request.
    pub fn flagged(&self) -> Option<&str> {
        self.request.guard.as_deref()
    }

    /// Opens the rule chooser (`a`), or says why there is none.
    pub fn open_chooser(&mut self) {
        if self.flagged().is_some() {
            self.state = PromptState::Failed(FLAGGED_NO_RULE.to_string());
            return;
        }
        if let Some(chooser) = RuleChooser::for_request(&self.request, self.workspace.as_deref()) {
            self.mode = PromptMode::Rule(chooser);
        }
    }

    pub fn is_question(&self) -> bool {
        self.request.kind == RequestKind::Question
    }

    pub fn context(&self) -> Context {
        match self.mode {
            PromptMode::Keys | PromptMode::ConfirmAllow => Context::Prompt,
            _ => Context::Input,
        }
    }

    /// The question being answered now (the first one without an answer).
    pub fn current_question(&self) -> Option<Question> {
        if !self.is_question() {
            return None;
        }
        questions(&self.request)
            .into_iter()
            .find(|q| !self.answers.contains_key(&q.question))
    }

    /// Whether an answer may be sent now.
    pub fn can_answer(&self) -> bool {
        matches!(self.state, PromptState::Open | PromptState::Failed(_))
    }

    pub fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome {
        let can_answer = self.can_answer();
        if let PromptMode::Rule(chooser) = &mut self.mode {
            match (action, key.code) {
                (Some(Action::Submit), _) if can_answer => {
                    let spec = RuleSpec {
                        scope: chooser.scope,
                        kind: chooser.kind,
                        pattern: chooser.pattern.text.trim().to_string(),
                        decision: chooser.decision,
                        run_id: None,
                        repository: None,
                    };
                    if spec.pattern.is_empty() {
                        return Outcome::stay();
                    }
                    return self.send_rule(spec);
                }
                (Some(Action::Close), _) => self.mode = PromptMode::Keys,
                (_, KeyCode::Tab) => chooser.next_scope(),
                (_, KeyCode::BackTab) => {
                    chooser.decision = match chooser.decision {
                        RuleDecision::Allow => RuleDecision::Deny,
                        RuleDecision::Deny => RuleDecision::Allow,
                    }
                }
                _ => {
                    chooser.pattern.edit(key);
                }
            }
            return Outcome::stay();
        }
        // A flagged request: the allow key pressed again allows it once; anything else
        // takes the first press back.
        if self.mode == PromptMode::ConfirmAllow {
            self.mode = PromptMode::Keys;
            if matches!(action, Some(Action::AllowOnce | Action::AllowAlways)) && self.can_answer()
            {
                return self.send(PermissionAnswer::Allow { always: false });
            }
            if matches!(action, Some(Action::Close)) {
                return Outcome::stay();
            }
        }
        match &mut self.mode {
            PromptMode::DenyMessage(field) | PromptMode::FreeText(field) => {
                match action {
                    Some(Action::Submit) => {
                        let text = field.text.trim().to_string();
                        let deny = matches!(self.mode, PromptMode::DenyMessage(_));
                        self.mode = PromptMode::Keys;
                        if deny {
                            let message = (!text.is_empty()).then_some(text);
                            return self.send(PermissionAnswer::Deny { message });
                        }
                        if text.is_empty() {
                            return Outcome::stay();
                        }
                        return self.answer_current(text);
                    }
                    Some(Action::Close) => self.mode = PromptMode::Keys,
                    _ => {
                        field.edit(key);
                    }
                }
                return Outcome::stay();
            }
            PromptMode::Keys | PromptMode::ConfirmAllow | PromptMode::Rule(_) => {}
        }
        if let KeyCode::Char(c @ '1'..='9') = key.code
            && self.is_question()
            && self.can_answer()
        {
            let index = c as usize - '1' as usize;
            if let Some(label) = self
                .current_question()
                .and_then(|q| q.options.get(index).map(|o| o.label.clone()))
            {
                return self.answer_current(label);
            }
            return Outcome::stay();
        }
        match action {
            Some(Action::Close) => Outcome::close(),
            Some(Action::NextRequest) => Outcome {
                close: false,
                command: Some(ViewCommand::NextPrompt {
                    after: Some(self.request.request_id.clone()),
                }),
            },
            Some(Action::ScrollDown) => {
                self.scroll = self.scroll.saturating_add(1);
                Outcome::stay()
            }
            Some(Action::ScrollUp) => {
                self.scroll = self.scroll.saturating_sub(1);
                Outcome::stay()
            }
            _ if !self.can_answer() => Outcome::stay(),
            Some(Action::AllowOnce | Action::AllowAlways)
                if !self.is_question() && self.flagged().is_some() =>
            {
                self.mode = PromptMode::ConfirmAllow;
                Outcome::stay()
            }
            Some(Action::AddRule) if !self.is_question() => {
                self.open_chooser();
                Outcome::stay()
            }
            Some(Action::AllowOnce) if !self.is_question() => {
                self.send(PermissionAnswer::Allow { always: false })
            }
            Some(Action::AllowAlways) if !self.is_question() => {
                self.send(PermissionAnswer::Allow { always: true })
            }
            Some(Action::Deny) => self.send(PermissionAnswer::Deny { message: None }),
            Some(Action::DenyWithMessage) => {
                self.mode = PromptMode::DenyMessage(TextField::default());
                Outcome::stay()
            }
            Some(Action::TypeAnswer) if self.is_question() => {
                self.mode = PromptMode::FreeText(TextField::default());
                Outcome::stay()
            }
            _ => Outcome::stay(),
        }
    }

    /// Records the answer to the current question; sends them all after the last one.
    fn answer_current(&mut self, answer: String) -> Outcome {
        let Some(question) = self.current_question() else {
            return Outcome::stay();
        };
        self.answers.insert(question.question, answer);
        if self.current_question().is_some() {
            return Outcome::stay();
        }
        let answers = self.answers.clone();
        self.send(PermissionAnswer::Answer { answers })
    }

    /// Saves the chooser's rule, answering this request with it (bound to its id).
    fn send_rule(&mut self, rule: RuleSpec) -> Outcome {
        self.state = PromptState::Sending(format!(
            "save rule: {} {} `{}` ({})",
            rule.decision.as_str(),
            rule.kind.as_str(),
            drover_core::text::clip(&rule.pattern, 60),
            rule.scope.as_str()
        ));
        Outcome {
            close: false,
            command: Some(ViewCommand::Request(
                ReplyTag::Respond {
                    run_id: self.run_id.clone(),
                    request_id: self.request.request_id.clone(),
                },
                Request::RuleAdd {
                    rule,
                    answer: Some(RuleAnswer {
                        run_id: self.run_id.clone(),
                        request_id: self.request.request_id.clone(),
                    }),
                },
            )),
        }
    }

    fn send(&mut self, answer: PermissionAnswer) -> Outcome {
        self.state = PromptState::Sending(answer_words(&answer));
        Outcome {
            close: false,
            command: Some(ViewCommand::Request(
                ReplyTag::Respond {
                    run_id: self.run_id.clone(),
                    request_id: self.request.request_id.clone(),
                },
                Request::Respond {
                    run_id: self.run_id.clone(),
                    request_id: self.request.request_id.clone(),
                    answer,
                },
            )),
        }
    }
}

/// An answer in words, for the "sending…" line.
pub fn answer_words(answer: &PermissionAnswer) -> String {
    match answer {
        PermissionAnswer::Allow { always: false } => "allow once".into(),
        PermissionAnswer::Allow { always: true } => "allow always".into(),
        PermissionAnswer::Deny { message: None } => "deny".into(),
        PermissionAnswer::Deny { message: Some(m) } => {
            format!(
                "deny: {}",
                drover_core::text::clip(&drover_core::text::one_line(m), 60)
            )
        }
        PermissionAnswer::Answer { answers } => format!(
            "answer {}",
            drover_core::text::clip(
                &drover_core::text::one_line(
                    &answers.values().cloned().collect::<Vec<_>>().join(", ")
                ),
                60
            )
        ),
    }
}
