//! What NF configs share: the error that names a key, typed reading of settings, and
//! value types (byte sizes). Unknown keys are rejected by serde; values are checked
//! when the NF is built, which names the key and the reason.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A bad value in an NF's config: where (a path into its settings: `dst_mac`,
/// `routes[3].prefix`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub reason: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// A duration setting (`120s`, `2h 4m`) in nanoseconds; `default_s` seconds when absent.
pub fn duration_ns(key: &str, value: &Option<String>, default_s: u64) -> Result<u64, ConfigError> {
    match value {
        None => Ok(default_s * 1_000_000_000),
        Some(s) => humantime::parse_duration(s)
            .map(|d| d.as_nanos() as u64)
            .map_err(|e| ConfigError::new(key, format!("`{s}` is not a duration ({e})"))),
    }
}

/// An NF's settings read into its typed config; errors carry the path to the key.
pub fn typed<C: DeserializeOwned>(settings: &serde_json::Value) -> Result<C, ConfigError> {
    serde_path_to_error::deserialize(settings).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::new(
            if path == "." { String::new() } else { path },
            e.into_inner().to_string(),
        )
    })
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "key `{}`: {}", self.key, self.reason)
    }
}

impl std::error::Error for ConfigError {}

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

/// `name` as a `&'static str`, for counters named by a config (`voice_green`): each
/// distinct name is stored once for the life of the process, so building the same NF
/// for every trial and replica keeps no more than its first build did.
pub fn intern(name: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// Hex with an optional `0x`; spaces and `:` between bytes are allowed.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let t = s.trim();
    let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    let digits: Vec<u8> = t.bytes().filter(|b| !matches!(b, b' ' | b':')).collect();
    if !digits.len().is_multiple_of(2) {
        return Err("an odd number of hex digits".into());
    }
    digits
        .chunks(2)
        .map(|pair| {
            let text = std::str::from_utf8(pair).unwrap_or("?");
            u8::from_str_radix(text, 16).map_err(|_| format!("`{text}` is not hex"))
        })
        .collect()
}
