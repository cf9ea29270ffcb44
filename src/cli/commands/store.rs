//! `unsctl store copy`: a SQLite store into an empty PostgreSQL database, its history
//! unchanged (DESIGN §12).

use crate::cli::backend::{Invocation, db_backend};
use crate::cli::error::{CliError, CliResult, ExitKind};
use crate::db::pg;
use crate::render::output::{Output, View, print};
use crate::runtime::copy::{self, Copied, CopyError};
use crate::store::StoreError;
use crate::store::place::Backend;
use std::path::PathBuf;

/// The store between engines
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    Copy(CopyArgs),
}

/// Copy a SQLite store into an empty PostgreSQL database, unchanged
///
/// Every notification, event and note, with its ids, row ids and times as they were,
/// in one transaction: the database is either the whole store or as empty as before.
/// The password comes from PGPASSWORD or ~/.pgpass, never from the store.
///
/// Example: unsctl store copy --from uns.db --to postgres://uns@db.internal:5432/uns
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct CopyArgs {
    /// The SQLite store file (read-only)
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// The empty PostgreSQL database (postgres://USER@HOST:PORT/DB)
    #[arg(long, value_name = "URL")]
    pub to: String,
}

pub fn run(global: &Invocation, command: Command) -> CliResult {
    match command {
        Command::Copy(args) => copy_store(global, args),
    }
}

fn copy_store(global: &Invocation, args: CopyArgs) -> CliResult {
    let Backend::Postgres(target) = db_backend(PathBuf::from(&args.to)) else {
        return Err(CliError::usage(format!(
            "--to {}: not a PostgreSQL URL (postgres://USER@HOST:PORT/DB)",
            crate::render::sanitize::clean(&args.to)
        )));
    };
    let from = args.from.to_string_lossy();
    if pg::is_url(&from) {
        return Err(CliError::usage(format!(
            "--from {}: a SQLite store file; store copy moves one into PostgreSQL, and a database is copied into another with pg_dump",
            pg::shown(&from)
        )));
    }
    let copied = copy::copy(&args.from, &target).map_err(copy_error)?;
    global.output().emit(&Done {
        copied,
        from: args.from.display().to_string(),
        to: pg::shown(&target.url),
    })?;
    Ok(())
}

fn copy_error(err: CopyError) -> CliError {
    match err {
        CopyError::From(open) => StoreError::from(open).into(),
        CopyError::To(open) => StoreError::from(open).into(),
        CopyError::Database(db) => StoreError::from(db).into(),
        CopyError::NotEmpty { .. } => CliError::new(ExitKind::Refused, err.to_string())
            .hint("copy into a new database: createdb, then name it with --to"),
        CopyError::Unchanged(values) => CliError::new(
            ExitKind::Refused,
            format!(
                "{} value(s) PostgreSQL cannot hold unchanged, so nothing was copied:",
                values.len()
            ),
        )
        .details(values),
    }
}

/// What was copied; its JSON is the counts and the two places.
#[derive(serde::Serialize)]
struct Done {
    #[serde(flatten)]
    copied: Copied,
    from: String,
    to: String,
}

impl View for Done {
    fn show(&self, _out: &Output) -> std::io::Result<()> {
        print(&format!(
            "copied {} notifications, {} events and {} notes from {} to {}",
            self.copied.notifications,
            self.copied.events,
            self.copied.notes,
            crate::render::sanitize::clean(&self.from),
            crate::render::sanitize::clean(&self.to),
        ))
    }
}
