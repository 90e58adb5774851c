//! Synthetic articles that look like the corpus, for benchmarks at sizes the corpus does not
//! reach (a million documents from 16k articles).
//!
//! Random fingerprints flatter a near-duplicate index: they spread evenly over every block
//! value, while real ones are skewed by what articles share (sources, editor lines, agency
//! boilerplate, common phrasing). A synthetic article here keeps one real article's opening
//! and closing sentences (where the source, reporter, editor and boilerplate lines sit) and a
//! real title, and fills its body with real sentences drawn from the whole corpus until it is
//! as long as another real article, so that lengths follow the corpus. Article `n` depends
//! only on the corpus, the seed and `n` (its own ChaCha8 stream), so any range of them can be
//! made in parallel and in any order, the same on every platform.
//!
//! That fill ([`Fill::Sentences`]) repeats itself as an index grows: a million articles draw
//! about thirty million body sentences from a pool of a few hundred thousand, so every corpus
//! sentence sits in a hundred of them (a thousand at 10M), and the articles framed by one
//! real article share its title and two sentences with dozens of others. No archive of
//! distinct articles is like that, and lookups pay for it: their candidates are those crowds.
//! [`Fill::Words`] writes text no article holds: title and content are walks of a chain of
//! the corpus's words (jieba's), each word followed by one that follows it somewhere in the
//! corpus, so that word pairs, and with them MinHash's shingles, keep the corpus's
//! frequencies, while sentences and runs of letters are new except for common phrasing.
//! Benchmarks that report both bracket what a real archive does.

use std::collections::HashMap;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::generate::{split_sentences, Article};

/// What a synthetic article's title and content are made of (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fill {
    /// A real article's title, opening and closing sentence around real body sentences drawn
    /// from the whole corpus.
    #[default]
    Sentences,
    /// Walks of the corpus's chain of words: new text with the corpus's word pairs.
    Words,
}

/// The real parts synthetic articles are built from.
#[derive(Clone, Debug)]
pub struct Synthesizer {
    /// What the titles and contents are drawn from.
    parts: Parts,
    /// Content length in characters of every article, the length distribution followed.
    lengths: Vec<usize>,
    seed: u64,
}

/// What a [`Synthesizer`] draws from, one kind for each [`Fill`].
#[derive(Clone, Debug)]
enum Parts {
    Sentences {
        /// (title, opening sentence, closing sentence) of every article with at least two
        /// sentences.
        frames: Vec<(String, String, String)>,
        /// Every body sentence of the corpus (neither an opening nor a closing one), in
        /// corpus order.
        sentences: Vec<String>,
    },
    Words(WordChain),
}

/// The corpus's words and which follow which: a first-order Markov chain over jieba's
/// tokens, successors kept with their repeats so that a uniform draw follows the corpus's
/// frequencies.
#[derive(Clone, Debug)]
struct WordChain {
    words: Vec<String>,
    /// `next[offsets[w]..offsets[w + 1]]`: the words that follow word `w` in the corpus.
    offsets: Vec<usize>,
    next: Vec<u32>,
    /// Words that begin a sentence of a content (after a sentence's end or a line break).
    starts: Vec<u32>,
    /// Words that begin a title.
    title_starts: Vec<u32>,
    /// Title lengths in characters.
    title_lengths: Vec<usize>,
}

/// Whether a word ends a sentence (as [`split_sentences`] cuts them, `；` aside).
fn ends_sentence(word: &str) -> bool {
    matches!(word, "。" | "！" | "？" | "!" | "?")
}

