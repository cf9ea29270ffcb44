//! The module structure, read from the code's own `use` paths: no import cycle between
//! files or between top-level modules, and the low rooms (model, triage, runtime)
//! import nothing above them. Run with `cargo test --test cli layering`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, into `found`.
pub(crate) fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are module `a::b`; `lib.rs` and `main.rs` the root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    parts
}

/// Code without comments and string literals, so only real paths are read.
fn code_only(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut in_string = false;
        let mut escaped = false;
        for c in line.chars() {
            match (in_string, c) {
                (true, '\\') if !escaped => escaped = true,
                (true, '"') if !escaped => in_string = false,
                (true, _) => escaped = false,
                (false, '"') => in_string = true,
                (false, c) => code.push(c),
            }
        }
        code.push('\n');
    }
    code
}

/// Every module path `file` names through `crate::` or `super::`, resolved to modules.
fn imports(module: &[String], is_dir_module: bool, code: &str) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    let bytes: Vec<char> = code.chars().collect();
    let text: String = bytes.iter().collect();
    for (start, _) in text
        .match_indices("crate::")
        .chain(text.match_indices("super::"))
    {
        if start > 0 && (bytes[start - 1].is_alphanumeric() || bytes[start - 1] == '_') {
            continue;
        }
        let rest: String = text[start..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let mut parts: Vec<&str> = rest.split("::").filter(|p| !p.is_empty()).collect();
        let mut base: Vec<String> = match parts.first() {
            Some(&"crate") => Vec::new(),
            Some(&"super") => {
                let mut base = module.to_vec();
                // `super` in a non-mod file is its folder's module; in mod.rs, the parent.
                let mut supers = parts.iter().take_while(|p| **p == "super").count();
                if !is_dir_module {
                    supers = supers.saturating_sub(1);
                    base.pop();
                }
                for _ in 0..supers {
                    base.pop();
                }
                parts.retain(|p| *p != "super");
                base
            }
            _ => continue,
        };
        if parts.first() == Some(&"crate") {
            parts.remove(0);
        }
        for part in parts {
            if part.chars().next().is_some_and(|c| c.is_lowercase()) {
                base.push(part.to_string());
            } else {
                break;
            }
        }
        found.insert(base);
    }
    found
}

struct Graph {
    /// file module -> modules it names
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

impl Graph {
    fn read() -> Self {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let modules: BTreeMap<Vec<String>, PathBuf> = files
            .iter()
            .map(|f| (module_of(&src, f), f.clone()))
            .collect();
        let mut edges = BTreeMap::new();
        for (module, file) in &modules {
            if module.is_empty() {
                continue;
            }
            let is_dir_module = file.file_name().is_some_and(|n| n == "mod.rs");
            let code = code_only(&std::fs::read_to_string(file).expect("read"));
            let targets: BTreeSet<Vec<String>> = imports(module, is_dir_module, &code)
                .into_iter()
                .filter_map(|mut path| {
                    // The longest prefix that is a file of ours.
                    while !path.is_empty() && !modules.contains_key(&path) {
                        path.pop();
                    }
                    (!path.is_empty() && &path != module && !module.starts_with(&path))
                        .then_some(path)
                })
                .collect();
            edges.insert(module.clone(), targets);
        }
        Self { edges }
    }

    fn rooms(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut rooms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, targets) in &self.edges {
            let entry = rooms.entry(from[0].clone()).or_default();
            for to in targets {
                if to[0] != from[0] {
                    entry.insert(to[0].clone());
                }
            }
        }
        rooms
    }
}

/// A cycle in `edges`, if there is one.
fn cycle<T: Ord + Clone + std::fmt::Debug>(edges: &BTreeMap<T, BTreeSet<T>>) -> Option<Vec<T>> {
    fn visit<T: Ord + Clone>(
        node: &T,
        edges: &BTreeMap<T, BTreeSet<T>>,
        state: &mut BTreeMap<T, u8>,
        path: &mut Vec<T>,
    ) -> Option<Vec<T>> {
        match state.get(node) {
            Some(2) => return None,
            Some(1) => {
                let at = path.iter().position(|n| n == node).unwrap_or(0);
                let mut found = path[at..].to_vec();
                found.push(node.clone());
                return Some(found);
            }
            _ => {}
        }
        state.insert(node.clone(), 1);
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, state, path) {
                return Some(found);
            }
        }
        path.pop();
        state.insert(node.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if let Some(found) = visit(node, edges, &mut state, &mut Vec::new()) {
            return Some(found);
        }
    }
    None
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let graph = Graph::read();
    assert!(graph.edges.len() > 30, "the sources were read");
    assert_eq!(cycle(&graph.edges), None, "an import cycle between files");
}

