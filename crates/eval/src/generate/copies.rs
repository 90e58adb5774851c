//! The copied-text kinds of issue 43: pairs that share copied text rather than words, or words
//! rather than copied text, for the alignment-based detector to be judged on.
//!
//! They are appended after the partial reprints ([`super::Config::copies`]) from ChaCha8
//! stream [`COPIES_STREAM`] of the seed, so every pair before them stays as it was. In
//! generation order ([`COPIES_KINDS`]):
//!
//! 1. `template_instances` ([`DIFFERENT`], `hard_negative`): two instances of one news
//!    template ([`TEMPLATE_FAMILIES`], several templates each, written for the benchmark)
//!    with different fills: people, places and organisations mined from the corpus by
//!    jieba's part-of-speech tags ([`Pools`]), and random dates, times, numbers and amounts.
//!    Fixed text is [`FIXED_SHARE`] of an instance's letters.
//! 2. `template_repost` ([`NEAR_DUPLICATE`], `positive`): an instance, and the same instance
//!    under a news site's header and footer (the `boilerplate` edit's lines).
//! 3. `compilation` ([`SHARES_PASSAGE`], `shared_passage`): a round-up of
//!    [`COMPILATION_SOURCES`] articles, each giving a passage of [`COMPILATION_SHARE`] of its
//!    content; paired with each source.
//! 4. `shared_quote` ([`SHARES_PASSAGE`], `shared_passage`): two unrelated articles quoting
//!    the same statement of a third.
//! 5. `wrapped_excerpt` ([`CONTAINED_IN`], `positive`): a lead of [`WRAPPED_SIZES`] of an
//!    article on a site page: the site's header and footer (500–800 characters, as the
//!    messy kinds' sites) and a block of related links drawn for the page, longer than the
//!    lead.
//! 6. `reworded_passage` ([`CONTAINED_IN`], `positive`): a middle passage of
//!    [`REWORDED_SIZES`] of an article, lightly reworded.
//!
//! The kinds that copy a passage (3–6, and the repost) carry its character span in `a` and
//! in `b` (`a_span`, `b_span`).

use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;
use std::sync::OnceLock;

use rand::seq::SliceRandom;
use rand::Rng;
use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use super::templates::FAMILIES;
use super::{
    categories, category, chars, nearest_lead_cut, round, share_range, short_title,
    split_sentences, Article, Config, Generator, Site, CITIES, EDITORS, GIVEN, PARTIAL_MIN_CHARS,
    PARTIAL_MIN_LETTERS, PASSAGE_START, SOURCES, SURNAMES,
};
use crate::oracle;
use crate::{LabelledPair, CONTAINED_IN, COPIES_KINDS, DIFFERENT, NEAR_DUPLICATE, SHARES_PASSAGE};

/// The ChaCha8 stream the copied-text kinds draw from (streams 0–2 make everything before
/// them, which adding them left as it was).
pub const COPIES_STREAM: u64 = 3;

/// The template families, in the order they are drawn from: daily statistics bulletins
/// (passengers, air quality, market prices), meeting notices, weather forecasts, stock-market
/// close reports, university admission notices, company listing (IPO) notices, road traffic
/// notices, and personnel notices (appointments and hiring). Three templates each.
pub const TEMPLATE_FAMILIES: &[&str] = &[
    "daily_statistics",
    "meeting_notice",
    "weather_forecast",
    "stock_close",
    "admission_notice",
    "ipo_notice",
    "traffic_notice",
    "personnel_notice",
];

/// The share of a template instance's content letters and digits that is the template's own
/// text (the rest is slot fills): an instance outside it is drawn again.
pub const FIXED_SHARE: RangeInclusive<f64> = 0.40..=0.60;

/// Characters of a template instance's content.
pub const TEMPLATE_CHARS: RangeInclusive<usize> = 150..=500;

/// Source articles of a compilation.
pub const COMPILATION_SOURCES: usize = 3;

/// The share of its source's content a compilation passage takes (characters).
pub const COMPILATION_SHARE: RangeInclusive<f64> = 0.25..=0.40;

/// Characters of content a compilation source has, at least.
pub const COMPILATION_MIN_CHARS: usize = 600;

/// A compilation passage is at most this share of the compilation (characters): the
/// compilation is not mostly inside its source.
pub const COMPILATION_MAX_SHARE: f64 = 0.5;

/// Characters of a shared quote: consecutive sentences of a third article.
pub const SHARED_QUOTE_CHARS: RangeInclusive<usize> = 60..=200;

/// A shared quote is at most this share of each quoting article's content (characters).
pub const SHARED_QUOTE_MAX_SHARE: f64 = 0.25;

/// Letters in a run two articles must not share to count as sharing no text: the sources of
/// a compilation, and the two articles of a shared quote (apart from the quote).
pub const SHARED_RUN: usize = 20;

/// The shares of its article a wrapped excerpt keeps: its `size`.
pub const WRAPPED_SIZES: &[f64] = &[0.2, 0.25, 0.3, 0.4];

/// Characters of content the article of a wrapped excerpt has, at most (and at least
/// [`PARTIAL_MIN_CHARS`]): its related-links block is longer than its lead, and a lead of a
/// longer article would need a list of hundreds of headlines.
pub const WRAPPED_MAX_CHARS: usize = 3000;

/// Letters and digits a wrapped excerpt holds, at least.
pub const WRAPPED_MIN_LETTERS: usize = 200;

/// Sites with a header whose pages carry the wrapped excerpts (their lines are the same on
/// every page; the related links are drawn for each).
pub const WRAPPED_SITES: usize = 12;

/// The shares of its article a reworded passage keeps: its `size`.
pub const REWORDED_SIZES: &[f64] = &[0.25, 0.3, 0.4];

/// The share of a reworded passage's words replaced by a synonym or a near form
/// ([`SYNONYMS`]), as far as the table reaches; a passage where it reaches less than
/// [`REWORDED_MIN_SHARE`] is not used.
pub const REWORDED_SHARE: f64 = 0.10;

/// See [`REWORDED_SHARE`].
pub const REWORDED_MIN_SHARE: f64 = 0.06;

// --- pools of names -------------------------------------------------------------------

/// Articles read for names, at most (evenly spaced), and characters of each (title and the
/// start of the content).
const MINED_ARTICLES: usize = 6000;
const MINED_CHARS: usize = 800;
/// The most frequent mined people are public figures, whom formula notices do not name.
const SKIP_FAMOUS: usize = 40;
const MINED_SURNAMES: &str = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗高郑梁谢宋唐韩冯邓曹彭曾肖田董潘袁蔡蒋余于杜叶程魏苏吕丁任卢姚沈钟姜崔谭陆范汪廖石金韦贾夏付方邹熊白孟秦邱侯江尹薛闫段雷龙黎史陶贺毛郝顾龚邵万覃武钱戴严莫孔向常汤康易乔赖文";

/// The names slots are filled with: people (`nr`), places (`ns`) and organisations (`nt`)
/// as jieba tags them in the corpus, most frequent first; cities are the places named
/// `…市` or of two characters. A pool the input cannot fill (a small test input) is filled
/// from the generator's own lists.
#[derive(Clone, Debug)]
pub struct Pools {
    pub people: Vec<String>,
    pub places: Vec<String>,
    pub cities: Vec<String>,
    pub orgs: Vec<String>,
}

/// Whether a word tagged `ns` is taken for a place (see [`Pools::mine`]).
fn is_place(word: &str) -> bool {
    let n = chars(word);
    let foreign_state = word.ends_with('州') && n >= 4;
    (3..=8).contains(&n)
        && word.ends_with(PLACE_ENDS)
        && !word.ends_with("城市")
        && !word.ends_with("地区")
        && !foreign_state
        && !NOT_PLACES.contains(&word)
}

fn all_cjk(s: &str) -> bool {
    !s.is_empty() && s.chars().all(super::is_cjk)
}

/// Words after which (or before which) a word tagged `nr` is taken for a person's name.
const NAME_BEFORE: &[&str] = &[
    "表示",
    "说",
    "介绍",
    "指出",
    "称",
    "认为",
    "告诉",
    "透露",
    "坦言",
    "强调",
    "同志",
    "先生",
    "女士",
    "教授",
    "主任",
    "书记",
    "局长",
    "市长",
    "县长",
    "院长",
    "董事长",
    "总经理",
    "主席",
    "经理",
    "处长",
    "所长",
    "副局长",
    "委员",
    "代表",
    "研究员",
    "医生",
    "老师",
    "博士",
];
const NAME_AFTER: &[&str] = &["记者", "通讯员", "编辑", "实习生", "作者", "摄影"];
/// How a place tagged `ns` must end to be taken (the others are countries, regions and words
/// jieba mistakes for places).
const PLACE_ENDS: &[char] = &['省', '市', '县', '区', '镇', '乡', '村', '州'];
/// Words ending as places do that jieba tags `ns` and are none.
const NOT_PLACES: &[&str] = &[
    "大城市",
    "大中华区",
    "经开区",
    "开发区",
    "高新区",
    "自贸区",
    "示范区",
    "保护区",
    "风景区",
    "旅游区",
    "住宅区",
    "新城区",
    "老城区",
    "中心区",
    "小城镇",
    "特色小镇",
    "大都市",
];
/// Organisations tagged `nt` that a local notice would not name: generic words, and foreign
/// or international bodies (what contains any of these).
const NOT_ORGS: &[&str] = &[
    "上市公司",
    "公立医院",
    "民办学校",
    "党和政府",
    "公共场所",
    "网上银行",
    "商业银行",
    "国际部",
    "美国",
    "日本",
    "英国",
    "法国",
    "德国",
    "韩国",
    "意大利",
    "俄罗斯",
    "秘鲁",
    "缅甸",
    "欧盟",
    "联合国",
    "世界",
    "国际",
    "美众",
    "英格兰",
    "剑桥",
    "哈佛",
    "芝加哥",
    "纽约",
    "纽交所",
    "罗马",
];
/// How an organisation tagged `nt` must end to be taken (the others are teams and words
/// jieba mistakes for organisations).
const ORG_ENDS: &[&str] = &[
    "局",
    "委员会",
    "委",
    "部",
    "厅",
    "院",
    "大学",
    "学院",
    "中心",
    "公司",
    "集团",
    "银行",
    "协会",
    "学会",
    "联合会",
    "办公室",
    "署",
    "政府",
    "交易所",
    "研究所",
    "基金会",
    "商会",
    "工会",
    "学校",
    "报社",
    "电视台",
    "所",
];

