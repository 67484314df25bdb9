//! The audit trail (SPEC 4.13): records of requests (written by the API's request pipeline),
//! and reading them back: lists, one record, summaries, exports.

use plantd_model::audit::AuditRecord;
use plantd_model::page::{Page, Paged};
use plantd_store::NewAuditRecord;
pub use plantd_store::{AuditFilter, AuditSummary};

use crate::app::App;
use crate::error::{AppError, AppResult};

impl App {
    /// Stores a request's audit record durably.
    pub async fn record_audit(&self, record: &NewAuditRecord) -> AppResult<()> {
        self.store().insert_audit(record).await?;
        Ok(())
    }

    /// Records of the organization, newest first.
    pub async fn audit_logs(
        &self,
        org_id: &str,
        filter: &AuditFilter,
        page: Page,
    ) -> AppResult<Paged<AuditRecord>> {
        Ok(self.store().audit_logs(org_id, filter, page).await?)
    }

    pub async fn audit_log(&self, org_id: &str, id: &str) -> AppResult<AuditRecord> {
        self.store()
            .audit_log(org_id, id)
            .await
            .map_err(AppError::missing("audit record"))
    }

    /// Counts by severity, outcome and category, and the most frequent event types.
    pub async fn audit_summary(
        &self,
        org_id: &str,
        filter: &AuditFilter,
    ) -> AppResult<AuditSummary> {
        Ok(self.store().audit_summary(org_id, filter).await?)
    }

    /// Every matching record, oldest first (at most 100,000).
    pub async fn audit_export(
        &self,
        org_id: &str,
        filter: &AuditFilter,
    ) -> AppResult<Vec<AuditRecord>> {
        Ok(self.store().audit_export(org_id, filter).await?)
    }
}
