//! Alert notifications: an organization's settings (who gets email, where Slack posts go) and
//! the log of email and Slack notifications (sent by the delivery worker, `deliveries.rs`).

use plantd_model::data_source::check_post_url;
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
pub use plantd_store::{Notification, NotificationFilter, NotificationSettings};
use serde::{Deserialize, Deserializer};

use crate::app::App;
use crate::error::AppResult;

/// At most this many email recipients per organization.
pub const MAX_RECIPIENTS: usize = 50;

/// `null` and absent differ: `null` clears, absent keeps.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A partial update of who is told of alerts by email and where Slack messages go.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationSettingsUpdate {
    /// Replaces the list (at most 50 addresses).
    pub email_recipients: Option<Vec<String>>,
    /// An http:// or https:// URL; `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub slack_webhook_url: Option<Option<String>>,
}

impl App {
    pub async fn notification_settings(&self, org_id: &str) -> AppResult<NotificationSettings> {
        Ok(self.store().notification_settings(org_id).await?)
    }

    /// Whether this server has an SMTP relay configured (`[smtp]`).
    pub fn email_configured(&self) -> bool {
        self.config().smtp.is_some()
    }

    pub async fn update_notification_settings(
        &self,
        org_id: &str,
        update: NotificationSettingsUpdate,
    ) -> AppResult<NotificationSettings> {
        let current = self.store().notification_settings(org_id).await?;
        let mut v = Validator::new();
        let recipients = match update.email_recipients {
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
        let slack = match update.slack_webhook_url {
            Some(Some(url)) => {
                check_post_url(&mut v, "slack_webhook_url", &url);
                Some(url)
            }
            Some(None) => None,
            None => current.slack_webhook_url,
        };
        v.finish()?;
        Ok(self
            .store()
            .put_notification_settings(org_id, &recipients, slack.as_deref())
            .await?)
    }

    /// Email and Slack notifications of alerts, newest first.
    pub async fn notifications(
        &self,
        org_id: &str,
        filter: &NotificationFilter,
        page: Page,
    ) -> AppResult<Paged<Notification>> {
        let mut v = Validator::new();
        if let Some(c) = &filter.channel {
            v.check(
                ["email", "slack"].contains(&c.as_str()),
                "channel",
                "must be email or slack",
            );
        }
        if let Some(s) = &filter.status {
            v.check(
                ["pending", "delivered", "failed"].contains(&s.as_str()),
                "status",
                "must be pending, delivered or failed",
            );
        }
        v.finish()?;
        let (items, total) = self
            .store()
            .notifications(org_id, filter, page.limit(), page.offset())
            .await?;
        Ok(Paged { items, total })
    }
}
