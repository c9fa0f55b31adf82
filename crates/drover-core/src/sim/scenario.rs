//! Scenario files: what the simulated agent does, turn by turn, step by step.
//!
//! Owns the scenario types, reading them from TOML or JSON text, validating them, the
//! scenarios shipped in `assets/scenarios/`, and the small text templates steps use. What
//! must stay true: everything here is pure (no I/O, no clock; the environment is passed in
//! as a lookup); a scenario that parses is runnable as is (every check the runner would
//! otherwise trip over is made here); a problem is one line that names the turn and step.
//!
//! The format, in TOML (JSON files have the same shape):
//!
//! ```toml
//! description = "One line about what this scenario is for."
//! model = "claude-sonnet-4-5"          # used unless the command line says --model
//! session_cost_per_turn = 0.01          # dollars charged by every turn's result (default 0)
//!
//! [[turns]]                             # turn N answers the Nth user message; later
//! status = "done"                       # messages repeat the last turn. The turn's final
//! summary = "What happened."            # text ends with a `## Result` block built from
//! files = ["src/main.rs"]               # status/summary/changes/files/follow_ups/question
//!                                       # (`result_block = false` leaves it out).
//! [[turns.steps]]
//! text = "I'll look at the code."       # exactly one kind key per step, see below
//! ```
//!
//! Step kinds (the key that names the kind, then the keys it takes):
//! - `text = "…"`, `thinking = "…"`: one assistant message.
//! - `tool = "Bash"`: `input` (table), `duration_ms`, `needs_permission`, `output`,
//!   `is_error`, `withdraw_after_ms`, `on_deny` (what the model says after a denial),
//!   `blocked_path`, `run` (a `Bash` step whose `command` really runs in the agent's
//!   working directory once allowed; its output is the result). An allowed `Write` or
//!   `Edit` step (not `is_error`) really writes its `file_path` inside the working
//!   directory (a path outside it is the tool's error).
//! - `question = "…"`: an `AskUserQuestion` call: `header`, `options` (2 to 4 tables of
//!   `label`, `description`), `multi_select`, `reply` (said after the answer), `on_deny`.
//! - `rate_limit = SECONDS`: `status` (`rejected`, the default, waits that long and then
//!   reports `allowed`; `allowed_warning` only warns).
//! - `api_retry = ATTEMPTS`: `retry_delay_ms`, `error_status`.
//! - `garbage = "raw line"`: written to stdout as is (not JSON, or JSON that is no object).
//! - `sleep_ms = N`.
//! - `crash = EXIT_CODE`: `stderr`. Exits mid-turn without a result.
//! - `hang = true`: `ignore_eof`. Stops writing for good; stdin is still read.
//! - `result = "success" | "error_max_turns" | "error_during_execution" |
//!   "error_max_budget_usd"`: `is_error`, `message`, `api_error_status`,
//!   `terminal_reason`, `exit_code`. Ends the turn with this result.
//!
//! Every step takes `delay_ms` (a pause before it). Message steps (text, thinking, tool,
//! question) take `usage` (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
//! `cache_creation_input_tokens`), `cost_usd` and `model`. Steps that do not end the turn
//! take `repeat = N` and `repeat_env = "VAR"` (the variable, when set, overrides N).
//! Text takes the templates `{i}` (the repetition, from 1), `{answer}` (the last answer to
//! a question), `{prompt}` (the user's message on one line, clipped) and `{now_us}` (the
//! wall clock in Unix microseconds as the line is written: for latency benchmarks).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::money::dollars::is_amount;
use crate::result_contract::ResultStatus;
use crate::text::{clip, one_line};

/// The scenarios that ship with drover, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "quick-success",
        include_str!("../../../../assets/scenarios/quick-success.toml"),
    ),
    (
        "tool-permission",
        include_str!("../../../../assets/scenarios/tool-permission.toml"),
    ),
    (
        "question",
        include_str!("../../../../assets/scenarios/question.toml"),
    ),
    (
        "needs-input",
        include_str!("../../../../assets/scenarios/needs-input.toml"),
    ),
    (
        "blocked",
        include_str!("../../../../assets/scenarios/blocked.toml"),
    ),
    (
        "multi-turn",
        include_str!("../../../../assets/scenarios/multi-turn.toml"),
    ),
    (
        "slow-spender",
        include_str!("../../../../assets/scenarios/slow-spender.toml"),
    ),
    (
        "rate-limited",
        include_str!("../../../../assets/scenarios/rate-limited.toml"),
    ),
    (
        "overloaded",
        include_str!("../../../../assets/scenarios/overloaded.toml"),
    ),
    (
        "api-error",
        include_str!("../../../../assets/scenarios/api-error.toml"),
    ),
    (
        "crash-midturn",
        include_str!("../../../../assets/scenarios/crash-midturn.toml"),
    ),
    (
        "garbage-lines",
        include_str!("../../../../assets/scenarios/garbage-lines.toml"),
    ),
    (
        "hang",
        include_str!("../../../../assets/scenarios/hang.toml"),
    ),
    (
        "no-result-block",
        include_str!("../../../../assets/scenarios/no-result-block.toml"),
    ),
    (
        "flood",
        include_str!("../../../../assets/scenarios/flood.toml"),
    ),
    (
        "worktree-change",
        include_str!("../../../../assets/scenarios/worktree-change.toml"),
    ),
    (
        "tested",
        include_str!("../../../../assets/scenarios/tested.toml"),
    ),
    (
        "tests-fail",
        include_str!("../../../../assets/scenarios/tests-fail.toml"),
    ),
    (
        "wrap-up",
        include_str!("../../../../assets/scenarios/wrap-up.toml"),
    ),
];

/// The TOML text of a shipped scenario.
pub fn builtin(name: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|(builtin, _)| *builtin == name)
        .map(|(_, text)| *text)
}

/// Whether a `--scenario` value names a file rather than a shipped scenario: it has a
/// path separator, or ends in `.toml` or `.json`.
pub fn looks_like_path(name: &str) -> bool {
    name.contains(std::path::MAIN_SEPARATOR) || name.ends_with(".toml") || name.ends_with(".json")
}

/// The names of the shipped scenarios, in the order above.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(name, _)| *name).collect()
}

/// How a scenario's text is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// TOML (`.toml` files and the shipped scenarios).
    Toml,
    /// JSON, in the same shape.
    Json,
}

