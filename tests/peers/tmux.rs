//! A real CLI's own interface driven in tmux (a take-over): a tmux server of the test's
//! own (its own socket), one pane running a command with exactly the environment given,
//! kept after the command exits so the test can see it ended; and what a take-over of a
//! run leaves in its view.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Whether tmux is installed.
pub fn available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tmux server and its one pane; killed (by its socket) when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `argv` in `dir` with `env` only, in a 200×50 pane.
    pub fn start(dir: &Path, env: &[(String, String)], argv: &[&str]) -> Tmux {
        let socket = format!("drover-peers-{}-{}", std::process::id(), rand_suffix());
        let tmux = Tmux { socket };
        let mut line = vec!["env".to_string(), "-i".to_string()];
        line.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        line.extend(argv.iter().map(|a| a.to_string()));
        let command = shell_words::join(&line);
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "200",
            "-y",
            "50",
            "-c",
            &dir.display().to_string(),
            "-s",
            "t",
            &command,
        ]);
        tmux.run(&["set-option", "-t", "t", "remain-on-exit", "on"]);
        tmux
    }

    /// `drover attach RUN` in a terminal, with the owner's environment (a real terminal
    /// type) and `extra` variables.
    pub fn attach(drover: &crate::drover::Drover, run: &str, extra: &[(&str, &str)]) -> Tmux {
        let mut env = drover.env();
        env.retain(|(k, _)| k != "TERM");
        env.push(("TERM".into(), "xterm-256color".into()));
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Tmux::start(
            &drover.work_dir(),
            &env,
            &[env!("CARGO_BIN_EXE_drover"), "attach", run],
        )
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// What the pane shows now.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    /// Types `text` literally.
    pub fn send_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
    }

    /// Presses keys by tmux's names (`Enter`, `C-c`).
    pub fn send_keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Waits (bounded) until the screen satisfies `done`; fails showing the screen.
    pub async fn until_screen(&self, limit: Duration, done: impl Fn(&str) -> bool) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the screen never showed what was awaited:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A take-over's exchange in a CLI's own interface: once it shows `ready` (the
    /// session's history), `typed` is typed, sent once it shows, and answered with
    /// `answer`; then `leave` (`/exit`, `/quit`) ends the interface — its first Enter may
    /// only pick the command from the menu.
    pub async fn exchange_and_leave(
        &self,
        limit: Duration,
        ready: &str,
        typed: &str,
        answer: &str,
        leave: &str,
    ) {
        self.until_screen(limit, |screen| screen.contains(ready))
            .await;
        self.send_text(typed);
        self.until_screen(limit, |screen| screen.contains(typed))
            .await;
        self.send_keys(&["Enter"]);
        self.until_screen(limit, |screen| screen.contains(answer))
            .await;
        self.send_text(leave);
        self.until_screen(limit, |screen| screen.contains(leave))
            .await;
        for _ in 0..3 {
            self.send_keys(&["Enter"]);
            if self.is_dead_within(Duration::from_secs(5)).await {
                break;
            }
        }
        self.until_dead(limit).await;
    }

    /// Whether the pane's command has exited within `limit`.
    pub async fn is_dead_within(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if self.dead() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.dead()
    }

    fn dead(&self) -> bool {
        self.run(&["display-message", "-p", "-t", "t", "#{pane_dead}"])
            .trim()
            == "1"
    }

    /// Waits (bounded) until the pane's command has exited.
    pub async fn until_dead(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self
                .run(&["display-message", "-p", "-t", "t", "#{pane_dead}"])
                .trim()
                == "1"
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the command in tmux did not end:\n{}",
                self.screen()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// A run's view after one prompt, `typed`, was answered with `answer` in its CLI's own
/// interface: exactly one interactive turn after the first, with that prompt and answer,
/// its tokens and an estimated cost; the run idle and hibernated under drover again.
pub fn assert_one_interactive_turn(
    view: &serde_json::Value,
    typed: &str,
    answer: &str,
    screen: &str,
) {
    let origins: Vec<&str> = view["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["origin"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(origins, ["dispatch", "interactive"], "{view}\n{screen}");
    let turn = &view["turns"][1];
    assert_eq!(turn["prompt_preview"], typed, "{view}");
    assert!(
        turn["text"].as_str().is_some_and(|t| t.contains(answer)),
        "{view}"
    );
    assert!(turn["tokens"]["output"].as_u64().unwrap_or(0) > 0, "{view}");
    assert!(turn["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{view}");
    assert_eq!(view["live_state"]["detail"], "idle · hibernated", "{view}");
}
