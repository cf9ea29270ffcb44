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

/// Writes the evidence bundle to `dir` (made, or found empty), and the report it holds.
/// A bundle is all of its files or none: one that could not be finished is taken away
/// again, so nothing half-written stands where a bundle is looked for.
pub fn write(store: &dyn Store, asked: &super::Asked, dir: &Path) -> CliResult<Report> {
    // A bundle certifies its window: one still filling is refused, never certified.
    if let Some(open) = asked.open_until() {
        return Err(crate::exit::Failure::usage(format!(
            "the window runs until {}, still to come: a bundle certifies a closed window, so write it after then (a report of it without a bundle says PROVISIONAL)",
            crate::render::time::rfc3339(open)
        )));
    }
    Files::within(dir, |files| fill(store, asked, files))
}

/// Every file of the bundle, written into `files`' directory.
fn fill(store: &dyn Store, asked: &super::Asked, files: &mut Files) -> CliResult<Report> {
    let mut events = files.create("events.jsonl")?;
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
    finish(events)?;
    write_all(
        files.create("report.md")?,
        super::markdown::render(&report).as_bytes(),
    )?;
    write_all(
        files.create("report.html")?,
        super::html::render(&report).as_bytes(),
    )?;
    write_all(files.create("report.json")?, json(&report)?.as_bytes())?;
    // Every act one by one, and the notes written beside them.
    let audit = serde_json::to_string_pretty(&serde_json::json!({
        "actions": report.actions,
        "notes": report.notes,
    }))
    .map_err(|err| CliError::error(err.to_string()))?;
    write_all(files.create("audit.json")?, format!("{audit}\n").as_bytes())?;
    let mut triage = files.create("triage.json")?;
    crate::documents::write_triage(store, &asked.selection, &mut triage)?;
    finish(triage)?;
    let mut reconcile = files.create("reconcile.json")?;
    write_reconciliation(store, asked, &mut reconcile)?;
    finish(reconcile)?;
    let mut sums = String::new();
    for name in FILES {
        sums.push_str(&format!("{}  {name}\n", sha256_of(&files.dir.join(name))?));
    }
    write_all(files.create("SHA256SUMS")?, sums.as_bytes())?;
    Ok(report)
}

/// The files a bundle is writing, so that a bundle that fails is taken away again.
struct Files<'d> {
    dir: &'d Path,
    /// Made for this bundle, not found.
    made: bool,
    created: Vec<std::path::PathBuf>,
}

impl<'d> Files<'d> {
    /// Runs `fill` on `dir`, made for it or found empty; when `fill` fails, every file it
    /// created goes, and the directory too when it was made here.
    fn within<T>(dir: &'d Path, fill: impl FnOnce(&mut Self) -> CliResult<T>) -> CliResult<T> {
        let made = match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {
                refuse_beside_others(dir)?;
                false
            }
            Ok(_) => {
                return Err(CliError::new(
                    crate::exit::ExitKind::Refused,
                    format!(
                        "{} is not a directory: a bundle is written into a new or empty directory",
                        shown(dir)
                    ),
                ));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(|err| unmade(dir, &err))?;
                true
            }
            Err(err) => return Err(unmade(dir, &err)),
        };
        let mut files = Files {
            dir,
            made,
            created: Vec::new(),
        };
        match fill(&mut files).and_then(|value| files.synced().map(|()| value)) {
            Ok(value) => Ok(value),
            Err(mut err) => {
                let dir = shown(files.dir);
                files.undo();
                // What was asked comes first, then why it could not be: "No space left on
                // device" alone does not say which file, or what became of the rest.
                err.causes.insert(0, std::mem::take(&mut err.message));
                err.message = format!(
                    "the evidence bundle could not be written to {dir}; what was written of it was taken away"
                );
                Err(err)
            }
        }
    }

    /// `name` in the directory, new: an existing one is never written over.
    fn create(&mut self, name: &str) -> CliResult<std::io::BufWriter<std::fs::File>> {
        let path = self.dir.join(name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        self.created.push(path);
        Ok(std::io::BufWriter::with_capacity(1 << 16, file))
    }

    /// Every file on the disk, and their names in the directory: a bundle that was
    /// said to be written survives a crash of the machine after.
    fn synced(&self) -> CliResult {
        for path in &self.created {
            std::fs::File::open(path)?.sync_all()?;
        }
        // Some filesystems cannot sync a directory (EINVAL): the files are on the disk.
        match std::fs::File::open(self.dir).and_then(|dir| dir.sync_all()) {
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported
                ) =>
            {
                Ok(())
            }
            synced => Ok(synced?),
        }
    }

    /// Takes away what was created (only that: a file someone else put there stays).
    fn undo(self) {
        for path in &self.created {
            let _ = std::fs::remove_file(path);
        }
        if self.made {
            let _ = std::fs::remove_dir(self.dir);
        }
    }
}

