//! `--all-contexts`: the same read against every context of the config file at once,
//! each entry tagged with its context. A context that cannot be read shows its error,
//! the others are still listed, and the command exits 1: a partial answer is never
//! passed off as the whole.

use super::backend;
use super::error::{CliError, CliResult};
use crate::render::output::status;
use crate::render::sanitize::clean;
use crate::store::Store;
use serde::Serialize;

/// What one context gave: its result, or why it could not be read.
pub struct Reading<T> {
    pub context: String,
    pub result: Result<T, CliError>,
}

/// A value with its context, as JSON shows it: `{"context": NAME, ...value}`.
#[derive(Serialize)]
pub struct Tagged<'a, T: Serialize> {
    pub context: &'a str,
    #[serde(flatten)]
    pub value: &'a T,
}

/// Contexts read at once: enough to hide each one's round trips, few enough that file
/// descriptors, threads and memory stay flat however many contexts the file names.
const AT_ONCE: usize = 16;

/// Runs `work` against every context, [`AT_ONCE`] at a time, and gives the readings in
/// the config's order of names. Each API context's requests keep to their deadline, so
/// one that trickles or never answers holds up only itself, and only that long.
pub fn read_each<T: Send>(
    global: &backend::Invocation,
    work: &(dyn Fn(&dyn Store) -> CliResult<T> + Sync),
) -> CliResult<Vec<Reading<T>>> {
    let config = backend::required_config()?;
    if config.contexts.is_empty() {
        return Err(CliError::usage(format!(
            "{} has no contexts to read",
            config.path.display()
        )));
    }
    let names: Vec<String> = config.contexts.iter().map(|c| c.name.clone()).collect();
    let config = &config;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<CliResult<T>>>> =
        names.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let read_one = |name: &str| -> CliResult<T> {
        let resolved = global.context(config, name)?;
        let store = backend::open_resolved(resolved, false)?;
        work(store.as_ref())
    };
    let reader = || {
        loop {
            let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(name) = names.get(index) else {
                return;
            };
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_one(name)))
                .unwrap_or_else(|_| Err(CliError::error("the read failed unexpectedly")));
            *slots[index].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        }
    };
    let started = std::thread::scope(|scope| {
        let mut started = 0;
        for n in 0..AT_ONCE.min(names.len()) {
            if std::thread::Builder::new()
                .name(format!("contexts {n}"))
                .spawn_scoped(scope, reader)
                .is_ok()
            {
                started += 1;
            }
        }
        started
    });
    if started == 0 {
        return Err(CliError::error(
            "cannot start a thread to read the contexts",
        ));
    }
    Ok(names
        .into_iter()
        .zip(slots)
        .map(|(context, slot)| Reading {
            result: slot
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| Err(CliError::error("the read never ran"))),
            context,
        })
        .collect())
}

/// One line per context that failed, on stderr, then the exit the whole calls for.
pub fn conclude<T>(readings: &[Reading<T>]) -> CliResult {
    let failed: Vec<&Reading<T>> = readings.iter().filter(|r| r.result.is_err()).collect();
    for reading in &failed {
        if let Err(err) = &reading.result {
            status(&format!(
                "context {}: cannot read: {}",
                clean(&reading.context),
                clean(&err.message)
            ));
        }
    }
    if failed.is_empty() {
        status(&format!("read all {} contexts", readings.len()));
        return Ok(());
    }
    Err(CliError::error(format!(
        "partial answer: read {} of {} contexts; {} could not be read ({})",
        readings.len() - failed.len(),
        readings.len(),
        failed.len(),
        failed
            .iter()
            .map(|r| clean(&r.context).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

pub use crate::documents::ContextStatus;

pub fn statuses<T>(readings: &[Reading<Vec<T>>]) -> Vec<ContextStatus> {
    readings
        .iter()
        .map(|r| ContextStatus {
            context: r.context.clone(),
            entries: r.result.as_ref().ok().map(Vec::len),
            error: r.result.as_ref().err().map(|e| e.message.clone()),
            store: None,
        })
        .collect()
}

/// One entry of a fleet's document: how the JSON document holds it, and its row in the
/// one-context table.
pub trait Entry {
    type Json<'a>: Serialize
    where
        Self: 'a;
    /// The one-context table's columns.
    fn columns() -> Vec<crate::render::table::Column>;

    fn json(&self) -> Self::Json<'_>;
    fn row(&self, out: &crate::render::output::Output) -> Vec<crate::render::table::Text>;
}

/// A fleet's entries, as the output layer chooses: for a program, a JSON document of
/// entries tagged with their context, a summary and every context's status, written one
/// entry at a time (a fleet holds hundreds of thousands) in the layout of the
/// one-context output; for a person, the one-context table with a CONTEXT column first.
pub struct Across<'a, E> {
    pub entries: &'a [(String, E)],
    pub summary: Option<(&'a str, serde_json::Value)>,
    pub contexts: Vec<ContextStatus>,
}

impl<E: Entry> crate::render::output::Streamed for Across<'_, E> {
    type Done = CliResult;

    fn json(self) -> CliResult {
        use std::io::Write;
        let stdout = std::io::stdout();
        let mut writer = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
        let mut buffer = Vec::with_capacity(4096);
        writer.write_all(b"{\n  \"entries\": [")?;
        for (n, (context, entry)) in self.entries.iter().enumerate() {
            writer.write_all(if n == 0 { b"\n    " } else { b",\n    " })?;
            crate::render::output::write_indented_entry(
                &mut writer,
                &mut buffer,
                &Tagged {
                    context,
                    value: &entry.json(),
                },
            )?;
        }
        writer.write_all(if self.entries.is_empty() {
            b"],\n"
        } else {
            b"\n  ],\n"
        })?;
        if let Some((key, value)) = self.summary {
            let key = serde_json::to_string(key).map_err(std::io::Error::other)?;
            let value = serde_json::to_string(&value).map_err(std::io::Error::other)?;
            writer.write_all(format!("  {key}: {value},\n").as_bytes())?;
        }
        let contexts = serde_json::to_string(&self.contexts).map_err(std::io::Error::other)?;
        writer.write_all(format!("  \"contexts\": {contexts}\n}}\n").as_bytes())?;
        writer.flush()?;
        Ok(())
    }

    fn show(self, out: &crate::render::output::Output) -> CliResult {
        let rows = self
            .entries
            .iter()
            .map(|(context, entry)| (context.as_str(), entry.row(out)));
        Ok(print_table(&E::columns(), rows, out)?)
    }
}

/// Prints `rows` as a table of `columns` with a CONTEXT column first, each row tagged
/// with the context it was read from; streamed, as the single-store tables are.
pub fn print_table<'a>(
    columns: &[crate::render::table::Column],
    rows: impl IntoIterator<Item = (&'a str, Vec<crate::render::table::Text>)>,
    out: &crate::render::output::Output,
) -> std::io::Result<()> {
    use crate::render::table::{Column, Grid};
    use std::io::Write;
    let columns: Vec<Column> = std::iter::once(Column::new("CONTEXT", 0))
        .chain(columns.iter().cloned())
        .collect();
    let stdout = std::io::stdout();
    let mut writer = std::io::BufWriter::new(stdout.lock());
    let mut grid = Grid::new(&columns, out);
    for (context, cells) in rows {
        let mut row = vec![crate::render::views::shown(context).into()];
        row.extend(cells);
        grid.row(row, &mut writer)?;
    }
    grid.finish(&mut writer)?;
    writer.flush()
}
