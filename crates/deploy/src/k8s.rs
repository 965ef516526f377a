//! A chain as Kubernetes objects: a Namespace; a ConfigMap of every hop's chain file
//! (the ones the local runs start their hop processes with, [`HopPlan`]) and of the
//! files its NFs read; per hop a Pod running the sfclab image as the NF between its
//! two ends; per link a NetworkAttachmentDefinition, or a host directory for memif
//! sockets shared by the pods of one node; the tester as a Job whose log is its JSON
//! result. Everything carries the labels `kubectl delete -l` removes it by.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, ExecAction,
    HostPathVolumeSource, Namespace, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec,
    Probe, ResourceRequirements, SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Serialize;
use sfclab_experiment::{HopPlan, remote_hops};

use crate::links::LinkKind;
use crate::nad::{self, CniConfig, NetworkAttachmentDefinition, NetworkSelection, Plugin};

/// Where the image keeps the sfclab binary.
pub const BINARY: &str = "/usr/bin/sfclab";
/// Where a pod finds its chain files (the ConfigMap).
const CONFIG_DIR: &str = "/etc/sfclab";
/// A pod's own state (its ready file).
const STATE_DIR: &str = "/run/sfclab";
/// The memif sockets of a node's pods (a host directory).
pub(crate) const MEMIF_DIR: &str = "/run/sfclab/memif";
/// The label every object of one deployment carries (`kubectl delete -l`).
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
pub(crate) const ROLE_LABEL: &str = "app.kubernetes.io/component";
const HOST_LABEL: &str = "sfclab.io/host";
/// Node label a host is placed by when no node is named for it.
const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// What `sfclab deploy k8s` is told beside the chain.
#[derive(Clone, Debug)]
pub struct DeployOptions {
    /// The deployment's name: its Namespace and the instance label (default
    /// `sfclab-<chain name>`).
    pub name: Option<String>,
    /// The container image holding sfclab at [`BINARY`].
    pub image: String,
    /// How links between pods are made.
    pub link: LinkKind,
    /// Node names per host (from 1): a host's pods run there.
    pub nodes: BTreeMap<usize, String>,
    /// Memory each pod is given (its request and limit).
    pub memory: String,
}

impl Default for DeployOptions {
    fn default() -> DeployOptions {
        DeployOptions {
            name: None,
            image: format!("localhost/sfclab:{}", env!("CARGO_PKG_VERSION")),
            link: LinkKind::Memif,
            nodes: BTreeMap::new(),
            memory: "1Gi".into(),
        }
    }
}

/// An object of the manifest set.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Object {
    Namespace(Box<Namespace>),
    ConfigMap(Box<ConfigMap>),
    Network(Box<NetworkAttachmentDefinition>),
    Pod(Box<Pod>),
    Service(Box<Service>),
    Job(Box<Job>),
}

/// Why a chain cannot be deployed as asked.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The chain file itself (file, line, key and reason), read as a chain of hops each
    /// in a process of its own, as each will run in a pod.
    #[error("{0}\n  (deploy k8s runs each hop in a pod of its own, as `--chaining memif` runs each in a process here)")]
    Chain(#[from] sfclab_experiment::ChainFileError),
    /// What the chain needs and the cluster's options do not give: the flag or key at
    /// fault (`--link`, `--node`, `--name`, ...) and why.
    #[error("{key}: {reason}")]
    Setting { key: String, reason: String },
}

pub(crate) fn error(key: &str, reason: impl Into<String>) -> DeployError {
    DeployError::Setting {
        key: key.to_string(),
        reason: reason.into(),
    }
}

/// The manifests of one deployment: the chain's objects (applied first, the hops
/// reporting ready) and the tester's Job (applied once they are).
#[derive(Clone, Debug)]
pub struct Manifests {
    pub name: String,
    pub chain: Vec<Object>,
    pub tester: Vec<Object>,
}

impl Manifests {
    /// The chain's objects as YAML documents.
    pub fn chain_yaml(&self) -> String {
        serde_saphyr::to_string_multiple(&self.chain).expect("Kubernetes objects serialize")
    }

    /// The tester's Job as a YAML document.
    pub fn tester_yaml(&self) -> String {
        serde_saphyr::to_string_multiple(&self.tester).expect("Kubernetes objects serialize")
    }

    /// Every object, the tester's last.
    pub fn objects(&self) -> impl Iterator<Item = &Object> {
        self.chain.iter().chain(&self.tester)
    }
}

