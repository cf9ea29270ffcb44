//! `unsctl pulse`: the incident minute by minute (DESIGN §10), and whether it is still
//! happening, told by the last lease loss and the last reclaim.

use crate::cli::backend::{self, Invocation};
use crate::cli::error::{CliError, CliResult};
use crate::pulse::{Pulse, Series, Stillness, Window};
use crate::render::output::{Output, View, status};
use crate::render::table::{Column, Text, Tone, toned};
use serde::Serialize;

/// Show the incident step by step, and whether it is still happening
///
/// Per step (a minute unless --step says): lease losses, reclaims, UNKNOWN outcomes,
/// dead letters, replays, resolves and deliveries; then the last lease loss and reclaim.
///
/// Example: unsctl pulse
/// Example: unsctl pulse --since 6h --step 5m
/// Example: unsctl pulse --since 2026-11-29T03:00:00Z --until 2026-11-29T05:00:00Z -o json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Start of the window: RFC 3339 or a duration back from now (default: 1h)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// End of the window (default: now)
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// The length of one step (at most 1,440 steps a pulse)
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = crate::cli::values::parse_duration)]
    pub step: f64,
    /// How long after the last lease loss or reclaim the incident is no longer called
    /// still happening (1s to 24h)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::cli::values::parse_some_span)]
    pub quiet_after: f64,
}

impl Args {
    /// The absolute window asked for, resolved against the clock now, so both backends
    /// read the same one.
    pub fn window(&self, now: f64) -> CliResult<Window> {
        let instant = |flag: &str, text: &str| {
            crate::clock::parse_instant(text, now)
                .map_err(|err| CliError::usage(format!("{flag}: {err}")))
        };
        let since = instant("--since", self.since.as_deref().unwrap_or("1h"))?;
        let until = match self.until.as_deref() {
            Some(text) => instant("--until", text)?,
            None => now,
        };
        // Widened to whole steps of the clock (a minute from :00), so each row is one
        // minute of the clock and two runs a moment apart count alike.
        let step = self.step;
        if step.is_nan() || step < 1.0 {
            return Err(CliError::usage(format!(
                "--step {}: a step is at least 1s",
                crate::clock::seconds_flag(step)
            )));
        }
        let since = (since / step).floor() * step;
        let until = (until / step).ceil() * step;
        Window::new(since, until, step).map_err(CliError::usage)
    }
}

pub fn run(global: &Invocation, args: Args) -> CliResult {
    let out = global.output();
    // What was asked is checked before the store is opened, by this machine's clock;
    // the window is then read by the store's, which stamped what it counts, so a
    // machine whose clock is behind still sees the last minutes.
    args.window(crate::clock::Clock::now(&crate::clock::SystemClock))?;
    let store = backend::reader(global)?;
    let now = store.now()?;
    let window = args.window(now)?;
    let pulse = store.pulse(window)?;
    out.emit(&Shown(&pulse))?;
    if out.for_people() {
        let stillness = Stillness::from_pulse(&pulse, window.until, args.quiet_after);
        status(&crate::render::views::still_words(
            &stillness,
            window.until,
            now,
        ));
    }
    Ok(())
}

/// The pulse as a person reads it; its JSON is the pulse itself.
struct Shown<'p>(&'p Pulse);

impl Serialize for Shown<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl View for Shown<'_> {
    fn show(&self, out: &Output) -> std::io::Result<()> {
        crate::render::output::print(&table(self.0, out))
    }
}

const COLUMNS: &[Column] = &[
    Column::new("TIME (UTC)", 0),
    Column::new("LOST", 0),
    Column::new("RECLAIM", 0),
    Column::new("UNKNOWN", 0),
    Column::new("DEAD", 0),
    Column::new("REPLAY", 1),
    Column::new("RESOLVE", 1),
    Column::new("DELIVER", 1),
    Column::new("REPLAY OK", 1),
    Column::new("LOSSES", 2),
];

/// The widest bar, in glyphs.
const BAR: usize = 10;

/// One row a step, a bar of its lease losses beside it; a run of quiet steps (nothing
/// counted at all) is one row.
pub fn table(pulse: &Pulse, out: &Output) -> String {
    let window = pulse.window();
    let counts = |series: Series, n: usize| {
        pulse
            .series
            .get(&series)
            .and_then(|c| c.get(n))
            .copied()
            .unwrap_or(0)
    };
    let most = (0..window.steps())
        .map(|n| counts(Series::LeaseLost, n))
        .max()
        .unwrap_or(0)
        .max(1);
    let label = |at: f64| step_label(at, &window);
    let mut rows: Vec<Vec<Text>> = Vec::new();
    let mut quiet_since: Option<usize> = None;
    let flush_quiet = |rows: &mut Vec<Vec<Text>>, from: usize, to: usize| {
        let when = if from == to {
            label(window.start_of(from))
        } else {
            format!(
                "{}-{}",
                label(window.start_of(from)),
                label(window.start_of(to))
            )
        };
        let mut row: Vec<Text> = vec![when.into()];
        row.extend((0..Series::ALL.len()).map(|_| Text::from("·")));
        row.push("(quiet)".into());
        rows.push(row);
    };
    for n in 0..window.steps() {
        let quiet = Series::ALL.iter().all(|s| counts(*s, n) == 0);
        if quiet {
            quiet_since.get_or_insert(n);
            continue;
        }
        if let Some(from) = quiet_since.take() {
            flush_quiet(&mut rows, from, n - 1);
        }
        let lost = counts(Series::LeaseLost, n);
        let mut row: Vec<Text> = vec![label(window.start_of(n)).into()];
        for series in Series::ALL {
            let count = counts(series, n);
            let tone = match series {
                Series::LeaseLost | Series::Reclaimed | Series::Unknown if count > 0 => Tone::Bad,
                Series::DeadLettered if count > 0 => Tone::Warn,
                Series::Delivered | Series::ReplayDelivered if count > 0 => Tone::Good,
                _ => Tone::Plain,
            };
            row.push(toned(count.to_string(), tone));
        }
        let width = (lost as usize * BAR).div_ceil(most as usize);
        row.push(toned("█".repeat(width), Tone::Bad));
        rows.push(row);
    }
    if let Some(from) = quiet_since {
        flush_quiet(&mut rows, from, window.steps() - 1);
    }
    let mut text = crate::render::table::render_all(COLUMNS, rows, out);
    let totals: Vec<String> = Series::ALL
        .iter()
        .map(|s| format!("{} {}", pulse.total(*s), s.as_str()))
        .collect();
    text.push_str(&format!(
        "\nIn all, {} to {} by {}: {}",
        crate::render::time::rfc3339(window.since),
        crate::render::time::rfc3339(window.until),
        crate::clock::seconds_flag(window.step),
        totals.join(", ")
    ));
    crate::render::output::fit_lines(&text, out)
}

/// A step's start as the table shows it: the time of day, with the date when the window
/// spans more than one.
fn step_label(at: f64, window: &Window) -> String {
    let day = |t: f64| (t / 86_400.0).floor();
    let stamp = crate::render::time::rfc3339(at);
    let clock = if window.step.fract() == 0.0 && window.step as i64 % 60 == 0 {
        &stamp[11..16]
    } else {
        &stamp[11..19]
    };
    if day(window.since) == day(window.until - 1e-6) {
        clock.to_string()
    } else {
        format!("{} {clock}", &stamp[5..10])
    }
}
