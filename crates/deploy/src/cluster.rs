//! `sfclab deploy k8s --apply` and `--delete`: the manifests applied to a cluster's API
//! server (server-side apply, as `kubectl apply --server-side` does), then watched until
//! the pods are scheduled, ready, and the tester's Job has written its result; and a
//! deployment removed with everything in its Namespace.
//!
//! The client is kube-rs over the kubeconfig a user names (or `KUBECONFIG`, or
//! `~/.kube/config`). The API is asked in short polls rather than watches: a deployment
//! has a handful of objects, and a poll sees the state as it is after a reconnect.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, LogParams, Patch, PatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::k8s::{INSTANCE_LABEL, ROLE_LABEL};
use crate::{Manifests, Object};

/// The field manager sfclab's applies own their fields as.
const FIELD_MANAGER: &str = "sfclab";
/// How often the cluster's state is read while waiting.
const POLL: Duration = Duration::from_millis(500);
/// How long pods may stay unschedulable, none of them placed meanwhile, before the
/// scheduler's reason is taken as its answer (it retries, so a pod waiting for a
/// partner's placement is not yet refused).
const UNSCHEDULABLE_SETTLE: Duration = Duration::from_secs(10);

/// Which cluster: a kubeconfig and a context in it.
#[derive(Clone, Debug, Default)]
pub struct Target {
    /// The kubeconfig (default: `KUBECONFIG`, else `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// Its context (default: its current one).
    pub context: Option<String>,
}

/// How far `--apply` follows the deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Until {
    /// Every hop's pod placed on a node by the scheduler.
    Scheduled,
    /// Every hop's pod ready (its NF forwarding: the image's readiness probe).
    Ready,
    /// The tester's Job applied, complete, and its log (the result document) read.
    Result,
}

impl std::str::FromStr for Until {
    type Err = String;
    fn from_str(s: &str) -> Result<Until, String> {
        match s {
            "scheduled" => Ok(Until::Scheduled),
            "ready" => Ok(Until::Ready),
            "result" => Ok(Until::Result),
            _ => Err(format!("`{s}`: one of scheduled, ready, result")),
        }
    }
}

/// Why the cluster did not take or run a deployment.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig or its context could not be used.
    #[error("{kubeconfig}: {reason}")]
    Config { kubeconfig: String, reason: String },
    /// The API server refused a request about an object: its own reason.
    #[error("{object}: the API server refused it: {reason}")]
    Refused { object: String, reason: String },
    /// `--delete` of a Namespace sfclab did not make: left alone.
    #[error("{object} is not an sfclab deployment (it has no label {label}): left as it is")]
    NotOurs { object: String, label: String },
    /// No answer from the API server.
    #[error("{object}: {reason}")]
    Unreachable { object: String, reason: String },
    /// Pods the scheduler cannot place, with its reason for each.
    #[error("unschedulable: {}", .0.join("; "))]
    Unschedulable(Vec<String>),
    /// A pod or the tester's Job failed, with the reason Kubernetes gives.
    #[error("{object} failed: {reason}")]
    Failed { object: String, reason: String },
    /// Not there in time: what was awaited and how far it got.
    #[error("after {waited:?}: {what}")]
    TimedOut { waited: Duration, what: String },
}

/// What an apply did to one object, as `kubectl apply` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Configured,
    Unchanged,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Created => "created",
            Outcome::Configured => "configured",
            Outcome::Unchanged => "unchanged",
        })
    }
}

/// One object applied.
#[derive(Clone, Debug)]
pub struct Applied {
    /// `Kind/name` (in the deployment's namespace, but for the Namespace itself).
    pub object: String,
    pub outcome: Outcome,
}

/// Where a pod was placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub pod: String,
    pub node: String,
}

/// A connection to one cluster's API server.
pub struct Cluster {
    client: Client,
    runtime: tokio::runtime::Runtime,
    /// The API server's address, for errors.
    server: String,
}

