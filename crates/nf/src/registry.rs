//! The open registry of NF types: adding an NF is its own file (the NF, its config and
//! a `TYPE` constant) and one line in [`TYPES`]. Chain files, `sfclab nfs` and the
//! benchmarks find NFs here by the name written in chain files.

use serde::Serialize;
use sfclab_core::NetworkFunction;

use crate::config::ConfigError;

/// One NF type.
pub struct NfType {
    /// The name chain files use (`forwarder`, `router`).
    pub kind: &'static str,
    /// One line about it, for `sfclab nfs`.
    pub about: &'static str,
    /// Settings that name things (addresses, MACs, timeouts) without changing the work
    /// per packet: a cost model prices two NFs that differ only in these as one.
    pub cost_neutral: &'static [&'static str],
    /// Settings that name files: a chain file's relative paths in them are read from
    /// the chain file's directory.
    pub files: &'static [&'static str],
    /// The setting that holds an inner NF (`nsh-proxy`'s `nf`: a type, or `{type:
    /// settings}`), whose own file settings are read from the chain file's directory too.
    pub wraps: Option<&'static str>,
    /// Keeps no state between packets (no table, no working set): copies of it in one
    /// chain share nothing, so its cost in a chain can be measured as the slope over
    /// copies, which is what it costs there (and, for a cost of a few cycles, far less
    /// noisy than one copy against the chain without it).
    pub stateless: bool,
    /// The JSON Schema of its settings: keys, types, defaults and (from the config's doc
    /// comments) what each means.
    pub schema: fn() -> schemars::Schema,
    /// What to change when this NF drops (nearly) every packet for one of its reasons:
    /// `(reason, the fix in a sentence: which key, which example file)`. A run that
    /// forwards nothing says it in one line instead of leaving the user to guess.
    pub fixes: &'static [(&'static str, &'static str)],
    /// The reason this NF drops every packet for with its default settings (a secure
    /// default: a firewall's deny, a router with no routes), if it does.
    pub drops_all_by_default: Option<&'static str>,
    /// Checks the settings and builds the NF.
    pub build: fn(&serde_json::Value) -> Result<Box<dyn NetworkFunction>, ConfigError>,
}

/// Every NF type, in the order `sfclab nfs` lists them.
pub const TYPES: &[NfType] = &[
    crate::forwarder::TYPE,
    crate::noop::TYPE,
    crate::synthetic::TYPE,
    crate::router::TYPE,
    crate::nat44::TYPE,
    crate::firewall::TYPE,
    crate::qos::TYPE,
    crate::shaper::TYPE,
    crate::dpi::TYPE,
    crate::ipsec::encrypt::TYPE,
    crate::ipsec::decrypt::TYPE,
    crate::nsh::classifier::TYPE,
    crate::nsh::sff::TYPE,
    crate::nsh::proxy::TYPE,
];

impl NfType {
    /// The fix for this NF dropping (nearly) everything for `reason`, if it has one.
    pub fn fix_for(&self, reason: &str) -> Option<&'static str> {
        self.fixes.iter().find(|(r, _)| *r == reason).map(|(_, fix)| *fix)
    }
}

/// The NF type chain files call `kind`.
pub fn find(kind: &str) -> Option<&'static NfType> {
    TYPES.iter().find(|t| t.kind == kind)
}

/// Every NF type's name.
pub fn kinds() -> Vec<&'static str> {
    TYPES.iter().map(|t| t.kind).collect()
}

/// One NF of a chain as configured: its type and settings, checked when made (`new`
/// builds it once), so `build` cannot fail afterwards.
#[derive(Clone)]
pub struct NfSpec {
    ty: &'static NfType,
    settings: serde_json::Value,
}

/// Why an NF spec is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecError {
    UnknownKind(String),
    Config(ConfigError),
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecError::UnknownKind(k) => write!(f, "unknown NF type `{k}`; known types: {}", kinds().join(", ")),
            SpecError::Config(e) => e.fmt(f),
        }
    }
}

impl NfSpec {
    /// An NF of type `kind` with `settings` (a mapping; `null` means all defaults).
    pub fn new(kind: &str, settings: serde_json::Value) -> Result<NfSpec, SpecError> {
        let ty = find(kind).ok_or_else(|| SpecError::UnknownKind(kind.to_string()))?;
        let settings = if settings.is_null() {
            serde_json::Value::Object(Default::default())
        } else {
            settings
        };
        (ty.build)(&settings).map_err(SpecError::Config)?;
        Ok(NfSpec { ty, settings })
    }

    /// An NF of type `kind` with its default settings.
    pub fn default_of(kind: &str) -> Result<NfSpec, SpecError> {
        NfSpec::new(kind, serde_json::Value::Null)
    }

