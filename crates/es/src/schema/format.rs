//! The fields formats of an index, in one table: what each stores, how neardup reads it, and
//! where `es-init --upgrade` moves it. [`FieldsFormat::of`] says which format an index is in;
//! [`FormatRequest::apply`] is how `es-init` keeps or moves it. The table in
//! `docs/reference/es-index-format.md` ("Fields formats") is checked against this one.
//!
//! | format | stores | read as | `es-init --upgrade` moves it to |
//! |---|---|---|---|
//! | Java | the older Java service's four SimHash blocks, no `_meta.neardup` | SimHash `seed000`, the block type from the mapping | 4 (1 with `--methods simhash`) |
//! | 1 | SimHash; MinHash in the full layout: 64-bit band terms, whole minima, the version string | no `"layout"` key | 1 (4 with `--layout compact`) |
//! | 2 | MinHash in the compact layout: 36-bit band terms, the lowest bits of each minimum, a version code | `"layout": {"compact": …}` | 4 (2 with `--no-containment`) |
//! | 3 | format 2 and the containment fields: a term for every minimum (10 bits), the distinct shingle count | `"containment"` without `positions` and `agreeing`: 10 agreeing minima | 4 |
//! | 4 | format 2 and the containment fields: terms for the first 64 minima (18 bits), the distinct shingle count | `"containment"` with `positions` and `agreeing` | 4 |

use std::fmt;

use super::{ContainmentMeta, IndexMeta, MetaSource, MinHashLayout, MinHashMeta};

/// What neardup's fields in an index hold. Every index records the number of its format in
/// `_meta.neardup.format` ([`FieldsFormat::number`]), except the older Java service's, which
/// record nothing. A neardup that does not know an index's number refuses to read it, so an
/// older neardup never misreads (or writes the wrong values into) an index of a newer format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FieldsFormat {
    /// The older Java service's (or an early neardup's): no `_meta.neardup`, the four SimHash
    /// blocks mapped (`short` or `keyword`); read as SimHash `seed000` ([`MetaSource::Legacy`]).
    Java,
    /// SimHash only, or MinHash in the full layout ([`MinHashLayout::Full`]): band keys in 16
    /// hex digits, the whole 32-bit minima, the version string in every document.
    V1,
    /// MinHash in the compact layout ([`MinHashLayout::Compact`]): band terms of 36 bits, the
    /// lowest bits of each minimum, a version code ([`MinHashMeta::stored_version`]).
    V2,
    /// Format 2 with the containment fields of every minimum, 10 bits each, and 10 of them
    /// agreeing make a candidate ([`ContainmentMeta::format_3`]; `positions` and `agreeing` not
    /// recorded).
    V3,
    /// Format 2 with the containment fields of the first minima, with more bits, and how
    /// many must agree recorded (`positions`, `agreeing`; [`ContainmentMeta::new`]): what
    /// `es-init` gives a new index.
    V4,
}

impl FieldsFormat {
    /// Every format, oldest first.
    pub const ALL: [FieldsFormat; 5] = [
        FieldsFormat::Java,
        FieldsFormat::V1,
        FieldsFormat::V2,
        FieldsFormat::V3,
        FieldsFormat::V4,
    ];

    /// The format of a new index (and the newest this neardup reads).
    pub const NEWEST: FieldsFormat = FieldsFormat::V4;

    /// Which format an index described by `meta` is in. A SimHash-only index is format 1;
    /// MinHash decides the others: its layout, whether it holds the containment fields, and
    /// whether they record which minima have terms.
    pub fn of(meta: &IndexMeta) -> FieldsFormat {
        if meta.source == MetaSource::Legacy {
            return FieldsFormat::Java;
        }
        let Some(m) = &meta.minhash else {
            return FieldsFormat::V1;
        };
        match (m.layout, &m.containment) {
            (MinHashLayout::Full, _) => FieldsFormat::V1,
            (MinHashLayout::Compact { .. }, None) => FieldsFormat::V2,
            (MinHashLayout::Compact { .. }, Some(c)) => match (c.positions, c.agreeing) {
                (None, None) => FieldsFormat::V3,
                _ => FieldsFormat::V4,
            },
        }
    }

    /// The number `_meta.neardup.format` records; none for the Java service's indices.
    pub fn number(self) -> Option<u32> {
        match self {
            FieldsFormat::Java => None,
            FieldsFormat::V1 => Some(1),
            FieldsFormat::V2 => Some(2),
            FieldsFormat::V3 => Some(3),
            FieldsFormat::V4 => Some(4),
        }
    }

    /// The format whose number `_meta.neardup.format` records, if this neardup reads it.
    pub fn from_number(n: u64) -> Option<FieldsFormat> {
        FieldsFormat::ALL
            .into_iter()
            .find(|f| f.number().map(u64::from) == Some(n))
    }

