//! A run's transcript as text to read (docs/ARCHITECTURE.md §"Reading a transcript"): the
//! ring's entries grouped into [`Block`]s — the agent's text, a tool call with its end,
//! any other line — and laid out into [`Item`]s (the lines a cursor moves over and `y`
//! copies), each drawn on one or more rows at a width. The detail pane and the
//! full-screen transcript view both lay out with this module.
//!
//! What must stay true: the agent's markdown is read by `pulldown-cmark` and drawn plainly
//! (headings bold, list marks, fenced code monospaced under its language tag, wrapped only
//! between words); nothing here draws a control character (every line is cleaned, also
//! those of an older ledger); an item's copied text is the line as read, with no gutter
//! or decoration; laying out does no I/O.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::canvas::{clip_width, width_of, wrap};
use crate::theme;

/// The mark of the agent's text in a ring entry.
const TEXT_MARK: &str = "text: ";
/// The gutter before a line of code.
const CODE_GUTTER: &str = "│ ";

/// A run of entries that reads as one thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// The agent's text (markdown), its line breaks kept.
    Text(String),
    /// A tool call: its tool, what it was given, and how it ended (`None` while it runs).
    Tool {
        name: String,
        input: String,
        output: Option<ToolEnd>,
    },
    /// Any other entry: one line.
    Line(String),
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEnd {
    pub failed: bool,
    pub summary: String,
}

/// A block, and the index of the first entry it was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub block: Block,
    pub first_entry: usize,
}

/// Groups the ring's entries into blocks. A tool's end (`tool done: …`, `tool failed: …`)
/// joins the oldest call still open (the ring's lines do not carry the call's id); one
/// with no open call stays a line of its own.
pub fn blocks<'a>(entries: impl IntoIterator<Item = &'a String>) -> Vec<Placed> {
    let mut out: Vec<Placed> = Vec::new();
    let mut open: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let block = if let Some(text) = entry.strip_prefix(TEXT_MARK) {
            Block::Text(text.to_string())
        } else if let Some((failed, summary)) = tool_end(entry) {
            if let Some(at) = open.pop_front()
                && let Some(Placed {
                    block: Block::Tool { output, .. },
                    ..
                }) = out.get_mut(at)
            {
                *output = Some(ToolEnd {
                    failed,
                    summary: clean(summary),
                });
                continue;
            }
            Block::Line(clean(entry))
        } else if let Some((name, input)) = tool_start(entry) {
            open.push_back(out.len());
            Block::Tool {
                name: clean(name),
                input: clean(input),
                output: None,
            }
        } else {
            Block::Line(clean(entry))
        };
        out.push(Placed {
            block,
            first_entry: i,
        });
    }
    out
}

fn tool_end(entry: &str) -> Option<(bool, &str)> {
    if let Some(rest) = entry.strip_prefix("tool done: ") {
        return Some((false, rest));
    }
    entry.strip_prefix("tool failed: ").map(|rest| (true, rest))
}

fn tool_start(entry: &str) -> Option<(&str, &str)> {
    let rest = entry.strip_prefix("tool ")?;
    let (name, input) = rest.split_once(": ")?;
    (!name.is_empty() && !name.contains(' ')).then_some((name, input))
}

/// One line without control characters (a tab is four spaces) or trailing blanks.
pub fn clean(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '\t' => out.push_str("    "),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// One line of the transcript as the cursor sees it: the rows it is drawn on and the
/// text `y` copies of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The block it belongs to (`space` expands the tool call of the block).
    pub block: usize,
    pub rows: Vec<Line<'static>>,
    pub copy: String,
}

/// Lays out `blocks` at `width` columns: tool calls collapsed to one line unless
/// `expanded` names their block.
pub fn layout(blocks: &[Placed], width: usize, expanded: impl Fn(usize) -> bool) -> Vec<Item> {
    let mut items = Vec::new();
    for (i, placed) in blocks.iter().enumerate() {
        items.extend(layout_block(&placed.block, i, width, expanded(i)));
    }
    items
}

/// The items of one block.
pub fn layout_block(block: &Block, index: usize, width: usize, expanded: bool) -> Vec<Item> {
    let width = width.max(8);
    match block {
        Block::Text(text) => Markdown::new(index, width).render(text),
        Block::Tool {
            name,
            input,
            output,
        } => tool(index, width, name, input, output.as_ref(), expanded),
        Block::Line(line) => {
            let style = if line.starts_with("asks ") {
                theme::attention()
            } else if line.starts_with("process ended")
                || line.starts_with("error")
                || line.contains("failed")
            {
                theme::error()
            } else {
                theme::dim()
            };
            vec![Item {
                block: index,
                rows: wrapped("", "", line, width, style, style),
                copy: line.clone(),
            }]
        }
    }
}

