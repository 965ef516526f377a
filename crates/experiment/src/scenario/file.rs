//! A scenario file (and the flags for the common cases) resolved into a [`Scenario`]:
//! every group's chains built from its template, each chain's share of the rate, the
//! hosts and cores, everything checked before anything runs; an error names the file
//! (or flag), the key and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use sfclab_traffic::Rate;

use super::{ChainGroup, Hosts, Scenario, ScenarioError, ScenarioFlags, Shape, presets};
use crate::chain_file::Experiment;
use crate::chaining::Chaining;
use crate::settings::{ChainingSetting, ReceiveWait, Settings};

/// A scenario file's keys. Without `groups`, the chains' own keys (`chains`, `shape`,
/// `vnf`, `chain`, `vnf_rate_cap`, `standby`, `bidirectional`) describe one group.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScenarioFile {
    name: Option<String>,
    description: Option<String>,
    chains: Option<usize>,
    shape: Option<Shape>,
    vnf: Option<Value>,
    chain: Option<PathBuf>,
    vnf_rate_cap: Option<String>,
    standby: Option<usize>,
    bidirectional: Option<bool>,
    split: Option<bool>,
    groups: Option<Vec<GroupFile>>,
    #[serde(default)]
    traffic: BTreeMap<String, Value>,
    #[serde(default)]
    run: BTreeMap<String, Value>,
    vnf_cores: Option<Value>,
    repeat: Option<usize>,
    line_rate: Option<String>,
    nic_capacity: Option<String>,
    hosts: Option<HostsFile>,
}

/// One entry of `groups:`: like chains, their template and their own traffic.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    name: Option<String>,
    chains: Option<usize>,
    shape: Option<Shape>,
    vnf: Option<Value>,
    chain: Option<PathBuf>,
    /// Traffic keys over the scenario's; a `rate` here is the group's own (split across
    /// its chains and directions), not a share of the scenario's.
    #[serde(default)]
    traffic: BTreeMap<String, Value>,
    vnf_rate_cap: Option<String>,
    standby: Option<usize>,
    bidirectional: Option<bool>,
    split: Option<bool>,
}

/// A scenario file's `hosts:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostsFile {
    count: Option<usize>,
    vnfs: Option<Vec<usize>>,
    sink: Option<usize>,
    link: Option<String>,
    charge_tunnel: Option<bool>,
}

/// A scenario file, or a chain file (its `chain:` a list) as a scenario of one chain of
/// it: its `hosts:` place that chain, its traffic and run settings are the chain's.
pub(super) fn parse_file(text: &str, origin: &str, path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let err = |key: String, reason: String| Blame { origin }.file(&key, reason);
    let de_err = |e: serde_path_to_error::Error<serde_json::Error>, prefix: &str| {
        let key = e.path().to_string();
        err(
            if key == "." {
                prefix.trim_end_matches('.').to_string()
            } else {
                format!("{prefix}{key}")
            },
            e.into_inner().to_string(),
        )
    };
    let value: Value = serde_saphyr::from_str(text).map_err(|e| err(String::new(), format!("not valid YAML: {e}")))?;
    if value.get("chain").is_some_and(Value::is_array) {
        let hosts = match value.get("hosts") {
            Some(h) => Some(serde_path_to_error::deserialize(h.clone()).map_err(|e| de_err(e, "hosts."))?),
            None => None,
        };
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        return Ok(ScenarioFile {
            name: text("name"),
            description: text("description"),
            chain: path.file_name().map(PathBuf::from),
            hosts,
            ..ScenarioFile::default()
        });
    }
    serde_path_to_error::deserialize(value).map_err(|e| de_err(e, ""))
}

/// One group as given, whichever way: a `groups:` entry, or the scenario's own keys and
/// the flags.
struct GroupInput {
    /// Prefix of the group's keys in errors: `groups[1].`, or nothing.
    key: String,
    name: Option<String>,
    count: usize,
    shape: Option<Shape>,
    vnf: Option<Value>,
    chain: Option<PathBuf>,
    traffic: BTreeMap<String, Value>,
    /// The licence and where it was given.
    vnf_rate_cap: Option<(String, String)>,
    standby: usize,
    bidirectional: Option<bool>,
    /// Each NF of `vnf` a VNF of its own.
    split: bool,
}

/// What the scenario as a whole says that every group's resolution needs.
struct Context<'a> {
    origin: &'a str,
    /// The command line's settings: they win over every file's.
    settings: &'a Settings,
    /// The scenario's settings (its `traffic` and `run` over the command line's).
    layered: &'a Settings,
    /// The chains span several hosts.
    multi_host: bool,
    veth: bool,
    one_way: bool,
}

/// A group resolved: its description, its chains' template, and whether it states a
/// rate of its own.
struct Resolved {
    group: ChainGroup,
    template: Experiment,
    own_rate: bool,
}