    /// The format an index's description is recorded as in `_meta`: its own, except that
    /// the Java service's fields, once `es-init` records them, are format 1 (SimHash only).
    pub fn recorded(self) -> FieldsFormat {
        match self {
            FieldsFormat::Java => FieldsFormat::V1,
            f => f,
        }
    }

    /// What the format stores, in a line (the table's second column).
    pub fn stores(self) -> &'static str {
        match self {
            FieldsFormat::Java => "the older Java service's four SimHash blocks, no `_meta.neardup`",
            FieldsFormat::V1 => "SimHash; MinHash in the full layout: 64-bit band terms, whole minima, the version string",
            FieldsFormat::V2 => "MinHash in the compact layout: 36-bit band terms, the lowest bits of each minimum, a version code",
            FieldsFormat::V3 => "format 2 and the containment fields: a term for every minimum (10 bits), the distinct shingle count",
            FieldsFormat::V4 => "format 2 and the containment fields: terms for the first 64 minima (18 bits), the distinct shingle count",
        }
    }

    /// What a query that looks for partial copies misses on an index of this format, and so
    /// gains from `es-init --upgrade` and a back-fill; `None` for the newest.
    pub fn containment_advice(self) -> Option<&'static str> {
        match self {
            FieldsFormat::Java | FieldsFormat::V1 | FieldsFormat::V2 => Some(
                "holds no containment fields: only near-duplicates are found; to find partial copies too",
            ),
            FieldsFormat::V3 => Some(
                "holds the containment terms of an older format, which make partial copies several times slower to find on a large index (docs/elasticsearch.md); to move it to the current terms",
            ),
            FieldsFormat::V4 => None,
        }
    }

    /// A description of an index in this format with `es-init`'s defaults otherwise (both
    /// methods, default names; the Java service's: SimHash `seed000`, `short` blocks).
    pub fn example(self) -> IndexMeta {
        match self {
            FieldsFormat::Java => {
                IndexMeta::legacy(super::FieldNames::default(), super::BlockType::Short)
            }
            FieldsFormat::V1 => IndexMeta::default().with_layout(MinHashLayout::Full),
            FieldsFormat::V2 => IndexMeta::default().with_containment(false),
            FieldsFormat::V3 => {
                IndexMeta::default().with_containment_terms(ContainmentMeta::format_3())
            }
            FieldsFormat::V4 => IndexMeta::default(),
        }
    }
}

/// `fields format 3`, or `the older Java service's fields`.
impl fmt::Display for FieldsFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.number() {
            Some(n) => write!(f, "fields format {n}"),
            None => f.write_str("the older Java service's fields"),
        }
    }
}

/// The MinHash layout `es-init` is asked for (`--layout`, `--signature-bits`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum LayoutRequest {
    /// Nothing asked: the layout the index records, else [`MinHashLayout::NEW`].
    #[default]
    Recorded,
    /// `--layout full`.
    Full,
    /// `--layout compact` and/or `--signature-bits`: these bits, else the bits the index
    /// records in the compact layout, else [`MinHashLayout::NEW`]'s.
    Compact { signature_bits: Option<u8> },
}

/// What `es-init` is asked about an index's fields format: the MinHash layout, whether to
/// hold the containment fields, and whether this is an upgrade.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FormatRequest {
    pub layout: LayoutRequest,
    /// `--no-containment`: hold no containment fields.
    pub no_containment: bool,
    /// `--upgrade`: move the index to what is asked (and by default to [`FieldsFormat::NEWEST`]'s
    /// containment terms); a back-fill then rewrites every document.
    pub upgrade: bool,
}

