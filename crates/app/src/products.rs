//! Products (SPEC 2.11, 4.12): what an organization licenses, with its SKU, price, license type
//! and features. Licenses copy a product's features when they are issued (`licenses.rs`).

use plantd_model::license::{LicenseType, Product, check_features};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_store::ProductFields;
use serde::Deserialize;

use crate::app::App;
use crate::error::{AppError, AppResult};

/// A new product.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewProduct {
    pub name: String,
    /// Unique within the organization: 1 to 64 characters without spaces.
    pub sku: String,
    #[serde(default)]
    pub description: String,
    /// A number of at least 0.
    pub price: f64,
    pub license_type: LicenseType,
    /// Feature names (lowercase identifiers; mqtt, opcua, modbus and any of your own).
    #[serde(default)]
    pub features: Vec<String>,
}

/// A partial update: absent fields keep their value. Licenses already issued keep the
/// features they were issued with.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProductUpdate {
    pub name: Option<String>,
    pub sku: Option<String>,
    pub description: Option<String>,
    pub price: Option<f64>,
    pub license_type: Option<LicenseType>,
    pub features: Option<Vec<String>>,
}

fn check(p: &ProductFields) -> AppResult<()> {
    let mut v = Validator::new();
    v.text("name", &p.name, 200);
    v.text("sku", &p.sku, 64);
    v.check(
        !p.sku.chars().any(char::is_whitespace),
        "sku",
        "must not contain spaces",
    );
    v.check(
        p.description.chars().count() <= 2000,
        "description",
        "must be at most 2000 characters",
    );
    v.check(
        p.price.is_finite() && p.price >= 0.0,
        "price",
        "must be a number of at least 0",
    );
    check_features(&mut v, "features", &p.features);
    Ok(v.finish()?)
}

impl App {
    pub async fn products(&self, org_id: &str, page: Page) -> AppResult<Paged<Product>> {
        let (items, total) = self
            .store()
            .products(org_id, page.limit(), page.offset())
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn product(&self, org_id: &str, id: &str) -> AppResult<Product> {
        self.store()
            .product(org_id, id)
            .await
            .map_err(AppError::missing("product"))
    }

    /// Creates a product; a SKU the organization already uses is a conflict.
    pub async fn create_product(&self, org_id: &str, new: NewProduct) -> AppResult<Product> {
        let fields = ProductFields {
            name: new.name.trim().to_string(),
            sku: new.sku.trim().to_string(),
            description: new.description,
            price: new.price,
            license_type: new.license_type,
            features: new.features,
        };
        check(&fields)?;
        Ok(self.store().create_product(org_id, &fields).await?)
    }

    pub async fn update_product(
        &self,
        org_id: &str,
        id: &str,
        update: ProductUpdate,
    ) -> AppResult<Product> {
        let current = self.product(org_id, id).await?;
        let fields = ProductFields {
            name: update.name.map_or(current.name, |n| n.trim().to_string()),
            sku: update.sku.map_or(current.sku, |s| s.trim().to_string()),
            description: update.description.unwrap_or(current.description),
            price: update.price.unwrap_or(current.price),
            license_type: update.license_type.unwrap_or(current.license_type),
            features: update.features.unwrap_or(current.features),
        };
        check(&fields)?;
        self.store()
            .update_product(org_id, id, &fields)
            .await
            .map_err(AppError::missing("product"))
    }

    /// Deletes a product no license was issued for (otherwise a conflict: docs/api.md).
    pub async fn delete_product(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_product(org_id, id)
            .await
            .map_err(AppError::missing("product"))
    }
}
