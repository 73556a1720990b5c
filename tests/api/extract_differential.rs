//! Differential test: the streaming extractor (`crawler::extract`, its scanner) must find exactly
//! what the scraper reference finds (`extract_support::reference_extract`), on hand-written
//! edge cases and on generated tag soup, whole and streamed in small chunks.

use crate::extract_support::{compare, differential, Outcome};
use crawler::extract::ExtractOptions;
use proptest::prelude::*;
use url::Url;

pub(crate) fn page() -> Url {
    Url::parse("http://example.test/dir/page.html?q=1#top").unwrap_or_else(|e| panic!("{e}"))
}

/// Hand-written edge cases. Each must agree with the reference, for both option settings.
pub(crate) const CASES: &[&str] = &[
    // Plain tags, quoting, case.
    r#"<a href="a.html">a</a><a href='b.html'>b</a><a href=c.html>c</a>"#,
    r#"<A HREF="/upper">x</A><AREA HREF=area><IFRAME SRC="if"></IFRAME>"#,
    r#"<a hReF = " spaced.html " >x</a>"#,
    r#"<a href=unquoted?x=1&y=2>u</a><a href=x/>slash</a>"#,
    r#"<a href="first" href="second">dup attr</a>"#,
    r#"<a name=x>no href</a><a href>empty attr</a><a href="">empty</a>"#,
    // Tokenizer corners.
    "<a/href=slash-sep>x</a><a\thref\n=\n\"ws\">y</a><A\nHREF=nl>",
    r#"<a href='q1'y=z>x</a><a href="q2"title=t>y</a><a "href"=weird href=w>"#,
    "<a\0 href=nul-in-name>x</a><a href\0=nul-in-attr>y</a>",
    r#"<!-- x --!> <a href="after-bang-comment"> <!-- --!-> <a href="inside"> -->"#,
    r#"<?php <a href="in-pi"> ?><a href="after-pi">"#,
    r#"<!DOCTYPE html <a href="in-doctype">><a href="after-doctype">"#,
    r#"</a href="end-tag-attr"><a href=?a=1&amp;b=2&c>unquoted entities</a><a href="x&">"#,
    r#"<a href="&#X41;&#x;&#;&#65&#x41g&ampx&AMP;">refs</a>"#,
    r#"<scr<a href="broken-tag">ipt>x</script>"#,
    r#"<style>/* </style  > */<a href="after-style-end-with-space"></style>"#,
    r#"<script></script x><a href="after-script-end-attr">"#,
    r#"<textarea></textarea/><a href="after-textarea">"#,
    r#"<title><!--</title><a href="title-not-comment">--></title>"#,
    // Fragments: cut before resolving, when the links are wanted without them, except where
    // the parser would keep what comes before the `#` (a space or control at the cut).
    r##"<a href="#top">t</a><a href="#">e</a><a href="">n</a><a href="#top">t</a><a href="x.html#a">a</a><a href="x.html#b">b</a><a href="x.html">x</a>"##,
    "<a href=\"x.html #a\">sp</a><a href=\"x.html\t#a\">tab</a><a href=\"x.html \t#a\">sp-tab</a><a href=\" #a\">lead</a><a href=\"x.html&#1;#a\">c0</a><a href=\"x.html#a \">trail</a>",
    r##"<a href="?q=1#f">q</a><a href="//h.test#f">sr</a><a href="http://h.test:80/a/../b?x#y#z">abs</a><a href="mailto:a@b#c">m</a><a href="javascript:x#y">j</a><a href="../up#%zz">up</a>"##,
    r##"<base href="/b/page.html?bq#bf"><a href="#f">f</a><a href="">e</a><a href="c.html#g">c</a><a href="?n#m">q</a>"##,
    // Misnested and nested anchors.
    r#"<a href="mis"><div>block</a></div>"#,
    r#"<p><a href="p1">one</p><p>two</p><p>three"#,
    r#"<a href="outer"><a href="inner">x</a></a>"#,
    r#"<b><a href="bold">x</b>y</a>"#,
    r#"<table><tr><td><a href="cell">c</td></tr><a href="foster"></table>"#,
    r#"<table><a href="t1">x<tr><td>y</td></tr></table><a href="after">"#,
    r#"<select><option><a href="in-select">s</a></option></select>"#,
    // Base.
    r#"<head><base href="/base/"></head><a href="rel">x</a>"#,
    r#"<a href="before">x</a><base href="http://other.test/b/"><a href="after">"#,
    r#"<base href="/first/"><base href="/second/"><a href="x">"#,
    r#"<base target="_blank"><base href="../up/"><a href="x">"#,
    r#"<base href="http://[::1"><a href="x">"#,
    r#"<base href="javascript:void(0)"><a href="x"><a href="http://abs.test/">"#,
    r#"<body><p>text<base href="//cdn.test/"></p><a href=y>"#,
    // Entities.
    r#"<a href="?a=1&amp;b=2">x</a><a href="&#x2F;slash&#47;">y</a>"#,
    r#"<a href="?x=1&copy=2&copy;&notit;&notin;">legacy</a>"#,
    r#"<a href="&#0;&#x80;&#xD800;&#x110000;&#128512;">numeric</a>"#,
    r#"<a href="&amp&lt&gt&quot">no semicolons</a>"#,
    r#"<a href="/caf&eacute;?q=&eacute;">accent</a>"#,
    // Raw text and comments hide links.
    r#"<script>document.write('<a href="script">')</script><a href="real">"#,
    r#"<style>a[href="style"] {}</style><!-- <a href="comment"> --><a href="real">"#,
    r#"<textarea><a href="textarea"></textarea><title><a href="title"></title>"#,
    r#"<noscript><a href="noscript"></noscript><xmp><a href="xmp"></xmp>"#,
    r#"<noembed><a href="noembed"></noembed><noframes><a href="noframes"></noframes>"#,
    r#"<iframe src="frame.html"><a href="iframe-content"></iframe>"#,
    r#"<template><a href="template"></template><a href="after-template">"#,
    r#"<plaintext><a href="plaintext">"#,
    r#"<!--> <a href="after-empty-comment"> -->"#,
    r#"<!---> <a href="x"> -->"#,
    r#"<script><!--<script></script><a href="escaped"></script>--></script><a href="z">"#,
    // Foreign content.
    r#"<svg><a href="svg-a">x</a><style><a href="svg-style"></style></svg>"#,
    r#"<svg><![CDATA[<a href="cdata">]]></svg><![CDATA[<a href="html-cdata">]]>"#,
    r#"<math><mi><a href="math"></a></mi></math>"#,
    r#"<svg><foreignObject><a href="fo"><style><a href="fo-style"></style></foreignObject></svg>"#,
    // Breakouts close every foreign element (lol_html, the extractor before, closed one),
    // `<svg/>` opens nothing.
    r#"<svg><svg><p><style><a href="x"></style></svg></svg>"#,
    r#"<math><mrow><svg><g></p><style><a href="after-p-end"></style><a href="y">"#,
    r#"<svg/><script><a href="self-closed-svg"></script><a href="z">"#,
    r#"<svg><font color=red><style><a href="font-breakout"></style><font><a href="w">"#,
    // (scraper's tree sink does not mark `annotation-xml` as an integration point)
    r#"<math><annotation-xml encoding="text/html"><style><a href="ax"></style></annotation-xml></math>"#,
    r#"<math><annotation-xml encoding=x><style><a href="ax-foreign"></style></annotation-xml></math>"#,
    r#"<svg><desc><script><a href="desc-script"></script></desc><script><a href="svg-script"></script></svg>"#,
    r#"<svg><a href="svg-a"><![CDATA[ <a href="in-cdata"> ]]><a href="after-cdata"></svg>"#,
    // Script escapes: `<!--` … `-->` and the double-escaped `<script>` inside it.
    r#"<script><!--</script><a href="escaped-end">"#,
    r#"<script><!-- <script> </script> <a href="double"> --></script><a href="after">"#,
    r#"<script><!--<script>--><a href="de-dash"></script><a href="after2">"#,
    r#"<script><!-->x</script><a href="abrupt">"#,
    r#"<script><!-- <SCRIPT/></SCRIPT ><a href="x"></script>--><a href="y"></script><a href="z">"#,
    r#"<script><!-- --!> </script><a href="bang"></script>"#,
    // Comment ends.
    r#"<!----><a href="c1"><!-----><a href="c2"><!-- --!--><a href="c3"> --><a href="c4">"#,
    r#"<!--a-b--c--!x--><a href="c5"><!--<!-->--><a href="c6">"#,
    r#"<![CDATA[ <a href="html-cdata"> ]]><a href="after-html-cdata">"#,
    // Raw-text end tags need a terminator; RCDATA and raw text hold `<!--`.
    r#"<style></stylex><a href="in-style"></style/><a href="after-style">"#,
    r#"<textarea></textarea <a href="in-end-tag">><a href="after-ta">"#,
    r#"<xmp><a href="xmp"></XMP><noembed></noembed ><a href="after-noembed">"#,
    r#"<a href=1 title=">"><a href='2' title='>'><a title=x>y href=3>"#,
    r#"<a =href=eq href=after-eq><a href = 'sq' rel = "no follow">"#,
    // rel.
    r#"<a rel="NoFollow noopener" href="nf">x</a><a rel="nofollowx" href="ok">"#,
    r#"<a rel="	nofollow
" href="nf2"><area rel=nofollow href="nf3"><iframe rel=nofollow src=if>"#,
    // meta robots.
    r#"<meta name="robots" content="noindex, nofollow"><a href="x">"#,
    r#"<meta name="ROBOTS" content="NONE"><a href="x">"#,
    r#"<meta name="googlebot" content="nofollow"><meta name="robots" content="index,follow">"#,
    // Canonical links: the first with an href, rel tokens, against the base.
    r#"<link rel=stylesheet href=s.css><link rel="Canonical" href="/canon?a=1&amp;b"><link rel=canonical href=second>"#,
    r#"<link rel="alternate canonical" href="c"><base href="/b/">"#,
    r#"<link rel=canonical><link rel=canonicalx href=no><link rel=canonical href="http://[::1">"#,
    r#"<svg><link rel=canonical href=svg-link></svg><body><link rel=canonical href=in-body>"#,
    // Frames.
    r#"<frameset><frame src="f1.html"><frame src="f2.html"></frameset>"#,
    r#"<body><frame src="stray.html"><a href="x"></body>"#,
    r#"<frameset><frameset><frame src=a></frameset><frame src=b></frameset><frame src=after>"#,
    r#"<frameset></frameset><frame src="after-frameset">"#,
    r#"<html><head><title>t</title></head><FRAMESET cols="50%,50%"><FRAME SRC=l><FRAME SRC=r><NOFRAMES><a href=nf></NOFRAMES></FRAMESET>"#,
    // Whitespace inside URLs.
    "<a href=\"\n  /new\tline\r\n \">x</a><a href=' http://abs.test/p  '>",
    // Invalid and unusual URLs.
    r#"<a href="http://[::1">bad</a><a href="http://h:99999/">port</a><a href="%zz">pct</a>"#,
    r#"<a href="javascript:alert(1)">js</a><a href="mailto:a@b.test">m</a><a href="data:,x">"#,
    r##"<a href="//other.test/p">x</a><a href="../up">u</a><a href="#frag">f</a><a href="?q">q</a>"##,
    // Truncated documents.
    r#"<a href="ok">x</a><a href="cut"#,
    r#"<a href="ok">x</a><a href=cut"#,
    r#"<a href="ok">x</a><a hr"#,
    r#"<a href="ok">x</a><"#,
    r#"<a href="ok">x</a><!-- <a href="in-unclosed-comment">"#,
    r#"<script><a href="in-unclosed-script">"#,
    // Doctype and document structure.
    r#"<!DOCTYPE html><html><head><title>t</title></head><body><a href=x></body></html><a href=after-html>"#,
    r#"<html><head><a href="in-head"></head><body></body></html>"#,
    "",
];

