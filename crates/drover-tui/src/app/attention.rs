//! The attention line's request and its keys: the oldest pending request of any run is
//! shown above the footer; `y` allows it once, `d` denies it, `a` opens the rule chooser
//! for it, `1`–`9` answer a question with one of its options, and `p` opens it in full.
//! A request the guard flagged is never allowed from here: `y` opens its prompt, where
//! the banner says why and allowing takes a second key.
//!
//! What must stay true: a key acts on the request the last frame drew (its id, recorded
//! as it was drawn), never on whatever is oldest when the key arrives; a request gone
//! since it was drawn is not answered, and the user is told; a request on screen for less
//! than the answer guard (`[dashboard] answer_guard_ms`, [`crate::shown`]) — it just took
//! the line, or its words just changed — is not answered either, and the line says "just
//! changed — look again"; one answer at a time is sent for the shown request. The
//! terminal title counts what needs you.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::App;
use crate::event::{Effect, ReplyTag};
use crate::model::RunEntry;
use crate::views::prompt::{PromptView, answer_words, rule_chooser};
use drover_core::dispatch::Request;
use drover_core::dispatch::api::PendingView;
use drover_core::providers::{PermissionAnswer, Question, RequestKind};

/// One request, by its ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub run_id: String,
    pub request_id: String,
}

/// What the attention line showed, and the answer on its way for it.
#[derive(Debug, Default)]
pub struct Attention {
    /// The request the last frame drew (none: nothing was waiting, or no frame yet).
    shown: RefCell<Option<Shown>>,
    /// The request whose answer from the attention line is on its way.
    sending: Option<String>,
    /// The request a key came too soon for (the line says so until the next key).
    held: Option<String>,
}

/// The one question a request asks, when it can be answered by an option's number: a
/// single question, one choice, with options.
pub fn numbered_question(request: &PendingView) -> Option<&Question> {
    if request.kind != RequestKind::Question {
        return None;
    }
    match request.ask.questions() {
        [q] if !q.multi_select && !q.options.is_empty() => Some(q),
        _ => None,
    }
}

impl App {
    /// The request to draw on the attention line now: the oldest pending request of any
    /// active run.
    pub fn attention_next(&self) -> Option<(&RunEntry, &PendingView)> {
        self.model.oldest_pending(None)
    }

    /// Called by the renderer with the request it drew on the attention line.
    pub fn attention_drawn(&self, shown: Option<(&str, &str)>) {
        *self.attention.shown.borrow_mut() = shown.map(|(run, request)| Shown {
            run_id: run.to_string(),
            request_id: request.to_string(),
        });
    }

    /// The request on the attention line: the one the last frame showed, while it is
    /// still pending. Every key of the attention line acts on this request, by its id.
    pub fn attention_request(&self) -> Option<(&RunEntry, &PendingView)> {
        let shown = self.attention.shown.borrow().clone()?;
        let entry = self.model.run(&shown.run_id)?;
        if !entry.summary.head.state.is_active() {
            return None;
        }
        let request = entry
            .pending
            .iter()
            .find(|p| p.request_id == shown.request_id)?;
        Some((entry, request))
    }

    /// The terminal's title: `drover · N need you` while runs need you, else `drover`
    /// (the count is the Needs-you tray's).
    pub fn title(&self) -> String {
        match self.model.counts().needs_you {
            0 => "drover".to_string(),
            1 => "drover · 1 needs you".to_string(),
            n => format!("drover · {n} need you"),
        }
    }

    /// Whether an answer from the attention line is on its way for `request_id`.
    pub fn attention_sending(&self, request_id: &str) -> bool {
        self.attention.sending.as_deref() == Some(request_id)
    }

    /// Whether a key came too soon for `request_id` (the line says "just changed").
    pub fn attention_held(&self, request_id: &str) -> bool {
        self.attention.held.as_deref() == Some(request_id)
    }

    /// A key was pressed: the line's "just changed" goes (the key may put it back).
    pub(super) fn attention_unheld(&mut self) {
        self.attention.held = None;
    }

    /// A key came before `request_id` had been on screen long enough: nothing is sent,
    /// and the line says why.
    fn attention_too_soon(&mut self, request_id: String) {
        self.attention.held = Some(request_id);
    }

    /// The answer to a request sent from anywhere came back: it is no longer on its way.
    pub(super) fn attention_settled(&mut self, request_id: &str) {
        if self.attention_sending(request_id) {
            self.attention.sending = None;
        }
    }

    /// Why no key acts now: nothing was shown, or what was shown is gone.
    fn attention_missing(&mut self) {
        let gone = self.attention.shown.borrow().is_some();
        self.flash_info(if gone {
            "the request on the attention line was settled meanwhile; nothing was sent".into()
        } else {
            "no request waits for an answer".into()
        });
    }

