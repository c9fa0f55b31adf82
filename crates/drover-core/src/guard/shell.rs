//! A command line as the simple commands a shell would run: the text is cut at its
//! unquoted control operators (`;`, `&&`, `||`, `|`, `&`, newlines), each piece is split
//! into words by `shell-words`, and wrappers that run another command (`sh -c`,
//! `bash -lc`, `env`, `sudo`, `xargs`, `nohup`, `time`, `nice`, `command`, `exec`,
//! `timeout`) are peeled off to the command they run.
//!
//! Owns only the reading of a command line; what is dangerous is the guard's, what is
//! allowed is the rules'. What must stay true: pure (no file system, no process); a text
//! that cannot be split (an unclosed quote) is reported as such, never guessed at;
//! nesting is bounded ([`MAX_DEPTH`]), so a hostile command cannot make this loop.

/// How deep `sh -c 'sh -c …'` is followed.
pub const MAX_DEPTH: usize = 8;

/// One simple command: its words, its redirections, and whether it reads the output of
/// the command before it through a pipe.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Simple {
    /// The command's words, wrappers removed (`sudo rm -rf x` → `rm -rf x`).
    pub words: Vec<String>,
    /// Files written by `>` / `>>` redirections.
    pub writes: Vec<String>,
    /// Reads the previous command's output (`a | b`: true for `b`).
    pub piped: bool,
    /// The wrappers peeled off, outermost first (`sudo`, `sh`, …).
    pub wrappers: Vec<String>,
}

impl Simple {
    /// The program's name without its directory (`/usr/bin/git` → `git`).
    pub fn program(&self) -> &str {
        self.words.first().map_or("", |w| basename(w))
    }

    /// The words after the program.
    pub fn args(&self) -> &[String] {
        self.words.get(1..).unwrap_or(&[])
    }
}

/// Why a command line could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable;

/// The simple commands of `text`, in order, wrappers followed into.
pub fn simple_commands(text: &str) -> Result<Vec<Simple>, Unreadable> {
    let mut out = Vec::new();
    parse_into(text, 0, &mut out, &[])?;
    Ok(out)
}

fn parse_into(
    text: &str,
    depth: usize,
    out: &mut Vec<Simple>,
    wrappers: &[String],
) -> Result<(), Unreadable> {
    if depth > MAX_DEPTH {
        return Err(Unreadable);
    }
    for (piece, piped) in pieces(text)? {
        let words = shell_words::split(&piece).map_err(|_| Unreadable)?;
        let mut simple = Simple {
            piped,
            wrappers: wrappers.to_vec(),
            ..Simple::default()
        };
        let words = take_redirections(words, &mut simple.writes);
        let words = strip_grouping(words);
        match unwrap(words, &mut simple.wrappers) {
            Unwrapped::Script(script) => {
                let inner = simple.wrappers.clone();
                let start = out.len();
                parse_into(&script, depth + 1, out, &inner)?;
                // The script's first command reads what the wrapper read.
                if let Some(first) = out.get_mut(start) {
                    first.piped |= piped;
                    first.writes.extend(simple.writes);
                }
            }
            Unwrapped::Words(words) => {
                simple.words = words;
                if !simple.words.is_empty() || !simple.writes.is_empty() {
                    out.push(simple);
                }
            }
        }
    }
    Ok(())
}

