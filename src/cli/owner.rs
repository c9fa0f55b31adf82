//! The owner seen from outside: start one in the background (`drover serve --detach`, and
//! the dashboard when none runs), end it (`drover shutdown`), and say how it is
//! (`drover status`).
//!
//! What must stay true: a background owner runs in a session of its own (closing the
//! terminal that started it does not end it), with its stdio going to `logs/owner.log`
//! under the data directory; `--detach` returns only once the control socket answers, or
//! says why the owner did not come up (a config it would refuse is refused here first,
//! with its own code); `shutdown` ends the owner the way SIGTERM does (a run in a turn
//! recorded as interrupted and resumable, the others left for the next owner), and
//! signals only the pid the owner itself reported on its socket.

use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::headless::client_runtime;
use super::output::{JsonFlag, note, print_json, write_stdout};
use drover_core::UnixMillis;
use drover_core::control::background::{ping, start_background};
use drover_core::control::offline;
use drover_core::dispatch::Request;
use drover_core::dispatch::api::{BudgetView, RunSummary};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::money::usd;
use drover_core::paths::Paths;

/// How long `shutdown --wait` waits for the owner to be gone (its runs' children get
/// their own grace period first).
const GONE_WITHIN: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(50);

/// `drover serve --detach`.
pub fn detach(json: bool, paths: &Paths) -> Result<(), DroverError> {
    let rt = client_runtime()?;
    // With no owner yet, the config the new one would read is read here first: one it
    // refuses is reported as itself (`CONFIG_INVALID`), not as an owner that never answered.
    if rt.block_on(ping(paths))?.is_none() {
        super::headless::dispatcher_options(paths)?;
    }
    let started = rt.block_on(start_background(paths))?;
    if json {
        return print_json(&started);
    }
    if started.already_running {
        note(&format!(
            "drover already runs for {} (pid {})",
            paths.data_dir.display(),
            started.pid
        ));
    } else {
        note(&format!(
            "drover runs in the background (pid {}), listening on {}; `drover shutdown` ends it",
            started.pid,
            started.socket.display()
        ));
    }
    write_stdout(&format!("{}\n", started.pid))
}

#[derive(Debug, Args)]
pub struct ShutdownArgs {
    /// Wait until the owner is gone (its runs in a turn recorded as interrupted).
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub output: JsonFlag,
}

/// What `drover shutdown` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shutdown {
    /// The owner's pid, when one ran.
    pub pid: Option<u32>,
    /// With `--wait`: it is gone.
    pub gone: bool,
}