/// Hand-written cases must agree outright: no known difference allowed.
fn run_case(html: &[u8], encoding: Option<&str>) {
    for (follow, drop_fragments) in [(false, false), (true, false), (false, true), (true, true)] {
        let opts = ExtractOptions {
            follow_nofollow: follow,
            drop_fragments,
            ..ExtractOptions::default()
        };
        match differential(html, &page(), encoding, &opts) {
            Ok(Outcome::Agreed(_)) => {}
            Ok(Outcome::KnownDifference {
                reason,
                fast,
                reference,
            }) => panic!(
                "known difference ({reason}) on a hand-written case {:?}:\n{}",
                String::from_utf8_lossy(html),
                compare(&fast, &reference).err().unwrap_or_default()
            ),
            Err(m) => panic!(
                "mismatch (follow_nofollow={follow}, drop_fragments={drop_fragments}, encoding={encoding:?}) on {:?}:\n{m}",
                String::from_utf8_lossy(html)
            ),
        }
    }
}

#[test]
fn extract_differential_hand_written_cases() {
    for case in CASES {
        run_case(case.as_bytes(), None);
    }
}

/// Documented differences (see `crawler::extract`): each must be recognised as such, not
/// agree silently (then the documentation would be stale) and not fail.
pub(crate) const KNOWN_DIFFERENCES: &[&str] = &[
    // Foreign content that the scanner's namespace stack gets wrong (it keeps no stack of
    // open HTML elements).
    r#"<a href="1">x<svg></a><script><a href="2"></script>"#,
    r#"<svg><title><a href="1"></title><plaintext><a href="2">"#,
    r#"<button><svg></button><script><a href="in-script"></script>"#,
    // Framesets: the tree builder drops content around them.
    r#"<frameset><a href="in-frameset"></frameset>"#,
    r#"<p>text<frameset><frame src="ignored-frameset"></frameset>"#,
    r#"<frameset></frameset><a href="after">"#,
];

