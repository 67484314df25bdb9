//! Alert notifications: an organization's settings (who gets email, where Slack posts go) and
//! the log of email and Slack notifications (see `deliveries.rs` for sending).

use axum::extract::State;
use axum::response::Response;
use plantd_model::Timestamp;
use plantd_model::data_source::parse_url;
use plantd_model::page::PageQuery;
use plantd_model::validation::Validator;
use plantd_store::{Notification, NotificationFilter, NotificationSettings};
use serde::{Deserialize, Deserializer, Serialize};

use crate::envelope::{Data, List, list, ok};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ValidJson, ValidQuery};
use crate::routes::{check_post_url, page_of};
use crate::state::{AppState, Caller};

/// At most this many email recipients per organization.
pub const MAX_RECIPIENTS: usize = 50;

#[derive(Serialize, utoipa::ToSchema)]
pub struct SettingsView {
    /// Who gets alert emails (rules with the `email` channel).
    pub email_recipients: Vec<String>,
    /// The Slack incoming-webhook URL of rules with the `slack` channel.
    pub slack_webhook_url: Option<String>,
    /// Whether this server has an SMTP relay configured (`[smtp]`); without one, email
    /// notifications fail with a message saying so.
    pub email_configured: bool,
    pub updated_at: Option<Timestamp>,
}

fn view(s: NotificationSettings, state: &AppState) -> SettingsView {
    SettingsView {
        email_recipients: s.email_recipients,
        slack_webhook_url: s.slack_webhook_url,
        email_configured: state.config.smtp.is_some(),
        updated_at: s.updated_at,
    }
}

/// `null` and absent differ: `null` clears, absent keeps.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSettings {
    /// Replaces the list (at most 50 addresses).
    pub email_recipients: Option<Vec<String>>,
    /// An http:// or https:// URL; `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub slack_webhook_url: Option<Option<String>>,
}

#[utoipa::path(get, path = "/organizations/current/notifications", tag = "organizations", security(("api_key" = [])),
    responses((status = 200, body = Data<SettingsView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn get_settings(State(state): State<AppState>, caller: Caller) -> ApiResult<Response> {
    let settings = state.store.notification_settings(&caller.org_id).await?;
    Ok(ok(view(settings, &state)))
}

/// Partial update of who is told of alerts by email and where Slack messages go.
#[utoipa::path(put, path = "/organizations/current/notifications", tag = "organizations", security(("api_key" = [])), request_body = UpdateSettings,
    responses((status = 200, body = Data<SettingsView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn update_settings(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<UpdateSettings>,
) -> ApiResult<Response> {
    let current = state.store.notification_settings(&caller.org_id).await?;
    let mut v = Validator::new();
    let recipients = match body.email_recipients {
        Some(list) => {
            if list.len() > MAX_RECIPIENTS {
                v.add(
                    "email_recipients",
                    format!("at most {MAX_RECIPIENTS} addresses"),
                );
            }
            let mut clean: Vec<String> = Vec::with_capacity(list.len());
            for (i, r) in list.iter().enumerate() {
                let r = r.trim().to_lowercase();
                if let Err(e) = plantd_alerts::channels::check_recipient(&r) {
                    v.add(format!("email_recipients[{i}]"), e);
                } else if clean.contains(&r) {
                    v.add(format!("email_recipients[{i}]"), "is listed twice");
                }
                clean.push(r);
            }
            clean
        }
        None => current.email_recipients,
    };
    let slack = match body.slack_webhook_url {
        Some(Some(url)) => {
            check_post_url(&mut v, "slack_webhook_url", &url);
            Some(url)
        }
        Some(None) => None,
        None => current.slack_webhook_url,
    };
    v.finish().map_err(ApiError::Validation)?;
    let settings = state
        .store
        .put_notification_settings(&caller.org_id, &recipients, slack.as_deref())
        .await?;
    Ok(ok(view(settings, &state)))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct NotificationView {
    pub id: String,
    pub alert_id: String,
    /// alert.triggered or alert.resolved
    pub event: String,
    /// email or slack
    pub channel: String,
    /// Email: the recipients; Slack: the webhook's host (the URL's path is a secret).
    pub target: String,
    /// Email: the subject; Slack: the message text.
    pub subject: String,
    /// pending, delivered or failed
    pub status: String,
    pub attempts: i64,
    pub last_error: Option<String>,
    /// When the next attempt is due (pending notifications).
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
}

impl From<Notification> for NotificationView {
    fn from(n: Notification) -> Self {
        let target = if n.channel == "slack" {
            match parse_url(&n.target) {
                Ok(u) => match u.port {
                    Some(port) => format!("{}://{}:{port}", u.scheme, u.host),
                    None => format!("{}://{}", u.scheme, u.host),
                },
                Err(_) => String::new(),
            }
        } else {
            n.target
        };
        Self {
            next_attempt_at: (n.status == "pending").then_some(n.next_attempt_at),
            id: n.id,
            alert_id: n.alert_id,
            event: n.event,
            channel: n.channel,
            target,
            subject: n.subject,
            status: n.status,
            attempts: n.attempts,
            last_error: n.last_error,
            created_at: n.created_at,
            delivered_at: n.delivered_at,
        }
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NotificationQuery {
    pub alert_id: Option<String>,
    /// email or slack
    pub channel: Option<String>,
    /// pending, delivered or failed
    pub status: Option<String>,
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub page: Option<i64>,
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub per_page: Option<i64>,
}

/// Email and Slack notifications of alerts, newest first: to whom, status, attempts, last error.
#[utoipa::path(get, path = "/notifications", tag = "alerts", security(("api_key" = [])), params(NotificationQuery),
    responses((status = 200, body = List<NotificationView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list_notifications(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<NotificationQuery>,
) -> ApiResult<Response> {
    let page = page_of(PageQuery {
        page: q.page,
        per_page: q.per_page,
    })?;
    let mut v = Validator::new();
    if let Some(c) = &q.channel {
        v.check(
            ["email", "slack"].contains(&c.as_str()),
            "channel",
            "must be email or slack",
        );
    }
    if let Some(s) = &q.status {
        v.check(
            ["pending", "delivered", "failed"].contains(&s.as_str()),
            "status",
            "must be pending, delivered or failed",
        );
    }
    v.finish().map_err(ApiError::Validation)?;
    let filter = NotificationFilter {
        alert_id: q.alert_id,
        channel: q.channel,
        status: q.status,
    };
    let (items, total) = state
        .store
        .notifications(&caller.org_id, &filter, page.limit(), page.offset())
        .await?;
    Ok(list(
        page,
        plantd_model::page::Paged { items, total },
        NotificationView::from,
    ))
}
