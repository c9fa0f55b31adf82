//! Positions in a TOML document: which key sits at a byte offset, on which line a key is
//! written, and how a key path is spelled in messages.
//!
//! Works on a span-keeping [`toml_edit::Document`] and never fails: a position that cannot
//! be found is `None`, and the caller words its message without a line.
//!
//! A key path is a list of segments; an element of an array (of tables, or inline) is
//! the segment `[N]` ([`index_segment`]), counted from 0, so the third
//! `[[catalog.models]]` entry's `tier` is `catalog.models[2].tier`.

use std::ops::Range;
use toml_edit::{Document, Item, TableLike, Value};

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

/// The path segment of element `index` of an array: `[2]`.
pub(crate) fn index_segment(index: usize) -> String {
    format!("[{index}]")
}

/// The index a segment names, when it is an [`index_segment`].
fn segment_index(segment: &str) -> Option<usize> {
    segment.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

/// The path of the innermost key whose name or value covers byte `offset`, e.g.
/// `["limits", "max_turns_default"]`. A standard table's span is its `[header]`, so an
/// error about a whole table resolves to that table's key; inside an array of tables
/// (or an array of inline tables) the element's index is a segment of its own.
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
        if let Some(mut rest) = path_in_elements(item, offset) {
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

/// The path below an array of tables (or of inline tables) that covers `offset`,
/// starting with the element's index segment. Arrays of plain values are not entered: an
/// error about one of their elements is named by the array's key.
fn path_in_elements(item: &Item, offset: usize) -> Option<Vec<String>> {
    let elements: Vec<Node<'_>> = match item {
        Item::ArrayOfTables(tables) => tables.iter().map(Node::Table).collect(),
        Item::Value(Value::Array(values)) if values.iter().all(Value::is_inline_table) => {
            values.iter().map(Node::Value).collect()
        }
        _ => return None,
    };
    for (index, element) in elements.into_iter().enumerate() {
        let inner = element
            .table_like()
            .and_then(|table| path_in_table(table, offset));
        if let Some(mut rest) = inner {
            rest.insert(0, index_segment(index));
            return Some(rest);
        }
        if covers(element.span(), offset) {
            return Some(vec![index_segment(index)]);
        }
    }
    None
}

fn covers(span: Option<Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|s| s.start <= offset && offset < s.end.max(s.start + 1))
}

