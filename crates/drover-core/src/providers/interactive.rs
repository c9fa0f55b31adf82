//! Taking a run over in its CLI's own interactive interface, and reading back what
//! happened there (docs/ARCHITECTURE.md §"Take-over").
//!
//! [`plan`] makes the command line of a provider's interactive mode on the run's provider
//! session, in the run's directory, with the environment its supervised child gets, and
//! the same limits: Claude Code's permission mode and disallowed tools come from the
//! run's policy and capability, Codex's sandbox from its capability (with approvals asked
//! in the interface: the user is there), OpenCode's permission rules from its capability
//! (asked in the interface). [`read_back`] reads the CLI's own record of the session
//! (Claude Code's transcript, Codex's rollout file, what `opencode export` prints of
//! OpenCode's database; the simulated agent keeps a transcript of Claude's shape) for the
//! turns the user had after the take-over began.
//!
//! What must stay true: the record is untrusted input — a file past
//! [`RECORD_MAX_BYTES`], a line past [`LINE_MAX_BYTES`] or a line that is not the shape
//! expected is skipped, never a panic; at most [`TURNS_MAX`] turns come back, each
//! text clipped; only records stamped at or after the take-over's start are read. A CLI
//! run to print its record is bounded ([`EXPORT_TIMEOUT`], [`RECORD_MAX_BYTES`]) and its
//! process group ended once it has printed it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{LaunchSpec, Tokens};
use crate::UnixMillis;

/// The largest session record read.
pub const RECORD_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// The longest line of a record read; a longer one is skipped.
pub const LINE_MAX_BYTES: usize = 16 * 1024 * 1024;
/// The most turns one take-over hands back.
pub const TURNS_MAX: usize = 1_000;
/// The longest prompt or answer text kept of one turn.
const TEXT_MAX_CHARS: usize = 100_000;
/// The longest a CLI may take to print a session's record (`opencode export`).
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(60);

/// The environment a provider's interface gets, made from the run's launch spec.
pub type EnvOf = fn(&LaunchSpec) -> BTreeMap<String, String>;

/// How a provider is taken over: its interactive mode's arguments, and where its record
/// of a session is.
#[derive(Debug, Clone, Copy)]
pub struct Interactive {
    /// The arguments after the executable that open the interactive interface on
    /// session `session` (the configured prefix first).
    pub args: fn(&LaunchSpec, &str) -> Vec<String>,
    /// Where the CLI records a session.
    pub record: Record,
    /// Variables the interface gets over the run's configured environment (OpenCode's
    /// permission rules); `None`: the configured environment as it is.
    pub env: Option<EnvOf>,
    /// The arguments after the executable that print session `session`'s record, for a
    /// CLI that keeps it where only its own command reads it ([`Record::OpenCodeExport`]).
    pub export: Option<fn(&LaunchSpec, &str) -> Vec<String>>,
}

/// Where and in which shape a CLI records a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// Claude Code's transcript: `CLAUDE_CONFIG_DIR` (else `~/.claude`)
    /// `/projects/<dir>/<session>.jsonl`.
    Claude,
    /// Codex's rollout file: `CODEX_HOME` (else `~/.codex`)
    /// `/sessions/YYYY/MM/DD/rollout-…-<thread>.jsonl`.
    CodexRollout,
    /// The simulated agent's transcript, of Claude's shape:
    /// `<DROVER_HOME>/sim-sessions/<session>.jsonl`.
    Sim,
    /// OpenCode's session, in its database (`XDG_DATA_HOME`, else `~/.local/share`,
    /// `/opencode/opencode.db`), which only its own `opencode export SESSION` reads: JSON,
    /// its `messages` each an `info` (`role`, `time.created`, an answer's `tokens`, `cost`,
    /// `providerID`, `modelID`) and its `parts` (`text` ones the words).
    OpenCodeExport,
}

