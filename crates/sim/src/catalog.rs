//! The equipment catalog of SPEC 2.17: each asset type's variables with their data type, range
//! and unit.

use serde::{Deserialize, Serialize};

/// Data types of simulated variables. `Float` is served as OPC UA `Double`, `Int` as `Int32`,
/// `Bool` as `Boolean`, `Text` as `String` (the generic sensors' `Unit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataType {
    Float,
    Int,
    Bool,
    Text,
}

/// One variable of an asset type.
#[derive(Clone, Debug, PartialEq)]
pub struct VariableSpec {
    pub name: String,
    pub data_type: DataType,
    /// Inclusive engineering range (analog variables).
    pub range: Option<(f64, f64)>,
    pub unit: Option<String>,
}

impl VariableSpec {
    fn analog(name: &str, data_type: DataType, lo: f64, hi: f64, unit: &str) -> Self {
        Self {
            name: name.into(),
            data_type,
            range: Some((lo, hi)),
            unit: (!unit.is_empty()).then(|| unit.to_string()),
        }
    }
    fn flag(name: &str) -> Self {
        Self {
            name: name.into(),
            data_type: DataType::Bool,
            range: None,
            unit: None,
        }
    }
    fn text(name: &str) -> Self {
        Self {
            name: name.into(),
            data_type: DataType::Text,
            range: None,
            unit: None,
        }
    }
}

/// Asset types of the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssetType {
    CentrifugalPump,
    ElectricMotor,
    Hvac,
    TemperatureSensor,
    PressureSensor,
    LevelSensor,
    FlowSensor,
    VibrationSensor,
}

impl AssetType {
    pub const ALL: [AssetType; 8] = [
        AssetType::CentrifugalPump,
        AssetType::ElectricMotor,
        AssetType::Hvac,
        AssetType::TemperatureSensor,
        AssetType::PressureSensor,
        AssetType::LevelSensor,
        AssetType::FlowSensor,
        AssetType::VibrationSensor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AssetType::CentrifugalPump => "centrifugal_pump",
            AssetType::ElectricMotor => "electric_motor",
            AssetType::Hvac => "hvac",
            AssetType::TemperatureSensor => "temperature_sensor",
            AssetType::PressureSensor => "pressure_sensor",
            AssetType::LevelSensor => "level_sensor",
            AssetType::FlowSensor => "flow_sensor",
            AssetType::VibrationSensor => "vibration_sensor",
        }
    }

    /// The unit a generic sensor reports in its `Unit` variable, and its `Value` range.
    pub fn sensor_unit_and_range(self) -> Option<(&'static str, f64, f64)> {
        match self {
            AssetType::TemperatureSensor => Some(("degC", -20.0, 150.0)),
            AssetType::PressureSensor => Some(("bar", 0.0, 25.0)),
            AssetType::LevelSensor => Some(("%", 0.0, 100.0)),
            AssetType::FlowSensor => Some(("m3/h", 0.0, 500.0)),
            _ => None,
        }
    }

    /// The variables of this type, in SPEC 2.17's order.
    pub fn variables(self) -> Vec<VariableSpec> {
        use DataType::{Float, Int};
        let a = VariableSpec::analog;
        match self {
            AssetType::CentrifugalPump => vec![
                a("Vibration_X", Float, 0.0, 10.0, "mm/s"),
                a("Vibration_Y", Float, 0.0, 10.0, "mm/s"),
                a("Vibration_Z", Float, 0.0, 10.0, "mm/s"),
                a("Motor_Temperature", Float, 20.0, 120.0, "degC"),
                a("Bearing_Temperature", Float, 20.0, 100.0, "degC"),
                a("Discharge_Pressure", Float, 0.0, 20.0, "bar"),
                a("Suction_Pressure", Float, 0.0, 5.0, "bar"),
                a("Flow_Rate", Float, 0.0, 500.0, "L/min"),
                a("Motor_Current", Float, 0.0, 100.0, "A"),
                a("Motor_Speed", Int, 0.0, 3600.0, "RPM"),
                VariableSpec::flag("Run_Status"),
            ],
            AssetType::ElectricMotor => vec![
                a("Stator_Temperature", Float, 20.0, 150.0, "degC"),
                a("Rotor_Temperature", Float, 20.0, 120.0, "degC"),
                a("Voltage_L1", Float, 380.0, 420.0, "V"),
                a("Voltage_L2", Float, 380.0, 420.0, "V"),
                a("Voltage_L3", Float, 380.0, 420.0, "V"),
                a("Current_L1", Float, 0.0, 100.0, "A"),
                a("Current_L2", Float, 0.0, 100.0, "A"),
                a("Current_L3", Float, 0.0, 100.0, "A"),
                a("Power_Factor", Float, 0.8, 1.0, ""),
                a("Active_Power", Float, 0.0, 75.0, "kW"),
                a("Speed", Int, 0.0, 1800.0, "RPM"),
            ],
            AssetType::Hvac => vec![
                a("Supply_Temperature", Float, 10.0, 30.0, "degC"),
                a("Return_Temperature", Float, 15.0, 35.0, "degC"),
                a("Humidity", Float, 30.0, 80.0, "%"),
                a("CO2_Level", Float, 400.0, 2000.0, "ppm"),
                a("Fan_Speed", Int, 0.0, 100.0, "%"),
                VariableSpec::flag("Compressor_Status"),
                a("Filter_Status", Int, 0.0, 100.0, "%"),
            ],
            AssetType::VibrationSensor => vec![
                a("X", Float, 0.0, 10.0, "mm/s"),
                a("Y", Float, 0.0, 10.0, "mm/s"),
                a("Z", Float, 0.0, 10.0, "mm/s"),
                a("RMS", Float, 0.0, 10.0, "mm/s"),
            ],
            generic => {
                let (unit, lo, hi) = generic.sensor_unit_and_range().unwrap_or(("", 0.0, 100.0));
                vec![
                    a("Value", Float, lo, hi, unit),
                    VariableSpec::text("Unit"),
                    // 0 = OK, 1 = warning, 2 = fault.
                    a("Status", Int, 0.0, 2.0, ""),
                ]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_named_distinct_variables() {
        for t in AssetType::ALL {
            let vars = t.variables();
            assert!(!vars.is_empty(), "{t:?}");
            let mut names: Vec<_> = vars.iter().map(|v| v.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), vars.len(), "{t:?}");
            for v in &vars {
                if let Some((lo, hi)) = v.range {
                    assert!(lo < hi, "{t:?} {}", v.name);
                }
            }
        }
        assert_eq!(AssetType::CentrifugalPump.variables().len(), 11);
        assert_eq!(AssetType::ElectricMotor.variables().len(), 11);
        assert_eq!(AssetType::Hvac.variables().len(), 7);
    }
}
