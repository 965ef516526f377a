//! sfclab beyond one machine: a chain or a scenario deployed on Kubernetes (`sfclab
//! deploy k8s`).
//!
//! The objects are typed (`k8s-openapi` for Kubernetes' own, [`nad`] for Multus's
//! NetworkAttachmentDefinition), written as YAML; each hop's Pod runs the chain file and
//! flags the local runs start that hop's process with ([`sfclab_experiment::HopPlan`]),
//! so what is tested here is what runs there. [`image`] builds the container image.

pub mod cluster;
pub mod image;
pub mod k8s;
pub mod links;
pub mod nad;

use std::collections::BTreeMap;
use std::path::Path;

use sfclab_experiment::remote_hops::HopControl;
use sfclab_experiment::scenario::{Attachment, Scenario, ScenarioFlags};
use sfclab_experiment::settings::{ChainingSetting, PortsSetting};
use sfclab_experiment::{HopPlan, Settings, chain_file};

pub use k8s::{DeployError, DeployOptions, Manifests, Object};
pub use links::{LinkKind, MacvlanMode};

use k8s::{ChainLayout, MEMIF_DIR, error};

/// The settings of a chain file's `run:` the tester keeps: how long and how it measures.
/// The rest place the chain here (runtime, chaining, cores, ports), which the cluster's
/// pods do instead.
const TESTER_RUN_KEYS: &[&str] = &[
    "duration",
    "warmup",
    "count",
    "batch",
    "accounting",
    "verify",
    "pool_size",
];

/// The manifests of the file at `path`: a chain file's, or a scenario's (a file with no
/// `chain:` list of its own, or a chain file placed on hosts by its `hosts:`, which
/// runs as a scenario of one chain).
pub fn file(path: &Path, options: &DeployOptions) -> Result<Manifests, DeployError> {
    // Read once: the pods' files and the tester's come from the same text.
    let source = Source::read(path)?;
    match (source.value.get("chain"), source.value.get("hosts")) {
        (Some(serde_json::Value::Array(_)), None) => chain_file(&source, options),
        _ => scenario_file(source, options),
    }
}

/// The file to deploy: where it is, its text, its YAML.
struct Source<'a> {
    path: &'a Path,
    origin: String,
    text: String,
    value: serde_json::Value,
}

impl Source<'_> {
    fn read(path: &Path) -> Result<Source<'_>, DeployError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| error("file", format!("{origin}: {e}")))?;
        let value = serde_saphyr::from_str(&text).map_err(|e| error("file", format!("{origin}: {e}")))?;
        Ok(Source {
            path,
            origin,
            text,
            value,
        })
    }
}

/// The manifests of a chain file: each hop (an entry of `chain:`) a Pod on one node (a
/// graph's NFs, joined by `wiring`, one Pod), the tester a Job beside them.
fn chain_file(source: &Source<'_>, options: &DeployOptions) -> Result<Manifests, DeployError> {
    let (experiment, plan) = match source.value.get("wiring").filter(|w| !w.is_null()) {
        Some(wiring) => {
            // A graph with branches: one pod runs it whole, as `sfclab run FILE --ports dut:`.
            let experiment = chain_file::parse(&source.text, &source.origin, &Settings::default())?;
            let plan = HopPlan::whole(&experiment, wiring.clone());
            (experiment, plan)
        }
        None => {
            let overrides = Settings::default().chaining(ChainingSetting::Memif);
            let experiment = chain_file::parse(&source.text, &source.origin, &overrides)?;
            let plan = HopPlan::of(&experiment);
            (experiment, plan)
        }
    };
    let plan = plan.map_err(|e| error("chain", e))?;
    let tester = tester_file(&source.value)?;
    let layout = ChainLayout {
        hosts: vec![1; plan.hops() + 2],
        memif_wait: experiment
            .chaining()
            .memif_wait()
            .unwrap_or(sfclab_io::memif::Wait::Poll)
            .endpoint_keys(),
        files: files_read(std::slice::from_ref(&plan))?,
        plan: &plan,
        memif_within_host: false,
        addresses: 0,
    };
    k8s::chain(&layout, ("tester.json", &tester), &experiment.name, options)
}

