//! drover's headless interface, driven as a user drives it: `drover serve` owning a
//! `DROVER_HOME` in a temporary directory, and one `drover …` command per step
//! (`dispatch`, `show --json`, `respond`, `follow-up`, `stop`, `transcript`).
//!
//! What must stay true: every command and every wait is bounded; the serve process and
//! everything it started are ended when the harness is dropped (SIGTERM, then SIGKILL by
//! pid); children see only the environment given here plus the provider's `env` from the
//! config file (so nothing from the caller's environment — credentials, real endpoints —
//! reaches them).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::peers::base_env;

/// The longest one drover command may take.
pub const STEP: Duration = Duration::from_secs(30);

/// What a drover command did.
#[derive(Debug)]
pub struct Output {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// A temporary world for one test: `DROVER_HOME`, the run's working directory, a home
/// directory for the provider child, and a running `drover serve`.
pub struct Drover {
    dir: TempDir,
    serve: Option<Child>,
    serve_pid: u32,
    /// Every drover process logs at `debug` (what a failing test needs); `false` leaves
    /// the level at drover's default, as a user runs it (the benchmarks).
    debug_log: bool,
}

impl Drover {
    /// Writes the config `make` returns (given the temporary directory, so it can name
    /// paths in it) as `config.toml` and starts `drover serve`, where only loopback
    /// exists (`crate::loopback::require`).
    pub async fn start_with(make: impl FnOnce(&Path) -> String) -> Drover {
        Drover::start_logging(make, true).await
    }

    /// [`Drover::start_with`], every drover process logging at drover's default level
    /// as a user runs it (`DROVER_LOG` unset), not at `debug`.
    #[allow(dead_code)] // not every target that includes this file uses it
    pub async fn start_as_a_user_runs(make: impl FnOnce(&Path) -> String) -> Drover {
        Drover::start_logging(make, false).await
    }

    async fn start_logging(make: impl FnOnce(&Path) -> String, debug_log: bool) -> Drover {
        crate::loopback::require();
        let dir = tempfile::Builder::new()
            .prefix("drover-peers-")
            .tempdir()
            .expect("a temporary directory");
        for sub in ["drover", "work", "home"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("test directories");
        }
        std::fs::write(dir.path().join("drover/config.toml"), make(dir.path()))
            .expect("config.toml");
        let mut drover = Drover {
            dir,
            serve: None,
            serve_pid: 0,
            debug_log,
        };
        drover.serve().await;
        drover
    }

    /// The pid of the `drover serve` running now.
    #[allow(dead_code)] // not every target that includes this file uses it
    pub fn serve_pid(&self) -> u32 {
        self.serve_pid
    }

    /// The temporary directory everything lives in.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn drover_home(&self) -> PathBuf {
        self.root().join("drover")
    }

    /// The working directory runs are dispatched in.
    pub fn work_dir(&self) -> PathBuf {
        self.root().join("work")
    }

