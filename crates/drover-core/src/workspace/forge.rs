//! A pull request from a run's branch (docs/ARCHITECTURE.md §"Workspaces"): the branch
//! pushed to the repository's remote with git, the pull request opened and read with the
//! forge's own CLI (`gh` for GitHub, `glab` for a GitLab remote) when it is on PATH.
//!
//! What must stay true:
//! - git pushes from the run's worktree, never from the user's checkout, which nothing
//!   here changes; the push is `git push -u REMOTE BRANCH`, with `--force-with-lease` only
//!   when asked, never `--force`;
//! - what is uncommitted in the worktree is committed onto the run's branch first (as a
//!   merge does), so the pull request holds the run's whole change;
//! - every CLI run here is bounded in time and in what is read of its output, gets no
//!   terminal prompt, and every word of it that reaches a message is redacted (no token
//!   in a remote's URL, no secret the redactor knows);
//! - a forge CLI that is missing is no failure: the branch is pushed and the compare URL
//!   the remote printed (if any) is the answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::git::{Git, GitError};
use super::{WorkspaceView, ops};
use crate::one_shot::{self, Failed, Output};
use crate::{DroverError, ErrorCode, UnixMillis};

/// How long a push may take.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(180);
/// How long one call of the forge's CLI may take.
pub const FORGE_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of a forge CLI's stdout is read.
const FORGE_OUTPUT_LIMIT: usize = 1024 * 1024;
/// How much of a forge CLI's message is quoted.
const QUOTE_CHARS: usize = 300;

/// The forge a remote lives on, by the CLI that speaks to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Forge {
    /// GitHub (and GitHub Enterprise): `gh`.
    Github,
    /// GitLab: `glab`.
    Gitlab,
}

impl Forge {
    /// The forge's own CLI.
    pub fn cli(self) -> &'static str {
        match self {
            Forge::Github => "gh",
            Forge::Gitlab => "glab",
        }
    }

    /// What the forge calls it: `pull request`, `merge request`.
    pub fn noun(self) -> &'static str {
        match self {
            Forge::Github => "pull request",
            Forge::Gitlab => "merge request",
        }
    }

    /// The forge of a remote, by its URL: `gitlab` in it is GitLab, anything else is
    /// taken for GitHub (whose CLI says so when it is not).
    pub fn of_url(url: &str) -> Forge {
        if url.to_ascii_lowercase().contains("gitlab") {
            Forge::Gitlab
        } else {
            Forge::Github
        }
    }
}

/// Where a pull request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrState {
    /// Open for review.
    Open,
    /// Merged on the forge.
    Merged,
    /// Closed without merging.
    Closed,
}

impl PrState {
    /// The state as the ledger and the API write it.
    pub fn as_str(self) -> &'static str {
        match self {
            PrState::Open => "open",
            PrState::Merged => "merged",
            PrState::Closed => "closed",
        }
    }
}

/// A pull request's checks: how many passed of how many there are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PrChecks {
    /// Checks that passed (success, neutral, skipped).
    pub passed: u32,
    /// Checks that failed (failure, error, cancelled, timed out…).
    pub failed: u32,
    /// Every check, pending ones included.
    pub total: u32,
}

/// A run's pull request, as the ledger keeps it (in the run's workspace) and every view
/// shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrView {
    /// The forge it is on.
    pub forge: Forge,
    /// Its number on the forge (`#12`).
    pub number: u64,
    /// Its page.
    pub url: String,
    /// Open, merged or closed.
    pub state: PrState,
    /// A draft.
    #[serde(default)]
    pub draft: bool,
    /// Its checks, when the forge reported any.
    #[serde(default)]
    pub checks: Option<PrChecks>,
    /// When drover last read it from the forge.
    pub updated_at: UnixMillis,
}

impl PrView {
    /// `PR #12 · open · checks 3/4` (the run line's words).
    pub fn words(&self) -> String {
        let prefix = match self.forge {
            Forge::Github => "PR",
            Forge::Gitlab => "MR",
        };
        let state = if self.draft && self.state == PrState::Open {
            "draft"
        } else {
            self.state.as_str()
        };
        let mut out = format!("{prefix} #{} · {state}", self.number);
        if let Some(c) = self.checks.filter(|c| c.total > 0) {
            out.push_str(&format!(" · checks {}/{}", c.passed, c.total));
            if c.failed > 0 {
                out.push_str(&format!(" ({} failed)", c.failed));
            }
        }
        out
    }
}

