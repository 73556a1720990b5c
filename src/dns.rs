//! Name resolution for the crawl: the system's resolver, or a caching DNS client
//! (hickory-resolver) when the crawl needs to know how long an answer holds.
//!
//! Which one: with `politeness.per_ip_rps` / `per_ip_concurrency` on, or `network.dns_servers`
//! set, names go through hickory-resolver; otherwise through the system's resolver
//! (`getaddrinfo`, as curl and browsers do: `/etc/hosts`, nsswitch and local resolvers work as
//! the operator expects). The per-address budget needs each answer's TTL (the frontier looks a
//! host's address up again when its TTL runs out), which `getaddrinfo` does not give.
//!
//! Guarantees (hickory): one resolver and one cache for the whole crawl, shared by the
//! frontier's look-ahead lookups and the HTTP client's own, so a name's answer is the same
//! to both until its TTL ends (clamped to `network.dns_min_ttl_secs` ..
//! `network.dns_max_ttl_secs`), and addresses come in the same order (the frontier budgets
//! the first one the request gate permits; the client connects to it first). Failures are
//! cached too, for the negative answer's TTL within the same clamps.
//!
//! Why hickory-resolver: the Rust DNS client that is maintained (the successor of
//! trust-dns, used by reqwest's own `hickory-dns` feature), async on tokio, with a TTL-honouring
//! cache whose bounds are settings, so this module writes no cache of its own.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::TokioResolver;

use crate::config::Config;

/// The answer to a look-up for the per-address budget: the address to budget and until when
/// it holds, or why the name did not resolve. Defined here, below both the frontier that asks
/// and the request gate that answers, so that neither imports the other.
pub type AddressAnswer = Result<(IpAddr, tokio::time::Instant), String>;

/// How many names the cache keeps (each a few hundred bytes).
const CACHE_NAMES: usize = 65_536;

/// Why the DNS client could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DnsSetupError {
    #[error(
        "network.dns_servers: {value:?} is not an address (\"9.9.9.9\" or \"127.0.0.1:5353\")"
    )]
    Server { value: String },
    #[error(
        "DNS: the system's resolver configuration could not be read ({0}); set network.dns_servers"
    )]
    System(String),
}

/// An answer: the addresses in the resolver's order (port 0), and until when it holds
/// (`None`: the system resolver does not say).
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) addrs: Vec<SocketAddr>,
    pub(crate) valid_until: Option<std::time::Instant>,
}

/// The crawl's resolver.
pub(crate) enum Dns {
    System,
    Cached(Box<TokioResolver>),
}

impl Dns {
    /// The resolver `config` asks for (see the module doc).
    pub(crate) fn from_config(config: &Config) -> Result<Dns, DnsSetupError> {
        let p = &config.politeness;
        let n = &config.network;
        let per_ip = p.enabled && (p.per_ip_rps > 0.0 || p.per_ip_concurrency > 0);
        if !per_ip && n.dns_servers.is_empty() {
            return Ok(Dns::System);
        }
        let mut builder = if n.dns_servers.is_empty() {
            TokioResolver::builder_tokio().map_err(|e| DnsSetupError::System(e.to_string()))?
        } else {
            let mut servers = Vec::new();
            for value in &n.dns_servers {
                let addr = crate::config::parse_dns_server(value).ok_or_else(|| {
                    DnsSetupError::Server {
                        value: value.clone(),
                    }
                })?;
                servers.push(NameServerConfig::new(addr, Protocol::Udp));
                servers.push(NameServerConfig::new(addr, Protocol::Tcp));
            }
            TokioResolver::builder_with_config(
                ResolverConfig::from_parts(None, Vec::new(), servers),
                TokioConnectionProvider::default(),
            )
        };
        let options = builder.options_mut();
        options.cache_size = CACHE_NAMES;
        let min = Duration::from_secs_f64(n.dns_min_ttl_secs);
        let max = Duration::from_secs_f64(n.dns_max_ttl_secs);
        options.positive_min_ttl = Some(min);
        options.negative_min_ttl = Some(min);
        options.positive_max_ttl = Some(max);
        options.negative_max_ttl = Some(max);
        Ok(Dns::Cached(Box::new(builder.build())))
    }

    /// Resolves `host` (a name, not an IP literal).
    pub(crate) async fn lookup(
        &self,
        host: &str,
    ) -> Result<Answer, Box<dyn std::error::Error + Send + Sync>> {
        match self {
            Dns::System => Ok(Answer {
                addrs: tokio::net::lookup_host((host, 0)).await?.collect(),
                valid_until: None,
            }),
            Dns::Cached(resolver) => {
                let lookup = resolver.lookup_ip(host).await?;
                Ok(Answer {
                    addrs: lookup.iter().map(|ip| SocketAddr::new(ip, 0)).collect(),
                    valid_until: Some(lookup.valid_until()),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_resolver_unless_ttls_are_needed() {
        let mut config = Config::default();
        assert!(matches!(Dns::from_config(&config), Ok(Dns::System)));
        config.network.dns_servers = vec!["127.0.0.1:5353".into()];
        assert!(matches!(Dns::from_config(&config), Ok(Dns::Cached(_))));
        config.network.dns_servers = vec!["nowhere".into()];
        let e = Dns::from_config(&config).err().unwrap().to_string();
        assert!(
            e.contains("network.dns_servers") && e.contains("nowhere"),
            "{e}"
        );
    }
}
