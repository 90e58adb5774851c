//! Traditional → Simplified folding, so that a repost in Traditional characters (Taiwan or
//! Hong Kong usage too) is made of the same words as the mainland original: 軟體 and 软件,
//! 網路 and 网络, 資訊 and 信息.
//!
//! The tables are OpenCC's (through `opencc-fmmseg`, pinned exactly in `Cargo.toml`): first
//! `tw2sp` (Taiwan phrases and variants → mainland phrases, then characters), then `hk2s`
//! (Hong Kong variants). A text is folded only when it is written in Traditional characters
//! ([`Folder::is_traditional`]): mainland text is left exactly as it is, which keeps the pass
//! off the hot path of most articles and never rewrites a mainland word (tw2sp alone would
//! turn 影片 into 视频). Which crate and why: `docs/evaluation.md` ("Traditional
//! characters").

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;

use opencc_fmmseg::{DictMaxLen, DictionaryMaxlength, OpenCC};

/// Names the folding rules in fingerprint versions (`text=…`): the tables of opencc-fmmseg
/// 0.13.0, `tw2sp` then `hk2s`, applied to texts in Traditional characters (1% of their
/// ideographs, [`Folder::is_traditional`]). Bump it with
/// anything that changes a folded text (a new release of the crate is one).
pub const FOLD_ID: &str = "t2s-1";

/// The folding tables, loaded once per process (about 80 ms and 28 MB).
pub struct Folder {
    cc: OpenCC,
    /// Characters of the Basic Multilingual Plane that folding changes, as a bitmap.
    bmp: Box<[u64; 1024]>,
    /// The same for the other planes (rare ideographs).
    astral: HashSet<char>,
    /// Each of those characters folded alone ([`Folder::fold_char`]), made on first use.
    chars: OnceLock<std::collections::HashMap<char, char>>,
}

impl Folder {
    /// The shared folder.
    ///
    /// # Panics
    /// If the tables built into the binary do not load, which a test of this module rules
    /// out for every build.
    pub fn shared() -> &'static Folder {
        static F: OnceLock<Folder> = OnceLock::new();
        F.get_or_init(|| {
            let dict = DictionaryMaxlength::new()
                .expect("the OpenCC tables built into neardup load (opencc-fmmseg)");
            let candidates: Vec<char> = [
                &dict.ts_characters,
                &dict.tw_variants_rev,
                &dict.hk_variants_rev,
            ]
            .into_iter()
            .flat_map(single_chars)
            .collect();
            let simplified: HashSet<char> = single_chars(&dict.st_characters).collect();
            let mut cc = OpenCC::from_dictionary(dict);
            // neardup already spreads articles over the cores.
            cc.set_parallel(false);
            let mut folder = Folder {
                cc,
                bmp: Box::new([0u64; 1024]),
                astral: HashSet::new(),
                chars: OnceLock::new(),
            };
            // A character counts when folding it alone changes it (a variant table may map
            // it to a form the next table maps back) and it is not also a Simplified one: 么
            // is Taiwan's form of 幺, but it is mainland text's 什么 too.
            for c in candidates {
                let alone = c.to_string();
                if !simplified.contains(&c) && folder.convert(&alone) != alone {
                    match u16::try_from(u32::from(c)) {
                        Ok(i) => folder.bmp[usize::from(i) / 64] |= 1 << (i % 64),
                        Err(_) => {
                            folder.astral.insert(c);
                        }
                    }
                }
            }
            folder
        })
    }

    /// Whether `c` is a character folding changes (a Traditional form, or a Taiwan or Hong
    /// Kong variant).
    #[inline]
    pub fn is_traditional_char(&self, c: char) -> bool {
        match u16::try_from(u32::from(c)) {
            Ok(i) => self.bmp[usize::from(i) / 64] & (1 << (i % 64)) != 0,
            Err(_) => self.astral.contains(&c),
        }
    }

    /// Whether `text` is written in Traditional characters: at least 1% of its ideographs
    /// are ones folding changes ([`Folder::is_traditional_char`]). Those are the texts that
    /// are folded. Some of these characters are also used in mainland text (著 in 著名, 乾
    /// in 乾隆: one mainland article in eight of the shared corpus has one), which is why a
    /// single one does not decide; in a Traditional text they are a third or more.
    pub fn is_traditional(&self, text: &str) -> bool {
        let (mut ideographs, mut traditional) = (0usize, 0usize);
        for c in text.chars().filter(|&c| c >= '\u{3400}') {
            ideographs += 1;
            traditional += usize::from(self.is_traditional_char(c));
        }
        traditional > 0 && traditional * 100 >= ideographs
    }

    /// `c` folded alone into its Simplified form, in any text: the same character always
    /// gives the same one, which is what comparing two texts letter by letter needs (the
    /// alignment, [`crate::align`]); a character that does not fold into exactly one is kept.
    pub fn fold_char(&self, c: char) -> char {
        if !self.is_traditional_char(c) {
            return c;
        }
        let table = self.chars.get_or_init(|| {
            let bmp = (0..=u16::MAX).filter_map(|i| {
                (self.bmp[usize::from(i) / 64] & (1 << (i % 64)) != 0)
                    .then(|| char::from_u32(u32::from(i)))
                    .flatten()
            });
            bmp.chain(self.astral.iter().copied())
                .filter_map(|c| {
                    let mut folded = self
                        .convert(c.encode_utf8(&mut [0; 4]))
                        .chars()
                        .collect::<Vec<_>>();
                    (folded.len() == 1).then(|| (c, folded.remove(0)))
                })
                .collect()
        });
        table.get(&c).copied().unwrap_or(c)
    }

    /// `text` folded into Simplified Chinese with mainland phrasing, or borrowed unchanged
    /// when it holds no Traditional character.
    pub fn fold<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.is_traditional(text) {
            Cow::Owned(self.convert(text))
        } else {
            Cow::Borrowed(text)
        }
    }

    fn convert(&self, text: &str) -> String {
        self.cc.hk2s(&self.cc.tw2sp(text, false), false)
    }

    /// The conversions the benchmark uses to make Traditional reposts of Simplified text.
    pub fn to_traditional(&self, text: &str, style: TraditionalStyle) -> String {
        match style {
            TraditionalStyle::Characters => self.cc.s2t(text, false),
            TraditionalStyle::Taiwan => self.cc.s2twp(text, false),
            TraditionalStyle::HongKong => self.cc.s2hk(text, false),
        }
    }
}

