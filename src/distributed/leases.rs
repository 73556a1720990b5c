//! The leases a process holds, and which of their URLs may be acknowledged: the bookkeeping
//! between a claim's answer and the `release.lua` calls that end it, with no Redis in it.
//!
//! Guarantees: a URL is acknowledged only once the output thread says its record (its
//! number in the order records were sent) is handed to the OS; a lease ends only when all
//! its URLs are recorded, and then only once their acknowledgements may go; a lease found
//! taken over is forgotten (its URLs are not acknowledged: the new holder fetches them
//! too); a top-up of a lease that finished while the claim was on its way holds that lease
//! again instead of ending it.
//!
//! When to top a lease up is the process's throughput: a lease asks for more by the URLs it
//! has left to fetch (those fetched and waiting for their links' admission are no work for
//! the fetch slots), by any room left while the process is short of work, and at once when
//! this process's own admission queued URLs of its host. Admission is untouched by these
//! rules (a top-up only moves URLs already admitted from the host's queue into its lease,
//! in `claim.lua`), so `max_urls` stays exact and no URL is queued twice; what a top-up
//! changes is how many unacknowledged URLs a lease holds, and a process killed with
//! `kill -9` still costs at most those, fetched again after its leases expire.
//!
//! Why a type of its own: these rules are what "nothing acknowledged is lost" rests on, and
//! here they are unit-tested without a Redis server (see the tests below); the run loop
//! (`crate::crawl`'s lease source) only moves values between this, the frontier and
//! [`super::session`].

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::session::{ClaimRequest, Release, TopUp};
use super::Claimed;
use crate::frontier::QueuedUrl;

/// A lease whose top-up found its host's queue empty asks again no sooner than this.
const TOPUP_RETRY: Duration = Duration::from_millis(100);
/// Acknowledgements wait at most this long, or until [`ACK_BATCH`] are pending, so that one
/// round trip carries many.
const ACK_DELAY: Duration = Duration::from_millis(50);
const ACK_BATCH: usize = 64;

/// A recorded URL to acknowledge: its record's number in the output and its item in the
/// lease.
type Ack = (u64, Vec<u8>);

/// A lease this process holds.
struct Held {
    token: String,
    /// URLs not yet fetched (queued here or in flight), with the item they are stored as in
    /// the lease: what top-ups are measured by.
    unfetched: HashMap<String, Vec<u8>>,
    /// URLs fetched whose records wait for their links' admission: still open in the
    /// lease, but no longer work for the fetch slots, so they do not hold a top-up back.
    fetched: HashMap<String, Vec<u8>>,
    /// Recorded URLs not yet acknowledged, in the order recorded.
    acks: Vec<Ack>,
    /// No top-up before this instant (the host's queue was empty).
    dry_until: Instant,
    /// No top-up after this instant (half a lease period after the claim): then the lease
    /// ends when its URLs are done and the host goes back to the schedule, so that hosts
    /// move between processes (processes joining later get their share) and no process
    /// keeps a busy host for the whole crawl.
    topup_until: Instant,
}

impl Held {
    /// Every URL of the lease recorded (its acknowledgements may still wait).
    fn is_drained(&self) -> bool {
        self.unfetched.is_empty() && self.fetched.is_empty()
    }
}

/// A lease all of whose URLs are recorded, to end once their records are handed to the OS.
struct Done {
    token: String,
    host: String,
    acks: Vec<Ack>,
}

/// How much work a process takes on. Hosts are claimed a few at a time, only while the
/// process could use more (so it leaves the rest to the others), never more than one per
/// slot. With politeness on, a queued URL may wait for its host's rate: more hosts are
/// wanted while slots stay empty with nothing ready (`per_host` in flight each). With it
/// off, every queued URL is ready: the process keeps about two rounds of its concurrency
/// queued or in flight, so that a claim's round trip never leaves slots empty.
pub(crate) struct Appetite {
    pub(crate) concurrency: u64,
    pub(crate) polite: bool,
    /// What one host can keep in flight with politeness on.
    pub(crate) per_host: u64,
    pub(crate) lease_urls: u64,
}

