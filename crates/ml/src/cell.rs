//! A dataset's cells: what a CSV field becomes in a column of a given type, and the type a
//! column is inferred to have from a sample of its fields (docs/api.md, "Column types").

use plantd_model::Timestamp;
use plantd_model::ml::ColumnType;
use serde_json::Value;

/// One cell: empty, or a value of its column's type (timestamps and strings are text).
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Null,
    Number(f64),
    Bool(bool),
    Text(String),
}

impl Cell {
    /// The cell as JSON (`null`, a number, a boolean or a string).
    pub fn to_json(&self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Number(n) => serde_json::Number::from_f64(*n)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            Cell::Bool(b) => Value::Bool(*b),
            Cell::Text(s) => Value::String(s.clone()),
        }
    }

    /// The cell as text, as validation rules compare it (`None` when empty).
    pub fn text(&self) -> Option<String> {
        match self {
            Cell::Null => None,
            Cell::Number(n) => Some(number_text(*n)),
            Cell::Bool(b) => Some(b.to_string()),
            Cell::Text(s) => Some(s.clone()),
        }
    }
}

/// A number as JSON writes it (`3` for 3.0).
pub fn number_text(n: f64) -> String {
    serde_json::Number::from_f64(n)
        .map(|x| x.to_string())
        .unwrap_or_else(|| n.to_string())
}

/// Why a field is not a value of its column's type.
pub fn parse(field: &str, column_type: ColumnType) -> Result<Cell, &'static str> {
    if field.is_empty() {
        return Ok(Cell::Null);
    }
    match column_type {
        ColumnType::String => Ok(Cell::Text(field.to_string())),
        ColumnType::Number => {
            let f = field.trim();
            if f.is_empty() {
                return Ok(Cell::Null);
            }
            match f.parse::<f64>() {
                Ok(n) if n.is_finite() => Ok(Cell::Number(n)),
                _ => Err("is not a number"),
            }
        }
        ColumnType::Boolean => match field.trim().to_ascii_lowercase().as_str() {
            "" => Ok(Cell::Null),
            "true" => Ok(Cell::Bool(true)),
            "false" => Ok(Cell::Bool(false)),
            _ => Err("is not true or false"),
        },
        ColumnType::Timestamp => {
            let f = field.trim();
            if f.is_empty() {
                return Ok(Cell::Null);
            }
            match Timestamp::parse(f) {
                Ok(_) => Ok(Cell::Text(f.to_string())),
                Err(_) => Err("is not an RFC 3339 timestamp"),
            }
        }
    }
}

/// The type of a column whose sampled non-empty fields are `fields`: number, boolean,
/// timestamp, else string (a column with no sampled value is a string column).
pub fn infer<'a>(fields: impl Iterator<Item = &'a str> + Clone) -> ColumnType {
    let mut fields = fields.filter(|f| !f.trim().is_empty()).peekable();
    if fields.peek().is_none() {
        return ColumnType::String;
    }
    [
        ColumnType::Number,
        ColumnType::Boolean,
        ColumnType::Timestamp,
    ]
    .into_iter()
    .find(|t| fields.clone().all(|f| parse(f, *t).is_ok()))
    .unwrap_or(ColumnType::String)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_by_type() {
        assert_eq!(parse("", ColumnType::Number), Ok(Cell::Null));
        assert_eq!(parse(" 1.5 ", ColumnType::Number), Ok(Cell::Number(1.5)));
        assert!(parse("NaN", ColumnType::Number).is_err());
        assert!(parse("inf", ColumnType::Number).is_err());
        assert!(parse("abc", ColumnType::Number).is_err());
        assert_eq!(parse("TRUE", ColumnType::Boolean), Ok(Cell::Bool(true)));
        assert!(parse("yes", ColumnType::Boolean).is_err());
        assert!(parse("2026-01-01T00:00:00Z", ColumnType::Timestamp).is_ok());
        assert!(parse("yesterday", ColumnType::Timestamp).is_err());
        assert_eq!(
            parse(" a ", ColumnType::String),
            Ok(Cell::Text(" a ".into()))
        );
    }

    #[test]
    fn infers_the_narrowest_type() {
        let t = |v: &[&str]| infer(v.iter().copied());
        assert_eq!(t(&["1", "", "2.5"]), ColumnType::Number);
        assert_eq!(t(&["true", "False"]), ColumnType::Boolean);
        assert_eq!(t(&["2026-01-01T00:00:00Z"]), ColumnType::Timestamp);
        assert_eq!(t(&["1", "x"]), ColumnType::String);
        assert_eq!(t(&["", ""]), ColumnType::String);
    }
}
