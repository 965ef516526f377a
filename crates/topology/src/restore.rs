//! What a run changed outside its own namespaces (a machine's interfaces moved into
//! them, SR-IOV VFs made), written down before each change so the run's teardown, its
//! signal handlers and `sfclab cleanup` after a SIGKILL can all put it back. Removing
//! the run's namespaces removes everything else it built; these would survive it.
//!
//! The journal is a text file, `<temp>/sfclab-<pid>-<n>.restore`, a line per change.

use crate::command;
use crate::sriov::Sysfs;
use crate::{PREFIX, TopologyError, owner_pid};
use std::path::PathBuf;

/// One change and what undoing it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Restoration {
    /// The machine's interface `original` (address `mac`) is now `name` in `namespace`.
    Taken {
        namespace: String,
        name: String,
        original: String,
        mac: String,
    },
    /// Physical function `pf` had `vfs` virtual functions.
    NumVfs { pf: String, vfs: u32 },
}

impl Restoration {
    fn line(&self) -> String {
        match self {
            Restoration::Taken {
                namespace,
                name,
                original,
                mac,
            } => format!("taken {namespace} {name} {original} {mac}"),
            Restoration::NumVfs { pf, vfs } => format!("numvfs {pf} {vfs}"),
        }
    }

    fn parse(line: &str) -> Option<Restoration> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["taken", namespace, name, original, mac] => Some(Restoration::Taken {
                namespace: namespace.to_string(),
                name: name.to_string(),
                original: original.to_string(),
                mac: mac.to_string(),
            }),
            ["numvfs", pf, vfs] => Some(Restoration::NumVfs {
                pf: pf.to_string(),
                vfs: vfs.parse().ok()?,
            }),
            _ => None,
        }
    }

    /// Puts this change back.
    fn undo(&self) -> Result<(), String> {
        match self {
            Restoration::Taken {
                namespace,
                name,
                original,
                mac,
            } => {
                let in_namespace = std::path::Path::new("/run/netns").join(namespace).exists();
                let here = |args: &[&str]| command::ip(args).map(drop).map_err(|e| e.to_string());
                if in_namespace {
                    let there = |args: &[&str]| {
                        let mut all = vec!["-n", namespace.as_str()];
                        all.extend_from_slice(args);
                        here(&all)
                    };
                    there(&["link", "set", "dev", name, "down"])?;
                    if name != original {
                        there(&["link", "set", "dev", name, "name", original])?;
                    }
                    // Back to the namespace this process (and the machine's interfaces) is in.
                    there(&["link", "set", "dev", original, "netns", &std::process::id().to_string()])?;
                } else if name != original && Sysfs::default().has_interface(name) {
                    // The namespace went first: the kernel returned the interface as it was named there.
                    here(&["link", "set", "dev", name, "name", original])?;
                }
                match Sysfs::default().address_of(original) {
                    Some(now) if now == *mac => Ok(()),
                    _ => here(&["link", "set", "dev", original, "address", mac]),
                }
            }
            Restoration::NumVfs { pf, vfs } => Sysfs::default().set_num_vfs(pf, *vfs).map_err(|e| e.to_string()),
        }
    }
}

/// A run's changes, in order, kept on disk as they are made.
pub(crate) struct Journal {
    path: PathBuf,
    entries: Vec<Restoration>,
}

fn journal_path(run: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{run}.restore"))
}

impl Journal {
    /// The (empty) journal of run `sfclab-<pid>-<n>`; no file until something is recorded.
    pub(crate) fn new(run: &str) -> Journal {
        Journal {
            path: journal_path(run),
            entries: Vec::new(),
        }
    }

    fn save(&self) -> Result<(), TopologyError> {
        let text: String = self.entries.iter().map(|e| e.line() + "\n").collect();
        std::fs::write(&self.path, text).map_err(|e| TopologyError::Command {
            command: format!("write {}", self.path.display()),
            reason: e.to_string(),
        })
    }

