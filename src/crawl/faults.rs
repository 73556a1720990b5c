//! Fault injection for tests: make the crawl panic on a chosen URL, to prove that a panic
//! in a fetch task or a parse thread costs one URL (recorded with an error) and never the
//! crawl.
//!
//! Only debug builds read the switch, from the environment of the process
//! (`CRAWLER_FAULT=panic-fetch:URL` or `panic-parse:URL`; the same variable names the
//! checkpoint's crash points, see `checkpoint::fault`), so the end-to-end tests can set it
//! on the binary they start while a release build has no such switch at all. Read once at
//! the start of a crawl, not per URL.

/// Where to panic, if anywhere.
#[derive(Debug, Clone, Default)]
pub(crate) struct Faults {
    /// Panic in the fetch task of this URL.
    pub(crate) panic_fetch: Option<String>,
    /// Panic in the parse thread while parsing this URL.
    pub(crate) panic_parse: Option<String>,
}

impl Faults {
    /// The faults the environment asks for (none in a release build).
    pub(crate) fn from_env() -> Faults {
        if !cfg!(debug_assertions) {
            return Faults::default();
        }
        let Ok(spec) = std::env::var("CRAWLER_FAULT") else {
            return Faults::default();
        };
        let mut faults = Faults::default();
        if let Some(url) = spec.strip_prefix("panic-fetch:") {
            faults.panic_fetch = Some(url.to_string());
        } else if let Some(url) = spec.strip_prefix("panic-parse:") {
            faults.panic_parse = Some(url.to_string());
        } else if !crate::checkpoint::fault::POINTS
            .iter()
            .any(|point| spec.split(':').next() == Some(point))
        {
            // The crash points are the checkpoint module's (`checkpoint::fault`).
            tracing::warn!("CRAWLER_FAULT={spec:?} not understood; no fault injected");
        }
        faults
    }
}

/// The text of a panic's payload, for the record of the URL it cost.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}