/// A scenario that cannot be used: where it came from and what is wrong, on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {problem}")]
pub struct ScenarioError {
    /// e.g. "scenario file /tmp/x.toml" or "built-in scenario `hang`".
    pub origin: String,
    /// What is wrong, naming the turn and step.
    pub problem: String,
}

/// A whole scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// One line about what the scenario is for.
    pub description: Option<String>,
    /// The model reported unless the command line names one.
    pub model: String,
    /// Dollars charged to the session's model by every turn's result.
    pub session_cost_per_turn: f64,
    /// Never empty.
    pub turns: Vec<Turn>,
}

/// What the agent does in answer to one user message.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The `## Result` block the turn's final text ends with; `None` leaves it out.
    pub result_block: Option<ResultBlockSpec>,
}

/// The `## Result` block a turn's final text ends with. Text may use the templates.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultBlockSpec {
    /// The `status` line.
    pub status: ResultStatus,
    /// The `summary` line.
    pub summary: String,
    /// The `changes` list.
    pub changes: Vec<String>,
    /// The `files` list.
    pub files: Vec<String>,
    /// The `follow_ups` list.
    pub follow_ups: Vec<String>,
    /// The `question` line (for `needs_input`).
    pub question: Option<String>,
}

/// One step of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// A pause before each repetition of the step.
    pub delay_ms: u64,
    /// How many times the step runs.
    pub repeat: Repeat,
    /// What the step does.
    pub action: Action,
}

/// How many times a step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeat {
    /// How many times; [`Scenario::apply_env`] replaces it with `env`'s value when set.
    pub times: u32,
    /// An environment variable that, when set, gives the count instead.
    pub env: Option<String>,
}

impl Repeat {
    /// One time, with no variable.
    pub fn once() -> Repeat {
        Repeat {
            times: 1,
            env: None,
        }
    }
}

/// Token counts of one assistant message, named as on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_input_tokens: u64,
}

impl Usage {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
    }

    /// The usage of a message whose scenario step gives none: about four characters per
    /// output token, at least one.
    pub fn estimated_for(text: &str) -> Usage {
        let chars = text.chars().count() as u64;
        Usage {
            output_tokens: chars.div_ceil(4).max(1),
            ..Usage::default()
        }
    }
}

/// What an assistant message costs and which model wrote it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageMeta {
    /// `None`: estimated from the message's text.
    pub usage: Option<Usage>,
    /// Dollars the message adds to the session's reported total.
    pub cost_usd: f64,
    /// `None`: the session's model.
    pub model: Option<String>,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `text = "…"`: one assistant text message.
    Text {
        /// The message; may use the templates.
        text: String,
        /// Its usage, cost and model.
        meta: MessageMeta,
    },
    /// `thinking = "…"`: one assistant thinking message.
    Thinking {
        /// The thinking text; may use the templates.
        text: String,
        /// Its usage, cost and model.
        meta: MessageMeta,
    },
    /// `tool = "…"`: a tool call, with a permission request when it needs one.
    Tool(ToolCall),
    /// `question = "…"`: a question to the user.
    Question(Question),
    /// `rate_limit = SECONDS`: a rate-limit report.
    RateLimit {
        /// How long the limit holds, in seconds.
        seconds: u64,
        /// Rejected (wait, then allowed) or a warning only.
        status: RateLimitStatus,
    },
    /// `api_retry = ATTEMPTS`: the CLI's own retries of a failing model API, one line per
    /// attempt.
    ApiRetry {
        /// How many retry lines are written.
        attempts: u32,
        /// The delay each line reports, in milliseconds.
        retry_delay_ms: u64,
        /// The HTTP status each line reports (e.g. 529).
        error_status: u16,
    },
    /// `garbage = "…"`: a raw line on stdout, not a message.
    Garbage {
        /// The line, written as is.
        line: String,
    },
    /// `sleep_ms = N`: a pause.
    Sleep {
        /// How long, in milliseconds.
        ms: u64,
    },
    /// `crash = EXIT_CODE`: exit mid-turn without a result.
    Crash {
        /// The exit code.
        exit_code: i32,
        /// What to write on stderr first.
        stderr: Option<String>,
    },
    /// `hang = true`: stop writing for good.
    Hang {
        /// Stay on even when stdin closes (otherwise exit 0 then).
        ignore_eof: bool,
    },
    /// `result = "…"`: a `result` line that ends the turn.
    Result(ResultStep),
}

impl Action {
    /// The key that names this kind of step.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Text { .. } => "text",
            Action::Thinking { .. } => "thinking",
            Action::Tool(_) => "tool",
            Action::Question(_) => "question",
            Action::RateLimit { .. } => "rate_limit",
            Action::ApiRetry { .. } => "api_retry",
            Action::Garbage { .. } => "garbage",
            Action::Sleep { .. } => "sleep_ms",
            Action::Crash { .. } => "crash",
            Action::Hang { .. } => "hang",
            Action::Result(_) => "result",
        }
    }

    /// Whether nothing after this step runs in its turn.
    pub fn ends_turn(&self) -> bool {
        matches!(
            self,
            Action::Crash { .. } | Action::Hang { .. } | Action::Result(_)
        )
    }
}

/// A tool call the model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The tool's name (`Bash`, `Write`, `Edit`, …).
    pub name: String,
    /// Always a JSON object.
    pub input: Value,
    /// How long the tool runs once allowed, in milliseconds.
    pub duration_ms: u64,
    /// Whether the call asks for permission first.
    pub needs_permission: bool,
    /// The tool's result text.
    pub output: String,
    /// Whether the tool's result is an error.
    pub is_error: bool,
    /// Withdraw the permission request after this long without an answer.
    pub withdraw_after_ms: Option<u64>,
    /// What the model says after the call was denied.
    pub on_deny: Option<String>,
    /// The path outside the allowed directories the permission request names, if any.
    pub blocked_path: Option<String>,
    /// A `Bash` call whose command really runs (in the agent's working directory) once
    /// allowed; its output is the tool's result.
    pub run: bool,
    /// Its usage, cost and model.
    pub meta: MessageMeta,
}

/// A question to the user (an `AskUserQuestion` tool call).
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The question's text.
    pub question: String,
    /// A short label for it.
    pub header: String,
    /// The choices offered (2 to 4).
    pub options: Vec<QuestionOption>,
    /// Whether more than one choice may be picked.
    pub multi_select: bool,
    /// What the model says once answered (`{answer}` is the answer).
    pub reply: String,
    /// What the model says when the question was denied.
    pub on_deny: Option<String>,
    /// Its usage, cost and model.
    pub meta: MessageMeta,
}

