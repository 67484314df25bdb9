//! Connection URLs: `scheme://host[:port][/path]` split into the parts a connection needs, and
//! the host name rules.

/// The parts of `scheme://host[:port][/path]` that connections need.
#[derive(Debug, PartialEq, Eq)]
pub struct ParsedUrl {
    pub scheme: String,
    pub host: String,
    pub port: Option<u16>,
}

pub fn parse_url(url: &str) -> Result<ParsedUrl, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("must be a URL such as scheme://host:port")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (h, after) = inner
            .split_once(']')
            .ok_or("has an unclosed IPv6 bracket")?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err("must name a host".into());
    }
    if !valid_host(&host) {
        return Err(format!("has an invalid host '{host}'"));
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(format!("has an invalid port '{p}' (1-65535)")),
        },
    };
    Ok(ParsedUrl {
        scheme: scheme.to_ascii_lowercase(),
        host,
        port,
    })
}

pub(super) fn valid_host(host: &str) -> bool {
    host.len() <= 253
        && (host.parse::<std::net::IpAddr>().is_ok()
            || host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    && !label.starts_with('-')
            }))
}

/// Checks a URL plantd posts to (webhooks, Slack): http:// or https://, at most 2,000
/// characters.
pub fn check_post_url(v: &mut crate::validation::Validator, field: &str, url: &str) {
    match parse_url(url) {
        Ok(u) if ["http", "https"].contains(&u.scheme.as_str()) && url.len() <= 2000 => {}
        Ok(_) => v.add(
            field,
            "must be an http:// or https:// URL of at most 2000 characters",
        ),
        Err(e) => v.add(field, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("opc.tcp://[::1]:4841/x").unwrap().port,
            Some(4841)
        );
        assert!(parse_url("opc.tcp://host:99999").is_err());
        assert!(parse_url("opc.tcp://").is_err());
        assert!(parse_url("localhost:4840").is_err());
    }
}
