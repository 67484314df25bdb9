//! The demo plant of `plantd up`: a device group for the plant's edge agent (which reads the
//! simulator and forwards its points over MQTT), dashboards over the simulated pump, motor and
//! HVAC unit, and alert rules watching the group. Created through the same use cases as the API
//! (so it is validated like any user's), each piece only if missing: a second start creates
//! nothing twice. A demo plant of an earlier version read the simulator through an OPC UA data
//! source of its own; that source is turned off and its rules watch the group instead.

use serde_json::{Value, json};

use crate::app::App;
use crate::data_sources::DataSourceUpdate;
use crate::error::{AppError, AppResult};

/// The data source of the demo plant of earlier versions, which read the simulator directly.
pub const OLD_DEMO_SOURCE: &str = "Simulator (OPC UA)";

/// The device group of the demo plant's edge agent; the demo rules watch it.
pub const DEMO_GROUP: &str = "Plant edge";

/// What [`App::seed_demo`] did.
#[derive(Debug, Default)]
pub struct DemoReport {
    /// What was created or changed, said on the console.
    pub created: Vec<String>,
    /// The device group the edge agent enrolls into.
    pub group_id: String,
}

fn line(id: &str, title: &str, pos: [u32; 4], asset: &str, tags: &[&str], options: Value) -> Value {
    json!({"id": id, "type": "line_chart", "title": title,
        "x": pos[0], "y": pos[1], "w": pos[2], "h": pos[3],
        "query": {"asset_id": asset, "tags": tags, "range": "15m"}, "options": options})
}

fn single(
    kind: &str,
    id: &str,
    title: &str,
    pos: [u32; 4],
    asset: &str,
    tag: &str,
    options: Value,
) -> Value {
    json!({"id": id, "type": kind, "title": title,
        "x": pos[0], "y": pos[1], "w": pos[2], "h": pos[3],
        "query": {"asset_id": asset, "tags": [tag]}, "options": options})
}

fn alert_list(asset: &str, pos: [u32; 4]) -> Value {
    json!({"id": "alerts", "type": "alert_list", "title": "Open alerts",
        "x": pos[0], "y": pos[1], "w": pos[2], "h": pos[3], "query": {"asset_id": asset}})
}

/// The demo's alert rules: name, severity, asset, tag, threshold (`gt`), seconds. The
/// dashboards draw the same thresholds with the same severities, so a chart never shows
/// "warning" where the rule raises "critical".
const RULES: [(&str, &str, &str, &str, f64, i64); 4] = [
    (
        "Pump vibration high",
        "critical",
        "Pump_01",
        "Vibration_X",
        5.0,
        30,
    ),
    (
        "Pump bearing hot",
        "warning",
        "Pump_01",
        "Bearing_Temperature",
        80.0,
        60,
    ),
    (
        "Motor stator hot",
        "critical",
        "Motor_01",
        "Stator_Temperature",
        130.0,
        60,
    ),
    (
        "HVAC CO2 high",
        "warning",
        "HVAC_01",
        "CO2_Level",
        1200.0,
        120,
    ),
];

/// A widget's thresholds: `early` warnings below a rule (value, colour) and the rule of `tag`,
/// whose severity shows from its threshold up.
fn thresholds(tag: &str, early: &[(f64, &str)]) -> Value {
    let mut list: Vec<Value> = early
        .iter()
        .map(|(v, c)| json!({"value": v, "color": c}))
        .collect();
    if let Some((_, severity, _, _, value, _)) = RULES.iter().find(|r| r.3 == tag) {
        list.push(json!({"value": value, "color": severity}));
    }
    Value::Array(list)
}

