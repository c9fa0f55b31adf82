//! Running a provider CLI under bubblewrap (`bwrap`): the whole file system read-only but
//! the run's directory and the CLI's own state, a private `/tmp`, the user's secrets, the
//! checkout and drover's data hidden (docs/ARCHITECTURE.md §"The sandbox").
//!
//! [`Sandbox::wrap`] turns a child's command into the `bwrap` command that runs it, and
//! [`crate::providers::process::spawn`] calls it for every provider, so there is one
//! place where a sandboxed run's child starts. What must stay true:
//! - a run asked to be sandboxed never starts unsandboxed: `bwrap` missing, or unable to
//!   make its namespaces ([`probe`]), refuses the run with `SANDBOX_UNAVAILABLE` and the
//!   install command;
//! - `bwrap` is the child drover spawns, so it leads the run's process group; the CLI
//!   stays in that group (no `--new-session`) and in a pid namespace of its own, so ending
//!   the group ends the CLI, and the namespace's end (its first process dies with `bwrap`,
//!   `--die-with-parent`) ends whatever the CLI started in sessions of its own;
//! - a hidden directory is an empty read-only directory in the sandbox; what is shown
//!   again inside one (the run's worktree under the worktrees root, the owner's socket
//!   under the data directory) is bound after it, and hidden directories are made
//!   read-only last, once every mount point inside them exists.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{DroverError, ErrorCode};

/// The bubblewrap executable, looked up on `PATH`.
pub const BWRAP: &str = "bwrap";

/// The install commands the refusal names.
pub const INSTALL: &str = "`apt install bubblewrap` or `dnf install bubblewrap`";

/// How long the probe may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Files and directories in the user's home a sandboxed CLI never sees: keys and
/// credentials of other tools.
pub const SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gh",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
];

/// What a sandboxed run's CLI may see and change, as the dispatcher knows it; the
/// provider's adapter adds its CLI's own state ([`Sandbox::writable`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sandbox {
    /// The CLI reaches the network (`[limits] sandbox_network`); `false`: a network
    /// namespace of its own, with only loopback.
    pub network: bool,
    /// The run's directory, read-write: its whole worktree, or a shared run's cwd.
    pub work_dir: PathBuf,
    /// Hidden (an empty read-only directory in their place, when they exist): the
    /// user's checkout, the worktrees root, drover's data directory.
    pub hidden: Vec<PathBuf>,
    /// Read-write besides the run's directory: the CLI's own state (its sessions).
    pub writable: Vec<PathBuf>,
    /// Readable even inside a hidden directory: the owner's control socket (for
    /// drover's MCP server in the run), a scenario file, drover's config.
    pub readable: Vec<PathBuf>,
    /// The user's home, whose [`SECRETS`] are hidden.
    pub home: Option<PathBuf>,
}

/// Fills in what only the run's CLI knows: its own state, read-write (created first when
/// missing, so it can be bound: the CLI would make it anyway), what it reads from where
/// the sandbox hides it, and the user's home (from the run's environment, else drover's).
/// A provider with no line here gets no state of its own: a new provider adds its line.
pub fn for_cli(spec: &mut super::LaunchSpec) {
    use super::interactive::{state_dir, var};
    let Some(sandbox) = spec.sandbox.as_mut() else {
        return;
    };
    let env = &spec.env;
    let home = var(env, "HOME").map(PathBuf::from);
    let xdg = |variable: &str, dot: &str| state_dir(env, variable, dot).map(|d| d.join("opencode"));
    let (dirs, files): (Vec<Option<PathBuf>>, Vec<Option<PathBuf>>) = match spec.provider.as_str() {
        // Its sessions, settings and credentials; `.claude.json` beside the directory
        // unless `CLAUDE_CONFIG_DIR` holds it.
        "claude-code" => (
            vec![state_dir(env, "CLAUDE_CONFIG_DIR", ".claude")],
            vec![
                var(env, "CLAUDE_CONFIG_DIR")
                    .is_none()
                    .then(|| home.as_ref().map(|h| h.join(".claude.json")))
                    .flatten(),
            ],
        ),
        "codex" => (vec![state_dir(env, "CODEX_HOME", ".codex")], Vec::new()),
        "opencode" => (
            vec![
                xdg("XDG_DATA_HOME", ".local/share"),
                xdg("XDG_STATE_HOME", ".local/state"),
                xdg("XDG_CONFIG_HOME", ".config"),
                xdg("XDG_CACHE_HOME", ".cache"),
            ],
            Vec::new(),
        ),
        // The simulated agent keeps its sessions in drover's data directory and reads
        // a scenario file it is given.
        crate::config::SIM_PROVIDER => {
            let scenario = spec
                .scenario
                .as_deref()
                .filter(|s| crate::sim::scenario::looks_like_path(s))
                .map(|s| std::path::absolute(s).unwrap_or_else(|_| PathBuf::from(s)));
            sandbox.readable.extend(scenario);
            (
                vec![var(env, crate::paths::HOME_ENV).map(|d| Path::new(&d).join("sim-sessions"))],
                Vec::new(),
            )
        }
        _ => (Vec::new(), Vec::new()),
    };
    for dir in dirs.into_iter().flatten() {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), "cannot make the CLI's state directory for its sandbox: {e}");
        }
        sandbox.writable.push(dir);
    }
    sandbox.writable.extend(files.into_iter().flatten());
    sandbox.home = home;
}

