//! Every key of the live screen, once, with its `KeyCode`: the screen reads a key by this
//! table, and draws its footer and its help from it; `unsctl tui --help` lists it too. No
//! key can be bound, shown or explained anywhere else.

use ratatui::crossterm::event::KeyCode;

/// The views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViewKind {
    Dlq,
    Inspect,
    Reconcile,
    Pulse,
    Audit,
    Providers,
    Contexts,
}

impl ViewKind {
    /// Every view's name, and the words of the command bar that are no view (`report`).
    pub const NAMES: [&'static str; 8] = [
        "dlq",
        "inspect",
        "reconcile",
        "pulse",
        "audit",
        "providers",
        "contexts",
        "report",
    ];

    pub const ALL: [ViewKind; 7] = [
        ViewKind::Dlq,
        ViewKind::Inspect,
        ViewKind::Reconcile,
        ViewKind::Pulse,
        ViewKind::Audit,
        ViewKind::Providers,
        ViewKind::Contexts,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ViewKind::Dlq => "dlq",
            ViewKind::Inspect => "inspect",
            ViewKind::Reconcile => "reconcile",
            ViewKind::Pulse => "pulse",
            ViewKind::Audit => "audit",
            ViewKind::Providers => "providers",
            ViewKind::Contexts => "contexts",
        }
    }

    /// The view called `name` (any letter case).
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(name.trim()))
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

impl Command {
    /// It changes the store (after a preview, a reason and the typed word).
    pub fn acts(self) -> bool {
        matches!(self, Command::Resolve | Command::Replay | Command::Verify)
    }
}

/// One binding: its keys, what it does, where, and how the footer and the help say it.
pub struct Binding {
    pub codes: &'static [KeyCode],
    pub command: Command,
    /// Its word in the footer.
    pub short: &'static str,
    pub does: &'static str,
    /// The views it works in (empty: all).
    pub views: &'static [ViewKind],
    pub footer: bool,
    /// Bindings of one group share a line of the help (the moves).
    pub group: Option<&'static str>,
}

use ViewKind::{Audit, Contexts, Dlq, Inspect, Reconcile};

/// Where a row can be moved through.
const LISTS: &[ViewKind] = &[];
const MOVES: &str = "move: a row, a page, the first or last";
const MARKS: &str = "marks";

