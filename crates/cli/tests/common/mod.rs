//! Running the `sfclab` binary from the integration tests.

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn sfclab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sfclab"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("sfclab runs")
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The binary's path, for running it under another command (`taskset`).
#[allow(dead_code)]
pub fn sfclab_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sfclab")
}