/// What the push did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushView {
    /// The remote pushed to.
    pub remote: String,
    /// The branch pushed (the run's).
    pub branch: String,
    /// The commit the branch is at on the remote.
    pub commit: String,
    /// `--force-with-lease` was used.
    #[serde(default)]
    pub forced: bool,
    /// The page the remote printed for opening a pull request (GitHub and GitLab print
    /// one on a new branch's push), if it printed one.
    #[serde(default)]
    pub compare_url: Option<String>,
}

/// What `pr` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrActionView {
    /// The run whose branch it is.
    pub run_id: String,
    /// The push (none for `--refresh`, which only reads).
    #[serde(default)]
    pub push: Option<PushView>,
    /// The run's pull request, after this.
    #[serde(default)]
    pub pr: Option<PrView>,
    /// The pull request was opened now (not found on the run already).
    #[serde(default)]
    pub created: bool,
    /// The forge CLI that would open it, when it is not on PATH (nothing was opened).
    #[serde(default)]
    pub forge_cli_missing: Option<String>,
}

/// What a pull request is asked to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrAsk {
    /// The run whose branch it is.
    pub run_id: String,
    /// Its title.
    pub title: String,
    /// Its body (Markdown).
    pub body: String,
    /// Open it as a draft.
    pub draft: bool,
    /// Push with `--force-with-lease` (asked for, and confirmed in the dashboard).
    pub force_with_lease: bool,
    /// Only read the pull request's state again: no push, nothing opened.
    pub refresh: bool,
    /// The message of the commit of what is uncommitted in the worktree.
    pub message: String,
}

/// What [`pr`] came to: the workspace after it (its `pr` set) and the answer's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrDone {
    /// The run's workspace with its pull request.
    pub workspace: WorkspaceView,
    /// The push, when there was one.
    pub push: Option<PushView>,
    /// The pull request was opened now.
    pub created: bool,
    /// The forge CLI was not on PATH (its name).
    pub forge_cli_missing: Option<String>,
}

fn err(code: ErrorCode, message: impl Into<String>) -> DroverError {
    DroverError::new(code, message)
}

/// Text from outside made safe to show: a URL's `user:token@` cut out, then every secret
/// the redactor knows, on one line, clipped.
pub fn clean(text: &str) -> String {
    static USERINFO: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let one = crate::text::one_line(text);
    let cut = match USERINFO
        .get_or_init(|| regex::Regex::new(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@").ok())
    {
        Some(re) => re.replace_all(&one, "${1}***@").into_owned(),
        None => one,
    };
    let redacted = crate::redact::global().redact(&cut).into_owned();
    crate::text::clip(&redacted, QUOTE_CHARS)
}

/// The lines of `stderr` worth quoting: git's complaint first, else its first lines.
fn quoted(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("hint:"))
        .collect();
    let pick: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            l.starts_with("fatal:")
                || l.starts_with("error:")
                || l.starts_with("! ")
                || l.contains("[rejected]")
                || l.contains("[remote rejected]")
        })
        .collect();
    let chosen = if pick.is_empty() {
        lines.into_iter().take(3).collect::<Vec<_>>()
    } else {
        pick
    };
    if chosen.is_empty() {
        return "no message".to_string();
    }
    clean(&chosen.join(" · "))
}

/// Whether a failure reads as the credentials being refused or missing.
fn auth_failure(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "authentication failed",
        "could not read username",
        "could not read password",
        "terminal prompts disabled",
        "permission denied",
        "invalid username or password",
        "http 401",
        "http 403",
        "returned error: 403",
        "returned error: 401",
        "gh auth login",
        "glab auth login",
        "not logged in",
        "bad credentials",
    ]
    .iter()
    .any(|w| t.contains(w))
}

