//! A real CLI's own interface driven in tmux (a take-over): a tmux server of the test's
//! own (its own socket), one pane running a command with exactly the environment given,
//! kept after the command exits so the test can see it ended.

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
