//! The fake SMTP server: EHLO, HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT.

use super::{Accepted, Behavior, Control};
use crate::model::Channel;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The longest message the fake takes; anything longer is refused, not buffered.
const MAX_MESSAGE_BYTES: usize = 1 << 20;

pub(super) async fn serve(listener: TcpListener, control: Arc<Control>) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        tokio::spawn(session(stream, control.clone()));
    }
}

const CLIENT: &str = "localhost[127.0.0.1]";

/// One SMTP session's lines in the fake relay's log, as Postfix's smtpd writes them: its
/// own process id, `connect`, `QID: client=` once a recipient is taken, how it ended,
/// and `disconnect` with the count of each command (`data=0/1`: DATA never succeeded).
struct Session<'c> {
    control: &'c Control,
    pid: u64,
    /// Per command, in the order first seen: (name, succeeded, tried).
    counts: Vec<(&'static str, u32, u32)>,
    /// The last command, as smtpd names it in `lost connection after ...`.
    last: &'static str,
}

impl<'c> Session<'c> {
    fn start(control: &'c Control) -> Self {
        let session = Self {
            control,
            pid: control.session_pid(),
            counts: Vec::new(),
            last: "CONNECT",
        };
        session.log(&format!("connect from {CLIENT}"));
        session
    }

    fn log(&self, text: &str) {
        self.control.log_session(self.pid, text);
    }

    fn count(&mut self, name: &'static str, ok: bool) {
        match self.counts.iter_mut().find(|(n, _, _)| *n == name) {
            Some(entry) => {
                entry.1 += u32::from(ok);
                entry.2 += 1;
            }
            None => self.counts.push((name, u32::from(ok), 1)),
        }
    }

    /// The client went away without QUIT.
    fn lost(&self, extra: &str) {
        self.log(&format!(
            "lost connection after {}{extra} from {CLIENT}",
            self.last
        ));
    }

    fn end(&self) {
        let mut text = format!("disconnect from {CLIENT}");
        let (mut ok, mut tried) = (0, 0);
        for (name, succeeded, total) in &self.counts {
            ok += succeeded;
            tried += total;
            if succeeded == total {
                text.push_str(&format!(" {name}={total}"));
            } else {
                text.push_str(&format!(" {name}={succeeded}/{total}"));
            }
        }
        if ok == tried {
            text.push_str(&format!(" commands={tried}"));
        } else {
            text.push_str(&format!(" commands={ok}/{tried}"));
        }
        self.log(&text);
    }
}

async fn session(stream: TcpStream, control: Arc<Control>) -> std::io::Result<()> {
    let mut session = Session::start(&control);
    let result = conversation(stream, &control, &mut session).await;
    session.end();
    result
}

/// The address in `MAIL FROM:<a>` or `RCPT TO:<a>`.
fn address(line: &str) -> String {
    line.split_once(':')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .next()
                .unwrap_or("")
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
        .unwrap_or_default()
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One message in transfer: its queue id (from the first recipient on), sender and
/// recipients.
#[derive(Default)]
struct Transaction {
    queue_id: Option<String>,
    sender: String,
    recipients: Vec<String>,
    helo: String,
}

async fn conversation(
    stream: TcpStream,
    control: &Control,
    session: &mut Session<'_>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    write.write_all(b"220 uns-fake ESMTP ready\r\n").await?;
    let mut mail = Transaction::default();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            session.lost("");
            return Ok(());
        }
        let command = line.trim_end().to_ascii_uppercase();
        let verb = command.split_whitespace().next().unwrap_or("");
        match verb {
            "EHLO" | "HELO" => {
                mail.helo = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let reply: &[u8] = if verb == "EHLO" {
                    b"250-uns-fake\r\n250-8BITMIME\r\n250 SIZE 1048576\r\n"
                } else {
                    b"250 uns-fake\r\n"
                };
                write.write_all(reply).await?;
                session.count(if verb == "EHLO" { "ehlo" } else { "helo" }, true);
                session.last = if verb == "EHLO" { "EHLO" } else { "HELO" };
            }
            "MAIL" => {
                mail.sender = address(&line);
                mail.recipients.clear();
                mail.queue_id = None;
                write.write_all(b"250 2.1.0 Ok\r\n").await?;
                session.count("mail", true);
                session.last = "MAIL";
            }
            "RCPT" => {
                mail.recipients.push(address(&line));
                // Postfix opens the queue file, and logs its id, with the first recipient.
                if mail.queue_id.is_none() {
                    let queue_id = control.queue_id();
                    session.log(&format!("{queue_id}: client={CLIENT}"));
                    mail.queue_id = Some(queue_id);
                }
                write.write_all(b"250 2.1.5 Ok\r\n").await?;
                session.count("rcpt", true);
                session.last = "RCPT";
            }
            "DATA" => {
                session.last = "DATA";
                let go_on = data(&mut reader, &mut write, control, session, &mut mail).await?;
                mail.recipients.clear();
                mail.queue_id = None;
                if !go_on {
                    return Ok(());
                }
            }
            "RSET" => {
                mail.recipients.clear();
                mail.queue_id = None;
                write.write_all(b"250 2.0.0 Ok\r\n").await?;
                session.count("rset", true);
                session.last = "RSET";
            }
            "NOOP" => {
                write.write_all(b"250 2.0.0 Ok\r\n").await?;
                session.count("noop", true);
                session.last = "NOOP";
            }
            "QUIT" => {
                write.write_all(b"221 2.0.0 Bye\r\n").await?;
                session.count("quit", true);
                return Ok(());
            }
            _ => {
                write
                    .write_all(b"502 5.5.2 Error: command not recognized\r\n")
                    .await?;
                session.count("unknown", false);
            }
        }
    }
}

