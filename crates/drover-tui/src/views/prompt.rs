//! The permission prompt: one pending request of one run — a tool asking to run, or a
//! question for the user — answered by keyboard.
//!
//! What must stay true: an answer names the request id this view shows, never another,
//! and leaves only once the request has been on screen long enough to read (`readable`,
//! set by the app before each key from [`crate::shown`]; a sooner key sends nothing and
//! the view says "just changed — look again");
//! once the request is known to be gone (answered elsewhere, withdrawn, timed out, or
//! refused as such by the dispatcher) the view says so and sends nothing more for it;
//! a question is answered with one of its own choices or with typed text; what is shown
//! comes from the typed ask alone; a request the guard flagged shows its reason in red
//! and is allowed only after a second, confirming key, and no rule is made from it; the
//! rule chooser (`a`) saves a rule and answers this request with it, in one request.
//! Which answers the prompt takes now is stated once ([`PromptView`]'s `View::offers`),
//! read by its keys and by the footer's hints alike. The question and the rule chooser
//! are modes of this one view (one request, one state), drawn in its box.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use std::collections::BTreeMap;

use super::text::TextField;
use super::{DrawContext, Outcome, View, ViewCommand};
use crate::canvas::{clip_width, put_line, view_box, width_of, wrap};
use crate::event::ReplyTag;
use crate::format;
use crate::keys::{Action, Context};
use crate::layout::centered;
use crate::theme;
use drover_core::dispatch::Request;
use drover_core::dispatch::api::{PendingView, RuleAnswer};
use drover_core::providers::{PermissionAnswer, Question, RequestKind};
use drover_core::rules::{RuleDecision, RuleKind, RuleSpec, Scope};
use drover_core::text::{clip, one_line};

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
    /// Whether the request has been on screen, unchanged, long enough to be answered
    /// (the app sets it before each key; until then nothing is sent).
    pub readable: bool,
    /// A key that would have answered came too soon: the view says so until the next key.
    pub held: bool,
}

/// The prompt of `request` with its rule chooser open, as `a` opens it: for a front end
/// that shows a request elsewhere (the dashboard's attention line) and binds `a` to it.
/// A flagged request or a question opens as the prompt, saying why there is no chooser.
pub fn rule_chooser(
    run_id: impl Into<String>,
    request: PendingView,
    workspace: Option<std::path::PathBuf>,
) -> PromptView {
    let mut view = PromptView::new(run_id, request);
    view.workspace = workspace;
    view.open_chooser();
    view
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
            readable: false,
            held: false,
        }
    }

    /// Whether an answer may leave now; if not, the view says why.
    fn may_send(&mut self) -> bool {
        self.held = !self.readable;
        self.readable
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

    /// Whether a permission can be answered now (allowed, denied, or a rule made).
    fn answers_permission(&self) -> bool {
        self.can_answer() && !self.is_question()
    }

    /// Whether a question can be answered now (by a choice's number or typed text).
    fn answers_question(&self) -> bool {
        self.can_answer() && self.is_question()
    }

    /// Scrolls the input one line (`down`: towards its end).
    fn scroll_line(&mut self, down: bool) {
        self.scroll = if down {
            self.scroll.saturating_add(1)
        } else {
            self.scroll.saturating_sub(1)
        };
    }

    /// Records the answer to the current question; sends them all after the last one.
    fn answer_current(&mut self, answer: String) -> Outcome {
        if !self.may_send() {
            return Outcome::stay();
        }
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
        if !self.may_send() {
            return Outcome::stay();
        }
        self.state = PromptState::Sending(format!(
            "save rule: {} {} `{}` ({})",
            rule.decision.as_str(),
            rule.kind.as_str(),
            clip(&rule.pattern, 60),
            rule.scope.as_str()
        ));
        Outcome::stay_with(ViewCommand::Request(
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
        ))
    }

    fn send(&mut self, answer: PermissionAnswer) -> Outcome {
        if !self.may_send() {
            return Outcome::stay();
        }
        self.state = PromptState::Sending(answer_words(&answer));
        Outcome::stay_with(ViewCommand::Request(
            ReplyTag::Respond {
                run_id: self.run_id.clone(),
                request_id: self.request.request_id.clone(),
            },
            Request::Respond {
                run_id: self.run_id.clone(),
                request_id: self.request.request_id.clone(),
                answer,
            },
        ))
    }
}

