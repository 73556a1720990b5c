//! What can go wrong building, saving or loading a seen-set; file errors name the file, and
//! an I/O error's cause is its [`source`](std::error::Error::source), not part of its message.

use std::path::PathBuf;

use super::plan::PlanError;
use crate::durable::IoAt;

/// Why a seen-set could not be built, saved or loaded. Every way a file can be damaged has
/// its own variant, so a refused checkpoint says what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum SeenError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("cannot allocate {bytes} bytes for the seen-set bit array; lower max URLs or raise the false-positive rate")]
    OutOfMemory { bytes: u64 },
    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a seen-set file: it starts with {found:02x?}, not the magic \"CRWLSEEN\"", path.display())]
    BadMagic { path: PathBuf, found: [u8; 8] },
    #[error("{} has seen-set format version {found}; this build reads version {supported} only", path.display())]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{} is truncated: {expected} bytes expected, {found} found", path.display())]
    Truncated {
        path: PathBuf,
        expected: u64,
        found: u64,
    },
    #[error("{} has the wrong size: its header describes {expected} bytes, the file has {found}", path.display())]
    WrongSize {
        path: PathBuf,
        expected: u64,
        found: u64,
    },
    #[error("{} has an impossible {field} = {found} in its header ({expected})", path.display())]
    BadParameters {
        path: PathBuf,
        field: &'static str,
        found: String,
        expected: &'static str,
    },
    #[error("{} is corrupt: its checksum is {stored:#018x} but its contents hash to {computed:#018x}", path.display())]
    ChecksumMismatch {
        path: PathBuf,
        stored: u64,
        computed: u64,
    },
    #[error("{} is corrupt: the lock bit of block {block} is set (a saved filter never holds a lock)", path.display())]
    LockBitSet { path: PathBuf, block: u64 },
}

impl From<IoAt> for SeenError {
    fn from(
        IoAt {
            action,
            path,
            source,
        }: IoAt,
    ) -> SeenError {
        SeenError::Io {
            action,
            path,
            source,
        }
    }
}