/// The ledger's entry for a message the script lets through.
fn accepted(key: String, message_id: Option<String>, message: &str) -> Accepted {
    Accepted {
        channel: Channel::Email,
        key,
        notification_id: message_id
            .as_deref()
            .and_then(crate::model::MessageId::parse)
            .map(|m| m.notification_id),
        message_id,
        idempotency_key: None,
        body: serde_json::Value::String(message.to_string()),
        at: now(),
    }
}

/// Cleanup's line for a message refused at the final dot, as Postfix writes it.
fn log_reject(control: &Control, queue_id: &str, mail: &Transaction, code: u16) {
    control.log(
        "cleanup",
        &format!(
            "{queue_id}: reject: END-OF-MESSAGE from {CLIENT}; from=<{}> to=<{}> proto=ESMTP helo=<{}>: {code} {}.7.1 message refused",
            mail.sender,
            mail.recipients.first().map_or("", String::as_str),
            mail.helo,
            code / 100
        ),
    );
}

/// After the final dot, holds the connection open without a word until the client
/// leaves; the session then ends.
async fn hang<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
    session: &mut Session<'_>,
) -> std::io::Result<bool> {
    session.count("data", true);
    session.last = "END-OF-MESSAGE";
    let mut rest = String::new();
    while reader.read_line(&mut rest).await? > 0 {
        rest.clear();
    }
    session.lost("");
    Ok(false)
}

/// The queue manager's line for a message it took.
fn log_queued(control: &Control, queue_id: &str, mail: &Transaction, size: usize) {
    control.log(
        "qmgr",
        &format!(
            "{queue_id}: from=<{}>, size={size}, nrcpt={} (queue active)",
            mail.sender,
            mail.recipients.len()
        ),
    );
}

/// DATA through the reply to the final dot, by the script; false when the session ends.
async fn data<R, W>(
    reader: &mut R,
    write: &mut W,
    control: &Control,
    session: &mut Session<'_>,
    mail: &mut Transaction,
) -> std::io::Result<bool>
where
    R: AsyncBufReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let key = mail.recipients.first().cloned().unwrap_or_default();
    let behavior = control.next(&key);
    let Some(queue_id) = mail.queue_id.clone() else {
        write
            .write_all(b"554 5.5.1 Error: no valid recipients\r\n")
            .await?;
        session.count("data", false);
        return Ok(true);
    };
    if behavior == Behavior::Drop {
        session.count("data", false);
        session.lost("");
        return Ok(false);
    }
    write
        .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
        .await?;
    let Some(message) = read_message(reader).await? else {
        write.write_all(b"552 5.3.4 Message too big\r\n").await?;
        session.count("data", false);
        return Ok(true);
    };
    let message_id = header(&message, "message-id");
    // Postfix's cleanup logs the Message-ID as the header goes by, queued or not.
    let shown = message_id.clone();
    control.log(
        "cleanup",
        &format!(
            "{queue_id}: message-id={}",
            shown.unwrap_or_else(|| format!("<{queue_id}@fake>"))
        ),
    );
    let queued = || log_queued(control, &queue_id, mail, message.len());
    let accepted = accepted(key, message_id, &message);
    const QUEUED: &[u8] = b"250 2.0.0 Ok: queued\r\n";
    match behavior {
        Behavior::Accept
        | Behavior::DelayAccept(_)
        | Behavior::Hold
        | Behavior::AcceptOnceCopied => {
            let key = accepted.key.clone();
            control.record(accepted);
            queued();
            control.before_answering(behavior, &key).await;
            write.write_all(QUEUED).await?;
        }
        Behavior::Reject(code) => {
            log_reject(control, &queue_id, mail, code);
            let reply = format!("{code} {}.0.0 Error: message refused\r\n", code / 100);
            write.write_all(reply.as_bytes()).await?;
            session.count("data", false);
            session.last = "END-OF-MESSAGE";
            return Ok(true);
        }
        Behavior::Hang => {
            control.record(accepted);
            queued();
            return hang(reader, session).await;
        }
        Behavior::Lose => {
            session.count("data", false);
            session.lost(&format!(" ({} bytes)", message.len()));
            return Ok(false);
        }
        Behavior::Drop => return Ok(false),
    }
    session.count("data", true);
    session.last = "END-OF-MESSAGE";
    Ok(true)
}

/// Reads the message up to the lone dot, undoing dot-stuffing. None when it is too big.
async fn read_message<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<String>> {
    let mut message = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == ".\r\n" || line == ".\n" {
            return Ok(Some(message));
        }
        if message.len() + line.len() > MAX_MESSAGE_BYTES {
            return Ok(None);
        }
        message.push_str(line.strip_prefix('.').unwrap_or(&line));
    }
}

fn header(message: &str, name: &str) -> Option<String> {
    message
        .lines()
        .take_while(|line| !line.is_empty())
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
}
