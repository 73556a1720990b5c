//! `crawler status --redis URL --crawl-id ID`: the whole crawl's figures as Redis holds them
//! (counters summed over processes, queue and lease sizes, processes), read in one round
//! trip without changing anything; and the crawl-wide summary built from them.
//!
//! The crawl's state is `finished` (nothing queued, no lease outstanding), `running` (a
//! process is live: it has not ended and its last heartbeat is recent) or `stopped` (work
//! is left but no process is live: all stopped, or died). Telling the last two apart takes
//! the processes' records, not the queues: a crawl whose processes were all stopped still
//! has URLs queued. A crawl id Redis does not hold is an error (exit 2), since it is most
//! often a typo, or a Redis other than the crawl's. The URL is shown redacted
//! ([`super::redacted_url`]).
//!
//! The crawl-wide summary ([`CrawlWideSummary`]) is what an operator of a single-process
//! crawl finds in `OUT/summary.json`, for the crawl as a whole: each process that sees the
//! crawl finished writes it to its `OUT/summary.json` once its own last figures are in Redis
//! (so the last process to end writes the complete one), and `crawler status --json` prints
//! it at any time, finished or not. Each process's own figures stay in its
//! `summary-<id>.json`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::{array, int, prefix, text, DistributedError, Redis, RedisUrl};
use crate::counters::{CounterValues, CrawlCounters};

/// A process that has not ended is live while its last heartbeat is younger than this: the
/// default `lease_secs`, after which its leases expire and are taken over (it beats every
/// `lease_secs / 3`).
const LIVE_WITHIN_MS: i64 = 30_000;

/// The whole crawl's summary: `OUT/summary.json` in distributed mode, `crawler status --json`.
#[derive(Debug, Clone, Serialize)]
pub struct CrawlWideSummary {
    pub crawl_id: String,
    /// `finished`, `running` (some process is live) or `stopped` (work left, no process
    /// live): see the module doc.
    pub state: String,
    /// Processes that have not ended and beat recently.
    pub live_processes: u64,
    /// Nothing queued and no lease outstanding: the crawl is over. (`finished` is the
    /// counter of pages done, as in a single process's `summary.json`.)
    pub crawl_finished: bool,
    /// From the first process's start to the last one's end (or to now, while it runs),
    /// by Redis's clock: the whole crawl's span, time when no process ran included (each
    /// process's own run is in its `summary-<id>.json`, `run_elapsed_secs`).
    pub elapsed_secs: f64,
    pub max_urls: u64,
    /// Every counter summed over the processes, under the names of a single process's
    /// `summary.json`; `accepted` is Redis's own (exact) count.
    #[serde(flatten)]
    pub counts: CounterValues,
    pub failures: u64,
    pub pages_per_sec: f64,
    pub queued_left: u64,
    pub hosts_scheduled: u64,
    pub leases_outstanding: u64,
    pub leases_taken: u64,
    /// Leases that expired (their holder died or stalled) and were taken over.
    pub reclaimed_leases: u64,
    pub reclaimed_urls: u64,
    pub redis_round_trips: u64,
    pub round_trips_per_page: f64,
    pub processes: Vec<ProcessState>,
}

/// One process of the crawl as Redis knows it.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessState {
    pub id: String,
    /// `live`, `silent` (not ended, no heartbeat for 30 s: it died or lost Redis),
    /// `finished`, `stopped`, or `sealed by <id>` (died; its output sealed by that process).
    pub state: String,
    pub last_heartbeat_secs_ago: f64,
}

/// The crawl's state, as a few lines of text.
pub async fn status(url: &RedisUrl, crawl_id: &str) -> Result<String, DistributedError> {
    let s = read_known(url, crawl_id).await?;
    let mut out = match s.state.as_str() {
        "running" => format!(
            "crawl {crawl_id:?} on {url}: running, {} live process{}\n",
            s.live_processes,
            if s.live_processes == 1 { "" } else { "es" }
        ),
        "stopped" => format!(
            "crawl {crawl_id:?} on {url}: stopped, no live process, {} URLs queued; start processes with the same --crawl-id to go on\n",
            s.queued_left
        ),
        state => format!("crawl {crawl_id:?} on {url}: {state}\n"),
    };
    out.push_str(&format!(
        "accepted {} of max_urls {}, queued {}, hosts scheduled {}, leases outstanding {}\n",
        s.counts.accepted, s.max_urls, s.queued_left, s.hosts_scheduled, s.leases_outstanding,
    ));
    out.push_str(&format!(
        "leases taken {}, expired and reclaimed {} ({} URLs)\n",
        s.leases_taken, s.reclaimed_leases, s.reclaimed_urls,
    ));
    out.push_str(&format!(
        "{} pages in {:.1} s since the first process started ({:.0} pages/s), {} failures, {:.3} Redis round trips per page\n",
        s.counts.finished, s.elapsed_secs, s.pages_per_sec, s.failures, s.round_trips_per_page
    ));
    out.push_str("counters (all processes):\n");
    let counters = serde_json::to_value(&s.counts).unwrap_or_default();
    if let Some(counters) = counters.as_object() {
        for (name, value) in counters {
            if value.as_u64().is_some_and(|v| v > 0) {
                out.push_str(&format!("  {name} {value}\n"));
            }
        }
    }
    out.push_str("processes:\n");
    for p in &s.processes {
        out.push_str(&format!(
            "  {} {} (last heartbeat {:.1} s ago)\n",
            p.id, p.state, p.last_heartbeat_secs_ago
        ));
    }
    Ok(out)
}

