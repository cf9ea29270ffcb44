//! `unsctl tsg list|show`: the troubleshooting guides, embedded in the binary.

use crate::cli::backend::Invocation;
use crate::cli::error::{CliError, CliResult, ExitKind};
use crate::render::output::{Output, View, print};
use crate::render::table::{Column, Text, print_all};
use crate::tsg;
use serde::Serialize;

/// Read the troubleshooting guides (embedded; no network or checkout needed)
///
/// Example: unsctl tsg show TSG-02
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List the guides, and the alerts that lead to each
    ///
    /// Example: unsctl tsg list
    List,
    /// Which alert of tsg/alerts/uns.rules.yml leads to which guide section
    ///
    /// Example: unsctl tsg alerts
    Alerts,
    /// Show one guide, formatted for the terminal (`-o json` for the raw Markdown)
    ///
    /// Example: unsctl tsg show TSG-02
    Show {
        /// The guide id, e.g. TSG-02
        #[arg(value_parser = crate::cli::values::Listed::new(|t| Ok(t.to_string()), || crate::tsg::GUIDES.iter().map(|g| g.id).collect()))]
        id: String,
    },
}

/// `tsg list`: one entry per guide.
#[derive(Debug, Serialize)]
struct Guides(Vec<GuideEntry>);

#[derive(Debug, Serialize)]
struct GuideEntry {
    alerts: Vec<String>,
    id: &'static str,
    title: &'static str,
}

impl View for Guides {
    const SORTED: bool = true;

    fn show(&self, out: &Output) -> std::io::Result<()> {
        const COLUMNS: &[Column] = &[
            Column::new("ID", 0),
            Column::new("TITLE", 0),
            Column::new("ALERTS", 1),
        ];
        let rows: Vec<Vec<Text>> = self
            .0
            .iter()
            .map(|guide| {
                vec![
                    guide.id.into(),
                    guide.title.into(),
                    guide.alerts.join(", ").into(),
                ]
            })
            .collect();
        print_all(COLUMNS, rows, out)
    }
}

/// `tsg alerts`: which alert leads to which guide section, in the rule file's order.
#[derive(Debug, Serialize)]
#[serde(transparent)]
struct Alerts(Vec<tsg::Alert>);

impl View for Alerts {
    fn show(&self, out: &Output) -> std::io::Result<()> {
        const COLUMNS: &[Column] = &[
            Column::new("ALERT", 0),
            Column::new("SEVERITY", 1),
            Column::new("GUIDE", 0),
            Column::new("SECTION", 1),
            Column::new("SCREEN", 2),
        ];
        let rows: Vec<Vec<Text>> = self
            .0
            .iter()
            .map(|alert| {
                vec![
                    alert.alert.clone().into(),
                    alert.severity.clone().into(),
                    alert.guide.clone().into(),
                    alert
                        .section
                        .clone()
                        .unwrap_or_else(|| alert.runbook_url.clone())
                        .into(),
                    alert.screen.clone().unwrap_or_default().into(),
                ]
            })
            .collect();
        print_all(COLUMNS, rows, out)?;
        print(&crate::render::output::fit_lines(
            "\nRead one: unsctl tsg show GUIDE. Rules: tsg/alerts/uns.rules.yml",
            out,
        ))
    }
}

/// `tsg show`: the guide formatted for the terminal, or its Markdown as JSON.
#[derive(Debug, Serialize)]
struct Guide {
    id: &'static str,
    markdown: &'static str,
    title: &'static str,
}

impl View for Guide {
    const SORTED: bool = true;

    fn show(&self, out: &Output) -> std::io::Result<()> {
        // One column spare: a line that reaches the last column wraps on some terminals.
        print(&tsg::render(
            self.markdown,
            terminal_width().saturating_sub(1),
            out,
        ))
    }
}

/// The terminal's width, even when stdout is piped into a pager: stdout, then stderr,
/// then $COLUMNS, then 80.
fn terminal_width() -> usize {
    console::Term::stdout()
        .size_checked()
        .or_else(|| console::Term::stderr().size_checked())
        .map(|(_, columns)| columns as usize)
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
        .unwrap_or(80)
}

pub fn run(global: &Invocation, command: Command) -> CliResult {
    let out = global.output();
    match command {
        Command::List => {
            out.emit(&Guides(
                tsg::GUIDES
                    .iter()
                    .map(|g| GuideEntry {
                        alerts: g.alerts(),
                        id: g.id,
                        title: g.title(),
                    })
                    .collect(),
            ))?;
            Ok(())
        }
        Command::Alerts => {
            out.emit(&Alerts(tsg::alerts()))?;
            Ok(())
        }
        Command::Show { id } => {
            let guide = tsg::find(&id).ok_or_else(|| {
                let known: Vec<&str> = tsg::GUIDES.iter().map(|g| g.id).collect();
                CliError::new(ExitKind::NotFound, format!("no guide {id:?}"))
                    .hint(format!("guides: {}", known.join(", ")))
            })?;
            out.emit(&Guide {
                id: guide.id,
                markdown: guide.text,
                title: guide.title(),
            })?;
            Ok(())
        }
    }
}
