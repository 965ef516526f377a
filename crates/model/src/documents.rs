//! The model's result documents (`sfclab model predict|rc --json`, `sfclab plan --json`),
//! each with its schema tag; `sfclab schema prediction|rc|plan` prints their JSON Schemas.

use crate::calibration::CalibratedMachine;
use crate::{Calibration, ChainPrediction, HardwareProfile, PlanResult, RcPoint};

pub const PREDICTION_SCHEMA: &str = "sfclab.prediction/1";
pub const PLAN_SCHEMA: &str = "sfclab.plan/1";
pub const RC_SCHEMA: &str = "sfclab.rc/1";
pub const SCENARIO_PREDICTION_SCHEMA: &str = "sfclab.scenario-prediction/3";
pub const SCENARIO_PLAN_SCHEMA: &str = "sfclab.scenario-plan/2";

/// `sfclab plan --scenario FILE --json`: the deployment that meets a scenario's demand
/// on the fewest cores, and every deployment tried.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ScenarioPlanDocument {
    pub schema: &'static str,
    pub version: &'static str,
    /// The scenario whose chains and rates are the demand.
    pub scenario: String,
    pub calibration: CalibrationRef,
    /// Cores the plan could use at most.
    pub cores_available: usize,
    /// The VNFs' wait modes tried.
    pub waits: Vec<String>,
    /// Whether a group's demand could be spread over more chains than it asks for.
    pub scale_out: bool,
    /// The share of each stream's frames it may lose.
    pub loss: f64,
    /// The NIC's line per direction and its capacity, bits per second at layer 1.
    pub line_bps: Option<f64>,
    pub nic_capacity_bps: Option<f64>,
    pub plan: crate::scenario_plan::ScenarioPlan,
    /// The share of this machine's tester core the chosen deployment's demand needs (above
    /// 1: a measurement of it here is held by the tester, not by the deployment).
    pub tester_utilisation: Option<f64>,
    /// The scenario file of the chosen deployment (`sfclab scenario` runs it).
    pub scenario_file: Option<String>,
}

/// `sfclab model predict SCENARIO --json`: a scenario priced at its offered load, and
/// where it stops carrying all it is offered.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ScenarioPredictionDocument {
    pub schema: &'static str,
    pub version: &'static str,
    pub scenario: String,
    pub calibration: CalibrationRef,
    /// How the VNFs' memif ends wait (`polling`, `interrupt`).
    pub wait: String,
    /// Cores the VNF processes share.
    pub vnf_cores: usize,
    /// The NIC's line per direction and its capacity, bits per second at layer 1.
    pub line_bps: Option<f64>,
    pub nic_capacity_bps: Option<f64>,
    /// Every stream and VNF process at the offered load (the scenario's rates, or `--offered`).
    pub at_offered: crate::scenario::ScenarioFlow,
    /// The offered rates scaled until something gives: the aggregate there and what
    /// limits each stream and the whole.
    pub capacity: crate::scenario::Capacity,
}

impl ScenarioPredictionDocument {
    /// `model` priced with `cal` (read from `file`).
    pub fn new(
        scenario: String,
        (file, cal): (&std::path::Path, &Calibration),
        model: &crate::scenario::ScenarioModel,
    ) -> Result<ScenarioPredictionDocument, String> {
        let priced = crate::scenario::PricedScenario::new(cal, model)?;
        Ok(ScenarioPredictionDocument {
            schema: SCENARIO_PREDICTION_SCHEMA,
            version: env!("CARGO_PKG_VERSION"),
            scenario,
            calibration: CalibrationRef::of(file, cal),
            wait: model.wait.clone(),
            vnf_cores: model.vnf_cores,
            line_bps: model.line_bps,
            nic_capacity_bps: model.nic_capacity_bps,
            at_offered: priced.flow(1.0),
            capacity: priced.capacity(),
        })
    }
}

/// `sfclab model rc --json`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct RcDocument {
    pub schema: &'static str,
    pub version: &'static str,
    /// The profile the resources are priced on (its clock as used).
    pub hardware: HardwareProfile,
    /// The calibration the CPU costs came from (`None`: given as flags).
    pub costs_from: Option<String>,
    pub points: Vec<RcPoint>,
}

impl RcDocument {
    pub fn new(hardware: HardwareProfile, costs_from: Option<String>, points: Vec<RcPoint>) -> RcDocument {
        RcDocument {
            schema: RC_SCHEMA,
            version: env!("CARGO_PKG_VERSION"),
            hardware,
            costs_from,
            points,
        }
    }
}

/// `sfclab plan --json`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct PlanDocument {
    pub schema: &'static str,
    pub version: &'static str,
    pub calibration: CalibrationRef,
    pub max_utilisation: f64,
    pub layouts: Vec<String>,
    pub plan: PlanResult,
}

impl PlanDocument {
    pub fn new(calibration: CalibrationRef, max_utilisation: f64, layouts: Vec<String>, plan: PlanResult) -> Self {
        PlanDocument {
            schema: PLAN_SCHEMA,
            version: env!("CARGO_PKG_VERSION"),
            calibration,
            max_utilisation,
            layouts,
            plan,
        }
    }
}

/// `sfclab model predict --json`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct PredictionDocument {
    pub schema: &'static str,
    pub version: &'static str,
    pub chain: String,
    pub nfs: Vec<PredictedNf>,
    /// The calibration the chain was priced with.
    pub calibration: CalibrationRef,
    /// The least capacity of the chain's resources, millions of packets per second.
    pub max_mpps: f64,
    /// The offered load utilisation is shown at, packets per second (`--offered`, or
    /// the chain's rate; `None`: neither).
    pub offered_pps: Option<f64>,
    pub utilisation: Option<Vec<Utilisation>>,
    /// The NIC profile the chain was priced on (`--hardware`), if any.
    pub hardware: Option<HardwareProfile>,
    pub prediction: ChainPrediction,
}

impl PredictionDocument {
    /// The document of `prediction` for the chain `chain` of `nfs`, with each resource's
    /// utilisation at `offered_pps` when there is one.
    pub fn new(
        (chain, nfs): (String, Vec<PredictedNf>),
        calibration: CalibrationRef,
        offered_pps: Option<f64>,
        hardware: Option<HardwareProfile>,
        prediction: ChainPrediction,
    ) -> PredictionDocument {
        PredictionDocument {
            schema: PREDICTION_SCHEMA,
            version: env!("CARGO_PKG_VERSION"),
            chain,
            nfs,
            calibration,
            max_mpps: prediction.max_pps / 1e6,
            offered_pps,
            utilisation: offered_pps.map(|o| {
                prediction
                    .utilisation(o)
                    .into_iter()
                    .map(|(resource, share)| Utilisation { resource, share })
                    .collect()
            }),
            hardware,
            prediction,
        }
    }
}

#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct PredictedNf {
    pub name: String,
    pub kind: String,
    /// The NF's key in the calibration.
    pub key: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct CalibrationRef {
    pub file: String,
    pub date: String,
    pub machine: CalibratedMachine,
}

impl CalibrationRef {
    /// `calibration`, as read from `file`.
    pub fn of(file: &std::path::Path, calibration: &Calibration) -> CalibrationRef {
        CalibrationRef {
            file: file.display().to_string(),
            date: calibration.date.clone(),
            machine: calibration.machine.clone(),
        }
    }
}

/// A resource's share of its capacity at the offered load (1.0: saturated).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Utilisation {
    pub resource: String,
    pub share: f64,
}