/// The command that opens a run's CLI in its own interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractivePlan {
    /// The run taken over.
    pub run_id: String,
    /// Its provider.
    pub provider: String,
    /// The provider session it opens.
    pub session: String,
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Added to the environment it inherits (the provider's configured variables and the
    /// run's id).
    pub env: BTreeMap<String, String>,
    /// Where it runs: the run's directory.
    pub cwd: PathBuf,
    /// The arguments that print the session's record, for a CLI whose record only its own
    /// command reads (`opencode export SESSION`); empty for the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub export_args: Vec<String>,
    /// The host the run is on (docs/ARCHITECTURE.md §"Hosts"): `program` is then the
    /// transport's client, and `export_args` its arguments that print the session's
    /// record there ([`host_record_script`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// One turn the user had in the CLI's own interface.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InteractiveTurn {
    /// What the user typed.
    pub prompt: String,
    /// What the agent answered (its text, tool calls left out).
    pub text: String,
    /// The model that answered, as the provider names it.
    pub model: Option<String>,
    /// The tokens of the turn.
    pub tokens: Tokens,
    /// When the prompt was recorded.
    pub started_at: UnixMillis,
    /// When the last answer was recorded.
    pub ended_at: UnixMillis,
    /// What the turn cost in US dollars, when the CLI recorded it (OpenCode does).
    pub cost_usd: Option<f64>,
}

/// The interactive command for `spec` (resolved as [`super::launch`] resolves it) on
/// `session`, or why there is none.
pub fn plan(spec: &LaunchSpec, session: &str, how: &Interactive) -> InteractivePlan {
    InteractivePlan {
        run_id: spec.run_id.clone(),
        provider: spec.provider.clone(),
        session: session.to_string(),
        program: spec.command.clone(),
        args: (how.args)(spec, session),
        env: how.env.map_or_else(|| spec.env.clone(), |env| env(spec)),
        cwd: spec.cwd.clone(),
        export_args: how.export.map(|f| f(spec, session)).unwrap_or_default(),
        host: None,
    }
}

/// The turns recorded in `plan`'s session at or after `since`, read from the record
/// `record` names: a file ([`read`]), or what the CLI prints of it ([`export`]).
pub fn read_back(
    record: Record,
    plan: &InteractivePlan,
    since: UnixMillis,
) -> Result<Vec<InteractiveTurn>, String> {
    match record {
        Record::OpenCodeExport => export(plan, since),
        _ if plan.host.is_some() => read_there(record, plan, since),
        _ => read(record, &plan.env, &plan.session, since),
    }
}

/// The turns of a host run's session at or after `since`, from its record on the host,
/// printed there by [`host_record_script`] through the transport (`plan.program` with
/// `plan.export_args`), bounded as [`export`] is.
fn read_there(
    record: Record,
    plan: &InteractivePlan,
    since: UnixMillis,
) -> Result<Vec<InteractiveTurn>, String> {
    if !plain_id(&plan.session) {
        return Err(format!(
            "the session id {:?} is not a plain name",
            plan.session
        ));
    }
    let host = plan.host.as_deref().unwrap_or_default();
    let out = run_bounded(plan, EXPORT_TIMEOUT)
        .map_err(|e| format!("reading the session record on host {host}: {e}"))?;
    let lines = lines_of(&out[..], &format!("the session record on host {host}"))?;
    Ok(turns_of(record, &lines, since))
}

/// The host shell script that prints session `session`'s record of shape `record`, found
/// there as [`read`] finds it here (the run's environment `env` set first), or nothing
/// when it is not there; `None` for a record only its CLI prints.
pub fn host_record_script(
    record: Record,
    env: &BTreeMap<String, String>,
    session: &str,
) -> Option<String> {
    let name = shell_words::quote(&format!("{session}.jsonl")).into_owned();
    let find = match record {
        Record::Claude => format!(
            "f=$(find \"${{CLAUDE_CONFIG_DIR:-$HOME/.claude}}/projects\" -maxdepth 2 -type f -name {name} 2>/dev/null | sort -r | head -n 1)"
        ),
        Record::CodexRollout => format!(
            "f=$(find \"${{CODEX_HOME:-$HOME/.codex}}/sessions\" -maxdepth 4 -type f -name {} 2>/dev/null | sort -r | head -n 1)",
            shell_words::quote(&format!("rollout-*-{session}.jsonl"))
        ),
        Record::Sim => format!("f=\"${}\"/sim-sessions/{name}", crate::paths::HOME_ENV),
        Record::OpenCodeExport => return None,
    };
    let mut script = String::new();
    for (key, value) in env {
        script.push_str(&format!(
            "export {};",
            shell_words::quote(&format!("{key}={value}"))
        ));
    }
    script.push_str(&format!("{find}; [ ! -f \"$f\" ] || exec cat \"$f\""));
    Some(script)
}

