//! The simulation: assets whose variables move like equipment, patterns of custom variables,
//! fault scenarios, overrides, and a clock that stops when the simulation is stopped.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

use crate::catalog::{AssetType, DataType, VariableSpec};
use crate::config::{AssetConfig, SimConfig};
use crate::pattern::{Player, gaussian};

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
struct Physics {
    speed: f64,
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
    next_update: f64,
    physics: Physics,
}

/// A variable as clients see it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariableView {
    pub asset_id: String,
    pub asset_type: &'static str,
    pub name: String,
    /// Explicit OPC UA node id (custom variables); else `ns=<n>;s=<asset_id>.<name>`.
    pub node_id: Option<String>,
    pub data_type: DataType,
    pub range: Option<(f64, f64)>,
    pub unit: Option<String>,
    pub value: Value,
    pub overridden: bool,
    /// Where the variable lives in the simulation, for [`Simulation::value_at`].
    #[serde(skip)]
    pub position: (usize, usize),
}

/// What `GET /api/status` and the command line report.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub state: &'static str,
    pub assets: usize,
    pub variables: usize,
    pub active_scenarios: Vec<&'static str>,
    pub value_updates: u64,
    pub simulation_seconds: f64,
}

/// The simulation. Time `t` is seconds of running simulation (it does not advance while stopped).
pub struct Simulation {
    assets: Vec<Asset>,
    rng: StdRng,
    t: f64,
    running: bool,
    /// Enabled scenarios with the simulation time they were enabled at.
    scenarios: BTreeMap<Scenario, f64>,
    /// Unix seconds at t = 0, for the time of day (HVAC day/night).
    epoch: f64,
    updates: u64,
}

/// Why a control request was refused.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ControlError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
}

impl Simulation {
    /// A simulation of `config`, seeded (same seed, same values), its clock starting at `epoch`
    /// (Unix seconds).
    pub fn new(config: &SimConfig, seed: u64, epoch: f64) -> Result<Self, String> {
        let mut assets = Vec::new();
        for a in &config.assets {
            assets.push(build_asset(a, &config.base_dir)?);
        }
        let mut sim = Self {
            assets,
            rng: StdRng::seed_from_u64(seed),
            t: 0.0,
            running: true,
            scenarios: BTreeMap::new(),
            epoch,
            updates: 0,
        };
        sim.advance(0.0);
        Ok(sim)
    }

    pub fn status(&self) -> Status {
        Status {
            state: if self.running { "running" } else { "stopped" },
            assets: self.assets.iter().filter(|a| a.enabled).count(),
            variables: self
                .assets
                .iter()
                .filter(|a| a.enabled)
                .map(|a| a.variables.len())
                .sum(),
            active_scenarios: self.active_scenarios(),
            value_updates: self.updates,
            simulation_seconds: self.t,
        }
    }