#[test]
fn extract_differential_known_differences() {
    for case in KNOWN_DIFFERENCES {
        match differential(case.as_bytes(), &page(), None, &ExtractOptions::default()) {
            Ok(Outcome::KnownDifference { .. }) => {}
            Ok(Outcome::Agreed(_)) => panic!("no longer a difference, update the docs: {case}"),
            Err(m) => panic!("unexplained mismatch on {case}:\n{m}"),
        }
    }
}

#[test]
fn extract_differential_bytes_and_encodings() {
    let cases: &[(&[u8], Option<&str>)] = &[
        (
            b"<a href=\"/caf\xe9?q=\xe9\">latin1</a>",
            Some("windows-1252"),
        ),
        (b"<a href=\"/caf\xe9?q=\xe9\">invalid utf8</a>", None),
        (b"<a href=\"/\xff\xfe\x80\">junk</a><a href=ok>", None),
        (b"\xef\xbb\xbf<a href=\"/bom\">", Some("windows-1252")),
        (
            b"<a href=\"/\x82\xa0?q=\x82\xa0\">sjis</a>",
            Some("Shift_JIS"),
        ),
        (b"<a href=\"/x\0y\">nul</a><a href=\"\0/lead\">", None),
        (b"\xff\xfe<\0a\0 \0h\0r\0e\0f\0=\0x\0>\0", None),
        (b"<a href=x>", Some("utf-16le")),
        (b"<a href=x>", Some("no-such-charset")),
        (b"<a href=\"?\xa4\">euc</a>", Some("EUC-JP")),
        (b"<a", None),
        (b"\xef\xbb", None),
        (b"<\xa0a href=x>", None),
    ];
    for (html, encoding) in cases {
        run_case(html, *encoding);
    }
}

