//! Every related pair of a set of sketches, in memory: the engine of `neardup dedupe`, one
//! module per method. SimHash ([`simhash`]): every pair within distance k, exactly, by the
//! pigeonhole blocks. MinHash ([`minhash`]): every pair that shares a band, or (with
//! containment) agrees on enough minima, judged by the one relation rule
//! ([`crate::relation::MatchRule`]). Aligned ([`aligned`]): MinHash's candidates, related by
//! aligning their texts ([`crate::relation::AlignRule`]).

pub mod aligned;
pub mod minhash;
pub mod simhash;
