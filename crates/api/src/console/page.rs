//! What a console page is ([`ConsolePage`]) and what the router tells each page's requests
//! ([`Here`]): its own declaration and the whole table, for the navigation. The table itself is
//! in `console/mod.rs`.

use axum::routing::MethodRouter;
use plantd_model::Scope;

use crate::state::AppState;

/// A page of the console, declared once in the console's table (`console::PAGES`): where it
/// is, what it is called, whether the navigation shows it, who may see it, and its handler. A
/// page's handler finds its own declaration, and the table, in its `Browser`.
pub(crate) struct ConsolePage {
    pub(crate) path: &'static str,
    pub(crate) title: &'static str,
    /// The navigation entry it belongs to (its own path for a page of the navigation).
    pub(crate) section: &'static str,
    /// Shown in the navigation bar (to those who may see it).
    pub(crate) nav: bool,
    /// The scope a person's role must grant to see the page (the API's rule for what it
    /// shows), and what others are told.
    pub(crate) needs: Option<(Scope, &'static str)>,
    pub(crate) route: fn() -> MethodRouter<AppState>,
}

/// Put on each page's requests by the router: the page and the table it is declared in.
#[derive(Clone, Copy)]
pub(crate) struct Here {
    pub(crate) page: &'static ConsolePage,
    pub(crate) pages: &'static [ConsolePage],
}

/// The Regions page: shown by every region (the other pages of an organization whose primary
/// region is elsewhere redirect there).
pub(crate) const REGIONS_PAGE: &str = "/regions";
