//! Chain files and the `--chain` shorthand, resolved into what the runtime needs.
//!
//! A chain file (YAML) has three sections, all optional but `chain`:
//!
//! ```yaml
//! traffic: { size: imix, flows: 1024, ip: v4, rate: max, latency_probe_pps: 10000 }
//! run:     { duration: 5s, warmup: 500ms, batch: 32, core: 1, accounting: true }
//! chain:
//!   - forwarder: { dst_mac: "02:00:00:00:00:02" }
//!   - synthetic: { cycles: 100, working_set: 64KiB, accesses: 4 }
//!   - noop
//! ```
//!
//! Errors name the file, the place (`traffic`, `run`, or `chain[i] (kind)`), the key and
//! why. Unknown keys are errors, never ignored.

use serde::Deserialize;
use serde_json::Value;
use sfclab_nf::NfConfig;
use sfclab_runtime::{LinkMode, PipelineSettings, Placement, RunSettings};
use sfclab_traffic::{FrameSizes, GeneratorConfig, IpVersion, Rate};
use std::time::Duration;

/// The chain run when no file and no `--chain` is given.
pub const DEFAULT_CHAIN: &str = include_str!("../../../examples/chains/default.yaml");

/// What a bad config is: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// The line of the file the place and key are on, when it can be found.
    pub line: Option<usize>,
    /// `traffic`, `run`, `chain[2] (synthetic)`, or empty for the file as a whole.
    pub place: String,
    pub key: String,
    pub reason: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.place.is_empty() {
            write!(f, ": {}", self.place)?;
        }
        if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// Settings given on the command line; each one overrides the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub size: Option<String>,
    pub flows: Option<u32>,
    pub ip: Option<IpVersion>,
    pub rate: Option<String>,
    pub latency_probe_pps: Option<f64>,
    pub duration: Option<String>,
    pub warmup: Option<String>,
    pub count: Option<u64>,
    pub batch: Option<usize>,
    pub core: Option<usize>,
    pub accounting: Option<bool>,
    pub verify: Option<bool>,
    pub pool_size: Option<usize>,
    pub runtime: Option<String>,
    pub placement: Option<String>,
    pub cores: Option<Vec<usize>>,
    pub generator_core: Option<usize>,
    pub links: Option<String>,
    pub ring_size: Option<usize>,
    pub rx_queue: Option<usize>,
    pub stage_budget: Option<usize>,
    pub flow_control: Option<bool>,
    pub replicas: Option<usize>,
}

impl Overrides {
    /// Whether the command line gave the setting a chain file calls `key` (its `run:` or
    /// `traffic:` key), so that an error in it names the flag and not the file.
    fn given(&self, key: &str) -> bool {
        match key {
            "size" => self.size.is_some(),
            "flows" => self.flows.is_some(),
            "ip" => self.ip.is_some(),
            "rate" => self.rate.is_some(),
            "latency_probe_pps" => self.latency_probe_pps.is_some(),
            "duration" => self.duration.is_some() || self.count.is_some(),
            "warmup" => self.warmup.is_some(),
            "count" => self.count.is_some(),
            "batch" => self.batch.is_some(),
            "core" => self.core.is_some(),
            "pool_size" => self.pool_size.is_some(),
            "runtime" => self.runtime.is_some(),
            "placement" => self.placement.is_some(),
            "cores" => self.cores.is_some(),
            "generator_core" => self.generator_core.is_some(),
            "links" => self.links.is_some(),
            "ring_size" => self.ring_size.is_some(),
            "rx_queue" => self.rx_queue.is_some(),
            "stage_budget" => self.stage_budget.is_some(),
            "flow_control" => self.flow_control.is_some(),
            "replicas" => self.replicas.is_some(),
            _ => false,
        }
    }

    /// An error about a setting the command line gave is the flag's, not the file's.
    fn blame(&self, e: ConfigError) -> ConfigError {
        if matches!(e.place.as_str(), "traffic" | "run") && self.given(&e.key) {
            let flag = if e.key == "duration" && self.duration.is_none() {
                "--count".to_string()
            } else {
                format!("--{}", e.key.replace('_', "-"))
            };
            ConfigError {
                file: flag,
                line: None,
                place: String::new(),
                key: String::new(),
                reason: e.reason,
            }
        } else {
            e
        }
    }
}

