//! A private PostgreSQL cluster of the distribution, one per harness: `initdb` into a
//! temporary directory, its own port on 127.0.0.1, run as an unprivileged user (nobody,
//! when the tests run as root), with password authentication over TCP, so the tests
//! reach it as an operator does. Each test takes a database of its own.
//!
//! The server runs under a small shell whose stdin is a pipe from the harness: when the
//! harness ends, however it ends, the pipe closes, the shell stops the server and removes
//! its directory. Nothing outlives the run.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The superuser `initdb` makes, and its password.
pub const USER: &str = "uns";
pub const PASSWORD: &str = "pg-test-password-7f3a";

/// A role the cluster accepts only over TLS (its password is [`PASSWORD`]).
pub const TLS_ONLY_USER: &str = "uns_tls_only";

/// A role the cluster accepts only by a client certificate its root signed for it.
pub const CERT_USER: &str = "uns_cert";

pub struct Cluster {
    pub port: u16,
    /// Where its Unix socket is (local connections are trusted).
    pub socket_dir: PathBuf,
    pub bin: PathBuf,
    pub tls: Tls,
    /// Closing it stops the server (see the module's note).
    _lifeline: Mutex<ChildStdin>,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The harness's cluster, started on first use.
pub fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(Cluster::start)
}

/// Where the distribution keeps the server's programs: the newest
/// `/usr/lib/postgresql/VERSION/bin`, else wherever `initdb` is on the PATH.
pub fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let found = super::launch("sh")
        .args(["-c", "command -v initdb"])
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|path| !path.is_empty());
    match found {
        Some(initdb) => Path::new(&initdb)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        None => panic!(
            "PostgreSQL's initdb is missing: install the distribution's postgresql package (./test does)"
        ),
    }
}

/// Who the server runs as: nobody when the tests run as root (PostgreSQL refuses root).
fn run_as(command: &mut Command) {
    if super::is_root() {
        command.uid(65534).gid(65534);
    }
}

fn chown_to_runner(path: &Path) {
    if super::is_root() {
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).expect("chown to nobody");
    }
}

