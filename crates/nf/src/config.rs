//! Typed NF configuration as written in chain files. Unknown keys are rejected by serde;
//! values are checked in `build`, which names the key and the reason.

use serde::{Deserialize, Serialize};
use sfclab_core::NetworkFunction;

use crate::{Forwarder, Noop, Synthetic};

/// A bad value in an NF's config: which key and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: &'static str,
    pub reason: String,
}

impl ConfigError {
    pub fn new(key: &'static str, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            key,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "key `{}`: {}", self.key, self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// One element of a chain: the NF type as the single key, its settings as the value.
/// In YAML: `- forwarder: { dst_mac: "02:00:00:00:00:02" }`.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NfConfig {
    Forwarder(crate::forwarder::ForwarderConfig),
    Noop(crate::noop::NoopConfig),
    Synthetic(crate::synthetic::SyntheticConfig),
}

impl NfConfig {
    /// Every NF type with a one-line description, for `sfclab nfs` and `--help`.
    pub const KINDS: &'static [(&'static str, &'static str)] = &[
        (
            "forwarder",
            "rewrites destination and source MAC (keys: dst_mac, src_mac)",
        ),
        ("noop", "passes every packet untouched: the cost of the chain itself"),
        (
            "synthetic",
            "tunable load: cycles per packet, working_set bytes, accesses per packet at random offsets, drop_one_in",
        ),
    ];

    pub fn kind(&self) -> &'static str {
        match self {
            NfConfig::Forwarder(_) => "forwarder",
            NfConfig::Noop(_) => "noop",
            NfConfig::Synthetic(_) => "synthetic",
        }
    }

    /// The instance name given in the chain file, if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            NfConfig::Forwarder(c) => c.name.as_deref(),
            NfConfig::Noop(c) => c.name.as_deref(),
            NfConfig::Synthetic(c) => c.name.as_deref(),
        }
    }

    /// Validates the settings and builds the NF.
    pub fn build(&self) -> Result<Box<dyn NetworkFunction>, ConfigError> {
        Ok(match self {
            NfConfig::Forwarder(c) => Box::new(Forwarder::new(c)?),
            NfConfig::Noop(_) => Box::new(Noop),
            NfConfig::Synthetic(c) => Box::new(Synthetic::new(c)?),
        })
    }
}

/// A byte count written as a number or with a unit: `4096`, `"32KiB"`, `"8 MB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(try_from = "ByteSizeRepr", into = "u64")]
pub struct ByteSize(pub u64);

impl From<ByteSize> for u64 {
    fn from(b: ByteSize) -> u64 {
        b.0
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum ByteSizeRepr {
    Number(u64),
    Text(String),
}

impl TryFrom<ByteSizeRepr> for ByteSize {
    type Error = String;
    fn try_from(r: ByteSizeRepr) -> Result<Self, String> {
        match r {
            ByteSizeRepr::Number(n) => Ok(ByteSize(n)),
            ByteSizeRepr::Text(s) => s.parse(),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_size::parse_size(s.trim())
            .map(ByteSize)
            .map_err(|e| format!("`{s}` is not a byte size ({e}); write e.g. 4096, 32KiB or 8MiB"))
    }
}
