//! Codex's native binary, found behind its npm launcher (docs/PROVIDERS.md §"Codex").
//!
//! `npm install @openai/codex` puts `bin/codex.js` on the PATH: a Node script that finds
//! the platform package's native binary (`@openai/codex-linux-x64/vendor/<triple>/bin/
//! codex`), sets `CODEX_MANAGED_PACKAGE_ROOT` and `CODEX_MANAGED_BY_<MANAGER>=1`, and runs
//! it — as a child that Node waits beside for the whole run on Node 20 and 22 (about
//! 45 MiB more per run), or by `execve` on newer Node. Either way each start pays Node's
//! own start (about 40 ms with the pinned version), and Codex exec starts one child per
//! turn. A run's child is started as the launcher would start it, without Node: the same
//! binary, the same arguments, the same two variables.
//!
//! Pure but for reading the file system. What must stay true: only a launcher laid out
//! exactly as the npm package lays it out (its `package.json` names `@openai/codex`, the
//! native binary is where the launcher looks) is ever bypassed; anything else, a binary
//! or a script of the user's own, runs as configured, and so does a run on another host
//! (its paths are that host's).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::providers::LaunchSpec;

/// The npm package whose launcher is bypassed.
const PACKAGE: &str = "@openai/codex";
/// The launcher's path inside the package.
const LAUNCHER: [&str; 2] = ["bin", "codex.js"];

/// The native binary behind an npm launcher, with what the launcher would have set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Native {
    /// The native binary.
    pub binary: PathBuf,
    /// The variables the launcher sets for it.
    pub env: Vec<(String, String)>,
}

/// `spec` with its command switched to the native binary behind Codex's npm launcher,
/// when the command is that launcher on this machine; otherwise `spec` unchanged. A
/// variable the run's configuration sets itself is kept.
pub fn unwrapped(mut spec: LaunchSpec) -> LaunchSpec {
    if spec.transport.is_some() {
        return spec;
    }
    let search_path = spec
        .env
        .get("PATH")
        .cloned()
        .or_else(|| std::env::var("PATH").ok());
    let Some(native) = behind_launcher(&spec.command, search_path.as_deref()) else {
        return spec;
    };
    tracing::debug!(launcher = %spec.command.display(), binary = %native.binary.display(), "running Codex's native binary");
    spec.command = native.binary;
    add_missing(&mut spec.env, native.env);
    spec
}

fn add_missing(env: &mut BTreeMap<String, String>, more: Vec<(String, String)>) {
    for (name, value) in more {
        env.entry(name).or_insert(value);
    }
}

/// The native binary behind `command` when `command` (a path, or a name looked up on
/// `search_path`) is Codex's npm launcher; `None` for anything else.
pub fn behind_launcher(command: &Path, search_path: Option<&str>) -> Option<Native> {
    let found = if command.components().count() > 1 {
        command.to_path_buf()
    } else {
        let cwd = std::env::current_dir().ok()?;
        which::which_in(command, search_path, cwd).ok()?
    };
    // Node runs the launcher from its real path (npm links `.bin/codex` to it).
    let script = std::fs::canonicalize(found).ok()?;
    let bin = script.parent()?;
    let root = bin.parent()?;
    if script.file_name()? != LAUNCHER[1] || bin.file_name()? != LAUNCHER[0] {
        return None;
    }
    if package_name(root)?.as_str() != PACKAGE {
        return None;
    }
    let (triple, platform) = target()?;
    // Where `require.resolve("<platform>/package.json")` finds the platform package from
    // the launcher; the package's own `vendor` when it is not installed.
    let vendor = bin
        .ancestors()
        .filter(|dir| dir.file_name().is_some_and(|n| n != "node_modules"))
        .map(|dir| dir.join("node_modules").join(platform))
        .find(|dir| dir.join("package.json").is_file())
        .map_or_else(|| root.join("vendor"), |dir| dir.join("vendor"));
    let binary = vendor.join(triple).join("bin").join("codex");
    if !is_executable(&binary) {
        return None;
    }
    let manager = match manager_of(root) {
        Manager::Npm => "CODEX_MANAGED_BY_NPM",
        Manager::Pnpm => "CODEX_MANAGED_BY_PNPM",
        Manager::Bun => "CODEX_MANAGED_BY_BUN",
    };
    Some(Native {
        binary,
        env: vec![
            (
                "CODEX_MANAGED_PACKAGE_ROOT".into(),
                root.display().to_string(),
            ),
            (manager.into(), "1".into()),
        ],
    })
}

/// The `name` in `dir/package.json`.
fn package_name(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value.get("name")?.as_str().map(str::to_string)
}

