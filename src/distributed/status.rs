//! `crawler status --redis URL --crawl-id ID`: the whole crawl's figures as Redis holds them
//! (counters summed over processes, queue and lease sizes, live processes), read in one
//! round trip without changing anything.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{array, int, prefix, text, DistributedError, Redis};

/// A process is shown as live when its last heartbeat is younger than this.
const LIVE_WITHIN_MS: i64 = 30_000;

/// The crawl's state, as a few lines of text.
pub async fn status(url: &str, crawl_id: &str) -> Result<String, DistributedError> {
    let redis = Redis::connect(url, Duration::from_secs(10)).await?;
    let p = prefix(crawl_id);
    let mut pipe = redis::pipe();
    pipe.cmd("HGETALL").arg(format!("{p}meta"));
    pipe.cmd("HGETALL").arg(format!("{p}counters"));
    pipe.cmd("ZCARD").arg(format!("{p}sched"));
    pipe.cmd("ZCARD").arg(format!("{p}leases"));
    pipe.cmd("HGETALL").arg(format!("{p}procs"));
    pipe.cmd("TIME");
    let replies = redis.run(&pipe).await?;
    let [meta, counters, sched, leases, procs, time] = replies.as_slice() else {
        return Err(DistributedError::Reply {
            what: "status",
            detail: format!("{} replies to 6 commands", replies.len()),
        });
    };
    let meta = pairs(meta)?;
    let counters = pairs(counters)?;
    if meta.is_empty() {
        return Ok(format!("crawl {crawl_id:?}: nothing in Redis at {url}\n"));
    }
    let time = array(time, "TIME")?;
    let now_ms = match time {
        [secs, micros] => int(secs, "TIME")? * 1000 + int(micros, "TIME")? / 1000,
        _ => 0,
    };
    let get = |m: &BTreeMap<String, String>, k: &str| m.get(k).cloned().unwrap_or("0".into());
    let mut out = format!("crawl {crawl_id:?} on {url}\n");
    out.push_str(&format!(
        "accepted {} of max_urls {}, queued {}, hosts scheduled {}, leases outstanding {}\n",
        get(&meta, "accepted"),
        get(&meta, "max_urls"),
        get(&meta, "queued"),
        int(sched, "ZCARD")?,
        int(leases, "ZCARD")?,
    ));
    out.push_str(&format!(
        "leases taken {}, expired and reclaimed {} ({} URLs)\n",
        get(&meta, "lease_seq"),
        get(&meta, "reclaimed_leases"),
        get(&meta, "reclaimed_urls"),
    ));
    out.push_str("counters (all processes):\n");
    for (name, value) in &counters {
        if value != "0" {
            out.push_str(&format!("  {name} {value}\n"));
        }
    }
    out.push_str("processes:\n");
    for (id, beat) in pairs(procs)? {
        let age = now_ms - beat.parse::<i64>().unwrap_or(0);
        let state = if age < LIVE_WITHIN_MS { "live" } else { "gone" };
        out.push_str(&format!(
            "  {id} {state} (last heartbeat {:.1} s ago)\n",
            age as f64 / 1000.0
        ));
    }
    Ok(out)
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
