//! The text pipeline end to end through the library: HTML, normalisation, too-short rules,
//! mixed scripts, long input.

use neardup::{FingerprintConfig, Fingerprinter, Profile, Thresholds, TooShort};

const ARTICLE: &str =
    "青禾市图书馆完成为期半年的改造后重新开放。改造后的图书馆新增自习座位三百个，\
    延长夜间开放时间至晚上十点，并设立少儿阅读区、老年人阅览室和数字资源体验区。馆长介绍，\
    此次改造共投入资金一千二百万元，新增图书八万册，全年预计接待读者超过六十万人次。\
    市民王女士表示，新馆环境明亮安静，带孩子来看书非常方便。";

fn fp() -> Fingerprinter {
    Fingerprinter::for_profile(Profile::Default)
}

#[test]
fn html_wrapping_does_not_change_the_fingerprint() {
    let plain = fp().fingerprint(ARTICLE).unwrap();
    let paragraphs: String = ARTICLE
        .split('。')
        .filter(|s| !s.is_empty())
        .map(|s| format!("<p>{s}。</p>\n"))
        .collect();
    let html = format!(
        "<div class=\"article\"><script>var ad = \"广告 推广 点击购买\";</script>\
         <style>.x{{color:red}}</style>{paragraphs}<noscript>请开启脚本</noscript></div>"
    );
    assert_eq!(fp().fingerprint(&html).unwrap().simhash, plain.simhash);
}

#[test]
fn entities_are_decoded() {
    let a = fp()
        .fingerprint("<p>研究&amp;开发中心 发布 新型 电池 储能 系统 效率 提升 明显 成本 下降</p>")
        .unwrap();
    let b = fp()
        .fingerprint("研究&开发中心 发布 新型 电池 储能 系统 效率 提升 明显 成本 下降")
        .unwrap();
    assert_eq!(a.simhash, b.simhash);
}

#[test]
fn full_width_case_and_whitespace_do_not_matter() {
    let a = fp()
        .fingerprint(&format!("ＮｏｖａＰａｄ　３ 发布。{ARTICLE}"))
        .unwrap();
    let b = fp()
        .fingerprint(&format!("novapad 3   发布。\n\n{ARTICLE}"))
        .unwrap();
    assert_eq!(a.simhash, b.simhash);
}

#[test]
fn small_edit_is_near_unrelated_is_far() {
    let a = fp().fingerprint(ARTICLE).unwrap().simhash;
    let edited = ARTICLE.replace("非常方便", "十分方便");
    let b = fp().fingerprint(&edited).unwrap().simhash;
    let other = fp()
        .fingerprint(
            "南屿港今年前十个月完成集装箱吞吐量四百二十万标准箱，同比增长百分之九。港口集团表示，\
            新开通的三条国际航线带动了外贸货物增长，自动化码头二期工程将于明年投入使用，\
            届时港口通过能力将再提高三成。",
        )
        .unwrap()
        .simhash;
    assert!(a.distance(b) <= 3, "distance {}", a.distance(b));
    assert!(a.distance(other) > 10, "distance {}", a.distance(other));
}

#[test]
fn empty_and_punctuation_only_are_too_short() {
    for text in [
        "",
        "   \n\t",
        "……！！",
        "，。、；：？！“”（）",
        "<p>&nbsp;</p><script>x()</script>",
    ] {
        for profile in Profile::ALL {
            let got = Fingerprinter::for_profile(profile).fingerprint(text);
            assert_eq!(got, Err(TooShort::NoWords), "{profile} {text:?}");
        }
    }
}

#[test]
fn short_text_is_too_short_with_a_reason() {
    let err = fp().fingerprint("快讯：暂无更多内容。").unwrap_err();
    assert!(matches!(err, TooShort::FewWords { .. }), "{err:?}");
    assert_eq!(err.code(), "too_short");
    assert!(err.to_string().contains("at least 8"), "{err}");
}

#[test]
fn thresholds_are_configurable() {
    let lenient = Fingerprinter::new(FingerprintConfig {
        thresholds: Thresholds {
            min_words: 2,
            ..Thresholds::default()
        },
        ..FingerprintConfig::default()
    });
    assert!(lenient.fingerprint("市图书馆 改造 开放 座位 夜间").is_ok());
    assert!(fp().fingerprint("市图书馆 改造 开放 座位 夜间").is_err());
}

#[test]
fn one_repeated_word_is_dominated() {
    let err = fp().fingerprint(&"图书馆 ".repeat(50)).unwrap_err();
    assert!(
        matches!(err, TooShort::FewWords { words: 1, .. }),
        "{err:?}"
    );
    let lenient = Fingerprinter::new(FingerprintConfig {
        thresholds: Thresholds {
            min_words: 1,
            ..Thresholds::default()
        },
        ..FingerprintConfig::default()
    });
    let err = lenient.fingerprint(&"图书馆 ".repeat(50)).unwrap_err();
    assert!(matches!(err, TooShort::Dominated { .. }), "{err:?}");
}

#[test]
fn mixed_chinese_and_english() {
    let f = fp();
    let words =
        f.words("星衡科技发布 NovaPad 3 平板电脑，搭载 the new Nebula chip，续航提升 20%。");
    for w in ["novapad", "平板", "电脑", "nebula", "chip", "续航"] {
        assert!(words.iter().any(|x| x == w), "{w} missing from {words:?}");
    }
    assert!(
        !words.iter().any(|x| x == "the" || x == "，" || x == "%"),
        "{words:?}"
    );
}

#[test]
fn fields_are_one_text() {
    let f = fp();
    let joined = f
        .fingerprint(&format!("图书馆重新开放\n{ARTICLE}"))
        .unwrap();
    let fields = f.fingerprint_fields(&["图书馆重新开放", ARTICLE]).unwrap();
    assert_eq!(joined.simhash, fields.simhash);
}

#[test]
fn very_long_single_line_input() {
    // 8 MB on one line with no line breaks: segmented in bounded pieces.
    let text = ARTICLE
        .replace('\n', "")
        .repeat(8_000_000 / ARTICLE.len() + 1);
    let long = fp().fingerprint(&text).unwrap();
    // Repetition does not change relative weights, so the fingerprint is the article's.
    let once = fp().fingerprint(ARTICLE).unwrap();
    assert!(long.simhash.distance(once.simhash) <= 3);
}

#[test]
fn fingerprinter_is_shareable_across_threads() {
    let f = fp();
    let want = f.fingerprint(ARTICLE).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            let f = f.clone();
            let want = want.clone();
            s.spawn(move || assert_eq!(f.fingerprint(ARTICLE).unwrap(), want));
        }
    });
}
