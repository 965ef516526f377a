//! The README and the guide a newcomer reads: every relative link leads to a file of the
//! repository, every page of the guide is in its SUMMARY.md and every page listed
//! exists, and the README stays an introduction. (The commands in their `sh` blocks are
//! run by `cli.rs` and, as root, `wired.rs`.)

use std::path::{Path, PathBuf};

mod common;

/// The relative link targets of a Markdown page (`[text](target)`, anchors cut).
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            links.push(target.to_string());
        }
    }
    links
}

fn markdown_in(dir: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

#[test]
fn every_relative_link_of_the_docs_leads_to_a_file() {
    let repo = common::repo();
    let mut pages = vec![repo.join("README.md")];
    pages.extend(markdown_in(&repo.join("docs")));
    pages.extend(markdown_in(&repo.join("docs/guide/src")));
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for link in relative_links(&text) {
            let target = page.parent().unwrap().join(&link);
            if !target.exists() {
                broken.push(format!("{}: {link}", page.strip_prefix(&repo).unwrap().display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing: {broken:#?}");
}

#[test]
fn the_guide_lists_every_page_it_has() {
    let repo = common::repo();
    let listed: Vec<PathBuf> = common::documented_pages().into_iter().skip(1).collect();
    for page in &listed {
        assert!(
            page.exists(),
            "SUMMARY.md lists {} which does not exist",
            page.display()
        );
    }
    for page in markdown_in(&repo.join("docs/guide/src")) {
        let summary = page.file_name().is_some_and(|n| n == "SUMMARY.md");
        assert!(
            summary || listed.contains(&page),
            "{} is not in SUMMARY.md",
            page.display()
        );
    }
}

#[test]
fn the_readme_is_an_introduction_with_its_two_commands() {
    let readme = std::fs::read_to_string(common::repo().join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 150,
        "the README has {} lines",
        readme.lines().count()
    );
    assert!(readme.contains("cargo run --release -p sfclab -- run"));
    assert!(readme.contains("cargo test --workspace"));
    for concept in ["**NF**", "**Chain**", "**Runtime**", "**Chaining**", "**Ports**"] {
        assert!(readme.contains(concept), "the README explains {concept}");
    }
}

#[test]
fn links_are_read_as_a_reader_follows_them() {
    let text = "see [a](x/b.md) and [c](https://e.org/d) or [f](g.md#h) [i](#j)";
    assert_eq!(relative_links(text), ["x/b.md", "g.md"]);
}

/// Every `sfclab` command in the README's and the guide's `sh` blocks takes the flags
/// and values it is shown with (parsed as the program parses them, nothing run; the
/// `run` examples are also run by `cli.rs` and `wired.rs`), and every example file it
/// names exists.
#[test]
fn every_documented_command_parses() {
    let repo = common::repo();
    let mut checked = 0;
    for page in common::documented_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in text.split("```sh").skip(1).filter_map(|s| s.split("```").next()) {
            for line in block.lines() {
                let line = line.strip_prefix("sudo ").unwrap_or(line);
                let Some(rest) = line.strip_prefix("sfclab ") else {
                    continue;
                };
                let args = common::shell_words(rest);
                for file in args.iter().filter(|a| a.starts_with("examples/")) {
                    assert!(repo.join(file).exists(), "{}: {line}: no {file}", page.display());
                }
                let o = std::process::Command::new(common::sfclab_bin())
                    .args(&args)
                    .env("SFCLAB_PARSE_ONLY", "1")
                    .output()
                    .unwrap();
                assert!(o.status.success(), "{}: {line}: {}", page.display(), common::stderr(&o));
                checked += 1;
            }
        }
    }
    assert!(checked >= 60, "{checked} commands checked");
}
