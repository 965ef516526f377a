//! Links vectorscan where it is installed (its header in the usual place, or
//! `VECTORSCAN_INCLUDE`), and says so with `cfg(vectorscan)`; without it the crate
//! refuses to build a database, saying how to get one. `SFCLAB_NO_VECTORSCAN=1` builds
//! without it on purpose.
//!
//! Why not a crate: `hyperscan`/`hyperscan-sys` link libhs unconditionally (a build
//! without it fails), and `vectorscan-rs` builds its own copy from source with CMake,
//! minutes on a fresh machine. sfclab needs the library where it is and a build where
//! it is not, as `crates/aead` does with ipsec-mb.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(vectorscan)");
    println!("cargo::rerun-if-changed=shim/check.c");
    println!("cargo::rerun-if-env-changed=VECTORSCAN_INCLUDE");
    println!("cargo::rerun-if-env-changed=VECTORSCAN_LIB");
    println!("cargo::rerun-if-env-changed=SFCLAB_NO_VECTORSCAN");
    if std::env::var_os("SFCLAB_NO_VECTORSCAN").is_some_and(|v| v != "0") {
        return;
    }
    let include = std::env::var_os("VECTORSCAN_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/include"));
    let header = include.join("hs/hs.h");
    if !header.exists() {
        // The directory changes when the header is installed (a missing file would make
        // cargo run this script on every build).
        println!("cargo::rerun-if-changed={}", include.display());
        println!(
            "cargo::warning=hs/hs.h not found in {}: the dpi NF uses aho-corasick (apt-get install libvectorscan-dev for vectorscan)",
            include.display()
        );
        return;
    }
    println!("cargo::rerun-if-changed={}", header.display());
    if let Err(e) = cc::Build::new()
        .file("shim/check.c")
        .include(&include)
        .try_compile("sfclab_hs_check")
    {
        println!(
            "cargo::warning=vectorscan's header does not match what sfclab declares ({e}): the dpi NF uses aho-corasick"
        );
        return;
    }
    let dirs: Vec<PathBuf> = std::env::var_os("VECTORSCAN_LIB")
        .map(|d| vec![PathBuf::from(d)])
        .unwrap_or_else(|| {
            ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]
                .iter()
                .map(PathBuf::from)
                .collect()
        });
    // Linked statically where the archive is there, so the binary runs where the
    // library is not installed (it is C++: its runtime comes along); dynamically
    // otherwise.
    // A fully static build (`-C target-feature=+crt-static`, the container image's)
    // takes the C++ runtime's archive too: a shared libstdc++ in a static executable
    // does not run.
    let crt_static = std::env::var("CARGO_CFG_TARGET_FEATURE").is_ok_and(|f| f.split(',').any(|f| f == "crt-static"));
    match dirs.iter().find(|d| d.join("libhs.a").exists()) {
        Some(dir) => {
            println!("cargo::rustc-link-search=native={}", dir.display());
            println!("cargo::rustc-link-lib=static=hs");
            if crt_static {
                let Some(cxx) = archive_of(&cc::Build::new(), "libstdc++.a") else {
                    println!(
                        "cargo::warning=a static build needs libstdc++.a for vectorscan, which the C compiler does not know: the dpi NF uses aho-corasick"
                    );
                    return;
                };
                println!("cargo::rustc-link-search=native={}", cxx.display());
                println!("cargo::rustc-link-lib=static=stdc++");
            } else {
                println!("cargo::rustc-link-lib=dylib=stdc++");
            }
            println!("cargo::rustc-link-lib=m");
        }
        None if crt_static => {
            println!(
                "cargo::warning=a static build needs libhs.a, which is not installed: the dpi NF uses aho-corasick"
            );
            return;
        }
        None => println!("cargo::rustc-link-lib=hs"),
    }
    println!("cargo::rustc-cfg=vectorscan");
}

/// The directory of the archive `name` the C compiler links with, where it has one.
fn archive_of(build: &cc::Build, name: &str) -> Option<PathBuf> {
    let out = build
        .get_compiler()
        .to_command()
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // Without it the compiler prints the bare name back.
    path.is_absolute().then(|| path.parent().map(PathBuf::from)).flatten()
}
