//! Waiting for replays to settle in the cycle each started: delivered, back in the DLQ,
//! or resolved. Each look reads every replay still open once; the command line prints
//! each settlement as it comes, the live screen shows the count ("replaying 12: 11
//! delivered, 1 back in the DLQ").

use crate::model::NotificationDoc;
use crate::render::{time, views};
use crate::store::{Store, StoreError};
use std::time::{Duration, Instant};

/// Whether a row has come to rest: delivered, dead-lettered or resolved.
pub fn settled(doc: &NotificationDoc) -> bool {
    doc.row.dead_letter
        || matches!(
            doc.row.status.known(),
            Some(crate::model::Status::Delivered | crate::model::Status::Resolved)
        )
}

/// What became of one replayed notification.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Settlement {
    pub id: String,
    /// DELIVERED, DEAD, RESOLVED, or the status it still had when the wait ended.
    pub status: String,
    /// Every channel replayed was delivered (a replay of some channels: the entry is
    /// back in the DLQ for the rest, named in `outstanding`).
    pub delivered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outstanding: Option<crate::model::ChannelSet>,
    pub settled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Seconds from the start of the wait to the settlement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Not settled when the wait ended, due and unclaimed since the replay for longer
    /// than a running worker takes ([`UNCLAIMED_AFTER`]).
    #[serde(skip)]
    pub unclaimed: bool,
}

/// How a notification's document stands against the replay that was waited on: settled
/// only in the cycle that replay started, so a store swapped for an older copy, where the
/// row settled before it, never passes for a delivery.
fn settled_since(doc: &NotificationDoc, replayed: i64) -> Result<bool, String> {
    let Some(event) = doc.events.iter().find(|e| e.id == replayed) else {
        return Err(format!(
            "the store no longer shows the replay (event {replayed}): it was replaced or restored from a copy"
        ));
    };
    if event.kind != crate::model::Kind::Replayed {
        return Err(format!(
            "event {replayed} is no longer the replay but {}: the store was replaced",
            views::shown(event.kind.as_str())
        ));
    }
    let cycle = event.payload_value()["cycle"].as_i64();
    if cycle.is_some_and(|cycle| doc.row.cycle < cycle) {
        return Err(format!(
            "the row is in cycle {}, before the replay's: the store was replaced",
            doc.row.cycle
        ));
    }
    Ok(settled(doc))
}

/// Seconds from the REPLAYED event to the event that settled the row after it, as the
/// store recorded them (not as often as the wait happened to look).
fn settled_after(doc: &NotificationDoc, replayed: i64) -> Option<f64> {
    use crate::model::Kind;
    let start = doc.events.iter().find(|e| e.id == replayed)?.at;
    let end = doc
        .events
        .iter()
        .filter(|e| e.id > replayed)
        .find(|e| {
            matches!(
                e.kind.known(),
                Some(Kind::Delivered | Kind::DeadLettered | Kind::DlqResolved)
            )
        })?
        .at;
    (end >= start).then_some(end - start)
}

/// A replay of some channels that delivered each of them, back in the DLQ for the
/// channels it left outstanding: those channels (the replay did what it was asked; the
/// entry waits for the rest to be replayed or given up).
fn outstanding_after(doc: &NotificationDoc, replayed: i64) -> Option<crate::model::ChannelSet> {
    use crate::triage::ChannelState;
    if !doc.row.dead_letter {
        return None;
    }
    let event = doc.events.iter().find(|e| e.id == replayed)?;
    let asked: crate::model::ChannelSet = event.payload_value()["channels"]
        .as_array()?
        .iter()
        .filter_map(|c| c.as_str()?.parse().ok())
        .collect();
    let verdict = crate::triage::triage_events(&doc.row, &doc.events);
    let state = |channel| {
        verdict
            .channels
            .iter()
            .find(|c| c.channel == channel)
            .map(|c| c.state)
    };
    let delivered = !asked.is_empty()
        && asked
            .iter()
            .all(|c| state(c) == Some(ChannelState::Delivered));
    let left: crate::model::ChannelSet = verdict
        .channels
        .iter()
        .filter(|c| c.state != ChannelState::Delivered)
        .map(|c| c.channel)
        .collect();
    (delivered && !left.is_empty()).then_some(left)
}