/// The crawl-wide summary as JSON (`crawler status --json`).
pub async fn summary_json(url: &RedisUrl, crawl_id: &str) -> Result<String, DistributedError> {
    let summary = read_known(url, crawl_id).await?;
    let mut json = serde_json::to_string_pretty(&summary).unwrap_or_default();
    json.push('\n');
    Ok(json)
}

/// Connects and reads the crawl-wide summary; a crawl Redis does not hold is an error.
async fn read_known(url: &RedisUrl, crawl_id: &str) -> Result<CrawlWideSummary, DistributedError> {
    let redis = Redis::connect(url, Duration::from_secs(10)).await?;
    read(&redis, crawl_id)
        .await?
        .ok_or_else(|| DistributedError::UnknownCrawl {
            url: url.to_string(),
            crawl_id: crawl_id.to_string(),
        })
}

/// Reads the crawl-wide summary in one round trip; `None` if Redis holds no such crawl.
pub(crate) async fn read(
    redis: &Redis,
    crawl_id: &str,
) -> Result<Option<CrawlWideSummary>, DistributedError> {
    let p = prefix(crawl_id);
    let mut pipe = super::client::Group::default();
    pipe.cmd("HGETALL").arg(format!("{p}meta"));
    pipe.cmd("HGETALL").arg(format!("{p}counters"));
    pipe.cmd("HGETALL").arg(format!("{p}procs"));
    pipe.cmd("HGETALL").arg(format!("{p}ended"));
    pipe.cmd("TIME");
    let replies = redis.run(&pipe).await?;
    let [meta, counters, procs, ended, time] = replies.as_slice() else {
        return Err(DistributedError::Reply {
            what: "status",
            detail: format!("{} replies to 5 commands", replies.len()),
        });
    };
    let meta = pairs(meta)?;
    if meta.is_empty() {
        return Ok(None);
    }
    let number = |m: &BTreeMap<String, String>, k: &str| -> u64 {
        m.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    let counters: BTreeMap<String, u64> = pairs(counters)?
        .into_iter()
        .map(|(k, v)| (k, v.parse().unwrap_or(0)))
        .collect();
    let shards = read_shards(redis, crawl_id, number(&meta, "shards").max(1) as u32).await?;
    let mut counts = CrawlCounters::from_map(&counters).values();
    counts.accepted = shards.get("accepted");
    let now_ms = time_ms(time)?;
    let hosts_scheduled = shards.get("scheduled");
    let leases_outstanding = shards.get("leases");
    let crawl_finished = hosts_scheduled == 0 && leases_outstanding == 0;
    let started = meta.get("started_ms").and_then(|v| v.parse::<i64>().ok());
    let ended_at = match meta.get("finished_ms").and_then(|v| v.parse::<i64>().ok()) {
        Some(at) if crawl_finished => at,
        _ => now_ms,
    };
    let elapsed_secs = started.map_or(0.0, |s| (ended_at - s).max(0) as f64 / 1000.0);
    let ended = pairs(ended)?;
    let mut processes = Vec::new();
    for (id, beat) in pairs(procs)? {
        let age = now_ms - beat.parse::<i64>().unwrap_or(0);
        let state = match ended.get(&id) {
            Some(how) => how.clone(),
            None if age < LIVE_WITHIN_MS => "live".into(),
            None => "silent".into(),
        };
        processes.push(ProcessState {
            id,
            state,
            last_heartbeat_secs_ago: age as f64 / 1000.0,
        });
    }
    let live_processes = processes.iter().filter(|p| p.state == "live").count() as u64;
    let state = crawl_state(crawl_finished, live_processes);
    let round_trips = counters.get("redis_round_trips").copied().unwrap_or(0);
    Ok(Some(CrawlWideSummary {
        crawl_id: crawl_id.to_string(),
        state: state.to_string(),
        live_processes,
        crawl_finished,
        elapsed_secs,
        max_urls: number(&meta, "max_urls"),
        failures: counts.failures(),
        pages_per_sec: counts.finished as f64 / elapsed_secs.max(1e-9),
        queued_left: shards.get("queued"),
        hosts_scheduled,
        leases_outstanding,
        leases_taken: shards.get("lease_seq"),
        reclaimed_leases: shards.get("reclaimed_leases"),
        reclaimed_urls: shards.get("reclaimed_urls"),
        redis_round_trips: round_trips,
        round_trips_per_page: round_trips as f64 / counts.finished.max(1) as f64,
        processes,
        counts,
    }))
}

/// The shards' figures summed: their meta fields, `scheduled` (hosts) and `leases`.
#[derive(Debug, Default)]
struct ShardSums(BTreeMap<&'static str, u64>);

impl ShardSums {
    fn get(&self, field: &str) -> u64 {
        self.0.get(field).copied().unwrap_or(0)
    }
}

/// The meta fields summed over the shards.
const SHARD_FIELDS: [&str; 5] = [
    "accepted",
    "queued",
    "lease_seq",
    "reclaimed_leases",
    "reclaimed_urls",
];

/// Reads and sums every shard's figures, all shards in one round.
async fn read_shards(
    redis: &Redis,
    crawl_id: &str,
    shards: u32,
) -> Result<ShardSums, DistributedError> {
    let groups: Vec<super::client::Group> = (0..shards)
        .map(|s| {
            let keys = super::ShardKeys::new(crawl_id, s);
            let mut group = super::client::Group::default();
            let cmd = group.cmd("HMGET").arg(&keys.meta);
            for field in SHARD_FIELDS {
                cmd.arg(field);
            }
            group.cmd("ZCARD").arg(&keys.sched);
            group.cmd("ZCARD").arg(&keys.leases);
            group
        })
        .collect();
    let mut sums = ShardSums::default();
    for replies in redis.run_groups(&groups).await? {
        let [fields, scheduled, leases] = replies.as_slice() else {
            return Err(DistributedError::Reply {
                what: "status",
                detail: format!("{} replies to a shard's 3 commands", replies.len()),
            });
        };
        for (field, value) in SHARD_FIELDS.iter().zip(array(fields, "HMGET")?) {
            *sums.0.entry(field).or_insert(0) += int(value, "HMGET")?.max(0) as u64;
        }
        *sums.0.entry("scheduled").or_insert(0) += int(scheduled, "ZCARD")?.max(0) as u64;
        *sums.0.entry("leases").or_insert(0) += int(leases, "ZCARD")?.max(0) as u64;
    }
    Ok(sums)
}

/// The crawl's state from whether work is left and how many processes are live.
fn crawl_state(crawl_finished: bool, live_processes: u64) -> &'static str {
    if crawl_finished {
        "finished"
    } else if live_processes > 0 {
        "running"
    } else {
        "stopped"
    }
}

/// Redis's `TIME` in milliseconds.
pub(crate) fn time_ms(time: &redis::Value) -> Result<i64, DistributedError> {
    match array(time, "TIME")? {
        [secs, micros] => Ok(int(secs, "TIME")? * 1000 + int(micros, "TIME")? / 1000),
        _ => Err(super::bad("TIME", time)),
    }
}

/// Adds to `pipe` a script that stamps `field` of the meta hash `meta` with Redis's clock
/// (ms): only if unset when `first`, otherwise always.
pub(crate) fn stamp(pipe: &mut super::client::Group, meta: &str, field: &str, first: bool) {
    pipe.cmd("EVAL")
        .arg(
            "local t = redis.call('TIME') \
             local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
             if ARGV[2] == '1' then return redis.call('HSETNX', KEYS[1], ARGV[1], ms) end \
             return redis.call('HSET', KEYS[1], ARGV[1], ms)",
        )
        .arg(1)
        .arg(meta)
        .arg(field)
        .arg(if first { "1" } else { "0" });
}

/// A hash's fields and values (a flat array in RESP2, a map in RESP3).
pub(crate) fn pairs(v: &redis::Value) -> Result<BTreeMap<String, String>, DistributedError> {
    let mut map = BTreeMap::new();
    match v {
        redis::Value::Map(items) => {
            for (k, v) in items {
                map.insert(text(k, "hash")?, text(v, "hash")?);
            }
        }
        _ => {
            for pair in array(v, "hash")?.chunks(2) {
                if let [k, v] = pair {
                    map.insert(text(k, "hash")?, text(v, "hash")?);
                }
            }
        }
    }
    Ok(map)
}