/// The text cut at unquoted control operators; each piece with whether a pipe feeds it.
/// `$(…)` and backquotes are kept inside their piece (their text is still looked at by
/// the guard, as words).
fn pieces(text: &str) -> Result<Vec<(String, bool)>, Unreadable> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut piped = false;
    let mut chars = text.chars().peekable();
    let (mut single, mut double) = (false, false);
    let mut paren = 0usize;
    while let Some(c) = chars.next() {
        if single {
            single = c != '\'';
            current.push(c);
            continue;
        }
        match c {
            '\\' => {
                current.push(c);
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            '\'' if !double => {
                single = true;
                current.push(c);
            }
            '"' => {
                double = !double;
                current.push(c);
            }
            '$' if chars.peek() == Some(&'(') => {
                paren += 1;
                current.push(c);
                current.push('(');
                chars.next();
            }
            ')' if paren > 0 => {
                paren -= 1;
                current.push(c);
            }
            _ if double || paren > 0 => current.push(c),
            ';' | '\n' | '&' | '|' => {
                let pipe = c == '|' && chars.peek() != Some(&'|');
                let doubled = matches!((c, chars.peek()), ('&', Some('&')) | ('|', Some('|')));
                // `>&2`, `2>&1`, `&>` are redirections, not operators.
                let redirect = c == '&'
                    && (current.ends_with('>')
                        || current.ends_with('<')
                        || chars.peek() == Some(&'>'));
                if redirect {
                    current.push(c);
                    continue;
                }
                if doubled {
                    chars.next();
                }
                out.push((std::mem::take(&mut current), piped));
                piped = pipe;
            }
            _ => current.push(c),
        }
    }
    if single || double || paren > 0 {
        return Err(Unreadable);
    }
    out.push((current, piped));
    Ok(out
        .into_iter()
        .filter(|(p, _)| !p.trim().is_empty())
        .collect())
}

/// Takes `>`/`>>` redirections out of the words, noting the files they write.
fn take_redirections(words: Vec<String>, writes: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut iter = words.into_iter();
    while let Some(word) = iter.next() {
        let bare = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
        if let Some(rest) = bare.strip_prefix(">>").or_else(|| bare.strip_prefix('>')) {
            let rest = rest.trim_start_matches(['|', '&']);
            if word.contains(">&") && rest.chars().all(|c| c.is_ascii_digit() || c == '-') {
                continue; // `2>&1`: a descriptor, not a file
            }
            if rest.is_empty() {
                if let Some(target) = iter.next() {
                    writes.push(target);
                }
            } else {
                writes.push(rest.to_string());
            }
            continue;
        }
        if let Some(rest) = bare.strip_prefix('<') {
            if rest.is_empty() {
                iter.next();
            }
            continue;
        }
        out.push(word);
    }
    out
}

/// Drops subshell and group brackets: `(cd x && rm y)`, `{ a; }`.
fn strip_grouping(words: Vec<String>) -> Vec<String> {
    words
        .into_iter()
        .filter_map(|w| {
            let mut t = w.trim_start_matches('(');
            // A `)` closes a subshell only when it has no `(` of its own (`$(…)` keeps it).
            while t.ends_with(')') && t.matches(')').count() > t.matches('(').count() {
                t = &t[..t.len() - 1];
            }
            match t {
                "" | "{" | "}" => None,
                _ => Some(t.to_string()),
            }
        })
        .collect()
}

enum Unwrapped {
    Words(Vec<String>),
    Script(String),
}

/// Peels wrappers off the front of `words`, recording each.
fn unwrap(mut words: Vec<String>, wrappers: &mut Vec<String>) -> Unwrapped {
    for _ in 0..MAX_DEPTH {
        // Leading `NAME=value` assignments.
        let assignments = words.iter().take_while(|w| is_assignment(w)).count();
        words.drain(..assignments);
        let Some(first) = words.first() else {
            return Unwrapped::Words(words);
        };
        let program = basename(first).to_string();
        let skip = match program.as_str() {
            "sh" | "bash" | "zsh" | "dash" | "ksh" => {
                // `bash -lc 'script'`: the first word after a flag group holding `c`.
                let c_at = words
                    .iter()
                    .skip(1)
                    .position(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('c'));
                match c_at {
                    Some(i) => {
                        wrappers.push(program);
                        return match words.get(i + 2) {
                            Some(script) => Unwrapped::Script(script.clone()),
                            None => Unwrapped::Words(Vec::new()),
                        };
                    }
                    None => return Unwrapped::Words(words),
                }
            }
            "env" => options_then_command(&words, &["-u", "--unset", "-C", "--chdir", "-S"], true),
            "sudo" | "doas" => options_then_command(
                &words,
                &["-u", "-g", "-U", "-C", "-D", "-h", "-p", "-r", "-t", "-T"],
                false,
            ),
            "xargs" => options_then_command(
                &words,
                &[
                    "-I",
                    "-n",
                    "-P",
                    "-L",
                    "-s",
                    "-d",
                    "-E",
                    "-a",
                    "--max-args",
                    "--delimiter",
                ],
                false,
            ),
            "nohup" | "command" | "exec" | "builtin" => options_then_command(&words, &[], false),
            "time" => options_then_command(&words, &["-f", "-o"], false),
            "nice" => options_then_command(&words, &["-n"], false),
            "timeout" => options_then_command(&words, &["-s", "-k", "--signal"], false) + 1,
            _ => return Unwrapped::Words(words),
        };
        wrappers.push(program);
        words.drain(..skip.min(words.len()));
    }
    Unwrapped::Words(words)
}

