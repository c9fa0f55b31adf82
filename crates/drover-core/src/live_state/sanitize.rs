//! Detail sanitising: turns whatever a driver or provider said into one line that is safe
//! to show on the live line and to store in the ledger.
//!
//! What must stay true: [`sanitize_detail`] returns `None` or a single trimmed line of at
//! most [`MAX_DETAIL_CHARS`] characters with no control characters and no secret of the
//! kinds [`crate::redact`] knows; an HTML page or an internal error token is dropped, not shown. It never
//! panics, whatever the input. It is idempotent (sanitising a sanitised detail changes
//! nothing), because the ledger stores sanitised details and `fold` sanitises them again.
//! Every regex is compiled once.

use regex::Regex;
use std::sync::LazyLock;

/// The longest detail, in characters (not bytes), the ellipsis included.
pub const MAX_DETAIL_CHARS: usize = 160;

const REDACTED: &str = crate::redact::MARK;
const ELLIPSIS: char = '…';

fn re(pattern: &str) -> Regex {
    // Only ever called with the constant patterns below, which the tests compile.
    Regex::new(pattern).expect("constant regex")
}

/// The start of an HTML document.
static HTML_PAGE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)<!doctype\s+html|<(?:html|head|body)\b"));
/// One opening or closing tag; three or more, one of them closing, make markup.
static TAG: LazyLock<Regex> = LazyLock::new(|| re(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"));
/// Crash output: a Rust panic, a Python traceback, a backtrace header.
static CRASH: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)panicked at|traceback \(most recent call last\)|stack backtrace:"));
/// A whole detail that is only an internal token: `ERR_TIMEOUT`, `E_NOENT`, `ECONNRESET`,
/// `internal_error`, `InternalServerError`, `std::io::Error`, `null`, `[object Object]`.
static ERROR_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"^(?:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+",
        r"|E[A-Z]{3,}",
        r"|[A-Za-z0-9_.:-]*(?i:error|exception|panic|fault|failure)[A-Za-z0-9_.:-]*",
        r"|(?i:null|undefined|nil|nan)",
        r"|\[object Object\])$",
    ))
});
/// The start of a JSON object, or of an array of objects, even when cut short.
static JSON_START: LazyLock<Regex> = LazyLock::new(|| re(r#"^(?:\[\s*)?\{\s*""#));

/// Makes `raw` fit for the live line: one line, secrets redacted, at most 160 characters.
/// `None` when nothing is left or when `raw` looks like an HTML page or an internal error.
pub fn sanitize_detail(raw: &str) -> Option<String> {
    if looks_like_html(raw) {
        return None;
    }
    let line = one_line(raw);
    if line.is_empty() || looks_internal(&line) {
        return None;
    }
    let redacted = crate::redact::global().redact(&line).into_owned();
    Some(truncate(redacted))
}

fn looks_like_html(raw: &str) -> bool {
    HTML_PAGE.is_match(raw) || (TAG.find_iter(raw).take(3).count() == 3 && raw.contains("</"))
}

fn looks_internal(line: &str) -> bool {
    CRASH.is_match(line)
        || ERROR_TOKEN.is_match(line)
        || JSON_START.is_match(line)
        || serde_json::from_str::<serde_json::Value>(line)
            .is_ok_and(|v| v.is_object() || v.is_array())
}

/// Control characters and whitespace become single spaces; invisible formatting
/// characters (zero-width, bidi overrides) are removed.
fn one_line(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len().min(4096));
    let mut gap = false;
    for c in raw.chars() {
        if c.is_whitespace() || c.is_control() {
            gap = true;
        } else if !is_invisible(c) {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.push(c);
        }
    }
    out
}

fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// Cuts `text` to [`MAX_DETAIL_CHARS`] characters, the last being an ellipsis, on a
/// character boundary and never inside a `[redacted]` marker.
fn truncate(text: String) -> String {
    let Some((end, _)) = text.char_indices().nth(MAX_DETAIL_CHARS - 1) else {
        return text;
    };
    if text[end..].chars().nth(1).is_none() {
        return text; // exactly MAX_DETAIL_CHARS characters
    }
    let mut kept = &text[..end];
    if let Some(open) = kept.rfind('[')
        && kept.len() - open < REDACTED.len()
        && REDACTED.starts_with(&kept[open..])
    {
        kept = &kept[..open];
    }
    format!("{}{ELLIPSIS}", kept.trim_end())
}
