//! Rule patterns: over a command's words (`cargo test *`, `git status`), over a path
//! inside the workspace (`src/**`, `**/*.rs`), over a url, an MCP tool's `server/tool`, or
//! an ask's one-line summary. Globs are `globset`'s; words are split by `shell-words`.
//!
//! What must stay true: pure; a pattern that does not parse is refused when it is made
//! (never at match time); a lone `*` as the last word of a command pattern matches any
//! words after (none included), every other word matches exactly one word.

use globset::{Glob, GlobBuilder, GlobMatcher};

use super::MAX_PATTERN_CHARS;

/// A pattern over a command's words.
#[derive(Debug, Clone)]
pub struct CommandPattern {
    text: String,
    words: Vec<Word>,
    /// Ends in a lone `*`: any words may follow.
    rest: bool,
}

#[derive(Debug, Clone)]
enum Word {
    Literal(String),
    Glob(GlobMatcher),
}

impl CommandPattern {
    /// Parses `text`; the error says what is wrong with it, in words.
    pub fn parse(text: &str) -> Result<CommandPattern, String> {
        check_text(text)?;
        let mut words = shell_words::split(text)
            .map_err(|_| "the pattern has an unclosed quote".to_string())?;
        if words.is_empty() {
            return Err("the pattern is empty".into());
        }
        let rest = words.last().is_some_and(|w| w == "*");
        if rest {
            words.pop();
        }
        if words.is_empty() && rest {
            // `*` alone: every command.
            return Ok(CommandPattern {
                text: text.trim().to_string(),
                words: Vec::new(),
                rest,
            });
        }
        let words = words
            .into_iter()
            .map(|w| {
                if w.contains(['*', '?', '[']) {
                    Glob::new(&w)
                        .map(|g| Word::Glob(g.compile_matcher()))
                        .map_err(|e| format!("`{w}` is not a valid glob: {}", e.kind()))
                } else {
                    Ok(Word::Literal(w))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CommandPattern {
            text: text.trim().to_string(),
            words,
            rest,
        })
    }

    /// The pattern as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether one simple command's words match (the program by its name, so
    /// `/usr/bin/git` matches `git`).
    pub fn matches(&self, command: &[String]) -> bool {
        if command.len() < self.words.len() || (!self.rest && command.len() != self.words.len()) {
            return false;
        }
        self.words
            .iter()
            .zip(command)
            .enumerate()
            .all(|(i, (p, w))| {
                let w = if i == 0 && !matches!(p, Word::Literal(l) if l.contains('/')) {
                    crate::guard::shell::basename(w)
                } else {
                    w.as_str()
                };
                match p {
                    Word::Literal(l) => l == w,
                    Word::Glob(g) => g.is_match(w),
                }
            })
    }
}

/// A glob over paths (relative to the workspace) or over text: `*` stays inside one
/// path segment for paths, crosses anything for text.
#[derive(Debug, Clone)]
pub struct TextPattern {
    matcher: GlobMatcher,
}

impl TextPattern {
    /// A path pattern: relative to the workspace, no `..`, `*` within one segment; the
    /// error says what is wrong, in words.
    pub fn path(text: &str) -> Result<TextPattern, String> {
        check_text(text)?;
        if text.starts_with('/') || text.split('/').any(|p| p == "..") {
            return Err(
                "a file-edit pattern is a path inside the workspace (like `src/**`), not \
                 an absolute path or one with `..`"
                    .into(),
            );
        }
        Self::build(text, true)
    }

    /// A text pattern, where `*` crosses anything; the error says what is wrong, in
    /// words.
    pub fn text(text: &str) -> Result<TextPattern, String> {
        check_text(text)?;
        Self::build(text, false)
    }

    fn build(text: &str, literal_separator: bool) -> Result<TextPattern, String> {
        GlobBuilder::new(text.trim())
            .literal_separator(literal_separator)
            .build()
            .map(|g| TextPattern {
                matcher: g.compile_matcher(),
            })
            .map_err(|e| format!("`{text}` is not a valid glob: {}", e.kind()))
    }

    /// Whether `text` matches the pattern.
    pub fn matches(&self, text: &str) -> bool {
        self.matcher.is_match(text)
    }
}

fn check_text(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("the pattern is empty".into());
    }
    if text.chars().count() > MAX_PATTERN_CHARS {
        return Err(format!(
            "the pattern is longer than {MAX_PATTERN_CHARS} characters"
        ));
    }
    if text.chars().any(char::is_control) {
        return Err("the pattern holds a control character (a newline, a tab)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        shell_words::split(text).unwrap()
    }

    #[test]
    fn command_patterns_match_words() {
        let table = [
            ("cargo test *", "cargo test", true),
            ("cargo test *", "cargo test --lib foo", true),
            ("cargo test *", "cargo build", false),
            ("cargo test *", "cargo", false),
            ("git status", "git status", true),
            ("git status", "git status -s", false),
            ("git status", "/usr/bin/git status", true),
            ("git log --oneline *", "git log --oneline -3", true),
            ("npm run test*", "npm run test:unit", true),
            ("npm run test*", "npm run build", false),
            ("*", "rm -rf /", true),
            ("ls 'my dir'", "ls 'my dir'", true),
            ("ls 'my dir'", "ls my dir", false),
        ];
        for (pattern, command, expected) in table {
            let p = CommandPattern::parse(pattern).unwrap();
            assert_eq!(
                p.matches(&words(command)),
                expected,
                "{pattern} ~ {command}"
            );
        }
    }

    #[test]
    fn bad_patterns_say_why() {
        let long = "x".repeat(MAX_PATTERN_CHARS + 1);
        let command_cases: [(&str, &str); 6] = [
            ("", "the pattern is empty"),
            ("   ", "the pattern is empty"),
            ("ls 'open", "the pattern has an unclosed quote"),
            ("a\nb", "the pattern holds a control character"),
            ("ls [", "`[` is not a valid glob"),
            (&long, "the pattern is longer than"),
        ];
        for (bad, why) in command_cases {
            let refusal = CommandPattern::parse(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad:?} was taken"));
            assert!(refusal.contains(why), "{bad:?}: {refusal}");
        }
        let path_cases = [
            ("/etc/*", "not an absolute path or one with `..`"),
            ("../x", "not an absolute path or one with `..`"),
            ("src/[", "`src/[` is not a valid glob"),
        ];
        for (bad, why) in path_cases {
            let refusal = TextPattern::path(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad:?} was taken"));
            assert!(refusal.contains(why), "{bad:?}: {refusal}");
        }
    }

    #[test]
    fn path_and_text_patterns() {
        let p = TextPattern::path("src/**").unwrap();
        assert!(p.matches("src/a/b.rs"));
        assert!(!p.matches("tests/a.rs"));
        let p = TextPattern::path("*.md").unwrap();
        assert!(p.matches("README.md"));
        assert!(!p.matches("docs/a.md"));
        let p = TextPattern::text("https://docs.rs/*").unwrap();
        assert!(p.matches("https://docs.rs/serde/latest"));
        assert!(!p.matches("https://evil.example/docs.rs/"));
    }
}
