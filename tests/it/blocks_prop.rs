//! The pigeonhole rule the indexes rely on, checked on random values.

use neardup::{BlockLayout, SimHash};
use proptest::prelude::*;

/// `fp` with the distinct bit positions in `bits` flipped.
fn flip(fp: u64, bits: &[u32]) -> u64 {
    bits.iter().fold(fp, |v, &b| v ^ (1u64 << b))
}

proptest! {
    #[test]
    fn within_k_shares_a_block(fp: u64, k in 0u32..=7, seed: Vec<u32>) {
        let layout = BlockLayout::for_distance(k).unwrap();
        let mut bits: Vec<u32> = seed.into_iter().map(|b| b % 64).collect();
        bits.sort_unstable();
        bits.dedup();
        bits.truncate(k as usize);
        let a = SimHash(fp);
        let b = SimHash(flip(fp, &bits));
        prop_assert_eq!(a.distance(b), bits.len() as u32);
        let shared = (0..layout.len()).filter(|&i| layout.block(a, i) == layout.block(b, i)).count();
        prop_assert!(shared >= 1, "k={} distance={} shares no block", k, bits.len());
    }

    #[test]
    fn blocks_reassemble_the_value(fp: u64, k in 0u32..=7) {
        let layout = BlockLayout::for_distance(k).unwrap();
        let mut v = 0u64;
        for i in 0..layout.len() {
            let w = layout.width(i);
            v = if w == 64 { 0 } else { v << w } | layout.block(SimHash(fp), i);
        }
        prop_assert_eq!(v, fp);
    }

    #[test]
    fn blocks16_round_trip(fp: u64) {
        let s = SimHash(fp);
        prop_assert_eq!(SimHash::from_blocks16(s.blocks16()), s);
        prop_assert_eq!(SimHash::from_i64(s.as_i64()), s);
        prop_assert_eq!(s.to_hex().parse::<SimHash>().unwrap(), s);
    }
}