/// The keymap, in the order the help lists it.
pub const BINDINGS: &[Binding] = &[
    Binding {
        codes: &[KeyCode::Up, KeyCode::Char('k')],
        command: Command::Up,
        short: "up",
        does: MOVES,
        views: LISTS,
        footer: false,
        group: Some(MOVES),
    },
    Binding {
        codes: &[KeyCode::Down, KeyCode::Char('j')],
        command: Command::Down,
        short: "down",
        does: MOVES,
        views: LISTS,
        footer: false,
        group: Some(MOVES),
    },
    Binding {
        codes: &[KeyCode::PageUp],
        command: Command::PageUp,
        short: "page up",
        does: MOVES,
        views: LISTS,
        footer: false,
        group: Some(MOVES),
    },
    Binding {
        codes: &[KeyCode::PageDown],
        command: Command::PageDown,
        short: "page down",
        does: MOVES,
        views: LISTS,
        footer: false,
        group: Some(MOVES),
    },
    Binding {
        codes: &[KeyCode::Home, KeyCode::Char('g')],
        command: Command::Top,
        short: "first",
        does: MOVES,
        views: LISTS,
        footer: false,
        group: Some(MOVES),
    },
    Binding {
        codes: &[KeyCode::End, KeyCode::Char('G')],
        command: Command::Bottom,
        short: "last",
        does: MOVES,
        views: LISTS,
        footer: false,
        group: Some(MOVES),
    },
    Binding {
        codes: &[KeyCode::Char(' ')],
        command: Command::Mark,
        short: "mark",
        does: "mark or unmark the row (u clears every mark)",
        views: &[Dlq],
        footer: true,
        group: Some(MARKS),
    },
    Binding {
        codes: &[KeyCode::Char('u')],
        command: Command::ClearMarks,
        short: "unmark",
        does: "clear every mark",
        views: &[Dlq],
        footer: false,
        group: Some(MARKS),
    },
    Binding {
        codes: &[KeyCode::Enter],
        command: Command::Open,
        short: "inspect",
        does: "inspect the row (contexts: switch to it)",
        views: &[Dlq, Reconcile, Audit, Contexts],
        footer: true,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('/')],
        command: Command::Filter,
        short: "filter",
        does: "filter, e.g. channel:slack !code:\"HTTP 400\" branch:verify since:1h",
        views: &[Dlq],
        footer: true,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char(':')],
        command: Command::CommandBar,
        short: "views",
        does: "a view (tab completes), or report [SINCE] to write the bundle",
        views: &[],
        footer: true,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('p')],
        command: Command::Replay,
        short: "replay",
        does: "replay: channels, canary, pace, reason, the typed word",
        views: &[Dlq, Inspect],
        footer: true,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('r')],
        command: Command::Resolve,
        short: "resolve",
        does: "resolve, or give up on purpose (forced): reason, the typed word",
        views: &[Dlq, Inspect],
        footer: true,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('v')],
        command: Command::Verify,
        short: "verify",
        does: "verify with the providers' records, then record the answers",
        views: &[Dlq, Inspect],
        footer: true,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('y')],
        command: Command::CopyId,
        short: "copy",
        does: "copy the id (OSC 52: your terminal's clipboard)",
        views: &[Dlq, Inspect, Reconcile, Audit],
        footer: false,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('Y')],
        command: Command::CopyStep,
        short: "copy step",
        does: "copy the next-step command, as one line",
        views: &[Dlq, Inspect],
        footer: false,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('R'), KeyCode::F(5)],
        command: Command::Refresh,
        short: "refresh",
        does: "read again now (every view refreshes by itself)",
        views: &[],
        footer: false,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Esc],
        command: Command::Back,
        short: "back",
        does: "cancel the request in flight, or go back, or close",
        views: LISTS,
        footer: true,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('?')],
        command: Command::Help,
        short: "help",
        does: "this help",
        views: &[],
        footer: true,
        group: None,
    },
    Binding {
        codes: &[KeyCode::Char('q')],
        command: Command::Quit,
        short: "quit",
        does: "quit (Ctrl-C too)",
        views: &[],
        footer: true,
        group: None,
    },
];

/// What the marks on a row mean, for the help.
pub const LEGEND: &str =
    "[x] marked (acts use these, else the cursor's row); * changed since last look";

/// The views the command bar goes to.
pub const VIEWS: &str = "views: dlq, inspect ID, reconcile, pulse, audit, providers, contexts";

/// A key as the screen names it.
pub fn key_name(code: &KeyCode) -> String {
    match code {
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::PageUp => "PgUp".into(),
        KeyCode::PageDown => "PgDn".into(),
        KeyCode::Home => "Home".into(),
        KeyCode::End => "End".into(),
        KeyCode::Enter => "enter".into(),
        KeyCode::Esc => "esc".into(),
        KeyCode::Tab => "tab".into(),
        KeyCode::F(n) => format!("F{n}"),
        KeyCode::Char(' ') => "space".into(),
        KeyCode::Char(c) => c.to_string(),
        other => format!("{other:?}"),
    }
}

impl Binding {
    /// Its keys as the footer and the help show them: `R/F5`.
    pub fn keys(&self) -> String {
        self.codes
            .iter()
            .map(key_name)
            .collect::<Vec<_>>()
            .join("/")
    }

    fn works_in(&self, view: ViewKind) -> bool {
        self.views.is_empty() || self.views.contains(&view)
    }
}

/// The command `code` stands for in `view`'s normal mode.
pub fn command_of(code: KeyCode, view: ViewKind) -> Option<Command> {
    BINDINGS
        .iter()
        .filter(|b| b.works_in(view))
        .find(|b| b.codes.contains(&code))
        .map(|b| b.command)
}

/// The bindings that work in `view`.
pub fn for_view(view: ViewKind) -> impl Iterator<Item = &'static Binding> {
    BINDINGS.iter().filter(move |b| b.works_in(view))
}