/// Where a replay not settled yet stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stand {
    /// A worker claimed it since the replay: being tried, or retrying.
    Claimed,
    /// Due for `seconds`, and no worker has claimed it since the replay.
    Unclaimed { seconds: f64 },
    /// Not due yet: a paced replay waiting its turn.
    Scheduled,
}

/// How long a replay is due with no worker claiming it before a wait says so: a running
/// worker looks for due rows several times a second, so a few seconds is not its pace.
pub const UNCLAIMED_AFTER: f64 = 5.0;

impl Stand {
    /// Due and unclaimed for longer than a running worker takes to claim it.
    pub fn unclaimed(self) -> bool {
        matches!(self, Stand::Unclaimed { seconds } if seconds >= UNCLAIMED_AFTER)
    }
}

/// How `doc`, not settled, stands against its replay (event `replayed`) at `now`: a claim
/// writes its ATTEMPT_STARTED in the claim's own transaction, so no such event after the
/// replay means no worker has taken it; it has been due since its due time or the replay,
/// whichever came later.
fn stand(doc: &NotificationDoc, replayed: i64, now: f64) -> Stand {
    let claimed = doc
        .events
        .iter()
        .any(|e| e.id > replayed && e.kind == crate::model::Kind::AttemptStarted);
    if claimed {
        return Stand::Claimed;
    }
    if doc.row.next_attempt_at > now {
        return Stand::Scheduled;
    }
    let replay_at = doc
        .events
        .iter()
        .find(|e| e.id == replayed)
        .map_or(f64::NEG_INFINITY, |e| e.at);
    Stand::Unclaimed {
        seconds: (now - doc.row.next_attempt_at.max(replay_at)).max(0.0),
    }
}

/// Where one replayed notification stands after one look.
enum Waiting {
    Settled(Settlement),
    /// Not settled yet, with its status and where it stands.
    Open(String, Stand),
    /// The store could not be read this time (it is asked again): why.
    Unread(String),
}

/// Reads `id` once: settled in the cycle its REPLAYED event `replayed` started (how long
/// that took, from the store's own events), or still open and where it stands at `now`.
fn read_settlement(
    store: &dyn Store,
    id: &str,
    replayed: i64,
    started: Instant,
    now: f64,
) -> Result<Waiting, StoreError> {
    let doc = match store.notification(id) {
        Ok(doc) => doc,
        Err(err @ StoreError::Unavailable(_)) => {
            return Ok(Waiting::Unread(format!(
                "cannot read {}: {err}",
                views::shown(id)
            )));
        }
        Err(err) => return Err(err),
    };
    if let Err(why) = settled_since(&doc, replayed) {
        return Ok(Waiting::Settled(Settlement {
            id: id.to_string(),
            status: "UNKNOWN".into(),
            delivered: false,
            outstanding: None,
            settled: true,
            error_message: Some(why),
            seconds: Some(started.elapsed().as_secs_f64()),
            unclaimed: false,
        }));
    }
    if !settled(&doc) {
        return Ok(Waiting::Open(
            doc.row.status.to_string(),
            stand(&doc, replayed, now),
        ));
    }
    let outstanding = outstanding_after(&doc, replayed);
    Ok(Waiting::Settled(Settlement {
        id: id.to_string(),
        status: doc.row.status.to_string(),
        delivered: doc.row.status == crate::model::Status::Delivered || outstanding.is_some(),
        outstanding,
        settled: true,
        error_message: doc.row.error_message.clone(),
        seconds: Some(
            settled_after(&doc, replayed).unwrap_or_else(|| started.elapsed().as_secs_f64()),
        ),
        unclaimed: false,
    }))
}

impl Settlement {
    /// One line: the id, DELIVERED or where it ended (in colour on a terminal), after how
    /// long, and the error of one not delivered.
    pub fn line(&self, out: &crate::render::Output) -> String {
        let s = self;
        let state = match (s.settled, s.delivered, &s.outstanding) {
            (true, true, Some(left)) => format!(
                "{}; still outstanding in the DLQ: {} (replay it, or give it up on purpose)",
                out.green("replayed channels DELIVERED"),
                left.joined(",")
            ),
            (true, true, None) => out.green("DELIVERED"),
            (true, false, _) => out.red(&crate::render::views::shown(&s.status)),
            (false, _, _) => out.yellow(&format!(
                "still {}{}",
                crate::render::views::shown(&s.status),
                if s.unclaimed {
                    ", never claimed by a worker"
                } else {
                    ""
                }
            )),
        };
        let after = s
            .seconds
            .map(|secs| format!(" after {}", crate::render::time::duration(secs)))
            .unwrap_or_default();
        let error = s
            .error_message
            .as_deref()
            .filter(|_| !s.delivered)
            .map(|e| format!(": {}", crate::render::views::shown(e)))
            .unwrap_or_default();
        format!(
            "{}  {state}{after}{error}",
            crate::render::views::shown(&s.id)
        )
    }
}