pub(super) fn resolve(
    mut f: ScenarioFile,
    origin: &str,
    dir: &Path,
    flags: &ScenarioFlags,
    settings: &Settings,
) -> Result<Scenario, ScenarioError> {
    let blame = Blame { origin };
    let layered = layered_settings(&f, settings, &blame)?;
    let veth = layered.run.chaining == Some(ChainingSetting::Veth);
    let host_file = f.hosts.take().unwrap_or_default();
    let host_count = host_count(flags, &host_file, &blame)?;
    let multi_host = host_count > 1;
    // A line rate by its flag, else by the file's key.
    let rate_of = |key: &str, flag: &Option<String>, file: &Option<String>| match (flag, file) {
        (Some(text), _) => line_rate(text).map(Some).map_err(|r| blame.flag(key, r)),
        (None, Some(text)) => line_rate(text).map(Some).map_err(|r| blame.file(key, r)),
        (None, None) => Ok(None),
    };
    let line_rate = rate_of("line_rate", &flags.line_rate, &f.line_rate)?;
    let nic_capacity = rate_of("nic_capacity", &flags.nic_capacity, &f.nic_capacity)?;
    if multi_host && nic_capacity.is_some() {
        return Err(blame.file(
            "nic_capacity",
            "is one NIC's, and each host has one: emulated on one host so far".into(),
        ));
    }

    let inputs = group_inputs(&mut f, origin, dir, flags)?;
    let cx = Context {
        origin,
        settings,
        layered: &layered,
        multi_host,
        veth,
        one_way: flags.one_way,
    };
    let resolved = inputs
        .into_iter()
        .map(|g| resolve_group(g, &cx))
        .collect::<Result<Vec<_>, _>>()?;
    check_groups_agree(&resolved, &blame)?;
    let first = &resolved[0];
    if veth && multi_host {
        return Err(blame.file(
            "run.chaining",
            "hosts join places on one host by memif and cross by tunnels: leave `chaining` out".into(),
        ));
    }
    let hosts = hosts_placed((host_count, &host_file), flags, &resolved, &blame)?;
    let tester_core = crate::chain_file::tester_core(first.template.settings.core);
    let vnf_cores = vnf_cores_of(flags, &f, tester_core, &blame)?;
    let search = scenario_search(flags, &resolved, &blame)?;
    // Checked last: everything else about the scenario was found sound first.
    let repeat = flags.repeat.or(f.repeat).unwrap_or(1);
    if repeat == 0 {
        return Err(blame.file("repeat", "at least one repetition".into()));
    }

    let Shared {
        groups,
        chains,
        standby,
        offered,
    } = share_rates(resolved, &|key: &str, reason: String| blame.file(key, reason))?;
    let name = f.name.unwrap_or_else(|| {
        groups
            .iter()
            .map(|g| format!("{} x {}", g.chains, g.name))
            .collect::<Vec<_>>()
            .join(" + ")
    });
    Ok(Scenario {
        name,
        description: f.description,
        groups,
        chains,
        standby,
        offered,
        line_rate,
        nic_capacity,
        search,
        search_per_chain: flags.search_per_chain,
        hosts,
        veth,
        vnf_cores,
        tester_core,
        repeat,
        attached: None,
    })
}

/// Who is to blame for a bad setting: the scenario file (`origin`) or a flag.
struct Blame<'a> {
    origin: &'a str,
}

impl Blame<'_> {
    /// The file's `key` cannot work.
    fn file(&self, key: &str, reason: String) -> ScenarioError {
        ScenarioError {
            origin: self.origin.to_string(),
            key: key.to_string(),
            reason,
        }
    }

    /// The flag for `key` (`--key-name`) cannot work.
    fn flag(&self, key: &str, reason: String) -> ScenarioError {
        ScenarioError {
            origin: format!("--{}", key.replace('_', "-")),
            key: key.to_string(),
            reason,
        }
    }
}

/// The scenario's settings, between each chain file's and the command line's. Scenarios
/// join their VNFs by memif unless told (`veth` is the other chaining that runs many
/// chains), in interrupt mode unless told: VNFs share cores.
fn layered_settings(f: &ScenarioFile, settings: &Settings, blame: &Blame) -> Result<Settings, ScenarioError> {
    let mut layered = settings.clone();
    for (section, keys) in [("traffic", &f.traffic), ("run", &f.run)] {
        layered =
            layer(layered, keys, settings).map_err(|(key, reason)| blame.file(&format!("{section}.{key}"), reason))?;
    }
    if !layered.gives("chaining") {
        layered = layered.chaining(ChainingSetting::Memif);
    }
    if !layered.gives("memif_wait") && layered.run.chaining == Some(ChainingSetting::Memif) {
        layered = layered.memif_wait(ReceiveWait::INTERRUPT);
    }
    Ok(layered)
}

/// The hosts the scenario runs on: `--hosts`, else `hosts.count`, else one.
fn host_count(flags: &ScenarioFlags, host_file: &HostsFile, blame: &Blame) -> Result<usize, ScenarioError> {
    let max = sfclab_topology::MAX_HOSTS;
    match (flags.hosts, host_file.count) {
        (Some(c), _) if c == 0 || c > max => Err(blame.flag("hosts", format!("{c} hosts: 1 to {max}"))),
        (None, Some(c)) if c == 0 || c > max => Err(blame.file("hosts.count", format!("{c} hosts: 1 to {max}"))),
        (a, b) => Ok(a.or(b).unwrap_or(1)),
    }
}

/// Every group has a name of its own and group 0's run settings: a scenario has one run.
fn check_groups_agree(resolved: &[Resolved], blame: &Blame) -> Result<(), ScenarioError> {
    let first = &resolved[0];
    for (k, r) in resolved.iter().enumerate().skip(1) {
        let key = |what: &str| format!("groups[{k}].{what}");
        if let Some(j) = resolved[..k].iter().position(|o| o.group.name == r.group.name) {
            return Err(blame.file(
                &key("name"),
                format!(
                    "`{}` names group {j} too: give each group a `name` of its own",
                    r.group.name
                ),
            ));
        }
        if let Some(why) = run_differs(&first.template, &r.template) {
            return Err(blame.file(
                &key("chain"),
                format!(
                    "its run settings differ from group 0's ({why}): a scenario has one run; give `run:` in the scenario"
                ),
            ));
        }
    }
    Ok(())
}

