//! The disk under the ledger fails: a full filesystem while runs write, and a machine that
//! crashes (the writes the kernel had not yet sent to the device are lost). Run as root,
//! where a tmpfs and a loop device can be mounted; elsewhere each test prints why it is
//! skipped (docs/ARCHITECTURE.md §"When the disk cannot write").
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{Home, str_at};
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::Duration;

/// A filesystem mounted over a [`Home`]'s directory for one test (so the ledger, the socket
/// and the logs are on it), with the home's work directory made again on it; unmounted
/// (lazily) when dropped.
struct Mounted {
    at: PathBuf,
}

impl Mounted {
    /// Mounts `args` (`mount`'s arguments before the target) over `home`; `None`, with the
    /// reason printed, where mounts are not allowed.
    fn over(home: &Home, args: &[&str]) -> Option<Mounted> {
        let at = home.path().to_path_buf();
        let out = Command::new("mount").args(args).arg(&at).output();
        match out {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                eprintln!(
                    "skipped: cannot mount here (not root, or mounts are not allowed): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                return None;
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                return None;
            }
        }
        let mounted = Mounted { at };
        mounted.make_work(home);
        Some(mounted)
    }

    fn make_work(&self, home: &Home) {
        std::fs::create_dir_all(home.work().join("src")).unwrap();
        std::fs::write(home.work().join("src/main.rs"), common::GREETING).unwrap();
    }

    fn unmount(&self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// Polls `done` every 50 ms until it holds; panics naming `what` after `limit`.
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let tries = limit.as_millis() / 50;
    for _ in 0..tries {
        if done() {
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not within {limit:?}");
}

/// A scenario file that writes `steps` messages of about 2 KB, `delay_ms` apart.
fn chatty_scenario(home: &Home, steps: u32, delay_ms: u32) -> String {
    let text = format!(
        r#"description = "Writes {steps} long messages."
model = "claude-sonnet-4-5"

[[turns]]
status = "done"
summary = "Wrote everything."

[[turns.steps]]
text = "Message {{i}}: {filler}"
repeat = {steps}
delay_ms = {delay_ms}
usage = {{ input_tokens = 10, output_tokens = 10 }}
"#,
        filler = "lorem ipsum ".repeat(170)
    );
    let path = home.path().join("chatty.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `drover status` as text.
fn status(home: &Home) -> String {
    let out = home.drover(&["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    common::stdout(&out)
}

/// A full disk while a run writes: the owner stays up, says why in `status`, refuses new
/// work with `LEDGER_UNAVAILABLE` (nothing changed), keeps the run's events; once space is
/// freed it takes work again by itself, and the run's events have no gap — nothing
/// acknowledged is lost and nothing is acknowledged that was not done.
#[test]
fn a_full_disk_refuses_new_work_says_why_and_resumes_by_itself_losing_nothing() {
    let home = Home::new();
    let Some(_disk) = Mounted::over(&home, &["-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs"])
    else {
        return;
    };
    let scenario = chatty_scenario(&home, 3_000, 2);
    let serve = home.serve();
    let run = home.dispatch(&scenario, "Write a lot", &[]);
    let filler = home.path().join("filler");
    common::fill_disk(&filler, 64 << 20);
    let mut said = String::new();
    wait_until(
        "status says the ledger cannot write",
        Duration::from_secs(60),
        || {
            said = status(&home);
            said.contains("ledger    cannot write")
        },
    );
    assert!(said.contains("is full"), "{said}");
    let refusal = home.refused(
        &[
            "dispatch",
            "--provider",
            "sim",
            "--scenario",
            "quick-success",
            "More",
        ],
        "LEDGER_UNAVAILABLE",
    );
    assert!(refusal.contains("Nothing was changed"), "{refusal}");
    let runs_before = home.runs().len();
    std::fs::remove_file(&filler).unwrap();
    wait_until(
        "status no longer says the ledger cannot write",
        Duration::from_secs(60),
        || !status(&home).contains("cannot write"),
    );
    let view = home.wait_idle(&run);
    assert_eq!(str_at(&view, "state"), "idle", "{view}");
    // Every event the run made is in the ledger, numbered without a gap (`events`
    // asserts 1..n), its 3,000 messages among them.
    let messages = home
        .events(&run)
        .iter()
        .filter(|e| e.to_string().contains("Message 2999:"))
        .count();
    assert!(messages >= 1, "the run's last message is in the ledger");
    // The refused dispatch made no run; work is taken again.
    assert_eq!(home.runs().len(), runs_before);
    let again = home.dispatch("quick-success", "Once more", &[]);
    home.wait_idle(&again);
    serve.stop();
}

/// A crash of the machine: the ledger's filesystem on a loop device, whose image is copied
/// as the device holds it while drover works — what the kernel had not sent to the device
/// is lost, as in a power cut — then mounted again (the journal replayed) under a new
/// owner. Every dispatch, follow-up and stop drover acknowledged before the copy is there.
#[test]
fn after_a_machine_crash_every_acknowledged_dispatch_follow_up_and_stop_is_there() {
    let home = Home::new();
    let images = tempfile::tempdir().unwrap();
    let image = images.path().join("disk.img");
    let made = Command::new("truncate")
        .args(["-s", "64M"])
        .arg(&image)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&image)
            .status()
            .is_ok_and(|s| s.success());
    if !made {
        eprintln!("skipped: cannot make an ext4 image here (truncate and mkfs.ext4 needed)");
        return;
    }
    let image_arg = image.display().to_string();
    let Some(disk) = Mounted::over(&home, &["-o", "loop", &image_arg]) else {
        return;
    };
    let serve = home.serve();
    let mut dispatched = Vec::new();
    let mut followed = Vec::new();
    let mut stopped = Vec::new();
    for i in 0..6 {
        let run = home.dispatch("multi-turn", &format!("Task {i}"), &[]);
        dispatched.push(run.clone());
        match i % 3 {
            0 => {
                home.wait_idle(&run);
                let text = format!("follow-up number {i}");
                home.json(&["follow-up", &run, &text]);
                followed.push((run, text));
            }
            1 => {
                home.json(&["stop", &run]);
                stopped.push(run);
            }
            _ => {}
        }
    }
    // The power cut: the device's content now, and nothing the kernel still holds.
    let crashed = images.path().join("crashed.img");
    std::fs::copy(&image, &crashed).unwrap();
    serve.kill9();
    drop(disk);
    let crashed_arg = crashed.display().to_string();
    let Some(_after) = Mounted::over(&home, &["-o", "loop", &crashed_arg]) else {
        panic!("the copied image mounts as the first one did");
    };
    let serve = home.serve();
    let runs = home.json(&["runs", "--all"]);
    let ids: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| str_at(r, "run_id"))
        .collect();
    for run in &dispatched {
        assert!(
            ids.contains(&run.as_str()),
            "dispatch {run} was lost: {ids:?}"
        );
    }
    for (run, text) in &followed {
        let events = home.events(run);
        assert!(
            events.iter().any(|e| e.to_string().contains(text.as_str())),
            "the follow-up to {run} was lost"
        );
    }
    for run in &stopped {
        let row = home.row(run);
        assert_eq!(str_at(&row, "state"), "stopped", "{row}");
    }
    serve.stop();
}
