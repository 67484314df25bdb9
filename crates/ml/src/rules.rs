//! Validation rules (docs/api.md, "Validation and quality"): each rule's config checked when
//! it is made, and a checker that runs every rule over a dataset's chunks in row order and
//! gives the result with its quality score and grade.

use std::collections::HashSet;

use plantd_model::Timestamp;
use plantd_model::Validator;
use plantd_model::ml::{
    Column, ColumnType, MAX_ISSUE_ROWS, RuleType, ValidationIssue, ValidationResult,
    ValidationRule, grade,
};
use regex::Regex;
use serde_json::Value;

use crate::cell::Cell;
use crate::chunk::Chunk;

const MAX_PATTERN: usize = 1000;
const MAX_VALUES: usize = 1000;

/// Checks a rule's column and config; `column` is the dataset's column of that name, if any.
pub fn check_rule(v: &mut Validator, rule_type: RuleType, column: Option<&Column>, config: &Value) {
    let Some(column) = column else {
        v.add("column", "is not a column of the dataset");
        return;
    };
    let object = match config {
        Value::Object(o) => o.clone(),
        Value::Null => Default::default(),
        _ => {
            v.add("config", "must be an object");
            return;
        }
    };
    let known: &[&str] = match rule_type {
        RuleType::Range => &["min", "max"],
        RuleType::NotNull | RuleType::Unique => &[],
        RuleType::AllowedValues => &["values"],
        RuleType::Regex => &["pattern"],
    };
    for key in object.keys() {
        if !known.contains(&key.as_str()) {
            v.add(
                format!("config.{key}"),
                format!("is not a setting of a {} rule", rule_type.as_str()),
            );
        }
    }
    match rule_type {
        RuleType::Range => {
            v.check(
                column.column_type == ColumnType::Number,
                "column",
                format!(
                    "is a {} column; a range rule needs a number column",
                    column.column_type.as_str()
                ),
            );
            let bound = |k: &str, v: &mut Validator| match object.get(k) {
                None | Some(Value::Null) => None,
                Some(x) => {
                    let n = x.as_f64().filter(|n| n.is_finite());
                    v.check(n.is_some(), &format!("config.{k}"), "must be a number");
                    n
                }
            };
            let (min, max) = (bound("min", v), bound("max", v));
            v.check(
                object.get("min").is_some_and(|x| !x.is_null())
                    || object.get("max").is_some_and(|x| !x.is_null()),
                "config",
                "needs min, max or both",
            );
            if let (Some(a), Some(b)) = (min, max) {
                v.check(a <= b, "config.max", "must be at least min");
            }
        }
        RuleType::AllowedValues => match object.get("values") {
            Some(Value::Array(values)) => {
                v.check(
                    (1..=MAX_VALUES).contains(&values.len()),
                    "config.values",
                    format!("must hold 1 to {MAX_VALUES} values"),
                );
                v.check(
                    values
                        .iter()
                        .all(|x| x.is_string() || x.is_number() || x.is_boolean()),
                    "config.values",
                    "must hold strings, numbers or booleans",
                );
            }
            _ => v.add("config.values", "is required: the array of allowed values"),
        },
        RuleType::Regex => match object.get("pattern") {
            Some(Value::String(p)) if p.len() <= MAX_PATTERN => {
                if let Err(e) = Regex::new(p) {
                    v.add("config.pattern", format!("does not compile: {e}"));
                }
            }
            Some(Value::String(_)) => v.add(
                "config.pattern",
                format!("must be at most {MAX_PATTERN} characters"),
            ),
            _ => v.add("config.pattern", "is required: a regular expression"),
        },
        RuleType::NotNull | RuleType::Unique => {}
    }
}

#[derive(Hash, PartialEq, Eq)]
enum Key {
    Number(u64),
    Bool(bool),
    Text(String),
}

enum Test {
    Range(Option<f64>, Option<f64>),
    NotNull,
    Unique(HashSet<Key>),
    Allowed(HashSet<String>),
    Pattern(Regex),
}

