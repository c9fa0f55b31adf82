//! Into a run's directory: the command line that opens the user's editor or shell where a
//! run works, in the foreground or in a new tmux window
//! (docs/ARCHITECTURE.md §"Into a run"). The dashboard's `o` and `!` and `drover open`
//! build it here, and only here.
//!
//! What must stay true: pure — the environment comes in as a function; the program comes
//! from the user's own variables (`$VISUAL`, `$EDITOR`, `$SHELL`), split as a shell would
//! split them and never run through a shell; a run without a directory yet is refused
//! with a sentence saying when it will have one.

use std::path::PathBuf;

use super::WorkspaceView;
use crate::{DroverError, ErrorCode};

/// What to open in a run's directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `$VISUAL`, else `$EDITOR`, else `vi`, on the directory.
    Editor,
    /// `$SHELL`, else `/bin/sh`, in the directory.
    Shell,
    /// `drover attach RUN`: the run's CLI in its own interface (a take-over; its command
    /// comes from [`take_over_plan`]).
    TakeOver,
}

impl Program {
    /// The word for it in messages (`editor`, `shell`).
    pub fn word(self) -> &'static str {
        match self {
            Program::Editor => "editor",
            Program::Shell => "shell",
            Program::TakeOver => "take-over",
        }
    }
}

/// Where a tmux client opens the program: a new window, or a split of the dashboard's
/// (`[dashboard] open_in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TmuxPlace {
    /// `tmux new-window`, named after the run.
    #[default]
    Window,
    /// `tmux split-window -h` beside the dashboard.
    Split,
}

/// The program's command line (run with the run's directory as its working directory).
pub fn argv(
    program: Program,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>, DroverError> {
    let (names, fallback, extra): (&[&str], &str, &[&str]) = match program {
        Program::Editor => (&["VISUAL", "EDITOR"], "vi", &["."]),
        Program::Shell => (&["SHELL"], "/bin/sh", &[]),
        Program::TakeOver => {
            return Err(DroverError::new(
                ErrorCode::Internal,
                "a take-over's command line comes from take_over_plan",
            ));
        }
    };
    let chosen = names.iter().find_map(|name| {
        env(name)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (*name, v))
    });
    let mut words = match chosen {
        Some((name, value)) => shell_words::split(&value).map_err(|e| {
            DroverError::new(
                ErrorCode::InvalidSpec,
                format!(
                    "${name} (`{value}`) cannot be read as a command line ({e}); fix its quotes, or unset it to use `{fallback}`"
                ),
            )
        })?,
        None => vec![fallback.to_string()],
    };
    words.extend(extra.iter().map(|s| s.to_string()));
    Ok(words)
}

/// The tmux command line that opens `argv` in `dir`, in a window named `name` or a split.
pub fn in_tmux_argv(argv: &[String], dir: &str, name: &str, place: TmuxPlace) -> Vec<String> {
    let mut out: Vec<String> = match place {
        TmuxPlace::Window => vec!["tmux".into(), "new-window".into(), "-n".into(), name.into()],
        TmuxPlace::Split => vec!["tmux".into(), "split-window".into(), "-h".into()],
    };
    out.extend(["-c".to_string(), dir.to_string()]);
    out.extend(argv.iter().cloned());
    out
}

/// What to run to open `program` in a run's directory, decided once for the dashboard and
/// `drover open`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The run's directory (the program's working directory).
    pub dir: PathBuf,
    /// The command line: the program's own, or inside tmux the `tmux` one that opens it.
    pub argv: Vec<String>,
    /// Inside tmux: the program opens beside the caller, which goes on at once.
    pub in_tmux: bool,
}

/// The [`Plan`] for `program` in run `run_id`'s directory, with the caller's environment
/// (`$TMUX` says whether it is inside tmux) and `[dashboard] open_in`.
pub fn plan(
    run_id: &str,
    workspace: Option<&WorkspaceView>,
    program: Program,
    env: impl Fn(&str) -> Option<String>,
    place: TmuxPlace,
) -> Result<Plan, DroverError> {
    let own = argv(program, &env)?;
    placed(run_id, workspace, program, own, env, place)
}

