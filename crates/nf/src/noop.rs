//! `noop`: passes every packet untouched. A chain of noops measures what the runtime
//! itself costs per NF (the call, the counters), with no packet access at all.
//!
//! Keys: none but `name`. Drops: none.

use serde::Deserialize;
use sfclab_core::{BatchView, NetworkFunction, Verdicts};

pub struct Noop;

impl NetworkFunction for Noop {
    fn kind(&self) -> &'static str {
        "noop"
    }

    #[inline]
    fn process(&mut self, _batch: BatchView<'_>, _verdicts: &mut Verdicts) {}
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoopConfig {
    pub name: Option<String>,
}