/// The remote the run's branch goes to: the base branch's upstream remote, else
/// `origin`, else the only (first) remote. `NO_REMOTE` when there is none.
pub async fn remote_of(dir: &Path, base_branch: Option<&str>) -> Result<String, DroverError> {
    if let Some(base) = base_branch {
        let key = format!("branch.{base}.remote");
        let out = Git::at(dir)
            .run(&["config", "--get", &key])
            .await
            .map_err(|e| ops::git_error("reading the base branch's remote", e))?;
        let remote = out.text();
        if out.success() && !remote.is_empty() && remote != "." {
            return Ok(remote);
        }
    }
    let remotes = Git::at(dir)
        .ok(&["remote"])
        .await
        .map_err(|e| ops::git_error("listing the remotes", e))?;
    let remotes: Vec<&str> = remotes
        .lines()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .collect();
    if remotes.contains(&"origin") {
        return Ok("origin".to_string());
    }
    remotes.first().map(|r| r.to_string()).ok_or_else(|| {
        err(
            ErrorCode::NoRemote,
            "the repository has no remote to push the run's branch to; add one (git remote add origin URL), then ask again; nothing was changed",
        )
    })
}

/// The first web address a `remote:` line of a push printed: the page GitHub and GitLab
/// offer for opening a pull request from a new branch.
pub fn compare_url(stderr: &str) -> Option<String> {
    stderr.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("remote:")?;
        rest.split_whitespace()
            .find(|w| w.starts_with("https://") || w.starts_with("http://"))
            .map(|w| clean(w.trim_end_matches(['.', ','])))
    })
}

/// `git push -u REMOTE BRANCH` (with `--force-with-lease` when asked) from `worktree`.
async fn push(
    worktree: &Path,
    remote: &str,
    branch: &str,
    force_with_lease: bool,
) -> Result<PushView, DroverError> {
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    let mut args = vec!["push", "-u"];
    if force_with_lease {
        args.push("--force-with-lease");
    }
    args.extend([remote, refspec.as_str()]);
    let shown = format!(
        "git push -u{} {remote} {branch}",
        if force_with_lease {
            " --force-with-lease"
        } else {
            ""
        }
    );
    let out = Git::at(worktree)
        .timeout(PUSH_TIMEOUT)
        .run(&args)
        .await
        .map_err(|e| match e {
            GitError::Timeout { secs, .. } => err(
                ErrorCode::PushRefused,
                format!("`{shown}` took longer than {secs} s and was stopped; is the remote reachable? Nothing else was changed"),
            ),
            other => ops::git_error("pushing the run's branch", other),
        })?;
    if !out.success() {
        let said = quoted(&out.stderr);
        if auth_failure(&out.stderr) {
            return Err(err(
                ErrorCode::AuthFailed,
                format!(
                    "`{shown}` was refused for want of credentials: {said}; set up access to the remote (a credential helper, an SSH key, or `gh auth login`), then ask again; nothing was changed in your checkout"
                ),
            ));
        }
        let hint = if out.stderr.contains("[rejected]") || out.stderr.contains("fetch first") {
            "; the remote's branch has commits the run's branch lacks: `--force-with-lease` replaces them"
        } else {
            ""
        };
        return Err(err(
            ErrorCode::PushRefused,
            format!("`{shown}` was refused: {said}{hint}; nothing was changed in your checkout"),
        ));
    }
    let commit = Git::at(worktree)
        .ok(&["rev-parse", "HEAD"])
        .await
        .map_err(|e| ops::git_error("reading the pushed commit", e))?;
    Ok(PushView {
        remote: remote.to_string(),
        branch: branch.to_string(),
        commit,
        forced: force_with_lease,
        compare_url: compare_url(&out.stderr),
    })
}

/// Runs the forge CLI `program` in `dir`, bounded, with no prompt and `input` on stdin.
async fn run_cli(
    program: &Path,
    args: &[&str],
    dir: &Path,
    input: Option<&str>,
) -> Result<Output, DroverError> {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.display().to_string());
    let shown = format!("{name} {}", args.first().copied().unwrap_or_default());
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .env("GH_PROMPT_DISABLED", "1")
        .env("GH_NO_UPDATE_NOTIFIER", "1")
        .env("GLAB_NO_PROMPT", "1")
        .env("NO_COLOR", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
    let input = input.map(str::as_bytes);
    one_shot::run(
        &mut command,
        input,
        FORGE_OUTPUT_LIMIT,
        64 * 1024,
        FORGE_TIMEOUT,
    )
    .await
    .map_err(|failed| match failed {
        Failed::Start(e) | Failed::Wait(e) => {
            err(ErrorCode::ForgeFailed, format!("cannot run `{shown}`: {e}"))
        }
        Failed::TimedOut => err(
            ErrorCode::ForgeFailed,
            format!(
                "`{shown}` took longer than {} s and was stopped",
                FORGE_TIMEOUT.as_secs()
            ),
        ),
    })
}

