//! The container image: the static sfclab binary alone, on `scratch`, built with
//! Debian's `buildah` (no daemon, no registry, offline) and written as an OCI layout
//! directory; reproducible (its creation time fixed, no history), so the same binary
//! gives the same image digest. Checked by reading the layout back: the manifest, the
//! configuration's entrypoint, and the binary unpacked from the one layer.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::k8s::BINARY;

/// What was built: the image's name, its manifest's digest, where the layout is.
#[derive(Clone, Debug)]
pub struct Image {
    pub tag: String,
    /// `sha256:...` of the image manifest (the same for the same binary).
    pub digest: String,
    /// The OCI layout directory (`index.json`, `blobs/sha256/...`).
    pub layout: PathBuf,
}

fn buildah(args: &[&str]) -> Result<String, String> {
    let out = Command::new("buildah")
        .args(args)
        .output()
        .map_err(|e| format!("buildah: {e} (Debian: apt-get install buildah)"))?;
    if !out.status.success() {
        return Err(format!(
            "buildah {}: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether `binary` is a static executable (it runs alone on `scratch`): an ELF file
/// without a program interpreter (`PT_INTERP`).
pub fn is_static(binary: &Path) -> Result<bool, String> {
    let bytes = std::fs::read(binary).map_err(|e| format!("{}: {e}", binary.display()))?;
    let word = |at: usize, len: usize| -> Option<u64> {
        let b = bytes.get(at..at + len)?;
        Some(b.iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x)))
    };
    if bytes.get(..4) != Some(b"\x7fELF") || bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err(format!("{}: not a 64-bit little-endian ELF file", binary.display()));
    }
    let (phoff, phentsize, phnum) = (
        word(0x20, 8).unwrap_or(0) as usize,
        word(0x36, 2).unwrap_or(0) as usize,
        word(0x38, 2).unwrap_or(0) as usize,
    );
    const PT_INTERP: u64 = 3;
    for i in 0..phnum {
        match word(phoff + i * phentsize, 4) {
            Some(PT_INTERP) => return Ok(false),
            Some(_) => {}
            None => return Err(format!("{}: its program headers are cut short", binary.display())),
        }
    }
    Ok(true)
}

/// Builds the image `tag` of `binary` (static) and writes it as an OCI layout in `out`.
pub fn build(binary: &Path, tag: &str, out: &Path) -> Result<Image, String> {
    if !is_static(binary)? {
        return Err(format!(
            "{} is linked dynamically: an image from scratch has no libraries; build it static (RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target x86_64-unknown-linux-gnu)",
            binary.display()
        ));
    }
    let container = buildah(&["from", "--quiet", "scratch"])?;
    let built = (|| {
        buildah(&[
            "copy",
            "--quiet",
            "--chmod",
            "0755",
            &container,
            &binary.display().to_string(),
            BINARY,
        ])?;
        buildah(&[
            "config",
            "--entrypoint",
            &format!("[\"{BINARY}\"]"),
            "--cmd",
            "[\"--help\"]",
            "--label",
            &format!("org.opencontainers.image.title=sfclab {}", env!("CARGO_PKG_VERSION")),
            "--label",
            "org.opencontainers.image.description=sfclab: build, run and measure service function chains",
            &container,
        ])?;
        // Fixed time, no history: the same binary gives the same digest.
        buildah(&[
            "commit",
            "--quiet",
            "--format",
            "oci",
            "--timestamp",
            "0",
            "--omit-history",
            &container,
            tag,
        ])
    })();
    let _ = buildah(&["rm", &container]);
    built?;
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    buildah(&["push", "--quiet", tag, &format!("oci:{}:{tag}", out.display())])?;
    let digest = read_layout(out)?.digest;
    Ok(Image {
        tag: tag.to_string(),
        digest,
        layout: out.to_path_buf(),
    })
}

/// An OCI layout read back: its one image's manifest digest, entrypoint and layers.
#[derive(Clone, Debug)]
pub struct Layout {
    pub digest: String,
    pub entrypoint: Vec<String>,
    /// The layers' blob files, bottom first.
    pub layers: Vec<PathBuf>,
}

/// Reads the OCI layout at `dir` (image-spec: `index.json` -> manifest -> config).
pub fn read_layout(dir: &Path) -> Result<Layout, String> {
    let json = |path: PathBuf| -> Result<serde_json::Value, String> {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let blob = |digest: &serde_json::Value| -> Result<PathBuf, String> {
        let d = digest.as_str().ok_or("a descriptor without a digest")?;
        let hex = d
            .strip_prefix("sha256:")
            .ok_or_else(|| format!("digest {d}: not sha256"))?;
        Ok(dir.join("blobs/sha256").join(hex))
    };
    let index = json(dir.join("index.json"))?;
    let manifests = index["manifests"].as_array().ok_or("index.json lists no manifests")?;
    let [descriptor] = manifests.as_slice() else {
        return Err(format!("index.json lists {} images; one expected", manifests.len()));
    };
    let manifest = json(blob(&descriptor["digest"])?)?;
    let config = json(blob(&manifest["config"]["digest"])?)?;
    let entrypoint = config["config"]["Entrypoint"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let layers = manifest["layers"]
        .as_array()
        .ok_or("the manifest lists no layers")?
        .iter()
        .map(|l| blob(&l["digest"]))
        .collect::<Result<_, _>>()?;
    Ok(Layout {
        digest: descriptor["digest"].as_str().unwrap_or_default().to_string(),
        entrypoint,
        layers,
    })
}
