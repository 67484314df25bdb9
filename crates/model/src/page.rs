//! List pagination (SPEC 4 preamble, 8.6): `page` from 1, `per_page` 1..=100 (default 20).
//! A `per_page` above 100 is clamped to 100 and `meta.per_page` says so.

use serde::{Deserialize, Serialize};

use crate::FieldError;

pub const DEFAULT_PER_PAGE: u32 = 20;
pub const MAX_PER_PAGE: u32 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    pub page: u32,
    pub per_page: u32,
}

impl Default for Page {
    fn default() -> Self {
        Self {
            page: 1,
            per_page: DEFAULT_PER_PAGE,
        }
    }
}

impl Page {
    /// Checks raw query values; `per_page` above the maximum is clamped, zero is refused.
    pub fn new(page: Option<i64>, per_page: Option<i64>) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let page = match page {
            None => 1,
            Some(p) if p >= 1 && p <= i64::from(u32::MAX) => p as u32,
            Some(_) => {
                errors.push(FieldError::new("page", "must be an integer of at least 1"));
                1
            }
        };
        let per_page = match per_page {
            None => DEFAULT_PER_PAGE,
            Some(p) if p >= 1 => p.min(i64::from(MAX_PER_PAGE)) as u32,
            Some(_) => {
                errors.push(FieldError::new(
                    "per_page",
                    "must be an integer between 1 and 100",
                ));
                DEFAULT_PER_PAGE
            }
        };
        if errors.is_empty() {
            Ok(Self { page, per_page })
        } else {
            Err(errors)
        }
    }
    pub fn limit(self) -> i64 {
        i64::from(self.per_page)
    }
    pub fn offset(self) -> i64 {
        (i64::from(self.page) - 1) * i64::from(self.per_page)
    }
}

/// The `meta` object of a list response.
#[derive(Clone, Copy, Debug, Serialize, utoipa::ToSchema)]
pub struct PageMeta {
    pub page: u32,
    pub per_page: u32,
    pub total: u64,
}

impl PageMeta {
    pub fn new(page: Page, total: u64) -> Self {
        Self {
            page: page.page,
            per_page: page.per_page,
            total,
        }
    }
}

/// A page of rows plus the total number of rows matching the filters.
#[derive(Debug)]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub total: u64,
}

/// Raw pagination query parameters, shared by every list route.
#[derive(Clone, Copy, Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page number, from 1 (default 1).
    #[param(minimum = 1, maximum = 4294967295_i64)]
    #[serde(default, deserialize_with = "opt_i64")]
    pub page: Option<i64>,
    /// Items per page, 1 to 100 (default 20); larger values are clamped to 100.
    #[param(minimum = 1)]
    #[serde(default, deserialize_with = "opt_i64")]
    pub per_page: Option<i64>,
}

/// An optional integer query parameter (query strings carry text).
pub fn opt_i64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    match text.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) => t
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom("must be an integer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges() {
        assert_eq!(
            Page::new(None, None).unwrap(),
            Page {
                page: 1,
                per_page: 20
            }
        );
        assert_eq!(
            Page::new(Some(3), Some(500)).unwrap(),
            Page {
                page: 3,
                per_page: 100
            }
        );
        assert_eq!(Page::new(Some(3), Some(10)).unwrap().offset(), 20);
        assert_eq!(Page::new(Some(0), Some(0)).unwrap_err().len(), 2);
        assert!(Page::new(Some(-1), None).is_err());
    }
}