impl Appetite {
    fn max_held(&self) -> usize {
        (self.concurrency as usize).clamp(4, 1024)
    }
}

/// The leases held and done, by host key.
pub(crate) struct Leases {
    held: HashMap<String, Held>,
    done: Vec<Done>,
    lease: Duration,
    lease_urls: usize,
    /// Acknowledgements waiting, and since when the oldest waits.
    pending_acks: usize,
    acks_since: Option<Instant>,
    /// The number of the oldest record whose URL waits for its acknowledgement.
    oldest_unacked: Option<u64>,
    /// Leases found taken over by another process (expired under us).
    stale: u64,
}

impl Leases {
    pub(crate) fn new(lease: Duration, lease_urls: u32) -> Leases {
        Leases {
            held: HashMap::new(),
            done: Vec::new(),
            lease,
            lease_urls: lease_urls as usize,
            pending_acks: 0,
            acks_since: None,
            oldest_unacked: None,
            stale: 0,
        }
    }

    /// Leases held (not yet done).
    pub(crate) fn held(&self) -> usize {
        self.held.len()
    }

    /// Nothing held and nothing left to end.
    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty() && self.done.is_empty()
    }

    pub(crate) fn stale(&self) -> u64 {
        self.stale
    }

    /// Whether a record of number above `handed` holds an acknowledgement back (the loop
    /// then waits for the output thread to hand more to the OS).
    pub(crate) fn waits_for_output(&self, handed: u64) -> bool {
        self.oldest_unacked.is_some_and(|n| n > handed)
    }

    /// `url` (of host `host`) was fetched: its record waits for its links' admission.
    pub(crate) fn fetched(&mut self, host: &str, url: &str) {
        if let Some(held) = self.held.get_mut(host) {
            if let Some((url, item)) = held.unfetched.remove_entry(url) {
                held.fetched.insert(url, item);
            }
        }
    }

    /// This process's admission queued URLs of `host` in Redis: a lease on it whose last
    /// top-up found the queue empty may ask again at once rather than after
    /// [`TOPUP_RETRY`].
    pub(crate) fn queued_for(&mut self, host: &str, now: Instant) {
        if let Some(held) = self.held.get_mut(host) {
            held.dry_until = held.dry_until.min(now);
        }
    }

    /// `url` (of host `host`) was recorded as record `number`: it closes in its lease, and
    /// a lease with nothing open is done.
    pub(crate) fn recorded(&mut self, host: &str, url: &str, number: u64) {
        let Some(held) = self.held.get_mut(host) else {
            return;
        };
        let item = match held.fetched.remove(url) {
            Some(item) => Some(item),
            None => held.unfetched.remove(url),
        };
        if let Some(item) = item {
            held.acks.push((number, item));
            self.pending_acks += 1;
            self.acks_since.get_or_insert_with(Instant::now);
            self.oldest_unacked.get_or_insert(number);
        }
        // A drained lease stays held while it may be topped up: its next top-up refills it
        // or ends it (`claim.lua`), in one round trip either way.
        if held.is_drained() && Instant::now() >= held.topup_until {
            if let Some(held) = self.held.remove(host) {
                self.done.push(Done {
                    token: held.token,
                    host: host.to_string(),
                    acks: held.acks,
                });
            }
        }
    }

    /// When the next sync should go, given the output thread's count of records `handed` to
    /// the OS, the next heartbeat and, when the process wants work, the next claim
    /// (`short`: held leases with room are topped up, see [`Leases::runs_low`]).
    pub(crate) fn sync_at(
        &self,
        now: Instant,
        handed: u64,
        next_beat: Instant,
        next_claim: Option<Instant>,
        short: bool,
        stopping: bool,
    ) -> Instant {
        let mut at = next_beat;
        let can_ack = self.oldest_unacked.is_some_and(|n| n <= handed);
        let done_ready = self
            .done
            .iter()
            .any(|d| d.acks.last().is_none_or(|(n, _)| *n <= handed));
        if done_ready || (can_ack && self.pending_acks >= ACK_BATCH) {
            at = now;
        }
        if let (true, Some(since)) = (can_ack, self.acks_since) {
            at = at.min(since + ACK_DELAY);
        }
        if let Some(claim) = next_claim {
            at = at.min(claim);
        }
        if !stopping {
            for held in self.held.values() {
                if held.is_drained() && held.acks.last().is_none_or(|(n, _)| *n <= handed) {
                    // To be refilled or ended (or, past its top-ups, ended) now.
                    at = now;
                } else if self.runs_low(held, short) && now < held.topup_until {
                    at = at.min(held.dry_until);
                }
            }
        }
        at
    }

    /// Whether a held lease wants a top-up: fewer than half its URLs left to fetch, or any
    /// room left while the process is `short` of work (its slots and queue not full: see
    /// [`Leases::wants`]). The second is what keeps a process that holds every host fed:
    /// with few hosts each has more in flight than half a lease, and waiting for half to
    /// drain left the slots empty.
    fn runs_low(&self, held: &Held, short: bool) -> bool {
        let left = held.unfetched.len();
        left < self.lease_urls.div_ceil(2) || (short && left < self.lease_urls)
    }

    /// The releases a sync carries: acknowledgements of the URLs whose records are among the
    /// first `handed`, and the done leases all of whose records are (the others wait for a
    /// later sync). `wait(host)` is how long the host must rest before another process
    /// serves it.
    pub(crate) fn releases(
        &mut self,
        now: Instant,
        handed: u64,
        wait: impl Fn(&str) -> Duration,
    ) -> Vec<Release> {
        // Drained leases past their top-ups end as done ones do.
        let retired: Vec<String> = self
            .held
            .iter()
            .filter(|(_, h)| h.is_drained() && now >= h.topup_until)
            .map(|(host, _)| host.clone())
            .collect();
        for host in retired {
            if let Some(held) = self.held.remove(&host) {
                self.done.push(Done {
                    token: held.token,
                    host,
                    acks: held.acks,
                });
            }
        }
        let mut releases = Vec::new();
        // What stays unacknowledged: how many, and the oldest's record number.
        let mut remaining = 0;
        let mut oldest: Option<u64> = None;
        let mut keep = |later: &[Ack]| {
            if let Some((first, _)) = later.first() {
                remaining += later.len();
                oldest = Some(oldest.map_or(*first, |o| o.min(*first)));
            }
        };
        for mut done in std::mem::take(&mut self.done) {
            let later = not_handed(&mut done.acks, handed);
            if later.is_empty() {
                releases.push(release(&done.token, wait(&done.host), true, done.acks));
            } else {
                if !done.acks.is_empty() {
                    let acks = std::mem::take(&mut done.acks);
                    releases.push(release(&done.token, Duration::ZERO, false, acks));
                }
                keep(&later);
                done.acks = later;
                self.done.push(done);
            }
        }
        for held in self.held.values_mut().filter(|h| !h.acks.is_empty()) {
            let later = not_handed(&mut held.acks, handed);
            let acks = std::mem::replace(&mut held.acks, later);
            if !acks.is_empty() {
                releases.push(release(&held.token, Duration::ZERO, false, acks));
            }
            keep(&held.acks);
        }
        self.pending_acks = remaining;
        self.oldest_unacked = oldest;
        if remaining == 0 {
            self.acks_since = None;
        }
        releases
    }

    /// The hosts to claim now, if this process wants work (`None` otherwise): see
    /// [`Appetite`].
    pub(crate) fn wants(
        &self,
        appetite: &Appetite,
        in_flight: u64,
        queued: u64,
        stopping: bool,
    ) -> Option<u64> {
        let c = appetite.concurrency;
        let (deficit, per_host) = if appetite.polite {
            (c.saturating_sub(in_flight), appetite.per_host)
        } else {
            (
                (2 * c).saturating_sub(in_flight + queued),
                appetite.lease_urls,
            )
        };
        let room = appetite.max_held().saturating_sub(self.held.len()) as u64;
        (!stopping && deficit > 0 && room > 0)
            .then(|| deficit.div_ceil(per_host.max(1)).clamp(1, room))
    }

    /// The tokens of the leases held, for a heartbeat.
    pub(crate) fn tokens(&self) -> Vec<String> {
        self.held.values().map(|h| h.token.clone()).collect()
    }

    /// A claim of `want` hosts with top-ups of held leases running low (see
    /// [`Leases::runs_low`]; `short`: the process wants work); a drained lease whose
    /// acknowledgements have all gone (this sync's releases, made first, carry the last)
    /// is topped up or, its host's queue empty, ended, its host offered again after
    /// `wait(host)`. Also returns the hosts topped up, to hand back to [`Leases::claimed`].
    pub(crate) fn claim(
        &self,
        want: u64,
        short: bool,
        now: Instant,
        wait: impl Fn(&str) -> Duration,
    ) -> (ClaimRequest, Vec<String>) {
        let mut request = ClaimRequest {
            want,
            topups: Vec::new(),
            idle: self.held.is_empty(),
        };
        let mut topped = Vec::new();
        for (host, held) in &self.held {
            if now >= held.topup_until {
                continue;
            }
            let end = held.is_drained() && held.acks.is_empty();
            if end || (self.runs_low(held, short) && held.dry_until <= now) {
                request.topups.push(TopUp {
                    token: held.token.clone(),
                    urls: (self.lease_urls - held.unfetched.len()) as u64,
                    end_if_dry: end.then(|| wait(host)),
                });
                topped.push(host.clone());
            }
        }
        (request, topped)
    }

    /// Leases the heartbeat found taken over: no longer this process's.
    pub(crate) fn lost(&mut self, tokens: &[String]) {
        self.note_stale(tokens.len() as u64);
        self.held.retain(|_, held| !tokens.contains(&held.token));
    }

    pub(crate) fn note_stale(&mut self, n: u64) {
        if n > 0 {
            self.stale += n;
            tracing::warn!(
                "{n} leases of this process expired and were taken over by another (their URLs may be fetched twice); raise distributed.lease_secs?"
            );
        }
    }

    /// Takes a claim's answer (sent at `sent_at`, with top-ups of `topped`): returns how
    /// many new leases it brought and the URLs to queue, each with its host key.
    pub(crate) fn claimed(
        &mut self,
        claimed: Claimed,
        sent_at: Instant,
        topped: Vec<String>,
    ) -> (usize, Vec<(String, QueuedUrl)>) {
        // Drained leases ended by the claim (their hosts' queues were empty).
        self.held
            .retain(|_, held| !claimed.ended.contains(&held.token));
        // A drained lease asked to be topped up or ended (its acknowledgements had all
        // gone: nothing changed it since) that came back neither is no longer this
        // process's (`claim.lua` answers only its holder): forgotten as a lost one, rather
        // than asked again and again until a heartbeat says so.
        let gone: Vec<String> = topped
            .iter()
            .filter(|host| {
                self.held
                    .get(*host)
                    .is_some_and(|h| h.is_drained() && h.acks.is_empty())
                    && !claimed.leases.iter().any(|l| &l.host == *host)
            })
            .cloned()
            .collect();
        for host in &gone {
            self.held.remove(host);
        }
        self.note_stale(gone.len() as u64);
        // Top-ups that brought nothing wait a little before asking again.
        for host in topped {
            if let Some(held) = self.held.get_mut(&host) {
                held.dry_until = sent_at + TOPUP_RETRY;
            }
        }
        let mut got = 0;
        let mut queue = Vec::new();
        for lease in claimed.leases {
            match self.held.get(&lease.host) {
                Some(held) if held.token == lease.token => {}
                Some(_) => {
                    // Never happens (a host is leased once at a time); were it to, the URLs
                    // stay in that lease in Redis and come back when it ends or expires.
                    tracing::warn!("a lease of {} this process does not know", lease.host);
                    continue;
                }
                None => {
                    let acks = match self.done.iter().position(|d| d.token == lease.token) {
                        Some(i) => self.done.swap_remove(i).acks,
                        None => {
                            got += 1;
                            Vec::new()
                        }
                    };
                    self.held.insert(
                        lease.host.clone(),
                        Held {
                            token: lease.token.clone(),
                            unfetched: HashMap::new(),
                            fetched: HashMap::new(),
                            acks,
                            dry_until: sent_at,
                            topup_until: sent_at + self.lease / 2,
                        },
                    );
                }
            }
            let Some(held) = self.held.get_mut(&lease.host) else {
                continue;
            };
            held.dry_until = sent_at;
            for (item, bytes) in lease.items {
                held.unfetched.insert(item.url.clone(), bytes);
                queue.push((lease.host.clone(), item));
            }
        }
        (got, queue)
    }

    /// At a stop: every lease ended, the done ones with their acknowledgements, the held
    /// ones giving their unfinished URLs back to the head of their hosts' queues.
    pub(crate) fn give_back(&mut self, wait: impl Fn(&str) -> Duration) -> Vec<Release> {
        let mut releases = Vec::new();
        for done in self.done.drain(..) {
            releases.push(release(&done.token, wait(&done.host), true, done.acks));
        }
        for (host, held) in self.held.drain() {
            releases.push(release(&held.token, wait(&host), true, held.acks));
        }
        releases
    }
}

