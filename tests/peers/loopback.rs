//! Where the tests that start a real CLI or agent run: in a network namespace of their
//! own where only loopback exists (`lo`, up), which `scripts/test.sh` makes with `unshare
//! -n` before it runs the tests. Whatever a CLI's flags or variables fail to turn off, it
//! can then reach 127.0.0.1 and nothing else.
//!
//! What must stay true: every test that starts a real CLI or agent calls [`require`]
//! first (the peers harness does it in `Drover::start_with` and `run_bounded`;
//! `tests/doctor.rs` before each `drover doctor`). Outside such a namespace it fails,
//! saying how to run the tests, unless the developer set [`ACCEPT_VAR`]`=host`, accepting
//! the machine's own network (for a machine that forbids namespaces: `unshare -n` needs
//! root). No check here sends anything past loopback: the interfaces are read from
//! `/proc/self/net/dev`, never probed.

use std::sync::Once;

/// Set to `host` to accept running the tests with the machine's own network.
pub const ACCEPT_VAR: &str = "DROVER_TEST_NETWORK";

/// The network interfaces of this process's network namespace (`/proc/self/net/dev`:
/// two header lines, then one `NAME: counters…` line each).
pub fn interfaces() -> Vec<String> {
    let dev = std::fs::read_to_string("/proc/self/net/dev")
        .unwrap_or_else(|e| panic!("cannot read /proc/self/net/dev: {e}"));
    dev.lines()
        .skip(2)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, _)| name.trim().to_string())
        .collect()
}

/// Whether this process runs where `lo` is the only interface.
pub fn only_loopback() -> bool {
    interfaces() == ["lo"]
}

/// Whether the developer accepted running with the machine's network.
pub fn host_network_accepted() -> bool {
    std::env::var(ACCEPT_VAR).is_ok_and(|v| v == "host")
}

/// The failure when the tests run where more than loopback exists.
pub fn refusal(interfaces: &[String]) -> String {
    format!(
        "this test starts a real CLI or agent, which must run where only loopback exists, \
         but this network namespace has {}. Run the tests with scripts/test.sh, which runs \
         them in a network namespace of their own with only `lo` up (`unshare -n`, as \
         root), or set {ACCEPT_VAR}=host to accept running them with this machine's \
         network (see tests/peers/README.md).",
        interfaces.join(", ")
    )
}

/// Fails the test (see the module doc) unless only loopback exists here or the developer
/// accepted the machine's network; says once when it was accepted.
pub fn require() {
    if only_loopback() {
        return;
    }
    if host_network_accepted() {
        static SAID: Once = Once::new();
        SAID.call_once(|| {
            eprintln!(
                "{ACCEPT_VAR}=host: the CLIs run with this machine's network ({}), not only loopback",
                interfaces().join(", ")
            );
        });
        return;
    }
    panic!("{}", refusal(&interfaces()));
}
