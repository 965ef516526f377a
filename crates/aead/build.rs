//! Builds the ipsec-mb shim where the library is installed (its header in the usual
//! place, or `IPSEC_MB_INCLUDE`), and says so with `cfg(ipsec_mb)`; without it the
//! crate is ring alone. `SFCLAB_NO_IPSEC_MB=1` builds without it on purpose.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ipsec_mb)");
    println!("cargo::rerun-if-changed=shim/gcm.c");
    println!("cargo::rerun-if-env-changed=IPSEC_MB_INCLUDE");
    println!("cargo::rerun-if-env-changed=SFCLAB_NO_IPSEC_MB");
    if std::env::var_os("SFCLAB_NO_IPSEC_MB").is_some_and(|v| v != "0") {
        return;
    }
    let include = std::env::var_os("IPSEC_MB_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/include"));
    let header = include.join("intel-ipsec-mb.h");
    if !header.exists() {
        // A missing file would make cargo run this script (and rebuild every crate
        // above) on every build; the directory changes when the header is installed.
        println!("cargo::rerun-if-changed={}", include.display());
        println!(
            "cargo::warning=intel-ipsec-mb.h not found in {}: ESP uses ring's AES-GCM (apt-get install libipsec-mb-dev for Intel's)",
            include.display()
        );
        return;
    }
    println!("cargo::rerun-if-changed={}", header.display());
    if let Err(e) = cc::Build::new()
        .file("shim/gcm.c")
        .include(&include)
        .flag_if_supported("-fstack-protector-strong")
        .try_compile("sfclab_gcm")
    {
        println!("cargo::warning=the ipsec-mb shim did not build ({e}): ESP uses ring's AES-GCM");
        return;
    }
    // Linked statically where the archive is there, so the binary runs where the
    // library is not installed; dynamically otherwise.
    println!("cargo::rerun-if-env-changed=IPSEC_MB_LIB");
    let dirs: Vec<PathBuf> = std::env::var_os("IPSEC_MB_LIB")
        .map(|d| vec![PathBuf::from(d)])
        .unwrap_or_else(|| {
            ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]
                .iter()
                .map(PathBuf::from)
                .collect()
        });
    match dirs.iter().find(|d| d.join("libIPSec_MB.a").exists()) {
        Some(dir) => {
            println!("cargo::rustc-link-search=native={}", dir.display());
            println!("cargo::rustc-link-lib=static=IPSec_MB");
        }
        None => println!("cargo::rustc-link-lib=IPSec_MB"),
    }
    println!("cargo::rustc-cfg=ipsec_mb");
}
