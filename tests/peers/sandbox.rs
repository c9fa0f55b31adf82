//! Claude Code (the pinned `claude`) in drover's sandbox (docs/ARCHITECTURE.md
//! §"The sandbox"), against the mock Anthropic Messages API: a `Write` outside the run's
//! worktree, allowed by the user, fails inside bubblewrap (read-only file system) and
//! the file is not created; the run's own work in its worktree is done.
//!
//! bubblewrap needs namespaces: CI runs as root with `bwrap` installed (`.ci/run`); as
//! another user the test says why and returns.

use std::time::Duration;

use serde_json::json;

use crate::drover::{Drover, provider_config};
use crate::mock::{MockApi, Protocol, Reply};
use crate::peers;

const MODEL: &str = "claude-sonnet-4-5";
const TURN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_in_a_sandbox_is_allowed_a_write_outside_its_worktree_and_the_write_fails() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: not root, and bubblewrap's namespaces need root on CI");
        return;
    }
    // Outside /tmp (the sandbox's /tmp is its own): a directory the sandbox shows
    // read-only.
    let outside = tempfile::Builder::new()
        .prefix("peers-sandbox-outside")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let escaped = outside.path().join("escaped.txt");
    let claude = peers::cli("claude");
    let mock = MockApi::start(
        Protocol::AnthropicMessages,
        vec![
            Reply::tool_call(
                "Write",
                json!({"file_path": escaped.display().to_string(), "content": "escaped-3b7\n"}),
            ),
            Reply::tool_call(
                "Bash",
                json!({"command": "echo inside-5e1 > inside.txt", "description": "Write inside.txt"}),
            ),
            Reply::text("Tried both.\n\n## Result\nstatus: done\nsummary: tried both"),
        ],
    )
    .await;
    let drover = Drover::start_with(|root| {
        provider_config(
            "claude-code",
            &claude,
            &peers::claude_env(root, &mock.url()),
        )
    })
    .await;
    drover.work_repo().await;
    let run = drover
        .dispatch(&[
            "--provider",
            "claude-code",
            "--model",
            MODEL,
            "--policy",
            "ask",
            "--workspace",
            "worktree",
            "--sandbox",
            "Write outside, then inside",
        ])
        .await;

    // The user allows the write outside: the sandbox, not a prompt, stops it.
    let pending = drover.pending(&run, TURN).await;
    assert_eq!(pending["tool"], "Write", "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    drover.respond(&run, &request, &["allow"]).await;
    let pending = drover.pending(&run, TURN).await;
    assert_eq!(pending["tool"], "Bash", "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    drover.respond(&run, &request, &["allow"]).await;

    let view = drover.until_state(&run, "idle", TURN).await;
    assert_eq!(view["sandbox"], true, "{view:#}");
    assert!(!escaped.exists(), "the write outside the worktree landed");
    let requests = mock.wait_for_model_requests(3, TURN).await;
    let results = mock.tool_results(&requests[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].is_error, "{results:?}");
    assert!(
        results[0].content.to_lowercase().contains("read-only"),
        "{results:?}"
    );
    let worktree = std::path::PathBuf::from(view["workspace"]["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("inside.txt")).unwrap(),
        "inside-5e1\n"
    );
    let pid = view["pid"].as_u64().expect("an idle run keeps its child") as u32;
    drover
        .complete(&run, Some(pid), TURN, Duration::from_secs(5))
        .await;
}
