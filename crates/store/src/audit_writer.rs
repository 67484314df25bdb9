//! The audit writer: records of concurrent requests are written together by one task, in one
//! transaction (one fsync for all of them), each request still waiting for its record to be
//! durable. Also the insert that the telemetry writer uses to commit an ingest's record with its
//! points.

use plantd_model::audit::{ActorType, AuditEvent, Outcome, Severity};

use crate::backend::Backend;
use crate::database::{Database, WriteTx};
use crate::error::{Result, StoreError};

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

/// A record waiting for the audit writer: id, record, time, and where to answer.
type AuditJob = (
    String,
    NewAuditRecord,
    i64,
    tokio::sync::oneshot::Sender<std::result::Result<(), String>>,
);

/// The audit writer's queue.
pub(crate) type AuditQueue = tokio::sync::mpsc::Sender<AuditJob>;

/// Records that may wait for the audit writer before callers wait to queue.
const AUDIT_QUEUE: usize = 1024;
/// Records per INSERT (19 parameters each).
const AUDIT_ROWS_PER_INSERT: usize = 50;

/// Starts the writer task on `db` and returns its queue.
pub(crate) fn spawn(db: Database) -> AuditQueue {
    let (tx, rx) = tokio::sync::mpsc::channel(AUDIT_QUEUE);
    tokio::spawn(run(db, rx));
    tx
}

/// Queues a record and waits until it is durable.
pub(crate) async fn write(
    queue: &AuditQueue,
    id: String,
    r: &NewAuditRecord,
    ts: i64,
) -> Result<()> {
    let (reply, outcome) = tokio::sync::oneshot::channel();
    let gone = || StoreError::Writer("the audit writer stopped before answering".into());
    queue
        .send((id, r.clone(), ts, reply))
        .await
        .map_err(|_| gone())?;
    outcome
        .await
        .map_err(|_| gone())?
        .map_err(|e| StoreError::Writer(format!("audit write failed: {e}")))
}

/// Writes every record queued behind the first in one transaction, then answers each.
async fn run(db: Database, mut rx: tokio::sync::mpsc::Receiver<AuditJob>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < 500 {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let outcome = write_group(&db, &jobs).await;
        if let Err(e) = &outcome {
            tracing::error!(error = %plantd_model::error_chain(e), records = jobs.len(), "could not write audit records");
        }
        for (_, _, _, reply) in jobs {
            let _ = reply.send(match &outcome {
                Ok(()) => Ok(()),
                Err(e) => Err(plantd_model::error_chain(e)),
            });
        }
    }
}

async fn write_group(db: &Database, jobs: &[AuditJob]) -> Result<()> {
    let mut tx = db.begin_write().await?;
    let rows: Vec<(&str, &NewAuditRecord, i64)> = jobs
        .iter()
        .map(|(id, r, ts, _)| (id.as_str(), r, *ts))
        .collect();
    insert_audit_rows(&mut tx, db.backend, &rows).await?;
    tx.commit().await?;
    Ok(())
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