impl Pools {
    /// The pools of `articles` (deterministic: no RNG, same on every platform). People are
    /// words tagged `nr` of 2–3 characters starting with a common surname, next to a word
    /// that names a person (`NAME_BEFORE`, `NAME_AFTER`), the `SKIP_FAMOUS` most frequent
    /// left out; places are words tagged `ns` ending in `省市县区镇乡村州`; cities are those
    /// ending in `市` (places of two characters, mostly common words such as 城市 or 山区,
    /// regions (`…地区`), states of four characters or more (`…州`, mostly foreign) and
    /// `NOT_PLACES` are left out); organisations are words tagged `nt` of 3–14 characters
    /// ending as an organisation does (`ORG_ENDS`) and not left out (`NOT_ORGS`), each at
    /// least twice in the sample.
    pub fn mine(articles: &[Article]) -> Pools {
        let step = articles.len().div_ceil(MINED_ARTICLES).max(1);
        let sample: Vec<&Article> = articles.iter().step_by(step).collect();
        let tagged: Vec<Vec<(u8, String)>> = sample
            .par_iter()
            .map(|a| {
                let head: String = a.content.chars().take(MINED_CHARS).collect();
                let text = format!("{}\n{head}", a.title);
                let tags = neardup_core::text::segment::jieba().tag(&text, true);
                let mut out = Vec::new();
                for (k, t) in tags.iter().enumerate() {
                    let n = chars(t.word);
                    if !all_cjk(t.word) {
                        continue;
                    }
                    let kind = match t.tag {
                        "nr" if (2..=3).contains(&n)
                            && t.word
                                .chars()
                                .next()
                                .is_some_and(|c| MINED_SURNAMES.contains(c)) =>
                        {
                            let next = tags.get(k + 1).map(|t| t.word);
                            let prev = k.checked_sub(1).map(|p| tags[p].word);
                            let named = next.is_some_and(|w| NAME_BEFORE.contains(&w))
                                || prev.is_some_and(|w| NAME_AFTER.contains(&w));
                            if !named || t.word.ends_with("先生") || t.word.ends_with("女士") {
                                continue;
                            }
                            0
                        }
                        "ns" if is_place(t.word) => 1,
                        "nt" if (3..=14).contains(&n)
                            && ORG_ENDS.iter().any(|e| t.word.ends_with(e))
                            && !NOT_ORGS.iter().any(|w| t.word.contains(w)) =>
                        {
                            2
                        }
                        _ => continue,
                    };
                    out.push((kind, t.word.to_owned()));
                }
                out
            })
            .collect();
        let mut counts: HashMap<(u8, String), usize> = HashMap::new();
        for (kind, w) in tagged.into_iter().flatten() {
            *counts.entry((kind, w)).or_default() += 1;
        }
        let pool = |kind: u8, min: usize, skip: usize, max: usize| -> Vec<String> {
            let mut v: Vec<(usize, &String)> = counts
                .iter()
                .filter(|((k, _), &c)| *k == kind && c >= min)
                .map(|((_, w), &c)| (c, w))
                .collect();
            v.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
            v.into_iter()
                .skip(skip)
                .take(max)
                .map(|(_, w)| w.clone())
                .collect()
        };
        let mut people = pool(0, 1, SKIP_FAMOUS, 3000);
        let mut places = pool(1, 2, 0, 1000);
        let mut orgs = pool(2, 2, 0, 1000);
        let mut cities: Vec<String> = places
            .iter()
            .filter(|p| p.ends_with('市'))
            .cloned()
            .collect();
        const ENOUGH: usize = 20;
        if people.len() < ENOUGH {
            people.extend(
                SURNAMES
                    .iter()
                    .zip(GIVEN.iter().cycle().skip(3))
                    .zip(GIVEN.iter().cycle().skip(11))
                    .map(|((s, g1), g2)| format!("{s}{g1}{g2}")),
            );
        }
        if places.len() < ENOUGH {
            places.extend(CITIES.iter().map(|c| (*c).to_owned()));
        }
        if cities.len() < ENOUGH {
            cities.extend(CITIES.iter().map(|c| (*c).to_owned()));
        }
        if orgs.len() < ENOUGH {
            for c in CITIES {
                for d in DEPARTMENTS {
                    orgs.push(format!("{c}{d}"));
                }
            }
        }
        Pools {
            people,
            places,
            cities,
            orgs,
        }
    }
}

const DEPARTMENTS: &[&str] = &[
    "教育局",
    "统计局",
    "交通运输局",
    "生态环境局",
    "市场监督管理局",
    "卫生健康委员会",
    "人力资源和社会保障局",
    "文化和旅游局",
];

// --- dates ----------------------------------------------------------------------------

/// A day, counted from 1970-01-01.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Day(i64);

impl Day {
    /// 2016-01-01 and 2019-12-31: the days instances are dated within.
    const FIRST: Day = Day(16801);
    const LAST: Day = Day(18261);

    /// (year, month, day), by Howard Hinnant's `civil_from_days`.
    fn civil(self) -> (i64, u32, u32) {
        let z = self.0 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        (yoe + era * 400 + i64::from(m <= 2), m, d)
    }

    fn plus(self, n: i64) -> Day {
        Day(self.0 + n)
    }

    fn full(self) -> String {
        let (y, m, d) = self.civil();
        format!("{y}年{m}月{d}日")
    }

    fn month_day(self) -> String {
        let (_, m, d) = self.civil();
        format!("{m}月{d}日")
    }

    /// `周一` … `周日` (1970-01-01 was a Thursday).
    fn weekday(self) -> &'static str {
        ["周一", "周二", "周三", "周四", "周五", "周六", "周日"]
            [(self.0 + 3).rem_euclid(7) as usize]
    }
}

// --- the template language --------------------------------------------------------------

#[derive(Debug)]
enum Node<'t> {
    Text(&'t str),
    Slot(&'t str, Option<&'t str>),
    Optional(Vec<Node<'t>>),
    Choice(Option<&'t str>, Vec<Vec<Node<'t>>>),
}

/// Parses a template (see [`super::templates`]); panics on a malformed one (the tests render
/// every template).
fn parse(src: &str) -> Vec<Node<'_>> {
    let mut at = 0;
    let nodes = parse_seq(src, &mut at, &[]);
    assert_eq!(at, src.len(), "template: unexpected `{}`", &src[at..]);
    nodes
}

fn parse_seq<'t>(s: &'t str, at: &mut usize, stop: &[char]) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    while let Some(c) = s[*at..].chars().next() {
        if stop.contains(&c) {
            break;
        }
        match c {
            '{' => {
                let end = *at + s[*at..].find('}').expect("template: unclosed `{`");
                let inner = &s[*at + 1..end];
                let (kind, key) = match inner.split_once('#') {
                    Some((k, b)) => (k, Some(b)),
                    None => (inner, None),
                };
                out.push(Node::Slot(kind, key));
                *at = end + 1;
            }
            '[' => {
                *at += 1;
                let inner = parse_seq(s, at, &[']']);
                assert!(s[*at..].starts_with(']'), "template: unclosed `[`");
                *at += 1;
                out.push(Node::Optional(inner));
            }
            '(' => {
                *at += 1;
                let mut key = None;
                if s[*at..].starts_with('@') {
                    let end = *at
                        + s[*at..]
                            .find(' ')
                            .expect("template: `(@key ` needs a space");
                    key = Some(&s[*at + 1..end]);
                    *at = end + 1;
                }
                let mut alts = Vec::new();
                loop {
                    alts.push(parse_seq(s, at, &['|', ')']));
                    match s[*at..].chars().next() {
                        Some('|') => *at += 1,
                        Some(')') => {
                            *at += 1;
                            break;
                        }
                        _ => panic!("template: unclosed `(`"),
                    }
                }
                out.push(Node::Choice(key, alts));
            }
            ']' | ')' | '|' => panic!("template: stray `{c}`"),
            _ => {
                let end = s[*at..]
                    .find(['{', '[', '(', ']', ')', '|'])
                    .map_or(s.len(), |e| *at + e);
                out.push(Node::Text(&s[*at..end]));
                *at = end;
            }
        }
    }
    out
}

fn letters_in(s: &str) -> usize {
    s.chars().filter(|c| c.is_alphanumeric()).count()
}

/// A template instance: its headline and content, the letters and digits of its content that
/// are the template's own text, and every choice made (two instances with the same choices
/// have word for word the same fixed text).
#[derive(Clone, Debug)]
pub struct Instance {
    pub family: &'static str,
    pub template: usize,
    pub title: String,
    pub content: String,
    /// Letters and digits of the content from the template's own text.
    pub fixed_letters: usize,
    /// Letters and digits of the content.
    pub letters: usize,
    choices: Vec<u8>,
}

impl Instance {
    /// The share of the content's letters and digits that is the template's own text.
    pub fn fixed_share(&self) -> f64 {
        self.fixed_letters as f64 / self.letters.max(1) as f64
    }
}

/// What rendering an instance keeps: the text so far, its letters of each origin, the
/// choices, and the bound slots and choices.
#[derive(Default)]
struct Render {
    text: String,
    fixed: usize,
    filled: usize,
    choices: Vec<u8>,
    slots: HashMap<String, String>,
    bound: HashMap<String, usize>,
}

/// The day of an instance and the day of its `…_later` slots.
#[derive(Clone, Copy)]
struct Dates {
    day: Day,
    later: Day,
}

const WEATHER: &[&str] = &[
    "晴",
    "多云",
    "阴",
    "小雨",
    "中雨",
    "阵雨",
    "雷阵雨",
    "多云转晴",
    "晴转多云",
    "阴转小雨",
    "小雪",
    "雨夹雪",
    "多云转阴",
    "阴有小雨",
];
const POLLUTANTS: &[&str] = &["细颗粒物", "臭氧", "可吸入颗粒物", "二氧化氮"];
const AIR_LEVELS: &[&str] = &["优", "良", "轻度污染", "中度污染", "以良为主", "为优至良"];
const VEGETABLES: &[&str] = &[
    "大白菜",
    "西红柿",
    "黄瓜",
    "土豆",
    "芹菜",
    "青椒",
    "茄子",
    "菠菜",
    "白萝卜",
    "胡萝卜",
    "豆角",
    "生菜",
    "西兰花",
    "冬瓜",
    "洋葱",
];
const POSITIONS: &[&str] = &[
    "副主任",
    "副局长",
    "办公室主任",
    "主任",
    "局长",
    "党组书记",
    "副县长",
    "副区长",
    "县长",
    "区长",
    "镇长",
    "党委书记",
    "党委副书记",
    "调研员",
];
const WIND: &[&str] = &[
    "北风",
    "南风",
    "东风",
    "西风",
    "东北风",
    "西北风",
    "东南风",
    "西南风",
    "偏北风",
    "偏南风",
];
const SYSTEMS: &[&str] = &[
    "冷空气",
    "暖湿气流",
    "副热带高压",
    "低涡切变",
    "高空槽",
    "强对流云团",
];
const SECTORS: &[&str] = &[
    "半导体",
    "新能源汽车",
    "白酒",
    "银行",
    "券商",
    "医药",
    "军工",
    "光伏",
    "有色金属",
    "房地产",
    "钢铁",
    "煤炭",
    "人工智能",
    "芯片",
    "旅游",
    "传媒",
    "保险",
    "农业",
    "电力",
    "稀土永磁",
    "消费电子",
    "生物疫苗",
];
const MAJORS: &[&str] = &[
    "计算机科学与技术",
    "临床医学",
    "法学",
    "汉语言文学",
    "机械工程",
    "电子信息工程",
    "会计学",
    "土木工程",
    "数学与应用数学",
    "新闻学",
    "化学",
    "物理学",
    "生物科学",
    "工商管理",
    "英语",
    "金融学",
    "软件工程",
    "环境工程",
];
const TOPICS: &[&str] = &[
    "安全生产",
    "防汛抗旱",
    "乡村振兴",
    "教育",
    "脱贫攻坚",
    "生态环境保护",
    "党风廉政建设",
    "民政",
    "科技创新",
    "招商引资",
    "农村人居环境整治",
    "食品药品安全",
    "消防安全",
    "文化旅游",
    "优化营商环境",
    "河长制",
];
const INDUSTRIES: &[&str] = &[
    "科技",
    "电子",
    "医药",
    "新材料",
    "智能",
    "环保",
    "物流",
    "食品",
    "能源",
    "生物",
    "精密",
    "信息",
    "光电",
    "化工",
];
const COMPANY_SUFFIXES: &[&str] = &["股份有限公司", "集团股份有限公司", "控股有限公司"];
const NAME_CHARS: &str = "华宏鑫泰恒瑞博德信达通源康诚捷晶嘉盛安润凯宇新天金海远航正丰隆昌伟力思创";
const UNIV_SUFFIXES: &[&str] = &[
    "大学",
    "师范大学",
    "理工大学",
    "科技大学",
    "财经大学",
    "医科大学",
    "职业技术学院",
];
const ROAD_SUFFIXES: &[&str] = &["路", "大道", "街", "东路", "西路", "南路", "北路", "大街"];

