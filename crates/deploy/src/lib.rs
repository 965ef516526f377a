//! sfclab beyond one machine: a chain deployed on Kubernetes (`sfclab deploy k8s`).
//!
//! The objects are typed (`k8s-openapi` for Kubernetes' own, [`nad`] for Multus's
//! NetworkAttachmentDefinition), written as YAML; each hop's Pod runs the chain file and
//! flags the local runs start that hop's process with ([`sfclab_experiment::HopPlan`]),
//! so what is tested here is what runs there. [`image`] builds the container image.

pub mod image;
pub mod k8s;
pub mod links;
pub mod nad;

use std::collections::BTreeMap;
use std::path::Path;

use sfclab_experiment::{ChainSource, Experiment, HopPlan, Settings};

pub use k8s::{DeployError, DeployOptions, Manifests, Object};
pub use links::{LinkKind, MacvlanMode};

use k8s::{ChainLayout, error};

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

/// The manifests of the chain file at `path`: each hop (an entry of `chain:`) a Pod on
/// one node, the tester a Job beside them.
pub fn chain_file(path: &Path, options: &DeployOptions) -> Result<Manifests, DeployError> {
    let overrides = Settings::default()
        .with("chaining", "memif")
        .map_err(|e| error("chaining", e))?;
    let experiment = Experiment::load(&ChainSource::File(path.to_path_buf()), &overrides)?;
    let plan = HopPlan::of(&experiment).map_err(|e| error("chain", e))?;
    let text = std::fs::read_to_string(path).map_err(|e| error("file", format!("{}: {e}", path.display())))?;
    let tester = tester_file(&text, path)?;
    let layout = ChainLayout {
        hosts: vec![1; plan.hops() + 2],
        memif_wait: experiment
            .memif_wait
            .unwrap_or(sfclab_io::memif::Wait::Poll)
            .endpoint_keys(),
        files: files_read(&plan)?,
        tester_file: ("tester.json".into(), tester),
        plan: &plan,
    };
    k8s::chain(&layout, &experiment.name, options)
}

/// The tester's chain file: the chain file's name, `traffic:` and the `run:` keys a
/// tester keeps; checked as the tester will read it.
fn tester_file(text: &str, path: &Path) -> Result<String, DeployError> {
    let file: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| error("file", format!("{}: {e}", path.display())))?;
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
    // What the tester will be told: its file with interfaces for ports, read as it will
    // read it (a directory of this call's own, removed when dropped).
    let dir = tempfile::tempdir().map_err(|e| error("file", format!("a temporary directory: {e}")))?;
    let probe = dir.path().join("tester.json");
    std::fs::write(&probe, &tester).map_err(|e| error("file", format!("{}: {e}", probe.display())))?;
    Settings::default()
        .with("ports", "tester:t-out,t-in")
        .and_then(|s| Experiment::load(&ChainSource::File(probe), &s).map_err(|e| e.to_string()))
        .map_err(|e| error("traffic", format!("the tester would refuse this chain's traffic: {e}")))?;
    Ok(tester)
}

/// Every file the hops' NFs read (their file settings, made absolute by the loader),
/// with its text: the ConfigMap carries them.
fn files_read(plan: &HopPlan) -> Result<BTreeMap<String, String>, DeployError> {
    let mut files = BTreeMap::new();
    for i in 0..plan.hops() {
        let chain = &plan.chain_file(i).1["chain"];
        for entry in chain.as_array().into_iter().flatten() {
            collect_files(entry, &mut files)?;
        }
    }
    Ok(files)
}

/// The files of one chain entry (`{kind: settings}`) and of an NF it wraps.
fn collect_files(entry: &serde_json::Value, files: &mut BTreeMap<String, String>) -> Result<(), DeployError> {
    let Some((kind, settings)) = entry.as_object().and_then(|m| m.iter().next()) else {
        return Ok(());
    };
    for key in sfclab_nf::NfSpec::file_settings(kind) {
        if let Some(path) = settings[*key].as_str() {
            let text = std::fs::read_to_string(path).map_err(|e| error(key, format!("{path}: {e}")))?;
            files.insert(path.to_string(), text);
        }
    }
    if let Some(key) = sfclab_nf::NfSpec::wrapped_setting(kind) {
        collect_files(&settings[key], files)?;
    }
    Ok(())
}
