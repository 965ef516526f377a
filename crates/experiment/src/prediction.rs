//! A resolved chain as the model prices it ([`sfclab_model::ChainModel`]), and the
//! prediction document of `sfclab model predict`.

use sfclab_model::documents::{CalibrationRef, PredictedNf, PredictionDocument};
use sfclab_model::{Calibration, ChainModel, HardwareProfile, Layout, nf_key, predict_chain};
use sfclab_traffic::FrameSizes;

use crate::{Chaining, Experiment, Ports};

impl Experiment {
    /// The chain as the model prices it: its NFs' calibration keys, its frame sizes and
    /// how it is laid out on cores; an error names what the model cannot price yet.
    pub fn chain_model(&self) -> Result<ChainModel, String> {
        // A chain that forwards nothing has no price: say which NF and the key to set.
        if let Some((name, (reason, fix))) = self.nfs.iter().find_map(|(n, nf)| Some((n, nf.drops_all()?))) {
            return Err(format!(
                "`{name}` with its default settings drops every packet ({reason}): {fix}; price the chain as it runs, e.g. `sfclab model predict examples/chains/edge.yaml`"
            ));
        }
        if self.replicas() > 1 {
            return Err("replicas are not priced yet: predict one replica (its cores are its own)".into());
        }
        if let Some(w) = &self.wiring
            && !sfclab_runtime::chain::is_linear(w)
        {
            return Err("the model prices linear chains: every packet crosses every NF".into());
        }
        Ok(ChainModel {
            nfs: self
                .nfs
                .iter()
                .map(|(_, nf)| nf_key(nf.kind(), &nf.cost_settings()))
                .collect(),
            frames: self.frames(),
            layout: self.layout()?,
        })
    }

    /// The frame sizes offered with their weights, bytes with FCS.
    pub(crate) fn frames(&self) -> Vec<(f64, f64)> {
        match &self.traffic.sizes {
            FrameSizes::Fixed { size } => vec![(f64::from(*size), 1.0)],
            FrameSizes::Mix { sizes, .. } => sizes.iter().map(|&(s, w)| (f64::from(s), f64::from(w))).collect(),
        }
    }

    /// The mean frame offered, bytes with FCS.
    pub fn mean_frame(&self) -> f64 {
        let frames = self.frames();
        let total: f64 = frames.iter().map(|f| f.1).sum();
        frames.iter().map(|(s, w)| s * w).sum::<f64>() / total.max(1.0)
    }

    fn layout(&self) -> Result<Layout, String> {
        if self.chaining.in_namespaces() {
            return Ok(Layout::Hops {
                technology: self.chaining.to_string(),
            });
        }
        if self.ports != Ports::Memory {
            return Err(format!(
                "`ports: {}`: the model prices in-memory chains and chains in namespaces (`chaining:`) so far",
                self.ports
            ));
        }
        Ok(match self.pipeline() {
            Some(p) => Layout::Pipeline {
                stages: p
                    .placement
                    .stages(self.nfs.len(), &p.cores)?
                    .into_iter()
                    .map(|s| (s.nfs, s.core))
                    .collect(),
            },
            None => {
                debug_assert!(matches!(self.chaining, Chaining::Compound));
                Layout::Compound
            }
        })
    }

    /// `sfclab model predict --json`: the chain priced with `calibration` (read from
    /// `calibration_file`), on `hardware` if given, its utilisation at `offered_pps`.
    pub fn prediction(
        &self,
        (calibration_file, calibration): (&std::path::Path, &Calibration),
        hardware: Option<HardwareProfile>,
        offered_pps: Option<f64>,
    ) -> Result<PredictionDocument, String> {
        let prediction = predict_chain(calibration, &self.chain_model()?, hardware.as_ref())?;
        let nfs = self
            .nfs
            .iter()
            .map(|(n, nf)| PredictedNf {
                name: n.clone(),
                kind: nf.kind().to_string(),
                key: nf_key(nf.kind(), &nf.cost_settings()),
            })
            .collect();
        Ok(PredictionDocument::new(
            (self.name.clone(), nfs),
            CalibrationRef::of(calibration_file, calibration),
            offered_pps,
            hardware,
            prediction,
        ))
    }
}
