//! Helpers for building SQL that runs on both backends: `WHERE` clauses with numbered
//! placeholders, and `LIKE` patterns; and the column readers the modules share (JSON text,
//! nullable times, event names).

/// Escapes `%`, `_` and `\` for a `LIKE ... ESCAPE '\'` pattern.
pub(crate) fn like_pattern(text: &str) -> String {
    let mut out = String::from("%");
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// Builds `WHERE` clauses with numbered placeholders for the `Any` driver.
pub(crate) struct Where {
    clauses: Vec<String>,
    args: Vec<Arg>,
}

#[derive(Clone, Debug)]
pub(crate) enum Arg {
    Text(String),
    Int(i64),
}

impl Where {
    pub(crate) fn new() -> Self {
        Self {
            clauses: Vec::new(),
            args: Vec::new(),
        }
    }
    /// Adds a clause where `?` stands for the next placeholder(s).
    pub(crate) fn push(&mut self, clause: &str, args: impl IntoIterator<Item = Arg>) {
        let mut text = String::new();
        let mut pieces = clause.split('?').peekable();
        let args: Vec<Arg> = args.into_iter().collect();
        let mut used = 0;
        while let Some(piece) = pieces.next() {
            text.push_str(piece);
            if pieces.peek().is_some() {
                used += 1;
                text.push_str(&format!("${}", self.args.len() + used));
            }
        }
        debug_assert_eq!(used, args.len(), "placeholder count of '{clause}'");
        self.args.extend(args);
        self.clauses.push(text);
    }
    pub(crate) fn sql(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }
    pub(crate) fn next_placeholder(&self, offset: usize) -> String {
        format!("${}", self.args.len() + offset)
    }
    pub(crate) fn bind<'q>(
        &self,
        mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
        for a in &self.args {
            q = match a {
                Arg::Text(s) => q.bind(s.clone()),
                Arg::Int(i) => q.bind(*i),
            };
        }
        q
    }
}

/// Reads an event name column (`alert.triggered`, ...).
/// A JSON text column read into `T`.
pub(crate) fn json_column<T: serde::de::DeserializeOwned>(
    row: &sqlx::any::AnyRow,
    column: &str,
) -> crate::error::Result<T> {
    use sqlx::Row;
    let text: String = row.try_get(column)?;
    Ok(serde_json::from_str(&text)?)
}

/// A nullable JSON text column read into `T`.
pub(crate) fn opt_json_column<T: serde::de::DeserializeOwned>(
    row: &sqlx::any::AnyRow,
    column: &str,
) -> crate::error::Result<Option<T>> {
    use sqlx::Row;
    let text: Option<String> = row.try_get(column)?;
    Ok(text.map(|t| serde_json::from_str(&t)).transpose()?)
}

/// A nullable Unix-milliseconds column.
pub(crate) fn opt_ts(
    row: &sqlx::any::AnyRow,
    column: &str,
) -> crate::error::Result<Option<plantd_model::Timestamp>> {
    use sqlx::Row;
    Ok(row
        .try_get::<Option<i64>, _>(column)?
        .map(plantd_model::Timestamp::from_millis))
}

pub(crate) fn event_column(
    row: &sqlx::any::AnyRow,
    column: &str,
) -> crate::error::Result<plantd_model::event::EventType> {
    use sqlx::Row;
    let name: String = row.try_get(column)?;
    plantd_model::event::EventType::parse(&name)
        .ok_or_else(|| crate::error::StoreError::Corrupt(format!("event {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_numbers_placeholders() {
        let mut w = Where::new();
        w.push("org_id = ?", [Arg::Text("o".into())]);
        w.push("ts BETWEEN ? AND ?", [Arg::Int(1), Arg::Int(2)]);
        assert_eq!(w.sql(), " WHERE org_id = $1 AND ts BETWEEN $2 AND $3");
        assert_eq!(w.next_placeholder(1), "$4");
        assert_eq!(like_pattern("50%_a"), "%50\\%\\_a%");
    }
}
