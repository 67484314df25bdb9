//! Dashboards (SPEC 2.4, 4.3): create, read, change, duplicate, delete, and export/import as a
//! JSON document. The layout's own checks are `plantd_model::dashboard`; here the ones that need
//! the organization (its data sources).

use plantd_model::dashboard::{Layout, check_layout};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
pub use plantd_store::Dashboard;
use plantd_store::StoreError;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::error::{AppError, AppResult};

/// The `format` of an exported dashboard document.
pub const EXPORT_FORMAT: &str = "plantd.dashboard/1";

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDashboard {
    /// 1..200 characters.
    pub name: String,
    /// At most 2,000 characters.
    #[serde(default)]
    pub description: String,
    /// Default: 12 columns, no widgets.
    #[serde(default)]
    pub layout: Layout,
}

/// A partial update: absent fields keep their value; a `layout` replaces the whole layout.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DashboardUpdate {
    pub name: Option<String>,
    pub description: Option<String>,
    pub layout: Option<Layout>,
}

/// A dashboard as a file: what `export` answers and `import` takes.
#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DashboardDocument {
    /// `plantd.dashboard/1`
    pub format: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub layout: Layout,
}

fn check_fields(v: &mut Validator, name: Option<&str>, description: Option<&str>) {
    if let Some(name) = name {
        v.text("name", name, 200);
    }
    if let Some(d) = description
        && (d.chars().count() > 2_000 || d.chars().any(|c| c.is_control() && c != '\n'))
    {
        v.add(
            "description",
            "must be at most 2000 characters without control characters other than line breaks",
        );
    }
}

impl App {
    /// Refuses widget queries that name a data source the organization does not have.
    async fn check_data_sources(
        &self,
        v: &mut Validator,
        org_id: &str,
        layout: &Layout,
    ) -> AppResult<()> {
        for (i, w) in layout.widgets.iter().enumerate() {
            let Some(id) = w.query.as_ref().and_then(|q| q.data_source_id.as_deref()) else {
                continue;
            };
            match self.store().data_source(org_id, id).await {
                Ok(_) => {}
                Err(StoreError::NotFound) => v.add(
                    format!("layout.widgets[{i}].query.data_source_id"),
                    "is not a data source of this organization",
                ),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    pub async fn dashboards(&self, org_id: &str, page: Page) -> AppResult<Paged<Dashboard>> {
        let (items, total) = self
            .store()
            .dashboards(org_id, page.limit(), page.offset())
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn dashboard(&self, org_id: &str, id: &str) -> AppResult<Dashboard> {
        self.store()
            .dashboard(org_id, id)
            .await
            .map_err(AppError::missing("dashboard"))
    }

    pub async fn create_dashboard(&self, org_id: &str, new: NewDashboard) -> AppResult<Dashboard> {
        let mut v = Validator::new();
        check_fields(&mut v, Some(&new.name), Some(&new.description));
        check_layout(&mut v, "layout", &new.layout);
        self.check_data_sources(&mut v, org_id, &new.layout).await?;
        v.finish()?;
        Ok(self
            .store()
            .create_dashboard(org_id, new.name.trim(), &new.description, &new.layout)
            .await?)
    }

    pub async fn update_dashboard(
        &self,
        org_id: &str,
        id: &str,
        update: DashboardUpdate,
    ) -> AppResult<Dashboard> {
        let current = self.dashboard(org_id, id).await?;
        let mut v = Validator::new();
        check_fields(
            &mut v,
            update.name.as_deref(),
            update.description.as_deref(),
        );
        if let Some(layout) = &update.layout {
            check_layout(&mut v, "layout", layout);
            self.check_data_sources(&mut v, org_id, layout).await?;
        }
        v.finish()?;
        self.store()
            .update_dashboard(
                org_id,
                id,
                update.name.as_deref().map_or(&current.name, str::trim),
                update
                    .description
                    .as_deref()
                    .unwrap_or(&current.description),
                update.layout.as_ref().unwrap_or(&current.layout),
            )
            .await
            .map_err(AppError::missing("dashboard"))
    }

    pub async fn delete_dashboard(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_dashboard(org_id, id)
            .await
            .map_err(AppError::missing("dashboard"))
    }

    /// A copy named `<name> (copy)` (cut to 200 characters), with the same layout.
    pub async fn duplicate_dashboard(&self, org_id: &str, id: &str) -> AppResult<Dashboard> {
        let d = self.dashboard(org_id, id).await?;
        let name: String = format!("{} (copy)", d.name).chars().take(200).collect();
        Ok(self
            .store()
            .create_dashboard(org_id, &name, &d.description, &d.layout)
            .await?)
    }

    pub async fn export_dashboard(&self, org_id: &str, id: &str) -> AppResult<DashboardDocument> {
        let d = self.dashboard(org_id, id).await?;
        Ok(DashboardDocument {
            format: EXPORT_FORMAT.into(),
            name: d.name,
            description: d.description,
            layout: d.layout,
        })
    }

    /// Creates a dashboard from an exported document (of this or another installation); its
    /// data source references must exist here.
    pub async fn import_dashboard(
        &self,
        org_id: &str,
        doc: DashboardDocument,
    ) -> AppResult<Dashboard> {
        if doc.format != EXPORT_FORMAT {
            return Err(vec![plantd_model::FieldError::new(
                "format",
                format!("must be {EXPORT_FORMAT}"),
            )]
            .into());
        }
        self.create_dashboard(
            org_id,
            NewDashboard {
                name: doc.name,
                description: doc.description,
                layout: doc.layout,
            },
        )
        .await
    }
}
