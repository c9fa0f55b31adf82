//! Answers from the ledger alone, for when no process owns the data directory: the same
//! shapes the owner gives, built by the dispatcher's own projections
//! ([`crate::dispatch::projections`]).
//!
//! What must stay true: only a read-only connection is used, and reading never creates
//! the ledger; a request that only an owner can answer (any change, and a `wait` the
//! ledger does not already meet) is `NO_OWNER`; a run the ledger has active while its
//! last owner is gone ([`super::last_owner_gone`]: a crash) is marked `owner_gone`, so
//! it is not shown as running. A `diff` also reads the run's worktree through git
//! ([`diff`]), which changes nothing there.

use serde_json::Value;

use super::no_owner;
use crate::dispatch::Request;
use crate::dispatch::api::{Response, RunsFilter, SpendView};
use crate::dispatch::projections;
use crate::error::DroverError;
use crate::ledger::LedgerReader;
use crate::ledger::spend::Since;
use crate::paths::Paths;

/// `diff` with no owner: the run's workspace from the ledger, its diff from git (which
/// only reads the worktree).
pub async fn diff(
    paths: &Paths,
    run_id: &str,
    file: Option<&str>,
    stat: bool,
) -> Result<Response, DroverError> {
    let workspace = {
        let reader = open_reader(paths)?.ok_or_else(|| projections::run_not_found(run_id))?;
        projections::run_view_from_ledger(&reader, run_id)?.workspace
    };
    let workspace = crate::workspace::diffable(run_id, workspace.as_ref())?;
    // A worktree on a host is read there, through the host's transport
    // (docs/ARCHITECTURE.md §"Hosts").
    let at = match workspace.host.as_deref() {
        Some(host) => {
            let config = crate::config::Config::load(&paths.config_file)?;
            crate::workspace::git::Where::Host(Box::new(
                crate::providers::transport::Transport::named(
                    host,
                    &config.hosts,
                    &paths.ssh_dir(),
                )?,
            ))
        }
        None => crate::workspace::git::Where::Here,
    };
    let view = crate::workspace::git::within(
        at,
        crate::workspace::ops::diff(run_id, &workspace, file, stat),
    )
    .await?;
    Ok(Response::Diff(Box::new(view)))
}

/// The ledger of `paths`, read-only; `None` when there is no ledger file yet.
pub fn open_reader(paths: &Paths) -> Result<Option<LedgerReader>, DroverError> {
    if !paths.ledger_file.exists() {
        return Ok(None);
    }
    Ok(Some(LedgerReader::open(&paths.ledger_file)?))
}

/// Answers `request` from the ledger, as the owner would: `runs`, `counts`, `show`,
/// `transcript`, `budget`, `search`, `spend`, and a `wait` whose condition the ledger already meets. Anything
/// else (and a `wait` that only a running dispatcher could satisfy) is `NO_OWNER`.
pub fn answer(paths: &Paths, request: &Request) -> Result<Response, DroverError> {
    let reader = open_reader(paths)?;
    let response = match (request, reader.as_ref()) {
        (Request::Runs { .. }, reader) => Response::Runs(match (reader, RunsFilter::of(request)) {
            (Some(reader), Some(filter)) => {
                projections::run_summaries_from_ledger(reader, &filter)?
            }
            _ => Vec::new(),
        }),
        (Request::Counts, Some(reader)) => Response::Counts(projections::run_counts(reader)?),
        (Request::Counts, None) => Response::Counts(Default::default()),
        (Request::Show { run_id }, Some(reader)) => {
            Response::Show(Box::new(projections::run_view_from_ledger(reader, run_id)?))
        }
        (Request::Transcript { run_id, format }, Some(reader)) => Response::Transcript(Box::new(
            projections::transcript_from_ledger(reader, run_id, *format)?,
        )),
        (Request::Show { run_id } | Request::Transcript { run_id, .. }, None) => {
            return Err(projections::run_not_found(run_id));
        }
        (
            Request::Wait {
                run_ids,
                workflow,
                until,
                any,
                ..
            },
            Some(reader),
        ) => {
            match projections::wait_from_ledger(reader, run_ids, workflow.as_deref(), *until, *any)?
            {
                Some(outcome) => Response::Wait(outcome),
                None => return Err(no_owner(paths)),
            }
        }
        (Request::Budget, Some(reader)) => {
            let session = reader
                .meta(crate::dispatch::core::SESSION_KEY)?
                .unwrap_or_else(|| crate::dispatch::core::DEFAULT_SESSION.to_string());
            let config = crate::config::Config::load(&paths.config_file)?;
            Response::Budget(Box::new(projections::budget_from_ledger(
                reader,
                &session,
                &config.limits,
                0.0,
            )?))
        }
        (Request::Rules, Some(reader)) => Response::Rules(reader.rules()?),
        (Request::Rules, None) => Response::Rules(Vec::new()),
        (Request::Search { query, limit }, Some(reader)) => {
            let limit = limit.unwrap_or(crate::ledger::SEARCH_LIMIT_DEFAULT);
            Response::Search(Box::new(projections::search_from_ledger(
                reader,
                query,
                limit,
                Vec::new(),
            )?))
        }
        (Request::Search { .. }, None) => Response::Search(Box::default()),
        (Request::Spend { by, since }, reader) => {
            let since = since.as_deref().map(Since::parse).transpose()?;
            Response::Spend(Box::new(match reader {
                Some(reader) => reader.spend(*by, since)?,
                None => SpendView {
                    by: *by,
                    ..SpendView::default()
                },
            }))
        }
        _ => return Err(no_owner(paths)),
    };
    Ok(mark_owner_gone(response, || super::last_owner_gone(paths)))
}

