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
    let lib = sfclab_syslib::Library {
        header: "hs/hs.h",
        include_var: "VECTORSCAN_INCLUDE",
        lib_var: "VECTORSCAN_LIB",
        disable_var: "SFCLAB_NO_VECTORSCAN",
        archive: "libhs.a",
        without: "the dpi NF uses aho-corasick",
        package: "libvectorscan-dev",
    };
    let Some(found) = lib.find() else { return };
    if let Err(e) = cc::Build::new()
        .file("shim/check.c")
        .include(&found.include)
        .try_compile("sfclab_hs_check")
    {
        lib.warn(&format!(
            "vectorscan's header does not match what sfclab declares ({e})"
        ));
        return;
    }
    // Linked statically where the archive is there, so the binary runs where the
    // library is not installed (it is C++: its runtime comes along); dynamically
    // otherwise. A fully static build (`-C target-feature=+crt-static`, the container
    // image's) takes the C++ runtime's archive too: a shared libstdc++ in a static
    // executable does not run.
    match &found.archive_dir {
        Some(dir) => {
            println!("cargo::rustc-link-search=native={}", dir.display());
            println!("cargo::rustc-link-lib=static=hs");
            if sfclab_syslib::crt_static() {
                let Some(cxx) = archive_of(&cc::Build::new(), "libstdc++.a") else {
                    lib.warn("a static build needs libstdc++.a, which the C compiler does not know");
                    return;
                };
                println!("cargo::rustc-link-search=native={}", cxx.display());
                println!("cargo::rustc-link-lib=static=stdc++");
            } else {
                println!("cargo::rustc-link-lib=dylib=stdc++");
            }
            println!("cargo::rustc-link-lib=m");
        }
        None if sfclab_syslib::crt_static() => {
            lib.warn("a static build needs libhs.a, which is not installed");
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
