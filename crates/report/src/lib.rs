//! BI reports without I/O (docs/api.md, "Reports"): a dashboard's data at one moment
//! ([`DashboardData`], read through the BI engine by the application) as an A4 PDF, drawn with
//! printpdf (title, time range, generation time, then each widget: line charts as vector
//! paths with their axes and legend, values and alerts as tables, text as text), or as CSV
//! (one row per value shown). PDF text uses the built-in Helvetica (WinAnsi), so no font file
//! is shipped: characters outside Latin-1 print as `?`.

use plantd_model::Timestamp;
use plantd_model::bi::{DashboardData, WidgetData};
use plantd_model::dashboard::WidgetType;
use printpdf::{
    BuiltinFont, Color, Line, LinePoint, Mm, Op, PdfDocument, PdfFontHandle, PdfPage,
    PdfSaveOptions, Point, Pt, Rgb, TextItem,
};

const PAGE_W: f32 = 210.0;
const PAGE_H: f32 = 297.0;
const MARGIN: f32 = 15.0;
const CHART_H: f32 = 60.0;
const ROW_H: f32 = 5.5;
/// Rows a table of one widget shows at most (the CSV has them all).
const MAX_TABLE_ROWS: usize = 40;
/// Colours of a chart's series (the console's trend palette).
const TRENDS: [(f32, f32, f32); 8] = [
    (0.118, 0.533, 0.898),
    (0.898, 0.224, 0.208),
    (0.263, 0.627, 0.278),
    (0.984, 0.549, 0.0),
    (0.557, 0.141, 0.667),
    (0.0, 0.592, 0.655),
    (0.427, 0.298, 0.255),
    (0.329, 0.431, 0.478),
];

fn rgb(r: f32, g: f32, b: f32) -> Color {
    Color::Rgb(Rgb {
        r,
        g,
        b,
        icc_profile: None,
    })
}

/// Text the built-in fonts can show (WinAnsi): Latin-1 printable characters, others `?`.
fn printable(text: &str, max_chars: usize) -> String {
    let mut out: String = text
        .chars()
        .map(|c| {
            if (' '..='~').contains(&c) || ('\u{a0}'..='\u{ff}').contains(&c) {
                c
            } else if c.is_whitespace() {
                ' '
            } else {
                '?'
            }
        })
        .take(max_chars)
        .collect();
    if text.chars().count() > max_chars {
        out.pop();
        out.push('~');
    }
    out
}

fn time_text(t: Timestamp) -> String {
    let s = t.to_rfc3339();
    // `2026-11-27T09:12:07.123Z` -> `2026-11-27 09:12:07 UTC`
    format!("{} UTC", s.get(..19).unwrap_or(&s).replace('T', " "))
}

fn number_text(v: Option<f64>, unit: Option<&str>, decimals: Option<u8>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let d = decimals.map_or(if v.abs() >= 100.0 { 1 } else { 2 }, usize::from);
            match unit {
                Some(u) if !u.is_empty() => format!("{v:.d$} {u}"),
                _ => format!("{v:.d$}"),
            }
        }
        _ => "-".into(),
    }
}

/// The pages being drawn: the ops of each, and the cursor (mm from the page's bottom).
struct Pages {
    done: Vec<Vec<Op>>,
    ops: Vec<Op>,
    y: f32,
}

impl Pages {
    fn new() -> Self {
        Self {
            done: Vec::new(),
            ops: Vec::new(),
            y: PAGE_H - MARGIN,
        }
    }

    /// Starts a new page unless `height` mm still fit on this one.
    fn room(&mut self, height: f32) {
        if self.y - height < MARGIN && !self.ops.is_empty() {
            self.done.push(std::mem::take(&mut self.ops));
            self.y = PAGE_H - MARGIN;
        }
    }