    /// A home directory for provider children (the config's `env` points `HOME` here).
    pub fn child_home(&self) -> PathBuf {
        self.root().join("home")
    }

    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = base_env(&self.child_home());
        env.push((
            "DROVER_HOME".into(),
            self.drover_home().display().to_string(),
        ));
        if self.debug_log {
            env.push(("DROVER_LOG".into(), "debug".into()));
        }
        // Belt and braces: should the config's env not reach a Claude child, it still
        // talks to nothing but a closed loopback port.
        env.push(("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into()));
        env.push((
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ));
        env.push(("DISABLE_TELEMETRY".into(), "1".into()));
        env.push(("DISABLE_AUTOUPDATER".into(), "1".into()));
        env
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_drover"));
        command
            .args(args)
            .env_clear()
            .envs(self.env())
            .current_dir(self.work_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Starts `drover serve --json` and waits for its `{"socket", "pid"}` line.
    pub async fn serve(&mut self) {
        assert!(self.serve.is_none(), "drover serve is already running");
        let mut child = self
            .command(&["serve", "--json"])
            .spawn()
            .expect("drover serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        // stderr is drained too (so serve never blocks on a full pipe) and kept for a
        // failure message.
        let said = Arc::new(Mutex::new(String::new()));
        let mut errors = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let kept = said.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = errors.next_line().await {
                let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() < 64 * 1024 {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
        });
        let line = tokio::time::timeout(STEP, lines.next_line())
            .await
            .ok()
            .and_then(|line| line.ok().flatten());
        let Some(line) = line else {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(STEP, child.wait()).await;
            let stderr = said.lock().unwrap_or_else(|e| e.into_inner()).clone();
            panic!("drover serve did not say where it listens within {STEP:?}; stderr:\n{stderr}");
        };
        let hello: Value = serde_json::from_str(&line).expect("serve --json prints JSON");
        self.serve_pid = hello["pid"].as_u64().expect("serve --json names its pid") as u32;
        assert_eq!(Some(self.serve_pid), child.id());
        // Keep draining stdout so serve never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.serve = Some(child);
    }

    /// Sends `signal` to `drover serve` and waits (bounded) for it to exit.
    pub async fn stop_serve(&mut self, signal: Signal) -> std::process::ExitStatus {
        let mut child = self.serve.take().expect("drover serve is running");
        kill(Pid::from_raw(self.serve_pid as i32), signal).expect("signal drover serve");
        tokio::time::timeout(Duration::from_secs(60), child.wait())
            .await
            .expect("drover serve exited in time")
            .expect("waiting for drover serve")
    }

    /// drover serve's peak resident memory (VmHWM), in KiB.
    #[allow(dead_code)] // the bench's
    pub fn serve_peak_rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.serve_pid, "VmHWM")
    }

    /// Runs `drover args…` (bounded by [`STEP`]).
    pub async fn run(&self, args: &[&str]) -> Output {
        self.run_within(args, STEP).await
    }

    /// Runs `drover args…`, bounded by `within` (a whole run waited for on a loaded
    /// machine can take longer than [`STEP`]).
    pub async fn run_within(&self, args: &[&str], within: Duration) -> Output {
        let child = self.command(args).spawn().expect("drover starts");
        let output = tokio::time::timeout(within, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("drover {args:?} ran past {within:?}"))
            .expect("drover's output");
        Output {
            success: output.status.success(),
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `drover args… --json`, which must succeed, and parses its answer.
    pub async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.run(&all).await;
        assert!(
            out.success,
            "drover {all:?} failed ({:?}): {}{}",
            out.code, out.stdout, out.stderr
        );
        serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("drover {all:?} printed no JSON ({e}): {}", out.stdout))
    }

    /// Dispatches a run and returns its id.
    pub async fn dispatch(&self, args: &[&str]) -> String {
        let work = self.work_dir().display().to_string();
        let mut all = vec!["dispatch", "--cwd", &work];
        all.extend_from_slice(args);
        let answer = self.json(&all).await;
        answer
            .get("run_id")
            .or_else(|| answer.get("run").and_then(|r| r.get("run_id")))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("the answer to dispatch names no run: {answer}"))
            .to_string()
    }

    /// `drover show RUN --json`.
    /// Waits (up to `within`) for the run's first pending permission request.
    pub async fn pending(&self, run: &str, within: Duration) -> Value {
        let view = self
            .until(run, "asking for permission", within, |v| {
                v["pending"].as_array().is_some_and(|p| !p.is_empty())
            })
            .await;
        assert_eq!(view["state"], "awaiting_permission", "{view:#}");
        view["pending"][0].clone()
    }

    /// `drover respond RUN REQUEST DECISION…`, which must succeed.
    pub async fn respond(&self, run: &str, request: &str, decision: &[&str]) {
        let mut args = vec!["respond", run, request];
        args.extend_from_slice(decision);
        let out = self.run(&args).await;
        assert!(out.success, "respond failed: {}{}", out.stdout, out.stderr);
    }

    /// Ends an idle run as complete (waiting up to `within`) and checks the child's
    /// process group `pid`, if there is one, is gone within `grace`.
    pub async fn complete(&self, run: &str, pid: Option<u32>, within: Duration, grace: Duration) {
        let out = self.run(&["complete", run]).await;
        assert!(out.success, "complete failed: {}{}", out.stdout, out.stderr);
        let view = self.until_ended(run, within).await;
        assert_eq!(view["state"], "completed", "{view:#}");
        assert!(view["pid"].is_null(), "{view:#}");
        if let Some(pid) = pid {
            assert!(
                eventually(grace, || !group_alive(pid)).await,
                "the provider's process group {pid} outlived its completed run"
            );
        }
    }

    pub async fn show(&self, run: &str) -> Value {
        self.json(&["show", run]).await
    }

    /// Makes the work directory a git repository on `main` with one commit (a README), and
    /// an identity of its own for the commits drover makes there: runs that can write get
    /// worktrees. Returns the commit.
    pub async fn work_repo(&self) -> String {
        let work = self.work_dir();
        std::fs::write(work.join("README.md"), "# work\n").expect("README.md");
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["config", "user.name", "Peer Test"],
            &["config", "user.email", "peer@example.invalid"],
            &["config", "commit.gpgsign", "false"],
            &["add", "-A"],
            &["commit", "-q", "-m", "start"],
        ] {
            self.git(&work, args).await;
        }
        self.git(&work, &["rev-parse", "HEAD"]).await
    }

