//! The one redactor: every secret drover could store or show is replaced by
//! `[redacted]` here, and nowhere else.
//!
//! What it finds: the rules of gitleaks' default config, vendored as data
//! (`assets/redact/gitleaks-rules.toml`, derived by `scripts/redact-rules.py`, its source
//! and commit noted in the file), drover's own few rules (`key=value` pairs, passwords in
//! URLs, bearer tokens, well-known key prefixes), and the literal values of environment
//! variables named in config (`[redact] env`, plus every key of a `[providers.*.env]`
//! table), which a [`Redactor`] is built with.
//!
//! Where it applies (each a boundary, so nothing stored or shown escapes it): the
//! dispatcher core's inputs (the spec, follow-up previews, every provider event, answers)
//! — pure: a [`Redactor`] is a value the core holds —, the ledger writer (every text it
//! stores), the control socket's answers, the headless CLI's output, the live-state
//! detail, and the log file. What is sent to a provider is never changed.
//!
//! What must stay true: redacting is idempotent (a second pass changes nothing: the marker
//! matches no rule); a JSON document stays valid JSON ([`Redactor::redact_json_text`]
//! works on its values); it never panics and its output is never longer than the input
//! plus one marker per match; rules compile once per process.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::{Arc, LazyLock, RwLock};

/// What replaces a secret.
pub const MARK: &str = "[redacted]";

/// Passes after the first (each only runs when the one before changed something).
const MAX_PASSES: usize = 4;

/// A literal value shorter than this is not redacted (it would hit ordinary words).
pub const MIN_VALUE_CHARS: usize = 8;

/// The vendored gitleaks rules.
const GITLEAKS_RULES: &str = include_str!("../../../../assets/redact/gitleaks-rules.toml");

#[derive(Deserialize)]
struct RulesFile {
    allowlist: AllowFile,
    rules: Vec<RuleFile>,
}

#[derive(Deserialize, Default)]
struct AllowFile {
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
}

#[derive(Deserialize)]
struct RuleFile {
    id: String,
    regex: String,
    #[serde(default)]
    secret_group: usize,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlists: Vec<AllowFile>,
}

/// What an allowlist looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

struct Allow {
    target: Target,
    regexes: Vec<Regex>,
    /// Lower-case; a secret holding one is allowed.
    stopwords: Vec<String>,
}

impl Allow {
    fn compile(file: AllowFile) -> Option<Allow> {
        let target = match file.target.as_deref() {
            None | Some("secret") => Target::Secret,
            Some("match") => Target::Match,
            Some("line") => Target::Line,
            Some(_) => return None,
        };
        Some(Allow {
            target,
            regexes: file.regexes.iter().filter_map(|r| compile(r)).collect(),
            stopwords: file.stopwords.iter().map(|s| s.to_lowercase()).collect(),
        })
    }

    fn allows(&self, secret: &str, whole: &str, line: &str) -> bool {
        let subject = match self.target {
            Target::Secret => secret,
            Target::Match => whole,
            Target::Line => line,
        };
        if self.regexes.iter().any(|r| r.is_match(subject.as_bytes())) {
            return true;
        }
        if self.stopwords.is_empty() {
            return false;
        }
        let lower = secret.to_lowercase();
        self.stopwords.iter().any(|w| lower.contains(w.as_str()))
    }
}

struct Rule {
    id: String,
    regex: Regex,
    /// 0: the first non-empty capture group, else the whole match.
    group: usize,
    entropy: Option<f64>,
    allow: Vec<Allow>,
    /// From gitleaks' file (its global allowlist applies).
    vendored: bool,
}

struct RuleSet {
    rules: Vec<Rule>,
    /// Every rule's keywords, ASCII case-insensitive; a rule runs only when one is found.
    keywords: AhoCorasick,
    /// For each keyword pattern, the rules it wakes.
    keyword_rules: Vec<Vec<usize>>,
    /// Rules without keywords: they always run.
    always: Vec<usize>,
    global: Allow,
}

/// Compiles a rule as Go's RE2 (gitleaks' engine) reads it: `\w`, `\s`, `\b` and classes
/// are ASCII. (Unicode classes would also cost seconds to compile.) A pattern that needs
/// Unicode gets it.
fn compile(pattern: &str) -> Option<Regex> {
    let build = |unicode: bool| {
        RegexBuilder::new(pattern)
            .unicode(unicode)
            .size_limit(64 * 1024 * 1024)
            .dfa_size_limit(16 * 1024 * 1024)
            .build()
    };
    build(false).or_else(|_| build(true)).ok()
}

