//! `sfclab deploy k8s --apply` and `--delete` against a real control plane: the API
//! server admits and defaults every object, the scheduler places the pods, kwok's fake
//! nodes take them to Running and Ready (nothing runs in them: no kubelet, no CNI). The
//! cluster is observed with kubectl, not through sfclab. The control plane is
//! `k8s/local/cluster` (docs/KUBERNETES.md):
//!
//! ```text
//! k8s/local/cluster run --nodes 3 --node-cpus 16 --node-memory 64Gi -- \
//!   cargo test -p sfclab --test k8s_cluster -- --ignored --test-threads=1
//! ```

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};

use common::{sfclab, stderr, stdout};
use serde_json::Value;

/// The files deployed: every example scenario and the chain placed on two hosts, with
/// the link between hosts they need.
const EXAMPLES: [(&str, &[&str]); 6] = [
    ("examples/scenarios/custom-vnf.yaml", &[]),
    ("examples/scenarios/light-beside-heavy.yaml", &[]),
    ("examples/scenarios/pvp-router.yaml", &[]),
    ("examples/scenarios/pvvp-multi-feature.yaml", &[]),
    ("examples/scenarios/two-hosts.yaml", &["--link", "macvlan:master=eth1"]),
    ("examples/chains/dual-host.yaml", &["--link", "macvlan:master=eth1"]),
];

const HOST_LABEL: &str = "sfclab.io/host";

/// A deployment made by a test: deleted when the test ends, passed or not.
struct Deployment {
    name: String,
}

impl Deployment {
    fn new(name: &str) -> Deployment {
        assert!(
            std::env::var_os("KUBECONFIG").is_some(),
            "KUBECONFIG is not set: run these tests under k8s/local/cluster run (see this file's head)"
        );
        // A namespace left by an earlier run that failed.
        kubectl(&["delete", "namespace", name, "--ignore-not-found", "--wait=true"]);
        Deployment { name: name.to_string() }
    }

    /// `sfclab deploy k8s FILE EXTRA... --name NAME ARGS...`.
    fn sfclab(&self, file: &str, extra: &[&str], args: &[&str]) -> Output {
        let mut all = vec!["deploy", "k8s", file, "--name", &self.name];
        all.extend(extra);
        all.extend(args);
        sfclab(&all)
    }

    fn pods(&self) -> Vec<Value> {
        items(&kubectl_json(&["get", "pods", "-n", &self.name]))
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = Command::new("kubectl")
            .args(["delete", "namespace", &self.name, "--ignore-not-found", "--wait=false"])
            .output();
    }
}

fn kubectl(args: &[&str]) -> Output {
    Command::new("kubectl").args(args).output().expect("kubectl runs")
}