#[test]
fn extract_differential_huge_values() {
    let long = "x".repeat(200_000);
    let html = format!(
        "<a href=\"/{long}\">long</a><a href=/{long}>unquoted</a><a title=\"{long}\" href=t>"
    );
    run_case(html.as_bytes(), None);
    let many: String = (0..5000)
        .map(|i| format!("<a href=\"/p{i}\">{i}</a>"))
        .collect();
    run_case(many.as_bytes(), None);
}

// ---------------------------------------------------------------------------------------------
// Generated tag soup.

/// URL-ish attribute values, raw (entities not decoded yet), including invalid ones.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("rel/path.html".to_string()),
        Just("/abs".to_string()),
        Just("?a=1&amp;b=2".to_string()),
        Just("&#x2F;x&#47;y".to_string()),
        Just("?x&copy=3&copy;&notit;".to_string()),
        Just("  /sp ace  ".to_string()),
        Just("\n/nl\tx\r\n".to_string()),
        Just("http://[::1".to_string()),
        Just("javascript:void(0)".to_string()),
        Just("mailto:x@y.test".to_string()),
        Just("//other.test/p".to_string()),
        Just("../up".to_string()),
        Just("#frag".to_string()),
        Just(String::new()),
        Just("%zz".to_string()),
        Just("http://h:99999/".to_string()),
        Just("/é?é".to_string()),
        Just("&#0;&#x80;".to_string()),
        Just("a\"b".to_string()),
        Just("a'b".to_string()),
        Just("a>b".to_string()),
        "[a-z0-9/?&#=.;:%]{0,12}",
    ]
}