impl Generator<'_> {
    /// A random day of [`Day::FIRST`]..=[`Day::LAST`].
    fn random_day(&mut self) -> Day {
        Day(self.rng.gen_range(Day::FIRST.0..=Day::LAST.0))
    }

    fn name_chars(&mut self, k: usize) -> String {
        let all: Vec<char> = NAME_CHARS.chars().collect();
        (0..k)
            .map(|_| *all.choose(&mut self.rng).unwrap())
            .collect()
    }

    /// A place's stem for a name made of it: without `省市县区`, at most three characters.
    fn place_stem(&mut self, pools: &Pools) -> String {
        let p = pools.places.choose(&mut self.rng).unwrap();
        let stem = p.trim_end_matches(['省', '市', '县', '区']);
        let stem = if stem.is_empty() { p.as_str() } else { stem };
        stem.chars().take(3).collect()
    }

    fn from<'p>(&mut self, list: &'p [&'p str]) -> &'p str {
        list.choose(&mut self.rng).unwrap()
    }

    fn decimal(&mut self, int: RangeInclusive<u32>) -> String {
        format!(
            "{}.{:02}",
            self.rng.gen_range(int),
            self.rng.gen_range(0..100)
        )
    }

    /// A fill of slot `kind` (see [`super::templates`]).
    fn fill(&mut self, pools: &Pools, dates: Dates, kind: &str) -> String {
        let pick = |g: &mut Self, v: &[String]| v.choose(&mut g.rng).unwrap().clone();
        match kind {
            "person" => pick(self, &pools.people),
            "place" => pick(self, &pools.places),
            "city" => pick(self, &pools.cities),
            "org" => pick(self, &pools.orgs),
            "company" => {
                let stem = if self.rng.gen_bool(0.3) {
                    self.place_stem(pools)
                } else {
                    self.name_chars(2)
                };
                let industry = self.from(INDUSTRIES);
                let suffix = self.from(COMPANY_SUFFIXES);
                format!("{stem}{industry}{suffix}")
            }
            "univ" => {
                let stem = self.place_stem(pools);
                format!("{stem}{}", self.from(UNIV_SUFFIXES))
            }
            "road" => {
                let stem = if self.rng.gen_bool(0.5) {
                    self.place_stem(pools).chars().take(2).collect()
                } else {
                    self.name_chars(2)
                };
                format!("{stem}{}", self.from(ROAD_SUFFIXES))
            }
            "venue" => {
                let n = self.rng.gen_range(1..=9);
                match self.rng.gen_range(0..4) {
                    0 => format!("第{n}会议室"),
                    1 => format!("{n}号楼报告厅"),
                    2 => format!("会议中心{n}号厅"),
                    _ => format!("行政楼{n}楼会议室"),
                }
            }
            "station" => {
                let stem: String = self.place_stem(pools).chars().take(2).collect();
                format!(
                    "{stem}{}",
                    self.from(&["站", "东站", "南站", "西站", "北站", "火车站"])
                )
            }
            "dec" => self.decimal(1..=999),
            "pollutant" => self.from(POLLUTANTS).to_owned(),
            "airlevel" => self.from(AIR_LEVELS).to_owned(),
            "oil" => self
                .from(&["花生油", "菜籽油", "大豆油", "调和油"])
                .to_owned(),
            "vegetable" => self.from(VEGETABLES).to_owned(),
            "position" => self.from(POSITIONS).to_owned(),
            "weather" => self.from(WEATHER).to_owned(),
            "wind" => self.from(WIND).to_owned(),
            "system" => self.from(SYSTEMS).to_owned(),
            "sector" => self.from(SECTORS).to_owned(),
            "major" => self.from(MAJORS).to_owned(),
            "topic" => self.from(TOPICS).to_owned(),
            "level" => self.rng.gen_range(1..=7).to_string(),
            "time" => {
                let h = self.rng.gen_range(7..=21);
                match self.rng.gen_range(0..3) {
                    0 => format!("{h}时"),
                    1 => format!("{h}时{}分", self.rng.gen_range(1..=5) * 10),
                    _ => format!("{h}:{:02}", self.rng.gen_range(0..4) * 15),
                }
            }
            "tlow" => self.rng.gen_range(-10..=15).to_string(),
            "thigh" => self.rng.gen_range(16..=38).to_string(),
            "num" => self.rng.gen_range(2..=99).to_string(),
            "bignum" => self.rng.gen_range(100..=99_999).to_string(),
            "num3" => self.rng.gen_range(250..=420).to_string(),
            "month" => self.rng.gen_range(1..=12).to_string(),
            "pct" => format!("{}%", self.decimal(0..=9)),
            "amount" => {
                if self.rng.gen_bool(0.5) {
                    format!("{}亿元", self.decimal(1..=999))
                } else {
                    format!("{}万元", self.rng.gen_range(100..=99_999))
                }
            }
            "price" => format!("{}元", self.decimal(1..=99)),
            "price2" => self.decimal(1..=99),
            "index" => self.decimal(1000..=30_000),
            "index2" => self.decimal(1..=800),
            "code" => {
                let prefix = self.from(&["600", "601", "603", "000", "002", "300", "688"]);
                format!("{prefix}{}", self.digits(3))
            }
            "code5" => format!("0{}", self.digits(4)),
            "phone" => self.phone(),
            "email" => {
                let user = self.letters(4, 8);
                let host = self.letters(3, 6);
                let tld = self.from(&["com", "cn", "org.cn", "edu.cn"]);
                format!("{user}@{host}.{tld}")
            }
            "year" => dates.day.civil().0.to_string(),
            "year0" => self.rng.gen_range(1965..=2010).to_string(),
            "date" => dates.day.full(),
            "mdate" => dates.day.month_day(),
            "weekday" => dates.day.weekday().to_owned(),
            "date_next" => dates.day.plus(1).full(),
            "mdate_next" => dates.day.plus(1).month_day(),
            "mdate_after" => dates.day.plus(2).month_day(),
            "date_later" => dates.later.full(),
            "mdate_later" => dates.later.month_day(),
            other => panic!("template: unknown slot `{other}`"),
        }
    }

    fn render(&mut self, pools: &Pools, dates: Dates, nodes: &[Node<'_>], r: &mut Render) {
        for node in nodes {
            match node {
                Node::Text(t) => {
                    r.text.push_str(t);
                    r.fixed += letters_in(t);
                }
                Node::Slot(kind, key) => {
                    let fill = match key {
                        Some(k) => {
                            let id = format!("{kind}#{k}");
                            match r.slots.get(&id) {
                                Some(f) => f.clone(),
                                None => {
                                    let f = self.fill(pools, dates, kind);
                                    r.slots.insert(id, f.clone());
                                    f
                                }
                            }
                        }
                        None => self.fill(pools, dates, kind),
                    };
                    r.text.push_str(&fill);
                    r.filled += letters_in(&fill);
                }
                Node::Optional(inner) => {
                    let keep = self.rng.gen_bool(0.5);
                    r.choices.push(u8::from(keep));
                    if keep {
                        self.render(pools, dates, inner, r);
                    }
                }
                Node::Choice(key, alts) => {
                    let n = match key.and_then(|k| r.bound.get(k)) {
                        Some(&n) => n.min(alts.len() - 1),
                        None => {
                            let n = self.rng.gen_range(0..alts.len());
                            if let Some(k) = key {
                                r.bound.insert((*k).to_owned(), n);
                            }
                            n
                        }
                    };
                    r.choices.push(n as u8);
                    self.render(pools, dates, &alts[n], r);
                }
            }
        }
    }

    /// An instance of template `t` of family `f` dated `day`, within [`FIXED_SHARE`] and
    /// [`TEMPLATE_CHARS`]: drawn again until it is (`None` after 100 draws).
    fn instance(&mut self, pools: &Pools, f: usize, t: usize, day: Day) -> Option<Instance> {
        let template = &FAMILIES[f].templates[t];
        let (title, body) = (parse(template.title), parse(template.body));
        for _ in 0..100 {
            let dates = Dates {
                day,
                later: day.plus(self.rng.gen_range(3..=10)),
            };
            let mut r = Render::default();
            self.render(pools, dates, &title, &mut r);
            let title_text = std::mem::take(&mut r.text);
            let title_choices = r.choices.len();
            r.fixed = 0;
            r.filled = 0;
            self.render(pools, dates, &body, &mut r);
            let letters = r.fixed + r.filled;
            let share = r.fixed as f64 / letters.max(1) as f64;
            if FIXED_SHARE.contains(&share) && TEMPLATE_CHARS.contains(&chars(&r.text)) {
                debug_assert!(title_choices <= r.choices.len());
                return Some(Instance {
                    family: FAMILIES[f].name,
                    template: t,
                    title: title_text,
                    content: r.text,
                    fixed_letters: r.fixed,
                    letters,
                    choices: r.choices,
                });
            }
        }
        None
    }

    /// An instance of template `t` of family `f` dated `day` whose choices differ from all of
    /// `seen` (when 30 draws find one).
    fn fresh_instance(
        &mut self,
        pools: &Pools,
        f: usize,
        t: usize,
        day: Day,
        seen: &HashSet<Vec<u8>>,
    ) -> Option<Instance> {
        let mut last = None;
        for _ in 0..30 {
            let i = self.instance(pools, f, t, day)?;
            if !seen.contains(&i.choices) {
                return Some(i);
            }
            last = Some(i);
        }
        last
    }
}

fn instance_article(i: &Instance, id: String) -> Article {
    Article {
        id,
        title: i.title.clone(),
        content: i.content.clone(),
    }
}

/// `n` instances of one template of `family` ([`TEMPLATE_FAMILIES`]) on `n` consecutive days,
/// as a site publishing a daily bulletin or notice stores them: each with fills of its own
/// and, as far as the template's choices allow, fixed text of its own. The template, the
/// first day and the fills come from `seed`; the names from `articles` ([`Pools::mine`]; any
/// input, even none, will do). `None` for an unknown family. Ids are
/// `<family>-<template>-<yyyymmdd>`.
pub fn template_series(
    articles: &[Article],
    family: &str,
    n: usize,
    seed: u64,
) -> Option<Vec<Article>> {
    let f = FAMILIES.iter().position(|x| x.name == family)?;
    let pools = Pools::mine(articles);
    let mut g = Generator::new(articles, seed);
    g.rng.set_stream(COPIES_STREAM);
    let t = g.rng.gen_range(0..FAMILIES[f].templates.len());
    let first = g.random_day();
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let day = first.plus(k as i64);
        let i = g
            .fresh_instance(&pools, f, t, day, &seen)
            .expect("every template renders within its bounds");
        seen.insert(i.choices.clone());
        let (y, m, d) = day.civil();
        out.push(instance_article(
            &i,
            format!("{family}-{t}-{y:04}{m:02}{d:02}"),
        ));
    }
    Some(out)
}