    pub fn active_scenarios(&self) -> Vec<&'static str> {
        if self.scenarios.is_empty() {
            vec![Scenario::Normal.id()]
        } else {
            self.scenarios.keys().map(|s| s.id()).collect()
        }
    }

    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Values freeze while stopped; start resumes where they were.
    pub fn set_running(&mut self, running: bool) {
        self.running = running;
    }

    pub fn enable(&mut self, s: Scenario) {
        if s == Scenario::Normal {
            self.scenarios.clear();
        } else {
            self.scenarios.insert(s, self.t);
        }
    }

    pub fn disable(&mut self, s: Scenario) {
        self.scenarios.remove(&s);
    }

    pub fn scenario_enabled(&self, s: Scenario) -> bool {
        match s {
            Scenario::Normal => self.scenarios.is_empty(),
            other => self.scenarios.contains_key(&other),
        }
    }

    /// Holds `variable` of `asset` at `value` (read by every client) until [`Self::release`].
    pub fn set_override(
        &mut self,
        asset: &str,
        variable: &str,
        value: f64,
    ) -> Result<(), ControlError> {
        let v = self.variable_mut(asset, variable)?;
        if !value.is_finite() {
            return Err(ControlError::Invalid(
                "value must be a finite number".into(),
            ));
        }
        match v.spec.data_type {
            DataType::Text => {
                return Err(ControlError::Invalid(format!(
                    "{variable} is text and cannot be set to a number"
                )));
            }
            DataType::Bool if value != 0.0 && value != 1.0 => {
                return Err(ControlError::Invalid(format!(
                    "{variable} is a flag: value must be 0 or 1"
                )));
            }
            DataType::Int if value.fract() != 0.0 => {
                return Err(ControlError::Invalid(format!(
                    "{variable} is an integer: value must be a whole number"
                )));
            }
            _ => {}
        }
        if let Some((lo, hi)) = v.spec.range
            && !(lo..=hi).contains(&value)
        {
            let unit = v
                .spec
                .unit
                .as_deref()
                .map(|u| format!(" {u}"))
                .unwrap_or_default();
            return Err(ControlError::Invalid(format!(
                "{value} is outside {variable}'s range {lo}..{hi}{unit}"
            )));
        }
        v.overridden = Some(value);
        v.value = typed(&v.spec, value);
        Ok(())
    }

    /// Ends an override: the variable follows the simulation again.
    pub fn release(&mut self, asset: &str, variable: &str) -> Result<(), ControlError> {
        self.variable_mut(asset, variable)?.overridden = None;
        Ok(())
    }

    fn variable_mut(&mut self, asset: &str, variable: &str) -> Result<&mut Variable, ControlError> {
        let a = self
            .assets
            .iter_mut()
            .find(|a| a.id == asset && a.enabled)
            .ok_or_else(|| ControlError::NotFound(format!("no asset {asset:?}")))?;
        a.variables
            .iter_mut()
            .find(|v| v.spec.name == variable)
            .ok_or_else(|| {
                ControlError::NotFound(format!("asset {asset} has no variable {variable:?}"))
            })
    }

    /// The current value of a variable.
    pub fn value(&self, asset: &str, variable: &str) -> Option<&Value> {
        self.assets
            .iter()
            .find(|a| a.id == asset)?
            .variables
            .iter()
            .find(|v| v.spec.name == variable)
            .map(|v| &v.value)
    }

    /// The current value at a [`VariableView::position`] (of the current configuration).
    pub fn value_at(&self, (asset, variable): (usize, usize)) -> Option<&Value> {
        self.assets
            .get(asset)?
            .variables
            .get(variable)
            .map(|v| &v.value)
    }

    /// Every enabled asset's variables with their definitions and current values.
    pub fn snapshot(&self) -> Vec<VariableView> {
        self.assets
            .iter()
            .enumerate()
            .filter(|(_, a)| a.enabled)
            .flat_map(|(ai, a)| {
                a.variables
                    .iter()
                    .enumerate()
                    .map(move |(vi, v)| VariableView {
                        asset_id: a.id.clone(),
                        asset_type: a.kind.name(),
                        name: v.spec.name.clone(),
                        node_id: v.node_id.clone(),
                        data_type: v.spec.data_type,
                        range: v.spec.range,
                        unit: v.spec.unit.clone(),
                        value: v.value.clone(),
                        overridden: v.overridden.is_some(),
                        position: (ai, vi),
                    })
            })
            .collect()
    }

    /// Advances the clock by `dt` seconds (nothing while stopped) and updates every asset whose
    /// update interval has come. Returns how many values were updated.
    pub fn advance(&mut self, dt: f64) -> u64 {
        if self.running {
            self.t += dt.max(0.0);
        }
        if !self.running && self.updates > 0 {
            return 0;
        }
        // Maintenance ends by itself.
        if let Some(&since) = self.scenarios.get(&Scenario::Maintenance)
            && self.t - since > MAINTENANCE_SECONDS
        {
            self.scenarios.remove(&Scenario::Maintenance);
        }
        let mut changed = 0;
        // Pumps (and every other type) before the motors linked to them.
        let order: Vec<usize> = (0..self.assets.len())
            .filter(|&i| self.assets[i].kind != AssetType::ElectricMotor)
            .chain(
                (0..self.assets.len()).filter(|&i| self.assets[i].kind == AssetType::ElectricMotor),
            )
            .collect();
        for i in order {
            let due = {
                let a = &self.assets[i];
                a.enabled && self.t + 1e-9 >= a.next_update
            };
            if !due {
                continue;
            }
            let linked = self.assets[i]
                .linked_to
                .as_ref()
                .and_then(|l| self.assets.iter().find(|a| &a.id == l))
                .map(|a| (a.physics.speed, a.running));
            let ctx = Context {
                t: self.t,
                day_fraction: ((self.epoch + self.t).rem_euclid(86_400.0)) / 86_400.0,
                scenarios: &self.scenarios,
                linked,
            };
            let asset = &mut self.assets[i];
            let dt_asset = (self.t - (asset.next_update - asset.update_every)).max(0.0);
            // On schedule, not from this tick: an asset updating every 200 ms makes five
            // updates a second even when the clock ticks late. Far behind (after a stop), it
            // starts afresh instead of catching up in a burst.
            asset.next_update += asset.update_every;
            if asset.next_update <= self.t {
                asset.next_update = self.t + asset.update_every;
            }
            changed += update_asset(asset, &ctx, dt_asset.min(60.0), &mut self.rng);
        }
        self.updates += changed;
        changed
    }
}