/// The [`Plan`] of a take-over (`T`): `drover attach RUN` — this drover, on its data
/// directory `home` — opened where a shell would be.
pub fn take_over_plan(
    run_id: &str,
    workspace: Option<&WorkspaceView>,
    drover: &std::path::Path,
    home: &std::path::Path,
    env: impl Fn(&str) -> Option<String>,
    place: TmuxPlace,
) -> Result<Plan, DroverError> {
    let own = vec![
        "env".to_string(),
        format!("{}={}", crate::paths::HOME_ENV, home.display()),
        drover.display().to_string(),
        "attach".to_string(),
        run_id.to_string(),
    ];
    placed(run_id, workspace, Program::TakeOver, own, env, place)
}

/// `own` opened in the run's directory: as it is, or inside tmux in a window or split.
fn placed(
    run_id: &str,
    workspace: Option<&WorkspaceView>,
    program: Program,
    own: Vec<String>,
    env: impl Fn(&str) -> Option<String>,
    place: TmuxPlace,
) -> Result<Plan, DroverError> {
    let dir = dir_of(run_id, workspace)?;
    let in_tmux = env("TMUX").is_some_and(|t| !t.is_empty());
    let argv = if in_tmux {
        let name = format!("{run_id} {}", program.word());
        in_tmux_argv(&own, &dir.display().to_string(), &name, place)
    } else {
        own
    };
    Ok(Plan { dir, argv, in_tmux })
}

/// Where the run works: its worktree's directory, or the directory a shared run was
/// given. Refused while a worktree is still being made, or for a run with none.
pub fn dir_of(run_id: &str, workspace: Option<&WorkspaceView>) -> Result<PathBuf, DroverError> {
    match workspace
        .and_then(|w| w.dir.as_deref())
        .filter(|d| !d.is_empty())
    {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Err(DroverError::new(
            ErrorCode::NoWorktree,
            format!(
                "run {run_id} has no directory yet (its worktree is being made); try again once it starts working"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_program_comes_from_the_users_variables_split_as_a_shell_would() {
        type Vars = &'static [(&'static str, &'static str)];
        // (program, environment, command line)
        let cases: &[(Program, Vars, &[&str])] = &[
            (Program::Editor, &[], &["vi", "."]),
            (Program::Editor, &[("EDITOR", "nano")], &["nano", "."]),
            (
                Program::Editor,
                &[("EDITOR", "nano"), ("VISUAL", "code --wait")],
                &["code", "--wait", "."],
            ),
            (
                Program::Editor,
                &[("VISUAL", "  "), ("EDITOR", "'/opt/my editor/ed' -x")],
                &["/opt/my editor/ed", "-x", "."],
            ),
            (Program::Shell, &[], &["/bin/sh"]),
            (
                Program::Shell,
                &[("SHELL", "/usr/bin/fish")],
                &["/usr/bin/fish"],
            ),
        ];
        for (program, vars, want) in cases {
            let got = argv(*program, &env(vars)).unwrap();
            assert_eq!(got, *want, "{program:?} with {vars:?}");
        }
        let e = argv(Program::Editor, &env(&[("EDITOR", "vim 'unclosed")])).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidSpec);
        assert!(
            e.message.contains("$EDITOR") && e.message.contains("quotes"),
            "{e}"
        );
    }

    #[test]
    fn inside_tmux_it_opens_in_a_window_named_after_the_run_or_a_split() {
        let argv = vec!["nvim".to_string(), ".".to_string()];
        assert_eq!(
            in_tmux_argv(&argv, "/w/r1", "r1 editor", TmuxPlace::Window),
            [
                "tmux",
                "new-window",
                "-n",
                "r1 editor",
                "-c",
                "/w/r1",
                "nvim",
                "."
            ]
        );
        assert_eq!(
            in_tmux_argv(&argv, "/w/r1", "r1 editor", TmuxPlace::Split),
            ["tmux", "split-window", "-h", "-c", "/w/r1", "nvim", "."]
        );
    }

    #[test]
    fn a_run_works_in_its_worktree_or_given_directory_and_none_is_refused() {
        let shared = WorkspaceView::shared(std::path::Path::new("/home/me/app"));
        assert_eq!(
            dir_of("r1", Some(&shared)).unwrap(),
            PathBuf::from("/home/me/app")
        );
        for none in [Some(WorkspaceView::preparing()), None] {
            let e = dir_of("r1", none.as_ref()).unwrap_err();
            assert_eq!(e.code, ErrorCode::NoWorktree);
            assert!(e.message.contains("r1 has no directory yet"), "{e}");
        }
    }
}