fn tool(
    index: usize,
    width: usize,
    name: &str,
    input: &str,
    output: Option<&ToolEnd>,
    expanded: bool,
) -> Vec<Item> {
    let (end_word, end_style) = match output {
        None => ("running".to_string(), theme::active()),
        Some(end) if end.failed => ("failed".to_string(), theme::error()),
        Some(_) => ("done".to_string(), theme::success()),
    };
    let head = format!("{name}: {input}");
    if !expanded {
        let tail = format!(" · {end_word}");
        let room = width.saturating_sub(2 + width_of(&tail));
        return vec![Item {
            block: index,
            rows: vec![Line::from(vec![
                Span::styled("▸ ", theme::dim()),
                Span::styled(clip_width(&head, room), theme::active()),
                Span::styled(tail, end_style),
            ])],
            copy: head,
        }];
    }
    let mut items = vec![Item {
        block: index,
        rows: vec![Line::from(vec![
            Span::styled("▾ ", theme::dim()),
            Span::styled(clip_width(name, width.saturating_sub(2)), theme::active()),
        ])],
        copy: name.to_string(),
    }];
    items.push(Item {
        block: index,
        rows: wrapped(
            "  input  ",
            "         ",
            input,
            width,
            theme::dim(),
            theme::text(),
        ),
        copy: input.to_string(),
    });
    let said = match output {
        Some(end) => format!("{end_word}: {}", end.summary),
        None => end_word,
    };
    items.push(Item {
        block: index,
        rows: wrapped(
            "  output ",
            "         ",
            &said,
            width,
            theme::dim(),
            end_style,
        ),
        copy: said,
    });
    items
}

/// `text` wrapped between words to `width`, its first row after `first`, the others
/// after `rest` (both drawn in `prefix_style`).
fn wrapped(
    first: &str,
    rest: &str,
    text: &str,
    width: usize,
    prefix_style: Style,
    style: Style,
) -> Vec<Line<'static>> {
    let room = width
        .saturating_sub(width_of(first).max(width_of(rest)))
        .max(4);
    wrap(text, room)
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            Line::from(vec![
                Span::styled(if i == 0 { first } else { rest }.to_string(), prefix_style),
                Span::styled(piece, style),
            ])
        })
        .collect()
}

/// Whether the line before the one `at` starts in is blank (`at` is a block's start).
fn blank_line_before(text: &str, at: usize) -> bool {
    let Some(before) = text.get(..at) else {
        return false;
    };
    // What is before the block on its own line: indentation, quote or list marks.
    let Some(line_start) = before.rfind('\n') else {
        return false;
    };
    let before = &before[..line_start];
    let before = before.strip_suffix('\r').unwrap_or(before);
    let previous = before.rsplit('\n').next().unwrap_or(before);
    previous.trim_matches([' ', '\t', '>']).is_empty()
        && before.contains(|c: char| !c.is_whitespace())
}

/// A list being drawn: its next number (`None`: bullets).
#[derive(Debug)]
struct List {
    next: Option<u64>,
}

/// The agent's markdown drawn plainly, line by line.
struct Markdown {
    block: usize,
    width: usize,
    items: Vec<Item>,
    /// The line being built (its text, as read) and its style.
    line: String,
    style: Style,
    /// What goes before the line's first row, and before its other rows.
    first_prefix: String,
    rest_prefix: String,
    lists: Vec<List>,
    quote: usize,
    /// Inside a fenced or indented code block: its language tag.
    code: Option<String>,
    /// Where a link points, shown after its text when it differs.
    link: Option<String>,
    /// Where the link's text starts in the line.
    link_start: usize,
    /// The source has a blank line before the block being started (blank lines between
    /// blocks are drawn as written, not as markdown would space them).
    blank: bool,
}

impl Markdown {
    fn new(block: usize, width: usize) -> Self {
        Markdown {
            block,
            width,
            items: Vec::new(),
            line: String::new(),
            style: theme::text(),
            first_prefix: String::new(),
            rest_prefix: String::new(),
            lists: Vec::new(),
            quote: 0,
            code: None,
            link: None,
            link_start: 0,
            blank: false,
        }
    }

