//! `dlq triage --all-contexts` across a fleet: 10 runtimes of 10,000 DLQ entries each,
//! each behind its own API server on loopback, read concurrently. Beside it, the same
//! 10 contexts read one after another in the same run, for the ratio.
//!
//! Run: cargo bench --bench fleet [-- CONTEXTS ENTRIES]

mod support;

use std::process::Command;

const KEY: &str = "fleet-bench-key-0123456789";

fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let contexts = args.first().copied().unwrap_or(10);
    let entries = args.get(1).copied().unwrap_or(10_000);
    unsctl::runtime::adapters::init_tls();
    let dir = tempfile::tempdir()?;
    let mut servers = Vec::new();
    let mut config = String::new();
    for n in 0..contexts {
        let db = dir.path().join(format!("region-{n}.db"));
        support::generate(&db, entries)?;
        let server = unsctl::server::start(unsctl::server::ServerConfig::api_only(
            db,
            Some(unsctl::server::Keys::single(KEY).map_err(anyhow::Error::msg)?),
        ))?;
        config.push_str(&format!(
            "[contexts.region-{n}]\napi = \"http://{}\"\napi_key_env = \"UNS_FLEET_KEY\"\n",
            server.addr
        ));
        servers.push(server);
    }
    let config_path = dir.path().join("config.toml");
    std::fs::write(&config_path, config)?;
    let unsctl = env!("CARGO_BIN_EXE_unsctl");
    let command = |args: &[&str]| {
        let mut c = Command::new(unsctl);
        c.args(args)
            .env("UNSCTL_CONFIG", &config_path)
            .env("UNS_FLEET_KEY", KEY)
            .env_remove("UNS_DB_FILE")
            .env_remove("UNS_BASE_URL")
            .env_remove("UNS_CONTEXT");
        c
    };
    // Correctness first: every entry of every context, tagged.
    let out = command(&["--all-contexts", "-o", "json", "dlq", "triage"]).output()?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let listed = doc["entries"].as_array().map_or(0, Vec::len);
    anyhow::ensure!(listed == contexts * entries, "listed {listed}");
    let mut fleet = Vec::new();
    let mut serial = Vec::new();

    for _ in 0..3 {
        fleet.push(support::measure(&mut command(&[
            "--all-contexts",
            "-o",
            "json",
            "dlq",
            "triage",
        ]))?);
        let start = std::time::Instant::now();
        for n in 0..contexts {
            let name = format!("region-{n}");
            let measured = support::measure(&mut command(&[
                "--context",
                &name,
                "-o",
                "json",
                "dlq",
                "triage",
            ]))?;
            anyhow::ensure!(measured.success, "{name} failed");
        }
        serial.push(start.elapsed().as_secs_f64());
    }
    anyhow::ensure!(fleet.iter().all(|m| m.success), "a fleet read failed");
    // Peak RSS as GNU time reports it for its own child: a child forked from this
    // process (which holds ten servers) would count pages it never touched after exec.
    let timed = |args: &[&str]| -> anyhow::Result<f64> {
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%M"])
            .arg(unsctl)
            .args(args)
            .env("UNSCTL_CONFIG", &config_path)
            .env("UNS_FLEET_KEY", KEY)
            .stdout(std::process::Stdio::null())
            .output()?;
        let text = String::from_utf8_lossy(&out.stderr);
        Ok(text
            .lines()
            .last()
            .and_then(|l| l.trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
            / 1024.0)
    };
    let fleet_rss = timed(&["--all-contexts", "-o", "json", "dlq", "triage"])?;
    let one_rss = timed(&["--context", "region-0", "-o", "json", "dlq", "triage"])?;
    let best = fleet
        .iter()
        .map(|m| m.elapsed.as_secs_f64())
        .fold(f64::INFINITY, f64::min);
    let serial_best = serial.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "fleet benchmark: {contexts} contexts x {entries} DLQ entries over the API, {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "  dlq triage --all-contexts -o json   {best:.2} s (best of 3; target < 5 s), peak RSS {fleet_rss:.0} MB (/usr/bin/time)"
    );
    println!(
        "  the same contexts one by one        {serial_best:.2} s   ratio {:.2}, peak RSS of one {one_rss:.0} MB",
        best / serial_best
    );
    for server in servers {
        server.stop();
    }
    Ok(())
}
