//! Builds the ipsec-mb shim where the library is installed (its header in the usual
//! place, or `IPSEC_MB_INCLUDE`), and says so with `cfg(ipsec_mb)`; without it the
//! crate is ring alone. `SFCLAB_NO_IPSEC_MB=1` builds without it on purpose.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ipsec_mb)");
    println!("cargo::rerun-if-changed=shim/gcm.c");
    let lib = sfclab_syslib::Library {
        header: "intel-ipsec-mb.h",
        include_var: "IPSEC_MB_INCLUDE",
        lib_var: "IPSEC_MB_LIB",
        disable_var: "SFCLAB_NO_IPSEC_MB",
        archive: "libIPSec_MB.a",
        without: "ESP uses ring's AES-GCM",
        package: "libipsec-mb-dev",
    };
    let Some(found) = lib.find() else { return };
    if let Err(e) = cc::Build::new()
        .file("shim/gcm.c")
        .include(&found.include)
        .flag_if_supported("-fstack-protector-strong")
        .try_compile("sfclab_gcm")
    {
        lib.warn(&format!("the ipsec-mb shim did not build ({e})"));
        return;
    }
    // Linked statically where the archive is there, so the binary runs where the
    // library is not installed; dynamically otherwise.
    match &found.archive_dir {
        Some(dir) => {
            println!("cargo::rustc-link-search=native={}", dir.display());
            println!("cargo::rustc-link-lib=static=IPSec_MB");
        }
        None => println!("cargo::rustc-link-lib=IPSec_MB"),
    }
    println!("cargo::rustc-cfg=ipsec_mb");
}
