//! The container image: built from the static binary with buildah, reproducible, read
//! back from its OCI layout, its one layer unpacked, the binary in it run.

use std::path::PathBuf;
use std::process::Command;

use sfclab_deploy::image;

/// This test program is linked dynamically (it has a program interpreter).
#[test]
fn a_dynamic_binary_is_told_apart_from_a_static_one() {
    let me = std::env::current_exe().unwrap();
    assert!(!image::is_static(&me).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let not_elf = dir.path().join("script");
    std::fs::write(&not_elf, "#!/bin/sh\n").unwrap();
    assert!(image::is_static(&not_elf).unwrap_err().contains("not a 64-bit"));
    let e = image::build(&me, "localhost/sfclab:test", &dir.path().join("oci")).unwrap_err();
    assert!(e.contains("linked dynamically"), "{e}");
}

#[test]
#[ignore = "needs buildah (Debian), root and a static sfclab in SFCLAB_STATIC_BINARY; CI builds one"]
fn the_image_is_the_static_binary_alone_reproducibly_and_it_runs() {
    let binary = PathBuf::from(
        std::env::var("SFCLAB_STATIC_BINARY")
            .expect("SFCLAB_STATIC_BINARY: RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target x86_64-unknown-linux-gnu -p sfclab"),
    );
    assert!(image::is_static(&binary).unwrap(), "{} is not static", binary.display());
    let dir = tempfile::tempdir().unwrap();
    let tag = "localhost/sfclab:ci-test";
    let first = image::build(&binary, tag, &dir.path().join("a")).unwrap();
    let second = image::build(&binary, tag, &dir.path().join("b")).unwrap();
    assert_eq!(first.digest, second.digest, "the same binary gives the same image");
    let layout = image::read_layout(&first.layout).unwrap();
    assert_eq!(layout.entrypoint, ["/usr/bin/sfclab"]);
    let [layer] = layout.layers.as_slice() else {
        panic!("one layer expected: {:?}", layout.layers)
    };
    let listing = Command::new("tar").arg("-tzf").arg(layer).output().unwrap();
    let mut files: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(|l| l.trim_end_matches('/').to_string())
        .collect();
    files.sort();
    assert_eq!(files, ["usr", "usr/bin", "usr/bin/sfclab"], "nothing but the binary");
    let root = dir.path().join("unpacked");
    std::fs::create_dir(&root).unwrap();
    let unpacked = Command::new("tar")
        .arg("-xzf")
        .arg(layer)
        .arg("-C")
        .arg(&root)
        .status()
        .unwrap();
    assert!(unpacked.success());
    let version = Command::new(root.join("usr/bin/sfclab"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success());
    let said = String::from_utf8_lossy(&version.stdout);
    assert!(
        said.starts_with(&format!("sfclab {}", env!("CARGO_PKG_VERSION"))),
        "{said}"
    );
    let _ = Command::new("buildah").args(["rmi", tag]).output();
}
