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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::client::Group;
use super::queue_item;
use super::seal::{seal_dead, SealScope};
use super::shard_views::{ClaimNeeds, ShardViews};
use super::{
    array, bad, blob, bloom_probe, int, parse_claim, prefix, shard_of, status, text, token_parts,
    Claimed, DistributedError, Redis, Settings, ShardKeys,
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

/// `admit.lua`'s code for a new URL its shard has no budget for (a cluster's: ask
/// `grant.lua`, then admit again); never an answer of [`Session::admit`].
const NEEDS_BUDGET: i64 = 4;
/// `admit.lua`'s code for a URL queued whose host it put on the schedule: a hint for the
/// next claims ([`ShardViews::scheduled`]), then an answer of [`Admitted::Queued`].
const QUEUED_AND_SCHEDULED: i64 = 5;

impl Admitted {
    fn from_code(code: i64) -> Admitted {
        match code {
            1 | QUEUED_AND_SCHEDULED => Admitted::Queued,
            0 => Admitted::Seen,
            2 | NEEDS_BUDGET => Admitted::OverMaxUrls,
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

/// A claim: up to `want` new hosts, and top-ups of held leases; `idle` when the process
/// holds no lease (it then looks at every shard for work).
#[derive(Debug, Default)]
pub(crate) struct ClaimRequest {
    pub(crate) want: u64,
    pub(crate) topups: Vec<TopUp>,
    pub(crate) idle: bool,
}

/// A top-up of a held lease: up to `urls` more of its host's queue.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TopUp {
    pub(crate) token: String,
    pub(crate) urls: u64,
    /// For a drained lease (every URL recorded and acknowledged): end it when its host's
    /// queue is empty, the host offered again this long after (`claim.lua`).
    pub(crate) end_if_dry: Option<Duration>,
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

/// Hosts named per shard per claim as candidates (the script leases the due ones).
const HINTS: u64 = 64;
/// Hosts due within this many ms are named as candidates.
const HINT_HORIZON_MS: u64 = 100;

/// Releases per shard, each with its lease's host.
type ByShard<'r> = BTreeMap<u32, Vec<(&'r Release, &'r str)>>;

/// The process's handle on the shared crawl.
pub(crate) struct Session {
    redis: Redis,
    prefix: String,
    meta: String,
    shards: Vec<ShardKeys>,
    process: String,
    plan: Plan,
    max_urls: u64,
    host_cap: u64,
    settings: Settings,
    /// What this process knows of each shard's schedule: which shards a claim asks.
    views: Mutex<ShardViews>,
    /// Each shard's running total of budget granted, as last heard (cluster only).
    granted: Mutex<BTreeMap<u32, i64>>,
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
        let redis = Redis::connect_with(&settings.url, settings.timeout, settings.replicas).await?;
        let p = prefix(&settings.crawl_id);
        let shards = (0..settings.shards)
            .map(|s| ShardKeys::new(&settings.crawl_id, s))
            .collect();
        let session = Session {
            redis,
            meta: format!("{p}meta"),
            prefix: p,
            shards,
            process,
            plan,
            max_urls,
            host_cap,
            views: Mutex::new(ShardViews::new(settings.shards)),
            granted: Mutex::new(BTreeMap::new()),
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
            "max_urls {}, seen-set of {} bits, k {}, seed {}, {} shards",
            self.max_urls,
            self.plan.m_bits,
            self.plan.k,
            self.plan.seed,
            self.shards.len()
        );
        let mut group = Group::default();
        group.cmd("HSETNX").arg(&self.meta).arg("plan").arg(&ours);
        group
            .cmd("HSETNX")
            .arg(&self.meta)
            .arg("max_urls")
            .arg(self.max_urls);
        group
            .cmd("HSETNX")
            .arg(&self.meta)
            .arg("shards")
            .arg(self.shards.len());
        group.cmd("HGET").arg(&self.meta).arg("plan");
        let replies = self.redis.run(&group).await?;
        let theirs = match replies.get(3) {
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
        // Every shard carries the plan too: its scripts refuse to run without it (a node
        // that lost its data), as the crawl's own do.
        let groups: Vec<Group> = self
            .shards
            .iter()
            .map(|keys| {
                let mut group = Group::default();
                group.cmd("HSETNX").arg(&keys.meta).arg("plan").arg(&ours);
                group
            })
            .collect();
        self.redis.run_groups(&groups).await?;
        // The crawl's start is stamped by the first process.
        let mut group = Group::default();
        self.beat_call(&mut group);
        status::stamp(&mut group, &self.meta, "started_ms", true);
        self.redis.run(&group).await?;
        Ok(())
    }

    /// Adds a heartbeat to `group` (`beat.lua`, the crawl's keys).
    fn beat_call(&self, group: &mut Group) {
        let keys = [self.meta.clone(), format!("{}procs", self.prefix)];
        let args = [self.process.clone().into_bytes()];
        self.redis.scripts.beat.call(group, &keys, &args);
    }

    /// Adds a renewal of the leases of `tokens`, all of `shard`, to `group` (`renew.lua`).
    fn renew_call(&self, group: &mut Group, shard: &ShardKeys, tokens: &[&String]) {
        let keys = [
            shard.meta.clone(),
            shard.leases.clone(),
            shard.lease.clone(),
        ];
        let mut args = vec![
            self.process.clone().into_bytes(),
            millis(self.settings.lease).into_bytes(),
        ];
        args.extend(tokens.iter().map(|t| t.as_bytes().to_vec()));
        self.redis.scripts.renew.call(group, &keys, &args);
    }

    /// The shard of a host key.
    fn shard_of(&self, host: &str) -> u32 {
        shard_of(host, self.shards.len() as u32)
    }

    /// Adds one `admit.lua` call for `items` (with their host keys, sorted by host), all of
    /// `shard`, to `group`; `granted` is the shard's running total of budget (a cluster's).
    fn admit_call(
        &self,
        group: &mut Group,
        shard: u32,
        items: &[&(String, QueuedUrl)],
        granted: i64,
    ) {
        let inline = !self.redis.is_cluster();
        let call = AdmitCall {
            plan: &self.plan,
            shards: self.shards.len() as u32,
            keys: &self.shards[shard as usize],
            crawl_meta: inline.then_some(self.meta.as_str()),
            max_urls: self.max_urls,
            host_cap: self.host_cap,
            granted,
        };
        call.add(group, &self.redis.scripts.admit, items);
    }

    /// One round of admissions: per shard, the items at `at` (batch, index) of `batches`;
    /// the codes written into `answers`.
    /// A shard's URLs go in one script call per ADMIT_CHUNK of them: a script call costs
    /// Redis a fixed few µs beyond its URLs, and the chunk keeps any one call short for the
    /// other processes waiting on the node. `extra` (the crawl's own keys) goes in the same
    /// round; its replies are returned.
    async fn admit_round(
        &self,
        batches: &[Vec<(String, QueuedUrl)>],
        by_shard: &BTreeMap<u32, Vec<(usize, usize)>>,
        answers: &mut [Vec<i64>],
        extra: Option<Group>,
    ) -> Result<Vec<redis::Value>, DistributedError> {
        let granted = self.granted.lock().map(|g| g.clone()).unwrap_or_default();
        let mut groups = Vec::with_capacity(by_shard.len() + 1);
        for (&shard, at) in by_shard {
            let items: Vec<&(String, QueuedUrl)> =
                at.iter().map(|&(b, i)| &batches[b][i]).collect();
            let mut group = Group::default();
            let total = granted.get(&shard).copied().unwrap_or(0);
            for chunk in items.chunks(ADMIT_CHUNK) {
                self.admit_call(&mut group, shard, chunk, total);
            }
            groups.push(group);
        }
        let has_extra = extra.is_some();
        groups.extend(extra);
        let mut replies = self.redis.run_groups(&groups).await?;
        let extra_replies = if has_extra {
            replies.pop().unwrap_or_default()
        } else {
            Vec::new()
        };
        for (replies, at) in replies.iter().zip(by_shard.values()) {
            let mut codes = Vec::with_capacity(at.len());
            for reply in replies {
                codes.extend(array(reply, "admit")?.iter().map(|c| int(c, "admit")));
            }
            if codes.len() != at.len() {
                return Err(bad("admit", &redis::Value::Array(replies.clone())));
            }
            for (code, &(b, i)) in codes.into_iter().zip(at) {
                let mut code = code?;
                if code == QUEUED_AND_SCHEDULED {
                    let (host, _) = &batches[b][i];
                    if let Ok(mut views) = self.views.lock() {
                        views.scheduled(self.shard_of(host), host, Instant::now());
                    }
                    code = 1;
                }
                answers[b][i] = code;
            }
        }
        Ok(extra_replies)
    }

    /// Asks `grant.lua` for `need` more URLs of budget per shard; records each shard's
    /// running total granted.
    async fn grant(&self, need: &BTreeMap<u32, u64>) -> Result<(), DistributedError> {
        let mut args = vec![self.max_urls.to_string().into_bytes()];
        for (shard, n) in need {
            args.push(shard.to_string().into_bytes());
            args.push(n.to_string().into_bytes());
        }
        let mut group = Group::default();
        self.redis
            .scripts
            .grant
            .call(&mut group, std::slice::from_ref(&self.meta), &args);
        let replies = self.redis.run(&group).await?;
        let reply = replies
            .first()
            .ok_or_else(|| bad("grant", &redis::Value::Nil))?;
        let totals = array(reply, "grant")?;
        if totals.len() != need.len() {
            return Err(bad("grant", reply));
        }
        let mut granted = self.granted.lock().map_err(|_| DistributedError::Reply {
            what: "grant",
            detail: "a poisoned lock".into(),
        })?;
        for (shard, total) in need.keys().zip(totals) {
            let total = int(total, "grant")?;
            let known = granted.entry(*shard).or_insert(0);
            *known = (*known).max(total);
        }
        Ok(())
    }

    /// Admits batches of URLs (each with its host key): per shard `admit.lua` calls, all
    /// shards in one round; on a cluster, the URLs a shard had no budget for are granted
    /// some (`grant.lua`, the crawl's own keys) and sent again. Answers batch by
    /// batch, URL by URL.
    pub(crate) async fn admit(
        &self,
        batches: &[Vec<(String, QueuedUrl)>],
    ) -> Result<Vec<Vec<Admitted>>, DistributedError> {
        let mut answers: Vec<Vec<i64>> = batches.iter().map(|items| vec![0; items.len()]).collect();
        let mut by_shard: BTreeMap<u32, Vec<(usize, usize)>> = BTreeMap::new();
        for (b, items) in batches.iter().enumerate() {
            for (i, (host, _)) in items.iter().enumerate() {
                by_shard
                    .entry(self.shard_of(host))
                    .or_default()
                    .push((b, i));
            }
        }
        if by_shard.is_empty() {
            return Ok(vec![Vec::new(); batches.len()]);
        }
        // A call takes its URLs host by host (see `AdmitCall`); stable, so a host's URLs
        // keep their order.
        for at in by_shard.values_mut() {
            at.sort_by(|&(b1, i1), &(b2, i2)| batches[b1][i1].0.cmp(&batches[b2][i2].0));
        }
        self.admit_round(batches, &by_shard, &mut answers, None)
            .await?;
        let mut again: BTreeMap<u32, Vec<(usize, usize)>> = BTreeMap::new();
        for (&shard, at) in &by_shard {
            for &(b, i) in at {
                if answers[b][i] == NEEDS_BUDGET {
                    again.entry(shard).or_default().push((b, i));
                }
            }
        }
        if !again.is_empty() {
            let need = again
                .iter()
                .map(|(&shard, at)| (shard, at.len() as u64))
                .collect();
            self.grant(&need).await?;
            self.admit_round(batches, &again, &mut answers, None)
                .await?;
        }
        // Still without budget after a grant: max_urls is spent.
        Ok(answers
            .iter()
            .map(|codes| codes.iter().map(|&c| Admitted::from_code(c)).collect())
            .collect())
    }

    /// The originals other processes published of the payloads `fields` name (see
    /// [`super::payloads`]), and how many payloads are published: one round trip (the
    /// crawl's own keys), which runs beside the admission of the same pages.
    pub(crate) async fn payload_originals(
        &self,
        fields: &[Vec<u8>],
    ) -> Result<(Vec<Option<Vec<u8>>>, u64), DistributedError> {
        if fields.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let payloads = format!("{}payloads", self.prefix);
        let mut group = Group::default();
        group.cmd("HMGET").arg(&payloads).arg(fields);
        group.cmd("HLEN").arg(&payloads);
        let replies = self.redis.run(&group).await?;
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

    /// Adds one `release.lua` call of `sections` (each shard's releases) to `group`.
    fn release_call(&self, group: &mut Group, sections: &[(u32, &[(&Release, &str)])]) {
        let mut keys = Vec::new();
        let mut args = vec![self.process.clone().into_bytes()];
        for &(shard, releases) in sections {
            let shard = &self.shards[shard as usize];
            keys.extend(shard.lease_keys());
            args.push(releases.len().to_string().into_bytes());
            for (r, host) in releases {
                keys.push(shard.queue(host));
                keys.push(shard.leased_items(host));
                args.push(r.token.as_bytes().to_vec());
                args.push(host.as_bytes().to_vec());
                args.push((r.wait.as_millis() as u64 + 1).to_string().into_bytes());
                args.push(if r.end { b"1".to_vec() } else { b"0".to_vec() });
                args.push(r.acks.len().to_string().into_bytes());
                for item in &r.acks {
                    args.push(item.clone());
                }
            }
        }
        self.redis.scripts.release.call(group, &keys, &args);
    }

    /// Adds the `release.lua` calls of `releases`: on a single server one call for every
    /// shard, into `single` (a script call costs Redis a fixed few µs beyond its work, and
    /// a sync's acknowledgements touch many shards); on a cluster one call per shard, into
    /// the shard's group of `shards` (a call's keys must share a slot). Returns, per shard,
    /// whether its group got a call.
    fn release_calls(
        &self,
        shards: &mut [Group],
        single: &mut Group,
        releases: &ByShard<'_>,
    ) -> Vec<bool> {
        let mut called = vec![false; shards.len()];
        if releases.is_empty() {
            return called;
        }
        if self.redis.is_cluster() {
            for (&shard, rs) in releases {
                self.release_call(&mut shards[shard as usize], &[(shard, rs)]);
                called[shard as usize] = true;
            }
        } else {
            let sections: Vec<(u32, &[(&Release, &str)])> = releases
                .iter()
                .map(|(&shard, rs)| (shard, rs.as_slice()))
                .collect();
            self.release_call(single, &sections);
        }
        called
    }

    /// Adds the `claim.lua` call of `shard` to `group`: `want` new hosts among the ones
    /// `views` knows to be due, the `topups` (token, host, URLs wanted) and the expired
    /// leases the last answer named.
    fn claim_call(
        &self,
        group: &mut Group,
        shard: u32,
        want: u64,
        topups: &[(&TopUp, &str)],
        views: &ShardViews,
    ) {
        let keys_of = &self.shards[shard as usize];
        let s = &self.settings;
        let mut keys = keys_of.lease_keys().to_vec();
        let expired: Vec<(&String, &str)> = views
            .expired(shard)
            .iter()
            .filter_map(|t| token_parts(t).map(|(_, host)| (t, host)))
            .collect();
        let candidates: Vec<&str> = if want > 0 {
            views.candidates(shard).take(HINTS as usize).collect()
        } else {
            Vec::new()
        };
        let mut args = vec![
            shard.to_string().into_bytes(),
            self.process.clone().into_bytes(),
            millis(s.lease).into_bytes(),
            want.to_string().into_bytes(),
            s.lease_urls.to_string().into_bytes(),
            HINTS.to_string().into_bytes(),
            HINT_HORIZON_MS.to_string().into_bytes(),
            expired.len().to_string().into_bytes(),
            topups.len().to_string().into_bytes(),
            candidates.len().to_string().into_bytes(),
        ];
        for (token, host) in &expired {
            keys.push(keys_of.queue(host));
            keys.push(keys_of.leased_items(host));
            args.push(token.as_bytes().to_vec());
            args.push(host.as_bytes().to_vec());
        }
        for (topup, host) in topups {
            keys.push(keys_of.queue(host));
            keys.push(keys_of.leased_items(host));
            args.push(topup.token.as_bytes().to_vec());
            args.push(host.as_bytes().to_vec());
            args.push(topup.urls.to_string().into_bytes());
            // As a release's wait: 1 ms more, so that a wait of 0 still reads as one.
            let end = topup
                .end_if_dry
                .map_or(-1, |wait| wait.as_millis() as i64 + 1);
            args.push(end.to_string().into_bytes());
        }
        for host in candidates {
            keys.push(keys_of.queue(host));
            keys.push(keys_of.leased_items(host));
            args.push(host.as_bytes().to_vec());
        }
        self.redis.scripts.claim.call(group, &keys, &args);
    }

    /// Adds the counters' increments to Redis's sums to `group` (replies not read).
    fn increments_call(&self, group: &mut Group, increments: &[(String, u64)]) {
        let key = format!("{}counters", self.prefix);
        for (name, by) in increments {
            group.cmd("HINCRBY").arg(&key).arg(name).arg(*by);
        }
    }

    /// Releases sorted by shard, with their hosts; those whose token names no shard of
    /// this crawl are counted as stale.
    fn releases_by_shard<'r>(&self, releases: &'r [Release]) -> (ByShard<'r>, u64) {
        let mut by_shard: BTreeMap<u32, Vec<(&Release, &str)>> = BTreeMap::new();
        let mut stale = 0;
        for r in releases {
            match token_parts(&r.token) {
                Some((shard, host)) if (shard as usize) < self.shards.len() => {
                    by_shard.entry(shard).or_default().push((r, host));
                }
                _ => stale += 1,
            }
        }
        (by_shard, stale)
    }

    /// One sync round (see [`SyncRequest`]): the crawl's own keys (counters, heartbeat)
    /// and the shards' (acknowledgements, renewals, and claims of the shards
    /// [`ShardViews::plan`] picks) at once.
    pub(crate) async fn sync(&self, request: SyncRequest) -> Result<SyncReply, DistributedError> {
        let n = self.shards.len();
        let sent_at = Instant::now();
        let mut groups: Vec<Group> = (0..=n).map(|_| Group::default()).collect();
        let mut reply = SyncReply::default();
        let (releases, stale) = self.releases_by_shard(&request.releases);
        reply.stale = stale;
        let mut released = Group::default();
        let releasing = self.release_calls(&mut groups[..n], &mut released, &releases);
        self.increments_call(&mut groups[n], &request.increments);
        let mut renewing = vec![false; n];
        if let Some(tokens) = &request.renew {
            self.beat_call(&mut groups[n]);
            let mut by_shard: BTreeMap<u32, Vec<&String>> = BTreeMap::new();
            for token in tokens {
                match token_parts(token) {
                    Some((shard, _)) if (shard as usize) < n => {
                        by_shard.entry(shard).or_default().push(token)
                    }
                    _ => reply.lost.push(token.clone()),
                }
            }
            for (shard, tokens) in by_shard {
                let s = shard as usize;
                self.renew_call(&mut groups[s], &self.shards[s], &tokens);
                renewing[s] = true;
            }
        }
        let plan = match &request.claim {
            Some(claim) => {
                let mut topups: Vec<Vec<(&TopUp, &str)>> = vec![Vec::new(); n];
                for topup in &claim.topups {
                    if let Some((shard, host)) =
                        token_parts(&topup.token).filter(|(s, _)| (*s as usize) < n)
                    {
                        topups[shard as usize].push((topup, host));
                    }
                }
                let must: Vec<bool> = topups.iter().map(|t| !t.is_empty()).collect();
                let mut views = self.views.lock().map_err(|_| poisoned("claim"))?;
                let needs = ClaimNeeds {
                    want: claim.want,
                    must: &must,
                    idle: claim.idle,
                    beat: request.renew.is_some(),
                };
                let plan = views.plan(sent_at, &needs);
                for (s, want) in plan.shards() {
                    let topups = &topups[s as usize];
                    self.claim_call(&mut groups[s as usize], s, want, topups, &views);
                }
                Some(plan)
            }
            None => None,
        };
        // Payloads published first: on a single server (one pipeline, in order) before
        // the leases end, so the next holder of a host finds every payload this process
        // archived from it; on a cluster at the same time (a holder that claims the host
        // in between archives a payload in full once more).
        let mut publish = Group::default();
        let payloads = format!("{}payloads", self.prefix);
        for (field, entry) in &request.publish {
            publish.cmd("HSETNX").arg(&payloads).arg(field).arg(entry);
        }
        // Releases before the shards' claims, as on a cluster (each shard's group has its
        // release first): a host a release puts back may be claimed in the same round.
        let single_release = !released.is_empty();
        groups.insert(0, publish);
        groups.insert(1, released);
        let replies = self.redis.run_groups(&groups).await?;
        let mut claimed = Claimed::default();
        let mut views = self.views.lock().map_err(|_| poisoned("claim"))?;
        let mut all_empty_again = true;
        let mut all_empty = true;
        if single_release {
            let answer = replies
                .get(1)
                .and_then(|group| group.first())
                .ok_or_else(|| bad("release", &redis::Value::Nil))?;
            reply.stale += heard_release(answer, &releases, &mut views, sent_at)?;
        }
        for (s, group) in replies.iter().skip(2).take(n).enumerate() {
            let mut replies = group.iter();
            let mut next = |what| replies.next().ok_or_else(|| bad(what, &redis::Value::Nil));
            if releasing[s] {
                reply.stale += heard_release(next("release")?, &releases, &mut views, sent_at)?;
            }
            if renewing[s] {
                for token in array(next("renew")?, "renew")? {
                    reply.lost.push(text(token, "renew")?);
                }
            }
            if let Some(plan) = plan.as_ref().filter(|p| p.asked[s].is_some()) {
                let mut shard = parse_claim(next("claim")?)?;
                all_empty &= shard.claimed.scheduled == 0 && shard.claimed.outstanding == 0;
                all_empty_again &= views.heard(plan, s as u32, &mut shard, sent_at);
                let c = shard.claimed;
                claimed.leases.extend(c.leases);
                claimed.ended.extend(c.ended);
                claimed.scheduled += c.scheduled;
                claimed.outstanding += c.outstanding;
            }
        }
        if let Some(plan) = plan {
            // Only a sweep can tell (see `shard_views`); a claim of some shards never
            // says the crawl is over.
            claimed.over = plan.sweep && all_empty_again;
            claimed.looks_over = plan.sweep && all_empty && !claimed.over;
            claimed.due_in = views.due_in(Instant::now());
            reply.claimed = Some(claimed);
        }
        Ok(reply)
    }

    /// At a stop: `releases` (every lease ended) and the counters' increments.
    pub(crate) async fn give_back(
        &self,
        releases: &[Release],
        increments: &[(String, u64)],
    ) -> Result<(), DistributedError> {
        let n = self.shards.len();
        let mut groups: Vec<Group> = (0..=n).map(|_| Group::default()).collect();
        let (releases, _) = self.releases_by_shard(releases);
        let mut released = Group::default();
        self.release_calls(&mut groups[..n], &mut released, &releases);
        groups.insert(0, released);
        self.increments_call(&mut groups[n + 1], increments);
        self.redis.run_groups(&groups).await?;
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
        let mut group = Group::default();
        self.increments_call(&mut group, increments);
        group
            .cmd("HSET")
            .arg(format!("{}ended", self.prefix))
            .arg(&self.process)
            .arg(if stopped { "stopped" } else { "finished" });
        if !stopped {
            status::stamp(&mut group, &self.meta, "finished_ms", false);
        }
        self.redis.run(&group).await?;
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
        // Bounded: a process silent soon is dead once silent for `lease_secs`; one being
        // sealed by another is ended as soon as that one is done.
        let deadline = Instant::now() + 2 * self.settings.lease + Duration::from_secs(1);
        let mut told = false;
        while let (true, Some(soon)) = (wait, sealing.silent_soon) {
            if Instant::now() >= deadline {
                break;
            }
            if !told && soon > super::seal::SEALING_BY_ANOTHER {
                tracing::info!(
                    "waiting {:.1} s to seal the output of a process that stopped its heartbeats",
                    soon.as_secs_f64()
                );
                told = true;
            }
            tokio::time::sleep(soon + Duration::from_millis(50)).await;
            let again = seal_dead(&scope).await?;
            sealing.sealed.extend(again.sealed);
            sealing.silent_soon = again.silent_soon;
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
    /// leases lost, and the time it was `starved` (a fetch slot free, nothing queued here).
    pub(crate) fn process_figures(
        &self,
        finished: u64,
        stale: u64,
        starved: Duration,
    ) -> serde_json::Value {
        let round_trips = self.round_trips();
        serde_json::json!({
            "process": self.process,
            "crawl_id": self.settings.crawl_id,
            "redis_round_trips": round_trips,
            "round_trips_per_page": round_trips as f64 / finished.max(1) as f64,
            "leases_lost": stale,
            "shards": self.shards.len(),
            "cluster": self.redis.is_cluster(),
            "unreplicated_writes": self.redis.unreplicated(),
            "starved_secs": starved.as_secs_f64(),
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

/// One `admit.lua` call's setting: the shard, the budget and the filter's layout; its
/// keys and arguments are laid out as the script reads them (host by host, a URL as its
/// item, its seen part, its block and its probe: see [`bloom_probe`]).
pub(super) struct AdmitCall<'a> {
    pub(super) plan: &'a Plan,
    pub(super) shards: u32,
    pub(super) keys: &'a ShardKeys,
    /// The crawl's meta hash, when the budget is taken inline (a single server).
    pub(super) crawl_meta: Option<&'a str>,
    pub(super) max_urls: u64,
    pub(super) host_cap: u64,
    pub(super) granted: i64,
}

impl AdmitCall<'_> {
    /// Adds the call for `items` (each with its host key; a host's URLs next to each
    /// other, or the host counts twice against its cap's room) to `group`.
    pub(super) fn add(
        &self,
        group: &mut Group,
        script: &super::client::Script,
        items: &[&(String, QueuedUrl)],
    ) {
        // Each URL's seen part, block and probe, and the distinct parts (almost always one).
        let mut parts: Vec<u64> = Vec::with_capacity(1);
        let mut probes = Vec::with_capacity(items.len());
        let (mut offsets, mut probe) = (Vec::new(), Vec::new());
        for (_, item) in items {
            let (part, at) = bloom_probe(
                self.plan,
                self.shards,
                item.url.as_bytes(),
                &mut offsets,
                &mut probe,
            );
            let index = match parts.iter().position(|&p| p == part) {
                Some(index) => index,
                None => {
                    parts.push(part);
                    parts.len() - 1
                }
            };
            probes.push((index + 1, at, probe.clone()));
        }
        // Hosts as runs of equal keys.
        let mut runs: Vec<(&str, usize)> = Vec::new();
        for (host, _) in items {
            match runs.last_mut() {
                Some((last, n)) if *last == host.as_str() => *n += 1,
                _ => runs.push((host.as_str(), 1)),
            }
        }
        let mut keys = vec![
            self.keys.meta.clone(),
            self.keys.sched.clone(),
            self.keys.next.clone(),
            self.keys.leased.clone(),
            self.keys.hostn.clone(),
        ];
        keys.extend(self.crawl_meta.map(str::to_string));
        keys.extend(parts.iter().map(|&p| self.keys.seen(p)));
        keys.extend(runs.iter().map(|(host, _)| self.keys.queue(host)));
        let cmd = script.call_with_keys(group, &keys);
        cmd.arg(if self.crawl_meta.is_some() { "1" } else { "0" })
            .arg(self.max_urls)
            .arg(self.host_cap)
            .arg(self.granted)
            .arg(runs.len())
            .arg(parts.len());
        let mut next = 0;
        for (host, n) in runs {
            cmd.arg(host).arg(n);
            for u in next..next + n {
                let (host, item) = items[u];
                let (part, at, probe) = &probes[u];
                cmd.arg(queue_item::encode(host, item))
                    .arg(*part)
                    .arg(*at)
                    .arg(probe.as_slice());
            }
            next += n;
        }
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

/// Reads a `release.lua` answer of `releases` (sent at `sent_at`): the hosts it put back on
/// the schedule go to `views`; returns how many leases were no longer this process's.
fn heard_release(
    answer: &redis::Value,
    releases: &ByShard<'_>,
    views: &mut ShardViews,
    sent_at: Instant,
) -> Result<u64, DistributedError> {
    let answer = array(answer, "release")?;
    let [stale, scheduled @ ..] = answer else {
        return Err(bad("release", &redis::Value::Array(answer.to_vec())));
    };
    for host in scheduled {
        let host = text(host, "release")?;
        // A host is in one shard's releases (it has one lease at a time).
        let found = releases.iter().find_map(|(&shard, rs)| {
            rs.iter()
                .find(|(_, h)| *h == host)
                .map(|(r, _)| (shard, r.wait))
        });
        if let Some((shard, wait)) = found {
            views.scheduled(shard, &host, sent_at + wait);
        }
    }
    Ok(int(stale, "release")?.max(0) as u64)
}

fn poisoned(what: &'static str) -> DistributedError {
    DistributedError::Reply {
        what,
        detail: "a poisoned lock".into(),
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
