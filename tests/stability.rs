//! Pinned fingerprints: an accidental change of output fails here. A deliberate change bumps
//! the fingerprint version (src/fingerprint/mod.rs) and re-pins these values.

mod common;

use neardup::input::{read_all, Body, InputSpec};
use neardup::{Fingerprinter, Profile};

const DEFAULT_VERSION: &str =
    "default-1;weight=tf*idf-jieba-0.11;hash=xxh3-64-s0;text=html-1,nfkc,lower,jieba-0.11+hmm,stop-iso-1.1";

const PINNED: &[(Profile, &str, Option<&str>)] = &[
    (Profile::Default, "ex-001", Some("327d4c5627656e09")),
    (Profile::Default, "ex-002", Some("ce87379418a69dec")),
    (Profile::Default, "ex-006", Some("84af2e8b1ac97202")),
    (Profile::Default, "ex-012-html", Some("797da8f229b78889")),
    (Profile::Default, "ex-015", Some("6d8b0d1ebb9e21ed")),
    (Profile::Default, "ex-021", Some("966c76784670e0fd")),
    (Profile::Default, "ex-028", Some("b368da522fb33a00")),
    (Profile::Default, "ex-029", None),
    (Profile::Default, "ex-030", None),
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
        "default-1;weight=tf*idf-jieba-0.11;hash=xxh3-64-s0;text=pretokenized"
    );
    assert!(Fingerprinter::for_profile(Profile::Seed000)
        .version()
        .starts_with("seed000;"));
}
