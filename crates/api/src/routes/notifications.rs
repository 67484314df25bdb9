//! Alert notifications: an organization's settings (who gets email, where Slack posts go) and
//! the log of email and Slack notifications.

use axum::extract::State;
use axum::response::Response;
use plantd_app::notifications::NotificationSettingsUpdate;
use plantd_app::notifications::{Notification, NotificationFilter, NotificationSettings};
use plantd_model::Scope::{Admin, ReadAlerts};
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use plantd_model::data_source::parse_url;
use plantd_model::event::EventType;
use serde::Serialize;

use crate::envelope::{Data, List, list, ok, paged_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            get_settings,
            Policy::scope(Admin, AuditEvent::NotificationSettingsRead)
        ),
        route!(
            update_settings,
            Policy::scope(Admin, AuditEvent::NotificationSettingsUpdate)
        ),
        route!(
            list_notifications,
            Policy::scope(ReadAlerts, AuditEvent::NotificationList)
        ),
    ]
}

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
        email_configured: state.app.email_configured(),
        updated_at: s.updated_at,
    }
}

#[utoipa::path(get, path = "/organizations/current/notifications", tag = "organizations",
    responses((status = 200, body = Data<SettingsView>)))]
async fn get_settings(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    let settings = state.app.notification_settings(&caller.org_id).await?;
    Ok(ok(view(settings, &state)))
}

/// Partial update of who is told of alerts by email and where Slack messages go.
#[utoipa::path(put, path = "/organizations/current/notifications", tag = "organizations", request_body = NotificationSettingsUpdate,
    responses((status = 200, body = Data<SettingsView>)))]
async fn update_settings(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NotificationSettingsUpdate>,
) -> ApiResult<Response> {
    let settings = state
        .app
        .update_notification_settings(&caller.org_id, body)
        .await?;
    Ok(ok(view(settings, &state)))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct NotificationView {
    pub id: String,
    pub alert_id: String,
    /// alert.triggered or alert.resolved
    pub event: EventType,
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

paged_query! {
pub struct NotificationQuery {
    pub alert_id: Option<String>,
    /// email or slack
    pub channel: Option<String>,
    /// pending, delivered or failed
    pub status: Option<String>,
}
}

/// Email and Slack notifications of alerts, newest first: to whom, status, attempts, last error.
#[utoipa::path(get, path = "/notifications", tag = "alerts", params(NotificationQuery),
    responses((status = 200, body = List<NotificationView>)))]
async fn list_notifications(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<NotificationQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let filter = NotificationFilter {
        alert_id: q.alert_id,
        channel: q.channel,
        status: q.status,
    };
    let paged = state
        .app
        .notifications(&caller.org_id, &filter, page)
        .await?;
    Ok(list(page, paged, NotificationView::from))
}
