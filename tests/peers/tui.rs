//! The live screen end to end: the real binary in a real terminal (tmux), against a
//! server that never answers, and against `runtime serve`'s API with the real worker
//! delivering to the provider fakes.

use crate::support;

use std::net::TcpListener;
use std::time::{Duration, Instant};
use support::runtime::Runtime;
use support::status;
use support::tmux::Tmux;
use unsctl::lab::fakes::Behavior;
use unsctl::runtime::schema::{self, OpenMode};

/// `unsctl ARGS` with an environment cleared of everything but what it is given.
fn command(args: &str, env: &[(&str, &str)]) -> String {
    let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "env -i PATH={} HOME=/nonexistent UNSCTL_CONFIG=/nonexistent/config.toml TERM=xterm-256color {} {} {args}",
        std::env::var("PATH").unwrap_or_default(),
        vars.join(" "),
        env!("CARGO_BIN_EXE_unsctl"),
    )
}

/// A peer that accepts every connection and never says a word.
fn silent_server() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    (port, handle)
}

#[test]
fn a_backend_that_never_answers_never_stops_the_keys() {
    let (port, _server) = silent_server();
    let term = Tmux::start_sized(
        &command(
            &format!("--api http://127.0.0.1:{port} tui"),
            &[("UNS_API_KEY", "k-0123456789abcdef")],
        ),
        80,
        24,
    );
    term.wait_for("reading the DLQ");
    // Esc cancels the request in flight; the keys still answer.
    term.keys(&["Escape"]);
    term.wait_for("cancelled: ");
    term.keys(&[":"]);
    term.keys(&["-l", "pulse"]);
    term.keys(&["Enter"]);
    term.wait_for("unsctl PULSE");
    term.keys(&["?"]);
    term.wait_for("keys in pulse");
    term.keys(&["Escape"]);
    let asked = Instant::now();
    term.keys(&["q"]);
    let screen = term.wait_for("EXIT=0");
    let took = asked.elapsed();
    // The screen quits in well under half a second (the tui bench measures it); through
    // tmux on a loaded machine the bound here only tells a screen that waits for its
    // silent backend (a read's deadline is 60 s) from one that does not.
    assert!(
        took < Duration::from_secs(15),
        "q took {took:?} with the backend silent"
    );
    // The terminal is given back: the shell's line, no screen left over, the cursor on.
    assert!(!screen.contains("unsctl PULSE"), "{screen}");
    assert!(term.cursor_visible());
}

#[test]
fn below_60x16_the_screen_names_the_size_it_needs() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("uns.db");
    schema::open(&db, OpenMode::Create).expect("store");
    let term = Tmux::start_sized(&command(&format!("--db {} tui", db.display()), &[]), 50, 12);
    // A capture can land mid-frame: each text is waited for, never read off one capture.
    term.wait_for("50×12");
    term.wait_for("needs at least 60×16");
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
}

