//! Sizing: from (n, p) or (n, memory budget) to the filter that is really built.
//!
//! The classic formulas (m = −n·ln p / (ln 2)², k = round(m/n · ln 2)) assume every probe
//! lands anywhere in the whole array. [`SeenSet`](super::SeenSet) confines a key's probes to
//! one 512-bit block (one cache line) of which 511 bits are probe-able, so the fpp has to be
//! computed over the blocks' uneven loads instead (Putze, Sanders & Singler, "Cache-, Hash-
//! and Space-Efficient Bloom Filters", 2007):
//!
//! ```text
//!   λ      = n / blocks                               mean keys per block
//!   f(j)   = (1 − (1 − 1/511)^(k·j))^k                fpp inside a block holding j keys
//!   fpp    = Σ_j Poisson(j; λ) · f(j)
//! ```
//!
//! The sizing searches, for every k near the classic one, the fewest blocks whose fpp is at
//! most p / [`FPP_HEADROOM`], and keeps the smallest filter. The headroom covers the one thing
//! the model rounds off: f(j) uses the mean fill of a block, while the true in-block fpp is
//! the mean of fill^k, which is larger (Jensen); simulated over 4,000,000 absent keys with
//! independent probe positions the measured fpp was 1–4 % above the model, and so it was for
//! the real filter over 10^7 absent URLs at p = 10^-2, 10^-3 and 10^-4.

use std::fmt::Write as _;

use crate::quantity::HumanBytes;

/// Bits in one block: one x86-64 cache line.
pub const BLOCK_BITS: u64 = 512;
/// Bits of a block that probes can hit; the 512th is the block's insert lock.
pub const PROBE_BITS: u64 = BLOCK_BITS - 1;
/// Bytes in one block.
pub(crate) const BLOCK_BYTES: u64 = BLOCK_BITS / 8;
/// The model fpp of a planned filter is kept this factor below the configured p, so that the
/// measured fpp (1–4 % above the model, in simulation and over 10^7 absent URLs; see the
/// module doc) still meets p.
pub const FPP_HEADROOM: f64 = 1.08;
/// More probes than this never help a 511-bit block (the optimum is ≈ 16 at p = 1e-5).
pub const MAX_K: u32 = 48;
/// Fixed MurmurHash3 seed, stored in the file so a saved filter answers the same tomorrow.
pub const DEFAULT_SEED: u32 = 0x5EE2_2026;
/// Assumed size of one URL stored as a raw string, for the exact-set comparison.
const RAW_URL_BYTES: u64 = 80;

/// How the bit array is organised; stored in the file so a future layout is never misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// 512-bit cache-line blocks, bit 511 of each block its lock, k probes in 511 bits.
    Blocked512,
}

impl Layout {
    /// The number written in the file header.
    pub(crate) fn code(self) -> u32 {
        match self {
            Layout::Blocked512 => 1,
        }
    }

    /// The layout a file header number stands for, if any.
    pub(crate) fn from_code(code: u32) -> Option<Layout> {
        match code {
            1 => Some(Layout::Blocked512),
            _ => None,
        }
    }
}

/// Why a plan was refused; each message says what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("false-positive rate {p} is outside (0, 1); give a probability such as 0.001 (one URL in a thousand wrongly skipped)")]
    FppOutOfRange { p: f64 },
    #[error("max URLs is 0; the seen-set must be sized for at least one URL (set --max-urls / max_urls)")]
    ZeroUrls,
    #[error("a memory budget of {budget} ({bytes} bytes) for {n} URLs gives a false-positive rate of {fpp:.3} (above 0.5, useless); give at least {needed} or lower max URLs", budget = HumanBytes(*bytes), needed = HumanBytes(*needed_bytes))]
    BudgetTooSmall {
        n: u64,
        bytes: u64,
        fpp: f64,
        needed_bytes: u64,
    },
    #[error("the filter would need {need} ({bytes} bytes) but this machine has {have} of memory; raise the false-positive rate or lower max URLs", need = HumanBytes(*bytes), have = HumanBytes(*machine_bytes))]
    LargerThanMachine { bytes: u64, machine_bytes: u64 },
    #[error(
        "the plan's fields disagree: {reason}; build plans with Plan::for_fpp or Plan::for_memory"
    )]
    Inconsistent { reason: String },
}

