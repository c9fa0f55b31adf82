//! Claude Code (the pinned `claude`) on a host (docs/ARCHITECTURE.md §"Hosts"): drover
//! runs it over `ssh -T` to a real sshd on 127.0.0.1 (throwaway keys, a free port,
//! started in the same loopback-only namespace as the mock Anthropic API), in a directory
//! "there" (this machine, another directory). A permission is asked and answered, the
//! allowed command runs in that directory, and a follow-up goes on in the same session
//! through the same connection.
//!
//! sshd needs root: as another user the test says why and returns.

use std::time::Duration;

use serde_json::json;

use crate::drover::{Drover, provider_config};
use crate::mock::{MockApi, Protocol, Reply};
use crate::peers;
use crate::sshd::Sshd;

const MODEL: &str = "claude-sonnet-4-5";
const TURN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_on_a_host_asks_runs_there_and_takes_a_follow_up_in_its_session() {
    // Where only loopback exists, before sshd listens on it.
    crate::loopback::require();
    let Some(sshd) = Sshd::start("claude_on_a_host") else {
        return;
    };
    let claude = peers::cli("claude");
    let mock = MockApi::start(
        Protocol::AnthropicMessages,
        vec![
            Reply::tool_call(
                "Bash",
                json!({"command": "echo on-the-host-4c2 > there.txt", "description": "Write there.txt"}),
            ),
            Reply::text("Wrote it.\n\n## Result\nstatus: done\nsummary: wrote there.txt"),
            Reply::text("Still here.\n\n## Result\nstatus: done\nsummary: answered the follow-up"),
        ],
    )
    .await;
    let table = sshd.host_table("loop");
    let drover = Drover::start_with(|root| {
        format!(
            "{}\n{table}",
            provider_config(
                "claude-code",
                &claude,
                &peers::claude_env(root, &mock.url())
            )
        )
    })
    .await;
    let there = drover.root().join("there");
    std::fs::create_dir_all(&there).unwrap();
    let answer = drover
        .json(&[
            "dispatch",
            "--provider",
            "claude-code",
            "--model",
            MODEL,
            "--policy",
            "ask",
            "--host",
            "loop",
            "--cwd",
            there.to_str().unwrap(),
            "Write there.txt",
        ])
        .await;
    assert_eq!(answer["host"], "loop", "{answer:#}");
    let run = answer["run_id"].as_str().unwrap().to_string();

    let pending = drover.pending(&run, TURN).await;
    assert_eq!(pending["tool"], "Bash", "{pending:#}");
    let request = pending["request_id"].as_str().unwrap().to_string();
    drover.respond(&run, &request, &["allow"]).await;
    let view = drover.until_idle_after(&run, 1, TURN).await;
    assert_eq!(view["host"], "loop", "{view:#}");
    assert_eq!(
        std::fs::read_to_string(there.join("there.txt")).unwrap(),
        "on-the-host-4c2\n",
        "the allowed command ran in the run's directory on the host"
    );
    assert!(!drover.work_dir().join("there.txt").exists());
    let session = view["provider_session_id"].as_str().unwrap().to_string();
    let pid = view["pid"].as_u64().expect("an idle run keeps its child") as u32;

    drover.follow_up(&run, "still there?").await;
    let view = drover.until_idle_after(&run, 2, TURN).await;
    assert_eq!(view["provider_session_id"], session.as_str(), "{view:#}");
    assert_eq!(view["pid"], pid, "the same ssh child: {view:#}");
    let requests = mock.wait_for_model_requests(3, TURN).await;
    assert!(
        requests[2].body.to_string().contains("still there?"),
        "the follow-up reached the CLI on the host"
    );
    drover
        .complete(&run, Some(pid), TURN, Duration::from_secs(5))
        .await;
}
