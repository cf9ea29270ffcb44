//! The JSON and CSV documents the commands write, each written once: triage's plan
//! (`dlq triage -o json`) and reconcile's (`reconcile -o json`, `-o csv`). The commands
//! print them, and a report's evidence bundle keeps the same bytes.

use crate::exit::Result as CliResult;
use crate::reconcile::{Class, Recent, Reconciled, Reconciliation, Summary, summary};
use crate::session::stream as selection;
use crate::store::{Store, StoreError, Triaged, Window};
use crate::triage::{self, Branch, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::mpsc::Receiver;

/// What a triage read so far: entries per branch, and how many carry notes.
/// What a run counted, for the lines on stderr.
#[derive(Default)]
pub struct Tally {
    pub counts: BTreeMap<Branch, usize>,
    pub with_notes: usize,
    /// Each entry's branch, kept only for --watch.
    pub seen: Option<BTreeMap<String, Branch>>,
}

impl Tally {
    pub fn watching(watch: bool) -> Self {
        Tally {
            seen: watch.then(Default::default),
            ..Tally::default()
        }
    }

    pub fn add(&mut self, verdict: &Verdict) {
        if let Some(seen) = self.seen.as_mut() {
            seen.insert(verdict.id.clone(), verdict.branch);
        }
        *self.counts.entry(verdict.branch).or_default() += 1;
        if !verdict.notes.is_empty() {
            self.with_notes += 1;
        }
    }

    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }
}

/// `dlq triage -o json` of `selection` in `store`, written to `writer`: the document a
/// report's evidence bundle keeps as triage.json.
pub fn write_triage(
    store: &dyn crate::store::Store,
    selection: &crate::store::Selection,
    writer: impl Write + Send,
) -> CliResult {
    let identity = store.identity()?;
    selection::stream(store, selection, &|_: &Triaged| true, None, |arriving| {
        write_triage_json(
            writer,
            arriving,
            Tally::default(),
            identity.as_deref(),
            None,
        )
    })?;
    Ok(())
}

/// `{"entries": [...], "summary": {...}, "store": ID}`, written as the verdicts arrive.
pub fn write_triage_json(
    writer: impl Write,
    arriving: Receiver<Vec<Triaged>>,
    tally: Tally,
    identity: Option<&str>,
    excluded: Option<&serde_json::Value>,
) -> CliResult<Tally> {
    let mut writer = std::io::BufWriter::with_capacity(1 << 16, writer);
    let mut tally = Tally {
        counts: triage::empty_summary(),
        ..tally
    };
    let mut buffer = Vec::with_capacity(4096);
    writer.write_all(b"{\n  \"entries\": [")?;
    for triaged in arriving.into_iter().flatten() {
        let verdict = triaged.verdict;
        writer.write_all(if tally.total() == 0 {
            b"\n    "
        } else {
            b",\n    "
        })?;
        tally.add(&verdict);
        crate::render::output::write_indented_entry(&mut writer, &mut buffer, &verdict)?;
    }
    writer.write_all(if tally.total() == 0 {
        b"],\n"
    } else {
        b"\n  ],\n"
    })?;
    let summary = serde_json::to_string(&tally.counts).map_err(std::io::Error::other)?;
    writer.write_all(format!("  \"summary\": {summary}").as_bytes())?;
    if let Some(identity) = identity {
        let identity = serde_json::to_string(identity).map_err(std::io::Error::other)?;
        writer.write_all(format!(",\n  \"store\": {identity}").as_bytes())?;
    }
    if let Some(excluded) = excluded {
        let excluded = serde_json::to_string(excluded).map_err(std::io::Error::other)?;
        writer.write_all(format!(",\n  \"excluded\": {excluded}").as_bytes())?;
    }
    writer.write_all(b"\n}\n")?;
    writer.flush()?;
    Ok(tally)
}

/// `reconcile -o json` to `writer`: what a report's evidence bundle keeps as
/// reconcile.json.
pub fn write_reconcile(
    reconciliation: &Reconciliation,
    store: &dyn Store,
    recent: &Recent,
    writer: impl Write + Send,
) -> CliResult {
    let mut document = Document::start(&reconciliation.window, writer)?;
    // The notifications are written out on a thread of their own while the next ones
    // are read and reconciled: the writing took half the reconciling thread's time.
    let write_each = move |arriving: Receiver<Vec<Reconciled>>| -> std::io::Result<_> {
        for item in arriving.into_iter().flatten() {
            document.item(&item)?;
        }
        Ok(document)
    };
    let mut classes = Vec::new();
    let (read, written) = crate::handoff::beside("write", write_each, |emit| {
        reconciliation.each(store, &mut |item| {
            classes.push((item.channel, item.class));
            if emit(item) {
                Ok(())
            } else {
                // Only a writer that stopped hangs up; why it stopped is told below.
                Err(StoreError::Stopped)
            }
        })
    })
    .map_err(|lost| StoreError::Other(lost.to_string()))?;
    match (read, written) {
        (_, Err(err)) => Err(unwritten(err)),
        (Err(err), Ok(_)) => Err(err.into()),
        (Ok(_), Ok(document)) => {
            let summary = summary(&reconciliation.channels(), classes);
            document.finish(&summary, recent, &reconciliation.records.unread(), None)
        }
    }
}

