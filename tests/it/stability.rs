//! Pinned fingerprints and MinHash signatures: an accidental change of output fails here. A
//! deliberate change bumps the fingerprint version (crates/core/src/fingerprint/mod.rs) and re-pins these
//! values.

use crate::common;

use neardup::fingerprint::Methods;
use neardup::input::{read_all, Body, InputSpec};
use neardup::{
    FingerprintConfig, Fingerprinter, Method, MinHashParams, MinHasher, Profile, Signature, Sketch,
};

const DEFAULT_VERSION: &str =
    "default-3;feat=word;weight=tf;hash=xxh3-64-s0;text=html-1,nfkc,lower,t2s-1,jieba-0.11+hmm,stop-iso-1.1";

const PINNED: &[(Profile, &str, Option<&str>)] = &[
    // default-3 = the tf scheme (docs/evaluation.md); ex-001 and ex-012-html equal the `tf`
    // pins below, which were pinned before tf became the default.
    (Profile::Default, "ex-001", Some("32fc4c66a7656e09")),
    (Profile::Default, "ex-002", Some("ce07219614a69fec")),
    (Profile::Default, "ex-006", Some("84af2ecb1acb7202")),
    (Profile::Default, "ex-012-html", Some("797dacf229a78889")),
    (Profile::Default, "ex-015", Some("6c9d0d1ebb9e25bd")),
    (Profile::Default, "ex-021", Some("926c3420c660f0dd")),
    (Profile::Default, "ex-028", Some("9268da522fb21a00")),
    (Profile::Default, "ex-029", None),
    (Profile::Default, "ex-030", None),
    // keywords = default-2, bit for bit.
    (Profile::Keywords, "ex-001", Some("327bdc562561cf09")),
    (Profile::Keywords, "ex-002", Some("fca577922d2b2dec")),
    (Profile::Keywords, "ex-006", Some("ac6e768b10db7002")),
    (Profile::Keywords, "ex-012-html", Some("787dacf039a6ac09")),
    (Profile::Keywords, "ex-015", Some("6ca98d5f99b628ad")),
    (Profile::Keywords, "ex-021", Some("823036e3c562a07d")),
    (Profile::Keywords, "ex-028", Some("8651cb5a29b1de19")),
    (Profile::Keywords, "ex-029", None),
    (Profile::Keywords, "ex-030", None),
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
        "default-3;feat=word;weight=tf;hash=xxh3-64-s0;text=pretokenized"
    );
    assert_eq!(
        Fingerprinter::for_profile(Profile::Tfidf).version(),
        "tfidf-1;feat=word;weight=tf*idf-jieba-0.11;hash=xxh3-64-s0;text=html-1,nfkc,lower,t2s-1,jieba-0.11+hmm,stop-iso-1.1"
    );
    assert_eq!(
        Fingerprinter::for_profile(Profile::Char3).version(),
        "char3-1;feat=char3;weight=tf;hash=xxh3-64-s0;text=html-1,nfkc,lower,t2s-1,alnum"
    );
    // seed000 never folds, even when asked to: the older Java service did not.
    assert_eq!(
        Fingerprinter::for_profile(Profile::Seed000).version(),
        "seed000;text=html-1,nfkc,lower,jieba-0.11+hmm,stop-iso-1.1"
    );
    assert_eq!(
        Fingerprinter::new(FingerprintConfig {
            fold: true,
            ..FingerprintConfig::for_profile(Profile::Seed000)
        })
        .version(),
        Fingerprinter::for_profile(Profile::Seed000).version()
    );
}

/// The MinHash version of the default settings, from text and from words.
const MINHASH_VERSION: &str = "minhash-1;shingle=w2;n=128;sig=oph;bands=42x3;hash=xxh3-64-s0;text=html-1,nfkc,lower,t2s-1,jieba-0.11+hmm,stop-iso-1.1";
/// What indices and stores made before folding hold, and what `seed000` (which never folds)
/// makes: the same bits for every text without a Traditional character.
const MINHASH_VERSION_UNFOLDED: &str = "minhash-1;shingle=w2;n=128;sig=oph;bands=42x3;hash=xxh3-64-s0;text=html-1,nfkc,lower,jieba-0.11+hmm,stop-iso-1.1";
const MINHASH_VERSION_PRETOKENIZED: &str =
    "minhash-1;shingle=w2;n=128;sig=oph;bands=42x3;hash=xxh3-64-s0;text=pretokenized";