/// Where each chain's VNFs and the tester sit across several hosts; `None` on one host,
/// where a setting for several is refused.
fn hosts_placed(
    (host_count, host_file): (usize, &HostsFile),
    flags: &ScenarioFlags,
    resolved: &[Resolved],
    blame: &Blame,
) -> Result<Option<Hosts>, ScenarioError> {
    if host_count > 1 {
        let vnfs = resolved[0].template.hops.len();
        if let Some((k, r)) = resolved.iter().enumerate().find(|(_, r)| r.template.hops.len() != vnfs) {
            return Err(blame.file(
                &format!("groups[{k}]"),
                format!(
                    "its chains have {} VNF(s), group 0's {vnfs}: the hosts place every chain's VNFs by one `hosts.vnfs`",
                    r.template.hops.len()
                ),
            ));
        }
        return Ok(Some(hosts_of(host_count, host_file, flags, vnfs, blame.origin)?));
    }
    let given = [
        (flags.vnf_hosts.is_some() || host_file.vnfs.is_some(), "vnf_hosts"),
        (flags.sink_host.is_some() || host_file.sink.is_some(), "sink_host"),
        (flags.host_link.is_some() || host_file.link.is_some(), "host_link"),
        (
            flags.charge_tunnel || host_file.charge_tunnel.is_some(),
            "charge_tunnel",
        ),
    ];
    if let Some((_, key)) = given.iter().find(|g| g.0) {
        return Err(blame.file(
            key,
            "applies to several hosts: add `hosts: { count: 2 }` (`--hosts 2`)".into(),
        ));
    }
    Ok(None)
}

/// The cores the VNFs share: `--vnf-cores`, else `vnf_cores`, else every core but the
/// tester's; each one this process may use.
fn vnf_cores_of(
    flags: &ScenarioFlags,
    f: &ScenarioFile,
    tester_core: Option<usize>,
    blame: &Blame,
) -> Result<Vec<usize>, ScenarioError> {
    let vnf_cores = match flags.vnf_cores.clone().or_else(|| f.vnf_cores.as_ref().map(text_of)) {
        Some(list) => parse_cpu_list(&list).map_err(|reason| match &flags.vnf_cores {
            Some(_) => blame.flag("vnf_cores", reason),
            None => blame.file("vnf_cores", reason),
        })?,
        None => default_vnf_cores(tester_core),
    };
    let allowed = allowed_cores();
    if let Some(c) = vnf_cores.iter().find(|c| !allowed.contains(c)) {
        return Err(blame.file(
            "vnf_cores",
            format!("core {c} is not one this process may use ({allowed:?})"),
        ));
    }
    Ok(vnf_cores)
}

/// The search the flags ask for, if any. A search of the aggregate sets every chain's
/// rate: a group's own rate is refused.
fn scenario_search(
    flags: &ScenarioFlags,
    resolved: &[Resolved],
    blame: &Blame,
) -> Result<Option<sfclab_measure::SearchConfig>, ScenarioError> {
    if !(flags.search || flags.search_per_chain) {
        return Ok(None);
    }
    if flags.search
        && let Some(k) = resolved.iter().position(|r| r.own_rate)
    {
        return Err(blame.file(
            &format!("groups[{k}].traffic.rate"),
            "a search sets every chain's rate, split evenly: leave the groups' rates out (or search per chain)".into(),
        ));
    }
    search_config(flags, &resolved[0].template)
        .map(Some)
        .map_err(|(flag, reason)| blame.flag(&flag.replace('-', "_"), reason))
}

