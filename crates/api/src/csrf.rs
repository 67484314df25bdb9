//! The session cookie and cross-site request forgery. A browser's session travels in the
//! `plantd_session` cookie (`HttpOnly`, `SameSite=Lax`, `Secure` when the server's public URL is
//! https). A request that changes something, or opens a WebSocket (`/v1/ws`), with that cookie must
//! come from plantd's own pages: its `Origin` (else `Referer`) must be the server's origin. `SameSite=Lax` already
//! keeps the cookie off cross-site POSTs in current browsers; the origin check covers older
//! ones and same-site neighbours. Bearer credentials are not sent by browsers on their own, so
//! they need no check.

use axum::http::{HeaderMap, HeaderValue, header};
use plantd_model::identity::SESSION_ABSOLUTE_SECS;

pub const COOKIE: &str = "plantd_session";

pub const REFUSAL: &str = "cross-site request refused: a request made with the session cookie must come from this server's own pages (its Origin header must be the server's origin)";

/// The session token of the cookie, if any.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&url[..scheme.len() + 3 + end])
}

/// Whether the request comes from the server's own origin (`issuer`) or from the origin the
/// browser addressed (its `Host`, for servers reached under several names).
pub fn same_origin(headers: &HeaderMap, issuer: &str) -> bool {
    let header_text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let claimed = match header_text(header::ORIGIN) {
        Some(o) if o != "null" => Some(o),
        Some(_) => None,
        None => header_text(header::REFERER).and_then(origin_of),
    };
    let Some(claimed) = claimed else {
        return false;
    };
    let own = origin_of(issuer).unwrap_or(issuer);
    if claimed.eq_ignore_ascii_case(own) {
        return true;
    }
    let scheme = own.split("://").next().unwrap_or("http");
    header_text(header::HOST)
        .is_some_and(|host| claimed.eq_ignore_ascii_case(&format!("{scheme}://{host}")))
}

/// Whether a request asks to upgrade the connection (a WebSocket handshake).
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The `Set-Cookie` value that stores a session in the browser.
pub fn set_cookie(token: &str, issuer: &str) -> HeaderValue {
    let secure = if issuer.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={SESSION_ABSOLUTE_SECS}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("plantd_session=; Path=/"))
}

/// The `Set-Cookie` value that removes it.
pub fn clear_cookie(issuer: &str) -> HeaderValue {
    let secure = if issuer.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("plantd_session=; Path=/; Max-Age=0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn origin_rules() {
        let iss = "http://127.0.0.1:8000";
        assert!(same_origin(
            &headers(&[(header::ORIGIN, "http://127.0.0.1:8000")]),
            iss
        ));
        assert!(!same_origin(
            &headers(&[(header::ORIGIN, "http://evil.example")]),
            iss
        ));
        assert!(!same_origin(&headers(&[]), iss), "no Origin and no Referer");
        assert!(same_origin(
            &headers(&[(header::REFERER, "http://127.0.0.1:8000/dashboards?x=1")]),
            iss
        ));
        assert!(!same_origin(
            &headers(&[(header::REFERER, "http://127.0.0.1:8000.evil.example/")]),
            iss
        ));
        assert!(same_origin(
            &headers(&[
                (header::ORIGIN, "http://plant.local:8000"),
                (header::HOST, "plant.local:8000")
            ]),
            iss
        ));
        assert!(!same_origin(&headers(&[(header::ORIGIN, "null")]), iss));
    }

    #[test]
    fn cookie_round_trip() {
        let h = headers(&[(header::COOKIE, "a=b; plantd_session=pds_x ; c=d")]);
        assert_eq!(session_cookie(&h).as_deref(), Some("pds_x"));
        let v = set_cookie("pds_x", "https://plant.example")
            .to_str()
            .unwrap()
            .to_string();
        assert!(v.contains("HttpOnly") && v.contains("SameSite=Lax") && v.contains("Secure"));
        assert!(
            !set_cookie("pds_x", "http://127.0.0.1:8000")
                .to_str()
                .unwrap()
                .contains("Secure")
        );
    }
}
