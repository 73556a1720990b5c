#!/usr/bin/env bash
# Fuzz URL normalization for a bounded time (default 60 s): scripts/fuzz-normalize.sh [SECONDS]
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`); without them it says
# so and exits 0, since the bounded property tests (tests/normalize_props.rs) cover the same
# ground in every `cargo test`.
set -euo pipefail
seconds="${1:-60}"
cd "$(dirname "$0")/.."
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz-normalize: no nightly toolchain; skipped (install one: rustup toolchain install nightly)"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz-normalize: cargo-fuzz not installed; skipped (install it: cargo install cargo-fuzz)"
    exit 0
fi
echo "fuzz-normalize: fuzzing normalize for ${seconds}s"
exec cargo +nightly fuzz run --fuzz-dir fuzz-normalize normalize -- -max_total_time="$seconds"
