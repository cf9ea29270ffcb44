//! The live screen's IO, off the drawing thread: each [`Job`] runs on a worker thread
//! against the store, through the same library calls the commands make, and comes back
//! as a [`Reply`]. The screen never waits on one: a request that hangs is abandoned
//! (Esc), and the next goes to a fresh worker.

use super::filter::Filter;
use crate::exit::Result as Opened;
use crate::model::payload::Via;
use crate::pulse::{Pulse, Window};
use crate::reconcile::{Asked as ReconcileAsked, Recent, Reconciled, Reconciliation};
use crate::remediation::Action;
use crate::render::output::Output;
use crate::session::{self, Confirm, Intent};
use crate::store::place::Resolution;
use crate::store::{Store, StoreError};
use crate::triage::{Branch, Verdict};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

/// Rows in one page of the DLQ view.
pub const PAGE: usize = 100;

pub use crate::session::screen::Opener;

/// Where the screen reads and acts: how to open the store, who acts, what verify reads.
pub struct Source {
    pub open: Opener,
    /// The contexts of the config file, for the contexts view (name and how to reach it).
    pub contexts: Vec<(String, Opened<Resolution>)>,
    /// Who acts, as every command records it.
    pub operator: String,
    /// The providers' records verify and reconcile read.
    pub sources: crate::verify::Sources,
    /// The window reconcile reads (`--since`), resolved when asked.
    pub since: Option<String>,
    /// The wall clock the windows and "how long ago" are read by.
    pub clock: Arc<dyn crate::clock::Clock>,
}

/// Work for the background.
#[derive(Debug, Clone)]
pub enum Job {
    /// One page of the DLQ, from `cursor`, triaged, narrowed by the filter.
    Dlq {
        filter: Filter,
        cursor: Option<String>,
    },
    /// The whole selection counted by branch (streamed, never held).
    Counts {
        filter: Filter,
    },
    Inspect {
        id: String,
        width: u16,
    },
    Reconcile,
    /// The pulse over the `span` seconds up to now, a minute a step.
    Pulse {
        span: f64,
    },
    Audit,
    Contexts,
    /// The providers' figures over the last 15 minutes, as doctor gives them, and the
    /// relay's answer to a greeting.
    Providers,
    /// What resolve or replay would do with `ids`: the CLI's own preview.
    Preview {
        action: Action,
        ids: Vec<String>,
        reason: Option<String>,
    },
    /// Carries out the previewed intents through the guarded transitions.
    Carry {
        intents: Vec<Intent>,
        /// The word typed to confirm them.
        word: String,
    },
    /// Asks the providers' records about `ids` (verify).
    Verify {
        ids: Vec<String>,
    },
    /// Writes the answers down as VERIFIED events.
    Record {
        asked: Arc<crate::verify::Asked>,
        reason: Option<String>,
    },
}

impl Job {
    /// What the header calls it while it runs.
    pub fn label(&self) -> &'static str {
        match self {
            Job::Dlq { .. } => "reading the DLQ",
            Job::Counts { .. } => "counting",
            Job::Inspect { .. } => "reading the notification",
            Job::Reconcile => "reconciling",
            Job::Pulse { .. } => "reading the pulse",
            Job::Audit => "reading the audit",
            Job::Contexts => "asking every context",
            Job::Providers => "asking the providers",
            Job::Preview { .. } => "previewing",
            Job::Carry { .. } => "acting",
            Job::Verify { .. } => "asking the providers' records",
            Job::Record { .. } => "recording",
        }
    }
}

/// One DLQ row as the screen shows it.
#[derive(Debug, Clone)]
pub struct Row {
    pub verdict: Verdict,
    /// The shortest prefix that names it in the whole store.
    pub short: String,
}

/// What the providers view shows: the runtime's provider calls over the window, and the
/// relay the newest email went to, greeted (never logged in to: a relay named by data).
#[derive(Debug, Clone)]
pub struct Providers {
    pub health: crate::runtime::queries::Health,
    pub relay: Option<(
        String,
        Result<crate::runtime::adapters::email::Greeting, String>,
    )>,
}

/// How far back the providers view counts calls.
pub const PROVIDERS_WINDOW: f64 = 900.0;

/// One context of the config file.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextRow {
    pub name: String,
    /// By branch, and the lease losses of the last 15 minutes; or why it could not be read.
    pub read: Result<(BTreeMap<Branch, usize>, i64), String>,
}

