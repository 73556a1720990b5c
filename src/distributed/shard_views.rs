//! What one process knows of each shard's schedule, and from it which shards a claim asks:
//! a claim goes to the shards it has business with (top-ups, expired leases to reclaim,
//! hosts known to be due) and a small window of others that turns with every claim, and
//! to every shard (a sweep) only when the process has nothing to go on.
//!
//! Guarantees:
//! - **Nothing is stranded.** A shard no claim asks can hold ready hosts only until the
//!   window reaches it (every `shards / window` claims that want hosts), a process with no
//!   lease sweeps every shard whenever it claims, and every heartbeat sweeps (so expired
//!   leases of a dead process are reclaimed, as before, by whoever claims).
//! - **Termination is decided by sweeps only**, with the argument of
//!   [`super`]'s module doc: the crawl is over when two sweeps in a row find every shard
//!   empty with the same versions (claims between them that changed a shard changed its
//!   version).
//! - **Hints are never lost to a race**: a host this process learns is due (its admission
//!   put it on the schedule, or its release did) while a claim is in flight is kept over
//!   that claim's answer, which may predate it.
//! - **Fairness across shards**: the hosts wanted are spread over the shards with due hosts
//!   from a shard that turns with every claim, so no shard is always served last.
//!
//! Why: with the crawl's keys sharded (64 hash tags by default) a claim that asked every
//! shard cost Redis 64 script calls per round, most of them to shards with nothing for
//! this process, and doubled Redis's CPU per page. A process learns most of what is due
//! from its own work (its admissions and releases say when a host is put on the schedule),
//! so the rest only needs looking at now and then. Kept apart from [`super::session`]
//! (which builds the calls) so the choice is unit-tested without Redis.

use std::time::Duration;

use tokio::time::Instant;

use super::ShardClaim;

/// A process that holds leases but knows of no due host sweeps at most this often.
const BUSY_SWEEP: Duration = Duration::from_secs(1);

/// A host known to be due, with the claim after which it was learnt (see [`ShardViews::heard`]).
#[derive(Debug, Clone)]
struct Hint {
    host: String,
    noted: u64,
}

/// What the last answers said about a shard.
#[derive(Debug, Default, Clone)]
struct ShardView {
    /// Hosts due soon (the shard's answer, and what this process scheduled since).
    hints: Vec<Hint>,
    /// Expired leases to reclaim (named in the next claim that asks the shard).
    expired: Vec<String>,
    /// The shard's version when the last sweep found it empty.
    empty_at: Option<i64>,
    /// When its first scheduled host is due, as last heard.
    due_at: Option<Instant>,
}

/// Which shards a claim asks, and how many new hosts from each.
#[derive(Debug, Default)]
pub(crate) struct ClaimPlan {
    /// Per shard, `Some(hosts wanted from it)` if asked.
    pub(crate) asked: Vec<Option<u64>>,
    /// Every shard asked: the answer can tell whether the crawl is over.
    pub(crate) sweep: bool,
    /// The plan's number (see [`ShardViews::heard`]).
    epoch: u64,
}

impl ClaimPlan {
    /// The shards asked.
    pub(crate) fn shards(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.asked
            .iter()
            .enumerate()
            .filter_map(|(s, a)| a.map(|want| (s as u32, want)))
    }
}

/// What a claim needs from its caller: hosts wanted, the shards it must ask anyway (top-ups),
/// whether the process holds no lease, and whether this round carries a heartbeat.
#[derive(Debug)]
pub(crate) struct ClaimNeeds<'a> {
    pub(crate) want: u64,
    pub(crate) must: &'a [bool],
    pub(crate) idle: bool,
    pub(crate) beat: bool,
}

/// One process's views of the crawl's shards.
#[derive(Debug)]
pub(crate) struct ShardViews {
    views: Vec<ShardView>,
    /// The first shard of the next window, and where the spreading of wants starts.
    turn: usize,
    window: usize,
    epoch: u64,
    last_sweep: Option<Instant>,
}

impl ShardViews {
    pub(crate) fn new(shards: u32) -> ShardViews {
        let shards = shards.max(1) as usize;
        ShardViews {
            views: vec![ShardView::default(); shards],
            turn: 0,
            // 64 shards: 4, so a claim's window goes round them all in 16 claims.
            window: (shards / 16).clamp(1, 16),
            epoch: 0,
            last_sweep: None,
        }
    }

    fn ready(&self, s: usize, now: Instant) -> bool {
        let v = &self.views[s];
        !v.hints.is_empty() || v.due_at.is_some_and(|at| at <= now)
    }