/// The manifests of a scenario: every chain's VNFs (standby instances too) as pods,
/// each host's on a node, started with the chain files and flags the local run starts
/// their processes with, and the tester a Job running the scenario attached to them
/// (`sfclab scenario FILE --attach DIR`).
fn scenario_file(source: Source<'_>, options: &DeployOptions) -> Result<Manifests, DeployError> {
    let Source {
        path,
        origin,
        text,
        value: mut file,
    } = source;
    let is_chain_file = file.get("chain").is_some_and(serde_json::Value::is_array);
    let mut scenario = Scenario::from_text(&text, path, &ScenarioFlags::default(), &Settings::default())
        .map_err(|e| error("scenario", e.to_string()))?;
    let places = match &scenario.hosts {
        Some(h) if h.sink != 1 => {
            return Err(error(
                &origin,
                format!(
                    "`hosts.sink`: the tester is one pod, on host 1's node, so it receives there too: give `sink: 1` (here {})",
                    h.sink
                ),
            ));
        }
        Some(h) => h.places(),
        None => Vec::new(),
    };
    // What the tester will refuse when it attaches, refused here.
    let control = match scenario.hosts {
        Some(_) => HopControl::Tcp(k8s::control_address()),
        None => HopControl::Files(MEMIF_DIR.into()),
    };
    scenario
        .attach(Attachment {
            memif: MEMIF_DIR.into(),
            control,
        })
        .map_err(|e| error(&origin, format!("`{}`: {}", e.key, e.reason)))?;
    let plans = (0..scenario.instances().count())
        .map(|c| scenario.hop_plan(c, None).map_err(|e| error("chain", e)))
        .collect::<Result<Vec<_>, _>>()?;
    let files = files_read(&plans)?;
    let chains: Vec<(String, ChainLayout<'_>)> = scenario
        .instances()
        .zip(&plans)
        .enumerate()
        .map(|(c, (exp, plan))| {
            let layout = ChainLayout {
                hosts: match places.is_empty() {
                    true => vec![1; plan.hops() + 2],
                    false => places.iter().map(|p| p + 1).collect(),
                },
                memif_within_host: true,
                addresses: c,
                memif_wait: exp
                    .chaining()
                    .memif_wait()
                    .unwrap_or(sfclab_io::memif::Wait::Poll)
                    .endpoint_keys(),
                files: files.clone(),
                plan,
            };
            (scenario.instance_label(c), layout)
        })
        .collect();
    // The VNFs' cores are the pods' (a whole CPU each): the tester's copy names none.
    if let Some(map) = file.as_object_mut() {
        map.remove("vnf_cores");
    }
    let dir = std::path::absolute(path.parent().unwrap_or(Path::new(".")))
        .map_err(|e| error("file", format!("{origin}: {e}")))?;
    // The tester reads the chains too (their traffic): the chain files the scenario
    // names shipped beside its copy, each file their NFs read pointed at its copy.
    let mut chain_files = BTreeMap::new();
    if is_chain_file {
        point_at_copies(&mut file, &dir, &files);
    } else {
        // The scenario's `chain:` and each group's.
        let mut references = Vec::new();
        for (key, value) in file.as_object_mut().into_iter().flatten() {
            match key.as_str() {
                "chain" => references.push(value),
                "groups" => references.extend(
                    value
                        .as_array_mut()
                        .into_iter()
                        .flatten()
                        .filter_map(|g| g.get_mut("chain")),
                ),
                _ => {}
            }
        }
        for reference in references {
            let Some(named) = reference.as_str() else { continue };
            let at = dir.join(named);
            let text = std::fs::read_to_string(&at).map_err(|e| error("chain", format!("{}: {e}", at.display())))?;
            let mut chain: serde_json::Value =
                serde_saphyr::from_str(&text).map_err(|e| error("chain", format!("{}: {e}", at.display())))?;
            point_at_copies(&mut chain, at.parent().unwrap_or(&dir), &files);
            // Named in the ConfigMap by their number and name, read beside the scenario.
            let key = format!("chain-{}", k8s::shipped_name(chain_files.len(), named));
            chain_files.insert(key.clone(), serde_json::to_string_pretty(&chain).expect("JSON"));
            *reference = key.into();
        }
    }
    let tester = serde_json::to_string_pretty(&file).expect("JSON");
    k8s::scenario(
        &chains,
        ("scenario.json", &tester),
        &chain_files,
        &scenario.name,
        options,
    )
}

/// Points every file a chain file's NFs read (relative to `dir`, its directory, as its
/// loader reads them) at its copy in the ConfigMap (`files`).
fn point_at_copies(chain: &mut serde_json::Value, dir: &Path, files: &BTreeMap<String, String>) {
    k8s::each_file(chain, &mut |p| {
        if Path::new(p.as_str()).is_relative() {
            *p = dir.join(p.as_str()).display().to_string();
        }
    });
    k8s::ship_files(chain, files);
}

/// The tester's chain file: the chain file's name, `traffic:` and the `run:` keys a
/// tester keeps; checked as the tester will read it.
fn tester_file(file: &serde_json::Value) -> Result<String, DeployError> {
    let mut tester = serde_json::Map::new();
    for key in ["name", "traffic"] {
        if let Some(v) = file.get(key) {
            tester.insert(key.into(), v.clone());
        }
    }
    if let Some(serde_json::Value::Object(run)) = file.get("run") {
        let kept: serde_json::Map<_, _> = run
            .iter()
            .filter(|(k, _)| TESTER_RUN_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            tester.insert("run".into(), kept.into());
        }
    }
    let name = file.get("name").and_then(|n| n.as_str()).unwrap_or("the chain");
    tester.insert(
        "description".into(),
        format!("The tester of {name}: the traffic it sends through the chain's pods and how long it measures.").into(),
    );
    let tester = serde_json::to_string_pretty(&tester).expect("JSON");
    // Read as the tester will read it: its file with interfaces for ports.
    let ports = Settings::default().ports(PortsSetting::Tester {
        output: "t-out".into(),
        input: "t-in".into(),
    });
    chain_file::parse(&tester, "tester.json", &ports)
        .map_err(|e| error("traffic", format!("the tester would refuse this chain's traffic: {e}")))?;
    Ok(tester)
}

/// Every file the hops' NFs read (their file settings, made absolute by the loader),
/// with its text: the ConfigMap carries them.
fn files_read(plans: &[HopPlan]) -> Result<BTreeMap<String, String>, DeployError> {
    let mut paths = Vec::new();
    for plan in plans {
        for i in 0..plan.hops() {
            k8s::each_file(&mut plan.chain_file(i).1.clone(), &mut |path| paths.push(path.clone()));
        }
    }
    paths
        .into_iter()
        .map(|path| match std::fs::read_to_string(&path) {
            Ok(text) => Ok((path, text)),
            Err(e) => Err(error("file", format!("{path}: {e}"))),
        })
        .collect()
}
