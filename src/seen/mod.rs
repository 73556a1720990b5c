//! The URL-seen set: a concurrent Bloom filter (being built).
