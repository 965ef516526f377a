//! Sets `cfg(one_core)` when the machine building (and so testing) this crate lets it
//! use a single core, so that multi-core tests are reported as ignored with the reason
//! instead of passing without running.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(one_core)");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        println!("cargo:rustc-cfg=one_core");
    }
}