/// The filter to build for a crawl: the classic optimum for reference and the blocked filter
/// that is really allocated.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// URLs the filter is sized for (the crawl's `max_urls`).
    pub(crate) n: u64,
    /// The false-positive rate asked for (for a memory-budget plan: the one the budget gives).
    pub(crate) target_fpp: f64,
    /// Bits in the array really built, lock bits included (a multiple of 512).
    pub m_bits: u64,
    /// Probes per key.
    pub k: u32,
    /// Bytes of the array really built (m_bits / 8).
    pub bytes: u64,
    /// Model fpp of the filter really built once it holds n keys.
    pub expected_fpp: f64,
    /// How the bits are organised.
    pub(crate) layout: Layout,
    /// Number of 512-bit blocks.
    pub(crate) blocks: u64,
    /// MurmurHash3 seed.
    pub(crate) seed: u32,
}

impl Plan {
    /// The smallest filter whose fpp after n insertions is at most p.
    pub fn for_fpp(n: u64, p: f64) -> Result<Plan, PlanError> {
        check_n_p(n, p)?;
        let goal = p / FPP_HEADROOM;
        let (_, classic_k) = classic_m_k(n, p);
        let mut best: Option<(u64, u32)> = None;
        for k in 1..=MAX_K.min(classic_k + 6) {
            let Some(blocks) = fewest_blocks(n, k, goal) else {
                continue;
            };
            if best.is_none_or(|(b, _)| blocks < b) {
                best = Some((blocks, k));
            }
        }
        // fewest_blocks only gives up past 2^57 bytes: more than any machine has.
        let (blocks, k) = best.ok_or(PlanError::LargerThanMachine {
            bytes: u64::MAX,
            machine_bytes: machine_memory_bytes(),
        })?;
        Plan::build(n, p, blocks, k)
    }

    /// The lowest fpp a filter of at most `bytes` bytes gives after n insertions.
    pub fn for_memory(n: u64, bytes: u64) -> Result<Plan, PlanError> {
        if n == 0 {
            return Err(PlanError::ZeroUrls);
        }
        let blocks = bytes / BLOCK_BYTES;
        let (k, fpp) = if blocks == 0 {
            (1, 1.0)
        } else {
            best_k(n, blocks)
        };
        if fpp > 0.5 {
            let needed_bytes = Plan::for_fpp(n, 0.5).map(|p| p.bytes).unwrap_or(u64::MAX);
            return Err(PlanError::BudgetTooSmall {
                n,
                bytes,
                fpp,
                needed_bytes,
            });
        }
        Plan::build(n, fpp, blocks, k)
    }

    /// A plan with every parameter given (from a file header); checks only the machine.
    pub(crate) fn build(n: u64, target_fpp: f64, blocks: u64, k: u32) -> Result<Plan, PlanError> {
        let machine_bytes = machine_memory_bytes();
        // m in bits must fit a u64 too, even where the machine's memory cannot be read.
        let (Some(bytes), Some(m_bits)) = (
            blocks.checked_mul(BLOCK_BYTES),
            blocks.checked_mul(BLOCK_BITS),
        ) else {
            return Err(PlanError::LargerThanMachine {
                bytes: u64::MAX,
                machine_bytes,
            });
        };
        if bytes > machine_bytes {
            return Err(PlanError::LargerThanMachine {
                bytes,
                machine_bytes,
            });
        }
        Ok(Plan {
            n,
            target_fpp,
            m_bits,
            k,
            bytes,
            expected_fpp: blocked_fpp(n, blocks, k),
            layout: Layout::Blocked512,
            blocks,
            seed: DEFAULT_SEED,
        })
    }