/// The 1-based line of a chain file where `place` (`traffic`, `run`, `chain[i] (kind)`)
/// and its `key` are written, for block-style YAML; `None` when it cannot tell (flow
/// style, an unusual layout): the error then names the place and key alone.
fn line_of(text: &str, place: &str, key: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let top = |name: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(name) && l[name.len()..].trim_start().starts_with(':'))
    };
    let section_end = |start: usize| {
        (start + 1..lines.len())
            .find(|&i| {
                let l = lines[i];
                !l.trim().is_empty() && !l.starts_with(' ') && !l.starts_with('\t') && !l.starts_with('#')
            })
            .unwrap_or(lines.len())
    };
    let key_in = |from: usize, to: usize| {
        (from..to).find(|&i| {
            let l = lines[i]
                .trim_start()
                .trim_start_matches("- ")
                .trim_start_matches('{')
                .trim_start();
            !key.is_empty() && (l.starts_with(&format!("{key}:")) || lines[i].contains(&format!(" {key}:")))
        })
    };
    let found = if let Some(index) = place.strip_prefix("chain[") {
        let i: usize = index.split(']').next()?.parse().ok()?;
        let start = top("chain")?;
        let end = section_end(start);
        let item = (start + 1..end)
            .filter(|&j| lines[j].trim_start().starts_with("- "))
            .nth(i)?;
        let item_end = (item + 1..end)
            .find(|&j| lines[j].trim_start().starts_with("- "))
            .unwrap_or(end);
        if key.is_empty() {
            Some(item)
        } else {
            key_in(item, item_end).or(Some(item))
        }
    } else if place.is_empty() {
        None
    } else {
        let start = top(place)?;
        // The key's own line, or the section's (flow style: `run: {batch: 0}`).
        key_in(start, section_end(start)).or(Some(start))
    };
    found.map(|i| i + 1)
}