// --- passages and shared runs ------------------------------------------------------------

/// A sentence of a text: its byte and character ranges, surrounding whitespace left out.
#[derive(Clone, Copy, Debug)]
struct Sentence {
    bytes: (usize, usize),
    chars: (usize, usize),
}

/// The sentences of `text`: ending after `。！？!?；` (and the closing quotes or brackets after
/// it) or at a line break, trimmed of whitespace; empty ones left out.
fn sentences(text: &str) -> Vec<Sentence> {
    let mut out = Vec::new();
    let mut start = (0, 0);
    let mut ended = false;
    let mut n = 0;
    let push = |from: (usize, usize), to: (usize, usize), out: &mut Vec<Sentence>| {
        let piece = &text[from.0..to.0];
        let lead = piece.len() - piece.trim_start().len();
        let trail = piece.len() - piece.trim_end().len();
        if piece.trim().is_empty() {
            return;
        }
        let lead_chars = chars(&piece[..lead]);
        let trail_chars = chars(&piece[piece.len() - trail..]);
        out.push(Sentence {
            bytes: (from.0 + lead, to.0 - trail),
            chars: (from.1 + lead_chars, to.1 - trail_chars),
        });
    };
    for (at, c) in text.char_indices() {
        let closing = matches!(c, '”' | '’' | '」' | '』' | '"' | '）' | ')');
        if c == '\n' || (ended && !closing) {
            push(start, (at, n), &mut out);
            start = (at, n);
            ended = false;
        }
        if matches!(c, '。' | '！' | '？' | '!' | '?' | '；') {
            ended = true;
        }
        n += 1;
    }
    push(start, (text.len(), n), &mut out);
    out
}

/// The hashes of every `SHARED_RUN`-letter window of the letters and digits
/// ([`oracle::letters`]) of each of `fields` (windows do not cross fields).
fn windows(fields: &[&str]) -> HashSet<u64> {
    let mut out = HashSet::new();
    let mut buf = [0u8; 4 * SHARED_RUN];
    for f in fields {
        let letters: Vec<char> = oracle::letters(f).chars().collect();
        for w in letters.windows(SHARED_RUN) {
            let mut n = 0;
            for c in w {
                n += c.encode_utf8(&mut buf[n..]).len();
            }
            out.insert(xxh3_64(&buf[..n]));
        }
    }
    out
}

fn article_windows(a: &Article) -> HashSet<u64> {
    windows(&[a.title.as_str(), a.content.as_str()])
}

/// Whether two articles share a run of [`SHARED_RUN`] letters (title or content).
pub fn share_a_run(a: &Article, b: &Article) -> bool {
    !article_windows(a).is_disjoint(&article_windows(b))
}

/// The runs of [`SHARED_RUN`] letters `a` and `b` share that are not runs of `quote`.
pub fn shared_runs_outside(a: &Article, b: &Article, quote: &str) -> usize {
    let q = windows(&[quote]);
    article_windows(a)
        .intersection(&article_windows(b))
        .filter(|w| !q.contains(w))
        .count()
}

/// The text of `content` at a character span `[start, end)`.
pub fn span_text(content: &str, span: [usize; 2]) -> String {
    content
        .chars()
        .skip(span[0])
        .take(span[1].saturating_sub(span[0]))
        .collect()
}

// --- the round-ups, quotes, wrapped excerpts and reworded passages ---------------------------

const COMPILATION_TITLES: &[&str] = &[
    "新闻综述：近期热点回顾",
    "一周要闻综述",
    "综述｜这些消息值得关注",
    "要闻综述：多地多部门近日动态",
    "新闻综述｜近期值得关注的几件事",
    "本周热点综述",
];
const COMPILATION_OPENINGS: &[&str] = &[
    "近日，多家媒体对以下几件事进行了报道，现综述如下。",
    "本周，国内外发生了多起引人关注的事件，以下是对相关报道的梳理。",
    "连日来，各方面消息不断，记者对其中几则进行了整理。",
    "近期有几条消息引发关注，本文将相关报道汇总如下，供读者参考。",
    "过去几天里，有哪些新闻值得一读？我们从各方报道中选取了以下内容。",
];
/// Connecting phrases before a passage; `{src}` is a news source.
const COMPILATION_CONNECTORS: &[&str] = &[
    "据{src}报道，",
    "另据{src}消息，",
    "此外，{src}报道称：",
    "与此同时，据{src}报道：",
    "【{src}】",
    "再看另一则消息。",
    "{src}消息：",
    "还有一件事值得关注。",
];
const COMPILATION_CLOSINGS: &[&str] = &[
    "（本文综合自{src}、{src}等）",
    "（综合整理：{editor}）",
    "以上为本期新闻综述，感谢阅读。",
    "更多报道，敬请关注后续。",
    "（编辑：{editor}，综合{src}等报道）",
];
/// Introducers of a shared quote; the quote follows in `“”`.
const QUOTE_INTRODUCERS: &[&str] = &[
    "{person}表示：",
    "{person}在接受采访时说：",
    "{org}有关负责人称：",
    "正如{person}所言：",
    "{person}此前曾公开指出：",
    "对此，{person}坦言：",
    "{org}在声明中写道：",
    "业内人士{person}认为：",
];
/// Headings of the related-links block of a wrapped excerpt's page.
const RELATED_HEADINGS: &[&str] = &[
    "相关阅读：",
    "【猜你喜欢】",
    "延伸阅读",
    "热门推荐",
    "—— 相关新闻 ——",
];
/// Clauses a reworded passage may gain at the start of a sentence.
const ADDED_CLAUSES: &[&str] = &[
    "据了解，",
    "记者了解到，",
    "据介绍，",
    "值得注意的是，",
    "据悉，",
    "总体来看，",
    "从目前情况看，",
    "事实上，",
];

/// Common news words and what a rewording puts instead: synonyms and near forms.
pub const SYNONYMS: &[(&str, &[&str])] = &[
    ("表示", &["称", "指出"]),
    ("称", &["表示"]),
    ("指出", &["表示", "提到"]),
    ("认为", &["表示", "觉得"]),
    ("说", &["表示", "称"]),
    ("强调", &["指出"]),
    ("介绍", &["说"]),
    ("透露", &["表示"]),
    ("显示", &["表明"]),
    ("表明", &["显示"]),
    ("目前", &["当前", "眼下"]),
    ("当前", &["目前"]),
    ("现在", &["如今"]),
    ("如今", &["现在"]),
    ("近日", &["日前"]),
    ("日前", &["近日"]),
    ("最近", &["近期"]),
    ("近期", &["最近"]),
    ("今天", &["今日"]),
    ("今日", &["今天"]),
    ("昨天", &["昨日"]),
    ("昨日", &["昨天"]),
    ("明天", &["明日"]),
    ("进行", &["开展"]),
    ("开展", &["进行"]),
    ("举行", &["举办"]),
    ("举办", &["举行"]),
    ("召开", &["举行"]),
    ("参加", &["参与"]),
    ("参与", &["参加"]),
    ("发布", &["公布"]),
    ("公布", &["发布"]),
    ("出台", &["推出"]),
    ("推出", &["出台"]),
    ("实施", &["施行"]),
    ("加强", &["强化"]),
    ("提高", &["提升"]),
    ("提升", &["提高"]),
    ("增加", &["增长"]),
    ("增长", &["增加"]),
    ("减少", &["降低"]),
    ("降低", &["减少"]),
    ("上升", &["上涨"]),
    ("上涨", &["上升"]),
    ("获得", &["取得"]),
    ("取得", &["获得"]),
    ("解决", &["处理"]),
    ("处理", &["解决"]),
    ("情况", &["状况"]),
    ("相关", &["有关"]),
    ("有关", &["相关"]),
    ("重要", &["关键"]),
    ("迅速", &["快速"]),
    ("快速", &["迅速"]),
    ("明显", &["显著"]),
    ("显著", &["明显"]),
    ("持续", &["继续"]),
    ("继续", &["持续"]),
    ("不断", &["持续"]),
    ("共同", &["一同"]),
    ("一起", &["一同"]),
    ("成为", &["变成"]),
    ("推动", &["促进"]),
    ("促进", &["推动"]),
    ("支持", &["扶持"]),
    ("希望", &["期望"]),
    ("已经", &["已"]),
    ("已", &["已经"]),
    ("正在", &["正"]),
    ("马上", &["立即"]),
    ("立即", &["马上"]),
    ("逐渐", &["逐步"]),
    ("逐步", &["逐渐"]),
    ("发生", &["出现"]),
    ("出现", &["发生"]),
    ("造成", &["导致"]),
    ("导致", &["造成"]),
    ("引起", &["引发"]),
    ("引发", &["引起"]),
    ("一直", &["始终"]),
    ("始终", &["一直"]),
    ("所有", &["全部"]),
    ("全部", &["所有"]),
    ("很多", &["许多", "不少"]),
    ("许多", &["很多"]),
    ("一些", &["部分"]),
    ("非常", &["十分"]),
    ("十分", &["非常"]),
    ("特别", &["尤其"]),
    ("尤其", &["特别"]),
    ("比较", &["较为"]),
    ("较为", &["比较"]),
    ("更加", &["更为"]),
    ("和", &["与"]),
    ("与", &["和"]),
    ("以及", &["及"]),
    ("及", &["以及"]),
    ("或者", &["或"]),
    ("对于", &["对"]),
    ("关于", &["有关"]),
    ("根据", &["依据"]),
    ("依据", &["根据"]),
    ("按照", &["依照"]),
    ("通过", &["经过"]),
    ("经过", &["通过"]),
    ("预计", &["估计"]),
    ("可能", &["或许"]),
    ("应该", &["应当"]),
    ("应当", &["应该"]),
    ("可以", &["能够"]),
    ("能够", &["可以"]),
    ("需要", &["需"]),
    ("超过", &["逾"]),
    ("大约", &["约"]),
    ("约", &["大约"]),
    ("但是", &["不过"]),
    ("不过", &["但是"]),
    ("但", &["不过"]),
    ("因为", &["由于"]),
    ("由于", &["因为"]),
    ("所以", &["因此"]),
    ("因此", &["所以"]),
    ("虽然", &["尽管"]),
    ("尽管", &["虽然"]),
    ("并且", &["而且"]),
    ("而且", &["并且"]),
    ("仍然", &["依然"]),
    ("依然", &["仍然"]),
    ("此外", &["另外"]),
    ("另外", &["此外"]),
    ("同时", &["与此同时"]),
    ("随后", &["之后"]),
    ("之后", &["此后"]),
    ("据悉", &["据了解"]),
    ("都", &["均"]),
    ("均", &["都"]),
    ("还", &["仍"]),
    ("从", &["自"]),
    ("为了", &["为"]),
    ("这些", &["这批"]),
    ("这个", &["这一"]),
    ("其中", &["当中"]),
    ("主要", &["重点"]),
    ("工作人员", &["职员"]),
    ("记者", &["本报记者"]),
    ("市民", &["居民"]),
    ("问题", &["难题"]),
    ("要求", &["需要"]),
];

