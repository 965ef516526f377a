//! `sfclab deploy k8s`: a chain's or a scenario's manifests for a Kubernetes cluster;
//! `sfclab ready`: a hop container's readiness probe (the image has no shell).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use sfclab_deploy::{DeployOptions, LinkKind};

use crate::outcome;

#[derive(Subcommand)]
pub enum DeployCmd {
    /// Kubernetes manifests for a chain file or a scenario: a Namespace, a ConfigMap of
    /// every hop's chain file (those the local runs use), per hop a Pod (Guaranteed QoS,
    /// one whole CPU, the capabilities its ports need), per link a Multus
    /// NetworkAttachmentDefinition or a host directory for memif sockets, and the tester
    /// as a Job whose log is its JSON result (a scenario's: `sfclab scenario --attach`,
    /// every VNF of every chain a Pod on one node). Nothing is applied: `kubectl apply -f
    /// chain.yaml`, wait for the hops (`kubectl wait --for=condition=Ready pod -l
    /// app.kubernetes.io/component=hop -n NAME`), then `kubectl apply -f tester.yaml`;
    /// `kubectl delete namespace NAME` removes everything (docs/KUBERNETES.md).
    K8s(K8sArgs),
    /// The container image the manifests run: the static sfclab binary alone on
    /// `scratch`, built with buildah (offline, no daemon), written as an OCI layout
    /// directory; the same binary gives the same digest. Load it where the cluster
    /// pulls from (`skopeo copy oci:DIR:TAG docker://REGISTRY/sfclab:TAG`).
    Image(ImageArgs),
}

#[derive(Args)]
pub struct ImageArgs {
    /// The static sfclab binary (RUSTFLAGS='-C target-feature=+crt-static' cargo build
    /// --release --target x86_64-unknown-linux-gnu); default this program, if static.
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The image's name.
    #[arg(long, default_value_t = sfclab_deploy::DeployOptions::default().image)]
    tag: String,
    /// Where the OCI layout is written (replaced).
    #[arg(long, default_value = "sfclab-image")]
    out: PathBuf,
}

#[derive(Args)]
pub struct K8sArgs {
    /// Chain file (YAML: each entry of its `chain:` one hop, one Pod) or scenario file
    /// (no `chain:` list: every VNF of every chain one Pod).
    file: PathBuf,
    /// How pods are joined: `memif` (shared memory, every pod on one node: the
    /// default), `macvlan:master=IF[,mode=bridge|vepa]`, `sriov:resource=NAME` (the SR-IOV
    /// device plugin's), `host-device:IF,IF,...` (one device per link end, in order),
    /// `afxdp:pool=NAME` (the AF_XDP device plugin's pool).
    #[arg(long, default_value = "memif")]
    link: String,
    /// The node a host's pods run on: `1=worker-a` (host 1; a chain file is one host).
    /// Without it the scheduler chooses, keeping each host's pods together.
    #[arg(long, value_name = "HOST=NODE")]
    node: Vec<String>,
    /// The deployment's name: its Namespace and every object's instance label
    /// (default `sfclab-<chain name>`).
    #[arg(long)]
    name: Option<String>,
    /// The image holding sfclab at /usr/bin/sfclab (`sfclab deploy image` builds one).
    #[arg(long)]
    image: Option<String>,
    /// Memory each pod requests and is limited to.
    #[arg(long, default_value = "1Gi")]
    memory: String,
    /// Write `chain.yaml` and `tester.yaml` here instead of printing both; with
    /// `--apply`, also the tester's result (a scenario's `scenario.json` and its report,
    /// as `sfclab scenario --out` writes them; a chain's `result.json`).
    #[arg(long, conflicts_with = "delete")]
    out: Option<PathBuf>,
    /// Apply them to the cluster (server-side, as sfclab's field manager) and follow
    /// the deployment as `--until` says, with a line per step: the hops' pods scheduled,
    /// ready, then the tester's Job applied and its result document printed.
    #[arg(long, conflicts_with = "delete")]
    apply: bool,
    /// Delete the deployment from the cluster (its Namespace and everything in it) and
    /// wait until it is gone.
    #[arg(long)]
    delete: bool,
    /// The kubeconfig of the cluster (default: KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context (default: its current one).
    #[arg(long)]
    context: Option<String>,
    /// How far `--apply` follows: `scheduled` (every hop's pod placed), `ready` (every
    /// hop forwarding), `result` (the tester's Job complete, its document printed).
    #[arg(long, default_value = "result", value_parser = clap::value_parser!(sfclab_deploy::cluster::Until))]
    until: sfclab_deploy::cluster::Until,
    /// How long each step may take before `--apply` or `--delete` gives up.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    timeout: std::time::Duration,
}