    /// `y`: allow the shown permission request once (a question is answered by number).
    pub(super) fn attention_allow(&mut self, effects: &mut Vec<Effect>) {
        let Some((entry, request)) = self.attention_request() else {
            return self.attention_missing();
        };
        let run_id = entry.summary.head.run_id.clone();
        if request.kind == RequestKind::Question {
            let how = match numbered_question(request) {
                Some(q) => format!("press 1–{} to pick an option", q.options.len().min(9)),
                None => "press p to open it and answer".to_string(),
            };
            return self.flash_info(format!("{run_id} asks a question, not a permission: {how}"));
        }
        if request.guard.is_some() {
            self.attention_open();
            return self.flash_info(
                "the guard flagged this request: read why, then allow it in the prompt with a second key"
                    .into(),
            );
        }
        let readable = self.may_answer(request);
        let request_id = request.request_id.clone();
        if !readable {
            return self.attention_too_soon(request_id);
        }
        self.attention_send(
            run_id,
            request_id,
            PermissionAnswer::Allow { always: false },
            effects,
        );
    }

    /// `d`: deny the shown request (a question is dismissed).
    pub(super) fn attention_deny(&mut self, effects: &mut Vec<Effect>) {
        let Some((entry, request)) = self.attention_request() else {
            return self.attention_missing();
        };
        let readable = self.may_answer(request);
        let (run_id, request_id) = (
            entry.summary.head.run_id.clone(),
            request.request_id.clone(),
        );
        if !readable {
            return self.attention_too_soon(request_id);
        }
        self.attention_send(
            run_id,
            request_id,
            PermissionAnswer::Deny { message: None },
            effects,
        );
    }

    /// `1`–`9`: answer the shown question with that option.
    pub(super) fn attention_choose(&mut self, digit: usize, effects: &mut Vec<Effect>) {
        let Some((entry, request)) = self.attention_request() else {
            return self.attention_missing();
        };
        let run_id = entry.summary.head.run_id.clone();
        let Some(question) = numbered_question(request) else {
            return self.flash_info(if request.kind == RequestKind::Question {
                format!("{run_id}'s question takes more than one pick: press p to answer it")
            } else {
                format!("{run_id} asks a permission: y allows it, d denies it")
            });
        };
        let Some(option) = question.options.get(digit.wrapping_sub(1)) else {
            return self.flash_error(format!(
                "{run_id}'s question has {} option{}",
                question.options.len(),
                drover_core::text::plural(question.options.len())
            ));
        };
        let answers = BTreeMap::from([(question.question.clone(), option.label.clone())]);
        let readable = self.may_answer(request);
        let request_id = request.request_id.clone();
        if !readable {
            return self.attention_too_soon(request_id);
        }
        self.attention_send(
            run_id,
            request_id,
            PermissionAnswer::Answer { answers },
            effects,
        );
    }

    /// `a`: the rule chooser for the shown request (its scope and a proposed pattern;
    /// `enter` saves the rule and answers the request). A flagged request or a question
    /// opens its prompt, which says why no rule is made from it.
    pub(super) fn attention_rule(&mut self) {
        let Some((entry, request)) = self.attention_request() else {
            return self.attention_missing();
        };
        let run_id = entry.summary.head.run_id.clone();
        if !self.may_answer(request) {
            let request_id = request.request_id.clone();
            return self.attention_too_soon(request_id);
        }
        let view = rule_chooser(
            run_id.clone(),
            request.clone(),
            self.model.work_dir(&run_id),
        );
        self.model.select(&run_id);
        self.views.push(view);
    }

    /// `p`: the shown request in full (the prompt); with none shown, the oldest thing
    /// waiting (a request or a route card).
    pub(super) fn attention_open(&mut self) {
        match self.attention_request() {
            Some((entry, request)) => {
                let run_id = entry.summary.head.run_id.clone();
                let view = PromptView::new(run_id.clone(), request.clone());
                self.model.select(&run_id);
                self.views.push(view);
            }
            None => self.next_prompt(None),
        }
    }

    fn attention_send(
        &mut self,
        run_id: String,
        request_id: String,
        answer: PermissionAnswer,
        effects: &mut Vec<Effect>,
    ) {
        if self.attention_sending(&request_id) {
            return self.flash_info(format!(
                "an answer to {run_id}'s request is on its way; waiting for drover"
            ));
        }
        self.flash_info(format!("{} → {run_id}…", answer_words(&answer)));
        self.attention.sending = Some(request_id.clone());
        effects.push(Effect::Request {
            tag: ReplyTag::Respond {
                run_id: run_id.clone(),
                request_id: request_id.clone(),
            },
            request: Request::Respond {
                run_id,
                request_id,
                answer,
            },
        });
    }
}