fn synonyms() -> &'static HashMap<&'static str, &'static [&'static str]> {
    static MAP: OnceLock<HashMap<&'static str, &'static [&'static str]>> = OnceLock::new();
    MAP.get_or_init(|| SYNONYMS.iter().copied().collect())
}

/// What a rewording did: words replaced and words in all.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rewording {
    pub replaced: usize,
    pub words: usize,
}

/// A passage of a compilation: its source, its span there and in the compilation.
struct Part {
    source: usize,
    in_source: [usize; 2],
    in_compilation: [usize; 2],
    share: f64,
}

impl Generator<'_> {
    fn source_name(&mut self) -> &'static str {
        SOURCES.choose(&mut self.rng).unwrap()
    }

    /// A run of consecutive sentences of `content` whose characters (from the first one's
    /// start to the last one's end) are within `len`, starting at or after character `from`:
    /// its span and text.
    fn passage(
        &mut self,
        content: &str,
        len: &RangeInclusive<usize>,
        from: usize,
    ) -> Option<([usize; 2], String)> {
        let sents = sentences(content);
        let mut spans = Vec::new();
        for s in 0..sents.len() {
            if sents[s].chars.0 < from {
                continue;
            }
            for e in s..sents.len() {
                let n = sents[e].chars.1 - sents[s].chars.0;
                if n > *len.end() {
                    break;
                }
                if len.contains(&n) {
                    spans.push((s, e));
                }
            }
        }
        let &(s, e) = spans.choose(&mut self.rng)?;
        Some((
            [sents[s].chars.0, sents[e].chars.1],
            content[sents[s].bytes.0..sents[e].bytes.1].to_owned(),
        ))
    }

    /// A round-up of [`COMPILATION_SOURCES`] articles (of one category and day half of the
    /// time) sharing no run of [`SHARED_RUN`] letters: a title, an opening sentence, a
    /// passage of each under a connecting phrase, and a closing line.
    fn compilation(
        &mut self,
        cats: &[Vec<usize>],
        is_related: &dyn Fn(usize, usize) -> bool,
        serial: usize,
    ) -> Option<(Article, Vec<Part>)> {
        let articles = self.articles;
        let members = if !cats.is_empty() && self.rng.gen_bool(0.5) {
            Some(cats[self.rng.gen_range(0..cats.len())].clone())
        } else {
            None
        };
        let mut chosen: Vec<(usize, HashSet<u64>)> = Vec::new();
        for _ in 0..60 {
            if chosen.len() == COMPILATION_SOURCES {
                break;
            }
            let j = match &members {
                Some(m) => m[self.rng.gen_range(0..m.len())],
                None => self.pick(),
            };
            if chars(&articles[j].content) < COMPILATION_MIN_CHARS
                || chosen.iter().any(|(k, _)| *k == j || is_related(*k, j))
            {
                continue;
            }
            let w = article_windows(&articles[j]);
            if chosen.iter().all(|(_, o)| o.is_disjoint(&w)) {
                chosen.push((j, w));
            }
        }
        if chosen.len() < COMPILATION_SOURCES {
            return None;
        }
        let opening = *COMPILATION_OPENINGS.choose(&mut self.rng).unwrap();
        let mut content = opening.to_owned();
        let mut parts = Vec::new();
        let connectors: Vec<&str> = COMPILATION_CONNECTORS
            .choose_multiple(&mut self.rng, COMPILATION_SOURCES)
            .copied()
            .collect();
        for ((j, _), connector) in chosen.iter().zip(connectors) {
            let text = &articles[*j].content;
            let total = chars(text);
            let lo = (COMPILATION_SHARE.start() * total as f64).ceil() as usize;
            let hi = (COMPILATION_SHARE.end() * total as f64) as usize;
            let (span, passage) = self.passage(text, &(lo..=hi), 0)?;
            let connector = connector.replace("{src}", self.source_name());
            content.push('\n');
            content.push_str(&connector);
            let start = chars(&content);
            content.push_str(&passage);
            parts.push(Part {
                source: *j,
                in_source: span,
                in_compilation: [start, start + chars(&passage)],
                share: (span[1] - span[0]) as f64 / total as f64,
            });
        }
        let mut closing = (*COMPILATION_CLOSINGS.choose(&mut self.rng).unwrap()).to_owned();
        while closing.contains("{src}") {
            closing = closing.replacen("{src}", self.source_name(), 1);
        }
        let closing = closing.replace("{editor}", EDITORS.choose(&mut self.rng).unwrap());
        content.push('\n');
        content.push_str(&closing);
        let total = chars(&content) as f64;
        if parts.iter().any(|p| {
            (p.in_compilation[1] - p.in_compilation[0]) as f64 > COMPILATION_MAX_SHARE * total
        }) {
            return None;
        }
        let title = (*COMPILATION_TITLES.choose(&mut self.rng).unwrap()).to_owned();
        Some((
            Article {
                id: format!("{}~compilation{serial}", articles[parts[0].source].id),
                title,
                content,
            },
            parts,
        ))
    }

    /// Consecutive sentences of article `k` ([`SHARED_QUOTE_CHARS`]) with no quotation mark.
    fn statement(&mut self, k: usize) -> Option<String> {
        let content = &self.articles[k].content;
        let sents = sentences(content);
        if sents.is_empty() {
            return None;
        }
        let at = self.rng.gen_range(0..sents.len());
        let mut end = at;
        loop {
            let text = &content[sents[at].bytes.0..sents[end].bytes.1];
            let n = chars(text);
            if n >= *SHARED_QUOTE_CHARS.start() {
                let clean = !text.contains(['“', '”', '"', '「', '」', '\n']);
                return (n <= *SHARED_QUOTE_CHARS.end() && clean).then(|| text.to_owned());
            }
            end += 1;
            if end == sents.len() {
                return None;
            }
        }
    }

    fn introducer(&mut self, pools: &Pools, n: usize) -> String {
        let person = pools.people.choose(&mut self.rng).unwrap();
        let org = pools.orgs.choose(&mut self.rng).unwrap();
        QUOTE_INTRODUCERS[n]
            .replace("{person}", person)
            .replace("{org}", org)
    }

    /// Article `i` quoting `quote` under `intro` after one of its sentences ending in `。！？`:
    /// the content and the quote's span in it.
    fn quoting(&mut self, i: usize, intro: &str, quote: &str) -> Option<(String, [usize; 2])> {
        let content = &self.articles[i].content;
        let ends: Vec<Sentence> = sentences(content)
            .into_iter()
            .filter(|s| {
                content[s.bytes.0..s.bytes.1]
                    .trim_end_matches(['”', '’', '」', '』', '"', '）', ')'])
                    .ends_with(['。', '！', '？'])
            })
            .collect();
        let s = ends.choose(&mut self.rng)?;
        let (at, n) = (s.bytes.1, s.chars.1);
        let start = n + chars(intro) + 1;
        Some((
            format!("{}{intro}“{quote}”{}", &content[..at], &content[at..]),
            [start, start + chars(quote)],
        ))
    }

    /// Two articles of different categories (or days) sharing no run of [`SHARED_RUN`]
    /// letters, each quoting the same statement of a third under introducers of its own;
    /// they share no such run apart from the quote.
    fn shared_quote(
        &mut self,
        pools: &Pools,
        is_related: &dyn Fn(usize, usize) -> bool,
    ) -> Option<(Article, Article, [usize; 2], [usize; 2])> {
        let articles = self.articles;
        let (i, j, k) = (self.pick(), self.pick(), self.pick());
        if i == j || i == k || j == k || is_related(i, j) || is_related(i, k) || is_related(j, k) {
            return None;
        }
        let (ci, cj) = (category(&articles[i].id), category(&articles[j].id));
        if ci.is_some() && ci == cj {
            return None;
        }
        let quote = self.statement(k)?;
        let q = chars(&quote) as f64;
        let shortest = chars(&articles[i].content).min(chars(&articles[j].content)) as f64;
        if q > SHARED_QUOTE_MAX_SHARE * shortest {
            return None;
        }
        let (wi, wj, wq) = (
            article_windows(&articles[i]),
            article_windows(&articles[j]),
            windows(&[quote.as_str()]),
        );
        if !wi.is_disjoint(&wj) || !wq.is_disjoint(&wi) || !wq.is_disjoint(&wj) {
            return None;
        }
        let picks: Vec<usize> = (0..QUOTE_INTRODUCERS.len())
            .collect::<Vec<_>>()
            .choose_multiple(&mut self.rng, 2)
            .copied()
            .collect();
        let (ia, ib) = (
            self.introducer(pools, picks[0]),
            self.introducer(pools, picks[1]),
        );
        let (ca, sa) = self.quoting(i, &ia, &quote)?;
        let (cb, sb) = self.quoting(j, &ib, &quote)?;
        let item = |x: usize, content: String| Article {
            id: format!("{}~quote", articles[x].id),
            title: articles[x].title.clone(),
            content,
        };
        let (a, b) = (item(i, ca), item(j, cb));
        (shared_runs_outside(&a, &b, &quote) == 0).then_some((a, b, sa, sb))
    }

    /// Sites with a header (navigation and breadcrumb) for the wrapped excerpts.
    fn wrapping_sites(&mut self) -> Vec<Site> {
        let (mut names, mut links) = (HashSet::new(), HashSet::new());
        let mut sites = Vec::new();
        for n in 0..WRAPPED_SITES * 10 {
            if sites.len() == WRAPPED_SITES {
                break;
            }
            let mut site = self.site(n, &mut names, &mut links);
            if !site.before.is_empty() {
                site.key = format!("wrap{}", sites.len());
                sites.push(site);
            }
        }
        sites
    }

    /// A block of related links for a page about article `i`: a heading
    /// ([`RELATED_HEADINGS`]) and headlines of other corpus articles, drawn for the page, until
    /// the block holds more than `n` characters (line breaks not counted).
    fn related_links(&mut self, i: usize, n: usize) -> Option<Vec<String>> {
        let mut block = vec![(*RELATED_HEADINGS.choose(&mut self.rng).unwrap()).to_owned()];
        let style = self.rng.gen_range(0..4);
        let mut used = HashSet::from([i]);
        let mut total = chars(&block[0]);
        for _ in 0..2000 {
            if total > n {
                return Some(block);
            }
            let j = self.pick();
            let t = self.articles[j].title.trim();
            if !(8..=40).contains(&chars(t)) || t.contains('\n') || !used.insert(j) {
                continue;
            }
            let k = block.len();
            let line = match style {
                0 => format!("· {t}"),
                1 => format!("{k}. {t}"),
                2 => format!("【{k}】{t}"),
                _ => format!("> {t}"),
            };
            total += chars(&line);
            block.push(line);
        }
        None
    }

    /// The lead of article `i` keeping `size` of its content (as `lead_excerpt` cuts it) on
    /// a page of a site with a header that does not list the article: the site's lines before
    /// it, then a block of related links drawn for the page and longer than the lead
    /// ([`Generator::related_links`]: what a site's boilerplate learned from its pages cannot
    /// take away), then the site's lines after it. The page, and the lead's span in the
    /// article and on the page.
    fn wrapped_excerpt(
        &mut self,
        i: usize,
        size: f64,
        sites: &[Site],
    ) -> Option<(Article, [usize; 2], [usize; 2])> {
        let art = &self.articles[i];
        let content = &art.content;
        let cut = nearest_lead_cut(content, size)?;
        let raw = &content[..cut];
        let lead = raw.trim();
        if chars(&oracle::letters(lead)) < WRAPPED_MIN_LETTERS {
            return None;
        }
        let n = chars(lead);
        let title = art.title.trim();
        let fit: Vec<&Site> = sites
            .iter()
            .filter(|s| !s.before.iter().chain(&s.after).any(|l| l.contains(title)))
            .collect();
        let site = *fit.choose(&mut self.rng)?;
        let links = self.related_links(i, n)?;
        let start = chars(raw) - chars(raw.trim_start());
        let on_page: usize = site.before.iter().map(|l| chars(l) + 1).sum();
        let title = self.teaser_title(i);
        let item = format!("{lead}\n{}", links.join("\n"));
        Some((
            Article {
                id: format!("{}~{}", art.id, site.key),
                title,
                content: site.page(&item),
            },
            [start, start + n],
            [on_page, on_page + n],
        ))
    }

    /// `text` lightly reworded: [`REWORDED_SHARE`] of its words (jieba's) replaced by a
    /// synonym or a near form ([`SYNONYMS`]), then one clause dropped or added; `None` when
    /// the table reaches fewer than [`REWORDED_MIN_SHARE`] of its words.
    fn reword(&mut self, text: &str) -> Option<(String, Rewording)> {
        let table = synonyms();
        let mut words: Vec<String> = neardup_core::text::segment::jieba()
            .cut(text, true)
            .into_iter()
            .map(|t| t.word.to_owned())
            .collect();
        let counted = words
            .iter()
            .filter(|w| w.chars().any(char::is_alphanumeric))
            .count();
        let mut at: Vec<usize> = (0..words.len())
            .filter(|&k| table.contains_key(words[k].as_str()))
            .collect();
        let want = (REWORDED_SHARE * counted as f64).round() as usize;
        if (at.len() as f64) < REWORDED_MIN_SHARE * counted as f64 || want == 0 {
            return None;
        }
        at.shuffle(&mut self.rng);
        at.truncate(want);
        for &k in &at {
            let options = table[words[k].as_str()];
            words[k] = (*options.choose(&mut self.rng).unwrap()).to_owned();
        }
        let replaced = words.concat();
        Some((
            self.edit_clause(&replaced),
            Rewording {
                replaced: at.len(),
                words: counted,
            },
        ))
    }

    /// Drops a middle clause of a sentence of three clauses or more (half of the time, when
    /// there is one), or else adds an opening clause ([`ADDED_CLAUSES`]) to a sentence.
    fn edit_clause(&mut self, text: &str) -> String {
        let mut sents = split_sentences(text);
        let long: Vec<usize> = (0..sents.len())
            .filter(|&s| sents[s].matches('，').count() >= 2)
            .collect();
        if !long.is_empty() && self.rng.gen_bool(0.5) {
            let s = *long.choose(&mut self.rng).unwrap();
            let mut clauses: Vec<&str> = sents[s].split('，').collect();
            clauses.remove(self.rng.gen_range(1..clauses.len() - 1));
            sents[s] = clauses.join("，");
        } else if !sents.is_empty() {
            let s = self.rng.gen_range(0..sents.len());
            let body = sents[s].trim_start();
            let lead = sents[s].len() - body.len();
            let clause = ADDED_CLAUSES.choose(&mut self.rng).unwrap();
            sents[s] = format!("{}{clause}{body}", &sents[s][..lead]);
        }
        sents.concat()
    }

    /// A middle passage of article `i` keeping `size` of its content (as `middle_passage`
    /// chooses it), reworded ([`Generator::reword`]), under a headline of its own first words
    /// and with a source line on two thirds: the article, the passage's span in `i` and in it,
    /// and the rewording.
    fn reworded_passage(
        &mut self,
        i: usize,
        size: f64,
    ) -> Option<(Article, [usize; 2], [usize; 2], Rewording)> {
        let art = &self.articles[i];
        let total = chars(&art.content);
        let from = (PASSAGE_START * total as f64).ceil() as usize;
        let (span, text) = self.passage(&art.content, &share_range(total, size), from)?;
        if chars(&oracle::letters(&text)) < PARTIAL_MIN_LETTERS {
            return None;
        }
        let (text, how) = self.reword(&text)?;
        let own = short_title(&text)?;
        let title = if self.rng.gen_bool(0.5) {
            own
        } else {
            format!("【转载】{own}")
        };
        let src = self.source_name();
        let (content, start) = match self.rng.gen_range(0..3) {
            0 => {
                let head = format!("来源：{src}\n");
                (format!("{head}{text}"), chars(&head))
            }
            1 => (format!("{text}\n（来源：{src}）"), 0),
            _ => (text.clone(), 0),
        };
        Some((
            Article {
                id: format!("{}~reworded", art.id),
                title,
                content,
            },
            span,
            [start, start + chars(&text)],
            how,
        ))
    }
}