    /// Refuses a plan whose public fields were edited into something no filter can be.
    pub(crate) fn check_consistent(&self) -> Result<(), PlanError> {
        let reason = if self.blocks == 0 {
            "blocks is 0".to_string()
        } else if self.blocks.checked_mul(BLOCK_BITS) != Some(self.m_bits) {
            format!("m_bits {} is not blocks {} × 512", self.m_bits, self.blocks)
        } else if self.m_bits / 8 != self.bytes {
            format!("bytes {} is not m_bits {} / 8", self.bytes, self.m_bits)
        } else if self.k == 0 || self.k > MAX_K {
            format!("k {} is outside 1..={MAX_K}", self.k)
        } else {
            return Ok(());
        };
        Err(PlanError::Inconsistent { reason })
    }

    /// The URLs the filter was sized for.
    pub fn sized_for(&self) -> u64 {
        self.n
    }

    /// The model fpp of this filter once it holds `n` keys (for a crawl extended past the
    /// `max_urls` it was sized for).
    pub fn expected_fpp_at(&self, n: u64) -> f64 {
        blocked_fpp(n, self.blocks, self.k)
    }

    /// One line for the start-up log.
    pub fn summary(&self) -> String {
        format!(
            "seen-set: m = {} bits ({}), k = {}, {:.2} bits/URL for {} URLs, expected fpp {:.3e} (target {:.3e})",
            self.m_bits,
            HumanBytes(self.bytes),
            self.k,
            self.m_bits as f64 / self.n as f64,
            self.n,
            self.expected_fpp,
            self.target_fpp,
        )
    }

    /// The multi-line text of `crawler plan`: classic optimum, the filter really built, the
    /// information-theoretic minimum and what an exact set would cost.
    pub fn report(&self) -> String {
        let n = self.n;
        let p = self.target_fpp;
        let (classic_m, classic_k) = classic_m_k(n, p);
        let classic_bytes = classic_m.div_ceil(8);
        let classic_fpp = classic_fpp(n, classic_m, classic_k);
        let min_bits = n as f64 * (1.0 / p).log2();
        let min_bytes = (min_bits / 8.0).ceil() as u64;
        let hashset_bytes = hashset_u64_bytes(n);
        let raw_bytes = n.saturating_mul(RAW_URL_BYTES);
        let mut out = String::new();
        // Writing to a String cannot fail.
        // A typed rate (1e-3) is shown as typed; one derived from a budget is rounded.
        let shown_p = match format!("{p:e}") {
            short if short.len() <= 8 => short,
            _ => format!("{p:.3e} (the lowest that fits the memory budget)"),
        };
        let _ = writeln!(
            out,
            "Seen-set plan for {n} URLs at false-positive rate {shown_p}"
        );
        let _ = writeln!(
            out,
            "  classic Bloom optimum (bits spread over the whole array):"
        );
        let _ = writeln!(
            out,
            "    m = {classic_m} bits = {} ({classic_bytes} bytes), k = {classic_k}, {:.2} bits/URL, fpp {classic_fpp:.3e}",
            HumanBytes(classic_bytes),
            classic_m as f64 / n as f64,
        );
        let _ = writeln!(
            out,
            "  filter really built (blocked: one 512-bit cache line per URL, bit 511 its insert lock):"
        );
        let _ = writeln!(
            out,
            "    m = {} bits = {} ({} bytes) in {} blocks, k = {}, {:.2} bits/URL, expected fpp {:.3e}",
            self.m_bits,
            HumanBytes(self.bytes),
            self.bytes,
            self.blocks,
            self.k,
            self.m_bits as f64 / n as f64,
            self.expected_fpp,
        );
        let _ = writeln!(
            out,
            "    {:.3}x the classic optimum: the price of one cache miss per URL and an exactly-once insert",
            self.bytes as f64 / classic_bytes as f64,
        );
        let _ = writeln!(
            out,
            "  information-theoretic minimum n*log2(1/p): {min_bits:.0} bits = {} ({:.2} bits/URL)",
            HumanBytes(min_bytes),
            min_bits / n as f64,
        );
        let _ = writeln!(out, "  an exact set of the same URLs instead:");
        let _ = writeln!(
            out,
            "    HashSet<u64> of 64-bit fingerprints: {} ({hashset_bytes} bytes; still ~n/2^64 false positives)",
            HumanBytes(hashset_bytes),
        );
        let _ = writeln!(
            out,
            "    raw URL strings at {RAW_URL_BYTES} B/URL: {} ({raw_bytes} bytes, before any index)",
            HumanBytes(raw_bytes),
        );
        out
    }
}

