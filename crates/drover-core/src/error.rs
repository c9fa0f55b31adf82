//! Errors a user can meet: a stable code and a sentence saying what to do next.
//!
//! Every refusal that crosses the dispatcher API, the control socket or the CLI is a
//! [`DroverError`]. The code is part of the public interface (scripts match on it), so a
//! code is never renamed; the sentence may be improved freely.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Stable error codes. Serialized in SCREAMING_SNAKE_CASE, e.g. `TASK_REQUIRED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The dispatch names a provider drover does not know, or one disabled in the config.
    InvalidProvider,
    /// The provider's CLI is not found (on `PATH`, or at its configured command): the run
    /// could not start; `drover doctor` says what is installed.
    ProviderUnavailable,
    /// The simulated agent has no scenario of that name (and it is no path to a file).
    ScenarioUnknown,
    /// The run is to be sandboxed (`--sandbox`, or `[limits] sandbox_auto` for an `auto`
    /// run) and bubblewrap is missing or cannot make its namespaces here: it is refused,
    /// never run unsandboxed (docs/ARCHITECTURE.md §"The sandbox").
    SandboxUnavailable,
    /// The dispatch names a host that no `[hosts.<name>]` table of the config describes
    /// (docs/ARCHITECTURE.md §"Hosts").
    HostUnknown,
    /// A run on a host asked for what runs only on this machine (a sandbox, a worktree):
    /// docs/ARCHITECTURE.md §"Hosts".
    HostUnsupported,
    /// The host did not answer through its transport (`drover doctor --host`).
    HostUnreachable,
    /// The task is empty.
    TaskRequired,
    /// The task is longer than `[limits] task_max_chars`.
    TaskTooLong,
    /// The working directory does not exist or is not a directory.
    CwdInvalid,
    /// The model is not in the catalog for that provider.
    ModelUnknown,
    /// The model is disabled for that provider in the config.
    ModelDisabled,
    /// The permission policy is unknown, or the provider does not support it.
    PermissionPolicyUnsupported,
    /// A spec or request field is malformed (an unknown capability, workspace or effort,
    /// a bad schema, tags, an empty run list, a bad budget amount).
    InvalidSpec,
    /// The budget session has no money left for the run: its hard cap is reached, or its
    /// spend leaves not a cent; or a `--no-queue` dispatch whose money is held by turns in
    /// flight (it may not wait for them).
    BudgetExceeded,
    /// Pricing is enforced and the model has no price in the catalog.
    BudgetUnpriced,
    /// A rail is full and the dispatch asked not to queue (`--no-queue`).
    MaxConcurrent,
    /// The budget session's queue is full (`[limits] queued_per_session`).
    QueueFull,
    /// The budget session already has as many runs waiting on route cards as it may
    /// (`[limits] held_per_session`).
    HeldFull,
    /// No run has that id (or it was removed).
    RunNotFound,
    /// No run (in memory or in the ledger) belongs to that workflow.
    WorkflowNotFound,
    /// The run's state does not allow what was asked: it has ended where an active run
    /// is needed, or is still active where it must have ended (remove, escalate).
    RunNotActive,
    /// The run is not idle, so it cannot take a follow-up now.
    RunNotIdle,
    /// A new worktree's setup (`[workspaces] setup`, or the repository's approved
    /// `.drover/setup`) failed or ran out of time, or the script cannot be read: the run
    /// did not start.
    SetupFailed,
    /// The run is taken over in its CLI's own interface (`drover attach`): drover sends
    /// it nothing until it is handed back.
    RunTakenOver,
    /// A hand-back for a run that is not taken over.
    RunNotTakenOver,
    /// The run cannot be taken over: its provider has no interactive interface drover
    /// can open, or it has no provider session yet.
    TakeOverUnsupported,
    /// The run cannot be resumed: only a run interrupted by a drover restart (with a
    /// provider session), a hibernated run or a turn held for the model API can.
    RunNotResumable,
    /// `resume` with no words on a run whose turn was not cut short by a restart (it
    /// waits for the user's words: drover never speaks for the user); nothing was sent.
    FollowUpNeeded,
    /// The run has used all its turns; a follow-up needs a new run.
    MaxTurns,
    /// The run has no pending request with that id.
    NoPendingRequest,
    /// The request was already answered, withdrawn or timed out.
    PermissionAlreadyResolved,
    /// The config file is not valid: bad TOML, an unknown key, a wrong type or values out
    /// of order.
    ConfigInvalid,
    /// The config file exists but cannot be read as text.
    ConfigUnreadable,
    /// The ledger could not read or record something.
    LedgerError,
    /// The ledger cannot write now (a full, read-only or failing disk): the request
    /// changed nothing; drover takes work again by itself once the disk writes.
    LedgerUnavailable,
    /// Another drover process already owns the data directory.
    OwnerRunning,
    /// No drover process owns the data directory (or the one that did went away), so a
    /// command that changes runs has no one to ask.
    NoOwner,
    /// The owner did not answer a control-socket request in time.
    OwnerUnresponsive,
    /// A control-socket line that is not a request (not JSON, too long, unknown method).
    InvalidRequest,
    /// `drover wait` gave up before its condition was met.
    WaitTimeout,
    /// The command was stopped by a signal (Ctrl-C) before it finished.
    Interrupted,
    /// A route card's pick cannot be taken (the model is gone or hidden, no vision for
    /// design work, no price while pricing is enforced); the card stays open.
    RoutePickRefused,
    /// No route card is open for that run (or no option has that number).
    RouteNotFound,
    /// Routing found no option: every provider is unavailable or none has a suitable model.
    NoRoute,
    /// A control-socket request over a bound: the line, or a list inside it (run ids in
    /// `wait`, answers in `respond`), is too long.
    RequestTooLarge,
    /// One connection already has as many `wait`s pending as it may.
    TooManyWaits,
    /// The data directory is writable by others (its socket could be swapped).
    DataDirUnsafe,
    /// The control socket is served by another user's process.
    SocketUntrusted,
    /// A run's workspace cannot be made as asked: the directory is not in a git work
    /// tree, the repository has no commit, git is missing.
    WorkspaceUnavailable,
    /// The run works in a shared directory, or its worktree was already merged, kept or
    /// discarded.
    NoWorktree,
    /// The run's worktree was deleted outside drover.
    WorktreeMissing,
    /// A merge would conflict; nothing was changed.
    MergeConflict,
    /// The user's checkout has uncommitted changes to files a merge touches (or is in
    /// the middle of a merge); nothing was changed.
    CheckoutDirty,
    /// A turn is running (or the run is still active) so its worktree cannot be merged,
    /// kept or discarded now.
    RunActive,
    /// Removing the run would lose work its worktree holds (`--force` keeps it on the
    /// branch and removes the run).
    UnmergedWork,
    /// The run started from a detached HEAD (or its base branch is gone): there is no
    /// branch to merge into.
    NoBaseBranch,
    /// Another merge, keep or discard of the run is under way.
    WorkspaceBusy,
    /// `diff --file` names a file the run did not change.
    FileNotChanged,
    /// git failed at something drover asked of it (its words follow).
    GitFailed,
    /// The repository has no remote to push a run's branch to.
    NoRemote,
    /// The remote refused the push of a run's branch (git's words follow); the user's
    /// checkout is unchanged.
    PushRefused,
    /// The remote or the forge's CLI refused for want of credentials (its words follow,
    /// with no token shown).
    AuthFailed,
    /// The forge's CLI (`gh`, `glab`) failed to open or read a pull request (its words
    /// follow).
    ForgeFailed,
    /// The forge's CLI is not on PATH, so a pull request cannot be read.
    ForgeUnavailable,
    /// The run has no pull request to read.
    NoPullRequest,
    /// A sub-run would nest deeper than `[limits] max_depth`.
    MaxDepth,
    /// An approval rule that cannot be made: a bad scope, kind or decision, or a pattern
    /// that is empty, too long or does not parse.
    RuleInvalid,
    /// No approval rule has that id.
    RuleNotFound,
    /// As many approval rules are kept as drover allows.
    TooManyRules,
    /// A search query FTS5 cannot read (`drover search`, the dashboard's `/`).
    SearchQueryInvalid,
    /// Something went wrong inside drover or its surroundings (a file it cannot create,
    /// an answer it cannot write); the sentence says what.
    Internal,
}

