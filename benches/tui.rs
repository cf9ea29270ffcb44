//! The live screen on a DLQ of 100,000 entries over `--db`: the first screen, and a key
//! that scrolls or filters, each against its target (1 s; 100 ms), and the memory held
//! while paging through it (it pages; it never loads the DLQ). The same jobs the worker
//! runs, drawn by ratatui's test backend at 80×24; then the real binary in tmux.
//!
//! Run: cargo bench --bench tui [-- ENTRIES]

#[path = "support.rs"]
mod support;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use unsctl::store::place::{Backend, Resolution, Source as Named};
use unsctl::tui::app::{App, Started, ViewKind};
use unsctl::tui::jobs::{self, Job, Source};

struct Screen {
    app: App,
    source: Source,
    reader: jobs::Reader,
    terminal: Terminal<TestBackend>,
}

impl Screen {
    fn run(&mut self, jobs: Vec<(u64, Job)>) {
        for (seq, job) in jobs {
            // The counts run beside the screen, not before it: measured on their own.
            if matches!(job, Job::Counts { .. }) {
                continue;
            }
            let reply = jobs::run(&self.source, &mut self.reader, job);
            self.app.absorb(seq, reply, Instant::now());
        }
        let app = &self.app;
        self.terminal
            .draw(|frame| unsctl::tui::draw::draw(frame, app, Instant::now()))
            .expect("draw");
    }

    fn press(&mut self, code: KeyCode) -> Duration {
        let start = Instant::now();
        let jobs = self
            .app
            .key(KeyEvent::new(code, KeyModifiers::NONE), Instant::now());
        self.run(jobs);
        start.elapsed()
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> anyhow::Result<()> {
    let entries = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("tui.db");
    support::generate(&db, entries)?;
    println!("tui benchmark: {entries} DLQ entries over --db");
    let resolution = Resolution {
        backend: Backend::Sqlite(db.clone()),
        context: None,
        source: Named::Flag,
        readonly: false,
    };
    let started = Instant::now();
    let (place, readonly, open) = unsctl::session::screen::opener(resolution, true)?;
    let mut screen = Screen {
        app: App::new(Started {
            place,
            operator: "bench".into(),
            readonly,
            color: true,
            refresh: Duration::from_secs(3600),
            pulse_span: 3600.0,
        }),
        source: Source {
            open,
            contexts: Vec::new(),
            operator: "bench".into(),
            sources: Default::default(),
            since: None,
            clock: Arc::new(unsctl::clock::SystemClock),
            wait: Duration::ZERO,
            reports: std::env::temp_dir(),
        },
        reader: jobs::Reader::default(),
        terminal: Terminal::new(TestBackend::new(80, 24))?,
    };
    let jobs = screen.app.open(ViewKind::Dlq, None, Instant::now());
    screen.run(jobs);
    let first = started.elapsed();
    anyhow::ensure!(
        !screen.app.dlq.rows.is_empty(),
        "no rows on the first screen"
    );
    let rss_first = rss_kib();
    let verdict = |took: Duration, target: Duration| {
        format!(
            "{:.1} ms, {:.2}× the {} ms target: {}",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() / target.as_secs_f64(),
            target.as_millis(),
            if took <= target { "met" } else { "MISSED" }
        )
    };
    println!(
        "first screen (open, first page, triaged, drawn): {}",
        verdict(first, Duration::from_secs(1))
    );

    // Scrolling: within a page, and across the page boundary (a page read).
    let mut within = Vec::new();
    let mut across = Vec::new();
    for _ in 0..20 {
        let at_end = screen.app.dlq.selected + 1 >= screen.app.dlq.rows.len();
        let took = screen.press(KeyCode::PageDown);
        if at_end {
            across.push(took)
        } else {
            within.push(took)
        }
    }
    for _ in 0..(jobs::PAGE * 3) {
        let at_end = screen.app.dlq.selected + 1 >= screen.app.dlq.rows.len();
        let took = screen.press(KeyCode::Down);
        if at_end {
            across.push(took)
        } else {
            within.push(took)
        }
    }
    let worst = |times: &[Duration]| times.iter().max().copied().unwrap_or_default();
    println!(
        "scroll key within a page, worst of {}: {}",
        within.len(),
        verdict(worst(&within), Duration::from_millis(100))
    );
    println!(
        "scroll key onto the next page (a page read), worst of {}: {}",
        across.len(),
        verdict(worst(&across), Duration::from_millis(100))
    );

    // Filtering: each typed key, then Enter (the filtered first page read).
    screen.press(KeyCode::Char('/'));
    let mut typed = Vec::new();
    for c in "branch:replay error:500".chars() {
        typed.push(screen.press(KeyCode::Char(c)));
    }
    let applied = screen.press(KeyCode::Enter);
    anyhow::ensure!(!screen.app.dlq.rows.is_empty(), "the filter kept nothing");
    println!(
        "filter keystroke, worst of {}: {}",
        typed.len(),
        verdict(worst(&typed), Duration::from_millis(100))
    );
    println!(
        "filter applied (first filtered page read and drawn): {}",
        verdict(applied, Duration::from_millis(100))
    );

    // Paging on through 100 pages holds one page.
    screen.press(KeyCode::Esc);
    screen.press(KeyCode::Char('/'));
    screen.press(KeyCode::Enter);
    let mut page = |pages: usize| {
        for _ in 0..pages {
            screen.press(KeyCode::Char('G'));
            screen.press(KeyCode::Down);
        }
        rss_kib()
    };
    let after_100 = page(100);
    let after_500 = page(400);
    println!(
        "memory: {} MiB after the first screen, {} MiB after 100 pages, {} MiB after 500 pages ({:.2}× of 100's)",
        rss_first / 1024,
        after_100 / 1024,
        after_500 / 1024,
        after_500 as f64 / after_100.max(1) as f64
    );

    // The counts by branch, which the screen reads beside the first page.
    let counted = Instant::now();
    let reply = jobs::run(
        &screen.source,
        &mut screen.reader,
        Job::Counts {
            filter: Default::default(),
        },
    );
    anyhow::ensure!(matches!(reply, jobs::Reply::Counts { .. }), "counts failed");
    println!(
        "counts by branch over the whole DLQ (in the background): {:.2} s",
        counted.elapsed().as_secs_f64()
    );

    // The real binary in a real terminal: start to the first row on screen.
    if Command::new("tmux").arg("-V").output().is_ok() {
        let socket = format!("unsctl-bench-{}", std::process::id());
        let started = Instant::now();
        Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "b",
                "-x",
                "80",
                "-y",
                "24",
            ])
            .arg(format!(
                "{} --db {} tui --readonly",
                env!("CARGO_BIN_EXE_unsctl"),
                db.display()
            ))
            .status()?;
        let mut seen = None;
        while started.elapsed() < Duration::from_secs(10) {
            let out = Command::new("tmux")
                .args(["-L", &socket, "capture-pane", "-p", "-t", "b"])
                .output()?;
            if String::from_utf8_lossy(&out.stdout).contains("next: unsctl") {
                seen = Some(started.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = Command::new("tmux")
            .args(["-L", &socket, "kill-server"])
            .status();
        match seen {
            Some(took) => println!(
                "real binary in tmux, start to the first rows drawn: {}",
                verdict(took, Duration::from_secs(1))
            ),
            None => println!("real binary in tmux: no rows within 10 s: MISSED"),
        }
    }
    Ok(())
}
