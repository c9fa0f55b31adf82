//! The guard (docs/ARCHITECTURE.md §"Approval rules and the guard"): a pure function that
//! flags a permission request able to destroy work or leak secrets — recursive deletes of
//! the workspace or of anything outside it, history rewrites (`git push --force`, `git
//! reset --hard`, `git clean -f`, `git checkout -- .` in the user's own checkout), broad
//! `chmod -R`/`chown -R`, `dd`, `mkfs`, a download piped into a shell, writes outside the
//! workspace, reads of `~/.ssh`, `~/.aws` or `.env` files, `DROP DATABASE`/`DROP TABLE`,
//! `kubectl delete`, `terraform destroy` — also behind `sh -c`, `env`, `sudo`, `xargs` or a
//! chain ([`shell`] reads the command line), and whatever the config's `[guard] commands`
//! add.
//!
//! What must stay true: pure (paths are compared as text, resolved lexically against the
//! request's directory; nothing is read from disk); a flag carries a sentence a person
//! reads; a command that cannot be read is flagged rather than guessed at; a flagged
//! request always goes to the person, whatever the rules or "allow always" say (the
//! dispatcher's rule, in `dispatch/core/answers.rs`).

pub mod shell;

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::providers::{Ask, FileChange};
use crate::rules::pattern::CommandPattern;
use shell::Simple;

/// Why the guard stopped a request: shown in red over its prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// What the request would do that the guard stops, in one sentence.
    pub reason: String,
}

/// What the guard knows of where the request runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// The run's workspace: its worktree, or the shared directory it was given.
    pub workspace: Option<&'a Path>,
    /// Whether the workspace is the user's own checkout (a shared run), where discarding
    /// uncommitted changes loses the user's work.
    pub users_checkout: bool,
    /// The user's home directory (`~`).
    pub home: Option<&'a Path>,
    /// Commands config adds (`[guard] commands`).
    pub extra: &'a [CommandPattern],
}

/// The guard's verdict on one request: `Some` when it must go to the person.
pub fn check(ask: &Ask, ctx: &Context) -> Option<Flag> {
    let reason = match ask {
        Ask::Command { command, cwd, .. } => {
            let cwd = cwd.as_deref().map(Path::new).or(ctx.workspace);
            command_reason(command, cwd, ctx)
        }
        Ask::FileEdit {
            file_path,
            change,
            other_files,
        } => std::iter::once((file_path, change))
            .chain(other_files.iter().map(|f| (&f.file_path, &f.change)))
            .find_map(|(path, change)| {
                let to = match change {
                    FileChange::Move { to, .. } => Some(to.as_str()),
                    _ => None,
                };
                std::iter::once(path.as_str())
                    .chain(to)
                    .find_map(|p| edit_reason(p, ctx))
            }),
        Ask::Fetch { .. } | Ask::Question { .. } => None,
        Ask::McpTool { arguments, .. } => sql_reason(arguments),
        Ask::Other { subject, input, .. } => subject
            .as_deref()
            .and_then(|s| secret_reason(s, ctx))
            .or_else(|| sql_reason(input)),
    };
    reason.map(|reason| Flag { reason })
}

fn command_reason(text: &str, cwd: Option<&Path>, ctx: &Context) -> Option<String> {
    let commands = match shell::simple_commands(text) {
        Ok(c) => c,
        Err(shell::Unreadable) => {
            return Some("drover cannot split this command into words (an unclosed quote?)".into());
        }
    };
    if let Some(reason) = sql_reason(text) {
        return Some(reason);
    }
    let mut cwd = cwd.map(Path::to_path_buf);
    for (i, simple) in commands.iter().enumerate() {
        if let Some(reason) = simple_reason(
            simple,
            commands.get(..i).unwrap_or(&[]),
            cwd.as_deref(),
            ctx,
        ) {
            return Some(reason);
        }
        // `cd dir && …`: later commands run there.
        if simple.program() == "cd"
            && let Some(dir) = simple.args().first()
        {
            cwd = resolve(dir, cwd.as_deref(), ctx.home);
        }
    }
    None
}