/// The git directories of a linked worktree: its own (`.git/worktrees/NAME`) and the
/// repository's common one (the checkout's `.git`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDirs {
    /// The directory `dir/.git` names (`gitdir: …`), or `dir/.git` itself.
    pub git_dir: PathBuf,
    /// The repository's common directory (`commondir` in the git directory), or the git
    /// directory itself for a main checkout.
    pub common_dir: PathBuf,
}

/// The git directories of the work tree `dir` is in, read from the `.git` files without
/// git (both canonical). `None` outside a git work tree.
pub fn git_dirs(dir: &Path) -> Option<GitDirs> {
    dir.ancestors().find_map(|d| {
        let dot_git = d.join(".git");
        if dot_git.is_dir() {
            // A `.git` without a HEAD is no repository.
            let git_dir = dot_git
                .join("HEAD")
                .is_file()
                .then(|| std::fs::canonicalize(&dot_git).ok())
                .flatten()?;
            return Some(GitDirs {
                common_dir: git_dir.clone(),
                git_dir,
            });
        }
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let gitdir = d.join(text.strip_prefix("gitdir:")?.trim());
        let common = match std::fs::read_to_string(gitdir.join("commondir")) {
            Ok(rel) => gitdir.join(rel.trim()),
            Err(_) => gitdir.clone(),
        };
        Some(GitDirs {
            git_dir: std::fs::canonicalize(gitdir).ok()?,
            common_dir: std::fs::canonicalize(common).ok()?,
        })
    })
}

impl Sandbox {
    /// The `bwrap` command line that runs `program args…` in `cwd` inside this sandbox
    /// (`bwrap`'s path, its arguments). Refused with `SANDBOX_UNAVAILABLE` when `bwrap`
    /// cannot run here ([`probe`]): never unsandboxed.
    pub fn wrap(
        &self,
        program: &Path,
        args: &[String],
        cwd: &Path,
    ) -> Result<(PathBuf, Vec<String>), DroverError> {
        let bwrap = probe()?.path;
        let mut argv = self.bwrap_args(cwd);
        // The program itself stays reachable, wherever it lives: one inside a hidden
        // directory is shown again, at its real path.
        let mut program = program.to_path_buf();
        if let Ok(real) = std::fs::canonicalize(&program)
            && program.is_absolute()
            && self.hidden.iter().any(|h| real.starts_with(real_path(h)))
        {
            let shown = real.display().to_string();
            argv.extend(["--ro-bind".into(), shown.clone(), shown]);
            program = real;
        }
        argv.push("--".into());
        argv.push(program.display().to_string());
        argv.extend(args.iter().cloned());
        Ok((bwrap, argv))
    }