/// How many words a wrapper takes before the command it runs: its name, its options
/// (`with_value` take the next word), and for `env` its `NAME=value` words.
fn options_then_command(words: &[String], with_value: &[&str], assignments: bool) -> usize {
    let mut i = 1;
    while let Some(w) = words.get(i) {
        if w == "--" {
            return i + 1;
        }
        if with_value.contains(&w.as_str()) {
            i += 2;
        } else if w.starts_with('-') || (assignments && is_assignment(w)) {
            i += 1;
        } else {
            break;
        }
    }
    i
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// A path's last part (`/bin/bash` → `bash`).
pub fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Vec<String>> {
        simple_commands(text)
            .expect("parses")
            .into_iter()
            .map(|s| s.words)
            .collect()
    }

    #[test]
    fn chains_wrappers_and_redirections_come_apart() {
        let table: Vec<(&str, Vec<Vec<&str>>)> = vec![
            ("ls -la", vec![vec!["ls", "-la"]]),
            (
                "cargo test&&rm -rf x",
                vec![vec!["cargo", "test"], vec!["rm", "-rf", "x"]],
            ),
            (
                "a; b || c & d",
                vec![vec!["a"], vec!["b"], vec!["c"], vec!["d"]],
            ),
            ("echo 'a && b'", vec![vec!["echo", "a && b"]]),
            (
                "bash -lc 'cd x && rm -rf .'",
                vec![vec!["cd", "x"], vec!["rm", "-rf", "."]],
            ),
            (
                "sudo -u root env A=1 rm -rf /",
                vec![vec!["rm", "-rf", "/"]],
            ),
            (
                "find . | xargs -n 1 rm -rf",
                vec![vec!["find", "."], vec!["rm", "-rf"]],
            ),
            (
                "FOO=1 /bin/sh -c \"git push -f\"",
                vec![vec!["git", "push", "-f"]],
            ),
            ("echo hi > out.txt 2>&1", vec![vec!["echo", "hi"]]),
            ("(cd a && make)", vec![vec!["cd", "a"], vec!["make"]]),
            ("timeout 5 nohup rm -r y", vec![vec!["rm", "-r", "y"]]),
        ];
        for (text, expected) in table {
            let expected: Vec<Vec<String>> = expected
                .into_iter()
                .map(|w| w.into_iter().map(str::to_string).collect())
                .collect();
            assert_eq!(words(text), expected, "{text}");
        }
    }

    #[test]
    fn pipes_and_writes_are_noted() {
        let got = simple_commands("curl -s x | sudo bash").unwrap();
        assert!(!got[0].piped);
        assert!(got[1].piped);
        assert_eq!(got[1].program(), "bash");
        let got = simple_commands("echo x >> /etc/hosts; cat a >b").unwrap();
        assert_eq!(got[0].writes, vec!["/etc/hosts"]);
        assert_eq!(got[1].writes, vec!["b"]);
        assert_eq!(simple_commands("echo 'open"), Err(Unreadable));
        let deep = "sh -c 'sh -c \"ls\"'";
        assert_eq!(words(deep), vec![vec!["ls".to_string()]]);
    }
}