impl ErrorCode {
    /// The code as users see it (`TASK_REQUIRED`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidProvider => "INVALID_PROVIDER",
            ErrorCode::ProviderUnavailable => "PROVIDER_UNAVAILABLE",
            ErrorCode::ScenarioUnknown => "SCENARIO_UNKNOWN",
            ErrorCode::SandboxUnavailable => "SANDBOX_UNAVAILABLE",
            ErrorCode::HostUnknown => "HOST_UNKNOWN",
            ErrorCode::HostUnsupported => "HOST_UNSUPPORTED",
            ErrorCode::HostUnreachable => "HOST_UNREACHABLE",
            ErrorCode::TaskRequired => "TASK_REQUIRED",
            ErrorCode::TaskTooLong => "TASK_TOO_LONG",
            ErrorCode::CwdInvalid => "CWD_INVALID",
            ErrorCode::ModelUnknown => "MODEL_UNKNOWN",
            ErrorCode::ModelDisabled => "MODEL_DISABLED",
            ErrorCode::PermissionPolicyUnsupported => "PERMISSION_POLICY_UNSUPPORTED",
            ErrorCode::InvalidSpec => "INVALID_SPEC",
            ErrorCode::BudgetExceeded => "BUDGET_EXCEEDED",
            ErrorCode::BudgetUnpriced => "BUDGET_UNPRICED",
            ErrorCode::MaxConcurrent => "MAX_CONCURRENT",
            ErrorCode::QueueFull => "QUEUE_FULL",
            ErrorCode::HeldFull => "HELD_FULL",
            ErrorCode::RunNotFound => "RUN_NOT_FOUND",
            ErrorCode::WorkflowNotFound => "WORKFLOW_NOT_FOUND",
            ErrorCode::RunNotActive => "RUN_NOT_ACTIVE",
            ErrorCode::RunNotIdle => "RUN_NOT_IDLE",
            ErrorCode::SetupFailed => "SETUP_FAILED",
            ErrorCode::RunTakenOver => "RUN_TAKEN_OVER",
            ErrorCode::RunNotTakenOver => "RUN_NOT_TAKEN_OVER",
            ErrorCode::TakeOverUnsupported => "TAKE_OVER_UNSUPPORTED",
            ErrorCode::RunNotResumable => "RUN_NOT_RESUMABLE",
            ErrorCode::FollowUpNeeded => "FOLLOW_UP_NEEDED",
            ErrorCode::MaxTurns => "MAX_TURNS",
            ErrorCode::NoPendingRequest => "NO_PENDING_REQUEST",
            ErrorCode::PermissionAlreadyResolved => "PERMISSION_ALREADY_RESOLVED",
            ErrorCode::ConfigInvalid => "CONFIG_INVALID",
            ErrorCode::ConfigUnreadable => "CONFIG_UNREADABLE",
            ErrorCode::LedgerError => "LEDGER_ERROR",
            ErrorCode::LedgerUnavailable => "LEDGER_UNAVAILABLE",
            ErrorCode::OwnerRunning => "OWNER_RUNNING",
            ErrorCode::NoOwner => "NO_OWNER",
            ErrorCode::OwnerUnresponsive => "OWNER_UNRESPONSIVE",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::WaitTimeout => "WAIT_TIMEOUT",
            ErrorCode::Interrupted => "INTERRUPTED",
            ErrorCode::RoutePickRefused => "ROUTE_PICK_REFUSED",
            ErrorCode::RouteNotFound => "ROUTE_NOT_FOUND",
            ErrorCode::NoRoute => "NO_ROUTE",
            ErrorCode::MaxDepth => "MAX_DEPTH",
            ErrorCode::RequestTooLarge => "REQUEST_TOO_LARGE",
            ErrorCode::TooManyWaits => "TOO_MANY_WAITS",
            ErrorCode::DataDirUnsafe => "DATA_DIR_UNSAFE",
            ErrorCode::SocketUntrusted => "SOCKET_UNTRUSTED",
            ErrorCode::WorkspaceUnavailable => "WORKSPACE_UNAVAILABLE",
            ErrorCode::NoWorktree => "NO_WORKTREE",
            ErrorCode::WorktreeMissing => "WORKTREE_MISSING",
            ErrorCode::MergeConflict => "MERGE_CONFLICT",
            ErrorCode::CheckoutDirty => "CHECKOUT_DIRTY",
            ErrorCode::RunActive => "RUN_ACTIVE",
            ErrorCode::UnmergedWork => "UNMERGED_WORK",
            ErrorCode::NoBaseBranch => "NO_BASE_BRANCH",
            ErrorCode::WorkspaceBusy => "WORKSPACE_BUSY",
            ErrorCode::FileNotChanged => "FILE_NOT_CHANGED",
            ErrorCode::GitFailed => "GIT_FAILED",
            ErrorCode::NoRemote => "NO_REMOTE",
            ErrorCode::PushRefused => "PUSH_REFUSED",
            ErrorCode::AuthFailed => "AUTH_FAILED",
            ErrorCode::ForgeFailed => "FORGE_FAILED",
            ErrorCode::ForgeUnavailable => "FORGE_UNAVAILABLE",
            ErrorCode::NoPullRequest => "NO_PULL_REQUEST",
            ErrorCode::RuleInvalid => "RULE_INVALID",
            ErrorCode::RuleNotFound => "RULE_NOT_FOUND",
            ErrorCode::TooManyRules => "TOO_MANY_RULES",
            ErrorCode::SearchQueryInvalid => "SEARCH_QUERY_INVALID",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: the stable code plus one sentence that says what to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct DroverError {
    /// The stable code scripts match on.
    pub code: ErrorCode,
    /// One sentence: what went wrong and what to do next.
    pub message: String,
}

impl DroverError {
    /// A refusal with `code` and the sentence `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        DroverError {
            code,
            message: message.into(),
        }
    }
}

