//! Approval rules in the dispatcher (docs/ARCHITECTURE.md §"Approval rules and the guard"):
//! the rules are held in memory (loaded at start, changed by `rule_add` and `rule_remove`,
//! each change committed to the ledger), a request a rule matches is answered at once and
//! recorded as decided by `rule:<id>`, and the guard's flag is worked out for each request.
//!
//! What must stay true: a request the guard flags is never answered by a rule (nor by
//! "allow always", nor by the `auto` policy: `answers.rs` asks this file first); a rule
//! made from a prompt answers the request that was on screen or nothing; a rule's
//! pattern holds no secret (the redactor would change it: refused).

use std::path::PathBuf;

use super::run::{Batch, Run};
use super::{Core, ReplyTo};
use crate::dispatch::api::{Response, RuleAnswer};
use crate::ledger::WriteOp;
use crate::providers::{Ask, PermissionAnswer, PermissionRequest, RequestKind};
use crate::rules::{Place, Rule, RuleDecision, RuleSet, RuleSpec, Scope};
use crate::spec::PermissionPolicy;
use crate::{DroverError, ErrorCode};

/// The ledger's meta key of the highest rule id ever given.
pub const RULES_HIGH_WATER: &str = "rules_high_water";

impl Core {
    /// The guard's reason for `ask` on run `run_id`, when it flags it.
    pub(super) fn guard_reason(&self, run_id: &str, ask: &Ask) -> Option<String> {
        let run = self.runs.get(run_id)?;
        let workspace = run.work_dir();
        let home = self.facts.env("HOME").map(PathBuf::from);
        let ctx = crate::guard::Context {
            workspace: Some(&workspace),
            users_checkout: !run.workspace.is_worktree(),
            home: home.as_deref(),
            extra: &self.guard_extra,
        };
        crate::guard::check(ask, &ctx).map(|f| self.redactor.redact(&f.reason).into_owned())
    }

    /// The rule that decides `ask` on run `run_id`, if any.
    pub(super) fn rule_for(&self, run_id: &str, ask: &Ask) -> Option<Rule> {
        let run = self.runs.get(run_id)?;
        let (repository, workspace) = self.place_parts(run);
        let place = Place {
            run_id,
            repository: repository.as_deref(),
            workspace: Some(&workspace),
        };
        self.rules.decide(ask, &place).cloned()
    }

    fn place_parts(&self, run: &Run) -> (Option<String>, PathBuf) {
        let workspace = run.work_dir();
        // A run on a host works in the host's paths: its repository is the host's (a
        // worktree's checkout there), never looked for on this machine's disk, and named
        // with the host, so a rule for this machine's repository at the same path does
        // not hold there (docs/ARCHITECTURE.md §"Hosts").
        if let Some(host) = &run.spec.host {
            let repository = run
                .workspace
                .checkout
                .as_ref()
                .map(|c| format!("@{host}:{}", std::path::Path::new(c).join(".git").display()));
            return (repository, workspace);
        }
        let repository = self
            .facts
            .repository_of(&workspace)
            .map(|p| p.display().to_string());
        (repository, workspace)
    }

    /// Answers `request` (already off the pending list, or never on it) by `rule`.
    pub(super) fn answer_by_rule(&mut self, run_id: &str, request: PermissionRequest, rule: &Rule) {
        let answer = match rule.decision {
            RuleDecision::Allow => PermissionAnswer::Allow { always: false },
            RuleDecision::Deny => PermissionAnswer::Deny {
                message: Some(format!(
                    "drover's rule {} denies this (`{}`, {})",
                    rule.id,
                    rule.pattern,
                    rule.scope_words()
                )),
            },
        };
        let how = format!(
            "{} by rule {} (`{}`, {})",
            rule.decision.as_str(),
            rule.id,
            rule.pattern,
            rule.scope_words()
        );
        let line = self
            .redactor
            .redact(&crate::text::clip(
                &format!(
                    "rule {} {} {}: {}",
                    rule.id,
                    match rule.decision {
                        RuleDecision::Allow => "allowed",
                        RuleDecision::Deny => "denied",
                    },
                    request.tool,
                    crate::text::one_line(&request.ask.summary())
                ),
                super::transcript::LINE_MAX_CHARS,
            ))
            .into_owned();
        let now = self.now;
        if let Some(run) = self.runs.get_mut(run_id) {
            let mut batch = Batch::default();
            run.transcript_line(&mut batch, line, now);
            self.commit(batch);
        }
        let tool = request.tool.clone();
        self.answer_request(run_id, request.request_id, answer, &rule.who(), &tool, &how);
    }

    /// `rules`.
    pub(super) fn rules_list(&self) -> Response {
        Response::Rules(self.rules.rules().cloned().collect())
    }

    /// `rule_add`: keeps the rule, answers the request named (the one on screen) and
    /// every other pending request the rule decides.
    pub(super) fn rule_add(&mut self, to: ReplyTo, spec: RuleSpec, answer: Option<RuleAnswer>) {
        let result = self.make_rule(spec, answer.as_ref());
        let result = result.map(|rule| {
            if let Some(a) = &answer {
                self.answer_named(&rule, a);
            }
            self.apply_rule(&rule);
            Response::Rule(Box::new(rule))
        });
        self.reply(to, result);
    }