fn build_asset(a: &AssetConfig, base: &std::path::Path) -> Result<Asset, String> {
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

fn typed(spec: &VariableSpec, v: f64) -> Value {
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

struct Context<'a> {
    t: f64,
    day_fraction: f64,
    scenarios: &'a BTreeMap<Scenario, f64>,
    /// (speed, running) of the asset this one is linked to.
    linked: Option<(f64, bool)>,
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

fn update_asset(a: &mut Asset, ctx: &Context<'_>, dt: f64, rng: &mut StdRng) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn plant(seed: u64) -> Simulation {
        // 2026-01-01 12:00 UTC: daytime.
        Simulation::new(
            &SimConfig::default_plant(),
            seed,
            1_767_225_600.0 + 43_200.0,
        )
        .unwrap()
    }

    fn num(sim: &Simulation, a: &str, v: &str) -> f64 {
        sim.value(a, v).unwrap().as_f64()
    }

    fn run(sim: &mut Simulation, seconds: usize) {
        for _ in 0..seconds {
            sim.advance(1.0);
        }
    }

    #[test]
    fn same_seed_same_values_and_every_value_in_range() {
        let (mut a, mut b) = (plant(42), plant(42));
        run(&mut a, 600);
        run(&mut b, 600);
        assert_eq!(a.snapshot(), b.snapshot());
        let mut c = plant(43);
        run(&mut c, 600);
        assert_ne!(a.snapshot(), c.snapshot());
        for v in a.snapshot() {
            if let (Some((lo, hi)), Value::Number(x)) = (v.range, &v.value) {
                assert!((lo..=hi).contains(x), "{}.{} = {x}", v.asset_id, v.name);
            }
        }
        assert_eq!(a.snapshot().len(), 11 + 11 + 7 + 4 * 3 + 4);
        assert_eq!(
            a.value("Temperature_01", "Unit"),
            Some(&Value::Text("degC".into()))
        );
    }

    #[test]
    fn update_rates_hold_when_the_clock_ticks_off_beat() {
        let config = SimConfig::parse(
            "assets:\n  - id: V1\n    type: vibration_sensor\n    update_rate_ms: 200\n",
            Path::new("."),
        )
        .unwrap();
        let mut sim = Simulation::new(&config, 1, 1_767_225_600.0).unwrap();
        sim.advance(0.0);
        let before = sim.status().value_updates;
        // 10 s in ticks of 70 ms: 50 updates of 4 variables, not one per 210 ms.
        for _ in 0..143 {
            sim.advance(0.07);
        }
        let updates = sim.status().value_updates - before;
        assert!((196..=204).contains(&updates), "{updates}");
    }

    #[test]
    fn equipment_follows_speed_and_run_status() {
        let mut sim = plant(1);
        run(&mut sim, 60);
        assert_eq!(sim.value("Pump_01", "Run_Status"), Some(&Value::Flag(true)));
        let (speed, flow, current) = (
            num(&sim, "Pump_01", "Motor_Speed"),
            num(&sim, "Pump_01", "Flow_Rate"),
            num(&sim, "Pump_01", "Motor_Current"),
        );
        assert!(
            speed > 2800.0 && flow > 350.0 && current > 50.0,
            "{speed} {flow} {current}"
        );
        assert!((num(&sim, "Motor_01", "Speed") - speed / 2.0).abs() < 30.0);
        // Maintenance stops the pump and its motor: flow, pressure and current fall with speed.
        sim.enable(Scenario::Maintenance);
        run(&mut sim, 100);
        assert_eq!(
            sim.value("Pump_01", "Run_Status"),
            Some(&Value::Flag(false))
        );
        assert!(num(&sim, "Pump_01", "Motor_Speed") < 50.0);
        assert!(num(&sim, "Pump_01", "Flow_Rate") < 20.0);
        assert!(num(&sim, "Pump_01", "Discharge_Pressure") < 1.0);
        assert!(num(&sim, "Pump_01", "Motor_Current") < 15.0);
        assert!(num(&sim, "Motor_01", "Speed") < 50.0);
        // ... and it recovers by itself.
        run(&mut sim, 200);
        assert!(!sim.scenario_enabled(Scenario::Maintenance));
        assert!(num(&sim, "Pump_01", "Motor_Speed") > 2800.0);
        // RMS follows X, Y, Z.
        let (x, y, z) = (
            num(&sim, "Vibration_01", "X"),
            num(&sim, "Vibration_01", "Y"),
            num(&sim, "Vibration_01", "Z"),
        );
        let rms = ((x * x + y * y + z * z) / 3.0).sqrt();
        assert!((num(&sim, "Vibration_01", "RMS") - rms).abs() < 1e-9);
    }

    #[test]
    fn hvac_follows_the_time_of_day() {
        let at = |hour: f64| {
            let mut s = Simulation::new(
                &SimConfig::default_plant(),
                5,
                1_767_225_600.0 + hour * 3600.0,
            )
            .unwrap();
            run(&mut s, 5);
            (
                num(&s, "HVAC_01", "CO2_Level"),
                num(&s, "HVAC_01", "Fan_Speed"),
            )
        };
        let (night_co2, night_fan) = at(3.0);
        let (day_co2, day_fan) = at(15.0);
        assert!(day_co2 > night_co2 + 300.0, "{night_co2} {day_co2}");
        assert!(day_fan > night_fan + 30.0);
    }

    #[test]
    fn scenarios_move_their_variables() {
        let mut sim = plant(9);
        run(&mut sim, 120);
        let vib = num(&sim, "Pump_01", "Vibration_X");
        let bearing = num(&sim, "Pump_01", "Bearing_Temperature");
        sim.enable(Scenario::BearingFailure);
        assert_eq!(sim.active_scenarios(), ["bearing_failure"]);
        run(&mut sim, 900);
        assert!(num(&sim, "Pump_01", "Vibration_X") > vib + 4.0);
        assert!(num(&sim, "Pump_01", "Bearing_Temperature") > bearing + 25.0);
        sim.enable(Scenario::Normal);
        assert_eq!(sim.active_scenarios(), ["normal"]);
        let suction = num(&sim, "Pump_01", "Suction_Pressure");
        sim.enable(Scenario::Cavitation);
        run(&mut sim, 90);
        assert!(num(&sim, "Pump_01", "Suction_Pressure") < suction - 1.0);
        sim.disable(Scenario::Cavitation);
        let current = num(&sim, "Motor_01", "Current_L1");
        sim.enable(Scenario::MotorOverload);
        run(&mut sim, 400);
        assert!(num(&sim, "Motor_01", "Current_L1") > current * 1.15);
    }

    #[test]
    fn overrides_hold_until_released_and_are_checked() {
        let mut sim = plant(3);
        sim.set_override("Pump_01", "Vibration_X", 9.5).unwrap();
        run(&mut sim, 10);
        assert_eq!(num(&sim, "Pump_01", "Vibration_X"), 9.5);
        sim.release("Pump_01", "Vibration_X").unwrap();
        run(&mut sim, 10);
        assert_ne!(num(&sim, "Pump_01", "Vibration_X"), 9.5);
        assert!(matches!(
            sim.set_override("Pump_01", "Vibration_X", 11.0),
            Err(ControlError::Invalid(m)) if m.contains("0..10 mm/s")
        ));
        assert!(matches!(
            sim.set_override("Pump_09", "X", 1.0),
            Err(ControlError::NotFound(_))
        ));
        assert!(matches!(
            sim.set_override("Pump_01", "Nope", 1.0),
            Err(ControlError::NotFound(_))
        ));
        assert!(matches!(
            sim.set_override("Pump_01", "Run_Status", 0.5),
            Err(ControlError::Invalid(_))
        ));
        assert!(matches!(
            sim.set_override("Pump_01", "Motor_Speed", 10.5),
            Err(ControlError::Invalid(_))
        ));
    }

    #[test]
    fn stopped_values_freeze_and_start_resumes() {
        let mut sim = plant(4);
        run(&mut sim, 10);
        sim.set_running(false);
        let frozen = sim.snapshot();
        let t = sim.status().simulation_seconds;
        run(&mut sim, 30);
        assert_eq!(sim.snapshot(), frozen);
        assert_eq!(sim.status().state, "stopped");
        assert_eq!(sim.status().simulation_seconds, t);
        sim.set_running(true);
        run(&mut sim, 5);
        assert_ne!(sim.snapshot(), frozen);
    }
}
