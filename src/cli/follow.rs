//! Watching the runtime: `events --follow`, `inspect --follow`, `replay --wait` and
//! `dlq triage --watch`. Each polls the store (either backend) through the same event
//! cursor, prints what changed as it changes, and stops on Ctrl-C with an account.

use super::error::{CliError, CliResult};
use super::prompt;
use crate::api::EventRow;
use crate::model::Event;
use crate::model::NotificationDoc;
use crate::render::output::{Output, counted, print, status};
use crate::render::{time, views};
use crate::session::wait::{Settlement, Waited, Watch, settled};
use crate::store::{EventQuery, Selection, Store, StoreError};
use crate::triage::{Branch, Verdict};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How often the store is asked again, unless `--interval` says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1000);

/// The most events one poll reads; more wait for the next poll.
const POLL_EVENTS: usize = 1000;

/// `--interval SECONDS`, checked.
pub fn interval(seconds: f64) -> CliResult<Duration> {
    if !(0.05..=60.0).contains(&seconds) {
        return Err(CliError::usage(
            "--interval must be between 0.05 and 60 seconds",
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Sleeps for `interval`, waking early for Ctrl-C. False once Ctrl-C was pressed.
pub fn pause(interval: Duration) -> bool {
    let until = Instant::now() + interval;
    while Instant::now() < until {
        if prompt::interrupted() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25).min(interval));
    }
    !prompt::interrupted()
}

/// The newest event id in the store now (0 for none): where following starts.
fn newest_event(store: &dyn Store, query: &EventQuery) -> CliResult<i64> {
    let newest = store.events(&EventQuery {
        limit: 1,
        after: None,
        ..query.clone()
    })?;
    Ok(newest.events.first().map_or(0, |e| e.id))
}

/// Events after `cursor`, oldest first, and the cursor past them.
fn events_after(
    store: &dyn Store,
    query: &EventQuery,
    cursor: i64,
) -> CliResult<(Vec<EventRow>, i64)> {
    let page = store.events(&EventQuery {
        limit: POLL_EVENTS,
        after: Some(cursor),
        ..query.clone()
    })?;
    let next = page.events.iter().map(|e| e.id).max().unwrap_or(cursor);
    Ok((page.events, next))
}

/// One event as one line: a followed stream cannot align columns it has not seen. At
/// 80 columns it keeps the time of day, the kind, the notification as the shortest
/// prefix that names it, the channel and the outcome; the detail takes what is left.
fn event_line(row: &EventRow, notification: &str, out: &Output) -> String {
    let event = row.event();
    let payload = event.payload_value();
    let channel = payload["channel"]
        .as_str()
        .map(views::shown)
        .unwrap_or_default();
    let outcome = views::outcome_word(&row.kind, &payload);
    let detail = views::detail(&event, out);
    let head = |at: &str, id: &str| {
        format!(
            "{:>6}  {at}  {:<22}  {}  {:<9}  {:<8}",
            row.id,
            views::shown(&row.kind),
            views::shown(id),
            channel,
            outcome
        )
    };
    // Off a terminal, the whole instant and the whole id: a log to keep, not a screen.
    let Some(width) = out.fit_width().map(usize::from) else {
        return format!(
            "{}  {detail}",
            head(&time::rfc3339(row.at), &row.notification_id)
        )
        .trim_end()
        .to_string();
    };
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let head = head(&views::clock_time(row.at, now), notification);
    let used = crate::render::table::display_width(&head) as usize;
    if used + 4 >= width || detail.is_empty() {
        return head.trim_end().to_string();
    }
    let room = width - used - 2;
    if detail.chars().count() <= room {
        return format!("{head}  {detail}");
    }
    let cut: String = detail.chars().take(room.saturating_sub(1)).collect();
    format!("{head}  {}…", cut.trim_end())
}

/// `events --follow`: the newest `backlog` events, oldest first, then every new one as it
/// is written, until Ctrl-C.
pub fn follow_events(
    store: &dyn Store,
    query: EventQuery,
    backlog: usize,
    every: Duration,
    out: &Output,
) -> CliResult {
    prompt::install_interrupt_handler();
    let started = Instant::now();
    let recent = store.events(&EventQuery {
        limit: backlog,
        after: None,
        ..query.clone()
    })?;
    let mut cursor = match recent.events.first() {
        Some(newest) => newest.id,
        None => newest_event(store, &query)?,
    };
    let mut shown = 0usize;
    for row in recent.events.iter().rev() {
        emit_event(store, row, out)?;
        shown += 1;
    }
    status(&format!(
        "following {} (Ctrl-C to stop) ...",
        views::shown(&store.describe())
    ));
    let mut identity = store.identity().ok().flatten();
    let mut outage = Outage::default();
    while pause(every) {
        still_there(store)?;
        let (rows, next) = match events_after(store, &query, cursor) {
            Ok(read) => read,
            Err(err) if transient(&err) => {
                outage.failed(&format!("cannot read: {err}"));
                continue;
            }
            Err(err) => return Err(err),
        };
        outage.answered();
        for row in &rows {
            emit_event(store, row, out)?;
        }
        shown += rows.len();
        cursor = next;
        if rows.is_empty()
            && let Some(moved) = replaced(store, &mut identity, &mut cursor)
        {
            status(&moved);
        }
    }
    status(&format!(
        "\nstopped (Ctrl-C) after {}: {shown} events shown, the last id {cursor}",
        time::duration(started.elapsed().as_secs_f64())
    ));
    Ok(())
}

/// When nothing new came: whether the store was replaced under the follow (another store,
/// or an older copy whose events end before the last one shown), said in words, with the
/// cursor moved to the store's newest event so that what it writes next is shown.
fn replaced(store: &dyn Store, identity: &mut Option<String>, cursor: &mut i64) -> Option<String> {
    let now = store.identity().ok()?;
    let newest = event_cursor(store).ok()?;
    let other = identity.is_some() && now.is_some() && *identity != now;
    let behind = newest < *cursor;
    if !other && !behind {
        return None;
    }
    let said = format!(
        "note: {} is {}: the events shown so far were another store's; following from its event {newest}",
        views::shown(&store.describe()),
        if other {
            "another store now".to_string()
        } else {
            format!("now an older copy, ending at event {newest}, before the last shown ({cursor})")
        }
    );
    *identity = now;
    *cursor = newest;
    Some(said)
}

fn emit_event(store: &dyn Store, row: &EventRow, out: &Output) -> CliResult {
    out.record(row, || {
        let short = crate::session::ids::short_ids(store, [row.notification_id.as_str()], out);
        let notification = short
            .get(&row.notification_id)
            .unwrap_or(&row.notification_id);
        event_line(row, notification, out)
    })?;
    Ok(())
}

/// A failure that may pass: the server restarting, a busy store.
fn transient(err: &CliError) -> bool {
    err.kind == super::error::ExitKind::Error
}

/// Stops a poll whose store is no longer the one its name reaches (a file replaced or
/// removed under it): read on, the old file's history would be shown as the store's, and
/// nothing written to the new one ever would be.
fn still_there(store: &dyn Store) -> CliResult {
    match store.replaced() {
        Some(why) => Err(CliError::error(why)),
        None => Ok(()),
    }
}

/// What a poll says of a store it cannot read: the failure once, not at every poll (a
/// poll every second through a restart wrote a line a second), again only when it says
/// something else, and once the store answers, for how long it did not.
#[derive(Default)]
struct Outage {
    since: Option<Instant>,
    said: Option<String>,
}

impl Outage {
    fn failed(&mut self, why: &str) {
        self.since.get_or_insert_with(Instant::now);
        if self.said.as_deref() != Some(why) {
            status(&format!("{why}; trying again"));
            self.said = Some(why.to_string());
        }
    }

    fn answered(&mut self) {
        if let Some(since) = self.since.take() {
            self.said = None;
            status(&format!(
                "reading again, after {} without",
                time::duration(since.elapsed().as_secs_f64())
            ));
        }
    }
}

/// `inspect ID --follow`: the notification's new events as they are written, until it
/// settles. A settled notification is reported at once.
pub fn follow_notification(
    store: &dyn Store,
    doc: NotificationDoc,
    every: Duration,
    out: &Output,
) -> CliResult<NotificationDoc> {
    prompt::install_interrupt_handler();
    let id = doc.row.id.clone();
    let mut last = doc.events.iter().map(|e| e.id).max().unwrap_or(0);
    let mut doc = doc;
    if !settled(&doc) {
        status(&format!(
            "following {} until it settles (Ctrl-C to stop) ...",
            views::shown(&id)
        ));
    }
    let mut outage = Outage::default();
    while !settled(&doc) {
        if !pause(every) {
            status(&format!(
                "\nstopped (Ctrl-C): {} is still {} after attempt {} of cycle {}",
                views::shown(&id),
                views::shown(doc.row.status.as_str()),
                doc.row.attempts,
                doc.row.cycle
            ));
            return Err(prompt::interrupted_quietly());
        }
        still_there(store)?;
        doc = match store.notification(&id) {
            Ok(doc) => doc,
            Err(err @ StoreError::Unavailable(_)) => {
                outage.failed(&format!("cannot read: {err}"));
                continue;
            }
            Err(err) => return Err(err.into()),
        };
        outage.answered();
        let fresh: Vec<Event> = doc.events.iter().filter(|e| e.id > last).cloned().collect();
        if let Some(newest) = fresh.iter().map(|e| e.id).max() {
            last = newest;
            out.records(&fresh, || views::timeline(&fresh, &[], out))?;
        }
    }
    Ok(doc)
}

/// `replay --wait`: waits for each replayed notification (its id, and the id of the
/// REPLAYED event) to settle in the cycle the replay started, one line each as it does.
/// Ok only when every one was delivered.
pub fn wait_for_delivery(
    store: &dyn Store,
    ids: &[(String, i64)],
    every: Duration,
    timeout: Duration,
    out: &Output,
) -> CliResult {
    wait_for_delivery_paced(store, ids, every, timeout, None, out)
}

/// Where a paced wait stands: settled and delivered against what the pace made due.
fn say_progress((words, last_due): (&str, f64), done: &[Settlement], total: usize) {
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    status(&format!(
        "{} of {total} settled ({} delivered); paced at {words}, {}",
        done.len(),
        done.iter().filter(|s| s.delivered).count(),
        if last_due > now {
            format!("the last is due in {}", time::duration(last_due - now))
        } else {
            "every one is due now".to_string()
        }
    ));
}

/// What is waiting its turn (a paced replay, retries backing off), while the DLQ is
/// watched: said only while there is any.
/// Says whether the incident is still happening, by the last lease loss and reclaim,
/// when that is news: the first time, and whenever either changes. Returns what it said
/// it of.
fn say_stillness(
    store: &dyn Store,
    said: Option<(Option<f64>, Option<f64>, bool)>,
) -> Option<(Option<f64>, Option<f64>, bool)> {
    let Ok(health) = store.health(60.0, None) else {
        return said;
    };
    let now = health.stats.at;
    let stillness = crate::pulse::Stillness::of(
        health.last_lease_lost,
        health.last_reclaim,
        now,
        crate::pulse::DEFAULT_QUIET_AFTER,
    );
    let seen = (
        health.last_lease_lost,
        health.last_reclaim,
        stillness.still_happening,
    );
    if said != Some(seen) {
        status(&views::still_words(&stillness, now, now));
    }
    Some(seen)
}

fn say_backlog(store: &dyn Store) {
    let Ok(health) = store.health(60.0, None) else {
        return;
    };
    let stats = &health.stats;
    if stats.scheduled == 0 {
        return;
    }
    let last = stats
        .last_scheduled_at
        .map(|at| {
            format!(
                ", the last due in {}",
                time::duration((at - stats.at).max(0.0))
            )
        })
        .unwrap_or_default();
    status(&format!(
        "{} due now, {} waiting their turn (paced replays, retries){last}; {} claims in the last minute",
        stats.due, stats.scheduled, health.claims
    ));
}

/// How often a paced wait (and a watch) says where it stands: every 10 s, or every ten
/// looks when `--interval` looks more often than once a second.
fn progress_every(every: Duration) -> Duration {
    Duration::from_secs(10).min(every * 10)
}

/// [`wait_for_delivery`]; with `pace` (its words, and when its last replay is due, in
/// unix seconds) it says every few seconds how many have settled against how many the
/// pace has made due.
pub fn wait_for_delivery_paced(
    store: &dyn Store,
    ids: &[(String, i64)],
    every: Duration,
    timeout: Duration,
    pace: Option<(&str, f64)>,
    out: &Output,
) -> CliResult {
    let waited = wait_settled(store, ids, every, timeout, pace, out)?;
    judge(&waited, timeout, out)
}

/// What a wait found, said: its JSON line, the account, and Ok only when every replay
/// was delivered (Ctrl-C exits as interrupted).
pub fn judge(waited: &Waited, timeout: Duration, out: &Output) -> CliResult {
    out.closing_line(&waited.document())?;
    let account = waited.account(timeout);
    if waited.stopped {
        status(&format!("\nstopped (Ctrl-C): {account}"));
        return Err(prompt::interrupted_quietly());
    }
    if waited.delivered() == waited.done.len() {
        status(&account);
        return Ok(());
    }
    Err(CliError::error(account).hint(
        "`unsctl inspect ID` shows what happened; `unsctl dlq triage` says what each needs now",
    ))
}

/// Waits for each of `ids` (a notification and its REPLAYED event) to settle in the
/// cycle its replay started, at most `timeout`, a line each as it does (on a terminal's
/// stdout, not in JSON).
pub fn wait_settled(
    store: &dyn Store,
    ids: &[(String, i64)],
    every: Duration,
    timeout: Duration,
    pace: Option<(&str, f64)>,
    out: &Output,
) -> CliResult<Waited> {
    prompt::install_interrupt_handler();
    let mut watch = Watch::new(ids);
    let mut said = Instant::now();
    status(&format!(
        "waiting for {} to settle (at most {}; Ctrl-C to stop) ...",
        counted(ids.len() as i64, "replayed notification"),
        time::duration(timeout.as_secs_f64())
    ));
    let mut stopped = false;
    let mut told_unclaimed = false;
    let mut outage = Outage::default();
    loop {
        still_there(store)?;
        let look = watch.look(store, crate::clock::Clock::now(&crate::clock::SystemClock))?;
        match look.unread.as_slice() {
            [] => outage.answered(),
            [why] => outage.failed(why),
            [why, more @ ..] => outage.failed(&format!(
                "{why} (and {} more)",
                counted(more.len() as i64, "notification")
            )),
        }
        for settlement in &look.settled {
            out.progress(|| print(&settlement.line(out)))?;
        }
        if watch.is_done() {
            break;
        }
        let unclaimed = watch.progress().unclaimed;
        if unclaimed > 0 && !told_unclaimed {
            told_unclaimed = true;
            status(&format!(
                "{} due and not claimed by any worker for {} or more: is a worker running against this store, with an adapter for the channel? (`unsctl doctor` says)",
                counted(unclaimed as i64, "replay"),
                time::duration(crate::session::wait::UNCLAIMED_AFTER)
            ));
        }
        if let Some(pace) = pace
            && said.elapsed() >= progress_every(every)
        {
            said = Instant::now();
            say_progress(pace, watch.settled(), ids.len());
        }
        if watch.elapsed() >= timeout || !pause(every) {
            stopped = prompt::interrupted();
            break;
        }
    }
    let waited = watch.end(stopped);
    for settlement in waited.done.iter().filter(|s| !s.settled) {
        out.progress(|| print(&settlement.line(out)))?;
    }
    Ok(waited)
}

/// A change in the DLQ that `dlq triage --watch` reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    Entered {
        id: String,
        branch: Branch,
    },
    Left {
        id: String,
        was: Branch,
        status: String,
    },
    Branch {
        id: String,
        from: Branch,
        to: Branch,
    },
}