    fn make_rule(
        &mut self,
        mut spec: RuleSpec,
        answer: Option<&RuleAnswer>,
    ) -> Result<Rule, DroverError> {
        if let Some(a) = answer {
            let run = self
                .runs
                .get(&a.run_id)
                .ok_or_else(|| super::not_found(&a.run_id))?;
            let pending = run
                .broker
                .pending()
                .iter()
                .find(|p| p.request.request_id == a.request_id)
                .ok_or_else(|| no_pending(&a.request_id))?;
            if pending.request.kind != RequestKind::Permission {
                return Err(invalid(format!(
                    "request {} is a question; rules answer permissions only",
                    a.request_id
                )));
            }
            if let Some(reason) = &pending.guard
                && spec.decision == RuleDecision::Allow
            {
                return Err(invalid(format!(
                    "request {} was flagged ({reason}); no rule answers a flagged request: \
                     allow it once yourself, or deny it",
                    a.request_id
                )));
            }
            if spec.scope == Scope::Run && spec.run_id.is_none() {
                spec.run_id = Some(a.run_id.clone());
            }
            if spec.scope == Scope::Repository && spec.repository.is_none() {
                spec.repository = Some(run.work_dir().display().to_string());
            }
        }
        RuleSet::check(&spec)?;
        if self.redactor.redact(&spec.pattern) != spec.pattern {
            return Err(invalid(
                "the pattern holds what looks like a secret; put `*` in its place".into(),
            ));
        }
        let run_id = match spec.scope {
            Scope::Run => {
                let id = spec.run_id.clone().unwrap_or_default();
                if !self.runs.contains_key(&id) {
                    return Err(super::not_found(&id));
                }
                Some(id)
            }
            _ => None,
        };
        let repository = match spec.scope {
            Scope::Repository => {
                let dir = spec.repository.clone().unwrap_or_default();
                let dir = self.facts.current_dir().join(dir);
                let common = self.facts.repository_of(&dir).ok_or_else(|| {
                    invalid(format!(
                        "{} is not in a git repository; name a directory of the repository \
                         with --repo, or use --scope everywhere",
                        dir.display()
                    ))
                })?;
                Some(common.display().to_string())
            }
            _ => None,
        };
        let rule = Rule {
            id: self.rules.next_id(),
            scope: spec.scope,
            kind: spec.kind,
            pattern: spec.pattern.trim().to_string(),
            decision: spec.decision,
            run_id,
            repository,
            created_at: self.now,
        };
        self.rules.add(rule.clone())?;
        let mut batch = Batch::default();
        batch.ops.push(WriteOp::PutRule(Box::new(rule.clone())));
        batch.ops.push(WriteOp::PutMeta {
            key: RULES_HIGH_WATER.into(),
            value: rule.id.to_string(),
        });
        self.commit(batch);
        Ok(rule)
    }

    /// The request on screen when the rule was made: answered by the rule when the rule
    /// covers it, else by the user with the rule's decision (the pattern was edited
    /// narrower than the request).
    fn answer_named(&mut self, rule: &Rule, a: &RuleAnswer) {
        let Some(run) = self.runs.get(&a.run_id) else {
            return;
        };
        let Some(ask) = run
            .broker
            .pending()
            .iter()
            .find(|p| p.request.request_id == a.request_id)
            .map(|p| p.request.ask.clone())
        else {
            return;
        };
        let (repository, workspace) = self.place_parts(run);
        let place = Place {
            run_id: &a.run_id,
            repository: repository.as_deref(),
            workspace: Some(&workspace),
        };
        if self.rules.rule_matches(rule.id, &ask, &place) {
            if let Some(run) = self.runs.get_mut(&a.run_id)
                && let Ok(p) = run.broker.take_for_answer(&a.request_id)
            {
                self.answer_by_rule(&a.run_id, p.request, rule);
            }
            return;
        }
        let answer = match rule.decision {
            RuleDecision::Allow => PermissionAnswer::Allow { always: false },
            RuleDecision::Deny => PermissionAnswer::Deny { message: None },
        };
        if let Err(e) = self.take_answer(&a.run_id, &a.request_id, answer) {
            tracing::warn!(error = %e, "the request a rule was made from could not be answered");
        }
    }

    /// Answers every pending request (of every run under `ask`) that `rule` now decides.
    fn apply_rule(&mut self, rule: &Rule) {
        let mut hits: Vec<(String, String)> = Vec::new();
        for (run_id, run) in &self.runs {
            if run.spec.policy != PermissionPolicy::Ask || !run.state().is_active() {
                continue;
            }
            let (repository, workspace) = self.place_parts(run);
            let place = Place {
                run_id,
                repository: repository.as_deref(),
                workspace: Some(&workspace),
            };
            for p in run.broker.pending() {
                if p.guard.is_none()
                    && p.request.kind == RequestKind::Permission
                    && self
                        .rules
                        .decide(&p.request.ask, &place)
                        .is_some_and(|r| r.id == rule.id)
                {
                    hits.push((run_id.clone(), p.request.request_id.clone()));
                }
            }
        }
        hits.sort();
        for (run_id, request_id) in hits {
            if let Some(run) = self.runs.get_mut(&run_id)
                && let Ok(p) = run.broker.take_for_answer(&request_id)
            {
                self.answer_by_rule(&run_id, p.request, rule);
            }
        }
    }

    /// `rule_remove`.
    pub(super) fn rule_remove(&mut self, id: u64) -> Result<Response, DroverError> {
        let rule = self.rules.remove(id)?;
        let mut batch = Batch::default();
        batch.ops.push(WriteOp::DeleteRule(id));
        self.commit(batch);
        Ok(Response::Rule(Box::new(rule)))
    }
}

fn invalid(message: String) -> DroverError {
    DroverError::new(ErrorCode::RuleInvalid, message)
}

fn no_pending(request_id: &str) -> DroverError {
    DroverError::new(
        ErrorCode::NoPendingRequest,
        format!(
            "no pending request {request_id}: it was answered or withdrawn; list what is \
             pending with `drover show RUN`"
        ),
    )
}
