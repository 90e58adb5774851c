//! The library's error type.

/// Everything the library can fail with. Messages name the input and say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(
        "unknown profile `{0}`: use one of default, seed000, tf, tfidf, keywords, bigram, char3"
    )]
    UnknownProfile(String),

    #[error("unknown method `{0}`: use minhash or simhash")]
    UnknownMethod(String),

    #[error("threshold {0} is out of range: give an estimated Jaccard similarity above 0 and at most 1 (e.g. 0.3)")]
    ThresholdOutOfRange(f64),

    #[error("threshold `{0}` is not a number: give an estimated Jaccard similarity above 0 and at most 1 (e.g. 0.3)")]
    ThresholdNotANumber(String),

    #[error("give a distance k (SimHash) or a threshold (MinHash), not both")]
    ToleranceConflict,

    #[error("distance k = {k} is not supported: at most {max} (k + 1 blocks of at least 8 bits)")]
    UnsupportedDistance { k: u32, max: u32 },

    #[error("I/O error on {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Result with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