/// Milliseconds since the Unix epoch. Pure code takes time as a value; only drivers read
/// the clock.
pub type UnixMillis = i64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_display_form() {
        for code in [
            ErrorCode::InvalidProvider,
            ErrorCode::ProviderUnavailable,
            ErrorCode::ScenarioUnknown,
            ErrorCode::SandboxUnavailable,
            ErrorCode::HostUnknown,
            ErrorCode::HostUnsupported,
            ErrorCode::HostUnreachable,
            ErrorCode::PermissionPolicyUnsupported,
            ErrorCode::NoPendingRequest,
            ErrorCode::OwnerUnresponsive,
            ErrorCode::InvalidRequest,
            ErrorCode::WaitTimeout,
            ErrorCode::Interrupted,
            ErrorCode::RoutePickRefused,
            ErrorCode::RouteNotFound,
            ErrorCode::NoRoute,
            ErrorCode::RequestTooLarge,
            ErrorCode::TooManyWaits,
            ErrorCode::DataDirUnsafe,
            ErrorCode::SocketUntrusted,
            ErrorCode::WorkspaceUnavailable,
            ErrorCode::NoWorktree,
            ErrorCode::WorktreeMissing,
            ErrorCode::MergeConflict,
            ErrorCode::CheckoutDirty,
            ErrorCode::RunActive,
            ErrorCode::UnmergedWork,
            ErrorCode::NoBaseBranch,
            ErrorCode::WorkspaceBusy,
            ErrorCode::FileNotChanged,
            ErrorCode::GitFailed,
            ErrorCode::NoRemote,
            ErrorCode::PushRefused,
            ErrorCode::AuthFailed,
            ErrorCode::ForgeFailed,
            ErrorCode::ForgeUnavailable,
            ErrorCode::NoPullRequest,
            ErrorCode::MaxDepth,
        ] {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    #[test]
    fn error_displays_code_then_sentence() {
        let e = DroverError::new(ErrorCode::TaskRequired, "Give the run a task.");
        assert_eq!(e.to_string(), "TASK_REQUIRED: Give the run a task.");
    }
}