/// The groups as given: `groups:`'s entries, or one from the scenario's own keys and
/// the flags (each flag wins over its key).
fn group_inputs(
    f: &mut ScenarioFile,
    origin: &str,
    dir: &Path,
    flags: &ScenarioFlags,
) -> Result<Vec<GroupInput>, ScenarioError> {
    let at_file = |p: PathBuf| if p.is_relative() { dir.join(p) } else { p };
    let Some(list) = f.groups.take() else {
        let chain = match (&flags.chain_file, f.chain.take()) {
            (Some(p), _) => Some(p.clone()),
            (None, p) => p.map(at_file),
        };
        let vnf_rate_cap = match (&flags.vnf_rate_cap, f.vnf_rate_cap.take()) {
            (Some(c), _) => Some(("--vnf-rate-cap".to_string(), c.clone())),
            (None, c) => c.map(|c| (origin.to_string(), c)),
        };
        return Ok(vec![GroupInput {
            key: String::new(),
            name: None,
            count: flags.chains.or(f.chains).unwrap_or(1),
            shape: flags.shape.or(f.shape),
            vnf: flags.vnf.clone().map(Value::String).or_else(|| f.vnf.take()),
            chain,
            traffic: BTreeMap::new(),
            vnf_rate_cap,
            standby: flags.standby.or(f.standby).unwrap_or(0),
            bidirectional: f.bidirectional,
            split: flags.split || f.split.unwrap_or(false),
        }]);
    };
    let err = |key: &str, reason: String| Blame { origin }.file(key, reason);
    if list.is_empty() {
        return Err(err("groups", "at least one group".into()));
    }
    let own_keys = [
        (f.chains.is_some(), "chains"),
        (f.shape.is_some(), "shape"),
        (f.vnf.is_some(), "vnf"),
        (f.chain.is_some(), "chain"),
        (f.vnf_rate_cap.is_some(), "vnf_rate_cap"),
        (f.standby.is_some(), "standby"),
        (f.bidirectional.is_some(), "bidirectional"),
        (f.split.is_some(), "split"),
    ];
    if let Some((_, key)) = own_keys.iter().find(|k| k.0) {
        return Err(err(key, format!("with `groups`, each group gives its own `{key}`")));
    }
    let own_flags = [
        (flags.chains.is_some(), "chains"),
        (flags.shape.is_some(), "shape"),
        (flags.vnf.is_some(), "vnf"),
        (flags.chain_file.is_some(), "chain_file"),
        (flags.vnf_rate_cap.is_some(), "vnf_rate_cap"),
        (flags.standby.is_some(), "standby"),
        (flags.split, "split"),
    ];
    if let Some((_, key)) = own_flags.iter().find(|k| k.0) {
        return Err(Blame { origin }.flag(
            key,
            format!("{origin} gives its chains by `groups`, each its own: edit the file"),
        ));
    }
    Ok(list
        .into_iter()
        .enumerate()
        .map(|(k, g)| GroupInput {
            key: format!("groups[{k}]."),
            name: g.name,
            count: g.chains.unwrap_or(1),
            shape: g.shape,
            vnf: g.vnf,
            chain: g.chain.map(at_file),
            traffic: g.traffic,
            vnf_rate_cap: g.vnf_rate_cap.map(|c| (origin.to_string(), c)),
            standby: g.standby.unwrap_or(0),
            bidirectional: g.bidirectional,
            split: g.split.unwrap_or(false),
        })
        .collect())
}

/// One group: its settings over the scenario's, its template from a chain file or a
/// shape of a VNF, its directions; checked on its own.
fn resolve_group(g: GroupInput, cx: &Context) -> Result<Resolved, ScenarioError> {
    let key = |k: &str| format!("{}{k}", g.key);
    let blame = Blame { origin: cx.origin };
    let err = |k: &str, reason: String| blame.file(&key(k), reason);
    if g.count == 0 {
        return Err(err("chains", "at least one chain".into()));
    }
    // Chains over kernel links carry one direction (a hop forwards both ways between
    // memif rings only).
    let one_way_only = match (cx.multi_host, cx.veth) {
        (true, _) => Some("across hosts"),
        (false, true) => Some("joined by veth"),
        (false, false) => None,
    };
    if let (Some(which), Some(true)) = (one_way_only, g.bidirectional) {
        return Err(err(
            "bidirectional",
            format!("chains {which} carry one direction so far: leave `bidirectional` out"),
        ));
    }
    let bidirectional = !cx.one_way && g.bidirectional.unwrap_or(one_way_only.is_none());
    // The group's traffic over the scenario's; the command line still wins.
    let mut layered = layer(cx.layered.clone(), &g.traffic, cx.settings)
        .map_err(|(k, reason)| err(&format!("traffic.{k}"), reason))?;
    let own_rate = g.traffic.contains_key("rate") && !cx.settings.gives("rate");
    let cap_bps = match &g.vnf_rate_cap {
        Some((cap_origin, cap)) => Some(
            cap.parse::<sfclab_nf::classes::Rate>()
                .map_err(|reason| Blame { origin: cap_origin }.file(&key("vnf_rate_cap"), reason))?
                .0,
        ),
        None => None,
    };
    let (template, shape, vnf) = match &g.chain {
        Some(path) => {
            if let Some((cap_origin, _)) = &g.vnf_rate_cap {
                return Err(Blame { origin: cap_origin }.file(
                    &key("vnf_rate_cap"),
                    "caps the VNFs of `shape` and `vnf`; with a chain file, write the cap into it (a qos policer at the end of each hop)".into(),
                ));
            }
            if g.shape.is_some() || g.vnf.is_some() || g.split {
                return Err(err(
                    "chain",
                    "a chain file gives each chain's hops: leave `shape`, `vnf` and `split` out".into(),
                ));
            }
            let exp = crate::chain_file::load(&path.display().to_string(), &layered)?;
            let vnf = exp.nfs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(" -> ");
            (exp, format!("chain file {}", path.display()), vnf)
        }
        None => preset_template(&g, cap_bps, &mut layered, cx, &err)?,
    };
    if !matches!(template.chaining, Chaining::Memif { .. } | Chaining::Veth { .. }) {
        return Err(blame.file(
            "run.chaining",
            format!(
                "scenarios join their VNFs by memif or veth so far, not `{}`",
                template.chaining
            ),
        ));
    }
    if !template.chaining.dpdk_hops().is_empty() {
        return Err(blame.file("run.dpdk_hops", "scenarios run sfclab VNFs only".into()));
    }
    Ok(Resolved {
        group: ChainGroup {
            name: g.name.unwrap_or_else(|| super::default_group_name(&shape, &vnf)),
            shape,
            vnf,
            chains: g.count,
            vnfs_per_chain: template.hops.len(),
            standby: g.standby,
            bidirectional,
            vnf_rate_cap: g.vnf_rate_cap.map(|(_, c)| c),
            rate: template.traffic.rate,
            frame_sizes: template.traffic.sizes.to_string(),
        },
        template,
        own_rate,
    })
}

