//! Every example chain deployed (or refused, saying why), compared with its golden
//! manifests (`UPDATE_GOLDEN=1 cargo test -p sfclab-deploy` rewrites them), and the
//! properties every manifest must have whatever the chain.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sfclab_deploy::{DeployOptions, Manifests};
use sfclab_experiment::scenario::{Scenario, ScenarioFlags};
use sfclab_experiment::{ChainSource, Experiment, HopPlan, Settings};

/// Example chains that deploy.
const DEPLOYED: &[&str] = &[
    "cache-steps",
    "default",
    "drops",
    "edge",
    "firewall",
    "forwarders",
    "ipsec",
    "multi-feature",
    "nat44",
    // A graph with branches: one pod runs it whole.
    "nsh",
    "qos",
    "router",
    "shaper",
];

/// Example chains that do not, and what the refusal says.
const REFUSED: &[(&str, &str)] = &[
    // The tester signs every frame: 64-byte frames have no room on interfaces.
    ("dpi", "16-byte signature"),
    ("imix-v6", "16-byte signature"),
    // Its traffic answers (TCP sessions): the tester on interfaces does not.
    ("fw-nat-router", "responder"),
    // The pipeline runtime places NFs on cores of one process.
    ("parallel", "`runtime` does not apply"),
    ("pipeline-bi2", "`runtime` does not apply"),
    // Its routers sit on two hosts: memif joins pods of one node (`--link` below).
    ("dual-host", "memif joins pods of one node"),
];

/// Every example scenario deploys (golden `scenario-<name>.yaml`), with the links
/// between its hosts when it has several (`--link`).
const SCENARIOS: &[(&str, &str)] = &[
    ("custom-vnf", "memif"),
    ("light-beside-heavy", "memif"),
    ("pvp-router", "memif"),
    ("pvvp-multi-feature", "memif"),
    ("two-hosts", "macvlan:master=eth1"),
];

