//! The live screen's IO, off the drawing thread: each [`Job`] runs on a worker thread
//! against the store, through the same library calls the commands make, and comes back
//! as a [`Reply`]. The screen never waits on one: a request that hangs is abandoned
//! (Esc), and the next goes to a fresh worker.

use super::filter::Filter;
use crate::exit::Result as Opened;
use crate::model::ChannelSet;
use crate::model::payload::Via;
use crate::pulse::{Pulse, Window};
use crate::reconcile::{Asked as ReconcileAsked, Recent, Reconciled, Reconciliation};
use crate::remediation::Action;
use crate::remediation::policy::Terms;
use crate::render::output::Output;
use crate::session::canary::Plan;
use crate::session::pace::Pace;
use crate::session::run::{self, Ran, Stage, Steps};
use crate::session::wait::{Waited, Watch};
use crate::session::{self, Confirm, Intent, Outcome};
use crate::store::place::Resolution;
use crate::store::{Store, StoreError};
use crate::triage::{Branch, Verdict};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

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
    /// How long a carry-out waits on its canary, and on its replays after the last is due.
    pub wait: Duration,
    /// Where `:report` writes its bundles (each in a new directory).
    pub reports: std::path::PathBuf,
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
    /// What resolve or replay would do with `ids`, as asked: the CLI's own preview.
    Preview {
        action: Action,
        ids: Vec<String>,
        ask: Ask,
    },
    /// Carries out the previewed plan through the guarded transitions, the canary first,
    /// and waits on the replays; runs on a thread of its own, saying where it stands
    /// ([`Reply::Progress`]) until each replay has an outcome or `stop` is set.
    Carry {
        plan: Arc<Plan>,
        /// The word typed to confirm them.
        word: String,
        stop: Arc<AtomicBool>,
    },
    /// Asks the providers' records about `ids` (verify).
    Verify {
        ids: Vec<String>,
    },
    /// Writes the evidence bundle of a report for the window typed (`since`, `until`), or
    /// the incident's: from the first lease loss of the latest burst to now.
    Report {
        since: Option<String>,
        until: Option<String>,
    },
    /// Writes the answers down as VERIFIED events.
    Record {
        asked: Arc<crate::verify::Asked>,
        reason: Option<String>,
    },
}

impl Job {
    /// A read the screen makes by itself, again at each refresh: not an act, nor a
    /// question someone asked (a preview, the providers' records, a report).
    pub fn reads(&self) -> bool {
        matches!(
            self,
            Job::Dlq { .. }
                | Job::Counts { .. }
                | Job::Inspect { .. }
                | Job::Reconcile
                | Job::Pulse { .. }
                | Job::Audit
                | Job::Contexts
                | Job::Providers
        )
    }

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
            Job::Report { .. } => "writing the report",
        }
    }
}

/// What a dialog asks for besides the entries, as the command's flags would: the reason,
/// the channels (a replay), a canary and a pace (a replay), and whether a guardrail is
/// overridden on purpose (`--force`; needs the reason).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ask {
    pub reason: Option<String>,
    /// Only these channels; `None`: every channel not delivered.
    pub channels: Option<ChannelSet>,
    pub canary: Option<u16>,
    pub pace: Option<Pace>,
    pub force: bool,
}