    pub fn kind(&self) -> &'static str {
        self.ty.kind
    }

    /// The settings of NF type `kind` that name files (`NfType::files`).
    pub fn file_settings(kind: &str) -> &'static [&'static str] {
        find(kind).map_or(&[], |t| t.files)
    }

    /// The setting of NF type `kind` that holds an inner NF (`NfType::wraps`).
    pub fn wrapped_setting(kind: &str) -> Option<&'static str> {
        find(kind).and_then(|t| t.wraps)
    }

    /// Calls `visit` on every file an NF of type `kind` names in `settings`: its own
    /// file settings (`NfType::files`), and those of an NF it wraps (`nsh-proxy`'s
    /// `nf: {dpi: {...}}`).
    pub fn visit_files(
        kind: &str,
        settings: &mut serde_json::Map<String, serde_json::Value>,
        visit: &mut dyn FnMut(&mut String),
    ) {
        for key in NfSpec::file_settings(kind) {
            if let Some(serde_json::Value::String(path)) = settings.get_mut(*key) {
                visit(path);
            }
        }
        if let Some(key) = NfSpec::wrapped_setting(kind)
            && let Some(serde_json::Value::Object(inner)) = settings.get_mut(key)
            && inner.len() == 1
            && let Some((inner_kind, serde_json::Value::Object(inner_settings))) = inner.iter_mut().next()
        {
            NfSpec::visit_files(inner_kind, inner_settings, visit);
        }
    }

    pub fn settings(&self) -> &serde_json::Value {
        &self.settings
    }

    /// With its default settings (none given), an NF whose type drops everything so
    /// (`NfType::drops_all_by_default`): that reason and its fix.
    pub fn drops_all(&self) -> Option<(&'static str, &'static str)> {
        let default = match &self.settings {
            serde_json::Value::Null => true,
            serde_json::Value::Object(m) => m.is_empty(),
            _ => false,
        };
        let reason = self.ty.drops_all_by_default.filter(|_| default)?;
        Some((reason, self.ty.fix_for(reason).unwrap_or("")))
    }

    /// Whether its type keeps no state between packets (`NfType::stateless`).
    pub fn stateless(&self) -> bool {
        self.ty.stateless
    }

    /// The settings that decide the NF's cost per packet: all but its type's
    /// `cost_neutral` ones (a chain's `name` never reaches the spec).
    pub fn cost_settings(&self) -> serde_json::Value {
        match &self.settings {
            serde_json::Value::Object(m) => serde_json::Value::Object(
                m.iter()
                    .filter(|(k, _)| !self.ty.cost_neutral.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// A fresh instance (each replica of a chain gets its own).
    pub fn build(&self) -> Box<dyn NetworkFunction> {
        (self.ty.build)(&self.settings).expect("checked when the spec was made")
    }
}

impl std::fmt::Debug for NfSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.ty.kind, self.settings)
    }
}

/// As in chain files: `{ "synthetic": { "cycles": 100 } }`.
impl Serialize for NfSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(self.ty.kind, &self.settings)?;
        m.end()
    }
}

impl schemars::JsonSchema for NfSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NfSpec".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "One NF as in a chain file: its type as the only key, its settings as the value (see `sfclab nfs`).",
            "type": "object",
            "minProperties": 1,
            "maxProperties": 1,
            "additionalProperties": { "type": "object" }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_builds_with_defaults_and_has_a_schema() {
        for t in TYPES {
            let spec = NfSpec::default_of(t.kind).unwrap_or_else(|e| panic!("{}: {e}", t.kind));
            assert_eq!(spec.build().kind(), t.kind);
            let schema = (t.schema)();
            assert_eq!(
                schema.get("type"),
                Some(&serde_json::json!("object")),
                "{}: {schema:?}",
                t.kind
            );
            assert_eq!(
                schema.get("additionalProperties"),
                Some(&serde_json::json!(false)),
                "{}: unknown keys are refused",
                t.kind
            );
        }
        let mut names = kinds();
        for t in TYPES {
            let keys = (t.schema)();
            let known = keys
                .get("properties")
                .and_then(|p| p.as_object())
                .cloned()
                .unwrap_or_default();
            for k in t.cost_neutral {
                assert!(
                    known.contains_key(*k),
                    "{}: cost-neutral `{k}` is not one of its settings",
                    t.kind
                );
            }
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), TYPES.len(), "one name per type");
    }

    #[test]
    fn errors_name_the_key_path_and_unknown_types() {
        let e = NfSpec::new("synthetic", serde_json::json!({"accesses": 3})).unwrap_err();
        assert_eq!(
            e,
            SpecError::Config(ConfigError::new("accesses", "needs a `working_set` to read from"))
        );
        let SpecError::Config(e) = NfSpec::new("synthetic", serde_json::json!({"cycles": "x"})).unwrap_err() else {
            panic!()
        };
        assert_eq!(e.key, "cycles");
        let e = NfSpec::new("frobnicator", serde_json::Value::Null).unwrap_err();
        assert!(e.to_string().contains("known types: forwarder"), "{e}");
        let json = serde_json::to_value(NfSpec::new("synthetic", serde_json::json!({"cycles": 5})).unwrap()).unwrap();
        assert_eq!(json, serde_json::json!({"synthetic": {"cycles": 5}}));
    }

    #[test]
    fn cost_settings_leave_out_addresses_and_timeouts_only() {
        let a = NfSpec::new("forwarder", serde_json::json!({"dst_mac": "02:00:00:00:00:09"})).unwrap();
        assert_eq!(a.cost_settings(), serde_json::json!({}));
        let nat = NfSpec::new("nat44", serde_json::json!({"udp_timeout": "5s", "max_sessions": 4096})).unwrap();
        assert_eq!(nat.cost_settings(), serde_json::json!({"max_sessions": 4096}));
    }
}
