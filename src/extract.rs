//! Link extraction from HTML (being built).
