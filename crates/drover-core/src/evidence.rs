//! Evidence (docs/ARCHITECTURE.md §"Evidence"): the commands a run executed, with their
//! exit codes as its CLI reported them, the tests among them (by the `[evidence] tests`
//! table of command patterns) and how they ended, and the one line that says so.
//!
//! What must stay true: pure (the commands come from the provider events the dispatcher
//! saw; nothing is run or read here); a test's outcome is its exit code — 0 passed, any
//! other failed, none reported unknown — and the last run of a test is its outcome; the
//! line is made here once, so the dashboard, `drover show` and `--json` say the same.

use serde::{Deserialize, Serialize};

use crate::guard::shell;
use crate::rules::pattern::CommandPattern;

/// The longest command line kept, in characters.
pub const COMMAND_MAX_CHARS: usize = 300;
/// The most commands kept per turn (the count goes on past it).
pub const COMMANDS_PER_TURN_MAX: usize = 200;

/// How the line starts.
const LINE_LABEL: &str = "evidence: ";

/// One command a run executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRun {
    /// The command line, redacted, on one line, at most [`COMMAND_MAX_CHARS`].
    pub command: String,
    /// Its exit code, when the CLI reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The tests it ran, by the config's table (`cargo test`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
}

/// One row of `[evidence] tests`: a command pattern (as in approval rules: `cargo test *`)
/// and the name its runs are shown by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestPattern {
    /// The pattern over a simple command's words; a last `*` matches any words after.
    pub pattern: String,
    /// The name shown (default: the pattern without its last `*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl TestPattern {
    /// The name its runs are shown by.
    pub fn shown_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            self.pattern
                .trim()
                .trim_end_matches('*')
                .trim_end()
                .to_string()
        })
    }
}

/// The table of test commands, compiled.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    patterns: Vec<(CommandPattern, String)>,
}

impl Classifier {
    /// Compiles `table`; a row whose pattern does not parse is left out (config refuses
    /// it before it gets here).
    pub fn new(table: &[TestPattern]) -> Classifier {
        Classifier {
            patterns: table
                .iter()
                .filter_map(|row| {
                    Some((CommandPattern::parse(&row.pattern).ok()?, row.shown_name()))
                })
                .collect(),
        }
    }

    /// The test a command line runs: the first row matching one of its simple commands
    /// (wrappers such as `sudo`, `env`, `sh -c` looked through). None for a command line
    /// that runs no test, or that cannot be read.
    pub fn test_of(&self, command: &str) -> Option<String> {
        let simple = shell::simple_commands(command).ok()?;
        simple.iter().find_map(|s| {
            self.patterns
                .iter()
                .find(|(pattern, _)| pattern.matches(&s.words))
                .map(|(_, name)| name.clone())
        })
    }
}

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestOutcome {
    /// Exit code 0.
    Passed,
    /// Any other exit code.
    Failed,
    /// The CLI reported no exit code.
    Unknown,
}

impl TestOutcome {
    fn of(exit_code: Option<i32>) -> TestOutcome {
        match exit_code {
            Some(0) => TestOutcome::Passed,
            Some(_) => TestOutcome::Failed,
            None => TestOutcome::Unknown,
        }
    }

    /// The outcome in a word.
    pub fn word(self) -> &'static str {
        match self {
            TestOutcome::Passed => "passed",
            TestOutcome::Failed => "failed",
            TestOutcome::Unknown => "exit unknown",
        }
    }
}

/// One test a run ran: its name, how its last run ended, how many times it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestRun {
    /// Its name in the config's table.
    pub name: String,
    /// How its last run ended.
    pub outcome: TestOutcome,
    /// How many times it ran.
    pub runs: u32,
}

/// What a run's commands show: how many ran, how many failed, the tests among them, and
/// the line that says so (`warn`: a `done` with no test run, or a test that failed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Commands executed.
    pub commands: u32,
    /// Of them, those that exited with a code other than 0.
    pub failed_commands: u32,
    /// The tests run, in the order they first ran.
    pub tests: Vec<TestRun>,
    /// The line the detail pane and `drover show` print.
    pub line: String,
    /// Shown in amber: the result says done but no test ran, or a test's last run failed.
    pub warn: bool,
}

