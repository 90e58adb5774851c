//! HTML → plain text.
//!
//! Article bodies in content stores are often HTML. What readers see is what makes two
//! articles duplicates, so scripts, styles and other non-visible parts are dropped, and block
//! elements become line breaks so words on either side of a `</p>` are not glued together.

use ego_tree::iter::Edge;
use scraper::{Html, Node};

/// Elements whose content is never shown as article text.
const HIDDEN: &[&str] = &[
    "script", "style", "noscript", "template", "head", "iframe", "object", "svg", "canvas",
];

/// Elements that start a new line in rendered text.
const BLOCK: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "td",
    "th",
    "tr",
    "ul",
];

/// Whether `s` should be treated as HTML: it has something that looks like a tag (`<p`,
/// `</div`, `<!--`) or a character entity. Plain text passes through untouched, so a
/// news text that mentions "a < b" is not mangled by an HTML parser.
pub fn looks_like_html(s: &str) -> bool {
    let b = s.as_bytes();
    let tag = b
        .windows(2)
        .any(|w| w[0] == b'<' && (w[1].is_ascii_alphabetic() || w[1] == b'/' || w[1] == b'!'));
    tag && b.contains(&b'>') || has_entity(b)
}

fn has_entity(b: &[u8]) -> bool {
    b.iter().enumerate().any(|(i, &c)| {
        if c != b'&' {
            return false;
        }
        let rest = &b[i + 1..b.len().min(i + 12)];
        match rest.iter().position(|&x| x == b';') {
            Some(end) if end > 0 => rest[..end]
                .iter()
                .all(|x| x.is_ascii_alphanumeric() || *x == b'#'),
            _ => false,
        }
    })
}

/// The visible text of an HTML fragment or document, with entities decoded and block
/// boundaries as `\n`.
pub fn html_to_text(html: &str) -> String {
    let doc = if html.contains("<html") || html.contains("<HTML") {
        Html::parse_document(html)
    } else {
        Html::parse_fragment(html)
    };
    let mut out = String::with_capacity(html.len() / 2);
    // Depth inside hidden elements; traversal is iterative so deep nesting cannot overflow
    // the stack.
    let mut hidden = 0usize;
    for edge in doc.tree.root().traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(el) => {
                    let name = el.name();
                    if HIDDEN.contains(&name) {
                        hidden += 1;
                    } else if hidden == 0 && BLOCK.contains(&name) {
                        out.push('\n');
                    }
                }
                Node::Text(t) if hidden == 0 => out.push_str(t),
                _ => {}
            },
            Edge::Close(node) => {
                if let Node::Element(el) = node.value() {
                    let name = el.name();
                    if HIDDEN.contains(&name) {
                        hidden -= 1;
                    } else if hidden == 0 && BLOCK.contains(&name) {
                        out.push('\n');
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_tags_and_entities_only() {
        assert!(looks_like_html("<p>你好</p>"));
        assert!(looks_like_html("a &amp; b"));
        assert!(looks_like_html("价格 &#20013;"));
        assert!(!looks_like_html("3 < 5 且 6 > 4"));
        assert!(!looks_like_html("AT&T 公司"));
        assert!(!looks_like_html("纯文本新闻"));
    }

    #[test]
    fn drops_scripts_and_styles_and_breaks_blocks() {
        let t = html_to_text(
            "<div><script>var ad = 1;</script><style>p{}</style><p>第一段</p><p>第二&amp;段</p>\
             <noscript>请启用</noscript>尾</div>",
        );
        assert!(!t.contains("ad"));
        assert!(!t.contains("p{}"));
        assert!(!t.contains("请启用"));
        assert!(t.contains("第一段\n"));
        assert!(t.contains("第二&段"));
        assert!(t.contains('尾'));
    }

    #[test]
    fn nested_blocks_and_full_documents() {
        let t = html_to_text(
            "<html><head><title>标题</title></head><body><ul><li>甲<li>乙</ul>\
             <div><div><p>深&nbsp;层</p></div></div></body></html>",
        );
        assert!(!t.contains("标题"));
        assert!(t.contains("甲\n"));
        assert!(t.contains('乙'));
        assert!(t.contains("深\u{a0}层"));
    }
}
