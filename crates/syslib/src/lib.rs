//! For build scripts: an optional system library, found where it is installed (its
//! header in the usual place or a directory an environment variable names; its static
//! archive where one is), left out where it is not, with a cargo warning that says what
//! the build does instead and how to get it. `crates/aead` (ipsec-mb) and
//! `crates/vectorscan` (vectorscan) build this way: sfclab builds on a machine without
//! them and is faster on one with them.

use std::path::PathBuf;

/// An optional library as a build script looks for it.
pub struct Library {
    /// Its header, relative to the include directory (`intel-ipsec-mb.h`, `hs/hs.h`).
    pub header: &'static str,
    /// The variables naming its include directory and its library's, and the one that
    /// builds without it on purpose (`1`).
    pub include_var: &'static str,
    pub lib_var: &'static str,
    pub disable_var: &'static str,
    /// Its static archive's file name (`libhs.a`).
    pub archive: &'static str,
    /// What the build does without it, and the Debian package that brings it.
    pub without: &'static str,
    pub package: &'static str,
}

/// Where a found library is.
pub struct Found {
    pub include: PathBuf,
    /// The directory of its static archive, where it has one.
    pub archive_dir: Option<PathBuf>,
}

impl Library {
    /// Where it is installed; `None` (with a warning, unless disabled on purpose) where
    /// not. Tells cargo what to watch: the variables, the header, or the directory it
    /// will appear in (a missing file would make cargo run the script on every build).
    pub fn find(&self) -> Option<Found> {
        for var in [self.include_var, self.lib_var, self.disable_var] {
            println!("cargo::rerun-if-env-changed={var}");
        }
        if std::env::var_os(self.disable_var).is_some_and(|v| v != "0") {
            return None;
        }
        let include = std::env::var_os(self.include_var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/include"));
        let header = include.join(self.header);
        if !header.exists() {
            println!("cargo::rerun-if-changed={}", include.display());
            self.warn(&format!(
                "{} not found in {} (apt-get install {})",
                self.header,
                include.display(),
                self.package
            ));
            return None;
        }
        println!("cargo::rerun-if-changed={}", header.display());
        let dirs: Vec<PathBuf> = std::env::var_os(self.lib_var)
            .map(|d| vec![PathBuf::from(d)])
            .unwrap_or_else(|| {
                ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]
                    .iter()
                    .map(PathBuf::from)
                    .collect()
            });
        let archive_dir = dirs.into_iter().find(|d| d.join(self.archive).exists());
        Some(Found { include, archive_dir })
    }

    /// A cargo warning: `why`, then what the build does without the library.
    pub fn warn(&self, why: &str) {
        println!("cargo::warning={why}: {}", self.without);
    }
}

/// Whether the target is built fully static (`-C target-feature=+crt-static`).
pub fn crt_static() -> bool {
    std::env::var("CARGO_CFG_TARGET_FEATURE").is_ok_and(|f| f.split(',').any(|f| f == "crt-static"))
}
