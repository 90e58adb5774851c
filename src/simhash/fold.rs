//! Folding weighted word hashes into one 64-bit value.

use std::ops::{AddAssign, SubAssign};

use super::SimHash;

/// Per-bit running sums of weights: `+w` where a word's hash has the bit set, `-w` where not.
///
/// Generic over the weight type so integer profiles (seed000) fold exactly in `i64` while
/// TF-IDF folds in `f64`.
#[derive(Clone, Debug)]
pub struct Folder<W> {
    sums: [W; 64],
}

impl<W> Default for Folder<W>
where
    W: Copy + Default,
{
    fn default() -> Self {
        Folder {
            sums: [W::default(); 64],
        }
    }
}

impl<W> Folder<W>
where
    W: Copy + Default + PartialOrd + AddAssign + SubAssign,
{
    /// Adds one word's hash with its weight. `sums[0]` is the most significant bit.
    #[inline]
    pub fn add(&mut self, hash: u64, weight: W) {
        for (i, sum) in self.sums.iter_mut().enumerate() {
            if hash >> (63 - i) & 1 == 1 {
                *sum += weight;
            } else {
                *sum -= weight;
            }
        }
    }

    /// A bit is 1 where its sum is strictly greater than zero; ties fall to 0.
    pub fn finish(&self) -> SimHash {
        let zero = W::default();
        let mut v = 0u64;
        for (i, sum) in self.sums.iter().enumerate() {
            if *sum > zero {
                v |= 1 << (63 - i);
            }
        }
        SimHash(v)
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
    fn ties_are_zero() {
        let mut f = Folder::<f64>::default();
        f.add(u64::MAX, 1.0);
        f.add(0, 1.0);
        assert_eq!(f.finish(), SimHash(0));
    }
}
