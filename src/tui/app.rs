//! The screen's state, and what each key and each reply does to it. No IO here: a key
//! returns the [`Job`]s to start, a reply is absorbed, and time is passed in, so every
//! flow can be driven by a test without a terminal or a clock.

use super::filter::Filter;
use super::jobs::{Ask, ContextRow, Job, Reply, Row};
use super::keymap::Command;
pub use super::keymap::ViewKind;
use crate::model::{Channel, ChannelSet};
use crate::pulse::Pulse;
use crate::reconcile::{Recent, Reconciled};
use crate::remediation::Action;
use crate::session::canary::Plan;
use crate::session::pace::Pace;
use crate::triage::Branch;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Keys typed this soon after a dialog opens are dropped: a key meant for the screen
/// below never answers a question it did not see.
pub const DIALOG_GRACE: Duration = Duration::from_millis(300);

/// How often the DLQ is counted by branch while nothing changes it from here.
pub const RECOUNT: Duration = Duration::from_secs(10);

/// How often the reconcile and contexts views read again, at the most.
pub const SLOW_REFRESH: Duration = Duration::from_secs(15);

/// How the screen was started.
#[derive(Debug, Clone)]
pub struct Started {
    /// The store, as every command describes it.
    pub place: String,
    pub operator: String,
    /// Why no action can run, when none can: `--readonly`, the context's setting,
    /// `--all-contexts`.
    pub readonly: Option<String>,
    pub color: bool,
    /// How often the view in front is read again.
    pub refresh: Duration,
    /// The pulse's window, back from now.
    pub pulse_span: f64,
}

/// Where a line of input goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Filter(String),
    Command(String),
}

/// The field of a dialog that has the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Cancel,
    /// The channel checkboxes of a replay (←/→ move, space ticks).
    Channels,
    Canary,
    Pace,
    /// Override the guardrails on purpose (a resolve: give it up); needs the reason.
    Force,
    Reason,
    Word,
    Go,
}

/// What a dialog will do, as previewed.
#[derive(Debug, Clone)]
pub enum Prepared {
    Act { action: Action, plan: Arc<Plan> },
    Record { asked: Arc<crate::verify::Asked> },
}

/// The most bytes a reason, a filter or a command typed on the screen holds.
const FIELD_ROOM: usize = 500;

/// What the screen says when a key finds `what` full: the rest of a paste is not taken.
fn full(what: &str) -> String {
    format!("{what} holds at most {FIELD_ROOM} characters: what was typed past them was not taken")
}

/// An action's dialog: the preview, what it asks (channels, canary, pace, forced, the
/// reason), the typed word, and Cancel first; then the carry-out's progress, then its
/// outcome.
#[derive(Debug, Clone)]
pub struct Dialog {
    pub title: String,
    pub ids: Vec<String>,
    pub action: Option<Action>,
    pub lines: Vec<String>,
    /// Where the act is made and who it is recorded under, once previewed: what the
    /// command line's prompt names.
    pub acting: Option<String>,
    pub prepared: Option<Prepared>,
    /// The channel checkboxes: each channel a replay would cover, and whether it is
    /// ticked; `channel_at` is the one the keys are on.
    pub channels: Vec<(Channel, bool)>,
    pub channel_at: usize,
    pub canary: String,
    pub pace: String,
    pub force: bool,
    pub reason: String,
    pub word: String,
    pub focus: Focus,
    pub opened: Instant,
    /// What the preview on screen was read with: the plan is carried out only as shown.
    pub previewed: Option<Ask>,
    /// How many it would change, and the word that confirms them.
    pub count: usize,
    /// Verify: the entries the answers to record are over.
    pub entries: usize,
    /// A carry-out under way: where it stands, and the flag that stops it.
    pub progress: Option<String>,
    pub stop: Option<Arc<AtomicBool>>,
    /// The outcome, once carried out: the dialog then only closes.
    pub done: Option<Vec<String>>,
    pub scroll: u16,
    pub note: Option<String>,
}

impl Dialog {
    fn new(action: Option<Action>, ids: Vec<String>, now: Instant) -> Self {
        let count = crate::render::output::counted(ids.len() as i64, "entry");
        Self {
            title: format!(
                "{} {count}",
                action.map_or("verify and record", Action::as_str)
            ),
            ids,
            action,
            lines: Vec::new(),
            acting: None,
            prepared: None,
            channels: Vec::new(),
            channel_at: 0,
            canary: String::new(),
            pace: String::new(),
            force: false,
            reason: String::new(),
            word: String::new(),
            focus: Focus::Cancel,
            opened: now,
            previewed: None,
            count: 0,
            entries: 0,
            progress: None,
            stop: None,
            done: None,
            scroll: 0,
            note: None,
        }
    }

    pub fn word_needed(&self) -> String {
        crate::session::confirmation_word(self.count)
    }