    /// The shards the next claim asks (see the module doc).
    pub(crate) fn plan(&mut self, now: Instant, needs: &ClaimNeeds<'_>) -> ClaimPlan {
        let n = self.views.len();
        self.epoch += 1;
        let known_ready = (0..n).any(|s| self.ready(s, now));
        let sweep = needs.beat
            || (needs.want > 0
                && !known_ready
                && (needs.idle || self.last_sweep.is_none_or(|at| now >= at + BUSY_SWEEP)));
        let mut asked: Vec<Option<u64>> = (0..n)
            .map(|s| {
                let business = sweep
                    || needs.must.get(s).copied().unwrap_or(false)
                    || !self.views[s].expired.is_empty()
                    || (needs.want > 0 && self.ready(s, now));
                business.then_some(0)
            })
            .collect();
        if needs.want > 0 {
            for k in 0..self.window.min(n) {
                asked[(self.turn + k) % n].get_or_insert(0);
            }
            // Wants go to the shards naming due hosts, from the turning start.
            let mut left = needs.want;
            for k in 0..n {
                let s = (self.turn + k) % n;
                let take = left.min(self.views[s].hints.len() as u64);
                if let Some(want) = asked[s].as_mut() {
                    *want = take;
                    left -= take;
                }
            }
            self.turn = (self.turn + self.window) % n;
        }
        if sweep {
            self.last_sweep = Some(now);
        }
        ClaimPlan {
            asked,
            sweep,
            epoch: self.epoch,
        }
    }

    /// The hosts a claim of `shard` names as candidates when it wants any.
    pub(crate) fn candidates(&self, shard: u32) -> impl Iterator<Item = &str> {
        self.views
            .get(shard as usize)
            .into_iter()
            .flat_map(|v| v.hints.iter().map(|h| h.host.as_str()))
    }

    /// The expired leases a claim of `shard` names (to reclaim them).
    pub(crate) fn expired(&self, shard: u32) -> &[String] {
        self.views
            .get(shard as usize)
            .map_or(&[], |v| v.expired.as_slice())
    }

    /// `shard`'s answer to the claim of `plan`, sent at `sent_at`: its hints replace those
    /// known before the claim was planned (the script saw those) but not the ones noted
    /// while it was in flight. Returns whether a sweep found the shard empty and unchanged
    /// since the previous sweep found it empty.
    pub(crate) fn heard(
        &mut self,
        plan: &ClaimPlan,
        shard: u32,
        answer: &mut ShardClaim,
        sent_at: Instant,
    ) -> bool {
        let Some(view) = self.views.get_mut(shard as usize) else {
            return false;
        };
        let mut hints: Vec<Hint> = std::mem::take(&mut answer.due_hosts)
            .into_iter()
            .map(|host| Hint {
                host,
                noted: plan.epoch - 1,
            })
            .collect();
        for hint in view.hints.drain(..).filter(|h| h.noted >= plan.epoch) {
            if !hints.iter().any(|h| h.host == hint.host) {
                hints.push(hint);
            }
        }
        view.hints = hints;
        view.expired = std::mem::take(&mut answer.expired);
        let noted_later = view.hints.iter().any(|h| h.noted >= plan.epoch);
        view.due_at = answer.claimed.due_in.map(|d| sent_at + d);
        if noted_later {
            view.due_at = Some(sent_at);
        }
        let c = &answer.claimed;
        let empty = c.scheduled == 0 && c.outstanding == 0;
        if !plan.sweep {
            return false;
        }
        let again = empty && view.empty_at == Some(answer.version);
        view.empty_at = empty.then_some(answer.version);
        again
    }

    /// `host` of `shard` was put on the schedule by this process (an admission or a
    /// release), due from `at`.
    pub(crate) fn scheduled(&mut self, shard: u32, host: &str, at: Instant) {
        let epoch = self.epoch;
        let Some(view) = self.views.get_mut(shard as usize) else {
            return;
        };
        view.due_at = Some(view.due_at.map_or(at, |d| d.min(at)));
        match view.hints.iter_mut().find(|h| h.host == host) {
            Some(hint) => hint.noted = hint.noted.max(epoch),
            None => view.hints.push(Hint {
                host: host.to_string(),
                noted: epoch,
            }),
        }
    }