impl WordChain {
    fn new(articles: &[Article]) -> Option<WordChain> {
        let jieba = neardup_core::text::segment::jieba();
        let cut = |text: &str| -> Vec<String> {
            jieba
                .cut(text, true)
                .into_iter()
                .map(|t| t.word)
                .filter(|w| !w.trim().is_empty())
                .map(str::to_owned)
                .collect()
        };
        let lines: Vec<(Vec<String>, Vec<Vec<String>>)> = articles
            .par_iter()
            .map(|a| (cut(&a.title), a.content.split('\n').map(cut).collect()))
            .collect();
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut words: Vec<String> = Vec::new();
        let mut id = |w: &String| -> u32 {
            *ids.entry(w.clone()).or_insert_with(|| {
                words.push(w.clone());
                (words.len() - 1) as u32
            })
        };
        let (mut pairs, mut starts, mut title_starts, mut title_lengths) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (title, paragraphs) in &lines {
            let title_ids: Vec<u32> = title.iter().map(&mut id).collect();
            if let Some(&first) = title_ids.first() {
                title_starts.push(first);
                title_lengths.push(title.iter().map(|w| w.chars().count()).sum());
            }
            pairs.extend(title_ids.windows(2).map(|p| (p[0], p[1])));
            for paragraph in paragraphs {
                let ids: Vec<u32> = paragraph.iter().map(&mut id).collect();
                for (i, &w) in ids.iter().enumerate() {
                    if i == 0 || ends_sentence(&paragraph[i - 1]) {
                        starts.push(w);
                    }
                }
                pairs.extend(ids.windows(2).map(|p| (p[0], p[1])));
            }
        }
        if starts.is_empty() || title_starts.is_empty() {
            return None;
        }
        // Successors grouped by word, each group in corpus order (a stable sort).
        pairs.sort_by_key(|&(from, _)| from);
        let mut offsets = vec![0; words.len() + 1];
        for &(from, _) in &pairs {
            offsets[from as usize + 1] += 1;
        }
        for w in 0..words.len() {
            offsets[w + 1] += offsets[w];
        }
        Some(WordChain {
            words,
            offsets,
            next: pairs.into_iter().map(|(_, to)| to).collect(),
            starts,
            title_starts,
            title_lengths,
        })
    }

    /// A word that may follow `w` (a sentence's first word where none follows it).
    fn after(&self, w: u32, rng: &mut ChaCha8Rng) -> u32 {
        let next = &self.next[self.offsets[w as usize]..self.offsets[w as usize + 1]];
        *next
            .choose(rng)
            .unwrap_or_else(|| self.starts.choose(rng).expect("starts"))
    }

    /// A title: a walk from a title's first word, as long as a real title, ended early by the
    /// end of a sentence.
    fn title(&self, rng: &mut ChaCha8Rng) -> Vec<u32> {
        let target = *self.title_lengths.choose(rng).expect("titles");
        let mut w = *self.title_starts.choose(rng).expect("titles");
        let (mut title, mut len) = (Vec::new(), 0);
        while !ends_sentence(&self.words[w as usize]) {
            title.push(w);
            len += self.words[w as usize].chars().count();
            if len >= target {
                break;
            }
            w = self.after(w, rng);
        }
        title
    }

    /// A content of at least `target` characters, as paragraphs of words: sentences walked
    /// from sentences' first words, one to six to a paragraph, ended at the first sentence's
    /// end past `target` (or [`WALK_SLACK`] characters past it, where no sentence ends).
    fn content(&self, target: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<u32>> {
        let mut paragraphs = vec![Vec::new()];
        let mut len = 0;
        let mut in_paragraph = 0;
        let mut paragraph = rng.gen_range(1..=6);
        let mut w = *self.starts.choose(rng).expect("starts");
        loop {
            paragraphs.last_mut().expect("a paragraph").push(w);
            len += self.words[w as usize].chars().count();
            if ends_sentence(&self.words[w as usize]) {
                if len >= target {
                    break;
                }
                in_paragraph += 1;
                if in_paragraph >= paragraph {
                    paragraphs.push(Vec::new());
                    in_paragraph = 0;
                    paragraph = rng.gen_range(1..=6);
                    w = *self.starts.choose(rng).expect("starts");
                    continue;
                }
            } else if len >= target + WALK_SLACK {
                break;
            }
            w = self.after(w, rng);
        }
        paragraphs
    }

    /// The text of `words`.
    fn text(&self, words: &[u32]) -> String {
        words
            .iter()
            .map(|&w| self.words[w as usize].as_str())
            .collect()
    }
}

/// Characters a content walk may run past its length before it stops without a sentence's
/// end.
const WALK_SLACK: usize = 200;

/// The sentences of an article's content, paragraph after paragraph; blank ones dropped.
fn sentences_of(content: &str) -> Vec<String> {
    content
        .split('\n')
        .flat_map(split_sentences)
        .filter(|s| !s.trim().is_empty())
        .collect()
}

impl Synthesizer {
    /// Cuts `articles` into frames and a sentence pool ([`Fill::Sentences`]). `None` when no
    /// article has three sentences (an opening, a body sentence and a closing), so there is
    /// nothing to draw.
    pub fn new(articles: &[Article], seed: u64) -> Option<Synthesizer> {
        Synthesizer::with_fill(articles, seed, Fill::Sentences)
    }