fn release(token: &str, wait: Duration, end: bool, acks: Vec<Ack>) -> Release {
    Release {
        token: token.to_string(),
        wait,
        end,
        acks: acks.into_iter().map(|(_, item)| item).collect(),
    }
}

/// Leaves in `acks` those whose records are among the first `handed` handed to the OS, and
/// returns the others (`acks` is in record order).
fn not_handed(acks: &mut Vec<Ack>, handed: u64) -> Vec<Ack> {
    let at = acks.partition_point(|(number, _)| *number <= handed);
    acks.split_off(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::Lease;

    #[test]
    fn only_acknowledgements_of_handed_records_go() {
        let mut acks: Vec<Ack> = (1..=5).map(|n| (n * 10, vec![n as u8])).collect();
        let later = not_handed(&mut acks, 30);
        assert_eq!(
            acks.iter().map(|a| a.0).collect::<Vec<_>>(),
            vec![10, 20, 30]
        );
        assert_eq!(later.iter().map(|a| a.0).collect::<Vec<_>>(), vec![40, 50]);
        let mut none: Vec<Ack> = vec![(7, b"x".to_vec())];
        assert_eq!(not_handed(&mut none, 6).len(), 1);
        assert!(none.is_empty());
    }

    fn lease(token: &str, host: &str, urls: &[&str]) -> Lease {
        Lease {
            token: token.into(),
            host: host.into(),
            items: urls
                .iter()
                .map(|u| {
                    let item = QueuedUrl::new(u.to_string(), 1, None, 0);
                    let bytes = crate::distributed::queue_item::encode(host, &item);
                    (item, bytes)
                })
                .collect(),
        }
    }

    fn claimed(leases: Vec<Lease>) -> Claimed {
        Claimed {
            leases,
            ..Claimed::default()
        }
    }

    const H: &str = "http://h.test";

    /// A lease past its top-ups ends only when its URLs are all recorded and their records
    /// handed to the OS; before that, the handed ones are acknowledged without ending it.
    #[test]
    fn a_lease_ends_once_all_its_records_are_handed() {
        // A lease period of 0: no top-up, the lease ends with its last record.
        let mut leases = Leases::new(Duration::ZERO, 4);
        let now = Instant::now();
        let urls = ["http://h.test/a", "http://h.test/b"];
        let (got, queue) = leases.claimed(claimed(vec![lease("t1", H, &urls)]), now, vec![]);
        assert_eq!((got, queue.len()), (1, 2));
        leases.recorded(H, urls[0], 1);
        assert!(leases.waits_for_output(0));
        // Record 1 not handed yet: nothing goes.
        assert!(leases.releases(now, 0, |_| Duration::ZERO).is_empty());
        let r = leases.releases(now, 1, |_| Duration::ZERO);
        assert_eq!(r.len(), 1);
        assert!(!r[0].end && r[0].acks.len() == 1 && r[0].token == "t1");
        leases.recorded(H, urls[1], 2);
        assert_eq!(leases.held(), 0);
        assert!(!leases.is_empty(), "done, not yet ended");
        assert!(leases.releases(now, 1, |_| Duration::ZERO).is_empty());
        let r = leases.releases(now, 2, |_| Duration::from_millis(7));
        assert_eq!(r.len(), 1);
        assert!(r[0].end && r[0].acks.len() == 1);
        assert_eq!(r[0].wait, Duration::from_millis(7));
        assert!(leases.is_empty());
    }

    /// A lease asks for a top-up by the URLs it has left to fetch, not by those waiting for
    /// their links' admission; with the process short of work, by any room left; and a
    /// lease whose top-up found nothing asks again as soon as this process queued URLs for
    /// its host rather than after `TOPUP_RETRY`.
    #[test]
    fn top_ups_follow_the_urls_left_to_fetch_and_the_processs_own_admissions() {
        let mut leases = Leases::new(Duration::from_secs(10), 4);
        let now = Instant::now();
        let urls = ["http://h.test/a", "http://h.test/b", "http://h.test/c"];
        leases.claimed(claimed(vec![lease("t1", H, &urls)]), now, vec![]);
        // Three of four left to fetch: no top-up, unless the process is short of work.
        assert!(leases
            .claim(0, false, now, |_| Duration::ZERO)
            .0
            .topups
            .is_empty());
        assert_eq!(
            urls_wanted(&leases.claim(0, true, now, |_| Duration::ZERO).0),
            vec![1]
        );
        // Two fetched, their records waiting for admission: open still, but one left to
        // fetch, so the lease asks for three more.
        leases.fetched(H, urls[0]);
        leases.fetched(H, urls[1]);
        let (request, topped) = leases.claim(0, false, now, |_| Duration::ZERO);
        assert_eq!(urls_wanted(&request), vec![3]);
        assert_eq!(
            leases.sync_at(now, 0, now + Duration::from_secs(9), None, false, false),
            now
        );
        // The top-up found the host's queue empty: it waits...
        leases.claimed(claimed(vec![]), now, topped);
        assert!(leases
            .claim(0, false, now, |_| Duration::ZERO)
            .0
            .topups
            .is_empty());
        // ...until this process's admission queues URLs of the host.
        leases.queued_for(H, now);
        assert_eq!(
            leases
                .claim(0, false, now, |_| Duration::ZERO)
                .0
                .topups
                .len(),
            1
        );
        // A fetched URL still closes in its lease when recorded.
        leases.recorded(H, urls[0], 1);
        leases.recorded(H, urls[1], 2);
        leases.recorded(H, urls[2], 3);
        assert_eq!(leases.releases(now, 3, |_| Duration::ZERO)[0].acks.len(), 3);
    }

    /// A drained lease (every URL recorded) within its top-ups stays held: once its
    /// acknowledgements have gone, its next claim tops it up or, its host's queue empty,
    /// ends it; before that it is not ended.
    #[test]
    fn a_drained_lease_is_refilled_or_ended_by_its_next_claim() {
        let mut leases = Leases::new(Duration::from_secs(10), 4);
        let now = Instant::now();
        let (a, b) = ("http://h.test/a", "http://h.test/b");
        leases.claimed(claimed(vec![lease("t1", H, &[a])]), now, vec![]);
        leases.recorded(H, a, 1);
        assert_eq!(leases.held(), 1, "drained, still held");
        // Its acknowledgement not yet handed: a plain top-up, never an end.
        let (request, _) = leases.claim(0, false, now, |_| Duration::from_millis(5));
        assert_eq!(request.topups[0].end_if_dry, None);
        assert!(leases.sync_at(now, 0, now + Duration::from_secs(9), None, false, false) <= now);
        // Handed: the sync acknowledges it, and its claim may end the lease.
        let r = leases.releases(now, 1, |_| Duration::ZERO);
        assert_eq!((r.len(), r[0].end), (1, false));
        let (request, topped) = leases.claim(0, false, now, |_| Duration::from_millis(5));
        assert_eq!(request.topups[0].end_if_dry, Some(Duration::from_millis(5)));
        // Refilled: held again with the new URL, not a new lease.
        let (got, queue) = leases.claimed(claimed(vec![lease("t1", H, &[b])]), now, topped);
        assert_eq!((got, queue.len(), leases.held()), (0, 1, 1));
        leases.recorded(H, b, 2);
        leases.releases(now, 2, |_| Duration::ZERO);
        let (_, topped) = leases.claim(0, false, now, |_| Duration::ZERO);
        // Ended by the claim: nothing left to release.
        let ended = Claimed {
            ended: vec!["t1".into()],
            ..Claimed::default()
        };
        leases.claimed(ended, now, topped);
        assert!(leases.is_empty());
        assert!(leases.give_back(|_| Duration::ZERO).is_empty());

        // A drained lease whose claim answers neither (taken over by another process) is
        // forgotten as lost, not asked again at once.
        let c = "http://h.test/c";
        leases.claimed(claimed(vec![lease("t2", H, &[c])]), now, vec![]);
        leases.recorded(H, c, 3);
        leases.releases(now, 3, |_| Duration::ZERO);
        let (request, topped) = leases.claim(0, false, now, |_| Duration::ZERO);
        assert!(request.topups[0].end_if_dry.is_some());
        leases.claimed(claimed(vec![]), now, topped);
        assert!(leases.is_empty());
        assert_eq!(leases.stale(), 1);
    }

    fn urls_wanted(request: &ClaimRequest) -> Vec<u64> {
        request.topups.iter().map(|t| t.urls).collect()
    }

    /// A top-up answered after the lease finished holds it again, with its pending
    /// acknowledgements; a lease lost to another process is forgotten unacknowledged.
    #[test]
    fn a_late_top_up_holds_the_lease_again_and_a_lost_one_is_forgotten() {
        // Past its top-ups (a lease period of 0), a lease is done with its last record.
        let mut leases = Leases::new(Duration::ZERO, 4);
        let now = Instant::now();
        leases.claimed(
            claimed(vec![lease("t1", H, &["http://h.test/a"])]),
            now,
            vec![],
        );
        leases.recorded(H, "http://h.test/a", 1);
        assert_eq!(leases.held(), 0);
        let (got, queue) = leases.claimed(
            claimed(vec![lease("t1", H, &["http://h.test/c"])]),
            now,
            vec![H.into()],
        );
        assert_eq!((got, queue.len(), leases.held()), (0, 1, 1));
        let (request, topped) = leases.claim(2, false, now, |_| Duration::ZERO);
        assert_eq!(request.want, 2);
        assert!(
            topped.is_empty() && request.topups.is_empty(),
            "past its top-ups"
        );
        leases.lost(&["t1".to_string()]);
        assert_eq!((leases.held(), leases.stale()), (0, 1));
        // Nothing to end: the one pending acknowledgement went with the lost lease.
        assert!(leases.give_back(|_| Duration::ZERO).is_empty());
    }
}
