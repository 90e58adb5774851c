//! # neardup
//!
//! Near-duplicate detection for news articles (Chinese first) with 64-bit SimHash.
//!
//! - [`Fingerprinter`] turns an article (plain text or HTML) into a [`SimHash`], or says why
//!   the text is too short to have a meaningful one.
//! - [`simhash`] holds the value type, Hamming distance and the pigeonhole [`BlockLayout`]
//!   that makes "every fingerprint within distance k" an exact lookup.
//! - [`input`] reads JSON Lines articles with line-numbered errors.
//!
//! ```
//! use neardup::{Fingerprinter, Profile};
//!
//! let fp = Fingerprinter::for_profile(Profile::Default);
//! let a = fp.fingerprint("市图书馆完成改造后重新开放，新增自习座位三百个，延长夜间开放时间，并设立少儿阅读区和数字资源体验区，方便市民借阅。").unwrap();
//! let b = fp.fingerprint("市图书馆完成改造后重新开放，新增自习座位三百个，延长夜间开放时间，并设立少儿阅读区和数字资源体验区，方便广大市民借阅。").unwrap();
//! assert!(a.simhash.distance(b.simhash) <= 3);
//! assert!(fp.fingerprint("快讯").is_err()); // too short: no fingerprint, and a reason
//! ```

pub mod error;
pub mod fingerprint;
pub mod hashing;
pub mod input;
pub mod pipeline;
pub mod simhash;
pub mod text;

pub use error::{Error, Result};
pub use fingerprint::{
    Fingerprint, FingerprintConfig, Fingerprinter, Outcome, Profile, Thresholds, TooShort,
};
pub use simhash::{hamming, BlockLayout, SimHash};