impl Evidence {
    /// The evidence of `commands` (oldest first), for a run whose latest result says
    /// `done` when `done` is true.
    pub fn of<'a>(commands: impl IntoIterator<Item = &'a CommandRun>, done: bool) -> Evidence {
        let mut count = 0u32;
        let mut failed_commands = 0u32;
        let mut tests: Vec<TestRun> = Vec::new();
        for command in commands {
            count += 1;
            if command.exit_code.is_some_and(|c| c != 0) {
                failed_commands += 1;
            }
            let Some(name) = &command.test else {
                continue;
            };
            let outcome = TestOutcome::of(command.exit_code);
            match tests.iter_mut().find(|t| &t.name == name) {
                Some(test) => {
                    test.outcome = outcome;
                    test.runs += 1;
                }
                None => tests.push(TestRun {
                    name: name.clone(),
                    outcome,
                    runs: 1,
                }),
            }
        }
        let commands_words = match count {
            0 => "no command ran".to_string(),
            1 => "1 command".to_string(),
            n => format!("{n} commands"),
        };
        let failing = tests.iter().any(|t| t.outcome == TestOutcome::Failed);
        let (tail, warn) = if tests.is_empty() {
            if done {
                ("done, but no test ran".to_string(), true)
            } else {
                ("no test ran".to_string(), false)
            }
        } else {
            let list: Vec<String> = tests
                .iter()
                .map(|t| format!("{} ({})", t.name, t.outcome.word()))
                .collect();
            (format!("tests ran: {}", list.join(", ")), failing)
        };
        Evidence {
            commands: count,
            failed_commands,
            line: format!("{LINE_LABEL}{commands_words} · {tail}"),
            warn,
            tests,
        }
    }

    /// The line without its `evidence: ` label (for a table whose key says it).
    pub fn words(&self) -> &str {
        self.line.strip_prefix(LINE_LABEL).unwrap_or(&self.line)
    }

    /// Whether a test's last run failed.
    pub fn tests_failed(&self) -> bool {
        self.tests.iter().any(|t| t.outcome == TestOutcome::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Classifier {
        let config = crate::config::Config::parse("", std::path::Path::new("config.toml"))
            .expect("the embedded defaults");
        Classifier::new(&config.evidence.tests)
    }

    #[test]
    fn the_default_table_names_the_tests_a_command_line_runs() {
        let c = defaults();
        let table: &[(&str, Option<&str>)] = &[
            ("cargo test", Some("cargo test")),
            ("cargo test -p drover-core --lib", Some("cargo test")),
            (
                "cd crates/x && cargo test 2>&1 | tail -20",
                Some("cargo test"),
            ),
            ("RUST_LOG=debug cargo test", Some("cargo test")),
            ("sudo -u ci cargo test", Some("cargo test")),
            ("sh -c 'cargo nextest run'", Some("cargo nextest")),
            ("/home/me/.cargo/bin/cargo test", Some("cargo test")),
            ("npm test", Some("npm test")),
            ("npm run test -- --watch=false", Some("npm test")),
            ("pnpm test", Some("pnpm test")),
            ("yarn test", Some("yarn test")),
            ("pytest -q tests/", Some("pytest")),
            ("python -m pytest", Some("pytest")),
            ("python3 -m pytest -x", Some("pytest")),
            ("go test ./...", Some("go test")),
            ("npx jest --ci", Some("jest")),
            ("jest", Some("jest")),
            ("npx vitest run", Some("vitest")),
            ("mvn test", Some("mvn test")),
            ("gradle test", Some("gradle test")),
            ("./gradlew test", Some("gradle test")),
            // Not tests.
            ("cargo build", None),
            ("cargo testx", None),
            ("echo cargo test", None),
            ("grep -r 'go test' .", None),
            ("npm install", None),
            ("git commit -m 'cargo test passes'", None),
            ("ls", None),
            // A line that cannot be read is not guessed at.
            ("cargo test 'unclosed", None),
        ];
        for (command, expected) in table {
            assert_eq!(c.test_of(command).as_deref(), *expected, "{command}");
        }
    }

    fn ran(command: &str, exit_code: Option<i32>, test: Option<&str>) -> CommandRun {
        CommandRun {
            command: command.into(),
            exit_code,
            test: test.map(str::to_string),
        }
    }

    #[test]
    fn the_line_counts_commands_and_names_each_test_by_its_last_run() {
        let commands = [
            ran("ls", Some(0), None),
            ran("cargo test", Some(101), Some("cargo test")),
            ran("cargo test", Some(0), Some("cargo test")),
        ];
        let e = Evidence::of(&commands, true);
        assert_eq!(
            e.line,
            "evidence: 3 commands · tests ran: cargo test (passed)"
        );
        assert!(!e.warn);
        assert_eq!(e.failed_commands, 1);
        assert_eq!(e.tests[0].runs, 2);

        let e = Evidence::of(&commands[..2], true);
        assert_eq!(
            e.line,
            "evidence: 2 commands · tests ran: cargo test (failed)"
        );
        assert!(e.warn && e.tests_failed());

        let e = Evidence::of(&commands[..1], true);
        assert_eq!(e.line, "evidence: 1 command · done, but no test ran");
        assert!(e.warn);
        let e = Evidence::of(&commands[..1], false);
        assert_eq!(e.line, "evidence: 1 command · no test ran");
        assert!(!e.warn);
        let e = Evidence::of(&[], true);
        assert_eq!(e.line, "evidence: no command ran · done, but no test ran");

        let e = Evidence::of(
            &[
                ran("pytest", None, Some("pytest")),
                ran("go test ./...", Some(1), Some("go test")),
            ],
            true,
        );
        assert_eq!(
            e.line,
            "evidence: 2 commands · tests ran: pytest (exit unknown), go test (failed)"
        );
    }
}
