//! Approval rules (docs/ARCHITECTURE.md §"Approval rules and the guard"): a scope (one run,
//! one repository with its worktrees, everywhere), a kind (command, file edit, fetch, MCP
//! tool, any), a pattern and a decision (allow or deny). Matching, precedence, the pattern
//! proposed for an ask, and the bounds of a rule live here; keeping rules is the ledger's,
//! applying them the dispatcher's.
//!
//! What must stay true: pure; a rule is validated once, when it is made ([`RuleSet::add`]
//! refuses what does not parse, with `RULE_INVALID`), and the set never holds more than
//! [`MAX_RULES`]; questions are never answered by a rule; a command chain is allowed only
//! when every command in it is (`cd` aside), and denied when any is; the narrowest scope
//! that has a matching rule decides, and within it deny beats allow.

pub mod pattern;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::guard::shell;
use crate::providers::Ask;
use crate::{DroverError, ErrorCode, UnixMillis};
use pattern::{CommandPattern, TextPattern};

/// At most this many rules are kept.
pub const MAX_RULES: usize = 500;
/// A pattern is at most this long (characters).
pub const MAX_PATTERN_CHARS: usize = 200;

/// Where a rule holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One run (`run_id`).
    Run,
    /// One repository (`repository`: its git common directory), its worktrees included.
    Repository,
    /// Everywhere, in every run.
    Everywhere,
}

/// What a rule's pattern is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// A shell command: the pattern is over its words (`cargo test *`); an allow must
    /// cover every command of a chain.
    Command,
    /// A file edit: the pattern is a glob over paths inside the run's workspace
    /// (`src/**`).
    FileEdit,
    /// A fetch: the pattern is a glob over the url.
    Fetch,
    /// An MCP tool call: the pattern is a glob over `server/tool`.
    McpTool,
    /// Any ask: the pattern is a glob over its one-line summary.
    Any,
}

/// What a matching rule answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleDecision {
    /// Allow the request without asking.
    Allow,
    /// Deny the request without asking.
    Deny,
}

impl Scope {
    /// Every scope, narrowest first (the order rules are decided in).
    pub const ALL: [Scope; 3] = [Scope::Run, Scope::Repository, Scope::Everywhere];
    /// The scope as the ledger and the CLI write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Repository => "repository",
            Scope::Everywhere => "everywhere",
        }
    }
    /// The scope a word names (`repo` and `global` too); `RULE_INVALID` otherwise.
    pub fn parse(text: &str) -> Result<Scope, DroverError> {
        match text {
            "run" => Ok(Scope::Run),
            "repository" | "repo" => Ok(Scope::Repository),
            "everywhere" | "global" => Ok(Scope::Everywhere),
            other => Err(invalid(format!(
                "`{other}` is not a scope: use run, repository or everywhere"
            ))),
        }
    }
}

impl RuleKind {
    /// Every kind.
    pub const ALL: [RuleKind; 5] = [
        RuleKind::Command,
        RuleKind::FileEdit,
        RuleKind::Fetch,
        RuleKind::McpTool,
        RuleKind::Any,
    ];
    /// The kind as the ledger and the CLI write it (`command`, `file_edit`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Command => "command",
            RuleKind::FileEdit => "file_edit",
            RuleKind::Fetch => "fetch",
            RuleKind::McpTool => "mcp_tool",
            RuleKind::Any => "any",
        }
    }
    /// The kind a word names (`-` taken as `_`); `RULE_INVALID` otherwise.
    pub fn parse(text: &str) -> Result<RuleKind, DroverError> {
        RuleKind::ALL
            .into_iter()
            .find(|k| k.as_str() == text.replace('-', "_"))
            .ok_or_else(|| {
                invalid(format!(
                    "`{text}` is not a rule kind: use command, file_edit, fetch, mcp_tool or any"
                ))
            })
    }
}