/// A text's full MinHash signature and its LSH band keys, computed once with the code of
/// `MINHASH_VERSION`. Signatures and band keys live in stores for years: if one of these
/// changes, the new code makes signatures that old stores cannot be compared with, so the
/// change needs a version bump (`MINHASH_VERSION_NAME` in crates/core/src/fingerprint/mod.rs, or the
/// parameters' part of the version) before these values are re-pinned.
struct GoldenSignature {
    name: &'static str,
    /// Distinct shingles of the text: carried by the signature and stored beside it.
    distinct: u32,
    signature: &'static [u32],
    bands: &'static [u64],
}

/// A text of its own, not from the example corpus.
const GOLDEN_TEXT: &str =
    "青禾市图书馆完成为期八个月的改造工程后于周六重新开放，新增自习座位六百个，并开设夜间阅览室。";

/// Pre-tokenized words (no segmentation: the words are hashed as given).
const GOLDEN_TOKENS: [&str; 10] = [
    "图书馆",
    "改造",
    "工程",
    "重新",
    "开放",
    "新增",
    "自习",
    "座位",
    "夜间",
    "阅览室",
];

const GOLDEN: &[GoldenSignature] = &[
    GoldenSignature {
        name: "ex-001",
        distinct: 170,
        signature: &[
            34531510, 1384795340, 1517626799, 105253214, 1128705691, 3927802165, 1643321700,
            452579722, 1116054343, 488307644, 2412009853, 2256620572, 2149057712, 2176508493,
            1082650470, 2018549010, 746183850, 2964860957, 3755614170, 483549316, 557731981,
            3217476443, 3080971130, 2176508493, 2156893830, 464562316, 1223590686, 1984623487,
            693002895, 1877823386, 809282373, 4217859969, 990435129, 2409047707, 1311604171,
            1018143554, 982844792, 594798349, 2452181942, 105253214, 772604509, 661288384,
            3923537878, 982844792, 2836132127, 1519646942, 302012040, 1678125331, 1646906214,
            49618687, 86720844, 1778049276, 3755614170, 265589009, 1756548616, 18154745,
            2932795365, 676579503, 105253214, 1562464848, 86720844, 693002895, 1128705691,
            2464094190, 1384795340, 1936189868, 676579503, 840651494, 244923678, 2745910818,
            3765154293, 779485644, 1590189155, 1268257230, 1018143554, 1763695554, 387732093,
            568986667, 49618687, 3689995658, 488307644, 2409047707, 1366512702, 28888822,
            1395341822, 3313690250, 1473580459, 1727827224, 1223590686, 947801877, 3686018251,
            1033174165, 990435129, 1678125331, 2409047707, 2433696695, 848266592, 821741309,
            2391331602, 302012040, 772604509, 293863874, 1231080060, 151936951, 2745910818,
            27857229, 1859334195, 990435129, 863600351, 1562464848, 2155467151, 1563755587,
            982844792, 1948032112, 1473580459, 3080971130, 3442301326, 105253214, 1886880682,
            105253214, 2464094190, 947801877, 3833069800, 676579503, 2031105863, 3394038985,
            3768981592, 407569261,
        ],
        bands: &[
            0x2d9b822d4c4e3e81,
            0x21af335266415b68,
            0x27c591ce24252fa1,
            0xc5d9b96bf3824d4f,
            0x103284b4a2899559,
            0xccb704c616af1a3c,
            0x9287a60b9278e0c7,
            0x6577f540e412014c,
            0x0c7ad77ac3bb3f72,
            0x8f99496a739c183e,
            0x3ab77ab278b73120,
            0xf59a84ed8e0d62b4,
            0xd3d218a5ea6cc381,
            0xb5c2f555fa537ed4,
            0x2d155f6a16ed4381,
            0xb882ff8aeee3810e,
            0x53b233f542881d4c,
            0x532bc64bc2b550d8,
            0xe08618d102a5bccd,
            0xcffd42de6c0be7b3,
            0xb79198e1911feca9,
            0x7aaca82be1c22b4f,
            0x5fcbb73dee4584b5,
            0x0d0e076f5dacba9b,
            0x57392c774fc6b6fe,
            0x92a6cd5a2d39c8ec,
            0xa4b436cf6c1c1877,
            0xbdc093b0ec176885,
            0xf334c19ced615cfe,
            0x1655588cb113aff3,
            0x1aa4f11a950a736d,
            0x6747d9c89d3b9233,
            0xf417844af333ca0d,
            0x195795e08c754fe4,
            0x78945ef866e53f7f,
            0x8fc1d3a952fe19dd,
            0x40070bfa1f589ab3,
            0xa3e59e4f5edbb6d4,
            0x098cbf7b43f24471,
            0x4a3ea859a974c7c8,
            0x92c44e7fbbb5048e,
            0xafd3d36f591fe754,
        ],
    },
    GoldenSignature {
        name: "ex-012-html",
        distinct: 155,
        signature: &[
            2222116632, 2287313975, 288328471, 409061803, 381122906, 989392681, 2350959096,
            2646007262, 1421941271, 2927175994, 765822215, 2413529586, 344703165, 1417197051,
            1975915379, 2067660813, 533511553, 1272285732, 451195936, 544672634, 878890557,
            3204908762, 769059764, 1021124082, 518424614, 1876666631, 832945274, 2646007262,
            2927175994, 192326155, 1312832041, 190978201, 29551245, 288328471, 839239785,
            2059700366, 121803537, 594798349, 2247822483, 4223015805, 587784984, 2014416828,
            4165343282, 519154736, 1340017556, 717373358, 1658654903, 45429705, 717373358,
            3097440653, 2545560549, 34177740, 451195936, 1712973, 185718992, 1764260938, 317671807,
            2095654100, 2454480075, 192326155, 372516756, 2095654100, 2182327983, 435463256,
            1876666631, 1936189868, 2019298244, 1658654903, 1892263797, 2390526248, 2413529586,
            55053044, 3965743765, 1346962659, 2059700366, 1892263797, 3218620804, 4165343282,
            1436812098, 3218620804, 587784984, 1643418, 2795902655, 3798233224, 2464003102,
            769059764, 1260619881, 1183250270, 1362883230, 1764260938, 192326155, 2114411737,
            1333759170, 2182327983, 3645871893, 121803537, 2084093264, 989392681, 789182015,
            1658654903, 372516756, 2350959096, 1340017556, 122087421, 2722216861, 2287313975,
            3811709886, 3133115075, 1033904724, 192326155, 940260065, 956844844, 372516756,
            3204908762, 765822215, 832945274, 3112504458, 2310689674, 4146907404, 2927175994,
            435463256, 1808946864, 931563125, 450477711, 3112504458, 1953816172, 258013495,
            1953816172,
        ],
        bands: &[
            0x2c2023b184d43396,
            0xdbec19cbba07da21,
            0xba7f78046056ff0a,
            0xd54fea2d29b51ca1,
            0xeddb3434edb17386,
            0xd3d1bd48fe21d9b3,
            0x3d2951e931e955c1,
            0x03fe83f424f4b1f7,
            0xffc97c05b843bd8a,
            0xbc90c42a6ce260db,
            0xb7faece834071449,
            0xd470b3e387ef987a,
            0xda84cc0fe4304a2e,
            0x82a5acdc79053820,
            0x50b16b420f789fb4,
            0xf334863f090d42f9,
            0x669ae165dabf8dee,
            0x131e0da24e85d720,
            0x29ab2630bfb41481,
            0xa2564e663d284c63,
            0x4d27390422c81339,
            0x0f758d2623bb509d,
            0xdb5e6063700c3b2b,
            0x6fbbcdef091babe4,
            0xa63c434a6ce01477,
            0xb731630bd78ce31e,
            0x60870f9ca7b46508,
            0x37e8c48340cd65bd,
            0x51723b1517b61aa7,
            0x9f2a90478320ce1d,
            0x8f7854bfcd411209,
            0x927cf63bed6a7d02,
            0xc568b06ec340ebfa,
            0x968c956e182ac9d6,
            0x2ec8125f9ac86fc6,
            0x9be629a8b28c95c5,
            0xc42681c1d51bb732,
            0x47dcf1592f765eb2,
            0x5f431ca1cdcd3e2f,
            0xf08398fb0a725e8a,
            0x5d65881e103be18b,
            0x48df6e07f9bc777b,
        ],
    },
    GoldenSignature {
        name: "text",
        distinct: 17,
        signature: &[
            2080712750, 1499762008, 227641124, 2080712750, 3187883482, 1499762008, 227641124,
            1115596303, 1364542285, 3852352216, 4293530695, 1499762008, 3249398472, 2080712750,
            1506894610, 1506894610, 3986166517, 558763374, 2890827462, 4293530695, 1506894610,
            1499762008, 2080712750, 3845383158, 3187883482, 831053432, 4293530695, 1506894610,
            3986166517, 3845383158, 3187883482, 1499762008, 558763374, 3986166517, 4293530695,
            1115596303, 558763374, 1116577980, 3845383158, 1499762008, 3852352216, 227641124,
            1364542285, 1115596303, 1116577980, 1116577980, 2080712750, 4293530695, 1116577980,
            1364542285, 558763374, 2080712750, 1116577980, 1499762008, 3986166517, 1499762008,
            3852352216, 3845383158, 2890827462, 4293530695, 1115596303, 227641124, 1115596303,
            831053432, 2080712750, 2890827462, 1499762008, 2080712750, 3852352216, 3852352216,
            3852352216, 1364542285, 3986166517, 1364542285, 1115596303, 1115596303, 4293530695,
            2890827462, 1499762008, 227641124, 3249398472, 558763374, 3845383158, 3852352216,
            1364542285, 558763374, 3249398472, 3187883482, 3845383158, 2890827462, 831053432,
            3249398472, 4293530695, 2080712750, 227641124, 558763374, 558763374, 558763374,
            831053432, 2080712750, 1506894610, 227641124, 1116577980, 1115596303, 227641124,
            3249398472, 1364542285, 3986166517, 1116577980, 227641124, 1115596303, 558763374,
            227641124, 3249398472, 3249398472, 3249398472, 3187883482, 4293530695, 558763374,
            831053432, 1364542285, 2890827462, 2890827462, 1116577980, 2080712750, 1499762008,
            3845383158, 558763374,
        ],
        bands: &[
            0xee8a1383373c964f,
            0x0d957ca6abb0e381,
            0xc7429f70c49fb305,
            0xb855213e3a391036,
            0xd7498ee1d7d3e13f,
            0x0352f1e94c288772,
            0x4696aaddb9917946,
            0x346a206349c2a629,
            0xa0921a39068de893,
            0x24bea848eb6ddd0c,
            0xfe7031c6a2ff51e4,
            0x53b3438c210ccdb5,
            0x2f69fbbf941479be,
            0x98aca3ed80778cd9,
            0x6bc68f675d09062b,
            0x5755d39b272b802e,
            0x2f63239cd3d68d0a,
            0x16f1a890463b7bf9,
            0x85d6710e7b90c2e7,
            0xe83a0727bb2cbb48,
            0x7a35b459e0468722,
            0x33cd71f0b84f9ad5,
            0x798133e254b878fd,
            0xfe1db942054567c0,
            0x44fb6c9463e49f01,
            0x147714c3d4c16247,
            0xd0b0374455a19d08,
            0x3b248e6883916583,
            0x18a43e8fe06c6dd5,
            0x4cd5cf6375b8b30a,
            0xd55f285473d954ec,
            0x6e8fbbe311bb00af,
            0x2ac4cc485a13aa63,
            0x0aded5ac1750bd11,
            0xdc17db2ac72c72cf,
            0x2d7672ce0856f24e,
            0xb346b35accdb9ff1,
            0x8de47c11658a7ad7,
            0xd89232f60f08b2d8,
            0xfe6c8aaceaec119b,
            0x86764700a4811088,
            0xbce8770154e2f76a,
        ],
    },
    GoldenSignature {
        name: "tokens",
        distinct: 9,
        signature: &[
            2895671304, 955548126, 227641124, 2895671304, 3187883482, 4293530695, 227641124,
            227641124, 3187883482, 4293530695, 4293530695, 955548126, 2895671304, 2895671304,
            3986166517, 955548126, 3986166517, 3925017858, 227641124, 4293530695, 2895671304,
            227641124, 2895671304, 955548126, 3187883482, 831053432, 4293530695, 3187883482,
            3986166517, 831053432, 3187883482, 4293530695, 3925017858, 3986166517, 4293530695,
            3986166517, 3925017858, 955548126, 3925017858, 227641124, 955548126, 227641124,
            2895671304, 955548126, 955548126, 955548126, 2895671304, 4293530695, 955548126,
            227641124, 3925017858, 2895671304, 955548126, 227641124, 3986166517, 4293530695,
            2895671304, 227641124, 831053432, 4293530695, 3925017858, 227641124, 227641124,
            831053432, 2895671304, 955548126, 3187883482, 2895671304, 831053432, 831053432,
            227641124, 831053432, 3986166517, 2895671304, 3925017858, 4293530695, 4293530695,
            227641124, 227641124, 227641124, 831053432, 3925017858, 3187883482, 2895671304,
            227641124, 3925017858, 3187883482, 3187883482, 4293530695, 3986166517, 831053432,
            955548126, 4293530695, 2895671304, 227641124, 3925017858, 3925017858, 3925017858,
            831053432, 2895671304, 955548126, 227641124, 955548126, 4293530695, 227641124,
            3925017858, 831053432, 3986166517, 955548126, 227641124, 4293530695, 3925017858,
            227641124, 3187883482, 4293530695, 227641124, 3187883482, 4293530695, 3925017858,
            831053432, 831053432, 4293530695, 3986166517, 955548126, 2895671304, 2895671304,
            3986166517, 3925017858,
        ],
        bands: &[
            0x4aebd611bee6f232,
            0xb6f55245060d0990,
            0x527493372c27f1c5,
            0xefda0e7e2417e180,
            0x782ab6fcde90c708,
            0xfae0f011e8037584,
            0xbb0c617105bd00ca,
            0x7b3816e0bec7a057,
            0xa0921a39068de893,
            0x7d68dff82a2f0b5f,
            0xe89ec69b3d88d0bd,
            0x471598d963cfa981,
            0x6e364989ff4c0812,
            0x87d53aa7db637054,
            0x1d8e2d6ff12f0637,
            0xab5d948ff9e619be,
            0xa935df8331319d01,
            0x57ab59ec33505a26,
            0x877e0bac911e5ed0,
            0x3db9056982874f0e,
            0x0533f260330fc4bd,
            0x9b467c78da656c4f,
            0xe8fd9040ea55ad86,
            0x4e3400db5e946f6e,
            0x2bce54a510a82ece,
            0x8a7c322655e6cacf,
            0x9b2859365b18ec74,
            0x3e2b06499625edcd,
            0xb4f7ef676a997432,
            0x62f834a0159b6f62,
            0xd3f989fdb3c8f37c,
            0x1baa160df564b67a,
            0xc0f7a587fd4e940f,
            0xf9b70c234800e0bf,
            0x4be98c14d3cd2484,
            0x584bb6b1d66db3ad,
            0x65bddc4ce846debf,
            0xf79be7123da57842,
            0x40e6a0aeb4f5b968,
            0xd5bf98292f0c5afa,
            0xbb002282b5bfa02b,
            0xebfbc976259b954c,
        ],
    },
];