/// One chain to deploy: its hops, where each place runs, how it is tested.
pub struct ChainLayout<'a> {
    /// The hops' chain files and flags (what the local runs use).
    pub plan: &'a HopPlan,
    /// Host (from 1) of each place: the tester's sender, hop 1..n, the tester's receiver.
    pub hosts: Vec<usize>,
    /// memif's wait mode for the hops' memif ends (`,wait=...` as the local runs give).
    pub memif_wait: String,
    /// Files the NFs read, by the path their chain files name: shipped in the ConfigMap.
    pub files: BTreeMap<String, String>,
    /// Links between places on one host are memif whatever `--link` says (a
    /// scenario's: `--link` makes the links between hosts).
    pub memif_within_host: bool,
    /// The chain's own set of MAC addresses on switched links (0 for a chain file; a
    /// scenario's chain k its k-th), so that chains on one switch stay apart.
    pub addresses: usize,
}

/// A link between two places: what each end opens.
struct Ends {
    /// The sender's `--ports` endpoint and the receiver's.
    sender: String,
    receiver: String,
    /// The network each end attaches (Multus), with the end's interface and address.
    sender_net: Option<NetworkSelection>,
    receiver_net: Option<NetworkSelection>,
}

/// The objects of `chain` deployed as `options` say, tested by the chain file
/// `tester_file` (its name in the ConfigMap and text: the traffic and run settings).
pub fn chain(
    chain: &ChainLayout<'_>,
    tester_file: (&str, &str),
    chain_name: &str,
    options: &DeployOptions,
) -> Result<Manifests, DeployError> {
    let name = deployment_name(chain_name, options)?;
    let n = chain.plan.hops();
    if chain.hosts.len() != n + 2 {
        return Err(error(
            "hosts",
            "one host per place: the tester's sender, each hop, its receiver",
        ));
    }
    if let LinkKind::HostDevice { devices } = &options.link
        && devices.len() != 2 * (n + 1)
    {
        return Err(error(
            "--link",
            format!(
                "host-device names {} devices; the chain's {} links have {} ends, one device each",
                devices.len(),
                n + 1,
                2 * (n + 1)
            ),
        ));
    }
    check_nodes(options, &chain.hosts)?;
    let base = Base {
        name: &name,
        options,
        ends: std::cell::Cell::new(0),
    };
    let mut objects = vec![base.namespace()];
    let links = base.links(chain, "", &mut objects)?;
    // The ConfigMap: every hop's chain file, the tester's, the NFs' files.
    let mut data = base.hop_files(chain, "");
    data.insert(tester_file.0.to_string(), tester_file.1.to_string());
    objects.push(base.config_map(data));
    base.hop_pods(chain, "", &links, &Control::Once, &mut objects);
    // The tester: sends into link 0, receives from link n.
    let ports = format!("tester:{},{}", links[0].sender, links[n].receiver);
    let args: Vec<String> = [
        "run",
        &format!("{CONFIG_DIR}/{}", tester_file.0),
        "--ports",
        &ports,
        "--json",
    ]
    .map(String::from)
    .into();
    let nets: Vec<&NetworkSelection> = [&links[0].sender_net, &links[n].receiver_net]
        .into_iter()
        .flatten()
        .collect();
    let uses_memif = links.iter().any(|l| l.sender_net.is_none() || l.receiver_net.is_none());
    let tester = base.tester_job(args, &nets, (chain.hosts[0], &chain.hosts), uses_memif);
    Ok(Manifests {
        name,
        chain: objects,
        tester: vec![tester],
    })
}

