//! Pages read as a browser reads them: parsed by an HTML5 tree builder (html5ever), so a
//! test sees the elements and attributes a browser would build, including those that text
//! smuggled in by closing an element early (`</title><img …>`). Grepping the HTML for
//! `<script` cannot tell markup we wrote from markup a user's text became; the tree can.

use html5ever::tendril::TendrilSink;
use markup5ever_rcdom::{Handle, NodeData, RcDom};

/// One element of a parsed page: its tag, its attributes, and the text directly inside it.
#[derive(Debug, Clone)]
pub struct Element {
    pub tag: String,
    pub attrs: Vec<(String, String)>,
    pub text: String,
}

/// Every element of `html`, in document order (template contents included).
pub fn elements(html: &str) -> Vec<Element> {
    let dom = html5ever::parse_document(RcDom::default(), Default::default()).one(html);
    let mut out = Vec::new();
    walk(&dom.document, &mut out);
    out
}

fn walk(node: &Handle, out: &mut Vec<Element>) {
    if let NodeData::Element {
        name,
        attrs,
        template_contents,
        ..
    } = &node.data
    {
        let text = node
            .children
            .borrow()
            .iter()
            .filter_map(|child| match &child.data {
                NodeData::Text { contents } => Some(contents.borrow().to_string()),
                _ => None,
            })
            .collect();
        out.push(Element {
            tag: name.local.to_string(),
            attrs: attrs
                .borrow()
                .iter()
                .map(|a| (a.name.local.to_string(), a.value.to_string()))
                .collect(),
            text,
        });
        if let Some(contents) = template_contents.borrow().as_ref() {
            walk(contents, out);
        }
    }
    for child in node.children.borrow().iter() {
        walk(child, out);
    }
}

/// The document's title as a browser shows it (character references decoded).
pub fn title(html: &str) -> Option<String> {
    elements(html)
        .into_iter()
        .find(|e| e.tag == "title")
        .map(|e| e.text)
}

/// What the page has that text could only have put there: an element or attribute whose
/// name carries `marker`, an event handler attribute (`on…`: the server renders none; the
/// browser attaches handlers from the wasm), a script or style holding `marker`, or a link
/// to a `javascript:` or `data:` URL. Empty for a page whose every text stayed text.
pub fn smuggled(html: &str, marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for element in elements(html) {
        if element.tag.contains(marker) {
            found.push(format!("element <{}>", element.tag));
        }
        if matches!(element.tag.as_str(), "script" | "style") && element.text.contains(marker) {
            found.push(format!("<{}> holding {marker:?}", element.tag));
        }
        for (name, value) in &element.attrs {
            if name.contains(marker) || name.starts_with("on") {
                found.push(format!("attribute {name}={value:?} on <{}>", element.tag));
            }
            let url_attr = matches!(name.as_str(), "href" | "src" | "action" | "formaction");
            let scheme = value.trim_start().to_ascii_lowercase();
            if url_attr && (scheme.starts_with("javascript:") || scheme.starts_with("data:")) {
                found.push(format!("{name}={value:?} on <{}>", element.tag));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_that_text_became_is_found_and_escaped_text_is_not() {
        let raw = "<html><head><title></title><img src=x onerror=alert(1) data-pwn>.log</title></head></html>";
        let found = smuggled(raw, "pwn");
        assert!(found.iter().any(|f| f.contains("onerror")), "{found:?}");
        assert!(found.iter().any(|f| f.contains("data-pwn")), "{found:?}");
        let escaped = "<html><head><title>&lt;/title&gt;&lt;img src=x onerror=alert(1) data-pwn&gt;</title></head></html>";
        assert!(smuggled(escaped, "pwn").is_empty());
        assert_eq!(
            title(escaped).as_deref(),
            Some("</title><img src=x onerror=alert(1) data-pwn>")
        );
        let link = r#"<a href=" JavaScript:alert(1)">x</a><x-pwn></x-pwn>"#;
        assert_eq!(smuggled(link, "pwn").len(), 2);
    }
}