/// A forge CLI's failure as a refusal with its own words (redacted).
fn forge_refused(forge: Forge, what: &str, out: &Output, pushed: Option<&PushView>) -> DroverError {
    let said = {
        let text = if out.stderr.trim().is_empty() {
            &out.stdout
        } else {
            &out.stderr
        };
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .take(3)
            .collect();
        if lines.is_empty() {
            format!("exit code {}", out.code.unwrap_or(-1))
        } else {
            clean(&lines.join(" · "))
        }
    };
    let pushed = pushed
        .map(|p| format!("; the branch {} was pushed to {}", p.branch, p.remote))
        .unwrap_or_default();
    let combined = format!("{}\n{}", out.stderr, out.stdout);
    if auth_failure(&combined) {
        return err(
            ErrorCode::AuthFailed,
            format!(
                "`{} {what}` was refused for want of credentials: {said}{pushed}; log in (`{} auth login`), then ask again",
                forge.cli(),
                forge.cli()
            ),
        );
    }
    err(
        ErrorCode::ForgeFailed,
        format!(
            "`{} {what}` failed: {said}{pushed}; nothing was changed in your checkout",
            forge.cli()
        ),
    )
}

/// The number at the end of a pull request's address (`…/pull/12`, `…/merge_requests/12`).
pub fn number_of(url: &str) -> Option<u64> {
    url.trim()
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
}

/// The first web address in a CLI's output.
fn first_url(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.starts_with("https://") || w.starts_with("http://"))
        .map(|w| w.trim_end_matches(['.', ',']).to_string())
}

/// Reads `gh pr view --json number,state,url,isDraft,statusCheckRollup` (gh's
/// documented fields; `statusCheckRollup` is a list of check runs — `conclusion`, empty
/// while pending — and commit statuses — `state`).
pub fn parse_gh_view(json: &str, now: UnixMillis) -> Option<PrView> {
    let v: Value = serde_json::from_str(json.trim()).ok()?;
    let number = v.get("number")?.as_u64()?;
    let url = v.get("url")?.as_str()?.to_string();
    let state = match v.get("state")?.as_str()?.to_ascii_uppercase().as_str() {
        "OPEN" => PrState::Open,
        "MERGED" => PrState::Merged,
        "CLOSED" => PrState::Closed,
        _ => return None,
    };
    let checks = v
        .get("statusCheckRollup")
        .and_then(Value::as_array)
        .map(|items| {
            let mut c = PrChecks::default();
            for item in items {
                c.total += 1;
                let word = item
                    .get("conclusion")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .or_else(|| item.get("state").and_then(Value::as_str))
                    .unwrap_or_default()
                    .to_ascii_uppercase();
                match word.as_str() {
                    "SUCCESS" | "NEUTRAL" | "SKIPPED" => c.passed += 1,
                    "FAILURE" | "ERROR" | "CANCELLED" | "TIMED_OUT" | "ACTION_REQUIRED"
                    | "STARTUP_FAILURE" | "STALE" => c.failed += 1,
                    _ => {}
                }
            }
            c
        });
    Some(PrView {
        forge: Forge::Github,
        number,
        url,
        state,
        draft: v.get("isDraft").and_then(Value::as_bool).unwrap_or(false),
        checks,
        updated_at: now,
    })
}

