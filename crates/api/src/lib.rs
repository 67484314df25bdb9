//! The plantd cloud REST API: HTTP and nothing else. Each domain's routes are declared once in
//! `routes/` (handler, policy, OpenAPI operation); the router, the request pipeline
//! (authentication, rate limits, scopes, audit) and the OpenAPI document are built from them.
//! Handlers parse requests, call the application ([`plantd_app::App`]) and render its answers
//! in the SPEC's envelopes; [`ApiError`](error::ApiError) is made from the application's
//! errors in one place. [`serve`] runs it with the application's workers until shutdown.

pub mod audit_record;
mod console;
pub mod csrf;
pub mod envelope;
pub mod error;
pub mod extract;
mod metrics;
pub mod oauth_server;
pub mod openapi;
pub mod pages;
pub mod pipeline;
pub mod rendered;
pub mod router;
pub mod routes;
pub mod routing;
mod serve;
pub mod state;
pub mod stream_slots;

pub use plantd_app::AppConfig;
pub use serve::serve;