/// What came back.
#[derive(Debug)]
pub enum Reply {
    Dlq {
        filter: Filter,
        cursor: Option<String>,
        rows: Vec<Row>,
        next: Option<String>,
        /// The backend's pages stopped moving forward: what was read before is in `rows`.
        stopped: Option<Failure>,
    },
    Counts {
        filter: Filter,
        counts: BTreeMap<Branch, usize>,
    },
    Inspect {
        id: String,
        lines: Vec<String>,
        next_step: Option<crate::model::command::Step>,
    },
    Reconcile {
        items: Vec<Reconciled>,
        recent: Recent,
        channels: Vec<crate::model::Channel>,
        now: f64,
        /// The unique prefixes of the ids that need a person.
        short: HashMap<String, String>,
    },
    Pulse {
        pulse: Pulse,
        now: f64,
    },
    Audit {
        rows: Vec<crate::report::Action>,
        short: HashMap<String, String>,
    },
    Contexts(Vec<ContextRow>),
    Providers(Providers),
    Preview {
        action: Action,
        ids: Vec<String>,
        lines: Vec<String>,
        intents: Vec<Intent>,
    },
    Carried {
        lines: Vec<String>,
        summary: String,
    },
    Verified {
        asked: Arc<crate::verify::Asked>,
        lines: Vec<String>,
    },
    Recorded {
        lines: Vec<String>,
    },
    Failed {
        what: &'static str,
        error: Failure,
    },
}

/// Why a job failed: the words, shown escaped, and the store's own error where it came
/// from one, so what it means (a server that repeats its pages, a refused key) is read
/// from its kind, never from its words.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub cause: Option<StoreError>,
}

impl Failure {
    /// The backend pages without moving forward: reading again repeats the same answer,
    /// so the view is not read again until someone asks.
    pub fn stops_reading(&self) -> bool {
        matches!(self.cause, Some(StoreError::Repeats(_)))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        Self {
            message: crate::render::sanitize::clean(&err.to_string()).into_owned(),
            cause: Some(err),
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self {
            message: crate::render::sanitize::clean(&message).into_owned(),
            cause: None,
        }
    }
}

impl From<crate::exit::Failure> for Failure {
    fn from(err: crate::exit::Failure) -> Self {
        err.message.into()
    }
}

/// A worker thread and its two channels. Dropped, it is abandoned: a request it is
/// stuck in finishes (or not) on its own, and its reply goes nowhere.
pub struct Worker {
    jobs: Sender<(u64, Job)>,
    pub replies: Receiver<(u64, Reply)>,
}

impl Worker {
    pub fn start(source: Arc<Source>) -> Self {
        let (jobs, inbox) = channel::<(u64, Job)>();
        let (outbox, replies) = channel();
        let spawned = std::thread::Builder::new()
            .name("unsctl-tui-io".into())
            .spawn(move || {
                let mut reader = Reader::default();
                for (seq, job) in inbox {
                    let reply = run(&source, &mut reader, job);
                    if outbox.send((seq, reply)).is_err() {
                        break;
                    }
                }
            });
        if let Err(err) = spawned {
            crate::render::output::status(&format!("cannot start the screen's reader: {err}"));
        }
        Self { jobs, replies }
    }

    pub fn send(&self, seq: u64, job: Job) {
        let _ = self.jobs.send((seq, job));
    }
}

/// How long a shortened id is trusted before the store is asked again whether it still
/// names one notification alone: a page read every refresh asks only for new rows.
const SHORT_ID_KEPT: std::time::Duration = std::time::Duration::from_secs(30);

/// The worker's store, opened on first use (and again after an error), and the short
/// ids it has already looked up.
#[derive(Default)]
pub struct Reader {
    store: Option<Box<dyn Store>>,
    short: HashMap<String, (String, std::time::Instant)>,
}

impl Reader {
    /// The store, when it has been opened.
    pub fn store(&self) -> Option<&dyn Store> {
        self.store.as_deref()
    }
}

/// Runs one job with `reader`.
pub fn run(source: &Source, reader: &mut Reader, job: Job) -> Reply {
    let what = job.label();
    let result = match job {
        Job::Carry { intents, word } => carry(source, intents, &word),
        Job::Record { asked, reason } => record(source, &asked, reason),
        Job::Contexts => Ok(Reply::Contexts(contexts(source))),
        Job::Dlq { filter, cursor } => opened(source, &mut reader.store)
            .map_err(Failure::from)
            .and_then(|store| {
                dlq_page(store, filter, cursor, &mut reader.short).map_err(Failure::from)
            }),
        Job::Reconcile => opened(source, &mut reader.store)
            .map_err(Failure::from)
            .and_then(|store| reconcile(source, store, &mut reader.short)),
        Job::Audit => opened(source, &mut reader.store)
            .map_err(Failure::from)
            .and_then(|store| audit(store, &mut reader.short).map_err(Failure::from)),
        job => match opened(source, &mut reader.store) {
            Ok(store) => read(source, store, job),
            Err(err) => Err(err.into()),
        },
    };
    result.unwrap_or_else(|error| {
        // A store that failed is opened again next time.
        reader.store = None;
        Reply::Failed { what, error }
    })
}

fn opened<'r>(source: &Source, reader: &'r mut Option<Box<dyn Store>>) -> Opened<&'r dyn Store> {
    if reader.is_none() {
        *reader = Some((source.open)(false)?);
    }
    match reader.as_deref() {
        Some(store) => Ok(store),
        None => Err(crate::exit::Failure::error("no store")),
    }
}