    /// `git ARGS` in `dir` with the children's environment (bounded), which must succeed;
    /// its stdout, trimmed.
    pub async fn git(&self, dir: &Path, args: &[&str]) -> String {
        let git = which::which("git").expect("git is installed");
        let (ok, stdout, stderr) = crate::peers::run_bounded(
            &git,
            args,
            &base_env(&self.child_home()),
            dir,
            Duration::from_secs(60),
        )
        .await;
        assert!(ok, "git {args:?} in {}: {stderr}", dir.display());
        stdout.trim().to_string()
    }

    /// Checks a worktree run wrote `file` = `content` in its worktree only, then merges it
    /// with `drover merge` and checks it landed on the user's branch by a fast-forward.
    pub async fn merge_worktree_file(&self, run: &str, base: &str, file: &str, content: &str) {
        let view = self
            .until(run, "its change counted", Duration::from_secs(30), |v| {
                v["workspace"]["change"]["files"] == 1
            })
            .await;
        let ws = &view["workspace"];
        assert_eq!(ws["mode"], "worktree", "{view:#}");
        assert_eq!(ws["base_commit"], base, "{view:#}");
        let tree = PathBuf::from(ws["worktree"].as_str().expect("a worktree"));
        assert_eq!(
            std::fs::read_to_string(tree.join(file)).expect("the file is in the worktree"),
            content
        );
        let work = self.work_dir();
        assert!(
            !work.join(file).exists(),
            "the run wrote into the user's checkout"
        );
        assert_eq!(self.git(&work, &["rev-parse", "HEAD"]).await, base);

        let answer = self.json(&["merge", run]).await;
        assert_eq!(answer["merge"]["how"], "fast_forward", "{answer:#}");
        assert_eq!(
            std::fs::read_to_string(work.join(file)).expect("merged into the checkout"),
            content
        );
        let head = self.git(&work, &["rev-parse", "HEAD"]).await;
        assert_eq!(answer["merge"]["commit"], head.as_str(), "{answer:#}");
        assert_eq!(
            self.git(&work, &["rev-parse", "HEAD~1"]).await,
            base,
            "one commit of the run's work on top of the base"
        );
        assert_eq!(
            self.git(&work, &["status", "--porcelain"]).await,
            "",
            "the checkout is clean"
        );
    }

    /// Every recorded event of the run (`transcript --format events --json`).
    pub async fn events(&self, run: &str) -> Vec<Value> {
        let view = self.json(&["transcript", run, "--format", "events"]).await;
        view["events"]
            .as_array()
            .unwrap_or_else(|| panic!("the events transcript has no events list: {view}"))
            .clone()
    }