/// How a Simplified text is written in Traditional characters (OpenCC's configurations).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TraditionalStyle {
    /// Character by character (OpenCC `s2t`).
    Characters,
    /// Taiwan usage with its phrases: 软件 → 軟體, 网络 → 網路, 信息 → 資訊 (`s2twp`).
    Taiwan,
    /// Hong Kong character variants (`s2hk`).
    HongKong,
}

/// The keys of `table` that are single characters.
fn single_chars(table: &DictMaxLen) -> impl Iterator<Item = char> + '_ {
    table.iter().filter_map(|(key, _)| match key {
        [c] => Some(*c),
        _ => None,
    })
}

/// `text` folded (see [`Folder::fold`]).
pub fn fold(text: &str) -> Cow<'_, str> {
    Folder::shared().fold(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden folds: these strings are what fingerprints are made of, so a change of tables
    /// must show up here and bump [`FOLD_ID`].
    #[test]
    fn taiwan_and_hong_kong_phrases_become_mainland_words() {
        for (traditional, simplified) in [
            ("軟體", "软件"),
            ("網路", "网络"),
            ("資訊", "信息"),
            ("這個硬碟", "这个硬盘"),
            ("寫程式", "写程序"),
            ("記憶體", "内存"),
            ("關於乾淨的衞生", "关于干净的卫生"),
            ("什麼", "什么"),
            ("徵收著名的稅", "征收著名的税"),
            ("臺灣的計程車", "台湾的出租车"),
        ] {
            assert_eq!(fold(traditional), simplified, "{traditional}");
        }
    }

    #[test]
    fn mainland_text_is_borrowed_unchanged() {
        // An article with the characters mainland text shares with Traditional (著, 乾).
        let article = format!(
            "著名学者在乾隆年间的著作中记录了当时的社会风貌。{}",
            "国务院新闻办公室今天举行发布会，介绍软件和信息技术服务业的发展情况。".repeat(12)
        );
        for text in [
            "影片和程序在执行中整合",
            "什么这么多么",
            &article,
            "plain ascii, 123",
            "",
        ] {
            assert!(
                matches!(fold(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
        // Where they are dense, as in a short line full of them, the line is folded, which
        // keeps them (著名, 乾隆 are phrases of the tables too).
        assert_eq!(fold("著名的乾隆"), "著名的乾隆");
    }

    #[test]
    fn round_trips_of_every_style_come_back() {
        let f = Folder::shared();
        let text = "国务院新闻办公室今天举行发布会，介绍软件和信息技术服务业的发展情况。";
        for style in [
            TraditionalStyle::Characters,
            TraditionalStyle::Taiwan,
            TraditionalStyle::HongKong,
        ] {
            let t = f.to_traditional(text, style);
            assert_ne!(t, text, "{style:?}");
            assert_eq!(f.fold(&t), text, "{style:?}: {t}");
        }
    }

    #[test]
    fn characters_fold_alone_in_any_text() {
        let f = Folder::shared();
        assert_eq!(f.fold_char('會'), '会');
        assert_eq!(f.fold_char('侶'), '侣');
        assert_eq!(f.fold_char('会'), '会');
        assert_eq!(f.fold_char('a'), 'a');
    }

    #[test]
    fn the_precheck_knows_traditional_characters() {
        let f = Folder::shared();
        for c in ['們', '軟', '體', '衞', '著', '於'] {
            assert!(f.is_traditional_char(c), "{c}");
        }
        for c in ['们', '软', '体', '卫', '着', '于', '么', 'a', '，'] {
            assert!(!f.is_traditional_char(c), "{c}");
        }
    }
}
