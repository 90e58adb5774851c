//! Text normalisation before segmentation.
//!
//! Reposts routinely differ only in full-width vs half-width characters, letter case and
//! whitespace; none of that should move a fingerprint.

use unicode_normalization::UnicodeNormalization;

use super::is_cjk_ideograph;

/// Appends the normalised form of `text` to `out`: Unicode NFKC (full-width ASCII becomes
/// half-width, compatibility ideographs become their unified form), lower case, and every run
/// of whitespace folded to one `' '`, or one `'\n'` when the run holds a line break.
/// Leading and trailing whitespace is dropped.
pub fn normalise_into(text: &str, out: &mut String) {
    let mut w = Writer {
        out,
        start: 0,
        pending: 0,
    };
    w.start = w.out.len();
    // NFKC only has work to do outside runs of CJK ideographs, which are stable and never
    // combine with a neighbour; cutting the text at them gives the same result as normalising
    // it whole, and skips the decomposition tables for most of a Chinese text.
    let mut run_start = 0;
    for (i, c) in text.char_indices() {
        if is_cjk_ideograph(c) {
            if run_start < i {
                for n in text[run_start..i].nfkc() {
                    w.push(n);
                }
            }
            w.push(c);
            run_start = i + c.len_utf8();
        }
    }
    for n in text[run_start..].nfkc() {
        w.push(n);
    }
}

struct Writer<'a> {
    out: &'a mut String,
    start: usize,
    /// 0 = nothing pending, 1 = a space, 2 = a line break.
    pending: u8,
}

impl Writer<'_> {
    #[inline]
    fn push(&mut self, c: char) {
        if c.is_whitespace() {
            let kind = if c == '\n' || c == '\r' { 2 } else { 1 };
            self.pending = self.pending.max(kind);
            return;
        }
        if self.pending != 0 {
            if self.out.len() > self.start {
                self.out.push(if self.pending == 2 { '\n' } else { ' ' });
            }
            self.pending = 0;
        }
        if c.is_ascii() {
            self.out.push(c.to_ascii_lowercase());
        } else if is_cjk_ideograph(c) {
            self.out.push(c);
        } else {
            self.out.extend(c.to_lowercase());
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
    fn same_as_normalising_whole_text() {
        // Combining marks after Latin letters, compatibility ideographs, full-width forms,
        // with CJK ideographs between them.
        let text = "Cafe\u{301}中文ＡＢ\u{f900}测试e\u{301}\u{323}文字①";
        let whole: String = text.nfkc().flat_map(char::to_lowercase).collect();
        assert_eq!(normalise(text), whole);
    }

    #[test]
    fn chinese_is_unchanged() {
        assert_eq!(normalise("新闻联播"), "新闻联播");
    }
}