/// Serde's words for what it expected, in a chain file's terms (no Rust type names).
fn plain(message: &str) -> String {
    let mut m = message.to_string();
    for (rust, words) in [
        ("expected usize", "expected a whole number"),
        ("expected u64", "expected a whole number"),
        ("expected u32", "expected a whole number"),
        ("expected u16", "expected a whole number"),
        ("expected u8", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a mapping (key: value)"),
        (
            "expected struct ChainFile",
            "expected a mapping with `chain:` (and optionally `traffic:` and `run:`)",
        ),
        (
            "expected struct TrafficSection",
            "expected a mapping of traffic settings",
        ),
        ("expected struct RunSection", "expected a mapping of run settings"),
        ("expected a boolean", "expected true or false"),
    ] {
        m = m.replace(rust, words);
    }
    m
}

/// A chain ready to run.
#[derive(Debug, Clone)]
pub struct ChainSpec {
    pub name: String,
    pub traffic: GeneratorConfig,
    pub nfs: Vec<(String, NfConfig)>,
    pub settings: RunSettings,
    /// Set when the chain runs as a pipeline across cores; compound otherwise.
    pub pipeline: Option<PipelineSettings>,
    /// Copies of the chain run side by side, flows spread by hash (pipeline runtime).
    pub replicas: usize,
}

impl ChainSpec {
    /// The chain's NFs, built (each config was validated when the chain was read).
    pub fn build_nfs(&self) -> sfclab_core::NamedNfs {
        self.nfs
            .iter()
            .map(|(name, cfg)| (name.clone(), cfg.build().expect("validated when the chain was read")))
            .collect()
    }

    /// Every run setting the spec runs with: the compound one, and the pipeline's if set.
    pub fn run_settings_mut(&mut self) -> impl Iterator<Item = &mut RunSettings> {
        std::iter::once(&mut self.settings).chain(self.pipeline.as_mut().map(|p| &mut p.run))
    }

    /// Ends the spec's runs early when `stop` is set (Ctrl-C).
    pub fn stop_on(&mut self, stop: &std::sync::Arc<std::sync::atomic::AtomicBool>) {
        for s in self.run_settings_mut() {
            s.stop = Some(stop.clone());
        }
    }

    /// The spec as one measurement: `rate` for a window of `duration` (no count), latency
    /// probes at `probe_pps`, per-NF accounting off (it would cost the chain cycles).
    pub fn as_trial(&self, rate: Rate, probe_pps: f64, duration: Duration) -> ChainSpec {
        let mut spec = self.clone();
        spec.traffic.rate = rate;
        spec.traffic.probe_pps = probe_pps;
        for s in spec.run_settings_mut() {
            s.duration = Some(duration);
            s.count = None;
            s.accounting = false;
        }
        spec
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChainFile {
    name: Option<String>,
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    traffic: TrafficSection,
    #[serde(default)]
    run: RunSection,
    chain: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrafficSection {
    size: Option<Value>,
    flows: Option<u32>,
    ip: Option<IpVersion>,
    rate: Option<String>,
    latency_probe_pps: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunSection {
    duration: Option<String>,
    warmup: Option<String>,
    count: Option<u64>,
    batch: Option<usize>,
    core: Option<usize>,
    accounting: Option<bool>,
    verify: Option<bool>,
    pool_size: Option<usize>,
    /// `compound` (default) or `pipeline`.
    runtime: Option<String>,
    /// Pipeline: `s_core`, `bi:K`, `pbp:K` or one core per NF (`0,0,1,1`).
    placement: Option<String>,
    /// Pipeline: the cores the placement may use, in order.
    cores: Option<Vec<usize>>,
    generator_core: Option<usize>,
    /// Pipeline: `drop` (default) or `backpressure`.
    links: Option<String>,
    ring_size: Option<usize>,
    rx_queue: Option<usize>,
    stage_budget: Option<usize>,
    /// Pipeline: the generator waits while the rx-queue is full (no ingress drops).
    flow_control: Option<bool>,
    /// Parallel chains: copies of the chain, flows spread over them by hash.
    replicas: Option<usize>,
}

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, place: &str, key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_string(),
            line: None,
            place: place.to_string(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}

/// Reads and resolves a chain file.
pub fn load(path: &str, o: &Overrides) -> Result<ChainSpec, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Ctx { file: path }.err("", "", format!("cannot read: {e}")))?;
    parse(&text, path, o)
}

/// Parses and resolves chain-file text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str, o: &Overrides) -> Result<ChainSpec, ConfigError> {
    let ctx = Ctx { file: origin };
    let value: Value = serde_saphyr::from_str(text).map_err(|e| {
        // The parser calls the text `<input>`: name the file instead.
        ctx.err(
            "",
            "",
            format!("not valid YAML: {}", e.to_string().replace("<input>", origin)),
        )
    })?;
    if !value.is_object() {
        return Err(ctx.err(
            "",
            "",
            "a chain file is a mapping with `chain:` (and optionally `traffic:` and `run:`)",
        ));
    }
    let file: Result<ChainFile, ConfigError> = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let (place, key) = match path.split_once('.') {
            Some((section, rest)) => (section.to_string(), rest.to_string()),
            None if path == "." => (String::new(), String::new()),
            None => (path, String::new()),
        };
        ctx.err(&place, &key, plain(&e.into_inner().to_string()))
    });
    let located = |e: ConfigError| ConfigError {
        line: e.line.or_else(|| line_of(text, &e.place, &e.key)),
        ..e
    };
    let file = file.map_err(located)?;
    resolve(file, &ctx, o).map_err(|e| o.blame(e)).map_err(|e| {
        // An error about a flag is not the file's: no line.
        if e.file == origin { located(e) } else { e }
    })
}

/// Builds a spec from `--chain` shorthand: `forwarder*4`, or
/// `forwarder -> synthetic(cycles=100, working_set=64KiB) -> noop`.
pub fn from_shorthand(spec: &str, o: &Overrides) -> Result<ChainSpec, ConfigError> {
    let ctx = Ctx { file: "--chain" };
    let chain = parse_shorthand(spec).map_err(|e| ctx.err("", "", e))?;
    let file = ChainFile {
        name: Some(spec.to_string()),
        chain,
        ..Default::default()
    };
    resolve(file, &ctx, o).map_err(|e| o.blame(e))
}

