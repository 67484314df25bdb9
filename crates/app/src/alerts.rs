//! Alert rules and alerts (SPEC 2.5, 2.6, 4.4): managing rules (each change restarts its timing
//! in the alert engine), listing alerts, and moving them through their lifecycle (each change
//! published to live subscribers; webhooks and notifications follow from the outbox).

use plantd_model::alert::{Alert, AlertRule, AlertStatus, CHANNELS, Condition, Operator, Severity};
use plantd_model::event::EventType;
use plantd_model::page::{Page, Paged};
use plantd_model::telemetry::MAX_FUTURE_MS;
use plantd_model::telemetry::check_name;
use plantd_model::validation::Validator;
use plantd_model::{Timestamp, new_id};
pub use plantd_store::AlertFilter;
use plantd_store::{RuleFields, StoreError};
use serde::Deserialize;

use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};

/// The longest `duration_seconds` (7 days).
pub const MAX_DURATION_SECONDS: i64 = 7 * 86_400;
/// The longest acknowledgement note.
pub const MAX_NOTE_CHARS: usize = 2000;

/// A rule's condition as sent.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCondition {
    pub tag_name: String,
    /// gt, gte, lt, lte, eq, neq
    pub operator: Operator,
    pub value: f64,
    /// 0 (fire on the first matching point) to 604,800.
    pub duration_seconds: i64,
    /// Default: the larger of 60 and `duration_seconds`.
    pub max_gap_seconds: Option<i64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAlertRule {
    pub name: String,
    pub severity: Severity,
    pub data_source_id: String,
    pub asset_id: Option<String>,
    pub condition: NewCondition,
    /// email, slack, webhook (default none).
    pub notifications: Option<Vec<String>>,
    /// Default true.
    pub enabled: Option<bool>,
    /// Default true.
    pub auto_resolve: Option<bool>,
}

/// Partial update: absent fields keep their value; a given `condition` replaces the condition.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertRuleUpdate {
    pub name: Option<String>,
    pub severity: Option<Severity>,
    pub data_source_id: Option<String>,
    /// null or absent keeps it; "" applies the rule to every asset again.
    pub asset_id: Option<String>,
    pub condition: Option<NewCondition>,
    pub notifications: Option<Vec<String>>,
    pub enabled: Option<bool>,
    pub auto_resolve: Option<bool>,
}

/// An alert from outside the rule engine (a script, an edge device, another system). It then
/// follows the lifecycle of every alert: acknowledge, resolve, events, webhooks, notifications.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAlert {
    /// critical, warning or info
    pub severity: Severity,
    /// The asset the alert is about (1..128 characters, as telemetry asset ids).
    pub asset_id: String,
    /// What the alert is about (at most 200 characters); `title` or `message` is required, and a
    /// missing title is the message's first line.
    pub title: Option<String>,
    /// A longer text (at most 2,000 characters).
    pub message: Option<String>,
    /// Who raises it (at most 128 characters; default `api`).
    pub source: Option<String>,
    /// A data source of the organization the alert concerns.
    pub data_source_id: Option<String>,
    /// The tag the alert concerns (as telemetry tag names).
    pub tag_name: Option<String>,
    /// The value that caused it (a finite number).
    pub value: Option<f64>,
    /// Labels (at most 20, each 1..64 characters).
    pub tags: Option<Vec<String>>,
    /// Channels: email, slack, webhook (default none; webhooks subscribe to events anyway).
    pub notifications: Option<Vec<String>>,
    /// While an alert with this key is open, creating one with the same key returns that alert
    /// instead (at most 200 characters).
    pub dedup_key: Option<String>,
    /// When it happened (default now; at most 24 hours ahead).
    pub triggered_at: Option<Timestamp>,
}

/// The most tags an alert may carry.
pub const MAX_TAGS: usize = 20;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Acknowledgement {
    /// At most 2,000 characters.
    pub note: Option<String>,
}

/// Checks a new rule's fields (name, asset, condition, channels) and returns its condition
/// with defaults filled in (`POST /v1/alert-rules`, a clone's rules).
pub(crate) fn check_rule(
    v: &mut Validator,
    name: &str,
    asset_id: Option<&str>,
    c: &NewCondition,
    channels: &[String],
) -> Condition {
    v.text("name", name, 200);
    if let Some(a) = asset_id
        && let Err(e) = check_name(a)
    {
        v.add("asset_id", e);
    }
    let condition = condition(v, c);
    check_channels(v, channels);
    condition
}

