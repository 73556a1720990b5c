//! One process's session in a shared crawl: every Redis call a crawling process makes, each
//! as one method that builds its scripts' arguments (laid out as `admit.lua`, `claim.lua`,
//! `release.lua` and `renew.lua` read them) and parses their replies into plain values.
//!
//! Guarantees: nothing outside this folder sees a `redis::` type or a script's argument
//! layout; a reply that does not have the shape its script gives is a
//! [`DistributedError::Reply`], never a panic. The crawl's side of a process
//! (`crate::crawl`'s lease source) decides when to call; this module only knows how.
//!
//! Why methods that take and return plain values: the lease bookkeeping
//! ([`super::leases`]) and the run loop can then be tested and read without Redis, and a
//! change of a script's arguments touches this file and its `.lua` file only.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::queue_item;
use super::seal::{seal_dead, SealScope};
use super::{
    array, bad, blob, bloom_bits, int, parse_claim, prefix, status, text, Claimed,
    DistributedError, Redis, Settings,
};
use crate::counters::CrawlCounters;
use crate::frontier::QueuedUrl;
use crate::seen::Plan;

/// URLs admitted by one `admit.lua` call at most.
const ADMIT_CHUNK: usize = 512;

/// What `admit.lua` answered for one URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// New: queued in its host's queue.
    Queued,
    /// Already in the shared seen-set.
    Seen,
    /// Refused: `max_urls` reached.
    OverMaxUrls,
    /// Refused: its host reached `scope.max_pages_per_host`.
    HostCap,
}

impl Admitted {
    fn from_code(code: i64) -> Admitted {
        match code {
            1 => Admitted::Queued,
            0 => Admitted::Seen,
            2 => Admitted::OverMaxUrls,
            _ => Admitted::HostCap,
        }
    }
}

/// One lease's part of a `release.lua` call: the URLs acknowledged (their items in the
/// lease), and whether the lease ends (its host offered again `wait` from now).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Release {
    pub(crate) token: String,
    pub(crate) wait: Duration,
    pub(crate) end: bool,
    pub(crate) acks: Vec<Vec<u8>>,
}

/// A claim: up to `want` new hosts, and top-ups of held leases (token, URLs wanted).
#[derive(Debug, Default)]
pub(crate) struct ClaimRequest {
    pub(crate) want: u64,
    pub(crate) topups: Vec<(String, u64)>,
}

