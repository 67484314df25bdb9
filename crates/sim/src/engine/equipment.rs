//! Equipment: each asset's variables and internal state, built from its configuration, and the
//! physics that move pumps, motors, HVAC units and sensors at every update.

use rand::Rng;
use rand::rngs::StdRng;
use std::collections::{BTreeMap, HashMap};

use super::{MAINTENANCE_SECONDS, Scenario, Value};
use crate::catalog::{AssetType, DataType, VariableSpec};
use crate::config::AssetConfig;
use crate::pattern::{Player, gaussian};

#[derive(Clone, Debug)]
pub(crate) struct Variable {
    pub(crate) spec: VariableSpec,
    pub(crate) value: Value,
    /// A value set through the control API, held until cleared.
    pub(crate) overridden: Option<f64>,
    /// Custom variables play a pattern.
    pub(crate) player: Option<Player>,
    /// Explicit OPC UA node id of a custom variable.
    pub(crate) node_id: Option<String>,
}

/// Internal state of an asset's physics.
#[derive(Clone, Debug, Default)]
pub(super) struct Physics {
    pub(super) speed: f64,
    temps: HashMap<&'static str, f64>,
    drift: f64,
    filter: f64,
    vibration_base: f64,
}

#[derive(Clone, Debug)]
pub(crate) struct Asset {
    pub(crate) id: String,
    pub(crate) kind: AssetType,
    pub(crate) enabled: bool,
    pub(crate) update_every: f64,
    pub(crate) linked_to: Option<String>,
    pub(crate) running: bool,
    pub(crate) variables: Vec<Variable>,
    pub(super) next_update: f64,
    pub(super) physics: Physics,
}

pub(super) fn build_asset(a: &AssetConfig, base: &std::path::Path) -> Result<Asset, String> {
    let mut variables: Vec<Variable> = a
        .kind
        .variables()
        .into_iter()
        .map(|spec| Variable {
            value: initial(&spec, a.kind),
            spec,
            overridden: None,
            player: None,
            node_id: None,
        })
        .collect();
    for custom in &a.variables {
        let player = match &custom.simulation {
            Some(p) => Some(
                p.player(base)
                    .map_err(|e| format!("asset {}: variable {}: {e}", a.id, custom.name))?,
            ),
            None => None,
        };
        let spec = VariableSpec {
            name: custom.name.clone(),
            data_type: custom.data_type,
            range: custom.range,
            unit: custom.unit.clone(),
        };
        let value = match custom.initial_value {
            Some(v) => typed(&spec, v),
            None => initial(&spec, a.kind),
        };
        let var = Variable {
            spec,
            value,
            overridden: None,
            player,
            node_id: custom.node_id.clone(),
        };
        // A custom variable named like a built-in one replaces it.
        match variables.iter_mut().find(|v| v.spec.name == var.spec.name) {
            Some(slot) => *slot = var,
            None => variables.push(var),
        }
    }
    Ok(Asset {
        id: a.id.clone(),
        kind: a.kind,
        enabled: a.enabled,
        update_every: f64::from(a.update_rate_ms) / 1000.0,
        linked_to: a.linked_to.clone(),
        running: a.initial_state_running,
        variables,
        next_update: 0.0,
        physics: Physics {
            filter: 100.0,
            vibration_base: 1.8,
            ..Physics::default()
        },
    })
}

pub(super) fn typed(spec: &VariableSpec, v: f64) -> Value {
    match spec.data_type {
        DataType::Float => Value::Number(v),
        DataType::Int => Value::Number(v.round()),
        DataType::Bool => Value::Flag(v != 0.0),
        DataType::Text => Value::Text(String::new()),
    }
}

fn initial(spec: &VariableSpec, kind: AssetType) -> Value {
    match spec.data_type {
        DataType::Text => Value::Text(
            kind.sensor_unit_and_range()
                .map_or(String::new(), |(u, _, _)| u.to_string()),
        ),
        DataType::Bool => Value::Flag(false),
        _ => Value::Number(spec.range.map_or(0.0, |(lo, _)| lo.max(0.0))),
    }
}

pub(super) struct Context<'a> {
    pub(super) t: f64,
    pub(super) day_fraction: f64,
    pub(super) scenarios: &'a BTreeMap<Scenario, f64>,
    /// (speed, running) of the asset this one is linked to.
    pub(super) linked: Option<(f64, bool)>,
}