/// The objects of a scenario's chains (each instance's hops, standby ones too, as its
/// own pods) with its tester a Job running `sfclab scenario` attached to them: the
/// scenario's own tester (every chain from one thread, both directions, repetitions,
/// searches), each VNF serving run after run and reporting each
/// ([`sfclab_experiment::remote_hops`]). On one host the pods share a node and memif,
/// the VNFs told through control files beside the sockets; on several (each chain's
/// places' hosts in its layout) each host's pods share a node, the links between hosts
/// are `--link`'s, and the VNFs are told over TCP at their names under a headless
/// Service.
pub fn scenario(
    chains: &[(String, ChainLayout<'_>)],
    scenario_file: (&str, &str),
    chain_files: &BTreeMap<String, String>,
    scenario_name: &str,
    options: &DeployOptions,
) -> Result<Manifests, DeployError> {
    let name = deployment_name(scenario_name, options)?;
    let mut hosts: Vec<usize> = chains.iter().flat_map(|(_, c)| c.hosts.iter().copied()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let several = hosts.len() > 1;
    if !several && options.link != LinkKind::Memif {
        return Err(error(
            "--link",
            format!(
                "a scenario on one host deploys on one node joined by memif; `{}` makes the links between hosts (`hosts:`)",
                options.link
            ),
        ));
    }
    if let LinkKind::HostDevice { devices } = &options.link {
        let crossings: usize = chains
            .iter()
            .map(|(_, c)| c.hosts.windows(2).filter(|w| w[0] != w[1]).count())
            .sum();
        if devices.len() != 2 * crossings {
            return Err(error(
                "--link",
                format!(
                    "host-device names {} devices; the chains' {crossings} links between hosts have {} ends, one device each",
                    devices.len(),
                    2 * crossings
                ),
            ));
        }
    }
    if options.link.switched() && chains.len() > 1 && chains.iter().any(|(_, c)| c.hosts[0] != c.hosts[1]) {
        return Err(error(
            "--link",
            "the tester's frames into the first VNF all carry one destination address, so over a switch only one chain's first VNF may sit on another host: place the first VNFs on host 1, or give `host-device:`",
        ));
    }
    check_nodes(options, &hosts)?;
    let base = Base {
        name: &name,
        options,
        ends: std::cell::Cell::new(0),
    };
    let mut objects = vec![base.namespace()];
    if several {
        objects.push(base.control_service());
    }
    let mut links = Vec::with_capacity(chains.len());
    let mut data = BTreeMap::new();
    for (label, chain) in chains {
        links.push(base.links(chain, label, &mut objects)?);
        data.extend(base.hop_files(chain, label));
    }
    data.insert(scenario_file.0.to_string(), scenario_file.1.to_string());
    data.extend(chain_files.iter().map(|(k, v)| (k.clone(), v.clone())));
    objects.push(base.config_map(data));
    let control = if several {
        Control::Tcp(CONTROL_PORT)
    } else {
        Control::Files(MEMIF_DIR)
    };
    for ((label, chain), links) in chains.iter().zip(&links) {
        base.hop_pods(chain, label, links, &control, &mut objects);
    }
    let mut args: Vec<String> = [
        "scenario",
        &format!("{CONFIG_DIR}/{}", scenario_file.0),
        "--attach",
        MEMIF_DIR,
    ]
    .map(String::from)
    .into();
    if several {
        args.extend(["--attach-control".to_string(), format!("tcp:{}", control_address())]);
    }
    args.push("--json".into());
    // The tester's ends of links that cross into its host or out of it.
    let nets: Vec<&NetworkSelection> = chains
        .iter()
        .zip(&links)
        .flat_map(|((_, chain), links)| {
            let n = chain.plan.hops();
            [&links[0].sender_net, &links[n].receiver_net]
        })
        .flatten()
        .collect();
    let tester_host = chains.first().map_or(1, |(_, c)| c.hosts[0]);
    let tester = base.tester_job(args, &nets, (tester_host, &hosts), true);
    Ok(Manifests {
        name,
        chain: objects,
        tester: vec![tester],
    })
}

/// How a hop's pod is told to end a run (a scenario's VNF serves run after run).
enum Control {
    /// Not at all: it runs until its pod is deleted (a chain file's hop).
    Once,
    /// By control files in this directory (memif's, shared with the tester).
    Files(&'static str),
    /// Over TCP on this port, at its name under the control Service.
    Tcp(u16),
}

/// The port a scenario's VNFs on several hosts are told on.
const CONTROL_PORT: u16 = 7000;
/// The headless Service naming them (`c1-hop-2.vnfs`).
const CONTROL_SERVICE: &str = "vnfs";

/// Where the tester reaches each VNF's control port, `{hop}` its name.
pub(crate) fn control_address() -> String {
    format!("{{hop}}.{CONTROL_SERVICE}:{CONTROL_PORT}")
}

/// The deployment's name (`--name`, or `sfclab-<name>`), checked with the pods' memory.
fn deployment_name(of: &str, options: &DeployOptions) -> Result<String, DeployError> {
    let name = match &options.name {
        Some(n) => n.clone(),
        None => format!("sfclab-{}", dns_label(of)),
    };
    if !is_dns_label(&name) {
        return Err(error(
            "--name",
            format!(
                "`{name}` is not a Kubernetes name: lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit"
            ),
        ));
    }
    if !is_quantity(&options.memory) {
        return Err(error(
            "--memory",
            format!(
                "`{}` is not a Kubernetes quantity: write e.g. 512Mi or 2Gi",
                options.memory
            ),
        ));
    }
    Ok(name)
}

/// Every host `--node` places holds a place of the deployment.
fn check_nodes(options: &DeployOptions, hosts: &[usize]) -> Result<(), DeployError> {
    for (&host, node) in &options.nodes {
        if !hosts.contains(&host) {
            return Err(error(
                "--node",
                format!("host {host} (`{node}`) runs no place of the chain"),
            ));
        }
    }
    Ok(())
}

/// `name` within chain `label` of several (a scenario's `c1`), or alone.
fn within(label: &str, name: &str) -> String {
    if label.is_empty() {
        name.to_string()
    } else {
        format!("{label}-{name}")
    }
}

/// What every object of one deployment shares.
struct Base<'a> {
    name: &'a str,
    options: &'a DeployOptions,
    /// Link ends given a network so far (host devices are taken in this order).
    ends: std::cell::Cell<usize>,
}

impl Base<'_> {
    /// The deployment's Namespace.
    fn namespace(&self) -> Object {
        let mut namespace = self.meta(self.name, "namespace", None);
        // Pod Security Admission's `baseline` refuses the capabilities AF_XDP needs and the
        // host directory memif's sockets share; the pods stay unprivileged all the same.
        namespace
            .labels
            .get_or_insert_default()
            .insert("pod-security.kubernetes.io/enforce".into(), "privileged".into());
        Object::Namespace(Box::new(Namespace {
            metadata: namespace,
            ..Default::default()
        }))
    }

    /// The links of `chain` (link k from place k to place k+1), their networks added
    /// to `objects`.
    fn links(&self, chain: &ChainLayout<'_>, label: &str, objects: &mut Vec<Object>) -> Result<Vec<Ends>, DeployError> {
        let n = chain.plan.hops();
        (0..=n)
            .map(|k| {
                let (from, to) = (chain.hosts[k], chain.hosts[k + 1]);
                if *self.link_kind(chain, k) == LinkKind::Memif && from != to {
                    return Err(error(
                        "--link",
                        format!(
                            "link {k} crosses from host {from} to host {to}, and memif joins pods of one node: give `--link macvlan:master=IF`, `sriov:resource=NAME`, `host-device:...` or `afxdp:pool=NAME`"
                        ),
                    ));
                }
                self.link(k, n, label, chain, objects)
            })
            .collect()
    }

    /// How link `k` of `chain` is made.
    fn link_kind(&self, chain: &ChainLayout<'_>, k: usize) -> &LinkKind {
        if chain.memif_within_host && chain.hosts[k] == chain.hosts[k + 1] {
            &LinkKind::Memif
        } else {
            &self.options.link
        }
    }

    /// The ConfigMap's entries of `chain`: each hop's chain file (addressing the next
    /// hop over a switch, its files pointed at their copies) and the NFs' files.
    fn hop_files(&self, chain: &ChainLayout<'_>, label: &str) -> BTreeMap<String, String> {
        let n = chain.plan.hops();
        let mut data = BTreeMap::new();
        for i in 0..n {
            let mut file = chain.plan.chain_file(i).1.clone();
            // Hop i sends on link i+1.
            if self.link_kind(chain, i + 1).switched() {
                address_next(&mut file, i, n, chain.addresses);
            }
            ship_files(&mut file, &chain.files);
            data.insert(
                within(label, &hop_file(i)),
                serde_json::to_string_pretty(&file).expect("JSON"),
            );
        }
        for (k, (path, text)) in chain.files.iter().enumerate() {
            data.insert(shipped_name(k, path), text.clone());
        }
        data
    }

    /// The headless Service that names every VNF pod (`c1-hop-2.vnfs`), so that a tester
    /// on another node reaches their control ports; its addresses published whether or
    /// not a pod is ready (a VNF is not between two runs).
    fn control_service(&self) -> Object {
        let selector = BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), "sfclab".to_string()),
            (INSTANCE_LABEL.to_string(), self.name.to_string()),
            (ROLE_LABEL.to_string(), "hop".to_string()),
        ]);
        Object::Service(Box::new(Service {
            metadata: self.meta(CONTROL_SERVICE, "control", None),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".into()),
                publish_not_ready_addresses: Some(true),
                selector: Some(selector),
                ports: Some(vec![ServicePort {
                    name: Some("control".into()),
                    port: i32::from(CONTROL_PORT),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    /// The ConfigMap of every chain file and file the pods read.
    fn config_map(&self, data: BTreeMap<String, String>) -> Object {
        Object::ConfigMap(Box::new(ConfigMap {
            metadata: self.meta("chain", "config", None),
            data: Some(data),
            ..Default::default()
        }))
    }

    /// A Pod per hop of `chain` on its `links`, told to end its runs as `control` says
    /// (by control files: it says it forwards by its ready file beside them).
    fn hop_pods(
        &self,
        chain: &ChainLayout<'_>,
        label: &str,
        links: &[Ends],
        control: &Control,
        objects: &mut Vec<Object>,
    ) {
        let n = chain.plan.hops();
        let uses_memif = links.iter().any(|l| l.sender_net.is_none() || l.receiver_net.is_none());
        for i in 0..n {
            let (input, output) = (&links[i], &links[i + 1]);
            let ports = if input.receiver_net.is_none() && output.sender_net.is_none() {
                format!("{},{}", input.receiver, output.sender)
            } else {
                format!("dut:{},{}", input.receiver, output.sender)
            };
            let ready = match control {
                Control::Files(dir) => format!("{dir}/{}", remote_hops::ready_file(label, i)),
                Control::Once | Control::Tcp(_) => format!("{STATE_DIR}/ready"),
            };
            let mut args =
                chain
                    .plan
                    .arguments(&format!("{CONFIG_DIR}/{}", within(label, &hop_file(i))), &ports, &ready);
            match control {
                Control::Once => {}
                Control::Files(dir) => args.extend([
                    "--control-files".to_string(),
                    format!("{dir}/{}", remote_hops::control_prefix(label, i)),
                ]),
                Control::Tcp(port) => args.extend(["--control-port".to_string(), port.to_string()]),
            }
            let nets: Vec<&NetworkSelection> = [&input.receiver_net, &output.sender_net]
                .into_iter()
                .flatten()
                .collect();
            let mut spec = self.pod_spec(
                args,
                &nets,
                (chain.hosts[i + 1], &chain.hosts),
                uses_memif,
                Some(&ready),
            );
            if let Control::Tcp(_) = control {
                // Its name the tester reaches it by: `<hostname>.<subdomain>`.
                spec.hostname = Some(remote_hops::hop_name(label, i));
                spec.subdomain = Some(CONTROL_SERVICE.into());
            }
            let mut metadata = self.meta(&remote_hops::hop_name(label, i), "hop", Some(chain.hosts[i + 1]));
            annotate_networks(&mut metadata, &nets);
            objects.push(Object::Pod(Box::new(Pod {
                metadata,
                spec: Some(spec),
                ..Default::default()
            })));
        }
    }

    /// The tester's Job running `args` on `host` of `hosts`, attached to `nets`.
    fn tester_job(
        &self,
        args: Vec<String>,
        nets: &[&NetworkSelection],
        (host, hosts): (usize, &[usize]),
        uses_memif: bool,
    ) -> Object {
        let spec = self.pod_spec(args, nets, (host, hosts), uses_memif, None);
        let mut template_meta = self.meta("tester", "tester", Some(host));
        template_meta.name = None;
        annotate_networks(&mut template_meta, nets);
        Object::Job(Box::new(Job {
            metadata: self.meta("tester", "tester", Some(host)),
            spec: Some(JobSpec {
                // One measurement: a failed tester is a result to read, not to retry.
                backoff_limit: Some(0),
                template: PodTemplateSpec {
                    metadata: Some(template_meta),
                    spec: Some(spec),
                },
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    fn meta(&self, object: &str, role: &str, host: Option<usize>) -> ObjectMeta {
        let mut labels = BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), "sfclab".to_string()),
            (INSTANCE_LABEL.to_string(), self.name.to_string()),
            (ROLE_LABEL.to_string(), role.to_string()),
        ]);
        if let Some(h) = host {
            labels.insert(HOST_LABEL.to_string(), h.to_string());
        }
        ObjectMeta {
            name: Some(object.to_string()),
            // The Namespace itself has none.
            namespace: (role != "namespace").then(|| self.name.to_string()),
            labels: Some(labels),
            ..Default::default()
        }
    }

    /// Link `k` of a chain of `n` hops made as `kind`: its NetworkAttachmentDefinitions
    /// (one per link, or per end for host devices) added to `objects`.
    fn link(
        &self,
        k: usize,
        n: usize,
        label: &str,
        chain: &ChainLayout<'_>,
        objects: &mut Vec<Object>,
    ) -> Result<Ends, DeployError> {
        let kind = self.link_kind(chain, k);
        // Interface names inside the pods, as the local runs name them (a scenario's
        // tester has one pair per chain: `c1o`, `c1i`).
        let sender_if = match k {
            0 if label.is_empty() => "t-out".to_string(),
            0 => format!("{label}o"),
            _ => "out".to_string(),
        };
        let receiver_if = match k {
            _ if k == n && label.is_empty() => "t-in".to_string(),
            _ if k == n => format!("{label}i"),
            _ => "in".to_string(),
        };
        if *kind == LinkKind::Memif {
            let socket = format!("{MEMIF_DIR}/{}", remote_hops::link_socket(label, k));
            // Between hops the receiver serves, as here; the tester, applied once the
            // hops are ready, connects to both of its links (a hop is ready once its
            // ports are open, which a client's are only once its server listens).
            let (sender_role, receiver_role) = if k == n {
                ("server", "client")
            } else {
                ("client", "server")
            };
            return Ok(Ends {
                // The tester polls (it has its own core); the hops wait as told.
                sender: format!(
                    "memif:{socket},role={sender_role}{}",
                    if k == 0 { "" } else { &chain.memif_wait }
                ),
                receiver: format!(
                    "memif:{socket},role={receiver_role}{}",
                    if k == n { "" } else { &chain.memif_wait }
                ),
                sender_net: None,
                receiver_net: None,
            });
        }
        let mut network = |end_label: &str| -> String {
            // Host devices are taken in order, one per end.
            let end = self.ends.get();
            self.ends.set(end + 1);
            let plugin = Plugin::of(kind, end).expect("a network for every end: host devices counted before");
            let net = within(label, &format!("link-{k}{end_label}"));
            let mut metadata = self.meta(&net, "link", None);
            if let Some(resource) = kind.resource() {
                metadata.annotations = Some(BTreeMap::from([(
                    nad::RESOURCE_ANNOTATION.to_string(),
                    resource.to_string(),
                )]));
            }
            let config = CniConfig {
                cni_version: nad::CNI_VERSION,
                name: net.clone(),
                plugin,
            };
            objects.push(Object::Network(Box::new(NetworkAttachmentDefinition::new(
                metadata, &config,
            ))));
            net
        };
        let (sender_net, receiver_net) = match kind {
            LinkKind::HostDevice { .. } => (network("-out"), network("-in")),
            _ => {
                let net = network("");
                (net.clone(), net)
            }
        };
        let mac = |m: [u8; 6]| kind.switched().then(|| mac_text(m));
        Ok(Ends {
            sender: sender_if.clone(),
            receiver: receiver_if.clone(),
            sender_net: Some(NetworkSelection {
                name: sender_net,
                interface: sender_if,
                mac: mac(sending_mac(k, chain.addresses)),
            }),
            receiver_net: Some(NetworkSelection {
                name: receiver_net,
                interface: receiver_if,
                mac: mac(receiving_mac(k, n, chain.addresses)),
            }),
        })
    }

    /// A pod running `args` on host `host` of `hosts`, attached to `nets`: a hop (ready
    /// once its ports are open) or the tester.
    fn pod_spec(
        &self,
        args: Vec<String>,
        nets: &[&NetworkSelection],
        (host, hosts): (usize, &[usize]),
        uses_memif: bool,
        ready: Option<&str>,
    ) -> PodSpec {
        let hop = ready.is_some();
        let options = self.options;
        // Guaranteed QoS (requests equal limits, whole CPUs): the static CPU manager
        // gives the container a core of its own, as `--core` does here.
        let mut amounts = BTreeMap::from([
            ("cpu".to_string(), Quantity("1".into())),
            ("memory".to_string(), Quantity(options.memory.clone())),
        ]);
        if let Some(resource) = options.link.resource() {
            amounts.insert(resource.to_string(), Quantity(nets.len().to_string()));
        }
        let (mounts, volumes) = self.volumes(uses_memif);
        // What the ports need: AF_XDP loads its XDP program (BPF, NET_ADMIN), opens
        // XDP sockets (NET_RAW) and locks its UMEM (IPC_LOCK: beyond the default
        // memlock limit, which a Pod cannot raise); memif needs none of them.
        let capabilities: Vec<String> = if nets.is_empty() {
            Vec::new()
        } else {
            ["NET_ADMIN", "NET_RAW", "BPF", "IPC_LOCK"].map(String::from).into()
        };
        let container = Container {
            name: if hop { "nf".into() } else { "tester".into() },
            image: Some(options.image.clone()),
            image_pull_policy: Some("IfNotPresent".into()),
            command: Some(vec![BINARY.into()]),
            args: Some(args),
            resources: Some(ResourceRequirements {
                requests: Some(amounts.clone()),
                limits: Some(amounts),
                ..Default::default()
            }),
            security_context: Some(SecurityContext {
                privileged: Some(false),
                allow_privilege_escalation: Some(false),
                read_only_root_filesystem: Some(true),
                capabilities: Some(Capabilities {
                    add: (!capabilities.is_empty()).then_some(capabilities),
                    drop: Some(vec!["ALL".into()]),
                }),
                ..Default::default()
            }),
            // Ready once its ports are open (its ready file): the tester is applied then.
            readiness_probe: ready.map(|file| Probe {
                exec: Some(ExecAction {
                    command: Some(vec![BINARY.into(), "ready".into(), file.to_string()]),
                }),
                period_seconds: Some(1),
                ..Default::default()
            }),
            volume_mounts: Some(mounts),
            ..Default::default()
        };
        PodSpec {
            containers: vec![container],
            volumes: Some(volumes),
            // A hop that fails is a failed measurement, not one to restart in its middle.
            restart_policy: Some("Never".into()),
            node_selector: options
                .nodes
                .get(&host)
                .map(|node| BTreeMap::from([(HOSTNAME_KEY.to_string(), node.clone())])),
            affinity: Some(self.affinity(host, hosts)),
            // SIGTERM makes a hop print its report: give it the time to.
            termination_grace_period_seconds: Some(10),
            ..Default::default()
        }
    }

    /// The pod's volumes and where its container mounts them: the chain's ConfigMap, its
    /// state, a /tmp, and the host's memif socket directory when its links are memif.
    fn volumes(&self, uses_memif: bool) -> (Vec<VolumeMount>, Vec<Volume>) {
        let mut mounts = vec![
            VolumeMount {
                name: "config".into(),
                mount_path: CONFIG_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            },
            VolumeMount {
                name: "state".into(),
                mount_path: STATE_DIR.into(),
                ..Default::default()
            },
            // The image is the binary alone: no /tmp unless given one.
            VolumeMount {
                name: "tmp".into(),
                mount_path: "/tmp".into(),
                ..Default::default()
            },
        ];
        let mut volumes = vec![
            Volume {
                name: "config".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: "chain".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "state".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            },
            Volume {
                name: "tmp".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            },
        ];
        if uses_memif {
            mounts.push(VolumeMount {
                name: "memif".into(),
                mount_path: MEMIF_DIR.into(),
                ..Default::default()
            });
            volumes.push(Volume {
                name: "memif".into(),
                host_path: Some(HostPathVolumeSource {
                    path: format!("/run/sfclab/{}", self.name),
                    type_: Some("DirectoryOrCreate".into()),
                }),
                ..Default::default()
            });
        }
        (mounts, volumes)
    }

    /// The pods of one host on one node, those of different hosts on different nodes.
    fn affinity(&self, host: usize, hosts: &[usize]) -> Affinity {
        let term = |h: usize| PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([
                    (INSTANCE_LABEL.to_string(), self.name.to_string()),
                    (HOST_LABEL.to_string(), h.to_string()),
                ])),
                ..Default::default()
            }),
            topology_key: HOSTNAME_KEY.into(),
            ..Default::default()
        };
        let mut others: Vec<usize> = hosts.iter().copied().filter(|&h| h != host).collect();
        others.sort_unstable();
        others.dedup();
        Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![term(host)]),
                ..Default::default()
            }),
            pod_anti_affinity: (!others.is_empty()).then(|| PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(others.into_iter().map(term).collect()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// The pod's networks annotation (Multus), when it has any.
fn annotate_networks(metadata: &mut ObjectMeta, nets: &[&NetworkSelection]) {
    if nets.is_empty() {
        return;
    }
    metadata.annotations.get_or_insert_default().insert(
        nad::NETWORKS_ANNOTATION.to_string(),
        serde_json::to_string(nets).expect("JSON"),
    );
}

/// The ConfigMap key of hop `i`'s chain file.
fn hop_file(i: usize) -> String {
    format!("hop-{}.json", i + 1)
}

/// The ConfigMap key of the `k`th file an NF reads, at `path` here: its number and name
/// (two files of one name stay apart).
pub(crate) fn shipped_name(k: usize, path: &str) -> String {
    let base = std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{}-{base}", k + 1)
}

/// Calls `visit` on every file the NFs of a hop's chain file name.
pub(crate) fn each_file(file: &mut serde_json::Value, visit: &mut dyn FnMut(&mut String)) {
    let entries = file
        .get_mut("chain")
        .and_then(|c| c.as_array_mut())
        .into_iter()
        .flatten()
        // An entry is an NF, or a list of NFs one hop runs.
        .flat_map(|e| match e {
            serde_json::Value::Array(hop) => hop.iter_mut().collect::<Vec<_>>(),
            nf => vec![nf],
        });
    for entry in entries.filter_map(|e| e.as_object_mut()) {
        for (kind, settings) in entry.iter_mut() {
            if let Some(settings) = settings.as_object_mut() {
                sfclab_nf::NfSpec::visit_files(kind, settings, visit);
            }
        }
    }
}

/// Points every file setting of `file` at its copy in the ConfigMap (`files`, by path).
pub(crate) fn ship_files(file: &mut serde_json::Value, files: &BTreeMap<String, String>) {
    each_file(file, &mut |path| {
        if let Some(k) = files.keys().position(|p| p == path) {
            // Relative: read beside the chain file, in the ConfigMap's directory.
            *path = shipped_name(k, path);
        }
    });
}

/// Hop `i`'s chain file addressing what leaves it to the next hop's receiving end (the
/// last hop's to the tester's), from its own sending end, as the local NIC-switched
/// chains do: a hop that is one forwarder is set to; any other gets a `to-next`
/// forwarder after its NFs.
fn address_next(file: &mut serde_json::Value, i: usize, n: usize, addresses: usize) {
    // Hop i sends on link i+1.
    let settings = serde_json::json!({
        "dst_mac": mac_text(receiving_mac(i + 1, n, addresses)),
        "src_mac": mac_text(sending_mac(i + 1, addresses)),
    });
    let Some(chain) = file.get_mut("chain").and_then(|c| c.as_array_mut()) else {
        return;
    };
    if let [only] = chain.as_mut_slice()
        && let Some(forwarder) = only.get_mut("forwarder").and_then(|f| f.as_object_mut())
    {
        forwarder.extend(settings.as_object().expect("object").clone());
        return;
    }
    let mut to_next = settings;
    to_next["name"] = "to-next".into();
    chain.push(serde_json::json!({ "forwarder": to_next }));
    // A graph's ways out lead through it too (the last NF's default way already does).
    for line in file
        .get_mut("wiring")
        .and_then(|w| w.as_array_mut())
        .into_iter()
        .flatten()
    {
        if let Some(text) = line.as_str()
            && let Some((from, to)) = text.split_once("->")
            && to.trim() == "egress"
        {
            *line = format!("{} -> to-next", from.trim()).into();
        }
    }
}

/// The address of link `k`'s sending end over a switch, as the local NIC-switched
/// chains give it: the generator's source (the tester's, link 0), else hop k's sending
/// function; in the chain's own set (`addresses`).
fn sending_mac(k: usize, addresses: usize) -> [u8; 6] {
    match k {
        0 => sfclab_traffic::flows::SRC_MAC.0,
        _ => in_set(sfclab_topology::vf_out_mac(k - 1), addresses),
    }
}

/// The address of link `k`'s receiving end (of a chain of `n` hops): the generator's
/// destination (hop 1's), hop k+1's receiving function, or the tester's `t-in` (link
/// n); in the chain's own set (`addresses`) but for the generator's, which every
/// chain's frames carry.
fn receiving_mac(k: usize, n: usize, addresses: usize) -> [u8; 6] {
    match k {
        _ if k == n => in_set(sfclab_topology::TESTER_IN_MAC, addresses),
        0 => sfclab_traffic::flows::DST_MAC.0,
        _ => in_set(sfclab_topology::vf_in_mac(k), addresses),
    }
}

/// `mac` in address set `addresses` (set 0: itself): its second byte counts the set.
fn in_set(mut mac: [u8; 6], addresses: usize) -> [u8; 6] {
    mac[1] = mac[1].wrapping_add(addresses as u8);
    mac
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// `text` made a DNS label: lower case, other characters '-', at most 50 long.
pub fn dns_label(text: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let trimmed: String = mapped.trim_matches('-').chars().take(50).collect();
    let trimmed = trimmed.trim_end_matches('-').to_string();
    if trimmed.is_empty() { "chain".into() } else { trimmed }
}

/// A memory amount Kubernetes takes (`512Mi`, `2Gi`, `1e9`, `1500M`): a decimal number
/// and one of its suffixes, or none.
fn is_quantity(s: &str) -> bool {
    const SUFFIXES: [&str; 13] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", ""];
    SUFFIXES.iter().any(|suffix| {
        s.strip_suffix(suffix).is_some_and(|number| {
            let (whole, fraction) = number.split_once('.').unwrap_or((number, "0"));
            !whole.is_empty()
                && whole.bytes().all(|b| b.is_ascii_digit())
                && !fraction.is_empty()
                && fraction.bytes().all(|b| b.is_ascii_digit())
        })
    })
}

/// A name Kubernetes takes for a Namespace (RFC 1123 label).
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over a switch every frame a hop sends is addressed to the next hop: a graph's
    /// ways out lead through the addressing forwarder too, its ways within untouched.
    #[test]
    fn a_graphs_ways_out_are_addressed_to_the_next_hop() {
        let mut file = serde_json::json!({
            "chain": [{ "nsh-sff": { "name": "a" } }, { "firewall": { "name": "b" } }],
            "wiring": ["a.out -> egress", "a.fw -> b"],
        });
        address_next(&mut file, 0, 1, 2);
        assert_eq!(file["chain"][2]["forwarder"]["name"], "to-next");
        assert_eq!(
            file["chain"][2]["forwarder"]["dst_mac"],
            mac_text(in_set(sfclab_topology::TESTER_IN_MAC, 2))
        );
        assert_eq!(file["wiring"], serde_json::json!(["a.out -> to-next", "a.fw -> b"]));
    }

    #[test]
    fn memory_is_a_kubernetes_quantity() {
        for ok in ["1Gi", "512Mi", "1500M", "1000000000", "1.5Gi"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["1GB", "Gi", "", "1.Gi", "-1Gi", "1 Gi", "lots"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }
}