impl RuleDecision {
    /// The decision as the ledger and the CLI write it.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleDecision::Allow => "allow",
            RuleDecision::Deny => "deny",
        }
    }
    /// The decision a word names (`allow`, `deny`); `RULE_INVALID` otherwise.
    pub fn parse(text: &str) -> Result<RuleDecision, DroverError> {
        match text {
            "allow" => Ok(RuleDecision::Allow),
            "deny" => Ok(RuleDecision::Deny),
            other => Err(invalid(format!(
                "`{other}` is not a decision: use allow or deny"
            ))),
        }
    }
}

/// A rule as asked for: what `drover rules add` and the prompt's chooser send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleSpec {
    /// Where the rule holds.
    pub scope: Scope,
    /// What the pattern is about.
    pub kind: RuleKind,
    /// The pattern, in the kind's syntax.
    pub pattern: String,
    /// Allow or deny.
    pub decision: RuleDecision,
    /// The run of a run-scoped rule.
    #[serde(default)]
    pub run_id: Option<String>,
    /// For a repository-scoped rule: a directory in the repository (any of its worktrees);
    /// the rule keeps the repository's git common directory.
    #[serde(default)]
    pub repository: Option<String>,
}

/// A rule as kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// The rule's id, never given twice (see [`RuleSet::next_id`]).
    pub id: u64,
    /// Where the rule holds.
    pub scope: Scope,
    /// What the pattern is about.
    pub kind: RuleKind,
    /// The pattern, as written.
    pub pattern: String,
    /// Allow or deny.
    pub decision: RuleDecision,
    /// The run of a run-scoped rule.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The repository's git common directory.
    #[serde(default)]
    pub repository: Option<String>,
    /// When the rule was made, in ms since the Unix epoch.
    pub created_at: UnixMillis,
}

impl Rule {
    /// Who a decision by this rule is recorded as.
    pub fn who(&self) -> String {
        format!("rule:{}", self.id)
    }

    /// Where the rule holds, in words: `run r-…`, `repository /src/app`, `everywhere`.
    pub fn scope_words(&self) -> String {
        match self.scope {
            Scope::Run => format!("run {}", self.run_id.as_deref().unwrap_or("?")),
            Scope::Repository => {
                let repo = self.repository.as_deref().unwrap_or("?");
                let top = repo.strip_suffix("/.git").unwrap_or(repo);
                format!("repository {top}")
            }
            Scope::Everywhere => "everywhere".into(),
        }
    }
}

/// Where a request is asked: what a rule's scope is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The run that asks.
    pub run_id: &'a str,
    /// The git common directory of the run's repository, when it works in one.
    pub repository: Option<&'a str>,
    /// The run's workspace (file-edit patterns are relative to it).
    pub workspace: Option<&'a Path>,
}

#[derive(Debug, Clone)]
enum Matcher {
    Command(CommandPattern),
    Text(TextPattern),
}

/// The rules in memory, each with its compiled pattern.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<(Rule, Matcher)>,
    /// The highest id ever given, removed rules' included: an id is never given twice, so
    /// a decision recorded as `rule:<id>` names one rule only.
    high_water: u64,
}

