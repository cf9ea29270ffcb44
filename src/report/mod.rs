//! The postmortem report (DESIGN §11): read from the store and the providers' records
//! for one absolute window, every figure tied to the events or records it comes from.
//! [`gather`] makes the data (the JSON form); [`markdown`] and [`html`] lay it out.
//! Nothing here reads the wall clock: the window's end is "now" for every judgement,
//! so the same window gives the same bytes on every run and over both backends.

pub mod bundle;
pub mod html;
pub mod markdown;

use crate::model::{Channel, Kind};
use crate::pulse::{Pulse, Series};
use crate::reconcile::{Asked as ReconcileAsked, Class, Reconciled, Reconciliation};
use crate::store::{EventQuery, Selection, Store, StoredEvent, Window};
use crate::triage::Branch;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What to report on.
#[derive(Debug, Clone)]
pub struct Asked {
    pub since: f64,
    pub until: f64,
    /// Narrows the notifications (channel, error text), as everywhere.
    pub selection: Selection,
    pub sources: crate::verify::Sources,
    /// When the report is made: a window that ends after it is still open, and its
    /// report PROVISIONAL.
    pub now: f64,
    /// When the fix went in, as the operator gave it (`--fixed-at`).
    pub fixed_at: Option<f64>,
}

impl Asked {
    /// The window still fills until its end: figures may change, and nothing certifies it.
    pub fn open_until(&self) -> Option<f64> {
        (self.until > self.now).then_some(self.until)
    }
}

/// Lease losses this far apart belong to two incidents.
pub const INCIDENT_GAP: f64 = 3600.0;

/// The window of the incident going on at `now`, or the last one: from a minute before
/// the first lease loss of the latest burst (losses less than [`INCIDENT_GAP`] apart, in
/// the last day) to `now`; without a lease loss in the last day, the last hour.
pub fn incident_window(store: &dyn Store, now: f64) -> crate::store::Result<(f64, f64)> {
    let losses = store.events(&crate::store::EventQuery {
        kinds: vec![crate::model::Kind::LeaseLost],
        limit: 10_000,
        ..Default::default()
    })?;
    let mut first: Option<f64> = None;
    // Newest first: walk back until a gap.
    for event in losses
        .events
        .iter()
        .filter(|e| e.at <= now && e.at > now - 86_400.0)
    {
        match first {
            Some(at) if at - event.at > INCIDENT_GAP => break,
            _ => first = Some(event.at),
        }
    }
    Ok(match first {
        Some(at) => ((at - 60.0).floor(), now),
        None => (now - 3600.0, now),
    })
}

/// The most operator actions whose aftermath is looked up one by one.
const FOLLOWED_UP: usize = 2_000;

/// A moment of the incident, and the event that marks it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moment {
    pub at: f64,
    pub what: String,
    pub event_id: i64,
    pub notification_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// The first LEASE_LOST or UNKNOWN outcome in the window.
    pub impact_start: Option<Moment>,
    pub first_lease_lost: Option<Moment>,
    pub last_lease_lost: Option<Moment>,
    /// The first resolve, replay or verify record in the window: repair started.
    pub first_action: Option<Moment>,
    pub last_dead_letter: Option<Moment>,
    /// When the fix went in, as the operator said (`--fixed-at`, or a note that
    /// records the fix).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_at: Option<f64>,
    /// Who said so, and where: `--fixed-at`, or the note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_by: Option<String>,
}

/// An operator's note (`unsctl note`), as the report keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoteItem {
    pub note_id: i64,
    /// When it was written.
    pub at: f64,
    /// Who wrote it, as every act's person is said.
    pub by: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// The fix it records went in at this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_at: Option<f64>,
}

impl NoteItem {
    /// The note in a stored row; one whose payload cannot be read says so in its text.
    pub fn of(row: &crate::api::NoteRow) -> Self {
        match row.note() {
            Some(note) => Self {
                note_id: row.id,
                at: row.at,
                by: note.person(),
                text: note.text,
                ticket: note.ticket,
                fixed_at: note.fixed_at,
            },
            None => Self {
                note_id: row.id,
                at: row.at,
                by: "(unreadable)".into(),
                text: format!("(note {} cannot be read: {})", row.id, row.payload.get()),
                ticket: None,
                fixed_at: None,
            },
        }
    }

    /// What it says, in the words of a key moment.
    pub fn what(&self) -> String {
        let mut what = format!("note by {}: {}", self.by, self.text);
        if let Some(at) = self.fixed_at {
            what.push_str(&format!(
                " (records the fix, at {})",
                crate::render::time::rfc3339(at)
            ));
        }
        what
    }
}

/// One line of the key moments: a moment of the history, or a note.
pub enum KeyLine<'r> {
    Moment(&'r Moment),
    Note(&'r NoteItem),
}

/// One channel's impact, as reconcile counts it for the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Impact {
    pub channel: Channel,
    pub attempted: usize,
    pub delivered_once: usize,
    pub duplicated: usize,
    /// Distinct recipients of the duplicated notifications.
    pub duplicated_recipients: usize,
    pub maybe_duplicated: usize,
    pub missing: usize,
    pub unsettled: usize,
}

/// One operator action and what followed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    pub event_id: i64,
    pub at: f64,
    pub kind: String,
    pub notification_id: String,
    pub operator: String,
    pub reason: Option<String>,
    pub ticket: Option<String>,
    pub attestation: Option<String>,
    pub forced: bool,
    pub overridden: Vec<String>,
    /// The branch the verdict had when it was done.
    pub verdict_then: Option<String>,
    pub via: Option<String>,
    /// VERIFIED: the answer, its source and its evidence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// What became of it: delivered, refused again, still due, resolved.
    pub followed: String,
}