/// `start..end` widened to character boundaries of `text`.
fn on_chars(text: &str, mut start: usize, mut end: usize) -> (usize, usize) {
    while start > 0 && !text.is_char_boundary(start) {
        start -= 1;
    }
    while end < text.len() && !text.is_char_boundary(end) {
        end += 1;
    }
    (start, end)
}

/// drover's own rules: `(id, regex, keywords)`. Each secret is a capture group, so the
/// key it follows stays readable, and no group can hold a quote or a backslash, so text
/// that is JSON stays JSON.
const OWN_RULES: &[(&str, &str, &[&str])] = &[
    (
        "key-value",
        concat!(
            r#"(?i)[a-z0-9_.-]*?(?:api[_-]?key|access[_-]?key|private[_-]?key"#,
            r#"|secret(?:[_-]?key)?|token|password|passwd|pwd|authorization|credentials?)"#,
            r#"["']?\s*[:=]\s*"#,
            r#"(?:"([^"\\\n]*)"|'([^'\\\n]*)'|((?:(?:bearer|basic|token)\s+)?[^\s,;&'"\\…\[\]]+))"#,
        ),
        &[
            "key",
            "secret",
            "token",
            "pass",
            "pwd",
            "authorization",
            "credential",
        ],
    ),
    (
        "url-credentials",
        r#"(?i)[a-z][a-z0-9+.-]*://([^/\s:@"\\\[\]]*:[^/\s@"\\\[\]]+)@"#,
        &["://"],
    ),
    (
        "bearer",
        r"(?i)bearer\s+([A-Za-z0-9._~+/-]{8,}=*)",
        &["bearer"],
    ),
    (
        "anthropic-prefix",
        r"sk-ant-[A-Za-z0-9_-]{16,}",
        &["sk-ant-"],
    ),
    (
        "github-prefix",
        r"(?:gh[pousr]_[A-Za-z0-9_]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    ),
    ("slack-prefix", r"xox[abprs]-[A-Za-z0-9-]{10,}", &["xox"]),
    (
        "aws-prefix",
        r"(?:AKIA|ASIA)[0-9A-Z]{16}",
        &["akia", "asia"],
    ),
    ("openai-prefix", r"\bsk-[A-Za-z0-9_-]{16,}", &["sk-"]),
];

static RULES: LazyLock<RuleSet> = LazyLock::new(build_rules);

fn build_rules() -> RuleSet {
    let mut rules = Vec::new();
    let mut keywords: Vec<String> = Vec::new();
    let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
    let mut always = Vec::new();
    let mut add = |rule: Rule, words: Vec<String>, rules: &mut Vec<Rule>| {
        let index = rules.len();
        rules.push(rule);
        if words.is_empty() {
            always.push(index);
        }
        for word in words {
            let word = word.to_lowercase();
            match keywords.iter().position(|k| *k == word) {
                Some(at) => keyword_rules[at].push(index),
                None => {
                    keywords.push(word);
                    keyword_rules.push(vec![index]);
                }
            }
        }
    };
    for (id, pattern, words) in OWN_RULES {
        if let Some(regex) = compile(pattern) {
            let rule = Rule {
                id: (*id).to_string(),
                regex,
                group: 0,
                entropy: None,
                allow: Vec::new(),
                vendored: false,
            };
            add(
                rule,
                words.iter().map(|w| w.to_string()).collect(),
                &mut rules,
            );
        }
    }
    // The vendored file is checked by a test: every rule in it compiles.
    let file: RulesFile = toml::from_str(GITLEAKS_RULES).unwrap_or(RulesFile {
        allowlist: AllowFile::default(),
        rules: Vec::new(),
    });
    let global = Allow::compile(file.allowlist).unwrap_or(Allow {
        target: Target::Secret,
        regexes: Vec::new(),
        stopwords: Vec::new(),
    });
    for rule in file.rules {
        let Some(regex) = compile(&rule.regex) else {
            continue;
        };
        let compiled = Rule {
            id: rule.id,
            regex,
            group: rule.secret_group,
            entropy: rule.entropy,
            allow: rule
                .allowlists
                .into_iter()
                .filter_map(Allow::compile)
                .collect(),
            vendored: true,
        };
        add(compiled, rule.keywords, &mut rules);
    }
    let keywords = AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .build(&keywords)
        .unwrap_or_else(|_| empty_automaton());
    RuleSet {
        rules,
        keywords,
        keyword_rules,
        always,
        global,
    }
}

fn empty_automaton() -> AhoCorasick {
    AhoCorasick::new(Vec::<&str>::new()).expect("an empty automaton builds")
}

/// Shannon entropy of `s` in bits per byte.
fn entropy(s: &str) -> f64 {
    let mut counts = [0usize; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let len = s.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = *c as f64 / len;
            -p * p.log2()
        })
        .sum()
}

