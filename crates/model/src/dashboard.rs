//! Dashboards (SPEC 2.4, 4.3): the layout object, its widgets and variables, and the checks
//! that need nothing but the layout itself (field paths such as
//! `layout.widgets[2].query.tags[0]`). Which data sources exist is the application's check.

use serde::{Deserialize, Serialize};

use crate::Validator;
use crate::telemetry::{Aggregation, check_name};

/// Grid columns when a layout gives none.
pub const DEFAULT_COLUMNS: u32 = 12;
pub const MAX_COLUMNS: u32 = 24;
pub const MAX_WIDGETS: usize = 50;
/// Grid rows a widget may span.
pub const MAX_WIDGET_HEIGHT: u32 = 24;
pub const MAX_TAGS_PER_WIDGET: usize = 8;
pub const MAX_VARIABLES: usize = 10;
pub const MAX_VARIABLE_OPTIONS: usize = 500;
pub const MAX_THRESHOLDS: usize = 10;
pub const MAX_TEXT: usize = 10_000;
/// The longest relative range a widget may show, in seconds (a year: the hourly rollups' default
/// retention).
pub const MAX_RANGE_SECS: i64 = 366 * 86_400;

/// What a dashboard shows and where: a grid of `columns`, its widgets, and the variables that
/// widgets refer to (`"asset_id": "$asset"`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// Grid columns, 1..24 (default 12).
    #[serde(default = "default_columns")]
    pub columns: u32,
    #[serde(default)]
    pub widgets: Vec<Widget>,
    /// Choices made on the page (an asset), at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<Variable>,
}

fn default_columns() -> u32 {
    DEFAULT_COLUMNS
}

