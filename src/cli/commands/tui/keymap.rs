//! Every key of the screen, once: the footer and the help are both drawn from this table,
//! so neither can name a key the other does not.

/// The views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViewKind {
    Dlq,
    Inspect,
    Reconcile,
    Pulse,
    Audit,
    Contexts,
}

impl ViewKind {
    pub const NAMES: [&'static str; 6] =
        ["dlq", "inspect", "reconcile", "pulse", "audit", "contexts"];

    pub fn name(self) -> &'static str {
        match self {
            ViewKind::Dlq => "dlq",
            ViewKind::Inspect => "inspect",
            ViewKind::Reconcile => "reconcile",
            ViewKind::Pulse => "pulse",
            ViewKind::Audit => "audit",
            ViewKind::Contexts => "contexts",
        }
    }
}

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Mark,
    ClearMarks,
    Open,
    Filter,
    CommandBar,
    CopyId,
    CopyStep,
    Resolve,
    Replay,
    Verify,
    Refresh,
    Help,
    Back,
    Quit,
}

/// One binding: the keys as shown, what it does, where, and whether the footer names it.
pub struct Binding {
    pub keys: &'static str,
    pub command: Command,
    /// Its word in the footer.
    pub short: &'static str,
    pub does: &'static str,
    /// The views it works in (empty: all).
    pub views: &'static [ViewKind],
    pub footer: bool,
}

use ViewKind::{Audit, Contexts, Dlq, Inspect, Pulse, Reconcile};

/// The keymap, in the order the help lists it.
pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: "↑/k ↓/j",
        command: Command::Down,
        short: "move",
        does: "move (PgUp/PgDn a page, g/G first/last)",
        views: &[],
        footer: false,
    },
    Binding {
        keys: "space",
        command: Command::Mark,
        short: "mark",
        does: "mark or unmark the row (u clears every mark)",
        views: &[Dlq],
        footer: true,
    },
    Binding {
        keys: "enter",
        command: Command::Open,
        short: "inspect",
        does: "inspect the row",
        views: &[Dlq, Reconcile, Audit],
        footer: true,
    },
    Binding {
        keys: "/",
        command: Command::Filter,
        short: "filter",
        does: "filter, e.g. channel:slack !error:\"HTTP 400\" branch:verify since:1h",
        views: &[Dlq],
        footer: true,
    },
    Binding {
        keys: ":",
        command: Command::CommandBar,
        short: "views",
        does: "a view (tab completes): dlq, inspect ID, reconcile, pulse, audit, contexts",
        views: &[],
        footer: true,
    },
    Binding {
        keys: "r",
        command: Command::Resolve,
        short: "resolve",
        does: "resolve the marked rows or this one: preview, reason, typed word",
        views: &[Dlq, Inspect],
        footer: true,
    },
    Binding {
        keys: "p",
        command: Command::Replay,
        short: "replay",
        does: "replay the marked rows or this one: preview, reason, typed word",
        views: &[Dlq, Inspect],
        footer: true,
    },
    Binding {
        keys: "v",
        command: Command::Verify,
        short: "verify",
        does: "verify the marked rows or this one, and record the answers",
        views: &[Dlq, Inspect],
        footer: true,
    },
    Binding {
        keys: "y",
        command: Command::CopyId,
        short: "copy",
        does: "copy the id (OSC 52: your terminal's clipboard)",
        views: &[Dlq, Inspect, Reconcile, Audit],
        footer: true,
    },
    Binding {
        keys: "Y",
        command: Command::CopyStep,
        short: "copy step",
        does: "copy the next-step command",
        views: &[Dlq, Inspect],
        footer: false,
    },
    Binding {
        keys: "R",
        command: Command::Refresh,
        short: "refresh",
        does: "read again now (every view refreshes by itself)",
        views: &[],
        footer: false,
    },
    Binding {
        keys: "esc",
        command: Command::Back,
        short: "back",
        does: "back, close, or cancel the request in flight",
        views: &[Inspect, Reconcile, Pulse, Audit, Contexts],
        footer: true,
    },
    Binding {
        keys: "?",
        command: Command::Help,
        short: "help",
        does: "this help",
        views: &[],
        footer: true,
    },
    Binding {
        keys: "q",
        command: Command::Quit,
        short: "quit",
        does: "quit (Ctrl-C too)",
        views: &[],
        footer: true,
    },
];

/// The bindings that work in `view`.
pub fn for_view(view: ViewKind) -> impl Iterator<Item = &'static Binding> {
    BINDINGS
        .iter()
        .filter(move |b| b.views.is_empty() || b.views.contains(&view))
}

/// The footer's words for `view`: `key what` pairs, the first word of each description.
pub fn footer(view: ViewKind, readonly: bool) -> Vec<(&'static str, &'static str)> {
    for_view(view)
        .filter(|b| b.footer)
        .filter(|b| {
            !(readonly
                && matches!(
                    b.command,
                    Command::Resolve | Command::Replay | Command::Verify
                ))
        })
        .map(|b| (b.keys, b.short))
        .collect()
}
