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

/// `doc` is valid against the published schema docs/schema/`file`, and that file is
/// what `sfclab schema` prints now.
#[allow(dead_code)]
pub fn assert_follows_schema(file: &str, doc: &serde_json::Value) {
    let published = std::fs::read_to_string(repo().join("docs/schema").join(file)).unwrap();
    let name = file.rsplit_once('-').unwrap().0;
    let o = sfclab(&["schema", name]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        published,
        "docs/schema/{file} is stale: regenerate it with `sfclab schema {name} > docs/schema/{file}`"
    );
    let schema: serde_json::Value = serde_json::from_str(&published).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{file}: {errors:#?}");
}
