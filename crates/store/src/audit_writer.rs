//! The audit writer: records of concurrent requests are written together in one transaction
//! (one fsync for all of them) by the group writer (`group_writer.rs`), each request still
//! waiting for its record to be durable. Also the insert that the telemetry writer uses to commit an ingest's record with its
//! points.

use plantd_model::audit::{ActorType, AuditEvent, Outcome, Severity};

use crate::backend::Backend;
use crate::database::{Database, WriteTx};
use crate::error::Result;
use crate::group_writer::{Group, Queue};

/// What the request pipeline knows of a finished mutation.
#[derive(Clone, Debug)]
pub struct NewAuditRecord {
    pub org_id: Option<String>,
    pub actor_type: ActorType,
    pub actor_id: Option<String>,
    pub user_id: Option<String>,
    /// What was attempted; its category and resource type are recorded with it.
    pub event: AuditEvent,
    pub severity: Severity,
    pub outcome: Outcome,
    pub resource_id: Option<String>,
    pub method: String,
    pub path: String,
    pub status_code: u16,
    pub error_code: Option<String>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: String,
}

/// A record waiting for the audit writer: id, record, time.
pub(crate) type AuditJob = (String, NewAuditRecord, i64);

/// Audit records, written in groups (`group_writer.rs`).
pub(crate) struct AuditGroup;

/// The audit writer's queue.
pub(crate) type AuditQueue = Queue<AuditGroup>;

/// Records per INSERT (19 parameters each).
const AUDIT_ROWS_PER_INSERT: usize = 50;

impl Group for AuditGroup {
    type Job = AuditJob;
    type Answer = ();
    const NAME: &'static str = "audit";
    const QUEUE: usize = 1024;
    const PER_TX: usize = 500;

    async fn write(db: &Database, jobs: &[AuditJob]) -> Result<Vec<()>> {
        let mut tx = db.begin_write().await?;
        let rows: Vec<(&str, &NewAuditRecord, i64)> = jobs
            .iter()
            .map(|(id, r, ts)| (id.as_str(), r, *ts))
            .collect();
        insert_audit_rows(&mut tx, db.backend, &rows).await?;
        tx.commit().await?;
        Ok(vec![(); jobs.len()])
    }
}

/// Inserts audit records `(id, record, time)` inside a write transaction: the audit writer's,
/// or the telemetry writer's, which stores an ingest's record with its points.
pub async fn insert_audit_rows(
    tx: &mut WriteTx,
    backend: Backend,
    rows: &[(&str, &NewAuditRecord, i64)],
) -> std::result::Result<(), sqlx::Error> {
    let sqlite = backend == Backend::Sqlite;
    for chunk in rows.chunks(AUDIT_ROWS_PER_INSERT) {
        let mut sql = String::from(
            "INSERT INTO audit_logs (id, org_id, ts, actor_type, actor_id, user_id, category, event_type, severity, \
             outcome, resource_type, resource_id, method, path, status_code, error_code, client_ip, user_agent, request_id) VALUES ",
        );
        for i in 0..chunk.len() {
            sql.push_str(if i == 0 { "(" } else { ", (" });
            for k in 1..=19 {
                if k > 1 {
                    sql.push_str(", ");
                }
                if sqlite {
                    sql.push('?');
                } else {
                    sql.push_str(&format!("${}", i * 19 + k));
                }
            }
            sql.push(')');
        }
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (id, r, ts) in chunk {
            q = q
                .bind(*id)
                .bind(r.org_id.clone())
                .bind(*ts)
                .bind(r.actor_type.as_str())
                .bind(r.actor_id.clone())
                .bind(r.user_id.clone())
                .bind(r.event.category().as_str())
                .bind(r.event.name())
                .bind(r.severity.as_str())
                .bind(r.outcome.as_str())
                .bind(r.event.resource_type())
                .bind(r.resource_id.clone())
                .bind(&r.method)
                .bind(&r.path)
                .bind(i32::from(r.status_code))
                .bind(r.error_code.clone())
                .bind(r.client_ip.clone())
                .bind(r.user_agent.clone())
                .bind(&r.request_id);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}
