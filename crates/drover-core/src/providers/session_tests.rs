//! The session loop's invariants, with a small fake protocol over real `/bin/sh`
//! children: each test's script plays the CLI. Every wait is bounded (the paused-time
//! test bounds itself by the loop's own timer); nothing sleeps and hopes.

use super::*;
use crate::providers::{RunProviderEvent, TurnEnd};
use crate::spec::{Capability, PermissionPolicy};
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use tempfile::TempDir;

/// Generous: a loaded machine is slow, and a hang still fails.
const WAIT: Duration = Duration::from_secs(20);

/// A protocol of plain words. drover writes `hello` to open, `turn PROMPT`,
/// `answer ID` and `interrupt`; the child answers `ready [VERSION]` or `refuse`, ends a
/// turn with `done`, and asks for a deadline with `deadline`; any other line becomes a
/// notice `said: LINE`.
#[derive(Debug, Default)]
struct Words {
    handshake_bound: Option<i64>,
    deadlines: Vec<UnixMillis>,
    handshake: Option<Handshake>,
    version: Option<String>,
    turn_open: bool,
    outgoing: Vec<String>,
}

impl Protocol for Words {
    const NAME: &'static str = "the fake";

    fn args(&self, spec: &LaunchSpec) -> Vec<String> {
        spec.args.clone()
    }

    fn start(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        self.handshake = Some(Handshake::Waiting);
        if let Some(bound) = self.handshake_bound {
            self.deadlines.push(now + bound);
        }
        self.outgoing.push("hello".into());
        vec![notice("started".into())]
    }

    fn handshake(&self) -> Handshake {
        self.handshake.unwrap_or(Handshake::Waiting)
    }

    fn version(&self) -> Option<String> {
        self.version.clone()
    }

    fn parse_line(&mut self, line: &str, now: UnixMillis) -> Vec<ProviderEvent> {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("ready") => {
                self.handshake = Some(Handshake::Done);
                self.version = words.next().map(str::to_string);
                self.deadlines.clear();
                Vec::new()
            }
            Some("refuse") => {
                self.handshake = Some(Handshake::Failed);
                vec![notice("refused".into())]
            }
            Some("done") => {
                self.turn_open = false;
                vec![ProviderEvent::TurnCompleted(TurnEnd::default())]
            }
            Some("deadline") => {
                self.deadlines.push(now + 100);
                Vec::new()
            }
            _ => vec![notice(format!("said: {line}"))],
        }
    }

    fn start_turn(&mut self, prompt: String, _now: UnixMillis) -> Vec<ProviderEvent> {
        self.turn_open = true;
        self.outgoing.push(format!("turn {prompt}"));
        Vec::new()
    }

    fn answer(&mut self, request_id: &str, _answer: &PermissionAnswer) -> Result<(), String> {
        if request_id != "r1" {
            return Err(format!("no request {request_id}"));
        }
        self.outgoing.push(format!("answer {request_id}"));
        Ok(())
    }

    fn interrupt(&mut self, _now: UnixMillis) -> Vec<ProviderEvent> {
        self.outgoing.push("interrupt".into());
        vec![notice("interrupting".into())]
    }

    fn turn_open(&self) -> bool {
        self.turn_open
    }

    fn take_outgoing(&mut self) -> Vec<String> {
        std::mem::take(&mut self.outgoing)
    }

    fn next_deadline(&self) -> Option<UnixMillis> {
        self.deadlines.iter().min().copied()
    }

    fn expire(&mut self, now: UnixMillis) -> Vec<ProviderEvent> {
        let passed = self.deadlines.iter().filter(|d| **d <= now).count();
        self.deadlines.retain(|d| *d > now);
        if passed == 0 {
            return Vec::new();
        }
        if self.handshake() == Handshake::Waiting {
            self.handshake = Some(Handshake::Failed);
            return vec![notice("no answer to hello".into())];
        }
        vec![notice("expired".into())]
    }
}

/// Logs every line drover writes (to `$LOG`) and runs `body` on each, as `$l`.
fn script(before: &str, body: &str, after: &str) -> String {
    format!(
        "{before}\nwhile IFS= read -r l; do\n  printf '%s\\n' \"$l\" >> \"$LOG\"\n  {body}\ndone\n{after}"
    )
}

/// Answers `hello` with `ready 1.2` and each turn with `got …` and `done`.
const POLITE: &str = r#"case "$l" in
    hello) echo "ready 1.2" ;;
    "turn "*) echo "got $l"; echo done ;;
    *) echo "got $l" ;;
  esac"#;

struct Fake {
    dir: TempDir,
    handle: AdapterHandle,
    events: mpsc::Receiver<RunProviderEvent>,
}