/// The branch of each selected entry.
pub type Branches = BTreeMap<String, Branch>;

/// What changed between two readings of the DLQ, in id order.
pub fn changes(
    before: &Branches,
    after: &Branches,
    status_of: impl Fn(&str) -> String,
) -> Vec<Change> {
    let mut found = Vec::new();
    for (id, branch) in after {
        match before.get(id) {
            None => found.push(Change::Entered {
                id: id.clone(),
                branch: *branch,
            }),
            Some(old) if old != branch => found.push(Change::Branch {
                id: id.clone(),
                from: *old,
                to: *branch,
            }),
            Some(_) => {}
        }
    }
    for (id, was) in before {
        if !after.contains_key(id) {
            found.push(Change::Left {
                id: id.clone(),
                was: *was,
                status: status_of(id),
            });
        }
    }
    found
}

fn any_event() -> EventQuery {
    EventQuery {
        kinds: Vec::new(),
        selection: Selection::default(),
        limit: 1,
        after: None,
    }
}

/// The newest event id of the store now: a watch started here misses nothing after it.
pub fn event_cursor(store: &dyn Store) -> CliResult<i64> {
    newest_event(store, &any_event())
}

/// `dlq triage --watch`: after the first triage, one line whenever an entry enters the
/// selection, leaves it or changes branch. The DLQ is triaged again only when an event
/// was written since the last look.
#[allow(clippy::too_many_arguments)]
pub fn watch_dlq(
    store: &dyn Store,
    selection: &Selection,
    keep: &(dyn Fn(&Verdict) -> bool + Sync),
    limit: Option<usize>,
    mut known: Branches,
    mut cursor: i64,
    every: Duration,
    out: &Output,
) -> CliResult {
    prompt::install_interrupt_handler();
    let started = Instant::now();
    let any = any_event();
    let mut counts = [0usize; 3];
    status(&format!(
        "watching the DLQ of {} (Ctrl-C to stop) ...",
        views::shown(&store.describe())
    ));
    let mut said = Instant::now();
    let mut stillness = say_stillness(store, None);
    let mut outage = Outage::default();
    while pause(every) {
        still_there(store)?;
        if said.elapsed() >= progress_every(every) {
            said = Instant::now();
            say_backlog(store);
            stillness = say_stillness(store, stillness);
        }
        let moved = match events_after(store, &any, cursor) {
            Ok((_, next)) => next,
            Err(err) if transient(&err) => {
                outage.failed(&format!("cannot read: {err}"));
                continue;
            }
            Err(err) => return Err(err),
        };
        outage.answered();
        if moved == cursor {
            continue;
        }
        cursor = moved;
        let now: Branches = super::selection::verdicts(store, selection, keep, limit)?
            .into_iter()
            .map(|v| (v.id, v.branch))
            .collect();
        let status_of = |id: &str| {
            store
                .notification(id)
                .map(|doc| doc.row.status.to_string())
                .unwrap_or_else(|_| "gone".into())
        };
        for change in changes(&known, &now, status_of) {
            match change {
                Change::Entered { .. } => counts[0] += 1,
                Change::Left { .. } => counts[1] += 1,
                Change::Branch { .. } => counts[2] += 1,
            }
            out.record(&change, || change_line(&change, out))?;
        }
        known = now;
    }
    status(&format!(
        "\nstopped (Ctrl-C) after {}: {} entered, {} left, {} changed branch; {} in the selection now",
        time::duration(started.elapsed().as_secs_f64()),
        counts[0],
        counts[1],
        counts[2],
        known.len()
    ));
    Ok(())
}

fn change_line(change: &Change, out: &Output) -> String {
    let stamp = time::rfc3339(crate::clock::Clock::now(&crate::clock::SystemClock));
    match change {
        Change::Entered { id, branch } => format!(
            "{stamp}  + {}  entered: {}",
            views::shown(id),
            views::branch_text(*branch, out)
        ),
        Change::Left { id, was, status } => format!(
            "{stamp}  - {}  left ({} now; was {})",
            views::shown(id),
            views::shown(status),
            was.as_str()
        ),
        Change::Branch { id, from, to } => format!(
            "{stamp}  ~ {}  {} -> {}",
            views::shown(id),
            from.as_str(),
            views::branch_text(*to, out)
        ),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn progress_is_said_every_10_s_or_every_ten_looks_if_sooner() {
        assert_eq!(
            progress_every(Duration::from_secs(1)),
            Duration::from_secs(10)
        );
        assert_eq!(
            progress_every(Duration::from_secs(5)),
            Duration::from_secs(10)
        );
        assert_eq!(
            progress_every(Duration::from_millis(200)),
            Duration::from_secs(2)
        );
    }

    use super::*;
}
