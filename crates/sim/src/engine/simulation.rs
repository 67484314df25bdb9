//! The `Simulation` driver: the clock and its update schedule, enabled scenarios, overrides, and
//! what clients read (variable views, status).

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;
use std::collections::BTreeMap;

use super::equipment::{Context, build_asset, typed, update_asset};
use super::{Asset, MAINTENANCE_SECONDS, Scenario, Value, Variable};
use crate::catalog::{AssetType, DataType};
use crate::config::SimConfig;

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