/// A group's template from its `shape` and `vnf` (a preset, or entries of its own):
/// its experiment, the shape's label and the VNF's; each VNF capped by `cap_bps` (a
/// licence) when given. Seed 001's traffic profile (IMIX) unless told.
fn preset_template(
    g: &GroupInput,
    cap_bps: Option<u64>,
    layered: &mut Settings,
    cx: &Context,
    err: &dyn Fn(&str, String) -> ScenarioError,
) -> Result<(Experiment, String, String), ScenarioError> {
    if g.split && g.shape.is_some() {
        return Err(err(
            "split",
            "gives each NF of `vnf` a VNF of its own, chained in order: leave `shape` out".into(),
        ));
    }
    let shape = g.shape.unwrap_or(Shape::Pvp);
    let vnf = g.vnf.clone().unwrap_or_else(|| Value::String("router".into()));
    let (entries, label) = presets::vnf_entries(&vnf).map_err(|reason| err("vnf", reason))?;
    // Each VNF's NFs: the VNF's, once per VNF of the shape; or split, one NF each.
    let vnfs: Vec<Vec<Value>> = match g.split {
        true => entries.iter().map(|e| vec![e.clone()]).collect(),
        false => vec![entries.clone(); shape.vnfs()],
    };
    let count = vnfs.len();
    let chain: Vec<Value> = vnfs
        .into_iter()
        .enumerate()
        .map(|(k, mut hop)| {
            if let Some(cap) = cap_bps {
                // Named per VNF as the chain names repeated NFs: `licence`, or
                // `licence1`, `licence2`.
                let name = if count == 1 {
                    "licence".to_string()
                } else {
                    format!("licence{}", k + 1)
                };
                hop.push(presets::licence(&name, cap));
            }
            Value::Array(hop)
        })
        .collect();
    // Seed 001's names: PVP, PVVP; a split VNF of n NFs, a P, n Vs and a P.
    let shape_label = format!("P{}P", "V".repeat(count));
    let label = match g.split {
        true => entries.iter().map(presets::entry_kind).collect::<Vec<_>>().join(" -> "),
        false => label,
    };
    let text = serde_json::json!({ "name": format!("{shape_label} {label}"), "chain": chain }).to_string();
    // Seed 001's traffic profile, unless told (a chain file keeps its own).
    if !layered.gives("size") {
        *layered = layered.clone().size(sfclab_traffic::FrameSizes::imix());
    }
    // Relative paths in the VNF (dpi's rules) are read beside the scenario file.
    let exp = crate::chain_file::parse(&text, cx.origin, layered).map_err(|e| err("vnf", e.reason))?;
    Ok((exp, shape_label, label))
}

/// What differs between two groups' tester settings (the scenario's run is one), if
/// anything.
fn run_differs(a: &Experiment, b: &Experiment) -> Option<String> {
    let (x, y) = (&a.settings, &b.settings);
    let pairs = [
        ("duration", format!("{:?}", x.duration), format!("{:?}", y.duration)),
        ("count", format!("{:?}", x.count), format!("{:?}", y.count)),
        ("warmup", format!("{:?}", x.warmup), format!("{:?}", y.warmup)),
        ("batch", x.batch.to_string(), y.batch.to_string()),
        ("core", format!("{:?}", x.core), format!("{:?}", y.core)),
        ("verify", x.verify.to_string(), y.verify.to_string()),
        ("chaining", a.chaining.to_string(), b.chaining.to_string()),
        (
            "memif_wait",
            format!("{:?}", a.chaining.memif_wait()),
            format!("{:?}", b.chaining.memif_wait()),
        ),
    ];
    pairs
        .into_iter()
        .find(|(_, p, q)| p != q)
        .map(|(k, p, q)| format!("{k} {q} against {p}"))
}