/// The turns of `plan`'s session at or after `since`, from what its CLI prints of it
/// (`opencode export SESSION`, run as the interface ran: the run's environment and
/// directory), bounded in time and size.
pub fn export(plan: &InteractivePlan, since: UnixMillis) -> Result<Vec<InteractiveTurn>, String> {
    if !plain_id(&plan.session) || plan.session.starts_with('-') {
        return Err(format!(
            "the session id {:?} is not a plain name",
            plan.session
        ));
    }
    let shown = format!("{} {}", plan.program.display(), plan.export_args.join(" "));
    let out = run_bounded(plan, EXPORT_TIMEOUT).map_err(|e| format!("`{shown}`: {e}"))?;
    let value: Value = serde_json::from_slice(&out).map_err(|e| {
        format!("`{shown}` did not print the session as JSON ({e}); nothing of it was read")
    })?;
    Ok(opencode_turns(&value, since))
}

/// Runs `plan.program` with `plan.export_args` in a process group of its own (stdin
/// closed): what it printed on stdout, at most [`RECORD_MAX_BYTES`]; an error with the
/// end of its stderr when it fails, or when it takes longer than `limit` (its group is
/// killed). Whatever it left in its group is ended once it has exited.
fn run_bounded(plan: &InteractivePlan, limit: Duration) -> Result<Vec<u8>, String> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(&plan.program)
        .args(&plan.export_args)
        .envs(&plan.env)
        .current_dir(&plan.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let group = child.id();
    let kill_group = || {
        super::process::signal_group(group, nix::sys::signal::Signal::SIGKILL);
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(out) = stdout {
            let _ = out.take(RECORD_MAX_BYTES).read_to_end(&mut kept);
        }
        kept
    });
    let err = std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(err) = stderr {
            let _ = err.take(64 * 1024).read_to_end(&mut kept);
        }
        kept
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) | Err(_) => break None,
        }
    };
    kill_group();
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    let said = || {
        let text = String::from_utf8_lossy(&err);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        crate::text::clip(&lines[lines.len().saturating_sub(3)..].join(" · "), 400)
    };
    match status {
        None => Err(format!(
            "it took longer than {} s and was stopped",
            limit.as_secs()
        )),
        Some(status) if !status.success() => Err(format!("it failed ({status}): {}", said())),
        Some(_) => Ok(out),
    }
}

/// The turns recorded in `session` at or after `since`, read from the record `how`
/// names, under the environment `env` (the run's, over drover's own). A record that is
/// not there yet reads as no turns.
pub fn read(
    record: Record,
    env: &BTreeMap<String, String>,
    session: &str,
    since: UnixMillis,
) -> Result<Vec<InteractiveTurn>, String> {
    if !plain_id(session) {
        return Err(format!("the session id {session:?} is not a plain name"));
    }
    let Some(path) = record_file(record, env, session) else {
        return Ok(Vec::new());
    };
    let lines = record_lines(&path)?;
    Ok(turns_of(record, &lines, since))
}

/// The turns at or after `since` in a record's lines.
fn turns_of(record: Record, lines: &[Value], since: UnixMillis) -> Vec<InteractiveTurn> {
    match record {
        Record::Claude | Record::Sim => claude_turns(lines, since),
        Record::CodexRollout => codex_turns(lines, since),
        Record::OpenCodeExport => Vec::new(),
    }
}

/// A variable of the run's environment, else drover's own.
pub fn var(env: &BTreeMap<String, String>, name: &str) -> Option<String> {
    env.get(name)
        .cloned()
        .or_else(|| std::env::var(name).ok())
        .filter(|v| !v.is_empty())
}

/// A CLI's state directory: `variable` from the run's environment or drover's, else
/// `$HOME/dot` (`HOME` likewise); `None` when neither says.
pub fn state_dir(env: &BTreeMap<String, String>, variable: &str, dot: &str) -> Option<PathBuf> {
    var(env, variable)
        .map(PathBuf::from)
        .or_else(|| var(env, "HOME").map(|home| Path::new(&home).join(dot)))
}

