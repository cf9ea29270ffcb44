//! The layouts a relay log comes in, as DESIGN §7 lists them, each able to write a line:
//! what the reader must read line for line, so the fake relay and the tests write exactly
//! these and nothing the reader was not built for.

/// How a line's stamp, host and program are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamps {
    /// `Nov  9 22:15:57`, the day padded with a space.
    Syslog,
    /// `Nov 9 22:15:57`.
    SyslogUnpadded,
    /// `Nov 09 22:15:57`, as Postfix's own `maillog_file` writes it.
    MaillogFile,
    /// `2026-11-29T22:15:57.123456+00:00`, as rsyslog's RFC 3339 template writes it.
    Rfc3339,
    /// journald's `short-precise`: `Nov  9 22:15:57.123456`.
    ShortPrecise,
    /// journald's `short-iso`: `2026-11-29T22:15:57+0000`.
    ShortIso,
    /// journald's `short-iso-precise`: `2026-11-29T22:15:57.123456+0000`.
    ShortIsoPrecise,
    /// journald's `short-full`: `Sun 2026-11-29 22:15:57 UTC`.
    ShortFull,
    /// journald's `short-unix`: `1795990557.123456`.
    ShortUnix,
    /// A container image's: RFC 3339, then a level word where the host would be.
    Level,
    /// RFC 5424, as central syslog servers write it:
    /// `<22>1 2026-11-29T22:15:57.123456+00:00 host postfix/smtpd 1 - - text`.
    Rfc5424,
}

/// Every layout, and those that name the host (all but a container image's).
pub const STAMPS: [Stamps; 11] = [
    Stamps::Rfc5424,
    Stamps::Syslog,
    Stamps::SyslogUnpadded,
    Stamps::MaillogFile,
    Stamps::Rfc3339,
    Stamps::ShortPrecise,
    Stamps::ShortIso,
    Stamps::ShortIsoPrecise,
    Stamps::ShortFull,
    Stamps::ShortUnix,
    Stamps::Level,
];

/// What a container runtime puts before each line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefix {
    None,
    /// `docker logs -t`: an RFC 3339 stamp to the nanosecond.
    Docker,
    /// `kubectl logs --timestamps`.
    Kubectl,
    /// `docker compose logs`: `service  | `.
    Compose,
}

pub const PREFIXES: [Prefix; 4] = [
    Prefix::None,
    Prefix::Docker,
    Prefix::Kubectl,
    Prefix::Compose,
];

/// How the whole of one line is written, under which syslog name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub stamps: Stamps,
    pub prefix: Prefix,
    /// The relay's syslog name (Postfix's `syslog_name`).
    pub name: &'static str,
}

impl Layout {
    /// The classic syslog line: `Nov 29 22:15:57 host postfix/smtpd[1]: text`.
    pub const CLASSIC: Layout = Layout {
        stamps: Stamps::Syslog,
        prefix: Prefix::None,
        name: "postfix",
    };

    /// One line at `at` (unix seconds, UTC) from `host`: `program` is `postfix/smtpd[1]`
    /// (its `postfix` becomes the layout's syslog name) or any other program's tag.
    pub fn line(&self, at: f64, host: &str, program: &str, text: &str) -> String {
        let program = match program.strip_prefix("postfix/") {
            Some(rest) => format!("{}/{rest}", self.name),
            None => program.to_string(),
        };
        let stamp = match self.stamps {
            Stamps::Syslog => strftime(at, "%b %e %H:%M:%S"),
            Stamps::SyslogUnpadded => strftime(at, "%b %-d %H:%M:%S"),
            Stamps::MaillogFile => strftime(at, "%b %d %H:%M:%S"),
            Stamps::Rfc3339 | Stamps::Level | Stamps::Rfc5424 => {
                strftime(at, "%Y-%m-%dT%H:%M:%S%.6f%:z")
            }
            Stamps::ShortPrecise => strftime(at, "%b %e %H:%M:%S%.6f"),
            Stamps::ShortIso => strftime(at, "%Y-%m-%dT%H:%M:%S%z"),
            Stamps::ShortIsoPrecise => strftime(at, "%Y-%m-%dT%H:%M:%S%.6f%z"),
            Stamps::ShortFull => strftime(at, "%a %Y-%m-%d %H:%M:%S UTC"),
            Stamps::ShortUnix => format!("{at:.6}"),
        };
        let line = match self.stamps {
            Stamps::Level => format!("{stamp} INFO    {program}: {text}"),
            Stamps::Rfc5424 => {
                // `program[pid]` becomes APP and PROCID; mail.info is PRI 22.
                let (app, pid) = program
                    .strip_suffix(']')
                    .and_then(|p| p.split_once('['))
                    .unwrap_or((&program, "-"));
                format!("<22>1 {stamp} {host} {app} {pid} - - {text}")
            }
            _ => format!("{stamp} {host} {program}: {text}"),
        };
        match self.prefix {
            Prefix::None => line,
            Prefix::Docker => format!("{} {line}", strftime(at, "%Y-%m-%dT%H:%M:%S%.9fZ")),
            Prefix::Kubectl => format!("{} {line}", strftime(at, "%Y-%m-%dT%H:%M:%S%.6fZ")),
            Prefix::Compose => format!("postfix-1  | {line}"),
        }
    }
}

fn strftime(at: f64, format: &str) -> String {
    let nanos = (at * 1e9).round() as i128;
    match jiff::Timestamp::from_nanosecond(nanos) {
        Ok(at) => at.strftime(format).to_string(),
        Err(_) => "1970-01-01T00:00:00Z".to_string(),
    }
}