/// `n=16;sig=perm;bands=4x4` (the permutations scheme) of the word hashes 1..=5 and 6, 7 in
/// two fields.
const GOLDEN_PERM: GoldenSignature = GoldenSignature {
    name: "perm",
    distinct: 5,
    signature: &[
        394005959, 1369287852, 493345241, 459571903, 277599337, 758751738, 1986051329, 398763855,
        675368506, 143014061, 1382125840, 222640885, 3374562183, 362892386, 1424242255, 589142230,
    ],
    bands: &[
        0xf41a373ef64d5345,
        0x75e1d1b90d3b731a,
        0xee168ce479c12266,
        0x097ada26d150b7a5,
    ],
};

fn check_golden(g: &GoldenSignature, got: &Signature, params: &MinHashParams) {
    assert_eq!(got.values(), g.signature, "{}: signature", g.name);
    assert_eq!(
        got.distinct(),
        Some(g.distinct),
        "{}: distinct shingles",
        g.name
    );
    assert_eq!(got.band_keys(params), g.bands, "{}: band keys", g.name);
}

#[test]
fn minhash_version_is_pinned() {
    let fp = Fingerprinter::for_profile(Profile::Default);
    assert_eq!(fp.minhash_version(), MINHASH_VERSION);
    assert_eq!(
        fp.minhash_version_pretokenized(),
        MINHASH_VERSION_PRETOKENIZED
    );
    assert_eq!(fp.version_of(Method::MinHash, false), MINHASH_VERSION);
    // The MinHash version depends on the SimHash profile only through folding: `seed000`
    // never folds, and every other profile folds by default.
    assert_eq!(
        Fingerprinter::for_profile(Profile::Seed000).minhash_version(),
        MINHASH_VERSION_UNFOLDED
    );
    for profile in Profile::ALL {
        if profile == Profile::Seed000 {
            continue;
        }
        assert_eq!(
            Fingerprinter::for_profile(profile).minhash_version(),
            MINHASH_VERSION,
            "{profile}"
        );
        let unfolded = Fingerprinter::new(FingerprintConfig {
            fold: false,
            ..FingerprintConfig::for_profile(profile)
        });
        assert_eq!(
            unfolded.minhash_version(),
            MINHASH_VERSION_UNFOLDED,
            "{profile}"
        );
        assert_eq!(
            unfolded.version(),
            Fingerprinter::for_profile(profile)
                .version()
                .replace(",t2s-1", ""),
            "{profile}"
        );
    }
    assert_eq!(
        MinHashParams::DEFAULT.to_string(),
        "shingle=w2;n=128;sig=oph;bands=42x3"
    );
}