/// The demo dashboards: name, description, layout.
fn dashboards() -> Vec<(&'static str, &'static str, Value)> {
    let vib = json!({"unit": "mm/s", "decimals": 2, "min": 0.0, "max": 12.0,
        "thresholds": thresholds("Vibration_X", &[(4.5, "warning")])});
    let pump = json!({
        "columns": 12,
        "variables": [{"name": "pump", "label": "Pump", "type": "asset", "default": "Pump_01", "options": ["Pump_01"]}],
        "widgets": [
            line("vibration", "Vibration (ISO 10816)", [0, 0, 8, 5], "$pump", &["Vibration_X", "Vibration_Y", "Vibration_Z"], vib.clone()),
            single("gauge", "vib-x", "Vibration X", [8, 0, 4, 5], "$pump", "Vibration_X", vib),
            line("temperatures", "Temperatures", [0, 5, 8, 4], "$pump", &["Motor_Temperature", "Bearing_Temperature"],
                json!({"unit": "°C", "decimals": 1, "thresholds": thresholds("Bearing_Temperature", &[])})),
            single("stat", "flow", "Flow", [8, 5, 2, 2], "$pump", "Flow_Rate", json!({"unit": "L/min", "decimals": 0})),
            single("stat", "speed", "Speed", [10, 5, 2, 2], "$pump", "Motor_Speed", json!({"unit": "RPM", "decimals": 0})),
            single("stat", "discharge", "Discharge", [8, 7, 2, 2], "$pump", "Discharge_Pressure", json!({"unit": "bar", "decimals": 2})),
            single("stat", "current", "Current", [10, 7, 2, 2], "$pump", "Motor_Current", json!({"unit": "A", "decimals": 1})),
            alert_list("$pump", [0, 9, 12, 3]),
        ]
    });
    let motor = json!({
        "columns": 12,
        "widgets": [
            line("temps", "Stator and rotor", [0, 0, 8, 5], "Motor_01", &["Stator_Temperature", "Rotor_Temperature"],
                json!({"unit": "°C", "decimals": 1, "thresholds": thresholds("Stator_Temperature", &[(120.0, "warning")])})),
            single("gauge", "power", "Active power", [8, 0, 4, 5], "Motor_01", "Active_Power", json!({"unit": "kW", "decimals": 1, "min": 0.0, "max": 75.0})),
            line("currents", "Phase currents", [0, 5, 8, 4], "Motor_01", &["Current_L1", "Current_L2", "Current_L3"], json!({"unit": "A", "decimals": 1})),
            json!({"id": "electrical", "type": "table", "title": "Electrical", "x": 8, "y": 5, "w": 4, "h": 4,
                "query": {"asset_id": "Motor_01", "tags": ["Voltage_L1", "Voltage_L2", "Voltage_L3", "Power_Factor", "Speed"]},
                "options": {"decimals": 2}}),
            alert_list("Motor_01", [0, 9, 12, 3]),
        ]
    });
    let hvac = json!({
        "columns": 12,
        "widgets": [
            line("air", "Supply and return air", [0, 0, 8, 5], "HVAC_01", &["Supply_Temperature", "Return_Temperature"], json!({"unit": "°C", "decimals": 1})),
            single("stat", "co2", "CO2", [8, 0, 4, 2], "HVAC_01", "CO2_Level",
                json!({"unit": "ppm", "decimals": 0, "thresholds": thresholds("CO2_Level", &[])})),
            single("gauge", "humidity", "Humidity", [8, 2, 4, 3], "HVAC_01", "Humidity", json!({"unit": "%", "decimals": 0, "min": 0.0, "max": 100.0})),
            line("fan", "Fan speed", [0, 5, 8, 4], "HVAC_01", &["Fan_Speed"], json!({"unit": "%", "decimals": 0, "min": 0.0, "max": 100.0})),
            single("stat", "filter", "Filter", [8, 5, 4, 2], "HVAC_01", "Filter_Status", json!({"unit": "%", "decimals": 0})),
            json!({"id": "about", "type": "text", "title": "About", "x": 8, "y": 7, "w": 4, "h": 2,
                "text": "Simulated air handling unit. Change the scenario with `plantd sim scenario enable ...`."}),
        ]
    });
    vec![
        (
            "Pump station",
            "The simulated centrifugal pump: vibration, temperatures, flow and alerts.",
            pump,
        ),
        (
            "Motor",
            "The simulated electric motor: temperatures, phases and power.",
            motor,
        ),
        (
            "HVAC",
            "The simulated air handling unit: air temperatures, CO2, humidity and fan.",
            hvac,
        ),
    ]
}

