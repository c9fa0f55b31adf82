//! The ACP provider end to end, headless, with the real binary: an agent configured in
//! four lines (`[providers.NAME] protocol = "acp"`) that is this drover's own
//! `sim-agent --acp` (the SDK's agent side playing a scenario), driven through `drover
//! serve` and the headless commands (docs/PROVIDERS.md §"ACP agents").
//!
//! Every wait is bounded (the harness's `wait` and its limits); nothing leaves the
//! machine: the agent is a local child on pipes.

mod common;

use common::{Home, str_at};
use nix::sys::signal::kill;
use nix::unistd::Pid;

/// The provider's name in these tests' config.
const AGENT: &str = "simacp";

/// A home whose config adds the ACP agent `simacp`: this drover's `sim-agent --acp`
/// playing `scenario`, misbehaving as `misbehave` says (`DROVER_SIM_ACP`).
fn acp_home(scenario: &str, misbehave: &str) -> Home {
    let bin = common::drover_bin();
    Home::with_config(&format!(
        r#"[providers.{AGENT}]
protocol = "acp"
command = "{bin}"
args = ["sim-agent", "--acp", "--scenario", "{scenario}"]

[providers.{AGENT}.env]
DROVER_SIM_ACP = "{misbehave}"
"#
    ))
}

fn dispatch(home: &Home, task: &str) -> String {
    let answer = home.json(&["dispatch", "--provider", AGENT, task]);
    str_at(&answer, "run_id").to_string()
}

fn tail(home: &Home, run: &str) -> String {
    home.tail(run).join("\n")
}

fn answer(home: &Home, run: &str, tool: &str, decision: &str) {
    let pending = home.wait_for_pending(run, tool);
    let id = str_at(&pending, "request_id").to_string();
    home.json(&["respond", run, &id, decision]);
}

fn alive(pid: i64) -> bool {
    kill(Pid::from_raw(pid as i32), None).is_ok()
}

#[test]
fn an_acp_agent_asks_through_the_broker_hears_a_denial_and_goes_on_in_its_session() {
    let home = acp_home("tool-permission", "");
    let _serve = home.serve();
    let run = dispatch(&home, "update the greeting");
    // The command is allowed (and runs), the edit denied: the agent says it heard.
    answer(&home, &run, "Bash ls -la", "allow");
    answer(&home, &run, "Edit src/main.rs", "deny");
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let lines = tail(&home, &run);
    assert!(lines.contains("tool done: total 16"), "{lines}");
    assert!(
        lines.contains("The edit was declined, so src/main.rs is unchanged."),
        "the agent heard the denial: {lines}"
    );
    assert_eq!(
        std::fs::read_to_string(home.work().join("src/main.rs")).expect("src/main.rs"),
        common::GREETING,
        "a denied edit changes nothing"
    );
    // Usage and money: the agent's tokens and its reported session cost.
    assert_eq!(view["tokens"]["input"], 7100, "{view}");
    assert_eq!(view["tokens"]["output"], 205, "{view}");
    assert!(
        (view["cost_usd"].as_f64().expect("cost") - 0.02).abs() < 1e-9,
        "{view}"
    );
    let session = str_at(&view, "provider_session_id").to_string();
    assert!(session.starts_with("sim-acp-"), "{view}");

    // A follow-up goes on in the same session, in the same child.
    let pid = view["pid"].as_i64().expect("a pid while idle");
    home.json(&["follow-up", &run, "and once more"]);
    answer(&home, &run, "Bash ls -la", "allow");
    answer(&home, &run, "Edit src/main.rs", "allow");
    let view = home.wait_idle(&run);
    assert_eq!(view["provider_session_id"], session.as_str(), "{view}");
    assert_eq!(view["pid"], pid, "the same agent process: {view}");
    assert!(
        std::fs::read_to_string(home.work().join("src/main.rs"))
            .expect("src/main.rs")
            .contains("hello, drover"),
        "the allowed edit landed"
    );
    assert!(
        (view["cost_usd"].as_f64().expect("cost") - 0.04).abs() < 1e-9,
        "the session's running cost grew by one turn's: {view}"
    );
}

