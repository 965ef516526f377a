//! Stamps the git commit into `sfclab --version`, so a result can be traced to the code
//! that measured it. Outside a git checkout (a source tarball) it says `unknown`.

fn main() {
    // Multi-core tests are reported as ignored, with the reason, on a one-core machine.
    println!("cargo:rustc-check-cfg=cfg(one_core)");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        println!("cargo:rustc-cfg=one_core");
    }
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty());
    let suffix = if dirty { "-modified" } else { "" };
    println!("cargo:rustc-env=SFCLAB_COMMIT={commit}{suffix}");
    // Rebuild when HEAD moves.
    for path in ["../../.git/HEAD", "../../.git/index"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