/// Marks the active runs of `response` whose owner is gone (asked only when one is).
fn mark_owner_gone(mut response: Response, gone: impl FnOnce() -> bool) -> Response {
    let mut heads: Vec<&mut crate::dispatch::api::RunHead> = match &mut response {
        Response::Runs(runs) => runs.iter_mut().map(|r| &mut r.head).collect(),
        Response::Show(view) => vec![&mut view.head],
        _ => Vec::new(),
    };
    heads.retain(|head| head.state.is_active());
    if !heads.is_empty() && gone() {
        for head in heads {
            head.owner_gone = true;
        }
    }
    response
}

/// [`answer`] as JSON (what `--json` prints).
pub fn answer_json(paths: &Paths, request: &Request) -> Result<Value, DroverError> {
    answer(paths, request).map(|r| r.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::api::{RunSummary, RunView, WaitUntil};
    use crate::dispatch::projections::tests::filled;
    use crate::error::ErrorCode;
    use serde_json::json;

    #[test]
    fn an_active_run_whose_owner_is_gone_is_marked_so() {
        let (_dir, paths, _reader) = filled();
        let runs = Request::Runs {
            state: None,
            include_removed: false,
            workflow: None,
            limit: None,
            before: None,
            search: None,
        };
        let gone = |paths: &Paths| -> Vec<(String, bool, bool)> {
            let Response::Runs(runs) = answer(paths, &runs).unwrap() else {
                panic!("runs answers runs");
            };
            runs.into_iter()
                .map(|r| (r.head.run_id, r.head.state.is_active(), r.head.owner_gone))
                .collect()
        };
        // (the pid in the lock file, whether the last owner is gone)
        for (pid, owner_gone) in [
            (std::process::id().to_string(), false),
            (i32::MAX.to_string(), true),
        ] {
            std::fs::write(&paths.lock_file, &pid).unwrap();
            for (run, active, marked) in gone(&paths) {
                assert_eq!(marked, active && owner_gone, "{run} with {pid}");
            }
            let Response::Show(view) = answer(
                &paths,
                &Request::Show {
                    run_id: "r2".into(),
                },
            )
            .unwrap() else {
                panic!("show answers a view");
            };
            assert!(view.head.state.is_active());
            assert_eq!(view.head.owner_gone, owner_gone, "{pid}");
        }
    }

    #[test]
    fn answer_serves_questions_and_refuses_changes_without_an_owner() {
        let empty = tempfile::tempdir().unwrap();
        let paths = Paths::under(empty.path());
        // No ledger yet: an empty list, no runs to show, and nothing is created.
        let runs = Request::Runs {
            state: None,
            include_removed: false,
            workflow: None,
            limit: None,
            before: None,
            search: None,
        };
        assert_eq!(answer_json(&paths, &runs).unwrap(), json!([]));
        let show = Request::Show {
            run_id: "r1".into(),
        };
        assert_eq!(
            answer(&paths, &show).unwrap_err().code,
            ErrorCode::RunNotFound
        );
        assert!(!paths.ledger_file.exists());

        let (_dir, paths, _reader) = filled();
        let shown = answer_json(&paths, &show).unwrap();
        let view: RunView = serde_json::from_value(shown).unwrap();
        assert_eq!(view.head.run_id, "r1");
        let listed: Vec<RunSummary> =
            serde_json::from_value(answer_json(&paths, &runs).unwrap()).unwrap();
        assert_eq!(listed.len(), 2);
        let stop = Request::Stop {
            run_id: "r1".into(),
        };
        let e = answer(&paths, &stop).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoOwner);
        assert_eq!(
            e.message,
            format!(
                "no drover owns {}; start `drover serve` (or the dashboard) first",
                paths.data_dir.display()
            )
        );
        let unmet = Request::Wait {
            run_ids: vec!["r2".into()],
            workflow: None,
            until: WaitUntil::Terminal,
            any: false,
            timeout_secs: Some(5),
        };
        assert_eq!(answer(&paths, &unmet).unwrap_err().code, ErrorCode::NoOwner);
    }
}
