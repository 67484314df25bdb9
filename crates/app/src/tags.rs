//! The tags of an asset and what each measures (SPEC 2.17: units and ranges): the list, one
//! tag, a person's description; and what connectors read from devices (OPC UA
//! `EngineeringUnits` and `EURange`), which never overwrites a person's words.

use plantd_model::Timestamp;
use plantd_model::tag::{EuRange, MAX_DESCRIPTION, MAX_UNIT, Tag, TagDescription, TagSource};
use plantd_model::telemetry::check_name;
use plantd_model::validation::Validator;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::collections::BTreeMap;

use crate::app::App;
use crate::error::{AppError, AppResult};

/// A field that is present in a body, even as `null` (`Some(None)`: clear it), or absent
/// (`None`: keep it).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

/// A person's description of a tag. Absent fields keep their value; `null` (or an empty text)
/// clears one. The read-only fields of a fetched tag are accepted and ignored.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TagUpdate {
    /// At most 32 characters (`mm/s`, `°C`).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub unit: Option<Option<String>>,
    /// At most 500 characters.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub description: Option<Option<String>>,
    /// `{low, high}`, finite, `low` < `high`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<EuRange>)]
    pub eu_range: Option<Option<EuRange>>,
    #[schema(value_type = Option<String>, read_only)]
    pub asset_id: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub tag_name: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub source: Option<Value>,
    #[schema(value_type = Option<bool>, read_only)]
    pub has_data: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub updated_at: Option<Value>,
}

/// An optional text as stored: trimmed, `None` when empty.
fn text_or_none(t: Option<String>) -> Option<String> {
    t.map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
}

/// Checks the names of a tag's path, each named by its field.
fn check_names(asset_id: &str, tag_name: &str) -> AppResult<()> {
    let mut v = Validator::new();
    for (field, name) in [("asset_id", asset_id), ("tag_name", tag_name)] {
        if let Err(e) = check_name(name) {
            v.add(field, e);
        }
    }
    Ok(v.finish()?)
}

fn tag_of(
    asset_id: &str,
    tag_name: &str,
    stored: Option<(TagDescription, TagSource, Timestamp)>,
    has_data: bool,
) -> Tag {
    let (d, source, at) = match stored {
        Some((d, s, at)) => (d, Some(s), Some(at)),
        None => (TagDescription::default(), None, None),
    };
    Tag {
        asset_id: asset_id.to_string(),
        tag_name: tag_name.to_string(),
        unit: d.unit,
        description: d.description,
        eu_range: d.eu_range,
        source,
        has_data,
        updated_at: at,
    }
}

impl App {
    /// Every tag of an asset, by name: those with points and those described before any
    /// point came. An asset with neither (or a name no asset can have) gives an empty list.
    pub async fn asset_tags(&self, org_id: &str, asset_id: &str) -> AppResult<Vec<Tag>> {
        if check_name(asset_id).is_err() {
            return Ok(Vec::new());
        }
        let with_data = self.tsdb().tag_sources(org_id, asset_id).await?;
        let mut tags: BTreeMap<String, Tag> = with_data
            .keys()
            .map(|t| (t.clone(), tag_of(asset_id, t, None, true)))
            .collect();
        for (tag, d, source, at) in self.store().tag_descriptions(org_id, asset_id).await? {
            let has_data = with_data.contains_key(&tag);
            tags.insert(
                tag.clone(),
                tag_of(asset_id, &tag, Some((d, source, at)), has_data),
            );
        }
        Ok(tags.into_values().collect())
    }

    /// The unit of every tag that has one, by (asset, tag): what the overview shows beside
    /// values.
    pub async fn tag_units(
        &self,
        org_id: &str,
    ) -> AppResult<std::collections::HashMap<(String, String), String>> {
        Ok(self
            .store()
            .tag_units(org_id)
            .await?
            .into_iter()
            .map(|(a, t, u)| ((a, t), u))
            .collect())
    }

    /// One tag of an asset; `NotFound` when it has neither points nor a description, or
    /// when no tag could have its names.
    pub async fn asset_tag(&self, org_id: &str, asset_id: &str, tag_name: &str) -> AppResult<Tag> {
        if check_names(asset_id, tag_name).is_err() {
            return Err(AppError::NotFound("tag"));
        }
        let has_data = self
            .tsdb()
            .tag_sources(org_id, asset_id)
            .await?
            .contains_key(tag_name);
        let stored = self
            .store()
            .tag_description(org_id, asset_id, tag_name)
            .await?
            .map(|(_, d, s, at)| (d, s, at));
        if stored.is_none() && !has_data {
            return Err(AppError::NotFound("tag"));
        }
        Ok(tag_of(asset_id, tag_name, stored, has_data))
    }

    /// A person describes a tag (before its first point too); the device's values no longer
    /// replace it.
    pub async fn describe_tag(
        &self,
        org_id: &str,
        asset_id: &str,
        tag_name: &str,
        update: TagUpdate,
    ) -> AppResult<Tag> {
        check_names(asset_id, tag_name)?;
        let mut v = Validator::new();
        if let Some(Some(unit)) = &update.unit
            && !unit.trim().is_empty()
        {
            v.text("unit", unit, MAX_UNIT);
        }
        if let Some(Some(d)) = &update.description
            && !d.trim().is_empty()
        {
            v.text("description", d, MAX_DESCRIPTION);
        }
        if let Some(Some(r)) = update.eu_range {
            v.check(
                r.low.is_finite() && r.high.is_finite(),
                "eu_range",
                "low and high must be finite numbers",
            );
            v.check(r.low < r.high, "eu_range.high", "must be greater than low");
        }
        v.finish()?;
        let current = self
            .store()
            .tag_description(org_id, asset_id, tag_name)
            .await?
            .map(|(_, d, _, _)| d)
            .unwrap_or_default();
        let described = TagDescription {
            unit: match update.unit {
                Some(u) => text_or_none(u),
                None => current.unit,
            },
            description: match update.description {
                Some(d) => text_or_none(d),
                None => current.description,
            },
            eu_range: update.eu_range.unwrap_or(current.eu_range),
        };
        self.store()
            .set_tag_description(org_id, asset_id, tag_name, &described)
            .await?;
        self.asset_tag(org_id, asset_id, tag_name).await
    }

    /// What a data source's device says its tags measure (a connector's reading); tags a
    /// person described keep their words. A failure is logged: telemetry goes on without it.
    pub async fn record_device_tags(
        &self,
        org_id: &str,
        tags: &[(String, String, TagDescription)],
    ) {
        let items: Vec<(&str, &str, &TagDescription)> = tags
            .iter()
            .filter(|(a, t, _)| check_name(a).is_ok() && check_name(t).is_ok())
            .map(|(a, t, d)| (a.as_str(), t.as_str(), d))
            .collect();
        if let Err(e) = self
            .store()
            .record_device_descriptions(org_id, &items)
            .await
        {
            tracing::warn!(org = org_id, error = %plantd_model::error_chain(&e), "cannot record what the device says of its tags");
        }
    }
}