    /// `bwrap`'s options for this sandbox, up to (not including) the `--` before the
    /// command.
    pub fn bwrap_args(&self, cwd: &Path) -> Vec<String> {
        let mut a = Args::default();
        a.flag("--die-with-parent");
        a.flag("--unshare-pid");
        a.flag("--unshare-ipc");
        if !self.network {
            a.flag("--unshare-net");
        }
        a.two("--ro-bind", "/");
        a.one("--dev", "/dev");
        a.one("--proc", "/proc");
        a.one("--tmpfs", "/tmp");
        a.one("--tmpfs", "/dev/shm");
        let mut hidden_dirs: Vec<PathBuf> = Vec::new();
        let secrets = self
            .home
            .iter()
            .flat_map(|home| SECRETS.iter().map(move |s| home.join(s)));
        // Outermost first, and nothing inside what is already hidden: a mask mounted over
        // another would cover it. Real paths: bubblewrap mounts on no symbolic link.
        let mut hiding: Vec<PathBuf> = self
            .hidden
            .iter()
            .cloned()
            .chain(secrets)
            .map(|p| real_path(&p))
            .collect();
        hiding.sort_by_key(|p| p.components().count());
        for path in hiding {
            if hidden_dirs.iter().any(|h| path.starts_with(h)) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                a.one("--tmpfs", &path);
                hidden_dirs.push(path);
            } else {
                a.ro_bind_to("/dev/null", &path);
            }
        }
        // The run's git data: a linked worktree's `.git` file points into the checkout's
        // `.git`, which the hidden checkout would hide. Its objects, refs and logs, and the
        // worktree's own directory, are writable (a commit writes them); the rest
        // (config, hooks, packed-refs, the checkout's own index and HEAD) is read-only. A
        // shared run's repository is left as the read-only root shows it.
        if let Some(git) = git_dirs(&self.work_dir).filter(|g| g.git_dir != g.common_dir) {
            a.two("--ro-bind", &git.common_dir);
            for sub in ["objects", "refs", "logs"] {
                let dir = git.common_dir.join(sub);
                if dir.is_dir() {
                    a.two("--bind", &dir);
                }
            }
            a.two("--bind", &git.git_dir);
        }
        a.two("--bind", &self.work_dir);
        for dir in &self.writable {
            if dir.exists() {
                a.two("--bind", dir);
            }
        }
        for path in &self.readable {
            if path.exists() {
                a.two("--ro-bind", path);
            }
        }
        for dir in &hidden_dirs {
            a.one("--remount-ro", dir);
        }
        a.one("--chdir", cwd);
        a.0
    }
}

/// A `bwrap` command line being built.
#[derive(Default)]
struct Args(Vec<String>);

impl Args {
    fn flag(&mut self, flag: &str) {
        self.0.push(flag.into());
    }
    fn one(&mut self, flag: &str, path: impl AsRef<Path>) {
        self.0.push(flag.into());
        self.0.push(path.as_ref().display().to_string());
    }
    /// `flag path path`: the path (its real path) bound onto itself.
    fn two(&mut self, flag: &str, path: impl AsRef<Path>) {
        let shown = real_path(path.as_ref()).display().to_string();
        self.0.extend([flag.into(), shown.clone(), shown]);
    }
    fn ro_bind_to(&mut self, source: &str, dest: &Path) {
        self.0.extend([
            "--ro-bind".into(),
            source.into(),
            dest.display().to_string(),
        ]);
    }
}

/// `path` with its symbolic links resolved, or as it is when it cannot be (it does not
/// exist).
fn real_path(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// bubblewrap as found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bwrap {
    /// Its path.
    pub path: PathBuf,
    /// What `bwrap --version` says (`bubblewrap 0.8.0`).
    pub version: String,
}

/// The last probe: which `bwrap` it ran, and what it found.
static PROBED: Mutex<Option<(PathBuf, Result<Bwrap, String>)>> = Mutex::new(None);

/// Whether bubblewrap can run sandboxes here: `bwrap` on `PATH`, and a bounded run of
/// `bwrap … true` with the namespaces a run uses succeeds. Probed once per `bwrap` found
/// (a `bwrap` installed or removed later is probed again). Refused with
/// `SANDBOX_UNAVAILABLE`, saying why and how to install it.
pub fn probe() -> Result<Bwrap, DroverError> {
    let unavailable = |why: String| {
        DroverError::new(
            ErrorCode::SandboxUnavailable,
            format!(
                "{why}; install bubblewrap ({INSTALL}), or dispatch without --sandbox (and without [limits] sandbox_auto for auto runs). drover never runs a sandboxed run unsandboxed."
            ),
        )
    };
    let path = which::which(BWRAP)
        .map_err(|_| unavailable(format!("bubblewrap (`{BWRAP}`) is not found on PATH")))?;
    let mut probed = PROBED.lock().unwrap_or_else(|p| p.into_inner());
    let found = match probed.as_ref() {
        Some((seen, found)) if *seen == path => found.clone(),
        _ => {
            let found = run_probe(&path);
            *probed = Some((path.clone(), found.clone()));
            found
        }
    };
    found.map_err(unavailable)
}

