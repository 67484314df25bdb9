//! Clone (SPEC 4.15, issue 34): an edge agent's configuration as one document, exported on one
//! device and imported on another: its provisioned assets and the alert rules that watch them
//! (named by asset id, so they mean the same on the other device). Nothing secret is in it:
//! provisioned assets carry no credentials. The import checks the whole document before it
//! writes anything.

use plantd_model::Timestamp;
use plantd_model::Validator;
use plantd_model::alert::{Condition, Severity};
use plantd_model::provisioning::AssetRow;
use plantd_store::RuleFields;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;

use crate::alerts::{NewCondition, check_rule};
use crate::app::App;
use crate::error::{AppError, AppResult};
use crate::provisioning::{ImportReport, Method};

/// What a clone document says it is.
pub const CLONE_FORMAT: &str = "plantd-edge-config";
pub const CLONE_VERSION: u32 = 1;

/// An edge configuration document.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CloneDocument {
    /// `plantd-edge-config`.
    pub format: String,
    /// 1.
    pub version: u32,
    pub exported_at: Timestamp,
    /// The exporting agent's mode (null: not an edge agent); informative.
    pub mode: Option<String>,
    pub assets: Vec<AssetRow>,
    pub alert_rules: Vec<ClonedRule>,
    /// What the document leaves out: data sources not provisioned, and rules that watch
    /// them or devices (their ids mean nothing elsewhere).
    #[serde(default)]
    pub left_out: LeftOut,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeftOut {
    pub data_sources: usize,
    pub alert_rules: usize,
}

/// An alert rule watching a provisioned asset, named by its asset id.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClonedRule {
    pub name: String,
    pub severity: Severity,
    /// The provisioned asset (its data source) the rule watches.
    pub asset: String,
    /// Only this asset id of the source's points; null: every one.
    pub asset_id: Option<String>,
    #[schema(value_type = Object)]
    pub condition: Condition,
    pub notifications: Vec<String>,
    pub enabled: bool,
    pub auto_resolve: bool,
}

/// What an import did.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct CloneReport {
    pub assets: ImportReport,
    pub alert_rules_created: usize,
    pub alert_rules_updated: usize,
}

impl App {
    /// The organization's edge configuration as one document.
    pub async fn export_clone(&self, org_id: &str) -> AppResult<CloneDocument> {
        let provisioned = self.store().provisioned_assets(org_id).await?;
        let by_source: HashMap<&str, &str> = provisioned
            .iter()
            .map(|p| (p.data_source_id.as_str(), p.asset.asset_id.as_str()))
            .collect();
        let sources = self.data_sources(org_id).await?;
        let rules = self.alert_rules(org_id).await?;
        let mut alert_rules = Vec::new();
        let mut rules_left = 0;
        for r in rules {
            match by_source.get(r.data_source_id.as_str()) {
                Some(asset) => alert_rules.push(ClonedRule {
                    name: r.name,
                    severity: r.severity,
                    asset: (*asset).to_string(),
                    asset_id: r.asset_id,
                    condition: r.condition,
                    notifications: r.notifications,
                    enabled: r.enabled,
                    auto_resolve: r.auto_resolve,
                }),
                None => rules_left += 1,
            }
        }
        Ok(CloneDocument {
            format: CLONE_FORMAT.into(),
            version: CLONE_VERSION,
            exported_at: Timestamp::now(),
            mode: self.config().edge.as_ref().map(|e| e.mode.as_str().into()),
            left_out: LeftOut {
                data_sources: sources
                    .iter()
                    .filter(|s| !by_source.contains_key(s.id.as_str()))
                    .count(),
                alert_rules: rules_left,
            },
            assets: provisioned.into_iter().map(|p| p.asset).collect(),
            alert_rules,
        })
    }

    /// Applies a clone document: its assets provisioned (method `clone`) and its rules written
    /// by name (replaced where a rule of that name exists). Checked whole first.
    pub async fn import_clone(&self, org_id: &str, document: &Value) -> AppResult<CloneReport> {
        let doc: CloneDocument = serde_json::from_value(document.clone()).map_err(|e| {
            AppError::invalid(
                "file",
                format!("is not a {CLONE_FORMAT} document (as POST /v1/provisioning/clone {{\"action\": \"export\"}} answers): {e}"),
            )
        })?;
        if doc.format != CLONE_FORMAT || doc.version != CLONE_VERSION {
            return Err(AppError::invalid(
                "file",
                format!("format must be {CLONE_FORMAT}, version {CLONE_VERSION}"),
            ));
        }
        // The rules, checked before anything is written.
        let mut v = Validator::new();
        let assets: Vec<&str> = doc.assets.iter().map(|a| a.asset_id.as_str()).collect();
        let mut fields = Vec::with_capacity(doc.alert_rules.len());
        for (i, r) in doc.alert_rules.iter().enumerate() {
            let mut rv = Validator::new();
            if !assets.contains(&r.asset.as_str()) {
                rv.add("asset", "is not an asset of this document");
            }
            let c = &r.condition;
            let condition = check_rule(
                &mut rv,
                &r.name,
                r.asset_id.as_deref(),
                &NewCondition {
                    tag_name: c.tag_name.clone(),
                    operator: c.operator,
                    value: c.value,
                    duration_seconds: c.duration_seconds,
                    max_gap_seconds: Some(c.max_gap_seconds),
                },
                &r.notifications,
            );
            if let Err(errors) = rv.finish() {
                for e in errors {
                    v.add(format!("alert_rules[{i}].{}", e.field), e.message);
                }
            }
            fields.push((r, condition));
        }
        let entries: Vec<Value> = doc.assets.iter().map(AssetRow::to_json).collect();
        let report = self
            .import_entries_checked(org_id, entries, Method::Clone, v)
            .await?;
        let ids: HashMap<&str, &str> = report
            .assets
            .iter()
            .map(|a| (a.asset_id.as_str(), a.data_source_id.as_str()))
            .collect();
        let (mut created, mut updated) = (0, 0);
        for (r, condition) in fields {
            let Some(source) = ids.get(r.asset.as_str()) else {
                continue;
            };
            let made = self
                .put_rule_by_name(
                    org_id,
                    RuleFields {
                        name: r.name.trim().to_string(),
                        severity: r.severity,
                        data_source_id: (*source).to_string(),
                        asset_id: r.asset_id.clone(),
                        condition,
                        notifications: r.notifications.clone(),
                        enabled: r.enabled,
                        auto_resolve: r.auto_resolve,
                    },
                )
                .await?;
            if made {
                created += 1;
            } else {
                updated += 1;
            }
        }
        Ok(CloneReport {
            assets: report,
            alert_rules_created: created,
            alert_rules_updated: updated,
        })
    }
}