#[test]
fn top_level_modules_form_no_cycle() {
    let rooms = Graph::read().rooms();
    assert_eq!(
        cycle(&rooms),
        None,
        "an import cycle between top-level modules"
    );
}

#[test]
fn the_low_rooms_import_nothing_above_them() {
    let rooms = Graph::read().rooms();
    let allowed: &[(&str, &[&str])] = &[
        ("json", &[]),
        ("model", &["json"]),
        ("bounded", &[]),
        ("handoff", &[]),
        ("redact", &[]),
        ("clock", &[]),
        ("identity", &[]),
        ("db", &["identity"]),
        ("history", &["model"]),
        ("triage", &["model", "history"]),
        ("pulse", &["clock", "db"]),
        (
            "runtime",
            &["json", "model", "clock", "bounded", "redact", "pulse", "db"],
        ),
        (
            "remediation",
            &["model", "clock", "history", "triage", "runtime", "db"],
        ),
        ("render", &["model", "clock", "triage", "pulse"]),
        (
            "session",
            &[
                "model",
                "clock",
                "api",
                "remediation",
                "store",
                "triage",
                "verify",
                "render",
                "redact",
                "exit",
                "handoff",
            ],
        ),
        ("exit", &["store"]),
    ];
    for (room, may) in allowed {
        let imports = rooms.get(*room).cloned().unwrap_or_default();
        let above: Vec<&String> = imports
            .iter()
            .filter(|i| !may.contains(&i.as_str()))
            .collect();
        assert!(above.is_empty(), "{room} imports {above:?}, above it");
    }
}

/// A notification's history is read in one place: triage, verify and reconcile point
/// down to it, and no other file declares an attempt of its own or reads a payload's
/// keys by their own list.
#[test]
fn one_room_reads_a_history_and_the_others_point_down_to_it() {
    let rooms = Graph::read().rooms();
    for reader in ["triage", "verify", "reconcile"] {
        let imports = rooms.get(reader).cloned().unwrap_or_default();
        assert!(
            imports.contains("history"),
            "{reader} does not read its history from history: {imports:?}"
        );
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for file in files {
        if file.starts_with(src.join("history")) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a source file");
        for declared in [
            "struct Attempt ",
            "struct Attempt<",
            "enum Recorded",
            "struct Fields<",
        ] {
            assert!(
                !text.contains(declared),
                "{} declares {declared:?}: a history is read in src/history only",
                file.display()
            );
        }
    }
}

/// A change is carried out in one place: the remediation session. The commands and the
/// live screen come to it; none calls the store's resolve or replay itself.
#[test]
fn only_the_session_carries_a_change_out() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let below = ["store", "remediation", "server", "runtime", "session"];
    for file in files {
        let module = module_of(&src, &file);
        if module
            .first()
            .is_some_and(|top| below.contains(&top.as_str()))
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a source file");
        for call in [".resolve(&", ".replay(&"] {
            assert!(
                !text.contains(call),
                "{} calls {call}...) itself: carry a change out through unsctl::session",
                file.display()
            );
        }
    }
    let rooms = Graph::read().rooms();
    let cli = rooms.get("cli").cloned().unwrap_or_default();
    assert!(
        cli.contains("session"),
        "the commands do not use the session"
    );
}

/// `src/cli/commands/` holds the commands, each a file or a folder; what they share is
/// the plumbing beside it. No command imports another, and the plumbing imports no
/// command (only `cli/mod.rs` dispatches to them).
#[test]
fn no_command_imports_another_and_the_plumbing_imports_none() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let commands: Vec<String> = std::fs::read_dir(root.join("commands"))
        .expect("src/cli/commands")
        .flatten()
        .map(|e| {
            e.file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|name| name != "mod")
        .collect();
    assert!(commands.len() >= 15, "{commands:?}");
    let mut files = Vec::new();
    sources(&root, &mut files);
    for file in files {
        let relative = file.strip_prefix(&root).expect("under src/cli");
        let parts: Vec<String> = relative
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        let own = match parts.as_slice() {
            [top, ..] if top == "mod" => continue,
            [commands_dir, own, ..] if commands_dir == "commands" => Some(own.clone()),
            _ => None,
        };
        if own.as_deref() == Some("mod") {
            continue;
        }
        let code = std::fs::read_to_string(&file).expect("a source file");
        for other in &commands {
            if own.as_deref() == Some(other.as_str()) {
                continue;
            }
            let path = format!("commands::{other}");
            assert!(
                !code.contains(&path),
                "{} imports the {other} command ({path}): share it through the plumbing",
                file.display()
            );
        }
    }
}