    fn text(&mut self, x: f32, y: f32, size: f32, bold: bool, text: &str) {
        let font = if bold {
            BuiltinFont::HelveticaBold
        } else {
            BuiltinFont::Helvetica
        };
        self.ops.extend([
            Op::StartTextSection,
            Op::SetFillColor {
                col: rgb(0.1, 0.1, 0.1),
            },
            Op::SetFont {
                font: PdfFontHandle::Builtin(font),
                size: Pt(size),
            },
            Op::SetTextCursor {
                pos: Point::new(Mm(x), Mm(y)),
            },
            Op::ShowText {
                items: vec![TextItem::Text(text.to_string())],
            },
            Op::EndTextSection,
        ]);
    }

    /// A line of text at the cursor, which moves down by `height` mm.
    fn line(&mut self, size: f32, bold: bool, height: f32, text: &str) {
        self.room(height);
        self.y -= height;
        let y = self.y;
        self.text(MARGIN, y, size, bold, text);
    }

    fn path(&mut self, points: &[(f32, f32)], color: Color, width: f32) {
        if points.len() < 2 {
            return;
        }
        self.ops.extend([
            Op::SetOutlineColor { col: color },
            Op::SetOutlineThickness { pt: Pt(width) },
            Op::DrawLine {
                line: Line {
                    points: points
                        .iter()
                        .map(|(x, y)| LinePoint {
                            p: Point::new(Mm(*x), Mm(*y)),
                            bezier: false,
                        })
                        .collect(),
                    is_closed: false,
                },
            },
        ]);
    }

    /// A table: a header row and rows, columns at the given x offsets (mm from the margin).
    fn table(&mut self, columns: &[(&str, f32)], rows: &[Vec<String>]) {
        self.room(ROW_H * 2.0);
        self.y -= ROW_H;
        let y = self.y;
        for (name, x) in columns {
            self.text(MARGIN + x, y, 8.5, true, name);
        }
        self.path(
            &[(MARGIN, y - 1.3), (PAGE_W - MARGIN, y - 1.3)],
            rgb(0.6, 0.6, 0.6),
            0.4,
        );
        for row in rows.iter().take(MAX_TABLE_ROWS) {
            self.room(ROW_H);
            self.y -= ROW_H;
            let y = self.y;
            for (i, (_, x)) in columns.iter().enumerate() {
                let width = columns
                    .get(i + 1)
                    .map_or(PAGE_W - 2.0 * MARGIN - x, |(_, next)| next - x);
                // Helvetica at 8.5 pt averages about 1.7 mm a character.
                let fits = (width / 1.7).max(4.0) as usize;
                let cell = row.get(i).map(String::as_str).unwrap_or_default();
                self.text(MARGIN + x, y, 8.5, false, &printable(cell, fits));
            }
        }
        if rows.len() > MAX_TABLE_ROWS {
            self.line(
                8.0,
                false,
                ROW_H,
                &format!(
                    "... {} more rows in the CSV format",
                    rows.len() - MAX_TABLE_ROWS
                ),
            );
        }
    }

    fn finish(mut self) -> Vec<Vec<Op>> {
        if !self.ops.is_empty() {
            self.done.push(self.ops);
        }
        self.done
    }
}

