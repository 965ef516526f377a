//! What joins two pods of a chain on a cluster (`--link`): memif sockets in a directory
//! both pods mount (pods of one node), or a secondary interface Multus gives each pod
//! from a NetworkAttachmentDefinition (macvlan, an SR-IOV virtual function, a host's
//! device, an AF_XDP device plugin's pool).

use std::fmt::{self, Display};
use std::str::FromStr;

pub use sfclab_topology::MacvlanMode;

/// How the links of a chain are made on the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// Shared memory between pods of one node: a memif socket per link in a host
    /// directory both pods mount (sfclab's local runs join processes the same way).
    Memif,
    /// A macvlan of the node's interface `master` for each end: the node's NIC (or the
    /// switch behind it, `vepa`) delivers by destination MAC.
    Macvlan { master: String, mode: MacvlanMode },
    /// An SR-IOV virtual function for each end, from the SR-IOV device plugin's
    /// resource (`intel.com/sriov_netdevice`): the NIC's embedded switch delivers by MAC.
    Sriov { resource: String },
    /// A device of the node moved into the pod for each end (`host-device`), named in
    /// order: link 0's sending end, its receiving end, link 1's, ... (cables between
    /// them are the operator's).
    HostDevice { devices: Vec<String> },
    /// A netdev of the AF_XDP device plugin's pool (`afxdp/<pool>`) for each end.
    Afxdp { resource: String },
}

impl LinkKind {
    /// The links deliver by destination MAC (a switch between the ends): each sender
    /// must address the receiving end, whose address Multus sets.
    pub fn switched(&self) -> bool {
        matches!(
            self,
            LinkKind::Macvlan { .. } | LinkKind::Sriov { .. } | LinkKind::Afxdp { .. }
        )
    }

    /// The device plugin resource each end takes from the node, if any.
    pub fn resource(&self) -> Option<&str> {
        match self {
            LinkKind::Sriov { resource } | LinkKind::Afxdp { resource } => Some(resource),
            _ => None,
        }
    }
}

impl FromStr for LinkKind {
    type Err = String;

    /// `memif`, `macvlan:master=IF[,mode=bridge|vepa]`, `sriov:resource=NAME`,
    /// `host-device:IF,IF,...`, `afxdp:pool=NAME` (the resource `afxdp/NAME`).
    fn from_str(s: &str) -> Result<LinkKind, String> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        let keys = || -> Result<Vec<(&str, &str)>, String> {
            rest.split(',')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    p.split_once('=')
                        .ok_or_else(|| format!("`{p}` in `{s}`: write KEY=VALUE"))
                })
                .collect()
        };
        let only = |allowed: &[&str]| -> Result<Vec<(&str, &str)>, String> {
            let keys = keys()?;
            match keys.iter().find(|(k, _)| !allowed.contains(k)) {
                Some((k, _)) => Err(format!("`{k}` in `{s}`: {kind} takes {}", allowed.join(", "))),
                None => Ok(keys),
            }
        };
        let needed = |keys: &[(&str, &str)], key: &str| -> Result<String, String> {
            match keys.iter().find(|(k, _)| *k == key) {
                Some((_, v)) if !v.is_empty() => Ok(v.to_string()),
                _ => Err(format!("`{s}`: {kind} needs `{key}=`")),
            }
        };
        match kind {
            "memif" if rest.is_empty() => Ok(LinkKind::Memif),
            "macvlan" => {
                let keys = only(&["master", "mode"])?;
                let mode = match keys.iter().find(|(k, _)| *k == "mode").map(|(_, v)| *v) {
                    None | Some("bridge") => MacvlanMode::Bridge,
                    Some("vepa") => MacvlanMode::Vepa,
                    Some(other) => return Err(format!("`mode={other}` in `{s}`: write bridge or vepa")),
                };
                Ok(LinkKind::Macvlan {
                    master: needed(&keys, "master")?,
                    mode,
                })
            }
            "sriov" => Ok(LinkKind::Sriov {
                resource: needed(&only(&["resource"])?, "resource")?,
            }),
            "afxdp" => Ok(LinkKind::Afxdp {
                resource: format!("afxdp/{}", needed(&only(&["pool"])?, "pool")?),
            }),
            "host-device" => {
                let devices: Vec<String> = rest.split(',').filter(|d| !d.is_empty()).map(String::from).collect();
                if devices.is_empty() {
                    return Err(format!(
                        "`{s}`: host-device needs the devices, one per link end: host-device:IF,IF,..."
                    ));
                }
                Ok(LinkKind::HostDevice { devices })
            }
            _ => Err(format!(
                "`{s}` is not a kind of link: write memif, macvlan:master=IF[,mode=bridge|vepa], sriov:resource=NAME, host-device:IF,IF,... or afxdp:pool=NAME"
            )),
        }
    }
}

impl Display for LinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkKind::Memif => f.write_str("memif"),
            LinkKind::Macvlan { master, mode } => write!(f, "macvlan:master={master},mode={mode}"),
            LinkKind::Sriov { resource } => write!(f, "sriov:resource={resource}"),
            LinkKind::HostDevice { devices } => write!(f, "host-device:{}", devices.join(",")),
            LinkKind::Afxdp { resource } => {
                write!(f, "afxdp:pool={}", resource.strip_prefix("afxdp/").unwrap_or(resource))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_as_written() {
        for text in [
            "memif",
            "macvlan:master=eth1,mode=bridge",
            "macvlan:master=ens1f0,mode=vepa",
            "sriov:resource=intel.com/sriov_netdevice",
            "host-device:ens1f0,ens1f1",
            "afxdp:pool=myPool",
        ] {
            let kind: LinkKind = text.parse().unwrap();
            assert_eq!(kind.to_string(), text);
        }
        assert_eq!(
            "macvlan:master=eth1".parse::<LinkKind>().unwrap(),
            LinkKind::Macvlan {
                master: "eth1".into(),
                mode: MacvlanMode::Bridge
            }
        );
        assert_eq!("afxdp:pool=p".parse::<LinkKind>().unwrap().resource(), Some("afxdp/p"));
    }

    #[test]
    fn a_bad_link_says_what_to_write() {
        let err = |s: &str| s.parse::<LinkKind>().unwrap_err();
        assert!(err("macvlan").contains("needs `master=`"), "{}", err("macvlan"));
        assert!(err("macvlan:master=eth1,mode=passthru").contains("bridge or vepa"));
        assert!(err("macvlan:master=eth1,vlan=3").contains("`vlan`"));
        assert!(err("sriov:eth1").contains("KEY=VALUE"));
        assert!(err("host-device:").contains("one per link end"));
        assert!(err("memif:x").contains("not a kind of link"));
        assert!(err("vxlan").contains("not a kind of link"));
    }
}
