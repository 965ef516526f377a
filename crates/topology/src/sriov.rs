//! A real NIC's embedded switch: SR-IOV virtual functions of physical functions, handed
//! to the hops of a chain (seed 000's NIC-switched chains, seed 001's PVP/PVVP) in
//! place of the emulated NIC's macvlans.
//!
//! The NIC is described by four interfaces: the physical function whose VFs the hops
//! receive and send on (`pf`), the one whose VF the last hop sends on (`pf-out`, the
//! same or the NIC's other port), and the tester's two ports, cabled to them
//! (`tester-out` to `pf`, `tester-in` to `pf-out`'s wire). sfclab creates the VFs
//! (`sriov_numvfs`), gives each its address through its PF, moves them and the tester's
//! ports into the run's namespaces, and puts everything back as it was when the run
//! ends: names, addresses, the namespace, the number of VFs (see [`crate::Topology`]'s
//! restorations, which `sfclab cleanup` also replays after a SIGKILL).

use crate::command::TopologyError;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The interfaces of a machine's SR-IOV NIC and the tester ports cabled to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SriovNic {
    /// The physical function whose virtual functions the hops get.
    pub pf: String,
    /// The physical function of the last hop's sending VF (often `pf`'s sibling port).
    pub pf_out: String,
    /// The tester's sending port, cabled to `pf`.
    pub tester_out: String,
    /// The tester's receiving port, on `pf_out`'s wire.
    pub tester_in: String,
}

impl FromStr for SriovNic {
    type Err = String;
    /// `pf=enp1s0f0,tester-out=enp2s0f0,tester-in=enp2s0f1[,pf-out=enp1s0f1]`.
    fn from_str(s: &str) -> Result<SriovNic, String> {
        let (mut pf, mut pf_out, mut tester_out, mut tester_in) = (None, None, None, None);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: write key=interface (pf, pf-out, tester-out, tester-in)"))?;
            let value = value.trim();
            if value.is_empty() || value.len() > 15 || value.contains(['/', ' ']) {
                return Err(format!(
                    "`{part}`: `{value}` is not an interface name (1 to 15 bytes, no `/` or space)"
                ));
            }
            let slot = match key.trim() {
                "pf" => &mut pf,
                "pf-out" | "pf_out" => &mut pf_out,
                "tester-out" | "tester_out" => &mut tester_out,
                "tester-in" | "tester_in" => &mut tester_in,
                other => {
                    return Err(format!(
                        "`{other}` is not a key of an SR-IOV NIC: write pf, pf-out, tester-out, tester-in"
                    ));
                }
            };
            if slot.replace(value.to_string()).is_some() {
                return Err(format!("`{}` is given twice", key.trim()));
            }
        }
        let need = |v: Option<String>, key: &str| {
            v.ok_or_else(|| format!("`{key}=` is missing (an SR-IOV NIC needs pf, tester-out and tester-in)"))
        };
        let pf = need(pf, "pf")?;
        let nic = SriovNic {
            pf_out: pf_out.unwrap_or_else(|| pf.clone()),
            pf,
            tester_out: need(tester_out, "tester-out")?,
            tester_in: need(tester_in, "tester-in")?,
        };
        if nic.tester_out == nic.tester_in {
            return Err(
                "tester-out and tester-in must be two ports: the tester sends on one and receives on the other".into(),
            );
        }
        for tester in [&nic.tester_out, &nic.tester_in] {
            if *tester == nic.pf || *tester == nic.pf_out {
                return Err(format!(
                    "`{tester}` is both a tester port and a physical function: the tester's ports are cabled to the NIC, not on it"
                ));
            }
        }
        Ok(nic)
    }
}

impl std::fmt::Display for SriovNic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pf={},pf-out={},tester-out={},tester-in={}",
            self.pf, self.pf_out, self.tester_out, self.tester_in
        )
    }
}

impl SriovNic {
    /// How many VFs each physical function needs for `hops` hops: every hop receives on
    /// a VF of `pf` and sends on another (the last one's on `pf_out`).
    pub fn vfs_needed(&self, hops: usize) -> Vec<(String, u32)> {
        let hops = hops.max(1) as u32;
        if self.pf == self.pf_out {
            vec![(self.pf.clone(), 2 * hops)]
        } else {
            vec![(self.pf.clone(), 2 * hops - 1), (self.pf_out.clone(), 1)]
        }
    }
}

/// The machine's SR-IOV interfaces as sysfs shows them (`/sys` in use; a directory of
/// the same shape in tests).
pub struct Sysfs {
    root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Sysfs {
        Sysfs::at("/sys")
    }
}

impl Sysfs {
    pub fn at(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    fn device(&self, pf: &str) -> PathBuf {
        self.root.join("class/net").join(pf).join("device")
    }

    fn read(path: &Path) -> Result<String, TopologyError> {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| TopologyError::Command {
                command: format!("read {}", path.display()),
                reason: e.to_string(),
            })
    }

