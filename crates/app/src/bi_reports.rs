//! BI reports (SPEC 2.10, 4.11; docs/api.md, "Reports"): a console dashboard read through the
//! BI engine under the creator's row-level-security rules, rendered as PDF or CSV by
//! `plantd_report` and mailed through the `[smtp]` relay, by hand or on a five-field cron
//! schedule in UTC. A scheduled run is claimed by moving the report's `next_run_at` with a
//! compare-and-set, so on several nodes sharing the database each run happens once; runs missed
//! while no node ran are made up by one run when a node starts.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use plantd_model::bi::{
    BiConfig, DashboardData, Report, ReportFormat, ReportRun, ReportRunStatus, ReportTrigger,
};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_model::{Timestamp, new_id};
use plantd_store::ReportFields;
use serde::Deserialize;
use std::time::Duration;
use tokio::sync::watch;

use crate::app::App;
use crate::bi::{conditions, dashboard_id_of};
use crate::caller::Caller;
use crate::error::{AppError, AppResult};

/// Recipients a report may have.
const MAX_RECIPIENTS: usize = 50;
/// Due reports one pass of the scheduler takes at most (the rest wait for the next pass).
const DUE_PER_PASS: u32 = 20;
/// A run still `running` after this long was cut off by its node stopping (the longest query
/// timeout is an hour; rendering and mailing take seconds).
const STALE_RUN: Duration = Duration::from_secs(2 * 3_600);
/// How long a scheduled run waits for one of the organization's query slots.
const SLOT_WAIT: Duration = Duration::from_secs(60);
const REPORT_WORKER: &str = "bi_reports";

/// `POST /v1/bi/reports`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewReport {
    pub name: String,
    /// A console dashboard's id (SPEC 2.10's integer is read as the id).
    #[schema(value_type = String)]
    pub dashboard_id: serde_json::Value,
    /// Five cron fields (minute hour day-of-month month day-of-week), UTC; names such as
    /// `MON-FRI` and `JAN` allowed.
    pub schedule: String,
    /// `pdf` (default) or `csv`.
    #[serde(default)]
    pub format: Option<String>,
    pub recipients: Vec<String>,
    /// Default true.
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// `PUT /v1/bi/reports/{id}`: absent fields keep their value.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportUpdate {
    pub name: Option<String>,
    #[schema(value_type = Option<String>)]
    pub dashboard_id: Option<serde_json::Value>,
    pub schedule: Option<String>,
    pub format: Option<String>,
    pub recipients: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

