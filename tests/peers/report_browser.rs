//! The HTML report in a real browser: the distribution's headless Chromium renders it to
//! a screenshot, to an A4 PDF and to its DOM, with every request sent to a proxy of
//! ours that must hear nothing. The chart's bars in the DOM are the pulse's series.

use crate::support;

use serde_json::Value;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

fn chromium() -> String {
    for name in ["chromium", "chromium-browser"] {
        if support::launch("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return name.to_string();
        }
    }
    panic!("no chromium: the test command installs the distribution's (./test)");
}

/// A proxy that writes down every request it is sent, and answers none.
fn listening_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = heard.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buffer = [0u8; 512];
            let n = stream.read(&mut buffer).unwrap_or(0);
            log.lock().expect("log").push(
                String::from_utf8_lossy(&buffer[..n])
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string(),
            );
        }
    });
    (port, heard)
}

fn browse(html: &Path, dir: &Path, proxy: u16, what: &[&str]) -> std::process::Output {
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--hide-scrollbars",
            &format!("--proxy-server=http://127.0.0.1:{proxy}"),
            "--proxy-bypass-list=<-loopback>",
            &format!("--user-data-dir={}", dir.join("profile").display()),
        ])
        .args(what)
        .arg(format!("file://{}", html.display()))
        .env("HOME", dir)
        .output()
        .expect("chromium")
}

/// A store of every runbook case, the report's window around it.
fn store(dir: &Path) -> (PathBuf, String, String) {
    let db = dir.join("uns.db");
    let sql = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/every-case.sql"),
    )
    .expect("fixture");
    let conn = rusqlite::Connection::open(&db).expect("db");
    conn.execute_batch(&sql).expect("load");
    let first: f64 = conn
        .query_row("SELECT min(at) FROM uns_events", [], |r| r.get(0))
        .expect("first");
    let since = (first / 3600.0).floor() * 3600.0;
    let time = unsctl::render::time::rfc3339;
    (db, time(since), time(since + 3.0 * 3600.0))
}

