//! Reading the user's file, merging it over the defaults, and turning every way that can
//! fail into one line that names the file, the line in the user's file and the key.
//!
//! How lines are found: the merged table is written out as TOML and deserialized from
//! that text, so a serde error carries a byte span; the span names a key path in the
//! merged text ([`locate::key_path_at`]) and the path names a line in the user's text
//! ([`locate::line_of_key`]). The defaults alone always deserialize, so every such error
//! comes from something the user wrote.

use super::locate::{self, SpannedDoc};
use super::{Config, DEFAULT_CONFIG_TOML, validate};
use crate::error::{DroverError, ErrorCode};
use std::io;
use std::path::Path;

/// The user's file as text, or `None` when there is no file (the defaults apply).
pub(super) fn read_user_file(path: &Path) -> Result<Option<String>, DroverError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A dangling symlink is a file the user meant to have, not a missing one.
            if std::fs::symlink_metadata(path).is_ok() {
                return Err(unreadable(path, "it is a symbolic link to a missing file"));
            }
            return Ok(None);
        }
        Err(e) => return Err(unreadable(path, &io_reason(&e))),
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Some(text)),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let (line, column) = locate::line_col(&String::from_utf8_lossy(e.as_bytes()), valid);
            Err(unreadable(
                path,
                &format!("it is not valid UTF-8 (first bad byte at line {line}, column {column})"),
            ))
        }
    }
}

fn unreadable(path: &Path, reason: &str) -> DroverError {
    DroverError::new(
        ErrorCode::ConfigUnreadable,
        format!(
            "cannot read {}: {reason}; fix it or remove it",
            path.display()
        ),
    )
}

