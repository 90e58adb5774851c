//! # neardup
//!
//! Near-duplicate detection for news articles (Chinese first) with two methods behind one
//! shape ([`method`]): MinHash over word shingles (the default) and 64-bit SimHash.
//!
//! - [`Fingerprinter`] turns an article (plain text or HTML) into a [`SimHash`] and/or a
//!   MinHash [`Signature`] in one pass ([`Fingerprinter::sketch_fields`]), or says why the
//!   text is too short to have a meaningful one.
//! - [`minhash`] holds signatures, LSH band keys, estimated Jaccard similarity and the
//!   in-memory all-pairs of `neardup dedupe`.
//! - [`simhash`] holds the value type, Hamming distance and the pigeonhole [`BlockLayout`]
//!   that makes "every fingerprint within distance k" an exact lookup.
//! - [`input`] reads JSON Lines articles with line-numbered errors.
//! - [`es`] stores fingerprints next to articles in Elasticsearch and keeps them current
//!   ([`es::EsIndexer`], [`es::Worker`]).
//! - [`store`] is the local near-duplicate index: persistent, crash-safe, no server.
//! - [`AllPairs`] finds every pair within distance k in memory (`neardup dedupe`).
//!
//! ```
//! use neardup::{Fingerprinter, Profile};
//!
//! let fp = Fingerprinter::for_profile(Profile::Default);
//! let text = "青禾市图书馆完成为期半年的改造后重新开放。改造后的图书馆新增自习座位三百个，\
//!     延长夜间开放时间至晚上十点，并设立少儿阅读区、老年人阅览室和数字资源体验区。馆长介绍，\
//!     此次改造共投入资金一千二百万元，新增图书八万册，全年预计接待读者超过六十万人次。\
//!     市民王女士表示，新馆环境明亮安静，带孩子来看书非常方便。";
//! let a = fp.fingerprint(text).unwrap();
//! let b = fp.fingerprint(&text.replace("非常方便", "十分方便")).unwrap();
//! assert!(a.simhash.distance(b.simhash) <= 3);
//! assert!(fp.fingerprint("快讯").is_err()); // too short: no fingerprint, and a reason
//! ```

// The command line's modules name the library `neardup::…`, as any user of it does.
extern crate self as neardup;

// The facade: one way in for an embedder. Each concern is a crate of its own (ARCHITECTURE.md
// draws the graph); their modules keep the paths they always had here.
pub use neardup_core::*;
#[cfg(feature = "es")]
pub use neardup_es as es;
pub use neardup_eval as eval;
#[cfg(feature = "serve")]
pub use neardup_serve as serve;
#[cfg(feature = "store")]
pub use neardup_store as store;
#[cfg(feature = "store")]
pub use neardup_store::Store;

#[cfg(feature = "cli")]
pub mod cli;

/// Compiles the Rust examples of `docs/elasticsearch.md` (the overview of the Elasticsearch
/// pages), so the guide cannot drift from the API. The examples name the library as its
/// users do (`neardup::es::…`), so they are compiled here, in the facade.
#[cfg(doctest)]
#[doc = include_str!("../docs/elasticsearch.md")]
pub struct ElasticsearchGuide;

/// Compiles the Rust example of `docs/how-to/write-from-an-article-service.md` (`EsIndexer`).
#[cfg(doctest)]
#[doc = include_str!("../docs/how-to/write-from-an-article-service.md")]
pub struct WriteFromAnArticleServiceGuide;

/// Compiles the Rust example of `docs/how-to/find-near-duplicates.md` (`Similar`).
#[cfg(doctest)]
#[doc = include_str!("../docs/how-to/find-near-duplicates.md")]
pub struct FindNearDuplicatesGuide;
