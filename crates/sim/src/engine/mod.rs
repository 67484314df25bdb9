//! The simulation: assets whose variables move like equipment, patterns of custom variables,
//! fault scenarios, overrides, and a clock that stops when the simulation is stopped.
//!
//! This file holds what both halves share: variable values and scenarios. Each asset's state and
//! physics are in `equipment.rs`; the `Simulation` driver (clock, scenarios, overrides) is in
//! `simulation.rs`.

mod equipment;
mod simulation;

pub(crate) use equipment::{Asset, Variable};
pub use simulation::{ControlError, Simulation, Status, VariableView};

use serde::Serialize;

/// A variable's current value.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Number(f64),
    Flag(bool),
    Text(String),
}

impl Value {
    pub fn as_f64(&self) -> f64 {
        match self {
            Value::Number(v) => *v,
            Value::Flag(b) => f64::from(u8::from(*b)),
            Value::Text(_) => 0.0,
        }
    }
}

/// Fault and operating scenarios (SPEC 2.17). `normal` is the absence of the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    Normal,
    BearingFailure,
    Cavitation,
    MotorOverload,
    HighTemp,
    Maintenance,
}

impl Scenario {
    pub const ALL: [Scenario; 6] = [
        Scenario::Normal,
        Scenario::BearingFailure,
        Scenario::Cavitation,
        Scenario::MotorOverload,
        Scenario::HighTemp,
        Scenario::Maintenance,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Scenario::Normal => "normal",
            Scenario::BearingFailure => "bearing_failure",
            Scenario::Cavitation => "cavitation",
            Scenario::MotorOverload => "motor_overload",
            Scenario::HighTemp => "high_temp",
            Scenario::Maintenance => "maintenance",
        }
    }

    pub fn parse(id: &str) -> Option<Self> {
        Scenario::ALL.into_iter().find(|s| s.id() == id)
    }

    /// What the scenario does, for `GET /api/scenarios` and the docs.
    pub fn description(self) -> &'static str {
        match self {
            Scenario::Normal => {
                "no fault: minor random fluctuation, day/night cycles, gradual drift (enabling it ends every other scenario)"
            }
            Scenario::BearingFailure => {
                "pumps: Vibration_X/Y/Z rise by up to 6 mm/s and Bearing_Temperature by up to 45 degC over 10 minutes"
            }
            Scenario::Cavitation => {
                "pumps: Suction_Pressure falls toward 0.3 bar, Discharge_Pressure fluctuates by up to 3 bar, Flow_Rate by up to 25%, vibration rises by 2 mm/s, within 1 minute"
            }
            Scenario::MotorOverload => {
                "pumps and motors: currents rise 30% with spikes toward the range's top, motor temperatures rise by up to 40 degC over 5 minutes"
            }
            Scenario::HighTemp => {
                "pumps and motors: winding and bearing temperatures rise by up to 35 degC; HVAC supply and return by up to 8 degC; over 5 minutes"
            }
            Scenario::Maintenance => {
                "pumps and linked motors: 30 s shutdown, 150 s stopped, 60 s restart; afterwards lower vibration and a clean HVAC filter; then ends by itself"
            }
        }
    }

    /// Seconds from enabling to full effect.
    fn ramp_seconds(self) -> f64 {
        match self {
            Scenario::BearingFailure => 600.0,
            Scenario::Cavitation => 60.0,
            Scenario::MotorOverload | Scenario::HighTemp => 300.0,
            Scenario::Normal | Scenario::Maintenance => 1.0,
        }
    }
}

/// Length of the maintenance scenario: down (0-30 s), stopped (30-180 s), restart (180-240 s).
const MAINTENANCE_SECONDS: f64 = 240.0;