/// One "sync" round trip: acknowledgements and finished leases, the counters' increments,
/// a heartbeat renewing `renew` (when `Some`), and a claim.
#[derive(Debug, Default)]
pub(crate) struct SyncRequest {
    pub(crate) releases: Vec<Release>,
    pub(crate) increments: Vec<(String, u64)>,
    pub(crate) renew: Option<Vec<String>>,
    pub(crate) claim: Option<ClaimRequest>,
    /// Payloads this process archived in full (field, entry: [`super::payloads`]), whose
    /// records are handed to the OS, in record order.
    pub(crate) publish: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A sync's answers.
#[derive(Debug, Default)]
pub(crate) struct SyncReply {
    /// Acknowledgements refused because their lease was no longer ours.
    pub(crate) stale: u64,
    /// Leases the heartbeat found taken over by another process.
    pub(crate) lost: Vec<String>,
    pub(crate) claimed: Option<Claimed>,
}

/// The process's handle on the shared crawl.
pub(crate) struct Session {
    redis: Redis,
    prefix: String,
    meta: String,
    process: String,
    plan: Plan,
    max_urls: u64,
    host_cap: u64,
    settings: Settings,
}

impl Session {
    /// Connects, then records the plan and `max_urls` on first use (refusing a process whose
    /// differ) and registers this process (a first heartbeat) before any file of it exists:
    /// see [`super::seal`].
    pub(crate) async fn join(
        settings: Settings,
        process: String,
        plan: Plan,
        max_urls: u64,
        host_cap: u64,
    ) -> Result<Arc<Session>, DistributedError> {
        let redis = Redis::connect(&settings.url, settings.timeout).await?;
        let p = prefix(&settings.crawl_id);
        let session = Session {
            redis,
            meta: format!("{p}meta"),
            prefix: p,
            process,
            plan,
            max_urls,
            host_cap,
            settings,
        };
        session.check_plan().await?;
        Ok(Arc::new(session))
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(crate) fn process(&self) -> &str {
        &self.process
    }

    pub(crate) fn round_trips(&self) -> u64 {
        self.redis.round_trips()
    }

    async fn check_plan(&self) -> Result<(), DistributedError> {
        let ours = format!(
            "max_urls {}, seen-set of {} bits, k {}, seed {}",
            self.max_urls, self.plan.m_bits, self.plan.k, self.plan.seed
        );
        let mut pipe = redis::pipe();
        pipe.cmd("HSETNX").arg(&self.meta).arg("plan").arg(&ours);
        pipe.cmd("HSETNX")
            .arg(&self.meta)
            .arg("max_urls")
            .arg(self.max_urls);
        pipe.cmd("HGET").arg(&self.meta).arg("plan");
        let replies = self.redis.run(&pipe).await?;
        let theirs = match replies.get(2) {
            Some(v) => text(v, "plan")?,
            None => return Err(bad("plan", &redis::Value::Nil)),
        };
        if theirs != ours {
            return Err(DistributedError::Mismatch {
                crawl_id: self.settings.crawl_id.clone(),
                theirs,
                ours,
            });
        }
        // The crawl's start is stamped by the first process.
        let mut pipe = redis::pipe();
        self.renew_call(&mut pipe, &[]);
        status::stamp(&mut pipe, &self.meta, "started_ms", true);
        self.redis.run(&pipe).await?;
        Ok(())
    }

    /// Adds a heartbeat renewing the leases of `tokens` to `pipe` (`renew.lua`).
    fn renew_call(&self, pipe: &mut redis::Pipeline, tokens: &[String]) {
        let mut args = vec![
            self.prefix.clone().into_bytes(),
            self.process.clone().into_bytes(),
            millis(self.settings.lease).into_bytes(),
        ];
        args.extend(tokens.iter().map(|t| t.as_bytes().to_vec()));
        self.redis.scripts.renew.call(pipe, &self.meta, &args);
    }

    /// Adds one `admit.lua` call for `items` (with their host keys) to `pipe`.
    fn admit_call(&self, pipe: &mut redis::Pipeline, items: &[&(String, QueuedUrl)]) {
        let mut args: Vec<Vec<u8>> = Vec::with_capacity(4 + items.len() * (3 + 16));
        args.push(self.prefix.clone().into_bytes());
        args.push(self.max_urls.to_string().into_bytes());
        args.push(self.host_cap.to_string().into_bytes());
        args.push(self.plan.k.to_string().into_bytes());
        let mut offsets = Vec::new();
        for (host, item) in items {
            let shard = bloom_bits(&self.plan, item.url.as_bytes(), &mut offsets);
            // k probes may land on the same bit; the script reads exactly k offsets.
            while offsets.len() < self.plan.k as usize {
                offsets.push(offsets.last().copied().unwrap_or(0));
            }
            args.push(host.clone().into_bytes());
            args.push(shard.to_string().into_bytes());
            args.push(queue_item::encode(host, item));
            for o in &offsets {
                args.push(o.to_string().into_bytes());
            }
        }
        self.redis.scripts.admit.call(pipe, &self.meta, &args);
    }

    /// Admits batches of URLs (each with its host key) in one round trip; answers batch by
    /// batch, URL by URL.
    pub(crate) async fn admit(
        &self,
        batches: &[Vec<(String, QueuedUrl)>],
    ) -> Result<Vec<Vec<Admitted>>, DistributedError> {
        let mut pipe = redis::pipe();
        // The pages' URLs go together, a script call per ADMIT_CHUNK of them rather than
        // one per page: a script call costs Redis a fixed few µs beyond its URLs, and the
        // chunk keeps any one call short for the other processes waiting on the node.
        let all: Vec<&(String, QueuedUrl)> = batches.iter().flatten().collect();
        for chunk in all.chunks(ADMIT_CHUNK) {
            self.admit_call(&mut pipe, chunk);
        }
        if all.is_empty() {
            return Ok(vec![Vec::new(); batches.len()]);
        }
        let replies = self.redis.run(&pipe).await?;
        let mut replies = replies.iter();
        let mut codes = Vec::with_capacity(all.len());
        for chunk in all.chunks(ADMIT_CHUNK) {
            let reply = replies
                .next()
                .ok_or_else(|| bad("admit", &redis::Value::Nil))?;
            let chunk_codes = array(reply, "admit")?;
            if chunk_codes.len() != chunk.len() {
                return Err(bad("admit", reply));
            }
            for code in chunk_codes {
                codes.push(Admitted::from_code(int(code, "admit")?));
            }
        }
        let mut codes = codes.into_iter();
        let answers = batches
            .iter()
            .map(|items| codes.by_ref().take(items.len()).collect())
            .collect();
        Ok(answers)
    }

    /// The originals other processes published of the payloads `fields` name (see
    /// [`super::payloads`]), and how many payloads are published: one round trip, which
    /// runs beside the admission of the same pages.
    pub(crate) async fn payload_originals(
        &self,
        fields: &[Vec<u8>],
    ) -> Result<(Vec<Option<Vec<u8>>>, u64), DistributedError> {
        if fields.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let payloads = format!("{}payloads", self.prefix);
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET").arg(&payloads).arg(fields);
        pipe.cmd("HLEN").arg(&payloads);
        let replies = self.redis.run(&pipe).await?;
        let [found, count] = replies.as_slice() else {
            return Err(bad("HMGET", &redis::Value::Array(replies)));
        };
        let found = array(found, "HMGET")?;
        if found.len() != fields.len() {
            return Err(bad("HMGET", &redis::Value::Array(found.to_vec())));
        }
        let mut originals = Vec::with_capacity(found.len());
        for entry in found {
            originals.push(match entry {
                redis::Value::Nil => None,
                entry => Some(blob(entry, "HMGET")?),
            });
        }
        Ok((originals, int(count, "HLEN")?.max(0) as u64))
    }

    /// Adds the `release.lua` call of `releases` (if any) to `pipe`.
    fn release_call(&self, pipe: &mut redis::Pipeline, releases: &[Release]) -> bool {
        if releases.is_empty() {
            return false;
        }
        let mut args = vec![
            self.prefix.clone().into_bytes(),
            self.process.clone().into_bytes(),
        ];
        for r in releases {
            args.push(r.token.as_bytes().to_vec());
            args.push((r.wait.as_millis() as u64 + 1).to_string().into_bytes());
            args.push(if r.end { b"1".to_vec() } else { b"0".to_vec() });
            args.push(r.acks.len().to_string().into_bytes());
            for item in &r.acks {
                args.push(item.clone());
            }
        }
        self.redis.scripts.release.call(pipe, &self.meta, &args);
        true
    }

    /// Adds the counters' increments to Redis's sums to `pipe` (no replies).
    fn increments_call(&self, pipe: &mut redis::Pipeline, increments: &[(String, u64)]) {
        let key = format!("{}counters", self.prefix);
        for (name, by) in increments {
            pipe.cmd("HINCRBY").arg(&key).arg(name).arg(*by).ignore();
        }
    }

    /// One sync round trip (see [`SyncRequest`]).
    pub(crate) async fn sync(&self, request: SyncRequest) -> Result<SyncReply, DistributedError> {
        let mut pipe = redis::pipe();
        // Published before the leases end: the next holder of a host then finds every
        // payload this process archived from it.
        let payloads = format!("{}payloads", self.prefix);
        for (field, entry) in &request.publish {
            pipe.cmd("HSETNX")
                .arg(&payloads)
                .arg(field)
                .arg(entry)
                .ignore();
        }
        let releasing = self.release_call(&mut pipe, &request.releases);
        self.increments_call(&mut pipe, &request.increments);
        if let Some(tokens) = &request.renew {
            self.renew_call(&mut pipe, tokens);
        }
        if let Some(claim) = &request.claim {
            let s = &self.settings;
            let mut args = vec![
                self.prefix.clone().into_bytes(),
                self.process.clone().into_bytes(),
                millis(s.lease).into_bytes(),
                claim.want.to_string().into_bytes(),
                s.lease_urls.to_string().into_bytes(),
                claim.topups.len().to_string().into_bytes(),
            ];
            for (token, n) in &claim.topups {
                args.push(token.clone().into_bytes());
                args.push(n.to_string().into_bytes());
            }
            self.redis.scripts.claim.call(&mut pipe, &self.meta, &args);
        }
        let replies = self.redis.run(&pipe).await?;
        let mut replies = replies.iter();
        let mut next = |what| replies.next().ok_or_else(|| bad(what, &redis::Value::Nil));
        let mut reply = SyncReply::default();
        if releasing {
            reply.stale = int(next("release")?, "release")?.max(0) as u64;
        }
        if request.renew.is_some() {
            for token in array(next("renew")?, "renew")? {
                reply.lost.push(text(token, "renew")?);
            }
        }
        if request.claim.is_some() {
            reply.claimed = Some(parse_claim(next("claim")?)?);
        }
        Ok(reply)
    }

    /// At a stop: `releases` (every lease ended) and the counters' increments.
    pub(crate) async fn give_back(
        &self,
        releases: &[Release],
        increments: &[(String, u64)],
    ) -> Result<(), DistributedError> {
        let mut pipe = redis::pipe();
        self.release_call(&mut pipe, releases);
        self.increments_call(&mut pipe, increments);
        self.redis.run(&pipe).await?;
        Ok(())
    }

    /// After the output is closed: the last increments, and this process marked ended,
    /// `finished` (the crawl is over: its end is stamped) or `stopped`, so that nobody takes
    /// it for dead and seals its files.
    async fn end(
        &self,
        increments: &[(String, u64)],
        stopped: bool,
    ) -> Result<(), DistributedError> {
        let mut pipe = redis::pipe();
        self.increments_call(&mut pipe, increments);
        pipe.cmd("HSET")
            .arg(format!("{}ended", self.prefix))
            .arg(&self.process)
            .arg(if stopped { "stopped" } else { "finished" })
            .ignore();
        if !stopped {
            status::stamp(&mut pipe, &self.meta, "finished_ms", false);
        }
        self.redis.run(&pipe).await?;
        Ok(())
    }

    /// Seals the output of the crawl's dead processes found in `out` (see [`super::seal`]).
    /// With `wait` (at the crawl's end), processes that died too recently to be taken for
    /// dead yet are waited for (at most `lease_secs`): a process that dies holding no lease
    /// does not hold the crawl up, so the crawl can end before it is silent for that long.
    pub(crate) async fn seal_dead(
        &self,
        out: &Path,
        warc_prefix: &str,
        wait: bool,
    ) -> Result<(), DistributedError> {
        let scope = SealScope {
            redis: &self.redis,
            prefix: &self.prefix,
            process: &self.process,
            out,
            warc_prefix,
            silence: self.settings.lease,
        };
        let mut sealing = seal_dead(&scope).await?;
        if let (true, Some(soon)) = (wait, sealing.silent_soon) {
            tracing::info!(
                "waiting {:.1} s to seal the output of a process that stopped its heartbeats",
                soon.as_secs_f64()
            );
            tokio::time::sleep(soon + Duration::from_millis(50)).await;
            sealing.sealed.extend(seal_dead(&scope).await?.sealed);
        }
        if !sealing.sealed.is_empty() {
            tracing::info!(
                "sealed the output of {} dead processes",
                sealing.sealed.len()
            );
        }
        Ok(())
    }

    /// After the output is closed: [`Session::end`], and at the crawl's end (not `stopped`)
    /// the dead processes' output sealed (their leases have all expired by now) and the
    /// crawl-wide summary read, for `summary.json`.
    pub(crate) async fn finish(
        &self,
        out: &Path,
        warc_prefix: &str,
        increments: &[(String, u64)],
        stopped: bool,
    ) -> Result<Option<Vec<u8>>, DistributedError> {
        self.end(increments, stopped).await?;
        if stopped {
            return Ok(None);
        }
        self.seal_dead(out, warc_prefix, true).await?;
        self.crawl_summary().await
    }

    /// What this process cost in Redis, for its own summary: `finished` pages, `stale`
    /// leases lost.
    pub(crate) fn process_figures(&self, finished: u64, stale: u64) -> serde_json::Value {
        let round_trips = self.round_trips();
        serde_json::json!({
            "process": self.process,
            "crawl_id": self.settings.crawl_id,
            "redis_round_trips": round_trips,
            "round_trips_per_page": round_trips as f64 / finished.max(1) as f64,
            "leases_lost": stale,
        })
    }

    /// The whole crawl's summary as Redis counts it (see [`super::status`]); `None` if the
    /// crawl is gone.
    async fn crawl_summary(&self) -> Result<Option<Vec<u8>>, DistributedError> {
        let Some(summary) = status::read(&self.redis, &self.settings.crawl_id).await? else {
            return Ok(None);
        };
        Ok(Some(
            serde_json::to_vec_pretty(&summary).unwrap_or_default(),
        ))
    }
}

/// What the counters gained since the last time they were added to Redis's sums.
#[derive(Debug, Default)]
pub(crate) struct CounterSums {
    sent: BTreeMap<String, u64>,
}

impl CounterSums {
    /// What `counters` (with what Redis cost: the round trips of `session`, counting the
    /// one these increments go in, and `stale` leases lost) gained since the last time.
    pub(crate) fn gained(
        &mut self,
        counters: &CrawlCounters,
        session: &Session,
        stale: u64,
    ) -> Vec<(String, u64)> {
        let mut map = counters.to_map();
        map.insert("redis_round_trips".into(), session.round_trips() + 1);
        map.insert("leases_lost".into(), stale);
        self.increments(map)
    }