/// Each chain's rate: a group with a rate of its own splits it across its chains and
/// directions; the others split the scenario's rate evenly across all of theirs (as
/// NFVbench does).
fn share_rates(resolved: Vec<Resolved>, err: &dyn Fn(&str, String) -> ScenarioError) -> Result<Shared, ScenarioError> {
    let streams = |g: &ChainGroup| (g.chains * if g.bidirectional { 2 } else { 1 }) as f64;
    let pooled: Vec<&Resolved> = resolved.iter().filter(|r| !r.own_rate).collect();
    // The scenario's rate: its own or the command line's, else the first pooled chain
    // file's (every pooled template carries the same one then).
    let pool_rate = pooled.first().map(|r| r.template.traffic.rate);
    if let (Some(rate), Some(k)) = (
        pool_rate,
        resolved
            .iter()
            .position(|r| !r.own_rate && r.template.traffic.rate != pool_rate.expect("a pool")),
    ) {
        return Err(err(
            &format!("groups[{k}].chain"),
            format!(
                "its chain file asks {} where an earlier group's asks {rate}: give the scenario a `traffic.rate` or each group its own",
                resolved[k].template.traffic.rate
            ),
        ));
    }
    let pool_streams: f64 = pooled.iter().map(|r| streams(&r.group)).sum();
    let scaled = |rate: Rate, by: f64| match rate {
        Rate::Max => Rate::Max,
        Rate::Pps(p) => Rate::Pps(p * by),
        Rate::L1Bps(b) => Rate::L1Bps(b * by),
    };
    let one_pool = pooled.len() == resolved.len();
    let mut groups = Vec::new();
    let mut chains = Vec::new();
    let mut standby = Vec::new();
    for r in resolved {
        let mut g = r.group;
        let per_stream = if r.own_rate {
            scaled(g.rate, 1.0 / streams(&g))
        } else {
            let pool = pool_rate.expect("a pooled group");
            g.rate = scaled(pool, streams(&g) / pool_streams);
            scaled(pool, 1.0 / pool_streams)
        };
        let mut exp = r.template;
        exp.traffic.rate = per_stream;
        chains.extend(std::iter::repeat_n(exp.clone(), g.chains));
        standby.extend(std::iter::repeat_n(exp, g.standby));
        groups.push(g);
    }
    let offered = if one_pool {
        pool_rate.expect("a pool").to_string()
    } else {
        groups
            .iter()
            .map(|g| format!("{} ({})", g.rate, g.name))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    Ok(Shared {
        groups,
        chains,
        standby,
        offered,
    })
}

/// The scenario's rate shared out: the groups (each with the rate asked of it in all),
/// the chains given traffic and the standby instances (group by group), and the offered
/// rate's label.
struct Shared {
    groups: Vec<ChainGroup>,
    chains: Vec<Experiment>,
    standby: Vec<Experiment>,
    offered: String,
}

/// `keys` (a file's section) laid over `base`, but for those `command_line` gives (it
/// wins over every file); an error names the key.
fn layer(
    mut base: Settings,
    keys: &BTreeMap<String, Value>,
    command_line: &Settings,
) -> Result<Settings, (String, String)> {
    for (key, value) in keys {
        if !command_line.gives(key) {
            base = base
                .with(key, &text_of(value))
                .map_err(|reason| (key.clone(), reason))?;
        }
    }
    Ok(base)
}

/// A YAML value as the settings' text (`2Mpps`, `64`, `true`).
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `count` hosts' layout from the file's `hosts:` and the flags (each flag wins).
fn hosts_of(
    count: usize,
    file: &HostsFile,
    flags: &ScenarioFlags,
    vnfs: usize,
    origin: &str,
) -> Result<Hosts, ScenarioError> {
    let blame = Blame { origin };
    let at = |flag: bool, key: &str, reason: String| {
        if flag {
            blame.flag(key, reason)
        } else {
            blame.file(&format!("hosts.{key}"), reason)
        }
    };
    let on_a_host = |h: usize| (1..=count).contains(&h);
    let range = format!("hosts are 1 to {count}");
    let from_flag = flags.vnf_hosts.is_some();
    let placed = match flags.vnf_hosts.clone().or_else(|| file.vnfs.clone()) {
        Some(list) => {
            let key = if from_flag { "vnf_hosts" } else { "vnfs" };
            if list.len() != vnfs {
                return Err(at(
                    from_flag,
                    key,
                    format!("{} host(s) for {vnfs} VNF(s) per chain: one each", list.len()),
                ));
            }
            if let Some(h) = list.iter().find(|h| !on_a_host(**h)) {
                return Err(at(from_flag, key, format!("host {h}: {range}")));
            }
            list
        }
        // Seed 003's halves on two hosts; on more, in order over hosts 2 to the last.
        None if count == 2 => (0..vnfs).map(|i| if i < vnfs / 2 { 1 } else { 2 }).collect(),
        None => (0..vnfs).map(|i| 2 + i * (count - 1) / vnfs.max(1)).collect(),
    };
    let sink = match (flags.sink_host, file.sink) {
        (Some(h), _) if !on_a_host(h) => return Err(at(true, "sink_host", format!("host {h}: {range}"))),
        (None, Some(h)) if !on_a_host(h) => return Err(at(false, "sink", format!("host {h}: {range}"))),
        (a, b) => a.or(b).unwrap_or(*placed.last().expect("a VNF")),
    };
    let (link_flag, link_text) = match (&flags.host_link, &file.link) {
        (Some(t), _) => (true, t.clone()),
        (None, Some(t)) => (false, t.clone()),
        (None, None) => (false, "1Gbit/s".to_string()),
    };
    let rate_bps = line_rate(&link_text).map_err(|r| at(link_flag, if link_flag { "host_link" } else { "link" }, r))?;
    let hosts = Hosts {
        count,
        vnfs: placed,
        sink,
        link: sfclab_topology::LinkShape {
            rate_bps,
            charge_tunnel: flags.charge_tunnel || file.charge_tunnel.unwrap_or(false),
        },
    };
    let places = hosts.places();
    let key = if from_flag { "vnf_hosts" } else { "vnfs" };
    if hosts.crossings() == 0 {
        return Err(at(
            from_flag,
            key,
            "every place is on host 1: nothing crosses the cable (put a VNF or the sink on host 2)".into(),
        ));
    }
    if let Some(idle) = (0..count).find(|h| !places.contains(h)) {
        return Err(at(
            from_flag,
            key,
            format!(
                "host {} holds no place of a chain: place a VNF or the sink there, or give fewer hosts",
                idle + 1
            ),
        ));
    }
    Ok(hosts)
}

/// A line rate: bits per second at layer 1 (`10Gbit/s`, `2.5Gbps`).
fn line_rate(text: &str) -> Result<f64, String> {
    match text.parse::<Rate>()? {
        Rate::L1Bps(b) if b > 0.0 => Ok(b),
        _ => Err(format!(
            "`{text}` is not a line rate: write bits per second, `10Gbit/s` or `2.5Gbps`"
        )),
    }
}

/// `1`, `0-3`, `0,2-3`: the cores, ascending, each once.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cores = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || format!("`{text}` is not a core list (write `1`, `0-3` or `0,2-3`)");
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.parse(), part.parse()),
        };
        let (lo, hi) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
        if lo > hi {
            return Err(bad());
        }
        cores.extend(lo..=hi);
    }
    cores.sort_unstable();
    cores.dedup();
    Ok(cores)
}