fn run_probe(path: &Path) -> Result<Bwrap, String> {
    let version = bounded(Command::new(path).arg("--version"))
        .map(|out| out.trim().to_string())
        .map_err(|e| format!("`{} --version` failed: {e}", path.display()))?;
    let probe = Sandbox {
        network: false,
        work_dir: PathBuf::from("/"),
        ..Sandbox::default()
    };
    let mut cmd = Command::new(path);
    cmd.args(probe.bwrap_args(Path::new("/")))
        .arg("--")
        .arg("true");
    bounded(&mut cmd).map_err(|e| {
        format!(
            "bubblewrap ({}) cannot make its namespaces here ({e})",
            path.display()
        )
    })?;
    Ok(Bwrap {
        path: path.to_path_buf(),
        version,
    })
}

/// Runs `cmd` to its end within [`PROBE_TIMEOUT`]: its stdout, or why it failed.
fn bounded(cmd: &mut Command) -> Result<String, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < PROBE_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer in {} s", PROBE_TIMEOUT.as_secs()));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let said = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "{}: {}",
            out.status,
            crate::text::one_line(said.trim())
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(args: &[String]) -> Vec<&str> {
        args.iter().map(String::as_str).collect()
    }

    #[test]
    fn the_root_is_read_only_tmp_private_and_the_work_dir_writable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sandbox = Sandbox {
            network: true,
            work_dir: dir.path().to_path_buf(),
            ..Sandbox::default()
        };
        let args = sandbox.bwrap_args(dir.path());
        let args = strs(&args);
        let shown = dir.path().display().to_string();
        let at = |needle: &[&str]| args.windows(needle.len()).position(|w| w == needle);
        let root = at(&["--ro-bind", "/", "/"]).expect("root read-only");
        let tmp = at(&["--tmpfs", "/tmp"]).expect("private /tmp");
        let work = at(&["--bind", &shown, &shown]).expect("work dir writable");
        assert!(root < tmp && tmp < work, "{args:?}");
        assert!(args.contains(&"--die-with-parent"));
        assert!(!args.contains(&"--unshare-net"));
        assert!(
            !args.contains(&"--new-session"),
            "the CLI stays in bwrap's group"
        );
        let no_net = Sandbox {
            network: false,
            ..sandbox
        };
        assert!(
            no_net
                .bwrap_args(dir.path())
                .contains(&"--unshare-net".to_string())
        );
    }

    #[test]
    fn hidden_dirs_are_masked_before_binds_and_made_read_only_last() {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(home.path().join(".ssh")).expect("ssh dir");
        std::fs::write(home.path().join(".netrc"), "machine x").expect("netrc");
        let data = home.path().join("data");
        let work = data.join("worktrees/repo/run");
        std::fs::create_dir_all(&work).expect("work dir");
        let sandbox = Sandbox {
            network: true,
            work_dir: work.clone(),
            hidden: vec![data.clone(), home.path().join("absent")],
            home: Some(home.path().to_path_buf()),
            ..Sandbox::default()
        };
        let args = sandbox.bwrap_args(&work);
        let args = strs(&args);
        let at = |needle: &[&str]| args.windows(needle.len()).position(|w| w == needle);
        let data_s = data.display().to_string();
        let work_s = work.display().to_string();
        let ssh = home.path().join(".ssh").display().to_string();
        let netrc = home.path().join(".netrc").display().to_string();
        let mask = at(&["--tmpfs", &data_s]).expect("data dir hidden");
        let bind = at(&["--bind", &work_s, &work_s]).expect("work dir bound");
        let ro = at(&["--remount-ro", &data_s]).expect("hidden dir read-only");
        assert!(mask < bind && bind < ro, "{args:?}");
        assert!(at(&["--tmpfs", &ssh]).is_some(), "{args:?}");
        assert!(
            at(&["--ro-bind", "/dev/null", &netrc]).is_some(),
            "{args:?}"
        );
        assert!(!args.iter().any(|a| a.ends_with("absent")), "{args:?}");
    }

    #[test]
    fn git_dirs_of_a_linked_worktree_and_of_a_checkout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        let admin = repo.join(".git/worktrees/run");
        std::fs::create_dir_all(&admin).expect("admin dir");
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(admin.join("commondir"), "../..\n").expect("commondir");
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(wt.join("sub")).expect("worktree");
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", admin.display()))
            .expect(".git file");
        let canon = |p: &Path| std::fs::canonicalize(p).expect("canonical");
        assert_eq!(
            git_dirs(&wt.join("sub")),
            Some(GitDirs {
                git_dir: canon(&admin),
                common_dir: canon(&repo.join(".git")),
            })
        );
        assert_eq!(
            git_dirs(&repo),
            Some(GitDirs {
                git_dir: canon(&repo.join(".git")),
                common_dir: canon(&repo.join(".git")),
            })
        );
        assert_eq!(git_dirs(Path::new("/proc/self")), None);
    }
}