    /// The fields Tab moves through, in order: Cancel first, where a dialog starts.
    pub fn fields(&self) -> &'static [Focus] {
        use Focus::*;
        match self.action {
            Some(Action::Replay) => &[Cancel, Channels, Canary, Pace, Force, Reason, Word, Go],
            Some(Action::Resolve) => &[Cancel, Force, Reason, Word, Go],
            None => &[Cancel, Reason, Word, Go],
        }
    }

    /// What the fields ask for, read as the command's flags would be; or what is wrong
    /// with one of them.
    pub fn ask(&self) -> Result<Ask, String> {
        let canary = match self.canary.trim() {
            "" => None,
            text => Some(
                text.parse::<u16>()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or("the canary is a number of entries, 1 to 1000")?,
            ),
        };
        let ticked: ChannelSet = self
            .channels
            .iter()
            .filter(|(_, on)| *on)
            .map(|(c, _)| *c)
            .collect();
        let every = self.channels.iter().all(|(_, on)| *on);
        Ok(Ask {
            reason: reason_of(&self.reason),
            channels: (!every).then_some(ticked),
            canary,
            pace: Pace::parse(&self.pace)?,
            force: self.force,
        })
    }

    /// A preview read with `ask`: shown, unless the fields have changed since it was
    /// asked for (a newer one is on its way).
    fn take_preview(
        &mut self,
        ask: Ask,
        lines: Vec<String>,
        acting: String,
        prepared: Prepared,
        offered: ChannelSet,
    ) {
        if self.ask() != Ok(ask.clone()) {
            return;
        }
        if self.channels.is_empty() && ask.channels.is_none() {
            self.channels = offered.iter().map(|c| (c, true)).collect();
        }
        if let Prepared::Act { plan, .. } = &prepared {
            self.count = plan.all().filter(|i| i.preview.is_ok()).count();
        }
        self.lines = lines;
        self.acting = Some(acting);
        self.note = (self.count == 0).then(|| {
            "Nothing here can be carried out: each refusal above says why and what would allow it."
                .to_string()
        });
        self.previewed = Some(ask);
        self.prepared = Some(prepared);
    }

    /// Verify's answers, read for the dialog: what can be recorded, and the lines.
    fn take_answers(
        &mut self,
        asked: std::sync::Arc<crate::verify::Asked>,
        lines: Vec<String>,
        acting: String,
    ) {
        let recordable: Vec<&str> = asked
            .answers
            .iter()
            .filter(|a| a.answer.finding().is_some())
            .map(|a| a.id.as_str())
            .collect();
        self.count = recordable.len();
        self.entries = recordable.iter().collect::<BTreeSet<_>>().len();
        self.lines = lines;
        self.acting = Some(acting);
        self.note = Some(if self.count == 0 {
            "No answer to record: CANNOT_TELL is never written down; check by hand.".to_string()
        } else {
            format!(
                "{} over {} can be recorded; CANNOT_TELL is never written down.",
                crate::render::output::counted(self.count as i64, "answer"),
                crate::render::output::counted(self.entries as i64, "entry")
            )
        });
        self.previewed = self.ask().ok();
        self.prepared = Some(Prepared::Record { asked });
    }

    /// The title as the forced choice reads: giving up is said as such.
    fn retitle(&mut self) {
        let count = crate::render::output::counted(self.ids.len() as i64, "entry");
        self.title = match (self.action, self.force) {
            (Some(Action::Resolve), true) => format!("give up {count} on purpose (forced)"),
            (Some(Action::Replay), true) => format!("replay {count}, forced"),
            (action, _) => format!(
                "{} {count}",
                action.map_or("verify and record", Action::as_str)
            ),
        };
    }
}

/// The DLQ view.
#[derive(Debug, Default)]
pub struct DlqView {
    pub filter: Filter,
    pub rows: Vec<Row>,
    /// The cursor each page before this one was read from.
    pub pages: Vec<Option<String>>,
    pub cursor: Option<String>,
    pub next: Option<String>,
    pub selected: usize,
    pub offset: usize,
    pub marks: BTreeSet<String>,
    pub counts: Option<BTreeMap<Branch, usize>>,
    /// What each row looked like at the last read: rows that changed since are marked.
    seen: HashMap<String, (Branch, Option<i64>)>,
    pub changed: BTreeSet<String>,
    pub loaded: Option<Instant>,
    pub counted: Option<Instant>,
}

impl DlqView {
    pub fn current(&self) -> Option<&Row> {
        self.rows.get(self.selected)
    }
}

#[derive(Debug, Default)]
pub struct InspectView {
    pub id: String,
    pub lines: Vec<String>,
    pub next_step: Option<crate::model::command::Step>,
    pub scroll: u16,
    pub loaded: Option<Instant>,
}

#[derive(Debug, Default)]
pub struct ReconcileView {
    /// When it was read, by the wall clock.
    pub now: f64,
    pub items: Vec<Reconciled>,
    pub recent: Option<Recent>,
    pub channels: Vec<crate::model::Channel>,
    /// The records named that could not be read, and why.
    pub unread: Vec<String>,
    pub selected: usize,
    pub loaded: Option<Instant>,
}

impl ReconcileView {
    /// What needs a person, in the one order ([`crate::reconcile::person_order`]).
    pub fn needs(&self) -> Vec<&Reconciled> {
        let mut needs: Vec<&Reconciled> = self
            .items
            .iter()
            .filter(|i| i.class != crate::reconcile::Class::Once)
            .collect();
        needs.sort_by(|a, b| crate::reconcile::person_order(a, b));
        needs
    }
}

/// The providers view: doctor's figures per provider, read again in the background.
#[derive(Debug, Default)]
pub struct ProvidersView {
    pub read: Option<super::jobs::Providers>,
    pub loaded: Option<Instant>,
}

#[derive(Debug, Default)]
pub struct PulseView {
    pub pulse: Option<Pulse>,
    pub now: f64,
    pub loaded: Option<Instant>,
}

#[derive(Debug)]
pub struct ListView<T> {
    pub rows: Vec<T>,
    pub selected: usize,
    pub loaded: Option<Instant>,
}

impl<T> Default for ListView<T> {
    fn default() -> Self {
        Self {
            rows: Vec::new(),
            selected: 0,
            loaded: None,
        }
    }
}

/// A message under the view: what happened, or why nothing did.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub text: String,
    pub error: bool,
    /// It tells that this read (a job's label) failed: it goes once that read answers,
    /// so a store back after an outage is not shown as failing beside fresh data.
    pub failed_read: Option<&'static str>,
}

/// A request in flight.
#[derive(Debug, Clone)]
pub struct Pending {
    pub label: &'static str,
    pub since: Instant,
    /// A read the screen makes again at each refresh ([`Job::reads`]).
    pub reads: bool,
}

/// The whole screen.
pub struct App {
    pub config: Started,
    pub view: ViewKind,
    pub dlq: DlqView,
    pub inspect: InspectView,
    pub reconcile: ReconcileView,
    pub pulse: PulseView,
    pub audit: ListView<crate::report::Action>,
    pub contexts: ListView<ContextRow>,
    pub providers: ProvidersView,
    pub input: Option<Input>,
    pub dialog: Option<Dialog>,
    pub help: bool,
    pub message: Option<Message>,
    pub pending: BTreeMap<u64, Pending>,
    /// Text to put on the terminal's clipboard (OSC 52), taken by the loop.
    pub clipboard: Option<String>,
    /// The worker is stuck or cancelled: the loop starts a fresh one.
    pub restart_worker: bool,
    /// A context chosen in the contexts view: the loop moves the screen to it.
    pub switch_to: Option<String>,
    /// After a read failed or was cancelled: not asked again before this.
    retry_after: Option<Instant>,
    /// The backend's pages did not move forward: nothing is read again by itself.
    halted: bool,
    pub quit: bool,
    /// The width the inspect text is laid out for.
    pub width: u16,
    /// Ids as the shortest prefix that names each alone in the store, for the narrow
    /// columns of reconcile and audit (`y` copies the whole id).
    pub short: HashMap<String, String>,
    next_seq: u64,
    back: Vec<ViewKind>,
}