fn quoted(v: String) -> impl Strategy<Value = String> {
    let dq = v.replace('"', "&quot;");
    let sq = v.replace('\'', "&#39;");
    let uq: String = v
        .chars()
        .filter(|c| !c.is_ascii_whitespace() && !"\"'<>=`".contains(*c))
        .collect();
    prop_oneof![
        Just(format!("\"{dq}\"")),
        Just(format!("'{sq}'")),
        Just(if uq.is_empty() { "x".to_string() } else { uq }),
        Just(format!("\"{v}\"")), // possibly broken quoting: still tag soup both must agree on
    ]
}

fn attr_value() -> impl Strategy<Value = String> {
    value().prop_flat_map(quoted)
}

fn rel() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(" rel=nofollow".to_string()),
        Just(" REL=\"NoFollow noopener\"".to_string()),
        Just(" rel='noopener'".to_string()),
        Just(" rel=\"no&#102;ollow\"".to_string()),
    ]
}

/// Attribute lists of tags whose attributes the extractor does not read: it skips them to
/// the tag's end, which a quoted `>` does not end, and where a quote opens a value only
/// after the `=` that ends an attribute's name (not after whitespace that begins a name, nor
/// as a name's first byte, nor inside an unquoted value). Each `>` that may or may not be
/// quoted is followed by a link, so that a misread end of the tag finds a link too many or
/// one too few.
fn skipped_attributes() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just(" class=\"x><a href=/q1>y\""),
            Just(" title='><a href=/q2>'"),
            Just(" a=\"><a href=/q3>\"b=\"><a href=/q4>\""),
            Just(" =\"><a href=/q5>\""),
            Just("=\"><a href=/q6>\""),
            Just(" a =\"><a href=/q7>\""),
            Just(" a= '><a href=/q8>'"),
            Just(" a=b\"><a href=/q9>\""),
            Just("/=\"><a href=/q10>\""),
            Just("/a='><a href=/q11>'"),
            Just(" a\"=\"><a href=/q12>\""),
            Just("\"x\"=\"><a href=/q13>\""),
            Just(" a=>"),
            Just(" a='x'='><a href=/q14>'"),
            Just(" a==\"><a href=/q15>\""),
            Just(" \"=\"><a href=/q16>\""),
            Just(" a=\"x\"'=\"><a href=/q17>\""),
            Just(" data-x=\"\""),
            Just(" a"),
            Just(" b=c"),
            Just(" '"),
            Just("\t\nid=\"q\""),
            Just(" x=\"a b c d e f g h i j k l m n o p q r s t u v w x y z\""),
            Just(" download"),
            Just(" HREF=\"/first\""),
            Just(" href"),
            Just("/href='/slash'"),
            Just(" rel=nofollow"),
            Just(" class=\"x\"href=\"/glued\""),
            Just(" a-very-long-attribute-name-longer-than-a-window=\"v\""),
        ],
        0..4,
    )
    .prop_map(|attributes| attributes.concat())
}