fn timings(interrupt: Duration) -> Timings {
    Timings {
        interrupt,
        shutdown: ShutdownTimings {
            stdin_grace: Duration::from_millis(500),
            term_grace: Duration::from_millis(500),
            drain: Duration::from_secs(2),
        },
    }
}

fn start(shell: String, protocol: Words, timings: Timings) -> Fake {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = std::collections::BTreeMap::new();
    env.insert(
        "LOG".to_string(),
        dir.path().join("stdin.log").display().to_string(),
    );
    let spec = LaunchSpec {
        run_id: "run-fake".into(),
        args: vec!["-c".into(), shell],
        env,
        cwd: dir.path().to_path_buf(),
        ..LaunchSpec::for_tests(
            "fake",
            "/bin/sh",
            PermissionPolicy::Ask,
            Capability::Workspace,
        )
    };
    let (tx, events) = mpsc::channel(64);
    let handle = launch(spec, protocol, tx, timings).expect("launch the fake");
    Fake {
        dir,
        handle,
        events,
    }
}

impl Fake {
    fn send(&self, command: ProviderCommand) {
        self.handle
            .commands
            .send(command)
            .expect("the loop takes commands");
    }

    async fn next(&mut self) -> ProviderEvent {
        let event = tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("an event in time")
            .expect("the loop is still sending");
        assert_eq!(&*event.run_id, "run-fake");
        event.event
    }