/// Reads `glab mr view N --output json` (GitLab's merge request: `iid`, `state`,
/// `web_url`, `draft`, its head pipeline's `status` as its one check).
pub fn parse_glab_view(json: &str, now: UnixMillis) -> Option<PrView> {
    let v: Value = serde_json::from_str(json.trim()).ok()?;
    let number = v.get("iid")?.as_u64()?;
    let url = v.get("web_url")?.as_str()?.to_string();
    let state = match v.get("state")?.as_str()? {
        "opened" => PrState::Open,
        "merged" => PrState::Merged,
        "closed" | "locked" => PrState::Closed,
        _ => return None,
    };
    let checks = v
        .get("head_pipeline")
        .and_then(|p| p.get("status"))
        .and_then(Value::as_str)
        .map(|s| PrChecks {
            passed: u32::from(s == "success"),
            failed: u32::from(matches!(s, "failed" | "canceled")),
            total: 1,
        });
    Some(PrView {
        forge: Forge::Gitlab,
        number,
        url,
        state,
        draft: v.get("draft").and_then(Value::as_bool).unwrap_or(false),
        checks,
        updated_at: now,
    })
}

/// Reads pull request `number` with the forge's CLI.
async fn view(
    forge: Forge,
    cli: &Path,
    dir: &Path,
    number: u64,
    pushed: Option<&PushView>,
) -> Result<PrView, DroverError> {
    let n = number.to_string();
    let now = crate::clock::now_millis();
    let (args, what): (Vec<&str>, &str) = match forge {
        Forge::Github => (
            vec![
                "pr",
                "view",
                &n,
                "--json",
                "number,state,url,isDraft,statusCheckRollup",
            ],
            "pr view",
        ),
        Forge::Gitlab => (vec!["mr", "view", &n, "--output", "json"], "mr view"),
    };
    let out = run_cli(cli, &args, dir, None).await?;
    if out.code != Some(0) {
        return Err(forge_refused(forge, what, &out, pushed));
    }
    let parsed = match forge {
        Forge::Github => parse_gh_view(&out.stdout, now),
        Forge::Gitlab => parse_glab_view(&out.stdout, now),
    };
    parsed.ok_or_else(|| {
        err(
            ErrorCode::ForgeFailed,
            format!(
                "`{} {what}` printed what drover cannot read: {}",
                forge.cli(),
                clean(&out.stdout)
            ),
        )
    })
}

/// Opens the pull request with the forge's CLI; returns its number.
async fn create(
    forge: Forge,
    cli: &Path,
    dir: &Path,
    ws: &WorkspaceView,
    ask: &PrAsk,
    pushed: &PushView,
) -> Result<u64, DroverError> {
    let branch = pushed.branch.as_str();
    let mut args: Vec<&str> = match forge {
        Forge::Github => vec![
            "pr",
            "create",
            "--head",
            branch,
            "--title",
            &ask.title,
            "--body-file",
            "-",
        ],
        Forge::Gitlab => vec![
            "mr",
            "create",
            "--source-branch",
            branch,
            "--title",
            &ask.title,
            "--description",
            &ask.body,
            "--yes",
        ],
    };
    if let Some(base) = ws.base_branch.as_deref() {
        args.push(match forge {
            Forge::Github => "--base",
            Forge::Gitlab => "--target-branch",
        });
        args.push(base);
    }
    if ask.draft {
        args.push("--draft");
    }
    let input = (forge == Forge::Github).then_some(ask.body.as_str());
    let what = match forge {
        Forge::Github => "pr create",
        Forge::Gitlab => "mr create",
    };
    let out = run_cli(cli, &args, dir, input).await?;
    if out.code != Some(0) {
        // One already open for the branch: gh names it; take it as the run's.
        if out.stderr.contains("already exists")
            && let Some(n) = first_url(&out.stderr).as_deref().and_then(number_of)
        {
            return Ok(n);
        }
        return Err(forge_refused(forge, what, &out, Some(pushed)));
    }
    first_url(&out.stdout)
        .as_deref()
        .and_then(number_of)
        .ok_or_else(|| {
            err(
                ErrorCode::ForgeFailed,
                format!(
                    "`{} {what}` printed no {} address: {}; the branch {} was pushed to {}",
                    forge.cli(),
                    forge.noun(),
                    clean(&out.stdout),
                    pushed.branch,
                    pushed.remote
                ),
            )
        })
}

/// The forge CLI's path, when it is on PATH.
fn find_cli(forge: Forge) -> Option<PathBuf> {
    which::which(forge.cli()).ok()
}

