//! [`AppState`]: what every handler gets. The application ([`App`]) does the work; the rest is
//! what only HTTP needs:
//! - the OpenAPI document, built once from the route declarations (`GET /v1/openapi.json`);
//! - the WebSocket connection slots per organization (SPEC 8.2's connection limit);
//! - each organization's data sources rendered as JSON, so that listing them is copying.

use plantd_app::App;
use std::sync::Arc;

use crate::rendered::RenderedLists;
use crate::stream_slots::StreamSlots;

#[derive(Clone)]
pub struct AppState {
    pub app: App,
    /// The OpenAPI document as served.
    pub openapi: Arc<str>,
    pub stream_slots: Arc<StreamSlots>,
    pub rendered_data_sources: Arc<RenderedLists>,
}

impl AppState {
    pub fn new(app: App, openapi: Arc<str>) -> Self {
        Self {
            app,
            openapi,
            stream_slots: Default::default(),
            rendered_data_sources: Default::default(),
        }
    }
}
