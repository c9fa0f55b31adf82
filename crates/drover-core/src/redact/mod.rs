//! The one redactor: every secret drover could store or show is replaced by
//! `[redacted]` here, and nowhere else.
//!
//! What it finds: the rules of gitleaks' default config, vendored as data
//! (`assets/redact/gitleaks-rules.toml`, derived by `scripts/redact-rules.py`, its source
//! and commit noted in the file, and turned into Rust data by `build.rs`), drover's own few
//! rules (`key=value` pairs, passwords in URLs, bearer tokens, well-known key prefixes),
//! and the literal values of environment variables named in config (`[redact] env`, plus
//! every key of a `[providers.*.env]` table), which a [`Redactor`] is built with.
//!
//! Where it applies (each a boundary, so nothing stored or shown escapes it): the
//! dispatcher core's inputs (the spec, follow-up previews, every provider event's text,
//! answers) and every ledger write it hands the writer — pure: a [`Redactor`] is a value
//! the core holds —, the control socket's answers, the live-state detail, and the log file.
//! The ledger writer stores what the core gives it; the headless CLI and the dashboard
//! show what the owner stored, so they redact what they print with the configured values
//! only ([`Redactor::values_only`]). What is sent to a provider is never changed.
//!
//! How it stays cheap (docs/ARCHITECTURE.md §"Secrets"): one Aho-Corasick pass over the
//! text finds the rules' keywords; only a rule whose keyword is there runs, and a rule's
//! regex is compiled the first time it is needed, so a process that never meets a
//! keyword compiles none.
//!
//! What must stay true: redacting is idempotent (a second pass changes nothing: the marker
//! matches no rule); a JSON document stays valid JSON ([`Redactor::redact_json_text`]
//! works on its values); it never panics and its output is never longer than the input
//! plus one marker per match; each rule compiles at most once per process.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::{Arc, LazyLock, OnceLock, RwLock};

/// What replaces a secret.
pub const MARK: &str = "[redacted]";

/// Passes after the first (each only runs when the one before changed something).
const MAX_PASSES: usize = 4;

/// A literal value shorter than this is not redacted (it would hit ordinary words).
pub const MIN_VALUE_CHARS: usize = 8;

/// What an allowlist looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

/// An allowlist as the rule file gives it (stopwords lower-case).
struct AllowSource {
    target: Target,
    regexes: &'static [&'static str],
    stopwords: &'static [&'static str],
}

/// A vendored rule as the rule file gives it (keywords lower-case).
struct RuleSource {
    id: &'static str,
    regex: &'static str,
    group: usize,
    entropy: Option<f64>,
    keywords: &'static [&'static str],
    allow: &'static [AllowSource],
}

// `VENDORED_ALLOW` and `VENDORED_RULES`, written by build.rs from the vendored file.
include!(concat!(env!("OUT_DIR"), "/gitleaks_rules.rs"));

struct Allow {
    target: Target,
    regexes: Vec<Regex>,
    /// Lower-case; a secret holding one is allowed.
    stopwords: &'static [&'static str],
}

impl Allow {
    fn compile(source: &AllowSource) -> Allow {
        Allow {
            target: source.target,
            regexes: source.regexes.iter().filter_map(|r| compile(r)).collect(),
            stopwords: source.stopwords,
        }
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
        self.stopwords.iter().any(|w| lower.contains(w))
    }
}

/// A rule's regex and allowlists, compiled the first time a keyword wakes it.
struct Compiled {
    regex: Regex,
    allow: Vec<Allow>,
}

struct Rule {
    id: &'static str,
    pattern: &'static str,
    /// 0: the first non-empty capture group, else the whole match.
    group: usize,
    entropy: Option<f64>,
    allow: &'static [AllowSource],
    /// From gitleaks' file (its global allowlist applies).
    vendored: bool,
    /// `None` inside when the pattern does not compile (a test holds that at none).
    compiled: OnceLock<Option<Compiled>>,
}

impl Rule {
    fn compiled(&self) -> Option<&Compiled> {
        self.compiled
            .get_or_init(|| {
                Some(Compiled {
                    regex: compile(self.pattern)?,
                    allow: self.allow.iter().map(Allow::compile).collect(),
                })
            })
            .as_ref()
    }
}

