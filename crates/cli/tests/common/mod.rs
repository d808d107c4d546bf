//! Helpers shared by the CLI's integration tests.

use std::process::Command;

/// Runs the `schedlab` binary: (success, stdout, stderr).
pub fn schedlab(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