#[test]
fn the_html_report_renders_in_chromium_to_a4_with_its_bars_and_no_request() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, since, until) = store(dir.path());
    let report = |format: &str| -> Vec<u8> {
        let out = support::unsctl()
            .arg("--db")
            .arg(&db)
            .args(["-o", format, "report", "--since", &since, "--until", &until])
            .output()
            .expect("report");
        support::succeeded(&out);
        out.stdout
    };
    let html = dir.path().join("report.html");
    let page = report("html");
    // No link, font, image or script from anywhere: the one URL is the SVG namespace.
    let text = String::from_utf8_lossy(&page);
    assert_eq!(text.matches("http").count(), 1, "{text}");
    assert!(text.contains("xmlns=\"http://www.w3.org/2000/svg\""));
    std::fs::write(&html, &page).expect("html");
    let data: Value = serde_json::from_slice(&report("json")).expect("json");
    let (proxy, heard) = listening_proxy();

    // A screenshot, as an A4 page is wide at 150 dpi.
    let png = dir.path().join("report.png");
    let out = browse(
        &html,
        dir.path(),
        proxy,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1240,1754",
        ],
    );
    let shot = std::fs::read(&png)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(
        shot.starts_with(b"\x89PNG") && shot.len() > 20_000,
        "{} bytes",
        shot.len()
    );

    // A PDF on A4: its pages, each 595 x 842 points.
    let pdf = dir.path().join("report.pdf");
    let out = browse(
        &html,
        dir.path(),
        proxy,
        &[
            &format!("--print-to-pdf={}", pdf.display()),
            "--no-pdf-header-footer",
        ],
    );
    let bytes = std::fs::read(&pdf)
        .unwrap_or_else(|_| panic!("no PDF: {}", String::from_utf8_lossy(&out.stderr)));
    let text = String::from_utf8_lossy(&bytes);
    let pages = pdf_pages(&bytes);
    assert!((2..=4).contains(&pages), "{pages} pages");
    let boxes: Vec<&str> = text
        .match_indices("/MediaBox [0 0 ")
        .map(|(at, _)| &text[at..at + 40])
        .collect();
    assert_eq!(boxes.len(), pages, "{boxes:?}");
    for media in boxes {
        assert!(
            media.contains("594.9") || media.contains("595"),
            "not A4: {media}"
        );
        assert!(
            media.contains("841.9") || media.contains("842"),
            "not A4: {media}"
        );
    }

    // The DOM as rendered: a bar for every step with a count, as tall as its share of
    // the series' largest, for each series the chart draws.
    let out = browse(&html, dir.path(), proxy, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(dom.contains("<svg"), "{dom}");
    assert!(!dom.contains("<script"), "no script");
    for series in ["LEASE_LOST", "UNKNOWN", "DEAD_LETTERED", "DELIVERED"] {
        let counts: Vec<u64> = data["pulse"]["series"][series]
            .as_array()
            .expect("series")
            .iter()
            .map(|n| n.as_u64().unwrap_or(0))
            .collect();
        let most = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
        let bars: Vec<(usize, u64, f64)> = dom
            .match_indices(&format!("<rect class=\"bar bar-{series}\""))
            .map(|(at, _)| {
                let tag = &dom[at..at + dom[at..].find('>').expect("tag end")];
                let attr = |name: &str| -> String {
                    let start = tag.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
                    tag[start..start + tag[start..].find('"').expect("quote")].to_string()
                };
                (
                    attr("data-step").parse().expect("step"),
                    attr("data-count").parse().expect("count"),
                    attr("height").parse().expect("height"),
                )
            })
            .collect();
        let expected: Vec<(usize, u64)> = counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k, *n))
            .collect();
        assert_eq!(
            bars.iter().map(|(k, n, _)| (*k, *n)).collect::<Vec<_>>(),
            expected,
            "{series}"
        );
        for (_, count, height) in bars {
            let wanted = (count as f64 / most * 30.0).max(1.0);
            assert!(
                (height - wanted).abs() < 0.02,
                "{series}: {height} for {count}"
            );
        }
    }
    // The browser calls home on its own (its clock, its updater): what a blank page
    // hears is the browser's. A page with an outside image is heard, so the proxy
    // would catch the report's; the report's own must add nothing to the blank page's.
    let own = hosts(&heard);
    heard.lock().expect("heard").clear();
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><title>blank</title><p>blank</p>").expect("blank");
    browse(&blank, dir.path(), proxy, &["--dump-dom"]);
    let browsers = hosts(&heard);
    heard.lock().expect("heard").clear();
    let outside = dir.path().join("outside.html");
    std::fs::write(
        &outside,
        "<!DOCTYPE html><title>outside</title><img src=\"http://outside.example.test/x.png\">",
    )
    .expect("outside");
    browse(&outside, dir.path(), proxy, &["--dump-dom"]);
    assert!(
        hosts(&heard).contains("outside.example.test"),
        "the proxy hears a page's requests: {:?}",
        heard.lock().expect("heard")
    );
    let extra: Vec<&String> = own
        .iter()
        .filter(|host| !browsers.contains(*host) && !is_browser_service(host))
        .collect();
    assert!(extra.is_empty(), "the report's page asked for {extra:?}");
}

/// The hosts the requests heard were for.
fn hosts(heard: &Arc<Mutex<Vec<String>>>) -> std::collections::BTreeSet<String> {
    heard
        .lock()
        .expect("heard")
        .iter()
        .filter_map(|line| {
            let target = line.split_whitespace().nth(1)?;
            let target = target.strip_prefix("http://").unwrap_or(target);
            let host = target.split(['/', ':']).next()?;
            Some(host.to_string())
        })
        .collect()
}

/// Hosts the browser calls itself, on its own schedule (a run may or may not reach one).
fn is_browser_service(host: &str) -> bool {
    host.ends_with(".google.com")
        || host.ends_with(".googleapis.com")
        || host.ends_with(".gvt1.com")
}