#[test]
fn minhash_signatures_and_band_keys_are_pinned() {
    let fp = Fingerprinter::for_profile(Profile::Default);
    let params = MinHashParams::DEFAULT;
    let file = std::fs::File::open(common::examples()).unwrap();
    let docs: Vec<_> = read_all(file, "examples/articles.jsonl", &InputSpec::default())
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for g in GOLDEN {
        let sig = match g.name {
            "text" => fp.minhash(GOLDEN_TEXT).unwrap().signature,
            "tokens" => {
                let sketch = fp
                    .sketch_tokens(Methods::only(Method::MinHash), &GOLDEN_TOKENS)
                    .into_sketch(Method::MinHash)
                    .unwrap();
                let Sketch::MinHash(sig) = sketch else {
                    unreachable!()
                };
                sig
            }
            id => {
                let doc = docs.iter().find(|d| d.id.key() == id).expect(id);
                let Body::Fields(fields) = &doc.body else {
                    unreachable!()
                };
                // The pass that makes both methods' sketches makes the same signature.
                let both = fp
                    .sketch_fields(Methods::BOTH, fields)
                    .minhash
                    .unwrap()
                    .unwrap();
                let sig = fp.minhash_fields(fields).unwrap();
                assert_eq!(both, sig, "{id}");
                assert_eq!(&*sig.version, MINHASH_VERSION);
                sig.signature
            }
        };
        assert_eq!(sig.len(), 128, "{}", g.name);
        check_golden(g, &sig, &params);
    }
    let perm: MinHashParams = "n=16;sig=perm;bands=4x4".parse().unwrap();
    let sig = MinHasher::new(perm)
        .signature_of_hashes(&[vec![1u64, 2, 3, 4, 5], vec![6, 7]])
        .unwrap();
    check_golden(&GOLDEN_PERM, &sig, &perm);
}