#[test]
fn over_the_api_a_replay_from_the_screen_is_delivered_and_a_live_lease_loss_shows_in_the_pulse() {
    // Long enough for every send the fakes accept on a loaded machine; the lease lost
    // below comes from a provider that never answers, whose call outlives any lease.
    let runtime = Runtime::start(2.0);
    runtime.fakes.control.set_default(Behavior::Reject(400));
    let id = runtime.submit("refused");
    support::wait_until("the entry reaches the DLQ", Duration::from_secs(20), || {
        runtime.status(&id).1
    });
    runtime.fakes.control.set_default(Behavior::Accept);
    let url = format!("http://{}", runtime.server.addr);
    let term = Tmux::start_sized(
        &command(
            &format!("--api {url} tui --operator erin --refresh 0.5s"),
            &[("UNS_API_KEY", support::KEY)],
        ),
        80,
        24,
    );
    term.wait_for("REPLAY 1");
    let short: String = id.chars().take(12).collect();
    term.wait_for(&short);
    term.wait_for("next: unsctl replay");
    // p, and once the dialog takes keys (its buttons stop saying "keys in a moment"):
    // Tab past the channels, the canary, the pace and forced to the reason; Enter
    // previews with it, the word, Go. Each step waits for the screen to show the one
    // before it took.
    term.keys(&["p"]);
    term.wait_for("replay 1 entry");
    term.wait_while("(keys in a moment)");
    term.keys(&["Tab", "Tab", "Tab", "Tab", "Tab"]);
    term.wait_for("> Reason (recorded): _");
    term.keys(&["-l", "webhook fixed"]);
    term.wait_for("webhook fixed_");
    term.keys(&["Enter"]);
    term.wait_for("replay  channels SLACK");
    // Where and as whom, as the command line's prompt says it: the person with the key.
    term.wait_for(&format!("in {url} as erin (key default)"));
    term.wait_while("(keys in a moment)");
    term.wait_for("> Type yes to go ahead: _");
    term.keys(&["-l", "yes"]);
    term.wait_for("go ahead: yes_");
    term.keys(&["Enter"]);
    term.wait_for("> [ Go: replay 1 entry ]");
    term.keys(&["Enter"]);
    term.wait_for("1 done");
    term.keys(&["Enter"]);
    support::wait_until("the replay is delivered", Duration::from_secs(20), || {
        runtime.status(&id) == ("DELIVERED".to_string(), false)
    });
    // The screen follows it out of the DLQ without a key.
    term.wait_for("total 0");

    // The pulse, then a lease lost while it is on screen.
    term.keys(&[":"]);
    term.keys(&["-l", "pulse"]);
    term.keys(&["Enter"]);
    term.wait_for("LEASE_LOST");
    term.wait_for("REPLAYED");
    runtime.fakes.control.set_default(Behavior::Hang);
    runtime.submit("slow");
    term.wait_for("STILL HAPPENING");
    term.wait_for("last lease loss");
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
    // Audited as the screen's.
    let via: String = rusqlite::Connection::open(&runtime.db)
        .expect("db")
        .query_row(
            "SELECT json_extract(payload, '$.via') FROM uns_events WHERE kind = 'REPLAYED'",
            [],
            |r| r.get(0),
        )
        .expect("replayed");
    assert_eq!(via, "tui");
}

/// `readonly = true` on a context: the header says READ-ONLY, an action key says why
/// nothing happens, and the store is left as it was.
#[test]
fn a_context_marked_readonly_opens_read_only() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, id) = support::store_with_replay_entry(dir.path(), "uns.db", 1_000.0);
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "current_context = \"prod\"\n[contexts.prod]\ndb = \"{}\"\nreadonly = true\n",
            db.display()
        ),
    )
    .expect("config");
    let before = std::fs::read(&db).expect("read");
    let term = Tmux::start_sized(
        &format!(
            "env -i PATH={} HOME=/nonexistent UNSCTL_CONFIG={} TERM=xterm {} tui",
            std::env::var("PATH").unwrap_or_default(),
            config.display(),
            env!("CARGO_BIN_EXE_unsctl")
        ),
        80,
        24,
    );
    term.accept_clipboard();
    term.wait_for("REPLAY 1");
    term.wait_for("READ-ONLY");
    term.keys(&["p"]);
    term.wait_for("context prod says readonly");
    // y puts the id on the terminal's clipboard (OSC 52), here tmux's buffer.
    term.keys(&["y"]);
    term.wait_for(&format!("copied {id}"));
    assert!(
        support::wait_for(Duration::from_secs(30), || term.clipboard() == id),
        "{:?}",
        term.clipboard()
    );
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
    // `tui inspect PREFIX` opens straight on that notification.
    let prefix: String = id.chars().take(14).collect();
    let inspect = Tmux::start_sized(
        &format!(
            "env -i PATH={} HOME=/nonexistent UNSCTL_CONFIG={} TERM=xterm {} tui inspect {prefix}",
            std::env::var("PATH").unwrap_or_default(),
            config.display(),
            env!("CARGO_BIN_EXE_unsctl")
        ),
        80,
        24,
    );
    let screen = inspect.wait_for("Timeline");
    assert!(
        screen.contains("unsctl INSPECT") && screen.contains(&id),
        "{screen}"
    );
    inspect.keys(&["q"]);
    inspect.wait_for("EXIT=0");
    assert_eq!(std::fs::read(&db).expect("read"), before);
    assert_eq!(status(&db, &id), ("DEAD".to_string(), true));
}

