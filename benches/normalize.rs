//! URL normalization's hot path: ns per `Normalizer::canonicalize` on typical links (no
//! query, a query, rewritten), minus the cost of cloning the parsed URL. Each figure is the
//! median of several rounds, so that one round disturbed by other work on a shared machine
//! does not decide it. Meaningful in an optimized build, which `cargo bench` makes; a debug
//! build's figure is marked as such.
//!
//! Run: `cargo bench --bench normalize`

use crawler::normalize::Normalizer;
use url::Url;

fn main() {
    let n = Normalizer::default();
    let groups: &[(&str, &[&str])] = &[
        (
            "no query",
            &[
                "https://www.example.com/articles/2024/05/a-long-article-title",
                "https://example.com/about/team/",
                "http://blog.example.org/post/12345",
                "https://docs.example.net/guide/install.html",
            ],
        ),
        (
            "query",
            &[
                "https://example.com/search?q=rust+crawler&page=2",
                "https://shop.example.com/item?id=123&color=red&size=m",
                "https://example.org/list?sort=date&order=desc",
                "https://news.example.com/read?article=987654",
            ],
        ),
        (
            "rewritten",
            &[
                "https://example.com/p/1?utm_source=x&utm_medium=y&id=3",
                "https://example.com/%7Euser/a%2fb#top",
                "https://example.com/index.jsp;jsessionid=AB12CD?x=1",
                "https://example.com/page?gclid=abc123",
            ],
        ),
        (
            "respelled",
            &[
                "https://example.com/search?q=a^b|c",
                "https://www.example.org./a/b",
                "https://example.com/a%zz/b",
                "https://example.com/%e2%82%ac/x",
            ],
        ),
    ];
    let iters = if cfg!(debug_assertions) {
        20_000
    } else {
        500_000
    };
    for (label, links) in groups {
        let urls: Vec<Url> = links.iter().map(|l| Url::parse(l).unwrap()).collect();
        let time = |canon: bool| {
            let start = std::time::Instant::now();
            for i in 0..iters {
                let mut u = urls[i % urls.len()].clone();
                if canon {
                    let _ = n.canonicalize(std::hint::black_box(&mut u));
                }
                std::hint::black_box(u);
            }
            start.elapsed().as_nanos() as f64 / iters as f64
        };
        // Median of the rounds, each measured as (clone only, clone + canonicalize).
        const ROUNDS: usize = 7;
        let mut rounds: Vec<(f64, f64)> = (0..ROUNDS).map(|_| (time(false), time(true))).collect();
        rounds.sort_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)));
        let (clone, both) = rounds[ROUNDS / 2];
        println!(
            "canonicalize, {label:>9}: {:7.1} ns/link ({:.1} with the clone; median of {ROUNDS}){}",
            both - clone,
            both,
            if cfg!(debug_assertions) {
                " [debug build]"
            } else {
                ""
            }
        );
    }
}