impl Context<'_> {
    /// 0..1: how far an enabled scenario has progressed.
    fn severity(&self, s: Scenario) -> f64 {
        self.scenarios.get(&s).map_or(0.0, |since| {
            ((self.t - since) / s.ramp_seconds()).clamp(0.0, 1.0)
        })
    }
    fn maintenance_phase(&self) -> Option<f64> {
        self.scenarios
            .get(&Scenario::Maintenance)
            .map(|since| self.t - since)
    }
}

/// First-order approach of `current` to `target` with time constant `tau` seconds.
fn approach(current: f64, target: f64, dt: f64, tau: f64) -> f64 {
    current + (target - current) * (1.0 - (-dt / tau).exp())
}

pub(super) fn update_asset(a: &mut Asset, ctx: &Context<'_>, dt: f64, rng: &mut StdRng) -> u64 {
    let mut out: HashMap<&'static str, f64> = HashMap::new();
    let n = |rng: &mut StdRng, s: f64| s * gaussian(rng);
    let ph = &mut a.physics;
    ph.drift = (ph.drift + n(rng, 0.002) * dt.sqrt()).clamp(-0.5, 0.5);
    // Day/night: 0 at night, 1 in the afternoon (peak at 15:00 UTC).
    let day =
        (0.5 - 0.5 * (std::f64::consts::TAU * (ctx.day_fraction - 0.125)).cos()).clamp(0.0, 1.0);
    match a.kind {
        AssetType::CentrifugalPump | AssetType::ElectricMotor => {
            // Maintenance: ramp down, stand still, restart.
            let mut running = a.running;
            let mut target_speed_factor = 1.0;
            if let Some(p) = ctx.maintenance_phase() {
                if p < 30.0 {
                    target_speed_factor = 1.0 - p / 30.0;
                } else if p < 180.0 {
                    running = false;
                } else if p < MAINTENANCE_SECONDS {
                    target_speed_factor = (p - 180.0) / 60.0;
                    // New bearings: lower vibration afterwards.
                    ph.vibration_base = 1.2;
                }
            }
            let (max_speed, nominal) = if a.kind == AssetType::CentrifugalPump {
                (3600.0, 2950.0)
            } else {
                (1800.0, 1475.0)
            };
            let (speed_target, on) = match (a.kind, ctx.linked) {
                (AssetType::ElectricMotor, Some((pump_speed, pump_on))) => {
                    (pump_speed / 2.0, pump_on && running)
                }
                _ => (
                    if running {
                        nominal * target_speed_factor
                    } else {
                        0.0
                    },
                    running,
                ),
            };
            let target = if on { speed_target } else { 0.0 };
            ph.speed = approach(ph.speed, target, dt, 3.0).clamp(0.0, max_speed);
            let load = (ph.speed / nominal).clamp(0.0, 1.2);
            let overload = ctx.severity(Scenario::MotorOverload);
            let hot = ctx.severity(Scenario::HighTemp);
            let spike = if overload > 0.0 && rng.random_bool(0.1) {
                25.0 * overload
            } else {
                0.0
            };
            let current =
                (8.0 + 62.0 * load * load) * (1.0 + 0.3 * overload) * (1.0 + ph.drift * 0.05)
                    + spike
                    + n(rng, 0.4);
            let temp =
                |ph: &mut Physics, key: &'static str, ambient: f64, rise: f64, extra: f64| {
                    let now = *ph.temps.entry(key).or_insert(ambient + rise * 0.8);
                    let v = approach(now, ambient + rise * load + extra, dt, 120.0);
                    ph.temps.insert(key, v);
                    v
                };
            if a.kind == AssetType::CentrifugalPump {
                let bearing = ctx.severity(Scenario::BearingFailure);
                let cav = ctx.severity(Scenario::Cavitation);
                let vib = |rng: &mut StdRng, ph: &Physics| {
                    (ph.vibration_base * load.min(1.0)
                        + 0.1
                        + 6.0 * bearing
                        + 2.0 * cav
                        + n(rng, 0.08))
                    .max(0.0)
                };
                out.insert("Vibration_X", vib(rng, ph));
                out.insert("Vibration_Y", vib(rng, ph) * 0.9);
                out.insert("Vibration_Z", vib(rng, ph) * 0.7);
                out.insert(
                    "Motor_Temperature",
                    temp(ph, "motor", 25.0, 40.0, 40.0 * overload + 35.0 * hot) + n(rng, 0.1),
                );
                out.insert(
                    "Bearing_Temperature",
                    temp(ph, "bearing", 25.0, 30.0, 45.0 * bearing + 35.0 * hot) + n(rng, 0.1),
                );
                let discharge = 15.0 * load * load + 3.0 * cav * gaussian(rng) + n(rng, 0.05);
                out.insert("Discharge_Pressure", discharge);
                out.insert(
                    "Suction_Pressure",
                    2.0 - 1.7 * cav + n(rng, 0.03) + ph.drift * 0.1,
                );
                let flow = 420.0 * load * (1.0 + 0.25 * cav * gaussian(rng)) + n(rng, 2.0);
                out.insert("Flow_Rate", flow);
                out.insert("Motor_Current", current);
                out.insert("Motor_Speed", ph.speed.round());
                out.insert("Run_Status", f64::from(u8::from(on)));
            } else {
                out.insert(
                    "Stator_Temperature",
                    temp(ph, "stator", 25.0, 55.0, 40.0 * overload + 35.0 * hot) + n(rng, 0.1),
                );
                out.insert(
                    "Rotor_Temperature",
                    temp(ph, "rotor", 25.0, 45.0, 30.0 * overload + 35.0 * hot) + n(rng, 0.1),
                );
                for l in ["Voltage_L1", "Voltage_L2", "Voltage_L3"] {
                    out.insert(l, 400.0 + ph.drift * 4.0 + n(rng, 1.0));
                }
                for (i, l) in ["Current_L1", "Current_L2", "Current_L3"]
                    .into_iter()
                    .enumerate()
                {
                    out.insert(l, current * (1.0 + 0.01 * i as f64) + n(rng, 0.2));
                }
                let pf = if load > 0.05 {
                    0.84 + 0.07 * load.min(1.0)
                } else {
                    0.8
                };
                out.insert("Power_Factor", pf + n(rng, 0.003));
                let kw = 3f64.sqrt() * 400.0 * current * pf / 1000.0 * (load > 0.05) as u8 as f64;
                out.insert("Active_Power", kw);
                out.insert("Speed", ph.speed.round());
            }
        }
        AssetType::Hvac => {
            let hot = ctx.severity(Scenario::HighTemp);
            if ctx.maintenance_phase().is_some_and(|p| p >= 180.0) {
                ph.filter = 100.0;
            }
            // Filters clog slowly: about 1% per hour of running.
            ph.filter = (ph.filter - dt / 3600.0).max(0.0);
            let supply = 15.0 + 2.0 * day + 8.0 * hot + ph.drift + n(rng, 0.05);
            out.insert("Supply_Temperature", supply);
            out.insert(
                "Return_Temperature",
                supply + 6.0 + 1.5 * day + n(rng, 0.05),
            );
            out.insert("Humidity", 45.0 + 10.0 * day + n(rng, 0.3));
            out.insert("CO2_Level", 450.0 + 650.0 * day + n(rng, 10.0));
            out.insert("Fan_Speed", (30.0 + 50.0 * day).round());
            out.insert(
                "Compressor_Status",
                f64::from(u8::from(day > 0.3 || hot > 0.0)),
            );
            out.insert("Filter_Status", ph.filter.round());
        }
        AssetType::VibrationSensor => {
            let x = (2.0 + ph.drift + n(rng, 0.1)).max(0.0);
            let y = (1.8 + ph.drift + n(rng, 0.1)).max(0.0);
            let z = (1.2 + ph.drift + n(rng, 0.1)).max(0.0);
            out.insert("X", x);
            out.insert("Y", y);
            out.insert("Z", z);
            out.insert("RMS", ((x * x + y * y + z * z) / 3.0).sqrt());
        }
        generic => {
            let (_, lo, hi) = generic.sensor_unit_and_range().unwrap_or(("", 0.0, 100.0));
            let mid = lo + (hi - lo) * 0.4;
            let v = mid
                + (hi - lo) * (0.05 * ph.drift + 0.02 * (day - 0.5))
                + n(rng, (hi - lo) * 0.002);
            out.insert("Value", v);
            out.insert("Status", 0.0);
        }
    }
    let mut changed = 0;
    for v in &mut a.variables {
        let next = if let Some(o) = v.overridden {
            Some(o)
        } else if let Some(p) = &v.player {
            Some(p.sample(ctx.t, rng))
        } else {
            out.get(v.spec.name.as_str()).copied()
        };
        let Some(mut x) = next else { continue };
        if let Some((lo, hi)) = v.spec.range {
            x = x.clamp(lo, hi);
        }
        let value = typed(&v.spec, x);
        if value != v.value {
            v.value = value;
            changed += 1;
        }
    }
    changed
}