/// One piece of a document.
fn piece() -> impl Strategy<Value = String> {
    let tag = prop_oneof![Just("a"), Just("A"), Just("area"), Just("AREA")];
    let src_tag = prop_oneof![Just("iframe"), Just("frame"), Just("IFRAME")];
    prop_oneof![
        24 => (tag, rel(), attr_value(), any::<bool>()).prop_map(|(t, r, v, close)| {
            format!("<{t}{r} href={v}>{}", if close { format!("x</{t}>") } else { "x".into() })
        }),
        6 => (src_tag, attr_value()).prop_map(|(t, v)| format!("<{t} src={v}>")),
        // Link tags among attributes of every form, before and after the link's.
        4 => (
            prop_oneof![Just("a"), Just("A"), Just("area")],
            skipped_attributes(),
            attr_value(),
            skipped_attributes(),
        )
            .prop_map(|(t, before, v, after)| format!("<{t}{before} href={v}{after}>x")),
        2 => attr_value().prop_map(|v| format!("<base href={v}>")),
        1 => (prop_oneof![Just("canonical"), Just("CANONICAL alternate"), Just("canonicalx")], attr_value())
            .prop_map(|(r, v)| format!("<link rel=\"{r}\" href={v}>")),
        1 => Just("<base target=_top>".to_string()),
        1 => prop_oneof![
            Just("<meta name=robots content=\"noindex,nofollow\">".to_string()),
            Just("<meta name=ROBOTS content=NONE>".to_string()),
            Just("<meta name=robots content=index>".to_string()),
        ],
        6 => prop_oneof![
            Just("<div>"), Just("</div>"), Just("<p>"), Just("</p>"), Just("</a>"),
            Just("<table>"), Just("<tr>"), Just("<td>"), Just("</td>"), Just("</table>"),
            Just("<select>"), Just("</select>"), Just("<option>"), Just("<b>"), Just("</b>"),
            Just("<i>"), Just("</i>"), Just("<ul><li>"), Just("<li>"), Just("<form>"),
            Just("<mi>"), Just("<foreignObject>"), Just("<template>"), Just("<svg>"), Just("</template>"), Just("<br/>"),
            Just("<html>"), Just("<head>"), Just("</head>"), Just("<body>"), Just("</body>"),
            Just("</html>"), Just("<!DOCTYPE html>"), Just("<h1>"), Just("</h1>"),
            Just("<button>"), Just("</button>"), Just("<nobr>"), Just("<font>"),
            Just("<frameset>"), Just("</frameset>"),
        ]
        .prop_map(str::to_string),
        3 => prop_oneof![
            Just("script"), Just("style"), Just("textarea"), Just("title"), Just("noscript"),
            Just("xmp"), Just("noembed"), Just("noframes"), Just("SCRIPT"),
        ]
        .prop_flat_map(|t| (Just(t), attr_value(), any::<bool>()))
        .prop_map(|(t, v, close)| {
            format!("<{t}><a href={v}>{}", if close { format!("</{t}>") } else { String::new() })
        }),
        4 => (
            prop_oneof![
                Just("div"), Just("span"), Just("SPAN"), Just("/div"), Just("/span"), Just("p"),
                Just("script"), Just("title"), Just("/a"), Just("section"), Just("d\"iv"),
                Just("d=iv"), Just("details"),
            ],
            skipped_attributes(),
        )
            .prop_map(|(t, attributes)| format!("<{t}{attributes}>")),
        2 => attr_value().prop_map(|v| format!("<!-- <a href={v}> -->")),
        1 => attr_value().prop_map(|v| format!("<![CDATA[<a href={v}>]]>")),
        1 => Just("<plaintext>".to_string()),
        4 => prop_oneof![
            Just("text"), Just(" "), Just("&amp;"), Just("<"), Just(">"), Just("&"),
            Just("<!--"), Just("-->"), Just("</"), Just("<a"), Just("\""), Just("'"),
            Just("é"), Just("\0"),
        ]
        .prop_map(str::to_string),
    ]
}

/// Anything but the opening of foreign content.
fn html_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        20 => piece(),
        1 => prop_oneof![Just("<foreignObject>"), Just("<desc>"), Just("<mi>"), Just("<mtext>"),
            Just("</foreignObject>"), Just("<font color=red>"), Just("<g>"), Just("<p>"),
            Just("<span>"), Just("</math>"), Just("</svg>")]
        .prop_map(str::to_string),
    ]
}

/// An `<svg>` or `<math>` block, always closed. (Tag soup outside these blocks opens foreign
/// content too, unbalanced: `piece` has a bare `<svg>`.)
fn foreign_block() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("svg"), Just("math"), Just("SVG")],
        prop::collection::vec(html_piece(), 0..6),
    )
        .prop_map(|(root, inner)| format!("<{root}>{}</{root}>", inner.concat()))
}

/// A generated document: tag soup or tidy markup.
pub(crate) fn document() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![2 => soup_document(), 1 => tidy_document()]
}