/// How often a carry-out looks at its replays.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// One DLQ row as the screen shows it.
#[derive(Debug, Clone)]
pub struct Row {
    pub verdict: Verdict,
    /// The shortest prefix that names it in the whole store.
    pub short: String,
    /// What the message was.
    pub message: crate::model::payload::Message,
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
        /// The id as asked (a prefix the screen showed), and the whole id it names.
        asked: String,
        id: String,
        lines: Vec<String>,
        next_step: Option<crate::model::command::Step>,
    },
    Reconcile {
        items: Vec<Reconciled>,
        recent: Recent,
        channels: Vec<crate::model::Channel>,
        /// The records named that could not be read, and why.
        unread: Vec<String>,
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
        ask: Ask,
        lines: Vec<String>,
        /// Where it is made and who it is recorded under ([`acting_as`]).
        acting: String,
        plan: Arc<Plan>,
        /// Every channel the replays would cover when none is named: the checkboxes.
        offered: ChannelSet,
    },
    /// Where a carry-out stands: one line, and the lines so far (each outcome, each
    /// settlement). Not its end: [`Reply::Carried`] is.
    Progress {
        text: String,
        lines: Vec<String>,
    },
    Carried {
        lines: Vec<String>,
        summary: String,
    },
    Verified {
        asked: Arc<crate::verify::Asked>,
        lines: Vec<String>,
        /// Where the answers are recorded and who under ([`acting_as`]).
        acting: String,
    },
    /// A report's bundle was written: where, and what it found in a line.
    Reported {
        said: String,
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
                    // A carry-out waits on its replays for minutes: on a thread of its own,
                    // so the views go on being read.
                    if let Job::Carry { plan, word, stop } = job {
                        let (source, sender) = (source.clone(), outbox.clone());
                        let started = std::thread::Builder::new()
                            .name("unsctl-tui-carry".into())
                            .spawn(move || {
                                let said = |reply| {
                                    let _ = sender.send((seq, reply));
                                };
                                let reply = carry(&source, &plan, &word, &stop, &said)
                                    .unwrap_or_else(|error| Reply::Failed {
                                        what: "acting",
                                        error,
                                    });
                                said(reply);
                            });
                        if let Err(err) = started {
                            let error = Failure::from(format!("cannot start the carry-out: {err}"));
                            let _ = outbox.send((
                                seq,
                                Reply::Failed {
                                    what: "acting",
                                    error,
                                },
                            ));
                        }
                        continue;
                    }
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
    /// What followed each act the audit looked up, by its event id, with the row it was
    /// read from as the audit's query shows it: read again only once that row moved.
    followed: Followed,
}

/// A notification's row as an event listing carries it: its status, whether it is in the
/// DLQ, its attempts and its cycle. Any act, claim or settlement changes one of them.
type RowMark = (String, bool, i64, i64);

