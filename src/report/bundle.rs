//! A report's evidence bundle: the three reports, every event of the window, the triage,
//! the reconciliation and the audit, with a SHA256SUMS that `report check` (and
//! `sha256sum -c`) verifies. Written by `report --bundle` and the live screen's
//! `:report` alike.

use super::Report;
use crate::exit::{Failure as CliError, Result as CliResult};
use crate::store::Store;
use sha2::Digest;
use std::io::Write;
use std::path::Path;

/// The files of a bundle, in the order SHA256SUMS lists them.
pub const FILES: [&str; 7] = [
    "report.md",
    "report.html",
    "report.json",
    "events.jsonl",
    "triage.json",
    "reconcile.json",
    "audit.json",
];

/// The report as `-o json` writes it.
pub fn json(report: &Report) -> CliResult<String> {
    let mut text = serde_json::to_string_pretty(report)
        .map_err(|err| CliError::error(format!("cannot write the report: {err}")))?;
    text.push('\n');
    Ok(text)
}

/// `reconcile -o json` of the report's window, judged as of its end, to `writer`.
fn write_reconciliation(
    store: &dyn Store,
    asked: &super::Asked,
    writer: impl Write + Send,
) -> CliResult {
    let reconcile_asked = crate::reconcile::Asked {
        selection: asked.selection.clone(),
        window: crate::store::Window {
            since: Some(asked.since),
            until: Some(asked.until),
        },
        ids: None,
        limit: None,
    };
    let reconciliation = crate::reconcile::Reconciliation::read(
        store,
        &reconcile_asked,
        asked.sources.clone(),
        asked.until,
    )?;
    let recent = crate::reconcile::Recent::read(
        store,
        Some(asked.until),
        crate::pulse::DEFAULT_QUIET_AFTER,
    )?;
    crate::documents::write_reconcile(&reconciliation, store, &recent, writer)?;
    Ok(())
}

/// Writes the evidence bundle to `dir` (created; an existing file is refused), and the
/// report it holds.
pub fn write(store: &dyn Store, asked: &super::Asked, dir: &Path) -> CliResult<Report> {
    // A bundle certifies its window: one still filling is refused, never certified.
    if let Some(open) = asked.open_until() {
        return Err(crate::exit::Failure::usage(format!(
            "the window runs until {}, still to come: a bundle certifies a closed window, so write it after then (a report of it without a bundle says PROVISIONAL)",
            crate::render::time::rfc3339(open)
        )));
    }
    std::fs::create_dir_all(dir)?;
    refuse_written_over(dir)?;
    let file = |name: &str| -> CliResult<std::io::BufWriter<std::fs::File>> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(name))?;
        Ok(std::io::BufWriter::with_capacity(1 << 16, file))
    };
    let mut events = file("events.jsonl")?;
    let mut failed: Option<std::io::Error> = None;
    let report = super::gather(store, asked, &mut |id, stored| {
        for event in stored {
            let line = serde_json::json!({
                "notification_id": id,
                "id": event.id,
                "at": event.at,
                "kind": event.kind,
                "payload": event.payload,
            });
            let written = serde_json::to_writer(&mut events, &line)
                .map_err(std::io::Error::other)
                .and_then(|()| events.write_all(b"\n"));
            if let Err(err) = written {
                failed = Some(err);
                return Err(crate::store::StoreError::Stopped);
            }
        }
        Ok(())
    });
    if let Some(err) = failed {
        return Err(err.into());
    }
    let report = report?;
    events.flush()?;
    write_all(
        file("report.md")?,
        super::markdown::render(&report).as_bytes(),
    )?;
    write_all(
        file("report.html")?,
        super::html::render(&report).as_bytes(),
    )?;
    write_all(file("report.json")?, json(&report)?.as_bytes())?;
    // Every act one by one, and the notes written beside them.
    let audit = serde_json::to_string_pretty(&serde_json::json!({
        "actions": report.actions,
        "notes": report.notes,
    }))
    .map_err(|err| CliError::error(err.to_string()))?;
    write_all(file("audit.json")?, format!("{audit}\n").as_bytes())?;
    crate::documents::write_triage(store, &asked.selection, file("triage.json")?)?;
    write_reconciliation(store, asked, file("reconcile.json")?)?;
    let mut sums = String::new();
    for name in FILES {
        sums.push_str(&format!("{}  {name}\n", sha256_of(&dir.join(name))?));
    }
    write_all(file("SHA256SUMS")?, sums.as_bytes())?;
    Ok(report)
}

/// What is said once a bundle is written to `dir`: where, and how to check it.
pub fn written(dir: &Path) -> String {
    format!(
        "evidence bundle written to {}: check it with {} or `sha256sum -c SHA256SUMS` inside it",
        crate::render::sanitize::clean(&dir.display().to_string()),
        check_command(dir)
    )
}