fn simple_reason(
    s: &Simple,
    before: &[Simple],
    cwd: Option<&Path>,
    ctx: &Context,
) -> Option<String> {
    let args = s.args();
    let program = s.program();
    for pattern in ctx.extra {
        if pattern.matches(&s.words) {
            return Some(format!(
                "it matches `{}`, which your config guards",
                pattern.text()
            ));
        }
    }
    for target in &s.writes {
        if let Some(reason) = write_reason(target, cwd, ctx) {
            return Some(reason);
        }
    }
    for arg in args {
        if let Some(reason) = secret_reason(arg, ctx) {
            return Some(reason);
        }
    }
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let short = |letter: char| {
        args.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(letter))
    };
    let operands = || args.iter().filter(|a| !a.starts_with('-'));
    match program {
        "rm" if short('r') || short('R') || has("--recursive") => {
            operands().find_map(|t| delete_reason(t, cwd, ctx))
        }
        "shred" => Some("`shred` destroys file contents beyond recovery".into()),
        "find" if has("-delete") || (has("-exec") || has("-execdir")) && has("rm") => {
            let root = args.first().filter(|a| !a.starts_with('-'));
            delete_reason(root.map_or(".", String::as_str), cwd, ctx)
        }
        "git" => git_reason(args, ctx),
        "chmod" | "chown" | "chgrp" if short('R') || has("--recursive") => operands()
            .skip(1)
            .find_map(|t| broad_reason(t, cwd, ctx))
            .map(|where_| format!("`{program} -R` changes {where_}")),
        "dd" => Some("`dd` writes raw blocks: it can overwrite a disk or a file whole".into()),
        p if p == "mkfs" || p.starts_with("mkfs.") || p == "mke2fs" || p == "wipefs" => {
            Some(format!("`{p}` formats a disk"))
        }
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "python" | "python3" | "perl" | "ruby"
        | "node"
            if s.piped
                && before
                    .last()
                    .is_some_and(|b| matches!(b.program(), "curl" | "wget")) =>
        {
            Some(format!(
                "it runs a download straight in `{program}`, unseen"
            ))
        }
        // `$(curl …)` as the program: what the download says is run.
        _ if s.words.first().is_some_and(|w| {
            (w.starts_with("$(") || w.starts_with('`'))
                && (w.contains("curl") || w.contains("wget"))
        }) =>
        {
            Some("it runs a download straight in the shell, unseen".into())
        }
        "kubectl" if args.iter().any(|a| a == "delete" || a == "drain") => {
            Some("`kubectl delete` removes cluster resources".into())
        }
        "terraform" | "tofu" if args.iter().any(|a| a == "destroy" || a == "-destroy") => {
            Some("`terraform destroy` tears down infrastructure".into())
        }
        "cp" | "mv" | "install" | "rsync" | "ln" => operands()
            .next_back()
            .filter(|_| operands().count() >= 2)
            .and_then(|dest| write_reason(dest, cwd, ctx))
            .or_else(|| {
                (program == "mv")
                    .then(|| {
                        operands()
                            .rev()
                            .skip(1)
                            .find_map(|t| delete_reason(t, cwd, ctx))
                    })
                    .flatten()
                    .map(|r| r.replace("deletes", "moves away"))
            }),
        "tee" => operands().find_map(|t| write_reason(t, cwd, ctx)),
        _ => None,
    }
}

/// `git …`: the subcommand after git's own options.
fn git_reason(args: &[String], ctx: &Context) -> Option<String> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" => i += 2,
            a if a.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let sub = args.get(i)?.as_str();
    let rest = args.get(i + 1..).unwrap_or(&[]);
    let has = |flag: &str| {
        rest.iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    let short = |letter: char| {
        rest.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(letter))
    };
    match sub {
        "push"
            if has("--force")
                || has("--force-with-lease")
                || short('f')
                || rest.iter().any(|a| a.starts_with('+')) =>
        {
            Some("`git push --force` rewrites the remote's history".into())
        }
        "push" if has("--delete") || short('d') || rest.iter().any(|a| a.starts_with(':')) => {
            Some("`git push --delete` removes a remote branch".into())
        }
        "reset" if has("--hard") => Some("`git reset --hard` discards uncommitted work".into()),
        "clean" if has("--force") || short('f') => {
            Some("`git clean -f` deletes untracked files".into())
        }
        "checkout" | "restore"
            if ctx.users_checkout && rest.iter().any(|a| a == "." || a == "--" || a == ":/") =>
        {
            Some(format!(
                "`git {sub} .` discards your uncommitted changes in your own checkout"
            ))
        }
        "stash" if rest.first().is_some_and(|a| a == "drop" || a == "clear") => {
            Some("`git stash drop` loses stashed work".into())
        }
        "branch" if short('D') || (has("--delete") && has("--force")) => {
            Some("`git branch -D` deletes a branch with unmerged work".into())
        }
        _ => None,
    }
}