/// A replay carried out from the screen on a store no worker runs against: the progress
/// says the replay is due and not claimed rather than in flight, and the end says it was
/// never claimed, which a slow provider never looks like.
#[test]
fn a_replay_from_the_screen_that_no_worker_claims_is_said_to_be_unclaimed() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, id) = support::store_with_replay_entry(dir.path(), "idle.db", support::wall_clock());
    let term = Tmux::start_sized(
        &command(
            &format!("--db {} tui --operator erin --wait 8s", db.display()),
            &[],
        ),
        140,
        30,
    );
    term.wait_for("REPLAY 1");
    term.keys(&["p"]);
    term.wait_for("replay 1 entry");
    // From Cancel: channels, canary, pace, forced, reason.
    reason_word_go(&term, 5, "webhook url fixed", &[]);
    term.wait_for("replaying 1: 0 delivered, 0 back in the DLQ, 0 in flight, 1 due and not claimed by any worker yet");
    let screen = term.wait_for("never claimed by a worker");
    assert!(
        screen.contains("is a worker running against this store, with an adapter for the channel?"),
        "{screen}"
    );
    assert_eq!(status(&db, &id), ("PENDING".to_string(), false));
    term.keys(&["Enter"]);
    // The audit says what followed the replay, as of now.
    term.keys(&[":"]);
    term.keys(&["-l", "audit"]);
    term.keys(&["Enter"]);
    term.wait_for("followed: SLACK still due now");
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
}

/// At 80 columns the contexts view cuts a context's reason in its cell; the one under the
/// cursor is said whole beneath the table.
#[test]
fn an_unreachable_contexts_reason_is_said_whole_at_80_columns() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, _) = support::store_with_replay_entry(dir.path(), "uns.db", 1_000.0);
    let closed = support::free_port();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "current_context = \"lab\"\n[contexts.lab]\ndb = \"{}\"\n[contexts.down]\napi = \"http://127.0.0.1:{closed}\"\n",
            db.display()
        ),
    )
    .expect("config");
    let term = Tmux::start_sized(
        &format!(
            "env -i PATH={} HOME=/nonexistent UNSCTL_CONFIG={} UNS_API_KEY=0123456789abcdef0123 TERM=xterm {} tui --view contexts",
            std::env::var("PATH").unwrap_or_default(),
            config.display(),
            env!("CARGO_BIN_EXE_unsctl")
        ),
        80,
        24,
    );
    term.wait_for("reachable");
    // The first row (by name) is the one that could not be read.
    let screen = term.wait_for("connection refused");
    assert!(
        screen.contains(&format!(
            "context down: cannot connect to 127.0.0.1:{closed}"
        )),
        "{screen}"
    );
    term.keys(&["Down"]);
    term.wait_while("connection refused");
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
}

/// A UNS API in front of `upstream` whose DLQ pages never move forward: every page is the
/// first, under a fresh cursor each time. The DLQ requests it was sent, counted.
fn repeating_api(
    upstream: std::net::SocketAddr,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::Ordering;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked.clone();
    unsctl::runtime::adapters::init_tls();
    std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut head = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push(line.trim_end().to_string());
            }
            let Some((method, target)) =
                head.first()
                    .and_then(|l| l.split_once(' '))
                    .map(|(m, rest)| {
                        (
                            m.to_string(),
                            rest.split(' ').next().unwrap_or("").to_string(),
                        )
                    })
            else {
                continue;
            };
            let header = |name: &str| {
                head.iter()
                    .find_map(|l| {
                        l.split_once(": ")
                            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                    })
                    .map(|(_, v)| v.to_string())
            };
            let length: usize = header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let dlq = target.starts_with("/api/v1/dlq");
            let target = if dlq {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                let (path, query) = target.split_once('?').unwrap_or((&target, ""));
                let kept: Vec<&str> = query
                    .split('&')
                    .filter(|p| !p.starts_with("cursor="))
                    .collect();
                (format!("{path}?{}", kept.join("&")), n)
            } else {
                (target.clone(), 0)
            };
            let mut request = client
                .request(
                    method.parse().expect("method"),
                    format!("http://{upstream}{}", target.0),
                )
                .body(body);
            if let Some(key) = header("authorization") {
                request = request.header("authorization", key);
            }
            let Ok(response) = request.send() else {
                continue;
            };
            let status = response.status().as_u16();
            let mut text = response.text().unwrap_or_default();
            let mut extra = String::new();
            if dlq && let Ok(mut page) = serde_json::from_str::<serde_json::Value>(&text) {
                let fresh = format!("fresh-{}", target.1);
                page["next_cursor"] = serde_json::Value::String(fresh.clone());
                text = page.to_string();
                extra = format!("{}: {fresh}\r\n", unsctl::api::NEXT_CURSOR);
            }
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    (format!("http://{addr}"), asked)
}

