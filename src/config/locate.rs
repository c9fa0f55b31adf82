//! Positions in a TOML document: which key sits at a byte offset, on which line a key is
//! written, and how a key path is spelled in messages.
//!
//! Works on a span-keeping [`toml_edit::Document`] and never fails: a position that cannot
//! be found is `None`, and the caller words its message without a line.

use std::ops::Range;
use toml_edit::{Document, Item, TableLike};

/// A span-keeping parse of one TOML text.
pub(crate) type SpannedDoc<'a> = Document<&'a str>;

/// Parses `text` keeping spans; `None` when it is not valid TOML.
pub(crate) fn spanned(text: &str) -> Option<SpannedDoc<'_>> {
    Document::parse(text).ok()
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// The path of the innermost key whose name or value covers byte `offset`, e.g.
/// `["limits", "max_turns_default"]`. A standard table's span is its `[header]`, so an
/// error about a whole table resolves to that table's key.
pub(crate) fn key_path_at(doc: &SpannedDoc<'_>, offset: usize) -> Option<Vec<String>> {
    let root = doc.as_item().as_table_like()?;
    path_in_table(root, offset)
}

fn path_in_table(table: &dyn TableLike, offset: usize) -> Option<Vec<String>> {
    for (name, item) in table.iter() {
        if let Some(inner) = item.as_table_like()
            && let Some(mut rest) = path_in_table(inner, offset)
        {
            rest.insert(0, name.to_owned());
            return Some(rest);
        }
        let key_span = table.key(name).and_then(|k| k.span());
        if covers(key_span, offset) || covers(item.span(), offset) {
            return Some(vec![name.to_owned()]);
        }
    }
    None
}

fn covers(span: Option<Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|s| s.start <= offset && offset < s.end.max(s.start + 1))
}

/// Where `path` is written in `doc`: the deepest key of the path that the document spells
/// out, with its 1-based line. `None` when not even the first key is there.
pub(crate) fn line_of_key(doc: &SpannedDoc<'_>, text: &str, path: &[String]) -> Option<usize> {
    let mut table = doc.as_item().as_table_like()?;
    let mut best = None;
    for name in path {
        let Some((key, item)) = table.get_key_value(name) else {
            break;
        };
        if let Some(span) = key.span().or_else(|| item.span()) {
            best = Some(line_col(text, span.start).0);
        }
        match item.as_table_like() {
            Some(inner) => table = inner,
            None => break,
        }
    }
    best
}

/// Whether the document spells out exactly `path`.
pub(crate) fn has_key(doc: &SpannedDoc<'_>, path: &[String]) -> bool {
    item_at(doc, path).is_some()
}

/// The item written at exactly `path`, if any.
pub(crate) fn item_at<'d>(doc: &'d SpannedDoc<'_>, path: &[String]) -> Option<&'d Item> {
    let mut item = doc.as_item();
    for name in path {
        item = item.as_table_like()?.get(name)?;
    }
    Some(item)
}

/// What kind of TOML value an item is, with an article: "a string", "an integer".
pub(crate) fn kind_of(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
        Item::Value(v) => match v {
            toml_edit::Value::String(_) => "a string",
            toml_edit::Value::Integer(_) => "an integer",
            toml_edit::Value::Float(_) => "a float",
            toml_edit::Value::Boolean(_) => "a boolean",
            toml_edit::Value::Datetime(_) => "a date-time",
            toml_edit::Value::Array(_) => "an array",
            toml_edit::Value::InlineTable(_) => "a table",
        },
    }
}

/// What a key whose shipped value is `item` must hold: [`kind_of`], except that a float
/// in the defaults asks for "a number" (an integer is accepted there).
pub(crate) fn expected_kind_of(item: &Item) -> &'static str {
    match kind_of(item) {
        "a float" => "a number",
        kind => kind,
    }
}

/// Whether a value of kind `found` deserializes where `expected` is asked for.
pub(crate) fn accepts(expected: &str, found: &str) -> bool {
    expected == found || (expected == "a number" && matches!(found, "an integer" | "a float"))
}

/// A key path as TOML spells it: `limits.per_provider.claude-code`, quoting keys that are
/// not bare (`providers."my agent"`).
pub(crate) fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|k| {
            let bare = !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if bare { k.clone() } else { format!("{k:?}") }
        })
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Vec<String> {
        p.split('.').map(str::to_owned).collect()
    }

    #[test]
    fn line_col_counts_lines_and_characters_from_one() {
        let text = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        // after the two-byte é
        assert_eq!(line_col(text, 9), (2, 3));
        assert_eq!(line_col(text, 100), (3, 1));
    }

    #[test]
    fn key_path_at_finds_keys_values_and_table_headers() {
        let text = "[limits]\na = 1\n\n[limits.pp]\nx = \"s\"\n\n[providers.foo]\nargs = []\n";
        let doc = spanned(text).unwrap();
        let at = |needle: &str| key_path_at(&doc, text.find(needle).unwrap());
        assert_eq!(at("a = "), Some(path("limits.a")));
        assert_eq!(at("\"s\""), Some(path("limits.pp.x")));
        assert_eq!(at("[providers.foo]"), Some(path("providers.foo")));
        assert_eq!(at("[]"), Some(path("providers.foo.args")));
    }

    #[test]
    fn key_path_at_handles_dotted_keys_and_inline_tables() {
        let text = "limits.a = 1\nlimits.pp = { x = 1, y = \"q\" }\n";
        let doc = spanned(text).unwrap();
        assert_eq!(
            key_path_at(&doc, text.find("\"q\"").unwrap()),
            Some(path("limits.pp.y"))
        );
        assert_eq!(
            key_path_at(&doc, text.find("1\n").unwrap()),
            Some(path("limits.a"))
        );
    }

    #[test]
    fn line_of_key_falls_back_to_the_deepest_written_ancestor() {
        let text = "# comment\n[limits]\nmax_turns_default = 3\n";
        let doc = spanned(text).unwrap();
        assert_eq!(
            line_of_key(&doc, text, &path("limits.max_turns_default")),
            Some(3)
        );
        assert_eq!(
            line_of_key(&doc, text, &path("limits.nothing_here")),
            Some(2)
        );
        assert_eq!(line_of_key(&doc, text, &path("providers.sim")), None);
        assert!(has_key(&doc, &path("limits.max_turns_default")));
        assert!(!has_key(&doc, &path("limits.nothing_here")));
    }

    #[test]
    fn dotted_quotes_keys_that_are_not_bare() {
        assert_eq!(dotted(&path("limits.per_provider")), "limits.per_provider");
        assert_eq!(
            dotted(&["providers".to_owned(), "my agent".to_owned()]),
            "providers.\"my agent\""
        );
    }
}