    /// How long until the first host this process knows of is due (zero: one is).
    pub(crate) fn due_in(&self, now: Instant) -> Option<Duration> {
        self.views
            .iter()
            .filter_map(|v| {
                if v.hints.is_empty() {
                    v.due_at
                } else {
                    Some(now)
                }
            })
            .min()
            .map(|at| at.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::Claimed;

    fn needs(want: u64, must: &[bool], idle: bool) -> ClaimNeeds<'_> {
        ClaimNeeds {
            want,
            must,
            idle,
            beat: false,
        }
    }

    fn answer(due_hosts: &[&str], scheduled: u64, outstanding: u64, version: i64) -> ShardClaim {
        ShardClaim {
            claimed: Claimed {
                scheduled,
                outstanding,
                due_in: (scheduled > 0).then_some(Duration::ZERO),
                ..Claimed::default()
            },
            version,
            due_hosts: due_hosts.iter().map(|h| h.to_string()).collect(),
            expired: Vec::new(),
        }
    }

    fn asked(plan: &ClaimPlan) -> Vec<u32> {
        plan.shards().map(|(s, _)| s).collect()
    }

    /// A process knowing nothing sweeps; one that knows a shard's due hosts asks that
    /// shard and a window of others, not all; with nothing wanted only its must-ask shards.
    #[test]
    fn a_claim_asks_the_shards_it_has_business_with_and_a_turning_window() {
        let now = Instant::now();
        let mut views = ShardViews::new(64);
        let none = vec![false; 64];
        let first = views.plan(now, &needs(3, &none, true));
        assert!(first.sweep);
        assert_eq!(first.shards().count(), 64);
        for s in 0..64u32 {
            let hosts: &[&str] = if s == 40 { &["http://a.test"] } else { &[] };
            let mut a = answer(hosts, u64::from(s == 40), 0, 1);
            views.heard(&first, s, &mut a, now);
        }
        let second = views.plan(now, &needs(3, &none, false));
        assert!(!second.sweep);
        let shards = asked(&second);
        assert!(shards.contains(&40), "{shards:?}");
        assert_eq!(
            shards.len(),
            1 + 4,
            "the due shard and a window of 4: {shards:?}"
        );
        assert_eq!(second.asked[40], Some(1), "one host named, one wanted");
        // The window turns: over 16 claims every shard is asked.
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..16 {
            seen.extend(asked(&views.plan(now, &needs(1, &none, false))));
        }
        assert_eq!(seen.len(), 64);
        // Nothing wanted: only the shards with top-ups.
        let mut must = vec![false; 64];
        must[7] = true;
        let topup = views.plan(now, &needs(0, &must, false));
        assert_eq!(asked(&topup), vec![7]);
        assert_eq!(topup.asked[7], Some(0));
    }

    /// A busy process that knows no due host sweeps at most once a second; an idle one
    /// every time it claims; a heartbeat always.
    #[test]
    fn sweeps_come_when_nothing_is_known() {
        let now = Instant::now();
        let mut views = ShardViews::new(64);
        let none = vec![false; 64];
        assert!(views.plan(now, &needs(2, &none, false)).sweep);
        assert!(!views.plan(now, &needs(2, &none, false)).sweep);
        assert!(views.plan(now, &needs(2, &none, true)).sweep, "idle");
        let later = now + BUSY_SWEEP;
        assert!(views.plan(later, &needs(2, &none, false)).sweep);
        let beat = ClaimNeeds {
            beat: true,
            ..needs(0, &none, false)
        };
        assert!(views.plan(later, &beat).sweep);
        assert!(!views.plan(later, &needs(0, &none, false)).sweep);
    }

    /// Over only after two sweeps in a row find every shard empty at the same version;
    /// a partial claim in between decides nothing.
    #[test]
    fn only_two_sweeps_that_agree_end_the_crawl() {
        let now = Instant::now();
        let mut views = ShardViews::new(4);
        let none = vec![false; 4];
        let all_empty = |views: &mut ShardViews, plan: &ClaimPlan, version: i64| {
            (0..4u32)
                .map(|s| views.heard(plan, s, &mut answer(&[], 0, 0, version), now))
                .fold(true, |a, b| a & b)
        };
        let one = views.plan(now, &needs(1, &none, true));
        assert!(!all_empty(&mut views, &one, 5), "first sweep");
        let mut must = vec![false; 4];
        must[0] = true;
        let partial = views.plan(now, &needs(0, &must, false));
        assert!(!views.heard(&partial, 0, &mut answer(&[], 0, 0, 5), now));
        let two = views.plan(now, &needs(1, &none, true));
        assert!(
            all_empty(&mut views, &two, 5),
            "second sweep, same versions"
        );
        let three = views.plan(now, &needs(1, &none, true));
        assert!(!all_empty(&mut views, &three, 6), "a shard changed");
    }

    /// A host scheduled by this process while a claim is in flight survives that claim's
    /// answer (which may predate it); one noted before the claim is replaced by the answer.
    #[test]
    fn hints_noted_during_a_claim_outlive_its_answer() {
        let now = Instant::now();
        let mut views = ShardViews::new(2);
        let none = vec![false; 2];
        views.scheduled(1, "http://before.test", now);
        let plan = views.plan(now, &needs(1, &none, false));
        assert!(!plan.sweep, "a due host is known");
        assert_eq!(plan.asked[1], Some(1));
        views.scheduled(1, "http://during.test", now);
        views.heard(&plan, 1, &mut answer(&["http://other.test"], 1, 0, 3), now);
        let names: Vec<&str> = views.candidates(1).collect();
        assert_eq!(names, vec!["http://other.test", "http://during.test"]);
        let next = views.plan(now, &needs(1, &none, false));
        views.heard(&next, 1, &mut answer(&[], 0, 1, 4), now);
        assert_eq!(views.candidates(1).count(), 0);
        assert_eq!(views.due_in(now), None);
        views.scheduled(0, "http://later.test", now + Duration::from_millis(30));
        assert_eq!(views.due_in(now), Some(Duration::ZERO), "a hint is due now");
    }
}
