//! Both Codex drivers against a fake `codex`: a bash script that records its argv (one
//! file per start) and every stdin line, and plays one scenario (`FAKE_MODE`) of the
//! app-server's JSON-RPC or of `exec --json`. Every wait is bounded; nothing sleeps and
//! hopes.

use std::collections::BTreeMap;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use serde_json::Value;
use tempfile::TempDir;
use tokio::sync::mpsc;

use super::app_protocol::Bounds;
use super::{AdapterTimings, launch_with};
use crate::providers::process::ShutdownTimings;
use crate::providers::{
    AdapterHandle, LaunchSpec, PermissionAnswer, ProviderCommand, ProviderEvent, RunProviderEvent,
    TurnEnd,
};
use crate::spec::{Capability, PermissionPolicy};

const FAKE_CODEX: &str = r#"
dir="$FAKE_DIR"
mode="$FAKE_MODE"
n=$(ls "$dir" | grep -c '^argv') ; printf '%s\n' "$@" > "$dir/argv.$n"
echo "fake codex starting ($mode)" >&2
out() { printf '%s\n' "$1"; }
if [ "$1" = exec ]; then
  case "$mode" in
    exec-hang)
      echo $$ > "$dir/exec.pid"
      out '{"type":"thread.started","thread_id":"th-1"}'
      sleep 1000 & echo $! > "$dir/bg.pid"; wait ;;
    exec-dies)
      out '{"type":"thread.started","thread_id":"th-1"}'
      echo "fatal: out of cheese" >&2; exit 2 ;;
    exec-lingers)
      # As Codex does: the turn's end first, then what it writes of the thread, then
      # exit. A SIGTERM is noted (and otherwise ignored, so the test sees it).
      trap 'echo term >> "$dir/term"' TERM
      out '{"type":"thread.started","thread_id":"th-1"}'
      out '{"type":"turn.started"}'
      out '{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":10,"reasoning_output_tokens":0}}'
      while [ ! -e "$dir/go" ]; do sleep 0.01; done
      echo written > "$dir/flushed" ;;
    *)
      out '{"type":"thread.started","thread_id":"th-1"}'
      out '{"type":"turn.started"}'
      out '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"turn '$n'"}}'
      out '{"type":"turn.completed","usage":{"input_tokens":'$(( (n + 1) * 100 ))',"cached_input_tokens":0,"output_tokens":10,"reasoning_output_tokens":0}}' ;;
  esac
  exit 0
fi
case "$mode" in
  dies) echo "fatal: no auth" >&2; exit 3 ;;
esac
id_of() { printf '%s' "$1" | sed -n 's/.*"id":\([0-9]*\).*/\1/p'; }
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$dir/stdin.log"
  case "$line" in
    *'"method":"initialize"'*)
      [ "$mode" = silent ] && continue
      out 'warming up, not json'
      out '{"id":'"$(id_of "$line")"',"result":{"userAgent":"drover/0.171.0 (fake)"}}' ;;
    *'"method":"thread/start"'*|*'"method":"thread/resume"'*)
      out '{"id":'"$(id_of "$line")"',"result":{"thread":{"id":"th-1"},"model":"gpt-5.5"}}' ;;
    *'"method":"turn/start"'*)
      out '{"id":'"$(id_of "$line")"',"result":{"turn":{"id":"tu-1","status":"inProgress"}}}'
      case "$mode" in
        ask|stop)
          out '{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th-1","turnId":"tu-1","itemId":"call_1","command":"touch x","cwd":"/w"}}' ;;
        *)
          out '{"method":"item/completed","params":{"threadId":"th-1","turnId":"tu-1","item":{"type":"agentMessage","id":"m","text":"hi"}}}'
          out '{"method":"turn/completed","params":{"threadId":"th-1","turn":{"id":"tu-1","items":[],"status":"completed","error":null}}}' ;;
      esac ;;
    *'"result":{"decision":"accept"}'*)
      out '{"method":"serverRequest/resolved","params":{"threadId":"th-1","requestId":0}}'
      out '{"method":"turn/completed","params":{"threadId":"th-1","turn":{"id":"tu-1","items":[],"status":"completed","error":null}}}' ;;
    *'"method":"turn/interrupt"'*)
      out '{"id":'"$(id_of "$line")"',"result":{}}'
      out '{"method":"turn/completed","params":{"threadId":"th-1","turn":{"id":"tu-1","items":[],"status":"interrupted","error":null}}}' ;;
  esac