impl App {
    pub fn new(config: Started) -> Self {
        Self {
            config,
            view: ViewKind::Dlq,
            dlq: DlqView::default(),
            inspect: InspectView::default(),
            reconcile: ReconcileView::default(),
            pulse: PulseView::default(),
            audit: ListView::default(),
            contexts: ListView::default(),
            providers: ProvidersView::default(),
            input: None,
            dialog: None,
            help: false,
            message: None,
            pending: BTreeMap::new(),
            clipboard: None,
            restart_worker: false,
            switch_to: None,
            retry_after: None,
            halted: false,
            quit: false,
            width: 80,
            short: HashMap::new(),
            next_seq: 0,
            back: Vec::new(),
        }
    }

    /// Forgets what every view read: the screen now shows another store.
    pub fn reset_views(&mut self) {
        self.short.clear();
        self.dlq = DlqView::default();
        self.inspect = InspectView::default();
        self.reconcile = ReconcileView::default();
        self.pulse = PulseView::default();
        self.audit = ListView::default();
        self.providers = ProvidersView::default();
        self.pending.clear();
        self.back.clear();
    }

    /// Numbers a job for the worker and remembers it is in flight.
    fn start(&mut self, job: Job, now: Instant, jobs: &mut Vec<(u64, Job)>) {
        self.next_seq += 1;
        self.pending.insert(
            self.next_seq,
            Pending {
                label: job.label(),
                since: now,
                reads: job.reads(),
            },
        );
        jobs.push((self.next_seq, job));
    }

    fn busy_with(&self, label: &str) -> bool {
        self.pending.values().any(|p| p.label == label)
    }

    /// Opens `view` (with its id for inspect) and reads it.
    pub fn open(&mut self, view: ViewKind, id: Option<String>, now: Instant) -> Vec<(u64, Job)> {
        if view != self.view {
            self.back.push(self.view);
        }
        self.view = view;
        if let Some(id) = id {
            self.inspect = InspectView {
                id,
                ..InspectView::default()
            };
        }
        self.load(now)
    }

    /// Reads the view in front again.
    pub fn load(&mut self, now: Instant) -> Vec<(u64, Job)> {
        self.retry_after = None;
        let mut jobs = Vec::new();
        match self.view {
            ViewKind::Dlq => {
                let job = Job::Dlq {
                    filter: self.dlq.filter.clone(),
                    cursor: self.dlq.cursor.clone(),
                };
                if !self.busy_with(job.label()) {
                    self.start(job, now, &mut jobs);
                }
                // Counting the whole DLQ is the costly read: at most every RECOUNT, and
                // at once after a change or a new filter.
                let counts = Job::Counts {
                    filter: self.dlq.filter.clone(),
                };
                let due = self
                    .dlq
                    .counted
                    .is_none_or(|at| now.duration_since(at) >= RECOUNT);
                if due && !self.busy_with(counts.label()) {
                    self.start(counts, now, &mut jobs);
                }
            }
            ViewKind::Inspect if !self.inspect.id.is_empty() => {
                let job = Job::Inspect {
                    id: self.inspect.id.clone(),
                    width: self.width.saturating_sub(2).max(40),
                };
                self.start(job, now, &mut jobs);
            }
            ViewKind::Inspect => {}
            ViewKind::Reconcile => self.start(Job::Reconcile, now, &mut jobs),
            ViewKind::Pulse => {
                let span = self.config.pulse_span;
                self.start(Job::Pulse { span }, now, &mut jobs);
            }
            ViewKind::Audit => self.start(Job::Audit, now, &mut jobs),
            ViewKind::Contexts => self.start(Job::Contexts, now, &mut jobs),
            ViewKind::Providers => self.start(Job::Providers, now, &mut jobs),
        }
        jobs
    }

    /// When the view in front was last read.
    pub fn loaded(&self) -> Option<Instant> {
        match self.view {
            ViewKind::Dlq => self.dlq.loaded,
            ViewKind::Inspect => self.inspect.loaded,
            ViewKind::Reconcile => self.reconcile.loaded,
            ViewKind::Pulse => self.pulse.loaded,
            ViewKind::Audit => self.audit.loaded,
            ViewKind::Contexts => self.contexts.loaded,
            ViewKind::Providers => self.providers.loaded,
        }
    }

    /// The view in front is read again when it is older than the refresh, unless a read
    /// is in flight or a dialog is open before its act. Beneath the outcome of an act the
    /// view is read again at once, so what it changed is on screen when the dialog closes.
    pub fn tick(&mut self, now: Instant) -> Vec<(u64, Job)> {
        let reading = self
            .pending
            .values()
            .any(|p| p.label != "counting" && p.label != "asking every context");
        if self.dialog.as_ref().is_some_and(|d| d.done.is_none())
            || reading
            || self.halted
            || self.retry_after.is_some_and(|at| now < at)
        {
            return Vec::new();
        }
        // Reconciling every notification and asking every context are whole reads: not
        // at every refresh.
        let every = match self.view {
            ViewKind::Reconcile | ViewKind::Contexts | ViewKind::Providers => {
                self.config.refresh.max(SLOW_REFRESH)
            }
            _ => self.config.refresh,
        };
        match self.loaded() {
            Some(at) if now.duration_since(at) < every => Vec::new(),
            None if !self.pending.is_empty() => Vec::new(),
            _ => self.load(now),
        }
    }

    pub fn say(&mut self, text: impl Into<String>, error: bool) {
        self.message = Some(Message {
            text: text.into(),
            error,
            failed_read: None,
        });
    }