fn read(source: &Source, store: &dyn Store, job: Job) -> Result<Reply, Failure> {
    let text = Failure::from;
    match job {
        Job::Counts { filter } => {
            let mut counts: BTreeMap<Branch, usize> = BTreeMap::new();
            store
                .each_triaged(&filter.selection, &mut |entry| {
                    if filter.branch.is_none_or(|b| b == entry.verdict.branch) {
                        *counts.entry(entry.verdict.branch).or_default() += 1;
                    }
                    Ok(())
                })
                .map_err(text)?;
            Ok(Reply::Counts { filter, counts })
        }
        Job::Inspect { id, width } => {
            let doc = store.notification(&id).map_err(text)?;
            let view = crate::render::notification::view(doc);
            let next_step = view.triage.as_ref().map(|v| v.next_step.clone());
            let lines = crate::render::notification::text(&view, &Output::plain(width))
                .lines()
                .map(str::to_string)
                .collect();
            Ok(Reply::Inspect {
                id,
                lines,
                next_step,
            })
        }
        Job::Providers => {
            let health = store.health(PROVIDERS_WINDOW, None)?;
            let lease = health.lease_seconds.unwrap_or(60.0).clamp(1.0, 30.0);
            let relay = health.smtp_relay.clone().map(|relay| {
                let answer = crate::runtime::adapters::email::greet(
                    &relay,
                    std::time::Duration::from_secs_f64(lease),
                );
                (relay, answer)
            });
            Ok(Reply::Providers(Providers { health, relay }))
        }
        Job::Pulse { span } => {
            let now = source.clock.now();
            let until = (now / 60.0).ceil() * 60.0;
            let window = Window::new(until - span, until, 60.0)?;
            Ok(Reply::Pulse {
                pulse: store.pulse(window).map_err(text)?,
                now,
            })
        }
        Job::Preview {
            action,
            ids,
            reason,
        } => preview(source, store, action, ids, reason).map_err(Failure::from),
        Job::Verify { ids } => {
            let asked = store.verify(&ids, &source.sources).map_err(text)?;
            let lines = verify_lines(&asked);
            Ok(Reply::Verified {
                asked: Arc::new(asked),
                lines,
            })
        }
        Job::Dlq { .. }
        | Job::Reconcile
        | Job::Audit
        | Job::Carry { .. }
        | Job::Record { .. }
        | Job::Contexts => Err("not a read".to_string().into()),
    }
}

/// The rows of one page from `cursor`: DLQ pages read with their events and triaged
/// here, as `dlq triage` does, until a screen's worth passes the filter or the DLQ ends.
pub fn dlq_page(
    store: &dyn Store,
    filter: Filter,
    cursor: Option<String>,
    known: &mut HashMap<String, (String, std::time::Instant)>,
) -> crate::store::Result<Reply> {
    let mut verdicts: Vec<Verdict> = Vec::new();
    let mut at = cursor.clone();
    // The rule the commands keep: a backend whose pages do not move forward is read no
    // further.
    let mut onward = crate::store::Onward::default();
    let place = store.describe();
    let mut stopped = None;
    let next = loop {
        let page = store.dlq_page(&filter.selection, at.as_deref(), PAGE, true)?;
        let onward = onward
            .page(
                &place,
                page.entries.first().map(|e| e.row.id.as_str()),
                page.entries.last().map(|e| e.row.id.as_str()),
            )
            .and_then(|()| match &page.next_cursor {
                Some(next) => onward.cursor(&place, next),
                None => Ok(()),
            });
        // What was read before the repeat is shown; the repeat is not.
        if let Err(err) = onward {
            stopped = Some(Failure::from(err));
            break None;
        }
        for entry in page.entries {
            let events = entry.events.unwrap_or_default();
            let verdict = crate::triage::triage_events(&entry.row, &events);
            if filter.branch.is_none_or(|b| b == verdict.branch)
                && filter.selection.keeps_verdict(&verdict)
            {
                verdicts.push(verdict);
            }
        }
        match page.next_cursor {
            Some(next) if verdicts.len() < PAGE => at = Some(next),
            other => break other,
        }
    };
    let mut short = shortened(store, verdicts.iter().map(|v| v.id.as_str()), known);
    let rows = verdicts
        .into_iter()
        .map(|verdict| Row {
            short: short
                .remove(&verdict.id)
                .unwrap_or_else(|| verdict.id.clone()),
            verdict,
        })
        .collect();
    Ok(Reply::Dlq {
        filter,
        cursor,
        rows,
        next,
        stopped,
    })
}

