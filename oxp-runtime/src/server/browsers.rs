//! Who may call the server from a browser, and under which names: a foreign `Origin` is
//! refused (CSRF), and so is a foreign `Host` on a loopback server (DNS rebinding). The
//! server's own origins come from its configuration and its listener, never from a request.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};

/// The host names a loopback server answers to by default: a page on another name that
/// resolves to 127.0.0.1 (DNS rebinding) is not one of them.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Who may reach the server from a browser, and under which names.
#[derive(Clone, Debug, Default)]
pub(crate) struct Browsers {
    /// Origins allowed (`scheme://host[:port]`, lowercase): the server's own, as its
    /// configuration and listener give them, and those it was told to allow. Never taken from
    /// a request.
    pub(crate) origins: Vec<String>,
    /// `Some`: only these host names (lowercase, without port) are answered.
    pub(crate) hosts: Option<Vec<String>>,
}

/// Why a request was turned away before any route saw it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Origin,
    Host,
}

impl Browsers {
    /// The normal form an origin is compared in: lowercase, no trailing slash, no path.
    pub(crate) fn origin_of(url: &str) -> String {
        let url = url.trim().trim_end_matches('/').to_ascii_lowercase();
        match url.split_once("://") {
            Some((scheme, rest)) => {
                let authority = rest.split('/').next().unwrap_or_default();
                format!("{scheme}://{authority}")
            }
            None => url,
        }
    }

    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), Refused> {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        if let (Some(allowed), Some(host)) = (&self.hosts, host) {
            let name = host_name(host);
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
                return Err(Refused::Host);
            }
        }
        let Some(origin) = headers.get(ORIGIN) else {
            return Ok(()); // not a browser, or a same-origin GET
        };
        // Duplicate `Origin` headers are no browser's: refused rather than picked from.
        if headers.get_all(ORIGIN).iter().nth(1).is_some() {
            return Err(Refused::Origin);
        }
        // Compared without allocating: every call from a browser page passes here.
        let origin = origin.to_str().map_err(|_| Refused::Origin)?.trim();
        let origin = origin.strip_suffix('/').unwrap_or(origin);
        // Never the request's own `Host`: a rebound page names its own host there, and beyond
        // loopback no `Host` check stands in its way.
        if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            Ok(())
        } else {
            Err(Refused::Origin)
        }
    }

    /// The names a listener on `addr` answers to, as a `Host` header names them (lowercase,
    /// without port): its address (every interface's when it binds all of them), and on
    /// loopback or every interface the loopback names.
    pub(crate) fn listener_hosts(addr: std::net::SocketAddr) -> Vec<String> {
        let mut hosts: Vec<String> = Vec::new();
        let name = |ip: std::net::IpAddr| match ip {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        };
        if addr.ip().is_unspecified() {
            // `0.0.0.0` answers on every IPv4 address, `[::]` on every address.
            let v6 = addr.is_ipv6();
            if let Ok(interfaces) = if_addrs::get_if_addrs() {
                hosts.extend(
                    interfaces
                        .iter()
                        .map(|i| i.ip())
                        .filter(|ip| v6 || ip.is_ipv4())
                        .map(name),
                );
            }
            hosts.extend(LOOPBACK_HOSTS.map(String::from));
        } else if addr.ip().is_loopback() {
            hosts.extend(LOOPBACK_HOSTS.map(String::from));
        } else {
            hosts.push(name(addr.ip()));
        }
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// The origins a page served by this listener has: `http://` and each of its
    /// [`listener_hosts`](Self::listener_hosts), with its port (none besides for port 80,
    /// which browsers leave out).
    pub(crate) fn listener_origins(addr: std::net::SocketAddr) -> Vec<String> {
        let port = addr.port();
        let hosts = Self::listener_hosts(addr);
        let mut origins = Vec::with_capacity(hosts.len() * 2);
        for host in hosts {
            origins.push(format!("http://{host}:{port}"));
            if port == 80 {
                origins.push(format!("http://{host}"));
            }
        }
        origins
    }

    /// The host name of a URL (`tools.example.com` of `https://Tools.example.com:8443/oxp`).
    pub(crate) fn host_of(url: &str) -> String {
        let origin = Self::origin_of(url);
        let authority = origin.split_once("://").map_or(origin.as_str(), |(_, a)| a);
        host_name(authority).to_owned()
    }
}

