//! Pinned fingerprints: an accidental change of output fails here. A deliberate change bumps
//! the fingerprint version (src/fingerprint/mod.rs) and re-pins these values.

mod common;

use neardup::input::{read_all, Body, InputSpec};
use neardup::{Fingerprinter, Profile};

const DEFAULT_VERSION: &str =
    "default-2;feat=word;weight=tf*idf-jieba-0.11;top=20;nonum;hash=xxh3-64-s0;text=html-1,nfkc,lower,jieba-0.11+hmm,stop-iso-1.1";

const PINNED: &[(Profile, &str, Option<&str>)] = &[
    // default-2 = the keywords scheme (docs/evaluation.md).
    (Profile::Default, "ex-001", Some("327bdc562561cf09")),
    (Profile::Default, "ex-002", Some("fca577922d2b2dec")),
    (Profile::Default, "ex-006", Some("ac6e768b10db7002")),
    (Profile::Default, "ex-012-html", Some("787dacf039a6ac09")),
    (Profile::Default, "ex-015", Some("6ca98d5f99b628ad")),
    (Profile::Default, "ex-021", Some("823036e3c562a07d")),
    (Profile::Default, "ex-028", Some("8651cb5a29b1de19")),
    (Profile::Default, "ex-029", None),
    (Profile::Default, "ex-030", None),
    // tfidf = default-1, bit for bit.
    (Profile::Tfidf, "ex-001", Some("327d4c5627656e09")),
    (Profile::Tfidf, "ex-002", Some("ce87379418a69dec")),
    (Profile::Tfidf, "ex-006", Some("84af2e8b1ac97202")),
    (Profile::Tfidf, "ex-012-html", Some("797da8f229b78889")),
    (Profile::Tfidf, "ex-015", Some("6d8b0d1ebb9e21ed")),
    (Profile::Tfidf, "ex-021", Some("966c76784670e0fd")),
    (Profile::Tfidf, "ex-028", Some("b368da522fb33a00")),
    (Profile::Tfidf, "ex-029", None),
    (Profile::Tfidf, "ex-030", None),
    (Profile::Keywords, "ex-001", Some("327bdc562561cf09")),
    (Profile::Tf, "ex-001", Some("32fc4c66a7656e09")),
    (Profile::Tf, "ex-012-html", Some("797dacf229a78889")),
    (Profile::Bigram, "ex-001", Some("a90458947d97572c")),
    (Profile::Bigram, "ex-012-html", Some("9c4dbf4210a9bfd9")),
    (Profile::Char3, "ex-001", Some("e6bb39c4e343ebe1")),
    (Profile::Char3, "ex-012-html", Some("d0067c7dd63668cb")),
    (Profile::Char3, "ex-030", None),
    (Profile::Seed000, "ex-001", Some("ba887b0cf58af0a0")),
    (Profile::Seed000, "ex-002", Some("a8cc5264d6a3d9ae")),
    (Profile::Seed000, "ex-006", Some("e97973fe775188d0")),
    (Profile::Seed000, "ex-012-html", Some("60abd38c06826089")),
    (Profile::Seed000, "ex-015", Some("62908346873c9c99")),
    (Profile::Seed000, "ex-021", Some("aa1ae735e6088f92")),
    (Profile::Seed000, "ex-028", Some("670885bf960797d2")),
    (Profile::Seed000, "ex-029", Some("73c42c24368c0924")),
    (Profile::Seed000, "ex-030", None),
];

#[test]
fn example_fingerprints_are_pinned() {
    let file = std::fs::File::open(common::examples()).unwrap();
    let docs: Vec<_> = read_all(file, "examples/articles.jsonl", &InputSpec::default())
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for profile in Profile::ALL {
        let fp = Fingerprinter::for_profile(profile);
        for &(_, id, want) in PINNED.iter().filter(|p| p.0 == profile) {
            let doc = docs.iter().find(|d| d.id.key() == id).expect(id);
            let Body::Fields(fields) = &doc.body else {
                unreachable!()
            };
            let got = fp
                .fingerprint_fields(fields)
                .ok()
                .map(|f| f.simhash.to_hex());
            assert_eq!(got.as_deref(), want, "{profile} {id}");
        }
    }
}

#[test]
fn version_is_pinned() {
    assert_eq!(
        Fingerprinter::for_profile(Profile::Default).version(),
        DEFAULT_VERSION
    );
    assert_eq!(
        Fingerprinter::for_profile(Profile::Default).version_pretokenized(),
        "default-2;feat=word;weight=tf*idf-jieba-0.11;top=20;nonum;hash=xxh3-64-s0;text=pretokenized"
    );
    assert_eq!(
        Fingerprinter::for_profile(Profile::Tfidf).version(),
        "tfidf-1;feat=word;weight=tf*idf-jieba-0.11;hash=xxh3-64-s0;text=html-1,nfkc,lower,jieba-0.11+hmm,stop-iso-1.1"
    );
    assert_eq!(
        Fingerprinter::for_profile(Profile::Char3).version(),
        "char3-1;feat=char3;weight=tf;hash=xxh3-64-s0;text=html-1,nfkc,lower,alnum"
    );
    assert!(Fingerprinter::for_profile(Profile::Seed000)
        .version()
        .starts_with("seed000;"));
}