/// Mostly well-formed markup: many links, so that order and counts are compared on long
/// lists, not only on the few links that survive tag soup.
fn tidy_document() -> impl Strategy<Value = Vec<u8>> {
    let link = (
        prop_oneof![Just("a"), Just("area"), Just("A")],
        rel(),
        attr_value(),
    )
        .prop_map(|(t, r, v)| format!("<{t}{r} href={v}>text</{t}>"));
    let piece = prop_oneof![
        10 => link,
        2 => attr_value().prop_map(|v| format!("<iframe src={v}></iframe>")),
        1 => attr_value().prop_map(|v| format!("<base href={v}>")),
        3 => prop_oneof![
            Just("<div>"), Just("</div>"), Just("<p>"), Just("</p>"), Just("<ul><li>"),
            Just("</li></ul>"), Just("<table><tr><td>"), Just("</td></tr></table>"),
            Just("<span>words &amp; more</span>"), Just("<br>"), Just("<img src=i.png>"),
            Just("<div class=\"nav\" data-x='>' id=\"a>b\">"),
            Just("<span class=\"item-name\"><code>x</code></span>"),
        ]
        .prop_map(str::to_string),
        2 => prop_oneof![Just("script"), Just("style"), Just("textarea"), Just("noscript")]
            .prop_flat_map(|t| (Just(t), attr_value()))
            .prop_map(|(t, v)| format!("<{t}>x <a href={v}> y</{t}>")),
        1 => attr_value().prop_map(|v| format!("<!-- <a href={v}> -->")),
    ];
    prop::collection::vec(piece, 0..80).prop_map(|pieces| {
        format!(
            "<!DOCTYPE html><html><head><title>t</title></head><body>{}</body></html>",
            pieces.concat()
        )
        .into_bytes()
    })
}

/// Tag soup: pieces, then maybe cut short and maybe with some bytes overwritten.
fn soup_document() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(prop_oneof![12 => piece(), 1 => foreign_block()], 0..40),
        any::<prop::sample::Index>(),
        0u8..4,
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    )
        .prop_map(|(pieces, cut, cut_mode, mutations)| {
            let mut bytes = pieces.concat().into_bytes();
            if cut_mode == 0 && !bytes.is_empty() {
                bytes.truncate(cut.index(bytes.len() + 1));
            }
            if !bytes.is_empty() {
                for (at, byte) in mutations {
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                }
            }
            bytes
        })
}

fn encoding_label() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        8 => Just(None),
        1 => Just(Some("windows-1252")),
        1 => Just(Some("Shift_JIS")),
        1 => Just(Some("utf-16le")),
    ]
}

/// Hundreds of documents, a few seconds in a debug build. The seed is fixed so that CI is
/// repeatable; set `PROPTEST_RNG_SEED` to explore other documents.
fn config() -> ProptestConfig {
    let default = ProptestConfig::default();
    let rng_seed = if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
        default.rng_seed
    } else {
        proptest::test_runner::RngSeed::Fixed(0x5eed_0003)
    };
    ProptestConfig {
        cases: 600,
        max_shrink_iters: 2000,
        failure_persistence: None,
        rng_seed,
        ..default
    }
}

#[test]
fn extract_differential_generated() {
    use proptest::test_runner::{TestCaseError, TestRunner};
    use std::cell::Cell;

    let mut runner = TestRunner::new(config());
    let (agreed, known, links) = (Cell::new(0usize), Cell::new(0usize), Cell::new(0usize));
    let framesets = Cell::new(0usize);
    let result = runner.run(
        &(document(), encoding_label(), any::<bool>(), any::<bool>()),
        |(html, encoding, follow, drop_fragments)| {
            let opts = ExtractOptions {
                follow_nofollow: follow,
                drop_fragments,
                ..ExtractOptions::default()
            };
            if html.windows(10).any(|w| w == b"<frameset>") {
                framesets.set(framesets.get() + 1);
            }
            match differential(&html, &page(), encoding, &opts) {
                Ok(Outcome::Agreed(found)) => {
                    agreed.set(agreed.get() + 1);
                    links.set(
                        links.get() + found.links.len() + found.nofollow_skipped + found.invalid,
                    );
                }
                Ok(Outcome::KnownDifference { .. }) => known.set(known.get() + 1),
                Err(m) => {
                    return Err(TestCaseError::fail(format!(
                        "mismatch on {:?} (encoding {encoding:?}, follow {follow}, drop_fragments {drop_fragments}):\n{m}",
                        String::from_utf8_lossy(&html)
                    )));
                }
            }
            Ok(())
        },
    );
    if let Err(err) = result {
        panic!("{err}");
    }
    let (agreed, known) = (agreed.get(), known.get());
    eprintln!(
        "generated documents: {agreed} agreed ({} links), {known} known differences; {} with <frameset>",
        links.get(),
        framesets.get()
    );
    // Known differences need nested foreign content; the generator makes that rare, so a
    // flood of them would mean the exemption is hiding something.
    assert!(
        known * 10 <= agreed + known,
        "{known} known differences out of {}",
        agreed + known
    );
}