/// Session ids name files: only letters, digits, `-` and `_`.
fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Where `session`'s record is, if it exists.
fn record_file(record: Record, env: &BTreeMap<String, String>, session: &str) -> Option<PathBuf> {
    let name = format!("{session}.jsonl");
    match record {
        Record::Claude => {
            let projects = state_dir(env, "CLAUDE_CONFIG_DIR", ".claude")?.join("projects");
            find_file(&projects, 1, &|n| n == name)
        }
        Record::CodexRollout => {
            let sessions = state_dir(env, "CODEX_HOME", ".codex")?.join("sessions");
            let suffix = format!("-{name}");
            find_file(&sessions, 3, &|n| {
                n.starts_with("rollout-") && n.ends_with(&suffix)
            })
        }
        Record::Sim => {
            let file = Path::new(&var(env, crate::paths::HOME_ENV)?)
                .join("sim-sessions")
                .join(name);
            file.is_file().then_some(file)
        }
        // No file: its CLI prints it ([`export`]).
        Record::OpenCodeExport => None,
    }
}

/// The first file (newest name first) under `dir`, at most `depth` directories down,
/// whose name `fits`.
pub fn find_file(dir: &Path, depth: usize, fits: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
    for entry in entries {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            if depth > 0
                && let Some(found) = find_file(&path, depth - 1, fits)
            {
                return Some(found);
            }
        } else if fits(&entry.file_name().to_string_lossy()) {
            return Some(path);
        }
    }
    None
}

/// The record's lines parsed as JSON; a line too long or not JSON is skipped.
fn record_lines(path: &Path) -> Result<Vec<Value>, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot read the session record {}: {e}", path.display()))?;
    lines_of(file, &format!("the session record {}", path.display()))
}

/// [`record_lines`] of what `source` (`shown` in errors) holds.
fn lines_of(source: impl Read, shown: &str) -> Result<Vec<Value>, String> {
    let mut reader = BufReader::new(source.take(RECORD_MAX_BYTES));
    let mut lines = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut reader)
            .take(LINE_MAX_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| format!("cannot read {shown}: {e}"))?;
        if n == 0 {
            break;
        }
        if buf.len() > LINE_MAX_BYTES {
            // Skip the rest of an overlong line.
            while !buf.ends_with(b"\n") {
                buf.clear();
                let more = (&mut reader)
                    .take(LINE_MAX_BYTES as u64)
                    .read_until(b'\n', &mut buf)
                    .map_err(|e| format!("cannot read {shown}: {e}"))?;
                if more == 0 {
                    break;
                }
            }
            continue;
        }
        if let Ok(value) = serde_json::from_slice::<Value>(&buf) {
            lines.push(value);
        }
    }
    Ok(lines)
}

/// An RFC 3339 stamp in ms since the epoch.
fn stamp(value: &Value) -> Option<UnixMillis> {
    let text = value.get("timestamp")?.as_str()?;
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}

fn clip(text: &str) -> String {
    crate::text::clip(text, TEXT_MAX_CHARS)
}

/// Adds `more` to a turn's text, a blank line between parts.
fn append(text: &mut String, more: &str) {
    let more = more.trim();
    if more.is_empty() {
        return;
    }
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(more);
}