/// Measures the page as laid out and writes what it found into the page, for
/// `--dump-dom` to read back: the report itself has no script, so a copy of it gets this.
const MEASURE: &str = r#"<script>
(() => {
  const time = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
  const lines = (node) => {
    const range = document.createRange();
    range.selectNodeContents(node);
    const tops = new Set();
    for (const r of range.getClientRects()) {
      if (r.width > 0 && r.height > 0) tops.add(Math.round(r.top));
    }
    return tops.size;
  };
  const sectionOf = el => {
    let h = el.closest('table') || el.parentElement;
    while (h && h.tagName !== 'H2') h = h.previousElementSibling || h.parentElement;
    return h ? h.textContent : '';
  };
  const cells = [];
  for (const el of document.querySelectorAll('code, .t, td')) {
    const text = el.textContent.trim();
    const isId = el.tagName === 'CODE' || el.classList.contains('t') || time.test(text);
    if (!isId || text === '') continue;
    const box = el.closest('td') || el;
    cells.push({text, section: sectionOf(el), lines: lines(el),
                 overflows: box.scrollWidth > box.clientWidth + 1});
  }
  const content = document.body.clientWidth;
  const tables = [...document.querySelectorAll('table')].map(t => {
    return {section: sectionOf(t), share: t.getBoundingClientRect().width / content,
            rows: t.querySelectorAll('tr').length - 1};
  });
  const marks = [...document.querySelectorAll('line.mark')].map(l => l.getAttribute('x1'));
  const labels = [...document.querySelectorAll('text.mark-label')].map(t => {
    const b = t.getBoundingClientRect();
    return [t.getAttribute('x'), t.textContent, b.left, b.top, b.right, b.bottom];
  });
  const listed = [...document.querySelectorAll('ol.marks li')].map(li => li.textContent);
  const pre = document.createElement('pre');
  pre.id = 'measured';
  pre.textContent = JSON.stringify({cells, tables, marks, labels, listed});
  document.body.appendChild(pre);
})();
</script>"#;

#[test]
fn the_html_report_keeps_ids_and_times_whole_tables_wide_and_markers_labelled() {
    let incident = support::incident::incident();
    let report = |format: &str| -> Vec<u8> {
        let out = support::unsctl()
            .arg("--db")
            .arg(&incident.db)
            .args(["-o", format, "report", "--since", &incident.since])
            .args(["--until", &incident.until])
            .output()
            .expect("report");
        support::succeeded(&out);
        out.stdout
    };
    let data: Value = serde_json::from_slice(&report("json")).expect("json");
    // bob's forced replay: its guardrails are a footnote naming the entry.
    assert!(
        data["carry_outs"]
            .as_array()
            .expect("carry-outs")
            .iter()
            .any(|c| c["overridden"].as_array().is_some_and(|o| !o.is_empty())),
        "{data:#}"
    );
    holds_to_the_page(&report("html"), &data, 1..=4);
}