/// One choice of a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionOption {
    /// The choice's label (what the answer carries).
    pub label: String,
    /// What the choice means.
    #[serde(default)]
    pub description: String,
}

/// What a `rate_limit` step reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimitStatus {
    /// Rejected until the reset, then allowed again.
    Rejected,
    /// A warning only; the turn goes on at once.
    AllowedWarning,
}

/// A `result` line that ends the turn early.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultStep {
    /// The result's subtype (one of [`RESULT_SUBTYPES`]).
    pub subtype: String,
    /// Whether the result reports an error.
    pub is_error: bool,
    /// The result's text; `None`: the turn's last assistant text.
    pub message: Option<String>,
    /// The model API's HTTP status the result reports, if any.
    pub api_error_status: Option<u16>,
    /// Why the turn ended (`completed`, `api_error`, …); `None`: derived from the
    /// subtype.
    pub terminal_reason: Option<String>,
    /// Exit with this code right after the result line.
    pub exit_code: Option<i32>,
}

/// The `result` subtypes the real CLI reports.
pub const RESULT_SUBTYPES: &[&str] = &[
    "success",
    "error_max_turns",
    "error_during_execution",
    "error_max_budget_usd",
];

/// Where a turn's `## Result` block goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockPlacement {
    /// Appended to the text of this step (its last repetition).
    AppendTo(usize),
    /// Its own text message after the last step.
    Separate,
}

impl Scenario {
    /// The turn that answers the user message numbered `index` (from 0): the last turn
    /// answers every message beyond the scenario's end.
    pub fn turn(&self, index: usize) -> &Turn {
        let last = self.turns.len().saturating_sub(1);
        &self.turns[index.min(last)]
    }

    /// Applies the environment to `repeat_env`: a set variable must hold a whole number.
    pub fn apply_env(&mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<(), String> {
        for step in self.turns.iter_mut().flat_map(|turn| turn.steps.iter_mut()) {
            let Some(var) = &step.repeat.env else {
                continue;
            };
            if let Some(value) = lookup(var) {
                step.repeat.times = value.trim().parse::<u32>().map_err(|_| {
                    format!(
                        "{var} must be a whole number of repetitions, found `{}`",
                        clip(&one_line(&value), 40)
                    )
                })?;
            }
        }
        Ok(())
    }
}

impl Turn {
    /// Where the result block goes: after the last text step, unless a tool call or a
    /// question comes after it (the final text is what the model says last).
    pub fn block_placement(&self) -> BlockPlacement {
        for (index, step) in self.steps.iter().enumerate().rev() {
            match step.action {
                Action::Text { .. } if step.repeat.times > 0 => {
                    return BlockPlacement::AppendTo(index);
                }
                Action::Tool(_) | Action::Question(_) => return BlockPlacement::Separate,
                _ => {}
            }
        }
        BlockPlacement::Separate
    }
}

impl ResultBlockSpec {
    /// The block as the worker writes it, templates filled.
    pub fn render(&self, vars: &Vars) -> String {
        let mut out = String::from("## Result\n");
        out.push_str(&format!("status: {}\n", self.status.as_str()));
        out.push_str(&format!("summary: {}\n", fill(&self.summary, vars)));
        for (key, items) in [
            ("changes", &self.changes),
            ("files", &self.files),
            ("follow_ups", &self.follow_ups),
        ] {
            if items.is_empty() {
                continue;
            }
            out.push_str(&format!("{key}:\n"));
            for item in items {
                out.push_str(&format!("- {}\n", fill(item, vars)));
            }
        }
        if let Some(question) = &self.question {
            out.push_str(&format!("question: {}\n", fill(question, vars)));
        }
        out.truncate(out.trim_end().len());
        out
    }
}

/// What the templates in scenario text stand for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars {
    /// The repetition of the step, from 1.
    pub i: u32,
    /// The last answer to a question in this session.
    pub answer: Option<String>,
    /// The user's message of this turn.
    pub prompt: String,
    /// The wall clock in Unix microseconds as the text is written (`{now_us}`: for
    /// measuring how long an event takes to reach a client).
    pub now_us: i64,
}

/// The longest `{prompt}` put into text.
pub const PROMPT_TEMPLATE_MAX_CHARS: usize = 80;

/// `template` with `{i}`, `{answer}`, `{prompt}` and `{now_us}` filled; other braces stay
/// as written.
pub fn fill(template: &str, vars: &Vars) -> String {
    if !template.contains('{') {
        return template.to_string();
    }
    // Each value is made only when the template names it: a flood's `chunk {i}` does not
    // flatten the turn's whole prompt on every line.
    let mut out = template.to_string();
    if out.contains("{i}") {
        out = out.replace("{i}", &vars.i.to_string());
    }
    if out.contains("{answer}") {
        out = out.replace("{answer}", vars.answer.as_deref().unwrap_or("(no answer)"));
    }
    if out.contains("{prompt}") {
        let prompt = clip(&one_line(&vars.prompt), PROMPT_TEMPLATE_MAX_CHARS);
        out = out.replace("{prompt}", &prompt);
    }
    if out.contains("{now_us}") {
        out = out.replace("{now_us}", &vars.now_us.to_string());
    }
    out
}

/// Reads and validates a scenario. `origin` names it in errors.
pub fn parse(text: &str, format: Format, origin: &str) -> Result<Scenario, ScenarioError> {
    let error = |problem: String| ScenarioError {
        origin: origin.to_string(),
        problem: one_line(&problem),
    };
    let value: Value = match format {
        Format::Toml => toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            match line {
                Some(line) => error(format!("line {line}: {}", e.message())),
                None => error(e.message().to_string()),
            }
        })?,
        Format::Json => serde_json::from_str(text).map_err(|e| {
            error(format!(
                "line {}: {}",
                e.line(),
                strip_serde_position(&e.to_string())
            ))
        })?,
    };
    scenario_from_value(value).map_err(error)
}

/// serde_json appends " at line L column C", which `parse` already says.
fn strip_serde_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |at| &message[..at])
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    description: Option<String>,
    model: String,
    session_cost_per_turn: Option<f64>,
    turns: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    #[serde(default)]
    steps: Vec<Value>,
    result_block: Option<bool>,
    status: Option<String>,
    summary: Option<String>,
    #[serde(default)]
    changes: Vec<String>,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    follow_ups: Vec<String>,
    question: Option<String>,
}

