//! The `[scope]` rules through the public API: modes, allow/deny, private addresses, trap
//! limits at their boundaries, and a property test that `check` never panics.
//! (`cargo test scope` runs them, with the other tests whose name says scope.)

use std::net::IpAddr;

use crawler::scope::{
    is_private_ip, registrable_domain, OutOfScope, Scope, ScopeError, ScopeMode, ScopeOptions,
};
use url::Url;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn scope_with(options: ScopeOptions, seeds: &[&str]) -> Scope {
    let seeds: Vec<Url> = seeds.iter().map(|s| url(s)).collect();
    Scope::new(&options, &seeds).unwrap()
}

fn mode(mode: ScopeMode) -> ScopeOptions {
    ScopeOptions {
        mode,
        ..ScopeOptions::default()
    }
}

#[track_caller]
fn assert_checks(scope: &Scope, table: &[(&str, Result<(), OutOfScope>)]) {
    for &(u, expected) in table {
        assert_eq!(scope.check(&url(u)), expected, "{u}");
    }
}

const OK: Result<(), OutOfScope> = Ok(());
const OFF: Result<(), OutOfScope> = Err(OutOfScope::OffSite);

// ---- configuration ----

#[test]
fn defaults_are_the_documented_ones() {
    let d = ScopeOptions::default();
    assert_eq!(d.mode, ScopeMode::SeedDomains);
    assert!(d.allow.is_empty() && d.deny.is_empty());
    assert!(!d.allow_private);
    assert_eq!(d.max_url_length, 8192);
    assert_eq!(d.max_path_segments, 32);
    assert_eq!(d.max_repeated_segments, 3);
    assert_eq!(d.max_pages_per_host, 0);
    assert_eq!(toml::from_str::<ScopeOptions>("").unwrap(), d);
}

#[test]
fn scope_section_parses_from_toml() {
    let text = r#"
        mode = "seed-hosts"
        allow = ['^https://a\.test/docs/']
        deny = ['\.pdf$']
        allow_private = true
        max_url_length = 100
        max_path_segments = 5
        max_repeated_segments = 2
        max_pages_per_host = 1000
    "#;
    let o: ScopeOptions = toml::from_str(text).unwrap();
    assert_eq!(o.mode, ScopeMode::SeedHosts);
    assert_eq!(o.allow, vec![r"^https://a\.test/docs/".to_string()]);
    assert_eq!(o.deny, vec![r"\.pdf$".to_string()]);
    assert!(o.allow_private);
    assert_eq!(
        (
            o.max_url_length,
            o.max_path_segments,
            o.max_repeated_segments
        ),
        (100, 5, 2)
    );
    assert_eq!(o.max_pages_per_host, 1000);
    for (text, m) in [
        ("mode = 'seed-domains'", ScopeMode::SeedDomains),
        ("mode = 'any'", ScopeMode::Any),
    ] {
        assert_eq!(toml::from_str::<ScopeOptions>(text).unwrap().mode, m);
        assert_eq!(format!("mode = '{m}'"), text);
    }
    assert!(toml::from_str::<ScopeOptions>("mode = 'seed_hosts'").is_err());
    assert!(toml::from_str::<ScopeOptions>("max_urls = 3").is_err());
    assert!(toml::from_str::<ScopeOptions>("max_url_length = -1").is_err());
    let back: ScopeOptions = toml::from_str(&toml::to_string(&o).unwrap()).unwrap();
    assert_eq!(back, o);
}

