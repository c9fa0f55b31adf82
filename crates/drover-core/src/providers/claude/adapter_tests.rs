//! The adapter against a fake `claude`: a bash script that speaks just enough
//! stream-json, records its argv and every stdin line, and plays one scenario
//! (`FAKE_MODE`). Every wait is bounded; nothing sleeps and hopes.

use super::*;
use crate::providers::{
    AlwaysOption, Ask, ModelUsage, PermissionAnswer, PermissionRequest, ProviderCommand,
    RequestKind, RunProviderEvent, Tokens, TurnEnd,
};
use crate::spec::{Capability, PermissionPolicy};
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use tempfile::TempDir;
use tokio::sync::mpsc;

const FAKE_CLAUDE: &str = r#"
dir="$FAKE_DIR"
mode="$FAKE_MODE"
printf '%s\n' "$@" > "$dir/argv"
pmode=none; prev=
for a in "$@"; do [ "$prev" = --permission-mode ] && pmode=$a; prev=$a; done
echo "fake claude starting ($mode)" >&2
case "$mode" in
  dies) echo "fatal: no credentials" >&2; exit 3 ;;
  stubborn) trap '' TERM; sleep 1000 & ;;
esac
out() { printf '%s\n' "$1"; }
id_of() { printf '%s' "$1" | sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p'; }
ask() {
  out '{"type":"control_request","request_id":"'"$1"'","request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash","input":{"command":"ls /tmp","description":"list"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls /tmp"}],"behavior":"allow","destination":"localSettings"}],"blocked_path":"/tmp","tool_use_id":"toolu_01"}}'
}
result() {
  out '{"type":"result","subtype":"success","is_error":false,"duration_ms":12,"num_turns":1,"result":"'"$1"'","session_id":"sess-1","total_cost_usd":0.0123,"usage":{"input_tokens":10,"output_tokens":4},"modelUsage":{"claude-sonnet-4-5":{"inputTokens":10,"outputTokens":4,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":0.0123}},"permission_denials":[],"terminal_reason":"completed"}'
}
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$dir/stdin.log"
  case "$line" in
    *'"subtype":"initialize"'*)
      [ "$mode" = silent ] && continue
      [ "$mode" = chatty ] && out 'warming up, not json'
      out '{"type":"control_response","response":{"subtype":"success","request_id":"'"$(id_of "$line")"'","response":{"commands":[],"pid":'$$'}}}'
      ;;
    *'"subtype":"interrupt"'*)
      out '{"type":"control_response","response":{"subtype":"success","request_id":"'"$(id_of "$line")"'"}}'
      ;;
    *'"type":"user"'*)
      out '{"type":"system","subtype":"init","session_id":"sess-1","model":"claude-sonnet-4-5","permissionMode":"'"$pmode"'","claude_code_version":"2.1.197","tools":["Bash"]}'
      case "$mode" in
        ask)
          out '{"type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"ls /tmp"}}]},"session_id":"sess-1"}'
          ask perm-1 ;;
        withdraw)
          ask perm-2
          out '{"type":"control_cancel_request","request_id":"perm-2"}'
          ask perm-1 ;;
        *)
          out '{"type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello from the fake."}],"usage":{"input_tokens":10,"output_tokens":4}},"session_id":"sess-1"}'
          result "Hello from the fake." ;;
      esac
      ;;
    *'"type":"control_response"'*)
      out '{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"a\nb","is_error":false}]},"session_id":"sess-1"}'
      result "Listed." ;;
  esac
done
if [ "$mode" = stubborn ]; then while :; do sleep 1; done; fi
"#;

/// Generous: a loaded CI machine is slow, and a hang still fails.
const WAIT: Duration = Duration::from_secs(20);

fn short_timings() -> AdapterTimings {
    AdapterTimings {
        handshake: Duration::from_secs(10),
        interrupt: Duration::from_millis(500),
        shutdown: ShutdownTimings {
            stdin_grace: Duration::from_millis(500),
            term_grace: Duration::from_millis(500),
            drain: Duration::from_secs(2),
        },
    }
}

struct FakeRun {
    dir: TempDir,
    spec: LaunchSpec,
    handle: AdapterHandle,
    events: mpsc::Receiver<RunProviderEvent>,
}