    /// Polls `show` until `done` holds (bounded by `timeout`); the view that met it.
    pub async fn until(
        &self,
        run: &str,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let view = self.show(run).await;
            if done(&view) {
                return view;
            }
            if Instant::now() >= deadline {
                let tail = self.run(&["transcript", run]).await.stdout;
                panic!(
                    "{run} was not {what} within {timeout:?}; last view: {view:#}\ntranscript:\n{tail}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the run's state is `state`.
    pub async fn until_state(&self, run: &str, state: &str, timeout: Duration) -> Value {
        self.until(run, &format!("in state {state}"), timeout, |v| {
            v["state"] == state
        })
        .await
    }

    /// Waits until an idle run has hibernated: still idle, its live line "idle ·
    /// hibernated", no child, and the CLI's process group `pid` (if it had one) gone.
    pub async fn until_hibernated(&self, run: &str, pid: Option<u32>, timeout: Duration) -> Value {
        let view = self
            .until(run, "hibernated", timeout, |v| {
                v["live_state"]["detail"] == "idle · hibernated"
            })
            .await;
        assert_eq!(view["state"], "idle", "{view:#}");
        assert!(
            view["pid"].is_null(),
            "a hibernated run has no child: {view:#}"
        );
        if let Some(pid) = pid {
            assert!(
                eventually(Duration::from_secs(10), || !group_alive(pid)).await,
                "the CLI's process group {pid} outlived its hibernation"
            );
        }
        view
    }

    /// Asserts (bounded) that nothing runs under the owner but its warden: with every
    /// run hibernated no CLI is up, whatever its mode (codex exec has no pid to check).
    pub async fn assert_nothing_runs_under_it(&self) {
        let owner = self.serve_pid;
        assert!(
            eventually(Duration::from_secs(10), || descendants_but_the_warden(
                owner
            )
            .is_empty())
            .await,
            "a process runs under drover while its runs are hibernated: {:?}",
            descendants_but_the_warden(owner)
        );
    }

    /// Sends a follow-up and checks it was accepted.
    pub async fn follow_up(&self, run: &str, text: &str) {
        let out = self.run(&["follow-up", run, text]).await;
        assert!(
            out.success,
            "follow-up failed: {}{}",
            out.stdout, out.stderr
        );
    }

    /// Waits until the run is idle after `turns` turns.
    pub async fn until_idle_after(&self, run: &str, turns: usize, timeout: Duration) -> Value {
        self.until(run, &format!("idle after {turns} turns"), timeout, |v| {
            v["state"] == "idle" && v["turns"].as_array().is_some_and(|t| t.len() == turns)
        })
        .await
    }

    /// Waits until the run has ended (any terminal state).
    pub async fn until_ended(&self, run: &str, timeout: Duration) -> Value {
        self.until(run, "ended", timeout, |v| !v["finished_at"].is_null())
            .await
    }
}

impl Drop for Drover {
    fn drop(&mut self) {
        let Some(mut child) = self.serve.take() else {
            return;
        };
        // SIGTERM lets serve stop its runs (and their children); SIGKILL after 10 s.
        let _ = kill(Pid::from_raw(self.serve_pid as i32), Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.start_kill();
    }
}

/// `[limits]` for a test of a failure that must end the run: turns are not sent again.
pub const NO_RESEND: &str = "\n[limits]\nresend_turns_max = 0\n";
/// `[limits]` for the idle-run tests: idle runs hibernate after a second, and a failed
/// turn is sent again after a second.
pub const QUICK_IDLE: &str = "\n[limits]\nhibernate_after_secs = 1\nresend_wait_max_secs = 1\n";

/// `[workspaces]` for tests with several runs in the one work directory (not a git
/// repository): they may work there at once.
pub const SHARED_DIR: &str = "\n[workspaces]\nshared_conflict = \"allow\"\n";

/// A drover config file that runs `provider` with `command` and adds `env` to its
/// child's environment.
pub fn provider_config(provider: &str, command: &Path, env: &[(String, String)]) -> String {
    let env: toml::Table = env
        .iter()
        .map(|(k, v)| (k.clone(), toml::Value::String(v.clone())))
        .collect();
    let mut section = toml::Table::new();
    section.insert(
        "command".into(),
        toml::Value::String(command.display().to_string()),
    );
    section.insert("args".into(), toml::Value::Array(Vec::new()));
    section.insert("env".into(), toml::Value::Table(env));
    let mut providers = toml::Table::new();
    providers.insert(provider.into(), toml::Value::Table(section));
    let mut config = toml::Table::new();
    config.insert("providers".into(), toml::Value::Table(providers));
    toml::to_string(&config).expect("a config file")
}

/// A field of `/proc/PID/status` in KiB (`VmHWM`, `VmRSS`).
#[allow(dead_code)] // the bench's
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether any process is left in process group `pgid`.
pub fn group_alive(pgid: u32) -> bool {
    kill(Pid::from_raw(-(pgid as i32)), None).is_ok()
}

/// The live (not zombie) processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for (pid, stat) in ::drover_core::providers::sweep::all_processes() {
        let Ok(pid) = u32::try_from(pid) else {
            continue;
        };
        if stat.state == 'Z' || pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Whether `pid` is an owner's warden (`drover warden`: the owner's own, not a run's).
pub fn is_warden(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(&b"warden"[..]))
}

/// The live processes under the owner `owner` (its descendants), but its warden (`drover
/// warden`, the owner's own): `(pid, command line)`.
pub fn descendants_but_the_warden(owner: u32) -> Vec<(u32, String)> {
    let table = ::drover_core::providers::sweep::all_processes();
    let mut found = Vec::new();
    let mut frontier = vec![owner];
    while let Some(parent) = frontier.pop() {
        for (pid, stat) in &table {
            let Ok(pid) = u32::try_from(*pid) else {
                continue;
            };
            if u32::try_from(stat.ppid) != Ok(parent) || stat.state == 'Z' {
                continue;
            }
            frontier.push(pid);
            if is_warden(pid) {
                continue;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// Waits (bounded) until `gone` holds; whether it did.
pub async fn eventually(timeout: Duration, gone: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if gone() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The live-state assignments the run went through, in order (from the events
/// transcript): each with its `state`, `bound`, `detail`, and the event's `at`.
pub fn live_states(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "live_state")
        .map(|e| {
            let mut assignment = e["body"]["assignment"].clone();
            assignment["at"] = e["at"].clone();
            assignment
        })
        .collect()
}

/// The provider events drover recorded (`transcript` events), as the adapter parsed them.
pub fn provider_events(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "transcript")
        .map(|e| e["body"]["event"].clone())
        .collect()
}

/// Whether any file under `dir` has `needle` in its name or its content (the CLIs'
/// storage layouts are their own business).
pub fn mentioned_under(dir: &Path, needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if entry.file_name().to_string_lossy().contains(needle) {
            return true;
        }
        if path.is_dir() {
            return mentioned_under(&path, needle);
        }
        std::fs::read(&path)
            .map(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
            .unwrap_or(false)
    })
}
