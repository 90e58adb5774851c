//! The `seed000` profile: the older Java service's rules, bit for bit
//! (`shared/compat/README.md`).

use crate::simhash::{Folder, SimHash};

use super::TooShort;

/// The Java `String.hashCode`-like word hash, widened to 64 bits, over UTF-16 code units.
pub fn java_word_hash(word: &str) -> u64 {
    let mut units = word.encode_utf16();
    let Some(first) = units.next() else {
        return 0;
    };
    let mut h = u64::from(first) << 12;
    let mut n = 0u64;
    for u in std::iter::once(first).chain(units) {
        h = h.wrapping_mul(1_000_003) ^ u64::from(u);
        n += 1;
    }
    h ^ n
}

/// 1 for one unit; 8/16 for two/more units starting at or above U+3040 (kana and CJK), else
/// 2/4. Blank words weigh 0.
pub fn java_word_weight(word: &str) -> i64 {
    let mut units = word.encode_utf16();
    let Some(first) = units.next() else {
        return 0;
    };
    if word.trim().is_empty() {
        return 0;
    }
    let n = 1 + units.count();
    match (n, first >= 0x3040) {
        (1, _) => 1,
        (2, true) => 8,
        (_, true) => 16,
        (2, false) => 2,
        (_, false) => 4,
    }
}

/// Running state of one seed000 fingerprint.
#[derive(Default)]
pub struct Seed000 {
    folder: Folder<i64>,
    sum: i64,
    max: i64,
    words: usize,
}

impl Seed000 {
    pub fn add(&mut self, word: &str) {
        let w = java_word_weight(word);
        if w == 0 {
            return;
        }
        self.folder.add(java_word_hash(word), w);
        self.sum += w;
        self.max = self.max.max(w);
        self.words += 1;
    }

    /// Too short when one word would carry a third of the weight or the total is under 20.
    pub fn finish(&self) -> Result<SimHash, TooShort> {
        if self.words == 0 {
            return Err(TooShort::NoWords);
        }
        if self.sum < 20 {
            return Err(TooShort::LowWeight {
                weight: self.sum as f64,
                min: 20.0,
            });
        }
        if 3 * self.max >= self.sum {
            return Err(TooShort::Dominated {
                share: self.max as f64 / self.sum as f64,
                max_share: 1.0 / 3.0,
            });
        }
        Ok(self.folder.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_follow_length_and_script() {
        assert_eq!(java_word_weight("x"), 1);
        assert_eq!(java_word_weight("大"), 1);
        assert_eq!(java_word_weight("ab"), 2);
        assert_eq!(java_word_weight("abc"), 4);
        assert_eq!(java_word_weight("中职"), 8);
        assert_eq!(java_word_weight("全明星"), 16);
        assert_eq!(java_word_weight("𠀀"), 8, "a surrogate pair is two units");
        assert_eq!(java_word_weight(""), 0);
        assert_eq!(java_word_weight("  "), 0);
    }

    #[test]
    fn empty_word_hashes_to_zero() {
        assert_eq!(java_word_hash(""), 0);
    }
}