/// Draws a line chart's series in a box `CHART_H` mm high under the cursor.
fn chart(p: &mut Pages, w: &WidgetData) {
    let legend_h = 6.0;
    p.room(CHART_H + legend_h + 4.0);
    let (left, right) = (MARGIN + 16.0, PAGE_W - MARGIN);
    let top = p.y - 3.0;
    let bottom = top - CHART_H + 8.0;
    let (t0, t1) = (w.start.millis() as f64, w.end.millis() as f64);
    let values = w
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|(_, v)| *v));
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if let Some(o) = &w.options {
        lo = o.min.map_or(lo, |m| m.min(lo));
        hi = o.max.map_or(hi, |m| m.max(hi));
    }
    if !lo.is_finite() || !hi.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    if hi - lo < 1e-9 {
        (lo, hi) = (lo - 1.0, hi + 1.0);
    }
    let axis = rgb(0.45, 0.45, 0.45);
    p.path(
        &[(left, top), (left, bottom), (right, bottom)],
        axis.clone(),
        0.5,
    );
    let grid = rgb(0.85, 0.85, 0.85);
    for i in 1..4 {
        let y = bottom + (top - bottom) * i as f32 / 4.0;
        p.path(&[(left, y), (right, y)], grid.clone(), 0.3);
    }
    let (unit, decimals) = w
        .options
        .as_ref()
        .map_or((None, None), |o| (o.unit.as_deref(), o.decimals));
    p.text(
        MARGIN,
        top - 2.0,
        7.0,
        false,
        &number_text(Some(hi), unit, decimals),
    );
    p.text(
        MARGIN,
        bottom,
        7.0,
        false,
        &number_text(Some(lo), unit, decimals),
    );
    p.text(left, bottom - 4.5, 7.0, false, &time_text(w.start));
    p.text(right - 36.0, bottom - 4.5, 7.0, false, &time_text(w.end));
    let x_of = |t: i64| left + ((t as f64 - t0) / (t1 - t0).max(1.0)) as f32 * (right - left);
    let y_of = |v: f64| bottom + ((v - lo) / (hi - lo)) as f32 * (top - bottom);
    for (i, s) in w.series.iter().enumerate() {
        let (r, g, b) = TRENDS[i % TRENDS.len()];
        let points: Vec<(f32, f32)> = s
            .points
            .iter()
            .filter(|(t, v)| v.is_finite() && (*t as f64) >= t0 - 1.0 && (*t as f64) <= t1)
            .map(|(t, v)| (x_of(*t), y_of(*v)))
            .collect();
        p.path(&points, rgb(r, g, b), 1.0);
    }
    p.y = bottom - 8.0;
    let mut x = left;
    for (i, s) in w.series.iter().enumerate() {
        let (r, g, b) = TRENDS[i % TRENDS.len()];
        let y = p.y;
        p.path(&[(x, y + 1.2), (x + 6.0, y + 1.2)], rgb(r, g, b), 2.0);
        let label = printable(&s.tag, 30);
        p.text(x + 7.5, y, 8.0, false, &label);
        x += 12.0 + label.len() as f32 * 1.6;
    }
    let empty = w.series.iter().all(|s| s.points.is_empty());
    p.y -= 2.0;
    if empty {
        p.line(8.0, false, ROW_H, "No data in the range.");
    }
}

