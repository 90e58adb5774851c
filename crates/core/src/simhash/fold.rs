//! Folding weighted word hashes into one 64-bit value.

use std::ops::{Add, AddAssign, Mul};

use super::SimHash;

/// SimHash's per-bit vote: each word adds its weight where its hash has the bit set and
/// subtracts it where not; a bit is 1 where the sum is strictly positive.
///
/// Kept as the total weight and, per bit, the weight of the words voting 1: the sum is then
/// `2·set − total`, and adding a word touches only the bits it sets, without branches.
/// Generic over the weight type so integer profiles (seed000) fold exactly in `i64` while
/// TF-IDF folds in `f64`.
#[derive(Clone, Debug)]
pub struct Folder<W> {
    /// `set[i]`: weight of words with bit `63 − i` set (`set[0]` is the most significant bit).
    set: [W; 64],
    total: W,
}

impl<W> Default for Folder<W>
where
    W: Copy + Default,
{
    fn default() -> Self {
        Folder {
            set: [W::default(); 64],
            total: W::default(),
        }
    }
}

impl<W> Folder<W>
where
    W: Copy + Default + PartialOrd + Add<Output = W> + AddAssign + Mul<Output = W> + FromBit,
{
    /// Adds one word's hash with its weight.
    #[inline]
    pub fn add(&mut self, hash: u64, weight: W) {
        self.total += weight;
        for (i, set) in self.set.iter_mut().enumerate() {
            *set += weight * W::from_bit(hash >> (63 - i) & 1);
        }
    }

    /// A bit is 1 where its vote is strictly positive (`2·set > total`); ties fall to 0.
    pub fn finish(&self) -> SimHash {
        let mut v = 0u64;
        for (i, &set) in self.set.iter().enumerate() {
            if set + set > self.total {
                v |= 1 << (63 - i);
            }
        }
        SimHash(v)
    }
}

/// Converts a bit (0 or 1) into a weight factor.
pub trait FromBit {
    fn from_bit(bit: u64) -> Self;
}

impl FromBit for i64 {
    #[inline]
    fn from_bit(bit: u64) -> Self {
        bit as i64
    }
}

impl FromBit for f64 {
    #[inline]
    fn from_bit(bit: u64) -> Self {
        bit as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_per_bit() {
        let mut f = Folder::<i64>::default();
        f.add(0xffff_0000_0000_0000, 3);
        f.add(0x0000_0000_0000_ffff, 2);
        assert_eq!(f.finish(), SimHash(0xffff_0000_0000_0000));
    }

    #[test]
    fn matches_the_signed_vote() {
        let words = [
            (0x0123_4567_89ab_cdefu64, 5i64),
            (0xfedc_ba98_7654_3210, 3),
            (0xffff_0000_ffff_0000, 4),
        ];
        let mut f = Folder::<i64>::default();
        let mut sums = [0i64; 64];
        for (h, w) in words {
            f.add(h, w);
            for (i, s) in sums.iter_mut().enumerate() {
                *s += if h >> (63 - i) & 1 == 1 { w } else { -w };
            }
        }
        let want = (0..64).fold(0u64, |v, i| if sums[i] > 0 { v | 1 << (63 - i) } else { v });
        assert_eq!(f.finish(), SimHash(want));
    }

    #[test]
    fn ties_are_zero() {
        let mut f = Folder::<f64>::default();
        f.add(u64::MAX, 1.0);
        f.add(0, 1.0);
        assert_eq!(f.finish(), SimHash(0));
    }
}
