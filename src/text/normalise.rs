//! Text normalisation before segmentation.
//!
//! Reposts routinely differ only in full-width vs half-width characters, letter case and
//! whitespace; none of that should move a fingerprint.

use unicode_normalization::UnicodeNormalization;

/// Appends the normalised form of `text` to `out`: Unicode NFKC (full-width ASCII becomes
/// half-width, compatibility ideographs become their unified form), lower case, and every run
/// of whitespace folded to one `' '`, or one `'\n'` when the run holds a line break.
/// Leading and trailing whitespace is dropped.
pub fn normalise_into(text: &str, out: &mut String) {
    // 0 = nothing pending, 1 = a space, 2 = a line break.
    let mut pending = 0u8;
    let start = out.len();
    for c in text.nfkc() {
        if c.is_whitespace() {
            let kind = if c == '\n' || c == '\r' { 2 } else { 1 };
            pending = pending.max(kind);
            continue;
        }
        if pending != 0 {
            if out.len() > start {
                out.push(if pending == 2 { '\n' } else { ' ' });
            }
            pending = 0;
        }
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
}

/// Normalised copy of `text`; see [`normalise_into`].
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    normalise_into(text, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_width_becomes_half_width_and_lower() {
        assert_eq!(normalise("ＡＢＣ１２３，ＮｏｖａＰａｄ"), "abc123,novapad");
    }

    #[test]
    fn whitespace_runs_fold() {
        assert_eq!(
            normalise("  甲 \t 乙\u{3000}\u{a0}丙 \n\n 丁  "),
            "甲 乙 丙\n丁"
        );
    }

    #[test]
    fn chinese_is_unchanged() {
        assert_eq!(normalise("新闻联播"), "新闻联播");
    }
}