fn allowed_cores() -> Vec<usize> {
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect()
}

/// Every allowed core but the tester's; the tester's own when it is the only one.
fn default_vnf_cores(tester: Option<usize>) -> Vec<usize> {
    let all = allowed_cores();
    let others: Vec<usize> = all.iter().copied().filter(|&c| Some(c) != tester).collect();
    if others.is_empty() { all } else { others }
}

/// The search's settings from the flags; an error names the flag.
fn search_config(
    flags: &ScenarioFlags,
    template: &Experiment,
) -> Result<sfclab_measure::SearchConfig, (&'static str, String)> {
    let method: sfclab_measure::Method = flags.method.parse().map_err(|e| ("method", e))?;
    let final_duration = template.settings.duration.unwrap_or(std::time::Duration::from_secs(1));
    let mut goals = Vec::new();
    for g in &flags.goals {
        goals.push(crate::search::parse_goal(g).map_err(|e| ("goals", e))?);
    }
    let resolution = crate::search::parse_resolution(&flags.resolution).map_err(|e| ("resolution", e))?;
    let (min_pps, max_pps) = crate::search::parse_rate_range(
        &flags.min_rate,
        flags.max_rate.as_deref(),
        template.traffic.sizes.mean(),
    )?;
    let cfg = sfclab_measure::SearchConfig {
        method,
        goals,
        min_pps,
        max_pps,
        resolution,
        final_duration,
        initial_duration: final_duration.min(std::time::Duration::from_millis(125)),
        preceding_targets: 2,
        max_trials: 200,
    };
    // Without --max-rate the top is measured first; check the rest with a stand-in.
    sfclab_measure::SearchConfig {
        max_pps: if max_pps.is_finite() { max_pps } else { min_pps * 2.0 },
        ..cfg.clone()
    }
    .validate()?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str, flags: &ScenarioFlags) -> Result<Scenario, ScenarioError> {
        let f = parse_file(text, "s.yaml", Path::new("s.yaml"))?;
        resolve(f, "s.yaml", Path::new("."), flags, &Settings::default())
    }

    /// A chain file placed on hosts is a scenario of one chain of it: its hops the
    /// VNFs, its `hosts:` their places, its traffic the chain's; a bad `hosts:` key is
    /// named as the scenario's.
    #[test]
    fn a_chain_file_with_hosts_is_a_scenario_of_one_chain() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/chains/dual-host.yaml");
        let s = Scenario::load(Some(&path), &ScenarioFlags::default(), &Settings::default()).unwrap();
        assert_eq!(s.chains().len(), 1);
        assert_eq!(s.name, "dual-host");
        let hosts = s.hosts.as_ref().unwrap();
        assert_eq!((hosts.count, hosts.vnfs.clone(), hosts.sink), (2, vec![1, 2], 1));
        assert_eq!(s.chains()[0].hops.len(), 2, "each router a VNF");
        assert_eq!(s.directions(0), 1, "one way across hosts");
        assert_eq!(pps(&s.chains()[0]), 40_000.0);
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "hosts: { count: 2, rack: 1 }\nchain: [forwarder]\n").unwrap();
        let e = Scenario::load(Some(&bad), &ScenarioFlags::default(), &Settings::default()).unwrap_err();
        assert_eq!(e.key, "hosts.rack", "{e}");
        assert!(e.reason.contains("unknown field `rack`"), "{e}");
    }

    fn pps(exp: &Experiment) -> f64 {
        match exp.traffic.rate {
            Rate::Pps(p) => p,
            other => panic!("{other:?}"),
        }
    }

    /// Groups: chains numbered group after group, each from its own template; a group's
    /// own rate split over its own streams, the scenario's over the other groups'.
    #[test]
    fn groups_split_their_rates_over_their_own_streams() {
        let s = scenario(
            "groups:\n\
             - { name: a, chains: 2, vnf: forwarder }\n\
             - { name: b, chains: 1, shape: pvvp, bidirectional: false, traffic: { rate: 30kpps, size: 512 } }\n\
             - { name: c, chains: 1, vnf: forwarder, bidirectional: false, standby: 2 }\n\
             traffic: { rate: 50kpps }\n",
            &ScenarioFlags::default(),
        )
        .unwrap();
        assert_eq!(s.chains().len(), 4);
        assert_eq!(s.standby().len(), 2);
        let names: Vec<&str> = (0..4).map(|c| s.group_of(c).name.as_str()).collect();
        assert_eq!(names, ["a", "a", "b", "c"]);
        assert_eq!((0..4).map(|c| s.directions(c)).collect::<Vec<_>>(), [2, 2, 1, 1]);
        // a and c share 50 kpps over 2 x 2 + 1 streams: 10 kpps each; b's 30 kpps its own.
        let rates: Vec<f64> = s.chains().iter().map(pps).collect();
        assert_eq!(rates, [10e3, 10e3, 30e3, 10e3]);
        assert_eq!(s.chains()[2].hops.len(), 2);
        assert_eq!(s.chains()[2].traffic.sizes.to_string(), "512");
        assert_eq!(s.chains()[0].traffic.sizes.to_string(), "imix");
        assert_eq!(s.groups()[0].rate, Rate::Pps(40e3));
        assert_eq!(s.groups()[2].rate, Rate::Pps(10e3));
        assert_eq!(s.offered, "0.04Mpps (a) + 0.03Mpps (b) + 0.01Mpps (c)");
        assert_eq!(s.name, "2 x a + 1 x b + 1 x c");
        assert!(s.single_group().is_none());
        // 2 + 2 + 1 chain VNFs and 2 standby, over the cores.
        assert_eq!(s.oversubscription(), 7.0 / s.vnf_cores.len() as f64);
    }

    /// `split`: each NF of the VNF a VNF of its own, in order, each with its licence.
    #[test]
    fn a_split_vnf_is_a_chain_of_single_feature_vnfs() {
        let s = scenario(
            "chains: 2\nvnf: multi-feature\nsplit: true\nvnf_rate_cap: 1Gbit\ntraffic: { rate: 40kpps }\n",
            &ScenarioFlags::default(),
        )
        .unwrap();
        let g = s.single_group().unwrap();
        assert_eq!(g.shape, "PVVVVP");
        assert_eq!(g.vnf, "nat44 -> firewall -> qos -> dpi");
        assert_eq!(g.vnfs_per_chain, 4);
        let hops: Vec<Vec<&str>> = s.chains()[0]
            .hop_nfs()
            .iter()
            .map(|h| h.iter().map(|(n, _)| n.as_str()).collect())
            .collect();
        assert_eq!(
            hops,
            [
                ["nat44", "licence1"],
                ["firewall", "licence2"],
                ["qos3", "licence3"],
                ["dpi", "licence4"]
            ]
        );
        // (The chain numbers a repeated kind: the licences are qos policers too.)
        // The flag says the same; with a shape it is refused, naming the key.
        let flags = ScenarioFlags {
            split: true,
            vnf: Some("multi-feature".into()),
            ..ScenarioFlags::default()
        };
        assert_eq!(scenario("chains: 1\n", &flags).unwrap().chains()[0].hops.len(), 4);
        let e = scenario(
            "vnf: multi-feature\nsplit: true\nshape: pvvp\n",
            &ScenarioFlags::default(),
        )
        .unwrap_err();
        assert_eq!(e.key, "split", "{e}");
        let e = scenario("groups: [{ chains: 1 }]\nsplit: true\n", &ScenarioFlags::default()).unwrap_err();
        assert_eq!(e.key, "split", "{e}");
    }

    /// A scenario without groups is one group of its own keys, as before.
    #[test]
    fn a_scenario_without_groups_is_one_group() {
        let s = scenario(
            "chains: 3\nshape: pvvp\nvnf: forwarder\ntraffic: { rate: 60kpps }\n",
            &ScenarioFlags::default(),
        )
        .unwrap();
        let g = s.single_group().expect("one group");
        assert_eq!((g.name.as_str(), g.chains, g.vnfs_per_chain), ("PVVP forwarder", 3, 2));
        assert_eq!(s.offered, "0.06Mpps");
        assert!(s.chains().iter().all(|c| pps(c) == 10e3));
    }

    #[test]
    fn groups_refuse_what_they_cannot_mean() {
        let flags = ScenarioFlags::default();
        let cases = [
            ("groups: []\n", "groups", "at least one group"),
            (
                "groups: [{ vnf: router }]\nvnf: router\n",
                "vnf",
                "each group gives its own",
            ),
            (
                "groups: [{ vnf: router }, { vnf: router }]\n",
                "groups[1].name",
                "names group 0 too",
            ),
            ("groups: [{ chains: 0 }]\n", "groups[0].chains", "at least one chain"),
            ("groups: [{ vnf: bridge }]\n", "groups[0].vnf", "not a VNF preset"),
            ("groups: [{ traffic: { rate: fast } }]\n", "groups[0].traffic.rate", ""),
            ("groups: [{ links: 2 }]\n", "groups[0]", "unknown field `links`"),
            (
                "hosts: { count: 2 }\ngroups: [{ name: a }, { name: b, shape: pvvp }]\n",
                "groups[1]",
                "the hosts place every chain's VNFs",
            ),
            (
                "run: { chaining: veth }\ngroups: [{ bidirectional: true }]\n",
                "groups[0].bidirectional",
                "one direction so far",
            ),
        ];
        for (text, key, says) in cases {
            let e = scenario(text, &flags).expect_err(text);
            assert!(e.key.starts_with(key), "{text}: {e}");
            assert!(e.reason.contains(says), "{text}: {e}");
            assert_eq!(e.origin, "s.yaml", "{text}");
        }
        let two = "groups: [{ name: a }, { name: b, traffic: { rate: 1kpps } }]\n";
        let chains = ScenarioFlags {
            chains: Some(2),
            ..ScenarioFlags::default()
        };
        let e = scenario(two, &chains).unwrap_err();
        assert_eq!(e.origin, "--chains", "{e}");
        let search = ScenarioFlags {
            search: true,
            goals: vec!["ndr".into()],
            method: "binary".into(),
            resolution: "1%".into(),
            min_rate: "10kpps".into(),
            ..ScenarioFlags::default()
        };
        let e = scenario(two, &search).unwrap_err();
        assert_eq!(e.key, "groups[1].traffic.rate", "{e}");
        let per_chain = ScenarioFlags {
            search: false,
            search_per_chain: true,
            ..search
        };
        assert!(scenario(two, &per_chain).is_ok());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("0-3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_cpu_list("3, 0-1,1").unwrap(), vec![0, 1, 3]);
        for bad in ["", "a", "2-1", "1-", "-"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }
}