pub fn run(cmd: &DeployCmd) -> ExitCode {
    match cmd {
        DeployCmd::K8s(a) => k8s(a),
        DeployCmd::Image(a) => image(a),
    }
}

fn image(a: &ImageArgs) -> ExitCode {
    let binary = match &a.binary {
        Some(b) => b.clone(),
        None => match std::env::current_exe() {
            Ok(b) => b,
            Err(e) => return outcome::fail(outcome::FAILURE, &format!("finding this program: {e}")),
        },
    };
    match sfclab_deploy::image::build(&binary, &a.tag, &a.out) {
        Ok(image) => outcome::emit_then(
            &format!(
                "built {} ({}) from {}: OCI layout in {}\n",
                image.tag,
                image.digest,
                binary.display(),
                image.layout.display()
            ),
            0,
        ),
        Err(e) => outcome::fail(outcome::FAILURE, &e),
    }
}

fn k8s(a: &K8sArgs) -> ExitCode {
    let options = match options(a) {
        Ok(o) => o,
        Err(e) => return outcome::fail(outcome::USAGE, &e),
    };
    let manifests = match sfclab_deploy::file(&a.file, &options) {
        Ok(m) => m,
        Err(e) => return outcome::fail(outcome::USAGE, &e.to_string()),
    };
    if a.apply || a.delete {
        return on_cluster(a, &manifests);
    }
    match &a.out {
        None => outcome::emit_then(
            &format!("{}---\n{}", manifests.chain_yaml(), manifests.tester_yaml()),
            0,
        ),
        Some(dir) => match write_manifests(dir, &manifests) {
            Ok(()) => outcome::emit_then(
                &format!(
                    "wrote {0}/chain.yaml and {0}/tester.yaml (namespace {1}):\n  kubectl apply -f {0}/chain.yaml\n  kubectl wait -n {1} --for=condition=Ready pod -l app.kubernetes.io/component=hop --timeout=120s\n  kubectl apply -f {0}/tester.yaml\n  kubectl wait -n {1} --for=condition=complete job/tester --timeout=1h\n  kubectl logs -n {1} job/tester > result.json\n  kubectl delete namespace {1}\n",
                    dir.display(),
                    manifests.name
                ),
                0,
            ),
            Err(e) => outcome::fail(outcome::FAILURE, &e),
        },
    }
}

/// `--apply` or `--delete`: the deployment on the cluster, a line per step on stderr.
fn on_cluster(a: &K8sArgs, manifests: &sfclab_deploy::Manifests) -> ExitCode {
    use sfclab_deploy::cluster::{self, Cluster, Target, Until};
    let target = Target {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
    };
    let mut say = |line: &str| eprintln!("{line}");
    // What is applied, kept beside its result.
    if let Some(dir) = &a.out
        && let Err(e) = write_manifests(dir, manifests)
    {
        return outcome::fail(outcome::FAILURE, &e);
    }
    let done = (|| {
        let cluster = Cluster::connect(&target)?;
        let namespace = manifests.name.as_str();
        if a.delete {
            return Ok(if cluster.delete(namespace, a.timeout, &mut say)? {
                format!("deleted {namespace}\n")
            } else {
                format!("no deployment {namespace}: nothing to delete\n")
            });
        }
        cluster.apply(&manifests.chain, &mut say)?;
        let hops = cluster::hop_pods(manifests);
        let placed = cluster.wait_pods(namespace, "hop", hops, a.until.min(Until::Ready), a.timeout, &mut say)?;
        let report: String = placed.iter().map(|p| format!("{} on {}\n", p.pod, p.node)).collect();
        if a.until < Until::Result {
            return Ok(report);
        }
        cluster.apply(&manifests.tester, &mut say)?;
        cluster.job_result(namespace, "tester", a.timeout, &mut say)
    })();
    let text = match done {
        Ok(text) => text,
        Err(e) => return outcome::fail(outcome::FAILURE, &e.to_string()),
    };
    if a.delete || a.until < Until::Result {
        return outcome::emit_then(&text, 0);
    }
    match tester_result(&text, a.out.as_deref()) {
        Ok(result) => {
            eprint!("{}", result.summary);
            for f in result.written {
                eprintln!("wrote {}", f.display());
            }
            outcome::emit_then(&result.document, 0)
        }
        Err(e) => outcome::fail(outcome::FAILURE, &e),
    }
}

/// The tester's result, given as its local run gives it.
#[derive(Debug)]
struct TesterResult {
    /// The document, for stdout.
    document: String,
    /// A scenario's summary table (the one `sfclab report` prints), or nothing.
    summary: String,
    /// What was written under `--out`.
    written: Vec<PathBuf>,
}