fn scenario_from_value(value: Value) -> Result<Scenario, String> {
    if !value.is_object() {
        return Err("a scenario is a table with `model` and `turns`".into());
    }
    let raw: RawScenario = from_value(value)?;
    if raw.model.trim().is_empty() {
        return Err("`model` must name a model".into());
    }
    let session_cost_per_turn = raw.session_cost_per_turn.unwrap_or(0.0);
    check_dollars("session_cost_per_turn", session_cost_per_turn)?;
    if raw.turns.is_empty() {
        return Err("a scenario needs at least one [[turns]]".into());
    }
    let turns = raw
        .turns
        .into_iter()
        .enumerate()
        .map(|(index, turn)| parse_turn(turn, index + 1))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Scenario {
        description: raw.description,
        model: raw.model.trim().to_string(),
        session_cost_per_turn,
        turns,
    })
}

fn parse_turn(value: Value, number: usize) -> Result<Turn, String> {
    let at = format!("turn {number}");
    if !value.is_object() {
        return Err(format!("{at}: a turn is a table with `steps`"));
    }
    let raw: RawTurn = from_value(value).map_err(|e| format!("{at}: {e}"))?;
    let mut steps = Vec::with_capacity(raw.steps.len());
    for (index, step) in raw.steps.into_iter().enumerate() {
        let step_at = format!("{at}, step {}", index + 1);
        if let Some(previous) = steps.last().map(|s: &Step| &s.action)
            && previous.ends_turn()
        {
            return Err(format!(
                "{step_at}: never runs, because the {} step before it ends the turn",
                previous.kind()
            ));
        }
        let Value::Object(map) = step else {
            return Err(format!(
                "{step_at}: a step is a table such as {{ text = \"…\" }}"
            ));
        };
        steps.push(parse_step(map).map_err(|e| format!("{step_at}: {e}"))?);
    }
    let block_fields_given = raw.status.is_some()
        || raw.summary.is_some()
        || raw.question.is_some()
        || !raw.changes.is_empty()
        || !raw.files.is_empty()
        || !raw.follow_ups.is_empty();
    let ends_badly = steps.iter().any(|step| match &step.action {
        Action::Crash { .. } | Action::Hang { .. } => true,
        Action::Result(result) => result.is_error,
        _ => false,
    });
    let with_block = raw.result_block.unwrap_or(!ends_badly);
    if !with_block && block_fields_given {
        return Err(format!(
            "{at}: status, summary and the lists belong to the result block, which this turn leaves out"
        ));
    }
    let result_block = if with_block {
        let status = match raw.status.as_deref() {
            None => ResultStatus::Done,
            Some(word) => ResultStatus::from_word(word)
                .filter(|status| status.as_str() == word.trim())
                .ok_or_else(|| {
                    format!("{at}: `status` is done, blocked or needs_input, not `{word}`")
                })?,
        };
        if status == ResultStatus::NeedsInput && raw.question.is_none() {
            return Err(format!(
                "{at}: a needs_input result needs a `question` for the user"
            ));
        }
        Some(ResultBlockSpec {
            status,
            summary: raw
                .summary
                .unwrap_or_else(|| "Handled the request.".to_string()),
            changes: raw.changes,
            files: raw.files,
            follow_ups: raw.follow_ups,
            question: raw.question,
        })
    } else {
        None
    };
    Ok(Turn {
        steps,
        result_block,
    })
}

/// The keys that name a step's kind; a step has exactly one.
pub const STEP_KINDS: &[&str] = &[
    "text",
    "thinking",
    "tool",
    "question",
    "rate_limit",
    "api_retry",
    "garbage",
    "sleep_ms",
    "crash",
    "hang",
    "result",
];

