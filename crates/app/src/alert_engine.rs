//! Alert evaluation on the ingest path: every committed batch (from `POST /v1/telemetry` and
//! from connectors alike, through `App::store_points`) is evaluated against the organization's
//! enabled rules in event time (`plantd-alerts`), and what fires or clears is stored and
//! published on the event bus (and so on `/v1/ws`).
//!
//! Rules are cached per organization; this node's rule writes refresh the cache at once, other
//! nodes' within [`RULES_TTL`]. Open alerts are read at start, so that a rule and asset with an
//! open alert does not fire again after a restart (the store's unique index guarantees it in
//! any case); the timing of a condition that was holding restarts with the first point after a
//! restart.

use plantd_alerts::{Evaluator, RuleSpec, Transition};
use plantd_model::alert::{Alert, AlertRule, AlertStatus, RULE_SOURCE};
use plantd_model::event::EventType;
use plantd_model::telemetry::Point;
use plantd_model::{Timestamp, new_id};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::events::EventBus;

/// How long a node trusts its cached rules of an organization.
pub const RULES_TTL: Duration = Duration::from_secs(5);

/// An organization's enabled rules and when they were read.
type CachedRules = (Instant, Arc<OrgRules>);

/// An organization's enabled rules, with the member devices of the device groups they watch.
#[derive(Default)]
struct OrgRules {
    rules: Vec<AlertRule>,
    /// Group id -> its devices: a rule whose `data_source_id` is a device group watches the
    /// points of each of its devices (a device is the source of the points it sends).
    members: HashMap<String, HashSet<String>>,
}

impl OrgRules {
    /// Whether a point from `source` is one the rule watches.
    fn watches(&self, rule: &AlertRule, source: Option<&str>) -> bool {
        let Some(source) = source else {
            return false;
        };
        source == rule.data_source_id
            || self
                .members
                .get(&rule.data_source_id)
                .is_some_and(|m| m.contains(source))
    }
}

#[derive(Default)]
pub(crate) struct AlertEngine {
    rules: Mutex<HashMap<String, CachedRules>>,
    evaluator: Mutex<Evaluator>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AlertEngine {
    /// Reads the open alerts (at start).
    pub async fn load(&self, store: &plantd_store::Store) -> plantd_store::Result<()> {
        let open = store.open_alerts().await?;
        let mut ev = lock(&self.evaluator);
        for a in open {
            if let Some(rule_id) = &a.rule_id {
                ev.set_open(rule_id, &a.asset_id, true);
            }
        }
        Ok(())
    }

    /// A rule of `org_id` was created, changed or deleted: its timing starts afresh.
    pub fn rule_changed(&self, org_id: &str, rule_id: &str) {
        lock(&self.rules).remove(org_id);
        lock(&self.evaluator).forget_rule(rule_id);
    }

    /// A user resolved an alert: the rule may fire again for that asset (see the evaluator).
    pub fn alert_closed(&self, alert: &Alert) {
        if let Some(rule_id) = &alert.rule_id {
            lock(&self.evaluator).set_open(rule_id, &alert.asset_id, false);
        }
    }

    async fn enabled_rules(
        &self,
        store: &plantd_store::Store,
        org_id: &str,
    ) -> plantd_store::Result<Arc<OrgRules>> {
        if let Some((at, rules)) = lock(&self.rules).get(org_id)
            && at.elapsed() < RULES_TTL
        {
            return Ok(rules.clone());
        }
        let rules: Vec<AlertRule> = store
            .alert_rules(org_id)
            .await?
            .into_iter()
            .filter(|r| r.enabled)
            .collect();
        let mut watched: Vec<String> = rules.iter().map(|r| r.data_source_id.clone()).collect();
        watched.sort();
        watched.dedup();
        let mut members: HashMap<String, HashSet<String>> = HashMap::new();
        for (group, device) in store.group_members(org_id, &watched).await? {
            members.entry(group).or_default().insert(device);
        }
        let rules = Arc::new(OrgRules { rules, members });
        lock(&self.rules).insert(org_id.to_string(), (Instant::now(), rules.clone()));
        Ok(rules)
    }

    /// Evaluates committed points; failures are logged (the points are stored either way).
    pub async fn evaluate(
        &self,
        store: &plantd_store::Store,
        events: &EventBus,
        org_id: &str,
        points: &[Point],
    ) {
        let org_rules = match self.enabled_rules(store, org_id).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(org = org_id, error = %plantd_model::error_chain(&e), "alert rules unreadable; batch not evaluated");
                return;
            }
        };
        if org_rules.rules.is_empty() {
            return;
        }
        let mut transitions = Vec::new();
        {
            let mut ev = lock(&self.evaluator);
            for rule in &org_rules.rules {
                let c = &rule.condition;
                let mut matched: Vec<&Point> = points
                    .iter()
                    .filter(|p| {
                        p.tag_name == c.tag_name
                            && org_rules.watches(rule, p.data_source_id.as_deref())
                            && rule.asset_id.as_ref().is_none_or(|a| *a == p.asset_id)
                    })
                    .collect();
                if matched.is_empty() {
                    continue;
                }
                matched.sort_by(|a, b| (&a.asset_id, a.timestamp).cmp(&(&b.asset_id, b.timestamp)));
                let spec = RuleSpec {
                    operator: c.operator,
                    threshold: c.value,
                    duration_ms: c.duration_seconds * 1000,
                    max_gap_ms: c.max_gap_seconds * 1000,
                    auto_resolve: rule.auto_resolve,
                };
                for p in matched {
                    if let Some(t) =
                        ev.observe(&rule.id, &spec, &p.asset_id, p.timestamp.millis(), p.value)
                    {
                        transitions.push((rule, p, t));
                    }
                }
            }
        }
        for (rule, point, t) in transitions {
            let asset_id = point.asset_id.clone();
            let result = match t {
                Transition::Fire { value, at_ms } => {
                    let alert = Alert {
                        id: new_id(),
                        org_id: org_id.to_string(),
                        rule_id: Some(rule.id.clone()),
                        rule_name: Some(rule.name.clone()),
                        severity: rule.severity,
                        status: AlertStatus::Active,
                        // The point's source: the device, for a rule watching a group.
                        data_source_id: point.data_source_id.clone(),
                        asset_id,
                        tag_name: Some(rule.condition.tag_name.clone()),
                        value: Some(value),
                        threshold: Some(rule.condition.value),
                        operator: Some(rule.condition.operator),
                        title: rule.name.clone(),
                        message: None,
                        source: RULE_SOURCE.to_string(),
                        tags: Vec::new(),
                        notifications: Vec::new(),
                        dedup_key: None,
                        triggered_at: Timestamp::from_millis(at_ms),
                        acknowledged_at: None,
                        acknowledged_by: None,
                        note: None,
                        resolved_at: None,
                        resolved_by: None,
                    };
                    store
                        .open_alert(&alert)
                        .await
                        .map(|a| a.map(|a| (EventType::AlertTriggered, a)))
                }
                Transition::Resolve { at_ms, .. } => store
                    .auto_resolve_alert(&rule.id, &asset_id, Timestamp::from_millis(at_ms))
                    .await
                    .map(|a| a.map(|a| (EventType::AlertResolved, a))),
            };
            match result {
                Ok(Some((event, alert))) => events.publish_alert(event, alert),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(rule = %rule.id, error = %plantd_model::error_chain(&e), "alert change not stored")
                }
            }
        }
    }
}
