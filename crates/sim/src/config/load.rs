//! Reading a configuration: YAML parsed through serde with the failing key path located to its
//! line, every pattern checked, and the files it names (replays) loaded once, so that a bad
//! configuration is refused when it is read.

use std::path::Path;

use super::*;

impl SimConfig {
    /// The configuration without a file: the assets of issue 4 with every variable of SPEC 2.17.
    pub fn default_plant() -> Self {
        let asset = |id: &str, kind: AssetType, linked: Option<&str>| AssetConfig {
            id: id.into(),
            kind,
            enabled: true,
            update_rate_ms: 1000,
            initial_state_running: true,
            linked_to: linked.map(str::to_string),
            variables: Vec::new(),
        };
        SimConfig {
            port: default_port(),
            security_mode: SecurityMode::None,
            security_policy: SecurityPolicy::Basic256Sha256,
            users: Vec::new(),
            max_sessions: 10,
            max_subscriptions: 100,
            assets: vec![
                asset("Pump_01", AssetType::CentrifugalPump, None),
                asset("Motor_01", AssetType::ElectricMotor, Some("Pump_01")),
                asset("HVAC_01", AssetType::Hvac, None),
                asset("Temperature_01", AssetType::TemperatureSensor, None),
                asset("Pressure_01", AssetType::PressureSensor, None),
                asset("Level_01", AssetType::LevelSensor, None),
                asset("Flow_01", AssetType::FlowSensor, None),
                asset("Vibration_01", AssetType::VibrationSensor, None),
            ],
            base_dir: PathBuf::from("."),
        }
    }

    /// Reads a YAML file; relative replay files are looked up next to it.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        let base = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Self::parse(&text, &base)
    }

    /// Parses YAML text.
    pub fn parse(text: &str, base_dir: &Path) -> Result<Self, ConfigError> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let raw: RawFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            // The key's own line where the text shows it (a value refused by a check, such as
            // a pattern's parameters, is otherwise reported at its parent's line).
            let at = line_of_path(text, &path)
                .or_else(|| inner.location().map(|l| l.line()))
                .map(|l| format!(" (line {l})"))
                .unwrap_or_default();
            let mut message = inner.to_string();
            // serde_yaml_ng adds the path and the location itself; each is shown once.
            if let Some(i) = message.find(" at line ") {
                message.truncate(i);
            }
            if let Some((prefix, rest)) = message.split_once(": ")
                && !prefix.contains(' ')
            {
                message = rest.to_string();
            }
            let key = if path == "." {
                "configuration".to_string()
            } else {
                path
            };
            ConfigError(format!("{key}{at}: {message}"))
        })?;
        if raw.max_sessions == 0 || raw.max_subscriptions == 0 {
            return Err(ConfigError(
                "max_sessions and max_subscriptions must be at least 1".into(),
            ));
        }
        let line_of = |key: &str| {
            line_of_path(text, key)
                .map(|n| format!(" (line {n})"))
                .unwrap_or_default()
        };
        let mut assets = Vec::with_capacity(raw.assets.len());
        for (i, a) in raw.assets.iter().enumerate() {
            let at = format!("assets[{i}]");
            let valid_id = !a.id.is_empty()
                && a.id.len() <= 64
                && a.id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid_id {
                return Err(ConfigError(format!(
                    "{at}.id{}: must be 1..64 letters, digits, '_' or '-'",
                    line_of(&format!("{at}.id"))
                )));
            }
            if raw.assets[..i].iter().any(|b| b.id == a.id) {
                return Err(ConfigError(format!(
                    "{at}.id{}: {} is used by another asset",
                    line_of(&format!("{at}.id")),
                    a.id
                )));
            }
            if let Some(l) = &a.linked_to
                && !raw.assets.iter().any(|b| &b.id == l && b.id != a.id)
            {
                return Err(ConfigError(format!(
                    "{at}.linked_to{}: no other asset has id {l:?}",
                    line_of(&format!("{at}.linked_to"))
                )));
            }
            for (j, v) in a.variables.iter().enumerate() {
                let vat = format!("{at}.variables[{j}]");
                if v.name.is_empty()
                    || !v
                        .name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    return Err(ConfigError(format!(
                        "{vat}.name{}: must be letters, digits or '_'",
                        line_of(&format!("{vat}.name"))
                    )));
                }
                if let Some((lo, hi)) = v.range
                    && !(lo.is_finite() && hi.is_finite() && lo < hi)
                {
                    return Err(ConfigError(format!(
                        "{vat}.range{}: must be [low, high] with low < high",
                        line_of(&format!("{vat}.range"))
                    )));
                }
            }
            assets.push(AssetConfig {
                id: a.id.clone(),
                kind: a.kind,
                enabled: a.enabled,
                update_rate_ms: a.update_rate_ms.map_or(1000, |r| r.0),
                initial_state_running: a.initial_state != Some(InitialState::Stopped),
                linked_to: a.linked_to.clone(),
                variables: a.variables.clone(),
            });
        }
        if assets.is_empty() {
            return Err(ConfigError(
                "assets: the configuration has no assets".into(),
            ));
        }
        for (i, u) in raw.security.users.iter().enumerate() {
            let at = format!("security.users[{i}].username");
            if u.username.is_empty() || u.password.is_empty() {
                return Err(ConfigError(format!(
                    "{at}{}: a user needs a non-empty username and password",
                    line_of(&at)
                )));
            }
        }
        let config = SimConfig {
            port: raw.server.port,
            security_mode: raw.security.mode,
            security_policy: raw.security.policy,
            users: raw.security.users.clone(),
            max_sessions: raw.max_sessions,
            max_subscriptions: raw.max_subscriptions,
            assets,
            base_dir: base_dir.to_path_buf(),
        };
        // Replay files and the rest are loaded now, so a bad file is refused at once.
        crate::engine::Simulation::new(&config, 0, 0.0).map_err(ConfigError)?;
        Ok(config)
    }
}