#[test]
fn a_rule_answers_an_acp_agents_request() {
    let home = acp_home("tool-permission", "");
    let _serve = home.serve();
    home.json(&[
        "rules",
        "add",
        "--scope",
        "everywhere",
        "--kind",
        "command",
        "--pattern",
        "ls *",
        "allow",
    ]);
    let run = dispatch(&home, "update the greeting");
    // The command never waits for anybody; the edit does.
    let pending = home.wait_for_pending(&run, "Edit src/main.rs");
    assert_eq!(pending["tool"], "Edit src/main.rs");
    let lines = tail(&home, &run);
    assert!(lines.contains("tool done: total 16"), "{lines}");
    let view = home.show(&run);
    let decisions = view["decisions"].to_string();
    assert!(decisions.contains("rule:"), "decided by the rule: {view}");
}

#[test]
fn a_stopped_acp_run_ends_its_turn_and_leaves_nothing_running() {
    let home = acp_home("hang", "");
    let _serve = home.serve();
    let run = dispatch(&home, "look into it");
    let view = home.wait_for(&run, "the agent's first words", |v| {
        v["pid"].is_i64() && tail(&home, &run).contains("Looking into it")
    });
    let pid = view["pid"].as_i64().expect("the agent's pid");
    assert!(alive(pid));
    home.json(&["stop", &run]);
    let view = home.wait_terminal(&run);
    assert_eq!(view["state"], "stopped", "{view}");
    assert!(!alive(pid), "the agent {pid} is gone once the run stopped");
}

#[test]
fn a_restarted_owner_resumes_an_acp_run_through_session_load() {
    let home = acp_home("tool-permission", "");
    let serve = home.serve();
    let run = dispatch(&home, "update the greeting");
    home.wait_for_pending(&run, "Bash ls -la");
    let session = str_at(&home.show(&run), "provider_session_id").to_string();
    serve.stop();

    let _serve = home.serve();
    // The request the restart cut is shown again; the answer wakes the run in its
    // session (session/load), which asks again and is allowed by that answer.
    answer(&home, &run, "Bash ls -la", "allow");
    let view = home.wait_for_pending(&run, "Edit src/main.rs");
    assert_eq!(view["tool"], "Edit src/main.rs");
    let view = home.show(&run);
    assert_eq!(view["provider_session_id"], session.as_str(), "{view}");
    let lines = tail(&home, &run);
    assert_eq!(lines.matches("ready (").count(), 2, "two starts: {lines}");
    assert!(!lines.contains("cannot resume"), "{lines}");
    let decisions = view["decisions"].to_string();
    assert!(
        decisions.contains("answered before drover was restarted"),
        "the resumed session's same ask was answered by the earlier answer: {view}"
    );
}

#[test]
fn an_agent_that_cannot_load_a_session_says_so_on_resume() {
    let home = acp_home("tool-permission", "no-load");
    let serve = home.serve();
    let run = dispatch(&home, "update the greeting");
    home.wait_for_pending(&run, "Bash ls -la");
    serve.stop();
    let _serve = home.serve();
    answer(&home, &run, "Bash ls -la", "allow");
    home.wait_for(&run, "the refusal to resume", |_| {
        tail(&home, &run).contains("does not load sessions")
    });
}

#[test]
fn a_misbehaving_agent_is_answered_and_bounded_and_the_run_goes_on() {
    let home = acp_home(
        "garbage-lines",
        "unknown-request,foreign-permission,huge-notification",
    );
    let _serve = home.serve();
    let run = dispatch(&home, "go");
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "the run went on: {view}");
    let lines = tail(&home, &run);
    for expected in [
        // A request drover does not know: method not found, and the agent heard it.
        "the client refused sim/unknown with error -32601",
        // A permission request for a session that is not the run's: refused.
        "refused a permission request for session not-this-session",
        "the client refused a permission request for another session",
        // A 2 MiB notification: skipped whole, with its size.
        "skipped a session/update notification of",
        // Lines that are not JSON-RPC: a notice each, the turn goes on.
        "the agent wrote a line that is not JSON-RPC: Debugger attached.",
        "Working on it.",
        "turn done",
    ] {
        assert!(lines.contains(expected), "{expected:?} in:\n{lines}");
    }
    assert!(
        !lines.contains(&"x".repeat(1000)),
        "the huge notification never reached the transcript"
    );
}

