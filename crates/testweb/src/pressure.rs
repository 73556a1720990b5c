//! The pressure corner (feature `pressure`): two hosts that push back when crawled hard,
//! for adaptive politeness.
//!
//! - [`THROTTLE_HOST`]: answers `429 Too Many Requests` *without* `Retry-After` to every
//!   request that arrives when [`THROTTLE_RPS`] requests or more already arrived in the last
//!   second (a sliding window over every arrival, throttled ones included: what a rate limiter
//!   in front of a real site does). Below that rate it never throttles.
//! - [`SLUGGISH_HOST`]: answers each request after [`SLUGGISH_STEP`] × the requests that
//!   arrived in the last second (itself included): the harder it is crawled, the slower it
//!   answers, as a server whose queue grows.
//!
//! Each serves `/` linking [`PRESSURE_PAGES`] leaf pages `/q/{i}` (tiny HTML, no links). The
//! windows are server state: use one server per crawl.
//!
//! Why a window of arrivals and not a token bucket: a test reads the same window back from
//! the request log, so "the server saw more than R requests in a second" has one meaning.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::server::WebBody;

/// The host that throttles.
pub const THROTTLE_HOST: &str = "throttle.test";
/// The host that slows down with load.
pub const SLUGGISH_HOST: &str = "sluggish.test";
/// Requests per (sliding) second [`THROTTLE_HOST`] serves; above it, 429.
pub const THROTTLE_RPS: usize = 10;
/// [`SLUGGISH_HOST`]'s delay per request in the last second.
pub const SLUGGISH_STEP: Duration = Duration::from_millis(25);
/// Leaf pages each host links from `/`.
pub const PRESSURE_PAGES: usize = 40;

const WINDOW: Duration = Duration::from_secs(1);

/// Arrivals of the last second, per host.
#[derive(Default)]
pub(crate) struct PressureState {
    throttle: Mutex<VecDeque<Duration>>,
    sluggish: Mutex<VecDeque<Duration>>,
}

/// Records an arrival at `now` and returns how many arrived in the last second before it.
fn arrive(window: &Mutex<VecDeque<Duration>>, now: Duration) -> usize {
    let mut arrivals = window.lock().unwrap_or_else(|p| p.into_inner());
    while arrivals
        .front()
        .is_some_and(|&t| now.saturating_sub(t) >= WINDOW)
    {
        arrivals.pop_front();
    }
    let before = arrivals.len();
    arrivals.push_back(now);
    before
}

/// The answer for `host` and `path` if `host` is one of the corner's; `now` is the time since
/// the server started.
pub(crate) async fn answer(
    state: &PressureState,
    host: &str,
    path: &str,
    now: Duration,
) -> Option<Response<WebBody>> {
    match host {
        THROTTLE_HOST => {
            if arrive(&state.throttle, now) >= THROTTLE_RPS {
                let mut r = page("slow down\n".into(), "text/plain; charset=utf-8");
                *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                return Some(r);
            }
        }
        SLUGGISH_HOST => {
            let load = arrive(&state.sluggish, now) + 1;
            tokio::time::sleep(SLUGGISH_STEP * load as u32).await;
        }
        _ => return None,
    }
    Some(route(path))
}

fn route(path: &str) -> Response<WebBody> {
    if path == "/" {
        let links: String = (0..PRESSURE_PAGES)
            .map(|i| format!("<a href=\"/q/{i}\">{i}</a>\n"))
            .collect();
        return page(
            format!("<!doctype html><title>pressure</title>{links}"),
            "text/html; charset=utf-8",
        );
    }
    let leaf = path
        .strip_prefix("/q/")
        .and_then(|i| i.parse::<usize>().ok())
        .filter(|&i| i < PRESSURE_PAGES && path == format!("/q/{i}"));
    match leaf {
        Some(i) => page(
            format!("<!doctype html><title>leaf {i}</title><p>leaf {i}</p>"),
            "text/html; charset=utf-8",
        ),
        None => {
            let mut r = page("no such page\n".into(), "text/plain; charset=utf-8");
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    }
}

fn page(body: String, content_type: &'static str) -> Response<WebBody> {
    let mut r = Response::new(WebBody::Full(Some(Bytes::from(body))));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_counts_the_last_second_only() {
        let w = Mutex::new(VecDeque::new());
        let ms = Duration::from_millis;
        assert_eq!(arrive(&w, ms(0)), 0);
        assert_eq!(arrive(&w, ms(500)), 1);
        assert_eq!(arrive(&w, ms(999)), 2);
        // The arrival at 0 is a full second old.
        assert_eq!(arrive(&w, ms(1000)), 2);
        assert_eq!(arrive(&w, ms(2600)), 0);
    }

    #[test]
    fn only_the_leaves_and_home_are_pages() {
        assert_eq!(route("/").status(), StatusCode::OK);
        assert_eq!(route("/q/0").status(), StatusCode::OK);
        assert_eq!(route("/q/39").status(), StatusCode::OK);
        assert_eq!(route("/q/40").status(), StatusCode::NOT_FOUND);
        assert_eq!(route("/q/01").status(), StatusCode::NOT_FOUND);
    }
}