impl FormatRequest {
    /// `wanted` (a description made with [`IndexMeta::new`]) in the format `es-init` gives an
    /// index that records `recorded` for the same MinHash fields (`None`: a new index, or
    /// one without them): the layout as recorded unless another is asked; the containment
    /// fields as recorded (a new index holds them) unless `--no-containment` drops them or an
    /// upgrade adds them; their terms as recorded (format 3 stays 3) unless an upgrade moves
    /// them to the newest. The full layout holds no containment fields.
    pub fn apply(&self, recorded: Option<&MinHashMeta>, wanted: IndexMeta) -> IndexMeta {
        let recorded_layout = recorded.map(|m| m.layout);
        let layout = match self.layout {
            LayoutRequest::Full => MinHashLayout::Full,
            LayoutRequest::Compact {
                signature_bits: Some(signature_bits),
            } => MinHashLayout::Compact { signature_bits },
            LayoutRequest::Compact {
                signature_bits: None,
            } => match recorded_layout {
                Some(l @ MinHashLayout::Compact { .. }) => l,
                _ => MinHashLayout::NEW,
            },
            LayoutRequest::Recorded => recorded_layout.unwrap_or(MinHashLayout::NEW),
        };
        let recorded_terms = recorded.map(|m| m.containment.clone());
        let containment = !self.no_containment
            && (self.upgrade || recorded_terms.as_ref().is_none_or(Option::is_some));
        let wanted = wanted.with_layout(layout).with_containment(containment);
        match (self.upgrade, recorded_terms) {
            (false, Some(Some(have))) => wanted.with_containment_terms(have),
            _ => wanted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The format `es-init --upgrade` with `request`'s flags gives an index in `from`, asked
    /// for the methods `wanted` holds.
    fn upgraded(from: FieldsFormat, request: FormatRequest, wanted: IndexMeta) -> FieldsFormat {
        let recorded = from.example();
        let upgraded = FormatRequest {
            upgrade: true,
            ..request
        }
        .apply(recorded.minhash.as_ref(), wanted);
        FieldsFormat::of(&upgraded)
    }

    #[test]
    fn every_format_is_told_apart_and_its_number_read_back() {
        for f in FieldsFormat::ALL {
            assert_eq!(FieldsFormat::of(&f.example()), f, "{f}");
            match f.number() {
                Some(n) => assert_eq!(FieldsFormat::from_number(u64::from(n)), Some(f)),
                None => assert_eq!(f, FieldsFormat::Java),
            }
            assert_eq!(
                f.example().to_json()["format"],
                json!(f.recorded().number())
            );
        }
        assert_eq!(FieldsFormat::from_number(0), None);
        assert_eq!(FieldsFormat::from_number(5), None);
        assert_eq!(
            FieldsFormat::of(&IndexMeta::default()),
            FieldsFormat::NEWEST
        );
        assert!(FieldsFormat::NEWEST.containment_advice().is_none());
    }

    #[test]
    fn upgrades_move_every_format_to_the_newest_unless_asked_otherwise() {
        use FieldsFormat::*;
        let both = IndexMeta::default;
        let default = FormatRequest::default();
        let compact = FormatRequest {
            layout: LayoutRequest::Compact {
                signature_bits: None,
            },
            ..default
        };
        let no_containment = FormatRequest {
            no_containment: true,
            ..default
        };
        assert_eq!(upgraded(V1, default, both()), V1);
        assert_eq!(upgraded(V1, compact, both()), V4);
        for from in [V2, V3, V4] {
            assert_eq!(upgraded(from, default, both()), V4, "{from}");
            assert_eq!(upgraded(from, no_containment, both()), V2, "{from}");
        }
        assert_eq!(upgraded(Java, default, both()), V4);
        let simhash = IndexMeta::simhash(
            neardup_core::Profile::Seed000,
            super::super::BlockType::Short,
            super::super::FieldNames::default(),
        );
        assert_eq!(upgraded(Java, default, simhash), V1);
        // Without an upgrade, every format stays as it is.
        for from in [V1, V2, V3, V4] {
            let kept = default.apply(from.example().minhash.as_ref(), both());
            assert_eq!(FieldsFormat::of(&kept), from, "{from}");
        }
        // A new index is the newest.
        assert_eq!(
            FieldsFormat::of(&default.apply(None, both())),
            FieldsFormat::NEWEST
        );
    }

    /// The rows of the first table under `heading` in `text` (lines of `//! ` doc comments
    /// read as their text), cells trimmed, the header and its rule left out.
    fn table(text: &str, heading: &str) -> Vec<Vec<String>> {
        text.lines()
            .map(|l| l.trim_start_matches("//!").trim())
            .skip_while(|l| *l != heading)
            .skip(1)
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                l.trim_matches('|')
                    .split(" | ")
                    .map(|c| c.trim().to_owned())
                    .collect()
            })
            .collect()
    }

    /// The table of docs/reference/es-index-format.md ("Fields formats") and this module's
    /// are one table: each format, what it stores, and where `es-init --upgrade` moves it
    /// without other flags (the methods es-init holds by default: both).
    #[test]
    fn the_docs_table_is_this_table() {
        let page = include_str!("../../../../docs/reference/es-index-format.md");
        let docs = table(page, "## Fields formats");
        assert_eq!(
            docs,
            table(include_str!("format.rs"), ""),
            "the module doc's table"
        );
        for (name, rows) in [("docs", docs)] {
            assert_eq!(
                rows.len(),
                FieldsFormat::ALL.len(),
                "{name}: one row per format"
            );
            for (row, f) in rows.iter().zip(FieldsFormat::ALL) {
                let number = f.number().map_or("Java".to_owned(), |n| n.to_string());
                assert_eq!(row[0], number, "{name}");
                assert_eq!(row[1], f.stores(), "{name}: format {number}");
                let to = upgraded(f, FormatRequest::default(), IndexMeta::default());
                let said = row[3].split(' ').next().unwrap_or_default();
                assert_eq!(
                    said,
                    to.number().unwrap().to_string(),
                    "{name}: format {number}"
                );
            }
        }
    }
}