/// Against an API that repeats a page under fresh cursors, the screen stops paging as the
/// commands do, says why, and asks no more until someone presses R.
#[test]
fn a_backend_whose_pages_repeat_is_read_no_further() {
    let dir = tempfile::tempdir().expect("dir");
    let db = support::every_case_store(dir.path());
    let server = support::server(&db);
    let (url, asked) = repeating_api(server.addr);
    let term = Tmux::start_sized(
        &command(
            &format!("--api {url} tui --refresh 0.5s"),
            &[("UNS_API_KEY", support::KEY)],
        ),
        120,
        40,
    );
    let shown = Instant::now();
    let screen = term.wait_for("repeats itself");
    // Far less than a read's 60 s deadline: the screen stopped at the repeat, not at a
    // timeout or a cap on pages.
    assert!(
        shown.elapsed() < Duration::from_secs(15),
        "the reason took {:?}: {screen}",
        shown.elapsed()
    );
    // Once the reads in flight have ended (each stops at the repeat too), four refresh
    // periods on, nothing more was asked.
    term.wait_while("(esc cancels)");
    let before = asked.load(std::sync::atomic::Ordering::SeqCst);
    support::wait_past("four refresh periods", support::wall_clock() + 2.0);
    assert_eq!(
        asked.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "the screen kept paging"
    );
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
}

/// The screen's `Y` copies exactly the command it shows, as one line, with the store's id
/// quoted as data; an id that cannot stand on one line is never copied in a command.
#[test]
fn the_copied_step_is_one_line_and_quotes_the_id() {
    let dir = tempfile::tempdir().expect("dir");
    let db = support::hostile_store(dir.path(), "hostile-ids");
    let id = "$(touch pwned-dollar)";
    let start = |args: &str| {
        let term = Tmux::start_sized(
            &command(&format!("--db {} tui {args}", db.display()), &[]),
            120,
            30,
        );
        term.accept_clipboard();
        term
    };
    let term = start(&format!("inspect {}", support::shell_quoted(id)));
    term.wait_for("next: unsctl verify");
    term.keys(&["Y"]);
    term.wait_for("copied: unsctl verify");
    let expected = format!("unsctl verify {}", support::shell_quoted(id));
    assert!(
        support::wait_for(Duration::from_secs(30), || term.clipboard() == expected),
        "{:?}",
        term.clipboard()
    );
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
    // The entry whose id holds a line break sorts last: no command is copied for it.
    let term = start("");
    term.wait_for("VERIFY 2");
    term.keys(&["End"]);
    term.wait_for(">[ ]   n-5\\ntouch");
    term.keys(&["Y"]);
    let screen = term.wait_for("no command to copy");
    assert!(!term.clipboard().contains("pwned-newline"), "{screen}");
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
}

/// A paste arrives as one burst of keys, more than a read of the terminal takes: every
/// key of it is read at once, the Enter after it included, not left until the next key.
#[test]
fn a_long_paste_is_read_whole_with_the_key_that_ends_it() {
    let dir = tempfile::tempdir().expect("dir");
    let db = support::hostile_store(dir.path(), "hostile-ids");
    let term = Tmux::start_sized(&command(&format!("--db {} tui", db.display()), &[]), 80, 24);
    term.wait_for("VERIFY 2");
    term.keys(&["/"]);
    term.wait_for("/_");
    // 3 KiB in one write, then Enter.
    term.keys(&["-l", &format!("subject:{}", "x".repeat(3000))]);
    term.keys(&["Enter"]);
    term.wait_for("total 0 · filter subject:xxxxxxxx");
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
}