    /// Whether `interface` exists on this machine (in the namespace sfclab runs in).
    pub fn has_interface(&self, interface: &str) -> bool {
        self.root.join("class/net").join(interface).exists()
    }

    /// The hardware address of `interface` (`aa:bb:..`), if it exists.
    pub fn address_of(&self, interface: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join("class/net").join(interface).join("address"))
            .ok()
            .map(|a| a.trim().to_string())
    }

    /// Interfaces that are SR-IOV physical functions, with the VFs each can have.
    pub fn physical_functions(&self) -> Vec<(String, u32)> {
        let Ok(entries) = std::fs::read_dir(self.root.join("class/net")) else {
            return Vec::new();
        };
        let mut found: Vec<(String, u32)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let total = self.total_vfs(&name).ok()?;
                Some((name, total))
            })
            .collect();
        found.sort();
        found
    }

    /// How many VFs `pf` can have (`sriov_totalvfs`), or why it cannot have any.
    pub fn total_vfs(&self, pf: &str) -> Result<u32, TopologyError> {
        if !self.has_interface(pf) {
            return Err(TopologyError::Sriov(format!(
                "`{pf}`: no such interface on this machine"
            )));
        }
        let path = self.device(pf).join("sriov_totalvfs");
        if !path.exists() {
            return Err(TopologyError::Sriov(format!(
                "`{pf}` is not an SR-IOV physical function (its device has no sriov_totalvfs)"
            )));
        }
        Self::read(&path)?
            .parse()
            .map_err(|e| TopologyError::Sriov(format!("`{pf}`: sriov_totalvfs is not a number: {e}")))
    }

    /// How many VFs `pf` has now.
    pub fn num_vfs(&self, pf: &str) -> Result<u32, TopologyError> {
        let path = self.device(pf).join("sriov_numvfs");
        Self::read(&path)?
            .parse()
            .map_err(|e| TopologyError::Sriov(format!("`{pf}`: sriov_numvfs is not a number: {e}")))
    }

    /// Gives `pf` exactly `count` VFs. The kernel refuses changing a non-zero number to
    /// another one: it goes through 0, which removes the VFs there were.
    pub fn set_num_vfs(&self, pf: &str, count: u32) -> Result<(), TopologyError> {
        let now = self.num_vfs(pf)?;
        if now == count {
            return Ok(());
        }
        let path = self.device(pf).join("sriov_numvfs");
        let write = |n: u32| {
            std::fs::write(&path, n.to_string())
                .map_err(|e| TopologyError::Sriov(format!("`{pf}`: writing {n} to {}: {e}", path.display())))
        };
        if now != 0 {
            write(0)?;
        }
        if count != 0 {
            write(count)?;
        }
        Ok(())
    }

    /// The network interface of each of `pf`'s first `count` VFs (`virtfn<i>/net/*`).
    pub fn vf_interfaces(&self, pf: &str, count: u32) -> Result<Vec<String>, TopologyError> {
        (0..count)
            .map(|i| {
                let dir = self.device(pf).join(format!("virtfn{i}/net"));
                let mut names: Vec<String> = std::fs::read_dir(&dir)
                    .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                    .unwrap_or_default();
                names.sort();
                names.into_iter().next().ok_or_else(|| {
                    TopologyError::Sriov(format!(
                        "VF {i} of `{pf}` has no network interface ({} is empty): is the VF driver (iavf, ixgbevf, mlx5_core, ...) loaded and not bound to vfio?",
                        dir.display()
                    ))
                })
            })
            .collect()
    }

    /// Checks that `nic` can give `hops` hops their VFs: every interface exists, the
    /// PFs are SR-IOV functions with enough VFs, and have none in use now (sfclab does
    /// not take VFs someone else made).
    pub fn check(&self, nic: &SriovNic, hops: usize) -> Result<(), TopologyError> {
        for port in [&nic.tester_out, &nic.tester_in] {
            if !self.has_interface(port) {
                return Err(TopologyError::Sriov(format!(
                    "tester port `{port}`: no such interface on this machine"
                )));
            }
        }
        for (pf, needed) in nic.vfs_needed(hops) {
            let total = self.total_vfs(&pf)?;
            if needed > total {
                return Err(TopologyError::Sriov(format!(
                    "`{pf}` can have {total} VFs; {hops} hop(s) need {needed} (two per hop: one to receive, one to send)"
                )));
            }
            let now = self.num_vfs(&pf)?;
            if now != 0 {
                return Err(TopologyError::Sriov(format!(
                    "`{pf}` has {now} VFs already: sfclab makes its own and removes them after; set sriov_numvfs to 0 first if they are free"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic() -> SriovNic {
        "pf=enp1s0f0,tester-out=enp2s0f0,tester-in=enp2s0f1".parse().unwrap()
    }

    /// A sysfs of one PF `enp1s0f0` with `total` possible VFs, `vfs` of them made with
    /// interfaces `enp1s0f0v<i>`, and the tester's ports.
    fn fake_sysfs(total: u32, vfs: u32) -> (tempfile::TempDir, Sysfs) {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("class/net");
        let device = net.join("enp1s0f0/device");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("sriov_totalvfs"), format!("{total}\n")).unwrap();
        std::fs::write(device.join("sriov_numvfs"), format!("{vfs}\n")).unwrap();
        for i in 0..vfs {
            std::fs::create_dir_all(device.join(format!("virtfn{i}/net/enp1s0f0v{i}"))).unwrap();
        }
        for port in ["enp2s0f0", "enp2s0f1", "lo"] {
            std::fs::create_dir_all(net.join(port)).unwrap();
        }
        let sysfs = Sysfs::at(dir.path());
        (dir, sysfs)
    }

    #[test]
    fn a_nic_is_read_by_key_and_pf_out_defaults_to_pf() {
        let n = nic();
        assert_eq!((n.pf.as_str(), n.pf_out.as_str()), ("enp1s0f0", "enp1s0f0"));
        assert_eq!(n.to_string().parse::<SriovNic>().unwrap(), n);
        let two: SriovNic = "pf=a,pf-out=b,tester-out=c,tester-in=d".parse().unwrap();
        assert_eq!(two.pf_out, "b");
    }

    #[test]
    fn a_bad_nic_is_refused_with_the_reason() {
        let err = |s: &str| s.parse::<SriovNic>().unwrap_err();
        assert!(err("tester-out=a,tester-in=b").contains("`pf=` is missing"));
        assert!(err("pf=a,tester-out=b,tester-in=b").contains("two ports"));
        assert!(err("pf=a,tester-out=a,tester-in=b").contains("both a tester port and a physical function"));
        assert!(err("pf=a,vf=b").contains("`vf` is not a key"));
        assert!(err("pf=a,pf=b").contains("given twice"));
        assert!(err("pf=waytoolonginterfacename,tester-out=b,tester-in=c").contains("not an interface name"));
        assert!(err("pf").contains("key=interface"));
    }

    #[test]
    fn every_hop_takes_two_vfs_the_last_sending_on_pf_out() {
        assert_eq!(nic().vfs_needed(3), vec![("enp1s0f0".to_string(), 6)]);
        let two: SriovNic = "pf=a,pf-out=b,tester-out=c,tester-in=d".parse().unwrap();
        assert_eq!(two.vfs_needed(3), vec![("a".to_string(), 5), ("b".to_string(), 1)]);
    }

    #[test]
    fn physical_functions_and_their_capacity_are_found() {
        let (_dir, sysfs) = fake_sysfs(8, 0);
        assert_eq!(sysfs.physical_functions(), vec![("enp1s0f0".to_string(), 8)]);
        assert_eq!(sysfs.total_vfs("enp1s0f0").unwrap(), 8);
        let not = sysfs.total_vfs("enp2s0f0").unwrap_err().to_string();
        assert!(not.contains("not an SR-IOV physical function"), "{not}");
        assert!(
            sysfs
                .total_vfs("eth9")
                .unwrap_err()
                .to_string()
                .contains("no such interface")
        );
    }

    #[test]
    fn the_check_refuses_too_few_vfs_vfs_in_use_and_missing_ports() {
        let (_dir, sysfs) = fake_sysfs(4, 0);
        sysfs.check(&nic(), 2).unwrap();
        let e = sysfs.check(&nic(), 3).unwrap_err().to_string();
        assert!(e.contains("can have 4 VFs; 3 hop(s) need 6"), "{e}");
        let absent: SriovNic = "pf=enp1s0f0,tester-out=enp9s0,tester-in=enp2s0f1".parse().unwrap();
        assert!(
            sysfs
                .check(&absent, 1)
                .unwrap_err()
                .to_string()
                .contains("tester port `enp9s0`")
        );
        let (_dir, busy) = fake_sysfs(4, 2);
        assert!(
            busy.check(&nic(), 1)
                .unwrap_err()
                .to_string()
                .contains("has 2 VFs already")
        );
    }

    #[test]
    fn the_number_of_vfs_goes_through_zero_and_vf_interfaces_are_named() {
        let (dir, sysfs) = fake_sysfs(8, 2);
        assert_eq!(
            sysfs.vf_interfaces("enp1s0f0", 2).unwrap(),
            vec!["enp1s0f0v0", "enp1s0f0v1"]
        );
        let missing = sysfs.vf_interfaces("enp1s0f0", 3).unwrap_err().to_string();
        assert!(
            missing.contains("VF 2 of `enp1s0f0` has no network interface"),
            "{missing}"
        );
        sysfs.set_num_vfs("enp1s0f0", 4).unwrap();
        assert_eq!(sysfs.num_vfs("enp1s0f0").unwrap(), 4);
        sysfs.set_num_vfs("enp1s0f0", 0).unwrap();
        let written = std::fs::read_to_string(dir.path().join("class/net/enp1s0f0/device/sriov_numvfs")).unwrap();
        assert_eq!(written, "0");
    }
}
