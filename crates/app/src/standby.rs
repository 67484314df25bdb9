//! The secondary region's copy of an organization's resident data (SPEC 3 rule 4,
//! active-passive; issue 33). The migration node of each region copies every Enterprise
//! organization it serves without strict residency to its secondary region (the next served
//! region after its primary, in the SPEC's order, round) every `standby_every` (default 15
//! minutes: within Enterprise Premium's RPO, and Standard's hour): the same copy as a migration
//! (crate module `migration_copy`), taken while the organization keeps working, written by the
//! secondary in place of its previous copy, counted and compared. An organization with strict
//! residency is never copied, and a copy made before it turned strict is deleted. When the
//! primary region is lost, an operator fails over at the secondary (`plantd orgs failover`):
//! it becomes the primary region with the last copy, losing what came after it.

use async_nats::jetstream;
use plantd_model::Timestamp;
use plantd_model::region::RegionId;
use plantd_store::StandbyCopy;
use std::time::Duration;

use crate::app::App;
use crate::migration_copy;
use crate::migration_target::{Reply, Request, ask, purge, send_copy};

/// How long the secondary may take to write and count a copy.
const COPY_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The region after `primary` among the served ones, round.
pub(crate) fn secondary_of(served: &[RegionId], primary: RegionId) -> Option<RegionId> {
    let at = served.iter().position(|r| *r == primary)?;
    let next = served[(at + 1) % served.len()];
    (next != primary).then_some(next)
}

/// One round: the copies due sent, those of organizations now strict deleted.
pub(crate) async fn round(app: &App, js: &jetstream::Context) {
    let settings = app.region_settings().clone();
    let Some(secondary) = secondary_of(&settings.served(), settings.region) else {
        return;
    };
    let orgs = match app.store().orgs_served_by(settings.region.as_str()).await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %plantd_model::error_chain(&e), "cannot list the organizations to copy to the secondary region");
            return;
        }
    };
    for (org, strict) in orgs {
        if app.migration_window(&org).is_some() {
            continue;
        }
        let sent = app.store().standby_copy(&org, "sent").await.ok().flatten();
        if strict {
            if let Some(s) = sent {
                withdraw(app, js, &s).await;
            }
            continue;
        }
        let due = sent.as_ref().is_none_or(|s| {
            s.region != secondary.as_str()
                || Timestamp::now().millis() - s.copied_at.millis()
                    >= settings.standby_every.as_millis() as i64
        });
        if !due {
            continue;
        }
        match copy(app, js, &org, secondary).await {
            Ok(c) => {
                tracing::info!(org = %org, secondary = %secondary, points = c.points, rows = c.rows, "secondary copy sent");
                if let Err(e) = app.store().record_standby_copy(&c).await {
                    tracing::warn!(error = %plantd_model::error_chain(&e), "cannot record a secondary copy");
                }
            }
            Err(e) => {
                tracing::warn!(org = %org, secondary = %secondary, error = %e, "the secondary copy failed; trying again next round")
            }
        }
    }
}

/// Sends the organization's copy to `secondary` and checks what it stored.
async fn copy(
    app: &App,
    js: &jetstream::Context,
    org: &str,
    secondary: RegionId,
) -> Result<StandbyCopy, String> {
    let taken_at = Timestamp::now();
    let copy_id = format!("standby-{}", plantd_model::new_id());
    let own = app.region_settings().region.as_str();
    let request = Request::Standby {
        copy_id: copy_id.clone(),
        org_id: org.to_string(),
        source_region: own.to_string(),
        taken_at: taken_at.millis(),
    };
    let sent = send_copy(app, js, secondary, &request, COPY_TIMEOUT, &mut |_| {}).await;
    let deployment = &app.region_settings().deployment;
    purge(app, js, &migration_copy::data_subject(deployment, &copy_id)).await;
    let (sums, _) = sent?;
    Ok(sums.standby_copy(org, "sent", secondary.as_str(), taken_at.millis()))
}

/// Strict residency: the copy in the secondary region is deleted there.
async fn withdraw(app: &App, js: &jetstream::Context, sent: &StandbyCopy) {
    let Ok(region) = sent.region.parse::<RegionId>() else {
        return;
    };
    let request = Request::Abort {
        migration_id: "standby".into(),
        org_id: sent.org_id.clone(),
    };
    match ask(
        js,
        &app.region_settings().deployment,
        region,
        &request,
        COPY_TIMEOUT,
    )
    .await
    {
        Ok(Reply::Aborted) => {
            let _ = app.store().forget_standby_copy(&sent.org_id, "sent").await;
            tracing::info!(org = %sent.org_id, region = %region, "strict residency: the secondary copy is deleted");
        }
        other => {
            tracing::warn!(org = %sent.org_id, region = %region, answer = ?other, "strict residency: the secondary copy could not be deleted yet; trying again")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secondary_is_the_next_served_region_round() {
        use RegionId::*;
        let served = [UsEast, EuWest, ApNortheast];
        assert_eq!(secondary_of(&served, UsEast), Some(EuWest));
        assert_eq!(secondary_of(&served, ApNortheast), Some(UsEast));
        assert_eq!(secondary_of(&[UsEast], UsEast), None);
        assert_eq!(secondary_of(&served, UsWest), None);
    }
}
