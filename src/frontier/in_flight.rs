//! The frontier's copies of the URLs it handed out and was not given back yet: [`InFlight`],
//! what a checkpoint records at the front of their hosts' queues, in the order they were
//! handed out.
//!
//! Guarantees: [`InFlight::items`] gives back every copy kept and not removed, equal to the
//! item handed out, in the order of the dispatch ids (hand-out order); a removal of an id not
//! kept changes nothing and says so.
//!
//! Why not a map of `QueuedUrl` clones (as before): a hand-out's clone was an allocation of
//! the URL's text, and its removal a free, on the admitting thread, once per URL (the scale
//! bench's malloc and free were ~12 % of all samples at 3e6 URLs, a share of them these).
//! Here the texts go back to back into one buffer, and the copies into a queue sorted by id
//! (ids grow, so a hand-out appends; a removal is a binary search and leaves a hole). The
//! holes are dropped from the front as they reach it, and all of them, with the buffer's
//! dead text, when they outnumber the live copies (so memory stays within about twice what
//! is in flight, whatever order dispatches come back in): amortized, a hand-out copies its
//! text once or twice and allocates nothing.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{HostId, QueuedUrl};

/// Dead entries and text tolerated beyond the live ones before they are all dropped.
const SLACK: usize = 1024;

/// A handed-out URL as kept: the item without its text, which is in [`InFlight`]'s buffer.
#[derive(Debug)]
struct Kept {
    host: HostId,
    start: usize,
    len: usize,
    depth: u32,
    parent: Option<Arc<str>>,
    redirect_hops: u32,
    attempts: u32,
}

/// The copies of the URLs in flight, by dispatch id (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// Sorted by id; `None` is a copy removed (a hole).
    kept: VecDeque<(u64, Option<Kept>)>,
    /// The kept URLs' texts, back to back, with the dead texts of removed ones.
    text: String,
    /// Copies kept, and the bytes of their texts.
    live: usize,
    live_text: usize,
}

impl InFlight {
    /// Keeps a copy of `item`, handed out as dispatch `id` (greater than any id kept before).
    pub(crate) fn insert(&mut self, id: u64, host: HostId, item: &QueuedUrl) {
        debug_assert!(self.kept.back().is_none_or(|&(last, _)| last < id));
        if self.text.len() > 2 * self.live_text + SLACK * 64 {
            self.compact();
        }
        let start = self.text.len();
        self.text.push_str(&item.url);
        self.live += 1;
        self.live_text += item.url.len();
        self.kept.push_back((
            id,
            Some(Kept {
                host,
                start,
                len: item.url.len(),
                depth: item.depth,
                parent: item.parent.clone(),
                redirect_hops: item.redirect_hops,
                attempts: item.attempts,
            }),
        ));
    }

    /// Forgets the copy of dispatch `id`; false if there was none.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let Ok(at) = self.kept.binary_search_by_key(&id, |&(k, _)| k) else {
            return false;
        };
        let Some(kept) = self.kept[at].1.take() else {
            return false;
        };
        self.live -= 1;
        self.live_text -= kept.len;
        while self.kept.front().is_some_and(|(_, k)| k.is_none()) {
            self.kept.pop_front();
        }
        if self.live == 0 {
            self.text.clear();
        } else if self.kept.len() > 2 * self.live + SLACK {
            self.compact();
        }
        true
    }

    /// Drops every hole and the dead text (the copies keep their order).
    fn compact(&mut self) {
        self.kept.retain(|(_, k)| k.is_some());
        let mut text = String::with_capacity(2 * self.live_text + SLACK * 64);
        for kept in self.kept.iter_mut().filter_map(|(_, k)| k.as_mut()) {
            let start = text.len();
            text.push_str(&self.text[kept.start..kept.start + kept.len]);
            kept.start = start;
        }
        self.text = text;
    }

    /// Copies kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Every copy kept, with its host, in the order handed out.
    pub(crate) fn items(&self) -> impl Iterator<Item = (HostId, QueuedUrl)> + '_ {
        self.kept.iter().filter_map(|(_, k)| k.as_ref()).map(|k| {
            (
                k.host,
                QueuedUrl {
                    url: self.text[k.start..k.start + k.len].to_string(),
                    depth: k.depth,
                    parent: k.parent.clone(),
                    redirect_hops: k.redirect_hops,
                    attempts: k.attempts,
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item(n: u64) -> QueuedUrl {
        QueuedUrl {
            url: format!("http://h{}.test/{}", n % 7, "x".repeat((n % 300) as usize)),
            depth: (n % 5) as u32,
            parent: (n % 2 == 0).then(|| Arc::from(format!("http://p{n}.test/"))),
            redirect_hops: (n % 3) as u32,
            attempts: (n % 4) as u32,
        }
    }

    proptest! {
        /// Whatever order dispatches come back in (many held long, so that holes and dead
        /// text pile up and are compacted), what is kept is exactly the items handed out and
        /// not removed, in hand-out order; removing twice or an unknown id says false.
        #[test]
        fn keeps_exactly_what_is_in_flight_in_hand_out_order(
            ops in proptest::collection::vec((any::<bool>(), 0usize..64), 1..3000),
        ) {
            let mut kept = InFlight::default();
            let mut model: Vec<(u64, HostId, QueuedUrl)> = Vec::new();
            let mut next = 0u64;
            for (hand_out, pick) in ops {
                if hand_out || model.is_empty() {
                    let it = item(next);
                    kept.insert(next, next % 7, &it);
                    model.push((next, next % 7, it));
                    next += 1;
                } else {
                    // Mostly the newest back first, so the oldest stay and holes build up.
                    let i = model.len() - 1 - pick % model.len();
                    let (id, _, _) = model.remove(i);
                    prop_assert!(kept.remove(id));
                    prop_assert!(!kept.remove(id));
                }
                prop_assert_eq!(kept.len(), model.len());
            }
            prop_assert!(!kept.remove(next + 1));
            let got: Vec<(HostId, QueuedUrl)> = kept.items().collect();
            let want: Vec<(HostId, QueuedUrl)> =
                model.into_iter().map(|(_, host, it)| (host, it)).collect();
            prop_assert_eq!(got, want);
            prop_assert!(kept.kept.len() <= 2 * kept.live + SLACK + 1);
        }
    }
}
