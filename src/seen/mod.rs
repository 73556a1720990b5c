//! Placeholder for the URL-seen set while the Bloom filter is built on its own branch:
//! the same interface, backed by a locked exact set. Replaced by the real filter.
#![allow(missing_docs)]

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum SeenError {
    #[error("{0}")]
    Other(String),
}
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Invalid(String),
}
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub n: u64,
    pub target_fpp: f64,
    pub m_bits: u64,
    pub k: u32,
    pub bytes: u64,
    pub expected_fpp: f64,
}
impl Plan {
    pub fn for_fpp(n: u64, p: f64) -> Result<Plan, PlanError> {
        if n == 0 || !(p > 0.0 && p < 1.0) {
            return Err(PlanError::Invalid("bad".into()));
        }
        let m = (-(n as f64) * p.ln() / (2f64.ln().powi(2))).ceil() as u64;
        Ok(Plan {
            n,
            target_fpp: p,
            m_bits: m,
            k: 10,
            bytes: m / 8,
            expected_fpp: p,
        })
    }
    pub fn for_memory(n: u64, bytes: u64) -> Result<Plan, PlanError> {
        Self::for_fpp(
            n,
            (-(bytes as f64 * 8.0 / n as f64) * 2f64.ln().powi(2)).exp(),
        )
    }
    pub fn summary(&self) -> String {
        format!(
            "m={} k={} bytes={} fpp={}",
            self.m_bits, self.k, self.bytes, self.expected_fpp
        )
    }
    pub fn report(&self) -> String {
        self.summary()
    }
}
#[derive(Debug, Clone, Copy)]
pub struct SeenStats {
    pub insertions: u64,
    pub bits_set: u64,
    pub m_bits: u64,
    pub k: u32,
    pub fill: f64,
    pub estimated_fpp: f64,
}
pub struct SeenSet {
    plan: Plan,
    set: Mutex<HashSet<Vec<u8>>>,
}
impl SeenSet {
    pub fn new(plan: Plan) -> Result<SeenSet, SeenError> {
        Ok(SeenSet {
            plan,
            set: Mutex::new(HashSet::new()),
        })
    }
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    pub fn insert_new(&self, key: &[u8]) -> bool {
        self.set.lock().unwrap().insert(key.to_vec())
    }
    pub fn contains(&self, key: &[u8]) -> bool {
        self.set.lock().unwrap().contains(key)
    }
    pub fn insert_new_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        out.clear();
        for k in keys {
            out.push(self.insert_new(k));
        }
    }
    pub fn stats(&self) -> SeenStats {
        let n = self.set.lock().unwrap().len() as u64;
        SeenStats {
            insertions: n,
            bits_set: 0,
            m_bits: self.plan.m_bits,
            k: self.plan.k,
            fill: 0.0,
            estimated_fpp: 0.0,
        }
    }
    pub fn save(&self, _path: &Path) -> Result<(), SeenError> {
        Err(SeenError::Other("not yet".into()))
    }
    pub fn load(_path: &Path) -> Result<SeenSet, SeenError> {
        Err(SeenError::Other("not yet".into()))
    }
}