fn condition(v: &mut Validator, c: &NewCondition) -> Condition {
    if let Err(e) = check_name(&c.tag_name) {
        v.add("condition.tag_name", e);
    }
    if !c.value.is_finite() {
        v.add("condition.value", "must be a finite number");
    }
    if !(0..=MAX_DURATION_SECONDS).contains(&c.duration_seconds) {
        v.add(
            "condition.duration_seconds",
            format!("must be between 0 and {MAX_DURATION_SECONDS}"),
        );
    }
    let max_gap = c.max_gap_seconds.unwrap_or(c.duration_seconds.max(60));
    if !(1..=MAX_DURATION_SECONDS).contains(&max_gap) {
        v.add(
            "condition.max_gap_seconds",
            format!("must be between 1 and {MAX_DURATION_SECONDS}"),
        );
    }
    Condition {
        tag_name: c.tag_name.clone(),
        operator: c.operator,
        value: c.value,
        duration_seconds: c.duration_seconds,
        max_gap_seconds: max_gap,
    }
}

/// Checks a list of notification channels (`notifications[i]`).
pub(crate) fn check_channels(v: &mut Validator, list: &[String]) {
    for (i, n) in list.iter().enumerate() {
        if !CHANNELS.contains(&n.as_str()) {
            v.add(
                format!("notifications[{i}]"),
                format!("must be one of {}", CHANNELS.join(", ")),
            );
        } else if list[..i].contains(n) {
            v.add(format!("notifications[{i}]"), "is listed twice");
        }
    }
}

impl App {
    /// Every rule of the organization, oldest first.
    pub async fn alert_rules(&self, org_id: &str) -> AppResult<Vec<AlertRule>> {
        Ok(self.store().alert_rules(org_id).await?)
    }

    pub async fn alert_rule(&self, org_id: &str, id: &str) -> AppResult<AlertRule> {
        self.store()
            .alert_rule(org_id, id)
            .await
            .map_err(AppError::missing("alert rule"))
    }

    /// Creates a rule; it applies to points of the data source (optionally one asset) whose tag
    /// is `condition.tag_name`.
    pub async fn create_alert_rule(&self, org_id: &str, new: NewAlertRule) -> AppResult<AlertRule> {
        let mut v = Validator::new();
        let channels = new.notifications.unwrap_or_default();
        let condition = check_rule(
            &mut v,
            &new.name,
            new.asset_id.as_deref(),
            &new.condition,
            &channels,
        );
        v.finish()?;
        self.check_rule_source(org_id, &new.data_source_id).await?;
        let rule = self
            .store()
            .create_alert_rule(
                org_id,
                RuleFields {
                    name: new.name.trim().to_string(),
                    severity: new.severity,
                    data_source_id: new.data_source_id,
                    asset_id: new.asset_id,
                    condition,
                    notifications: channels,
                    enabled: new.enabled.unwrap_or(true),
                    auto_resolve: new.auto_resolve.unwrap_or(true),
                },
            )
            .await?;
        self.alert_engine().rule_changed(org_id, &rule.id);
        Ok(rule)
    }

    /// Updates a rule; its timing starts afresh (open alerts stay open).
    pub async fn update_alert_rule(
        &self,
        org_id: &str,
        id: &str,
        update: AlertRuleUpdate,
    ) -> AppResult<AlertRule> {
        let current = self.alert_rule(org_id, id).await?;
        let mut v = Validator::new();
        if let Some(name) = &update.name {
            v.text("name", name, 200);
        }
        if let Some(a) = update.asset_id.as_deref().filter(|a| !a.is_empty())
            && let Err(e) = check_name(a)
        {
            v.add("asset_id", e);
        }
        let cond = update.condition.as_ref().map(|c| condition(&mut v, c));
        if let Some(n) = &update.notifications {
            check_channels(&mut v, n);
        }
        v.finish()?;
        if let Some(ds) = &update.data_source_id {
            self.check_rule_source(org_id, ds).await?;
        }
        let fields = RuleFields {
            name: update.name.map_or(current.name, |n| n.trim().to_string()),
            severity: update.severity.unwrap_or(current.severity),
            data_source_id: update.data_source_id.unwrap_or(current.data_source_id),
            asset_id: match update.asset_id {
                None => current.asset_id,
                Some(a) if a.is_empty() => None,
                Some(a) => Some(a),
            },
            condition: cond.unwrap_or(current.condition),
            notifications: update.notifications.unwrap_or(current.notifications),
            enabled: update.enabled.unwrap_or(current.enabled),
            auto_resolve: update.auto_resolve.unwrap_or(current.auto_resolve),
        };
        self.replace_alert_rule(org_id, id, fields).await
    }

