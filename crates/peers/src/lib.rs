//! Peers: the running systems sfclab's benchmarks compare with, measured in the same run.
//! Each peer is one module that knows how to start it, read its figures, and always stop
//! it and remove what it left behind (processes, DPDK runtime directories).
//!
//! - [`testpmd`]: DPDK's testpmd processes on virtual devices (`net_ring`, `net_memif`).
//! - [`dpdk_test`]: DPDK's unit-test binary (`ring_perf_autotest`, `lpm_perf_autotest`).
//! - [`dpdk_acl`]: DPDK's ACL test application (`dpdk-test-acl`, rte_acl).
//! - [`dpdk_meter`]: DPDK's rte_meter, timed by a small program compiled against it.
//! - [`dpdk_crypto`]: DPDK's AES-GCM crypto PMDs (`dpdk-test-crypto-perf`).
//! - [`dpdk_ipsec`]: DPDK's ESP (librte_ipsec around a crypto PMD), timed by a small
//!   program compiled against it.
//! - [`trafgen`]: netsniff-ng's packet generator on AF_PACKET TX rings.

pub mod dpdk_acl;
pub mod dpdk_crypto;
pub mod dpdk_ipsec;
pub mod dpdk_meter;
pub mod dpdk_test;
pub mod testpmd;
pub mod trafgen;

/// The path of `bin` on `PATH`, if installed.
pub fn which(bin: &str) -> Option<String> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| format!("{d}/{bin}"))
        .find(|p| std::path::Path::new(p).is_file())
}

/// Compiles the C program `source` into `dir` as `name` with the system's C compiler and
/// `pkg-config --cflags --libs libdpdk` (for the peers DPDK ships no binary for); the
/// error names `what` and says what is missing.
pub(crate) fn compile_against_dpdk(
    dir: &std::path::Path,
    name: &str,
    source: &str,
    what: &str,
) -> Result<std::path::PathBuf, String> {
    use std::process::Command;
    let flags = |which: &str| -> Result<Vec<String>, String> {
        let o = Command::new("pkg-config")
            .args([which, "libdpdk"])
            .output()
            .map_err(|e| format!("pkg-config: {e} (Debian package `pkg-config`)"))?;
        if !o.status.success() {
            return Err("pkg-config finds no libdpdk (Debian package `dpdk-dev`)".into());
        }
        Ok(String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .map(String::from)
            .collect())
    };
    let (cflags, libs) = (flags("--cflags")?, flags("--libs")?);
    let src = dir.join(format!("{name}.c"));
    let bin = dir.join(name);
    std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
    // DPDK marks some of the APIs its own applications use experimental.
    let o = Command::new("cc")
        .args(["-O2", "-DALLOW_EXPERIMENTAL_API"])
        .args(&cflags)
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .args(&libs)
        .output()
        .map_err(|e| format!("cc: {e} (Debian package `gcc`)"))?;
    if !o.status.success() {
        // The errors, not the deprecation warnings DPDK's headers print before them.
        let stderr = String::from_utf8_lossy(&o.stderr);
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).take(5).collect();
        let shown = if errors.is_empty() {
            stderr.lines().take(5).collect()
        } else {
            errors
        };
        return Err(format!("compiling {what} failed: {}", shown.join(" / ")));
    }
    Ok(bin)
}

/// Runs one of DPDK's applications to completion without hugepages or PCI devices, on
/// `lcores` with `memory_mb` of memory, in a runtime directory of its own (removed after):
/// `bin` from `package`, the EAL arguments, then `app_args` (after `--` when given), with
/// `env` set. Returns its output. Once `stop` says so (Ctrl-C) the application is killed
/// and this returns [`STOPPED`] within ~20 ms: a DPDK test runs for seconds.
pub(crate) fn run_dpdk_app(
    bin: &str,
    package: &str,
    lcores: &str,
    memory_mb: u32,
    env: &[(&str, &str)],
    app_args: &[String],
    stop: &dyn Fn() -> bool,
) -> Result<std::process::Output, String> {
    run_dpdk_app_with(bin, package, lcores, &[], memory_mb, env, app_args, stop)
}

/// [`run_dpdk_app`] with more EAL arguments (`--vdev`, `--main-lcore`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_dpdk_app_with(
    bin: &str,
    package: &str,
    lcores: &str,
    eal: &[&str],
    memory_mb: u32,
    env: &[(&str, &str)],
    app_args: &[String],
    stop: &dyn Fn() -> bool,
) -> Result<std::process::Output, String> {
    use std::process::Stdio;
    // A path runs as it is (a program built for the run); a name is looked up.
    let path = match bin.contains('/') {
        true => bin.to_string(),
        false => which(bin).ok_or_else(|| format!("{bin} not found (Debian package `{package}`)"))?,
    };
    let name = std::path::Path::new(bin)
        .file_name()
        .map_or(bin.into(), |n| n.to_string_lossy());
    let prefix = format!("sfclab-{name}-{}", std::process::id());
    let mut args: Vec<String> = [
        "--no-huge",
        "-m",
        &memory_mb.to_string(),
        "--no-pci",
        "-l",
        lcores,
        "--file-prefix",
        &prefix,
    ]
    .iter()
    .chain(eal)
    .map(|s| s.to_string())
    .collect();
    if !app_args.is_empty() {
        args.extend(["--log-level".to_string(), "lib.eal:error".into(), "--".into()]);
        args.extend_from_slice(app_args);
    }
    let child = std::process::Command::new(&path)
        .args(&args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let out = match child {
        Ok(child) => wait_or_stop(child, stop),
        Err(e) => Err(format!("cannot run {bin}: {e}")),
    };
    testpmd::remove_runtime_dir(&prefix);
    out
}

/// What a peer run returns when Ctrl-C stopped it before it ended.
pub const STOPPED: &str = "stopped by Ctrl-C before it ended";

/// Collects `child`'s output as it comes (threads drain the pipes, so a chatty child
/// never blocks on a full one) until it exits or `stop` says so; then it is killed.
fn wait_or_stop(mut child: std::process::Child, stop: &dyn Fn() -> bool) -> Result<std::process::Output, String> {
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if stop() => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(STOPPED.to_string());
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(e) => break Err(format!("cannot wait for the peer: {e}")),
        }
    };
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    Ok(std::process::Output {
        status: status?,
        stdout,
        stderr,
    })
}

/// Reads `pipe` to its end on a thread of its own; the thread returns the bytes.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        bytes
    })
}
