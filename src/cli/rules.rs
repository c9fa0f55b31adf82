//! `drover rules`: the approval rules (docs/ARCHITECTURE.md
//! §"Approval rules and the guard"); `rules add` keeps a new one and `rules rm ID` forgets
//! one (both need a running drover; the list reads the ledger when none runs).
//!
//! What must stay true: the scope, kind and decision are read by the rules module's own
//! parsers, so a bad word is refused with `RULE_INVALID` and a sentence, as over the
//! socket; a repository-scoped rule names the repository of `--repo` (default: the
//! current directory), resolved by the owner to its git common directory.

use clap::{Args, Subcommand};

use super::headless::{ask, client_runtime};
use super::output::{JsonFlag, print_json, write_stdout};
use drover_core::dispatch::{Request, Response};
use drover_core::error::DroverError;
use drover_core::paths::Paths;
use drover_core::rules::{Rule, RuleDecision, RuleKind, RuleSpec, Scope};

#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(subcommand)]
    pub action: Option<RulesAction>,
    #[command(flatten)]
    pub output: JsonFlag,
}

#[derive(Debug, Subcommand)]
pub enum RulesAction {
    /// Keep a rule: requests it matches are answered at once (a request the guard flags
    /// still asks). Command patterns are words, a lone `*` last for any words after
    /// (`cargo test *`, `git status`); file-edit patterns are globs inside the workspace
    /// (`src/**`); fetch patterns glob the url; MCP-tool patterns glob `server/tool`.
    Add {
        /// run, repository or everywhere.
        #[arg(long)]
        scope: String,
        /// The run of a run-scoped rule.
        #[arg(long = "run", value_name = "RUN")]
        run_id: Option<String>,
        /// A directory of the repository of a repository-scoped rule (default: here).
        #[arg(long = "repo", value_name = "DIR")]
        repository: Option<std::path::PathBuf>,
        /// command, file-edit, fetch, mcp-tool or any.
        #[arg(long)]
        kind: String,
        #[arg(long)]
        pattern: String,
        /// allow or deny.
        decision: String,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Forget rule ID.
    Rm {
        id: u64,
        #[command(flatten)]
        output: JsonFlag,
    },
}

impl RulesArgs {
    pub fn read_only(&self) -> bool {
        self.action.is_none()
    }
}

pub fn run(args: RulesArgs, paths: &Paths) -> Result<(), DroverError> {
    let (request, json) = match args.action {
        None => (Request::Rules, args.output.json),
        Some(RulesAction::Add {
            scope,
            run_id,
            repository,
            kind,
            pattern,
            decision,
            output,
        }) => {
            let scope = Scope::parse(&scope)?;
            let repository = match scope {
                Scope::Repository => {
                    let here = std::env::current_dir().unwrap_or_default();
                    Some(
                        here.join(repository.unwrap_or_default())
                            .display()
                            .to_string(),
                    )
                }
                _ => None,
            };
            let rule = RuleSpec {
                scope,
                kind: RuleKind::parse(&kind)?,
                pattern,
                decision: RuleDecision::parse(&decision)?,
                run_id,
                repository,
            };
            drover_core::rules::RuleSet::check(&rule)?;
            (Request::RuleAdd { rule, answer: None }, output.json)
        }
        Some(RulesAction::Rm { id, output }) => (Request::RuleRemove { id }, output.json),
    };
    let answer = client_runtime()?.block_on(ask(paths, request.clone()))?;
    if json {
        return print_json(&answer);
    }
    write_stdout(&human(&request, &answer))
}

fn human(request: &Request, answer: &Response) -> String {
    match (request, answer) {
        (_, Response::Rules(rules)) => table(rules),
        (Request::RuleAdd { .. }, Response::Rule(rule)) => {
            format!("rule {}: {}\n", rule.id, line(rule))
        }
        (Request::RuleRemove { .. }, Response::Rule(rule)) => {
            format!("removed rule {}: {}\n", rule.id, line(rule))
        }
        _ => super::render::pretty_json(answer),
    }
}

/// One rule in words: `allow command `cargo test *` · repository /src/app`.
fn line(rule: &Rule) -> String {
    format!(
        "{} {} `{}` · {}",
        rule.decision.as_str(),
        rule.kind.as_str(),
        rule.pattern,
        rule.scope_words()
    )
}

/// The rules as a table, oldest first.
pub fn table(rules: &[Rule]) -> String {
    if rules.is_empty() {
        return "no approval rules: add one with `drover rules add`, or `a` in a permission \
                prompt\n"
            .to_string();
    }
    let rows: Vec<[String; 5]> = rules
        .iter()
        .map(|r| {
            [
                r.id.to_string(),
                r.decision.as_str().to_string(),
                r.kind.as_str().to_string(),
                r.pattern.clone(),
                r.scope_words(),
            ]
        })
        .collect();
    let header = ["ID", "DECISION", "KIND", "PATTERN", "SCOPE"].map(str::to_string);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_table() {
        let rule = |id, scope, kind, pattern: &str, decision| Rule {
            id,
            scope,
            kind,
            pattern: pattern.into(),
            decision,
            run_id: (scope == Scope::Run).then(|| "r-20260101-0001".to_string()),
            repository: (scope == Scope::Repository).then(|| "/src/app/.git".to_string()),
            created_at: 0,
        };
        let rules = vec![
            rule(
                1,
                Scope::Repository,
                RuleKind::Command,
                "cargo test *",
                RuleDecision::Allow,
            ),
            rule(
                2,
                Scope::Everywhere,
                RuleKind::Command,
                "git push *",
                RuleDecision::Deny,
            ),
            rule(
                3,
                Scope::Run,
                RuleKind::FileEdit,
                "src/**",
                RuleDecision::Allow,
            ),
            rule(
                4,
                Scope::Everywhere,
                RuleKind::Fetch,
                "https://docs.rs/*",
                RuleDecision::Allow,
            ),
        ];
        insta::assert_snapshot!(table(&rules));
        insta::assert_snapshot!("no_rules", table(&[]));
    }
}