/// Something written in a document: an item, a table of an array of tables, or a value
/// inside an array.
#[derive(Clone, Copy)]
enum Node<'d> {
    Item(&'d Item),
    Table(&'d toml_edit::Table),
    Value(&'d Value),
}

impl<'d> Node<'d> {
    fn table_like(self) -> Option<&'d dyn TableLike> {
        match self {
            Node::Item(item) => item.as_table_like(),
            Node::Table(table) => Some(table),
            Node::Value(Value::InlineTable(table)) => Some(table),
            Node::Value(_) => None,
        }
    }

    fn span(self) -> Option<Range<usize>> {
        match self {
            Node::Item(item) => item.span(),
            Node::Table(table) => table.span(),
            Node::Value(value) => value.span(),
        }
    }

    /// The child named by `segment`, with the span of its key where it has one.
    fn child(self, segment: &str) -> Option<(Option<Range<usize>>, Node<'d>)> {
        if let Some(index) = segment_index(segment) {
            let element = match self {
                Node::Item(Item::ArrayOfTables(tables)) => Node::Table(tables.get(index)?),
                Node::Item(Item::Value(Value::Array(values)))
                | Node::Value(Value::Array(values)) => Node::Value(values.get(index)?),
                _ => return None,
            };
            return Some((element.span(), element));
        }
        let (key, item) = self.table_like()?.get_key_value(segment)?;
        Some((key.span().or_else(|| item.span()), Node::Item(item)))
    }

    fn to_item(self) -> Item {
        match self {
            Node::Item(item) => item.clone(),
            Node::Table(table) => Item::Table(table.clone()),
            Node::Value(value) => Item::Value(value.clone()),
        }
    }
}

/// Where `path` is written in `doc`: the deepest key (or array element) of the path that
/// the document spells out, with its 1-based line. `None` when not even the first key is
/// there.
pub(crate) fn line_of_key(doc: &SpannedDoc<'_>, text: &str, path: &[String]) -> Option<usize> {
    let mut node = Node::Item(doc.as_item());
    let mut best = None;
    for segment in path {
        let Some((span, child)) = node.child(segment) else {
            break;
        };
        if let Some(span) = span {
            best = Some(line_col(text, span.start).0);
        }
        node = child;
    }
    best
}

/// Whether the document spells out exactly `path`.
pub(crate) fn has_key(doc: &SpannedDoc<'_>, path: &[String]) -> bool {
    item_at(doc, path).is_some()
}

/// A copy of what is written at exactly `path`, if anything (an array element comes back
/// as an item of its own).
pub(crate) fn item_at(doc: &SpannedDoc<'_>, path: &[String]) -> Option<Item> {
    let mut node = Node::Item(doc.as_item());
    for segment in path {
        node = node.child(segment)?.1;
    }
    Some(node.to_item())
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

/// Whether a value of kind `found` deserializes where `expected` is asked for (an array
/// of tables is an array).
pub(crate) fn accepts(expected: &str, found: &str) -> bool {
    expected == found
        || (expected == "a number" && matches!(found, "an integer" | "a float"))
        || (expected == "an array" && found == "an array of tables")
}

/// A key path as TOML spells it: `limits.per_provider.claude-code`, quoting keys that are
/// not bare (`providers."my agent"`), with array elements as `[N]`
/// (`catalog.models[2].tier`).
pub(crate) fn dotted(path: &[String]) -> String {
    let mut out = String::new();
    for k in path {
        if segment_index(k).is_some() {
            out.push_str(k);
            continue;
        }
        if !out.is_empty() {
            out.push('.');
        }
        let bare = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if bare {
            out.push_str(k);
        } else {
            out.push_str(&format!("{k:?}"));
        }
    }
    out
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
        let entry = vec![
            "catalog".to_owned(),
            "models".to_owned(),
            index_segment(2),
            "tier".to_owned(),
        ];
        assert_eq!(dotted(&entry), "catalog.models[2].tier");
        assert_eq!(dotted(&entry[..3]), "catalog.models[2]");
    }

    fn entry(index: usize, key: &str) -> Vec<String> {
        let mut p = vec![
            "catalog".to_owned(),
            "models".to_owned(),
            index_segment(index),
        ];
        if !key.is_empty() {
            p.push(key.to_owned());
        }
        p
    }

    #[test]
    fn arrays_of_tables_are_entered_by_index() {
        let text = "[[catalog.models]]\nid = \"a\"\n\n[[catalog.models]]\nid = \"b\"\ntier = 3\n";
        let doc = spanned(text).unwrap();
        let at = |needle: &str| key_path_at(&doc, text.find(needle).unwrap());
        assert_eq!(at("\"b\""), Some(entry(1, "id")));
        assert_eq!(at("tier"), Some(entry(1, "tier")));
        assert_eq!(at("\"a\""), Some(entry(0, "id")));
        assert_eq!(line_of_key(&doc, text, &entry(1, "tier")), Some(6));
        assert_eq!(line_of_key(&doc, text, &entry(1, "")), Some(4));
        // a key the entry does not write: its header's line
        assert_eq!(line_of_key(&doc, text, &entry(1, "aliases")), Some(4));
        assert_eq!(line_of_key(&doc, text, &entry(0, "id")), Some(2));
        // no third entry: the deepest written part of the path
        assert_eq!(line_of_key(&doc, text, &entry(2, "id")), Some(1));
        assert!(has_key(&doc, &entry(1, "tier")));
        assert!(!has_key(&doc, &entry(0, "tier")));
        assert_eq!(
            item_at(&doc, &entry(1, "tier")).map(|i| kind_of(&i)),
            Some("an integer")
        );
        assert_eq!(
            item_at(&doc, &entry(1, "")).map(|i| kind_of(&i)),
            Some("a table")
        );
    }

    #[test]
    fn arrays_of_inline_tables_are_entered_but_arrays_of_values_are_not() {
        let text = "catalog.models = [\n  { id = \"a\" },\n  { id = \"b\", vision = 3 },\n]\nargs = [\"x\", 1]\n";
        let doc = spanned(text).unwrap();
        let at = |needle: &str| key_path_at(&doc, text.find(needle).unwrap());
        assert_eq!(at("3 }"), Some(entry(1, "vision")));
        assert_eq!(line_of_key(&doc, text, &entry(1, "vision")), Some(3));
        assert_eq!(at("1]"), Some(path("args")));
    }
}