/// A step's `delay_ms` comes before each of its repetitions, as in the stream-json sim
/// (`sim::scenario`): the latency bench's ACP runs write their lines
/// apart, not in one burst. Each line carries the agent's clock as it wrote it.
#[test]
fn an_acp_agent_pauses_before_every_repetition_of_a_step() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let scenario = dir.path().join("paced.toml");
    std::fs::write(
        &scenario,
        "description = \"paced lines\"\nmodel = \"claude-sonnet-4-5\"\n[[turns]]\nstatus = \"done\"\nsummary = \"paced\"\n\
         [[turns.steps]]\ntext = \"line {i} at {now_us}\"\ndelay_ms = 60\nrepeat = 3\n",
    )
    .expect("the scenario");
    let home = acp_home(&scenario.display().to_string(), "");
    let _serve = home.serve();
    let run = dispatch(&home, "go");
    home.wait_idle(&run);
    let stamps: Vec<i64> = home
        .tail(&run)
        .iter()
        .filter_map(|l| {
            l.split_once(" at ")
                .and_then(|(_, us)| us.trim().parse().ok())
        })
        .collect();
    assert_eq!(stamps.len(), 3, "three lines: {:?}", home.tail(&run));
    for pair in stamps.windows(2) {
        assert!(
            pair[1] - pair[0] >= 60_000,
            "each repetition waits its 60 ms: {stamps:?}"
        );
    }
}

#[test]
fn an_agent_that_cannot_load_a_session_is_never_hibernated() {
    let bin = common::drover_bin();
    let agent = |name: &str, misbehave: &str| {
        format!(
            r#"[providers.{name}]
protocol = "acp"
command = "{bin}"
args = ["sim-agent", "--acp", "--scenario", "quick-success"]

[providers.{name}.env]
DROVER_SIM_ACP = "{misbehave}"
"#
        )
    };
    let home = Home::with_config(&format!(
        "[limits]\nhibernate_after_secs = 1\n\n{}\n{}",
        agent(AGENT, ""),
        agent("simacp-noload", "no-load")
    ));
    let _serve = home.serve();
    let loads = dispatch(&home, "say hello");
    let answer = home.json(&["dispatch", "--provider", "simacp-noload", "say hello"]);
    let cannot = str_at(&answer, "run_id").to_string();
    home.wait_idle(&cannot);
    // The agent that loads sessions hibernates once idle a second...
    home.wait_for(&loads, "hibernated", |v| {
        v["live_state"]["detail"] == "idle · hibernated" && v["pid"].is_null()
    });
    // ...the one that cannot stays up, idle, and its run says why.
    let view = home.show(&cannot);
    let pid = view["pid"].as_i64().expect("its agent is kept running");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        let view = home.show(&cannot);
        assert_eq!(view["state"], "idle", "{view}");
        assert_ne!(view["live_state"]["detail"], "idle · hibernated", "{view}");
        assert_eq!(view["pid"], pid, "{view}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(alive(pid));
    let notes = home.notes(&cannot).join("\n");
    assert!(notes.contains("does not load sessions"), "{notes}");
    assert!(notes.contains("never hibernated"), "{notes}");
}

/// A home whose `simacp` plays `quick-success` with `[providers.simacp] mode = "{mode}"`.
fn moded_home(mode: &str) -> Home {
    let bin = common::drover_bin();
    Home::with_config(&format!(
        r#"[providers.{AGENT}]
protocol = "acp"
command = "{bin}"
args = ["sim-agent", "--acp", "--scenario", "quick-success"]
mode = "{mode}"
"#
    ))
}

#[test]
fn a_configured_session_mode_is_set_with_session_set_mode() {
    let home = moded_home("plan");
    let _serve = home.serve();
    let run = dispatch(&home, "say hello");
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "{view}");
    let lines = tail(&home, &run);
    // The agent says which mode the client set, at the start of the turn.
    assert!(
        lines.contains("the client set session mode plan"),
        "the mode was set: {lines}"
    );
    assert!(!lines.contains("offers no session mode"), "{lines}");
    // drover's note on the run says the modes offered and the one it now runs in.
    assert!(
        lines.contains("the agent offers the session modes default, plan; it runs in mode plan"),
        "{lines}"
    );
}

#[test]
fn a_session_mode_the_agent_does_not_offer_is_a_note_and_the_run_goes_on() {
    let home = moded_home("yolo");
    let _serve = home.serve();
    let run = dispatch(&home, "say hello");
    let view = home.wait_idle(&run);
    assert_eq!(view["state"], "idle", "the run went on: {view}");
    let lines = tail(&home, &run);
    assert!(
        lines.contains(
            "the agent offers no session mode yolo (it offers: default, plan); it runs in mode default"
        ),
        "{lines}"
    );
    assert!(
        !lines.contains("the client set session mode"),
        "no session/set_mode was sent: {lines}"
    );
    assert!(
        lines.contains("everything is already in place"),
        "the turn was played: {lines}"
    );
}