/// Turns from a transcript of Claude Code's shape: a user record whose content is the
/// user's words opens a turn (tool results and the CLI's own command records do not);
/// assistant records add their text, and their usage once per message id (the CLI
/// writes one record per content block, each carrying the message's usage).
fn claude_turns(lines: &[Value], since: UnixMillis) -> Vec<InteractiveTurn> {
    // A turn's usage is summed once its messages are all read.
    fn close(turn: &mut InteractiveTurn, usage_of: &mut BTreeMap<String, Tokens>) {
        for tokens in std::mem::take(usage_of).values() {
            turn.tokens.add(tokens);
        }
    }
    let mut turns: Vec<InteractiveTurn> = Vec::new();
    let mut usage_of: BTreeMap<String, Tokens> = BTreeMap::new();
    for line in lines {
        let Some(at) = stamp(line).filter(|at| *at >= since) else {
            continue;
        };
        let message = line.get("message").unwrap_or(&Value::Null);
        match line.get("type").and_then(Value::as_str) {
            Some("user") => {
                let meta = line.get("isMeta").and_then(Value::as_bool) == Some(true);
                let Some(prompt) = user_words(message.get("content")) else {
                    continue;
                };
                if meta || prompt.starts_with('<') {
                    // The CLI's own records (`/exit`, local command output, caveats).
                    continue;
                }
                if let Some(last) = turns.last_mut() {
                    close(last, &mut usage_of);
                }
                if turns.len() == TURNS_MAX {
                    break;
                }
                turns.push(InteractiveTurn {
                    prompt: clip(&prompt),
                    started_at: at,
                    ended_at: at,
                    ..InteractiveTurn::default()
                });
            }
            Some("assistant") => {
                let Some(turn) = turns.last_mut() else {
                    continue;
                };
                turn.ended_at = at;
                if let Some(model) = message.get("model").and_then(Value::as_str)
                    && !model.starts_with('<')
                {
                    turn.model = Some(model.to_string());
                }
                if let Some(blocks) = message.get("content").and_then(Value::as_array) {
                    for block in blocks {
                        if block.get("type").and_then(Value::as_str) == Some("text")
                            && let Some(text) = block.get("text").and_then(Value::as_str)
                        {
                            append(&mut turn.text, text);
                        }
                    }
                    turn.text = clip(&turn.text);
                }
                if let Some(usage) = message.get("usage").and_then(Value::as_object) {
                    let id = message
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("#{}", usage_of.len()), str::to_string);
                    usage_of.insert(id, super::claude::protocol::usage_tokens(usage));
                }
            }
            _ => {}
        }
    }
    if let Some(last) = turns.last_mut() {
        close(last, &mut usage_of);
    }
    turns
}

/// The user's words in a user record's content: a string, or the text blocks of an
/// array that holds no tool result.
fn user_words(content: Option<&Value>) -> Option<String> {
    match content? {
        Value::String(text) => Some(text.clone()).filter(|t| !t.trim().is_empty()),
        Value::Array(blocks) => {
            if blocks
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            {
                return None;
            }
            let mut text = String::new();
            for block in blocks {
                if block.get("type").and_then(Value::as_str) == Some("text")
                    && let Some(t) = block.get("text").and_then(Value::as_str)
                {
                    append(&mut text, t);
                }
            }
            Some(text).filter(|t| !t.is_empty())
        }
        _ => None,
    }
}

/// Turns from a Codex rollout file: a user message (`response_item` of role `user`
/// whose text is not the CLI's own context) opens a turn; assistant messages add their
/// text; each `token_count` event adds its `last_token_usage`; `turn_context` names the
/// model.
fn codex_turns(lines: &[Value], since: UnixMillis) -> Vec<InteractiveTurn> {
    use super::codex::protocol::{str_of, usage_tokens};
    let mut turns: Vec<InteractiveTurn> = Vec::new();
    let mut model: Option<String> = None;
    for line in lines {
        let payload = line.get("payload").unwrap_or(&Value::Null);
        let kind = str_of(line, "type");
        if kind == "turn_context" {
            if let Some(m) = payload.get("model").and_then(Value::as_str) {
                model = Some(m.to_string());
            }
            continue;
        }
        let Some(at) = stamp(line).filter(|at| *at >= since) else {
            continue;
        };
        match (kind, str_of(payload, "type")) {
            ("response_item", "message") => {
                let mut text = String::new();
                if let Some(blocks) = payload.get("content").and_then(Value::as_array) {
                    for block in blocks {
                        if let Some(t) = block.get("text").and_then(Value::as_str) {
                            append(&mut text, t);
                        }
                    }
                }
                match str_of(payload, "role") {
                    "user" => {
                        // Codex records its own context (instructions, environment) as
                        // user messages in tags.
                        if text.is_empty() || text.starts_with('<') {
                            continue;
                        }
                        if turns.len() == TURNS_MAX {
                            break;
                        }
                        turns.push(InteractiveTurn {
                            prompt: clip(&text),
                            model: model.clone(),
                            started_at: at,
                            ended_at: at,
                            ..InteractiveTurn::default()
                        });
                    }
                    "assistant" => {
                        if let Some(turn) = turns.last_mut() {
                            append(&mut turn.text, &text);
                            turn.text = clip(&turn.text);
                            turn.ended_at = at;
                        }
                    }
                    _ => {}
                }
            }
            ("event_msg", "token_count") => {
                if let (Some(turn), Some(last)) = (
                    turns.last_mut(),
                    payload.get("info").and_then(|i| i.get("last_token_usage")),
                ) {
                    turn.tokens.add(&usage_tokens(last));
                    turn.ended_at = at;
                }
            }
            _ => {}
        }
    }
    turns
}