/// What followed each act looked up, by its event id, with the row it was read from.
type Followed = HashMap<i64, (RowMark, String)>;

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
        Job::Carry { plan, word, stop } => carry(source, &plan, &word, &stop, &|_| {}),
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
            .and_then(|store| {
                audit(
                    store,
                    &mut reader.short,
                    &mut reader.followed,
                    source.clock.now(),
                )
                .map_err(Failure::from)
            }),
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
    // A file replaced under the connection is read from the path again, not the old file.
    if reader
        .as_ref()
        .is_some_and(|store| store.replaced().is_some())
    {
        *reader = None;
    }
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
        Job::Inspect { id: asked, width } => {
            // Any prefix the screen shows names its notification, as on the command line.
            let id = crate::session::ids::expand_id(store, &asked)?;
            let doc = store.notification(&id).map_err(text)?;
            let view = crate::render::notification::view(doc);
            let next_step = view.triage.as_ref().map(|v| v.next_step.clone());
            let lines = crate::render::notification::text(&view, &Output::plain(width))
                .lines()
                .map(str::to_string)
                .collect();
            Ok(Reply::Inspect {
                asked,
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
            // The last span by the store's clock, which stamped what it counts.
            let now = store.now().map_err(text)?;
            let until = (now / 60.0).ceil() * 60.0;
            let window = Window::new(until - span, until, 60.0)?;
            Ok(Reply::Pulse {
                pulse: store.pulse(window).map_err(text)?,
                now,
            })
        }
        Job::Report { since, until } => report(source, store, since, until),
        Job::Preview { action, ids, ask } => {
            preview(source, store, action, ids, ask).map_err(Failure::from)
        }
        Job::Verify { ids } => {
            let asked = store.verify(&ids, &source.sources).map_err(text)?;
            let lines = verify_lines(&asked);
            Ok(Reply::Verified {
                asked: Arc::new(asked),
                lines,
                acting: acting_as(source, store).map_err(text)?,
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
    let mut verdicts: Vec<(Verdict, crate::model::payload::Message)> = Vec::new();
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
                verdicts.push((
                    verdict,
                    crate::model::payload::Message::of(&entry.row.payload),
                ));
            }
        }
        match page.next_cursor {
            Some(next) if verdicts.len() < PAGE => at = Some(next),
            other => break other,
        }
    };
    let mut short = shortened(store, verdicts.iter().map(|(v, _)| v.id.as_str()), known);
    let rows = verdicts
        .into_iter()
        .map(|(verdict, message)| Row {
            short: short
                .remove(&verdict.id)
                .unwrap_or_else(|| verdict.id.clone()),
            verdict,
            message,
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
    let recent = Recent::read(store, None, crate::pulse::DEFAULT_QUIET_AFTER)?;
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
        channels: reconciliation.channels(),
        unread: reconciliation.records.unread(),
        // "Still happening" and "ago" by the store's clock, as the command says them.
        now: recent.at,
        recent,
        short,
    })
}

/// What followed `event` by `now`, in the report's words: kept from the last look while
/// the row the listing shows has not moved, else read from its notification (`read`). A
/// history that could not be read is asked for again next time.
fn followed_of(
    kept: &mut Followed,
    event: &crate::api::EventRow,
    now: f64,
    read: impl FnOnce(&str) -> Option<crate::api::NotificationDoc>,
) -> String {
    let mark: RowMark = (
        event.status.clone(),
        event.dead_letter,
        event.attempts,
        event.cycle,
    );
    if let Some((seen, words)) = kept.get(&event.id)
        && *seen == mark
    {
        return words.clone();
    }
    let doc = read(&event.notification_id);
    let words = crate::report::followed(doc.as_ref(), event, crate::report::Upto::Now(now));
    if doc.is_some() {
        kept.insert(event.id, (mark, words.clone()));
    }
    words
}

/// The newest acts the audit view says what followed of: about a screenful.
const AUDIT_FOLLOWED: usize = 40;

/// The newest operator actions: resolves, replays and verify records, newest first, and
/// what followed the newest of them by `now`, read again only for a row that moved since
/// (`followed`, kept between refreshes).
fn audit(
    store: &dyn Store,
    known: &mut HashMap<String, (String, std::time::Instant)>,
    followed: &mut Followed,
    now: f64,
) -> crate::store::Result<Reply> {
    use crate::model::Kind;
    let query = crate::store::EventQuery {
        kinds: vec![Kind::DlqResolved, Kind::Replayed, Kind::Verified],
        limit: 1000,
        ..Default::default()
    };
    let events = store.events(&query)?.events;
    // What followed each of the newest acts, as the report says it, up to now: one read
    // of its notification each, and only when its row moved, so a refresh over a distant
    // API asks for nothing that did not change.
    let mut docs: HashMap<String, Option<crate::api::NotificationDoc>> = HashMap::new();
    let newest: std::collections::HashSet<i64> =
        events.iter().take(AUDIT_FOLLOWED).map(|e| e.id).collect();
    followed.retain(|id, _| newest.contains(id));
    let mut rows: Vec<crate::report::Action> = events
        .into_iter()
        .map(|event| {
            if !newest.contains(&event.id) {
                return crate::report::Action::of(event, String::new());
            }
            let words = followed_of(followed, &event, now, |id| {
                docs.entry(id.to_string())
                    .or_insert_with(|| store.notification(id).ok())
                    .clone()
            });
            crate::report::Action::of(event, words)
        })
        .collect();
    // The notes written beside the acts, as the report keeps them.
    rows.extend(
        store
            .notes(None, None)?
            .iter()
            .map(|row| crate::report::Action::of_note(&crate::report::NoteItem::of(row))),
    );
    rows.sort_by(|a, b| b.at.total_cmp(&a.at).then(b.event_id.cmp(&a.event_id)));
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

/// The request every action of the screen starts from, as the command's flags would make
/// it: the operator, the reason, the channels, `force`, and that the screen made it.
fn request(source: &Source, ask: &Ask) -> crate::api::ActionRequest {
    crate::api::ActionRequest {
        via: Some(Via::Tui),
        operator: Some(source.operator.clone()),
        reason: ask.reason.clone(),
        channels: ask.channels.clone(),
        force: ask.force,
        ..crate::api::ActionRequest::default()
    }
}

/// The CLI's preview of `action` on `ids` as asked: each entry's line (a refusal's
/// remedy in the screen's terms), the pace, what each receiver does with a copy, and the
/// canary's plan; and the plan itself, carried out as previewed.
/// Where a dialog's act is made and the person it is recorded under, as the command
/// line's prompt names them: over the API, the operator with the key's name.
fn acting_as(source: &Source, store: &dyn Store) -> Result<String, StoreError> {
    Ok(format!(
        "in {} as {}",
        store.describe(),
        store.operator(&source.operator)?
    ))
}

fn preview(
    source: &Source,
    store: &dyn Store,
    action: Action,
    ids: Vec<String>,
    ask: Ask,
) -> Opened<Reply> {
    let request = request(source, &ask);
    let intents: Vec<Intent> = crate::session::intents(store, &ids, action, &request)?;
    // The channels to tick: what each replay would send, and for one refused (no reason
    // yet, say) what it would send once allowed, so a channel can be chosen first.
    let mut offered = ChannelSet::new();
    for intent in &intents {
        let channels = match (&intent.preview, &intent.verdict) {
            (Ok(approved), _) => approved.channels.clone(),
            (Err(_), Some(verdict)) => verdict.undelivered(),
            (Err(_), None) => ChannelSet::new(),
        };
        channels.iter().for_each(|c| {
            offered.insert(c);
        });
    }
    let plan = run::arrange(intents, ask.canary, ask.pace, source.wait)
        .map_err(crate::exit::Failure::usage)?;
    let all: Vec<Intent> = plan.all().cloned().collect();
    let mut told = crate::session::receivers(&all, source.sources.pagerduty.as_ref());
    told.extend(plan.words());
    let out = Output::plain(200);
    let lines: Vec<String> = crate::session::preview::Preview::of(&all, &told, &out, Terms::Screen)
        .all()
        .cloned()
        .collect();
    Ok(Reply::Preview {
        action,
        ids,
        ask,
        lines,
        acting: acting_as(source, store)?,
        plan: Arc::new(plan),
        offered,
    })
}

/// How long replays are waited on: `after` past the last one's due time.
fn wait_limit(after: Duration, last_due: Option<f64>) -> Duration {
    after + Duration::from_secs_f64(last_due.unwrap_or(0.0).clamp(0.0, 8.0 * 86_400.0))
}

/// Carries `plan` out on a store opened for writing, once the session takes `word` as
/// the confirmation for it: the canary first and waited on, the rest only once every
/// canary was delivered (waited on as long as the plan says), then the wait on every
/// replay, the source's wait past the last one's due time; `said` hears where it stands
/// after each step and each look. `stop` ends the carry-out after the entry in flight,
/// or the wait (what was sent goes on in the runtime).
fn carry(
    source: &Source,
    plan: &Plan,
    word: &str,
    stop: &AtomicBool,
    said: &dyn Fn(Reply),
) -> Result<Reply, Failure> {
    let approved: Vec<&Intent> = plan.all().filter(|i| i.preview.is_ok()).collect();
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
    let last_due = session::planned(&plan.rest).map(|planned| planned.last);
    let mut steps = Shown {
        store: store.as_ref(),
        stop,
        said,
        lines: Vec::new(),
        canary_timeout: plan.timeout,
        timeout: wait_limit(source.wait, last_due),
        clock: source.clock.as_ref(),
    };
    let ran = run::drive(plan, true, &mut steps)?;
    let mut lines = steps.lines;
    let summary = match &ran {
        Ran::Carried { outcomes, waited } => {
            let carried = session::summary(outcomes);
            match waited {
                Some(waited) => format!("{carried}; {}", waited.account(steps.timeout)),
                None => carried,
            }
        }
        Ran::CanaryInterrupted { waited, .. } => format!(
            "stopped while waiting on the canary: {}; nothing else was changed",
            waited.account(steps.canary_timeout)
        ),
        Ran::CanaryFailed { failed, .. } => {
            lines.push("Canary not delivered:".into());
            lines.extend(failed.iter().map(|line| format!("  {line}")));
            format!(
                "stopped after the canary: the other {} were not touched and are still in the DLQ",
                plan.rest_actionable()
            )
        }
    };
    Ok(Reply::Carried { lines, summary })
}

/// The screen's steps: each outcome and each settlement a line, and where the run
/// stands said after each.
struct Shown<'a> {
    store: &'a dyn Store,
    stop: &'a AtomicBool,
    said: &'a dyn Fn(Reply),
    lines: Vec<String>,
    /// How long the canary is waited on (it runs at once), and the replays (past the
    /// last one's due time).
    canary_timeout: Duration,
    timeout: Duration,
    clock: &'a dyn crate::clock::Clock,
}

impl Shown<'_> {
    fn say(&self, text: String) {
        (self.said)(Reply::Progress {
            text,
            lines: self.lines.clone(),
        });
    }
}

