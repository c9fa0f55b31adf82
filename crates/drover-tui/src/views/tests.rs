//! Views answer keys with typed commands, without a dispatcher or a terminal.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::confirm::{ConfirmView, Confirmable};
use super::form::{DispatchForm, Field};
use super::input::{InputBox, InputPurpose};
use super::prompt::{PromptState, PromptView};
use super::*;
use crate::keys::KeyTable;
use drover_core::dispatch::api::PendingView;
use drover_core::error::{DroverError, ErrorCode};
use drover_core::providers::{Ask, PermissionAnswer, Question, QuestionOption, RequestKind};

fn press(view: &mut dyn View, code: KeyCode) -> Outcome {
    let key = KeyEvent::new(code, KeyModifiers::NONE);
    let action = KeyTable::defaults().action(view.context(), &key);
    view.handle_key(action, &key)
}

fn type_text(view: &mut dyn View, text: &str) {
    for c in text.chars() {
        press(view, KeyCode::Char(c));
    }
}

fn permission() -> PendingView {
    PendingView {
        request_id: "req_1".into(),
        kind: RequestKind::Permission,
        tool: "Bash".into(),
        ask: Ask::command("ls -la", None, None),
        always: None,
        created_at: 0,
        expires_at: 600_000,
        guard: None,
    }
}

fn question() -> PendingView {
    PendingView {
        request_id: "req_q".into(),
        kind: RequestKind::Question,
        tool: "AskUserQuestion".into(),
        ask: Ask::Question {
            questions: vec![Question {
                question: "Which database?".into(),
                header: Some("DB".into()),
                options: ["SQLite", "Postgres"]
                    .into_iter()
                    .map(|label| QuestionOption {
                        label: label.into(),
                        description: None,
                    })
                    .collect(),
                multi_select: false,
            }],
        },
        always: None,
        created_at: 0,
        expires_at: 1_800_000,
        guard: None,
    }
}

/// A prompt whose request has been on screen long enough to answer (the app says so
/// before each key, from what the frames drew).
fn on_screen(run_id: &str, request: PendingView) -> PromptView {
    let mut view = PromptView::new(run_id, request);
    view.readable = true;
    view
}