done
"#;

/// Generous: a loaded machine is slow, and a hang still fails.
const WAIT: Duration = Duration::from_secs(20);

fn timings() -> AdapterTimings {
    AdapterTimings {
        bounds: Bounds {
            initialize: 1_000,
            thread: 10_000,
            turn_start: 10_000,
            interrupt: 5_000,
        },
        interrupt: Duration::from_secs(5),
        shutdown: ShutdownTimings {
            stdin_grace: Duration::from_millis(500),
            term_grace: Duration::from_millis(500),
            drain: Duration::from_secs(2),
        },
    }
}

struct FakeRun {
    dir: TempDir,
    handle: AdapterHandle,
    events: mpsc::Receiver<RunProviderEvent>,
}

fn start(mode: &str, policy: PermissionPolicy) -> FakeRun {
    start_with(mode, policy, timings())
}

fn start_with(mode: &str, policy: PermissionPolicy, timings: AdapterTimings) -> FakeRun {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("fake-codex.sh");
    std::fs::write(&script, FAKE_CODEX).expect("write the fake CLI");
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).expect("logs dir");
    let mut env = BTreeMap::new();
    env.insert("FAKE_DIR".to_string(), logs.display().to_string());
    env.insert("FAKE_MODE".to_string(), mode.to_string());
    let spec = LaunchSpec {
        run_id: format!("run-{mode}"),
        args: vec![script.display().to_string()],
        env,
        cwd: dir.path().to_path_buf(),
        model: Some("gpt-5.5".into()),
        ..LaunchSpec::for_tests("codex", "/bin/bash", policy, Capability::Workspace)
    };
    let (tx, events) = mpsc::channel(64);
    let handle = launch_with(spec, tx, timings).expect("launch the fake");
    FakeRun {
        dir,
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
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("an event in time")
            .expect("the adapter is still sending")
            .event
    }

    /// Events up to and including the first that `stop` accepts.
    async fn until(&mut self, stop: impl Fn(&ProviderEvent) -> bool) -> Vec<ProviderEvent> {
        let mut out = Vec::new();
        loop {
            let event = self.next().await;
            let last = stop(&event);
            out.push(event);
            if last {
                return out;
            }
        }
    }

    /// Every event up to and including `Exited`; then the adapter must be done (its
    /// sender dropped).
    async fn until_exited(&mut self) -> Vec<ProviderEvent> {
        let out = self
            .until(|e| matches!(e, ProviderEvent::Exited { .. }))
            .await;
        let after = tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("the adapter finishes");
        assert!(after.is_none(), "an event after Exited: {after:?}");
        out
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join("logs").join(name)).unwrap_or_default()
    }

    fn stdin_lines(&self) -> Vec<Value> {
        self.log("stdin.log")
            .lines()
            .map(|l| serde_json::from_str(l).expect("drover writes JSON lines"))
            .collect()
    }
}

fn group_gone(pgid: u32) -> bool {
    kill(Pid::from_raw(-(pgid as i32)), None) == Err(Errno::ESRCH)
}

