//! The items pushed to hosts' queues and not written to the log yet: [`Tails`], one arena for
//! every host, each host's items a chain through it in push order.
//!
//! Why: each host's tail was a vector in a box of its own, reached through the store's host
//! map both when pushed to and when the tails were written (each time they fill a sixteenth of
//! the budget: every ~16 k pushes at 64 MiB). At 1e6 hosts every one of those lookups is a
//! cache miss over ~100 MB of map, and the box and the vector were allocated and freed per
//! host and per round. Perf at 3e6 URLs of the scale bench: the writing's host-map lookups
//! ~4 % of all samples and the push's box ~3 %. Now a push appends its item to the arena and
//! links it from its host's last one (the host's entry keeps its chain's slot, found by the
//! lookup the push makes anyway), and writing the tails walks the chains in slot order, with
//! no lookup until each written entry is linked on disk (which needed one already).
//!
//! What stays exact: a chain holds its host's tail items in push order (each item links to
//! the next pushed to the same host; a pop takes the first); the host's entry says how many
//! (`tail_len`) and where its chain is (`tail_slot`, meaningful only while `tail_len` > 0), so
//! an emptied or written chain is never read again; a chain is written whole (its host may
//! appear once in a group, as before) and the arena is emptied only when no chain holds an
//! item. Holes left by items popped or written ahead of the rest are compacted away once they
//! outnumber the live items, slots unchanged.

use super::{item_bytes, QueuedUrl};

/// `tail_slot` of a host with no chain.
pub(super) const NO_TAIL: u32 = u32::MAX;
/// The end of a chain.
const END: u32 = u32::MAX;

/// An item of the arena (`None` once popped or written) and the next item of its host.
#[derive(Debug)]
struct Link {
    item: Option<QueuedUrl>,
    next: u32,
}

/// A host's chain: its first and last items in the arena (`END` when empty).
#[derive(Debug)]
struct Chain {
    host: u64,
    first: u32,
    last: u32,
}

/// Every host's tail; see the module doc.
#[derive(Debug, Default)]
pub(super) struct Tails {
    items: Vec<Link>,
    chains: Vec<Chain>,
    /// Items held (not popped, not written).
    live: usize,
}

impl Tails {
    /// Appends `item` to the chain in `slot`, or to a new chain of `host` when `slot` is
    /// [`NO_TAIL`]; returns the chain's slot.
    pub(super) fn push(&mut self, host: u64, slot: u32, item: QueuedUrl) -> u32 {
        let at = self.items.len() as u32;
        self.items.push(Link {
            item: Some(item),
            next: END,
        });
        self.live += 1;
        match self.chains.get_mut(slot as usize) {
            Some(chain) if chain.first != END && chain.host == host => {
                let last = chain.last as usize;
                chain.last = at;
                self.items[last].next = at;
                slot
            }
            _ => {
                self.chains.push(Chain {
                    host,
                    first: at,
                    last: at,
                });
                (self.chains.len() - 1) as u32
            }
        }
    }

    /// The first item of the chain in `slot`.
    pub(super) fn first(&self, slot: u32) -> Option<&QueuedUrl> {
        let chain = self.chains.get(slot as usize)?;
        self.items.get(chain.first as usize)?.item.as_ref()
    }

    /// Takes the first item of the chain in `slot`.
    pub(super) fn pop(&mut self, slot: u32) -> Option<QueuedUrl> {
        let chain = self.chains.get_mut(slot as usize)?;
        let link = self.items.get_mut(chain.first as usize)?;
        let item = link.item.take()?;
        chain.first = link.next;
        if chain.first == END {
            chain.last = END;
        }
        self.live -= 1;
        Some(item)
    }

    /// Chains made since the arena was last emptied (some may be empty).
    pub(super) fn slots(&self) -> usize {
        self.chains.len()
    }

    /// The host of the chain in `slot`.
    pub(super) fn host(&self, slot: u32) -> u64 {
        self.chains.get(slot as usize).map_or(0, |c| c.host)
    }