fn kubectl_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let o = kubectl(&all);
    assert!(o.status.success(), "kubectl {args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn items(list: &Value) -> Vec<Value> {
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The objects `deploy k8s` writes for the chain (before the tester's Job), as
/// `Kind/name`.
fn written_chain_objects(file: &str, extra: &[&str], name: &str) -> Vec<String> {
    let mut args = vec!["deploy", "k8s", file, "--name", name];
    args.extend(extra);
    let o = sfclab(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
    docs.iter()
        .filter(|d| d["kind"] != "Job")
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// Per host label, the nodes its pods run on.
fn nodes_by_host(pods: &[Value]) -> BTreeMap<String, BTreeSet<String>> {
    let mut by_host: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pod in pods {
        let host = pod["metadata"]["labels"][HOST_LABEL]
            .as_str()
            .unwrap_or("?")
            .to_string();
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("").to_string();
        by_host.entry(host).or_default().insert(node);
    }
    by_host
}

#[test]
#[ignore = "needs a Kubernetes control plane: KUBECONFIG from k8s/local/cluster run (see the file's head)"]
fn every_example_is_admitted_and_placed_as_its_hosts_ask_on_a_control_plane() {
    for (file, extra) in EXAMPLES {
        let stem = std::path::Path::new(file).file_stem().unwrap().to_str().unwrap();
        let d = Deployment::new(&format!("t-{stem}"));
        let o = d.sfclab(file, extra, &["--apply", "--until", "ready", "--timeout", "90s"]);
        let said = stderr(&o);
        assert!(o.status.success(), "{file}: {said}");
        // Every object the manifests hold was created, and said so.
        let written = written_chain_objects(file, extra, &d.name);
        for object in &written {
            assert!(
                said.contains(&format!("{object} created")),
                "{file}: {object} not created:\n{said}"
            );
        }
        // Admitted and defaulted by the API server: every pod Guaranteed (its requests
        // are its limits), given the namespace's service account, placed and ready.
        let pods = d.pods();
        let hop_pods = written.iter().filter(|o| o.starts_with("Pod/")).count();
        assert_eq!(pods.len(), hop_pods, "{file}");
        for pod in &pods {
            let name = pod["metadata"]["name"].as_str().unwrap();
            assert_eq!(pod["status"]["qosClass"], "Guaranteed", "{file}: {name}");
            assert_eq!(pod["spec"]["serviceAccountName"], "default", "{file}: {name}");
            assert!(
                pod["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty()),
                "{file}: {name}"
            );
            let ready = pod["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            assert!(ready, "{file}: {name} not ready");
            // What the CLI says matches where the scheduler put it.
            let node = pod["spec"]["nodeName"].as_str().unwrap();
            assert!(
                stdout(&o).contains(&format!("{name} on {node}")),
                "{file}: {}",
                stdout(&o)
            );
        }
        // Each host's pods on one node, different hosts on different nodes.
        let by_host = nodes_by_host(&pods);
        for (host, nodes) in &by_host {
            assert_eq!(nodes.len(), 1, "{file}: host {host}'s pods on {nodes:?}");
        }
        let distinct: BTreeSet<&String> = by_host.values().flatten().collect();
        assert_eq!(distinct.len(), by_host.len(), "{file}: hosts share a node: {by_host:?}");
        // The NetworkAttachmentDefinitions were admitted against Multus's CRD schema.
        let nads = items(&kubectl_json(&["get", "network-attachment-definitions", "-n", &d.name]));
        let written_nads = written
            .iter()
            .filter(|o| o.starts_with("NetworkAttachmentDefinition/"))
            .count();
        assert_eq!(nads.len(), written_nads, "{file}");
        for nad in &nads {
            let config: Value = serde_json::from_str(nad["spec"]["config"].as_str().unwrap()).unwrap();
            assert_eq!(
                config["cniVersion"].as_str().map(|v| !v.is_empty()),
                Some(true),
                "{file}: {nad}"
            );
        }
        // Applied again: nothing changes.
        let again = d.sfclab(file, extra, &["--apply", "--until", "scheduled", "--timeout", "90s"]);
        let said = stderr(&again);
        assert!(again.status.success(), "{file}: {said}");
        for object in &written {
            assert!(
                said.contains(&format!("{object} unchanged")),
                "{file}: {object} changed:\n{said}"
            );
        }
    }
}

#[test]
#[ignore = "needs a Kubernetes control plane: KUBECONFIG from k8s/local/cluster run (see the file's head)"]
fn deployments_larger_than_a_node_are_refused_with_the_schedulers_reason_on_a_control_plane() {
    let d = Deployment::new("t-too-large");
    // Every pod asks for more memory than a node has.
    let o = d.sfclab(
        "examples/scenarios/pvp-router.yaml",
        &["--memory", "100Ti"],
        &["--apply", "--until", "scheduled", "--timeout", "120s"],
    );
    let said = stderr(&o);
    assert!(!o.status.success(), "{said}");
    // The scheduler's own words, not a timeout.
    assert!(said.contains("unschedulable: Pod/c1-hop-1"), "{said}");
    assert!(said.contains("Insufficient memory"), "{said}");
    assert!(!said.contains("after "), "{said}");
    assert!(d.pods().iter().all(|p| p["spec"]["nodeName"].is_null()));

    // One host's VNFs, a whole CPU each, more than a node's 16 CPUs: the first 16 are
    // placed together, the rest refused for CPU.
    let d = Deployment::new("t-too-many");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("seventeen.yaml");
    std::fs::write(&file, "name: seventeen\nchains: 17\nvnf: router\n").unwrap();
    let o = d.sfclab(
        file.to_str().unwrap(),
        &[],
        &["--apply", "--until", "scheduled", "--timeout", "120s"],
    );
    let said = stderr(&o);
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains("unschedulable: Pod/") && said.contains("Insufficient cpu"),
        "{said}"
    );
    assert!(!said.contains("after "), "{said}");
    let pods = d.pods();
    let placed: Vec<&Value> = pods.iter().filter(|p| p["spec"]["nodeName"].is_string()).collect();
    assert_eq!(placed.len(), 16, "{said}");
    let nodes: BTreeSet<&str> = placed.iter().map(|p| p["spec"]["nodeName"].as_str().unwrap()).collect();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
}

#[test]
#[ignore = "needs a Kubernetes control plane: KUBECONFIG from k8s/local/cluster run (see the file's head)"]
fn the_tester_job_lands_with_its_host_and_delete_leaves_nothing_on_a_control_plane() {
    let d = Deployment::new("t-tester");
    let (file, extra) = ("examples/chains/dual-host.yaml", ["--link", "macvlan:master=eth1"]);
    let o = d.sfclab(file, &extra, &["--apply", "--timeout", "90s"]);
    let said = stderr(&o);
    // The hops are ready, the tester's Job is applied and completes (kwok's pods
    // succeed); its log is where a node would run the container: kwok has none, and the
    // API server says so (how depends on the fake node's addresses at that moment).
    assert!(said.contains("Job/tester created"), "{said}");
    assert!(
        said.contains("error: the log of Pod/tester-") && said.contains("the API server refused it"),
        "{said}"
    );
    assert!(!o.status.success());
    let job = kubectl_json(&["get", "job", "tester", "-n", &d.name]);
    assert_eq!(job["status"]["succeeded"], 1, "{job}");
    let pods = d.pods();
    let tester: Vec<&Value> = pods
        .iter()
        .filter(|p| p["metadata"]["labels"]["app.kubernetes.io/component"] == "tester")
        .collect();
    assert_eq!(tester.len(), 1);
    // The tester is placed with the hops of its host.
    let by_host = nodes_by_host(&pods);
    let host = tester[0]["metadata"]["labels"][HOST_LABEL].as_str().unwrap();
    assert_eq!(by_host[host].len(), 1, "{by_host:?}");
    assert_eq!(by_host.len(), 2, "{by_host:?}");

    let o = d.sfclab(file, &extra, &["--delete", "--timeout", "120s"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("deleted {}\n", d.name));
    let gone = kubectl(&["get", "namespace", &d.name]);
    assert!(
        !gone.status.success() && stderr(&gone).contains("NotFound"),
        "{}",
        stderr(&gone)
    );
    let left = kubectl(&[
        "get",
        "pods,jobs,configmaps,services,network-attachment-definitions",
        "-A",
        "-l",
        &format!("app.kubernetes.io/instance={}", d.name),
        "-o",
        "name",
    ]);
    assert!(left.status.success() && stdout(&left).is_empty(), "{}", stdout(&left));
    // Deleted again: there is nothing to delete, which is not an error.
    let o = d.sfclab(file, &extra, &["--delete"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing to delete"), "{}", stdout(&o));
}

#[test]
#[ignore = "needs a Kubernetes control plane: KUBECONFIG from k8s/local/cluster run (see the file's head)"]
fn delete_leaves_a_namespace_sfclab_did_not_make_on_a_control_plane() {
    let d = Deployment::new("t-foreign");
    let made = kubectl(&["create", "namespace", &d.name]);
    assert!(made.status.success(), "{}", stderr(&made));
    let o = d.sfclab("examples/chains/router.yaml", &[], &["--delete"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Namespace/t-foreign is not an sfclab deployment"),
        "{}",
        stderr(&o)
    );
    let kept = kubectl_json(&["get", "namespace", &d.name]);
    assert_eq!(kept["status"]["phase"], "Active", "{kept}");
}