/// `reconcile -o csv`: one line per notification and channel that needs a person
/// (DUPLICATED, MISSING), for a mail merge: RFC 4180 quoting, and no cell a spreadsheet
/// would run as a formula.
pub fn write_csv(
    reconciliation: &Reconciliation,
    store: &dyn Store,
    writer: impl Write + Send,
) -> CliResult {
    use crate::render::columns::{NEEDS, csv_line};
    let mut writer = std::io::BufWriter::new(writer);
    writer.write_all(csv_line(NEEDS, None).as_bytes())?;
    // Why the writing stopped, kept whole: a closed pipe ends quietly.
    let mut failed = None;
    let read = reconciliation.each(store, &mut |item| {
        if !matches!(item.class, Class::Duplicated | Class::Missing) {
            return Ok(());
        }
        let line = csv_line(NEEDS, Some(&item.row(&item.id)));
        writer.write_all(line.as_bytes()).map_err(|err| {
            failed = Some(err);
            StoreError::Stopped
        })
    });
    if let Some(err) = failed {
        return Err(unwritten(err));
    }
    read?;
    writer.flush()?;
    Ok(())
}

/// Why a document could not be written: a closed pipe stays itself (the reader stopped,
/// which ends a command quietly); anything else says it was the writing that failed.
fn unwritten(err: std::io::Error) -> crate::exit::Failure {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        return err.into();
    }
    StoreError::Other(format!("cannot write the answer: {err}")).into()
}

/// The reconcile document, written as it goes: the window, the notifications one at a
/// time, then the summary, what is recent, and for a fleet the contexts read.
pub struct Document<W: Write> {
    writer: std::io::BufWriter<W>,
    buffer: Vec<u8>,
    written: usize,
}

impl<W: Write> Document<W> {
    pub fn start(window: &Window, writer: W) -> std::io::Result<Self> {
        let mut writer = std::io::BufWriter::with_capacity(1 << 16, writer);
        let mut buffer = Vec::with_capacity(4096);
        let window = indented(window, &mut buffer)?;
        writer
            .write_all(format!("{{\n  \"window\": {window},\n  \"notifications\": [").as_bytes())?;
        Ok(Self {
            writer,
            buffer,
            written: 0,
        })
    }

    pub fn item(&mut self, item: &impl Serialize) -> std::io::Result<()> {
        self.writer.write_all(if self.written == 0 {
            b"\n    "
        } else {
            b",\n    "
        })?;
        self.written += 1;
        crate::render::output::write_indented_entry(&mut self.writer, &mut self.buffer, item)
    }

    /// Ends the document: the summary, what is recent, the records named that could not
    /// be read (no answer rests on them: a script sees what a terminal is told up front),
    /// and for a fleet the contexts read.
    pub fn finish(
        mut self,
        summary: &Summary,
        recent: &impl Serialize,
        unread: &[String],
        contexts: Option<&[ContextStatus]>,
    ) -> CliResult {
        let writer = &mut self.writer;
        writer.write_all(if self.written > 0 {
            b"\n  ],\n"
        } else {
            b"],\n"
        })?;
        let summary = indented(summary, &mut self.buffer)?;
        let recent = indented(recent, &mut self.buffer)?;
        let unread = indented(&unread, &mut self.buffer)?;
        writer.write_all(
            format!("  \"summary\": {summary},\n  \"recent\": {recent},\n  \"unread\": {unread}")
                .as_bytes(),
        )?;
        if let Some(contexts) = contexts {
            let contexts = indented(&contexts, &mut self.buffer)?;
            writer.write_all(format!(",\n  \"contexts\": {contexts}").as_bytes())?;
        }
        writer.write_all(b"\n}\n")?;
        writer.flush()?;
        Ok(())
    }
}

/// `value` as pretty JSON with sorted keys, indented to sit one level in.
pub fn indented<T: Serialize>(value: &T, buffer: &mut Vec<u8>) -> std::io::Result<String> {
    let value = serde_json::to_value(value).map_err(std::io::Error::other)?;
    buffer.clear();
    serde_json::to_writer_pretty(&mut *buffer, &value).map_err(std::io::Error::other)?;
    Ok(String::from_utf8_lossy(buffer).replace('\n', "\n  "))
}

/// The per-context part of a fleet's JSON document: entries counted, or the error.
#[derive(Serialize)]
pub struct ContextStatus {
    pub context: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Which store the context named when it was read ([`crate::store::Store::identity`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
}