/// Every shell, `script`, `tmux` and `runuser` a test starts comes from
/// `support::launch`, which clears the environment first: no test's child sees the
/// caller's `UNS_*`, `HOME` or `NO_COLOR`.
#[test]
fn every_launch_starts_from_a_cleared_environment() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    sources(&tests, &mut files);
    for file in files {
        if file.ends_with("support/mod.rs") {
            continue;
        }
        let code = std::fs::read_to_string(&file).expect("a test file");
        for program in ["tmux", "script", "bash", "sh", "runuser", "env"] {
            let direct = format!("Command::new(\"{program}\")");
            assert!(
                !code.contains(&direct),
                "{} starts {program} itself: use support::launch(\"{program}\")",
                file.display()
            );
        }
    }
}

/// Every clap value parser is one of `cli/values.rs`'s (or clap's own): one place to
/// read how each flag's text becomes a value.
#[test]
fn every_value_parser_sits_in_values() {
    let cli = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut files = Vec::new();
    sources(&cli, &mut files);
    for file in files {
        let code = std::fs::read_to_string(&file).expect("a source file");
        for (at, _) in code.match_indices("value_parser = ") {
            let parser: String = code[at + "value_parser = ".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | ':'))
                .collect();
            // A list of words is clap's own possible-values parser.
            let listed = code[at + "value_parser = ".len()..].starts_with('[');
            assert!(
                listed
                    || parser.starts_with("clap::")
                    || parser.starts_with("values::")
                    || parser.starts_with("crate::cli::values::")
                    || parser.starts_with("super::values::"),
                "{}: value_parser = {parser}: put it in src/cli/values.rs",
                file.display()
            );
        }
    }
}

/// The run's format is chosen in one place, the output layer (`render/output.rs`): no
/// command names a JSON, CSV, HTML or Markdown format, or compares `-o` itself, and none
/// prints JSON but through it. (`cli/mod.rs` says which command offers which format;
/// `cli/args.rs` declares the flag.)
#[test]
fn every_document_goes_through_the_output_layers_one_choice() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let allowed = ["render/output.rs", "cli/mod.rs", "cli/args.rs"];
    let chooses = [
        "Format::Json",
        "Format::Csv",
        "Format::Html",
        "Format::Markdown",
        "output ==",
        "output !=",
        ".format ==",
        "print_json",
        "print_document",
    ];
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src");
        if allowed.iter().any(|a| relative == std::path::Path::new(a)) {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(&file).expect("a source file"));
        for word in chooses {
            if code.contains(word) {
                found.push(format!("{}: {word}", relative.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a document chooses its own format; go through Output (emit, stream, record, progress, closing): {found:#?}"
    );
}

/// The names that once meant several things each name one type now (issue 34): an
/// `Attempt` is a history's, an `Outcome` what became of an entry in a remediation
/// session, `Recorded` what a history recorded of a provider call, `Config` the config
/// file's.
#[test]
fn each_name_that_meant_several_things_names_one_type() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut declared: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let names = ["Attempt", "Outcome", "Recorded", "Config", "Settlement"];
    for file in files {
        let code = code_only(&std::fs::read_to_string(&file).expect("a source file"));
        for line in code.lines() {
            let words: Vec<&str> = line
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .collect();
            for pair in words.windows(2) {
                if matches!(pair[0], "struct" | "enum" | "type" | "trait")
                    && let Some(name) = names.iter().find(|n| **n == pair[1])
                {
                    let place = file.strip_prefix(&src).expect("under src");
                    declared
                        .entry(name)
                        .or_default()
                        .push(place.display().to_string());
                }
            }
        }
    }
    for (name, places) in &declared {
        assert_eq!(places.len(), 1, "{name} is declared in {places:?}");
    }
}

/// Tests wait for a condition, never for a fixed time: the one poll loop is
/// `support::wait_for`. A sleep is left only where it is a fake peer's own behaviour (a
/// proxy that cuts a session, a hostile server that trickles its answer).
#[test]
fn tests_wait_for_conditions_not_fixed_times() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let peers_own: BTreeMap<&str, usize> = [
        ("support/mod.rs", 1),
        ("support/relay.rs", 1),
        // The stand-in provider that trickles its answer a byte a second.
        ("peers/verify.rs", 1),
        ("cli/contexts.rs", 1),
        // PostgreSQL's own: a deferred check that holds a COMMIT under way until the
        // test ends its session.
        ("peers/postgres.rs", 1),
    ]
    .into_iter()
    .collect();
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&root).expect("under tests");
        let name = relative.to_string_lossy().replace('\\', "/");
        let code = code_only(&std::fs::read_to_string(&file).expect("a test file"));
        let sleeps = code.matches("sleep(").count();
        if sleeps > peers_own.get(name.as_str()).copied().unwrap_or(0) {
            found.push(format!("{name}: {sleeps} sleeps"));
        }
    }
    assert!(
        found.is_empty(),
        "wait for a condition (support::wait_until, wait_past, Tmux::wait_for): {found:#?}"
    );
}