    /// Switches a rule on or off (idempotent); a disabled rule stops firing, its open alerts
    /// stay open.
    pub async fn set_alert_rule_enabled(
        &self,
        org_id: &str,
        id: &str,
        enabled: bool,
    ) -> AppResult<AlertRule> {
        let current = self.alert_rule(org_id, id).await?;
        let fields = RuleFields {
            name: current.name,
            severity: current.severity,
            data_source_id: current.data_source_id,
            asset_id: current.asset_id,
            condition: current.condition,
            notifications: current.notifications,
            enabled,
            auto_resolve: current.auto_resolve,
        };
        self.replace_alert_rule(org_id, id, fields).await
    }

    /// Writes `fields` (checked) as the organization's rule of that name: replaced if one
    /// exists, else created. Returns whether it was created.
    pub(crate) async fn put_rule_by_name(
        &self,
        org_id: &str,
        fields: RuleFields,
    ) -> AppResult<bool> {
        let existing = self
            .store()
            .alert_rules(org_id)
            .await?
            .into_iter()
            .find(|r| r.name == fields.name);
        match existing {
            Some(r) => {
                self.replace_alert_rule(org_id, &r.id, fields).await?;
                Ok(false)
            }
            None => {
                let rule = self.store().create_alert_rule(org_id, fields).await?;
                self.alert_engine().rule_changed(org_id, &rule.id);
                Ok(true)
            }
        }
    }

    async fn replace_alert_rule(
        &self,
        org_id: &str,
        id: &str,
        fields: RuleFields,
    ) -> AppResult<AlertRule> {
        let rule = self
            .store()
            .update_alert_rule(org_id, id, fields)
            .await
            .map_err(AppError::missing("alert rule"))?;
        self.alert_engine().rule_changed(org_id, id);
        Ok(rule)
    }

    /// Deletes a rule; its open alerts are resolved (`resolved_by`: `rule_deleted`).
    pub async fn delete_alert_rule(&self, org_id: &str, id: &str) -> AppResult<()> {
        let resolved = self
            .store()
            .delete_alert_rule(org_id, id)
            .await
            .map_err(AppError::missing("alert rule"))?;
        self.alert_engine().rule_changed(org_id, id);
        for a in resolved {
            self.events().publish_alert(EventType::AlertResolved, a);
        }
        Ok(())
    }

    /// A rule watches one of the organization's data sources, devices (a device is the source
    /// of what it sends: its telemetry, heartbeat figures and `online` tag) or device groups
    /// (each of the group's devices).
    async fn check_rule_source(&self, org_id: &str, id: &str) -> AppResult<()> {
        let found = |r: Result<(), StoreError>| match r {
            Ok(()) => Ok(true),
            Err(StoreError::NotFound) => Ok(false),
            Err(e) => Err(AppError::from(e)),
        };
        let store = self.store();
        if found(store.data_source(org_id, id).await.map(drop))?
            || found(store.device(org_id, id).await.map(drop))?
            || found(store.group(org_id, id).await.map(drop))?
        {
            return Ok(());
        }
        Err(AppError::invalid(
            "data_source_id",
            "is not a data source, device or device group of this organization",
        ))
    }