/// A paste is text for the field that has the keys, never keys: its line breaks press no
/// Enter, its letters no command, so a paste that ends in the confirming word acts on
/// nothing, and one over the table goes nowhere.
#[test]
fn a_paste_is_text_for_a_field_and_never_keys() {
    let dir = tempfile::tempdir().expect("dir");
    let (db, id) = support::store_with_replay_entry(dir.path(), "paste.db", support::wall_clock());
    let term = Tmux::start_sized(
        &command(&format!("--db {} tui --operator erin", db.display()), &[]),
        100,
        30,
    );
    term.wait_for("REPLAY 1");
    // Over the table: `p` and `r` are not pressed, no dialog opens.
    term.paste("p\nr\nyes\n");
    term.wait_for("a paste goes into a field");
    assert!(
        !term.screen().contains("replay 1 entry"),
        "{}",
        term.screen()
    );
    // In the filter: one line, not applied until Enter.
    term.keys(&["/"]);
    term.paste("branch:replay\nchannel:slack\n");
    term.wait_for("/branch:replay channel:slack_");
    term.keys(&["Enter"]);
    term.wait_for("filter branch:replay channel:slack");
    // The rows of the filter read, the key has one to act on.
    term.wait_for(">[ ]   n-");
    // In the reason: the line breaks are spaces, the focus stays, nothing is carried out.
    term.keys(&["p"]);
    term.wait_for("replay 1 entry");
    term.wait_while("(keys in a moment)");
    for _ in 0..5 {
        term.keys(&["Tab"]);
    }
    term.wait_for("> Reason (recorded): _");
    term.paste("webhook fixed\r\nyes\n\n");
    term.wait_for("> Reason (recorded): webhook fixed  yes_");
    assert!(
        !term.screen().contains("go ahead: yes"),
        "{}",
        term.screen()
    );
    term.keys(&["Escape"]);
    term.wait_for("cancelled: nothing was changed");
    assert_eq!(status(&db, &id), ("DEAD".to_string(), true));
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
}

/// The DLQ filtered to `words`, typed into the filter in place of what it held, and its
/// rows read: a key pressed after it acts on them, not on the rows of before (the typed
/// words and an old row can show the same text before the filter is applied).
fn filter(term: &Tmux, words: &str) {
    term.keys(&["/"]);
    for _ in 0..40 {
        term.keys(&["BSpace"]);
    }
    term.keys(&["-l", words]);
    term.keys(&["Enter"]);
    let (bar, applied) = (format!("/{words}_"), format!("· filter {words}"));
    term.wait_screen(
        &format!("the filter {words:?} applied and read"),
        |screen| {
            !screen.contains(&bar)
                && (words.is_empty() || screen.contains(&applied))
                && (screen.contains(">[") || screen.contains("No DLQ entries match"))
        },
    );
}

/// A dialog's fields are read once it takes keys; `tabs` Tabs from Cancel reach the
/// reason, where `reason` is typed, then the word and Go; the preview read again with
/// the reason shows each of `shows` before the word is typed.
pub(crate) fn reason_word_go(term: &Tmux, tabs: usize, reason: &str, shows: &[&str]) {
    term.wait_while("(keys in a moment)");
    for _ in 0..tabs {
        term.keys(&["Tab"]);
    }
    term.wait_for("> Reason (recorded): _");
    term.keys(&["-l", reason]);
    term.wait_for(&format!("{reason}_"));
    // Leaving the reason reads the preview again with it; the word waits for that.
    term.keys(&["Tab"]);
    term.wait_while("(keys in a moment)");
    for text in shows {
        term.wait_for(text);
    }
    term.wait_for("> Type yes to go ahead: _");
    term.keys(&["-l", "yes"]);
    term.wait_for("go ahead: yes_");
    term.keys(&["Tab"]);
    term.wait_for("> [ Go:");
    term.keys(&["Enter"]);
}