fn resolve(file: ChainFile, ctx: &Ctx, o: &Overrides) -> Result<ChainSpec, ConfigError> {
    let t = &file.traffic;
    let size_text = match (&o.size, &t.size) {
        (Some(s), _) => s.clone(),
        (None, Some(Value::String(s))) => s.clone(),
        (None, Some(Value::Number(n))) => n.to_string(),
        (None, Some(other)) => {
            return Err(ctx.err(
                "traffic",
                "size",
                format!("`{other}` is not a size: write 64, imix, rfc2544-mix or 64:7,594:4,1518:1"),
            ));
        }
        (None, None) => "64".into(),
    };
    let sizes: FrameSizes = size_text.parse().map_err(|e| ctx.err("traffic", "size", e))?;
    let rate_text = o
        .rate
        .clone()
        .or_else(|| t.rate.clone())
        .unwrap_or_else(|| "max".into());
    let rate: Rate = rate_text.parse().map_err(|e| ctx.err("traffic", "rate", e))?;
    let traffic = GeneratorConfig {
        sizes,
        flows: o.flows.or(t.flows).unwrap_or(256),
        ip: o.ip.or(t.ip).unwrap_or_default(),
        rate,
        limit: None,
        probe_pps: o.latency_probe_pps.or(t.latency_probe_pps).unwrap_or(10_000.0),
        port: 0,
    };
    traffic.validate().map_err(|(k, r)| ctx.err("traffic", k, r))?;

    let r = &file.run;
    let dur = |key: &str, text: &str| {
        humantime::parse_duration(text).map_err(|e| {
            ctx.err(
                "run",
                key,
                format!("`{text}` is not a duration ({e}); write e.g. 5s or 500ms"),
            )
        })
    };
    // A count on the command line replaces the file's duration, and the other way round.
    let (duration_text, count) = match (&o.duration, o.count) {
        (Some(d), c) => (Some(d.clone()), c),
        (None, Some(c)) => (None, Some(c)),
        (None, None) => (r.duration.clone(), r.count),
    };
    let duration = match (&duration_text, count) {
        (Some(d), _) => Some(dur("duration", d)?),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(5)),
    };
    let warmup = match o.warmup.as_ref().or(r.warmup.as_ref()) {
        Some(w) => dur("warmup", w)?,
        None => Duration::from_millis(500),
    };
    let defaults = RunSettings::default();
    let settings = RunSettings {
        batch: o.batch.or(r.batch).unwrap_or(defaults.batch),
        duration,
        count,
        warmup,
        core: o.core.or(r.core).or_else(default_core),
        accounting: o.accounting.or(r.accounting).unwrap_or(true),
        verify: o.verify.or(r.verify).unwrap_or(false),
        pool_size: o.pool_size.or(r.pool_size).unwrap_or(defaults.pool_size),
        stop: None,
    };
    settings.validate().map_err(|e| match e {
        sfclab_runtime::RunError::Setting { key, reason } => ctx.err("run", key, reason),
        other => ctx.err("run", "", other.to_string()),
    })?;

    if file.chain.is_empty() {
        return Err(ctx.err("chain", "", "the chain has no NF: list at least one (e.g. `- noop`)"));
    }
    let nfs = resolve_chain(&file.chain, ctx)?;
    let replicas = o.replicas.or(r.replicas).unwrap_or(1);
    if replicas == 0 || replicas > 64 {
        return Err(ctx.err("run", "replicas", format!("{replicas} is outside 1..=64")));
    }
    let pipeline = resolve_pipeline(r, o, &settings, nfs.len(), replicas, ctx)?;
    Ok(ChainSpec {
        name: file.name.unwrap_or_else(|| ctx.file.to_string()),
        traffic,
        nfs,
        settings,
        pipeline,
        replicas,
    })
}

