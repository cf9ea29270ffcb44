//! `unsctl tui`: one live screen for the whole incident (DESIGN §10). It is a second front
//! end over the library the commands call: every figure comes from triage, verify,
//! reconcile, pulse and the remediation flow of `cli::act`, read in the background
//! ([`jobs`]), held in [`app::App`] and drawn by [`draw`].

pub mod app;
pub mod draw;
pub mod filter;
pub mod jobs;
pub mod keymap;

use crate::cli::backend::{self, Invocation, Resolution};
use crate::cli::error::{CliError, CliResult};
use app::{App, ViewKind};
use jobs::{Source, Worker};
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui::crossterm::{cursor, execute, terminal};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A live screen for the whole incident, refreshed in place
///
/// Views: the DLQ, one notification, reconcile, the pulse, the audit and every context.
/// Keys: `:` views, `/` filter, space marks, Enter inspects, r/p/v act (preview, reason,
/// the typed word), y/Y copy, ? help, q quits. Nothing changes without the typed word.
///
/// Example: unsctl tui
/// Example: unsctl tui --view pulse
/// Example: unsctl tui inspect n-0192c3d4
/// Example: unsctl --context prod tui --readonly
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// `inspect ID` opens one notification
    #[arg(value_name = "inspect ID", num_args = 0..=2)]
    pub open: Vec<String>,
    /// The view to open with
    #[arg(long, default_value = "dlq", ignore_case = true, value_parser = ["dlq", "reconcile", "pulse", "audit", "contexts"])]
    pub view: String,
    /// No action can run (also `readonly = true` on a context)
    #[arg(long)]
    pub readonly: bool,
    /// Capture the mouse (off by default, so the terminal's own selection works)
    #[arg(long)]
    pub mouse: bool,
    /// How often the view in front is read again
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::cli::values::parse_duration)]
    pub refresh: f64,
    /// Where reconcile starts: RFC 3339 or a duration back from now (default: all)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// The pulse's span, back from now
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = crate::cli::values::parse_duration)]
    pub pulse: f64,
    /// Who is acting (default: UNS_OPERATOR, then the account name)
    #[arg(long)]
    pub operator: Option<String>,
    #[command(flatten)]
    pub sources: crate::cli::args::SourceArgs,
    #[command(flatten)]
    pub senders: crate::cli::args::SenderArgs,
}

/// The screen as the command line asks for it: its config and the first view.
pub fn prepare(
    global: &Invocation,
    args: &Args,
) -> CliResult<(app::Started, Source, ViewKind, Option<String>)> {
    let (view, id) = first_view(args)?;
    let operator = global.operator(args.operator.as_deref());
    let contexts = match backend::config()? {
        Some(config) => config
            .contexts
            .iter()
            .map(|c| (c.name.clone(), global.context(&config, &c.name)))
            .collect(),
        None => Vec::new(),
    };
    let (place, readonly, open): (String, Option<String>, jobs::Opener) = if global.all_contexts {
        (
            format!("{} contexts", contexts.len()),
            Some("--all-contexts reads only".into()),
            Box::new(|_| {
                Err(CliError::usage(
                    "--all-contexts: choose a context in the contexts view (Enter)",
                ))
            }),
        )
    } else {
        let resolution = global.resolution()?.clone();
        opener(resolution, args.readonly)?
    };
    let view = if global.all_contexts && view == ViewKind::Dlq {
        ViewKind::Contexts
    } else {
        view
    };
    let config = app::Started {
        place,
        operator: operator.clone(),
        readonly,
        color: crate::render::output::color_enabled(global.color, true),
        refresh: Duration::from_secs_f64(args.refresh.max(0.5)),
        pulse_span: args.pulse.clamp(60.0, 86_400.0),
    };
    let source = Source {
        open,
        contexts,
        operator,
        sources: args.senders.apply(args.sources.sources()),
        since: args.since.clone(),
        clock: Arc::new(crate::clock::SystemClock),
    };
    Ok((config, source, view, id))
}

/// How to open one resolved store, what it is called, and why it is read-only if it is.
/// A read-only screen's opener never opens the store for a change, whoever asks.
pub fn opener(
    resolution: Resolution,
    readonly_flag: bool,
) -> CliResult<(String, Option<String>, jobs::Opener)> {
    let readonly = if readonly_flag {
        Some("--readonly".to_string())
    } else if resolution.readonly {
        Some(format!(
            "context {} says readonly",
            resolution.context.as_deref().unwrap_or("?")
        ))
    } else {
        None
    };
    // Described as every command describes it, without opening it here.
    let place = backend::open_resolved(resolution.clone(), false)?.describe();
    let refusal = readonly.clone();
    let open: jobs::Opener = Box::new(move |write| {
        if let (true, Some(why)) = (write, &refusal) {
            return Err(CliError::new(
                crate::cli::error::ExitKind::Refused,
                format!("read-only ({why}): nothing is changed from this screen"),
            ));
        }
        backend::open_resolved(resolution.clone(), write)
    });
    Ok((place, readonly, open))
}

fn first_view(args: &Args) -> CliResult<(ViewKind, Option<String>)> {
    match args.open.as_slice() {
        [] => Ok((
            match args.view.to_ascii_lowercase().as_str() {
                "reconcile" => ViewKind::Reconcile,
                "pulse" => ViewKind::Pulse,
                "audit" => ViewKind::Audit,
                "contexts" => ViewKind::Contexts,
                _ => ViewKind::Dlq,
            },
            None,
        )),
        [verb, id] if verb == "inspect" => {
            crate::cli::values::parse_id(id).map_err(CliError::usage)?;
            Ok((ViewKind::Inspect, Some(id.clone())))
        }
        _ => Err(CliError::usage(
            "unsctl tui takes `inspect ID` or nothing: `unsctl tui inspect n-0192...`",
        )),
    }
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    if !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        return Err(CliError::error(
            "unsctl tui needs a terminal: the commands (dlq triage, reconcile, pulse) print the same answers",
        ));
    }
    let (config, source, view, id) = prepare(global, &args)?;
    let id = match (view, id) {
        (ViewKind::Inspect, Some(id)) => {
            let store = (source.open)(false)?;
            Some(crate::session::ids::expand_id(store.as_ref(), &id)?)
        }
        (_, id) => id,
    };
    crate::render::output::hold_status();
    let screen = Screen::enter(args.mouse)?;
    let result = run_screen(config, source, view, id, global);
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
    global: &Invocation,
) -> CliResult {
    crate::cli::prompt::install_interrupt_handler();
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
                Event::Resize(width, _) => app.width = width,
                _ => {}
            }
        }
        if app.quit || crate::cli::prompt::interrupted() {
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
            match switch(&source, &name, global) {
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
    global: &Invocation,
) -> CliResult<(Source, String, Option<String>)> {
    let resolution = source
        .contexts
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, r)| r.clone())
        .ok_or_else(|| CliError::usage(format!("no context {name}")))??;
    let (place, mut readonly, open) = opener(resolution, false)?;
    if global.all_contexts {
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
    fn enter(mouse: bool) -> CliResult<Self> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore(true);
            previous(info);
        }));
        terminal::enable_raw_mode()?;
        let mut stdout = std::io::stdout();
        execute!(stdout, terminal::EnterAlternateScreen, cursor::Hide)?;
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
    let _ = execute!(stdout, terminal::LeaveAlternateScreen, cursor::Show);
    let _ = terminal::disable_raw_mode();
}
