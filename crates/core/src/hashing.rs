//! The word hash of the `default` profile and hash maps keyed by it.

use std::hash::{BuildHasher, Hasher};

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed of the default word hash. Part of the fingerprint version: never change it without
/// bumping the version.
pub const WORD_HASH_SEED: u64 = 0;

/// xxh3-64 of the word's UTF-8 bytes with a fixed seed: stable across versions and platforms.
///
/// Also the key of the stop-word and IDF tables, so each token is hashed once. Two distinct
/// words sharing a 64-bit hash would share a table entry; among the ~350k known words the
/// chance of any such collision is about 10⁻⁸.
#[inline]
pub fn word_hash(word: &str) -> u64 {
    xxh3_64_with_seed(word.as_bytes(), WORD_HASH_SEED)
}

/// Hasher for maps keyed by [`word_hash`] values, which are already uniformly distributed.
#[derive(Clone, Copy, Default, Debug)]
pub struct BuildIdentity;

impl BuildHasher for BuildIdentity {
    type Hasher = Identity;
    fn build_hasher(&self) -> Identity {
        Identity(0)
    }
}

/// See [`BuildIdentity`]. Only `u64` keys are expected; other writes are mixed in anyway.
#[derive(Default)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxh3_64_with_seed(bytes, self.0);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