/// A wait under way: the replays still open (with the status each had when last read)
/// and those that settled, each looked at again by [`Watch::look`]. The command line
/// prints as it goes; the live screen shows the progress.
pub struct Watch {
    replays: std::collections::HashMap<String, i64>,
    /// Each replay still open, with its status and where it stood when last read.
    open: Vec<(String, String, Stand)>,
    done: Vec<Settlement>,
    started: Instant,
}

/// What one look found: the replays that settled since the last, and what could not be
/// read this time.
#[derive(Debug, Default)]
pub struct Look {
    pub settled: Vec<Settlement>,
    pub unread: Vec<String>,
}

/// Where a wait stands, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub total: usize,
    pub delivered: usize,
    /// Settled without delivery: back in the DLQ, resolved, or the store replaced.
    pub back: usize,
    /// Not settled yet, in all.
    pub open: usize,
    /// Of those open: due, and no worker has claimed them since the replay, for longer
    /// than [`UNCLAIMED_AFTER`] (those due for less count as in flight).
    pub unclaimed: usize,
    /// Of those open: paced replays not due yet.
    pub scheduled: usize,
}

impl Progress {
    /// "replaying 12: 11 delivered, 1 back in the DLQ, 0 in flight", and the replays
    /// still waiting their turn or due with no worker claiming them, where there are any:
    /// "in flight" counts only those a worker took.
    pub fn words(&self, verb: &str) -> String {
        let mut words = format!(
            "{verb} {}: {} delivered, {} back in the DLQ, {} in flight",
            self.total,
            self.delivered,
            self.back,
            self.open - self.unclaimed - self.scheduled
        );
        if self.scheduled > 0 {
            words.push_str(&format!(", {} waiting their turn", self.scheduled));
        }
        if self.unclaimed > 0 {
            words.push_str(&format!(
                ", {} due and not claimed by any worker yet",
                self.unclaimed
            ));
        }
        words
    }
}