/// Statistics of one run of [`copies`], for its progress lines and the tests.
#[derive(Clone, Debug, Default)]
pub struct CopiesStats {
    /// The fixed share of every template instance made, lowest and highest.
    pub fixed_share: Option<(f64, f64)>,
    /// Replaced and counted words of the reworded passages, all together.
    pub rewording: Rewording,
}

/// The copied-text kinds alone, as [`super::generate`] appends them when
/// [`Config::copies`] is on (see the module docs above for each): `negatives`
/// `template_instances` pairs, `per_cell` of `template_repost`, `compilation` and
/// `shared_quote`, and `per_cell` `wrapped_excerpt` and `reworded_passage` pairs of each of
/// their sizes (fewer when a small input runs out of suitable articles). They draw from stream
/// [`COPIES_STREAM`] of the seed.
pub fn copies(
    articles: &[Article],
    config: &Config,
    mut progress: impl FnMut(&str),
) -> Vec<LabelledPair> {
    let related = super::related_pairs(articles);
    let is_related = |i: usize, j: usize| related.contains(&(i.min(j), i.max(j)));
    copies_with(articles, config, &is_related, &mut progress).0
}

pub(super) fn copies_with(
    articles: &[Article],
    config: &Config,
    is_related: &dyn Fn(usize, usize) -> bool,
    progress: &mut dyn FnMut(&str),
) -> (Vec<LabelledPair>, CopiesStats) {
    let mut g = Generator::new(articles, config.seed);
    g.rng.set_stream(COPIES_STREAM);
    let pools = Pools::mine(articles);
    let mut stats = CopiesStats::default();
    let note_share = |stats: &mut CopiesStats, i: &Instance| {
        let s = i.fixed_share();
        let (lo, hi) = stats.fixed_share.get_or_insert((s, s));
        *lo = lo.min(s);
        *hi = hi.max(s);
    };
    let mut pairs = Vec::new();
    let pair = |a: &Article,
                b: &Article,
                kind: &str,
                t: &str,
                size: Option<f64>,
                relation: &str,
                spans: Option<([usize; 2], [usize; 2])>| LabelledPair {
        a: a.to_map(),
        b: b.to_map(),
        duplicate: matches!(relation, NEAR_DUPLICATE | CONTAINED_IN),
        kind: Some(kind.into()),
        transformation: Some(t.into()),
        size,
        relation: Some(relation.into()),
        a_span: spans.map(|s| s.0),
        b_span: spans.map(|s| s.1),
    };
    let mut counts = Vec::new();

    // 1. Two instances of one template.
    let mut serial = 0;
    let mut made = 0;
    for _ in 0..config.negatives * 5 {
        if made == config.negatives {
            break;
        }
        let f = g.rng.gen_range(0..FAMILIES.len());
        let t = g.rng.gen_range(0..FAMILIES[f].templates.len());
        let (d1, d2) = (g.random_day(), g.random_day());
        let Some(x) = g.instance(&pools, f, t, d1) else {
            continue;
        };
        let seen = HashSet::from([x.choices.clone()]);
        let Some(y) = g.fresh_instance(&pools, f, t, d2, &seen) else {
            continue;
        };
        if y.choices == x.choices || y.content == x.content {
            continue;
        }
        note_share(&mut stats, &x);
        note_share(&mut stats, &y);
        let id = |k: usize| format!("tpl-{}-{t}-{k}", FAMILIES[f].name);
        let (a, b) = (
            instance_article(&x, id(serial)),
            instance_article(&y, id(serial + 1)),
        );
        serial += 2;
        pairs.push(pair(
            &a,
            &b,
            "hard_negative",
            "template_instances",
            None,
            DIFFERENT,
            None,
        ));
        made += 1;
    }
    counts.push(format!("{made} template_instances"));

    // 2. An instance and its repost under a news site's header and footer.
    made = 0;
    for _ in 0..config.per_cell * 5 {
        if made == config.per_cell || articles.is_empty() {
            break;
        }
        let f = g.rng.gen_range(0..FAMILIES.len());
        let t = g.rng.gen_range(0..FAMILIES[f].templates.len());
        let day = g.random_day();
        let Some(x) = g.instance(&pools, f, t, day) else {
            continue;
        };
        note_share(&mut stats, &x);
        let a = instance_article(&x, format!("tpl-{}-{t}-{serial}", FAMILIES[f].name));
        serial += 1;
        let (h, foot) = g.boilerplate(usize::MAX, &a.title);
        let n = chars(&a.content);
        let start = chars(&h) + 1;
        let b = Article {
            id: format!("{}~repost", a.id),
            title: a.title.clone(),
            content: format!("{h}\n{}\n{foot}", a.content),
        };
        let size = round((chars(&h) + chars(&foot)) as f64 / n as f64);
        pairs.push(pair(
            &a,
            &b,
            "positive",
            "template_repost",
            Some(size),
            NEAR_DUPLICATE,
            Some(([0, n], [start, start + n])),
        ));
        made += 1;
    }
    counts.push(format!("{made} template_repost"));
    progress(&format!(
        "copied text: template instances of {} families, fixed text {} of their letters",
        FAMILIES.len(),
        stats
            .fixed_share
            .map_or("–".to_owned(), |(lo, hi)| format!("{lo:.3}–{hi:.3}"))
    ));

    // 3. Round-ups and their sources.
    let cats = categories(articles);
    made = 0;
    let mut serial = 0;
    for _ in 0..config.per_cell * 20 {
        if made >= config.per_cell || articles.is_empty() {
            break;
        }
        let Some((c, parts)) = g.compilation(&cats, is_related, serial) else {
            continue;
        };
        serial += 1;
        for p in parts {
            if made == config.per_cell {
                break;
            }
            pairs.push(pair(
                &articles[p.source],
                &c,
                "shared_passage",
                "compilation",
                Some(round(p.share)),
                SHARES_PASSAGE,
                Some((p.in_source, p.in_compilation)),
            ));
            made += 1;
        }
    }
    counts.push(format!("{made} compilation"));

    // 4. Two articles quoting one statement.
    made = 0;
    for _ in 0..config.per_cell * 200 {
        if made == config.per_cell || articles.len() < 3 {
            break;
        }
        let Some((a, b, sa, sb)) = g.shared_quote(&pools, is_related) else {
            continue;
        };
        pairs.push(pair(
            &a,
            &b,
            "shared_passage",
            "shared_quote",
            None,
            SHARES_PASSAGE,
            Some((sa, sb)),
        ));
        made += 1;
    }
    counts.push(format!("{made} shared_quote"));

    // 5. Leads on pages of long boilerplate.
    let sites = if articles.is_empty() {
        Vec::new()
    } else {
        g.wrapping_sites()
    };
    let long = |i: usize| chars(&articles[i].content) >= PARTIAL_MIN_CHARS;
    for &size in WRAPPED_SIZES {
        made = 0;
        for _ in 0..config.per_cell * 50 {
            if made == config.per_cell || sites.is_empty() {
                break;
            }
            let i = g.pick();
            if !long(i) || chars(&articles[i].content) > WRAPPED_MAX_CHARS {
                continue;
            }
            let Some((b, sa, sb)) = g.wrapped_excerpt(i, size, &sites) else {
                continue;
            };
            pairs.push(pair(
                &articles[i],
                &b,
                "positive",
                "wrapped_excerpt",
                Some(size),
                CONTAINED_IN,
                Some((sa, sb)),
            ));
            made += 1;
        }
        counts.push(format!("{made} wrapped_excerpt {:.0}%", size * 100.0));
    }

    // 6. Reworded middle passages.
    for &size in REWORDED_SIZES {
        made = 0;
        for _ in 0..config.per_cell * 50 {
            if made == config.per_cell || articles.is_empty() {
                break;
            }
            let i = g.pick();
            if !long(i) {
                continue;
            }
            let Some((b, sa, sb, how)) = g.reworded_passage(i, size) else {
                continue;
            };
            stats.rewording.replaced += how.replaced;
            stats.rewording.words += how.words;
            pairs.push(pair(
                &articles[i],
                &b,
                "positive",
                "reworded_passage",
                Some(size),
                CONTAINED_IN,
                Some((sa, sb)),
            ));
            made += 1;
        }
        counts.push(format!("{made} reworded_passage {:.0}%", size * 100.0));
    }
    progress(&format!(
        "copied text: {}; reworded passages: {:.1}% of their words replaced",
        counts.join(", "),
        100.0 * stats.rewording.replaced as f64 / stats.rewording.words.max(1) as f64
    ));
    debug_assert!(pairs
        .iter()
        .all(|p| COPIES_KINDS.contains(&p.transformation.as_deref().unwrap_or(""))));
    (pairs, stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use serde_json::{Map, Value};

    /// Letters of the invented articles: no word of the corpus, so no two articles share a
    /// long run by chance.
    const INVENTED: &str = "山水林田湖草城乡村镇街巷楼桥港湾江河岛岸峰谷原野风雨云雪霜雾星月光影花叶根枝果种苗稻麦豆茶棉丝布纸墨笔砚琴棋书画诗歌舞鼓钟灯窗门墙瓦砖石铁铜金银玉珠车船帆桨马牛羊鸡鸭鹅鱼虾蟹贝龟鹤鹰燕雀蝶蜂蚕";
    /// Common words of the synonym table, strewn among the invented letters.
    const COMMON: &[&str] = &[
        "表示", "目前", "进行", "已经", "相关", "发布", "举行", "提高", "增加", "由于", "因此",
        "但是", "此外", "同时", "通过", "根据", "可以", "需要", "非常", "继续",
    ];

    /// `n` invented articles of 1,200–2,600 characters in paragraphs, in four categories
    /// (`sina2018-Fix<c>-<n>`).
    fn invented(n: usize) -> Vec<Article> {
        let mut rng = ChaCha8Rng::seed_from_u64(43);
        let letters: Vec<char> = INVENTED.chars().collect();
        let run = |rng: &mut ChaCha8Rng, k: usize| -> String {
            (0..k).map(|_| *letters.choose(rng).unwrap()).collect()
        };
        (0..n)
            .map(|a| {
                let mut content = String::new();
                let target = rng.gen_range(1200..2600);
                while chars(&content) < target {
                    if !content.is_empty() && rng.gen_bool(0.15) {
                        content.push('\n');
                    }
                    let clauses = rng.gen_range(2..=4);
                    let sentence: Vec<String> = (0..clauses)
                        .map(|_| {
                            let w1 = *COMMON.choose(&mut rng).unwrap();
                            let w2 = *COMMON.choose(&mut rng).unwrap();
                            let k1 = rng.gen_range(3..8);
                            let k2 = rng.gen_range(2..6);
                            format!("{w1}{}{w2}{}", run(&mut rng, k1), run(&mut rng, k2))
                        })
                        .collect();
                    content.push_str(&sentence.join("，"));
                    content.push('。');
                }
                let k = rng.gen_range(10..20);
                Article {
                    id: format!("sina2018-Fix{}-{a:05}", a % 4),
                    title: run(&mut rng, k),
                    content,
                }
            })
            .collect()
    }

    fn config() -> Config {
        Config {
            seed: 11,
            per_cell: 4,
            negatives: 6,
            real: 0,
            messy: false,
            partial: false,
            copies: true,
        }
    }

    fn articles() -> &'static [Article] {
        static A: OnceLock<Vec<Article>> = OnceLock::new();
        A.get_or_init(|| invented(60))
    }

    fn made() -> &'static (Vec<LabelledPair>, CopiesStats) {
        static P: OnceLock<(Vec<LabelledPair>, CopiesStats)> = OnceLock::new();
        P.get_or_init(|| {
            let related = super::super::related_pairs(articles());
            let is_related = |i: usize, j: usize| related.contains(&(i.min(j), i.max(j)));
            copies_with(articles(), &config(), &is_related, &mut |m| {
                eprintln!("{m}")
            })
        })
    }

    fn of(t: &str) -> Vec<&'static LabelledPair> {
        made()
            .0
            .iter()
            .filter(|p| p.transformation.as_deref() == Some(t))
            .collect()
    }

    fn text<'a>(m: &'a Map<String, Value>, f: &str) -> &'a str {
        m[f].as_str().unwrap()
    }

    fn article(m: &Map<String, Value>) -> Article {
        Article::from_map(m).expect("a generated article has an id, a title and a content")
    }

    /// The corpus article a generated one is made from (`<id>~<what>`).
    fn source(m: &Map<String, Value>) -> &'static Article {
        let id = text(m, "id");
        let id = id.split_once('~').map_or(id, |(s, _)| s);
        articles().iter().find(|a| a.id == id).unwrap()
    }

    fn at_spans(p: &LabelledPair) -> (String, String) {
        (
            span_text(text(&p.a, "content"), p.a_span.unwrap()),
            span_text(text(&p.b, "content"), p.b_span.unwrap()),
        )
    }

    #[test]
    fn every_kind_is_made_with_its_label() {
        let c = config();
        let want = [
            (
                "template_instances",
                c.negatives,
                "hard_negative",
                DIFFERENT,
            ),
            ("template_repost", c.per_cell, "positive", NEAR_DUPLICATE),
            ("compilation", c.per_cell, "shared_passage", SHARES_PASSAGE),
            ("shared_quote", c.per_cell, "shared_passage", SHARES_PASSAGE),
            (
                "wrapped_excerpt",
                c.per_cell * WRAPPED_SIZES.len(),
                "positive",
                CONTAINED_IN,
            ),
            (
                "reworded_passage",
                c.per_cell * REWORDED_SIZES.len(),
                "positive",
                CONTAINED_IN,
            ),
        ];
        let total: usize = want.iter().map(|w| w.1).sum();
        assert_eq!(made().0.len(), total);
        for (t, n, kind, relation) in want {
            let pairs = of(t);
            assert_eq!(pairs.len(), n, "{t}");
            for p in pairs {
                assert_eq!(p.kind(), kind, "{t}");
                assert_eq!(p.relation(), relation, "{t}");
                assert_eq!(
                    p.duplicate,
                    matches!(relation, NEAR_DUPLICATE | CONTAINED_IN)
                );
                assert_eq!(p.a_span.is_some(), t != "template_instances", "{t}");
                assert_eq!(p.a_span.is_some(), p.b_span.is_some());
            }
        }
        for (t, sizes) in [
            ("wrapped_excerpt", WRAPPED_SIZES),
            ("reworded_passage", REWORDED_SIZES),
        ] {
            for size in sizes {
                let n = of(t).iter().filter(|p| p.size == Some(*size)).count();
                assert_eq!(n, config().per_cell, "{t} {size}");
            }
        }
        // In the order of COPIES_KINDS.
        let order: Vec<&str> = made()
            .0
            .iter()
            .map(|p| p.transformation.as_deref().unwrap())
            .collect();
        let mut dedup = order.clone();
        dedup.dedup();
        assert_eq!(dedup, COPIES_KINDS);
    }

    #[test]
    fn copies_are_deterministic_for_a_seed() {
        let again = copies(articles(), &config(), |_| {});
        assert_eq!(again, made().0);
        let other = copies(
            articles(),
            &Config {
                seed: 12,
                ..config()
            },
            |_| {},
        );
        assert_ne!(other, made().0);
    }

    #[test]
    fn the_copies_leave_every_earlier_pair_unchanged() {
        let before = Config {
            per_cell: 1,
            negatives: 2,
            messy: true,
            partial: true,
            copies: false,
            ..config()
        };
        let without = super::super::generate(articles(), &before, |_| {});
        let with = super::super::generate(
            articles(),
            &Config {
                copies: true,
                ..before.clone()
            },
            |_| {},
        );
        assert!(with.len() > without.len());
        assert_eq!(with[..without.len()], without[..]);
        assert_eq!(
            with[without.len()..],
            copies(articles(), &before, |_| {})[..]
        );
        assert!(without.iter().all(|p| !p.is_copied_text()));
    }

    #[test]
    fn every_template_renders_within_its_bounds() {
        let pools = Pools::mine(&[]);
        let mut g = Generator::new(&[], 5);
        let mut shares = Vec::new();
        for (f, family) in FAMILIES.iter().enumerate() {
            assert_eq!(family.name, TEMPLATE_FAMILIES[f]);
            assert!(family.templates.len() >= 3, "{}", family.name);
            for t in 0..family.templates.len() {
                let mut seen = HashSet::new();
                for _ in 0..40 {
                    let day = g.random_day();
                    let i = g.instance(&pools, f, t, day).expect("renders");
                    assert!(
                        FIXED_SHARE.contains(&i.fixed_share()),
                        "{} {t}",
                        family.name
                    );
                    assert!(TEMPLATE_CHARS.contains(&chars(&i.content)));
                    assert!(!i.title.is_empty());
                    for text in [&i.title, &i.content] {
                        assert!(
                            !text.contains(['{', '}', '[', ']', '(', ')', '|', '#']),
                            "{text}"
                        );
                    }
                    seen.insert(i.choices.clone());
                    shares.push(i.fixed_share());
                }
                // Optional sentences and alternatives: the fixed text varies.
                assert!(seen.len() >= 10, "{} {t}: {} ways", family.name, seen.len());
            }
        }
        // Pairs: every instance within the range.
        let (lo, hi) = made().1.fixed_share.unwrap();
        assert!(
            FIXED_SHARE.contains(&lo) && FIXED_SHARE.contains(&hi),
            "{lo} {hi}"
        );
        shares.sort_by(f64::total_cmp);
        assert!(shares[shares.len() / 2] > 0.45 && shares[shares.len() / 2] < 0.55);
    }

    #[test]
    fn template_pairs_differ_in_fills_and_fixed_text() {
        for p in of("template_instances") {
            let (a, b) = (text(&p.a, "content"), text(&p.b, "content"));
            assert_ne!(a, b);
            assert_ne!(text(&p.a, "id"), text(&p.b, "id"));
            // One template: the same family and template number in the ids.
            let stem = |id: &str| id.rsplit_once('-').unwrap().0.to_owned();
            assert_eq!(stem(text(&p.a, "id")), stem(text(&p.b, "id")));
        }
        for p in of("template_repost") {
            let (x, y) = at_spans(p);
            assert_eq!(x, text(&p.a, "content"));
            assert_eq!(x, y);
            assert!(chars(text(&p.b, "content")) > chars(text(&p.a, "content")));
        }
    }

    #[test]
    fn a_series_is_one_template_on_consecutive_days() {
        assert!(template_series(&[], "no_such_family", 3, 1).is_none());
        for family in TEMPLATE_FAMILIES {
            let series = template_series(&[], family, 30, 7).unwrap();
            assert_eq!(series.len(), 30);
            let ids: HashSet<&str> = series.iter().map(|a| a.id.as_str()).collect();
            let contents: HashSet<&str> = series.iter().map(|a| a.content.as_str()).collect();
            assert_eq!((ids.len(), contents.len()), (30, 30));
            let template: HashSet<&str> = series
                .iter()
                .map(|a| a.id.rsplit_once('-').unwrap().0)
                .collect();
            assert_eq!(template.len(), 1);
            assert!(series[0].id.starts_with(family));
        }
        assert_eq!(
            template_series(articles(), "weather_forecast", 5, 3),
            template_series(articles(), "weather_forecast", 5, 3)
        );
    }

    #[test]
    fn compilation_spans_point_at_the_passage() {
        let mut sources: HashMap<String, Vec<Article>> = HashMap::new();
        for p in of("compilation") {
            let (x, y) = at_spans(p);
            assert_eq!(x, y, "the passage is copied as it is");
            let a = text(&p.a, "content");
            let share = chars(&x) as f64 / chars(a) as f64;
            assert!((share - p.size.unwrap()).abs() < 1e-3);
            assert!(
                (COMPILATION_SHARE.start() - 1e-3..=COMPILATION_SHARE.end() + 1e-3)
                    .contains(&share),
                "{share}"
            );
            // A connecting phrase introduces the passage on its line.
            let b = text(&p.b, "content");
            let before: String = b.chars().take(p.b_span.unwrap()[0]).collect();
            let line = before.rsplit('\n').next().unwrap();
            assert!(
                COMPILATION_CONNECTORS
                    .iter()
                    .any(|c| { SOURCES.iter().any(|s| c.replace("{src}", s) == line) }),
                "{line}"
            );
            assert!(chars(&y) as f64 <= COMPILATION_MAX_SHARE * chars(b) as f64);
            assert_eq!(
                text(&p.a, "id"),
                source(&p.a).id,
                "a is the source as it is"
            );
            sources
                .entry(text(&p.b, "id").to_owned())
                .or_default()
                .push(article(&p.a));
        }
        // Sources of one round-up share no run of 20 letters.
        for list in sources.values() {
            for (k, x) in list.iter().enumerate() {
                for y in &list[k + 1..] {
                    assert!(!share_a_run(x, y), "{} {}", x.id, y.id);
                }
            }
        }
    }

    #[test]
    fn shared_quotes_are_the_only_text_two_articles_share() {
        for p in of("shared_quote") {
            let (x, y) = at_spans(p);
            assert_eq!(x, y);
            assert!(SHARED_QUOTE_CHARS.contains(&chars(&x)), "{x}");
            let (a, b) = (article(&p.a), article(&p.b));
            assert_eq!(shared_runs_outside(&a, &b, &x), 0);
            assert!(share_a_run(&a, &b), "the quote is shared");
            let (sa, sb) = (source(&p.a), source(&p.b));
            assert_ne!(category(&sa.id), category(&sb.id));
            assert!(!share_a_run(sa, sb));
            assert!(!sa.content.contains(&x) && !sb.content.contains(&x));
            // The article is its source with the introduced quote inserted.
            for (side, src, span) in [(&a, sa, p.a_span.unwrap()), (&b, sb, p.b_span.unwrap())] {
                let chars_of: Vec<char> = side.content.chars().collect();
                assert_eq!(chars_of[span[0] - 1], '“');
                assert_eq!(chars_of[span[1]], '”');
                assert!(chars(&side.content) > chars(&src.content) + chars(&x));
            }
        }
    }

    #[test]
    fn wrapped_excerpts_are_leads_under_site_lines_and_longer_links() {
        for p in of("wrapped_excerpt") {
            let (x, y) = at_spans(p);
            assert_eq!(x, y);
            let a = text(&p.a, "content");
            assert!((PARTIAL_MIN_CHARS..=WRAPPED_MAX_CHARS).contains(&chars(a)));
            let start = p.a_span.unwrap()[0];
            assert!(a.chars().take(start).all(char::is_whitespace), "a lead");
            let share = chars(&x) as f64 / chars(a) as f64;
            assert!((share - p.size.unwrap()).abs() <= super::super::PARTIAL_TOLERANCE + 1e-9);
            // After the lead, a block of related links longer than it (line breaks not
            // counted), then the site's lines.
            let no_breaks = |t: &str| t.chars().filter(|c| *c != '\n').count();
            let b = text(&p.b, "content");
            let after: String = b.chars().skip(p.b_span.unwrap()[1] + 1).collect();
            let mut lines = after.lines();
            let heading = lines.next().unwrap();
            assert!(RELATED_HEADINGS.contains(&heading), "{heading}");
            let links: Vec<&str> = lines
                .take_while(|l| {
                    articles()
                        .iter()
                        .any(|a| !a.title.is_empty() && l.ends_with(a.title.trim()))
                })
                .collect();
            let block = chars(heading) + links.iter().map(|l| chars(l)).sum::<usize>();
            assert!(block > no_breaks(&x), "{block} vs {}", no_breaks(&x));
            assert!(links.iter().all(|l| !l.ends_with(text(&p.a, "title"))));
            assert!(
                no_breaks(b) - no_breaks(&x) - block
                    >= *super::super::SITE_BOILERPLATE_CHARS.start()
            );
        }
    }

    #[test]
    fn reworded_passages_are_middle_passages_lightly_changed() {
        for p in of("reworded_passage") {
            let (x, y) = at_spans(p);
            assert_ne!(x, y);
            let a = text(&p.a, "content");
            assert!(p.a_span.unwrap()[0] as f64 >= PASSAGE_START * chars(a) as f64);
            let share = chars(&x) as f64 / chars(a) as f64;
            assert!((share - p.size.unwrap()).abs() <= super::super::PARTIAL_TOLERANCE + 1e-9);
            // Most of the passage's letters are kept in order.
            let o = oracle::overlap(&oracle::runs(&[y.as_str()]), &oracle::runs(&[x.as_str()]));
            assert!(o.containment > 0.4, "{o:?}");
        }
        let r = made().1.rewording;
        let replaced = r.replaced as f64 / r.words as f64;
        assert!(
            (REWORDED_MIN_SHARE..=REWORDED_SHARE + 0.01).contains(&replaced),
            "{replaced}"
        );
    }

    #[test]
    fn rewording_uses_the_table_and_edits_one_clause() {
        let mut g = Generator::new(&[], 1);
        let text = "目前，有关部门表示将进行调查，并且已经发布通知，要求各单位加强管理。由于天气原因，比赛因此推迟，但是观众非常理解。";
        let (out, how) = g.reword(text).unwrap();
        assert_ne!(out, text);
        assert!(
            how.replaced >= 1 && how.replaced <= how.words / 5 + 1,
            "{how:?}"
        );
        let dropped = g.edit_clause("一，二，三，四。五。");
        let added = ADDED_CLAUSES.iter().any(|c| dropped.contains(c));
        assert!(added || dropped.matches('，').count() == 2, "{dropped}");
        assert!(
            g.reword("甲乙丙丁戊己庚辛。").is_none(),
            "no word of the table"
        );
    }

    #[test]
    fn sentences_are_trimmed_spans() {
        let text = "  一二。“三四！”五\n\n　六七；八";
        let got: Vec<String> = sentences(text)
            .iter()
            .map(|s| {
                let by_bytes = &text[s.bytes.0..s.bytes.1];
                assert_eq!(span_text(text, [s.chars.0, s.chars.1]), by_bytes);
                by_bytes.to_owned()
            })
            .collect();
        assert_eq!(got, ["一二。", "“三四！”", "五", "六七；", "八"]);
    }

    #[test]
    fn days_and_the_template_language() {
        assert_eq!(Day::FIRST.civil(), (2016, 1, 1));
        assert_eq!(Day::LAST.civil(), (2019, 12, 31));
        let d = Day(17834); // 2018-10-30, a Tuesday
        assert_eq!(
            (d.full(), d.weekday()),
            ("2018年10月30日".to_owned(), "周二")
        );
        assert_eq!(d.plus(2).month_day(), "11月1日");
        // A choice bound by a key takes the same alternative throughout.
        let pools = Pools::mine(&[]);
        let mut g = Generator::new(&[], 9);
        for _ in 0..20 {
            let mut r = Render::default();
            let nodes = parse("(@d 涨|跌)[，又(@d 涨|跌)]({num#n}|{num#n})");
            g.render(&pools, Dates { day: d, later: d }, &nodes, &mut r);
            assert!(r.text.starts_with('涨') ^ r.text.starts_with('跌'));
            assert!(
                !(r.text.contains('涨') && r.text.contains('跌')),
                "{}",
                r.text
            );
        }
        let bad = std::panic::catch_unwind(|| parse("(未闭合|"));
        assert!(bad.is_err());
    }
}