/// The demo alert rules (watching `ds`: a data source, a device or a device group).
fn rules(ds: &str) -> Vec<Value> {
    RULES
        .iter()
        .map(|(name, severity, asset, tag, value, secs)| {
            json!({"name": name, "severity": severity, "data_source_id": ds, "asset_id": asset,
                "condition": {"tag_name": tag, "operator": "gt", "value": value, "duration_seconds": secs}})
        })
        .collect()
}

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> AppResult<T> {
    serde_json::from_value(v).map_err(|e| AppError::internal("the demo plant is malformed", e))
}

impl App {
    /// Creates what is missing of the demo plant in `org_id`.
    pub async fn seed_demo(&self, org_id: &str) -> AppResult<DemoReport> {
        let mut report = DemoReport::default();
        let group = self
            .store()
            .groups(org_id, (1_000, 0))
            .await?
            .0
            .into_iter()
            .find(|g| g.name == DEMO_GROUP);
        report.group_id = match group {
            Some(g) => g.id,
            None => {
                let new = parse(json!({"name": DEMO_GROUP,
                    "description": "The plant's edge agent: it reads the simulator and forwards its points here over MQTT (plantd up)."}))?;
                report
                    .created
                    .push(format!("device group \"{DEMO_GROUP}\""));
                self.create_group(org_id, new).await?.id
            }
        };
        let names = self.store().dashboard_names(org_id).await?;
        for (name, description, layout) in dashboards() {
            if names.iter().any(|n| n == name) {
                continue;
            }
            let new = parse(json!({"name": name, "description": description, "layout": layout}))?;
            self.create_dashboard(org_id, new).await?;
            report.created.push(format!("dashboard \"{name}\""));
        }
        // An earlier demo plant: its source read the simulator beside the edge agent (every
        // point twice); it is turned off, and its rules watch the edge's group.
        let old = self
            .data_sources(org_id)
            .await?
            .iter()
            .find(|d| d.name == OLD_DEMO_SOURCE && d.enabled)
            .cloned();
        let rules_now = self.alert_rules(org_id).await?;
        if let Some(old) = &old {
            let update: DataSourceUpdate = parse(json!({"enabled": false}))?;
            self.update_data_source(org_id, &old.id, update).await?;
            report.created.push(format!(
                "data source \"{OLD_DEMO_SOURCE}\" turned off (the edge agent reads the simulator now)"
            ));
            for rule in rules_now.iter().filter(|r| r.data_source_id == old.id) {
                let update = parse(json!({"data_source_id": report.group_id}))?;
                self.update_alert_rule(org_id, &rule.id, update).await?;
            }
        }
        for rule in rules(&report.group_id) {
            let name = rule["name"].as_str().unwrap_or_default().to_string();
            if rules_now.iter().any(|r| r.name == name) {
                continue;
            }
            self.create_alert_rule(org_id, parse(rule)?).await?;
            report.created.push(format!("alert rule \"{name}\""));
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every widget threshold on a tag a demo rule watches shows the rule's severity from the
    /// rule's threshold up, and nothing above it disagrees.
    #[test]
    fn widgets_and_rules_agree() {
        for (_, _, layout) in dashboards() {
            for w in layout["widgets"].as_array().unwrap() {
                let tags: Vec<&str> = match w["query"]["tags"].as_array() {
                    Some(t) => t.iter().filter_map(Value::as_str).collect(),
                    None => w["query"]["tag_name"].as_str().into_iter().collect(),
                };
                let Some(list) = w["options"]["thresholds"].as_array() else {
                    continue;
                };
                for (_, severity, _, tag, value, _) in RULES.iter().filter(|r| tags.contains(&r.3))
                {
                    let at_rule = list
                        .iter()
                        .rfind(|t| t["value"].as_f64().unwrap() <= *value)
                        .unwrap_or_else(|| panic!("{tag}: no threshold at the rule's {value}"));
                    assert_eq!(at_rule["value"].as_f64(), Some(*value), "{tag}");
                    assert_eq!(at_rule["color"], *severity, "{tag}");
                    assert!(
                        list.iter().all(|t| t["value"].as_f64().unwrap() <= *value),
                        "{tag}: a threshold above the rule's disagrees with it: {list:?}"
                    );
                }
            }
        }
    }
}