/// An I/O error as a lower-case phrase without the `(os error N)` suffix.
fn io_reason(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::IsADirectory {
        return "it is a directory".to_owned();
    }
    let text = e.to_string();
    let text = match text.find(" (os error") {
        Some(i) => text[..i].to_owned(),
        None => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// Merges `text` over the defaults, deserializes and checks the result.
pub(super) fn parse_over_defaults(text: &str, path: &Path) -> Result<Config, DroverError> {
    let user: toml::Table = toml::from_str(text).map_err(|e| syntax_error(path, text, &e))?;
    // The documents with their spans only name the key of a refusal: read when one is made.
    let docs = || Docs {
        user: locate::spanned(text),
        defaults: locate::spanned(DEFAULT_CONFIG_TOML),
    };
    // The defaults as a table, parsed once per process.
    static DEFAULTS: std::sync::LazyLock<Result<toml::Table, String>> =
        std::sync::LazyLock::new(|| {
            toml::from_str(DEFAULT_CONFIG_TOML).map_err(|e: toml::de::Error| e.to_string())
        });
    let mut merged = DEFAULTS
        .clone()
        .map_err(|e| internal(format!("the embedded default config is not TOML: {e}")))?;
    merge(&mut merged, user);

    let merged_text = toml::to_string(&merged)
        .map_err(|e| internal(format!("cannot write the merged configuration: {e}")))?;
    let config: Config = toml::from_str(&merged_text).map_err(|e| {
        let docs = docs();
        let key = e
            .span()
            .and_then(|span| {
                locate::spanned(&merged_text).and_then(|doc| locate::key_path_at(&doc, span.start))
            })
            .map(|key| outermost_mismatch(key, &docs));
        let problem = describe(e.message(), key.as_deref(), &docs);
        invalid(path, text, docs.user.as_ref(), key.as_deref(), &problem)
    })?;

    if let Err(problem) = validate::check(&config) {
        let docs = docs();
        let key =
            problem.key_to_blame(|k| docs.user.as_ref().is_some_and(|d| locate::has_key(d, k)));
        return Err(invalid(
            path,
            text,
            docs.user.as_ref(),
            Some(key),
            &problem.message,
        ));
    }
    Ok(config)
}

/// Deep merge: tables merge key by key; anything else in `over` (scalars, arrays, and a
/// table replacing a non-table or the reverse) replaces what `base` had.
pub(super) fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base_table)), toml::Value::Table(over_table)) => {
                merge(base_table, over_table);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn syntax_error(path: &Path, text: &str, e: &toml::de::Error) -> DroverError {
    let position = match e.span() {
        Some(span) => {
            let (line, column) = locate::line_col(text, span.start);
            format!("{}:{line}:{column}", path.display())
        }
        None => path.display().to_string(),
    };
    DroverError::new(
        ErrorCode::ConfigInvalid,
        format!("{position}: not valid TOML: {}", one_line(e.message())),
    )
}

/// `CONFIG_INVALID` naming the file and, when it can be found, the line of `key` in the
/// user's text.
fn invalid(
    path: &Path,
    text: &str,
    user_doc: Option<&SpannedDoc<'_>>,
    key: Option<&[String]>,
    problem: &str,
) -> DroverError {
    let line = match (user_doc, key) {
        (Some(doc), Some(key)) => locate::line_of_key(doc, text, key),
        _ => None,
    };
    let place = match line {
        Some(line) => format!("{} line {line}", path.display()),
        None => path.display().to_string(),
    };
    DroverError::new(
        ErrorCode::ConfigInvalid,
        format!("{place}: {}", one_line(problem)),
    )
}

fn internal(message: String) -> DroverError {
    DroverError::new(ErrorCode::Internal, message)
}

fn one_line(text: &str) -> String {
    text.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The user's text and the defaults, both parsed keeping spans, for wording messages.
struct Docs<'a> {
    user: Option<SpannedDoc<'a>>,
    defaults: Option<SpannedDoc<'static>>,
}

/// `key`, or the shortest part of it where the user wrote a different kind of value than
/// the defaults hold (`[[limits]]` where `[limits]` belongs): an error deep inside a
/// value of the wrong kind is that value's fault.
fn outermost_mismatch(key: Vec<String>, docs: &Docs<'_>) -> Vec<String> {
    let (Some(user), Some(defaults)) = (docs.user.as_ref(), docs.defaults.as_ref()) else {
        return key;
    };
    for end in 1..key.len() {
        let prefix = &key[..end];
        if let (Some(written), Some(shipped)) = (
            locate::item_at(user, prefix),
            locate::item_at(defaults, prefix),
        ) && !locate::accepts(
            locate::expected_kind_of(&shipped),
            locate::kind_of(&written),
        ) {
            return prefix.to_vec();
        }
    }
    key
}

/// A serde message about `key` as a sentence for the user.
fn describe(message: &str, key: Option<&[String]>, docs: &Docs<'_>) -> String {
    let Some(key) = key else {
        return message.to_owned();
    };
    let name = locate::dotted(key);
    if let Some(rest) = message.strip_prefix("unknown field ") {
        return unknown_key(key, rest);
    }
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        let article = if field.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        return format!("[{name}] needs {article} `{field}` key");
    }
    let written = docs.user.as_ref().and_then(|d| locate::item_at(d, key));
    let shipped = docs.defaults.as_ref().and_then(|d| locate::item_at(d, key));
    // A key the defaults set has the defaults' kind; this also catches shapes serde words
    // oddly (an array of tables where a table belongs is read as a struct sequence).
    if let (Some(written), Some(shipped)) = (&written, &shipped) {
        let expected = locate::expected_kind_of(shipped);
        let found = locate::kind_of(written);
        if !locate::accepts(expected, found) {
            return format!("`{name}` must be {expected}, found {found}");
        }
    }
    if let Some((unexpected, expected)) = message
        .strip_prefix("invalid type: ")
        .and_then(|r| r.rsplit_once(", expected "))
    {
        let expected = serde_expected_kind(expected);
        let unexpected = serde_unexpected_kind(unexpected);
        // The span of a bad element resolves to the array's key.
        if let Some(toml_edit::Item::Value(toml_edit::Value::Array(_))) = &written
            && unexpected != "an array"
        {
            return format!(
                "`{name}` must be an array of {}, found {unexpected} in it",
                plural(expected)
            );
        }
        let found = written.as_ref().map_or(unexpected, locate::kind_of);
        return format!("`{name}` must be {expected}, found {found}");
    }
    if let Some((unexpected, expected)) = message
        .strip_prefix("invalid value: integer `")
        .and_then(|r| r.rsplit_once("`, expected "))
        && let Some(max) = unsigned_max(expected)
    {
        let bound = if unexpected.starts_with('-') {
            "must not be negative".to_owned()
        } else {
            format!("must be at most {max}")
        };
        return format!("`{name}` {bound}, found {unexpected}");
    }
    format!("`{name}`: {message}")
}