fn ends(events: &[ProviderEvent]) -> Vec<TurnEnd> {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TurnCompleted(end) => Some(end.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_server_handshake_thread_turn_approval_and_shutdown() {
    let mut run = start("ask", PermissionPolicy::Ask);
    let pid = run.handle.pid.expect("the app-server's pid");
    let first = run.next().await;
    assert_eq!(
        first,
        ProviderEvent::Ready {
            version: Some("0.171.0".into())
        },
        "Ready comes first, before the notice about the line that is not JSON"
    );
    run.send(ProviderCommand::StartTurn {
        prompt: "Touch x".into(),
    });
    let events = run
        .until(|e| matches!(e, ProviderEvent::PermissionRequested(_)))
        .await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Notice { .. })),
        "{events:?}"
    );
    assert!(
        events.contains(&ProviderEvent::Session {
            session_id: "th-1".into(),
            model: Some("gpt-5.5".into())
        }),
        "{events:?}"
    );
    let Some(ProviderEvent::PermissionRequested(request)) = events.last() else {
        panic!("{events:?}");
    };
    assert!(request.request_id.ends_with("-0"), "{request:?}");
    run.send(ProviderCommand::Answer {
        request_id: request.request_id.clone(),
        answer: PermissionAnswer::Allow { always: false },
    });
    let events = run
        .until(|e| matches!(e, ProviderEvent::TurnCompleted(_)))
        .await;
    let end = &ends(&events)[0];
    assert!(!end.is_error, "{end:?}");
    assert_eq!(end.session_id.as_deref(), Some("th-1"));
    // Answered by drover, so its resolution is no withdrawal.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::PermissionWithdrawn { .. })),
        "{events:?}"
    );
    run.send(ProviderCommand::Shutdown);
    let events = run.until_exited().await;
    assert!(
        matches!(events.last(), Some(ProviderEvent::Exited { .. })),
        "{events:?}"
    );
    assert!(group_gone(pid));
    let methods: Vec<String> = run
        .stdin_lines()
        .iter()
        .map(|l| {
            l["method"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("answer {}", l["result"]["decision"]))
        })
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "initialized",
            "thread/start",
            "turn/start",
            "answer \"accept\""
        ]
    );
    assert_eq!(run.log("argv.0").lines().last(), Some("app-server"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_server_shutdown_mid_turn_cancels_the_approval_and_interrupts_first() {
    let mut run = start("stop", PermissionPolicy::Ask);
    let pid = run.handle.pid.unwrap();
    run.send(ProviderCommand::StartTurn {
        prompt: "Touch x".into(),
    });
    let asked = run
        .until(|e| matches!(e, ProviderEvent::PermissionRequested(_)))
        .await;
    let Some(ProviderEvent::PermissionRequested(request)) = asked.last() else {
        panic!("{asked:?}");
    };
    let request_id = request.request_id.clone();
    run.send(ProviderCommand::Shutdown);
    let events = run.until_exited().await;
    let end = &ends(&events)[0];
    assert_eq!(end.subtype, "interrupted", "{events:?}");
    assert!(events.contains(&ProviderEvent::PermissionWithdrawn { request_id }));
    let lines = run.stdin_lines();
    assert!(
        lines
            .iter()
            .any(|l| l["id"] == 0 && l["result"]["decision"] == "cancel"),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l["method"] == "turn/interrupt"),
        "{lines:?}"
    );
    assert!(group_gone(pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_server_that_never_answers_the_handshake_gets_no_ready() {
    let mut run = start("silent", PermissionPolicy::Ask);
    let pid = run.handle.pid.unwrap();
    let events = run.until_exited().await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Ready { .. })),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Notice { text } if text.contains("initialize"))),
        "{events:?}"
    );
    assert!(group_gone(pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_server_that_dies_reports_its_stderr_once() {
    let mut run = start("dies", PermissionPolicy::Ask);
    let events = run.until_exited().await;
    assert_eq!(events.len(), 1, "{events:?}");
    let ProviderEvent::Exited {
        code, stderr_tail, ..
    } = &events[0]
    else {
        panic!("{events:?}");
    };
    assert_eq!(*code, Some(3));
    assert!(stderr_tail.contains("fatal: no auth"), "{stderr_tail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_one_child_per_turn_and_resumes_the_thread() {
    let mut run = start("exec", PermissionPolicy::Restricted);
    assert_eq!(run.handle.pid, None, "no child until a turn");
    assert_eq!(run.next().await, ProviderEvent::Ready { version: None });
    run.send(ProviderCommand::StartTurn {
        prompt: "-first".into(),
    });
    let events = run
        .until(|e| matches!(e, ProviderEvent::TurnCompleted(_)))
        .await;
    assert_eq!(
        events[0],
        ProviderEvent::Session {
            session_id: "th-1".into(),
            model: Some("gpt-5.5".into())
        }
    );
    let end = &ends(&events)[0];
    assert_eq!(end.text.as_deref(), Some("turn 0"));
    assert_eq!(end.tokens.input, 100);
    run.send(ProviderCommand::StartTurn {
        prompt: "second".into(),
    });
    let events = run
        .until(|e| matches!(e, ProviderEvent::TurnCompleted(_)))
        .await;
    let end = &ends(&events)[0];
    assert_eq!(end.text.as_deref(), Some("turn 1"));
    // The fake reports the running total (200): the turn's own part is 100.
    assert_eq!(end.tokens.input, 100);
    run.send(ProviderCommand::Shutdown);
    let events = run.until_exited().await;
    assert_eq!(
        events,
        vec![ProviderEvent::Exited {
            code: Some(0),
            signal: None,
            stderr_tail: "fake codex starting (exec)".into()
        }]
    );
    let first: Vec<String> = run.log("argv.0").lines().map(str::to_string).collect();
    assert_eq!(first[..3], ["exec", "--json", "--skip-git-repo-check"]);
    assert_eq!(first[first.len() - 2..], ["--", "-first"]);
    assert!(!first.contains(&"resume".to_string()), "{first:?}");
    let second: Vec<String> = run.log("argv.1").lines().map(str::to_string).collect();
    let at = second.iter().position(|a| a == "resume").expect("resume");
    assert_eq!(second[at + 1..], ["th-1", "--", "second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_interrupt_ends_the_turns_process_group() {
    let mut run = start("exec-hang", PermissionPolicy::Auto);
    run.next().await;
    run.send(ProviderCommand::StartTurn {
        prompt: "hang".into(),
    });
    run.until(|e| matches!(e, ProviderEvent::Session { .. }))
        .await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while run.log("bg.pid").trim().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fake never started its job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pgid: u32 = run.log("exec.pid").trim().parse().expect("the child's pid");
    assert!(!group_gone(pgid));
    run.send(ProviderCommand::Interrupt);
    let events = run
        .until(|e| matches!(e, ProviderEvent::TurnCompleted(_)))
        .await;
    let end = &ends(&events)[0];
    assert!(end.is_error && !end.transient, "{end:?}");
    assert_eq!(end.subtype, "interrupted");
    assert!(group_gone(pgid), "the turn's job outlived the interrupt");
    run.send(ProviderCommand::Shutdown);
    let events = run.until_exited().await;
    assert_eq!(events.len(), 1, "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_child_that_dies_mid_turn_ends_the_turn_with_its_stderr() {
    let mut run = start("exec-dies", PermissionPolicy::Restricted);
    run.next().await;
    run.send(ProviderCommand::StartTurn {
        prompt: "go".into(),
    });
    let events = run
        .until(|e| matches!(e, ProviderEvent::TurnCompleted(_)))
        .await;
    let end = &ends(&events)[0];
    assert!(end.is_error && !end.transient, "{end:?}");
    let text = end.text.clone().unwrap();
    assert!(
        text.contains("exit 2") && text.contains("out of cheese"),
        "{text}"
    );
    // The run lives on: dropping the command sender ends it.
    drop(std::mem::replace(
        &mut run.handle.commands,
        mpsc::unbounded_channel().0,
    ));
    let events = run.until_exited().await;
    assert!(
        matches!(events[..], [ProviderEvent::Exited { code: Some(2), .. }]),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_shutdown_after_the_turns_end_lets_the_child_exit_by_itself() {
    // A grace long enough that only the child's own exit ends the wait below.
    let mut slow = timings();
    slow.shutdown.stdin_grace = WAIT;
    let mut run = start_with("exec-lingers", PermissionPolicy::Auto, slow);
    run.next().await;
    run.send(ProviderCommand::StartTurn {
        prompt: "go".into(),
    });
    let events = run
        .until(|e| matches!(e, ProviderEvent::TurnCompleted(_)))
        .await;
    assert!(!ends(&events)[0].is_error, "{events:?}");
    // The run ends right after its turn (`--max-turns 1`) while the child is still
    // writing: drover waits for its exit instead of signalling it. A signal comes at
    // once when it comes (the group is signalled as soon as the end begins): a bounded
    // look for one, then the child is let go.
    run.send(ProviderCommand::Shutdown);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    while tokio::time::Instant::now() < deadline && run.log("term").is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        run.log("term"),
        "",
        "the child was signalled after its turn ended"
    );
    std::fs::write(run.dir.path().join("logs/go"), "").expect("let the child finish");
    let events = run.until_exited().await;
    assert_eq!(
        events,
        vec![ProviderEvent::Exited {
            code: Some(0),
            signal: None,
            stderr_tail: "fake codex starting (exec-lingers)".into()
        }],
        "no second end of the turn, and the child's own exit"
    );
    assert_eq!(run.log("flushed"), "written\n");
}