/// The tester Job's log read as its result document: a scenario's summarised and, with
/// `out`, written with its report as `sfclab scenario --out` writes them; a chain's
/// written as `result.json`. A log that is not a document is an error that shows its
/// end (the tester failed before measuring).
fn tester_result(log: &str, out: Option<&std::path::Path>) -> Result<TesterResult, String> {
    let doc: serde_json::Value = serde_json::from_str(log)
        .ok()
        .filter(|d: &serde_json::Value| d["schema"].as_str().is_some_and(|s| s.starts_with("sfclab.")))
        .ok_or_else(|| {
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(10)..];
            format!(
                "the tester's log is not a result document (it did not end as a measurement); its end:\n{}",
                tail.join("\n")
            )
        })?;
    let scenario = doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("sfclab.scenario/"));
    let mut document = serde_json::to_string_pretty(&doc).expect("a JSON value prints");
    document.push('\n');
    let mut written = Vec::new();
    if let Some(dir) = out {
        let path = dir.join(if scenario { "scenario.json" } else { "result.json" });
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, &document))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
        if scenario {
            written.extend(crate::scenario_report::write_all(std::slice::from_ref(&doc), dir)?);
        }
    }
    let summary = if scenario {
        crate::scenario_report::table(std::slice::from_ref(&doc))
    } else {
        String::new()
    };
    Ok(TesterResult {
        document,
        summary,
        written,
    })
}

/// `chain.yaml` and `tester.yaml` in `dir`.
fn write_manifests(dir: &std::path::Path, manifests: &sfclab_deploy::Manifests) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(dir.join("chain.yaml"), manifests.chain_yaml()))
        .and_then(|()| std::fs::write(dir.join("tester.yaml"), manifests.tester_yaml()))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

fn options(a: &K8sArgs) -> Result<DeployOptions, String> {
    let link: LinkKind = a.link.parse().map_err(|e| format!("--link: {e}"))?;
    let mut nodes = BTreeMap::new();
    for n in &a.node {
        let (host, node) = n
            .split_once('=')
            .ok_or_else(|| format!("--node `{n}`: write HOST=NODE, e.g. 1=worker-a"))?;
        let host: usize = host
            .parse()
            .ok()
            .filter(|&h| h > 0)
            .ok_or_else(|| format!("--node `{n}`: the host is a number from 1"))?;
        if node.is_empty() || nodes.insert(host, node.to_string()).is_some() {
            return Err(format!("--node `{n}`: one node name per host"));
        }
    }
    let mut options = DeployOptions {
        name: a.name.clone(),
        link,
        nodes,
        memory: a.memory.clone(),
        ..Default::default()
    };
    if let Some(image) = &a.image {
        options.image = image.clone();
    }
    Ok(options)
}

/// Exit 0 when `file` exists (a hop's ready file), 1 otherwise.
pub fn ready(file: &std::path::Path) -> ExitCode {
    ExitCode::from(if file.exists() { 0 } else { outcome::FAILURE })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_testers_log_is_summarised_and_written_with_its_report() {
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/scenarios/pvvp-router-4-c2.json"
        );
        let log = std::fs::read_to_string(fixture).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let r = tester_result(&log, Some(dir.path())).unwrap();
        let again: serde_json::Value = serde_json::from_str(&r.document).unwrap();
        assert_eq!(again, serde_json::from_str::<serde_json::Value>(&log).unwrap());
        assert!(
            r.summary.contains("Mpps") && r.summary.contains("conserved"),
            "{}",
            r.summary
        );
        assert!(dir.path().join("scenario.json").exists());
        assert!(r.written.iter().any(|f| f.ends_with("report.html")), "{:?}", r.written);
        // A chain's document is written as it is, with no summary of a scenario's.
        let chain = r#"{"schema": "sfclab.run/4", "runs": []}"#;
        let r = tester_result(chain, Some(dir.path())).unwrap();
        assert!(r.summary.is_empty());
        assert!(dir.path().join("result.json").exists());
    }

    #[test]
    fn a_testers_log_that_is_not_a_document_is_an_error_showing_its_end() {
        let log = "starting\nerror: the hop c1-hop-1 did not answer on c1-hop-1.vnfs:7000\n";
        let e = tester_result(log, None).unwrap_err();
        assert!(
            e.contains("not a result document") && e.contains("did not answer"),
            "{e}"
        );
        // JSON, but not sfclab's.
        assert!(tester_result("{\"kind\": \"Status\"}", None).is_err());
    }
}