    fn render(mut self, text: &str) -> Vec<Item> {
        for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
            if matches!(event, Event::Start(_) | Event::Rule) {
                self.blank = blank_line_before(text, range.start);
            }
            self.event(event);
        }
        self.flush();
        self.items
    }

    /// The indent of the lines inside the current list item.
    fn list_indent(&self) -> String {
        " ".repeat(self.lists.len() * 2)
    }

    fn quote_prefix(&self) -> String {
        "│ ".repeat(self.quote)
    }

    /// Before a new block: the blank line the source has before it.
    fn open_block(&mut self) {
        self.flush();
        if self.blank && !self.items.is_empty() {
            self.push_item(vec![Line::raw(self.quote_prefix())], String::new());
        }
        self.blank = false;
        let prefix = format!("{}{}", self.quote_prefix(), self.list_indent());
        self.first_prefix = prefix.clone();
        self.rest_prefix = prefix;
    }

    fn push_item(&mut self, rows: Vec<Line<'static>>, copy: String) {
        self.items.push(Item {
            block: self.block,
            rows,
            copy,
        });
    }

    /// Ends the line being built (nothing when it is empty).
    fn flush(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let text = clean(&std::mem::take(&mut self.line));
        let rows = wrapped(
            &self.first_prefix,
            &self.rest_prefix,
            &text,
            self.width,
            theme::dim(),
            self.style,
        );
        let mark = self.first_prefix.trim_start_matches(['│', ' ']).to_string();
        self.push_item(rows, format!("{mark}{text}"));
        // The line's next rows (after a soft break) go under its text.
        self.first_prefix = self.rest_prefix.clone();
    }

    fn code_line(&mut self, line: &str) {
        let line = clean(line);
        let indent = line.len() - line.trim_start().len();
        let gutter = format!("{}{CODE_GUTTER}", self.quote_prefix());
        let lead = format!("{gutter}{}", " ".repeat(indent));
        let rest = format!("{gutter}{}", " ".repeat(indent.min(self.width / 2)));
        let room = self
            .width
            .saturating_sub(width_of(&lead).max(width_of(&rest)))
            .max(4);
        let rows = wrap(line.trim_start(), room)
            .into_iter()
            .enumerate()
            .map(|(i, piece)| {
                Line::from(vec![
                    Span::styled(
                        if i == 0 { lead.clone() } else { rest.clone() },
                        theme::dim(),
                    ),
                    Span::styled(piece, theme::focus()),
                ])
            })
            .collect();
        self.push_item(rows, line);
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => {
                if self.code.is_some() {
                    for line in text.lines() {
                        self.code_line(line);
                    }
                } else {
                    self.line.push_str(&text);
                }
            }
            Event::Code(code) => {
                self.line.push('`');
                self.line.push_str(&code);
                self.line.push('`');
            }
            Event::InlineMath(text) | Event::DisplayMath(text) => self.line.push_str(&text),
            Event::Html(html) => {
                self.style = theme::dim();
                for line in html.lines() {
                    self.line.push_str(line);
                    self.flush();
                }
            }
            Event::InlineHtml(html) => self.line.push_str(&html),
            Event::FootnoteReference(name) => {
                self.line.push_str(&format!("[^{name}]"));
            }
            Event::SoftBreak | Event::HardBreak => self.flush(),
            Event::Rule => {
                self.open_block();
                let rule = "─".repeat(self.width.min(40));
                self.push_item(vec![Line::styled(rule, theme::dim())], "---".into());
            }
            Event::TaskListMarker(done) => self.line.push_str(if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                if self.line.is_empty()
                    && !self.first_prefix.ends_with(". ")
                    && !self.first_prefix.ends_with("• ")
                {
                    self.open_block();
                }
                self.style = theme::text();
            }
            Tag::Heading { level, .. } => {
                self.open_block();
                self.line.push_str(&"#".repeat(level as usize));
                self.line.push(' ');
                self.style = theme::title();
                if level == HeadingLevel::H1 {
                    self.style = self
                        .style
                        .add_modifier(ratatui::style::Modifier::UNDERLINED);
                }
            }
            Tag::BlockQuote(_) => {
                self.open_block();
                self.quote += 1;
                self.first_prefix = format!("{}{}", self.quote_prefix(), self.list_indent());
                self.rest_prefix = self.first_prefix.clone();
            }
            Tag::CodeBlock(kind) => {
                self.open_block();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                let shown = if lang.is_empty() { "code" } else { &lang };
                let head = format!(
                    "{}{}┌─ {}",
                    self.quote_prefix(),
                    self.list_indent(),
                    clean(shown)
                );
                self.push_item(
                    vec![Line::styled(clip_width(&head, self.width), theme::dim())],
                    format!("```{}", clean(&lang)),
                );
                self.code = Some(lang);
            }
            Tag::List(start) => {
                self.flush();
                if self.lists.is_empty() {
                    self.open_block();
                }
                self.lists.push(List { next: start });
            }
            Tag::Item => {
                self.flush();
                let depth = self.lists.len().saturating_sub(1);
                let mark = match self.lists.last_mut() {
                    Some(List { next: Some(n) }) => {
                        let mark = format!("{n}. ");
                        *n += 1;
                        mark
                    }
                    _ => "• ".to_string(),
                };
                let indent = format!("{}{}", self.quote_prefix(), "  ".repeat(depth));
                self.first_prefix = format!("{indent}{mark}");
                self.rest_prefix = format!("{indent}{}", " ".repeat(width_of(&mark)));
                self.style = theme::text();
            }
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.link = Some(dest_url.to_string());
                self.link_start = self.line.len();
            }
            Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::HtmlBlock
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Table(_)
            | Tag::TableHead
            | Tag::TableRow
            | Tag::TableCell
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::Heading(_) => {
                self.flush();
                self.style = theme::text();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
            }
            TagEnd::CodeBlock => {
                let foot = format!("{}{}└─", self.quote_prefix(), self.list_indent());
                self.push_item(vec![Line::styled(foot, theme::dim())], "```".into());
                self.code = None;
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                let prefix = format!("{}{}", self.quote_prefix(), self.list_indent());
                self.first_prefix = prefix.clone();
                self.rest_prefix = prefix;
            }
            TagEnd::Item => self.flush(),
            TagEnd::Link | TagEnd::Image => {
                if let Some(url) = self.link.take() {
                    let text = self.line.get(self.link_start..).unwrap_or_default();
                    if text != url && !url.is_empty() {
                        self.line.push_str(&format!(" ({url})"));
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(item: &Item) -> Vec<String> {
        item.rows
            .iter()
            .map(|row| row.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn a_tools_end_joins_the_oldest_open_call_and_a_lone_end_stays_a_line() {
        let entries: Vec<String> = [
            "tool Bash: make",
            "tool Read: a.rs",
            "tool done: built",
            "tool failed: no such file",
            "tool done: nobody's",
        ]
        .map(String::from)
        .to_vec();
        let placed = blocks(&entries);
        let end = |failed: bool, summary: &str| {
            Some(ToolEnd {
                failed,
                summary: summary.into(),
            })
        };
        assert_eq!(
            placed.iter().map(|p| p.block.clone()).collect::<Vec<_>>(),
            [
                Block::Tool {
                    name: "Bash".into(),
                    input: "make".into(),
                    output: end(false, "built"),
                },
                Block::Tool {
                    name: "Read".into(),
                    input: "a.rs".into(),
                    output: end(true, "no such file"),
                },
                Block::Line("tool done: nobody's".into()),
            ]
        );
        assert_eq!(
            placed.iter().map(|p| p.first_entry).collect::<Vec<_>>(),
            [0, 1, 4]
        );
    }

    #[test]
    fn nothing_drawn_or_copied_holds_a_control_character() {
        // As an older ledger may hold them, or a line that came another way.
        let entries: Vec<String> = [
            "text: # Hi\x1b]52;c;ZXZpbA==\x07\n\n- a\x1b[2J\n\n```sh\x1b[31m\nrm -rf /\u{9b}1m\n```\n> quoted\r\x08",
            "tool Bash\x1b[0m: echo \x1b]0;title\x07",
            "tool done: \x1b[1mbold",
            "note: \u{85}next\x7f",
        ]
        .map(String::from)
        .to_vec();
        let items = layout(&blocks(&entries), 30, |_| true);
        assert!(items.len() > 6);
        for item in &items {
            for text in text_of(item).iter().chain([&item.copy]) {
                assert!(!text.chars().any(char::is_control), "{text:?}");
            }
        }
    }

    #[test]
    fn code_is_wrapped_only_between_words_under_its_indent() {
        let entries = vec![
            "text: ```rust\nfn main() {\n    let total = first_value + second_value + third_value;\n}\n```"
                .to_string(),
        ];
        let items = layout(&blocks(&entries), 30, |_| false);
        let rows: Vec<String> = items.iter().flat_map(text_of).collect();
        assert_eq!(
            rows,
            [
                "┌─ rust",
                "│ fn main() {",
                "│     let total = first_value",
                "│     + second_value +",
                "│     third_value;",
                "│ }",
                "└─",
            ]
        );
        // Copied as written, one line each, whatever the width.
        assert_eq!(
            items.iter().map(|i| i.copy.as_str()).collect::<Vec<_>>(),
            [
                "```rust",
                "fn main() {",
                "    let total = first_value + second_value + third_value;",
                "}",
                "```",
            ]
        );
    }

    #[test]
    fn headings_lists_and_blank_lines_read_as_written() {
        let entries = vec![
            "text: ## Plan\nsteps:\n- one\n  - nested\n- two\n\n3. three\n4. four\n\nDone."
                .to_string(),
        ];
        let items = layout(&blocks(&entries), 40, |_| false);
        let rows: Vec<String> = items.iter().flat_map(text_of).collect();
        assert_eq!(
            rows,
            [
                "## Plan",
                "steps:",
                "• one",
                "  • nested",
                "• two",
                "",
                "3. three",
                "4. four",
                "",
                "Done."
            ]
        );
    }
}
