//! The request gate: the one check every outgoing request passes, whatever asked for it (a
//! page, a robots.txt, a redirect hop of a robots.txt, a sitemap).
//!
//! # What it checks
//! 1. **Scope.** A page (and a sitemap, queued like one) must pass every scope rule
//!    ([`Scope::check`]); a request that is not a page of the crawl (robots.txt and its redirect hops) must be on a host the crawl
//!    may visit ([`Scope::check_site`]: the private-address and site rules), since the URL
//!    rules (patterns, path traps) were written for pages.
//! 2. **Private addresses, on the address actually connected to.** No request goes to a
//!    private, loopback, link-local or unique-local address (see [`is_private_ip`]; IPv4
//!    mapped into IPv6 is judged by its IPv4 address) unless `scope.allow_private` is set,
//!    or the host is a seed's host, or a `[network] resolve` rule names it. The rule is
//!    applied where an address becomes known: to an IP-literal URL here, before anything is
//!    sent (literals never reach a resolver); to a host name in `GateResolver`, the DNS
//!    resolver the HTTP client uses, which drops private answers (so a public name pointing
//!    at 10.0.0.1 is refused), and which also answers the frontier's look-ahead lookups for
//!    the per-address budget ([`GateResolver::budget_address`]: the address budgeted is the
//!    first the rule permits, the one the client tries first, from the same cache, see
//!    [`crate::dns`]); and once more to the peer address of the response
//!    ([`RequestGate::check_connected`]), which catches any path that bypassed both.
//!    Through a proxy (`network.proxy`) neither of the last two sees the target: the
//!    crawler connects to the proxy, which resolves the name itself. So the fetcher first
//!    has the gate resolve the target ([`RequestGate::check_resolved`]) and refuses it
//!    unless the rule permits one of its addresses: a proxy is no way into a private network.
//! 3. **Politeness.** A request is only sent when the frontier hands it out: pages,
//!    sitemaps and robots.txt are scheduled by the frontier under their host's rate limit and
//!    concurrency cap. The gate does not keep a second rate limiter, which would count every
//!    request twice; what it guarantees is that nothing reaches the network except through
//!    [`crate::fetch::Fetcher`], which asks the gate first.
//!
//! # Why one gate
//! Before it, the private-address rule lived in the resolver and the scope rules in the
//! crawl, and robots.txt redirects reached neither (a public site's robots.txt could
//! redirect the crawler to `http://169.254.169.254/`). One gate that the fetcher cannot
//! skip makes "every request" true by construction rather than by review.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use url::{Host, Url};

use crate::config::{Config, ResolveRule};
use crate::dns::{AddressAnswer, Dns};
use crate::host::host_name;
use crate::scope::{is_private_ip, OutOfScope, Scope};

/// How long an address from a resolver that gives no TTL (the system's) is budgeted.
const UNTIMED_ANSWER: std::time::Duration = std::time::Duration::from_secs(60);

/// What a request is for: decides which scope rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// A page of the crawl (an accepted URL).
    Page,
    /// A robots.txt, or a redirect hop while fetching one.
    Robots,
    /// A sitemap (queued like a page, see `crate::crawl::sitemaps`): the page rules apply,
    /// and its body is kept whatever its type.
    Sitemap,
}

/// Why the gate refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("not requested: {0}")]
    Scope(OutOfScope),
    #[error("not requested: {host} is at the private address {ip} (scope.allow_private)")]
    PrivateAddress { host: String, ip: IpAddr },
    /// Through a proxy: the target's addresses could not be checked.
    #[error("not requested through the proxy: {reason}")]
    Unverified { reason: String },
}

/// Who may be reached on a private address: the same rule for IP literals, resolved names
/// and connected peers.
pub(crate) struct AddressRule {
    allow_private: bool,
    /// The seeds' hosts are the scope's ([`Scope::is_seed_host`]): one set for both rules.
    scope: Arc<Scope>,
    /// The proxy's host (`network.proxy`), reached like a seed host.
    proxy_host: Option<String>,
    /// `[network] resolve`: the operator's own overrides.
    overrides: Vec<ResolveRule>,
}

impl AddressRule {
    fn new(config: &Config, scope: Arc<Scope>) -> Result<AddressRule, crate::config::ConfigError> {
        // The operator's proxy may sit on a private network (it usually does): the client
        // resolves its name through this rule too, so it is named here like a seed host.
        let proxy_host = config
            .network
            .proxy
            .as_deref()
            .and_then(|p| Url::parse(p).ok())
            .and_then(|u| u.host_str().map(|h| host_name(h).into_owned()));
        Ok(AddressRule {
            allow_private: config.scope.allow_private,
            scope,
            proxy_host,
            overrides: config.resolve_rules()?,
        })
    }

    /// Whether `host` (as in a URL) may be reached at `ip`.
    pub(crate) fn permits(&self, host: &str, ip: IpAddr) -> bool {
        self.allow_private
            || !is_private_ip(ip.to_canonical())
            || self.is_named(&host_name(host))
            || self.override_for(host).is_some()
    }