/// A recursive delete of `target`: flagged when it is the workspace, holds it, or lies
/// outside it.
fn delete_reason(target: &str, cwd: Option<&Path>, ctx: &Context) -> Option<String> {
    broad_reason(target, cwd, ctx).map(|where_| format!("a recursive delete of {where_}"))
}

/// Where a recursive change to `target` lands, when that is too broad: the workspace
/// root, something that holds it, something outside it, or a place drover cannot tell.
fn broad_reason(target: &str, cwd: Option<&Path>, ctx: &Context) -> Option<String> {
    if target.contains('$') || target.contains('`') {
        return Some(format!("`{target}`, a path drover cannot tell in advance"));
    }
    let Some(path) = resolve(target, cwd, ctx.home) else {
        return Some(format!("`{target}`, a path drover cannot tell in advance"));
    };
    let whole = target.ends_with('*') && path.parent().is_some_and(|p| Some(p) == ctx.workspace);
    match ctx.workspace {
        Some(ws) if path == ws || whole => Some("the whole workspace".into()),
        Some(ws) if ws.starts_with(&path) => {
            Some(format!("`{}`, which holds the workspace", path.display()))
        }
        Some(ws) if !path.starts_with(ws) => {
            Some(format!("`{}`, outside the workspace", path.display()))
        }
        Some(_) => None,
        None => Some(format!(
            "`{}`, with no workspace to keep it in",
            path.display()
        )),
    }
}

fn write_reason(target: &str, cwd: Option<&Path>, ctx: &Context) -> Option<String> {
    if matches!(
        target,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) {
        return None;
    }
    if let Some(reason) = secret_reason(target, ctx) {
        return Some(reason);
    }
    let ws = ctx.workspace?;
    match resolve(target, cwd, ctx.home) {
        Some(path) if path.starts_with(ws) => None,
        Some(path) => Some(format!(
            "it writes `{}`, outside the workspace",
            path.display()
        )),
        None => Some(format!(
            "it writes `{target}`, a path drover cannot tell in advance"
        )),
    }
}

fn edit_reason(path: &str, ctx: &Context) -> Option<String> {
    write_reason(path, ctx.workspace, ctx).map(|r| r.replacen("it writes", "it edits", 1))
}

/// A word naming a secret: `~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.netrc`, a `.env` file.
fn secret_reason(word: &str, ctx: &Context) -> Option<String> {
    let word = word.trim_start_matches(|c: char| {
        !(c == '/' || c == '~' || c == '.' || c == '$' || c.is_alphanumeric())
    });
    let parts: Vec<&str> = word.split('/').collect();
    for dir in [".ssh", ".aws", ".gnupg", ".kube", ".docker"] {
        if parts.contains(&dir) {
            return Some(format!(
                "it reaches into `{dir}`, where your credentials are"
            ));
        }
    }
    if let Some(name) = parts.last() {
        let env_file = *name == ".env"
            || (name.starts_with(".env.")
                && !name.ends_with(".example")
                && !name.ends_with(".sample")
                && !name.ends_with(".template"));
        if env_file {
            return Some(format!("it touches `{name}`, a file of secrets"));
        }
        if matches!(
            *name,
            ".netrc" | ".pgpass" | "credentials.json" | "id_rsa" | "id_ed25519"
        ) {
            return Some(format!("it touches `{name}`, a file of secrets"));
        }
    }
    let _ = ctx;
    None
}

/// SQL that drops or empties a database or a table, anywhere in the text.
fn sql_reason(text: &str) -> Option<String> {
    static SQL: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b(drop\s+(database|schema|table)|truncate\s+table)\b")
            .expect("a valid regex")
    });
    SQL.find(text).map(|m| {
        format!(
            "it runs `{}`, which destroys data",
            m.as_str().to_uppercase()
        )
    })
}

/// `target` as an absolute, normalized path: `~` is the home directory, a relative path
/// is taken from `cwd`. `None` when it cannot be told (relative with no `cwd`, `~` with
/// no home, `~user`).
pub fn resolve(target: &str, cwd: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    let joined = if target == "~" {
        home?.to_path_buf()
    } else if let Some(rest) = target.strip_prefix("~/") {
        home?.join(rest)
    } else if target.starts_with('~') {
        return None;
    } else if Path::new(target).is_absolute() {
        PathBuf::from(target)
    } else {
        cwd?.join(target)
    };
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    // `dir/*`: the glob's directory is what is hit.
    if out
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains('*'))
    {
        out.pop();
        out.push("*");
    }
    Some(out)
}

#[cfg(test)]
mod tests;