fn fake_spec(dir: &TempDir, mode: &str, policy: PermissionPolicy) -> LaunchSpec {
    let script = dir.path().join("fake-claude.sh");
    std::fs::write(&script, FAKE_CLAUDE).expect("write the fake CLI");
    let mut env = BTreeMap::new();
    env.insert("FAKE_DIR".to_string(), dir.path().display().to_string());
    env.insert("FAKE_MODE".to_string(), mode.to_string());
    LaunchSpec {
        run_id: format!("run-{mode}"),
        args: vec![script.display().to_string()],
        env,
        cwd: dir.path().to_path_buf(),
        model: Some("claude-sonnet-4-5".into()),
        ..LaunchSpec::for_tests("claude-code", "/bin/bash", policy, Capability::Workspace)
    }
}

fn start(mode: &str, policy: PermissionPolicy, timings: AdapterTimings) -> FakeRun {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = fake_spec(&dir, mode, policy);
    start_spec(dir, spec, timings)
}

fn start_spec(dir: TempDir, spec: LaunchSpec, timings: AdapterTimings) -> FakeRun {
    let (tx, events) = mpsc::channel(64);
    let handle = launch_with(spec.clone(), tx, timings).expect("launch the fake");
    FakeRun {
        dir,
        spec,
        handle,
        events,
    }
}

impl FakeRun {
    fn send(&self, command: ProviderCommand) {
        self.handle
            .commands
            .send(command)
            .expect("the adapter takes commands");
    }

    async fn next(&mut self) -> ProviderEvent {
        let event = tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("an event in time")
            .expect("the adapter is still sending");
        assert_eq!(*event.run_id, *self.spec.run_id);
        event.event
    }

    async fn take(&mut self, n: usize) -> Vec<ProviderEvent> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.next().await);
        }
        out
    }

    /// Every event up to and including `Exited`; then the adapter must be done (its
    /// sender dropped) and no process of the child's group may remain.
    async fn until_exited(&mut self) -> Vec<ProviderEvent> {
        let mut out = Vec::new();
        loop {
            let event = self.next().await;
            let last = matches!(event, ProviderEvent::Exited { .. });
            out.push(event);
            if last {
                break;
            }
        }
        let after = tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("the adapter finishes");
        assert!(after.is_none(), "an event after Exited: {after:?}");
        let pgid = self.handle.pid.expect("a pid") as i32;
        assert_eq!(
            kill(Pid::from_raw(-pgid), None),
            Err(Errno::ESRCH),
            "a process of the child's group survived"
        );
        out
    }

    fn stdin_lines(&self) -> Vec<Value> {
        let log = std::fs::read_to_string(self.dir.path().join("stdin.log")).unwrap_or_default();
        log.lines()
            .map(|l| serde_json::from_str(l).expect("drover writes JSON lines"))
            .collect()
    }

    fn argv(&self) -> Vec<String> {
        let argv = std::fs::read_to_string(self.dir.path().join("argv")).expect("argv");
        argv.lines().map(str::to_string).collect()
    }
}

fn exited(code: Option<i32>, signal: Option<i32>, stderr_tail: &str) -> ProviderEvent {
    ProviderEvent::Exited {
        code,
        signal,
        stderr_tail: stderr_tail.to_string(),
    }
}

fn turn_end(text: &str) -> ProviderEvent {
    ProviderEvent::TurnCompleted(TurnEnd {
        is_error: false,
        transient: false,
        subtype: "success".into(),
        text: Some(text.into()),
        session_id: Some("sess-1".into()),
        total_cost_usd: Some(0.0123),
        tokens: Tokens {
            input: 10,
            output: 4,
            ..Tokens::default()
        },
        model_usage: vec![ModelUsage {
            model: "claude-sonnet-4-5".into(),
            tokens: Tokens {
                input: 10,
                output: 4,
                ..Tokens::default()
            },
            cost_usd: Some(0.0123),
        }],
        num_turns: Some(1),
        duration_ms: Some(12),
        api_error_status: None,
        api_message: None,
        terminal_reason: Some("completed".into()),
        structured_output: None,
        permission_denials: 0,
    })
}

fn session() -> ProviderEvent {
    ProviderEvent::Session {
        session_id: "sess-1".into(),
        model: Some("claude-sonnet-4-5".into()),
    }
}