/// The footer's words for `view` in `width` columns: `(keys, what)` pairs in the table's
/// order. `? help` and `q quit` always fit (the help lists the rest); the acts come next
/// (replay, resolve, verify: what the screen is for at 80 columns), then the moves.
pub fn footer(view: ViewKind, readonly: bool, width: usize) -> Vec<(String, &'static str)> {
    let shown: Vec<&Binding> = for_view(view)
        .filter(|b| b.footer)
        .filter(|b| !(readonly && b.command.acts()))
        // The DLQ is where the screen starts: there is nothing to go back to.
        .filter(|b| !(view == Dlq && b.command == Command::Back))
        .collect();
    let size = |b: &Binding| b.keys().chars().count() + b.short.chars().count() + 3;
    let always = |b: &Binding| matches!(b.command, Command::Help | Command::Quit);
    let mut room = width.saturating_sub(shown.iter().filter(|b| always(b)).map(|b| size(b)).sum());
    let mut kept = vec![false; shown.len()];
    for pass in [true, false] {
        for (n, binding) in shown.iter().enumerate() {
            if always(binding) {
                kept[n] = true;
            } else if !kept[n] && binding.command.acts() == pass && size(binding) <= room {
                room -= size(binding);
                kept[n] = true;
            }
        }
    }
    shown
        .iter()
        .zip(kept)
        .filter(|(_, kept)| *kept)
        .map(|(b, _)| (b.keys(), b.short))
        .collect()
}

/// The help's lines for the bindings `bindings` gives: `keys  what`, a group on one line.
pub fn help_lines<'a>(bindings: impl Iterator<Item = &'a Binding>) -> Vec<(String, &'a str)> {
    let mut lines: Vec<(String, &str)> = Vec::new();
    let mut group: Option<&str> = None;
    for binding in bindings {
        match (binding.group, group) {
            (Some(this), Some(last)) if this == last => {
                if let Some(line) = lines.last_mut() {
                    line.0.push(' ');
                    line.0.push_str(&binding.keys());
                }
            }
            _ => lines.push((binding.keys(), binding.does)),
        }
        group = binding.group;
    }
    lines
}

/// Every key, as `unsctl tui --help` lists them after the flags.
pub fn help_text() -> String {
    let mut text = String::from("Keys (also `?` on the screen):\n");
    for (keys, does) in help_lines(BINDINGS.iter()) {
        text.push_str(&format!("  {keys:<22} {does}\n"));
    }
    text.push_str(&format!("  {LEGEND}\n"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each key stands for one command in each view, and every command has a key.
    #[test]
    fn a_key_is_bound_once_in_each_view() {
        for view in ViewKind::ALL {
            let mut seen: Vec<&KeyCode> = Vec::new();
            for binding in for_view(view) {
                for code in binding.codes {
                    assert!(!seen.contains(&code), "{code:?} twice in {view:?}");
                    seen.push(code);
                }
            }
        }
        assert_eq!(
            command_of(KeyCode::F(5), ViewKind::Dlq),
            Some(Command::Refresh)
        );
        assert!(help_text().contains("R/F5"), "{}", help_text());
        assert!(help_text().contains("* changed"));
    }

    /// At 80 columns the footer still offers the acts; read-only, it offers none; at 20
    /// it keeps only help and quit.
    #[test]
    fn the_footer_keeps_the_acts_before_the_moves() {
        let words = |width, readonly| -> Vec<&str> {
            footer(ViewKind::Dlq, readonly, width)
                .into_iter()
                .map(|(_, does)| does)
                .collect()
        };
        let at_80 = words(80, false);
        for act in ["replay", "resolve", "verify", "help", "quit"] {
            assert!(at_80.contains(&act), "{at_80:?}");
        }
        let width: usize = footer(ViewKind::Dlq, false, 80)
            .iter()
            .map(|(keys, does)| keys.len() + does.len() + 3)
            .sum();
        assert!(width <= 80, "{width}");
        assert!(!words(200, true).contains(&"replay"));
        assert!(words(200, true).contains(&"filter"));
        assert_eq!(words(20, false), ["help", "quit"]);
    }
}
