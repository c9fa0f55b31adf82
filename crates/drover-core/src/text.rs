//! Short, safe text for one-line places: titles, list items, echoes in error sentences.
//!
//! Owns clipping, line-folding and the small words of a sentence (durations in words,
//! plural endings, lists joined with "or", `provider/model`), for every client (the
//! dashboard, the headless commands, the sim). What must stay true: a clipped string
//! never has more characters than asked for, is cut on a char boundary, and ends in "…"
//! when something was cut; nothing here panics on any input.

/// A duration in words a person reads at a glance: `45 s`, `10 min`, `2 h`.
pub fn duration_words(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7_200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3_600),
    }
}

/// `n` in base 36 (digits, then lower-case letters): short ids made of a time and a count.
pub fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// `text` cut to at most `max_chars` characters. When something is cut, the result ends
/// in "…" (counted within `max_chars`) with the whitespace before it dropped.
pub fn clip(text: &str, max_chars: usize) -> String {
    match kept_when_clipped(text, max_chars) {
        None => text.to_string(),
        Some(kept) => {
            let mut out = String::with_capacity(kept + '…'.len_utf8());
            out.push_str(&text[..kept]);
            if max_chars > 0 {
                out.push('…');
            }
            out
        }
    }
}

/// [`clip`] of a string of one's own, in place: nothing is copied or allocated when it
/// fits.
pub fn clip_in_place(text: &mut String, max_chars: usize) {
    if let Some(kept) = kept_when_clipped(text, max_chars) {
        text.truncate(kept);
        if max_chars > 0 {
            text.push('…');
        }
    }
}

/// How many bytes of `text` [`clip`] keeps before its "…", or `None` when it fits.
fn kept_when_clipped(text: &str, max_chars: usize) -> Option<usize> {
    if max_chars == 0 {
        return Some(0);
    }
    // Only walk as far as needed: a huge input costs `max_chars` steps, not its length.
    text.char_indices().nth(max_chars)?;
    let cut = text
        .char_indices()
        .nth(max_chars - 1)
        .map_or(text.len(), |(at, _)| at);
    Some(text[..cut].trim_end().len())
}

/// `text` on one line: runs of whitespace and control characters become one space, and
/// the ends are trimmed.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(256));
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Whether `text` has anything to read once whitespace and control characters are gone.
pub fn has_visible_text(text: &str) -> bool {
    text.chars().any(|c| !c.is_whitespace() && !c.is_control())
}

/// A value the user sent, quoted for an error sentence: one line, at most 60 characters.
pub fn quoted(text: &str) -> String {
    format!("\"{}\"", clip(&one_line(text), 60))
}

/// A run's provider and model as one name: `sim/claude-sonnet-4-5`, or the provider
/// alone when there is no model (yet).
pub fn provider_model(provider: &str, model: Option<&str>) -> String {
    match model {
        Some(model) if !model.is_empty() => format!("{provider}/{model}"),
        _ => provider.to_string(),
    }
}

/// The plural ending of a count's noun: `""` for one, `"s"` otherwise (`{n} run{}`).
pub fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Words joined for a sentence: `a`, `a or b`, `a, b or c`.
pub fn either<S: AsRef<str>>(words: &[S]) -> String {
    joined(words, "or")
}

/// Words joined for a sentence: `a`, `a and b`, `a, b and c`.
pub fn all_of<S: AsRef<str>>(words: &[S]) -> String {
    joined(words, "and")
}

fn joined<S: AsRef<str>>(words: &[S], conjunction: &str) -> String {
    match words {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [init @ .., last] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} {conjunction} {}", init.join(", "), last.as_ref())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_short_text_and_cuts_long_text_inside_the_limit() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 5, ""),
            ("abc", 3, "abc"),
            ("abcd", 3, "ab…"),
            ("ab cd", 4, "ab…"),
            ("ééééé", 4, "ééé…"),
            ("日本語テキスト", 3, "日本…"),
            ("🦀🦀🦀", 2, "🦀…"),
            ("abc", 1, "…"),
            ("abc", 0, ""),
        ];
        for &(text, max, want) in cases {
            let got = clip(text, max);
            assert_eq!(got, want, "clip({text:?}, {max})");
            assert!(got.chars().count() <= max);
            let mut own = text.to_string();
            clip_in_place(&mut own, max);
            assert_eq!(own, want, "clip_in_place({text:?}, {max})");
        }
    }

    #[test]
    fn one_line_folds_whitespace_and_control_characters() {
        let cases: &[(&str, &str)] = &[
            ("  a  b\t\tc \n d ", "a b c d"),
            ("a\r\nb", "a b"),
            ("x\u{1b}[31mred", "x [31mred"),
            ("\u{7}", ""),
            ("", ""),
        ];
        for &(text, want) in cases {
            assert_eq!(one_line(text), want, "one_line({text:?})");
        }
    }

    #[test]
    fn either_lists_words_for_a_sentence() {
        assert_eq!(either::<&str>(&[]), "");
        assert_eq!(either(&["a"]), "a");
        assert_eq!(either(&["a", "b"]), "a or b");
        assert_eq!(either(&["a", "b", "c"]), "a, b or c");
        assert_eq!(all_of(&["a", "b", "c"]), "a, b and c");
        assert_eq!(all_of(&["a"]), "a");
    }

    #[test]
    fn plural_endings_follow_the_count() {
        assert_eq!(format!("{} run{}", 0, plural(0)), "0 runs");
        assert_eq!(format!("{} run{}", 1, plural(1)), "1 run");
        assert_eq!(format!("{} run{}", 2, plural(2)), "2 runs");
    }

    #[test]
    fn quoted_echoes_are_short_and_on_one_line() {
        assert_eq!(quoted("x\ny"), "\"x y\"");
        let long = "m".repeat(1_000);
        assert_eq!(quoted(&long).chars().count(), 62);
    }
}