    /// A seed's host or the proxy's.
    fn is_named(&self, name: &str) -> bool {
        self.scope.is_seed_host(name) || self.proxy_host.as_deref() == Some(name)
    }

    fn override_for(&self, host: &str) -> Option<&ResolveRule> {
        let host = host_name(host);
        self.overrides.iter().find(|r| r.matches(&host))
    }
}

/// The gate. Cheap to share: the fetcher holds one, its resolver another handle.
pub(crate) struct RequestGate {
    scope: Arc<Scope>,
    addresses: Arc<AddressRule>,
    dns: Arc<Dns>,
}

impl RequestGate {
    pub(crate) fn new(
        config: &Config,
        scope: Arc<Scope>,
    ) -> Result<RequestGate, crate::config::ConfigError> {
        let dns = Dns::from_config(config).map_err(|e| crate::config::ConfigError::Invalid {
            origin: "config".into(),
            key: "network.dns_servers".into(),
            message: e.to_string(),
        })?;
        Ok(RequestGate {
            addresses: Arc::new(AddressRule::new(config, scope.clone())?),
            scope,
            dns: Arc::new(dns),
        })
    }

    /// Whether `url` may be requested for `kind`. Checked before anything is sent.
    pub(crate) fn check(&self, url: &Url, kind: RequestKind) -> Result<(), Refused> {
        match kind {
            RequestKind::Page | RequestKind::Sitemap => self.scope.check(url),
            RequestKind::Robots => self.scope.check_site(url),
        }
        .map_err(Refused::Scope)?;
        // The scope's own private rule covers literals already, but only with the scope's
        // exceptions; the gate's rule also honours `[network] resolve` and is the one the
        // resolver applies, so a literal and a name are judged alike.
        let ip = match url.host() {
            Some(Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        if let (Some(ip), Some(host)) = (ip, url.host_str()) {
            if !self.addresses.permits(host, ip) {
                return Err(Refused::PrivateAddress {
                    host: host.to_string(),
                    ip,
                });
            }
        }
        Ok(())
    }

    /// For a request sent through a proxy: whether `url`'s host resolves to an address the
    /// rule permits (an IP literal was judged by [`RequestGate::check`] already). A name
    /// that does not resolve is refused too: nothing vouches for where the proxy would go.
    pub(crate) async fn check_resolved(&self, url: &Url) -> Result<(), Refused> {
        let Some(Host::Domain(host)) = url.host() else {
            return Ok(());
        };
        let host = host.to_ascii_lowercase();
        self.resolver()
            .resolve_permitted(&host)
            .await
            .map(|_| ())
            .map_err(|e| Refused::Unverified {
                reason: e.to_string(),
            })
    }

    /// Whether the address a response came from was allowed for `url`'s host.
    pub(crate) fn check_connected(
        &self,
        url: &Url,
        peer: Option<SocketAddr>,
    ) -> Result<(), Refused> {
        let (Some(peer), Some(host)) = (peer, url.host_str()) else {
            return Ok(());
        };
        if self.addresses.permits(host, peer.ip()) {
            Ok(())
        } else {
            Err(Refused::PrivateAddress {
                host: host.to_string(),
                ip: peer.ip(),
            })
        }
    }

    /// The DNS resolver that applies this gate's address rule to names.
    pub(crate) fn resolver(&self) -> GateResolver {
        GateResolver {
            rule: self.addresses.clone(),
            dns: self.dns.clone(),
        }
    }
}

/// Resolves hosts that match a `[network] resolve` rule to its address, and every other
/// host through the crawl's resolver ([`Dns`]), dropping the private addresses the rule
/// refuses (a name with only such addresses fails to resolve, with the reason).
#[derive(Clone)]
pub(crate) struct GateResolver {
    rule: Arc<AddressRule>,
    dns: Arc<Dns>,
}

impl GateResolver {
    /// The permitted addresses of `host`, in the resolver's order, and until when they hold
    /// (`None`: forever for a `[network] resolve` rule, unknown for the system resolver).
    async fn resolve_permitted(
        &self,
        host: &str,
    ) -> Result<
        (Vec<SocketAddr>, Option<std::time::Instant>),
        Box<dyn std::error::Error + Send + Sync>,
    > {
        if let Some(rule) = self.rule.override_for(host) {
            return Ok((vec![rule.addr], None));
        }
        let answer = self.dns.lookup(host).await?;
        let permitted: Vec<SocketAddr> = answer
            .addrs
            .iter()
            .copied()
            .filter(|a| self.rule.permits(host, a.ip()))
            .collect();
        match (permitted.is_empty(), answer.addrs.first()) {
            (true, Some(first)) => Err(format!(
                "{host} resolves to the private address {}; not fetched (scope.allow_private)",
                first.ip()
            )
            .into()),
            (true, None) => Err(format!("{host}: no address").into()),
            _ => Ok((permitted, answer.valid_until)),
        }
    }

    async fn lookup(
        &self,
        host: String,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.resolve_permitted(&host).await?.0)
    }

    /// The address a request to `host` is charged to (the frontier's per-address budget):
    /// the first permitted one, which the HTTP client tries first, and until when it holds.
    pub(crate) async fn budget_address(&self, host: &str) -> AddressAnswer {
        let now = tokio::time::Instant::now();
        let host = host.to_ascii_lowercase();
        match self.resolve_permitted(&host).await {
            Ok((addrs, valid_until)) => {
                let Some(first) = addrs.first() else {
                    return Err(format!("{host}: no address"));
                };
                let expires = match (valid_until, self.rule.override_for(&host)) {
                    (_, Some(_)) => now + std::time::Duration::from_secs(100 * 365 * 86_400),
                    (Some(at), None) => tokio::time::Instant::from_std(at),
                    (None, None) => now + UNTIMED_ANSWER,
                };
                Ok((first.ip(), expires))
            }
            Err(e) => Err(format!("{host}: {e}")),
        }
    }
}

impl reqwest::dns::Resolve for GateResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let resolver = self.clone();
        Box::pin(async move {
            let addrs = resolver.lookup(host).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::ScopeOptions;

    fn gate(allow_private: bool, seeds: &[&str], mode_any: bool) -> RequestGate {
        let mut config = Config::default();
        config.scope.allow_private = allow_private;
        if mode_any {
            config.scope.mode = crate::scope::ScopeMode::Any;
        }
        let seeds: Vec<Url> = seeds.iter().map(|s| Url::parse(s).unwrap()).collect();
        let rules = vec![ResolveRule {
            pattern: "*.test".into(),
            addr: "127.0.0.1:8080".parse().unwrap(),
        }];
        let scope = Arc::new(Scope::new(&config.scope, &seeds).unwrap());
        RequestGate {
            dns: Arc::new(Dns::System),
            addresses: Arc::new(AddressRule {
                allow_private,
                scope: scope.clone(),
                proxy_host: None,
                overrides: rules,
            }),
            scope,
        }
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn ip_literals_into_private_networks_are_refused_for_every_kind() {
        let g = gate(false, &["http://a.example/"], true);
        for target in [
            "http://169.254.169.254/latest/meta-data/",
            "http://127.0.0.1:9/robots.txt",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://10.1.2.3/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
        ] {
            for kind in [RequestKind::Page, RequestKind::Robots] {
                assert!(g.check(&url(target), kind).is_err(), "{target} {kind:?}");
            }
        }
        assert!(g
            .check(&url("http://93.184.216.34/"), RequestKind::Robots)
            .is_ok());
    }

    #[test]
    fn exceptions_seed_hosts_resolve_rules_and_allow_private() {
        let g = gate(false, &["http://127.0.0.1:8080/"], true);
        assert!(g
            .check(
                &url("http://127.0.0.1:8080/robots.txt"),
                RequestKind::Robots
            )
            .is_ok());
        assert!(g
            .check(&url("http://127.0.0.2/robots.txt"), RequestKind::Robots)
            .is_err());
        let open = gate(true, &["http://a.example/"], true);
        assert!(open
            .check(&url("http://169.254.169.254/"), RequestKind::Robots)
            .is_ok());
        let peer: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let g = gate(false, &["http://a.example/"], true);
        assert!(g
            .check_connected(&url("http://h1.test/"), Some(peer))
            .is_ok());
        assert!(g
            .check_connected(&url("http://public.example/"), Some(peer))
            .is_err());
        assert!(g
            .check_connected(
                &url("http://public.example/"),
                Some("[::ffff:127.0.0.1]:80".parse().unwrap())
            )
            .is_err());
    }

    #[test]
    fn robots_requests_need_the_site_not_the_page_rules() {
        let mut g = gate(false, &["http://a.example/"], false);
        let options = ScopeOptions {
            deny: vec![r"\.txt$".into()],
            ..ScopeOptions::default()
        };
        g.scope = Arc::new(Scope::new(&options, &[url("http://a.example/")]).unwrap());
        let robots = url("http://a.example/robots.txt");
        assert!(g.check(&robots, RequestKind::Robots).is_ok());
        assert!(g.check(&robots, RequestKind::Page).is_err());
        assert_eq!(
            g.check(
                &url("http://elsewhere.example/robots.txt"),
                RequestKind::Robots
            ),
            Err(Refused::Scope(OutOfScope::OffSite))
        );
    }

    #[tokio::test]
    async fn resolver_drops_private_answers_unless_allowed() {
        // `localhost` resolves to loopback through the system resolver, with no network.
        let g = gate(false, &["http://a.example/"], true);
        let e = g.resolver().lookup("localhost".into()).await.unwrap_err();
        assert!(e.to_string().contains("private address"), "{e}");
        let open = gate(true, &["http://a.example/"], true);
        assert!(open.resolver().lookup("localhost".into()).await.is_ok());
        let seeded = gate(false, &["http://localhost/"], true);
        assert!(seeded.resolver().lookup("localhost".into()).await.is_ok());
        let addrs = g.resolver().lookup("h1.test".into()).await.unwrap();
        assert_eq!(addrs, vec!["127.0.0.1:8080".parse().unwrap()]);
    }
}