/// The line of `text` around `start..end`.
fn line_around(text: &str, start: usize, end: usize) -> &str {
    let from = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let to = text[end..].find('\n').map_or(text.len(), |i| end + i);
    &text[from..to]
}

/// Redacts secrets; cheap to clone (the rules are shared by the process).
#[derive(Clone, Default)]
pub struct Redactor {
    values: Option<Arc<AhoCorasick>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values themselves.
        f.debug_struct("Redactor")
            .field(
                "values",
                &self.values.as_ref().map_or(0, |v| v.patterns_len()),
            )
            .finish()
    }
}

impl PartialEq for Redactor {
    fn eq(&self, other: &Self) -> bool {
        match (&self.values, &other.values) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Redactor {
    /// The rules alone, no literal values.
    pub fn rules_only() -> Redactor {
        Redactor { values: None }
    }

    /// The rules and these literal values (each at least [`MIN_VALUE_CHARS`] long).
    pub fn with_values(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut values: Vec<String> = values
            .into_iter()
            .map(|v| v.trim().to_string())
            .filter(|v| v.chars().count() >= MIN_VALUE_CHARS && !v.contains(MARK))
            .collect();
        values.sort();
        values.dedup();
        if values.is_empty() {
            return Redactor::rules_only();
        }
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&values)
            .ok();
        Redactor {
            values: automaton.map(Arc::new),
        }
    }

    /// The redactor for `config`: the values of the environment variables it names
    /// (`[redact] env` and each provider's `env` keys), read through `env`, and the values
    /// its provider tables set themselves.
    pub fn from_config(
        config: &crate::config::Config,
        env: impl Fn(&str) -> Option<String>,
    ) -> Redactor {
        let mut names: Vec<&str> = config.redact.env.iter().map(String::as_str).collect();
        let mut values: Vec<String> = Vec::new();
        for provider in config.providers.values() {
            for (name, value) in &provider.env {
                names.push(name);
                values.push(value.clone());
            }
        }
        values.extend(names.into_iter().filter_map(env));
        Redactor::with_values(values)
    }

    /// Whether any rule could match in `text` (a keyword, a value): cheap, so a document
    /// is only parsed when it might hold a secret.
    pub fn may_match(&self, text: &str) -> bool {
        let set = &*RULES;
        !set.always.is_empty()
            || set.keywords.is_match(text)
            || self.values.as_ref().is_some_and(|v| v.is_match(text))
    }

    /// The byte ranges of every secret in `text`, sorted and merged.
    fn find(&self, text: &str) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        if let Some(values) = &self.values {
            for m in values.find_iter(text) {
                found.push((m.start(), m.end()));
            }
        }
        let set = &*RULES;
        let mut wake = vec![false; set.rules.len()];
        for &i in &set.always {
            wake[i] = true;
        }
        for m in set.keywords.find_overlapping_iter(text) {
            for &i in &set.keyword_rules[m.pattern().as_usize()] {
                wake[i] = true;
            }
        }
        for (rule, _) in set.rules.iter().zip(&wake).filter(|(_, w)| **w) {
            for caps in rule.regex.captures_iter(text.as_bytes()) {
                let Some(whole) = caps.get(0) else { continue };
                let secret = if rule.group > 0 {
                    caps.get(rule.group)
                } else if caps.len() > 1 {
                    caps.iter().skip(1).flatten().find(|m| !m.is_empty())
                } else {
                    Some(whole)
                };
                let Some(secret) = secret.filter(|s| !s.is_empty()) else {
                    continue;
                };
                let (from, to) = on_chars(text, secret.start(), secret.end());
                let value = &text[from..to];
                let (whole_from, whole_to) = on_chars(text, whole.start(), whole.end());
                let whole_text = &text[whole_from..whole_to];
                if value.contains(MARK) {
                    continue;
                }
                if let Some(min) = rule.entropy {
                    if entropy(value) <= min {
                        continue;
                    }
                    // As gitleaks does: a generic secret holds a digit.
                    if rule.id.starts_with("generic") && !value.bytes().any(|b| b.is_ascii_digit())
                    {
                        continue;
                    }
                }
                let line = line_around(text, whole_from, whole_to);
                // gitleaks' global allowlist (placeholders, stopwords) is for its rules;
                // drover's own match only distinctive shapes.
                if (rule.vendored && set.global.allows(value, whole_text, line))
                    || rule.allow.iter().any(|a| a.allows(value, whole_text, line))
                {
                    continue;
                }
                found.push((from, to));
            }
        }
        found.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(found.len());
        for (start, end) in found {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        merged
    }

    /// `text` with every secret replaced by [`MARK`] (borrowed when there is none).
    /// Repeated until nothing changes (a marker can make a word boundary a rule needs),
    /// so a second call changes nothing.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(mut out) = self.pass(text) else {
            return Cow::Borrowed(text);
        };
        for _ in 0..MAX_PASSES {
            match self.pass(&out) {
                Some(next) => out = next,
                None => break,
            }
        }
        Cow::Owned(out)
    }

    /// One pass: `None` when `text` holds no secret.
    fn pass(&self, text: &str) -> Option<String> {
        let ranges = self.find(text);
        if ranges.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in ranges {
            out.push_str(&text[at..start]);
            out.push_str(MARK);
            at = end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// Redacts `s` in place.
    pub fn redact_string(&self, s: &mut String) {
        if let Cow::Owned(clean) = self.redact(s) {
            *s = clean;
        }
    }

    /// Redacts every string (and object key) inside `value`.
    pub fn redact_json(&self, value: &mut Value) {
        match value {
            Value::String(s) => self.redact_string(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    let clean = self.redact(&key).into_owned();
                    if let Some(mut v) = map.remove(&key) {
                        self.redact_json(&mut v);
                        map.insert(clean, v);
                    }
                }
            }
            _ => {}
        }
    }

    /// A JSON document redacted value by value (it stays valid JSON); text that is not
    /// JSON is redacted as text.
    pub fn redact_json_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.may_match(text) {
            return Cow::Borrowed(text);
        }
        match serde_json::from_str::<Value>(text) {
            Ok(mut value) => {
                self.redact_json(&mut value);
                match serde_json::to_string(&value) {
                    Ok(clean) if clean != text => Cow::Owned(clean),
                    Ok(_) => Cow::Borrowed(text),
                    Err(_) => self.redact(text),
                }
            }
            Err(_) => self.redact(text),
        }
    }

    /// A value of a serde type with every string inside it redacted (the value itself
    /// when nothing needed it, or when it does not go through JSON and back).
    pub fn redact_serde<T: serde::Serialize + serde::de::DeserializeOwned>(&self, item: T) -> T {
        let Ok(text) = serde_json::to_string(&item) else {
            return item;
        };
        if !self.may_match(&text) {
            return item;
        }
        let Ok(mut value) = serde_json::from_str::<Value>(&text) else {
            return item;
        };
        self.redact_json(&mut value);
        serde_json::from_value(value).unwrap_or(item)
    }
}

/// The process's redactor for what is not the core's to redact (the log file, the
/// headless CLI's output, the ledger writer): the rules, plus the values installed by
/// [`install`] once the config is known.
static GLOBAL: LazyLock<RwLock<Redactor>> = LazyLock::new(|| RwLock::new(Redactor::rules_only()));

/// Makes `redactor` the process's redactor (see [`global`]).
pub fn install(redactor: Redactor) {
    match GLOBAL.write() {
        Ok(mut global) => *global = redactor,
        Err(poisoned) => *poisoned.into_inner() = redactor,
    }
}

/// The process's redactor.
pub fn global() -> Redactor {
    match GLOBAL.read() {
        Ok(global) => global.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// The ids of every rule in force (for `doctor` and the tests).
pub fn rule_ids() -> Vec<&'static str> {
    RULES.rules.iter().map(|r| r.id.as_str()).collect()
}

/// How many vendored rules failed to compile (0; a test holds it there).
pub fn vendored_rules_dropped() -> usize {
    let file: Result<RulesFile, _> = toml::from_str(GITLEAKS_RULES);
    match file {
        Ok(file) => file
            .rules
            .iter()
            .filter(|r| compile(&r.regex).is_none())
            .count(),
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests;
