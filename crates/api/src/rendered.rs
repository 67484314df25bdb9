//! Lists rendered as JSON once per version: an organization's list is rendered again only when
//! the list handed out changes identity (the store's data source lists do whenever a data source
//! changes), so that listing is copying rather than serializing.

use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One JSON fragment per item, in list order.
pub type Rendered = Arc<Vec<Box<RawValue>>>;

/// The list a rendering was made from (kept for its identity), and the rendering.
type Entry<T> = (Arc<Vec<T>>, Rendered);

pub struct RenderedLists<T = plantd_model::data_source::DataSource> {
    orgs: Mutex<HashMap<String, Entry<T>>>,
}

impl<T> Default for RenderedLists<T> {
    fn default() -> Self {
        Self {
            orgs: Mutex::default(),
        }
    }
}

impl<T> RenderedLists<T> {
    /// The rendering of `list`, made with `render` unless the same list was rendered before.
    pub fn get(
        &self,
        org_id: &str,
        list: &Arc<Vec<T>>,
        render: impl Fn(&T) -> serde_json::Result<Box<RawValue>>,
    ) -> serde_json::Result<Rendered> {
        if let Some((source, rendered)) = self
            .orgs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(org_id)
            && Arc::ptr_eq(source, list)
        {
            return Ok(rendered.clone());
        }
        let rendered: Rendered = Arc::new(list.iter().map(render).collect::<Result<_, _>>()?);
        self.orgs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(org_id.to_string(), (list.clone(), rendered.clone()));
        Ok(rendered)
    }
}