impl RuleSet {
    /// Checks a rule's fields and pattern: the rule as it would be kept, or why not.
    pub fn check(spec: &RuleSpec) -> Result<(), DroverError> {
        compile(spec.kind, &spec.pattern).map(|_| ())?;
        match spec.scope {
            Scope::Run if spec.run_id.as_deref().is_none_or(str::is_empty) => Err(invalid(
                "a run-scoped rule names its run: add --run RUN".into(),
            )),
            Scope::Repository if spec.repository.as_deref().is_none_or(str::is_empty) => {
                Err(invalid(
                    "a repository-scoped rule names a directory of the repository: add --repo DIR"
                        .into(),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Adds a rule (loaded from the ledger or just made); refused when its pattern does
    /// not parse or the set is full.
    pub fn add(&mut self, rule: Rule) -> Result<&Rule, DroverError> {
        if self.rules.len() >= MAX_RULES {
            return Err(DroverError::new(
                ErrorCode::TooManyRules,
                format!(
                    "drover keeps at most {MAX_RULES} rules; remove some with `drover rules rm ID`"
                ),
            ));
        }
        let matcher = compile(rule.kind, &rule.pattern)?;
        self.high_water = self.high_water.max(rule.id);
        self.rules.push((rule, matcher));
        Ok(&self.rules.last().expect("just pushed").0)
    }

    /// Removes rule `id`.
    pub fn remove(&mut self, id: u64) -> Result<Rule, DroverError> {
        let index = self
            .rules
            .iter()
            .position(|(r, _)| r.id == id)
            .ok_or_else(|| not_found(id))?;
        Ok(self.rules.remove(index).0)
    }

    /// Removes every rule of a run (it was removed).
    pub fn forget_run(&mut self, run_id: &str) -> Vec<u64> {
        let gone: Vec<u64> = self
            .rules
            .iter()
            .filter(|(r, _)| r.run_id.as_deref() == Some(run_id))
            .map(|(r, _)| r.id)
            .collect();
        self.rules.retain(|(r, _)| !gone.contains(&r.id));
        gone
    }

    /// The rules, in the order they were added.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|(r, _)| r)
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The id of the next rule: after every id given before, removed rules' included.
    pub fn next_id(&self) -> u64 {
        self.high_water + 1
    }

    /// The highest id given before (kept in the ledger), so that ids are not given again.
    pub fn given_up_to(&mut self, id: u64) {
        self.high_water = self.high_water.max(id);
    }

    /// The rule that decides `ask` at `place`, if any: the narrowest scope with a match,
    /// deny before allow within it, the oldest rule first.
    pub fn decide(&self, ask: &Ask, place: &Place) -> Option<&Rule> {
        Scope::ALL.into_iter().find_map(|scope| {
            let mut found: Option<&Rule> = None;
            for (rule, matcher) in &self.rules {
                if rule.scope != scope || !holds_at(rule, place) {
                    continue;
                }
                if !matches(rule, matcher, ask, place) {
                    continue;
                }
                match found {
                    Some(f) if f.decision == RuleDecision::Deny => {}
                    Some(_) if rule.decision == RuleDecision::Allow => {}
                    _ => found = Some(rule),
                }
            }
            found
        })
    }

    /// Whether rule `id` matches `ask` at `place` (its scope aside).
    pub fn rule_matches(&self, id: u64, ask: &Ask, place: &Place) -> bool {
        self.rules
            .iter()
            .find(|(r, _)| r.id == id)
            .is_some_and(|(r, m)| holds_at(r, place) && matches(r, m, ask, place))
    }
}

fn holds_at(rule: &Rule, place: &Place) -> bool {
    match rule.scope {
        Scope::Run => rule.run_id.as_deref() == Some(place.run_id),
        Scope::Repository => {
            rule.repository.is_some() && rule.repository.as_deref() == place.repository
        }
        Scope::Everywhere => true,
    }
}

fn matches(rule: &Rule, matcher: &Matcher, ask: &Ask, place: &Place) -> bool {
    let allow = rule.decision == RuleDecision::Allow;
    match (rule.kind, matcher, ask) {
        (_, _, Ask::Question { .. }) => false,
        (RuleKind::Any, Matcher::Text(t), ask) => t.matches(&ask.summary()),
        (RuleKind::Command, Matcher::Command(p), Ask::Command { command, .. }) => {
            let Ok(commands) = shell::simple_commands(command) else {
                return false;
            };
            let relevant: Vec<_> = commands.iter().filter(|c| c.program() != "cd").collect();
            if relevant.is_empty() {
                return false;
            }
            // A write redirected by the command is not in its words: an allow rule
            // never covers one.
            if allow {
                relevant
                    .iter()
                    .all(|c| c.writes.is_empty() && p.matches(&c.words))
            } else {
                relevant.iter().any(|c| p.matches(&c.words))
            }
        }
        (
            RuleKind::FileEdit,
            Matcher::Text(t),
            Ask::FileEdit {
                file_path,
                other_files,
                ..
            },
        ) => {
            let mut paths =
                std::iter::once(file_path).chain(other_files.iter().map(|f| &f.file_path));
            let inside =
                |p: &String| relative_in(p, place.workspace).is_some_and(|r| t.matches(&r));
            if allow {
                paths.all(inside)
            } else {
                paths.any(inside)
            }
        }
        (RuleKind::Fetch, Matcher::Text(t), Ask::Fetch { url }) => t.matches(url),
        (RuleKind::McpTool, Matcher::Text(t), Ask::McpTool { server, tool, .. }) => {
            t.matches(&format!("{server}/{tool}"))
        }
        _ => false,
    }
}

/// `path` relative to the workspace, when it is inside it.
fn relative_in(path: &str, workspace: Option<&Path>) -> Option<String> {
    let ws = workspace?;
    let full = crate::guard::resolve(path, Some(ws), None)?;
    let rel = full.strip_prefix(ws).ok()?;
    let rel = rel.to_string_lossy().into_owned();
    (!rel.is_empty()).then_some(rel)
}

fn compile(kind: RuleKind, pattern: &str) -> Result<Matcher, DroverError> {
    let compiled = match kind {
        RuleKind::Command => CommandPattern::parse(pattern).map(Matcher::Command),
        RuleKind::FileEdit => TextPattern::path(pattern).map(Matcher::Text),
        RuleKind::Fetch | RuleKind::McpTool | RuleKind::Any => {
            TextPattern::text(pattern).map(Matcher::Text)
        }
    };
    compiled.map_err(|why| invalid(format!("{why}; see `drover rules --help` for the patterns")))
}

/// The rule the prompt's chooser proposes for `ask`: its kind and a pattern wide enough
/// to cover the same work next time (`cargo test --lib foo` → `cargo test *`). `None`
/// for a question.
pub fn propose(ask: &Ask, workspace: Option<&Path>) -> Option<(RuleKind, String)> {
    match ask {
        Ask::Question { .. } => None,
        Ask::Command { command, .. } => {
            let commands = shell::simple_commands(command).ok()?;
            let first = commands.iter().find(|c| c.program() != "cd")?;
            let mut words = vec![first.program().to_string()];
            let rest = first.args();
            if let Some(sub) = rest.first().filter(|w| is_subcommand(w)) {
                words.push(sub.clone());
            }
            let mut pattern = shell_words::join(&words);
            if rest.len() > words.len() - 1 {
                pattern.push_str(" *");
            }
            Some((RuleKind::Command, pattern))
        }
        Ask::FileEdit { file_path, .. } => {
            let rel = relative_in(file_path, workspace)?;
            let pattern = match rel.rsplit_once('/') {
                Some((dir, _)) => format!("{dir}/**"),
                None => rel,
            };
            Some((RuleKind::FileEdit, pattern))
        }
        Ask::Fetch { url } => {
            let (scheme, rest) = url.split_once("://")?;
            let host = rest.split('/').next().unwrap_or(rest);
            Some((RuleKind::Fetch, format!("{scheme}://{host}/*")))
        }
        Ask::McpTool { server, tool, .. } => Some((RuleKind::McpTool, format!("{server}/{tool}"))),
        Ask::Other { .. } => Some((RuleKind::Any, globset::escape(&ask.summary()))),
    }
}

fn is_subcommand(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
        && !word.starts_with('-')
}

fn invalid(message: String) -> DroverError {
    DroverError::new(ErrorCode::RuleInvalid, message)
}

/// `RULE_NOT_FOUND` for rule `id`.
pub fn not_found(id: u64) -> DroverError {
    DroverError::new(
        ErrorCode::RuleNotFound,
        format!("there is no rule {id}; list the rules with `drover rules`"),
    )
}

#[cfg(test)]
mod tests;
