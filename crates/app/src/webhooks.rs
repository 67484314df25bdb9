//! Webhook subscriptions (SPEC 6: "webhooks exist"): subscribe a URL to events, manage it, read
//! its delivery log. Deliveries are sent by the delivery worker (`deliveries.rs`), signed with
//! [`signature`].

use hmac::{Hmac, Mac};
use plantd_model::data_source::check_post_url;
use plantd_model::event::EventType;
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
pub use plantd_store::{Delivery, Webhook};
use serde::Deserialize;
use sha2::Sha256;

use crate::app::App;
use crate::error::{AppError, AppResult};

/// A new subscription.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// http:// or https:// URL that receives a POST per event.
    pub url: String,
    /// alert.triggered, alert.acknowledged, alert.resolved, license.created,
    /// license.activated, license.deactivated, license.suspended, license.reinstated,
    /// license.revoked, license.renewed
    pub events: Vec<String>,
    /// 16..200 characters; generated when absent. Returned once.
    pub secret: Option<String>,
}

/// A partial update: absent fields keep their value.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookUpdate {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub secret: Option<String>,
}

/// The signature header's value for `body` sent at `t` (Unix seconds): `t=<t>,v1=<hex
/// HMAC-SHA256 of "<t>.<body>" with the secret>`; receivers recompute it and reject old `t`.
pub fn signature(secret: &str, t: i64, body: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks the given fields; returns the events as typed names.
fn check(
    v: &mut Validator,
    url: Option<&str>,
    events: Option<&[String]>,
    secret: Option<&str>,
) -> Option<Vec<EventType>> {
    if let Some(url) = url {
        check_post_url(v, "url", url);
    }
    if let Some(s) = secret
        && !(16..=200).contains(&s.chars().count())
    {
        v.add("secret", "must be 16 to 200 characters");
    }
    let events = events?;
    if events.is_empty() {
        v.add(
            "events",
            format!("must list at least one of {}", EventType::list()),
        );
    }
    let mut typed = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        match EventType::parse(e) {
            None => v.add(
                format!("events[{i}]"),
                format!("must be one of {}", EventType::list()),
            ),
            Some(_) if events[..i].contains(e) => v.add(format!("events[{i}]"), "is listed twice"),
            Some(t) => typed.push(t),
        }
    }
    Some(typed)
}

fn new_secret() -> String {
    format!(
        "whsec_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl App {
    pub async fn webhooks(&self, org_id: &str) -> AppResult<Vec<Webhook>> {
        Ok(self.store().webhooks(org_id).await?)
    }

    /// Subscribes a URL to events; the answer carries the signing secret.
    pub async fn create_webhook(&self, org_id: &str, new: NewWebhook) -> AppResult<Webhook> {
        let mut v = Validator::new();
        let events = check(
            &mut v,
            Some(&new.url),
            Some(&new.events),
            new.secret.as_deref(),
        )
        .unwrap_or_default();
        v.finish()?;
        let secret = new.secret.unwrap_or_else(new_secret);
        Ok(self
            .store()
            .create_webhook(org_id, &new.url, &events, &secret)
            .await?)
    }

    pub async fn webhook(&self, org_id: &str, id: &str) -> AppResult<Webhook> {
        self.store()
            .webhook(org_id, id)
            .await
            .map_err(AppError::missing("webhook"))
    }

    /// A partial update; a new `secret` signs deliveries from then on.
    pub async fn update_webhook(
        &self,
        org_id: &str,
        id: &str,
        update: WebhookUpdate,
    ) -> AppResult<Webhook> {
        let current = self.webhook(org_id, id).await?;
        let mut v = Validator::new();
        let events = check(
            &mut v,
            update.url.as_deref(),
            update.events.as_deref(),
            update.secret.as_deref(),
        );
        v.finish()?;
        self.store()
            .update_webhook(
                org_id,
                id,
                update.url.as_deref().unwrap_or(&current.url),
                events.as_deref().unwrap_or(&current.events),
                update.secret.as_deref().unwrap_or(&current.secret),
            )
            .await
            .map_err(AppError::missing("webhook"))
    }

    /// Deletes a webhook and its delivery log; pending deliveries are dropped.
    pub async fn delete_webhook(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_webhook(org_id, id)
            .await
            .map_err(AppError::missing("webhook"))
    }

    /// A webhook's deliveries, newest first.
    pub async fn webhook_deliveries(
        &self,
        org_id: &str,
        id: &str,
        page: Page,
    ) -> AppResult<Paged<Delivery>> {
        self.webhook(org_id, id).await?;
        let (items, total) = self
            .store()
            .deliveries(org_id, id, page.limit(), page.offset())
            .await?;
        Ok(Paged { items, total })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn signatures_follow_the_documented_recipe() {
        // echo -n '1700000000.{"a":1}' | openssl dgst -sha256 -hmac secret
        assert_eq!(
            super::signature("secret", 1_700_000_000, r#"{"a":1}"#),
            "t=1700000000,v1=49f24e537407743fa4a0242bb63b94b9a47ee99cbbe071ccd8a22550ae411686"
        );
    }
}