impl Steps for Shown<'_> {
    type Error = Failure;

    fn carry(&mut self, intents: &[Intent]) -> Result<Vec<Outcome>, Failure> {
        let total = intents.len();
        let mut done = 0;
        let outcomes =
            session::carry_out(self.store, intents, self.clock, &mut |intent, outcome| {
                done += 1;
                self.lines.push(format!(
                    "{}  {}",
                    crate::render::sanitize::clean(&intent.id),
                    outcome.label(intent.action)
                ));
                self.say(format!("carrying out: {done} of {total}"));
                if self.stop.load(Ordering::SeqCst) {
                    session::Flow::Stop
                } else {
                    session::Flow::Continue
                }
            });
        Ok(outcomes)
    }

    fn wait(&mut self, sent: &[(String, i64)], stage: Stage) -> Result<Waited, Failure> {
        let (verb, timeout) = match stage {
            Stage::Canary => ("canary", self.canary_timeout),
            Stage::Replays => ("replaying", self.timeout),
        };
        let mut watch = Watch::new(sent);
        let mut stopped = false;
        loop {
            let look = watch.look(self.store, self.clock.now())?;
            for settled in &look.settled {
                self.lines.push(settled.line(&Output::plain(200)));
            }
            let mut text = watch.progress().words(verb);
            if let Some(why) = look.unread.first() {
                text.push_str(&format!(
                    " (not read this time: {})",
                    crate::render::sanitize::clean(why)
                ));
            }
            self.say(text);
            if watch.is_done() || watch.elapsed() >= timeout {
                break;
            }
            if pause(self.stop, LOOK_EVERY) {
                stopped = true;
                break;
            }
        }
        Ok(watch.end(stopped))
    }
}

