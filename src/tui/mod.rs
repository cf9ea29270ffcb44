//! The live screen for the whole incident (DESIGN §10): a front end beside the command
//! line, over the library the commands call. Every figure comes from triage, verify,
//! reconcile, pulse and the remediation session, read in the background ([`jobs`]),
//! held in [`app::App`] and drawn by [`draw`]. It never imports the command line; the
//! command line resolves its flags into [`Settings`] and `main` starts it.

pub mod app;
pub mod draw;
pub mod filter;
pub mod jobs;
pub use crate::render::keys as keymap;

use crate::exit::{Failure, Result};
use crate::session::screen::{self, Settings};
use app::{App, ViewKind};
use jobs::{Source, Worker};
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui::crossterm::{cursor, execute, terminal};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the screen with `settings` until it is quit; the terminal is given back as it
/// was, after a panic too.
pub fn run(settings: Settings) -> Result {
    let view = ViewKind::named(&settings.view).unwrap_or(ViewKind::Dlq);
    let config = app::Started {
        place: settings.place,
        operator: settings.operator.clone(),
        readonly: settings.readonly,
        color: settings.color,
        refresh: settings.refresh,
        pulse_span: settings.pulse_span,
    };
    let source = Source {
        open: settings.open,
        contexts: settings.contexts,
        operator: settings.operator,
        sources: settings.sources,
        since: settings.since,
        clock: Arc::new(crate::clock::SystemClock),
        wait: settings.wait,
        reports: settings.reports,
    };
    crate::render::output::hold_status();
    let screen = Screen::enter(settings.mouse)?;
    let result = run_screen(config, source, view, settings.id, settings.all_contexts);
    drop(screen);
    for line in crate::render::output::take_held(true) {
        crate::render::output::status(&line);
    }
    result
}

/// The loop: draw, take a key (waiting at most a tick), take what the worker sent back,
/// refresh what is due. Never waits on the store.
fn run_screen(
    config: app::Started,
    source: Source,
    view: ViewKind,
    id: Option<String>,
    all_contexts: bool,
) -> Result {
    crate::interrupt::install_interrupt_handler();
    let mut source = Arc::new(source);
    let mut worker = Worker::start(source.clone());
    let mut app = App::new(config);
    let mut terminal =
        ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
    app.width = terminal.size()?.width;
    let mut jobs = app.open(view, id, Instant::now());
    loop {
        for (seq, job) in jobs.drain(..) {
            worker.send(seq, job);
        }
        terminal.draw(|frame| draw::draw(frame, &app, Instant::now()))?;
        if event::poll(Duration::from_millis(50))? {
            match event::read()? {
                Event::Key(key) if key.kind != KeyEventKind::Release => {
                    jobs.extend(app.key(key, Instant::now()));
                }
                Event::Paste(text) => jobs.extend(app.paste(&text, Instant::now())),
                Event::Resize(width, _) => app.width = width,
                _ => {}
            }
        }
        if app.quit || crate::interrupt::interrupted() {
            return Ok(());
        }
        while let Ok((seq, reply)) = worker.replies.try_recv() {
            app.absorb(seq, reply, Instant::now());
        }
        for line in crate::render::output::take_held(false) {
            app.say(line, false);
        }
        if let Some(text) = app.clipboard.take() {
            copy(&text);
        }
        if let Some(name) = app.switch_to.take() {
            match switch(&source, &name, all_contexts) {
                Ok((next, place, readonly)) => {
                    source = Arc::new(next);
                    app.config.place = place;
                    app.config.readonly = readonly;
                    app.restart_worker = true;
                    app.reset_views();
                    jobs.extend(app.open(ViewKind::Dlq, None, Instant::now()));
                }
                Err(err) => app.say(err.message, true),
            }
        }
        if std::mem::take(&mut app.restart_worker) {
            // The old worker is left to its request; what was cancelled is asked again
            // of the new one at the next refresh.
            worker = Worker::start(source.clone());
        }
        jobs.extend(app.tick(Instant::now()));
    }
}

/// The screen's source for context `name`: the same operator and records, its store.
fn switch(
    source: &Source,
    name: &str,
    all_contexts: bool,
) -> Result<(Source, String, Option<String>)> {
    let resolution = source
        .contexts
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, r)| r.clone())
        .ok_or_else(|| Failure::usage(format!("no context {name}")))??;
    let (place, mut readonly, open) = screen::opener(resolution, false)?;
    if all_contexts {
        readonly = Some("--all-contexts reads only".into());
    }
    Ok((
        Source {
            open,
            contexts: source.contexts.clone(),
            operator: source.operator.clone(),
            sources: source.sources.clone(),
            since: source.since.clone(),
            clock: source.clock.clone(),
            wait: source.wait,
            reports: source.reports.clone(),
        },
        place,
        readonly,
    ))
}

/// Puts `text` on the terminal's clipboard with OSC 52 (which works over ssh and tmux).
fn copy(text: &str) {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
    let mut stdout = std::io::stdout();
    let _ = write!(stdout, "\x1b]52;c;{encoded}\x07");
    let _ = stdout.flush();
}

/// The terminal in raw mode on the alternate screen, given back as it was when dropped,
/// and after a panic too.
struct Screen {
    mouse: bool,
}

impl Screen {
    fn enter(mouse: bool) -> Result<Self> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore(true);
            previous(info);
        }));
        terminal::enable_raw_mode()?;
        let mut stdout = std::io::stdout();
        execute!(
            stdout,
            terminal::EnterAlternateScreen,
            event::EnableBracketedPaste,
            cursor::Hide
        )?;
        if mouse {
            execute!(stdout, event::EnableMouseCapture)?;
        }
        Ok(Self { mouse })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore(self.mouse);
    }
}

fn restore(mouse: bool) {
    let mut stdout = std::io::stdout();
    if mouse {
        let _ = execute!(stdout, event::DisableMouseCapture);
    }
    let _ = execute!(
        stdout,
        event::DisableBracketedPaste,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = terminal::disable_raw_mode();
}