impl Report {
    /// What it found, in a line: duplicated, missing and in doubt, over every channel.
    pub fn headline(&self) -> String {
        let sum = |f: fn(&Impact) -> usize| self.impact.iter().map(f).sum::<usize>();
        format!(
            "{} duplicated, {} missing, {} in doubt",
            sum(|i| i.duplicated),
            sum(|i| i.missing),
            sum(|i| i.maybe_duplicated + i.unsettled)
        )
    }
}

impl Action {
    /// Its row of the actions' columns, the id shown as `id`. A forced action says so;
    /// the guardrails it overrode are for a footnote (their full text is never a cell).
    pub fn row(&self, id: &str) -> crate::render::columns::ActionRow {
        let mut action = self.kind.clone();
        if self.forced {
            action.push_str(" FORCED");
        }
        if let Some(via) = &self.via {
            action.push_str(&format!(" (via {via})"));
        }
        crate::render::columns::ActionRow {
            at: self.at,
            action,
            id: id.to_string(),
            operator: self.operator.clone(),
            reason: self.reason.clone(),
            ticket: self.ticket.clone(),
            attestation: self.attestation.clone().or_else(|| self.said()),
            verdict_then: self.verdict_then.clone(),
            followed: self.followed.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub channel: String,
    pub outcome: String,
    pub source: String,
    pub evidence: String,
    /// When the attempts the answer is about ran: the first start to the last end as
    /// the history records them, never the window widened for clock skew.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ran: Option<(f64, f64)>,
}

/// One carry-out: the acts of one kind by one person for one reason, each within
/// [`CARRY_OUT_GAP`] of the one before (a batch, a canary and its rest), as one row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CarryOut {
    pub first_at: f64,
    pub last_at: f64,
    pub kind: String,
    pub forced: bool,
    pub via: Option<String>,
    pub operator: String,
    pub reason: Option<String>,
    pub ticket: Option<String>,
    /// The guardrails a forced carry-out overrode, each once: a footnote, never a cell.
    pub overridden: Vec<String>,
    /// The entries, in order (their actions are in `actions`, one by one).
    pub ids: Vec<String>,
    /// What followed, counted: `("SLACK delivered", 3)`.
    pub followed: Vec<(String, usize)>,
}

/// Acts further apart than this are two carry-outs, whoever did them and why.
pub const CARRY_OUT_GAP: f64 = 900.0;

impl CarryOut {
    /// "SLACK delivered (3); PAGERDUTY refused again (1)".
    pub fn followed_words(&self) -> String {
        self.followed
            .iter()
            .map(|(what, n)| format!("{what} ({n})"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn row(
        &self,
        footnote: Option<usize>,
        times: crate::render::time::Times,
    ) -> crate::render::columns::CarryOutRow {
        let mut action = self.kind.clone();
        if self.forced {
            action.push_str(" FORCED");
            if let Some(n) = footnote {
                action.push_str(&format!(" [{n}]"));
            }
        }
        if let Some(via) = &self.via {
            action.push_str(&format!(" (via {via})"));
        }
        crate::render::columns::CarryOutRow {
            first_at: self.first_at,
            last_at: self.last_at,
            action,
            entries: self.ids.len(),
            operator: self.operator.clone(),
            reason: self.reason.clone(),
            ticket: self.ticket.clone(),
            followed: self.followed_words(),
            times,
        }
    }
}

/// `followed` without its times, in parts: "SLACK delivered at T; EMAIL refused again
/// at U" is "SLACK delivered" and "EMAIL refused again".
fn followed_parts(action: &Action) -> Vec<String> {
    let untimed = |part: &str| match part.find(" at ") {
        Some(at) if part[at + 4..].starts_with(|c: char| c.is_ascii_digit()) => {
            part[..at].to_string()
        }
        _ => part.to_string(),
    };
    if action.kind == "REPLAYED" {
        action.followed.split("; ").map(untimed).collect()
    } else {
        vec![untimed(&action.followed)]
    }
}

/// The carry-outs' rows, and the footnotes their FORCED marks point to: each distinct set
/// of guardrails overridden once, numbered from 1.
pub fn carry_out_rows(
    report: &Report,
) -> (Vec<crate::render::columns::CarryOutRow>, Vec<Vec<String>>) {
    let mut notes: Vec<Vec<String>> = Vec::new();
    let rows = report
        .carry_outs
        .iter()
        .map(|carry_out| {
            let note = (carry_out.forced && !carry_out.overridden.is_empty()).then(|| match notes
                .iter()
                .position(|n| *n == carry_out.overridden)
            {
                Some(n) => n + 1,
                None => {
                    notes.push(carry_out.overridden.clone());
                    notes.len()
                }
            });
            carry_out.row(note, report.times())
        })
        .collect();
    (rows, notes)
}

/// What makes two acts one carry-out: kind, forced, via, person, reason, ticket.
type CarryOutKey = (
    String,
    bool,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
);

/// The operator actions (but verify records, which are verdict changes) as carry-outs.
pub fn carry_outs(actions: &[Action]) -> Vec<CarryOut> {
    let mut groups: Vec<CarryOut> = Vec::new();
    let mut open: BTreeMap<CarryOutKey, usize> = BTreeMap::new();
    for action in actions.iter().filter(|a| a.kind != "VERIFIED") {
        let key = (
            action.kind.clone(),
            action.forced,
            action.via.clone(),
            action.operator.clone(),
            action.reason.clone(),
            action.ticket.clone(),
        );
        let at = match open.get(&key) {
            Some(&n) if action.at - groups[n].last_at <= CARRY_OUT_GAP => n,
            _ => {
                groups.push(CarryOut {
                    first_at: action.at,
                    last_at: action.at,
                    kind: action.kind.clone(),
                    forced: action.forced,
                    via: action.via.clone(),
                    operator: action.operator.clone(),
                    reason: action.reason.clone(),
                    ticket: action.ticket.clone(),
                    overridden: Vec::new(),
                    ids: Vec::new(),
                    followed: Vec::new(),
                });
                open.insert(key, groups.len() - 1);
                groups.len() - 1
            }
        };
        let group = &mut groups[at];
        group.last_at = group.last_at.max(action.at);
        group.ids.push(action.notification_id.clone());
        for guardrail in &action.overridden {
            if !group.overridden.contains(guardrail) {
                group.overridden.push(guardrail.clone());
            }
        }
        for part in followed_parts(action) {
            match group.followed.iter_mut().find(|(what, _)| *what == part) {
                Some((_, n)) => *n += 1,
                None => group.followed.push((part, 1)),
            }
        }
    }
    groups
}

/// The report's data: what `-o json` prints and both layouts read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub window: Window,
    /// The window had not ended when the report was made: PROVISIONAL until then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisional_until: Option<f64>,
    /// The store's identity (the same over both backends), when it has one.
    pub store: Option<String>,
    /// The providers' records named that could not be read, and why: no figure rests on
    /// them ([`crate::reconcile::Reconciliation`]'s records).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<String>,
    pub summary: Summary,
    pub impact: Vec<Impact>,
    /// The DLQ by branch as it stands when the report is made.
    pub dlq_now: BTreeMap<Branch, usize>,
    pub pulse: Pulse,
    pub key_moments: Vec<Moment>,
    /// The operators' notes written in the window, oldest first.
    pub notes: Vec<NoteItem>,
    /// DUPLICATED and MISSING, each with its recipient, copies and evidence.
    pub needs: Vec<Reconciled>,
    /// Every operator action, one by one.
    pub actions: Vec<Action>,
    /// The same actions (but verify records) as carry-outs, a row each in the layouts.
    pub carry_outs: Vec<CarryOut>,
    /// Each id the layouts show, as the shortest prefix (12 characters at least) no
    /// other id of the report shares; the JSON keeps ids whole.
    #[serde(skip)]
    pub shown_ids: BTreeMap<String, String>,
    /// Actions not followed up one by one, past the first [`FOLLOWED_UP`].
    pub actions_not_followed: usize,
    pub notifications: usize,
}

impl Report {
    /// `id` as the layouts show it: a prefix unique in the report, or whole.
    pub fn shown<'a>(&'a self, id: &'a str) -> &'a str {
        self.shown_ids.get(id).map_or(id, String::as_str)
    }

    /// How its layouts write times: the time of day alone when the window lies within
    /// one UTC day, which the page names once.
    pub fn times(&self) -> crate::render::time::Times {
        match (self.window.since, self.window.until) {
            (Some(since), Some(until)) => crate::render::time::Times::within(since, until),
            _ => crate::render::time::Times::Whole,
        }
    }

    /// The sentence that says how times are written.
    pub fn times_said(&self) -> String {
        match (self.times(), self.window.since) {
            (crate::render::time::Times::OfDay, Some(since)) => format!(
                "Times are UTC, all on {}.",
                &crate::render::time::rfc3339(since)[..10]
            ),
            _ => "Times are UTC.".into(),
        }
    }

    /// The rows of what needs a person, as the layouts show them.
    pub fn need_rows(&self) -> Vec<crate::render::columns::NeedRow> {
        self.needs
            .iter()
            .map(|item| crate::render::columns::NeedRow {
                times: self.times(),
                ..item.row(self.shown(&item.id))
            })
            .collect()
    }

    /// The key moments and the notes, in time order.
    pub fn key_lines(&self) -> Vec<KeyLine<'_>> {
        let mut lines: Vec<(f64, KeyLine<'_>)> = self
            .key_moments
            .iter()
            .map(|m| (m.at, KeyLine::Moment(m)))
            .chain(self.notes.iter().map(|n| (n.at, KeyLine::Note(n))))
            .collect();
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        lines.into_iter().map(|(_, line)| line).collect()
    }

    /// The VERIFIED events among the actions: the verdict changes.
    pub fn verdict_changes(&self) -> impl Iterator<Item = &Action> {
        self.actions.iter().filter(|a| a.kind == "VERIFIED")
    }
}

/// Reads the report for `asked` from `store`. `events` is handed every event of every
/// notification in the window, one notification at a time (the bundle's events.jsonl).
pub fn gather(
    store: &dyn Store,
    asked: &Asked,
    events: &mut (dyn FnMut(&str, &[StoredEvent<'_>]) -> crate::store::Result<()> + Send),
) -> crate::store::Result<Report> {
    let window = Window {
        since: Some(asked.since),
        until: Some(asked.until),
    };
    let reconcile_asked = ReconcileAsked {
        selection: Selection {
            since: None,
            until: None,
            ..asked.selection.clone()
        },
        window,
        ids: None,
        limit: None,
    };
    // Judged as of the window's end, never the wall clock.
    let reconciliation =
        Reconciliation::read(store, &reconcile_asked, asked.sources.clone(), asked.until)?;
    let mut tally = Tally::new(&reconciliation.channels());
    let notifications = reconciliation.each_with_events(store, &mut |row, stored, items| {
        tally.moments(&row.id, stored, asked);
        for item in items {
            tally.add(item);
        }
        events(&row.id, stored)
    })?;
    let actions = actions(store, asked)?;
    let mut summary = tally.summary;
    summary.first_action = actions.0.first().map(|a| Moment {
        at: a.at,
        what: format!("{} by {}", a.kind, a.operator),
        event_id: a.event_id,
        notification_id: a.notification_id.clone(),
    });
    let key_moments = key_moments(&summary, &actions.0);
    let mut dlq_now: BTreeMap<Branch, usize> = Branch::ALL.iter().map(|b| (*b, 0)).collect();
    let dlq_selection = Selection {
        since: None,
        until: None,
        ..asked.selection.clone()
    };
    store.each_triaged(&dlq_selection, &mut |entry| {
        *dlq_now.entry(entry.verdict.branch).or_default() += 1;
        Ok(())
    })?;
    let mut needs = tally.needs;
    needs.sort_by(crate::reconcile::person_order);
    let notes = store.notes(None, None)?;
    (summary.fixed_at, summary.fixed_by) = fix(asked, &notes);
    let notes: Vec<NoteItem> = notes
        .iter()
        .filter(|row| row.at >= asked.since && row.at < asked.until)
        .map(NoteItem::of)
        .collect();
    let shown_ids = shown_ids(&summary, &needs, &actions.0, &key_moments);
    Ok(Report {
        shown_ids,
        window,
        provisional_until: asked.open_until(),
        store: store.identity()?,
        unread: reconciliation.records.unread(),
        summary,
        impact: tally.impact.into_values().map(Impact::from).collect(),
        dlq_now,
        pulse: store.pulse(
            pulse_window(asked.since, asked.until).map_err(crate::store::StoreError::Other)?,
        )?,
        key_moments,
        notes,
        needs,
        carry_outs: carry_outs(&actions.0),
        actions: actions.0,
        actions_not_followed: actions.1,
        notifications,
    })
}

/// When the fix went in, and who says so: `--fixed-at` when given, else the latest note
/// (written at any time, a correction after the fact included) that records a fix inside
/// the window.
fn fix(asked: &Asked, notes: &[crate::api::NoteRow]) -> (Option<f64>, Option<String>) {
    if let Some(at) = asked.fixed_at {
        return (Some(at), Some("as the operator gave it, --fixed-at".into()));
    }
    notes
        .iter()
        .rev()
        .map(NoteItem::of)
        .find(|note| {
            note.fixed_at
                .is_some_and(|at| at >= asked.since && at < asked.until)
        })
        .map_or((None, None), |note| {
            (
                note.fixed_at,
                Some(format!(
                    "note {} by {}: {}",
                    note.note_id, note.by, note.text
                )),
            )
        })
}

/// Every id the layouts show, each as its prefix unique in the report.
fn shown_ids(
    summary: &Summary,
    needs: &[Reconciled],
    actions: &[Action],
    moments: &[Moment],
) -> BTreeMap<String, String> {
    let summarised = [
        &summary.impact_start,
        &summary.first_lease_lost,
        &summary.last_lease_lost,
        &summary.first_action,
        &summary.last_dead_letter,
    ];
    unique_prefixes(
        needs
            .iter()
            .map(|n| n.id.as_str())
            .chain(actions.iter().map(|a| a.notification_id.as_str()))
            .chain(moments.iter().map(|m| m.notification_id.as_str()))
            .chain(
                summarised
                    .into_iter()
                    .flatten()
                    .map(|m| m.notification_id.as_str()),
            ),
    )
}

/// The shortest prefix shown of an id.
const SHORTEST_ID: usize = 12;

/// Each of `ids` as the shortest prefix, [`SHORTEST_ID`] characters at least, that no
/// other of `ids` starts with: the same for the same ids, whatever else the store holds.
pub fn unique_prefixes<'a>(ids: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let mut sorted: Vec<&str> = ids.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    sorted
        .iter()
        .enumerate()
        .map(|(k, id)| {
            let before = k.checked_sub(1).map_or(0, |p| common(id, sorted[p]));
            let after = sorted.get(k + 1).map_or(0, |next| common(id, next));
            let keep = (before.max(after) + 1).max(SHORTEST_ID);
            let shown: String = id.chars().take(keep).collect();
            (id.to_string(), shown)
        })
        .collect()
}

/// The window's pulse: a minute a step, or as many whole minutes as keep it within the
/// 1,440 steps a pulse may have. Its steps start at the window's own start and the last
/// ends at the window's end, so the timeline counts what the rest of the report counts:
/// steps widened to whole minutes would count events from outside the window.
pub fn pulse_window(since: f64, until: f64) -> Result<crate::pulse::Window, String> {
    // A step of span / 1,440 or more cuts the span into 1,440 steps at most.
    let minutes = ((until - since) / 60.0 / crate::pulse::MAX_STEPS as f64)
        .ceil()
        .max(1.0);
    // One minute more where rounding left a step too many.
    crate::pulse::Window::new(since, until, minutes * 60.0)
        .or_else(|_| crate::pulse::Window::new(since, until, (minutes + 1.0) * 60.0))
}

/// The counts per channel, the needs and the moments, as the notifications go by.
struct Tally {
    impact: BTreeMap<Channel, Counting>,
    needs: Vec<Reconciled>,
    summary: Summary,
}

struct Counting {
    impact: Impact,
    recipients: BTreeSet<String>,
}

impl Impact {
    fn of(channel: Channel) -> Self {
        Self {
            channel,
            attempted: 0,
            delivered_once: 0,
            duplicated: 0,
            duplicated_recipients: 0,
            maybe_duplicated: 0,
            missing: 0,
            unsettled: 0,
        }
    }
}

impl From<Counting> for Impact {
    fn from(counting: Counting) -> Self {
        Impact {
            duplicated_recipients: counting.recipients.len(),
            ..counting.impact
        }
    }
}

impl Tally {
    fn new(channels: &[Channel]) -> Self {
        Self {
            impact: channels
                .iter()
                .map(|c| {
                    (
                        *c,
                        Counting {
                            impact: Impact::of(*c),
                            recipients: BTreeSet::new(),
                        },
                    )
                })
                .collect(),
            needs: Vec::new(),
            summary: Summary::default(),
        }
    }

    fn add(&mut self, item: Reconciled) {
        let counting = self.impact.entry(item.channel).or_insert_with(|| Counting {
            impact: Impact::of(item.channel),
            recipients: BTreeSet::new(),
        });
        let impact = &mut counting.impact;
        impact.attempted += 1;
        match item.class {
            Class::Once => impact.delivered_once += 1,
            Class::Duplicated => {
                impact.duplicated += 1;
                if let Some(recipient) = &item.recipient {
                    counting.recipients.insert(recipient.clone());
                }
            }
            Class::MaybeDuplicated => impact.maybe_duplicated += 1,
            Class::Missing => impact.missing += 1,
            Class::Unsettled => impact.unsettled += 1,
        }
        if matches!(item.class, Class::Duplicated | Class::Missing) {
            self.needs.push(item);
        }
    }

    /// The window's first and last lease loss, its first unknown outcome and its last
    /// dead letter, from one notification's events.
    fn moments(&mut self, id: &str, events: &[StoredEvent<'_>], asked: &Asked) {
        for event in events {
            if !(event.at >= asked.since && event.at < asked.until) {
                continue;
            }
            let moment = |what: &str| Moment {
                at: event.at,
                what: what.to_string(),
                event_id: event.id,
                notification_id: id.to_string(),
            };
            let summary = &mut self.summary;
            let earlier = |slot: &Option<Moment>| {
                slot.as_ref()
                    .is_none_or(|m| (event.at, event.id) < (m.at, m.event_id))
            };
            let later = |slot: &Option<Moment>| {
                slot.as_ref()
                    .is_none_or(|m| (event.at, event.id) > (m.at, m.event_id))
            };
            match event.kind.as_ref() {
                "LEASE_LOST" => {
                    if earlier(&summary.first_lease_lost) {
                        summary.first_lease_lost = Some(moment("first lease loss"));
                    }
                    if later(&summary.last_lease_lost) {
                        summary.last_lease_lost = Some(moment("last lease loss"));
                    }
                    if earlier(&summary.impact_start) {
                        summary.impact_start = Some(moment("impact start: a lease lost"));
                    }
                }
                "CHANNEL_ATTEMPT_RESULT" if unknown(event) && earlier(&summary.impact_start) => {
                    summary.impact_start =
                        Some(moment("impact start: a provider call's outcome unknown"));
                }
                "DEAD_LETTERED" if later(&summary.last_dead_letter) => {
                    summary.last_dead_letter = Some(moment("last dead letter"));
                }
                _ => {}
            }
        }
    }
}

fn unknown(event: &StoredEvent<'_>) -> bool {
    let payload = crate::model::payload_tree(event.payload.get());
    payload.is_object()
        && crate::model::ProviderOutcome::of_payload(&payload)
            == crate::model::ProviderOutcome::Unknown
}

/// Every resolve, replay and verify record in the window, oldest first, each with what
/// followed it; and how many were not followed up.
fn actions(store: &dyn Store, asked: &Asked) -> crate::store::Result<(Vec<Action>, usize)> {
    let mut found = Vec::new();
    // With a cursor the search reads oldest first, a page at a time.
    let mut after = 0;
    loop {
        let query = EventQuery {
            kinds: vec![Kind::DlqResolved, Kind::Replayed, Kind::Verified],
            selection: Selection {
                since: Some(asked.since),
                until: Some(asked.until),
                channel: None,
                ..Selection::default()
            },
            limit: 1000,
            after: Some(after),
        };
        let page = store.events(&query)?.events;
        let full = page.len() >= 1000;
        let Some(last) = page.iter().map(|e| e.id).max() else {
            break;
        };
        if last <= after {
            break;
        }
        after = last;
        found.extend(page);
        if !full {
            break;
        }
    }
    found.sort_by_key(|e| e.id);
    let mut skipped = 0;
    let mut docs: BTreeMap<String, Option<crate::api::NotificationDoc>> = BTreeMap::new();
    let mut actions = Vec::with_capacity(found.len());
    for (n, event) in found.into_iter().enumerate() {
        let followed = if n < FOLLOWED_UP {
            let doc = docs
                .entry(event.notification_id.clone())
                .or_insert_with(|| store.notification(&event.notification_id).ok());
            followed(doc.as_ref(), &event, Upto::WindowEnd(asked.until))
        } else {
            skipped += 1;
            "not looked up".to_string()
        };
        let mut action = Action::of(event, followed);
        if let (Some(answer), Some(Some(doc))) =
            (action.answer.as_mut(), docs.get(&action.notification_id))
        {
            answer.ran = attempts_ran(doc, action.event_id);
        }
        actions.push(action);
    }
    Ok((actions, skipped))
}

/// "the attempt ran 06:26:11Z to 06:26:14Z", in the attempt's own times.
/// The verdict changes as the layouts' rows.
pub fn verdict_rows(report: &Report) -> Vec<crate::render::columns::VerdictRow> {
    report
        .verdict_changes()
        .filter_map(|action| {
            let answer = action.answer.as_ref()?;
            Some(crate::render::columns::VerdictRow {
                at: action.at,
                id: report.shown(&action.notification_id).to_string(),
                channel: answer.channel.clone(),
                answer: answer.outcome.clone(),
                source: answer.source.clone(),
                operator: action.operator.clone(),
                ran: answer.ran,
                event_id: action.event_id,
                evidence: answer.evidence.clone(),
                times: report.times(),
            })
        })
        .collect()
}

pub fn ran_words(ran: Option<(f64, f64)>) -> String {
    match ran {
        Some((from, to)) => format!(
            "the attempt ran {} to {}",
            crate::render::time::rfc3339(from),
            crate::render::time::rfc3339(to)
        ),
        None => "the attempt's times are not in the history".into(),
    }
}

/// When the attempts a VERIFIED event (`verified`, in `doc`) answers for ran, by the
/// history: none when the payload or the history does not say.
fn attempts_ran(doc: &crate::api::NotificationDoc, verified: i64) -> Option<(f64, f64)> {
    let event = doc.events.iter().find(|e| e.id == verified)?;
    let payload = event.payload_value();
    let channel: Channel = payload["channel"].as_str()?.parse().ok()?;
    let cycle = payload["cycle"].as_i64()?;
    let numbers: Vec<i64> = payload["attempts"]
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_i64)
        .collect();
    let history = crate::history::History::read(
        &doc.row,
        doc.events.iter().map(crate::history::Observed::from_event),
    );
    history
        .attempts(channel)
        .iter()
        .filter(|a| a.cycle == cycle && numbers.contains(&a.attempt))
        .map(|a| (a.started, a.ended))
        .reduce(|(s1, e1), (s2, e2)| (s1.min(s2), e1.max(e2)))
}

impl Action {
    /// An operator action as its audited event records it (DLQ_RESOLVED, REPLAYED,
    /// VERIFIED), and what `followed` it: the one reading of an audit record, for the
    /// report and the live screen's audit view alike.
    pub fn of(event: crate::api::EventRow, followed: String) -> Self {
        let payload = crate::model::payload_tree(event.payload.get());
        action(event, &payload, followed)
    }

    /// A note as the audit lists it beside the acts: NOTE, no entry, its text where an
    /// act's reason stands, the fix it records where an act's aftermath does.
    pub fn of_note(note: &NoteItem) -> Self {
        Self {
            event_id: note.note_id,
            at: note.at,
            kind: crate::remediation::note::KIND.to_string(),
            notification_id: String::new(),
            operator: note.by.clone(),
            reason: Some(note.text.clone()),
            ticket: note.ticket.clone(),
            attestation: None,
            forced: false,
            overridden: Vec::new(),
            verdict_then: None,
            via: None,
            answer: None,
            followed: note.fixed_at.map_or_else(
                || "-".to_string(),
                |at| format!("records the fix, at {}", crate::render::time::rfc3339(at)),
            ),
        }
    }

    /// What the operator said they found: the attestation, or the answer recorded.
    pub fn said(&self) -> Option<String> {
        match &self.answer {
            Some(answer) => Some(format!(
                "{} {} ({})",
                answer.channel, answer.outcome, answer.source
            )),
            None => self.attestation.clone(),
        }
    }
}

fn action(event: crate::api::EventRow, payload: &serde_json::Value, followed: String) -> Action {
    let text = |key: &str| payload[key].as_str().map(str::to_string);
    let answer = (event.kind == "VERIFIED").then(|| Answer {
        channel: text("channel").unwrap_or_default(),
        outcome: text("outcome").unwrap_or_default(),
        source: text("source").unwrap_or_default(),
        evidence: text("evidence").unwrap_or_default(),
        ran: None,
    });
    Action {
        event_id: event.id,
        at: event.at,
        kind: event.kind,
        notification_id: event.notification_id,
        operator: crate::model::payload::person(
            payload["operator"].as_str(),
            payload["claimed_operator"].as_str(),
        ),
        reason: text("reason"),
        ticket: text("ticket"),
        attestation: text("attestation"),
        forced: payload["forced"].as_bool().unwrap_or(false),
        overridden: payload["overridden"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        verdict_then: payload["triage"]["branch"].as_str().map(str::to_string),
        via: text("via"),
        answer,
        followed,
    }
}

/// How far what followed an action is read: to a report's window's end, or to now (the
/// live screen's audit); each says it in its own words.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Upto {
    WindowEnd(f64),
    Now(f64),
}

impl Upto {
    fn at(self) -> f64 {
        match self {
            Upto::WindowEnd(at) | Upto::Now(at) => at,
        }
    }

    /// "at the window's end", "now".
    fn end(self) -> &'static str {
        match self {
            Upto::WindowEnd(_) => "at the window's end",
            Upto::Now(_) => "now",
        }
    }

    /// "in the window", "since".
    fn span(self) -> &'static str {
        match self {
            Upto::WindowEnd(_) => "in the window",
            Upto::Now(_) => "since",
        }
    }
}

/// What became of a notification after `event`, as its history stood `upto`.
pub fn followed(
    doc: Option<&crate::api::NotificationDoc>,
    event: &crate::api::EventRow,
    upto: Upto,
) -> String {
    let Some(doc) = doc else {
        return "its history could not be read".into();
    };
    let until = upto.at();
    let time = |at: f64| crate::render::time::rfc3339(at);
    let next = doc
        .events
        .iter()
        .filter(|e| e.id > event.id && e.at < until)
        .find(|e| {
            matches!(
                e.kind.known(),
                Some(Kind::Delivered | Kind::DeadLettered | Kind::DlqResolved | Kind::Replayed)
            )
        });
    if event.kind == "REPLAYED"
        && let Some(words) = replay_followed(doc, event, upto)
    {
        return words;
    }
    match (event.kind.as_str(), next) {
        ("DLQ_RESOLVED", _) => "left the DLQ as RESOLVED; nothing was sent".into(),
        ("VERIFIED", Some(next)) => format!("then {} at {}", next.kind.as_str(), time(next.at)),
        ("VERIFIED", None) => format!("recorded; the entry was not acted on {}", upto.span()),
        (_, Some(next)) if next.kind.known() == Some(Kind::Delivered) => {
            format!("delivered at {}", time(next.at))
        }
        (_, Some(next)) if next.kind.known() == Some(Kind::DeadLettered) => {
            format!("refused again: dead-lettered at {}", time(next.at))
        }
        (_, Some(next)) => format!("then {} at {}", next.kind.as_str(), time(next.at)),
        (_, None) => format!("still due or in flight {}", upto.end()),
    }
}

/// What followed a replay, channel by channel: each channel it sent delivered, refused
/// again, in doubt or still due, by the first attempt of that channel after it (before
/// `upto`); none when the payload does not name its channels.
fn replay_followed(
    doc: &crate::api::NotificationDoc,
    event: &crate::api::EventRow,
    upto: Upto,
) -> Option<String> {
    let until = upto.at();
    use crate::model::ProviderOutcome;
    let payload = crate::model::payload_tree(event.payload.get());
    let channels: Vec<Channel> = payload["channels"]
        .as_array()?
        .iter()
        .filter_map(|c| c.as_str()?.parse().ok())
        .collect();
    if channels.is_empty() {
        return None;
    }
    let history = crate::history::History::read(
        &doc.row,
        doc.events
            .iter()
            .filter(|e| e.at < until)
            .map(crate::history::Observed::from_event),
    );
    let time = |id: i64| {
        doc.events
            .iter()
            .find(|e| e.id == id)
            .map(|e| crate::render::time::rfc3339(e.at))
            .unwrap_or_default()
    };
    let words: Vec<String> = channels
        .iter()
        .map(|channel| {
            let after = history
                .attempts(*channel)
                .iter()
                .find(|a| a.start.is_some_and(|start| start > event.id));
            let said = match after.and_then(|a| a.results.last()) {
                Some((id, ProviderOutcome::Accepted)) => format!("delivered at {}", time(*id)),
                Some((id, ProviderOutcome::Rejected)) => format!("refused again at {}", time(*id)),
                Some((id, ProviderOutcome::Unknown)) => {
                    format!("outcome unknown at {}", time(*id))
                }
                None if after.is_some() => format!("in flight {}", upto.end()),
                None => format!("still due {}", upto.end()),
            };
            format!("{channel} {said}")
        })
        .collect();
    Some(words.join("; "))
}

/// First and last lease loss, each operator action and each verify record, in order.
fn key_moments(summary: &Summary, actions: &[Action]) -> Vec<Moment> {
    let mut moments: Vec<Moment> = [
        &summary.impact_start,
        &summary.first_lease_lost,
        &summary.last_lease_lost,
        &summary.last_dead_letter,
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect();
    // Of each kind of act (a forced one is a kind of its own), the first and the last:
    // a batch of 40 replays is two moments, never 40 lines. The verify records are one
    // kind: each is listed, with its answer, under the verdict changes.
    let mut kinds: BTreeMap<String, Vec<&Action>> = BTreeMap::new();
    for action in actions {
        let kind = match &action.answer {
            Some(_) => action.kind.clone(),
            None if action.forced => format!("{} (FORCED)", action.kind),
            None => action.kind.clone(),
        };
        kinds.entry(kind).or_default().push(action);
    }
    for (kind, acts) in &kinds {
        let (first, last) = (acts[0], acts[acts.len() - 1]);
        let moment = |a: &Action, which: &str| Moment {
            at: a.at,
            what: match &a.answer {
                Some(answer) => format!(
                    "{kind} {} {} by {}{which}",
                    answer.channel, answer.outcome, a.operator
                ),
                None => format!("{kind} by {}{which}", a.operator),
            },
            event_id: a.event_id,
            notification_id: a.notification_id.clone(),
        };
        match acts.len() {
            1 => moments.push(moment(first, "")),
            n => {
                moments.push(moment(first, &format!(" (the first of {n})")));
                moments.push(moment(last, &format!(" (the last of {n})")));
            }
        }
    }
    moments.sort_by(|a, b| {
        a.at.total_cmp(&b.at)
            .then(a.event_id.cmp(&b.event_id))
            .then(a.what.cmp(&b.what))
    });
    moments.dedup_by(|a, b| a.event_id == b.event_id && a.what == b.what);
    moments
}

/// The series the chart draws, in order.
pub const CHARTED: [Series; 6] = [
    Series::LeaseLost,
    Series::Unknown,
    Series::DeadLettered,
    Series::Replayed,
    Series::DlqResolved,
    Series::Delivered,
];

#[cfg(test)]
mod tests {
    /// Any window is cut into whole minutes within the steps a pulse may have, and the
    /// pulse counts exactly the window: nothing before its start or after its end.
    #[test]
    fn a_reports_pulse_window_always_fits_a_pulse() {
        for (since, span) in [
            (0.0, 60.0),
            (30.0, 86_400.0),
            (59.0, 86_400.0),
            (1_000_003.0, 86_400.0 * 7.0 + 1.0),
            (17.5, 1_440.0 * 60.0),
            (17.5, 1_440.0 * 60.0 + 0.5),
            (1_796_497_800.25, 86_400.0 * 400.0 + 59.0),
        ] {
            let window = super::pulse_window(since, since + span).unwrap();
            assert!(window.steps() <= crate::pulse::MAX_STEPS, "{since} {span}");
            assert_eq!((window.since, window.until), (since, since + span));
            assert_eq!(window.step % 60.0, 0.0, "{since} {span}");
        }
        assert!(
            super::pulse_window(5.0, 5.0).is_err(),
            "an empty window has no steps"
        );
    }
}

#[cfg(test)]
mod carry_out_tests {
    use super::*;

    fn act(at: f64, kind: &str, who: &str, reason: &str, followed: &str) -> Action {
        Action {
            event_id: at as i64,
            at,
            kind: kind.into(),
            notification_id: format!("n-{at}"),
            operator: who.into(),
            reason: Some(reason.into()),
            ticket: None,
            attestation: None,
            forced: false,
            overridden: Vec::new(),
            verdict_then: None,
            via: None,
            answer: None,
            followed: followed.into(),
        }
    }

    /// A batch is one row, a canary and its rest too; another person, another reason or
    /// a quarter of an hour apart is another; verify records are verdict changes.
    #[test]
    fn acts_of_one_kind_by_one_person_for_one_reason_are_one_carry_out() {
        let actions = [
            act(
                100.0,
                "REPLAYED",
                "erin",
                "fixed",
                "SLACK delivered at 2026-12-02T01:00:00Z",
            ),
            act(
                101.0,
                "DLQ_RESOLVED",
                "bob",
                "seen",
                "left the DLQ as RESOLVED; nothing was sent",
            ),
            act(
                160.0,
                "REPLAYED",
                "erin",
                "fixed",
                "SLACK delivered at 2026-12-02T01:01:00Z; EMAIL refused again at 2026-12-02T01:01:00Z",
            ),
            act(
                400.0,
                "REPLAYED",
                "erin",
                "fixed",
                "SLACK delivered at 2026-12-02T01:05:00Z",
            ),
            act(401.0, "VERIFIED", "erin", "fixed", "recorded"),
            act(
                402.0,
                "REPLAYED",
                "erin",
                "other",
                "SLACK still due at the window's end",
            ),
            act(
                400.0 + CARRY_OUT_GAP + 1.0,
                "REPLAYED",
                "erin",
                "fixed",
                "SLACK delivered at 2026-12-02T02:00:00Z",
            ),
        ];
        let rows = carry_outs(&actions);
        let shape: Vec<(&str, &str, usize)> = rows
            .iter()
            .map(|c| {
                (
                    c.kind.as_str(),
                    c.reason.as_deref().unwrap_or(""),
                    c.ids.len(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("REPLAYED", "fixed", 3),
                ("DLQ_RESOLVED", "seen", 1),
                ("REPLAYED", "other", 1),
                ("REPLAYED", "fixed", 1)
            ]
        );
        assert_eq!(
            rows[0].followed_words(),
            "SLACK delivered (3); EMAIL refused again (1)"
        );
        assert_eq!(
            rows[1].followed_words(),
            "left the DLQ as RESOLVED; nothing was sent (1)"
        );
        assert_eq!((rows[0].first_at, rows[0].last_at), (100.0, 400.0));
    }
}

#[cfg(test)]
mod prefix_tests {
    use super::unique_prefixes;

    #[test]
    fn each_id_is_shown_by_the_shortest_prefix_no_other_shares() {
        let ids = [
            "n-01a236d443527003a9dad126f3dd4ecd",
            "n-01a236d44360751eb2dfcbc7724539b0",
            "n-01a236d443527003ffff000000000000",
            "n-0200",
        ];
        let shown = unique_prefixes(ids);
        assert_eq!(shown[ids[0]], "n-01a236d443527003a");
        assert_eq!(shown[ids[2]], "n-01a236d443527003f");
        assert_eq!(shown[ids[1]], "n-01a236d4436");
        // Shorter than the least shown: whole.
        assert_eq!(shown[ids[3]], "n-0200");
        for (k, id) in ids.iter().enumerate() {
            for (j, other) in ids.iter().enumerate() {
                assert!(k == j || !other.starts_with(&shown[*id]), "{id} {other}");
            }
        }
    }
}