struct Running {
    rule: ValidationRule,
    column: usize,
    test: Test,
    violations: u64,
    rows: Vec<u64>,
}

impl Running {
    /// Whether the cell violates the rule.
    fn violated(&mut self, cell: Cell) -> bool {
        match (&mut self.test, cell) {
            (Test::NotNull, c) => c == Cell::Null,
            (_, Cell::Null) => false,
            (Test::Range(min, max), Cell::Number(n)) => {
                min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m)
            }
            (Test::Range(..), _) => false,
            (Test::Unique(seen), c) => {
                let key = match c {
                    Cell::Number(n) => Key::Number(if n == 0.0 { 0 } else { n.to_bits() }),
                    Cell::Bool(b) => Key::Bool(b),
                    Cell::Text(s) => Key::Text(s),
                    Cell::Null => return false,
                };
                !seen.insert(key)
            }
            (Test::Allowed(values), c) => c.text().is_some_and(|t| !values.contains(&t)),
            (Test::Pattern(re), c) => c.text().is_some_and(|t| !re.is_match(&t)),
        }
    }
}

/// Runs rules over chunks given in row order.
pub struct Checker {
    rules: Vec<Running>,
    rows: u64,
    violating_rows: u64,
}

impl Checker {
    /// Rules whose column the dataset no longer has are left out.
    pub fn new(rules: &[ValidationRule], columns: &[Column]) -> Self {
        let rules = rules
            .iter()
            .filter_map(|r| {
                let column = columns.iter().position(|c| c.name == r.column)?;
                let f = |k: &str| r.config.get(k).and_then(Value::as_f64);
                let test = match r.rule_type {
                    RuleType::Range => Test::Range(f("min"), f("max")),
                    RuleType::NotNull => Test::NotNull,
                    RuleType::Unique => Test::Unique(HashSet::new()),
                    RuleType::AllowedValues => Test::Allowed(
                        r.config
                            .get("values")
                            .and_then(Value::as_array)
                            .map(|a| {
                                a.iter()
                                    .map(|x| match x {
                                        Value::String(s) => s.clone(),
                                        other => other.to_string(),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                    ),
                    RuleType::Regex => Test::Pattern(
                        r.config
                            .get("pattern")
                            .and_then(Value::as_str)
                            .and_then(|p| Regex::new(p).ok())?,
                    ),
                };
                Some(Running {
                    rule: r.clone(),
                    column,
                    test,
                    violations: 0,
                    rows: Vec::new(),
                })
            })
            .collect();
        Self {
            rules,
            rows: 0,
            violating_rows: 0,
        }
    }

    /// Checks the chunk whose first row is `first_row_id`.
    pub fn add(&mut self, first_row_id: u64, chunk: &Chunk) {
        let n = chunk.rows();
        let mut bad = vec![false; n];
        for r in &mut self.rules {
            let Some(data) = chunk.columns.get(r.column) else {
                continue;
            };
            for (row, flag) in bad.iter_mut().enumerate() {
                if r.violated(data.cell(row)) {
                    r.violations += 1;
                    *flag = true;
                    if r.rows.len() <= MAX_ISSUE_ROWS {
                        r.rows.push(first_row_id + row as u64);
                    }
                }
            }
        }
        self.rows += n as u64;
        self.violating_rows += bad.iter().filter(|b| **b).count() as u64;
    }

    pub fn finish(self, at: Timestamp) -> ValidationResult {
        let score = if self.rows == 0 {
            100.0
        } else {
            let clean = (self.rows - self.violating_rows) as f64 / self.rows as f64;
            (clean * 1000.0).round() / 10.0
        };
        let issues: Vec<ValidationIssue> = self
            .rules
            .into_iter()
            .filter(|r| r.violations > 0)
            .map(|mut r| {
                let truncated = r.rows.len() > MAX_ISSUE_ROWS;
                r.rows.truncate(MAX_ISSUE_ROWS);
                ValidationIssue {
                    rule_id: r.rule.id,
                    rule_name: r.rule.name,
                    column: r.rule.column,
                    rule_type: r.rule.rule_type,
                    violations: r.violations,
                    rows: r.rows,
                    rows_truncated: truncated,
                }
            })
            .collect();
        ValidationResult {
            valid: issues.is_empty(),
            issues,
            quality_score: score,
            grade: grade(score).into(),
            row_count: self.rows,
            validated_at: at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(id: &str, t: RuleType, column: &str, config: Value) -> ValidationRule {
        ValidationRule {
            id: id.into(),
            dataset_id: "d".into(),
            name: id.into(),
            rule_type: t,
            column: column.into(),
            config,
            created_at: Timestamp::from_millis(0),
        }
    }

    #[test]
    fn refuses_bad_configs_by_field() {
        let num = Column {
            name: "x".into(),
            column_type: ColumnType::Number,
        };
        let text = Column {
            name: "s".into(),
            column_type: ColumnType::String,
        };
        let fields = |t, c: Option<&Column>, config: Value| {
            let mut v = Validator::new();
            check_rule(&mut v, t, c, &config);
            v.finish()
                .err()
                .map(|e| e.into_iter().map(|e| e.field).collect::<Vec<_>>())
        };
        assert_eq!(
            fields(RuleType::Range, Some(&num), json!({"min": 0, "max": 1})),
            None
        );
        assert_eq!(
            fields(RuleType::Range, None, json!({})),
            Some(vec!["column".to_string()])
        );
        assert_eq!(
            fields(RuleType::Range, Some(&num), json!({"min": 2, "max": 1})),
            Some(vec!["config.max".to_string()])
        );
        assert_eq!(
            fields(RuleType::Range, Some(&text), json!({"min": 0})),
            Some(vec!["column".to_string()])
        );
        assert_eq!(
            fields(RuleType::Range, Some(&num), json!({})),
            Some(vec!["config".to_string()])
        );
        assert_eq!(
            fields(RuleType::Regex, Some(&text), json!({"pattern": "("})),
            Some(vec!["config.pattern".to_string()])
        );
        assert_eq!(
            fields(RuleType::AllowedValues, Some(&text), json!({"values": []})),
            Some(vec!["config.values".to_string()])
        );
        assert_eq!(
            fields(RuleType::NotNull, Some(&text), json!({"x": 1})),
            Some(vec!["config.x".to_string()])
        );
    }

    #[test]
    fn counts_violations_and_scores() {
        let columns = vec![
            Column {
                name: "x".into(),
                column_type: ColumnType::Number,
            },
            Column {
                name: "s".into(),
                column_type: ColumnType::String,
            },
        ];
        let rules = vec![
            rule("r", RuleType::Range, "x", json!({"min": 0, "max": 10})),
            rule("n", RuleType::NotNull, "x", json!({})),
            rule("u", RuleType::Unique, "s", json!({})),
            rule(
                "a",
                RuleType::AllowedValues,
                "s",
                json!({"values": ["a", "b", "c", "d"]}),
            ),
            rule("p", RuleType::Regex, "s", json!({"pattern": "^[a-c]$"})),
        ];
        let mut chunk = Chunk::new(&[ColumnType::Number, ColumnType::String]);
        for (x, s) in [
            (Some(1.0), "a"),
            (Some(11.0), "b"),
            (None, "c"),
            (Some(2.0), "a"),
            (Some(3.0), "d"),
        ] {
            chunk.push_row(vec![
                x.map_or(Cell::Null, Cell::Number),
                Cell::Text(s.into()),
            ]);
        }
        let mut c = Checker::new(&rules, &columns);
        c.add(1, &chunk);
        let r = c.finish(Timestamp::from_millis(0));
        let got: Vec<_> = r
            .issues
            .iter()
            .map(|i| (i.rule_id.as_str(), i.violations, i.rows.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("r", 1, vec![2]),
                ("n", 1, vec![3]),
                ("u", 1, vec![4]),
                ("p", 1, vec![5])
            ]
        );
        assert!(!r.valid);
        assert_eq!(r.quality_score, 20.0);
        assert_eq!(r.grade, "F");
    }
}
