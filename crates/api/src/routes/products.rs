//! Products (SPEC 4.12): CRUD for administrators.

use axum::extract::State;
use axum::response::Response;
use plantd_app::products::{NewProduct, ProductUpdate};
use plantd_model::Scope::Admin;
use plantd_model::audit::AuditEvent;
use plantd_model::license::Product;
use plantd_model::page::PageQuery;

use crate::envelope::{Data, List, created, list, no_content, ok, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(list_products, Policy::scope(Admin, AuditEvent::ProductList)),
        route!(
            create_product,
            Policy::scope(Admin, AuditEvent::ProductCreate)
        ),
        route!(get_product, Policy::scope(Admin, AuditEvent::ProductRead)),
        route!(
            update_product,
            Policy::scope(Admin, AuditEvent::ProductUpdate)
        ),
        route!(
            delete_product,
            Policy::scope(Admin, AuditEvent::ProductDelete)
        ),
    ]
}

/// Products by name.
#[utoipa::path(get, path = "/products", tag = "licenses", params(PageQuery),
    responses((status = 200, body = List<Product>)))]
async fn list_products(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.products(&caller.org_id, page).await?;
    Ok(list(page, paged, |p| p))
}

/// Create a product; its SKU must be new in the organization.
#[utoipa::path(post, path = "/products", tag = "licenses", request_body = NewProduct,
    responses((status = 201, body = Data<Product>), (status = 409, description = "The SKU is taken")))]
async fn create_product(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewProduct>,
) -> ApiResult<Response> {
    let product = state.app.create_product(&caller.org_id, body).await?;
    Ok(created(&product.id.clone(), product))
}

#[utoipa::path(get, path = "/products/{id}", tag = "licenses", params(("id" = String, Path)),
    responses((status = 200, body = Data<Product>)))]
async fn get_product(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.product(r.org(), &r.id).await?))
}

/// Partial update; licenses already issued keep their features.
#[utoipa::path(put, path = "/products/{id}", tag = "licenses", params(("id" = String, Path)), request_body = ProductUpdate,
    responses((status = 200, body = Data<Product>), (status = 409, description = "The SKU is taken")))]
async fn update_product(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<ProductUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state.app.update_product(r.org(), &r.id, body).await?))
}

/// Delete a product no license was issued for.
#[utoipa::path(delete, path = "/products/{id}", tag = "licenses", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 409, description = "Licenses were issued for the product")))]
async fn delete_product(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_product(r.org(), &r.id).await?;
    Ok(no_content())
}
