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

/// The pages whose `sh` blocks are examples users copy: the README and the guide's
/// pages in the order of its SUMMARY.md.
#[allow(dead_code)]
pub fn documented_pages() -> Vec<std::path::PathBuf> {
    let guide = repo().join("docs/guide/src");
    let summary = std::fs::read_to_string(guide.join("SUMMARY.md")).unwrap();
    let mut pages = vec![repo().join("README.md")];
    for line in summary.lines() {
        if let Some((_, rest)) = line.split_once("](") {
            pages.push(guide.join(rest.trim_end_matches(')')));
        }
    }
    pages
}

/// The `sfclab run` examples of the README's and the guide's `sh` blocks, each as its
/// arguments after `run` (single quotes grouped, the comment cut), with `sudo` or not.
#[allow(dead_code)]
pub fn documented_run_examples() -> Vec<(bool, Vec<String>)> {
    let mut examples = Vec::new();
    for page in documented_pages() {
        let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for block in text.split("```sh").skip(1).filter_map(|s| s.split("```").next()) {
            examples.extend(block.lines().filter_map(run_example));
        }
    }
    examples
}

/// One line of an `sh` block as (sudo, arguments after `sfclab run`), if it is a run.
#[allow(dead_code)]
fn run_example(line: &str) -> Option<(bool, Vec<String>)> {
    let (sudo, rest) = match line.strip_prefix("sudo ") {
        Some(r) => (true, r),
        None => (false, line),
    };
    let args = rest.strip_prefix("sfclab run")?;
    Some((sudo, shell_words(args)))
}

/// A command line's words as a shell splits them (single quotes group, `#` at a word's
/// start ends the line).
#[allow(dead_code)]
pub fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            '#' if !quoted && word.is_empty() => break,
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Runs one documented example in `dir` (files it names there, chain files from the repo)
/// with a short window and `--json`, and checks that it forwards: packets conserved,
/// some received, no NF dropping nearly everything. Returns the document.
#[allow(dead_code)]
pub fn run_readme_example(dir: &std::path::Path, words: &[String]) -> serde_json::Value {
    let mut args = vec!["run".to_string()];
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            // Our own window replaces the example's.
            "--duration" => {
                it.next();
            }
            "--csv" | "--json" => {}
            w if w.starts_with("examples/") => args.push(repo().join(w).to_string_lossy().into_owned()),
            w => args.push(w.to_string()),
        }
    }
    if !words.iter().any(|w| w == "--count") {
        args.extend(["--duration".into(), "300ms".into(), "--warmup".into(), "50ms".into()]);
    }
    args.push("--json".into());
    let o = Command::new(env!("CARGO_BIN_EXE_sfclab"))
        .args(&args)
        .current_dir(dir)
        .output()
        .expect("sfclab runs");
    assert!(o.status.success(), "sfclab {}: {}", args.join(" "), stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("sfclab {}: {e}", args.join(" ")));
    let what = words.join(" ");
    assert_eq!(v["conservation"]["holds"], true, "{what}");
    let why = &v["nearly_all_dropped"];
    assert!(v["received"].as_u64().unwrap() > 0, "{what} forwarded nothing: {why}");
    assert!(why.is_null(), "{what}: {why}");
    v
}

/// The namespaces of the sfclab run with process id `pid` (`sfclab-<pid>-...`).
#[allow(dead_code)]
pub fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| n.starts_with(&format!("sfclab-{pid}-")))
        .collect()
}

/// `sfclab` inside network namespace `ns` (`ip netns exec`), to be given its arguments.
#[allow(dead_code)]
pub fn sfclab_in(ns: &sfclab_topology::Namespace) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns.name()]).arg(sfclab_bin());
    c
}

/// `chain` as the DUT of `hop` (AF_PACKET on its two ends) until `stop_dut`, its JSON
/// report on stdout; `extra` flags after the chain.
#[allow(dead_code)]
pub fn spawn_dut(hop: &sfclab_topology::Hop, chain: &std::path::Path, extra: &[String]) -> std::process::Child {
    sfclab_in(&hop.namespace)
        .arg("run")
        .arg(chain)
        .args(extra)
        .args(["--ports", &format!("dut:{},{}", hop.input.name(), hop.output.name())])
        .args(["--io", "af_packet", "--duration", "60s", "--warmup", "0s", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Stops a DUT `spawn_dut` started (Ctrl-C) and returns its report, which must follow
/// the published run schema.
#[allow(dead_code)]
pub fn stop_dut(child: std::process::Child) -> serde_json::Value {
    // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_follows_schema("run-4.json", &doc);
    doc
}

/// The place called `name` in run report `doc`.
#[allow(dead_code)]
pub fn place(doc: &serde_json::Value, name: &str) -> serde_json::Value {
    doc["places"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {}", doc["places"]))
        .clone()
}

/// The testbed's tester sending 3,000 verified 200-byte frames in 16 flows at 5 kpps
/// over AF_PACKET through whatever the hops run, its JSON report on stdout.
#[allow(dead_code)]
pub fn run_tester(bed: &sfclab_topology::Testbed) -> Output {
    sfclab_in(&bed.tester)
        .args(["run", "--ports"])
        .arg(format!("tester:{},{}", bed.tester_out.name(), bed.tester_in.name()))
        .args([
            "--io",
            "af_packet",
            "--count",
            "3000",
            "--rate",
            "5kpps",
            "--warmup",
            "100ms",
        ])
        .args(["--size", "200", "--flows", "16", "--verify", "--json"])
        .output()
        .unwrap()
}

/// Waits until a server listens on both socket files (30 s at most).
#[allow(dead_code)]
pub fn wait_for_sockets(a: &std::path::Path, b: &std::path::Path) {
    let started = std::time::Instant::now();
    while !(a.exists() && b.exists()) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "nothing listens on {a:?} and {b:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