fn sent(outcome: &Outcome) -> (&str, &PermissionAnswer) {
    match &outcome.command {
        Some(ViewCommand::Request(
            _,
            Request::Respond {
                request_id, answer, ..
            },
        )) => (request_id.as_str(), answer),
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[test]
fn one_key_allows_the_request_on_screen() {
    let mut view = on_screen("r1", permission());
    let outcome = press(&mut view, KeyCode::Char('y'));
    assert_eq!(
        sent(&outcome),
        ("req_1", &PermissionAnswer::Allow { always: false })
    );
    // While the answer is on its way, a second key sends nothing.
    let again = press(&mut view, KeyCode::Char('d'));
    assert_eq!(again.command, None);
}

#[test]
fn allow_always_and_deny_with_a_message() {
    let mut view = on_screen("r1", permission());
    let key = KeyEvent::new(KeyCode::Char('A'), KeyModifiers::SHIFT);
    let action = KeyTable::defaults().action(view.context(), &key);
    let outcome = view.handle_key(action, &key);
    assert_eq!(sent(&outcome).1, &PermissionAnswer::Allow { always: true });

    let mut view = on_screen("r1", permission());
    assert_eq!(press(&mut view, KeyCode::Char('m')).command, None);
    assert_eq!(view.context(), crate::keys::Context::Input);
    type_text(&mut view, "not on main");
    let outcome = press(&mut view, KeyCode::Enter);
    assert_eq!(
        sent(&outcome).1,
        &PermissionAnswer::Deny {
            message: Some("not on main".into())
        }
    );
}

#[test]
fn a_question_is_answered_by_number_or_by_text() {
    let mut view = on_screen("r1", question());
    // Allow means nothing for a question; a number out of range does nothing.
    assert_eq!(press(&mut view, KeyCode::Char('y')).command, None);
    assert_eq!(press(&mut view, KeyCode::Char('7')).command, None);
    let outcome = press(&mut view, KeyCode::Char('2'));
    let (id, answer) = sent(&outcome);
    assert_eq!(id, "req_q");
    let PermissionAnswer::Answer { answers } = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(answers["Which database?"], "Postgres");

    let mut view = on_screen("r1", question());
    press(&mut view, KeyCode::Char('t'));
    type_text(&mut view, "DuckDB");
    let outcome = press(&mut view, KeyCode::Enter);
    let PermissionAnswer::Answer { answers } = sent(&outcome).1 else {
        panic!()
    };
    assert_eq!(answers["Which database?"], "DuckDB");
}

#[test]
fn a_request_not_on_screen_long_enough_sends_nothing_and_says_so() {
    let mut view = PromptView::new("r1", permission());
    for key in ['y', 'A', 'd'] {
        assert_eq!(press(&mut view, KeyCode::Char(key)).command, None, "{key}");
        assert!(view.held, "{key}");
        assert_eq!(view.state, PromptState::Open);
    }
    // Typed text and the rule chooser wait too.
    press(&mut view, KeyCode::Char('m'));
    type_text(&mut view, "no");
    assert_eq!(press(&mut view, KeyCode::Enter).command, None);
    assert!(view.held);
    let mut view = PromptView::new("r1", question());
    assert_eq!(press(&mut view, KeyCode::Char('1')).command, None);
    assert!(view.answers.is_empty(), "no choice recorded");
    // Any other key takes the note away; once readable, the same key answers.
    press(&mut view, KeyCode::Char('j'));
    assert!(!view.held);
    view.readable = true;
    assert!(press(&mut view, KeyCode::Char('1')).command.is_some());
}

#[test]
fn a_request_that_is_gone_sends_nothing() {
    let mut view = on_screen("r1", permission());
    view.state = PromptState::Gone("answered elsewhere".into());
    for key in ['y', 'a', 'd'] {
        assert_eq!(press(&mut view, KeyCode::Char(key)).command, None);
    }
    assert!(matches!(
        press(&mut view, KeyCode::Tab).command,
        Some(ViewCommand::NextPrompt { after: Some(_) })
    ));
    assert!(press(&mut view, KeyCode::Esc).close);
}

#[test]
fn the_form_builds_a_spec_and_shows_refusals_at_their_field() {
    let mut form = DispatchForm::new(
        &["claude-code".into(), "sim".into()],
        "sim",
        std::path::Path::new("/work"),
        &["quick-success".into(), "hang".into()],
    );
    assert!(form.fields().contains(&Field::Scenario));
    let mut view = form.clone();
    type_text(&mut view, "say hello");
    // Tab to the workspace (task, provider, model, policy, budget, cwd, workspace) and
    // pick the first mode, then on to the scenario.
    for _ in 0..6 {
        press(&mut view, KeyCode::Tab);
    }
    press(&mut view, KeyCode::Right);
    // The sandbox: on.
    press(&mut view, KeyCode::Tab);
    press(&mut view, KeyCode::Right);
    // Class, max turns, tags, workflow, context.
    for text in [
        "review",
        "3",
        "ui, login ,",
        "wf-1",
        "the login page is at /login",
    ] {
        press(&mut view, KeyCode::Tab);
        type_text(&mut view, text);
    }
    press(&mut view, KeyCode::Tab);
    press(&mut view, KeyCode::Right);
    let outcome = press(&mut view, KeyCode::Enter);
    let Some(ViewCommand::Request(ReplyTag::Dispatch, Request::Dispatch { spec })) =
        outcome.command
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(spec.task, "say hello");
    assert_eq!(spec.provider.as_deref(), Some("sim"));
    assert_eq!(spec.scenario.as_deref(), Some("quick-success"));
    assert_eq!(spec.workspace.as_deref(), Some("worktree"));
    assert_eq!(spec.sandbox, Some(true));
    assert_eq!(spec.class.as_deref(), Some("review"));
    assert_eq!(spec.max_turns, Some(3));
    assert_eq!(spec.tags, ["ui", "login"]);
    assert_eq!(spec.workflow_id.as_deref(), Some("wf-1"));
    assert_eq!(spec.context.as_deref(), Some("the login page is at /login"));
    assert_eq!(spec.cwd.as_deref(), Some(std::path::Path::new("/work")));
    assert_eq!(spec.budget_usd, None);

    form.refused(&DroverError::new(
        ErrorCode::CwdInvalid,
        "no such directory",
    ));
    assert_eq!(form.focus, Field::Cwd);
    assert_eq!(form.error.as_ref().unwrap().field, Some(Field::Cwd));
    // No bubblewrap: the refusal is shown at the sandbox field, and a form left at
    // `off` asks for no sandbox.
    form.refused(&DroverError::new(
        ErrorCode::SandboxUnavailable,
        "bubblewrap (`bwrap`) is not found on PATH",
    ));
    assert_eq!(form.focus, Field::Sandbox);
    assert_eq!(form.spec().unwrap().sandbox, None);
}

#[test]
fn a_budget_that_is_not_money_is_refused_before_sending() {
    let mut form = DispatchForm::new(&["sim".into()], "sim", std::path::Path::new("/"), &[]);
    type_text(&mut form, "x");
    for _ in 0..4 {
        press(&mut form, KeyCode::Tab);
    }
    type_text(&mut form, "lots");
    assert_eq!(press(&mut form, KeyCode::Enter).command, None);
    assert_eq!(form.error.unwrap().field, Some(Field::Budget));
}

#[test]
fn the_filter_box_filters_as_you_type_and_esc_restores() {
    let mut view = InputBox::new(
        InputPurpose::Filter {
            previous: "old".into(),
        },
        "",
    );
    assert_eq!(
        press(&mut view, KeyCode::Char('l')).command,
        Some(ViewCommand::SetFilter("l".into()))
    );
    assert_eq!(
        press(&mut view, KeyCode::Esc),
        Outcome::close_with(ViewCommand::SetFilter("old".into()))
    );
}

#[test]
fn confirmations_need_a_yes() {
    let mut view = ConfirmView {
        what: Confirmable::KillAll,
        message: "stop 3 runs?".into(),
    };
    assert_eq!(press(&mut view, KeyCode::Char('x')), Outcome::stay());
    assert_eq!(
        press(&mut view, KeyCode::Char('y')),
        Outcome::close_with(ViewCommand::Request(
            ReplyTag::KillAll,
            Request::KillAll { workflow: None }
        ))
    );
}

#[test]
fn the_rule_chooser_opens_from_outside_the_prompt_and_not_for_a_question() {
    use drover_core::rules::{RuleKind, Scope};
    let mut p = prompt::rule_chooser("r1", permission(), None);
    let prompt::PromptMode::Rule(chooser) = &p.mode else {
        panic!("the chooser is open: {:?}", p.mode)
    };
    assert_eq!(
        (chooser.scope, chooser.kind, chooser.pattern.text.as_str()),
        (Scope::Repository, RuleKind::Command, "ls *")
    );
    // esc goes back to the prompt's keys; a question has no chooser.
    press(&mut p, KeyCode::Esc);
    assert_eq!(p.context(), crate::keys::Context::Prompt);
    let q = prompt::rule_chooser("r1", question(), None);
    assert_eq!(q.mode, prompt::PromptMode::Keys);
    // A flagged request opens as its prompt, saying why there is no chooser.
    let mut flagged = permission();
    flagged.guard = Some("it deletes the workspace".into());
    let f = prompt::rule_chooser("r1", flagged, None);
    assert_eq!(f.mode, prompt::PromptMode::Keys);
    assert_eq!(f.state, PromptState::Failed(prompt::FLAGGED_NO_RULE.into()));
}

/// The footer shows the hint of an answer exactly when the prompt's key for it acts: a
/// hidden answer sends nothing and opens nothing, a shown one sends or opens its box.
#[test]
fn a_prompt_hints_exactly_the_answers_its_keys_take() {
    use crate::keys::Context;
    let keys = KeyTable::defaults();
    let mut flagged = permission();
    flagged.guard = Some("it deletes the workspace".into());
    let mut gone = on_screen("r1", permission());
    gone.state = PromptState::Gone("answered elsewhere".into());
    let answers = [
        Action::AllowOnce,
        Action::AllowAlways,
        Action::AddRule,
        Action::Deny,
        Action::DenyWithMessage,
        Action::TypeAnswer,
    ];
    for view in [
        on_screen("r1", permission()),
        on_screen("r1", question()),
        on_screen("r1", flagged),
        gone,
    ] {
        let hinted: Vec<&str> = view.hints(&keys).into_iter().map(|(_, w)| w).collect();
        for action in answers {
            assert!(
                keys.key_for(Context::Prompt, action).is_some(),
                "{action:?}"
            );
            let mut pressed = view.clone();
            let key = KeyEvent::new(KeyCode::F(12), KeyModifiers::NONE);
            let outcome = pressed.handle_key(Some(action), &key);
            let acted = outcome.command.is_some() || pressed.mode != view.mode;
            assert_eq!(
                acted,
                view.offers(action),
                "{action:?} on {:?} / {:?}",
                view.request.kind,
                view.state
            );
            let word = action.hint().expect("an answer has a hint");
            assert_eq!(hinted.contains(&word), acted, "{action:?}: {hinted:?}");
        }
    }
}

#[test]
fn the_stack_reaches_views_by_type_and_the_top_one_is_on_top() {
    use super::help::HelpView;
    use crate::keys::Context;
    let mut stack = ViewStack::default();
    assert!(stack.top().is_none());
    stack.push(on_screen("r1", permission()));
    stack.push(HelpView::default());
    stack.push(PromptView::new("r2", question()));
    assert_eq!(stack.len(), 3);
    assert_eq!(stack.top().map(|v| v.context()), Some(Context::Prompt));
    assert_eq!(stack.position::<PromptView>(|p| p.run_id == "r1"), Some(0));
    assert_eq!(
        stack.position::<PromptView>(|_| true),
        Some(2),
        "the topmost"
    );
    assert_eq!(
        stack
            .find::<PromptView>(|_| true)
            .map(|p| p.run_id.as_str()),
        Some("r2")
    );
    assert!(stack.top_as::<HelpView>().is_none());
    assert_eq!(stack.each_mut::<PromptView>().count(), 2);
    assert!(stack.get_mut::<PromptView>(1).is_none(), "not a prompt");
    stack.get_mut::<HelpView>(1).expect("help").scroll = 3;
    assert!(stack.is_top(2) && !stack.is_top(1));
    stack.remove(2);
    assert_eq!(stack.top_as::<HelpView>().map(|h| h.scroll), Some(3));
    stack.pop();
    stack.remove(5);
    assert_eq!(stack.len(), 1);
    stack.pop();
    assert!(stack.is_empty());
}
