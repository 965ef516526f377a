//! The resource-constraints (RC) model of seed 000 Section V and seed 002 Section III: a
//! chain's packets pass resources (CPU cores, the NIC's line and its switching engine,
//! the PCIe bus), each able to handle a limited number of packets per second given what
//! one packet costs it; the chain's maximum throughput is the minimum over them, and the
//! resource that sets it is the bottleneck.
//!
//! This crate holds the model's arithmetic only: costs come from a calibration (measured
//! on a machine by `sfclab model calibrate`, stored as JSON: [`calibration`]), hardware
//! from a profile; [`chain`] prices a chain as placed and chained. Every term is a plain number with its unit in
//! its name, so a prediction can be checked by hand.

#![forbid(unsafe_code)]

pub mod calibration;
pub mod chain;
pub mod documents;
pub mod hardware;
pub mod plan;
pub mod rc;
pub mod scenario;
pub mod scenario_plan;

pub use calibration::{CALIBRATION_SCHEMA, Calibration, Curve, CurvePoint, nf_key};
pub use chain::{ChainModel, ChainPrediction, Layout, Overload, Term, hops_overload, predict_chain};
pub use plan::{ChainPlan, Demand, PlanLimits, PlanResult, PlannedCore, plan};
pub use rc::{
    Chaining, CpuCosts, HardwareProfile, Prediction, RcPoint, Resource, break_even_chain_length, predict, sweep,
};