/// "unknown key `limits.per_acount` (did you mean `per_account`?); known keys in
/// [limits]: …", from serde's "`per_acount`, expected one of `a`, `b`".
fn unknown_key(key: &[String], serde_rest: &str) -> String {
    let known: Vec<&str> = serde_rest
        .rsplit_once("`, expected ")
        .map(|(_, list)| list.split('`').skip(1).step_by(2).collect())
        .unwrap_or_default();
    let name = locate::dotted(key);
    let parent = &key[..key.len().saturating_sub(1)];
    let section = if parent.is_empty() {
        "at the top level".to_owned()
    } else {
        format!("in [{}]", locate::dotted(parent))
    };
    let mut out = format!("unknown key `{name}`");
    if let Some(last) = key.last()
        && let Some(close) = closest(last, &known)
    {
        out.push_str(&format!(" (did you mean `{close}`?)"));
    }
    if known.is_empty() {
        out.push_str(&format!("; no keys are allowed {section}"));
    } else {
        out.push_str(&format!("; known keys {section}: {}", known.join(", ")));
    }
    out
}

/// The known name a typo most likely meant: one within two edits (Levenshtein), else
/// the one most alike (Jaro-Winkler, which weighs a shared start: `max_turnz` →
/// `max_turns_default`) when it is alike enough; the first of equally near names wins.
fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let near = known
        .iter()
        .map(|k| (strsim::levenshtein(name, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k);
    // A `<stem>_default|_min|_max` family is alike through its stem, and its first
    // member (the default, as the defaults file lists them) is the one suggested.
    let stem = |k: &'a str| {
        ["_default", "_min", "_max"]
            .iter()
            .find_map(|suffix| k.strip_suffix(suffix))
            .unwrap_or(k)
    };
    near.or_else(|| {
        known
            .iter()
            .map(|k| {
                let score = strsim::jaro_winkler(name, k).max(strsim::jaro_winkler(name, stem(k)));
                (score, *k)
            })
            .filter(|(score, _)| *score >= 0.88)
            .fold(None, |best: Option<(f64, &str)>, (score, k)| match best {
                Some((b, _)) if b >= score => best,
                _ => Some((score, k)),
            })
            .map(|(_, k)| k)
    })
}

/// serde's name for what it expected, as a TOML kind with an article.
fn serde_expected_kind(expected: &str) -> &'static str {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => {
            "an integer"
        }
        "f32" | "f64" => "a number",
        "a boolean" => "a boolean",
        "a string" | "a borrowed string" => "a string",
        "a sequence" => "an array",
        e if e == "a map" || e.starts_with("struct ") => "a table",
        _ => "something else",
    }
}

/// serde's description of what it found (`integer `1``, `string "x"`) as a TOML kind.
fn serde_unexpected_kind(unexpected: &str) -> &'static str {
    match unexpected.split([' ', '`']).next().unwrap_or_default() {
        "string" => "a string",
        "integer" => "an integer",
        "floating" => "a float",
        "boolean" => "a boolean",
        "sequence" => "an array",
        "map" => "a table",
        _ => "something else",
    }
}

/// "a string" → "strings".
fn plural(kind: &str) -> String {
    let noun = kind
        .strip_prefix("an ")
        .or_else(|| kind.strip_prefix("a "))
        .unwrap_or(kind);
    format!("{noun}s")
}