/// A five-field cron expression, parsed; or why not.
pub fn parse_schedule(text: &str) -> Result<Cron, String> {
    let fields = text.split_whitespace().count();
    if fields != 5 {
        return Err(format!(
            "must be five cron fields (minute hour day-of-month month day-of-week), not {fields}"
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| format!("is not a cron expression: {e}"))
}

/// The first time after `after` the schedule names (none if it names none again).
fn next_after(cron: &Cron, after: Timestamp) -> Option<Timestamp> {
    let at = chrono::DateTime::from_timestamp_millis(after.millis())?;
    cron.find_next_occurrence(&at, false)
        .ok()
        .map(|t| Timestamp::from_millis(t.timestamp_millis()))
}

/// A file name of the report at `at`: its name's letters and digits, and the time.
fn file_name(report: &Report, at: Timestamp) -> String {
    let stem: String = report
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let stamp: String = at
        .to_rfc3339()
        .chars()
        .take(16)
        .filter(|c| c.is_ascii_digit())
        .collect();
    let stem = if stem.is_empty() {
        "report".into()
    } else {
        stem
    };
    format!("{stem}-{stamp}.{}", report.format.as_str())
}

impl App {
    /// Checks a report's fields (the dashboard must be the organization's) and sets its next
    /// run.
    async fn checked_report(
        &self,
        org_id: &str,
        mut f: ReportFields,
        dashboard_id: Option<&serde_json::Value>,
        format: Option<&str>,
    ) -> AppResult<ReportFields> {
        let mut v = Validator::new();
        v.text("name", &f.name, 200);
        if let Some(d) = dashboard_id {
            match dashboard_id_of(d) {
                Some(id) => f.dashboard_id = id,
                None => v.add(
                    "dashboard_id",
                    "must be a dashboard's id (a string, or a number)",
                ),
            }
        }
        if let Some(format) = format {
            match ReportFormat::parse(format) {
                Some(fmt) => f.format = fmt,
                None => v.add("format", format!("unknown format '{format}': pdf or csv")),
            }
        }
        let cron = parse_schedule(&f.schedule);
        if let Err(e) = &cron {
            v.add("schedule", e.clone());
        }
        v.check(
            !f.recipients.is_empty() && f.recipients.len() <= MAX_RECIPIENTS,
            "recipients",
            format!("must list 1 to {MAX_RECIPIENTS} email addresses"),
        );
        for (i, r) in f.recipients.iter().enumerate() {
            if let Err(e) = plantd_alerts::channels::check_recipient(r) {
                v.add(format!("recipients[{i}]"), e);
            }
        }
        v.finish()?;
        self.dashboard_named(org_id, &f.dashboard_id, "dashboard_id")
            .await?;
        f.next_run_at = match (&cron, f.enabled) {
            (Ok(cron), true) => next_after(cron, Timestamp::now()),
            _ => None,
        };
        Ok(f)
    }

    pub async fn create_report(&self, caller: &Caller, new: NewReport) -> AppResult<Report> {
        let fields = ReportFields {
            name: new.name,
            dashboard_id: String::new(),
            schedule: new.schedule.trim().to_string(),
            format: ReportFormat::Pdf,
            recipients: new.recipients,
            enabled: new.enabled.unwrap_or(true),
            next_run_at: None,
        };
        let fields = self
            .checked_report(
                &caller.org_id,
                fields,
                Some(&new.dashboard_id),
                new.format.as_deref(),
            )
            .await?;
        Ok(self
            .store()
            .create_report(
                &caller.org_id,
                caller.actor(),
                caller.user_id.as_deref(),
                &fields,
            )
            .await?)
    }

    pub async fn report(&self, org_id: &str, id: &str) -> AppResult<Report> {
        self.store()
            .report(org_id, id)
            .await
            .map_err(AppError::missing("report"))
    }

    pub async fn reports(&self, org_id: &str) -> AppResult<Vec<Report>> {
        Ok(self.store().reports(org_id).await?)
    }

    pub async fn update_report(
        &self,
        org_id: &str,
        id: &str,
        u: ReportUpdate,
    ) -> AppResult<Report> {
        let r = self.report(org_id, id).await?;
        let fields = ReportFields {
            name: u.name.unwrap_or(r.name),
            dashboard_id: r.dashboard_id,
            schedule: u.schedule.map_or(r.schedule, |s| s.trim().to_string()),
            format: r.format,
            recipients: u.recipients.unwrap_or(r.recipients),
            enabled: u.enabled.unwrap_or(r.enabled),
            next_run_at: None,
        };
        let fields = self
            .checked_report(org_id, fields, u.dashboard_id.as_ref(), u.format.as_deref())
            .await?;
        self.store()
            .update_report(org_id, id, &fields)
            .await
            .map_err(AppError::missing("report"))
    }

    pub async fn delete_report(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_report(org_id, id)
            .await
            .map_err(AppError::missing("report"))
    }

    pub async fn report_runs(
        &self,
        org_id: &str,
        id: &str,
        page: Page,
    ) -> AppResult<Paged<ReportRun>> {
        self.report(org_id, id).await?;
        Ok(self.store().report_runs(org_id, id, page).await?)
    }

    /// `POST /v1/bi/reports/{id}/run`: runs the report now and answers the finished run (its
    /// status says whether it was rendered and sent).
    pub async fn run_report_now(&self, org_id: &str, id: &str) -> AppResult<ReportRun> {
        let report = self.report(org_id, id).await?;
        let config = self.bi_config(org_id).await?;
        let slot = self.query_slot(org_id, &config)?;
        let run = self
            .run_report(org_id, &report, &config, ReportTrigger::Manual, None)
            .await;
        drop(slot);
        run
    }

    /// Renders the report and mails it, recording the run (running, then how it ended). The
    /// caller holds a query slot.
    async fn run_report(
        &self,
        org_id: &str,
        report: &Report,
        config: &BiConfig,
        trigger: ReportTrigger,
        scheduled_for: Option<Timestamp>,
    ) -> AppResult<ReportRun> {
        let mut run = ReportRun {
            id: new_id(),
            report_id: report.id.clone(),
            trigger,
            scheduled_for,
            status: ReportRunStatus::Running,
            error: None,
            format: report.format,
            size_bytes: None,
            recipients: report.recipients.clone(),
            started_at: Timestamp::now(),
            finished_at: None,
        };
        self.store().insert_report_run(org_id, &run).await?;
        let outcome = self.render_and_send(org_id, report, config).await;
        run.finished_at = Some(Timestamp::now());
        match outcome {
            Ok(size) => {
                run.status = ReportRunStatus::Success;
                run.size_bytes = Some(size);
            }
            Err(e) => {
                run.status = ReportRunStatus::Error;
                run.error = Some(e);
            }
        }
        self.store().finish_report_run(org_id, &run).await?;
        Ok(run)
    }

    /// The report's file, mailed; its size, or why it could not be made or sent.
    async fn render_and_send(
        &self,
        org_id: &str,
        report: &Report,
        config: &BiConfig,
    ) -> Result<u64, String> {
        let data = self
            .report_data(org_id, report, config)
            .await
            .map_err(|e| e.to_string())?;
        let bytes = match report.format {
            ReportFormat::Pdf => {
                let name = report.name.clone();
                let data = data.clone();
                tokio::task::spawn_blocking(move || plantd_report::pdf(&name, &data))
                    .await
                    .map_err(|e| format!("rendering the PDF stopped: {e}"))?
            }
            ReportFormat::Csv => plantd_report::csv(&data)?,
        };
        let size = bytes.len() as u64;
        let mailer = self.mailer()?;
        let subject = format!("{} ({})", report.name, data.name);
        let body = format!(
            "The report \"{}\" of the dashboard \"{}\", generated {} (UTC), is attached.\n\n\
             Schedule: {} (UTC)\n",
            report.name,
            data.name,
            data.generated_at.to_rfc3339(),
            report.schedule
        );
        mailer
            .send_with_attachment(
                &report.recipients,
                &subject,
                &body,
                (
                    &file_name(report, data.generated_at),
                    report.format.content_type(),
                    bytes,
                ),
            )
            .await
            .map_err(|e| e.message)?;
        Ok(size)
    }

    /// The report's dashboard read under its creator's rules (as the creator's role is now;
    /// a creator who left the organization stops the report).
    async fn report_data(
        &self,
        org_id: &str,
        report: &Report,
        config: &BiConfig,
    ) -> AppResult<DashboardData> {
        let rules = match &report.run_as {
            Some(user) => {
                let role = self
                    .store()
                    .member(org_id, user)
                    .await
                    .map_err(|_| {
                        AppError::Forbidden(
                            "the report's creator is no longer a member of the organization".into(),
                        )
                    })?
                    .role;
                self.rules_of_role(org_id, role).await?
            }
            None => Vec::new(),
        };
        let dashboard = self.dashboard(org_id, &report.dashboard_id).await?;
        self.dashboard_data(
            org_id,
            config,
            &conditions(&rules),
            &dashboard,
            &Default::default(),
        )
        .await
    }

    /// One pass of the scheduler: claims each due report's run (moving its next run past now)
    /// and runs those this node claimed.
    async fn report_pass(&self) -> AppResult<()> {
        let now = Timestamp::now();
        let stale = Timestamp::from_millis(now.millis() - STALE_RUN.as_millis() as i64);
        let cut = self
            .store()
            .fail_stale_report_runs(stale, "interrupted: the node running it stopped")
            .await?;
        if cut > 0 {
            tracing::warn!(
                runs = cut,
                "report runs cut off by a stopped node are recorded as failed"
            );
        }
        for (org_id, report) in self.store().due_reports(now, DUE_PER_PASS).await? {
            let Some(due) = report.next_run_at else {
                continue;
            };
            // Runs missed while no node ran collapse into this one: the next is after now.
            let next = parse_schedule(&report.schedule)
                .ok()
                .and_then(|c| next_after(&c, now));
            if !self.store().claim_report_run(&report.id, due, next).await? {
                continue; // another node claimed it
            }
            let config = self.bi_config(&org_id).await?;
            let started = std::time::Instant::now();
            let slot = loop {
                match self.query_slot(&org_id, &config) {
                    Ok(s) => break Some(s),
                    Err(_) if started.elapsed() < SLOT_WAIT => {
                        tokio::time::sleep(Duration::from_millis(500)).await
                    }
                    Err(_) => break None,
                }
            };
            if slot.is_none() {
                tracing::warn!(report = %report.id, "a scheduled report waited a minute for a query slot; running it anyway");
            }
            let run = self
                .run_report(
                    &org_id,
                    &report,
                    &config,
                    ReportTrigger::Schedule,
                    Some(due),
                )
                .await?;
            if let Some(e) = &run.error {
                tracing::warn!(report = %report.id, error = %e, "a scheduled report failed");
            }
        }
        Ok(())
    }
}

/// The scheduler: a pass every `report_poll_interval`, until stopped.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(REPORT_WORKER);
    let mut tick = tokio::time::interval(app.config().report_poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let result = app.report_pass().await;
        if let Err(e) = &result {
            tracing::warn!(error = %plantd_model::error_chain(e), "report scheduling failed; retrying");
        }
        app.workers().report(
            REPORT_WORKER,
            result.map_err(|e| plantd_model::error_chain(&e)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_are_five_utc_fields() {
        let t = |s: &str| Timestamp::parse(s).unwrap();
        let weekdays = parse_schedule("30 6 * * MON-FRI").unwrap();
        // Friday 2026-11-27 07:00 UTC: next Monday 06:30.
        assert_eq!(
            next_after(&weekdays, t("2026-11-27T07:00:00Z")),
            Some(t("2026-11-30T06:30:00Z"))
        );
        let every = parse_schedule("*/15 * * * *").unwrap();
        assert_eq!(
            next_after(&every, t("2026-11-27T07:00:00Z")),
            Some(t("2026-11-27T07:15:00Z"))
        );
        assert!(parse_schedule("0 0 6 * * *").unwrap_err().contains("five"));
        assert!(parse_schedule("@daily").unwrap_err().contains("five"));
        assert!(parse_schedule("61 * * * *").is_err());
        assert!(parse_schedule("0 0 * * FUNDAY").is_err());
    }

    #[test]
    fn file_names_are_plain() {
        let r = Report {
            id: "r".into(),
            name: "Pumps: daily / Süd".into(),
            dashboard_id: "d".into(),
            schedule: "0 6 * * *".into(),
            format: ReportFormat::Pdf,
            recipients: vec![],
            enabled: true,
            created_by: "u".into(),
            run_as: None,
            next_run_at: None,
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
        };
        assert_eq!(
            file_name(&r, Timestamp::parse("2026-11-27T06:00:00Z").unwrap()),
            "Pumps-daily-S-d-202611270600.pdf"
        );
    }
}
