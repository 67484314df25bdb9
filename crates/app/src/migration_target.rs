//! The target's side of region copies (issue 33): what a source region asks another
//! region's instance over NATS (`plantd.<deployment>.migrate.<region>`, a queue group so one
//! node answers) and how it answers: write a migration's copy and count it, take the
//! organization over after the switch (the held points), delete a copy that failed; and the
//! helpers both sides share (asking, purging a copy's messages, deleting an organization's
//! resident data here).

use async_nats::jetstream;
use plantd_model::region::RegionId;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

use crate::app::App;
use crate::migration_copy::{self, Piece, Publisher, Sums};
use crate::replication::safe_name;

/// After the switch the target keeps writing points still arriving on the held subject (a
/// node of the source that had not yet seen the window close) for this long.
const HELD_GRACE: Duration = Duration::from_secs(30);

/// What the source asks the target's instance.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Request {
    Import {
        migration_id: String,
        org_id: String,
    },
    Finish {
        migration_id: String,
        org_id: String,
    },
    Abort {
        migration_id: String,
        org_id: String,
    },
    /// Replace the secondary region's copy of the organization with the one on
    /// `copy_id`'s subject, taken at `taken_at` (ms) in `source_region`.
    Standby {
        copy_id: String,
        org_id: String,
        source_region: String,
        taken_at: i64,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub(crate) enum Reply {
    Imported { sums: Sums },
    Finished { held_points: u64 },
    Aborted,
    Failed { error: String },
}

pub(crate) fn request_subject(deployment: &str, region: RegionId) -> String {
    format!("plantd.{}.migrate.{region}", safe_name(deployment))
}

pub(crate) async fn purge(app: &App, js: &jetstream::Context, subject: &str) {
    let name = migration_copy::stream_name(&app.region_settings().deployment);
    if let Ok(stream) = js.get_stream(name).await
        && let Err(e) = stream.purge().filter(subject).await
    {
        tracing::warn!(error = %e, subject, "cannot purge a migration's messages; they expire within a week");
    }
}

pub(crate) async fn ask(
    js: &jetstream::Context,
    deployment: &str,
    target: RegionId,
    request: &Request,
    timeout: Duration,
) -> Result<Reply, String> {
    let payload = serde_json::to_vec(request).map_err(|e| e.to_string())?;
    let answer = js
        .client()
        .send_request(
            request_subject(deployment, target),
            async_nats::client::Request::new()
                .payload(payload.into())
                .timeout(Some(timeout)),
        )
        .await
        .map_err(|e| format!("no answer from {target}'s instance over NATS: {e}"))?;
    serde_json::from_slice(&answer.payload)
        .map_err(|e| format!("unreadable answer from {target}: {e}"))
}

/// The source's side of one copy, for a migration and a secondary copy alike: the
/// organization's resident data published on the subject of the copy `request` names (an
/// import or a secondary copy; its progress told to `progress`), `request` asked of `target`, and the target's figures compared with the
/// source's. Answers the figures and the bytes published; the subject is the caller's to purge.
pub(crate) async fn send_copy(
    app: &App,
    js: &jetstream::Context,
    target: RegionId,
    request: &Request,
    timeout: Duration,
    progress: &mut (dyn FnMut(f64) + Send),
) -> Result<(Sums, u64), String> {
    let (copy_id, org_id) = match request {
        Request::Import {
            migration_id,
            org_id,
        } => (migration_id, org_id),
        Request::Standby {
            copy_id, org_id, ..
        } => (copy_id, org_id),
        other => return Err(format!("{other:?} carries no copy")),
    };
    let deployment = app.region_settings().deployment.clone();
    let mut out = Publisher::new(
        js.clone(),
        migration_copy::data_subject(&deployment, copy_id),
    );
    let sums = migration_copy::read_org(app, org_id, Some(&mut out), progress).await?;
    out.piece(&Piece::End { sums: sums.clone() }).await?;
    out.flush().await?;
    tracing::info!(copy = %copy_id, bytes = out.bytes, points = sums.points.count, "a copy is published");
    match ask(js, &deployment, target, request, timeout).await? {
        Reply::Imported { sums: theirs } => match sums.difference(&theirs) {
            Some(d) => Err(format!("the copy at {target} is not the source's: {d}")),
            None => Ok((sums, out.bytes)),
        },
        Reply::Failed { error } => Err(format!("{target} could not write the copy: {error}")),
        other => Err(format!("{target} answered {other:?}")),
    }
}

/// The target's side of one copy: what it held of the organization deleted, the copy on
/// `copy_id`'s subject written and counted; a copy that fails is deleted.
async fn replace_copy(
    app: &App,
    js: &jetstream::Context,
    copy_id: &str,
    org_id: &str,
) -> Result<Sums, String> {
    // A secondary copy held here is replaced (by a migration's copy it is no longer one).
    let _ = app.store().forget_standby_copy(org_id, "held").await;
    let result = async {
        delete_copy(app, org_id).await?;
        migration_copy::receive(app, js, copy_id, org_id).await
    }
    .await;
    if result.is_err() {
        let _ = delete_copy(app, org_id).await;
    }
    result
}

/// The target's side: answers one request of a source region.
pub(crate) async fn answer(app: &App, js: &jetstream::Context, m: async_nats::Message) {
    let Some(reply_to) = m.reply.clone() else {
        return;
    };
    let reply = match serde_json::from_slice::<Request>(&m.payload) {
        Ok(r) => handle(app, js, r).await,
        Err(e) => Reply::Failed {
            error: format!("unreadable request: {e}"),
        },
    };
    let payload = serde_json::to_vec(&reply).unwrap_or_default();
    if let Err(e) = js.client().publish(reply_to, payload.into()).await {
        tracing::warn!(error = %e, "cannot answer a region migration request");
    }
}

async fn handle(app: &App, js: &jetstream::Context, request: Request) -> Reply {
    let own = app.region_settings().region;
    let failed = |error: String| Reply::Failed { error };
    match request {
        Request::Import {
            migration_id,
            org_id,
        } => {
            if let Err(e) = not_resident_here(app, &org_id, own).await {
                return failed(e);
            }
            tracing::info!(org = %org_id, migration = %migration_id, "receiving an organization's resident data");
            match replace_copy(app, js, &migration_id, &org_id).await {
                Ok(sums) => Reply::Imported { sums },
                Err(e) => failed(e),
            }
        }
        Request::Finish {
            migration_id,
            org_id,
        } => match migration_copy::write_held(app, js, &migration_id, &org_id, 0).await {
            Ok((held, last)) => {
                if let Err(e) = app
                    .store()
                    .set_org_primary_region(&org_id, own.as_str())
                    .await
                {
                    return failed(plantd_model::error_chain(&e));
                }
                app.forget_organization(&org_id);
                let _ = app.store().data_sources_changed(&org_id).await;
                tracing::info!(org = %org_id, held, "an organization moved here");
                // Points a node of the source published late are written too.
                let (app, js) = (app.clone(), js.clone());
                tokio::spawn(async move {
                    let started = Instant::now();
                    let mut after = last;
                    while started.elapsed() < HELD_GRACE {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        if let Ok((_, l)) =
                            migration_copy::write_held(&app, &js, &migration_id, &org_id, after)
                                .await
                        {
                            after = l;
                        }
                    }
                    let subject = migration_copy::held_subject(
                        &app.region_settings().deployment,
                        &migration_id,
                    );
                    purge(&app, &js, &subject).await;
                });
                Reply::Finished { held_points: held }
            }
            Err(e) => failed(e),
        },
        Request::Abort { org_id, .. } => {
            if let Err(e) = not_resident_here(app, &org_id, own).await {
                return failed(e);
            }
            let _ = app.store().forget_standby_copy(&org_id, "held").await;
            match delete_copy(app, &org_id).await {
                Ok(()) => Reply::Aborted,
                Err(e) => failed(e),
            }
        }
        Request::Standby {
            copy_id,
            org_id,
            source_region,
            taken_at,
        } => {
            if let Err(e) = not_resident_here(app, &org_id, own).await {
                return failed(e);
            }
            receive_standby(app, js, &copy_id, &org_id, &source_region, taken_at).await
        }
    }
}

/// The secondary's side: replaces its copy of the organization with the one on the subject.
async fn receive_standby(
    app: &App,
    js: &jetstream::Context,
    copy_id: &str,
    org_id: &str,
    source_region: &str,
    taken_at: i64,
) -> Reply {
    match replace_copy(app, js, copy_id, org_id).await {
        Ok(sums) => {
            let held = sums.standby_copy(org_id, "held", source_region, taken_at);
            if let Err(e) = app.store().record_standby_copy(&held).await {
                return Reply::Failed {
                    error: plantd_model::error_chain(&e),
                };
            }
            Reply::Imported { sums }
        }
        Err(error) => Reply::Failed { error },
    }
}

/// A copy is received, or deleted, only for an organization whose data is not served here.
pub(crate) async fn not_resident_here(
    app: &App,
    org_id: &str,
    own: RegionId,
) -> Result<(), String> {
    match app.org_primary_region(org_id).await {
        Ok((region, _)) if region != own => Ok(()),
        Ok(_) => Err(format!(
            "the organization's data is served by {own} already"
        )),
        Err(e) => Err(format!(
            "organization {org_id} is not known here yet (replication behind?): {}",
            plantd_model::error_chain(&e)
        )),
    }
}

/// Deletes the organization's resident data here (a copy that failed, or the source's copy
/// after a completed migration's delay).
pub(crate) async fn delete_copy(app: &App, org_id: &str) -> Result<(), String> {
    app.store()
        .delete_resident_rows(org_id)
        .await
        .map_err(|e| plantd_model::error_chain(&e))?;
    app.tsdb()
        .delete_org_points(org_id)
        .await
        .map_err(|e| plantd_model::error_chain(&e))?;
    Ok(())
}