impl Watch {
    /// A wait for each of `ids` (a notification and its REPLAYED event), starting now.
    pub fn new(ids: &[(String, i64)]) -> Self {
        Self {
            replays: ids.iter().cloned().collect(),
            open: ids
                .iter()
                .map(|(id, _)| (id.clone(), "UNKNOWN".into(), Stand::Claimed))
                .collect(),
            done: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Reads every replay still open once; `now` tells a paced replay not due yet from
    /// one due that no worker claims.
    pub fn look(&mut self, store: &dyn Store, now: f64) -> Result<Look, StoreError> {
        let mut look = Look::default();
        let mut still = Vec::with_capacity(self.open.len());
        for (id, last, stood) in std::mem::take(&mut self.open) {
            let replayed = self.replays.get(&id).copied().unwrap_or_default();
            match read_settlement(store, &id, replayed, self.started, now)? {
                Waiting::Settled(settlement) => {
                    look.settled.push(settlement.clone());
                    self.done.push(settlement);
                }
                Waiting::Open(status, stand) => still.push((id, status, stand)),
                Waiting::Unread(why) => {
                    look.unread.push(why);
                    still.push((id, last, stood));
                }
            }
        }
        self.open = still;
        Ok(look)
    }

    /// Every replay has settled.
    pub fn is_done(&self) -> bool {
        self.open.is_empty()
    }

    /// How long it has waited.
    pub fn elapsed(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// The settlements so far.
    pub fn settled(&self) -> &[Settlement] {
        &self.done
    }

    pub fn progress(&self) -> Progress {
        let delivered = self.done.iter().filter(|s| s.delivered).count();
        let standing = |is: fn(&Stand) -> bool| self.open.iter().filter(|(_, _, s)| is(s)).count();
        Progress {
            total: self.done.len() + self.open.len(),
            delivered,
            back: self.done.len() - delivered,
            open: self.open.len(),
            unclaimed: standing(|s| s.unclaimed()),
            scheduled: standing(|s| *s == Stand::Scheduled),
        }
    }

    /// The wait ended (`stopped` by Ctrl-C, or out of time): what it found, the replays
    /// still open with where they stood.
    pub fn end(mut self, stopped: bool) -> Waited {
        let unsettled = self.open.len();
        for (id, last, stand) in self.open {
            self.done.push(Settlement {
                id,
                status: last,
                delivered: false,
                outstanding: None,
                settled: false,
                error_message: None,
                seconds: None,
                unclaimed: stand.unclaimed(),
            });
        }
        Waited {
            done: self.done,
            unsettled,
            stopped,
        }
    }
}

/// The JSON line a wait ends with.
#[derive(Debug, serde::Serialize)]
pub struct WaitDocument<'a> {
    pub waited: &'a [Settlement],
    pub delivered: usize,
    pub not_delivered: usize,
    pub unsettled: usize,
}

/// What a wait found: each replayed notification's settlement (or where it stood when
/// the wait ended), how many had not settled, and whether Ctrl-C ended it.
pub struct Waited {
    pub done: Vec<Settlement>,
    pub unsettled: usize,
    pub stopped: bool,
}

impl Waited {
    pub fn delivered(&self) -> usize {
        self.done.iter().filter(|s| s.delivered).count()
    }

    /// `{"waited": [...], "delivered", "not_delivered", "unsettled"}`.
    pub fn document(&self) -> WaitDocument<'_> {
        let delivered = self.delivered();
        WaitDocument {
            waited: &self.done,
            delivered,
            not_delivered: self.done.len() - delivered - self.unsettled,
            unsettled: self.unsettled,
        }
    }

    /// "2 of 3 delivered, 1 not settled within 5m".
    pub fn account(&self, timeout: Duration) -> String {
        let partial = self.done.iter().filter(|s| s.outstanding.is_some()).count();
        format!(
            "{} of {} delivered{}{}{}",
            self.delivered(),
            self.done.len(),
            match partial {
                0 => String::new(),
                n => format!(" ({n} with other channels still outstanding in the DLQ)"),
            },
            match (self.unsettled, self.stopped) {
                (0, _) => String::new(),
                (n, true) => format!(", {n} still in flight when the wait was stopped"),
                (n, false) => format!(
                    ", {n} not settled within {}",
                    time::duration(timeout.as_secs_f64())
                ),
            },
            self.unclaimed_words()
        )
    }

    /// What the account adds when some replays were due and never claimed: nothing sent
    /// them, which is not the same as a slow provider.
    fn unclaimed_words(&self) -> String {
        match self.done.iter().filter(|s| s.unclaimed).count() {
            0 => String::new(),
            n => format!(
                "; {n} of them due and never claimed by a worker: is a worker running against this store, with an adapter for the channel? (`unsctl doctor` says)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Notification, payload_from_value};

    fn doc(status: &str, cycle: i64, events: &[(i64, &str, i64)]) -> NotificationDoc {
        NotificationDoc {
            row: Notification {
                id: "n-1".into(),
                status: status.into(),
                dead_letter: false,
                attempts: 2,
                cycle,
                cycle_attempts: 1,
                max_attempts: 1,
                channels: vec!["EMAIL".into()],
                payload: serde_json::json!({}),
                idempotency_key: None,
                lease_token: None,
                lease_until: None,
                next_attempt_at: 0.0,
                error_message: None,
                created_at: 0.0,
                updated_at: 0.0,
                unreadable: Vec::new(),
            },
            events: events
                .iter()
                .map(|(id, kind, cycle)| Event {
                    id: *id,
                    at: 0.0,
                    kind: (*kind).into(),
                    payload: payload_from_value(&serde_json::json!({"cycle": cycle})),
                    unreadable: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_wait_judges_the_cycle_its_replay_started() {
        // Delivered in the replay's cycle.
        let after = doc("DELIVERED", 2, &[(7, "REPLAYED", 2), (9, "DELIVERED", 2)]);
        assert_eq!(settled_since(&after, 7), Ok(true));
        // Still due in it.
        let pending = doc("PENDING", 2, &[(7, "REPLAYED", 2)]);
        assert_eq!(settled_since(&pending, 7), Ok(false));
        // A store swapped for an older copy: DELIVERED, but in a cycle before the replay,
        // or without the replay at all.
        let older = doc("DELIVERED", 1, &[(7, "REPLAYED", 2)]);
        assert!(settled_since(&older, 7).is_err_and(|why| why.contains("before the replay")));
        let copy = doc("DELIVERED", 1, &[(3, "DELIVERED", 1)]);
        assert!(settled_since(&copy, 7).is_err_and(|why| why.contains("replaced")));
        let mut timed = doc(
            "DELIVERED",
            2,
            &[
                (7, "REPLAYED", 2),
                (8, "ATTEMPT_STARTED", 2),
                (9, "DELIVERED", 2),
            ],
        );
        timed.events[0].at = 100.0;
        timed.events[2].at = 100.125;
        assert_eq!(
            settled_after(&timed, 7),
            Some(0.125),
            "measured in the store"
        );
        let other = doc("DELIVERED", 1, &[(7, "DELIVERED", 1)]);
        assert!(settled_since(&other, 7).is_err_and(|why| why.contains("no longer the replay")));
    }

    /// A replay no worker took is told from one being tried and from one waiting its
    /// turn, in the progress and in the account a wait ends with.
    #[test]
    fn a_replay_no_worker_claims_is_said_to_be_unclaimed() {
        let mut due = doc("PENDING", 2, &[(7, "REPLAYED", 2)]);
        due.row.next_attempt_at = 100.0;
        assert_eq!(stand(&due, 7, 100.0), Stand::Unclaimed { seconds: 0.0 });
        assert!(!stand(&due, 7, 104.0).unclaimed(), "a worker's pace");
        assert!(stand(&due, 7, 105.0).unclaimed());
        assert_eq!(stand(&due, 7, 99.0), Stand::Scheduled, "a pace's turn");
        // Due before the replay was made: due since the replay.
        due.events[0].at = 103.0;
        assert_eq!(stand(&due, 7, 106.0), Stand::Unclaimed { seconds: 3.0 });
        // A claim before the replay is not one of it.
        let before = doc(
            "PENDING",
            2,
            &[(5, "ATTEMPT_STARTED", 1), (7, "REPLAYED", 2)],
        );
        assert!(stand(&before, 7, 100.0).unclaimed());
        let retrying = doc(
            "PENDING",
            2,
            &[(7, "REPLAYED", 2), (8, "ATTEMPT_STARTED", 2)],
        );
        assert_eq!(stand(&retrying, 7, 100.0), Stand::Claimed);

        let progress = Progress {
            total: 4,
            delivered: 1,
            back: 0,
            open: 3,
            unclaimed: 1,
            scheduled: 1,
        };
        assert_eq!(
            progress.words("replaying"),
            "replaying 4: 1 delivered, 0 back in the DLQ, 1 in flight, 1 waiting their turn, 1 due and not claimed by any worker yet"
        );
        let plain = Progress {
            unclaimed: 0,
            scheduled: 0,
            ..progress
        };
        assert_eq!(
            plain.words("canary"),
            "canary 4: 1 delivered, 0 back in the DLQ, 3 in flight"
        );

        let mut watch = Watch::new(&[("n-1".into(), 7), ("n-2".into(), 9)]);
        watch.open[0].2 = Stand::Unclaimed { seconds: 6.0 };
        watch.open[1].2 = Stand::Scheduled;
        assert_eq!(watch.progress().unclaimed, 1);
        let waited = watch.end(false);
        let account = waited.account(Duration::from_secs(2));
        assert!(
            account.ends_with(
                "2 not settled within 2.0 s; 1 of them due and never claimed by a worker: is a worker running against this store, with an adapter for the channel? (`unsctl doctor` says)"
            ),
            "{account}"
        );
        // Stopped, by Ctrl-C on the command line or Esc on the screen: the account
        // names neither key.
        let mut stopped = Watch::new(&[("n-1".into(), 7)]);
        stopped.open[0].2 = Stand::Claimed;
        assert!(
            stopped
                .end(true)
                .account(Duration::from_secs(2))
                .ends_with("0 of 1 delivered, 1 still in flight when the wait was stopped")
        );
        let out = crate::render::Output::plain(200);
        assert!(
            waited.done[0]
                .line(&out)
                .ends_with("never claimed by a worker")
        );
        assert!(
            !waited.done[1].line(&out).contains("claimed"),
            "not due yet"
        );
    }
}