/// Each of `ids` as the shortest prefix that names it alone in the whole store, as every
/// command takes it; the store is asked only for ids not looked up in the last
/// [`SHORT_ID_KEPT`] (`known` keeps the answers).
fn shortened<'i>(
    store: &dyn Store,
    ids: impl Iterator<Item = &'i str> + Clone,
    known: &mut HashMap<String, (String, std::time::Instant)>,
) -> HashMap<String, String> {
    let now = std::time::Instant::now();
    known.retain(|_, (_, at)| now.duration_since(*at) < SHORT_ID_KEPT);
    let fresh = crate::session::ids::short_ids(
        store,
        ids.clone().filter(|id| !known.contains_key(*id)),
        &Output::plain(80),
    );
    known.extend(fresh.into_iter().map(|(id, short)| (id, (short, now))));
    ids.filter_map(|id| Some((id.to_string(), known.get(id)?.0.clone())))
        .collect()
}

fn reconcile(
    source: &Source,
    store: &dyn Store,
    known: &mut HashMap<String, (String, std::time::Instant)>,
) -> Result<Reply, Failure> {
    let now = source.clock.now();
    let window = match source.since.as_deref() {
        Some(since) => crate::store::Window {
            since: Some(crate::clock::parse_instant(since, now).map_err(|err| err.to_string())?),
            until: None,
        },
        None => crate::store::Window::default(),
    };
    let asked = ReconcileAsked {
        window,
        ..ReconcileAsked::default()
    };
    let reconciliation = Reconciliation::read(store, &asked, source.sources.clone(), now)?;
    let items = reconciliation.all(store)?;
    let recent = Recent::read(store, None, now, crate::pulse::DEFAULT_QUIET_AFTER)?;
    let short = shortened(
        store,
        items
            .iter()
            .filter(|i| i.class != crate::reconcile::Class::Once)
            .map(|i| i.id.as_str()),
        known,
    );
    Ok(Reply::Reconcile {
        items,
        recent,
        channels: reconciliation.channels(),
        now,
        short,
    })
}

/// The newest operator actions: resolves, replays and verify records, newest first.
fn audit(
    store: &dyn Store,
    known: &mut HashMap<String, (String, std::time::Instant)>,
) -> crate::store::Result<Reply> {
    use crate::model::Kind;
    let query = crate::store::EventQuery {
        kinds: vec![Kind::DlqResolved, Kind::Replayed, Kind::Verified],
        limit: 1000,
        ..Default::default()
    };
    let mut rows: Vec<crate::report::Action> = store
        .events(&query)?
        .events
        .into_iter()
        .map(|event| crate::report::Action::of(event, String::new()))
        .collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.event_id));
    // The newest screenful's ids shortened; older ones stay whole.
    let short = shortened(
        store,
        rows.iter().take(100).map(|r| r.notification_id.as_str()),
        known,
    );
    Ok(Reply::Audit { rows, short })
}