/// Every file under tests/ is compiled into a harness: a test file no `mod` line names
/// would never run, and nothing else would say so.
#[test]
fn every_test_file_is_compiled_into_a_harness() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut missing = Vec::new();
    for dir in ["cli", "peers", "runtime", "support"] {
        let folder = root.join(dir);
        let main = if dir == "support" {
            "mod.rs"
        } else {
            "main.rs"
        };
        let text = std::fs::read_to_string(folder.join(main)).expect("harness root");
        let named: std::collections::BTreeSet<String> = text
            .lines()
            .filter_map(|line| {
                let line = line.trim();
                let rest = line
                    .strip_prefix("pub mod ")
                    .or_else(|| line.strip_prefix("mod "))?;
                Some(rest.trim_end_matches(';').trim().to_string())
            })
            .collect();
        for entry in std::fs::read_dir(&folder).expect("folder") {
            let path = entry.expect("entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            if stem != "main" && stem != "mod" && !named.contains(&stem) {
                missing.push(path.display().to_string());
            }
        }
    }
    // And no file sits under tests/ outside the harnesses' folders.
    for entry in std::fs::read_dir(&root).expect("tests") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("rs") {
            missing.push(path.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "test files no harness compiles: {missing:?}"
    );
}

/// The screen and the command line are siblings over the library (issue 43): neither
/// imports the other, `main` starts each; and what both stand on reads no environment of
/// its own: what it needs is handed to it as values.
#[test]
fn the_two_front_ends_are_siblings_over_a_library_that_reads_no_environment() {
    let rooms = Graph::read().rooms();
    let tui = rooms.get("tui").cloned().unwrap_or_default();
    let cli = rooms.get("cli").cloned().unwrap_or_default();
    assert!(!tui.contains("cli"), "the screen imports the command line");
    assert!(!cli.contains("tui"), "the command line imports the screen");
    for shared in ["session", "render", "store", "exit"] {
        assert!(
            tui.contains(shared),
            "the screen does not use {shared}: {tui:?}"
        );
        assert!(
            cli.contains(shared),
            "the command line does not use {shared}: {cli:?}"
        );
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for room in [
        "session",
        "history",
        "triage",
        "verify",
        "reconcile",
        "report",
        "pulse",
        "render",
        "remediation",
        "tui",
        "model",
    ] {
        let mut files = Vec::new();
        let dir = src.join(room);
        if dir.is_dir() {
            sources(&dir, &mut files);
        } else {
            files.push(src.join(format!("{room}.rs")));
        }
        for file in files {
            // Tests may size themselves by the environment; the output layer reads the
            // terminal's own conventions (NO_COLOR, COLUMNS), which are the terminal's.
            if file.ends_with("tests.rs") || file.ends_with("render/output.rs") {
                continue;
            }
            let code = code_only(&std::fs::read_to_string(&file).expect("a source file"));
            for reads in ["env::var", "std::env::", "env!(\"UNS", "dotenv"] {
                if code.contains(reads) {
                    found.push(format!("{}: {reads}", file.display()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the library reads the environment itself; resolve it in the front end: {found:#?}"
    );
}