impl Cluster {
    /// Connects as `target` says (nothing is sent until the first request).
    pub fn connect(target: &Target) -> Result<Cluster, ClusterError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| config_error(target, format!("starting the client's runtime: {e}")))?;
        let options = KubeConfigOptions {
            context: target.context.clone(),
            ..Default::default()
        };
        let config = runtime.block_on(async {
            match &target.kubeconfig {
                Some(path) => {
                    let file = Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
                    Config::from_custom_kubeconfig(file, &options)
                        .await
                        .map_err(|e| e.to_string())
                }
                None => Config::from_kubeconfig(&options).await.map_err(|e| e.to_string()),
            }
        });
        let config = config.map_err(|reason| config_error(target, reason))?;
        let server = config.cluster_url.to_string();
        // The client's connection pool lives on the runtime it is made on.
        let client = {
            let _entered = runtime.enter();
            Client::try_from(config).map_err(|e| config_error(target, e.to_string()))?
        };
        Ok(Cluster {
            client,
            runtime,
            server,
        })
    }

    /// Applies `objects` in order (server-side, sfclab owning the fields it writes),
    /// saying for each whether it was created, changed or left as it was.
    pub fn apply(&self, objects: &[Object], progress: &mut dyn FnMut(&str)) -> Result<Vec<Applied>, ClusterError> {
        let mut applied = Vec::new();
        for object in objects {
            let (api, label, value) = self.api_of(object);
            let name = value["metadata"]["name"].as_str().unwrap_or_default();
            let outcome = self.runtime.block_on(async {
                let before = api.get_opt(name).await.map_err(|e| self.refused(&label, e))?;
                let params = PatchParams::apply(FIELD_MANAGER).force();
                let after = api
                    .patch(name, &params, &Patch::Apply(&value))
                    .await
                    .map_err(|e| self.refused(&label, e))?;
                Ok::<_, ClusterError>(match before {
                    None => Outcome::Created,
                    Some(b) if b.metadata.resource_version == after.metadata.resource_version => Outcome::Unchanged,
                    Some(_) => Outcome::Configured,
                })
            })?;
            progress(&format!("{label} {outcome}"));
            applied.push(Applied { object: label, outcome });
        }
        Ok(applied)
    }

    /// Waits until every pod of `role` (`hop`, `tester`) in `namespace` is scheduled or
    /// ready, as `until` says, for at most `timeout`; where they are placed. Pods the
    /// scheduler keeps refusing are an error with its reasons.
    pub fn wait_pods(
        &self,
        namespace: &str,
        role: &str,
        expected: usize,
        until: Until,
        timeout: Duration,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Vec<Placement>, ClusterError> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let selector = ListParams::default().labels(&format!("{ROLE_LABEL}={role}"));
        let began = Instant::now();
        let mut last_progress = Instant::now();
        let mut shown = String::new();
        let mut placed_count = 0;
        loop {
            let list = self
                .runtime
                .block_on(pods.list(&selector))
                .map_err(|e| self.refused(&format!("pods of {namespace}"), e))?;
            let mut placed = Vec::new();
            let (mut ready, mut refusals) = (0, Vec::new());
            for pod in &list.items {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let status = pod.status.as_ref();
                if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                    placed.push(Placement {
                        pod: name.clone(),
                        node,
                    });
                }
                if status.and_then(|s| s.phase.as_deref()) == Some("Failed") {
                    let reason = status
                        .and_then(|s| s.message.clone().or(s.reason.clone()))
                        .unwrap_or_else(|| "no reason given".into());
                    return Err(ClusterError::Failed {
                        object: format!("Pod/{name}"),
                        reason,
                    });
                }
                if condition(pod, "Ready") == Some(("True", "")) {
                    ready += 1;
                }
                if let Some(("False", message)) = condition(pod, "PodScheduled") {
                    refusals.push(format!("Pod/{name}: {message}"));
                }
            }
            let done = list.items.len() >= expected
                && match until {
                    Until::Scheduled => placed.len() == list.items.len(),
                    Until::Ready | Until::Result => ready == list.items.len(),
                };
            let line = format!("{role} pods: {} of {expected} scheduled, {ready} ready", placed.len());
            if line != shown {
                progress(&line);
                shown = line;
            }
            if done {
                placed.sort_by(|a, b| a.pod.cmp(&b.pod));
                return Ok(placed);
            }
            if placed.len() != placed_count {
                placed_count = placed.len();
                last_progress = Instant::now();
            }
            if !refusals.is_empty() && last_progress.elapsed() >= UNSCHEDULABLE_SETTLE {
                refusals.sort();
                return Err(ClusterError::Unschedulable(refusals));
            }
            if began.elapsed() >= timeout {
                return Err(ClusterError::TimedOut {
                    waited: timeout,
                    what: format!("{shown} in namespace {namespace}"),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until the Job `name` completes; its pod's log (the tester's result
    /// document).
    pub fn job_result(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
        progress: &mut dyn FnMut(&str),
    ) -> Result<String, ClusterError> {
        let jobs: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        let object = format!("Job/{name}");
        let began = Instant::now();
        progress(&format!("{object}: waiting for it to complete"));
        loop {
            let job = self
                .runtime
                .block_on(jobs.get(name))
                .map_err(|e| self.refused(&object, e))?;
            let conditions = job
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            if let Some(failed) = conditions.iter().find(|c| c.type_ == "Failed" && c.status == "True") {
                return Err(ClusterError::Failed {
                    object,
                    reason: failed.message.clone().or(failed.reason.clone()).unwrap_or_default(),
                });
            }
            if conditions.iter().any(|c| c.type_ == "Complete" && c.status == "True") {
                break;
            }
            if began.elapsed() >= timeout {
                return Err(ClusterError::TimedOut {
                    waited: timeout,
                    what: format!("{object} in namespace {namespace} not complete"),
                });
            }
            std::thread::sleep(POLL);
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let list = self
            .runtime
            .block_on(pods.list(&ListParams::default().labels(&format!("job-name={name}"))))
            .map_err(|e| self.refused(&object, e))?;
        let pod = list
            .items
            .iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
            .and_then(|p| p.metadata.name.clone())
            .ok_or_else(|| ClusterError::Failed {
                object: object.clone(),
                reason: "complete, but no pod of it succeeded".into(),
            })?;
        self.runtime
            .block_on(pods.logs(&pod, &LogParams::default()))
            .map_err(|e| self.refused(&format!("the log of Pod/{pod}"), e))
    }

    /// Deletes the deployment `name` (its Namespace, and with it everything in it) and
    /// waits until it is gone; false if there was none.
    pub fn delete(&self, name: &str, timeout: Duration, progress: &mut dyn FnMut(&str)) -> Result<bool, ClusterError> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let object = format!("Namespace/{name}");
        let found = self
            .runtime
            .block_on(namespaces.get_opt(name))
            .map_err(|e| self.refused(&object, e))?;
        let Some(namespace) = found else {
            return Ok(false);
        };
        let ours = namespace
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(INSTANCE_LABEL))
            .is_some_and(|v| v == name);
        if !ours {
            return Err(ClusterError::NotOurs {
                object,
                label: format!("{INSTANCE_LABEL}={name}"),
            });
        }
        self.runtime
            .block_on(namespaces.delete(name, &DeleteParams::foreground()))
            .map_err(|e| self.refused(&object, e))?;
        progress(&format!("{object}: deleting"));
        let began = Instant::now();
        loop {
            let left = self
                .runtime
                .block_on(namespaces.get_opt(name))
                .map_err(|e| self.refused(&object, e))?;
            if left.is_none() {
                progress(&format!("{object} deleted"));
                return Ok(true);
            }
            if began.elapsed() >= timeout {
                return Err(ClusterError::TimedOut {
                    waited: timeout,
                    what: format!("{object} still terminating"),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    fn refused(&self, object: &str, e: kube::Error) -> ClusterError {
        refused_by(&self.server, object, e)
    }

    /// The API of an object's kind, the object as `Kind/name`, and its document.
    fn api_of(&self, object: &Object) -> (Api<DynamicObject>, String, serde_json::Value) {
        let value = serde_json::to_value(object).expect("Kubernetes objects serialize");
        let meta = &value["metadata"];
        let resource = match object {
            Object::Namespace(_) => ApiResource::erase::<Namespace>(&()),
            Object::ConfigMap(_) => ApiResource::erase::<ConfigMap>(&()),
            Object::Pod(_) => ApiResource::erase::<Pod>(&()),
            Object::Service(_) => ApiResource::erase::<Service>(&()),
            Object::Job(_) => ApiResource::erase::<Job>(&()),
            Object::Network(_) => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition"),
                "network-attachment-definitions",
            ),
        };
        let api = match meta["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let label = format!("{}/{}", resource.kind, meta["name"].as_str().unwrap_or_default());
        (api, label, value)
    }
}

/// How many hop pods `manifests` makes.
pub fn hop_pods(manifests: &Manifests) -> usize {
    manifests.chain.iter().filter(|o| matches!(o, Object::Pod(_))).count()
}

/// A pod's condition of `kind`: its status and message.
fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<(&'a str, &'a str)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status.as_str(), c.message.as_deref().unwrap_or("")))
}

/// An error about `object` from the API server at `server`: its own reason where it
/// gave one, else why no answer came (every cause, down to the socket's).
fn refused_by(server: &str, object: &str, e: kube::Error) -> ClusterError {
    match e {
        kube::Error::Api(status) => ClusterError::Refused {
            object: object.to_string(),
            reason: if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            },
        },
        other => {
            let mut reason = format!("no answer from the API server at {server}: {other}");
            let mut cause = std::error::Error::source(&other);
            while let Some(c) = cause {
                // Some errors print their cause in their own words already.
                let text = c.to_string();
                if !reason.contains(&text) {
                    reason.push_str(&format!(": {text}"));
                }
                cause = c.source();
            }
            ClusterError::Unreachable {
                object: object.to_string(),
                reason,
            }
        }
    }
}

fn config_error(target: &Target, reason: String) -> ClusterError {
    ClusterError::Config {
        kubeconfig: match &target.kubeconfig {
            Some(p) => p.display().to_string(),
            None => "the kubeconfig (KUBECONFIG, else ~/.kube/config)".into(),
        },
        reason: match &target.context {
            Some(c) => format!("context `{c}`: {reason}"),
            None => reason,
        },
    }
}