/// Each context: its DLQ by branch and its lease losses of the last 15 minutes, read
/// concurrently; one that cannot be read says why.
fn contexts(source: &Source) -> Vec<ContextRow> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = source
            .contexts
            .iter()
            .map(|(name, resolution)| {
                scope.spawn(move || ContextRow {
                    name: name.clone(),
                    read: read_context(resolution),
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(&source.contexts)
            .map(|(handle, (name, _))| {
                handle.join().unwrap_or_else(|_| ContextRow {
                    name: name.clone(),
                    read: Err("its reader failed".into()),
                })
            })
            .collect()
    })
}

fn read_context(resolution: &Opened<Resolution>) -> Result<(BTreeMap<Branch, usize>, i64), String> {
    let resolution = resolution.as_ref().map_err(|err| err.message.clone())?;
    let store =
        crate::session::screen::open(resolution.clone(), false).map_err(|err| err.message)?;
    let mut counts = BTreeMap::new();
    store
        .each_triaged(&Default::default(), &mut |entry| {
            *counts.entry(entry.verdict.branch).or_default() += 1;
            Ok(())
        })
        .map_err(|err| err.to_string())?;
    let lost = store
        .health(crate::reconcile::RECENT_SECONDS, None)
        .map_err(|err| err.to_string())?
        .lease_lost;
    Ok((counts, lost))
}

/// The request every action of the screen starts from: the operator, the reason, and
/// that the screen made it.
fn request(source: &Source, reason: Option<String>) -> crate::api::ActionRequest {
    crate::api::ActionRequest {
        via: Some(Via::Tui),
        operator: Some(source.operator.clone()),
        reason,
        ..crate::api::ActionRequest::default()
    }
}

/// The CLI's preview of `action` on `ids`: each entry's line, the pace and what each
/// receiver does with a copy.
fn preview(
    source: &Source,
    store: &dyn Store,
    action: Action,
    ids: Vec<String>,
    reason: Option<String>,
) -> Opened<Reply> {
    let request = request(source, reason);
    let intents: Vec<Intent> = ids
        .iter()
        .map(|id| crate::session::intent(store, id, action, &request))
        .collect::<Result<_, _>>()?;
    let out = Output::plain(200);
    let told = crate::session::receivers(&intents, source.sources.pagerduty.as_ref());
    let lines: Vec<String> = crate::session::preview::Preview::of(&intents, &told, &out)
        .all()
        .cloned()
        .collect();
    Ok(Reply::Preview {
        action,
        ids,
        lines,
        intents,
    })
}

/// Carries out `intents` on a store opened for writing, once the session takes `word`
/// as the confirmation for them: each through the guarded transition, which checks
/// again; the outcome of each.
fn carry(source: &Source, intents: Vec<Intent>, word: &str) -> Result<Reply, Failure> {
    let approved: Vec<&Intent> = intents.iter().filter(|i| i.preview.is_ok()).collect();
    let preview = session::Preview {
        verb: "carry out",
        approved: &approved,
        receivers: &[],
    };
    let Ok(confirmed) = session::Typed(word).confirm(&preview);
    if !confirmed {
        return Ok(Reply::Carried {
            lines: Vec::new(),
            summary: format!(
                "nothing was changed: the word for {} is {}",
                approved.len(),
                session::confirmation_word(approved.len())
            ),
        });
    }
    let store = (source.open)(true)?;
    let clock = crate::clock::SystemClock;
    let outcomes = session::carry_out(store.as_ref(), &intents, &clock, &mut |_, _| {
        session::Flow::Continue
    });
    let lines = intents
        .iter()
        .zip(&outcomes)
        .map(|(intent, outcome)| {
            format!(
                "{}  {}",
                crate::render::sanitize::clean(&intent.id),
                outcome.label(intent.action)
            )
        })
        .collect();
    Ok(Reply::Carried {
        lines,
        summary: session::summary(&outcomes),
    })
}

fn verify_lines(asked: &crate::verify::Asked) -> Vec<String> {
    let mut lines: Vec<String> = asked
        .answers
        .iter()
        .map(|answer| {
            format!(
                "{}  {} attempt {}/{}  {}  {}",
                crate::render::sanitize::clean(&answer.id),
                answer.channel,
                answer.cycle,
                answer.attempt,
                answer.answer.as_str(),
                crate::render::views::said(&crate::verify::brief(&answer.evidence))
            )
        })
        .collect();
    lines.extend(asked.skipped.iter().map(|(id, why)| {
        format!(
            "{}  nothing to ask: {}",
            crate::render::sanitize::clean(id),
            crate::render::sanitize::clean(why)
        )
    }));
    lines
}

fn record(
    source: &Source,
    asked: &crate::verify::Asked,
    reason: Option<String>,
) -> Result<Reply, Failure> {
    let store = (source.open)(true)?;
    let why = crate::remediation::verified::Why {
        reason: reason.as_deref(),
        ticket: None,
        via: Some(Via::Tui),
    };
    let lines = store
        .record_verified(asked, &source.operator, why)
        .into_iter()
        .map(|result| match result {
            Ok(recorded) => format!(
                "{}  recorded {} VERIFIED event(s); now {}",
                crate::render::sanitize::clean(&recorded.id),
                recorded.event_ids.len(),
                recorded.branch
            ),
            Err((id, err)) => format!(
                "{}  not recorded: {}",
                crate::render::sanitize::clean(&id),
                crate::render::sanitize::clean(&err.to_string())
            ),
        })
        .collect();
    Ok(Reply::Recorded { lines })
}