impl Cluster {
    fn start() -> Self {
        let bin = bin_dir();
        let dir = std::env::temp_dir().join(format!(
            "uns-pg-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir(&dir).expect("the cluster's directory");
        chown_to_runner(&dir);
        let data = dir.join("data");
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).expect("password file");
        chown_to_runner(&pwfile);
        let mut initdb = super::launch(&bin.join("initdb").display().to_string());
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "-E", "UTF8", "--no-locale", "--no-sync"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .stdin(Stdio::null());
        run_as(&mut initdb);
        let out = initdb.output().expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tls = Tls::make(&dir);
        // The TLS-only role may not connect in the clear (first matching rule wins).
        let hba = data.join("pg_hba.conf");
        let rules = std::fs::read_to_string(&hba).expect("pg_hba.conf");
        std::fs::write(
            &hba,
            format!(
                "hostnossl all {TLS_ONLY_USER} 127.0.0.1/32 reject\n\
                 hostssl all {CERT_USER} 127.0.0.1/32 cert\n\
                 host all {CERT_USER} 127.0.0.1/32 reject\n{rules}"
            ),
        )
        .expect("pg_hba.conf");
        let port = super::free_port();
        let log = dir.join("server.log");
        // The shell: the server in the background, until the harness's pipe closes.
        let script = r#"dir=$1; shift
"$@" >"$dir/server.log" 2>&1 </dev/null &
pid=$!
read -r _ || true
kill -INT "$pid" 2>/dev/null
wait "$pid"
rm -rf "$dir""#;
        let mut shell = super::launch("/bin/sh");
        shell
            .args(["-c", script, "uns-pg"])
            .arg(&dir)
            .arg(bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-c", "listen_addresses=127.0.0.1", "-p", &port.to_string()])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.display()))
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=300"])
            .args(["-c", "ssl=on"])
            .arg("-c")
            .arg(format!("ssl_cert_file={}", tls.server_cert.display()))
            .arg("-c")
            .arg(format!("ssl_key_file={}", tls.server_key.display()))
            .arg("-c")
            .arg(format!("ssl_ca_file={}", tls.root.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        run_as(&mut shell);
        let mut child = shell.spawn().expect("start postgres");
        let lifeline = child.stdin.take().expect("the server's lifeline");
        // The shell is reaped by nobody; it ends when the harness does.
        std::mem::forget(child);
        let cluster = Self {
            port,
            socket_dir: dir.clone(),
            bin,
            tls,
            _lifeline: Mutex::new(lifeline),
        };
        let ready = super::wait_for(Duration::from_secs(60), || cluster.admin_client().is_ok());
        assert!(
            ready,
            "the private PostgreSQL did not come up: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        cluster
            .admin()
            .batch_execute(&format!(
                "CREATE ROLE {TLS_ONLY_USER} LOGIN SUPERUSER PASSWORD '{PASSWORD}'"
            ))
            .expect("the TLS-only role");
        cluster
            .admin()
            .batch_execute(&format!("CREATE ROLE {CERT_USER} LOGIN SUPERUSER"))
            .expect("the certificate's role");
        cluster
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.socket_dir.join("server.log")).unwrap_or_default()
    }

    /// The URL of database `name`, as an operator writes it (no password in it).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{name}", self.port)
    }

    fn admin_client(&self) -> Result<postgres::Client, postgres::Error> {
        postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user(USER)
            .password(PASSWORD)
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(5))
            .connect(postgres::NoTls)
    }

    /// A connection to `postgres`, the cluster's own database, as its superuser.
    pub fn admin(&self) -> postgres::Client {
        self.admin_client().expect("connect to the private cluster")
    }

    /// A new, empty database of this test's own.
    pub fn database(&self) -> Database {
        let name = format!(
            "uns_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.admin()
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create a database");
        Database {
            url: self.url(&name),
            name,
            port: self.port,
        }
    }

    /// A new database of this test's own, holding a copy of the SQLite store at `file`.
    pub fn database_from(&self, file: &Path) -> Database {
        let database = self.database();
        database.copy_from(file);
        database
    }
}

/// One test's database.
pub struct Database {
    pub name: String,
    /// `postgres://uns@127.0.0.1:PORT/NAME`: the password comes from the environment.
    pub url: String,
    pub port: u16,
}

impl Database {
    /// The target the library connects to, its password given as `PGPASSWORD` would.
    pub fn target(&self) -> unsctl::db::pg::Target {
        unsctl::db::pg::Target::new(&self.url, Some(PASSWORD.into()), None)
    }

    /// A connection as the superuser, to look at or change the database behind
    /// unsctl's back.
    pub fn client(&self) -> postgres::Client {
        postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user(USER)
            .password(PASSWORD)
            .dbname(&self.name)
            .connect(postgres::NoTls)
            .expect("connect to the test database")
    }

    /// `unsctl --db URL ARGS` with the password in `PGPASSWORD`, as an operator runs it.
    pub fn unsctl(&self, args: &[&str]) -> Command {
        unsctl_at(&self.url, args)
    }

    /// `psql` on this database, its password in `PGPASSWORD`.
    pub fn psql(&self) -> Command {
        let mut command = super::launch(&cluster().bin.join("psql").display().to_string());
        command
            .env("PGPASSWORD", PASSWORD)
            .args(["-X", "-v", "ON_ERROR_STOP=1", "-d", &self.url]);
        command
    }

    /// Copies the SQLite store at `from` into this database with `unsctl store copy`.
    pub fn copy_from(&self, from: &Path) {
        let out = super::unsctl()
            .env("PGPASSWORD", PASSWORD)
            .args(["store", "copy", "--from"])
            .arg(from)
            .args(["--to", &self.url])
            .output()
            .expect("run store copy");
        assert!(
            out.status.success(),
            "store copy failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `unsctl --db URL ARGS`, the password in `PGPASSWORD`.
pub fn unsctl_at(url: &str, args: &[&str]) -> Command {
    let mut command = super::unsctl();
    command
        .env("PGPASSWORD", PASSWORD)
        .args(["--db", url])
        .args(args);
    command
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Ok(mut lifeline) = self._lifeline.lock() {
            let _ = lifeline.write_all(b"stop\n");
        }
    }
}

/// The cluster's TLS: a root of its own that signed the server's certificate (issued
/// for 127.0.0.1 only, not for `localhost`), and a stranger's root that signed nothing
/// of it.
pub struct Tls {
    pub root: PathBuf,
    pub stranger_root: PathBuf,
    /// A client certificate for [`CERT_USER`] the root signed, and its key (0600).
    pub client: (PathBuf, PathBuf),
    /// One for the same role that the stranger's root signed.
    pub impostor: (PathBuf, PathBuf),
    server_cert: PathBuf,
    server_key: PathBuf,
}

impl Tls {
    fn make(dir: &Path) -> Self {
        let tls = dir.join("tls");
        std::fs::create_dir(&tls).expect("the TLS directory");
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(&tls)
                .stdin(Stdio::null())
                .output()
                .expect("openssl (./test installs it)");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for (name, subject) in [
            ("root", "/CN=uns test root"),
            ("stranger", "/CN=a stranger"),
        ] {
            let (key_file, cert_file) = (format!("{name}.key"), format!("{name}.crt"));
            let mut args = vec!["req", "-x509", "-days", "30", "-subj", subject];
            args.extend(key);
            args.extend(["-keyout", &key_file, "-out", &cert_file]);
            openssl(&args);
        }
        std::fs::write(tls.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").expect("san");
        let mut args = vec!["req", "-subj", "/CN=uns test server"];
        args.extend(key);
        args.extend(["-keyout", "server.key", "-out", "server.csr"]);
        openssl(&args);
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "root.crt",
            "-CAkey",
            "root.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ]);
        std::fs::write(
            tls.join("client.ext"),
            "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
        )
        .expect("client extensions");
        for (name, signer) in [("client", "root"), ("impostor", "stranger")] {
            let (csr, cert) = (format!("{name}.csr"), format!("{name}.crt"));
            let key_file = format!("{name}.key");
            let subject = format!("/CN={CERT_USER}");
            let mut args = vec!["req", "-subj", &subject];
            args.extend(key);
            args.extend(["-keyout", &key_file, "-out", &csr]);
            openssl(&args);
            let (ca, ca_key) = (format!("{signer}.crt"), format!("{signer}.key"));
            openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-days",
                "30",
                "-extfile",
                "client.ext",
                "-out",
                &cert,
            ]);
            std::fs::set_permissions(
                tls.join(&key_file),
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )
            .expect("key mode");
        }
        let server_key = tls.join("server.key");
        // The server reads its key only when no one else can.
        std::fs::set_permissions(
            &server_key,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("key mode");
        chown_to_runner(&tls);
        chown_to_runner(&server_key);
        chown_to_runner(&tls.join("server.crt"));
        Self {
            root: tls.join("root.crt"),
            stranger_root: tls.join("stranger.crt"),
            client: (tls.join("client.crt"), tls.join("client.key")),
            impostor: (tls.join("impostor.crt"), tls.join("impostor.key")),
            server_cert: tls.join("server.crt"),
            server_key,
        }
    }
}

/// The distribution's PgBouncer in front of one test's database, on a port of its own on
/// 127.0.0.1, as sites put one in front of PostgreSQL: clients log in to it with the
/// database's password (SCRAM), and it logs in to the cluster with the same. It runs as
/// the cluster does (nobody, when root: it refuses root) and ends with this value.
pub struct Pooler {
    /// `postgres://uns@127.0.0.1:PORT/NAME`, the database's own name through the pooler.
    pub url: String,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Pooler {
    /// A pooler of `database` in `mode` (session, transaction or statement) that lends
    /// at most `sessions` server sessions at once.
    pub fn start(database: &Database, mode: &str, sessions: u32) -> Self {
        let dir = tempfile::tempdir().expect("the pooler's directory");
        chown_to_runner(dir.path());
        let port = super::free_port();
        let users = dir.path().join("users.txt");
        std::fs::write(&users, format!("\"{USER}\" \"{PASSWORD}\"\n")).expect("users");
        let config = dir.path().join("pgbouncer.ini");
        std::fs::write(
            &config,
            format!(
                "[databases]\n{name} = host=127.0.0.1 port={upstream} dbname={name}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n\
                 unix_socket_dir =\nauth_type = scram-sha-256\nauth_file = {users}\n\
                 pool_mode = {mode}\ndefault_pool_size = {sessions}\n",
                name = database.name,
                upstream = database.port,
                users = users.display(),
            ),
        )
        .expect("pgbouncer.ini");
        for file in [&users, &config] {
            chown_to_runner(file);
        }
        let program = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .find(|path| Path::new(path).exists())
            .expect(
                "PgBouncer is missing: install the distribution's pgbouncer package (./test does)",
            );
        let mut command = super::launch(program);
        command
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        run_as(&mut command);
        let child = command.spawn().expect("start pgbouncer");
        let pooler = Self {
            url: format!("postgres://{USER}@127.0.0.1:{port}/{}", database.name),
            child,
            _dir: dir,
        };
        let ready = super::wait_for(Duration::from_secs(30), || pooler.client().is_ok());
        assert!(ready, "PgBouncer did not come up on port {port}");
        pooler
    }

    /// A client of the pooler, as another application sharing it is.
    pub fn client(&self) -> Result<postgres::Client, postgres::Error> {
        let config: postgres::Config = self.url.parse()?;
        config
            .clone()
            .password(PASSWORD)
            .connect_timeout(Duration::from_secs(5))
            .connect(postgres::NoTls)
    }

    /// `unsctl --db URL ARGS` through the pooler, the password in `PGPASSWORD`.
    pub fn unsctl(&self, args: &[&str]) -> Command {
        unsctl_at(&self.url, args)
    }

    /// The target the library connects to through the pooler.
    pub fn target(&self) -> unsctl::db::pg::Target {
        unsctl::db::pg::Target::new(&self.url, Some(PASSWORD.into()), None)
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