/// `drover shutdown [--wait]`: ends the owner as SIGTERM does.
pub fn shutdown(args: ShutdownArgs, paths: &Paths) -> Result<(), DroverError> {
    let outcome = client_runtime()?.block_on(async {
        let Some(pong) = ping(paths).await? else {
            return Ok(Shutdown {
                pid: None,
                gone: true,
            });
        };
        let pid = nix::unistd::Pid::from_raw(pong.pid as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).map_err(|e| {
            DroverError::new(
                ErrorCode::Internal,
                format!("cannot signal the owner (pid {}): {e}", pong.pid),
            )
        })?;
        if !args.wait {
            return Ok(Shutdown {
                pid: Some(pong.pid),
                gone: false,
            });
        }
        let give_up = tokio::time::Instant::now() + GONE_WITHIN;
        // While it winds down its socket may still answer (with refusals): the process
        // itself is what must be gone.
        while alive(pid) {
            if tokio::time::Instant::now() >= give_up {
                return Err(DroverError::new(
                    ErrorCode::WaitTimeout,
                    format!(
                        "the owner (pid {}) was still running after {} s; see {}",
                        pong.pid,
                        GONE_WITHIN.as_secs(),
                        paths.log_dir.display()
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(Shutdown {
            pid: Some(pong.pid),
            gone: true,
        })
    })?;
    if args.output.json {
        return print_json(&outcome);
    }
    match outcome.pid {
        None => note(&format!(
            "no drover owns {}; nothing to stop",
            paths.data_dir.display()
        )),
        Some(pid) if outcome.gone => note(&format!(
            "drover (pid {pid}) has stopped; its runs in a turn are interrupted (`drover resume RUN` goes on), the others come back as they are with the next one"
        )),
        Some(pid) => note(&format!(
            "drover (pid {pid}) is stopping; its runs in a turn are recorded as interrupted"
        )),
    }
    Ok(())
}

/// Whether the owner's process still runs.
fn alive(pid: nix::unistd::Pid) -> bool {
    drover_core::control::process_alive(pid.as_raw())
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `drover status --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    /// Whether an owner answers on the control socket.
    pub running: bool,
    pub pid: Option<u32>,
    /// The owner's version (with its commit); this drover's when none runs.
    pub version: String,
    pub started_at: Option<UnixMillis>,
    pub uptime_secs: Option<u64>,
    pub data_dir: PathBuf,
    pub socket: PathBuf,
    /// Runs (not removed) by state.
    pub runs: BTreeMap<String, u64>,
    /// Runs removed from the trays (not in `runs`; their history and money still count).
    pub removed: u64,
    /// The active runs, newest first, as `drover runs` lists them.
    pub active: Vec<RunSummary>,
    /// The current budget session's money (`None`: there is no ledger yet).
    pub budget: Option<BudgetView>,
    /// A config reload the owner refused: it keeps the config it had until the file is
    /// fixed.
    pub config_refused: Option<String>,
    /// Why the owner's ledger cannot write now: it refuses new work until it can.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger_unavailable: Option<String>,
    /// Runs a crashed drover left active (no owner runs): the next one puts them back
    /// where they were.
    pub owner_gone: usize,
}

/// `drover status`: whether an owner runs, the runs by state, the active runs and the
/// budget session's money. Every figure comes from the ledger's running totals and the
/// active runs alone, so it answers as fast with a long history as with a short one.
pub fn status(args: StatusArgs, paths: &Paths) -> Result<(), DroverError> {
    let status = client_runtime()?.block_on(async {
        let pong = ping(paths).await?;
        let owner = pong.is_some();
        let read = move |request: Request| async move {
            match owner {
                true => super::headless::ask(paths, request).await,
                false => offline::answer(paths, &request),
            }
        };
        // The three reads go out together: the owner answers them side by side.
        let counts = async { read(Request::Counts).await?.into_counts() };
        let active = async { read(Request::active_runs()).await?.into_runs() };
        let budget = async {
            match owner || paths.ledger_file.exists() {
                true => Ok(Some(read(Request::Budget).await?.into_budget()?)),
                false => Ok(None),
            }
        };
        let (counts, active, budget) = tokio::try_join!(counts, active, budget)?;
        let now = drover_core::clock::now_millis();
        Ok::<_, DroverError>(Status {
            running: owner,
            pid: pong.as_ref().map(|p| p.pid),
            version: pong
                .as_ref()
                .map_or_else(|| crate::VERSION.to_string(), |p| p.version.clone()),
            started_at: pong.as_ref().map(|p| p.started_at),
            uptime_secs: pong
                .as_ref()
                .map(|p| ((now - p.started_at).max(0) / 1000) as u64),
            data_dir: paths.data_dir.clone(),
            socket: paths.socket_file.clone(),
            runs: counts.by_state,
            removed: counts.removed,
            owner_gone: active.iter().filter(|r| r.head.owner_gone).count(),
            active,
            budget,
            ledger_unavailable: pong.as_ref().and_then(|p| p.ledger_unavailable.clone()),
            config_refused: pong.and_then(|p| p.config_refused),
        })
    })?;
    if args.output.json {
        return print_json(&status);
    }
    write_stdout(&status_lines(&status, drover_core::clock::now_millis()))
}

fn status_lines(s: &Status, now: UnixMillis) -> String {
    let mut out = match (s.pid, s.uptime_secs) {
        (Some(pid), Some(up)) => format!(
            "drover {} runs (pid {pid}, up {})\n",
            s.version,
            drover_core::text::duration_words(drover_core::clock::secs_millis(up))
        ),
        _ => "no drover runs (`drover serve --detach` starts one; `drover` opens the dashboard)\n"
            .to_string(),
    };
    if let Some(why) = &s.ledger_unavailable {
        out.push_str(&format!(
            "ledger    cannot write: {} — new work is refused until it can (drover tries again by itself)\n",
            drover_core::text::one_line(why)
        ));
    }
    if let Some(refused) = &s.config_refused {
        out.push_str(&format!(
            "config    {}\n",
            drover_core::text::one_line(refused)
        ));
    }
    out.push_str(&format!("data dir  {}\n", s.data_dir.display()));
    let runs: Vec<String> = s
        .runs
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect();
    let removed = match s.removed {
        0 => String::new(),
        n => format!(" ({n} more removed from the trays)"),
    };
    out.push_str(&format!(
        "runs      {}{removed}\n",
        if runs.is_empty() {
            "none".to_string()
        } else {
            runs.join(" · ")
        }
    ));
    if s.owner_gone > 0 {
        out.push_str(&format!(
            "          {} left active by a drover that is gone (a crash): the next start puts them back where they were\n",
            s.owner_gone
        ));
    }
    if let Some(b) = &s.budget {
        let state = if b.closed {
            " — closed: the hard cap is reached"
        } else if b.warned {
            " — past the warning"
        } else {
            ""
        };
        out.push_str(&format!(
            "budget    {}: {} spent of {}, {} reserved, {} available{state}\n",
            b.session,
            usd(b.spent_usd),
            usd(b.hard_cap_usd),
            usd(b.reserved_usd),
            usd(b.available_usd)
        ));
    }
    if !s.active.is_empty() {
        out.push('\n');
        out.push_str(&super::render::runs_table(&s.active, now));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_reads_at_a_glance() {
        let mut s = Status {
            running: true,
            pid: Some(42),
            version: "0.1.0 (abc)".into(),
            started_at: Some(0),
            uptime_secs: Some(150),
            data_dir: "/d".into(),
            socket: "/d/drover.sock".into(),
            runs: [("idle".to_string(), 1), ("running".to_string(), 2)].into(),
            removed: 0,
            active: Vec::new(),
            budget: None,
            config_refused: None,
            ledger_unavailable: None,
            owner_gone: 0,
        };
        assert_eq!(
            status_lines(&s, 0),
            "drover 0.1.0 (abc) runs (pid 42, up 2 min)\ndata dir  /d\nruns      1 idle · 2 running\n"
        );
        s.config_refused = Some(
            "config not reloaded: line 2: unknown key\n`x` (the config in force is kept)".into(),
        );
        assert_eq!(
            status_lines(&s, 0),
            "drover 0.1.0 (abc) runs (pid 42, up 2 min)\n\
             config    config not reloaded: line 2: unknown key `x` (the config in force is kept)\n\
             data dir  /d\nruns      1 idle · 2 running\n"
        );
        s.config_refused = None;
        s.ledger_unavailable =
            Some("the disk holding /d is full (database or disk is full)".into());
        assert_eq!(
            status_lines(&s, 0),
            "drover 0.1.0 (abc) runs (pid 42, up 2 min)\n\
             ledger    cannot write: the disk holding /d is full (database or disk is full) — new work is refused until it can (drover tries again by itself)\n\
             data dir  /d\nruns      1 idle · 2 running\n"
        );
        s.ledger_unavailable = None;
        s.pid = None;
        s.uptime_secs = None;
        s.owner_gone = 2;
        assert_eq!(
            status_lines(&s, 0),
            "no drover runs (`drover serve --detach` starts one; `drover` opens the dashboard)\n\
             data dir  /d\nruns      1 idle · 2 running\n          \
             2 left active by a drover that is gone (a crash): the next start puts them back where they were\n"
        );
        s.owner_gone = 0;
        s.removed = 4;
        s.budget = Some(BudgetView {
            session: "default".into(),
            spent_usd: 8.5,
            reserved_usd: 5.0,
            available_usd: 11.5,
            warning_usd: 8.0,
            hard_cap_usd: 25.0,
            runs_by_basis: Default::default(),
            unpriced_runs: Vec::new(),
            warned: true,
            closed: false,
            config_refused: None,
            ledger_unavailable: None,
        });
        assert_eq!(
            status_lines(&s, 0),
            "no drover runs (`drover serve --detach` starts one; `drover` opens the dashboard)\n\
             data dir  /d\nruns      1 idle · 2 running (4 more removed from the trays)\n\
             budget    default: $8.50 spent of $25.00, $5.00 reserved, $11.50 available \
             — past the warning\n"
        );
        s.budget = None;
        s.removed = 0;
        s.runs.clear();
        assert!(status_lines(&s, 0).starts_with("no drover runs"));
        assert!(status_lines(&s, 0).ends_with("runs      none\n"));
    }

    #[test]
    fn a_process_that_is_gone_is_not_alive() {
        assert!(alive(nix::unistd::Pid::this()));
        // pid_max is at most 2^22: this one cannot exist.
        assert!(!alive(nix::unistd::Pid::from_raw(i32::MAX)));
    }
}
