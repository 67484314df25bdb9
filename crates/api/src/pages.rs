//! The few HTML pages the identity flows need before the web console exists: the login and
//! consent pages of `/oauth/authorize`, the error page of an untrustworthy authorization
//! request, and the pages behind the links of invitation and password-reset emails. Server
//! rendered, no script, every value escaped; they cannot be framed (clickjacking).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;background:#eceff1;color:#263238;margin:0}\
main{max-width:26rem;margin:4rem auto;background:#fff;padding:2rem;border:1px solid #b0bec5;border-radius:4px}\
h1{font-size:1.3rem;margin-top:0}label{display:block;margin:.8rem 0 .2rem;font-weight:600}\
input{width:100%;box-sizing:border-box;padding:.5rem;font-size:1rem;border:1px solid #78909c;border-radius:3px}\
button{margin:1.2rem .5rem 0 0;padding:.5rem 1.2rem;font-size:1rem;border-radius:3px;border:1px solid #455a64;background:#fff;cursor:pointer}\
button.primary{background:#37474f;color:#fff}.error{color:#b71c1c;font-weight:600}\
.error::before{content:'\\26A0  '}ul{padding-left:1.2rem}code{font-size:.9em}\
@media (prefers-color-scheme:dark){body{background:#121212;color:#cfd8dc}main{background:#1e272c;border-color:#455a64}\
input{background:#263238;color:#eceff1}button{background:#263238;color:#eceff1}button.primary{background:#90a4ae;color:#000}}";

/// A whole page with `body` (already escaped HTML) and its status.
pub fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · plantd</title><style>{STYLE}</style></head><body><main>{body}</main></body></html>",
        escape(title)
    );
    html_page(
        status,
        html,
        "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
        "no-referrer",
    )
}

/// Content-Security-Policy of every console page and of the API reference (`/v1/docs`): this
/// origin's scripts, styles, images and connections (the API and its WebSocket) only; no inline
/// script; not framed.
pub(crate) const CONSOLE_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
     form-action 'self'";

/// An HTML answer that is never framed or cached, with its Content-Security-Policy and
/// Referrer-Policy (the identity pages and the console's share these headers).
pub fn html_page(
    status: StatusCode,
    html: String,
    csp: &'static str,
    referrer: &'static str,
) -> Response {
    let mut response = (status, Html(html)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static(referrer));
    response
}

/// The status of a refused login on a form page (the form is shown again with the reason), or
/// `None` when the refusal is not the person's to fix (answered as the API would).
pub fn login_refusal_status(e: &plantd_app::AppError) -> Option<StatusCode> {
    use plantd_app::AppError;
    match e {
        AppError::LimitReached { .. } => Some(StatusCode::TOO_MANY_REQUESTS),
        AppError::Invalid(_) => Some(StatusCode::BAD_REQUEST),
        AppError::Forbidden(_) => Some(StatusCode::FORBIDDEN),
        AppError::Unauthenticated(_) => Some(StatusCode::UNAUTHORIZED),
        _ => None,
    }
}

/// An error page: what went wrong, and no way onward that could mislead.
pub fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    page(
        status,
        title,
        &format!(
            "<h1>{}</h1><p class=\"error\" role=\"alert\">{}</p>",
            escape(title),
            escape(message)
        ),
    )
}

/// Hidden inputs carrying `pairs` through a form.
pub fn hidden(pairs: &[(&str, Option<&str>)]) -> String {
    pairs
        .iter()
        .filter_map(|(k, v)| {
            v.map(|v| {
                format!(
                    "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
                    escape(k),
                    escape(v)
                )
            })
        })
        .collect()
}

/// A labelled input, with its error (if any) next to it.
pub fn field(
    name: &str,
    label: &str,
    kind: &str,
    autocomplete: &str,
    error: Option<&str>,
) -> String {
    let described = error.map_or(String::new(), |_| {
        format!(" aria-describedby=\"{name}-error\" aria-invalid=\"true\"")
    });
    let message = error.map_or(String::new(), |e| {
        format!("<p class=\"error\" id=\"{name}-error\">{}</p>", escape(e))
    });
    format!(
        "<label for=\"{name}\">{}</label><input id=\"{name}\" name=\"{name}\" type=\"{kind}\" autocomplete=\"{autocomplete}\" required{described}>{message}",
        escape(label)
    )
}

/// A message above a form (an error of the whole form).
pub fn notice(message: Option<&str>) -> String {
    message.map_or(String::new(), |m| {
        format!("<p class=\"error\" role=\"alert\">{}</p>", escape(m))
    })
}