impl View for PromptView {
    fn context(&self) -> Context {
        match self.mode {
            PromptMode::Keys | PromptMode::ConfirmAllow => Context::Prompt,
            _ => Context::Input,
        }
    }

    /// Which answers the prompt takes now — the one statement of it, read by the keys
    /// ([`View::handle_key`]) and by the footer's hints alike.
    fn offers(&self, action: Action) -> bool {
        match action {
            Action::AllowOnce | Action::AllowAlways => self.answers_permission(),
            // A flagged request is never answered by a rule.
            Action::AddRule => self.answers_permission() && self.flagged().is_none(),
            Action::Deny | Action::DenyWithMessage => self.can_answer(),
            Action::TypeAnswer => self.answers_question(),
            _ => true,
        }
    }

    fn takes_digits(&self) -> bool {
        self.context() == Context::Prompt && self.answers_question()
    }

    fn wheel(&mut self, down: bool) {
        self.scroll_line(down);
    }

    /// The request's time to answer.
    fn counts_down(&self) -> bool {
        true
    }

    fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome {
        self.held = false;
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
            && self.answers_question()
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
            Some(Action::NextRequest) => Outcome::stay_with(ViewCommand::NextPrompt {
                after: Some(self.request.request_id.clone()),
            }),
            Some(Action::ScrollDown) => {
                self.scroll_line(true);
                Outcome::stay()
            }
            Some(Action::ScrollUp) => {
                self.scroll_line(false);
                Outcome::stay()
            }
            // `a` on a flagged request is not offered, but it says why no rule is made.
            Some(Action::AddRule) if self.answers_permission() => {
                self.open_chooser();
                Outcome::stay()
            }
            Some(action) if !self.offers(action) => Outcome::stay(),
            Some(Action::AllowOnce | Action::AllowAlways) if self.flagged().is_some() => {
                self.mode = PromptMode::ConfirmAllow;
                Outcome::stay()
            }
            Some(Action::AllowOnce) => self.send(PermissionAnswer::Allow { always: false }),
            Some(Action::AllowAlways) => self.send(PermissionAnswer::Allow { always: true }),
            Some(Action::Deny) => self.send(PermissionAnswer::Deny { message: None }),
            Some(Action::DenyWithMessage) => {
                self.mode = PromptMode::DenyMessage(TextField::default());
                Outcome::stay()
            }
            Some(Action::TypeAnswer) => {
                self.mode = PromptMode::FreeText(TextField::default());
                Outcome::stay()
            }
            _ => Outcome::stay(),
        }
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, context: &DrawContext<'_>) {
        let model = context.model;
        context.shown.drawn(&self.request, model.now);
        let total = model.pending_total().max(1);
        let title_of_run = model
            .run(&self.run_id)
            .map(|e| clip_width(&one_line(&e.summary.head.title), 40))
            .unwrap_or_default();
        let kind = if self.is_question() {
            "Question"
        } else {
            "Permission"
        };
        let outer_w = body.width.saturating_sub(4).min(110);
        // Inside: the border and a margin of one column on each side.
        let width = outer_w.saturating_sub(4) as usize;
        // Fixed lines at the top and bottom; the input (or the question) scrolls between.
        let mut head: Vec<Line<'static>> = Vec::new();
        let mut body_lines: Vec<Line<'static>> = Vec::new();
        let mut foot: Vec<Line<'static>> = Vec::new();
        let request = &self.request;
        if let Some(reason) = self.flagged() {
            // The guard's banner: red, above everything, with the reason.
            let text = format!(" ⚠ flagged: {} ", one_line(reason));
            for l in wrap(&text, width) {
                head.push(Line::styled(l, theme::danger_banner()));
            }
            head.push(Line::styled(
                "no rule or \"always\" answers this: allowing it takes y, then y again",
                theme::error(),
            ));
        }
        if self.is_question() {
            head.push(Line::from(vec![
                Span::styled("The run asks you", theme::attention()),
                Span::styled(format!(" (via {})", request.tool), theme::dim()),
            ]));
            let current = self.current_question();
            for q in questions(request) {
                let answered = self.answers.get(&q.question);
                let is_current = current.as_ref().is_some_and(|c| c.question == q.question);
                if let Some(h) = &q.header {
                    body_lines.push(Line::styled(one_line(h), theme::dim()));
                }
                for (i, l) in wrap(&one_line(&q.question), width).into_iter().enumerate() {
                    body_lines.push(Line::styled(
                        l,
                        if i == 0 && is_current {
                            theme::title()
                        } else {
                            theme::text()
                        },
                    ));
                }
                for (i, option) in q.options.iter().enumerate() {
                    let mut spans = vec![
                        Span::styled(format!("  {} ", i + 1), theme::key()),
                        Span::styled(one_line(&option.label), theme::focus()),
                    ];
                    if let Some(d) = &option.description {
                        spans.push(Span::styled(format!(" — {}", one_line(d)), theme::dim()));
                    }
                    body_lines.push(Line::from(spans));
                }
                if let Some(a) = answered {
                    body_lines.push(Line::styled(
                        format!("  answered: {}", one_line(a)),
                        theme::success(),
                    ));
                }
                body_lines.push(Line::raw(""));
            }
        } else {
            head.push(Line::from(vec![
                Span::styled(request.tool.clone(), theme::attention()),
                Span::styled(" wants to run with this input:", theme::text()),
            ]));
            let fields = format::ask_fields(&request.ask);
            let key_w = fields
                .iter()
                .map(|(k, _)| width_of(k))
                .max()
                .unwrap_or(0)
                .min(16);
            for (key, value) in fields {
                let room = width.saturating_sub(key_w + 4);
                let mut first = true;
                for raw in &value {
                    for piece in wrap(raw, room) {
                        let label = if first {
                            format!("  {key:<key_w$}  ")
                        } else {
                            " ".repeat(key_w + 4)
                        };
                        first = false;
                        body_lines.push(Line::from(vec![
                            Span::styled(label, theme::dim()),
                            Span::raw(piece),
                        ]));
                    }
                }
            }
            // A flagged request is never allowed "always": the offer is not shown.
            if let Some(always) = request.always.as_ref().filter(|_| self.flagged().is_none()) {
                body_lines.push(Line::raw(""));
                body_lines.push(Line::styled("allow always:", theme::dim()));
                for piece in wrap(&one_line(&always.sentence), width.saturating_sub(2)) {
                    body_lines.push(Line::raw(format!("  {piece}")));
                }
            }
        }
        let expired = request.expires_at < model.now;
        foot.push(Line::from(vec![
            Span::styled(
                format::countdown(request.expires_at, model.now),
                if expired {
                    theme::error()
                } else {
                    theme::attention()
                },
            ),
            Span::styled(
                format!(
                    " to answer (then denied) · asked {} ago · request {}",
                    format::duration(model.now - request.created_at),
                    request.request_id
                ),
                theme::dim(),
            ),
        ]));
        if self.held {
            foot.push(Line::styled(
                format!(
                    "{}: it was on screen too briefly to answer; nothing was sent",
                    crate::shown::JUST_CHANGED
                ),
                theme::attention(),
            ));
        }
        match &self.state {
            PromptState::Open => {}
            PromptState::Sending(how) => {
                foot.push(Line::styled(format!("sending: {how}…"), theme::focus()))
            }
            PromptState::Gone(why) => {
                for l in wrap(why, width) {
                    foot.push(Line::styled(l, theme::error_bold()));
                }
            }
            PromptState::Failed(why) => {
                for l in wrap(why, width) {
                    foot.push(Line::styled(l, theme::error()));
                }
            }
        }
        match &self.mode {
            PromptMode::Keys => {}
            PromptMode::DenyMessage(field) => {
                foot.push(Line::from(vec![
                    Span::styled("deny, telling the model: ", theme::attention()),
                    Span::raw(field.visible(width.saturating_sub(26))),
                    Span::styled("▏", theme::focus()),
                ]));
            }
            PromptMode::FreeText(field) => {
                foot.push(Line::from(vec![
                    Span::styled("your answer: ", theme::attention()),
                    Span::raw(field.visible(width.saturating_sub(14))),
                    Span::styled("▏", theme::focus()),
                ]));
            }
            PromptMode::ConfirmAllow => {
                foot.push(Line::styled(
                    "Allow this flagged request once? y again allows it · any other key takes it back",
                    theme::danger_banner(),
                ));
            }
            PromptMode::Rule(chooser) => {
                foot.push(Line::styled(
                    "Save a rule and answer this request with it",
                    theme::title(),
                ));
                let scopes: Vec<Span<'static>> = drover_core::rules::Scope::ALL
                    .into_iter()
                    .flat_map(|s| {
                        let words = match s {
                            drover_core::rules::Scope::Run => "this run",
                            drover_core::rules::Scope::Repository => "this repository",
                            drover_core::rules::Scope::Everywhere => "everywhere",
                        };
                        let style = if s == chooser.scope {
                            theme::selected()
                        } else {
                            theme::dim()
                        };
                        [Span::styled(format!(" {words} "), style), Span::raw(" ")]
                    })
                    .collect();
                let mut line = vec![Span::styled("  scope    ", theme::dim())];
                line.extend(scopes);
                foot.push(Line::from(line));
                foot.push(Line::from(vec![
                    Span::styled("  decision ", theme::dim()),
                    Span::styled(
                        format!(" {}", chooser.decision.as_str()),
                        match chooser.decision {
                            drover_core::rules::RuleDecision::Allow => theme::success(),
                            drover_core::rules::RuleDecision::Deny => theme::error(),
                        },
                    ),
                    Span::styled(format!("  ({})", chooser.kind.as_str()), theme::dim()),
                ]));
                foot.push(Line::from(vec![
                    Span::styled("  pattern  ", theme::dim()),
                    Span::raw(chooser.pattern.visible(width.saturating_sub(12))),
                    Span::styled("▏", theme::focus()),
                ]));
                foot.push(Line::styled(
                    "  tab scope · shift-tab allow/deny · type to edit · enter save and answer · esc back",
                    theme::dim(),
                ));
            }
        }
        // As tall as the content (plus the scroll line), at most the body.
        let wanted = (head.len() + body_lines.len() + foot.len() + 2) as u16 + 2;
        let area = centered(body, outer_w, wanted.clamp(10, body.height.max(1)));
        let inner = view_box(
            buf,
            area,
            format!(
                "{kind} · {title_of_run} ({}) · {total} pending",
                self.run_id
            ),
        );
        let height = inner.height as usize;
        let room = height.saturating_sub(head.len() + foot.len() + 1);
        let max_scroll = body_lines.len().saturating_sub(room);
        let scroll = (self.scroll as usize).min(max_scroll);
        let mut y = 0u16;
        for line in &head {
            put_line(buf, inner, y, line);
            y += 1;
        }
        for line in body_lines.iter().skip(scroll).take(room) {
            put_line(buf, inner, y, line);
            y += 1;
        }
        let more_below = body_lines.len() > scroll + room;
        let indicator = match (scroll > 0, more_below) {
            (false, false) => String::new(),
            (true, false) => format!("↑ {scroll} more above (k to scroll)"),
            (false, true) => format!(
                "↓ {} more below (j to scroll)",
                body_lines.len() - scroll - room
            ),
            (true, true) => format!(
                "↑ {scroll} above · ↓ {} below (j/k to scroll)",
                body_lines.len() - scroll - room
            ),
        };
        let foot_y = inner.height.saturating_sub(foot.len() as u16 + 1);
        put_line(buf, inner, foot_y, &Line::styled(indicator, theme::focus()));
        for (i, line) in foot.iter().enumerate() {
            put_line(buf, inner, foot_y + 1 + i as u16, line);
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