    /// Takes what the worker sent back for job `seq` (nothing, if it was cancelled).
    pub fn absorb(&mut self, seq: u64, reply: Reply, now: Instant) {
        if let Reply::Progress { text, lines } = reply {
            self.progress(seq, text, lines);
            return;
        }
        let Some(pending) = self.pending.remove(&seq) else {
            return;
        };
        self.read_answered(&pending, &reply);
        match reply {
            Reply::Dlq {
                filter,
                cursor,
                rows,
                next,
                stopped,
            } => {
                if filter != self.dlq.filter || cursor != self.dlq.cursor {
                    return;
                }
                self.take_rows(rows, next, now);
                if let Some(error) = stopped {
                    self.halt("reading the DLQ", &error);
                }
            }
            Reply::Counts { filter, counts } => {
                if filter == self.dlq.filter {
                    self.dlq.counts = Some(counts);
                    self.dlq.counted = Some(now);
                }
            }
            Reply::Inspect {
                asked,
                id,
                lines,
                next_step,
            } => {
                if asked == self.inspect.id || id == self.inspect.id {
                    self.inspect.id = id;
                    self.inspect.lines = lines;
                    self.inspect.next_step = next_step;
                    self.inspect.loaded = Some(now);
                }
            }
            Reply::Reconcile {
                items,
                recent,
                channels,
                unread,
                now: at,
                short,
            } => {
                self.short.extend(short);
                self.reconcile.now = at;
                self.reconcile.items = items;
                self.reconcile.recent = Some(recent);
                self.reconcile.channels = channels;
                self.reconcile.unread = unread;
                self.reconcile.loaded = Some(now);
            }
            Reply::Pulse { pulse, now: at } => {
                self.pulse.pulse = Some(pulse);
                self.pulse.now = at;
                self.pulse.loaded = Some(now);
            }
            Reply::Audit { rows, short } => {
                self.short.extend(short);
                self.audit.rows = rows;
                self.audit.loaded = Some(now);
            }
            Reply::Contexts(rows) => {
                self.contexts.rows = rows;
                self.contexts.loaded = Some(now);
            }
            Reply::Providers(read) => {
                self.providers.read = Some(read);
                self.providers.loaded = Some(now);
            }
            reply => self.absorb_action(reply, pending.reads, now),
        }
    }

    /// A read answered: a failure of it said before is over (the store answers again).
    fn read_answered(&mut self, pending: &Pending, reply: &Reply) {
        if pending.reads
            && !matches!(reply, Reply::Failed { .. })
            && self
                .message
                .as_ref()
                .is_some_and(|m| m.failed_read == Some(pending.label))
        {
            self.message = None;
        }
    }

    /// Where a carry-out in flight stands (not its end).
    fn progress(&mut self, seq: u64, text: String, lines: Vec<String>) {
        if self.pending.contains_key(&seq)
            && let Some(dialog) = self.dialog.as_mut()
        {
            dialog.progress = Some(text);
            dialog.lines = lines;
        }
    }

    fn take_rows(&mut self, rows: Vec<Row>, next: Option<String>, now: Instant) {
        let first_read = self.dlq.loaded.is_none() || self.dlq.seen.is_empty();
        let mut changed = BTreeSet::new();
        for row in &rows {
            let look = (row.verdict.branch, row.verdict.last_event_id);
            match self.dlq.seen.insert(row.verdict.id.clone(), look) {
                Some(before) if before != look => {
                    changed.insert(row.verdict.id.clone());
                }
                None if !first_read => {
                    changed.insert(row.verdict.id.clone());
                }
                _ => {}
            }
        }
        // A row keeps its mark as changed until the next change elsewhere is seen.
        if !changed.is_empty() {
            self.dlq.changed = changed;
        }
        // Only the rows on screen are remembered: paging on holds one page.
        let live: std::collections::HashSet<&str> =
            rows.iter().map(|r| r.verdict.id.as_str()).collect();
        self.dlq.seen.retain(|id, _| live.contains(id.as_str()));
        // The same entry stays under the cursor when rows come and go.
        let keep = self.dlq.current().map(|r| r.verdict.id.clone());
        self.dlq.rows = rows;
        self.dlq.next = next;
        self.dlq.selected = keep
            .and_then(|id| self.dlq.rows.iter().position(|r| r.verdict.id == id))
            .unwrap_or(self.dlq.selected)
            .min(self.dlq.rows.len().saturating_sub(1));
        let live: BTreeSet<&String> = self.dlq.rows.iter().map(|r| &r.verdict.id).collect();
        self.dlq.marks.retain(|id| live.contains(id));
        self.dlq.loaded = Some(now);
        // The first page read empty while the counts say there are entries: the counts
        // are older than the rows, so they are not shown until counted again.
        let counted: usize = self.dlq.counts.iter().flat_map(|c| c.values()).sum();
        if self.dlq.rows.is_empty() && self.dlq.cursor.is_none() && counted > 0 {
            self.dlq.counts = None;
            self.dlq.counted = None;
        }
    }

    /// `reads`: the reply is to a read the screen makes again at each refresh.
    fn absorb_action(&mut self, reply: Reply, reads: bool, now: Instant) {
        match reply {
            Reply::Preview {
                action,
                ids,
                ask,
                lines,
                acting,
                plan,
                offered,
            } => {
                if let Some(dialog) = self.dialog.as_mut()
                    && dialog.ids == ids
                    && dialog.action == Some(action)
                {
                    dialog.take_preview(
                        ask,
                        lines,
                        acting,
                        Prepared::Act { action, plan },
                        offered,
                    );
                }
            }
            Reply::Verified {
                asked,
                lines,
                acting,
            } => {
                if let Some(dialog) = self.dialog.as_mut() {
                    dialog.take_answers(asked, lines, acting);
                }
            }
            Reply::Carried { lines, summary } => {
                if let Some(dialog) = self.dialog.as_mut() {
                    let mut done = lines;
                    done.push(summary.clone());
                    dialog.done = Some(done);
                    dialog.progress = None;
                    dialog.stop = None;
                }
                self.say(summary, false);
                self.dlq_changed();
            }
            Reply::Reported { said } => self.say(said, false),
            Reply::Recorded { lines } => {
                if let Some(dialog) = self.dialog.as_mut() {
                    dialog.done = Some(lines);
                }
                self.say("answers recorded", false);
                self.dlq_changed();
            }
            Reply::Failed { what, error } => {
                if let Some(dialog) = self.dialog.as_mut() {
                    if dialog.stop.take().is_some() {
                        dialog.progress = None;
                        dialog.done = Some(vec![format!("{what} failed: {error}")]);
                    } else if dialog.prepared.is_none() {
                        dialog.note = Some(format!("{what} failed: {error}"));
                    }
                }
                if error.stops_reading() {
                    self.halt(what, &error);
                    return;
                }
                self.say(format!("{what} failed: {error}"), true);
                if reads && let Some(message) = self.message.as_mut() {
                    message.failed_read = Some(what);
                }
                self.retry_later(now);
            }
            _ => {}
        }
    }