    /// Creates an alert from outside the rule engine; returns it and whether it is new (an open
    /// alert with the same `dedup_key` is returned instead of a new one).
    pub async fn create_alert(&self, org_id: &str, new: NewAlert) -> AppResult<(Alert, bool)> {
        let now = Timestamp::now();
        let mut v = Validator::new();
        if let Err(e) = check_name(&new.asset_id) {
            v.add("asset_id", e);
        }
        let first_line = |m: &str| m.lines().next().unwrap_or_default().trim().to_string();
        let title = match (&new.title, &new.message) {
            (Some(t), _) => {
                v.text("title", t, 200);
                t.trim().to_string()
            }
            (None, Some(m)) if !first_line(m).is_empty() => {
                first_line(m).chars().take(200).collect()
            }
            _ => {
                v.add("title", "title or message is required");
                String::new()
            }
        };
        if let Some(m) = &new.message {
            v.check(
                !m.trim().is_empty() && m.chars().count() <= MAX_NOTE_CHARS,
                "message",
                format!("must be 1 to {MAX_NOTE_CHARS} characters"),
            );
        }
        if let Some(src) = &new.source {
            v.text("source", src, 128);
        }
        if let Some(t) = &new.tag_name
            && let Err(e) = check_name(t)
        {
            v.add("tag_name", e);
        }
        if let Some(x) = new.value {
            v.check(x.is_finite(), "value", "must be a finite number");
        }
        let tags = new.tags.unwrap_or_default();
        v.check(
            tags.len() <= MAX_TAGS,
            "tags",
            format!("at most {MAX_TAGS} tags"),
        );
        for (i, t) in tags.iter().enumerate() {
            v.text(&format!("tags[{i}]"), t, 64);
            if tags[..i].contains(t) {
                v.add(format!("tags[{i}]"), "is listed twice");
            }
        }
        let channels = new.notifications.unwrap_or_default();
        check_channels(&mut v, &channels);
        if let Some(k) = &new.dedup_key {
            v.text("dedup_key", k, 200);
        }
        if let Some(t) = new.triggered_at {
            v.check(
                t.millis() <= now.millis() + MAX_FUTURE_MS,
                "triggered_at",
                "must not be more than 24 hours in the future",
            );
        }
        v.finish()?;
        if let Some(ds) = &new.data_source_id {
            self.check_rule_source(org_id, ds).await?;
        }
        let alert = Alert {
            id: new_id(),
            org_id: org_id.to_string(),
            rule_id: None,
            rule_name: None,
            severity: new.severity,
            status: AlertStatus::Active,
            data_source_id: new.data_source_id,
            asset_id: new.asset_id,
            tag_name: new.tag_name,
            value: new.value.map(|x| x + 0.0),
            threshold: None,
            operator: None,
            title,
            message: new.message,
            source: new
                .source
                .map_or_else(|| "api".to_string(), |s| s.trim().to_string()),
            tags,
            notifications: channels,
            dedup_key: new.dedup_key,
            triggered_at: new.triggered_at.unwrap_or(now),
            acknowledged_at: None,
            acknowledged_by: None,
            note: None,
            resolved_at: None,
            resolved_by: None,
        };
        if let Some(opened) = self.store().open_alert(&alert).await? {
            self.events()
                .publish_alert(EventType::AlertTriggered, opened.clone());
            return Ok((opened, true));
        }
        // Not inserted: an open alert holds the deduplication key (the only unique key an
        // alert without a rule can meet).
        let key = alert.dedup_key.as_deref().unwrap_or_default();
        match self.store().open_alert_by_dedup_key(org_id, key).await? {
            Some(open) => Ok((open, false)),
            // Resolved between the insert and the read: try once more.
            None => match self.store().open_alert(&alert).await? {
                Some(opened) => {
                    self.events()
                        .publish_alert(EventType::AlertTriggered, opened.clone());
                    Ok((opened, true))
                }
                None => Err(AppError::Conflict(
                    "an alert with this dedup_key is changing; retry".into(),
                )),
            },
        }
    }

    /// Alerts of the organization, newest first.
    pub async fn alerts(
        &self,
        org_id: &str,
        filter: &AlertFilter,
        page: Page,
    ) -> AppResult<Paged<Alert>> {
        let (items, total) = self
            .store()
            .alerts(org_id, filter, page.limit(), page.offset())
            .await?;
        Ok(Paged { items, total })
    }

    /// Acknowledges an active alert (else a conflict), with an optional note.
    pub async fn acknowledge_alert(
        &self,
        caller: &Caller,
        id: &str,
        ack: Acknowledgement,
    ) -> AppResult<Alert> {
        if let Some(n) = &ack.note {
            let mut v = Validator::new();
            v.check(
                n.chars().count() <= MAX_NOTE_CHARS,
                "note",
                format!("must be at most {MAX_NOTE_CHARS} characters"),
            );
            v.finish()?;
        }
        self.change_alert(caller, id, AlertStatus::Acknowledged, ack.note.as_deref())
            .await
    }

    /// Resolves an active or acknowledged alert (else a conflict).
    pub async fn resolve_alert(&self, caller: &Caller, id: &str) -> AppResult<Alert> {
        self.change_alert(caller, id, AlertStatus::Resolved, None)
            .await
    }

    async fn change_alert(
        &self,
        caller: &Caller,
        id: &str,
        to: AlertStatus,
        note: Option<&str>,
    ) -> AppResult<Alert> {
        let changed = self
            .store()
            .transition_alert(&caller.org_id, id, to, caller.actor(), note)
            .await
            .map_err(AppError::missing("alert"))?;
        let Some(alert) = changed else {
            let current = self
                .store()
                .alert(&caller.org_id, id)
                .await
                .map_err(AppError::missing("alert"))?;
            let allowed = match to {
                AlertStatus::Acknowledged => "only an active alert can be acknowledged",
                _ => "only an active or acknowledged alert can be resolved",
            };
            return Err(AppError::Conflict(format!(
                "the alert is {}; {allowed}",
                current.status.as_str()
            )));
        };
        let event = match to {
            AlertStatus::Acknowledged => EventType::AlertAcknowledged,
            _ => {
                self.alert_engine().alert_closed(&alert);
                EventType::AlertResolved
            }
        };
        self.events().publish_alert(event, alert.clone());
        Ok(alert)
    }
}