/// Where a forge CLI runs: the run's worktree while it is there, else the user's checkout
/// (it only reads the repository's remotes there).
fn cli_dir(ws: &WorkspaceView) -> Result<PathBuf, DroverError> {
    ws.worktree_path()
        .filter(|w| w.is_dir())
        .or_else(|| ws.checkout_path().filter(|c| c.is_dir()))
        .ok_or_else(|| {
            err(
                ErrorCode::WorkspaceUnavailable,
                "neither the run's worktree nor the repository it was made from is there any more",
            )
        })
}

/// Pushes the run's branch and opens (or, when the run has one open, reads) its pull
/// request; with `ask.refresh`, only reads the pull request again.
pub async fn pr(ws: &WorkspaceView, ask: &PrAsk) -> Result<PrDone, DroverError> {
    if ask.refresh {
        let Some(current) = ws.pr.clone() else {
            return Err(err(
                ErrorCode::NoPullRequest,
                format!(
                    "run {} has no pull request to read; `drover pr {}` pushes its branch and opens one",
                    ask.run_id, ask.run_id
                ),
            ));
        };
        let cli = find_cli(current.forge).ok_or_else(|| {
            err(
                ErrorCode::ForgeUnavailable,
                format!(
                    "`{}` is not on PATH, so the {} cannot be read; install it, or open {}",
                    current.forge.cli(),
                    current.forge.noun(),
                    clean(&current.url)
                ),
            )
        })?;
        let read = view(current.forge, &cli, &cli_dir(ws)?, current.number, None).await?;
        let mut after = ws.clone();
        after.pr = Some(read);
        return Ok(PrDone {
            workspace: after,
            push: None,
            created: false,
            forge_cli_missing: None,
        });
    }
    let branch = ws
        .branch
        .clone()
        .ok_or_else(|| err(ErrorCode::NoWorktree, "the run's worktree has no branch"))?;
    // The remote first: with none, nothing (not even a commit on the run's branch) is made.
    let remote = remote_of(&cli_dir(ws)?, ws.base_branch.as_deref()).await?;
    let worktree = ops::commit_work(ws, &ask.message).await?;
    let url = Git::at(&worktree)
        .run(&["remote", "get-url", &remote])
        .await
        .map(|o| o.text())
        .unwrap_or_default();
    let pushed = push(&worktree, &remote, &branch, ask.force_with_lease).await?;
    let forge = Forge::of_url(&url);
    let mut after = ws.clone();
    let Some(cli) = find_cli(forge) else {
        return Ok(PrDone {
            workspace: after,
            push: Some(pushed),
            created: false,
            forge_cli_missing: Some(forge.cli().to_string()),
        });
    };
    // A pull request still open for the branch has the new commits now: read it again.
    let (number, created) = match ws.pr.as_ref().filter(|p| p.state == PrState::Open) {
        Some(open) => (open.number, false),
        None => (
            create(forge, &cli, &worktree, ws, ask, &pushed).await?,
            true,
        ),
    };
    after.pr = Some(view(forge, &cli, &worktree, number, Some(&pushed)).await?);
    Ok(PrDone {
        workspace: after,
        push: Some(pushed),
        created,
        forge_cli_missing: None,
    })
}

