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

async fn session(stream: TcpStream, control: Arc<Control>) -> std::io::Result<()> {
    control.log("smtpd", &format!("connect from {CLIENT}"));
    let result = conversation(stream, &control).await;
    control.log("smtpd", &format!("disconnect from {CLIENT}"));
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

async fn conversation(stream: TcpStream, control: &Control) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    write.write_all(b"220 uns-fake ESMTP ready\r\n").await?;
    let mut sender = String::new();
    let mut recipients: Vec<String> = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_ascii_uppercase();
        let verb = command.split_whitespace().next().unwrap_or("");
        match verb {
            "EHLO" => {
                write
                    .write_all(b"250-uns-fake\r\n250-8BITMIME\r\n250 SIZE 1048576\r\n")
                    .await?
            }
            "HELO" => write.write_all(b"250 uns-fake\r\n").await?,
            "MAIL" => {
                sender = address(&line);
                recipients.clear();
                write.write_all(b"250 2.1.0 Ok\r\n").await?;
            }
            "RCPT" => {
                recipients.push(address(&line));
                write.write_all(b"250 2.1.5 Ok\r\n").await?;
            }
            "DATA" => {
                let key = recipients.first().cloned().unwrap_or_default();
                let behavior = control.next(&key);
                if behavior == Behavior::Drop {
                    control.log(
                        "smtpd",
                        &format!("lost connection after DATA from {CLIENT}"),
                    );
                    return Ok(());
                }
                let queue_id = control.queue_id();
                control.log("smtpd", &format!("{queue_id}: client={CLIENT}"));
                write
                    .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                    .await?;
                let Some(message) = read_message(&mut reader).await? else {
                    write.write_all(b"552 5.3.4 Message too big\r\n").await?;
                    return Ok(());
                };
                let message_id = header(&message, "message-id");
                // Postfix's cleanup logs the Message-ID as the header goes by, queued or not.
                control.log(
                    "cleanup",
                    &format!(
                        "{queue_id}: message-id={}",
                        message_id
                            .clone()
                            .unwrap_or_else(|| format!("<{queue_id}@fake>"))
                    ),
                );
                let queued = || {
                    control.log(
                        "qmgr",
                        &format!(
                            "{queue_id}: from=<{sender}>, size={}, nrcpt={} (queue active)",
                            message.len(),
                            recipients.len()
                        ),
                    );
                };
                let accepted = Accepted {
                    channel: Channel::Email,
                    key,
                    notification_id: message_id
                        .as_deref()
                        .and_then(crate::model::MessageId::parse)
                        .map(|m| m.notification_id),
                    message_id,
                    idempotency_key: None,
                    body: serde_json::Value::String(message.clone()),
                    at: now(),
                };
                match behavior {
                    Behavior::Accept => {
                        control.record(accepted);
                        queued();
                        write.write_all(b"250 2.0.0 Ok: queued\r\n").await?;
                    }
                    Behavior::DelayAccept(delay) => {
                        control.record(accepted);
                        queued();
                        tokio::time::sleep(delay).await;
                        write.write_all(b"250 2.0.0 Ok: queued\r\n").await?;
                    }
                    Behavior::Hold => {
                        control.record(accepted);
                        queued();
                        control.held().await;
                        write.write_all(b"250 2.0.0 Ok: queued\r\n").await?;
                    }
                    Behavior::Reject(code) => {
                        control.log(
                            "cleanup",
                            &format!(
                                "{queue_id}: milter-reject: END-OF-MESSAGE from {CLIENT}: {code} message refused"
                            ),
                        );
                        let reply = format!("{code} {}.0.0 Error: message refused\r\n", code / 100);
                        write.write_all(reply.as_bytes()).await?;
                    }
                    Behavior::Hang => {
                        control.record(accepted);
                        queued();
                        // Hold the connection open without a word until the client leaves.
                        let mut rest = String::new();
                        while reader.read_line(&mut rest).await? > 0 {
                            rest.clear();
                        }
                        return Ok(());
                    }
                    Behavior::Lose => {
                        control.log(
                            "smtpd",
                            &format!(
                                "lost connection after DATA ({} bytes) from {CLIENT}",
                                message.len()
                            ),
                        );
                        return Ok(());
                    }
                    Behavior::Drop => return Ok(()),
                }
            }
            "RSET" => {
                recipients.clear();
                write.write_all(b"250 2.0.0 Ok\r\n").await?;
            }
            "NOOP" => write.write_all(b"250 2.0.0 Ok\r\n").await?,
            "QUIT" => {
                write.write_all(b"221 2.0.0 Bye\r\n").await?;
                return Ok(());
            }
            _ => {
                write
                    .write_all(b"502 5.5.2 Error: command not recognized\r\n")
                    .await?
            }
        }
    }
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