    /// Every event up to and including `Exited`; then the loop must be done (its sender
    /// dropped) and no process of the child's group may remain.
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
            .expect("the loop finishes");
        assert!(after.is_none(), "an event after Exited: {after:?}");
        assert!(
            group_gone(self.pid()),
            "a process of the child's group survived"
        );
        out
    }

    fn pid(&self) -> u32 {
        self.handle.pid.expect("a pid")
    }

    /// What drover wrote to the child.
    fn written(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("stdin.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn group_gone(pgid: u32) -> bool {
    kill(Pid::from_raw(-(pgid as i32)), None) == Err(Errno::ESRCH)
}

fn said(text: &str) -> ProviderEvent {
    notice(format!("said: {text}"))
}

fn exited(code: Option<i32>, stderr_tail: &str) -> ProviderEvent {
    ProviderEvent::Exited {
        code,
        signal: None,
        stderr_tail: stderr_tail.into(),
    }
}

#[tokio::test]
async fn events_before_ready_are_held_and_commands_queued_until_it() {
    let shell = script("echo early", POLITE, "");
    let mut fake = start(shell, Words::default(), timings(WAIT));
    // In the channel before the loop first runs: the child cannot have answered yet.
    fake.send(ProviderCommand::StartTurn {
        prompt: "go".into(),
    });
    fake.send(ProviderCommand::Answer {
        request_id: "nope".into(),
        answer: PermissionAnswer::Allow { always: false },
    });
    let mut events = Vec::new();
    for _ in 0..6 {
        events.push(fake.next().await);
    }
    assert_eq!(
        events,
        vec![
            ProviderEvent::Ready {
                version: Some("1.2".into())
            },
            notice("started".into()),
            said("early"),
            // The queued commands, in order, right after `Ready`.
            notice("no request nope".into()),
            said("got turn go"),
            ProviderEvent::TurnCompleted(TurnEnd::default()),
        ]
    );
    fake.send(ProviderCommand::Shutdown);
    assert_eq!(fake.until_exited().await, vec![exited(Some(0), "")]);
    assert_eq!(fake.written(), ["hello", "turn go"]);
}

#[tokio::test]
async fn a_refused_handshake_gets_no_ready_and_drops_the_queued_commands() {
    let shell = script("", r#"[ "$l" = hello ] && echo refuse"#, "");
    let mut fake = start(shell, Words::default(), timings(WAIT));
    fake.send(ProviderCommand::StartTurn {
        prompt: "never".into(),
    });
    assert_eq!(
        fake.until_exited().await,
        vec![
            notice("started".into()),
            notice("refused".into()),
            exited(Some(0), "")
        ]
    );
    assert_eq!(fake.written(), ["hello"]);
}

#[tokio::test]
async fn a_handshake_deadline_that_passes_ends_the_run_without_ready() {
    let shell = script("echo 'thinking' >&2", ":", "");
    let protocol = Words {
        handshake_bound: Some(200),
        ..Words::default()
    };
    let mut fake = start(shell, protocol, timings(WAIT));
    assert_eq!(
        fake.until_exited().await,
        vec![
            notice("started".into()),
            notice("no answer to hello".into()),
            exited(Some(0), "thinking")
        ]
    );
}

#[tokio::test]
async fn a_deadline_named_while_running_is_kept() {
    let shell = script(
        "",
        r#"case "$l" in hello) echo ready; echo deadline ;; esac"#,
        "",
    );
    let mut fake = start(shell, Words::default(), timings(WAIT));
    assert_eq!(fake.next().await, ProviderEvent::Ready { version: None });
    assert_eq!(fake.next().await, notice("started".into()));
    assert_eq!(fake.next().await, notice("expired".into()));
    fake.send(ProviderCommand::Shutdown);
    assert_eq!(fake.until_exited().await, vec![exited(Some(0), "")]);
}

#[tokio::test]
async fn a_child_that_exits_ends_the_run_with_one_exited_carrying_its_stderr() {
    let shell = script(
        "",
        r#"[ "$l" = hello ] && { echo ready; echo 'out of cheese' >&2; exit 4; }"#,
        "",
    );
    let mut fake = start(shell, Words::default(), timings(WAIT));
    assert_eq!(
        fake.until_exited().await,
        vec![
            ProviderEvent::Ready { version: None },
            notice("started".into()),
            exited(Some(4), "out of cheese")
        ]
    );
}

#[tokio::test]
async fn a_line_too_long_to_keep_is_a_notice_and_reading_goes_on() {
    let shell = script(
        "",
        r#"[ "$l" = hello ] && { echo ready; head -c 9000000 /dev/zero | tr '\0' x; echo; echo after; }"#,
        "",
    );
    let mut fake = start(shell, Words::default(), timings(WAIT));
    assert_eq!(fake.next().await, ProviderEvent::Ready { version: None });
    assert_eq!(fake.next().await, notice("started".into()));
    assert_eq!(
        fake.next().await,
        notice("skipped a line of 9000000 bytes (the limit is 8 MB)".into())
    );
    assert_eq!(fake.next().await, said("after"));
    fake.send(ProviderCommand::Shutdown);
    fake.until_exited().await;
}

#[tokio::test]
async fn dropping_the_event_receiver_ends_the_child() {
    // Ignores stdin's end and SIGTERM, and writes on.
    let shell = "trap '' TERM; read -r l; echo ready; while :; do echo tick; sleep 0.05; done";
    let mut fake = start(shell.into(), Words::default(), timings(WAIT));
    assert_eq!(fake.next().await, ProviderEvent::Ready { version: None });
    let pid = fake.pid();
    drop(fake.events);
    let gone = async {
        while !group_gone(pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, gone)
        .await
        .expect("the loop ends the child once nobody listens");
}

#[tokio::test]
async fn dropping_the_command_sender_ends_the_run() {
    let mut fake = start(script("", POLITE, ""), Words::default(), timings(WAIT));
    assert_eq!(
        fake.next().await,
        ProviderEvent::Ready {
            version: Some("1.2".into())
        }
    );
    let (closed, _) = mpsc::unbounded_channel();
    drop(std::mem::replace(&mut fake.handle.commands, closed));
    assert_eq!(
        fake.until_exited().await,
        vec![notice("started".into()), exited(Some(0), "")]
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_mid_turn_interrupts_first_and_waits_no_longer_than_its_bound() {
    // Takes turns but never ends one, whatever it is told.
    let shell = script(
        "",
        r#"case "$l" in hello) echo ready ;; "turn "*) echo working ;; esac"#,
        "",
    );
    let bound = Duration::from_secs(3600);
    let mut fake = start(shell, Words::default(), timings(bound));
    let started = std::time::Instant::now();
    // No timer of the test's own runs while the child answers: paused time would jump
    // to it. The loop's interrupt bound is the one timer, and it ends the wait.
    let events = &mut fake.events;
    assert_eq!(recv(events).await, ProviderEvent::Ready { version: None });
    assert_eq!(recv(events).await, notice("started".into()));
    fake.send(ProviderCommand::StartTurn {
        prompt: "forever".into(),
    });
    assert_eq!(recv(&mut fake.events).await, said("working"));
    fake.send(ProviderCommand::Shutdown);
    let mut rest = Vec::new();
    while let Some(event) = fake.events.recv().await {
        rest.push(event.event);
    }
    assert!(
        matches!(rest.last(), Some(ProviderEvent::Exited { .. })),
        "{rest:?}"
    );
    rest.pop();
    assert_eq!(
        rest,
        vec![
            notice("interrupting".into()),
            notice("the fake did not end its turn within 3600.0 s of an interrupt".into()),
        ]
    );
    assert!(started.elapsed() < WAIT, "the bound is the loop's timer");
    assert!(group_gone(fake.pid()));
    assert_eq!(fake.written()[..2], ["hello", "turn forever"]);
}

/// The next event, with no timer of its own (for paused time).
async fn recv(events: &mut mpsc::Receiver<RunProviderEvent>) -> ProviderEvent {
    events.recv().await.expect("an event").event
}