/// The body of a run's pull request: its result (summary, changes, files, follow-ups)
/// and its task, in Markdown.
pub fn body(run_id: &str, task: &str, result: Option<&crate::dispatch::api::ResultView>) -> String {
    let mut out = String::new();
    if let Some(r) = result {
        if let Some(s) = r.summary.as_deref().filter(|s| !s.trim().is_empty()) {
            out.push_str(&format!("## Summary\n\n{}\n\n", s.trim()));
        }
        let list = |title: &str, items: &[String]| -> String {
            let items: Vec<String> = items
                .iter()
                .filter(|i| !i.trim().is_empty())
                .take(100)
                .map(|i| format!("- {}", crate::text::one_line(i)))
                .collect();
            if items.is_empty() {
                String::new()
            } else {
                format!("## {title}\n\n{}\n\n", items.join("\n"))
            }
        };
        out.push_str(&list("Changes", &r.changes));
        out.push_str(&list("Files", &r.files));
        out.push_str(&list("Follow-ups", &r.follow_ups));
    }
    let task = crate::text::clip(task.trim(), 4_000);
    let quoted: Vec<String> = task.lines().map(|l| format!("> {l}")).collect();
    out.push_str(&format!("## Task\n\n{}\n\n", quoted.join("\n")));
    out.push_str(&format!("Made by drover run {run_id}.\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gh_view_json_reads_state_checks_and_draft() {
        // The shape `gh pr view --json number,state,url,isDraft,statusCheckRollup`
        // prints: check runs carry `conclusion` (empty while in progress), commit
        // statuses carry `state`.
        let json = r#"{"isDraft":false,"number":12,"state":"OPEN","url":"https://github.com/o/r/pull/12",
          "statusCheckRollup":[
            {"__typename":"CheckRun","name":"build","status":"COMPLETED","conclusion":"SUCCESS"},
            {"__typename":"CheckRun","name":"test","status":"IN_PROGRESS","conclusion":""},
            {"__typename":"CheckRun","name":"lint","status":"COMPLETED","conclusion":"FAILURE"},
            {"__typename":"StatusContext","context":"ci/ext","state":"SUCCESS"}]}"#;
        let pr = parse_gh_view(json, 7).unwrap();
        assert_eq!(pr.number, 12);
        assert_eq!(pr.state, PrState::Open);
        assert_eq!(
            pr.checks,
            Some(PrChecks {
                passed: 2,
                failed: 1,
                total: 4
            })
        );
        assert_eq!(pr.words(), "PR #12 · open · checks 2/4 (1 failed)");
        let merged = parse_gh_view(
            r#"{"number":3,"state":"MERGED","url":"u","isDraft":false,"statusCheckRollup":[]}"#,
            0,
        )
        .unwrap();
        assert_eq!(merged.words(), "PR #3 · merged");
        assert!(parse_gh_view("not json", 0).is_none());
    }

    #[test]
    fn glab_view_json_reads_state_and_pipeline() {
        let json = r#"{"iid":5,"state":"opened","web_url":"https://gitlab.com/o/r/-/merge_requests/5","draft":true,"head_pipeline":{"status":"success"}}"#;
        let mr = parse_glab_view(json, 0).unwrap();
        assert_eq!(mr.words(), "MR #5 · draft · checks 1/1");
    }

    #[test]
    fn a_push_names_its_compare_page_and_urls_lose_their_credentials() {
        let stderr = "remote: \nremote: Create a pull request for 'drover/r1' on GitHub by visiting:\nremote:      https://github.com/o/r/pull/new/drover/r1\nremote: \nTo github.com:o/r.git\n";
        assert_eq!(
            compare_url(stderr).as_deref(),
            Some("https://github.com/o/r/pull/new/drover/r1")
        );
        assert_eq!(
            compare_url("To /tmp/remote.git\n * [new branch] x -> x\n"),
            None
        );
        let said = clean(
            "fatal: unable to access 'https://x-access-token:ghp_abc123@github.com/o/r.git/'",
        );
        assert!(!said.contains("ghp_abc123"), "{said}");
        assert!(said.contains("https://***@github.com/o/r.git"), "{said}");
        assert_eq!(number_of("https://github.com/o/r/pull/42\n"), Some(42));
        assert_eq!(
            number_of("https://gitlab.com/o/r/-/merge_requests/7"),
            Some(7)
        );
        assert!(auth_failure(
            "fatal: could not read Username for 'https://github.com': terminal prompts disabled"
        ));
        assert!(!auth_failure("! [rejected] main -> main (fetch first)"));
    }

    #[test]
    fn the_body_holds_the_result_and_the_task() {
        let result = crate::dispatch::api::ResultView {
            status: Some("done".into()),
            summary: Some("Added a cache.".into()),
            question: None,
            files: vec!["src/cache.rs".into()],
            changes: vec!["a Cache type".into()],
            follow_ups: vec!["bench it".into()],
            json: None,
        };
        let text = body("r1", "Add a cache\nto the app", Some(&result));
        for part in [
            "## Summary\n\nAdded a cache.",
            "## Changes\n\n- a Cache type",
            "## Files\n\n- src/cache.rs",
            "## Follow-ups\n\n- bench it",
            "## Task\n\n> Add a cache\n> to the app",
            "drover run r1",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
    }
}