    /// The items of the chain in `slot`, in push order.
    pub(super) fn chain(&self, slot: u32) -> impl Iterator<Item = &QueuedUrl> + '_ {
        let mut at = self.chains.get(slot as usize).map_or(END, |c| c.first);
        std::iter::from_fn(move || {
            let link = self.items.get(at as usize)?;
            at = link.next;
            link.item.as_ref()
        })
    }

    /// Drops the items of the chain in `slot` (written to the log); returns how many there
    /// were and their [`item_bytes`].
    pub(super) fn drop_chain(&mut self, slot: u32) -> (u32, u64) {
        let Some(chain) = self.chains.get_mut(slot as usize) else {
            return (0, 0);
        };
        let (mut at, mut count, mut bytes) = (chain.first, 0u32, 0u64);
        chain.first = END;
        chain.last = END;
        while let Some(link) = self.items.get_mut(at as usize) {
            if let Some(item) = link.item.take() {
                count += 1;
                bytes += item_bytes(&item);
            }
            at = link.next;
        }
        self.live -= count as usize;
        (count, bytes)
    }

    /// Empties the arena once no chain holds an item (every slot is forgotten: callers hold
    /// none then, their `tail_len` being 0); compacts it when holes outnumber the items.
    pub(super) fn tidy(&mut self) {
        if self.live == 0 {
            self.items.clear();
            self.chains.clear();
            if self.items.capacity() > 1 << 16 {
                self.items = Vec::new();
                self.chains = Vec::new();
            }
        } else if self.items.len() > 2 * self.live + 4096 {
            let mut items = Vec::with_capacity(2 * self.live);
            for chain in &mut self.chains {
                let (mut at, mut last) = (chain.first, END);
                chain.first = END;
                while let Some(link) = self.items.get_mut(at as usize) {
                    at = link.next;
                    let Some(item) = link.item.take() else {
                        continue;
                    };
                    let to = items.len() as u32;
                    items.push(Link {
                        item: Some(item),
                        next: END,
                    });
                    match last {
                        END => chain.first = to,
                        prev => items[prev as usize].next = to,
                    }
                    last = to;
                }
                chain.last = last;
            }
            self.items = items;
        }
    }

    /// Bytes of the arena's arrays beyond what [`item_bytes`] counts for the items held.
    pub(super) fn memory_bytes(&self) -> u64 {
        (self.items.capacity() * std::mem::size_of::<Link>()
            + self.chains.capacity() * std::mem::size_of::<Chain>())
        .saturating_sub(self.live * std::mem::size_of::<QueuedUrl>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(n: u64) -> QueuedUrl {
        QueuedUrl::new(format!("https://h.test/{n}"), 1, None, 0)
    }

    fn urls<'a>(it: impl Iterator<Item = &'a QueuedUrl>) -> Vec<String> {
        it.map(|i| i.url.clone()).collect()
    }

    #[test]
    fn chains_keep_each_hosts_items_in_push_order_through_pops_writes_and_compaction() {
        let mut tails = Tails::default();
        let (mut a, mut b) = (NO_TAIL, NO_TAIL);
        for n in 0..6 {
            a = tails.push(1, a, item(n));
            b = tails.push(2, b, item(100 + n));
        }
        assert_eq!(tails.pop(a).map(|i| i.url), Some("https://h.test/0".into()));
        assert_eq!(
            tails.first(a).map(|i| i.url.as_str()),
            Some("https://h.test/1")
        );
        assert_eq!(urls(tails.chain(a)).len(), 5);
        assert_eq!(tails.drop_chain(b).0, 6);
        assert_eq!(tails.chain(b).count(), 0);
        // A host whose chain was written starts a new one.
        let b2 = tails.push(2, NO_TAIL, item(200));
        assert_ne!(b2, b);
        // Holes beyond the threshold: compacted, order and slots kept.
        for n in 6..5000 {
            let c = tails.push(3, NO_TAIL, item(n));
            tails.drop_chain(c);
        }
        tails.tidy();
        assert!(tails.items.len() < 100, "{}", tails.items.len());
        assert_eq!(
            urls(tails.chain(a)),
            (1..6)
                .map(|n| format!("https://h.test/{n}"))
                .collect::<Vec<_>>()
        );
        a = tails.push(1, a, item(6));
        assert_eq!(
            urls(tails.chain(a)).last().map(String::as_str),
            Some("https://h.test/6")
        );
        assert_eq!(
            urls(tails.chain(b2)),
            vec!["https://h.test/200".to_string()]
        );
        while tails.pop(a).is_some() {}
        tails.pop(b2);
        tails.tidy();
        assert_eq!((tails.slots(), tails.items.len()), (0, 0));
    }
}