/// The pipeline settings when the chain runs as a pipeline (asked for, or implied by a
/// placement), checked against this machine's cores.
fn resolve_pipeline(
    r: &RunSection,
    o: &Overrides,
    run: &RunSettings,
    n: usize,
    replicas: usize,
    ctx: &Ctx,
) -> Result<Option<PipelineSettings>, ConfigError> {
    let placement_text = o.placement.as_ref().or(r.placement.as_ref());
    // Pipeline settings on a chain that runs compound would be ignored: refuse them.
    let pipeline_only = [
        ("cores", o.cores.is_some() || r.cores.is_some()),
        (
            "generator_core",
            o.generator_core.is_some() || r.generator_core.is_some(),
        ),
        ("links", o.links.is_some() || r.links.is_some()),
        ("ring_size", o.ring_size.is_some() || r.ring_size.is_some()),
        ("rx_queue", o.rx_queue.is_some() || r.rx_queue.is_some()),
        ("stage_budget", o.stage_budget.is_some() || r.stage_budget.is_some()),
        ("flow_control", o.flow_control.is_some() || r.flow_control.is_some()),
    ];
    let compound_only = |runtime: Option<&str>| {
        let compound = runtime == Some("compound") || (runtime.is_none() && placement_text.is_none() && replicas == 1);
        match pipeline_only.iter().find(|(_, given)| *given) {
            Some((key, _)) if compound => Err(ctx.err(
                "run",
                key,
                "applies to the pipeline runtime (stages on cores joined by rings), and this chain runs \
                 compound on one core: add `runtime: pipeline` or a placement (--placement), or remove it",
            )),
            _ => Ok(()),
        }
    };
    let runtime = o
        .runtime
        .as_ref()
        .or(r.runtime.as_ref())
        .map(|s| s.to_ascii_lowercase());
    compound_only(runtime.as_deref())?;
    match runtime.as_deref() {
        None if placement_text.is_none() && replicas == 1 => return Ok(None),
        Some("compound") if replicas > 1 => {
            return Err(ctx.err("run", "replicas", "parallel replicas need `runtime: pipeline`"));
        }
        Some("compound") if placement_text.is_some() => {
            return Err(ctx.err(
                "run",
                "placement",
                "a placement needs `runtime: pipeline` (compound runs on one core)",
            ));
        }
        Some("compound") => return Ok(None),
        None | Some("pipeline") => {}
        Some(other) => {
            return Err(ctx.err(
                "run",
                "runtime",
                format!("`{other}` is not a runtime: write compound or pipeline"),
            ));
        }
    }
    let defaults = PipelineSettings::default();
    let placement: Placement = match placement_text {
        Some(p) => p.parse().map_err(|e| ctx.err("run", "placement", e))?,
        None => Placement::SCore,
    };
    let cores = o.cores.clone().or_else(|| r.cores.clone()).unwrap_or(defaults.cores);
    if let Some(c) = cores
        .iter()
        .enumerate()
        .find_map(|(i, c)| cores[..i].contains(c).then_some(c))
    {
        return Err(ctx.err(
            "run",
            "cores",
            format!("core {c} is listed twice: each core runs one thread (to share a core, place NFs on it: `placement: 0,0,1`)"),
        ));
    }
    let allowed = sfclab_runtime::placement::allowed_cores();
    if replicas > allowed.len() {
        return Err(ctx.err(
            "run",
            "replicas",
            format!(
                "{replicas} replicas need a core each; this process may use {} ({})",
                allowed.len(),
                allowed.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    placement
        .stages(n, &cores)
        .map_err(|e| ctx.err("run", "placement", e))?;
    let links = match o.links.as_ref().or(r.links.as_ref()) {
        Some(l) => l.parse::<LinkMode>().map_err(|e| ctx.err("run", "links", e))?,
        None => LinkMode::Drop,
    };
    let mut run = run.clone();
    run.core = None;
    // Unless given, the pipeline sizes its pool for its rings.
    run.pool_size = o.pool_size.or(r.pool_size).unwrap_or(0);
    let p = PipelineSettings {
        run,
        placement,
        cores,
        generator_core: o.generator_core.or(r.generator_core),
        links,
        ring_size: o.ring_size.or(r.ring_size).unwrap_or(defaults.ring_size),
        rx_queue: o.rx_queue.or(r.rx_queue).unwrap_or(defaults.rx_queue),
        stage_budget: o.stage_budget.or(r.stage_budget).unwrap_or(defaults.stage_budget),
        flow_control: o.flow_control.or(r.flow_control).unwrap_or(false),
    };
    if let Some(c) = p
        .generator_core
        .filter(|c| !sfclab_runtime::placement::allowed_cores().contains(c))
    {
        return Err(ctx.err("run", "generator_core", format!("core {c} is not available")));
    }
    for (key, v, min) in [
        ("ring_size", p.ring_size, p.run.batch),
        ("rx_queue", p.rx_queue, p.run.batch),
        ("stage_budget", p.stage_budget, 1),
    ] {
        if v < min || v > 1 << 20 {
            return Err(ctx.err("run", key, format!("{v} is outside {min}..={}", 1 << 20)));
        }
    }
    Ok(Some(p))
}

/// The last core this process may use (its affinity mask): away from core 0, where
/// interrupts land.
pub fn default_core() -> Option<usize> {
    sfclab_runtime::placement::default_chain_core()
}

fn resolve_chain(chain: &[Value], ctx: &Ctx) -> Result<Vec<(String, NfConfig)>, ConfigError> {
    let mut out: Vec<(String, NfConfig)> = Vec::new();
    for (i, raw) in chain.iter().enumerate() {
        let kind_guess = match raw {
            Value::String(s) => s.clone(),
            Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
            _ => String::new(),
        };
        let place = format!("chain[{i}] ({kind_guess})");
        let value = match raw {
            // `- noop` and `- noop:` mean the NF with default settings.
            Value::String(s) => serde_json::json!({ s.as_str(): {} }),
            Value::Object(m) if m.len() == 1 => {
                let (k, v) = m.iter().next().unwrap();
                serde_json::json!({ k.as_str(): if v.is_null() { serde_json::json!({}) } else { v.clone() } })
            }
            _ => {
                return Err(ctx.err(
                    &format!("chain[{i}]"),
                    "",
                    "an NF is written as `- type: { key: value, ... }` with exactly one type",
                ));
            }
        };
        let cfg: NfConfig = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let key = path.split_once('.').map(|(_, k)| k.to_string()).unwrap_or_default();
            let mut reason = e.into_inner().to_string();
            if reason.starts_with("unknown variant") {
                let kinds: Vec<&str> = NfConfig::KINDS.iter().map(|(k, _)| *k).collect();
                reason = format!("unknown NF type `{kind_guess}`; known types: {}", kinds.join(", "));
            }
            ctx.err(&place, &key, reason)
        })?;
        cfg.build().map_err(|e| ctx.err(&place, e.key, e.reason))?;
        let name = cfg.name().map(str::to_string).unwrap_or_default();
        out.push((name, cfg));
    }
    // Unnamed NFs are named by type, numbered when a type appears more than once.
    for i in 0..out.len() {
        if out[i].0.is_empty() {
            let kind = out[i].1.kind();
            let same: Vec<usize> = (0..out.len()).filter(|&j| out[j].1.kind() == kind).collect();
            out[i].0 = if same.len() == 1 {
                kind.to_string()
            } else {
                format!("{kind}{}", same.iter().position(|&j| j == i).unwrap() + 1)
            };
        }
    }
    for i in 0..out.len() {
        if let Some(j) = (0..i).find(|&j| out[j].0 == out[i].0) {
            return Err(ctx.err(
                &format!("chain[{i}] ({})", out[i].1.kind()),
                "name",
                format!("`{}` is already the name of chain[{j}]", out[i].0),
            ));
        }
    }
    Ok(out)
}

/// Parses `a -> b(k=v, k2=v2)*3 -> c` into chain elements.
pub fn parse_shorthand(spec: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for part in spec.split("->") {
        let part = part.trim();
        if part.is_empty() {
            return Err(format!("empty element in `{spec}`"));
        }
        let (body, repeat) = match part.rsplit_once('*') {
            Some((b, n)) if !b.contains(')') || b.trim_end().ends_with(')') => {
                let n: usize = n
                    .trim()
                    .parse()
                    .map_err(|_| format!("`*{n}` in `{part}` is not a repeat count"))?;
                if n == 0 || n > 4096 {
                    return Err(format!("repeat count {n} in `{part}` must be 1..=4096"));
                }
                (b.trim(), n)
            }
            _ => (part, 1),
        };
        let (kind, params) = match body.split_once('(') {
            Some((k, rest)) => {
                let inner = rest
                    .strip_suffix(')')
                    .ok_or_else(|| format!("missing `)` in `{body}`"))?;
                (k.trim(), inner)
            }
            None => (body, ""),
        };
        if kind.is_empty() || !kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("`{kind}` is not an NF type name"));
        }
        let mut settings = serde_json::Map::new();
        for kv in params.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("`{kv}` in `{body}` is not key=value"))?;
            settings.insert(k.trim().to_string(), scalar(v.trim()));
        }
        for _ in 0..repeat {
            out.push(serde_json::json!({ kind: Value::Object(settings.clone()) }));
        }
    }
    Ok(out)
}