    /// Reading again would page the same answer for ever: nothing is read by itself
    /// until someone asks (R).
    fn halt(&mut self, what: &str, error: &super::jobs::Failure) {
        self.halted = true;
        self.say(format!("{what} stopped (R reads again): {error}"), true);
    }

    /// A read that failed or was cancelled is tried again at the next refresh, not at
    /// once: a backend that does not answer is not asked again and again.
    fn retry_later(&mut self, now: Instant) {
        self.retry_after = Some(now + self.config.refresh);
        if self.view == ViewKind::Dlq {
            self.dlq.counted = self.dlq.counted.or(Some(now));
        }
    }

    /// An act changed the DLQ: its rows and counts are read again, and the counts of
    /// before are not shown over the rows of after.
    fn dlq_changed(&mut self) {
        // A read started before the act answers for the DLQ before it: dropped.
        self.pending
            .retain(|_, p| !matches!(p.label, "counting" | "reading the DLQ"));
        self.dlq.loaded = None;
        self.dlq.counted = None;
        self.dlq.counts = None;
        self.refresh_soon();
    }

    fn refresh_soon(&mut self) {
        self.inspect.loaded = None;
        self.audit.loaded = None;
        self.pulse.loaded = None;
        self.reconcile.loaded = None;
    }

    /// One key. Returns the jobs it starts.
    pub fn key(&mut self, key: KeyEvent, now: Instant) -> Vec<(u64, Job)> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c')) {
            // A carry-out under way is stopped first (the entry in flight finishes); a
            // second Ctrl-C quits.
            if let Some(stop) = self.dialog.as_ref().and_then(|d| d.stop.as_ref())
                && !stop.swap(true, Ordering::SeqCst)
            {
                self.say("stopping the carry-out: Ctrl-C again quits", true);
                return Vec::new();
            }
            self.quit = true;
            return Vec::new();
        }
        if self.dialog.is_some() {
            return self.dialog_key(key, now);
        }
        if let Some(input) = self.input.clone() {
            return self.input_key(input, key, now);
        }
        if self.help {
            self.help = false;
            return Vec::new();
        }
        let Some(command) = super::keymap::command_of(key.code, self.view) else {
            return Vec::new();
        };
        self.command(command, now)
    }

    fn command(&mut self, command: Command, now: Instant) -> Vec<(u64, Job)> {
        match command {
            Command::Quit => self.quit = true,
            Command::Help => self.help = true,
            Command::Filter if self.view == ViewKind::Dlq => {
                self.input = Some(Input::Filter(self.dlq.filter.text.clone()));
            }
            Command::CommandBar => self.input = Some(Input::Command(String::new())),
            Command::Back => return self.back(now),
            Command::Refresh => {
                self.halted = false;
                return self.load(now);
            }
            Command::Up | Command::Down | Command::PageUp | Command::PageDown => {
                return self.move_by(command, now);
            }
            Command::Top | Command::Bottom => return self.move_by(command, now),
            Command::Mark if self.view == ViewKind::Dlq => {
                if let Some(id) = self.dlq.current().map(|r| r.verdict.id.clone())
                    && !self.dlq.marks.remove(&id)
                {
                    self.dlq.marks.insert(id);
                }
                return self.move_by(Command::Down, now);
            }
            Command::ClearMarks => self.dlq.marks.clear(),
            Command::Open => return self.open_current(now),
            Command::CopyId => self.copy(false),
            Command::CopyStep => self.copy(true),
            Command::Resolve => return self.act(Some(Action::Resolve), now),
            Command::Replay => return self.act(Some(Action::Replay), now),
            Command::Verify => return self.act(None, now),
            _ => {}
        }
        Vec::new()
    }

    /// Esc: a request in flight is cancelled first (its worker abandoned), then the view
    /// goes back.
    fn back(&mut self, now: Instant) -> Vec<(u64, Job)> {
        if !self.pending.is_empty() {
            let labels: BTreeSet<&str> = self.pending.values().map(|p| p.label).collect();
            self.say(
                format!(
                    "cancelled: {}",
                    labels.into_iter().collect::<Vec<_>>().join(", ")
                ),
                false,
            );
            self.pending.clear();
            self.restart_worker = true;
            self.retry_later(now);
            return Vec::new();
        }
        match self.back.pop() {
            Some(view) => {
                self.view = view;
                if self.loaded().is_none() {
                    return self.load(now);
                }
            }
            None if self.view != ViewKind::Dlq => {
                self.view = ViewKind::Dlq;
                return self.load(now);
            }
            None => {}
        }
        Vec::new()
    }

    fn move_by(&mut self, command: Command, now: Instant) -> Vec<(u64, Job)> {
        let step = |selected: &mut usize, len: usize, page: usize| {
            let last = len.saturating_sub(1);
            *selected = match command {
                Command::Up => selected.saturating_sub(1),
                Command::Down => (*selected + 1).min(last),
                Command::PageUp => selected.saturating_sub(page),
                Command::PageDown => (*selected + page).min(last),
                Command::Top => 0,
                _ => last,
            };
        };
        match self.view {
            ViewKind::Dlq => return self.move_dlq(command, now),
            ViewKind::Inspect => {
                let scroll = &mut self.inspect.scroll;
                *scroll = match command {
                    Command::Up => scroll.saturating_sub(1),
                    Command::Down => scroll.saturating_add(1),
                    Command::PageUp => scroll.saturating_sub(10),
                    Command::PageDown => scroll.saturating_add(10),
                    Command::Top => 0,
                    _ => self.inspect.lines.len().saturating_sub(5) as u16,
                };
            }
            ViewKind::Reconcile => {
                let len = self.reconcile.needs().len();
                step(&mut self.reconcile.selected, len, 10);
            }
            ViewKind::Audit => step(&mut self.audit.selected, self.audit.rows.len(), 10),
            ViewKind::Contexts => step(&mut self.contexts.selected, self.contexts.rows.len(), 10),
            ViewKind::Pulse | ViewKind::Providers => {}
        }
        Vec::new()
    }

    /// Moving in the DLQ: within the page, or onto the next or previous page, read then.
    fn move_dlq(&mut self, command: Command, now: Instant) -> Vec<(u64, Job)> {
        let len = self.dlq.rows.len();
        let at_end = self.dlq.selected + 1 >= len;
        let forward = matches!(command, Command::Down | Command::PageDown);
        let backward = matches!(command, Command::Up | Command::PageUp);
        if forward && at_end && self.dlq.next.is_some() {
            self.dlq.pages.push(self.dlq.cursor.take());
            self.dlq.cursor = self.dlq.next.take();
            self.dlq.selected = 0;
            self.dlq.offset = 0;
            return self.load_page(now);
        }
        if backward && self.dlq.selected == 0 && !self.dlq.pages.is_empty() {
            self.dlq.cursor = self.dlq.pages.pop().flatten();
            self.dlq.selected = usize::MAX;
            return self.load_page(now);
        }
        if matches!(command, Command::Top) && !self.dlq.pages.is_empty() {
            self.dlq.pages.clear();
            self.dlq.cursor = None;
            self.dlq.selected = 0;
            return self.load_page(now);
        }
        let last = len.saturating_sub(1);
        self.dlq.selected = match command {
            Command::Up => self.dlq.selected.saturating_sub(1),
            Command::Down => (self.dlq.selected + 1).min(last),
            Command::PageUp => self.dlq.selected.saturating_sub(10),
            Command::PageDown => (self.dlq.selected + 10).min(last),
            Command::Top => 0,
            _ => last,
        };
        Vec::new()
    }

    fn load_page(&mut self, now: Instant) -> Vec<(u64, Job)> {
        let mut jobs = Vec::new();
        self.start(
            Job::Dlq {
                filter: self.dlq.filter.clone(),
                cursor: self.dlq.cursor.clone(),
            },
            now,
            &mut jobs,
        );
        jobs
    }

    fn open_current(&mut self, now: Instant) -> Vec<(u64, Job)> {
        if self.view == ViewKind::Contexts {
            if let Some(row) = self.contexts.rows.get(self.contexts.selected) {
                self.switch_to = Some(row.name.clone());
            }
            return Vec::new();
        }
        let id = match self.view {
            ViewKind::Dlq => self.dlq.current().map(|r| r.verdict.id.clone()),
            ViewKind::Reconcile => self
                .reconcile
                .needs()
                .get(self.reconcile.selected)
                .map(|i| i.id.clone()),
            ViewKind::Audit => self
                .audit
                .rows
                .get(self.audit.selected)
                .map(|r| r.notification_id.clone()),
            _ => None,
        };
        match id {
            Some(id) => self.open(ViewKind::Inspect, Some(id), now),
            None => Vec::new(),
        }
    }

    /// The id under the cursor, and its next step.
    fn current(&self) -> Option<(String, Option<crate::model::command::Step>)> {
        match self.view {
            ViewKind::Dlq => self
                .dlq
                .current()
                .map(|r| (r.verdict.id.clone(), Some(r.verdict.next_step.clone()))),
            ViewKind::Inspect => (!self.inspect.id.is_empty())
                .then(|| (self.inspect.id.clone(), self.inspect.next_step.clone())),
            ViewKind::Reconcile => self
                .reconcile
                .needs()
                .get(self.reconcile.selected)
                .map(|i| (i.id.clone(), None)),
            ViewKind::Audit => self
                .audit
                .rows
                .get(self.audit.selected)
                .map(|r| (r.notification_id.clone(), None)),
            _ => None,
        }
    }

    /// Copies the id, or the next step's command, exactly as shown and as one line; a
    /// value that cannot stand on one line is not copied (DESIGN §5).
    fn copy(&mut self, step: bool) {
        use crate::model::command::CommandLine;
        match (self.current(), step) {
            (Some((id, _)), false) => {
                match CommandLine::unsctl(&[]).operand(crate::model::command::THE_ID, &id) {
                    Ok(_) => {
                        self.say(format!("copied {id}"), false);
                        self.clipboard = Some(id);
                    }
                    Err(err) => self.say(format!("not copied: {err}"), true),
                }
            }
            (Some((_, Some(step))), true) => match step.command() {
                Some(line) => {
                    let command = line.to_string();
                    self.say(format!("copied: {command}"), false);
                    self.clipboard = Some(command);
                }
                None => self.say(format!("no command to copy: {step}"), true),
            },
            _ => self.say("nothing to copy here", true),
        }
    }

    /// The rows an action is for: the marked ones, else the one under the cursor.
    fn targets(&self) -> Vec<String> {
        match self.view {
            ViewKind::Dlq if !self.dlq.marks.is_empty() => self.dlq.marks.iter().cloned().collect(),
            _ => self.current().map(|(id, _)| vec![id]).unwrap_or_default(),
        }
    }

    /// `r`, `p` (`Some(action)`) or `v` (`None`): a dialog with the preview.
    fn act(&mut self, action: Option<Action>, now: Instant) -> Vec<(u64, Job)> {
        if let Some(why) = &self.config.readonly {
            let why = why.clone();
            self.say(
                format!("READ-ONLY ({why}): nothing can be changed from this screen"),
                true,
            );
            return Vec::new();
        }
        let ids = self.targets();
        if ids.is_empty() {
            self.say("no entry here to act on", true);
            return Vec::new();
        }
        self.dialog = Some(Dialog::new(action, ids.clone(), now));
        let mut jobs = Vec::new();
        let job = match action {
            Some(action) => Job::Preview {
                action,
                ids,
                ask: Ask::default(),
            },
            None => Job::Verify { ids },
        };
        self.start(job, now, &mut jobs);
        jobs
    }

    fn dialog_key(&mut self, key: KeyEvent, now: Instant) -> Vec<(u64, Job)> {
        let Some(dialog) = self.dialog.as_mut() else {
            return Vec::new();
        };
        if now.duration_since(dialog.opened) < DIALOG_GRACE {
            return Vec::new();
        }
        if dialog.done.is_some() {
            if matches!(key.code, KeyCode::Enter | KeyCode::Esc | KeyCode::Char('q')) {
                // Read beneath it already, or being read: not asked twice.
                self.dialog = None;
                self.retry_after = None;
                return self.tick(now);
            }
            return Vec::new();
        }
        if let Some(stop) = &dialog.stop {
            // Under way: only Esc, which stops it (what was sent goes on in the runtime).
            if key.code == KeyCode::Esc && !stop.swap(true, Ordering::SeqCst) {
                dialog.note = Some(
                    "stopping: the entry in flight finishes, nothing after it starts; what was sent goes on in the runtime"
                        .into(),
                );
            }
            return Vec::new();
        }
        match key.code {
            KeyCode::Esc => {
                self.dialog = None;
                self.pending.retain(|_, p| {
                    !matches!(p.label, "previewing" | "asking the providers' records")
                });
                self.say("cancelled: nothing was changed", false);
                return Vec::new();
            }
            KeyCode::Tab | KeyCode::Down => return self.leave_field(true, now),
            KeyCode::BackTab | KeyCode::Up => return self.leave_field(false, now),
            KeyCode::PageDown => dialog.scroll = dialog.scroll.saturating_add(5),
            KeyCode::PageUp => dialog.scroll = dialog.scroll.saturating_sub(5),
            KeyCode::Left if dialog.focus == Focus::Channels => {
                dialog.channel_at = dialog.channel_at.saturating_sub(1);
            }
            KeyCode::Right if dialog.focus == Focus::Channels => {
                dialog.channel_at =
                    (dialog.channel_at + 1).min(dialog.channels.len().saturating_sub(1));
            }
            KeyCode::Char(' ') if matches!(dialog.focus, Focus::Channels | Focus::Force) => {
                if dialog.focus == Focus::Force {
                    dialog.force = !dialog.force;
                    dialog.retitle();
                } else if let Some((_, on)) = dialog.channels.get_mut(dialog.channel_at) {
                    *on = !*on;
                }
                return self.preview_again(now);
            }
            KeyCode::Backspace => {
                if let Some(text) = text_field(dialog) {
                    text.pop();
                }
            }
            KeyCode::Char(c) => {
                let room = match dialog.focus {
                    Focus::Reason => FIELD_ROOM,
                    Focus::Word => 20,
                    _ => 40,
                };
                let focus = dialog.focus;
                if let Some(text) = text_field(dialog) {
                    if text.len() < room {
                        text.push(c);
                    } else if focus == Focus::Reason {
                        // A paste longer than the field is not cut without a word.
                        dialog.note = Some(full("the reason"));
                    }
                }
            }
            KeyCode::Enter => return self.dialog_enter(now),
            _ => {}
        }
        Vec::new()
    }

    /// The focus leaves its field (any key that moves it): what was typed there is read
    /// at once, and the preview is read again when it changes what would be done, so the
    /// reason recorded is always the reason typed.
    fn leave_field(&mut self, forward: bool, now: Instant) -> Vec<(u64, Job)> {
        let Some(dialog) = self.dialog.as_mut() else {
            return Vec::new();
        };
        let fields = dialog.fields();
        let at = fields.iter().position(|f| *f == dialog.focus).unwrap_or(0);
        let next = if forward {
            at + 1
        } else {
            at + fields.len() - 1
        };
        dialog.focus = fields[next % fields.len()];
        self.preview_again(now)
    }

    /// Reads the preview again when what the fields ask differs from what it was read
    /// with; says what is wrong with a field that cannot be read.
    fn preview_again(&mut self, now: Instant) -> Vec<(u64, Job)> {
        let Some(dialog) = self.dialog.as_mut() else {
            return Vec::new();
        };
        let ask = match dialog.ask() {
            Ok(ask) => ask,
            Err(why) => {
                dialog.note = Some(why);
                return Vec::new();
            }
        };
        if dialog.previewed.as_ref() == Some(&ask) {
            return Vec::new();
        }
        let mut jobs = Vec::new();
        match dialog.action {
            Some(action) => {
                let job = Job::Preview {
                    action,
                    ids: dialog.ids.clone(),
                    ask,
                };
                dialog.prepared = None;
                dialog.previewed = None;
                dialog.note = None;
                self.start(job, now, &mut jobs);
            }
            // What verify records is read at Go; only the reason goes with it.
            None => dialog.previewed = Some(ask),
        }
        jobs
    }

    /// Enter: Cancel closes, Go goes, any other field is left for the next.
    fn dialog_enter(&mut self, now: Instant) -> Vec<(u64, Job)> {
        match self.dialog.as_ref().map(|d| d.focus) {
            Some(Focus::Cancel) => {
                self.dialog = None;
                self.say("cancelled: nothing was changed", false);
                Vec::new()
            }
            Some(Focus::Go) => self.go(now),
            Some(_) => self.leave_field(true, now),
            None => Vec::new(),
        }
    }

    /// Go: carried out only as previewed, with the word the count calls for.
    fn go(&mut self, now: Instant) -> Vec<(u64, Job)> {
        let Some(dialog) = self.dialog.as_mut() else {
            return Vec::new();
        };
        let mut jobs = Vec::new();
        let asked = dialog.ask();
        let as_shown = asked.is_ok() && dialog.previewed.as_ref() == asked.as_ref().ok();
        let confirmed = crate::session::confirms(Some(dialog.word.trim()), dialog.count);
        match (&dialog.prepared, as_shown, confirmed) {
            (_, _, _) if asked.is_err() => {
                dialog.note = asked.err();
            }
            (None, _, _) | (_, false, _) => {
                dialog.note = Some("the preview is still being read: Go once it shows".into());
                return self.preview_again(now);
            }
            (Some(_), _, _) if dialog.count == 0 => {
                dialog.note = Some("nothing to carry out: Esc closes".into());
            }
            (Some(_), true, false) => {
                dialog.note = Some(format!(
                    "type {} in the word field to go ahead",
                    dialog.word_needed()
                ));
                dialog.focus = Focus::Word;
            }
            (Some(Prepared::Act { plan, .. }), true, true) => {
                let stop = Arc::new(AtomicBool::new(false));
                let job = Job::Carry {
                    plan: plan.clone(),
                    word: dialog.word.clone(),
                    stop: stop.clone(),
                };
                dialog.note = None;
                dialog.stop = Some(stop);
                dialog.progress = Some("starting…".into());
                self.start(job, now, &mut jobs);
            }
            (Some(Prepared::Record { asked }), true, true) => {
                let job = Job::Record {
                    asked: asked.clone(),
                    reason: reason_of(&dialog.reason),
                };
                dialog.note = None;
                self.start(job, now, &mut jobs);
            }
        }
        jobs
    }

    /// A paste (the terminal's bracketed paste) goes into the field that has the keys as
    /// if typed there, its line breaks and other controls as spaces: it never presses
    /// Enter, Tab or a command key, so a paste moves no focus and carries out nothing,
    /// however it ends. Where no field has the keys it goes nowhere, and says so.
    pub fn paste(&mut self, text: &str, now: Instant) -> Vec<(u64, Job)> {
        let into_field = self.input.is_some()
            || self.dialog.as_mut().is_some_and(|dialog| {
                dialog.done.is_none() && dialog.stop.is_none() && text_field(dialog).is_some()
            });
        if !into_field {
            self.say(
                "a paste goes into a field: / to filter, : for a command, or a dialog's",
                false,
            );
            return Vec::new();
        }
        let mut jobs = Vec::new();
        for c in text.trim_end_matches(['\r', '\n']).chars() {
            let c = if c.is_control() { ' ' } else { c };
            jobs.extend(self.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), now));
        }
        jobs
    }

    fn input_key(&mut self, input: Input, key: KeyEvent, now: Instant) -> Vec<(u64, Job)> {
        let (mut text, is_filter) = match input {
            Input::Filter(text) => (text, true),
            Input::Command(text) => (text, false),
        };
        match key.code {
            KeyCode::Esc => {
                self.input = None;
                return Vec::new();
            }
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Tab if !is_filter => text = complete(&text),
            KeyCode::Char(c) if text.len() < FIELD_ROOM => text.push(c),
            KeyCode::Char(_) => {
                let what = if is_filter {
                    "the filter"
                } else {
                    "the command"
                };
                self.say(full(what), true);
            }
            KeyCode::Enter => {
                self.input = None;
                return if is_filter {
                    self.apply_filter(&text, now)
                } else {
                    self.run_command(&text, now)
                };
            }
            _ => {}
        }
        self.input = Some(if is_filter {
            Input::Filter(text)
        } else {
            Input::Command(text)
        });
        Vec::new()
    }

    fn apply_filter(&mut self, text: &str, now: Instant) -> Vec<(u64, Job)> {
        match Filter::parse(text, crate::clock::Clock::now(&crate::clock::SystemClock)) {
            Ok(filter) => {
                self.dlq.filter = filter;
                self.dlq.cursor = None;
                self.dlq.pages.clear();
                self.dlq.selected = 0;
                self.dlq.counts = None;
                self.dlq.counted = None;
                self.dlq.rows.clear();
                self.dlq.loaded = None;
                self.message = None;
                self.load(now)
            }
            Err(why) => {
                self.say(format!("filter not applied: {why}"), true);
                self.input = Some(Input::Filter(text.to_string()));
                Vec::new()
            }
        }
    }

    fn run_command(&mut self, text: &str, now: Instant) -> Vec<(u64, Job)> {
        let mut words = text.split_whitespace();
        let name = words.next().unwrap_or("");
        let arg = words.next().map(str::to_string);
        let view = match name {
            "dlq" => ViewKind::Dlq,
            "inspect" => ViewKind::Inspect,
            "reconcile" => ViewKind::Reconcile,
            "pulse" => ViewKind::Pulse,
            "audit" => ViewKind::Audit,
            "contexts" | "context" => ViewKind::Contexts,
            "providers" => ViewKind::Providers,
            "report" => {
                let mut jobs = Vec::new();
                let until = words.next().map(str::to_string);
                self.say("writing the report's bundle…", false);
                self.start(Job::Report { since: arg, until }, now, &mut jobs);
                return jobs;
            }
            "q" | "quit" => {
                self.quit = true;
                return Vec::new();
            }
            "" => return Vec::new(),
            other => {
                self.say(
                    format!(
                        "no view {}: the views are {}",
                        crate::render::sanitize::clean(other),
                        ViewKind::NAMES.join(", ")
                    ),
                    true,
                );
                return Vec::new();
            }
        };
        if view == ViewKind::Inspect {
            let Some(id) = arg.or_else(|| self.current().map(|(id, _)| id)) else {
                self.say("inspect needs an id: :inspect n-0192...", true);
                return Vec::new();
            };
            return self.open(ViewKind::Inspect, Some(id), now);
        }
        self.open(view, None, now)
    }
}

fn reason_of(text: &str) -> Option<String> {
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

/// The text field that has the keys, if one does.
fn text_field(dialog: &mut Dialog) -> Option<&mut String> {
    match dialog.focus {
        Focus::Canary => Some(&mut dialog.canary),
        Focus::Pace => Some(&mut dialog.pace),
        Focus::Reason => Some(&mut dialog.reason),
        Focus::Word => Some(&mut dialog.word),
        _ => None,
    }
}

/// Tab in the command bar: the one view name the typed start fits.
fn complete(text: &str) -> String {
    let typed = text.trim();
    let fits: Vec<&str> = ViewKind::NAMES
        .iter()
        .copied()
        .filter(|name| name.starts_with(typed))
        .collect();
    match fits.as_slice() {
        [one] => format!("{one} "),
        _ => text.to_string(),
    }
}