/// `example.com` of `example.com:8000`, `[::1]` of `[::1]:8000`.
fn host_name(host: &str) -> &str {
    if let Some(end) = host.find(']') {
        return &host[..=end];
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn origins_and_hosts() {
        let mut origins = Browsers::listener_origins("127.0.0.1:8000".parse().unwrap());
        origins.push("https://app.example.com".into());
        let local = Browsers {
            origins,
            hosts: Some(LOOPBACK_HOSTS.map(String::from).to_vec()),
        };
        assert_eq!(local.check(&headers(&[("host", "127.0.0.1:8000")])), Ok(()));
        assert_eq!(local.check(&headers(&[("host", "[::1]:8000")])), Ok(()));
        assert_eq!(local.check(&headers(&[("host", "LOCALHOST")])), Ok(()));
        assert_eq!(
            local.check(&headers(&[("host", "evil.example:8000")])),
            Err(Refused::Host)
        );
        // The listener's own origin; a listed one; others not.
        let own = [
            ("host", "127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:8000"),
        ];
        assert_eq!(local.check(&headers(&own)), Ok(()));
        let listed = [
            ("host", "127.0.0.1:8000"),
            ("origin", "https://app.example.com/"),
        ];
        assert_eq!(local.check(&headers(&listed)), Ok(()));
        for foreign in ["https://evil.example", "null", "http://localhost:3000"] {
            let h = headers(&[("host", "localhost:8000"), ("origin", foreign)]);
            assert_eq!(local.check(&h), Err(Refused::Origin), "{foreign}");
        }
        let twice = [
            ("host", "127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:8000"),
        ];
        assert_eq!(local.check(&headers(&twice)), Err(Refused::Origin));
        // No Host check off loopback; the Origin check still holds.
        let public = Browsers::default();
        assert_eq!(
            public.check(&headers(&[("host", "tools.example.com")])),
            Ok(())
        );
        let h = headers(&[
            ("host", "tools.example.com"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(public.check(&h), Err(Refused::Origin));
        // A rebound page names its own host in both headers: not the server's origin.
        let rebound = headers(&[
            ("host", "evil.example:8000"),
            ("origin", "http://evil.example:8000"),
        ]);
        assert_eq!(public.check(&rebound), Err(Refused::Origin));
    }

    #[test]
    fn a_listener_s_origins() {
        let local = Browsers::listener_origins("127.0.0.1:8000".parse().unwrap());
        for own in [
            "http://127.0.0.1:8000",
            "http://localhost:8000",
            "http://[::1]:8000",
        ] {
            assert!(local.iter().any(|o| o == own), "{own} in {local:?}");
        }
        let all = Browsers::listener_origins("0.0.0.0:80".parse().unwrap());
        assert!(all.iter().any(|o| o == "http://127.0.0.1:80"), "{all:?}");
        assert!(all.iter().any(|o| o == "http://127.0.0.1"), "{all:?}");
        assert!(!all.iter().any(|o| o.contains("evil")));
        let one = Browsers::listener_origins("10.1.2.3:8080".parse().unwrap());
        assert_eq!(one, ["http://10.1.2.3:8080"]);
    }

    #[test]
    fn origin_normal_form() {
        assert_eq!(
            Browsers::origin_of("HTTPS://Tools.Example.com:8443/oxp/"),
            "https://tools.example.com:8443"
        );
        assert_eq!(
            Browsers::host_of("HTTPS://Tools.Example.com:8443/oxp/"),
            "tools.example.com"
        );
        assert_eq!(Browsers::host_of("http://[::1]:8000"), "[::1]");
    }
}