#[tokio::test]
async fn a_turn_sent_before_ready_runs_after_the_handshake() {
    let mut run = start("plain", PermissionPolicy::Ask, short_timings());
    // Queued: the adapter carries it out once the handshake is done.
    run.send(ProviderCommand::StartTurn {
        prompt: "say \"hello\"".into(),
    });
    let events = run.take(5).await;
    assert_eq!(
        events,
        vec![
            ProviderEvent::Ready { version: None },
            session(),
            ProviderEvent::AssistantText {
                text: "Hello from the fake.".into()
            },
            ProviderEvent::Usage {
                model: Some("claude-sonnet-4-5".into()),
                tokens: Tokens {
                    input: 10,
                    output: 4,
                    ..Tokens::default()
                },
            },
            turn_end("Hello from the fake."),
        ]
    );
    run.send(ProviderCommand::Interrupt);
    run.send(ProviderCommand::Shutdown);
    assert_eq!(
        run.until_exited().await,
        vec![exited(Some(0), None, "fake claude starting (plain)")]
    );
    let lines = run.stdin_lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(
        lines[0]["request"],
        json!({"subtype":"initialize","hooks":null})
    );
    assert_eq!(
        lines[1],
        json!({"type":"user","message":{"role":"user","content":"say \"hello\""},
               "parent_tool_use_id":null,"session_id":"default"})
    );
    assert_eq!(lines[2]["request"], json!({"subtype":"interrupt"}));
    // The script sees the flags after its own path (the configured prefix).
    assert_eq!(run.argv(), args::build_args(&run.spec)[1..]);
}

#[tokio::test]
async fn an_answer_reaches_the_child_in_the_protocol_shape() {
    let mut run = start("withdraw", PermissionPolicy::Ask, short_timings());
    assert_eq!(run.next().await, ProviderEvent::Ready { version: None });
    run.send(ProviderCommand::StartTurn {
        prompt: "list /tmp".into(),
    });
    let events = run.take(4).await;
    let request = |id: &str| {
        ProviderEvent::PermissionRequested(PermissionRequest {
            request_id: id.into(),
            kind: RequestKind::Permission,
            tool: "Bash".into(),
            ask: Ask::command("ls /tmp", None, Some("list".into())),
            always: Some(AlwaysOption::new(
                "allow the Bash command `ls /tmp` for the rest of this run",
            )),
            tool_use_id: Some("toolu_01".into()),
            blocked_path: Some("/tmp".into()),
        })
    };
    assert_eq!(
        events,
        vec![
            session(),
            request("perm-2"),
            ProviderEvent::PermissionWithdrawn {
                request_id: "perm-2".into()
            },
            request("perm-1"),
        ]
    );
    // The withdrawn request takes no answer.
    run.send(ProviderCommand::Answer {
        request_id: "perm-2".into(),
        answer: PermissionAnswer::Allow { always: false },
    });
    let ProviderEvent::Notice { text } = run.next().await else {
        panic!("a notice for the dropped answer");
    };
    assert!(text.contains("perm-2"), "{text}");
    run.send(ProviderCommand::Answer {
        request_id: "perm-1".into(),
        answer: PermissionAnswer::Allow { always: true },
    });
    assert_eq!(
        run.take(2).await,
        vec![
            ProviderEvent::ToolFinished {
                tool_use_id: "toolu_01".into(),
                is_error: false,
                exit_code: Some(0),
                summary: "a (+1 line)".into(),
            },
            turn_end("Listed."),
        ]
    );
    run.send(ProviderCommand::Shutdown);
    assert_eq!(
        run.until_exited().await,
        vec![exited(Some(0), None, "fake claude starting (withdraw)")]
    );
    let lines = run.stdin_lines();
    assert_eq!(
        lines.len(),
        3,
        "nothing written for the dropped answer: {lines:?}"
    );
    assert_eq!(
        lines[2],
        json!({"type":"control_response","response":{"subtype":"success","request_id":"perm-1",
               "response":{"behavior":"allow",
                 "updatedInput":{"command":"ls /tmp","description":"list"},
                 "updatedPermissions":[{"type":"addRules",
                    "rules":[{"toolName":"Bash","ruleContent":"ls /tmp"}],
                    "behavior":"allow","destination":"session"}]}}})
    );
}