/// The line (1-based) of a key path such as `assets[1].variables[0].simulation` in block-style
/// YAML, found by indentation; `None` where the text does not show it that way.
fn line_of_path(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let content_at = |l: &str| l.len() - l.trim_start_matches([' ', '-']).len();
    let meaningful = |l: &str| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    };
    // The current region: lines [from, to) and the key's line.
    let (mut from, mut to, mut found) = (0usize, lines.len(), None);
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (key, index) = match segment.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (segment, None),
        };
        if !key.is_empty() {
            // Keys of this level start at the smallest content column of the region (after
            // indentation and list dashes).
            let base = (from..to)
                .filter(|&i| meaningful(lines[i]))
                .map(|i| content_at(lines[i]))
                .min()?;
            let i = (from..to).find(|&i| {
                let l = lines[i];
                content_at(l) == base
                    && l.trim_start_matches([' ', '-'])
                        .strip_prefix(key)
                        .is_some_and(|r| r.starts_with(':'))
            })?;
            let end = (i + 1..to)
                .find(|&j| {
                    let l = lines[j];
                    meaningful(l) && content_at(l) <= base
                })
                .unwrap_or(to);
            (from, to, found) = (i + 1, end, Some(i));
        }
        if let Some(n) = index {
            let item_indent = (from..to)
                .filter(|&i| lines[i].trim_start().starts_with("- "))
                .map(|i| indent(lines[i]))
                .min()?;
            let items: Vec<usize> = (from..to)
                .filter(|&i| {
                    indent(lines[i]) == item_indent && lines[i].trim_start().starts_with("- ")
                })
                .collect();
            let i = *items.get(n)?;
            let end = items.get(n + 1).copied().unwrap_or(to);
            // The item's first key is on the dash line: keep it in the region.
            (from, to, found) = (i, end, Some(i));
        }
    }
    found.map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SimConfig, String> {
        SimConfig::parse(text, Path::new(".")).map_err(|e| e.0)
    }

    #[test]
    fn reads_assets_variables_and_patterns() {
        let c = parse(
            "server:\n  port: 4841\nsecurity:\n  mode: SignAndEncrypt\n  policy: Basic256Sha256\nmax_sessions: 3\nassets:\n  - id: Pump_02\n    type: centrifugal_pump\n    update_rate_ms: 500\n    initial_state: running\n  - id: Motor_02\n    type: electric_motor\n    linked_to: Pump_02\n    variables:\n      - name: Custom_1\n        node_id: \"ns=2;s=Custom.One\"\n        data_type: Float\n        initial_value: 5\n        simulation:\n          type: sine\n          amplitude: 2\n          period_seconds: 60\n          offset: 5\n",
        )
        .unwrap();
        assert_eq!(c.port, 4841);
        assert_eq!(c.security_mode, SecurityMode::SignAndEncrypt);
        assert_eq!(c.max_sessions, 3);
        assert_eq!(c.max_subscriptions, 100);
        assert_eq!(c.assets.len(), 2);
        assert_eq!(c.assets[0].update_rate_ms, 500);
        assert_eq!(c.assets[1].linked_to.as_deref(), Some("Pump_02"));
        assert_eq!(
            c.assets[1].variables[0].node_id.as_deref(),
            Some("ns=2;s=Custom.One")
        );
    }

    #[test]
    fn errors_name_the_key_and_line() {
        let cases = [
            (
                "assets:\n  - id: P\n    type: rocket\n",
                "assets[0].type (line 3",
            ),
            (
                "assets:\n  - id: P\n    type: hvac\n    update_rate_ms: 1\n",
                "assets[0].update_rate_ms (line 4",
            ),
            (
                "assets:\n  - id: P\n    type: hvac\n    colour: red\n",
                "assets[0].colour (line 4",
            ),
            (
                "assets:\n  - id: P\n    type: hvac\n  - id: P\n    type: hvac\n",
                "assets[1].id (line 4",
            ),
            (
                "assets:\n  - id: P\n    type: hvac\n    linked_to: Q\n",
                "assets[0].linked_to (line 4",
            ),
            (
                "assets:\n  - id: P\n    type: hvac\n    variables:\n      - name: V\n        simulation:\n          type: random\n          min: 5\n          max: 1\n",
                "assets[0].variables[0].simulation (line 6",
            ),
            (
                "server:\n  port: 99999\nassets: []\n",
                "server.port (line 2",
            ),
            ("security:\n  mode: Maybe\n", "security.mode (line 2"),
        ];
        for (text, expected) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(expected), "{text:?}: {e}");
        }
    }
}
