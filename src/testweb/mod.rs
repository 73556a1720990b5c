//! The synthetic web used by tests and benchmarks (being built).