    /// [`Synthesizer::new`] with the fill chosen. [`Fill::Words`] cuts every article into
    /// words for its chain instead (a few seconds for the 16k corpus articles); `None` when
    /// no article has a title and a content to walk.
    pub fn with_fill(articles: &[Article], seed: u64, fill: Fill) -> Option<Synthesizer> {
        let parts = match fill {
            Fill::Sentences => {
                let mut frames = Vec::new();
                let mut sentences = Vec::new();
                for a in articles {
                    let mut s = sentences_of(&a.content);
                    if s.len() < 2 {
                        continue;
                    }
                    let closing = s.pop().expect("two sentences");
                    let opening = s.remove(0);
                    frames.push((a.title.clone(), opening, closing));
                    sentences.extend(s);
                }
                if sentences.is_empty() {
                    return None;
                }
                Parts::Sentences { frames, sentences }
            }
            Fill::Words => Parts::Words(WordChain::new(articles)?),
        };
        Some(Synthesizer {
            parts,
            lengths: articles.iter().map(|a| a.content.chars().count()).collect(),
            seed,
        })
    }

    /// What its articles are made of.
    pub fn fill(&self) -> Fill {
        match self.parts {
            Parts::Sentences { .. } => Fill::Sentences,
            Parts::Words(_) => Fill::Words,
        }
    }

    /// The id of synthetic article `n`.
    pub fn id(n: u64) -> String {
        format!("synthetic-{n}")
    }