#[tokio::test]
async fn the_auto_policy_answers_without_asking() {
    let mut run = start("ask", PermissionPolicy::Auto, short_timings());
    run.send(ProviderCommand::StartTurn {
        prompt: "list /tmp".into(),
    });
    let mut events = run.take(6).await;
    run.send(ProviderCommand::Shutdown);
    events.extend(run.until_exited().await);
    assert_eq!(
        events,
        vec![
            ProviderEvent::Ready { version: None },
            session(),
            ProviderEvent::ToolStarted {
                tool_use_id: "toolu_01".into(),
                name: "Bash".into(),
                ask: Ask::command("ls /tmp", None, None),
            },
            ProviderEvent::Notice {
                text: "allowed Bash without asking (policy auto)".into()
            },
            ProviderEvent::ToolFinished {
                tool_use_id: "toolu_01".into(),
                is_error: false,
                exit_code: Some(0),
                summary: "a (+1 line)".into(),
            },
            turn_end("Listed."),
            exited(Some(0), None, "fake claude starting (ask)"),
        ]
    );
    let lines = run.stdin_lines();
    assert_eq!(
        lines[2],
        json!({"type":"control_response","response":{"subtype":"success","request_id":"perm-1",
               "response":{"behavior":"allow","updatedInput":{"command":"ls /tmp","description":"list"}}}})
    );
    assert!(
        run.argv()
            .windows(2)
            .any(|w| w == ["--permission-mode", "acceptEdits"])
    );
}

#[tokio::test]
async fn shutdown_kills_a_child_that_ignores_eof_and_sigterm() {
    let mut run = start("stubborn", PermissionPolicy::Ask, short_timings());
    assert_eq!(run.next().await, ProviderEvent::Ready { version: None });
    run.send(ProviderCommand::Shutdown);
    assert_eq!(
        run.until_exited().await,
        vec![exited(None, Some(9), "fake claude starting (stubborn)")]
    );
}

#[tokio::test]
async fn dropping_the_handle_ends_the_child() {
    let mut run = start("plain", PermissionPolicy::Ask, short_timings());
    assert_eq!(run.next().await, ProviderEvent::Ready { version: None });
    let (closed, _) = mpsc::unbounded_channel();
    // Replace the sender so the adapter's command channel closes.
    drop(std::mem::replace(&mut run.handle.commands, closed));
    assert_eq!(
        run.until_exited().await,
        vec![exited(Some(0), None, "fake claude starting (plain)")]
    );
}

#[tokio::test]
async fn a_child_that_dies_at_once_gets_exited_with_its_stderr() {
    let mut run = start("dies", PermissionPolicy::Ask, short_timings());
    assert_eq!(
        run.until_exited().await,
        vec![exited(
            Some(3),
            None,
            "fake claude starting (dies)\nfatal: no credentials"
        )]
    );
}

#[tokio::test]
async fn a_silent_child_fails_the_handshake() {
    let mut timings = short_timings();
    timings.handshake = Duration::from_millis(300);
    let mut run = start("silent", PermissionPolicy::Ask, timings);
    assert_eq!(
        run.until_exited().await,
        vec![
            ProviderEvent::Notice {
                text: "the CLI did not answer the handshake within 0.3 s".into()
            },
            exited(Some(0), None, "fake claude starting (silent)"),
        ]
    );
}

#[tokio::test]
async fn events_before_the_handshake_come_after_ready() {
    let mut run = start("chatty", PermissionPolicy::Ask, short_timings());
    assert_eq!(
        run.take(2).await,
        vec![
            ProviderEvent::Ready { version: None },
            ProviderEvent::Notice {
                text: "skipped a line that is not JSON: warming up, not json".into()
            },
        ]
    );
    run.send(ProviderCommand::Shutdown);
    run.until_exited().await;
}

#[tokio::test]
async fn a_missing_executable_is_a_launch_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut spec = fake_spec(&dir, "plain", PermissionPolicy::Ask);
    spec.command = dir.path().join("no-such-claude");
    let (tx, _rx) = mpsc::channel(4);
    let err = launch(spec, tx).expect_err("nothing to run");
    assert!(err.command.ends_with("no-such-claude"), "{err}");
}

#[tokio::test]
async fn shutdown_before_ready_ends_the_run_without_ready() {
    let mut run = start("silent", PermissionPolicy::Ask, short_timings());
    run.send(ProviderCommand::StartTurn {
        prompt: "never sent".into(),
    });
    run.send(ProviderCommand::Shutdown);
    assert_eq!(
        run.until_exited().await,
        vec![exited(Some(0), None, "fake claude starting (silent)")]
    );
    // Only the handshake reached the child: the queued turn was dropped with the run.
    assert_eq!(run.stdin_lines().len(), 1);
}
