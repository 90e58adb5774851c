//! From raw article text to the words that are weighted: HTML → text, normalisation,
//! Traditional → Simplified folding, learned boilerplate lines dropped, segmentation and
//! filtering.

pub mod boilerplate;
pub mod fold;
pub mod html;
pub mod normalise;
pub mod segment;

pub use boilerplate::Boilerplate;
pub use fold::{fold, Folder, TraditionalStyle};
pub use html::{html_to_text, looks_like_html};
pub use normalise::normalise;
pub use segment::Segmenter;

use std::borrow::Cow;

/// `text` as plain text: HTML is reduced to its visible text, anything else is borrowed
/// unchanged.
pub fn plain_text(text: &str) -> Cow<'_, str> {
    if looks_like_html(text) {
        Cow::Owned(html_to_text(text))
    } else {
        Cow::Borrowed(text)
    }
}

/// CJK unified ideographs (the basic block), which make up most of Chinese text. They are
/// NFKC-stable, caseless, never combine with a neighbour, and are letters, which lets the hot
/// loops skip Unicode table lookups for them.
#[inline]
pub(crate) fn is_cjk_ideograph(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}