/// Link kinds beyond memif, each on one example.
const LINKS: &[(&str, &str, &str)] = &[
    ("forwarders", "macvlan", "macvlan:master=eth1,mode=bridge"),
    ("router", "sriov", "sriov:resource=intel.com/sriov_netdevice"),
    ("router", "host-device", "host-device:ens1f0,ens1f1,ens2f0,ens2f1"),
    ("multi-feature", "afxdp", "afxdp:pool=sfclab"),
    ("dual-host", "macvlan", "macvlan:master=eth1"),
    ("nsh", "macvlan", "macvlan:master=eth1"),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(name: &str) -> PathBuf {
    repo().join("examples/chains").join(format!("{name}.yaml"))
}

fn scenario(name: &str) -> PathBuf {
    repo().join("examples/scenarios").join(format!("{name}.yaml"))
}

fn deploy(name: &str, link: &str) -> Result<Manifests, sfclab_deploy::DeployError> {
    let options = DeployOptions {
        link: link.parse().unwrap(),
        ..Default::default()
    };
    sfclab_deploy::file(&example(name), &options)
}

fn text(m: &Manifests) -> String {
    format!("{}---\n{}", m.chain_yaml(), m.tester_yaml())
}

fn check_golden(file: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(file);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert!(
        expected == actual,
        "{} differs from what deploy writes now (UPDATE_GOLDEN=1 rewrites it after review):\n{actual}",
        path.display()
    );
}

/// Every object as JSON.
fn objects(m: &Manifests) -> Vec<Value> {
    m.objects().map(|o| serde_json::to_value(o).unwrap()).collect()
}

#[test]
fn every_example_chain_is_deployed_or_refused_with_its_reason() {
    let mut listed: Vec<&str> = DEPLOYED.iter().copied().chain(REFUSED.iter().map(|r| r.0)).collect();
    listed.sort_unstable();
    let mut examples: Vec<String> = std::fs::read_dir(repo().join("examples/chains"))
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    examples.sort();
    assert_eq!(
        listed, examples,
        "a new example chain: list it here as deployed or refused"
    );
    for name in DEPLOYED {
        let m = deploy(name, "memif").unwrap_or_else(|e| panic!("{name}: {e}"));
        check_golden(&format!("{name}.yaml"), &text(&m));
    }
    for (name, why) in REFUSED {
        let e = deploy(name, "memif")
            .err()
            .unwrap_or_else(|| panic!("{name} deployed"))
            .to_string();
        assert!(e.contains(why), "{name}: {e}");
    }
    for (name, label, link) in LINKS {
        let m = deploy(name, link).unwrap_or_else(|e| panic!("{name} over {link}: {e}"));
        check_golden(&format!("{name}-{label}.yaml"), &text(&m));
    }
}

#[test]
fn every_example_scenario_is_deployed() {
    let mut examples: Vec<String> = std::fs::read_dir(repo().join("examples/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    examples.sort();
    let listed: Vec<&str> = SCENARIOS.iter().map(|s| s.0).collect();
    assert_eq!(listed, examples, "a new example scenario: list it here");
    for (name, link) in SCENARIOS {
        let options = DeployOptions {
            link: link.parse().unwrap(),
            ..Default::default()
        };
        let m = sfclab_deploy::file(&scenario(name), &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_golden(&format!("scenario-{name}.yaml"), &text(&m));
    }
}

/// A scenario's pods run each VNF with the chain file and flags the local scenario
/// starts its process with, each serving runs through its control files beside its
/// memif sockets; the tester runs the scenario attached to them.
#[test]
fn each_scenario_pod_runs_its_vnf_as_the_local_scenario_starts_it() {
    let name = "light-beside-heavy";
    let m = sfclab_deploy::file(&scenario(name), &DeployOptions::default()).unwrap();
    let local = Scenario::load(Some(&scenario(name)), &ScenarioFlags::default(), &Settings::default()).unwrap();
    let objs = objects(&m);
    let config = objs.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    let pods: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Pod").collect();
    let mut expected = 0;
    for (c, _) in local.instances().enumerate() {
        let label = local.instance_label(c);
        let plan = local.hop_plan(c, None).unwrap();
        for i in 0..plan.hops() {
            let pod = pods
                .iter()
                .find(|p| p["metadata"]["name"] == format!("{label}-hop-{}", i + 1).as_str())
                .unwrap_or_else(|| panic!("{label} hop {}", i + 1));
            let file = format!("{label}-hop-{}.json", i + 1);
            let shipped: Value = serde_json::from_str(config["data"][&file].as_str().unwrap()).unwrap();
            assert_eq!(&shipped, plan.chain_file(i).1, "{label} hop {}", i + 1);
            let args: Vec<String> = serde_json::from_value(pod["spec"]["containers"][0]["args"].clone()).unwrap();
            let ports = args[args.iter().position(|a| a == "--ports").unwrap() + 1].clone();
            let ready = format!("/run/sfclab/memif/{label}-hop{}.ready", i + 1);
            let mut want = plan.arguments(&format!("/etc/sfclab/{file}"), &ports, &ready);
            want.extend([
                "--control-files".into(),
                format!("/run/sfclab/memif/{label}-hop{}", i + 1),
            ]);
            assert_eq!(args, want, "{label} hop {}", i + 1);
            expected += 1;
        }
    }
    assert_eq!(pods.len(), expected, "a pod per VNF, standby instances too");
    let job = objs.iter().find(|o| o["kind"] == "Job").unwrap();
    let args = &job["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(
        args,
        &serde_json::json!([
            "scenario",
            "/etc/sfclab/scenario.json",
            "--attach",
            "/run/sfclab/memif",
            "--json"
        ])
    );
}

#[test]
fn scenarios_that_do_not_deploy_say_why() {
    let dir = tempfile::tempdir().unwrap();
    for (text, says) in [
        ("chains: 2\nhosts: { count: 2 }\n", "give `sink: 1` (here 2)"),
        (
            "chains: 2\nshape: pvvp\nhosts: { count: 2, vnfs: [1, 2], sink: 1 }\n",
            "link 1 crosses from host 1 to host 2, and memif joins pods of one node",
        ),
        ("chains: 2\nnic_capacity: 1Gbit/s\n", "`nic_capacity`"),
        ("chains: 2\nrun: { chaining: veth }\n", "`chaining`"),
        ("chain: x.yaml\n", "x.yaml: cannot read"),
    ] {
        let file = dir.path().join("s.yaml");
        std::fs::write(&file, text).unwrap();
        let e = sfclab_deploy::file(&file, &DeployOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{text}: {e}");
    }
    let options = DeployOptions {
        link: "macvlan:master=eth1".parse().unwrap(),
        ..Default::default()
    };
    let e = sfclab_deploy::file(&scenario("pvp-router"), &options)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("--link: a scenario on one host deploys on one node"),
        "{e}"
    );
}

/// The chain files in the ConfigMap are those the local runs start each hop with.
#[test]
fn each_pod_runs_the_chain_file_and_flags_of_the_local_hop_process() {
    for name in ["forwarders", "router", "edge"] {
        let m = deploy(name, "memif").unwrap();
        let overrides = Settings::default().with("chaining", "memif").unwrap();
        let exp = Experiment::load(&ChainSource::File(example(name)), &overrides).unwrap();
        let plan = HopPlan::of(&exp).unwrap();
        let objs = objects(&m);
        let config = objs.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
        let pods: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Pod").collect();
        assert_eq!(pods.len(), plan.hops(), "{name}: a pod per hop");
        for (i, pod) in pods.iter().enumerate() {
            let file = format!("hop-{}.json", i + 1);
            let shipped: Value = serde_json::from_str(config["data"][&file].as_str().unwrap()).unwrap();
            assert_eq!(&shipped, plan.chain_file(i).1, "{name} hop {}", i + 1);
            let args: Vec<String> = serde_json::from_value(pod["spec"]["containers"][0]["args"].clone()).unwrap();
            let ports = args[args.iter().position(|a| a == "--ports").unwrap() + 1].clone();
            assert_eq!(
                args,
                plan.arguments(&format!("/etc/sfclab/{file}"), &ports, "/run/sfclab/ready"),
                "{name} hop {}",
                i + 1
            );
        }
    }
}

#[test]
fn pods_are_guaranteed_unprivileged_and_removable_by_one_label() {
    for (name, link) in [
        ("forwarders", "memif"),
        ("router", "macvlan:master=eth1"),
        ("router", "sriov:resource=r/x"),
    ] {
        let m = deploy(name, link).unwrap();
        for o in objects(&m) {
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/instance"],
                m.name.as_str(),
                "{o}"
            );
            let spec = match o["kind"].as_str().unwrap() {
                "Pod" => &o["spec"],
                "Job" => &o["spec"]["template"]["spec"],
                _ => continue,
            };
            let c = &spec["containers"][0];
            let (requests, limits) = (&c["resources"]["requests"], &c["resources"]["limits"]);
            assert_eq!(requests, limits, "Guaranteed QoS: requests are the limits");
            assert_eq!(requests["cpu"], "1", "a whole CPU: the static CPU manager pins it");
            let security = &c["securityContext"];
            assert_eq!(security["privileged"], false);
            assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
            let added = &security["capabilities"]["add"];
            if link == "memif" {
                assert!(added.is_null(), "memif needs no capability: {added}");
            } else {
                assert_eq!(added, &serde_json::json!(["NET_ADMIN", "NET_RAW", "BPF", "IPC_LOCK"]));
                let networks: Vec<Value> = serde_json::from_str(
                    o["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
                        .as_str()
                        .or(o["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].as_str())
                        .unwrap(),
                )
                .unwrap();
                assert_eq!(networks.len(), 2, "two interfaces: in and out");
                assert!(
                    networks.iter().all(|n| n["mac"].is_string()),
                    "switched: each end's address set"
                );
            }
            if link.starts_with("sriov") {
                assert_eq!(requests["r/x"], "2", "two virtual functions from the device plugin");
            }
        }
    }
}

#[test]
fn options_that_do_not_fit_the_chain_are_refused_naming_the_flag() {
    let e = deploy("router", "host-device:a,b").unwrap_err().to_string();
    assert!(e.starts_with("--link: host-device names 2 devices"), "{e}");
    let options = DeployOptions {
        nodes: [(2, "worker-b".to_string())].into(),
        ..Default::default()
    };
    let e = sfclab_deploy::file(&example("router"), &options)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--node: host 2"), "{e}");
    let options = DeployOptions {
        name: Some("Not_A_Name".into()),
        ..Default::default()
    };
    let e = sfclab_deploy::file(&example("router"), &options)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--name: `Not_A_Name` is not a Kubernetes name"), "{e}");
}

/// Every golden manifest against Kubernetes 1.35's schemas (kubernetes-validate, strict)
/// and the NetworkAttachmentDefinitions against the multi-net spec's with their CNI
/// configurations.
#[test]
#[ignore = "needs PyPI's kubernetes-validate 1.37.0 (a Python with it in SFCLAB_K8S_PYTHON); CI installs it"]
fn golden_manifests_validate_against_the_kubernetes_schemas() {
    let python = std::env::var("SFCLAB_K8S_PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("golden"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= DEPLOYED.len() + LINKS.len() + SCENARIOS.len());
    let out = std::process::Command::new(&python)
        .arg(dir.join("validate_manifests.py"))
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&format!("{} files valid", files.len())), "{said}");
}
