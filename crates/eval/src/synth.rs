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

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::generate::{split_sentences, Article};

/// The real parts synthetic articles are built from.
#[derive(Clone, Debug)]
pub struct Synthesizer {
    /// (title, opening sentence, closing sentence) of every article with at least two
    /// sentences.
    frames: Vec<(String, String, String)>,
    /// Every body sentence of the corpus (neither an opening nor a closing one), in corpus
    /// order.
    sentences: Vec<String>,
    /// Content length in characters of every article, the length distribution followed.
    lengths: Vec<usize>,
    seed: u64,
}

/// The sentences of an article's content, paragraph after paragraph; blank ones dropped.
fn sentences_of(content: &str) -> Vec<String> {
    content
        .split('\n')
        .flat_map(split_sentences)
        .filter(|s| !s.trim().is_empty())
        .collect()
}

impl Synthesizer {
    /// Cuts `articles` into frames and a sentence pool. `None` when no article has three
    /// sentences (an opening, a body sentence and a closing), so there is nothing to draw.
    pub fn new(articles: &[Article], seed: u64) -> Option<Synthesizer> {
        let mut frames = Vec::new();
        let mut sentences = Vec::new();
        let mut lengths = Vec::new();
        for a in articles {
            lengths.push(a.content.chars().count());
            let mut s = sentences_of(&a.content);
            if s.len() < 2 {
                continue;
            }
            let closing = s.pop().expect("two sentences");
            let opening = s.remove(0);
            frames.push((a.title.clone(), opening, closing));
            sentences.extend(s);
        }
        (!sentences.is_empty()).then_some(Synthesizer {
            frames,
            sentences,
            lengths,
            seed,
        })
    }

    /// Body sentences available to draw from.
    pub fn sentence_pool(&self) -> usize {
        self.sentences.len()
    }

    /// The id of synthetic article `n`.
    pub fn id(n: u64) -> String {
        format!("synthetic-{n}")
    }

    /// Synthetic article `n` (id [`Synthesizer::id`]): the title, opening and closing sentence of
    /// one real article, a body of random corpus sentences, as long (in characters) as
    /// another random real article's content, in paragraphs of one to six sentences.
    pub fn article(&self, n: u64) -> Article {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(n);
        let (title, opening, closing) = self.frames.choose(&mut rng).expect("frames");
        let target = *self.lengths.choose(&mut rng).expect("lengths");
        let mut len = opening.chars().count() + closing.chars().count();
        let mut content = opening.clone();
        let mut in_paragraph = 1;
        let mut paragraph = rng.gen_range(1..=6);
        // At least one body sentence, so that no two synthetic articles share a frame alone.
        loop {
            let s = self.sentences.choose(&mut rng).expect("sentences");
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
        assert_eq!(s.sentence_pool(), 5);
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
    fn nothing_to_draw_from_is_none() {
        let corpus = corpus();
        assert!(Synthesizer::new(&corpus[2..], 1).is_none());
        assert!(Synthesizer::new(&[], 1).is_none());
    }
}