/// The launcher's target triple and platform package for this machine.
fn target() -> Option<(&'static str, &'static str)> {
    match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => Some(("x86_64-unknown-linux-musl", "@openai/codex-linux-x64")),
        ("linux", "aarch64") => Some(("aarch64-unknown-linux-musl", "@openai/codex-linux-arm64")),
        ("macos", "x86_64") => Some(("x86_64-apple-darwin", "@openai/codex-darwin-x64")),
        ("macos", "aarch64") => Some(("aarch64-apple-darwin", "@openai/codex-darwin-arm64")),
        _ => None,
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Who installed the package, as the launcher tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manager {
    Npm,
    Pnpm,
    Bun,
}

/// pnpm when a `node_modules` above the package holds pnpm's `.modules.yaml` and links
/// this package; bun when it sits in bun's global install; npm otherwise.
fn manager_of(root: &Path) -> Manager {
    let pnpm = root.ancestors().any(|dir| {
        let modules = dir.join("node_modules");
        modules.join(".modules.yaml").is_file()
            && std::fs::canonicalize(modules.join(PACKAGE)).is_ok_and(|p| p == root)
    });
    if pnpm {
        Manager::Pnpm
    } else if root.to_string_lossy().contains(".bun/install/global") {
        Manager::Bun
    } else {
        Manager::Npm
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// An npm-style install under `dir`: the launcher package and, when `platform`, the
    /// platform package beside it; returns the `.bin/codex` link.
    fn install(dir: &Path, platform: bool) -> PathBuf {
        let modules = dir.join("node_modules");
        let root = modules.join("@openai/codex");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("package.json"), r#"{"name":"@openai/codex"}"#).unwrap();
        executable(&root.join("bin/codex.js"));
        if platform {
            let (triple, package) = target().unwrap();
            let package = modules.join(package);
            std::fs::create_dir_all(package.join("vendor").join(triple).join("bin")).unwrap();
            std::fs::write(package.join("package.json"), "{}").unwrap();
            executable(&package.join("vendor").join(triple).join("bin/codex"));
        }
        std::fs::create_dir_all(modules.join(".bin")).unwrap();
        let link = modules.join(".bin/codex");
        std::os::unix::fs::symlink("../@openai/codex/bin/codex.js", &link).unwrap();
        link
    }

    fn executable(path: &Path) {
        std::fs::write(path, "").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn spec(command: &Path) -> LaunchSpec {
        LaunchSpec::for_tests(
            "codex",
            &command.display().to_string(),
            crate::spec::PermissionPolicy::Auto,
            crate::spec::Capability::Workspace,
        )
    }

    #[test]
    fn the_launcher_of_an_npm_install_gives_way_to_its_platform_binary() {
        let dir = tempfile::tempdir().unwrap();
        let link = install(dir.path(), true);
        let native = behind_launcher(&link, None).expect("the native binary");
        let root = std::fs::canonicalize(dir.path())
            .unwrap()
            .join("node_modules");
        let (triple, package) = target().unwrap();
        assert_eq!(
            native.binary,
            root.join(package)
                .join("vendor")
                .join(triple)
                .join("bin/codex")
        );
        assert_eq!(
            native.env,
            vec![
                (
                    "CODEX_MANAGED_PACKAGE_ROOT".to_string(),
                    root.join("@openai/codex").display().to_string()
                ),
                ("CODEX_MANAGED_BY_NPM".to_string(), "1".to_string()),
            ]
        );
        // Found by name on the run's PATH, too.
        let path = link.parent().unwrap().display().to_string();
        assert_eq!(
            behind_launcher(Path::new("codex"), Some(&path)),
            Some(native)
        );
    }

    #[test]
    fn the_packages_own_vendor_directory_serves_when_no_platform_package_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let link = install(dir.path(), false);
        assert_eq!(
            behind_launcher(&link, None),
            None,
            "no binary: the launcher runs"
        );
        let root = std::fs::canonicalize(dir.path())
            .unwrap()
            .join("node_modules/@openai/codex");
        let (triple, _) = target().unwrap();
        std::fs::create_dir_all(root.join("vendor").join(triple).join("bin")).unwrap();
        executable(&root.join("vendor").join(triple).join("bin/codex"));
        assert_eq!(
            behind_launcher(&link, None).map(|n| n.binary),
            Some(root.join("vendor").join(triple).join("bin/codex"))
        );
    }

    #[test]
    fn anything_else_runs_as_configured() {
        let dir = tempfile::tempdir().unwrap();
        // A binary of the user's own named codex.
        let own = dir.path().join("codex");
        executable(&own);
        assert_eq!(behind_launcher(&own, None), None);
        // A script laid out like the launcher in a package of another name.
        let link = install(dir.path(), true);
        let root = dir.path().join("node_modules/@openai/codex");
        std::fs::write(root.join("package.json"), r#"{"name":"my-codex"}"#).unwrap();
        assert_eq!(behind_launcher(&link, None), None);
        // Nothing there at all.
        assert_eq!(behind_launcher(&dir.path().join("missing"), None), None);
        assert_eq!(
            behind_launcher(Path::new("codex"), Some("/nonexistent")),
            None
        );
    }

    #[test]
    fn a_run_keeps_its_own_variables_and_a_remote_run_its_command() {
        let dir = tempfile::tempdir().unwrap();
        let link = install(dir.path(), true);
        let mut own = spec(&link);
        own.env
            .insert("CODEX_MANAGED_BY_NPM".into(), "from the config".into());
        let run = unwrapped(own);
        assert_ne!(run.command, link);
        assert_eq!(run.env["CODEX_MANAGED_BY_NPM"], "from the config");
        assert!(run.env.contains_key("CODEX_MANAGED_PACKAGE_ROOT"));

        let mut remote = spec(&link);
        let host = crate::config::HostConfig {
            ssh: Some("devbox".into()),
            ..Default::default()
        };
        remote.transport = Some(Box::new(crate::providers::transport::Transport::of(
            "devbox",
            &host,
            Path::new("/tmp"),
        )));
        let run = unwrapped(remote);
        assert_eq!(run.command, link);
        assert!(run.env.is_empty());
    }

    #[test]
    fn pnpm_and_bun_installs_are_told_apart_from_npm() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), true);
        let modules = std::fs::canonicalize(dir.path())
            .unwrap()
            .join("node_modules");
        let root = modules.join("@openai/codex");
        assert_eq!(manager_of(&root), Manager::Npm);
        std::fs::write(modules.join(".modules.yaml"), "").unwrap();
        assert_eq!(manager_of(&root), Manager::Pnpm);
        assert_eq!(
            manager_of(Path::new(
                "/home/u/.bun/install/global/node_modules/@openai/codex"
            )),
            Manager::Bun
        );
    }
}
