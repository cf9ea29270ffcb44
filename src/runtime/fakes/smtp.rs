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

async fn session(stream: TcpStream, control: Arc<Control>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    write.write_all(b"220 uns-fake ESMTP ready\r\n").await?;
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
                recipients.clear();
                write.write_all(b"250 2.1.0 Ok\r\n").await?;
            }
            "RCPT" => {
                let address = line
                    .split_once(':')
                    .map(|(_, rest)| {
                        rest.trim()
                            .trim_start_matches('<')
                            .trim_end_matches('>')
                            .to_string()
                    })
                    .unwrap_or_default();
                recipients.push(address);
                write.write_all(b"250 2.1.5 Ok\r\n").await?;
            }
            "DATA" => {
                let key = recipients.first().cloned().unwrap_or_default();
                let behavior = control.next(&key);
                if behavior == Behavior::Drop {
                    return Ok(());
                }
                write
                    .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                    .await?;
                let Some(message) = read_message(&mut reader).await? else {
                    write.write_all(b"552 5.3.4 Message too big\r\n").await?;
                    return Ok(());
                };
                let message_id = header(&message, "message-id");
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
                };
                match behavior {
                    Behavior::Accept => {
                        control.record(accepted);
                        write.write_all(b"250 2.0.0 Ok: queued\r\n").await?;
                    }
                    Behavior::DelayAccept(delay) => {
                        control.record(accepted);
                        tokio::time::sleep(delay).await;
                        write.write_all(b"250 2.0.0 Ok: queued\r\n").await?;
                    }
                    Behavior::Hold => {
                        control.record(accepted);
                        control.held().await;
                        write.write_all(b"250 2.0.0 Ok: queued\r\n").await?;
                    }
                    Behavior::Reject(code) => {
                        let reply = format!("{code} {}.0.0 Error: message refused\r\n", code / 100);
                        write.write_all(reply.as_bytes()).await?;
                    }
                    Behavior::Hang => {
                        control.record(accepted);
                        // Hold the connection open without a word until the client leaves.
                        let mut rest = String::new();
                        while reader.read_line(&mut rest).await? > 0 {
                            rest.clear();
                        }
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