/// An incident worked from the screen alone, against `runtime serve` whose worker
/// delivers to fakes that hang or refuse: verify and record the entry whose lease was
/// lost, resolve it; a canary replay at a pace; a replay of one channel of two; giving
/// the other up on purpose; `:report`. No command is typed outside the screen, and each
/// act writes what the command line writes for it, over the API, plus `via`.
#[test]
fn an_incident_is_worked_from_the_screen_alone() {
    use unsctl::lab::fakes::{SLACK_CHANNEL, SLACK_TOKEN};
    use unsctl::model::Channel;
    // A lease far longer than any send the fakes accept takes on a loaded machine; the
    // one lost below is lost on purpose, to a provider that never answers.
    let runtime = Runtime::start(4.0);
    let control = &runtime.fakes.control;
    control.set_default(Behavior::Hang);
    let lost = runtime.submit("verify-me");
    runtime.wait_dead(&lost);
    control.set_default(Behavior::Reject(400));
    let batch: Vec<String> = (1..=3)
        .map(|n| runtime.submit(&format!("batch {n}")))
        .collect();
    let both = runtime.submit_to(&[Channel::Slack, Channel::Pagerduty], "two-channels");
    for id in batch.iter().chain([&both]) {
        runtime.wait_dead(id);
    }
    // The providers are fixed.
    control.set_default(Behavior::Accept);

    let reports = tempfile::tempdir().expect("reports");
    let url = format!("http://{}", runtime.server.addr);
    let slack_api = runtime.fakes.slack_api_url();
    let term = Tmux::start_sized(
        &command(
            &format!(
                "--api {url} tui --operator erin --refresh 0.5s --wait 1m --reports {}",
                reports.path().display()
            ),
            &[
                ("UNS_API_KEY", support::KEY),
                ("UNS_SLACK_API_URL", &slack_api),
                ("UNS_SLACK_BOT_TOKEN", SLACK_TOKEN),
                ("UNS_SLACK_CHANNEL", SLACK_CHANNEL),
            ],
        ),
        120,
        40,
    );
    term.wait_for("total 5");

    // Verify and record: the fake's Slack history holds the message it never answered.
    // The header counts apart from the rows: the row itself is waited for (the filter's
    // words in the header are the first "verify-me").
    filter(&term, "subject:verify-me");
    term.wait_for_count("verify-me", 2);
    term.keys(&["v"]);
    term.wait_for("1 answer over 1 entry can be recorded");
    reason_word_go(&term, 1, "slack history shows it", &[]);
    term.wait_for("answers recorded");
    term.keys(&["Enter"]);
    let verified = support::payloads(&runtime.db, &lost, "VERIFIED");
    assert_eq!(verified.len(), 1, "{verified:?}");
    assert_eq!(verified[0]["outcome"], "DELIVERED", "{}", verified[0]);
    assert_eq!(verified[0]["via"], "tui");
    // Recorded, the entry reads RESOLVE; resolving it takes it out of the DLQ.
    // The header's count and the row's branch, each read apart: both say RESOLVE.
    term.wait_for("RESOLVE 1");
    term.wait_for_count("RESOLVE", 2);
    term.keys(&["r"]);
    term.wait_for("resolve 1 entry");
    reason_word_go(&term, 2, "delivered per slack history", &[]);
    term.wait_for("1 done");
    term.keys(&["Enter"]);
    support::wait_until("the resolve", Duration::from_secs(20), || {
        runtime.status(&lost) == ("RESOLVED".to_string(), false)
    });

    // A canary of one, then the rest at a pace, all marked.
    filter(&term, "subject:batch");
    term.wait_for("total 3");
    for n in 1..=3 {
        term.wait_for(&format!("batch {n}"));
    }
    term.keys(&["g", "Space", "Space", "Space"]);
    term.keys(&["p"]);
    term.wait_for("replay 3 entries");
    term.wait_while("(keys in a moment)");
    term.keys(&["Tab", "Tab"]);
    term.keys(&["-l", "1"]);
    term.keys(&["Tab"]);
    term.keys(&["-l", "2/s"]);
    reason_word_go(
        &term,
        2,
        "slack webhook fixed",
        &["Canary: 1 replay", "paced at 2/s"],
    );
    term.wait_for("3 done");
    term.keys(&["Enter"]);
    for id in &batch {
        assert_eq!(runtime.status(id), ("DELIVERED".to_string(), false), "{id}");
    }
    let first = batch
        .iter()
        .filter_map(|id| support::payloads(&runtime.db, id, "REPLAYED").pop())
        .collect::<Vec<_>>();
    assert_eq!(first.len(), 3);

    // One channel of two: PAGERDUTY alone; SLACK stays outstanding in the DLQ.
    filter(&term, "subject:two-channels");
    term.wait_for_count("two-channels", 2);
    term.keys(&["p"]);
    term.wait_for("[x] SLACK");
    term.wait_while("(keys in a moment)");
    term.keys(&["Tab", "Space"]);
    term.wait_for("[ ] SLACK");
    // From the channels, four Tabs reach the reason (canary, pace, forced, reason).
    term.keys(&["BTab"]);
    reason_word_go(
        &term,
        5,
        "pagerduty routing key rotated",
        &["channels PAGERDUTY"],
    );
    // Said as it is: the channel replayed delivered, the other still outstanding.
    term.wait_for("still outstanding in the DLQ: SLACK");
    term.wait_for("1 of 1 delivered (1 with other");
    term.keys(&["Enter"]);
    support::wait_until("PAGERDUTY delivered", Duration::from_secs(20), || {
        runtime.fakes.control.copies(Channel::Pagerduty, &both) == 1
    });
    term.wait_for("total 1");
    assert!(
        runtime.status(&both).1,
        "SLACK outstanding keeps it in the DLQ"
    );

    // Giving SLACK up on purpose: forced, with its reason.
    term.keys(&["r"]);
    term.wait_for("resolve 1 entry");
    term.wait_while("(keys in a moment)");
    term.keys(&["Tab", "Space"]);
    term.wait_for("give up 1 entry on purpose (forced)");
    term.keys(&["BTab"]);
    reason_word_go(
        &term,
        2,
        "channel retired; told by phone",
        &["gives up SLACK"],
    );
    term.wait_for("1 done");
    term.keys(&["Enter"]);
    filter(&term, "");
    term.wait_for("total 0");

    // The report of the incident, and its check.
    // The providers' figures name what only the server knows: its worker's adapters.
    term.keys(&[":"]);
    term.keys(&["-l", "providers"]);
    term.keys(&["Enter"]);
    term.wait_for("This server's worker has adapters for EMAIL, SLACK, PAGERDUTY.");
    term.keys(&[":"]);
    term.keys(&["-l", "report 1h"]);
    term.keys(&["Enter"]);
    let said = term.wait_for("report written to");
    term.keys(&["q"]);
    term.wait_for("EXIT=0");
    let bundle = support::checked_bundle(reports.path());
    // Where it went is said whole, with how to check it.
    assert!(
        said.contains(&format!("report written to {} (", bundle.display())),
        "{}: {said}",
        bundle.display()
    );
    let words = said.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(&format!(
            "`unsctl report check {}` checks it",
            bundle.display()
        )),
        "{said}"
    );

    // The verdict change carries the attempt's own times, never its window widened
    // for clock skew (two minutes either side): from the attempt's start to its end, the
    // 4 s lease and the moment its loss was written.
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(bundle.join("report.json")).expect("report.json"),
    )
    .expect("json");
    let change = report["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|a| a["kind"] == "VERIFIED")
        .expect("the verdict change");
    let started: f64 = rusqlite::Connection::open(&runtime.db)
        .expect("db")
        .query_row(
            "SELECT min(at) FROM uns_events WHERE notification_id = ?1 AND kind = 'CHANNEL_ATTEMPT_STARTED'",
            [&lost],
            |r| r.get(0),
        )
        .expect("start");
    let ran = &change["answer"]["ran"];
    assert_eq!(ran[0].as_f64(), Some(started), "{change}");
    let ended = ran[1].as_f64().expect("end");
    assert!(ended >= started + 4.0 && ended < started + 60.0, "{change}");

    // What each act wrote: the person (claimed, and the key it came through), the
    // reason typed, the channels, and `via`, as the command line writes them.
    let replayed = support::payloads(&runtime.db, &both, "REPLAYED");
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["channels"], serde_json::json!(["PAGERDUTY"]));
    assert_eq!(replayed[0]["reason"], "pagerduty routing key rotated");
    let resolved = support::payloads(&runtime.db, &both, "DLQ_RESOLVED");
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0]["forced"], true);
    assert_eq!(resolved[0]["given_up"], serde_json::json!(["SLACK"]));
    assert_eq!(resolved[0]["reason"], "channel retired; told by phone");
    for payload in first.iter().chain(&replayed).chain(&resolved) {
        assert_eq!(payload["via"], "tui", "{payload}");
        assert_eq!(payload["claimed_operator"], "erin", "{payload}");
    }
    assert_eq!(first[0]["reason"], "slack webhook fixed");
}