struct RuleSet {
    rules: Vec<Rule>,
    /// Every rule's keywords, ASCII case-insensitive; a rule runs only when one is found.
    keywords: AhoCorasick,
    /// For each keyword pattern, the rules it wakes.
    keyword_rules: Vec<Vec<usize>>,
    /// Rules without keywords: they always run.
    always: Vec<usize>,
    /// gitleaks' global allowlist, compiled when a vendored rule first matches.
    global: OnceLock<Allow>,
}

impl RuleSet {
    fn global(&self) -> &Allow {
        self.global.get_or_init(|| Allow::compile(&VENDORED_ALLOW))
    }
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

/// The rules in force, built on first use: their keywords' automaton and, for each rule,
/// its pattern (compiled when first woken).
static RULES: LazyLock<RuleSet> = LazyLock::new(build_rules);

fn build_rules() -> RuleSet {
    let mut rules = Vec::with_capacity(OWN_RULES.len() + VENDORED_RULES.len());
    let mut keywords: Vec<&'static str> = Vec::new();
    let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
    let mut always = Vec::new();
    let mut add = |rule: Rule, words: &'static [&'static str], rules: &mut Vec<Rule>| {
        let index = rules.len();
        rules.push(rule);
        if words.is_empty() {
            always.push(index);
        }
        for &word in words {
            // Matched ASCII case-insensitively: equal ignoring ASCII case is one keyword.
            match keywords.iter().position(|k| k.eq_ignore_ascii_case(word)) {
                Some(at) => keyword_rules[at].push(index),
                None => {
                    keywords.push(word);
                    keyword_rules.push(vec![index]);
                }
            }
        }
    };
    for &(id, pattern, words) in OWN_RULES {
        let rule = Rule {
            id,
            pattern,
            group: 0,
            entropy: None,
            allow: &[],
            vendored: false,
            compiled: OnceLock::new(),
        };
        add(rule, words, &mut rules);
    }
    for source in VENDORED_RULES {
        let rule = Rule {
            id: source.id,
            pattern: source.regex,
            group: source.group,
            entropy: source.entropy,
            allow: source.allow,
            vendored: true,
            compiled: OnceLock::new(),
        };
        add(rule, source.keywords, &mut rules);
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
        global: OnceLock::new(),
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

#[cfg(test)]
thread_local! {
    /// Texts this thread has redacted or looked over for secrets ([`Redactor::redact`],
    /// [`Redactor::may_match`]): the tests count passes with it.
    static SCANS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many texts this thread has redacted or looked over so far.
#[cfg(test)]
pub(crate) fn scans() -> u64 {
    SCANS.with(|s| s.get())
}

/// Redacts secrets; cheap to clone (the rules are shared by the process).
#[derive(Clone)]
pub struct Redactor {
    values: Option<Arc<AhoCorasick>>,
    /// Whether the rules apply (a printer of what the owner stored uses the values alone).
    rules: bool,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::rules_only()
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values themselves.
        f.debug_struct("Redactor")
            .field(
                "values",
                &self.values.as_ref().map_or(0, |v| v.patterns_len()),
            )
            .field("rules", &self.rules)
            .finish()
    }
}

impl PartialEq for Redactor {
    fn eq(&self, other: &Self) -> bool {
        self.rules == other.rules
            && match (&self.values, &other.values) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Redactor {
    /// The rules alone, no literal values.
    pub fn rules_only() -> Redactor {
        Redactor {
            values: None,
            rules: true,
        }
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
            rules: true,
        }
    }

    /// This redactor's literal values without the rules: for what shows text the owner
    /// already redacted (the headless CLI, the dashboard), which only has its own
    /// configured values to hide. Builds no rule.
    pub fn values_only(&self) -> Redactor {
        Redactor {
            values: self.values.clone(),
            rules: false,
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
        #[cfg(test)]
        SCANS.with(|s| s.set(s.get() + 1));
        if self.values.as_ref().is_some_and(|v| v.is_match(text)) {
            return true;
        }
        if !self.rules {
            return false;
        }
        let set = &*RULES;
        !set.always.is_empty() || set.keywords.is_match(text)
    }

    /// The byte ranges of every secret in `text`, sorted and merged (no allocation when
    /// there is none and no keyword is in `text`).
    fn find(&self, text: &str) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        if let Some(values) = &self.values {
            for m in values.find_iter(text) {
                found.push((m.start(), m.end()));
            }
        }
        if self.rules {
            self.find_rules(text, &mut found);
        }
        if found.len() < 2 {
            return found;
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

    /// Adds the secrets the rules find in `text` to `found`: one pass for the keywords,
    /// then each woken rule.
    fn find_rules(&self, text: &str, found: &mut Vec<(usize, usize)>) {
        let set = &*RULES;
        let mut woken: Vec<usize> = set.always.clone();
        for m in set.keywords.find_overlapping_iter(text) {
            woken.extend_from_slice(&set.keyword_rules[m.pattern().as_usize()]);
        }
        if woken.is_empty() {
            return;
        }
        woken.sort_unstable();
        woken.dedup();
        for rule in woken.into_iter().filter_map(|i| set.rules.get(i)) {
            let Some(compiled) = rule.compiled() else {
                continue;
            };
            for caps in compiled.regex.captures_iter(text.as_bytes()) {
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
                if (rule.vendored && set.global().allows(value, whole_text, line))
                    || compiled
                        .allow
                        .iter()
                        .any(|a| a.allows(value, whole_text, line))
                {
                    continue;
                }
                found.push((from, to));
            }
        }
    }

    /// `text` with every secret replaced by [`MARK`] (borrowed when there is none).
    /// Repeated until nothing changes (a marker can make a word boundary a rule needs),
    /// so a second call changes nothing.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        #[cfg(test)]
        SCANS.with(|s| s.set(s.get() + 1));
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

    /// Redacts `s` in place; whether it changed.
    pub fn redact_string(&self, s: &mut String) -> bool {
        match self.redact(s) {
            Cow::Owned(clean) => {
                *s = clean;
                true
            }
            Cow::Borrowed(_) => false,
        }
    }

    /// Redacts `s` in place when there is one.
    pub fn redact_opt(&self, s: &mut Option<String>) -> bool {
        s.as_mut().is_some_and(|s| self.redact_string(s))
    }

    /// Redacts every string (and object key) inside `value`, in place; whether anything
    /// changed.
    pub fn redact_json(&self, value: &mut Value) -> bool {
        match value {
            Value::String(s) => self.redact_string(s),
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| self.redact_json(v) | changed),
            Value::Object(map) => {
                let mut changed = false;
                let mut renamed: Vec<(String, String)> = Vec::new();
                for (key, v) in map.iter_mut() {
                    changed |= self.redact_json(v);
                    if let Cow::Owned(clean) = self.redact(key) {
                        renamed.push((key.clone(), clean));
                    }
                }
                for (key, clean) in renamed {
                    if let Some(v) = map.remove(&key) {
                        map.insert(clean, v);
                        changed = true;
                    }
                }
                changed
            }
            _ => false,
        }
    }

    /// A JSON document redacted value by value (it stays valid JSON); text that is not
    /// JSON is redacted as text. Parsed only when a keyword or a value is in it.
    pub fn redact_json_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.may_match(text) {
            return Cow::Borrowed(text);
        }
        match serde_json::from_str::<Value>(text) {
            Ok(mut value) => {
                if !self.redact_json(&mut value) {
                    return Cow::Borrowed(text);
                }
                match serde_json::to_string(&value) {
                    Ok(clean) => Cow::Owned(clean),
                    Err(_) => self.redact(text),
                }
            }
            Err(_) => self.redact(text),
        }
    }

    /// A value of a serde type with every string inside it redacted (the value itself
    /// when nothing needed it, or when it does not go through JSON and back). For a type
    /// on a hot path, redact its text fields in place instead (as
    /// [`crate::providers::ProviderEvent::redact`] does).
    pub fn redact_serde<T: serde::Serialize + serde::de::DeserializeOwned>(&self, item: T) -> T {
        let Ok(mut value) = serde_json::to_value(&item) else {
            return item;
        };
        if !self.redact_json(&mut value) {
            return item;
        }
        serde_json::from_value(value).unwrap_or(item)
    }
}

/// The process's redactor for what is not the core's to redact (the log file, the
/// headless CLI's output, the live-state detail): the rules, plus the values installed by
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
    RULES.rules.iter().map(|r| r.id).collect()
}

/// How many vendored rules fail to compile (0; a test holds it there). Compiles every
/// one.
pub fn vendored_rules_dropped() -> usize {
    VENDORED_RULES
        .iter()
        .filter(|r| compile(r.regex).is_none())
        .count()
}

#[cfg(test)]
mod tests;