/// Turns from what `opencode export` printed: a user message at or after `since` whose
/// text parts (not ones OpenCode made itself: `synthetic`, `ignored`) hold words opens a
/// turn; the assistant messages after it add their text parts, their tokens and their
/// cost, and name the model as drover names OpenCode's (`providerID/modelID`).
fn opencode_turns(export: &Value, since: UnixMillis) -> Vec<InteractiveTurn> {
    let mut turns: Vec<InteractiveTurn> = Vec::new();
    let Some(messages) = export.get("messages").and_then(Value::as_array) else {
        return turns;
    };
    // Whether the last user message was one of the take-over's.
    let mut open = false;
    for message in messages {
        let info = message.get("info").unwrap_or(&Value::Null);
        let Some(created) = info.pointer("/time/created").and_then(Value::as_i64) else {
            continue;
        };
        let mut text = String::new();
        if let Some(parts) = message.get("parts").and_then(Value::as_array) {
            for part in parts {
                let flagged = |key: &str| part.get(key).and_then(Value::as_bool) == Some(true);
                if part.get("type").and_then(Value::as_str) == Some("text")
                    && !flagged("synthetic")
                    && !flagged("ignored")
                    && let Some(t) = part.get("text").and_then(Value::as_str)
                {
                    append(&mut text, t);
                }
            }
        }
        match info.get("role").and_then(Value::as_str) {
            Some("user") => {
                open = created >= since && !text.is_empty();
                if !open {
                    continue;
                }
                if turns.len() == TURNS_MAX {
                    break;
                }
                turns.push(InteractiveTurn {
                    prompt: clip(&text),
                    started_at: created,
                    ended_at: created,
                    ..InteractiveTurn::default()
                });
            }
            Some("assistant") if open => {
                let Some(turn) = turns.last_mut() else {
                    continue;
                };
                append(&mut turn.text, &text);
                turn.text = clip(&turn.text);
                let completed = info.pointer("/time/completed").and_then(Value::as_i64);
                turn.ended_at = turn.ended_at.max(completed.unwrap_or(created));
                if let Some(model) = info.get("modelID").and_then(Value::as_str) {
                    turn.model = Some(match info.get("providerID").and_then(Value::as_str) {
                        Some(provider) => format!("{provider}/{model}"),
                        None => model.to_string(),
                    });
                }
                if let Some(tokens) = info.get("tokens").and_then(Value::as_object) {
                    turn.tokens
                        .add(&super::opencode::protocol::message_tokens(tokens));
                }
                if let Some(cost) = info
                    .get("cost")
                    .and_then(Value::as_f64)
                    .filter(|c| c.is_finite() && *c >= 0.0)
                {
                    turn.cost_usd = Some(turn.cost_usd.unwrap_or(0.0) + cost);
                }
            }
            _ => {}
        }
    }
    turns
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The script that prints a host run's record, run by a real `sh` here: it finds
    /// Claude's transcript and Codex's rollout under the directory the run's environment
    /// names (else `$HOME`'s), the sim's under `DROVER_HOME`, and prints nothing for a
    /// session that has none.
    #[test]
    fn the_host_record_script_prints_the_sessions_record_found_as_here() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let files = [
            (Record::Claude, "home/.claude/projects/-srv-x/s1.jsonl"),
            (
                Record::CodexRollout,
                "codex/sessions/2026/12/03/rollout-2026-s1.jsonl",
            ),
            (Record::Sim, "drover/sim-sessions/s1.jsonl"),
        ];
        for (_, file) in files {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&path, format!("{{\"at\":\"{file}\"}}\n")).expect("write");
        }
        let env: BTreeMap<String, String> =
            [("CODEX_HOME", "codex"), (crate::paths::HOME_ENV, "drover")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), root.join(v).display().to_string()))
                .collect();
        let printed = |record: Record, session: &str| {
            let script = host_record_script(record, &env, session).expect("a script");
            let out = std::process::Command::new("sh")
                .args(["-c", &script])
                .env("HOME", root.join("home"))
                .env_remove("CLAUDE_CONFIG_DIR")
                .output()
                .expect("sh");
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        for (record, file) in files {
            assert_eq!(printed(record, "s1"), format!("{{\"at\":\"{file}\"}}\n"));
            assert_eq!(printed(record, "s2"), "", "{record:?}");
        }
        assert_eq!(host_record_script(Record::OpenCodeExport, &env, "s1"), None);
    }

    fn lines(values: &[Value]) -> Vec<Value> {
        values.to_vec()
    }

    const T0: &str = "2026-12-03T10:00:00.000Z";
    const T1: &str = "2026-12-03T10:00:01.000Z";
    const T2: &str = "2026-12-03T10:00:02.000Z";
    const T3: &str = "2026-12-03T10:00:03.000Z";

    fn at(text: &str) -> UnixMillis {
        stamp(&json!({ "timestamp": text })).unwrap()
    }

    #[test]
    fn a_claude_transcript_gives_the_users_turns_after_the_take_over() {
        let usage = json!({"input_tokens": 100, "output_tokens": 20,
            "cache_read_input_tokens": 5, "cache_creation_input_tokens": 7});
        let record = lines(&[
            // Before the take-over: not read.
            json!({"type": "user", "timestamp": T0, "message": {"role": "user", "content": "old"}}),
            json!({"type": "user", "timestamp": T1, "message": {"role": "user", "content": "Rename the flag"}}),
            // One message, written as two records carrying the same usage.
            json!({"type": "assistant", "timestamp": T1, "message": {"id": "m1", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Looking."}], "usage": usage}}),
            json!({"type": "assistant", "timestamp": T1, "message": {"id": "m1", "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "name": "Edit", "input": {}}], "usage": usage}}),
            json!({"type": "user", "timestamp": T2, "message": {"role": "user",
                "content": [{"type": "tool_result", "content": "ok"}]}}),
            json!({"type": "assistant", "timestamp": T2, "message": {"id": "m2", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Done."}], "usage": usage}}),
            // The CLI's own records and a line of another shape.
            json!({"type": "user", "timestamp": T3, "isMeta": true, "message": {"content": "Caveat"}}),
            json!({"type": "user", "timestamp": T3, "message": {"content": "<command-name>/exit</command-name>"}}),
            json!({"type": "summary", "timestamp": T3}),
        ]);
        let turns = claude_turns(&record, at(T1));
        assert_eq!(turns.len(), 1, "{turns:?}");
        let turn = &turns[0];
        assert_eq!(turn.prompt, "Rename the flag");
        assert_eq!(turn.text, "Looking.\n\nDone.");
        assert_eq!(turn.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(
            turn.tokens,
            Tokens {
                input: 200,
                output: 40,
                reasoning: 0,
                cache_read: 10,
                cache_write: 14
            }
        );
        assert_eq!((turn.started_at, turn.ended_at), (at(T1), at(T2)));
    }

    #[test]
    fn a_codex_rollout_gives_the_users_turns_with_their_usage() {
        let record = lines(&[
            json!({"timestamp": T0, "type": "turn_context", "payload": {"model": "gpt-6-sol"}}),
            json!({"timestamp": T1, "type": "response_item", "payload": {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]}}),
            json!({"timestamp": T1, "type": "response_item", "payload": {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "Add a test"}]}}),
            json!({"timestamp": T2, "type": "response_item", "payload": {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Added."}]}}),
            json!({"timestamp": T2, "type": "event_msg", "payload": {"type": "token_count",
                "info": {"last_token_usage": {"input_tokens": 300, "cached_input_tokens": 100,
                "output_tokens": 50, "reasoning_output_tokens": 10}}}}),
        ]);
        let turns = codex_turns(&record, at(T1));
        assert_eq!(turns.len(), 1, "{turns:?}");
        assert_eq!(turns[0].prompt, "Add a test");
        assert_eq!(turns[0].text, "Added.");
        assert_eq!(turns[0].model.as_deref(), Some("gpt-6-sol"));
        assert_eq!(turns[0].tokens.input, 200);
        assert_eq!(turns[0].tokens.cache_read, 100);
        assert_eq!(turns[0].tokens.output, 40);
        assert_eq!(turns[0].tokens.reasoning, 10);
        // Nothing after the last record's time.
        assert!(codex_turns(&record, at(T3)).is_empty());
    }

    /// A message of `opencode export`'s shape (as the pinned 1.18.33 prints it).
    fn oc_message(role: &str, created: i64, parts: Value, extra: Value) -> Value {
        let mut info = json!({"role": role, "time": {"created": created}, "id": "msg_x"});
        if let (Some(info), Some(extra)) = (info.as_object_mut(), extra.as_object()) {
            info.extend(extra.clone());
        }
        json!({"info": info, "parts": parts})
    }

    #[test]
    fn an_opencode_export_gives_the_users_turns_with_their_tokens_and_cost() {
        let answer = |created: i64, text: &str, cost: f64| {
            oc_message(
                "assistant",
                created,
                json!([{"type": "step-start"}, {"type": "text", "text": text},
                       {"type": "step-finish", "cost": cost}]),
                json!({"providerID": "mock", "modelID": "mock-model", "cost": cost,
                       "time": {"created": created, "completed": created + 400},
                       "tokens": {"total": 150, "input": 120, "output": 30, "reasoning": 0,
                                  "cache": {"read": 7, "write": 0}}}),
            )
        };
        let export = json!({"info": {"id": "ses_1"}, "messages": [
            // Before the take-over: drover's own turn.
            oc_message("user", 1_000, json!([{"type": "text", "text": "Do the first part"}]), json!({})),
            answer(1_100, "first part done", 0.5),
            // The user's, with a part OpenCode made itself and a tool call between answers.
            oc_message("user", 5_000, json!([
                {"type": "text", "text": "say hello"},
                {"type": "text", "text": "<system-reminder>", "synthetic": true}]), json!({})),
            answer(5_100, "Hello", 0.25),
            answer(5_600, "from the interface", 0.125),
            oc_message("user", 9_000, json!([{"type": "text", "text": "and bye"}]), json!({})),
            answer(9_100, "Bye", 0.0),
        ]});
        let turns = opencode_turns(&export, 5_000);
        assert_eq!(turns.len(), 2, "{turns:?}");
        assert_eq!(turns[0].prompt, "say hello");
        assert_eq!(turns[0].text, "Hello\n\nfrom the interface");
        assert_eq!(turns[0].model.as_deref(), Some("mock/mock-model"));
        assert_eq!((turns[0].started_at, turns[0].ended_at), (5_000, 6_000));
        assert_eq!(
            (
                turns[0].tokens.input,
                turns[0].tokens.output,
                turns[0].tokens.cache_read
            ),
            (240, 60, 14)
        );
        assert_eq!(turns[0].cost_usd, Some(0.375));
        assert_eq!(
            (turns[1].prompt.as_str(), turns[1].cost_usd),
            ("and bye", Some(0.0))
        );
        // Not the shape: nothing, never a panic.
        for bad in [
            json!(null),
            json!({"messages": 3}),
            json!({"messages": [1, {"info": 2}]}),
        ] {
            assert!(opencode_turns(&bad, 0).is_empty(), "{bad}");
        }
    }

    #[test]
    fn a_record_is_read_as_untrusted_input() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sim-sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        let good = json!({"type": "user", "timestamp": T1, "message": {"content": "hello"}});
        let mut text = String::from("not json\n{\"type\":\n");
        text.push_str(&"x".repeat(LINE_MAX_BYTES + 10));
        text.push('\n');
        text.push_str(&good.to_string());
        text.push('\n');
        std::fs::write(sessions.join("s-1.jsonl"), text).unwrap();
        let env = BTreeMap::from([(
            crate::paths::HOME_ENV.to_string(),
            dir.path().display().to_string(),
        )]);
        let turns = read(Record::Sim, &env, "s-1", 0).unwrap();
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].prompt, "hello");
        // A session that is not a plain name names no file.
        assert!(read(Record::Sim, &env, "../s-1", 0).is_err());
        // No record yet: no turns.
        assert_eq!(read(Record::Sim, &env, "s-2", 0).unwrap(), Vec::new());
    }
}