/// A shorthand value as YAML would read it: number, bool or string.
fn scalar(v: &str) -> Value {
    if let Ok(n) = v.parse::<u64>() {
        return Value::from(n);
    }
    if let Ok(f) = v.parse::<f64>() {
        return Value::from(f);
    }
    match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(v.trim_matches('"').to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(text: &str) -> ConfigError {
        parse(text, "bad.yaml", &Overrides::default()).unwrap_err()
    }

    #[test]
    fn default_chain_parses() {
        let spec = parse(DEFAULT_CHAIN, "default", &Overrides::default()).unwrap();
        assert!(!spec.nfs.is_empty());
    }

    #[test]
    fn shorthand_expands_repeats_and_parameters() {
        let spec = from_shorthand(
            "forwarder*3 -> synthetic(cycles=100, working_set=64KiB) -> noop",
            &Overrides::default(),
        )
        .unwrap();
        let names: Vec<&str> = spec.nfs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["forwarder1", "forwarder2", "forwarder3", "synthetic", "noop"]);
        let NfConfig::Synthetic(s) = &spec.nfs[3].1 else {
            panic!()
        };
        assert_eq!((s.cycles, s.working_set.0), (100, 64 * 1024));
    }

    #[test]
    fn overrides_win_and_count_replaces_duration() {
        let o = Overrides {
            size: Some("imix".into()),
            count: Some(1000),
            batch: Some(64),
            ..Default::default()
        };
        let spec = parse("run: { duration: 9s }\nchain: [noop]\n", "f.yaml", &o).unwrap();
        assert_eq!(spec.traffic.sizes, FrameSizes::imix());
        assert_eq!(spec.settings.count, Some(1000));
        assert_eq!(spec.settings.duration, None);
        assert_eq!(spec.settings.batch, 64);
    }

    #[test]
    fn errors_name_file_place_key_and_reason() {
        let e = parse_err("chain:\n  - forwarder: { dst_mack: \"02:00:00:00:00:01\" }\n");
        assert_eq!(
            (e.file.as_str(), e.place.as_str()),
            ("bad.yaml", "chain[0] (forwarder)")
        );
        assert!(e.reason.contains("unknown field `dst_mack`"), "{e}");

        let e = parse_err("chain:\n  - noop\n  - synthetic: { accesses: 3 }\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("chain[1] (synthetic)", "accesses"));
        assert!(
            e.to_string()
                .starts_with("bad.yaml:3: chain[1] (synthetic): key `accesses`: needs a `working_set`"),
            "{e}"
        );

        let e = parse_err("chain:\n  - synthetic: { working_set: lots }\n");
        assert_eq!(e.key, "working_set");
        assert!(e.reason.contains("`lots` is not a byte size"), "{e}");

        let e = parse_err("chain:\n  - forwarderr: {}\n");
        assert!(
            e.reason.contains("unknown NF type `forwarderr`") && e.reason.contains("synthetic"),
            "{e}"
        );

        let e = parse_err("traffic: { size: 63 }\nchain: [noop]\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("traffic", "size"));

        let e = parse_err("traffic: { sizes: 64 }\nchain: [noop]\n");
        assert_eq!(e.place, "traffic");
        assert!(e.reason.contains("unknown field `sizes`"), "{e}");

        let e = parse_err("run: { batch: 1000 }\nchain: [noop]\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("run", "batch"));

        let e = parse_err("run: { duration: soon }\nchain: [noop]\n");
        assert_eq!(e.key, "duration");

        let e = parse_err("traffic: { rate: fast }\nchain: [noop]\n");
        assert_eq!(e.key, "rate");

        let e = parse_err("chain:\n  - noop: { name: a }\n  - forwarder: { name: a }\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("chain[1] (forwarder)", "name"));

        let e = parse_err("chain: [ {noop: {}, forwarder: {}} ]\n");
        assert_eq!(e.place, "chain[0]");

        let e = parse_err("chain: [noop\n");
        assert!(e.reason.starts_with("not valid YAML"), "{e}");

        let e = parse_err("traffic: {}\n");
        assert!(e.reason.contains("missing field `chain`"), "{e}");
    }

    #[test]
    fn pipeline_settings_resolve_and_fail_clearly() {
        let spec = parse(
            "run: { runtime: pipeline, placement: s_core, links: backpressure }\nchain: [noop, noop]\n",
            "p.yaml",
            &Overrides::default(),
        )
        .unwrap();
        let p = spec.pipeline.unwrap();
        assert_eq!((p.placement, p.links), (Placement::SCore, LinkMode::Backpressure));
        let spec = parse(
            "chain: [noop]\n",
            "p.yaml",
            &Overrides {
                placement: Some("s_core".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(spec.pipeline.is_some(), "a placement implies the pipeline runtime");
        for (text, key) in [
            ("run: { runtime: threads }\nchain: [noop]\n", "runtime"),
            ("run: { placement: bi:4096 }\nchain: [noop]\n", "placement"),
            (
                "run: { runtime: compound, placement: bi:1 }\nchain: [noop]\n",
                "placement",
            ),
            ("run: { placement: s_core, links: sometimes }\nchain: [noop]\n", "links"),
            ("run: { placement: s_core, ring_size: 4 }\nchain: [noop]\n", "ring_size"),
            (
                "run: { placement: s_core, generator_core: 4096 }\nchain: [noop]\n",
                "generator_core",
            ),
        ] {
            let e = parse_err(text);
            assert_eq!((e.place.as_str(), e.key.as_str()), ("run", key), "{e}");
        }
    }

    /// A setting that would be ignored is an error, and an error in a value the command
    /// line gave names the flag, not the file it did not come from.
    #[test]
    fn ignored_settings_are_refused_and_flags_are_blamed() {
        for (text, key) in [
            ("run: { links: drop }\nchain: [noop]\n", "links"),
            ("run: { generator_core: 0 }\nchain: [noop]\n", "generator_core"),
            (
                "run: { runtime: compound, ring_size: 64 }\nchain: [noop]\n",
                "ring_size",
            ),
            (
                "run: { placement: bi:2, cores: [0, 0] }\nchain: [noop, noop]\n",
                "cores",
            ),
            (
                "run: { placement: s_core, replicas: 4096 }\nchain: [noop]\n",
                "replicas",
            ),
        ] {
            let e = parse_err(text);
            assert_eq!((e.place.as_str(), e.key.as_str()), ("run", key), "{e}");
        }
        let e = parse_err("chain: []\n");
        assert_eq!(e.place, "chain");
        let e = parse_err("[1, 2]\n");
        assert!(e.reason.contains("a mapping with `chain:`"), "{e}");
        let e = parse_err("run: { batch: -1 }\nchain: [noop]\n");
        assert!(
            e.reason.contains("a whole number") && !e.reason.contains("usize"),
            "{e}"
        );
        let e = parse_err("chain: [noop\n");
        assert!(e.reason.contains("bad.yaml") && !e.reason.contains("<input>"), "{e}");

        let flags = Overrides {
            size: Some("10".into()),
            ..Default::default()
        };
        let e = parse(DEFAULT_CHAIN, "default.yaml", &flags).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--size: frame size 10 is outside 64..=1518 bytes (FCS included)"
        );
        let flags = Overrides {
            links: Some("drop".into()),
            ..Default::default()
        };
        let e = from_shorthand("noop", &flags).unwrap_err();
        assert!(
            e.to_string().starts_with("--links: applies to the pipeline runtime"),
            "{e}"
        );
    }

    #[test]
    fn errors_say_the_line() {
        let text = "# a chain\ntraffic:\n  size: 64\nrun:\n  duration: 1s\n  batch: 1000\nchain:\n  - noop\n  - synthetic:\n      cycles: 10\n      accesses: 4\n";
        let e = parse_err(text);
        assert_eq!((e.line, e.key.as_str()), (Some(6), "batch"), "{e}");
        assert!(e.to_string().starts_with("bad.yaml:6: run: key `batch`"), "{e}");
        let e = parse_err(&text.replace("batch: 1000", "batch: 32"));
        assert_eq!((e.line, e.place.as_str()), (Some(11), "chain[1] (synthetic)"), "{e}");
        let e = parse_err("traffic: { size: 10 }\nchain: [noop]\n");
        assert_eq!(e.line, Some(1), "flow style: the section's line");
        let flags = Overrides {
            batch: Some(1000),
            ..Default::default()
        };
        let e = parse(text, "bad.yaml", &flags).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("--batch", None));
    }

    #[test]
    fn shorthand_errors() {
        for bad in [
            "",
            "a ->",
            "forwarder*0",
            "forwarder*x",
            "synthetic(cycles=1",
            "syn thetic",
            "synthetic(cycles)",
        ] {
            assert!(parse_shorthand(bad).is_err(), "{bad}");
        }
        let e = from_shorthand("forwarder(dst_mac=zz)", &Overrides::default()).unwrap_err();
        assert_eq!(e.key, "dst_mac");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_chain_text_never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text, "fuzz.yaml", &Overrides::default());
            let _ = from_shorthand(&text, &Overrides::default());
        }
    }
}