/// Waits `every`, or until `stop` is set (then true).
fn pause(stop: &AtomicBool, every: Duration) -> bool {
    let until = std::time::Instant::now() + every;
    while std::time::Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.load(Ordering::SeqCst)
}

/// The bundle of `report --bundle` for the window typed, or the incident's, written to a
/// new directory under the source's; what is said of it.
fn report(
    source: &Source,
    store: &dyn Store,
    since: Option<String>,
    until: Option<String>,
) -> Result<Reply, Failure> {
    let now = source.clock.now();
    let instant = |text: &str| {
        crate::clock::parse_instant(text, now).map_err(|err| {
            Failure::from(format!("{}: {err}", crate::render::sanitize::clean(text)))
        })
    };
    let (since, until) = match (since, until) {
        (Some(since), until) => (
            instant(&since)?,
            until.as_deref().map(instant).transpose()?.unwrap_or(now),
        ),
        (None, _) => crate::report::incident_window(store, now)?,
    };
    if since >= until || until > now {
        return Err("a report's window runs from its start to now at the latest"
            .to_string()
            .into());
    }
    let asked = crate::report::Asked {
        since,
        until,
        selection: Default::default(),
        sources: source.sources.clone(),
        now,
        fixed_at: None,
    };
    let stamp = crate::render::time::rfc3339(now).replace([':', '-', '.'], "");
    let dir = source.reports.join(format!("unsctl-report-{stamp}"));
    let written = crate::report::bundle::write(store, &asked, &dir)?;
    // Where first: the rest may wrap past the rows a message has at 80 columns.
    Ok(Reply::Reported {
        said: format!(
            "report written to {} ({}); {} checks it; window {} to {}",
            crate::render::sanitize::clean(&dir.display().to_string()),
            written.headline(),
            crate::report::bundle::check_command(&dir),
            crate::render::time::rfc3339(since),
            crate::render::time::rfc3339(until),
        ),
    })
}