/// The report's page as a person sees it: at 1200 px in Chromium every id and time is
/// one line inside its cell, every table spans at least 90% of the content's width, the
/// operator actions are one row per carry-out, each marker of the chart is numbered at
/// its line, with no number over another, and listed with what it marks; printed on A4
/// it takes `pages`.
pub fn holds_to_the_page(html: &[u8], data: &Value, pages: std::ops::RangeInclusive<usize>) {
    let dir = tempfile::tempdir().expect("dir");
    let page = String::from_utf8(html.to_vec()).expect("utf-8");
    let measured = dir.path().join("measured.html");
    std::fs::write(
        &measured,
        page.replace("</body>", &format!("{MEASURE}</body>")),
    )
    .expect("html");
    let (proxy, heard) = listening_proxy();
    let out = browse(
        &measured,
        dir.path(),
        proxy,
        &["--window-size=1200,1600", "--dump-dom"],
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = dom
        .find("<pre id=\"measured\">")
        .expect("the page measured itself")
        + 19;
    let end = start + dom[start..].find("</pre>").expect("end");
    let text = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    let m: Value = serde_json::from_str(&text).expect("measures");

    // Every id and every time on one line, inside its cell.
    let cells = m["cells"].as_array().expect("cells");
    assert!(cells.len() >= 20, "ids and times found: {cells:?}");
    for cell in cells {
        assert_eq!(cell["lines"], 1, "broken across lines: {cell}");
        assert_eq!(cell["overflows"], false, "wider than its cell: {cell}");
    }
    // A guardrail's full text, a footnote, keeps each id it names whole.
    let named: Vec<&str> = data["carry_outs"]
        .as_array()
        .expect("carry-outs")
        .iter()
        .flat_map(|c| {
            let said = c["overridden"].to_string();
            c["ids"]
                .as_array()
                .expect("ids")
                .iter()
                .filter_map(Value::as_str)
                .filter(move |id| said.contains(id))
        })
        .collect();
    for id in named {
        assert!(
            cells
                .iter()
                .any(|c| c["text"] == id && c["section"] == "Operator actions"),
            "{id} in a guardrail's footnote, not kept whole: {cells:?}"
        );
    }
    // Every table at the page's width.
    let tables = m["tables"].as_array().expect("tables");
    assert!(tables.len() >= 3, "{tables:?}");
    for table in tables {
        assert!(table["share"].as_f64().expect("share") >= 0.9, "{table}");
    }
    // The action table: one row per carry-out.
    let carry_outs = data["carry_outs"].as_array().expect("carry-outs").len();
    assert!(carry_outs >= 2, "{data:#}");
    let actions = tables
        .iter()
        .find(|t| t["section"] == "Operator actions")
        .expect("the action table");
    assert_eq!(actions["rows"], carry_outs, "{actions}");
    // Each marker numbered at its line, no number over another, each listed with what
    // it marks.
    let marks = m["marks"].as_array().expect("marks");
    let labels = m["labels"].as_array().expect("labels");
    let listed = m["listed"].as_array().expect("listed");
    assert!(marks.len() >= 4, "{m}");
    assert_eq!(labels.len(), marks.len());
    assert_eq!(listed.len(), marks.len());
    let corner = |label: &Value, k: usize| label[k].as_f64().expect("a box");
    for (n, (x, label)) in marks.iter().zip(labels).enumerate() {
        assert_eq!(&label[0], x, "marker {} at its line", n + 1);
        assert_eq!(label[1], (n + 1).to_string());
        let item = listed[n].as_str().expect("item");
        assert!(
            item.len() > 22,
            "marker {} says what it marks: {item}",
            n + 1
        );
        for other in &labels[..n] {
            let apart = corner(label, 4) <= corner(other, 2)
                || corner(other, 4) <= corner(label, 2)
                || corner(label, 5) <= corner(other, 3)
                || corner(other, 5) <= corner(label, 3);
            assert!(apart, "marker {} covers another: {label} {other}", n + 1);
        }
    }
    for carry_out in ["replayed", "resolved"] {
        assert!(
            listed
                .iter()
                .any(|l| l.as_str().unwrap_or("").contains(carry_out)),
            "the chart marks the {carry_out} carry-outs: {listed:?}"
        );
    }

    // Printed on A4.
    let html_file = dir.path().join("report.html");
    std::fs::write(&html_file, html).expect("html");
    let pdf = dir.path().join("report.pdf");
    let out = browse(
        &html_file,
        dir.path(),
        proxy,
        &[
            &format!("--print-to-pdf={}", pdf.display()),
            "--no-pdf-header-footer",
        ],
    );
    let bytes = std::fs::read(&pdf)
        .unwrap_or_else(|_| panic!("no PDF: {}", String::from_utf8_lossy(&out.stderr)));
    let printed = pdf_pages(&bytes);
    assert!(pages.contains(&printed), "{printed} pages");
    let asked: Vec<String> = hosts(&heard)
        .into_iter()
        .filter(|host| !is_browser_service(host))
        .collect();
    assert!(asked.is_empty(), "the page asked for {asked:?}");
}

/// How many pages a PDF Chromium printed has.
fn pdf_pages(bytes: &[u8]) -> usize {
    let text = String::from_utf8_lossy(bytes);
    [
        "/Type /Page\n",
        "/Type /Page\r",
        "/Type /Page/",
        "/Type /Page>",
        "/Type /Page ",
    ]
    .iter()
    .map(|needle| text.matches(needle).count())
    .sum()
}
