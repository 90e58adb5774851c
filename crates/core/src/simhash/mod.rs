//! 64-bit SimHash values: folding weighted word hashes, Hamming distance, and the block
//! layouts that make "all fingerprints within distance k" an exact lookup.
//!
//! The pigeonhole rule: split 64 bits into `k + 1` blocks. Two fingerprints that differ in at
//! most `k` bits cannot differ in every block, so they agree on at least one whole block. An
//! index that files each fingerprint under each of its blocks finds every neighbour within `k`
//! by looking up the query's blocks, then checking the full distance.

mod blocks;
mod fold;

pub use blocks::{BlockLayout, DEFAULT_K, MAX_K};
pub use fold::Folder;

use std::fmt;
use std::str::FromStr;

/// A 64-bit SimHash fingerprint.
///
/// Bit 63 is the most significant bit; the compatibility rules number it bit 0 ("A" block).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SimHash(pub u64);

impl SimHash {
    /// Number of differing bits.
    #[inline]
    pub fn distance(self, other: SimHash) -> u32 {
        hamming(self.0, other.0)
    }

    /// The four 16-bit blocks A–D as signed integers (A = highest bits), the encoding of the
    /// `simHashA`–`simHashD` `short` fields written by the older Java service.
    pub fn blocks16(self) -> [i16; 4] {
        let v = self.0;
        [
            (v >> 48) as u16 as i16,
            (v >> 32) as u16 as i16,
            (v >> 16) as u16 as i16,
            v as u16 as i16,
        ]
    }

    /// Inverse of [`SimHash::blocks16`].
    pub fn from_blocks16(blocks: [i16; 4]) -> SimHash {
        SimHash(
            (u64::from(blocks[0] as u16) << 48)
                | (u64::from(blocks[1] as u16) << 32)
                | (u64::from(blocks[2] as u16) << 16)
                | u64::from(blocks[3] as u16),
        )
    }

    /// The same 64 bits read as a signed integer: Elasticsearch has no unsigned 64-bit
    /// `long`, so the full value is stored this way (two's complement, bit for bit).
    pub fn as_i64(self) -> i64 {
        self.0 as i64
    }

    /// Inverse of [`SimHash::as_i64`].
    pub fn from_i64(v: i64) -> SimHash {
        SimHash(v as u64)
    }

    /// Sixteen lower-case hex digits, zero-padded: the stable textual form.
    pub fn to_hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

impl fmt::Debug for SimHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimHash({:016x})", self.0)
    }
}

impl fmt::Display for SimHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Error for [`SimHash::from_str`].
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a fingerprint: expected 16 hex digits, e.g. 02ce9c46378dc49a")]
pub struct ParseSimHashError(String);

impl FromStr for SimHash {
    type Err = ParseSimHashError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.len() != 16 {
            return Err(ParseSimHashError(s.to_owned()));
        }
        u64::from_str_radix(t, 16)
            .map(SimHash)
            .map_err(|_| ParseSimHashError(s.to_owned()))
    }
}

/// Number of bits in which `a` and `b` differ.
#[inline]
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks16_are_twos_complement_and_invert() {
        let fp = SimHash(0x02ce_9c46_378d_c49a);
        assert_eq!(fp.blocks16(), [718, -25530, 14221, -15206]);
        assert_eq!(SimHash::from_blocks16(fp.blocks16()), fp);
        assert_eq!(SimHash(u64::MAX).blocks16(), [-1, -1, -1, -1]);
    }

    #[test]
    fn hex_round_trip_and_errors() {
        let fp = SimHash(0x00ab_0000_0000_0001);
        assert_eq!(fp.to_hex(), "00ab000000000001");
        assert_eq!("00ab000000000001".parse::<SimHash>().unwrap(), fp);
        assert!("abc".parse::<SimHash>().is_err());
        assert!("zz00000000000000".parse::<SimHash>().is_err());
    }

    #[test]
    fn i64_reinterpretation_keeps_bits() {
        let fp = SimHash(0xffff_0000_0000_0000);
        assert!(fp.as_i64() < 0);
        assert_eq!(SimHash::from_i64(fp.as_i64()), fp);
    }

    #[test]
    fn distance_counts_bits() {
        assert_eq!(SimHash(0b1011).distance(SimHash(0b0001)), 2);
        assert_eq!(SimHash(0).distance(SimHash(u64::MAX)), 64);
    }
}
