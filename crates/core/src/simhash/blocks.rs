//! Splitting 64 bits into `k + 1` near-equal blocks (the pigeonhole layout).

use super::SimHash;

/// The largest supported distance: 8 blocks of 8 bits.
pub const MAX_K: u32 = 7;

/// The SimHash tolerance when none is given, on every backend: k = 3, four blocks of 16 bits,
/// the `simHashA`–`simHashD` layout of the design card and the Java service (the default `k`
/// of a new store, and of a SimHash query on Elasticsearch).
pub const DEFAULT_K: u32 = 3;

/// How 64 bits are cut into `k + 1` contiguous blocks, highest bits first.
///
/// Blocks are as equal as possible: with 64 = q·(k+1) + r, the first `r` blocks get `q + 1`
/// bits and the rest `q`. For k = 3 that is four blocks of 16 bits, A–D, exactly the layout of
/// the `simHashA`–`simHashD` fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockLayout {
    k: u32,
    /// (shift, width) per block, highest block first.
    parts: Vec<(u32, u32)>,
}

impl BlockLayout {
    /// The layout for distance `k`. Errors when `k > MAX_K`: with more than eight blocks a
    /// block is narrower than 8 bits and buckets become too crowded to be useful.
    pub fn for_distance(k: u32) -> Result<BlockLayout, crate::Error> {
        if k > MAX_K {
            return Err(crate::Error::UnsupportedDistance { k, max: MAX_K });
        }
        let n = k + 1;
        let (q, r) = (64 / n, 64 % n);
        let mut parts = Vec::with_capacity(n as usize);
        let mut top = 64;
        for i in 0..n {
            let width = if i < r { q + 1 } else { q };
            top -= width;
            parts.push((top, width));
        }
        Ok(BlockLayout { k, parts })
    }

    /// The distance this layout guarantees to find.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Number of blocks (`k + 1`).
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Always false: a layout has at least one block. Present for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Width in bits of block `i`.
    pub fn width(&self, i: usize) -> u32 {
        self.parts[i].1
    }

    /// Position of block `i`'s lowest bit.
    pub fn shift(&self, i: usize) -> u32 {
        self.parts[i].0
    }

    /// Value of block `i` of `fp`, right-aligned.
    #[inline]
    pub fn block(&self, fp: SimHash, i: usize) -> u64 {
        let (shift, width) = self.parts[i];
        (fp.0 >> shift) & mask(width)
    }

    /// All block values of `fp`, highest block first.
    pub fn blocks(&self, fp: SimHash) -> impl Iterator<Item = u64> + '_ {
        (0..self.parts.len()).map(move |i| self.block(fp, i))
    }
}

fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k3_is_four_sixteen_bit_blocks() {
        let l = BlockLayout::for_distance(3).unwrap();
        assert_eq!(l.len(), 4);
        let fp = SimHash(0x1234_5678_9abc_def0);
        let b: Vec<u64> = l.blocks(fp).collect();
        assert_eq!(b, vec![0x1234, 0x5678, 0x9abc, 0xdef0]);
    }

    #[test]
    fn widths_cover_64_bits_and_are_near_equal() {
        for k in 0..=MAX_K {
            let l = BlockLayout::for_distance(k).unwrap();
            let widths: Vec<u32> = (0..l.len()).map(|i| l.width(i)).collect();
            assert_eq!(widths.iter().sum::<u32>(), 64, "k={k}");
            let (min, max) = (widths.iter().min().unwrap(), widths.iter().max().unwrap());
            assert!(max - min <= 1, "k={k} widths {widths:?}");
        }
    }

    #[test]
    fn k0_is_the_whole_value() {
        let l = BlockLayout::for_distance(0).unwrap();
        assert_eq!(l.block(SimHash(u64::MAX), 0), u64::MAX);
    }

    #[test]
    fn too_large_k_is_an_error() {
        assert!(BlockLayout::for_distance(8).is_err());
    }
}