fn unsigned_max(expected: &str) -> Option<u64> {
    match expected {
        "u8" => Some(u8::MAX.into()),
        "u16" => Some(u16::MAX.into()),
        "u32" => Some(u32::MAX.into()),
        "u64" | "usize" => Some(u64::MAX),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "/p/config.toml";

    fn parse(text: &str) -> Result<Config, DroverError> {
        parse_over_defaults(text, Path::new(FILE))
    }

    fn refusal(text: &str) -> DroverError {
        match parse(text) {
            Ok(_) => panic!("expected a refusal for:\n{text}"),
            Err(e) => e,
        }
    }

    fn assert_one_line(e: &DroverError) {
        assert!(!e.message.contains('\n'), "not one line: {:?}", e.message);
    }

    #[test]
    fn merge_is_deep_for_tables_and_replaces_arrays_and_scalars() {
        let mut base: toml::Table =
            toml::from_str("a = 1\nlist = [1, 2]\n[t]\nx = 1\ny = 2\n[t.inner]\nz = 3\n").unwrap();
        let over: toml::Table =
            toml::from_str("list = [9]\nnew = true\n[t]\ny = 20\n[t.inner]\nw = 4\n").unwrap();
        merge(&mut base, over);
        let want: toml::Table = toml::from_str(
            "a = 1\nlist = [9]\nnew = true\n[t]\nx = 1\ny = 20\n[t.inner]\nz = 3\nw = 4\n",
        )
        .unwrap();
        assert_eq!(base, want);
    }

    #[test]
    fn merge_lets_a_scalar_replace_a_table() {
        let mut base: toml::Table = toml::from_str("[t]\nx = 1\n").unwrap();
        merge(&mut base, toml::from_str("t = 3\n").unwrap());
        assert_eq!(base["t"], toml::Value::Integer(3));
    }

    #[test]
    fn empty_user_file_gives_the_defaults() {
        assert_eq!(parse("").unwrap(), Config::defaults());
        assert_eq!(parse("# only a comment\n").unwrap(), Config::defaults());
    }

    #[test]
    fn user_values_override_and_everything_else_stays() {
        let c = parse(
            "[limits]\nmax_turns_default = 3\nbudget_usd_default = 2\n\
             [limits.per_provider]\ncodex = 1\n\
             [providers.claude-code]\ncommand = \"/opt/claude\"\nargs = [\"--verbose\"]\n\
             [providers.claude-code.env]\nCLAUDE_CONFIG_DIR = \"/tmp/acct2\"\n",
        )
        .unwrap();
        let d = Config::defaults();
        assert_eq!(c.limits.max_turns_default, 3);
        // an integer is accepted where dollars are expected
        assert_eq!(c.limits.budget_usd_default, 2.0);
        assert_eq!(c.limits.max_turns_max, d.limits.max_turns_max);
        assert_eq!(c.limits.per_provider["codex"], 1);
        assert_eq!(c.limits.per_provider["claude-code"], 3);
        let claude = &c.providers["claude-code"];
        assert_eq!(claude.command, "/opt/claude");
        assert_eq!(claude.args, ["--verbose"]);
        assert_eq!(claude.env["CLAUDE_CONFIG_DIR"], "/tmp/acct2");
        assert!(claude.enabled);
        assert_eq!(c.providers["sim"], d.providers["sim"]);
    }

    #[test]
    fn a_new_provider_can_be_added() {
        let c = parse(
            "[providers.claude-work]\ncommand = \"claude\"\n\
             [limits.per_provider]\nclaude-work = 1\n",
        )
        .unwrap();
        assert_eq!(c.providers["claude-work"].command, "claude");
        assert!(c.providers["claude-work"].args.is_empty());
        assert!(c.providers["claude-work"].enabled);
        // The four CLIs, the six ACP agents, the sim, and the new one.
        assert_eq!(c.providers.len(), 11);
    }

    #[test]
    fn dotted_keys_and_inline_tables_merge_like_tables() {
        let c = parse("limits.max_turns_max = 12\nproviders.codex = { command = \"codex2\" }\n")
            .unwrap();
        assert_eq!(c.limits.max_turns_max, 12);
        assert_eq!(c.providers["codex"].command, "codex2");
        assert!(c.providers["codex"].enabled);
    }

    #[test]
    fn syntax_error_names_file_line_and_column_on_one_line() {
        let e = refusal("[limits]\nmax_turns_default = \"3\n");
        assert_eq!(e.code, ErrorCode::ConfigInvalid);
        assert!(e.message.starts_with("/p/config.toml:2:"), "{}", e.message);
        assert!(e.message.contains("not valid TOML"), "{}", e.message);
        assert_one_line(&e);

        let e = refusal("a = 1\na = 2\n");
        assert_eq!(
            e.message,
            "/p/config.toml:2:1: not valid TOML: duplicate key"
        );
    }

    #[test]
    fn unknown_key_names_line_key_and_the_known_keys() {
        let e = refusal("# mine\n\n[limits]\nmax_turns_default = 3\nmax_turnz = 4\n");
        assert_eq!(e.code, ErrorCode::ConfigInvalid);
        assert!(
            e.message
                .starts_with("/p/config.toml line 5: unknown key `limits.max_turnz` (did you mean `max_turns_default`?); known keys in [limits]: task_max_chars, "),
            "{}",
            e.message
        );
        assert!(e.message.contains("max_turns_max"), "{}", e.message);
        assert_one_line(&e);
    }

    #[test]
    fn unknown_key_suggests_a_close_name() {
        let e = refusal("[limits]\nper_acount = 1\n");
        assert!(
            e.message.starts_with(
                "/p/config.toml line 2: unknown key `limits.per_acount` (did you mean `per_account`?); known keys in [limits]: "
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn unknown_key_at_top_level_and_in_a_provider() {
        let e = refusal("\nlimitz = 1\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 2: unknown key `limitz` (did you mean `limits`?); \
             known keys at the top level: limits, providers, pricing, catalog, routing, keys, notifications, workspaces, dashboard, redact, mcp, guard, evidence, hosts"
        );
        let e = refusal("[providers.my-agent]\ncommand = \"x\"\ncomand = \"y\"\n");
        assert!(
            e.message.starts_with(
                "/p/config.toml line 3: unknown key `providers.my-agent.comand` (did you mean `command`?); known keys in [providers.my-agent]: command, args, env, enabled"
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_session_mode_is_taken_by_an_acp_agent_only() {
        let c = parse(
            "[providers.my-agent]\nprotocol = \"acp\"\ncommand = \"x\"\nmode = \"plan\"\n\n\
             [providers.gemini]\ncommand = \"gemini\"\nmode = \"yolo\"\n",
        )
        .expect("an ACP agent takes a mode");
        assert_eq!(c.providers["my-agent"].mode.as_deref(), Some("plan"));
        assert_eq!(c.providers["gemini"].mode.as_deref(), Some("yolo"));
        let e = refusal("[providers.codex]\nmode = \"plan\"\n");
        assert!(
            e.message
                .contains("`providers.codex.mode` is set, but only an ACP agent"),
            "{}",
            e.message
        );
    }

    #[test]
    fn wrong_type_names_line_key_expected_and_found() {
        let e = refusal("\n\n[limits]\nmax_turns_default = \"six\"\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 4: `limits.max_turns_default` must be an integer, found a string"
        );
        let e = refusal("[providers.codex]\nenabled = \"no\"\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 2: `providers.codex.enabled` must be a boolean, found a string"
        );
        let e = refusal("[limits]\nsession_warning_usd = true\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 2: `limits.session_warning_usd` must be a number, found a boolean"
        );
        let e = refusal("limits = 3\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 1: `limits` must be a table, found an integer"
        );
        let e = refusal("[limits.per_provider]\ncodex = 1979-05-27\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 2: `limits.per_provider.codex` must be an integer, found a date-time"
        );
        let e = refusal("limits.per_provider = { codex = 2, opencode = \"x\" }\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 1: `limits.per_provider.opencode` must be an integer, found a string"
        );
        let e = refusal("[providers.sim]\nargs = \"--fast\"\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 2: `providers.sim.args` must be an array, found a string"
        );
    }

    #[test]
    fn wrong_shapes_are_named_by_kind() {
        let cases = [
            (
                "[[limits]]\n",
                "line 1: `limits` must be a table, found an array of tables",
            ),
            (
                "limits = [1, 2]\n",
                "line 1: `limits` must be a table, found an array",
            ),
            (
                "providers.codex = 1\n",
                "line 1: `providers.codex` must be a table, found an integer",
            ),
            (
                "providers.sim.args = [\"-v\", 1]\n",
                "line 1: `providers.sim.args` must be an array of strings, found an integer in it",
            ),
            (
                "[providers.x]\ncommand = [\"a\"]\n",
                "line 2: `providers.x.command` must be a string, found an array",
            ),
            (
                "[limits]\nbudget_usd_min = \"1\"\n",
                "line 2: `limits.budget_usd_min` must be a number, found a string",
            ),
        ];
        for (text, want) in cases {
            let e = refusal(text);
            assert_eq!(e.code, ErrorCode::ConfigInvalid);
            assert_eq!(e.message, format!("{FILE} {want}"), "for {text:?}");
        }
    }

    #[test]
    fn out_of_range_integers_are_refused_with_the_bound() {
        let e = refusal("[limits]\n\nmax_minutes_max = -5\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 3: `limits.max_minutes_max` must not be negative, found -5"
        );
        let e = refusal("[limits]\nper_account = 5000000000\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 2: `limits.per_account` must be at most 4294967295, found 5000000000"
        );
    }

    #[test]
    fn missing_field_of_a_new_provider_points_at_its_header() {
        let e = refusal("[limits]\nper_account = 1\n\n[providers.mine]\nargs = []\n");
        assert_eq!(
            e.message,
            "/p/config.toml line 4: [providers.mine] needs a `command` key"
        );
    }

    #[test]
    fn semantic_errors_point_at_the_key_the_user_wrote() {
        let e = refusal("[limits]\n# lower the ceiling\nmax_minutes_max = 30\n");
        assert_eq!(e.code, ErrorCode::ConfigInvalid);
        assert!(
            e.message.starts_with("/p/config.toml line 3: `limits.max_minutes_default` (45) must not exceed `limits.max_minutes_max` (30)"),
            "{}",
            e.message
        );
        let e = refusal("[providers.codex]\ncommand = \"  \"\n");
        assert!(
            e.message
                .starts_with("/p/config.toml line 2: `providers.codex.command` is empty"),
            "{}",
            e.message
        );
    }

    #[test]
    fn pricing_and_catalog_entries_are_read_from_the_user_file() {
        let c = parse(
            "[pricing]\nenforce = true\n\n\
             [[catalog.models]]\nprovider = \"codex\"\nid = \"gpt-5.5\"\ninput_per_mtok = 1.25\n\
             output_per_mtok = 10\nhidden = false\n\n\
             [[catalog.models]]\nprovider = \"sim\"\nid = \"sim-new\"\ntier = \"small\"\nfree = true\n",
        )
        .unwrap();
        assert!(c.pricing.enforce);
        assert_eq!(c.catalog.models.len(), 2);
        let first = &c.catalog.models[0];
        assert_eq!(
            (first.provider.as_str(), first.id.as_str()),
            ("codex", "gpt-5.5")
        );
        assert_eq!(first.input_per_mtok, Some(1.25));
        // an integer is accepted where dollars are expected
        assert_eq!(first.output_per_mtok, Some(10.0));
        assert_eq!(first.hidden, Some(false));
        assert_eq!(first.tier, None);
        assert_eq!(c.catalog.models[1].free, Some(true));
        // inline tables are the same entries
        let inline =
            parse("catalog.models = [{ provider = \"sim\", id = \"sim-small\", hidden = true }]\n")
                .unwrap();
        assert_eq!(inline.catalog.models[0].hidden, Some(true));
    }

    #[test]
    fn bad_catalog_entries_name_the_line_the_entry_and_the_key() {
        let two = |second: &str| {
            format!(
                "[[catalog.models]]\nprovider = \"codex\"\nid = \"gpt-5.4\"\nhidden = true\n\n\
                 [[catalog.models]]\nprovider = \"codex\"\n{second}"
            )
        };
        let cases: Vec<(String, &str)> = vec![
            (
                two("id = \"gpt-9\"\ntierr = \"small\"\n"),
                "line 9: unknown key `catalog.models[1].tierr` (did you mean `tier`?); known keys in [catalog.models[1]]: provider, id, aliases, tier, input_per_mtok, output_per_mtok, cache_read_per_mtok, cache_write_per_mtok, free, context_window, vision, default, hidden",
            ),
            (
                two("id = \"gpt-9\"\ntier = \"small\"\ninput_per_mtok = \"cheap\"\n"),
                "line 10: `catalog.models[1].input_per_mtok` must be a number, found a string",
            ),
            (
                two("tier = \"small\"\n"),
                "line 6: [catalog.models[1]] needs an `id` key",
            ),
            (
                two("id = \"gpt-9\"\n"),
                "line 6: `catalog.models[1]` adds codex model `gpt-9`, which needs a `tier` (small, standard or frontier)",
            ),
            (
                two("id = \"gpt-9\"\ntier = \"huge\"\n"),
                "line 9: `catalog.models[1].tier` must be small, standard or frontier, found \"huge\"",
            ),
            (
                two("id = \"gpt-9\"\ntier = \"small\"\ncache_read_per_mtok = -0.5\n"),
                "line 10: `catalog.models[1].cache_read_per_mtok` must be a dollar amount of 0 or more, found -0.5",
            ),
            (
                two("id = \"gpt-9\"\ntier = \"small\"\nfree = true\noutput_per_mtok = 2\n"),
                "line 10: `catalog.models[1].free` is true but the entry also sets prices; keep one or the other",
            ),
            (
                two("id = \"gpt-9\"\ntier = \"small\"\naliases = [\"GPT-5.5\"]\n"),
                "line 10: `catalog.models[1].aliases`: the alias `gpt-5.5` of codex model `gpt-9` already names codex model `gpt-5.5`; a name may stand for one model only",
            ),
            (
                two("id = \"GPT-5.4\"\n"),
                "line 8: `catalog.models[1]` repeats codex model `GPT-5.4` of `catalog.models[0]`; merge the two entries",
            ),
            (
                "[[catalog.models]]\nprovider = \"codx\"\nid = \"gpt-9\"\n".to_string(),
                "line 2: `catalog.models[0].provider` names no provider (\"codx\"); providers are: claude-acp, claude-code, codex, codex-acp, copilot, gemini, opencode, opencode-acp, qwen, sim",
            ),
            (
                "catalog.models = [{ provider = \"sim\", id = \"sim-small\" },\n  { provider = \"sim\", id = \"x\", vision = \"yes\" }]\n".to_string(),
                "line 2: `catalog.models[1].vision` must be a boolean, found a string",
            ),
            (
                "[catalog]\nmodels = { provider = \"sim\" }\n".to_string(),
                "line 2: `catalog.models` must be an array, found a table",
            ),
            (
                "[pricing]\nenforce = \"yes\"\n".to_string(),
                "line 2: `pricing.enforce` must be a boolean, found a string",
            ),
            (
                "[pricing]\nenforced = true\n".to_string(),
                "line 2: unknown key `pricing.enforced` (did you mean `enforce`?); known keys in [pricing]: enforce",
            ),
        ];
        for (text, want) in cases {
            let e = refusal(&text);
            assert_eq!(e.code, ErrorCode::ConfigInvalid, "for {text:?}");
            assert_eq!(e.message, format!("{FILE} {want}"), "for {text:?}");
            assert_one_line(&e);
        }
    }

    #[test]
    fn read_user_file_treats_missing_as_defaults_and_names_unreadable_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("config.toml");
        assert_eq!(read_user_file(&missing).unwrap(), None);

        let as_dir = dir.path().join("dir.toml");
        std::fs::create_dir(&as_dir).unwrap();
        let e = read_user_file(&as_dir).unwrap_err();
        assert_eq!(e.code, ErrorCode::ConfigUnreadable);
        assert_eq!(
            e.message,
            format!(
                "cannot read {}: it is a directory; fix it or remove it",
                as_dir.display()
            )
        );

        let latin1 = dir.path().join("latin1.toml");
        std::fs::write(&latin1, b"a = 1\nname = \"caf\xe9\"\n").unwrap();
        let e = read_user_file(&latin1).unwrap_err();
        assert_eq!(e.code, ErrorCode::ConfigUnreadable);
        assert!(
            e.message
                .contains("not valid UTF-8 (first bad byte at line 2, column 12)"),
            "{}",
            e.message
        );

        let dangling = dir.path().join("link.toml");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        let e = read_user_file(&dangling).unwrap_err();
        assert_eq!(e.code, ErrorCode::ConfigUnreadable);
        assert!(
            e.message.contains("symbolic link to a missing file"),
            "{}",
            e.message
        );

        let not_a_dir = latin1.join("config.toml");
        let e = read_user_file(&not_a_dir).unwrap_err();
        assert_eq!(e.code, ErrorCode::ConfigUnreadable);
        assert!(e.message.contains("not a directory"), "{}", e.message);
    }
}