fn parse_step(mut map: Map<String, Value>) -> Result<Step, String> {
    let kinds: Vec<&str> = STEP_KINDS
        .iter()
        .copied()
        .filter(|kind| map.contains_key(*kind))
        .collect();
    let kind = match kinds.as_slice() {
        [kind] => *kind,
        [] => {
            let keys: Vec<String> = map.keys().map(|key| format!("`{key}`")).collect();
            let found = if keys.is_empty() {
                "an empty table".to_string()
            } else {
                keys.join(", ")
            };
            return Err(format!(
                "a step needs one of {}; found {found}",
                STEP_KINDS.join(", ")
            ));
        }
        [first, second, ..] => {
            let hint = if kinds.contains(&"tool") && kinds.contains(&"result") {
                " (a tool's result text is `output`)"
            } else {
                ""
            };
            return Err(format!(
                "a step does one thing, but this one has both `{first}` and `{second}`{hint}"
            ));
        }
    };
    let delay_ms = take::<u64>(&mut map, "delay_ms")?.unwrap_or(0);
    let ends_turn = matches!(kind, "crash" | "hang" | "result");
    let repeat = if ends_turn || kind == "question" {
        Repeat::once()
    } else {
        let times = take::<u32>(&mut map, "repeat")?.unwrap_or(1);
        if times == 0 {
            return Err("`repeat` must be at least 1".into());
        }
        let env = take::<String>(&mut map, "repeat_env")?;
        if env.as_deref().is_some_and(|var| var.trim().is_empty()) {
            return Err("`repeat_env` must name an environment variable".into());
        }
        Repeat { times, env }
    };
    let meta = if matches!(kind, "text" | "thinking" | "tool" | "question") {
        take_meta(&mut map)?
    } else {
        MessageMeta::default()
    };
    let rest = Value::Object(map);
    let action = match kind {
        "text" => {
            let raw: RawText = from_value(rest)?;
            non_empty("text", &raw.text)?;
            Action::Text {
                text: raw.text,
                meta,
            }
        }
        "thinking" => {
            let raw: RawThinking = from_value(rest)?;
            non_empty("thinking", &raw.thinking)?;
            Action::Thinking {
                text: raw.thinking,
                meta,
            }
        }
        "tool" => tool_call(from_value(rest)?, meta)?,
        "question" => question(from_value(rest)?, meta)?,
        "rate_limit" => {
            let raw: RawRateLimit = from_value(rest)?;
            let status = match raw.status.as_deref() {
                None | Some("rejected") => RateLimitStatus::Rejected,
                Some("allowed_warning") => RateLimitStatus::AllowedWarning,
                Some(other) => {
                    return Err(format!(
                        "`status` of a rate limit is rejected or allowed_warning, not `{other}`"
                    ));
                }
            };
            Action::RateLimit {
                seconds: raw.rate_limit,
                status,
            }
        }
        "api_retry" => {
            let raw: RawApiRetry = from_value(rest)?;
            if raw.api_retry == 0 {
                return Err("`api_retry` is a number of attempts, at least 1".into());
            }
            Action::ApiRetry {
                attempts: raw.api_retry,
                retry_delay_ms: raw.retry_delay_ms.unwrap_or(1_000),
                error_status: raw.error_status.unwrap_or(529),
            }
        }
        "garbage" => {
            let raw: RawGarbage = from_value(rest)?;
            Action::Garbage { line: raw.garbage }
        }
        "sleep_ms" => {
            let raw: RawSleep = from_value(rest)?;
            Action::Sleep { ms: raw.sleep_ms }
        }
        "crash" => {
            let raw: RawCrash = from_value(rest)?;
            if !(1..=255).contains(&raw.crash) {
                return Err(format!(
                    "`crash` is the exit code, 1 to 255, not {}",
                    raw.crash
                ));
            }
            Action::Crash {
                exit_code: raw.crash,
                stderr: raw.stderr,
            }
        }
        "hang" => {
            let raw: RawHang = from_value(rest)?;
            if !raw.hang {
                return Err("`hang = false` does nothing; leave the step out".into());
            }
            Action::Hang {
                ignore_eof: raw.ignore_eof,
            }
        }
        "result" => result_step(from_value(rest)?)?,
        _ => unreachable!("every kind in STEP_KINDS is handled"),
    };
    Ok(Step {
        delay_ms,
        repeat,
        action,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawText {
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThinking {
    thinking: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    tool: String,
    input: Option<Value>,
    #[serde(default)]
    duration_ms: u64,
    #[serde(default)]
    needs_permission: bool,
    #[serde(default)]
    output: String,
    #[serde(default)]
    is_error: bool,
    withdraw_after_ms: Option<u64>,
    on_deny: Option<String>,
    blocked_path: Option<String>,
    #[serde(default)]
    run: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuestion {
    question: String,
    header: Option<String>,
    options: Vec<QuestionOption>,
    #[serde(default)]
    multi_select: bool,
    reply: Option<String>,
    on_deny: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    rate_limit: u64,
    status: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApiRetry {
    api_retry: u32,
    retry_delay_ms: Option<u64>,
    error_status: Option<u16>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGarbage {
    garbage: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSleep {
    sleep_ms: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCrash {
    crash: i32,
    stderr: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHang {
    hang: bool,
    #[serde(default)]
    ignore_eof: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResult {
    result: String,
    is_error: Option<bool>,
    message: Option<String>,
    api_error_status: Option<u16>,
    terminal_reason: Option<String>,
    exit_code: Option<i32>,
}

fn tool_call(raw: RawTool, meta: MessageMeta) -> Result<Action, String> {
    non_empty("tool", &raw.tool)?;
    let input = raw.input.unwrap_or_else(|| Value::Object(Map::new()));
    if !input.is_object() {
        return Err("a tool's `input` is a table".into());
    }
    if raw.run && (raw.tool != "Bash" || !input["command"].is_string()) {
        return Err(
            "`run = true` runs a command: it belongs on a `tool = \"Bash\"` step whose input has a `command`"
                .into(),
        );
    }
    if raw.withdraw_after_ms.is_some() && !raw.needs_permission {
        return Err(
            "`withdraw_after_ms` withdraws a permission request, so it needs `needs_permission = true`"
                .into(),
        );
    }
    Ok(Action::Tool(ToolCall {
        name: raw.tool,
        input,
        duration_ms: raw.duration_ms,
        needs_permission: raw.needs_permission,
        output: raw.output,
        is_error: raw.is_error,
        withdraw_after_ms: raw.withdraw_after_ms,
        on_deny: raw.on_deny,
        blocked_path: raw.blocked_path,
        run: raw.run,
        meta,
    }))
}

fn question(raw: RawQuestion, meta: MessageMeta) -> Result<Action, String> {
    non_empty("question", &raw.question)?;
    if !(2..=4).contains(&raw.options.len()) {
        return Err(format!(
            "a question offers 2 to 4 `options`, this one {}",
            raw.options.len()
        ));
    }
    for (index, option) in raw.options.iter().enumerate() {
        non_empty("label", &option.label)?;
        if raw.options[..index]
            .iter()
            .any(|other| other.label == option.label)
        {
            return Err(format!("two options are labelled `{}`", option.label));
        }
    }
    Ok(Action::Question(Question {
        question: raw.question,
        header: raw.header.unwrap_or_else(|| "Question".to_string()),
        options: raw.options,
        multi_select: raw.multi_select,
        reply: raw
            .reply
            .unwrap_or_else(|| "Thanks, going with {answer}.".to_string()),
        on_deny: raw.on_deny,
        meta,
    }))
}

fn result_step(raw: RawResult) -> Result<Action, String> {
    if !RESULT_SUBTYPES.contains(&raw.result.as_str()) {
        return Err(format!(
            "`result` is one of {}, not `{}`",
            RESULT_SUBTYPES.join(", "),
            raw.result
        ));
    }
    if let Some(code) = raw.exit_code
        && !(0..=255).contains(&code)
    {
        return Err(format!("`exit_code` is 0 to 255, not {code}"));
    }
    Ok(Action::Result(ResultStep {
        is_error: raw.is_error.unwrap_or(raw.result != "success"),
        subtype: raw.result,
        message: raw.message,
        api_error_status: raw.api_error_status,
        terminal_reason: raw.terminal_reason,
        exit_code: raw.exit_code,
    }))
}

fn take_meta(map: &mut Map<String, Value>) -> Result<MessageMeta, String> {
    let usage = take::<Usage>(map, "usage")?;
    let cost_usd = take::<f64>(map, "cost_usd")?.unwrap_or(0.0);
    check_dollars("cost_usd", cost_usd)?;
    let model = take::<String>(map, "model")?;
    if let Some(model) = &model {
        non_empty("model", model)?;
    }
    Ok(MessageMeta {
        usage,
        cost_usd,
        model: model.map(|m| m.trim().to_string()),
    })
}

fn take<T: DeserializeOwned>(map: &mut Map<String, Value>, key: &str) -> Result<Option<T>, String> {
    map.remove(key)
        .map(|value| serde_json::from_value(value).map_err(|e| format!("`{key}`: {e}")))
        .transpose()
}

fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

fn non_empty(key: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err(format!("`{key}` must not be empty"));
    }
    Ok(())
}

fn check_dollars(key: &str, value: f64) -> Result<(), String> {
    if !is_amount(value) {
        return Err(format!(
            "`{key}` is a dollar amount of 0 or more, not {value}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result_contract::parse_result;

    fn toml(text: &str) -> Result<Scenario, String> {
        parse(text, Format::Toml, "test").map_err(|e| e.problem)
    }

    fn builtin_scenario(name: &str) -> Scenario {
        let text = builtin(name).unwrap_or_else(|| panic!("no built-in scenario {name}"));
        parse(text, Format::Toml, name).unwrap_or_else(|e| panic!("{e}"))
    }

    fn final_texts(turn: &Turn) -> String {
        let vars = Vars {
            i: 1,
            answer: Some("SQLite".into()),
            prompt: "p".into(),
            ..Vars::default()
        };
        turn.result_block
            .as_ref()
            .map(|block| block.render(&vars))
            .unwrap_or_default()
    }

    #[test]
    fn every_shipped_scenario_parses_and_has_a_description() {
        assert!(BUILTIN.len() >= 13);
        for name in builtin_names() {
            let scenario = builtin_scenario(name);
            assert!(
                scenario
                    .description
                    .as_deref()
                    .is_some_and(|d| !d.is_empty()),
                "{name} says what it is for"
            );
        }
    }

    #[test]
    fn the_required_scenarios_ship() {
        for name in [
            "quick-success",
            "tool-permission",
            "question",
            "needs-input",
            "blocked",
            "multi-turn",
            "slow-spender",
            "rate-limited",
            "crash-midturn",
            "garbage-lines",
            "hang",
            "no-result-block",
            "flood",
            "worktree-change",
            "tested",
            "tests-fail",
            "wrap-up",
        ] {
            assert!(builtin(name).is_some(), "{name} ships");
        }
        assert_eq!(builtin("nope"), None);
    }

    #[test]
    fn rendered_result_blocks_read_back_through_the_result_contract() {
        for name in builtin_names() {
            for (index, turn) in builtin_scenario(name).turns.iter().enumerate() {
                let Some(spec) = &turn.result_block else {
                    continue;
                };
                let text = format!("Some prose first.\n\n{}", final_texts(turn));
                let parsed = parse_result(&text);
                assert!(parsed.found, "{name} turn {index}");
                assert_eq!(parsed.status, Some(spec.status), "{name} turn {index}");
                assert!(parsed.summary.is_some(), "{name} turn {index}");
                assert_eq!(parsed.files, spec.files, "{name} turn {index}");
                assert_eq!(
                    parsed.question.is_some(),
                    spec.question.is_some(),
                    "{name} turn {index}"
                );
            }
        }
    }

    #[test]
    fn shipped_scenarios_run_only_harmless_commands() {
        // A shipped `run = true` step reads; it never deletes, moves, fetches or writes
        // outside the file it is about.
        const READERS: &[&str] = &["wc", "ls", "cat", "head", "pwd", "echo"];
        let mut ran = 0;
        for name in builtin_names() {
            for step in builtin_scenario(name).turns.iter().flat_map(|t| &t.steps) {
                let Action::Tool(call) = &step.action else {
                    continue;
                };
                if !call.run {
                    continue;
                }
                ran += 1;
                let command = call.input["command"].as_str().unwrap_or_default();
                let words = shell_words::split(command).expect("a command that parses");
                assert!(READERS.contains(&words[0].as_str()), "{name}: {command}");
                assert!(
                    !command.contains(['>', ';', '&', '|', '`', '$']),
                    "{name}: one plain command, no redirection or chaining: {command}"
                );
            }
        }
        assert!(ran > 0, "some shipped scenario runs a command for real");
        let change = builtin_scenario("worktree-change");
        let tools: Vec<&str> = change.turns[0]
            .steps
            .iter()
            .filter_map(|s| match &s.action {
                Action::Tool(call) => Some(call.name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(tools, ["Write", "Edit", "Bash"]);
    }

    #[test]
    fn shipped_scenarios_say_what_their_names_promise() {
        let status = |name: &str, turn: usize| {
            builtin_scenario(name).turns[turn]
                .result_block
                .as_ref()
                .map(|b| b.status)
        };
        assert_eq!(status("needs-input", 0), Some(ResultStatus::NeedsInput));
        assert_eq!(status("blocked", 0), Some(ResultStatus::Blocked));
        assert_eq!(status("quick-success", 0), Some(ResultStatus::Done));

        let no_block = builtin_scenario("no-result-block");
        assert!(no_block.turns[0].result_block.is_none());
        assert!(no_block.turn(1).result_block.is_some(), "the retry has one");

        let crash = builtin_scenario("crash-midturn");
        assert!(matches!(
            crash.turns[0].steps.last().map(|s| &s.action),
            Some(Action::Crash { .. })
        ));
        assert!(crash.turns[0].result_block.is_none());

        let hang = builtin_scenario("hang");
        assert!(matches!(
            hang.turns[0].steps.last().map(|s| &s.action),
            Some(Action::Hang { ignore_eof: false })
        ));

        let permission = builtin_scenario("tool-permission");
        assert!(permission.turns[0].steps.iter().any(|s| matches!(
            &s.action,
            Action::Tool(call) if call.needs_permission
        )));

        let rate = builtin_scenario("rate-limited");
        assert!(rate.turns[0].steps.iter().any(|s| matches!(
            s.action,
            Action::RateLimit {
                seconds: 2,
                status: RateLimitStatus::Rejected
            }
        )));

        let garbage = builtin_scenario("garbage-lines");
        let lines: Vec<&str> = garbage.turns[0]
            .steps
            .iter()
            .filter_map(|s| match &s.action {
                Action::Garbage { line } => Some(line.as_str()),
                _ => None,
            })
            .collect();
        assert!(lines.len() >= 3);
        assert!(
            lines
                .iter()
                .all(|line| !serde_json::from_str::<Value>(line).is_ok_and(|v| v.is_object())),
            "no garbage line is a JSON object"
        );
    }

    #[test]
    fn slow_spender_spends_a_dollar_in_twenty_steps_over_seconds() {
        let scenario = builtin_scenario("slow-spender");
        let turn = &scenario.turns[0];
        let mut cost = scenario.session_cost_per_turn;
        let mut wait_ms = 0;
        let mut costed_messages = 0;
        for step in &turn.steps {
            let times = u64::from(step.repeat.times);
            wait_ms += step.delay_ms * times;
            if let Action::Text { meta, .. } = &step.action
                && meta.cost_usd > 0.0
            {
                cost += meta.cost_usd * times as f64;
                costed_messages += times;
                assert!(meta.usage.is_some(), "costed steps carry tokens");
            }
        }
        assert_eq!(costed_messages, 20);
        assert!((cost - 1.0).abs() < 1e-9, "{cost}");
        assert!(wait_ms >= 3_000, "{wait_ms}");
    }

    #[test]
    fn flood_count_comes_from_the_environment() {
        let mut scenario = builtin_scenario("flood");
        let step = &scenario.turns[0].steps[0];
        assert_eq!(step.repeat.times, 10_000);
        assert_eq!(step.repeat.env.as_deref(), Some("DROVER_SIM_FLOOD_EVENTS"));

        scenario.apply_env(|_| None).unwrap();
        assert_eq!(scenario.turns[0].steps[0].repeat.times, 10_000);
        scenario
            .apply_env(|var| (var == "DROVER_SIM_FLOOD_EVENTS").then(|| "25".to_string()))
            .unwrap();
        assert_eq!(scenario.turns[0].steps[0].repeat.times, 25);
        assert_eq!(
            scenario.turns[0].block_placement(),
            BlockPlacement::AppendTo(0)
        );
        scenario.apply_env(|_| Some("0".to_string())).unwrap();
        assert_eq!(
            scenario.turns[0].block_placement(),
            BlockPlacement::Separate,
            "a step that runs no times cannot carry the block"
        );
        let err = scenario
            .apply_env(|_| Some("lots".to_string()))
            .unwrap_err();
        assert_eq!(
            err,
            "DROVER_SIM_FLOOD_EVENTS must be a whole number of repetitions, found `lots`"
        );
    }

    #[test]
    fn a_minimal_scenario_gets_the_defaults() {
        let s = toml("model = \"m\"\n[[turns]]\n[[turns.steps]]\ntext = \"hi\"\n").unwrap();
        assert_eq!(s.model, "m");
        assert_eq!(s.session_cost_per_turn, 0.0);
        let turn = &s.turns[0];
        let block = turn.result_block.as_ref().unwrap();
        assert_eq!(block.status, ResultStatus::Done);
        assert_eq!(block.summary, "Handled the request.");
        assert_eq!(turn.block_placement(), BlockPlacement::AppendTo(0));
        assert_eq!(
            turn.steps[0],
            Step {
                delay_ms: 0,
                repeat: Repeat::once(),
                action: Action::Text {
                    text: "hi".into(),
                    meta: MessageMeta::default()
                }
            }
        );
    }

    #[test]
    fn every_step_kind_parses() {
        let s = toml(
            r#"
model = "m"
[[turns]]
steps = [
  { thinking = "hmm", cost_usd = 0.5, model = "claude-haiku-4-5" },
  { tool = "Bash", input = { command = "ls" }, duration_ms = 10, needs_permission = true, output = "a", withdraw_after_ms = 5, on_deny = "ok", blocked_path = "/tmp" },
  { question = "Which?", options = [{ label = "A" }, { label = "B", description = "bee" }], reply = "{answer} it is" },
  { rate_limit = 2 },
  { rate_limit = 1, status = "allowed_warning" },
  { api_retry = 2, retry_delay_ms = 5, error_status = 500 },
  { garbage = "[1,2]" },
  { sleep_ms = 5, delay_ms = 1, repeat = 3 },
  { text = "x {i}", usage = { input_tokens = 3, output_tokens = 4 }, repeat = 2, repeat_env = "N" },
  { result = "error_max_turns", exit_code = 1 },
]
"#,
        )
        .unwrap();
        let kinds: Vec<&str> = s.turns[0].steps.iter().map(|s| s.action.kind()).collect();
        assert_eq!(
            kinds,
            [
                "thinking",
                "tool",
                "question",
                "rate_limit",
                "rate_limit",
                "api_retry",
                "garbage",
                "sleep_ms",
                "text",
                "result"
            ]
        );
        let steps = &s.turns[0].steps;
        match &steps[2].action {
            Action::Question(q) => {
                assert_eq!(q.header, "Question");
                assert_eq!(q.options[1].description, "bee");
            }
            other => panic!("{other:?}"),
        }
        match &steps[9].action {
            Action::Result(r) => {
                assert!(r.is_error, "an error subtype is an error by default");
                assert_eq!(r.exit_code, Some(1));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            s.turns[0].result_block.is_none(),
            "a turn ending in an error result has no block by default"
        );
        assert_eq!(steps[7].repeat.times, 3);
        assert_eq!(steps[7].delay_ms, 1);
    }

    #[test]
    fn json_scenarios_have_the_same_shape() {
        let s = parse(
            r#"{"model":"m","turns":[{"status":"blocked","summary":"no","steps":[{"text":"hi"},{"crash":3,"stderr":"boom"}],"result_block":true}]}"#,
            Format::Json,
            "x.json",
        )
        .unwrap();
        assert_eq!(
            s.turns[0].result_block.as_ref().map(|b| b.status),
            Some(ResultStatus::Blocked)
        );
        assert_eq!(
            s.turns[0].steps[1].action,
            Action::Crash {
                exit_code: 3,
                stderr: Some("boom".into())
            }
        );
    }

    #[test]
    fn the_block_follows_the_last_text_unless_a_tool_comes_after_it() {
        let s = toml(
            r#"
model = "m"
[[turns]]
steps = [{ text = "a" }, { tool = "Read" }, { text = "b" }, { sleep_ms = 1 }]
[[turns]]
steps = [{ text = "a" }, { tool = "Read" }]
[[turns]]
steps = []
"#,
        )
        .unwrap();
        assert_eq!(s.turns[0].block_placement(), BlockPlacement::AppendTo(2));
        assert_eq!(s.turns[1].block_placement(), BlockPlacement::Separate);
        assert_eq!(s.turns[2].block_placement(), BlockPlacement::Separate);
        assert_eq!(
            s.turn(7),
            &s.turns[2],
            "later messages repeat the last turn"
        );
    }

    #[test]
    fn templates_fill_and_leave_other_braces() {
        let vars = Vars {
            i: 3,
            answer: Some("Postgres".into()),
            prompt: "  fix\n the   bug ".into(),
            now_us: 1_700_000_000_000_001,
        };
        assert_eq!(
            fill("{i}: {answer} for {prompt} {other} at {now_us}", &vars),
            "3: Postgres for fix the bug {other} at 1700000000000001"
        );
        assert_eq!(
            fill("{answer}", &Vars::default()),
            "(no answer)",
            "no question was answered"
        );
        let long = Vars {
            prompt: "x".repeat(500),
            ..Vars::default()
        };
        assert_eq!(
            fill("{prompt}", &long).chars().count(),
            PROMPT_TEMPLATE_MAX_CHARS
        );
    }

    #[test]
    fn a_rendered_block_lists_what_it_has() {
        let spec = ResultBlockSpec {
            status: ResultStatus::NeedsInput,
            summary: "Asked {answer}.".into(),
            changes: vec![],
            files: vec!["a.rs".into(), "b.rs".into()],
            follow_ups: vec![],
            question: Some("Which one?".into()),
        };
        let vars = Vars {
            answer: Some("twice".into()),
            ..Vars::default()
        };
        assert_eq!(
            spec.render(&vars),
            "## Result\nstatus: needs_input\nsummary: Asked twice.\nfiles:\n- a.rs\n- b.rs\nquestion: Which one?"
        );
    }

    #[test]
    fn bad_scenarios_are_refused_with_one_line_that_says_where() {
        let cases: &[(&str, &str)] = &[
            ("model = ", "line 1: "),
            ("turns = []\n", "missing field `model`"),
            ("model = \"m\"\nturns = []\n", "at least one [[turns]]"),
            ("model = \" \"\n[[turns]]\n", "`model` must name a model"),
            (
                "model = \"m\"\nsession_cost_per_turn = -1\n[[turns]]\n",
                "session_cost_per_turn",
            ),
            (
                "model = \"m\"\nturns = [{ stauts = \"done\" }]\n",
                "turn 1: unknown field `stauts`",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ txt = \"hi\" }] }]\n",
                "turn 1, step 1: a step needs one of text, thinking, tool",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{}] }]\n",
                "found an empty table",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [\"hi\"] }]\n",
                "turn 1, step 1: a step is a table",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ tool = \"Bash\", result = \"ok\" }] }]\n",
                "both `tool` and `result` (a tool's result text is `output`)",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ text = \"a\", duration_ms = 5 }] }]\n",
                "turn 1, step 1: unknown field `duration_ms`",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ text = \"\" }] }]\n",
                "`text` must not be empty",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ text = \"a\", repeat = 0 }] }]\n",
                "`repeat` must be at least 1",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ sleep_ms = \"soon\" }] }]\n",
                "invalid type: string \"soon\"",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ text = \"a\", cost_usd = -0.5 }] }]\n",
                "`cost_usd` is a dollar amount",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ text = \"a\", usage = { tokens = 5 } }] }]\n",
                "`usage`: unknown field `tokens`",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ tool = \"Bash\", input = \"ls\" }] }]\n",
                "a tool's `input` is a table",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ tool = \"Bash\", withdraw_after_ms = 5 }] }]\n",
                "needs `needs_permission = true`",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ question = \"Q?\", options = [{ label = \"A\" }] }] }]\n",
                "2 to 4 `options`, this one 1",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ question = \"Q?\", options = [{ label = \"A\" }, { label = \"A\" }] }] }]\n",
                "two options are labelled `A`",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ rate_limit = 2, status = \"maybe\" }] }]\n",
                "rejected or allowed_warning",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ api_retry = 0 }] }]\n",
                "at least 1",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ crash = 0 }] }]\n",
                "exit code, 1 to 255",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ hang = false }] }]\n",
                "`hang = false` does nothing",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ result = \"oops\" }] }]\n",
                "`result` is one of success, error_max_turns",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ crash = 1 }, { text = \"late\" }] }]\n",
                "turn 1, step 2: never runs, because the crash step before it ends the turn",
            ),
            (
                "model = \"m\"\nturns = [{ steps = [{ crash = 1, repeat = 2 }] }]\n",
                "unknown field `repeat`",
            ),
            (
                "model = \"m\"\nturns = [{ status = \"finished\" }]\n",
                "`status` is done, blocked or needs_input, not `finished`",
            ),
            (
                "model = \"m\"\nturns = [{ status = \"needs_input\" }]\n",
                "needs a `question`",
            ),
            (
                "model = \"m\"\nturns = [{ result_block = false, summary = \"s\" }]\n",
                "which this turn leaves out",
            ),
            (
                "model = \"m\"\n[[turns]]\n[[turns]]\nsteps = [{ text = \"a\", model = \"\" }]\n",
                "turn 2, step 1: `model` must not be empty",
            ),
        ];
        for (text, expected) in cases {
            let problem = toml(text).expect_err(text);
            assert!(
                problem.contains(expected),
                "{text:?}\n  gave {problem:?}\n  wanted {expected:?}"
            );
            assert!(!problem.contains('\n'), "one line: {problem:?}");
        }
    }

    #[test]
    fn parse_errors_name_the_origin_and_the_line() {
        let e = parse(
            "model = \"m\"\n\n[[turns]\n",
            Format::Toml,
            "scenario file x.toml",
        )
        .unwrap_err();
        assert_eq!(e.origin, "scenario file x.toml");
        assert!(e.problem.starts_with("line 3: "), "{e}");
        assert!(e.to_string().starts_with("scenario file x.toml: line 3: "));

        let e = parse(
            "{\"model\": \"m\",\n \"turns\": [,]}",
            Format::Json,
            "y.json",
        )
        .unwrap_err();
        assert!(e.problem.starts_with("line 2: "), "{e}");
        assert!(!e.problem.contains("column"), "{e}");

        let e = parse("[1, 2]", Format::Json, "z.json").unwrap_err();
        assert!(e.problem.contains("a scenario is a table"), "{e}");
    }

    #[test]
    fn estimated_usage_counts_about_four_characters_a_token() {
        assert_eq!(Usage::estimated_for("").output_tokens, 1);
        assert_eq!(Usage::estimated_for("abcd").output_tokens, 1);
        assert_eq!(Usage::estimated_for("abcde").output_tokens, 2);
        let mut total = Usage::estimated_for("abcdefgh");
        total.add(&Usage {
            input_tokens: 5,
            output_tokens: 1,
            cache_read_input_tokens: 2,
            cache_creation_input_tokens: 3,
        });
        assert_eq!(
            total,
            Usage {
                input_tokens: 5,
                output_tokens: 3,
                cache_read_input_tokens: 2,
                cache_creation_input_tokens: 3
            }
        );
    }
}