    /// Writes `change` down; call before making it.
    pub(crate) fn record(&mut self, change: Restoration) -> Result<(), TopologyError> {
        self.entries.push(change);
        self.save()
    }

    /// The interface taken into `namespace` as `from` is now called `to` there.
    pub(crate) fn renamed(&mut self, namespace: &str, from: &str, to: &str) -> Result<(), TopologyError> {
        for entry in self.entries.iter_mut().rev() {
            if let Restoration::Taken {
                namespace: ns, name, ..
            } = entry
                && ns == namespace
                && name == from
            {
                *name = to.to_string();
                break;
            }
        }
        self.save()
    }

    /// Undoes every change, last first; what could not be undone, in words.
    pub(crate) fn undo(&mut self) -> Vec<String> {
        let failures = undo_in_order(&self.entries);
        self.entries.clear();
        let _ = std::fs::remove_file(&self.path);
        failures
    }
}

fn undo_in_order(entries: &[Restoration]) -> Vec<String> {
    entries
        .iter()
        .rev()
        .filter_map(|e| e.undo().err().map(|why| format!("undoing `{}`: {why}", e.line())))
        .collect()
}

/// Every journal file left on the machine, with its run's pid.
fn journals() -> Vec<(String, u32, PathBuf)> {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let run = file.strip_suffix(".restore")?.to_string();
            if !run.starts_with(PREFIX) {
                return None;
            }
            let pid = owner_pid(&run)?;
            Some((run, pid, e.path()))
        })
        .collect()
}

fn undo_file(path: &PathBuf) -> Vec<String> {
    let entries: Vec<Restoration> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(Restoration::parse)
        .collect();
    let failures = undo_in_order(&entries);
    let _ = std::fs::remove_file(path);
    failures
}

/// Undoes the journals of process `pid` (a signal handler's last act).
pub(crate) fn undo_all_of(pid: u32) {
    for (_, owner, path) in journals() {
        if owner == pid {
            undo_file(&path);
        }
    }
}

/// Undoes the journals of runs `select` picks by pid; each run with what failed.
pub(crate) fn undo_left_over(select: impl Fn(u32) -> bool) -> Vec<(String, Vec<String>)> {
    journals()
        .into_iter()
        .filter(|(_, pid, _)| select(*pid))
        .map(|(run, _, path)| (run, undo_file(&path)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_reads_back_as_written() {
        for change in [
            Restoration::Taken {
                namespace: "sfclab-1-0-tester".into(),
                name: "t-out".into(),
                original: "enp2s0f0".into(),
                mac: "3c:fd:fe:00:00:01".into(),
            },
            Restoration::NumVfs {
                pf: "enp1s0f0".into(),
                vfs: 0,
            },
        ] {
            assert_eq!(Restoration::parse(&change.line()), Some(change));
        }
        assert_eq!(Restoration::parse("taken too few"), None);
        assert_eq!(Restoration::parse("numvfs pf many"), None);
    }

    #[test]
    fn the_journal_is_on_disk_from_the_first_change_and_follows_renames() {
        let run = format!("{PREFIX}{}-journal-test", std::process::id());
        let mut journal = Journal::new(&run);
        assert!(!journal.path.exists());
        journal
            .record(Restoration::Taken {
                namespace: "ns".into(),
                name: "sfclabgone0".into(),
                original: "sfclabgone0".into(),
                mac: "3c:fd:fe:00:00:01".into(),
            })
            .unwrap();
        journal.renamed("ns", "sfclabgone0", "t-out").unwrap();
        let text = std::fs::read_to_string(&journal.path).unwrap();
        assert_eq!(text, "taken ns t-out sfclabgone0 3c:fd:fe:00:00:01\n");
        assert!(
            journals()
                .iter()
                .any(|(r, pid, _)| *r == run && *pid == std::process::id())
        );
        // Nothing to undo on this machine (no namespace `ns`, no interface `t-out`) but
        // the address, which fails for want of the interface: said, and the file goes.
        let failures = journal.undo();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("undoing `taken ns t-out"), "{failures:?}");
        assert!(!journal.path.exists());
    }
}
