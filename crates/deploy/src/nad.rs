//! Multus's NetworkAttachmentDefinition (`k8s.cni.cncf.io/v1`, the Network Plumbing
//! Working Group's multi-net spec): a custom resource, so not in `k8s-openapi`; a small
//! typed struct here, its CNI configuration typed too and written into `spec.config` as
//! JSON, as the spec asks.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use crate::links::LinkKind;

/// The annotation on a NetworkAttachmentDefinition naming the device plugin resource
/// its interfaces come from (SR-IOV, AF_XDP): Multus's resource injector and the
/// plugins read it.
pub const RESOURCE_ANNOTATION: &str = "k8s.v1.cni.cncf.io/resourceName";

/// The annotation on a Pod listing the networks it attaches to
/// ([`NetworkSelection`] elements, JSON).
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";

/// The CNI specification version of the configurations written.
pub const CNI_VERSION: &str = "1.0.0";

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAttachmentDefinition {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: ObjectMeta,
    pub spec: NadSpec,
}

#[derive(Clone, Debug, Serialize)]
pub struct NadSpec {
    /// The CNI configuration, JSON text.
    pub config: String,
}

impl NetworkAttachmentDefinition {
    pub fn new(metadata: ObjectMeta, config: &CniConfig) -> NetworkAttachmentDefinition {
        NetworkAttachmentDefinition {
            api_version: "k8s.cni.cncf.io/v1",
            kind: "NetworkAttachmentDefinition",
            metadata,
            spec: NadSpec {
                config: serde_json::to_string(config).expect("a CNI configuration serializes"),
            },
        }
    }
}

/// A CNI network configuration of one plugin.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CniConfig {
    pub cni_version: &'static str,
    pub name: String,
    #[serde(flatten)]
    pub plugin: Plugin,
}

/// The plugins sfclab's links use, with the keys it sets. None takes an address
/// (`ipam: {}`): sfclab's NFs see Ethernet frames, not the pod's IP stack.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Plugin {
    Macvlan {
        master: String,
        mode: String,
        /// Multus passes each pod's `mac` from its network selection.
        capabilities: Capabilities,
        ipam: Ipam,
    },
    Sriov {
        /// Let the VF's MAC be set (the chain addresses each next hop), and let it send
        /// frames whose source is not its own (the generator's flows).
        spoofchk: &'static str,
        trust: &'static str,
        capabilities: Capabilities,
        ipam: Ipam,
    },
    HostDevice {
        device: String,
        ipam: Ipam,
    },
    Afxdp {
        mode: &'static str,
        capabilities: Capabilities,
        ipam: Ipam,
    },
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Capabilities {
    pub mac: bool,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Ipam {}

impl Plugin {
    /// The plugin for one end of a link of `kind` (`end`: 0, 1, ... over the chain's
    /// link ends, for host devices named in that order).
    pub fn of(kind: &LinkKind, end: usize) -> Option<Plugin> {
        let mac = Capabilities { mac: true };
        Some(match kind {
            LinkKind::Memif => return None,
            LinkKind::Macvlan { master, mode } => Plugin::Macvlan {
                master: master.clone(),
                mode: mode.to_string(),
                capabilities: mac,
                ipam: Ipam {},
            },
            LinkKind::Sriov { .. } => Plugin::Sriov {
                spoofchk: "off",
                trust: "on",
                capabilities: mac,
                ipam: Ipam {},
            },
            LinkKind::HostDevice { devices } => Plugin::HostDevice {
                device: devices.get(end)?.clone(),
                ipam: Ipam {},
            },
            LinkKind::Afxdp { .. } => Plugin::Afxdp {
                mode: "primary",
                capabilities: mac,
                ipam: Ipam {},
            },
        })
    }
}

/// One element of a Pod's networks annotation: attach `name` as `interface`, with
/// `mac` when the link is switched.
#[derive(Clone, Debug, Serialize)]
pub struct NetworkSelection {
    pub name: String,
    pub interface: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cni_configuration_is_json_in_the_spec() {
        let kind: LinkKind = "macvlan:master=eth1,mode=vepa".parse().unwrap();
        let config = CniConfig {
            cni_version: CNI_VERSION,
            name: "link-0".into(),
            plugin: Plugin::of(&kind, 0).unwrap(),
        };
        let nad = NetworkAttachmentDefinition::new(ObjectMeta::default(), &config);
        let parsed: serde_json::Value = serde_json::from_str(&nad.spec.config).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({"cniVersion": "1.0.0", "name": "link-0", "type": "macvlan",
                "master": "eth1", "mode": "vepa", "capabilities": {"mac": true}, "ipam": {}})
        );
        let devices: LinkKind = "host-device:a,b".parse().unwrap();
        assert!(matches!(Plugin::of(&devices, 1), Some(Plugin::HostDevice { device, .. }) if device == "b"));
        assert!(Plugin::of(&devices, 2).is_none(), "no device named for a third end");
        assert!(Plugin::of(&LinkKind::Memif, 0).is_none());
    }
}
