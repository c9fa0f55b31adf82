//! A real OpenSSH server on 127.0.0.1 for the hosts tests (docs/ARCHITECTURE.md
//! §"Hosts"): a throwaway host key and user key (`ssh-keygen`), an `sshd_config` of its
//! own on a free port, `/usr/sbin/sshd -D -e -f CFG` started and ended by its pid, and the
//! `[hosts.NAME]` table that reaches it with the user key and a known-hosts file of its
//! own (never the user's `~/.ssh`).
//!
//! Standalone (it uses nothing else of the harness), so a bench can include it too.
//!
//! sshd needs root for its privilege separation: as another user [`Sshd::start`] says why
//! and gives `None` (the only reason a hosts test skips); a missing `sshd` is a failure.

#![allow(dead_code)] // each target that includes it uses its own part

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Where Debian's (and most distributions') OpenSSH server is.
pub const SSHD: &str = "/usr/sbin/sshd";
/// How long sshd may take to listen.
const START_LIMIT: Duration = Duration::from_secs(20);

/// A running sshd on 127.0.0.1.
pub struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    /// The port it listens on.
    pub port: u16,
    /// The user it lets in (the one running the test).
    pub user: String,
}

impl Sshd {
    /// Starts one, or says why it cannot here (not root) and returns `None`.
    pub fn start(test: &str) -> Option<Sshd> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("{test}: skipped: not root, and sshd's privilege separation needs root");
            return None;
        }
        assert!(
            Path::new(SSHD).is_file(),
            "{SSHD} is missing: install OpenSSH's server (`apt-get install openssh-server`, as .ci/run does)"
        );
        // sshd refuses to start without its privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        let dir = tempfile::Builder::new()
            .prefix("drover-sshd")
            .tempdir_in("/tmp")
            .expect("a temp dir");
        for key in ["host_key", "user_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-N", "", "-t", "ed25519", "-f"])
                .arg(dir.path().join(key))
                .stdin(Stdio::null())
                .output()
                .expect("ssh-keygen runs");
            assert!(out.status.success(), "ssh-keygen: {out:?}");
        }
        std::fs::copy(
            dir.path().join("user_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .expect("authorized_keys");
        let user = nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|u| u.name)
            .expect("the user's name");
        let port = free_port();
        let path = std::env::var("PATH").unwrap_or_default();
        let config = format!(
            "ListenAddress 127.0.0.1\nPort {port}\nHostKey {dir}/host_key\n\
             AuthorizedKeysFile {dir}/authorized_keys\nPidFile {dir}/sshd.pid\nUsePAM no\n\
             StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nAllowUsers {user}\n\
             MaxSessions 100\nMaxStartups 100\nLogLevel ERROR\nSetEnv PATH={path}\n",
            dir = dir.path().display(),
        );
        std::fs::write(dir.path().join("sshd_config"), config).expect("sshd_config");
        let log = std::fs::File::create(dir.path().join("sshd.log")).expect("sshd.log");
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(dir.path().join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sshd starts");
        let mut sshd = Sshd {
            child,
            dir,
            port,
            user,
        };
        let deadline = Instant::now() + START_LIMIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = sshd.child.try_wait() {
                panic!("sshd exited {status}: {}", sshd.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not listen on {port} within {START_LIMIT:?}: {}",
                sshd.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
        Some(sshd)
    }

    /// sshd's own pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The user's private key.
    pub fn identity(&self) -> PathBuf {
        self.dir.path().join("user_key")
    }

    /// What sshd wrote to stderr.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(self.dir.path().join("sshd.log")) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// The `[hosts.NAME]` table that reaches this server.
    pub fn host_table(&self, name: &str) -> String {
        format!(
            "[hosts.{name}]\nssh = \"{user}@127.0.0.1\"\nport = {port}\nidentity = \"{identity}\"\n\
             ssh_options = [\"UserKnownHostsFile={dir}/known_hosts\", \"StrictHostKeyChecking=accept-new\", \"ConnectTimeout=10\"]\n",
            user = self.user,
            port = self.port,
            identity = self.identity().display(),
            dir = self.dir.path().display(),
        )
    }

    /// The ssh client's argv that runs `script` on this server as the host table does
    /// (for a test to look at the host itself).
    pub fn ssh(&self, script: &str) -> Command {
        let mut command = Command::new("ssh");
        command
            .args(["-T", "-o", "BatchMode=yes", "-p"])
            .arg(self.port.to_string())
            .arg("-i")
            .arg(self.identity())
            .arg("-o")
            .arg(format!(
                "UserKnownHostsFile={}/known_hosts",
                self.dir.path().display()
            ))
            .args(["-o", "StrictHostKeyChecking=accept-new", "--"])
            .arg(format!("{}@127.0.0.1", self.user))
            .arg(script)
            .stdin(Stdio::null());
        command
    }

    /// The pids of the per-connection sshd processes it forked (its children).
    pub fn sessions(&self) -> Vec<i32> {
        children_of(self.child.id() as i32)
    }
}

impl Drop for Sshd {
    /// Ends sshd and the connection processes it forked, each by its pid.
    fn drop(&mut self) {
        let sessions = self.sessions();
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        for pid in sessions {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now (the kernel's pick, released at once).
fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The pids whose parent is `parent`, read from /proc.
pub fn children_of(parent: i32) -> Vec<i32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid: i32 = after.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == parent).then_some(pid)
        })
        .collect()
}