fn widget(p: &mut Pages, w: &WidgetData) {
    let title = if w.title.is_empty() {
        format!("{:?}", w.kind)
    } else {
        w.title.clone()
    };
    let subtitle = match &w.asset_id {
        Some(a) if w.kind != WidgetType::Text => format!("  ({a})"),
        _ => String::new(),
    };
    p.room(14.0);
    p.y -= 4.0;
    p.line(
        11.5,
        true,
        6.0,
        &printable(&format!("{title}{subtitle}"), 90),
    );
    if let Some(e) = &w.error {
        p.line(9.0, false, ROW_H, &printable(&format!("No data: {e}"), 110));
        return;
    }
    let (unit, decimals) = w
        .options
        .as_ref()
        .map_or((None, None), |o| (o.unit.as_deref(), o.decimals));
    match w.kind {
        WidgetType::LineChart => chart(p, w),
        WidgetType::Stat | WidgetType::Gauge | WidgetType::Table => {
            let rows: Vec<Vec<String>> = w
                .latest
                .iter()
                .map(|v| {
                    vec![
                        v.tag.clone(),
                        number_text(v.value, unit, decimals),
                        v.timestamp.map(time_text).unwrap_or_else(|| "-".into()),
                        v.quality.clone().unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect();
            p.table(
                &[
                    ("Tag", 0.0),
                    ("Value", 60.0),
                    ("Time", 100.0),
                    ("Quality", 150.0),
                ],
                &rows,
            );
        }
        WidgetType::AlertList => {
            if w.alerts.is_empty() {
                p.line(9.0, false, ROW_H, "No open alerts.");
                return;
            }
            let rows: Vec<Vec<String>> = w
                .alerts
                .iter()
                .map(|a| {
                    vec![
                        a.severity.clone().unwrap_or_default(),
                        a.title.clone().or(a.rule_name.clone()).unwrap_or_default(),
                        a.asset_id.clone().unwrap_or_default(),
                        a.triggered_at.map(time_text).unwrap_or_default(),
                        a.status.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            p.table(
                &[
                    ("Severity", 0.0),
                    ("Alert", 20.0),
                    ("Asset", 90.0),
                    ("Triggered", 120.0),
                    ("Status", 160.0),
                ],
                &rows,
            );
        }
        WidgetType::Text => {
            for line in w.text.as_deref().unwrap_or_default().lines() {
                // About 95 characters of 9.5 pt Helvetica fit the width.
                let mut rest = line;
                loop {
                    let cut = rest
                        .char_indices()
                        .nth(95)
                        .map_or(rest.len(), |(i, _)| rest[..i].rfind(' ').unwrap_or(i));
                    let (now, later) = rest.split_at(cut.max(1).min(rest.len()));
                    p.line(9.5, false, ROW_H, &printable(now, 120));
                    rest = later.trim_start();
                    if rest.is_empty() {
                        break;
                    }
                }
            }
        }
    }
}

/// The report as an A4 PDF: its name, the dashboard's, the time range and generation time,
/// then every widget in reading order (top to bottom, left to right).
pub fn pdf(report_name: &str, data: &DashboardData) -> Vec<u8> {
    let mut p = Pages::new();
    p.line(18.0, true, 8.0, &printable(report_name, 60));
    p.line(
        11.0,
        false,
        6.5,
        &printable(&format!("Dashboard: {}", data.name), 90),
    );
    if !data.description.is_empty() {
        p.line(9.0, false, ROW_H, &printable(&data.description, 110));
    }
    let start = data.widgets.iter().map(|w| w.start).min();
    if let Some(start) = start {
        p.line(
            9.0,
            false,
            ROW_H,
            &format!(
                "Time range: {} to {}",
                time_text(start),
                time_text(data.generated_at)
            ),
        );
    }
    p.line(
        9.0,
        false,
        ROW_H,
        &format!("Generated: {}", time_text(data.generated_at)),
    );
    let y = p.y - 2.0;
    p.path(
        &[(MARGIN, y), (PAGE_W - MARGIN, y)],
        rgb(0.3, 0.3, 0.3),
        0.6,
    );
    p.y -= 3.0;
    let mut order: Vec<&WidgetData> = data.widgets.iter().collect();
    order.sort_by_key(|w| (w.y, w.x));
    for w in order {
        widget(&mut p, w);
    }
    let pages = p
        .finish()
        .into_iter()
        .map(|ops| PdfPage::new(Mm(PAGE_W), Mm(PAGE_H), ops))
        .collect();
    let mut doc = PdfDocument::new(&printable(report_name, 200));
    let mut warnings = Vec::new();
    doc.with_pages(pages)
        .save(&PdfSaveOptions::default(), &mut warnings)
}

/// The report as CSV: `widget_id, widget_title, widget_type, asset_id, tag, timestamp, value,
/// quality, detail`, one row per chart point, latest value and open alert.
pub fn csv(data: &DashboardData) -> Result<Vec<u8>, String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let fail = |e: csv::Error| format!("cannot write the CSV: {e}");
    out.write_record([
        "widget_id",
        "widget_title",
        "widget_type",
        "asset_id",
        "tag",
        "timestamp",
        "value",
        "quality",
        "detail",
    ])
    .map_err(fail)?;
    for w in &data.widgets {
        let kind = w.kind.as_str();
        let asset = w.asset_id.clone().unwrap_or_default();
        let mut row =
            |tag: &str, at: Option<Timestamp>, value: Option<f64>, quality: &str, detail: &str| {
                out.write_record([
                    w.id.as_str(),
                    w.title.as_str(),
                    kind,
                    asset.as_str(),
                    tag,
                    &at.map(Timestamp::to_rfc3339).unwrap_or_default(),
                    &value.map(|v| v.to_string()).unwrap_or_default(),
                    quality,
                    detail,
                ])
            };
        if let Some(e) = &w.error {
            row("", None, None, "", &format!("error: {e}")).map_err(fail)?;
            continue;
        }
        for s in &w.series {
            for (t, v) in &s.points {
                row(&s.tag, Some(Timestamp::from_millis(*t)), Some(*v), "", "").map_err(fail)?;
            }
        }
        for v in &w.latest {
            row(
                &v.tag,
                v.timestamp,
                v.value,
                v.quality.as_deref().unwrap_or_default(),
                "",
            )
            .map_err(fail)?;
        }
        for a in &w.alerts {
            let detail = format!(
                "{} {} ({})",
                a.severity.as_deref().unwrap_or_default(),
                a.title
                    .as_deref()
                    .or(a.rule_name.as_deref())
                    .unwrap_or_default(),
                a.status.as_deref().unwrap_or_default()
            );
            row(
                a.tag_name.as_deref().unwrap_or_default(),
                a.triggered_at,
                a.value,
                "",
                &detail,
            )
            .map_err(fail)?;
        }
        if w.kind == WidgetType::Text {
            row("", None, None, "", w.text.as_deref().unwrap_or_default()).map_err(fail)?;
        }
    }
    out.into_inner()
        .map_err(|e| format!("cannot write the CSV: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use plantd_model::bi::{LatestValue, SeriesData};

    fn data() -> DashboardData {
        let now = Timestamp::from_millis(1_800_000_000_000);
        let start = Timestamp::from_millis(now.millis() - 3_600_000);
        let base = |id: &str, kind, title: &str, y| WidgetData {
            id: id.into(),
            kind,
            title: title.into(),
            x: 0,
            y,
            w: 12,
            h: 3,
            asset_id: Some("pump-1".into()),
            start,
            end: now,
            options: None,
            series: Vec::new(),
            latest: Vec::new(),
            alerts: Vec::new(),
            text: None,
            error: None,
        };
        let mut chart = base("c", WidgetType::LineChart, "Vibration", 0);
        chart.series = vec![SeriesData {
            tag: "vib_x".into(),
            step_secs: 60,
            points: (0..60)
                .map(|i| (start.millis() + i * 60_000, (i as f64 / 5.0).sin()))
                .collect(),
        }];
        let mut table = base("t", WidgetType::Table, "Now", 3);
        table.latest = vec![LatestValue {
            tag: "temp, bearing".into(),
            value: Some(71.25),
            timestamp: Some(now),
            quality: Some("good".into()),
        }];
        DashboardData {
            dashboard_id: "d".into(),
            name: "Pump station".into(),
            description: String::new(),
            columns: 12,
            generated_at: now,
            variables: Vec::new(),
            widgets: vec![table, chart],
        }
    }

    #[test]
    fn a_pdf_is_a_pdf() {
        let bytes = pdf("Daily pumps", &data());
        assert!(bytes.starts_with(b"%PDF-"), "{:?}", &bytes[..8]);
        assert!(bytes.len() > 1_000);
    }

    #[test]
    fn csv_rows_are_quoted_and_complete() {
        let text = String::from_utf8(csv(&data()).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 1 + 60, "{text}");
        assert!(
            lines[1].contains("\"temp, bearing\",2027-01-15T08:00:00.000Z,71.25,good"),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn text_outside_latin1_prints_as_question_marks() {
        assert_eq!(printable("Pumpe Süd – 北", 100), "Pumpe Süd ? ?");
        assert_eq!(printable("abcdef", 4), "abc~");
    }
}