#[test]
fn scope_bad_regex_is_named_with_its_list() {
    let seeds = [url("https://a.test/")];
    let options = ScopeOptions {
        allow: vec!["ok".into(), "(unclosed".into()],
        ..ScopeOptions::default()
    };
    let err = Scope::new(&options, &seeds).unwrap_err();
    assert!(
        matches!(&err, ScopeError::BadPattern { list: "scope.allow", index: 1, pattern, .. } if pattern == "(unclosed"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("scope.allow[1]: invalid regex \"(unclosed\""),
        "{message}"
    );
    assert!(!message.contains('\n'), "{message}");
    assert!(options.validate().is_err());

    let options = ScopeOptions {
        deny: vec!["[z-a]".into()],
        ..ScopeOptions::default()
    };
    let err = Scope::new(&options, &seeds).unwrap_err();
    assert!(
        err.to_string().starts_with("scope.deny[0]: invalid regex"),
        "{err}"
    );
    assert!(options.validate().is_err());

    assert!(ScopeOptions::default().validate().is_ok());
    let s = scope_with(ScopeOptions::default(), &["https://a.test/"]);
    assert_eq!(s.options(), &ScopeOptions::default());
}

// ---- modes ----

const SEEDS: &[&str] = &[
    "https://www.example.co.uk/",
    "http://h1.test:8080/start",
    "https://a.b.test/",
    "http://a.github.io/",
    "http://93.184.216.34/",
    "http://[2606:4700::1]/",
];

#[test]
fn scope_seed_hosts_mode() {
    let s = scope_with(mode(ScopeMode::SeedHosts), SEEDS);
    assert_checks(
        &s,
        &[
            ("https://www.example.co.uk/any/path?q=1", OK),
            ("http://www.example.co.uk:81/", OK), // port ignored
            ("https://www.example.co.uk./", OK),  // trailing dot ignored
            ("https://shop.example.co.uk/", OFF),
            ("https://example.co.uk/", OFF),
            ("http://h1.test/", OK), // seed was on :8080
            ("https://h1.test:9/x", OK),
            ("http://h2.test:8080/", OFF),
            ("https://a.b.test/x", OK),
            ("https://c.b.test/", OFF),
            ("http://a.github.io/", OK),
            ("http://b.github.io/", OFF),
            ("http://93.184.216.34/x", OK),
            ("http://93.184.216.35/", OFF),
            ("http://[2606:4700::1]:8080/", OK),
            ("http://[2606:4700::2]/", OFF),
            ("https://elsewhere.com/", OFF),
        ],
    );
}

#[test]
fn scope_seed_domains_mode() {
    let s = scope_with(mode(ScopeMode::SeedDomains), SEEDS);
    assert_checks(
        &s,
        &[
            ("https://www.example.co.uk/", OK),
            ("https://shop.example.co.uk/", OK), // same eTLD+1 example.co.uk
            ("https://example.co.uk/", OK),
            ("https://deep.er.example.co.uk/", OK),
            ("https://example.co.uk./", OK),
            ("https://other.co.uk/", OFF),
            ("https://co.uk/", OFF),
            ("https://example.com/", OFF),
            ("http://h1.test/", OK),
            ("http://x.h1.test/", OK), // unlisted TLD: last two labels, h1.test
            ("http://h2.test/", OFF),  // h1.test and h2.test are different sites
            ("http://b.test/", OK),    // a.b.test → b.test
            ("http://c.b.test/", OK),
            ("http://a.github.io/", OK),
            ("http://b.github.io/", OFF), // private section of the list
            ("http://github.io/", OFF),
            ("http://93.184.216.34/", OK),
            ("http://93.184.216.35/", OFF), // IPs compare exactly
            ("http://[2606:4700::1]/", OK),
            ("http://[2606:4700::2]/", OFF),
        ],
    );
}

#[test]
fn scope_any_mode() {
    let s = scope_with(mode(ScopeMode::Any), SEEDS);
    assert_checks(
        &s,
        &[
            ("https://elsewhere.com/", OK),
            ("http://h2.test/", OK),
            ("http://8.8.8.8/", OK),
            ("http://[2001:4860:4860::8888]/", OK),
            // Private addresses stay refused in any mode.
            ("http://10.0.0.1/", Err(OutOfScope::PrivateAddress)),
        ],
    );
}

#[test]
fn scope_without_seeds_is_empty_unless_any() {
    let none: &[&str] = &[];
    let s = scope_with(mode(ScopeMode::SeedDomains), none);
    assert_eq!(s.check(&url("https://a.test/")), OFF);
    let s = scope_with(mode(ScopeMode::SeedHosts), none);
    assert_eq!(s.check(&url("https://a.test/")), OFF);
    let s = scope_with(mode(ScopeMode::Any), none);
    assert_eq!(s.check(&url("https://a.test/")), OK);
}

#[test]
fn scope_registrable_domains() {
    for (host, domain) in [
        ("www.example.co.uk", "example.co.uk"),
        ("shop.example.co.uk", "example.co.uk"),
        ("example.co.uk", "example.co.uk"),
        ("co.uk", "co.uk"),
        ("www.example.com", "example.com"),
        ("www.example.com.", "example.com"),
        ("a.github.io", "a.github.io"),
        ("x.a.github.io", "a.github.io"),
        ("h3.test", "h3.test"),
        ("a.b.test", "b.test"),
        ("a.b.internal", "b.internal"),
        ("localhost", "localhost"),
        ("test", "test"),
        ("10.0.0.1", "10.0.0.1"),
        ("[::1]", "[::1]"),
        ("www.xn--80ak6aa92e.com", "xn--80ak6aa92e.com"),
    ] {
        assert_eq!(registrable_domain(host), domain, "{host}");
    }
}

// ---- allow and deny ----

#[test]
fn scope_allow_and_deny_precedence() {
    let options = ScopeOptions {
        allow: vec![r"^https://a\.test/docs/".into(), r"/blog/".into()],
        deny: vec![r"\.pdf$".into(), r"/docs/private/".into()],
        ..ScopeOptions::default()
    };
    let s = scope_with(options, &["https://a.test/", "https://a.test/start.pdf"]);
    assert_checks(
        &s,
        &[
            ("https://a.test/docs/intro", OK),
            ("https://a.test/blog/2026", OK),
            ("https://a.test/other", Err(OutOfScope::NotAllowed)),
            ("http://a.test/docs/intro", Err(OutOfScope::NotAllowed)), // anchored on https
            // Deny wins over allow.
            ("https://a.test/docs/manual.pdf", Err(OutOfScope::Denied)),
            ("https://a.test/docs/private/x", Err(OutOfScope::Denied)),
            // Seeds are exempt from allow, not from deny.
            ("https://a.test/", OK),
            ("https://a.test/start.pdf", Err(OutOfScope::Denied)),
            // Off-site is reported before deny/allow.
            ("https://b.test/docs/x.pdf", OFF),
        ],
    );
}

#[test]
fn scope_deny_only_and_allow_only() {
    let s = scope_with(
        ScopeOptions {
            deny: vec![r"(?i)[?&]sort=".into()],
            ..ScopeOptions::default()
        },
        &["https://a.test/"],
    );
    assert_checks(
        &s,
        &[
            ("https://a.test/list?page=2", OK),
            (
                "https://a.test/list?page=2&SORT=asc",
                Err(OutOfScope::Denied),
            ),
        ],
    );
    let s = scope_with(
        ScopeOptions {
            allow: vec![r"/p/\d+$".into()],
            ..ScopeOptions::default()
        },
        &["https://a.test/"],
    );
    assert_checks(
        &s,
        &[
            ("https://a.test/p/12", OK),
            ("https://a.test/p/12/x", Err(OutOfScope::NotAllowed)),
            ("https://a.test/", OK),
        ],
    );
}

// ---- private addresses ----

#[test]
fn scope_private_ip_classification() {
    let private = [
        "0.0.0.0",
        "0.1.2.3",
        "10.0.0.1",
        "10.255.255.255",
        "100.64.0.1",
        "100.127.255.255",
        "127.0.0.1",
        "127.255.0.1",
        "169.254.169.254",
        "172.16.0.1",
        "172.31.255.255",
        "192.0.0.8",
        "192.0.2.1",
        "192.168.0.1",
        "192.168.255.255",
        "198.18.0.1",
        "198.19.255.255",
        "198.51.100.7",
        "203.0.113.9",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "febf:ffff::1",
        "fec0::1",
        "ff02::1",
        "::ffff:10.0.0.1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::10.0.0.1",
        "64:ff9b::10.0.0.1",
        "64:ff9b:1::1",
        "100::1",
        "2001:db8::1",
        "3fff::1",
        "2002:0a00:0001::1",
        "2002:7f00:0001::",
    ];
    let public = [
        "1.1.1.1",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.1",
        "93.184.216.34",
        "100.63.255.255",
        "100.128.0.1",
        "126.255.255.255",
        "128.0.0.1",
        "169.253.255.255",
        "169.255.0.1",
        "172.15.255.255",
        "172.32.0.1",
        "192.0.1.1",
        "192.167.255.255",
        "192.169.0.1",
        "198.17.255.255",
        "198.20.0.1",
        "223.255.255.255",
        "2001:4860:4860::8888",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "::8.8.8.8",
        "64:ff9b::8.8.8.8",
        "2002:0808:0808::1",
        "fbff::1",
        "fe7f::1",
        "2001:db9::1",
    ];
    for ip in private {
        assert!(
            is_private_ip(ip.parse::<IpAddr>().unwrap()),
            "{ip} is private"
        );
    }
    for ip in public {
        assert!(
            !is_private_ip(ip.parse::<IpAddr>().unwrap()),
            "{ip} is public"
        );
    }
}

#[test]
fn scope_private_literals_refused_unless_seeded_or_allowed() {
    const PRIVATE: Result<(), OutOfScope> = Err(OutOfScope::PrivateAddress);
    let any = mode(ScopeMode::Any);
    let s = scope_with(any.clone(), &["https://a.test/", "http://10.0.0.5:8080/"]);
    assert_checks(
        &s,
        &[
            ("http://10.0.0.1/", PRIVATE),
            ("http://127.0.0.1:8080/admin", PRIVATE),
            ("http://169.254.169.254/latest/meta-data/", PRIVATE),
            ("http://[::1]/", PRIVATE),
            ("http://[fd00::1]/", PRIVATE),
            ("http://[::ffff:10.0.0.1]/", PRIVATE),
            ("http://0.0.0.0/", PRIVATE),
            // Other spellings of 127.0.0.1: the url crate parses them to the same IP.
            ("http://0x7f.1/", PRIVATE),
            ("http://2130706433/", PRIVATE),
            ("http://017700000001/", PRIVATE),
            ("http://localhost:3000/", PRIVATE),
            ("http://api.localhost/", PRIVATE),
            // The seed's own IP, on any port, and its mapped IPv6 spelling.
            ("http://10.0.0.5/", OK),
            ("http://10.0.0.5:9999/x", OK),
            ("http://[::ffff:10.0.0.5]/", OK),
            ("http://10.0.0.6/", PRIVATE),
            ("http://8.8.8.8/", OK),
            ("http://notlocalhost/", OK),
            ("http://localhost.example.com/", OK),
        ],
    );
    // Under seed-domains, the seed's IP is on-site and exempt; other private IPs are
    // reported as private (not merely off-site).
    let s = scope_with(ScopeOptions::default(), &["http://127.0.0.1:4000/"]);
    assert_checks(
        &s,
        &[
            ("http://127.0.0.1:4000/p/1", OK),
            ("http://127.0.0.2/", PRIVATE),
            ("http://localhost:4000/", PRIVATE),
            ("http://8.8.8.8/", OFF),
        ],
    );
    // A seed on a loopback name exempts that name only.
    let s = scope_with(any.clone(), &["http://localhost:4000/"]);
    assert_checks(
        &s,
        &[
            ("http://localhost:4000/x", OK),
            ("http://localhost./x", OK),
            ("http://127.0.0.1:4000/", PRIVATE),
        ],
    );
    // An IPv6 seed given in mapped form exempts the IPv4 literal.
    let s = scope_with(any.clone(), &["http://[::ffff:192.168.1.1]/"]);
    assert_eq!(s.check(&url("http://192.168.1.1/")), OK);
    // The same rule for resolved addresses.
    let s = scope_with(any.clone(), &["http://10.0.0.5/", "http://[fd00::5]/"]);
    for (ip, permitted) in [
        ("10.0.0.5", true),
        ("::ffff:10.0.0.5", true),
        ("fd00::5", true),
        ("10.0.0.6", false),
        ("127.0.0.1", false),
        ("fd00::6", false),
        ("8.8.8.8", true),
    ] {
        assert_eq!(s.permits_ip(ip.parse().unwrap()), permitted, "{ip}");
    }
    // allow_private switches the rule off.
    let s = scope_with(
        ScopeOptions {
            allow_private: true,
            ..any
        },
        &["https://a.test/"],
    );
    for u in ["http://10.0.0.1/", "http://[::1]/", "http://localhost/"] {
        assert_eq!(s.check(&url(u)), OK, "{u}");
    }
    assert!(s.permits_ip("127.0.0.1".parse().unwrap()));
}

// ---- trap limits ----

fn url_of_length(len: usize) -> String {
    let base = "https://a.test/";
    assert!(len >= base.len());
    format!("{base}{}", "x".repeat(len - base.len()))
}

#[test]
fn scope_url_length_boundary() {
    let s = scope_with(ScopeOptions::default(), &["https://a.test/"]);
    assert_eq!(s.check(&url(&url_of_length(8192))), OK);
    assert_eq!(
        s.check(&url(&url_of_length(8193))),
        Err(OutOfScope::TooLong)
    );
    let s = scope_with(
        ScopeOptions {
            max_url_length: 30,
            ..ScopeOptions::default()
        },
        &["https://a.test/"],
    );
    assert_eq!(s.check(&url(&url_of_length(30))), OK);
    assert_eq!(s.check(&url(&url_of_length(31))), Err(OutOfScope::TooLong));
    // The query counts too.
    assert_eq!(
        s.check(&url("https://a.test/?q=aaaaaaaaaaaaaaaa")),
        Err(OutOfScope::TooLong)
    );
    let off = scope_with(
        ScopeOptions {
            max_url_length: 0,
            ..ScopeOptions::default()
        },
        &["https://a.test/"],
    );
    assert_eq!(off.check(&url(&url_of_length(100_000))), OK);
}

fn path_of(segments: usize) -> String {
    let path: String = (0..segments).map(|i| format!("/s{i}")).collect();
    format!("https://a.test{path}")
}

#[test]
fn scope_path_segments_boundary() {
    let s = scope_with(ScopeOptions::default(), &["https://a.test/"]);
    assert_eq!(s.check(&url(&path_of(32))), OK);
    assert_eq!(s.check(&url(&(path_of(32) + "/"))), OK); // trailing slash: no segment
    assert_eq!(
        s.check(&url(&path_of(33))),
        Err(OutOfScope::TooManySegments)
    );
    let s = scope_with(
        ScopeOptions {
            max_path_segments: 2,
            ..ScopeOptions::default()
        },
        &["https://a.test/"],
    );
    assert_checks(
        &s,
        &[
            ("https://a.test/", OK),
            ("https://a.test/a/b", OK),
            ("https://a.test/a/b/?x=/1/2/3/4", OK), // the query is not the path
            ("https://a.test/a/b/c", Err(OutOfScope::TooManySegments)),
            ("https://a.test/a//", OK),
            ("https://a.test/a//b", Err(OutOfScope::TooManySegments)),
        ],
    );
    let off = scope_with(
        ScopeOptions {
            max_path_segments: 0,
            max_url_length: 0,
            ..ScopeOptions::default()
        },
        &["https://a.test/"],
    );
    assert_eq!(off.check(&url(&path_of(500))), OK);
}

#[test]
fn scope_repeated_segments_boundary() {
    const TRAP: Result<(), OutOfScope> = Err(OutOfScope::RepeatedSegments);
    let s = scope_with(ScopeOptions::default(), &["https://a.test/"]);
    assert_checks(
        &s,
        &[
            ("https://a.test/a/a/a/", OK), // exactly 3
            ("https://a.test/a/a/a/a/", TRAP),
            ("https://a.test/x/a/a/a/a", TRAP),
            ("https://a.test/a/b/a/b/a/b/", OK),
            ("https://a.test/a/b/a/b/a/b/a/b/", TRAP),
            ("https://a.test/p/a/b/c/a/b/c/a/b/c/a/b/c/", TRAP),
            ("https://a.test/calendar/2026/11/11/", OK),
            ("https://a.test/api/v1/users/1/posts/1/comments/1", OK),
            ("https://a.test/a/a/a/b/a/a/a", OK),
            ("https://a.test/a////", OK), // three empty segments
            ("https://a.test/a/////", TRAP),
            ("https://a.test/?a/a/a/a/a", OK), // only the path counts
        ],
    );
    let strict = scope_with(
        ScopeOptions {
            max_repeated_segments: 1,
            ..ScopeOptions::default()
        },
        &["https://a.test/"],
    );
    assert_checks(
        &strict,
        &[
            ("https://a.test/a/b/a", OK),
            ("https://a.test/a/a", TRAP),
            ("https://a.test/a/b/a/b", TRAP),
        ],
    );
    let off = scope_with(
        ScopeOptions {
            max_repeated_segments: 0,
            ..ScopeOptions::default()
        },
        &["https://a.test/"],
    );
    assert_eq!(off.check(&url("https://a.test/a/a/a/a/a/a/a/a")), OK);
}

#[test]
fn scope_rules_are_checked_in_the_documented_order() {
    let options = ScopeOptions {
        deny: vec!["deny".into()],
        allow: vec!["allow".into()],
        max_url_length: 60,
        max_path_segments: 6,
        ..ScopeOptions::default()
    };
    let s = scope_with(options, &["https://a.test/"]);
    assert_checks(
        &s,
        &[
            (
                "http://10.0.0.1/deny/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a",
                Err(OutOfScope::TooLong),
            ),
            (
                "http://10.0.0.1/deny/a/a/a/a/a/a/a/a",
                Err(OutOfScope::PrivateAddress),
            ),
            ("https://b.test/deny/a/a/a/a/a/a/a/a", OFF),
            (
                "https://a.test/deny/allow/a/a/a/a/a/a",
                Err(OutOfScope::Denied),
            ),
            (
                "https://a.test/x/a/a/a/a/a/a/a",
                Err(OutOfScope::NotAllowed),
            ),
            (
                "https://a.test/allow/a/a/a/a/a/a",
                Err(OutOfScope::TooManySegments),
            ),
            (
                "https://a.test/allow/a/a/a/a",
                Err(OutOfScope::RepeatedSegments),
            ),
            ("https://a.test/allow/a/a/a", OK),
        ],
    );
}

#[test]
fn scope_reason_names_are_stable() {
    let names: Vec<&str> = OutOfScope::ALL.iter().map(OutOfScope::as_str).collect();
    assert_eq!(
        names,
        [
            "off_site",
            "denied",
            "not_allowed",
            "private_address",
            "too_long",
            "too_many_segments",
            "repeated_segments"
        ]
    );
    for reason in OutOfScope::ALL {
        assert!(!reason.to_string().is_empty());
    }
    assert_eq!(
        OutOfScope::OffSite.to_string(),
        "off the seeds' site (scope.mode)"
    );
}

#[test]
fn scope_url_without_host_is_off_site() {
    let s = scope_with(mode(ScopeMode::Any), &["https://a.test/"]);
    assert_eq!(s.check(&url("mailto:someone@a.test")), OFF);
    assert_eq!(s.check(&url("file:///etc/passwd")), OFF);
}

// ---- the synthetic web ----

/// Wiring the default scope into the crawl must not change what the end-to-end tests
/// expect: every URL a correct crawl of the synthetic web takes on (trap calendar,
/// redirects, off-host redirect, link variants included) is in scope, in both seed
/// modes.
#[test]
fn scope_defaults_admit_the_whole_synthetic_web() {
    use testweb::{CrawlRules, Web, WebSpec};
    let mut spec = WebSpec::small(42);
    spec.features.advanced_variants = true;
    let web = Web::new(spec);
    let seeds = web.seeds();
    let rules = CrawlRules {
        respect_robots: false,
        ..CrawlRules::default()
    };
    let urls = web.ground_truth(&seeds, &rules).urls();
    assert!(urls.len() > 300, "{}", urls.len());
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    for m in [ScopeMode::SeedDomains, ScopeMode::SeedHosts] {
        let s = scope_with(mode(m), &seeds);
        for u in &urls {
            assert_eq!(s.check(&url(u)), OK, "{u} under {m}");
        }
    }
    // And with only h0 as a seed, the other hosts are off-site.
    let s = scope_with(ScopeOptions::default(), &seeds[..1]);
    let on: Vec<&String> = urls.iter().filter(|u| s.check(&url(u)).is_ok()).collect();
    assert!(!on.is_empty());
    assert!(
        on.iter().all(|u| url(u).host_str() == Some("h0.test")),
        "{on:?}"
    );
}

// ---- never panics ----

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    static SCOPES: std::sync::LazyLock<Vec<Scope>> = std::sync::LazyLock::new(build_scopes);

    fn scopes() -> &'static [Scope] {
        &SCOPES
    }

    fn build_scopes() -> Vec<Scope> {
        let seeds = SEEDS;
        let tight = ScopeOptions {
            max_url_length: 40,
            max_path_segments: 3,
            max_repeated_segments: 1,
            allow: vec!["a".into()],
            deny: vec!["z$".into()],
            ..ScopeOptions::default()
        };
        let off = ScopeOptions {
            mode: ScopeMode::Any,
            max_url_length: 0,
            max_path_segments: 0,
            max_repeated_segments: 0,
            allow_private: true,
            ..ScopeOptions::default()
        };
        vec![
            scope_with(ScopeOptions::default(), seeds),
            scope_with(mode(ScopeMode::SeedHosts), seeds),
            scope_with(tight, seeds),
            scope_with(off, seeds),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn scope_check_never_panics_on_structured_urls(
            scheme in "(https?|ftp|mailto|file|data|ws)",
            host in "([a-z0-9-]{0,8}\\.){0,4}[a-z0-9-]{0,8}\\.?|[0-9]{1,3}(\\.[0-9]{1,3}){0,3}|\\[[0-9a-f:.]{2,40}\\]|0x[0-9a-f]{1,8}",
            port in proptest::option::of(0u16..),
            path in "(/[a-z%0-9.]{0,3}){0,80}",
            query in proptest::option::of("[ -~]{0,20}"),
        ) {
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            let query = query.map(|q| format!("?{q}")).unwrap_or_default();
            let text = format!("{scheme}://{host}{port}{path}{query}");
            if let Ok(u) = Url::parse(&text) {
                for s in scopes() {
                    let _ = s.check(&u);
                }
            }
        }

        #[test]
        fn scope_check_never_panics_on_arbitrary_text(text in "\\PC{0,120}") {
            for candidate in [text.clone(), format!("http://{text}"), format!("https://a.test/{text}")] {
                if let Ok(u) = Url::parse(&candidate) {
                    for s in scopes() {
                        let _ = s.check(&u);
                    }
                }
            }
        }
    }
}
