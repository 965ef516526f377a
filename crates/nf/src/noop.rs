//! `noop`: passes every packet untouched. A chain of noops measures what the runtime
//! itself costs per NF (the call, the counters), with no packet access at all.
//!
//! Keys: none. Drops: none.

use serde::Deserialize;
use sfclab_core::{BatchView, Context, NetworkFunction, Verdicts};

pub struct Noop;

impl NetworkFunction for Noop {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    #[inline]
    fn process(&mut self, _ctx: &mut Context<'_>, _batch: BatchView<'_>, _verdicts: &mut Verdicts) {}
}

/// Registers `noop`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "noop",
    about: "passes every packet untouched: the cost of the chain itself",
    stateless: true,
    cost_neutral: &[],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(NoopConfig),
    drops_all_by_default: None,
    fixes: &[],
    build: |v| {
        crate::typed::<NoopConfig>(v)?;
        Ok(Box::new(Noop))
    },
};

/// No settings.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoopConfig {}