impl Default for Layout {
    fn default() -> Self {
        Self {
            columns: DEFAULT_COLUMNS,
            widgets: Vec::new(),
            variables: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WidgetType {
    /// Trend of one or more tags over the range.
    LineChart,
    /// The latest value of one tag, large.
    Stat,
    /// The latest value of one tag on an arc between `options.min` and `options.max`.
    Gauge,
    /// The latest value of each tag, with time and quality.
    Table,
    /// Open alerts (of `query.asset_id` when given).
    AlertList,
    /// Plain text (`text`).
    Text,
}

impl WidgetType {
    /// The name a layout gives the type (`line_chart`).
    pub fn as_str(self) -> &'static str {
        match self {
            WidgetType::LineChart => "line_chart",
            WidgetType::Stat => "stat",
            WidgetType::Gauge => "gauge",
            WidgetType::Table => "table",
            WidgetType::AlertList => "alert_list",
            WidgetType::Text => "text",
        }
    }

    /// Whether the widget reads telemetry (and so needs an asset and tags).
    pub fn reads_telemetry(self) -> bool {
        !matches!(self, WidgetType::AlertList | WidgetType::Text)
    }
}

/// One widget: its place on the grid (`x`, `y` from 0, `w` columns by `h` rows), what it reads
/// and how it shows it.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Widget {
    /// Unique within the dashboard, 1..64 characters.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: WidgetType,
    #[serde(default)]
    pub title: String,
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
    /// Required for charts, stats, gauges and tables; optional for alert lists; none for text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<WidgetQuery>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<DisplayOptions>,
    /// Text widgets only (shown as plain text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The telemetry query's own parameters, with a relative range.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WidgetQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source_id: Option<String>,
    /// An asset id, or `$name` for the value of the variable `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset_id: Option<String>,
    /// Tag names, 1..8 (line charts and tables); stats and gauges show the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// How points are combined when the chart cannot show them all (default avg).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregation: Option<Aggregation>,
    /// The range shown, back from now: a number and `m`, `h` or `d` (`15m`, `24h`, `7d`);
    /// default `1h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DisplayOptions {
    /// Shown after values, at most 16 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Decimal places, 0..6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decimals: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Ascending values; from each one up, the value is shown in its colour.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Threshold>,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    pub value: f64,
    /// `normal`, `advisory`, `warning`, `critical` (the console's alarm colours) or `#rrggbb`.
    pub color: String,
}

/// A choice made on the page that widgets refer to as `$name`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Variable {
    /// 1..32 letters, digits or `_`, starting with a letter.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `asset` (the only kind today): an asset id.
    #[serde(default = "asset_kind", rename = "type")]
    pub kind: String,
    /// The value when the page names none.
    pub default: String,
    /// The values offered; empty: any asset that has data.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

fn asset_kind() -> String {
    "asset".into()
}

/// A relative range (`15m`, `24h`, `7d`) in seconds.
pub fn parse_range(text: &str) -> Option<i64> {
    let unit = match text.chars().last()? {
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return None,
    };
    let n: i64 = text[..text.len() - 1].parse().ok()?;
    (n > 0 && text.as_bytes()[0].is_ascii_digit())
        .then(|| n.checked_mul(unit))
        .flatten()
        .filter(|s| *s <= MAX_RANGE_SECS)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.len() <= 32
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_color(text: &str) -> bool {
    matches!(text, "normal" | "advisory" | "warning" | "critical")
        || (text.len() == 7
            && text.starts_with('#')
            && text[1..].chars().all(|c| c.is_ascii_hexdigit()))
}

/// Checks a layout; `at` is the path of the layout itself (`layout`).
pub fn check_layout(v: &mut Validator, at: &str, layout: &Layout) {
    let columns = layout.columns;
    if !(1..=MAX_COLUMNS).contains(&columns) {
        v.add(
            format!("{at}.columns"),
            format!("must be 1 to {MAX_COLUMNS}"),
        );
    }
    if layout.variables.len() > MAX_VARIABLES {
        v.add(
            format!("{at}.variables"),
            format!("must hold at most {MAX_VARIABLES} variables"),
        );
    }
    for (i, var) in layout.variables.iter().enumerate() {
        let p = format!("{at}.variables[{i}]");
        if !is_variable_name(&var.name) {
            v.add(
                format!("{p}.name"),
                "must be 1 to 32 letters, digits or _, starting with a letter",
            );
        } else if layout.variables[..i].iter().any(|o| o.name == var.name) {
            v.add(format!("{p}.name"), "is used by another variable");
        }
        if var.kind != "asset" {
            v.add(format!("{p}.type"), "must be asset");
        }
        if let Some(label) = &var.label {
            v.text(&format!("{p}.label"), label, 64);
        }
        if let Err(m) = check_name(&var.default) {
            v.add(format!("{p}.default"), m);
        }
        if var.options.len() > MAX_VARIABLE_OPTIONS {
            v.add(
                format!("{p}.options"),
                format!("must hold at most {MAX_VARIABLE_OPTIONS} values"),
            );
        }
        for (k, o) in var.options.iter().enumerate() {
            if let Err(m) = check_name(o) {
                v.add(format!("{p}.options[{k}]"), m);
            }
        }
        if !var.options.is_empty() && !var.options.contains(&var.default) {
            v.add(format!("{p}.default"), "must be one of options");
        }
    }
    if layout.widgets.len() > MAX_WIDGETS {
        v.add(
            format!("{at}.widgets"),
            format!("must hold at most {MAX_WIDGETS} widgets"),
        );
    }
    for (i, w) in layout.widgets.iter().enumerate() {
        check_widget(v, &format!("{at}.widgets[{i}]"), w, layout);
        if layout.widgets[..i].iter().any(|o| o.id == w.id) {
            v.add(format!("{at}.widgets[{i}].id"), "is used by another widget");
        }
    }
}

fn check_widget(v: &mut Validator, p: &str, w: &Widget, layout: &Layout) {
    if w.id.is_empty() || w.id.chars().count() > 64 || w.id.chars().any(char::is_control) {
        v.add(
            format!("{p}.id"),
            "must be 1 to 64 characters without control characters",
        );
    }
    if w.title.chars().count() > 200 || w.title.chars().any(char::is_control) {
        v.add(
            format!("{p}.title"),
            "must be at most 200 characters without control characters",
        );
    }
    if w.w == 0 || w.w > layout.columns {
        v.add(
            format!("{p}.w"),
            format!("must be 1 to the layout's columns ({})", layout.columns),
        );
    } else if w.x.saturating_add(w.w) > layout.columns {
        v.add(
            format!("{p}.x"),
            format!(
                "x + w must not pass the layout's columns ({})",
                layout.columns
            ),
        );
    }
    if w.h == 0 || w.h > MAX_WIDGET_HEIGHT {
        v.add(
            format!("{p}.h"),
            format!("must be 1 to {MAX_WIDGET_HEIGHT}"),
        );
    }
    if w.y > 1_000 {
        v.add(format!("{p}.y"), "must be at most 1000");
    }
    match (&w.kind, &w.text) {
        (WidgetType::Text, None) => v.add(format!("{p}.text"), "is required for text widgets"),
        (WidgetType::Text, Some(t)) if t.chars().count() > MAX_TEXT => {
            v.add(
                format!("{p}.text"),
                format!("must be at most {MAX_TEXT} characters"),
            );
        }
        (WidgetType::Text, Some(_)) => {}
        (_, Some(_)) => v.add(format!("{p}.text"), "is only for text widgets"),
        (_, None) => {}
    }
    match (&w.query, w.kind) {
        (None, kind) if kind.reads_telemetry() => {
            v.add(format!("{p}.query"), "is required for this widget type")
        }
        (Some(_), WidgetType::Text) => v.add(format!("{p}.query"), "is not for text widgets"),
        (Some(q), kind) => check_query(v, &format!("{p}.query"), q, kind, layout),
        (None, _) => {}
    }
    if let Some(o) = &w.options {
        check_options(v, &format!("{p}.options"), o);
    }
}

fn check_query(v: &mut Validator, p: &str, q: &WidgetQuery, kind: WidgetType, layout: &Layout) {
    match &q.asset_id {
        None if kind.reads_telemetry() => v.add(
            format!("{p}.asset_id"),
            "is required: an asset id or $variable",
        ),
        None => {}
        Some(a) => {
            if let Some(name) = a.strip_prefix('$') {
                if !layout.variables.iter().any(|var| var.name == name) {
                    v.add(
                        format!("{p}.asset_id"),
                        format!("names the variable {name}, which the layout does not declare"),
                    );
                }
            } else if let Err(m) = check_name(a) {
                v.add(format!("{p}.asset_id"), m);
            }
        }
    }
    if kind.reads_telemetry() && q.tags.is_empty() {
        v.add(format!("{p}.tags"), "must name at least one tag");
    }
    if !kind.reads_telemetry() && !q.tags.is_empty() {
        v.add(format!("{p}.tags"), "is not used by this widget type");
    }
    if q.tags.len() > MAX_TAGS_PER_WIDGET {
        v.add(
            format!("{p}.tags"),
            format!("must name at most {MAX_TAGS_PER_WIDGET} tags"),
        );
    }
    for (i, t) in q.tags.iter().enumerate() {
        if let Err(m) = check_name(t) {
            v.add(format!("{p}.tags[{i}]"), m);
        } else if q.tags[..i].contains(t) {
            v.add(format!("{p}.tags[{i}]"), "is listed twice");
        }
    }
    if let Some(r) = &q.range
        && parse_range(r).is_none()
    {
        v.add(
            format!("{p}.range"),
            "must be a number and m, h or d (15m, 24h, 7d), at most 366 days",
        );
    }
}

fn check_options(v: &mut Validator, p: &str, o: &DisplayOptions) {
    if let Some(unit) = &o.unit
        && (unit.chars().count() > 16 || unit.chars().any(char::is_control))
    {
        v.add(
            format!("{p}.unit"),
            "must be at most 16 characters without control characters",
        );
    }
    if o.decimals.is_some_and(|d| d > 6) {
        v.add(format!("{p}.decimals"), "must be 0 to 6");
    }
    for (field, x) in [("min", o.min), ("max", o.max)] {
        if x.is_some_and(|x| !x.is_finite()) {
            v.add(format!("{p}.{field}"), "must be a finite number");
        }
    }
    if let (Some(lo), Some(hi)) = (o.min, o.max)
        && lo >= hi
    {
        v.add(format!("{p}.max"), "must be greater than min");
    }
    if o.thresholds.len() > MAX_THRESHOLDS {
        v.add(
            format!("{p}.thresholds"),
            format!("must hold at most {MAX_THRESHOLDS} thresholds"),
        );
    }
    for (i, t) in o.thresholds.iter().enumerate() {
        if !t.value.is_finite() {
            v.add(
                format!("{p}.thresholds[{i}].value"),
                "must be a finite number",
            );
        } else if i > 0 && o.thresholds[i - 1].value >= t.value {
            v.add(
                format!("{p}.thresholds[{i}].value"),
                "must be greater than the threshold before it",
            );
        }
        if !is_color(&t.color) {
            v.add(
                format!("{p}.thresholds[{i}].color"),
                "must be normal, advisory, warning, critical or #rrggbb",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(layout: serde_json::Value) -> Vec<String> {
        let layout: Layout = serde_json::from_value(layout).unwrap();
        let mut v = Validator::new();
        check_layout(&mut v, "layout", &layout);
        v.finish()
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn ranges_are_a_number_and_a_unit() {
        assert_eq!(parse_range("15m"), Some(900));
        assert_eq!(parse_range("24h"), Some(86_400));
        assert_eq!(parse_range("7d"), Some(604_800));
        for bad in [
            "",
            "h",
            "0h",
            "-1h",
            "+1h",
            "1w",
            "1.5h",
            "367d",
            "99999999999999999d",
        ] {
            assert_eq!(parse_range(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_fault_is_named_by_its_path() {
        let fields = errors(json!({
            "columns": 12,
            "variables": [{"name": "asset", "default": "Pump_01", "options": ["Pump_02"]}],
            "widgets": [
                {"id": "a", "type": "line_chart", "x": 0, "y": 0, "w": 6, "h": 4,
                 "query": {"asset_id": "$asset", "tags": ["Vibration_X"], "range": "1h"}},
                {"id": "a", "type": "stat", "x": 10, "y": 0, "w": 4, "h": 2,
                 "query": {"asset_id": "$pump", "tags": []}},
                {"id": "c", "type": "gauge", "x": 0, "y": 4, "w": 3, "h": 3,
                 "query": {"asset_id": "Pump_01", "tags": ["a,b"], "range": "1w"},
                 "options": {"min": 10, "max": 0, "decimals": 9,
                             "thresholds": [{"value": 5, "color": "red"}, {"value": 4, "color": "critical"}]}},
                {"id": "d", "type": "text", "x": 0, "y": 8, "w": 12, "h": 1}
            ]
        }));
        assert_eq!(
            fields,
            [
                "layout.variables[0].default",
                "layout.widgets[1].x",
                "layout.widgets[1].query.asset_id",
                "layout.widgets[1].query.tags",
                "layout.widgets[1].id",
                "layout.widgets[2].query.tags[0]",
                "layout.widgets[2].query.range",
                "layout.widgets[2].options.decimals",
                "layout.widgets[2].options.max",
                "layout.widgets[2].options.thresholds[0].color",
                "layout.widgets[2].options.thresholds[1].value",
                "layout.widgets[3].text",
            ]
        );
    }

    #[test]
    fn a_sound_layout_passes() {
        assert!(
            errors(json!({
                "variables": [{"name": "asset", "label": "Pump", "default": "Pump_01"}],
                "widgets": [
                    {"id": "v", "type": "line_chart", "title": "Vibration", "x": 0, "y": 0, "w": 12, "h": 4,
                     "query": {"asset_id": "$asset", "tags": ["Vibration_X", "Vibration_Y"], "aggregation": "max", "range": "7d"},
                     "options": {"unit": "mm/s", "decimals": 2, "min": 0, "max": 20,
                                 "thresholds": [{"value": 4.5, "color": "warning"}, {"value": 7.1, "color": "#d0021b"}]}},
                    {"id": "alerts", "type": "alert_list", "x": 0, "y": 4, "w": 6, "h": 4},
                    {"id": "note", "type": "text", "x": 6, "y": 4, "w": 6, "h": 2, "text": "Shift notes"}
                ]
            }))
            .is_empty()
        );
    }
}