    /// Synthetic article `n` (id [`Synthesizer::id`]): the title, opening and closing sentence of
    /// one real article, a body of random corpus sentences, as long (in characters) as
    /// another random real article's content, in paragraphs of one to six sentences.
    ///
    /// With [`Fill::Words`], a title and a content walked on the chain of words instead, the
    /// content as long as a random real article's.
    pub fn article(&self, n: u64) -> Article {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(n);
        let (frames, sentences) = match &self.parts {
            Parts::Sentences { frames, sentences } => (frames, sentences),
            Parts::Words(chain) => {
                let title = chain.text(&chain.title(&mut rng));
                let target = *self.lengths.choose(&mut rng).expect("lengths");
                let content: Vec<String> = chain
                    .content(target, &mut rng)
                    .iter()
                    .map(|p| chain.text(p))
                    .collect();
                return Article {
                    id: Synthesizer::id(n),
                    title,
                    content: content.join("\n"),
                };
            }
        };
        let (title, opening, closing) = frames.choose(&mut rng).expect("frames");
        let target = *self.lengths.choose(&mut rng).expect("lengths");
        let mut len = opening.chars().count() + closing.chars().count();
        let mut content = opening.clone();
        let mut in_paragraph = 1;
        let mut paragraph = rng.gen_range(1..=6);
        // At least one body sentence, so that no two synthetic articles share a frame alone.
        loop {
            let s = sentences.choose(&mut rng).expect("sentences");
            if in_paragraph >= paragraph {
                content.push('\n');
                in_paragraph = 0;
                paragraph = rng.gen_range(1..=6);
            }
            content.push_str(s);
            in_paragraph += 1;
            len += s.chars().count();
            if len >= target {
                break;
            }
        }
        content.push('\n');
        content.push_str(closing);
        Article {
            id: Synthesizer::id(n),
            title: title.clone(),
            content,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<Article> {
        let article = |id: &str, title: &str, content: &str| Article {
            id: id.into(),
            title: title.into(),
            content: content.into(),
        };
        vec![
            article(
                "a",
                "标题甲",
                "新华社北京电 记者甲报道。第一句正文在这里。第二句正文也在这里！\n第三句正文。（责任编辑：张三）",
            ),
            article(
                "b",
                "标题乙",
                "本报讯 记者乙报道。乙的正文很长很长很长。乙的第二句？\n（编辑：李四）",
            ),
            article("c", "标题丙", "只有一句的文章"),
        ]
    }

    #[test]
    fn articles_are_made_of_real_frames_and_sentences() {
        let corpus = corpus();
        let s = Synthesizer::new(&corpus, 7).expect("pool");
        let Parts::Sentences { sentences, .. } = &s.parts else {
            panic!("a sentence fill");
        };
        assert_eq!(sentences.len(), 5);
        let pool: Vec<String> = corpus
            .iter()
            .flat_map(|a| {
                let s = sentences_of(&a.content);
                let body = 1..s.len().saturating_sub(1).max(1);
                s[body].to_vec()
            })
            .collect();
        assert_eq!(pool.len(), 5);
        let max_len = corpus.iter().map(|a| a.content.chars().count()).max();
        for n in 0..200 {
            let a = s.article(n);
            assert_eq!(a.id, format!("synthetic-{n}"));
            assert_eq!(a.id, Synthesizer::id(n));
            let real = corpus
                .iter()
                .find(|r| r.title == a.title)
                .expect("a real title");
            assert_ne!(real.id, "c", "c has no frame");
            let sentences = sentences_of(&a.content);
            let real_sentences = sentences_of(&real.content);
            assert_eq!(sentences.first(), real_sentences.first());
            assert_eq!(sentences.last(), real_sentences.last());
            assert!(sentences.len() >= 3, "{a:?}");
            for body in &sentences[1..sentences.len() - 1] {
                assert!(pool.contains(body), "{body} is not a corpus sentence");
            }
            // Stops at the first sentence that reaches the drawn length.
            let longest_sentence = pool.iter().map(|p| p.chars().count()).max().unwrap();
            assert!(a.content.chars().count() < max_len.unwrap() + longest_sentence + 60);
        }
    }

    #[test]
    fn article_n_depends_only_on_seed_and_n() {
        let corpus = corpus();
        let s = Synthesizer::new(&corpus, 7).expect("pool");
        let forward: Vec<Article> = (0..50).map(|n| s.article(n)).collect();
        let backward: Vec<Article> = (0..50).rev().map(|n| s.article(n)).collect();
        assert!(forward.iter().eq(backward.iter().rev()));
        let again = Synthesizer::new(&corpus, 7).unwrap();
        assert_eq!(again.article(31), forward[31]);
        let distinct: std::collections::HashSet<&str> =
            forward.iter().map(|a| a.content.as_str()).collect();
        assert!(distinct.len() > 40, "{} distinct of 50", distinct.len());
        let other_seed = Synthesizer::new(&corpus, 8).unwrap();
        assert!((0..50).any(|n| other_seed.article(n) != forward[n as usize]));
    }

    #[test]
    fn word_articles_walk_the_corpus_chain_of_words() {
        let corpus = corpus();
        let s = Synthesizer::with_fill(&corpus, 7, Fill::Words).expect("pool");
        assert_eq!(s.fill(), Fill::Words);
        let Parts::Words(chain) = &s.parts else {
            panic!("a word fill");
        };
        // `b` may follow `a`: it does in the corpus, or nothing follows `a` (a paragraph's
        // last word) and `b` begins a sentence.
        let follows = |a: u32, b: u32| {
            let next = &chain.next[chain.offsets[a as usize]..chain.offsets[a as usize + 1]];
            next.contains(&b) || (next.is_empty() && chain.starts.contains(&b))
        };
        let min_len = corpus.iter().map(|a| a.content.chars().count()).min();
        for n in 0..200 {
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            rng.set_stream(n);
            let title = chain.title(&mut rng);
            assert!(chain.title_starts.contains(&title[0]));
            assert!(title.windows(2).all(|p| follows(p[0], p[1])), "{title:?}");
            assert!(title
                .iter()
                .all(|&w| !ends_sentence(&chain.words[w as usize])));
            let target = *s.lengths.choose(&mut rng).unwrap();
            let content = chain.content(target, &mut rng);
            for p in &content {
                assert!(
                    chain.starts.contains(&p[0]),
                    "a paragraph begins a sentence"
                );
                assert!(p.windows(2).all(|w| follows(w[0], w[1])), "{p:?}");
            }
            let a = s.article(n);
            assert_eq!(a.id, Synthesizer::id(n));
            assert_eq!(a.title, chain.text(&title));
            let paragraphs: Vec<String> = content.iter().map(|p| chain.text(p)).collect();
            assert_eq!(a.content, paragraphs.join("\n"));
            let len = a.content.chars().count() - (content.len() - 1);
            assert!(len >= min_len.unwrap().min(target), "{len} < {target}");
            assert!(len < target + WALK_SLACK + 20, "{len}");
        }
        let forward: Vec<Article> = (0..50).map(|n| s.article(n)).collect();
        let backward: Vec<Article> = (0..50).rev().map(|n| s.article(n)).collect();
        assert!(forward.iter().eq(backward.iter().rev()));
        let again = Synthesizer::with_fill(&corpus, 7, Fill::Words).unwrap();
        assert_eq!(again.article(31), forward[31]);
        let other_seed = Synthesizer::with_fill(&corpus, 8, Fill::Words).unwrap();
        assert!((0..50).any(|n| other_seed.article(n) != forward[n as usize]));
        assert_eq!(
            Synthesizer::new(&corpus, 7).unwrap().fill(),
            Fill::Sentences
        );
    }

    #[test]
    fn nothing_to_draw_from_is_none() {
        let corpus = corpus();
        assert!(Synthesizer::new(&corpus[2..], 1).is_none());
        assert!(Synthesizer::new(&[], 1).is_none());
        assert!(Synthesizer::with_fill(&[], 1, Fill::Words).is_none());
    }
}