/// Refuses a directory that holds anything: a bundle is never written over, and never
/// beside files it did not write (its own check would then name them added).
fn refuse_beside_others(dir: &Path) -> CliResult {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    if names.is_empty() {
        return Ok(());
    }
    names.sort();
    let holds = match FILES
        .iter()
        .chain(["SHA256SUMS"].iter())
        .find(|name| names.iter().any(|n| n == *name))
    {
        Some(name) => format!("{name}: a bundle is never written over"),
        None => format!(
            "{} ({} in all): a bundle is written into a new or empty directory, never beside other files",
            crate::render::sanitize::clean(&names[0]),
            names.len()
        ),
    };
    Err(CliError::new(
        crate::exit::ExitKind::Refused,
        format!(
            "{} already holds {holds}; choose a new directory",
            shown(dir)
        ),
    ))
}

/// Why there is no directory to write the bundle into (a link to nowhere, a parent that
/// is a file, no permission), naming it.
fn unmade(dir: &Path, err: &std::io::Error) -> CliError {
    CliError::error(format!(
        "no directory to write the evidence bundle into at {}: {err}",
        shown(dir)
    ))
}

fn shown(dir: &Path) -> String {
    crate::render::sanitize::clean(&dir.display().to_string()).into_owned()
}

/// A writer's last bytes out.
fn finish(mut file: impl Write) -> CliResult {
    file.flush()?;
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(files: &mut Files<'_>) -> CliResult<()> {
        write_all(files.create("events.jsonl")?, b"{}\n")?;
        write_all(files.create("report.md")?, b"# half\n")?;
        Err(CliError::error("the store went away"))
    }

    #[test]
    fn a_bundle_that_fails_leaves_nothing_it_wrote() {
        let root = tempfile::tempdir().expect("dir");
        // Made for it: the directory goes too.
        let made = root.path().join("incident-7");
        let err = Files::within(&made, failing).expect_err("failed");
        assert!(err.to_string().contains("could not be written"), "{err}");
        assert_eq!(err.causes, ["the store went away"]);
        assert!(!made.exists(), "a half bundle stayed");
        // Found empty: it stays, empty but for what someone else put there meanwhile.
        let found = root.path().join("found");
        std::fs::create_dir(&found).expect("mkdir");
        let err = Files::within(&found, |files| {
            std::fs::write(found.join("theirs.txt"), "not ours").expect("theirs");
            failing(files)
        })
        .expect_err("failed");
        assert_eq!(err.causes, ["the store went away"]);
        let left: Vec<_> = std::fs::read_dir(&found)
            .expect("read")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, ["theirs.txt"]);
        // And one that is finished stays whole.
        let whole = root.path().join("whole");
        Files::within(&whole, |files| {
            write_all(files.create("report.md")?, b"# all\n")
        })
        .expect("written");
        assert_eq!(
            std::fs::read_to_string(whole.join("report.md")).expect("read"),
            "# all\n"
        );
    }
}