fn check_n_p(n: u64, p: f64) -> Result<(), PlanError> {
    if !(p > 0.0 && p < 1.0) {
        return Err(PlanError::FppOutOfRange { p });
    }
    if n == 0 {
        return Err(PlanError::ZeroUrls);
    }
    Ok(())
}

/// Classic optimum: m = ⌈−n·ln p / (ln 2)²⌉ bits, k = round(m/n · ln 2), at least 1.
pub fn classic_m_k(n: u64, p: f64) -> (u64, u32) {
    let ln2 = std::f64::consts::LN_2;
    let m = (-(n as f64) * p.ln() / (ln2 * ln2)).ceil().max(1.0);
    let k = (m / n as f64 * ln2).round().max(1.0);
    (m as u64, k as u32)
}

/// Classic fpp (1 − e^(−k·n/m))^k of an unblocked filter.
pub fn classic_fpp(n: u64, m_bits: u64, k: u32) -> f64 {
    (1.0 - (-(k as f64) * n as f64 / m_bits as f64).exp()).powi(k as i32)
}

/// Model fpp of the blocked filter with `blocks` blocks and k probes after n insertions.
pub fn blocked_fpp(n: u64, blocks: u64, k: u32) -> f64 {
    if blocks == 0 {
        return 1.0;
    }
    blocked_fpp_at_load(n as f64 / blocks as f64, k)
}

/// Σ_j Poisson(j; λ) · (1 − (1 − 1/511)^(k·j))^k, for λ mean keys per block.
///
/// The Poisson weights are built outwards from the mode and normalised by their own sum,
/// so λ in the hundreds (a tiny budget) neither underflows e^(−λ) nor loses mass.
pub fn blocked_fpp_at_load(lambda: f64, k: u32) -> f64 {
    if lambda <= 0.0 {
        return 0.0;
    }
    // Probability that one key's k probes leave a given bit clear.
    let clear_per_key = (1.0 - 1.0 / PROBE_BITS as f64).powi(k as i32);
    let in_block = |j: u64| (1.0 - clear_per_key.powf(j as f64)).powi(k as i32);
    // Beyond thousands of keys per block every block is saturated, and summing the ~9·√λ
    // terms that matter would take time proportional to a corrupt header's whim.
    if lambda > 10_000.0 {
        return in_block(lambda as u64);
    }
    let mode = lambda.floor() as u64;
    let (mut weighted, mut total) = (in_block(mode), 1.0);
    // Upwards from the mode.
    let mut w = 1.0;
    let mut j = mode;
    loop {
        j += 1;
        w *= lambda / j as f64;
        if w < 1e-17 {
            break;
        }
        weighted += w * in_block(j);
        total += w;
    }
    // Downwards from the mode.
    let mut w = 1.0;
    let mut j = mode;
    while j > 0 {
        w *= j as f64 / lambda;
        j -= 1;
        if w < 1e-17 {
            break;
        }
        weighted += w * in_block(j);
        total += w;
    }
    (weighted / total).min(1.0)
}