/// `` `unsctl report check DIR` ``, the folder quoted as one word.
pub fn check_command(dir: &Path) -> String {
    format!(
        "`unsctl report check {}`",
        crate::model::command::word("the folder", &dir.display().to_string())
            .unwrap_or_else(|err| format!("<{err}>"))
    )
}

/// Refuses a directory that already holds a file of a bundle: one is never written over.
fn refuse_written_over(dir: &Path) -> CliResult {
    for name in FILES.iter().chain(["SHA256SUMS"].iter()) {
        if dir.join(name).exists() {
            return Err(CliError::new(
                crate::exit::ExitKind::Refused,
                format!(
                    "{} already holds {name}: a bundle is never written over; choose a new directory",
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

fn write_all(mut file: impl Write, bytes: &[u8]) -> CliResult {
    file.write_all(bytes)?;
    file.flush()?;
    Ok(())
}

fn sha256_of(path: &Path) -> CliResult<String> {
    Ok(sha256_hex(std::fs::File::open(path)?)?)
}

/// The SHA-256 of what `reader` gives, in lower-case hex as `sha256sum` writes it: the
/// one digest the bundle is written and checked with.
fn sha256_hex(mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut reader, &mut hasher)?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// What `report check` found: each file as listed and whether it is as written, and
/// each problem (changed, missing, added, a line that cannot be read).
#[derive(Debug, Default)]
pub struct Checked {
    pub ok: Vec<String>,
    pub problems: Vec<String>,
}

/// `report check DIR`: each listed file's digest against SHA256SUMS, every file a bundle
/// is written with (a list with a file's line taken out, and the file, is not a whole
/// bundle), and any file the list does not name. Each problem is named and the check goes
/// on: one file that cannot be read hides none of the others.
pub fn check(dir: &Path) -> CliResult<Checked> {
    let shown = |name: &str| crate::render::sanitize::clean(name).into_owned();
    let sums = std::fs::read(dir.join("SHA256SUMS")).map_err(|err| {
        CliError::error(match err.kind() {
            std::io::ErrorKind::NotFound => {
                format!("{}: no SHA256SUMS to check against", dir.display())
            }
            _ => format!("{}: SHA256SUMS cannot be read: {err}", dir.display()),
        })
    })?;
    let mut listed = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    let mut ok = Vec::new();
    for line in sums.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some((digest, name)) = sum_line(line) else {
            problems.push(format!(
                "SHA256SUMS: unreadable line {:?}",
                shown(&String::from_utf8_lossy(line))
            ));
            continue;
        };
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            problems.push(format!(
                "SHA256SUMS names {:?}, outside the bundle",
                shown(name)
            ));
            continue;
        }
        if !listed.insert(name.to_string()) {
            problems.push(format!("{}: listed twice in SHA256SUMS", shown(name)));
            continue;
        }
        match digest_of_written(&dir.join(name)) {
            Ok(found) if found == digest => ok.push(format!("{}: OK", shown(name))),
            Ok(_) => problems.push(format!("{}: changed", shown(name))),
            Err(why) => problems.push(format!("{}: {why}", shown(name))),
        }
    }
    for name in FILES.iter().filter(|name| !listed.contains(**name)) {
        problems.push(format!(
            "{name}: not in SHA256SUMS, though every bundle is written with it"
        ));
    }
    let mut present: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            name != "SHA256SUMS" && !listed.contains(name) && !FILES.contains(&name.as_str())
        })
        .collect();
    present.sort();
    problems.extend(
        present
            .iter()
            .map(|name| format!("{}: added (not in SHA256SUMS)", shown(name))),
    );
    Ok(Checked { ok, problems })
}

/// A line of SHA256SUMS as `sha256sum` writes it: 64 hex digits, a space, then a space
/// (text) or `*` (binary), then the name. The digest in lower case, and the name.
fn sum_line(line: &[u8]) -> Option<(String, &str)> {
    let line = std::str::from_utf8(line).ok()?;
    let digest = line.get(..64)?;
    if !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let name = line[64..]
        .strip_prefix("  ")
        .or_else(|| line[64..].strip_prefix(" *"))?;
    Some((digest.to_ascii_lowercase(), name))
}

/// The digest of the file a bundle was written with at `path`: a link (to anything,
/// anywhere) or anything else that is not a plain file is not one, and is not followed.
fn digest_of_written(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Err("missing".into()),
        Err(_) if path.is_symlink() => return Err("a link, not the file written".into()),
        Err(err) => return Err(format!("cannot be read: {err}")),
    };
    match file.metadata() {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err("not a plain file, so not the file written".into()),
        Err(err) => return Err(format!("cannot be read: {err}")),
    }
    sha256_hex(&mut file).map_err(|err| format!("cannot be read: {err}"))
}