    /// The increments that bring Redis's sums from what was sent to `now`.
    fn increments(&mut self, now: BTreeMap<String, u64>) -> Vec<(String, u64)> {
        let mut increments = Vec::new();
        for (name, value) in now {
            let before = self.sent.get(&name).copied().unwrap_or(0);
            if value > before {
                increments.push((name.clone(), value - before));
            }
            self.sent.insert(name, value);
        }
        increments
    }
}

/// A round trip running beside the run loop (a spawned task), with what it carries to read
/// its answer by: the loop never waits for Redis, and polls this in its `select!`.
pub(crate) struct Beside<T, C> {
    call: tokio::task::JoinHandle<Result<T, DistributedError>>,
    carried: C,
}

impl<T: Send + 'static, C> Beside<T, C> {
    /// Starts `call` on its own task.
    pub(crate) fn spawn(
        call: impl std::future::Future<Output = Result<T, DistributedError>> + Send + 'static,
        carried: C,
    ) -> Beside<T, C> {
        Beside {
            call: tokio::spawn(call),
            carried,
        }
    }

    /// Waits for the call in `slot`, if any (forever otherwise; cancel-safe), and empties
    /// the slot: its answer and what it carried.
    pub(crate) async fn join(
        slot: &mut Option<Beside<T, C>>,
    ) -> Option<(Result<T, DistributedError>, C)> {
        let result = match slot {
            Some(beside) => (&mut beside.call).await,
            None => std::future::pending().await,
        };
        let beside = slot.take()?;
        let answer = result.unwrap_or_else(|e| {
            Err(DistributedError::Reply {
                what: "a Redis call",
                detail: format!("its task ended: {e}"),
            })
        });
        Some((answer, beside.carried))
    }
}

fn millis(d: Duration) -> String {
    (d.as_millis() as u64).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_sums_send_only_what_grew() {
        let mut sums = CounterSums::default();
        let map = |pairs: &[(&str, u64)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            sums.increments(map(&[("a", 3), ("b", 0)])),
            vec![("a".to_string(), 3)]
        );
        assert_eq!(
            sums.increments(map(&[("a", 5), ("b", 1)])),
            vec![("a".to_string(), 2), ("b".to_string(), 1)]
        );
        assert!(sums.increments(map(&[("a", 5), ("b", 1)])).is_empty());
    }

    #[test]
    fn admission_codes_name_their_answer() {
        assert_eq!(Admitted::from_code(1), Admitted::Queued);
        assert_eq!(Admitted::from_code(0), Admitted::Seen);
        assert_eq!(Admitted::from_code(2), Admitted::OverMaxUrls);
        assert_eq!(Admitted::from_code(3), Admitted::HostCap);
    }
}