/// Fewest blocks giving fpp ≤ goal for n keys with k probes; None past 2^51 blocks.
fn fewest_blocks(n: u64, k: u32, goal: f64) -> Option<u64> {
    let fits = |blocks: u64| blocked_fpp(n, blocks, k) <= goal;
    let mut hi = n.div_ceil(64).max(1);
    while !fits(hi) {
        if hi >= 1 << 51 {
            return None;
        }
        hi *= 2;
    }
    let mut lo = hi / 2; // does not fit (or 0)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// The k with the lowest model fpp for n keys in `blocks` blocks, with that fpp.
fn best_k(n: u64, blocks: u64) -> (u32, f64) {
    (1..=MAX_K)
        .map(|k| (k, blocked_fpp(n, blocks, k)))
        .fold(
            (1, f64::INFINITY),
            |best, cur| {
                if cur.1 < best.1 {
                    cur
                } else {
                    best
                }
            },
        )
}

/// Memory of a `HashSet<u64>` holding n fingerprints: hashbrown keeps a power-of-two number
/// of buckets at most 7/8 full, each bucket 8 bytes of key and 1 control byte.
fn hashset_u64_bytes(n: u64) -> u64 {
    let buckets = (n.saturating_mul(8) / 7 + 1).next_power_of_two();
    buckets.saturating_mul(9).saturating_add(16)
}

/// Physical memory of this machine; u64::MAX when it cannot be read (then nothing is refused
/// for size and the allocation itself reports failure).
pub fn machine_memory_bytes() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads system configuration.
        let (pages, page_size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && page_size > 0 {
            return (pages as u64).saturating_mul(page_size as u64);
        }
    }
    u64::MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_optimum_for_1e8_at_1e_3_is_171_mib_k_10() {
        let (m, k) = classic_m_k(100_000_000, 0.001);
        assert_eq!(k, 10);
        assert_eq!(HumanBytes(m.div_ceil(8)).to_string(), "171.4 MiB");
        let exact = 1e8 * 1000f64.ln() / std::f64::consts::LN_2.powi(2);
        assert!((m as f64 - exact).abs() < 1.0);
    }

    #[test]
    fn blocked_model_agrees_with_simulation_figures() {
        // Simulated (4M absent keys, independent in-block probes, 511 probe bits):
        // 14.38 bits/key, k=10 -> 0.00164; 17.2 bits/key, k=11 -> 0.00056; 9.59, k=7 -> 0.0119.
        for (bits_per_key, k, simulated) in
            [(14.38, 10, 0.00164), (17.2, 11, 0.00056), (9.59, 7, 0.0119)]
        {
            let lambda = BLOCK_BITS as f64 / bits_per_key;
            let model = blocked_fpp_at_load(lambda, k);
            assert!(
                model <= simulated && model > simulated * 0.93,
                "{bits_per_key} bits/key k={k}: model {model} vs simulated {simulated}"
            );
        }
    }

    #[test]
    fn poisson_sum_is_stable_for_huge_loads() {
        // λ = 2000 keys per block: e^-λ underflows, the sum must not.
        let f = blocked_fpp_at_load(2000.0, 2);
        assert!(f > 0.99 && f <= 1.0, "{f}");
        assert_eq!(blocked_fpp_at_load(0.0, 5), 0.0);
    }

    #[test]
    fn for_fpp_meets_target_within_1_2x_classic_at_1e_3() {
        for n in [1_000, 100_000, 10_000_000, 100_000_000] {
            let plan = Plan::for_fpp(n, 0.001).unwrap();
            let (m, _) = classic_m_k(n, 0.001);
            assert!(plan.expected_fpp <= 0.001 / FPP_HEADROOM, "{plan:?}");
            let ratio = plan.m_bits as f64 / m as f64;
            assert!(ratio <= 1.2, "n={n}: {ratio}");
            assert_eq!(plan.bytes * 8, plan.m_bits);
            assert_eq!(plan.blocks * BLOCK_BITS, plan.m_bits);
        }
    }

    #[test]
    fn for_fpp_is_minimal() {
        let plan = Plan::for_fpp(1_000_000, 0.01).unwrap();
        assert!(blocked_fpp(1_000_000, plan.blocks - 1, plan.k) > 0.01 / FPP_HEADROOM);
    }

    #[test]
    fn for_memory_fits_budget_and_is_best_k() {
        let plan = Plan::for_memory(10_000_000, 32 << 20).unwrap();
        assert!(plan.bytes <= 32 << 20 && plan.bytes > (32 << 20) - 64);
        for k in 1..=MAX_K {
            assert!(blocked_fpp(10_000_000, plan.blocks, k) >= plan.expected_fpp);
        }
        assert_eq!(plan.target_fpp, plan.expected_fpp);
        // Round trip: the fpp this budget gives needs no more than this budget.
        let back = Plan::for_fpp(10_000_000, plan.expected_fpp * FPP_HEADROOM).unwrap();
        assert!(back.bytes <= plan.bytes + 64, "{back:?} vs {plan:?}");
    }

    #[test]
    fn nonsense_is_refused_with_reasons() {
        for p in [0.0, 1.0, -0.1, 1.5, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                Plan::for_fpp(10, p),
                Err(PlanError::FppOutOfRange { .. })
            ));
        }
        assert_eq!(Plan::for_fpp(0, 0.01), Err(PlanError::ZeroUrls));
        assert_eq!(Plan::for_memory(0, 1 << 20), Err(PlanError::ZeroUrls));
        let err = Plan::for_memory(1_000_000_000, 1 << 20).unwrap_err();
        assert!(matches!(err, PlanError::BudgetTooSmall { .. }), "{err}");
        assert!(err.to_string().contains("give at least"), "{err}");
        assert!(matches!(
            Plan::for_memory(10, 10),
            Err(PlanError::BudgetTooSmall { .. })
        ));
        assert!(matches!(
            Plan::for_memory(10, u64::MAX),
            Err(PlanError::LargerThanMachine { .. })
        ));
        assert!(matches!(
            Plan::build(10, 0.1, u64::MAX / 64, 3),
            Err(PlanError::LargerThanMachine { .. })
        ));
        assert!(matches!(
            Plan::for_fpp(u64::MAX, 0.5),
            Err(PlanError::LargerThanMachine { .. })
        ));
        let err = Plan::for_fpp(1 << 50, 1e-9).unwrap_err();
        assert!(matches!(err, PlanError::LargerThanMachine { .. }), "{err}");
        assert!(err.to_string().contains("this machine has"), "{err}");
    }

    #[test]
    fn report_shows_classic_optimum_and_built_filter() {
        let plan = Plan::for_fpp(100_000_000, 0.001).unwrap();
        let report = plan.report();
        assert!(report.contains("171.4 MiB"), "{report}");
        assert!(report.contains("k = 10,"), "{report}");
        assert!(report.contains("bits/URL"), "{report}");
        assert!(report.contains("HashSet<u64>"), "{report}");
        assert!(report.contains("7.5 GiB"), "{report}");
        assert!(plan.summary().contains(&format!("k = {}", plan.k)));
    }

    #[test]
    fn edited_plans_are_refused_not_panicked_on() {
        let good = Plan::for_fpp(1000, 0.01).unwrap();
        assert_eq!(good.check_consistent(), Ok(()));
        let edits: [fn(&mut Plan); 4] = [
            |p| p.blocks = 0,
            |p| p.m_bits += 1,
            |p| p.bytes *= 2,
            |p| p.k = 0,
        ];
        for edit in edits {
            let mut plan = good.clone();
            edit(&mut plan);
            let err = plan.check_consistent().unwrap_err();
            assert!(err.to_string().contains("disagree"), "{err}");
        }
    }
}