fn verify_lines(asked: &crate::verify::Asked) -> Vec<String> {
    // As the command says it, up front.
    let mut lines: Vec<String> = asked
        .unread
        .iter()
        .map(|what| crate::verify::unread_line(what))
        .collect();
    lines.extend(asked.answers.iter().map(|answer| {
        format!(
            "{}  {} attempt {}/{}  {}  {}",
            crate::render::sanitize::clean(&answer.id),
            answer.channel,
            answer.cycle,
            answer.attempt,
            answer.answer.as_str(),
            // Whole: a CANNOT_TELL's reason is what a person checks by hand next.
            crate::render::views::said(&answer.evidence)
        )
    }));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit reads an act's notification again only once the row the listing shows
    /// has moved, and never keeps a history it could not read.
    #[test]
    fn what_followed_an_act_is_read_again_only_when_its_row_moved() {
        let doc: crate::api::NotificationDoc = serde_json::from_value(serde_json::json!({
            "id": "n-1", "status": "RESOLVED", "dead_letter": false, "attempts": 1,
            "cycle": 1, "cycle_attempts": 1, "max_attempts": 1, "channels": ["SLACK"],
            "payload": {}, "idempotency_key": null, "lease_token": null,
            "lease_until": null, "next_attempt_at": 0, "error_message": null,
            "created_at": 0, "updated_at": 0, "events": []
        }))
        .expect("doc");
        let mut event = crate::api::EventRow {
            id: 7,
            notification_id: "n-1".into(),
            at: 10.0,
            kind: "DLQ_RESOLVED".into(),
            payload: crate::model::payload_from_value(&serde_json::json!({})),
            status: "RESOLVED".into(),
            dead_letter: false,
            attempts: 1,
            cycle: 1,
            unreadable: Vec::new(),
        };
        let mut kept = HashMap::new();
        let reads = std::cell::Cell::new(0);
        let mut look = |event: &crate::api::EventRow, found: bool| {
            followed_of(&mut kept, event, 20.0, |_| {
                reads.set(reads.get() + 1);
                found.then(|| doc.clone())
            })
        };
        assert_eq!(look(&event, false), "its history could not be read");
        assert_eq!(
            look(&event, true),
            "left the DLQ as RESOLVED; nothing was sent"
        );
        assert_eq!(reads.get(), 2, "an unread history is asked for again");
        look(&event, true);
        assert_eq!(reads.get(), 2, "nothing moved: kept");
        event.attempts = 2;
        look(&event, true);
        assert_eq!(reads.get(), 3, "the row moved: read again");
    }
}
