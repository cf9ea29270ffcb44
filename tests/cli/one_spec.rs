//! One column spec per view (issue 43): the DLQ, what needs a person and the operator
//! actions, rendered from one fixture through the terminal's grid, the screen's test
//! backend, Markdown, HTML and CSV, show the same cells in the same order. The rows are
//! the ones the screen read, so every renderer is given the same ids as shown.

use super::tui::Screen;
use ratatui::crossterm::event::KeyCode;
use unsctl::render::Output;
use unsctl::render::columns::{self, Spec};
use unsctl::render::table::{Text, render_all};
use unsctl::tui::app::ViewKind;

/// The start of each cell (what a cut column still shows), in order along `line`.
fn in_order(line: &str, cells: &[String]) -> Result<(), String> {
    let mut at = 0;
    for cell in cells {
        let start: String = cell.chars().take(10).collect::<String>().trim().to_string();
        if start.is_empty() {
            continue;
        }
        match line[at..].find(&start) {
            Some(found) => at += found + start.len(),
            None => return Err(format!("{start:?} not after column {at} of {line:?}")),
        }
    }
    Ok(())
}

/// The line of `rendered` that holds every one of `keys`.
fn line_with<'a>(rendered: &'a str, keys: &[String]) -> &'a str {
    rendered
        .lines()
        .find(|line| keys.iter().all(|key| line.contains(key.as_str())))
        .unwrap_or_else(|| panic!("no line with {keys:?} in:\n{rendered}"))
}

/// Markdown's and HTML's escapes undone, so cells read as they were given.
fn unescaped(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_some_and(|n| "\\*_[]~|".contains(*n)) {
            continue;
        }
        out.push(c);
    }
    out.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#96;", "`")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Renders `rows` through every renderer and the screen's own `drawn` text, and finds
/// each row's cells in the spec's order in each (the screen and the grid show the
/// columns that are not given lines of their own).
fn same_cells_everywhere<R>(
    specs: &[Spec<R>],
    rows: &[R],
    key: impl Fn(&R) -> Vec<String>,
    drawn: &str,
) {
    assert!(!rows.is_empty(), "the fixture gives rows");
    let cells: Vec<Vec<Text>> = rows.iter().map(|r| columns::cells(specs, r)).collect();
    let grid = render_all(&columns::columns(specs), cells.clone(), &Output::plain(400));
    let markdown = unescaped(&columns::markdown(specs, rows.iter()));
    // A row and the row under it that holds its own-line cells, on one line.
    let html = unescaped(
        &columns::html(specs, rows.iter())
            .into_string()
            .replace("</tr>", "</tr>\n")
            .replace("</tr>\n<tr class=\"under\">", "</tr><tr class=\"under\">"),
    );
    let csv = {
        let mut csv = columns::csv_line(specs, None);
        for row in rows {
            csv.push_str(&columns::csv_line(specs, Some(row)));
        }
        csv
    };
    let header: Vec<String> = specs.iter().map(|s| s.header.to_string()).collect();
    in_order(line_with(&grid, &header[..1]), &header).expect("grid header");
    let keys: Vec<String> = specs.iter().map(|s| s.key.to_string()).collect();
    assert_eq!(
        csv.lines().next(),
        Some(keys.join(",").as_str()),
        "csv header"
    );
    for (row, cells) in rows.iter().zip(&cells) {
        let key = key(row);
        let every: Vec<String> = cells.iter().map(|c| c.text.clone()).collect();
        let tabled: Vec<String> = specs
            .iter()
            .zip(&every)
            .filter(|(spec, _)| !spec.own_line)
            .map(|(_, text)| text.clone())
            .collect();
        in_order(line_with(&grid, &key), &tabled).expect("grid");
        in_order(line_with(drawn, &key), &tabled).expect("screen");
        in_order(line_with(&markdown, &key), &every).expect("markdown");
        // A document's own-line cells come under the row, the width of the table.
        let under: Vec<String> = specs
            .iter()
            .zip(&every)
            .filter(|(spec, text)| spec.own_line && !text.is_empty() && text.as_str() != "-")
            .map(|(_, text)| text.clone())
            .collect();
        let documented: Vec<String> = tabled.iter().chain(&under).cloned().collect();
        in_order(line_with(&html, &key), &documented).expect("html");
        let quoted: Vec<String> = every.iter().map(|t| columns::csv_cell(t)).collect();
        assert_eq!(line_with(&csv, &key).trim_end(), quoted.join(","), "csv");
    }
}

/// The every-case store after the report's incident: actions, duplicates, every branch.
fn store() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let db = crate::support::every_case_store(dir.path());
    // An operator action, from the command line, for the audit.
    let plan = crate::support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["dlq", "triage", "--branch", "resolve", "-o", "json"])
        .output()
        .expect("triage");
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).expect("json");
    let resolve = plan["entries"][0]["id"]
        .as_str()
        .expect("a RESOLVE entry")
        .to_string();
    let out = crate::support::unsctl()
        .arg("--db")
        .arg(&db)
        .args(["dlq", "resolve", &resolve, "--operator", "alice"])
        .args([
            "--reason",
            "accepted late, a | pipe and *stars*",
            "--confirm",
            "--yes",
        ])
        .output()
        .expect("resolve");
    crate::support::succeeded(&out);
    (dir, db)
}

#[test]
fn every_view_shows_the_same_cells_in_the_same_order_everywhere() {
    let (_dir, db) = store();
    let mut screen = Screen::open(&db, false, false);

    screen.view(ViewKind::Dlq, None);
    let drawn = screen.text(400, 40);
    let listed = &screen.app.dlq.rows;
    let rows: Vec<columns::DlqRow<'_>> = listed
        .iter()
        .map(|row| columns::DlqRow {
            verdict: &row.verdict,
            id: &row.short,
            message: &row.message,
        })
        .collect();
    same_cells_everywhere(&columns::dlq(), &rows, |r| vec![r.id.to_string()], &drawn);

    screen.press(KeyCode::Char(':'));
    screen.type_text("reconcile");
    screen.press(KeyCode::Enter);
    let drawn = screen.text(400, 40);
    let needs: Vec<columns::NeedRow> = screen
        .app
        .reconcile
        .needs()
        .into_iter()
        .map(|item| item.row(screen.app.short.get(&item.id).unwrap_or(&item.id)))
        .collect();
    same_cells_everywhere(
        columns::NEEDS,
        &needs,
        |r| vec![r.id.clone(), r.channel.to_string(), r.class.to_string()],
        &drawn,
    );

    screen.press(KeyCode::Char(':'));
    screen.type_text("audit");
    screen.press(KeyCode::Enter);
    let drawn = screen.text(400, 40);
    let actions: Vec<columns::ActionRow> = screen
        .app
        .audit
        .rows
        .iter()
        .map(|a| {
            a.row(
                screen
                    .app
                    .short
                    .get(&a.notification_id)
                    .unwrap_or(&a.notification_id),
            )
        })
        .collect();
    same_cells_everywhere(columns::ACTIONS, &actions, |r| vec![r.id.clone()], &drawn);
}
