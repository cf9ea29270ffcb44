//! The fake Slack webhook and PagerDuty Events API v2: a small HTTP/1.1 server with
//! keep-alive, written by hand so it can also drop a connection mid-request.

use super::{Accepted, Behavior, Control};
use crate::model::Channel;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const MAX_BODY_BYTES: usize = 1 << 20;

pub(super) async fn serve(listener: TcpListener, control: Arc<Control>) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(stream, control.clone()));
    }
}

struct Request {
    path: String,
    idempotency_key: Option<String>,
    body: Vec<u8>,
}

async fn connection(stream: TcpStream, control: Arc<Control>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    while let Some(request) = read_request(&mut reader).await? {
        let channel = if request.path.starts_with("/v2/enqueue") {
            Channel::Pagerduty
        } else if request.path.starts_with("/services/") {
            Channel::Slack
        } else {
            respond(&mut write, 404, "{\"error\":\"not found\"}").await?;
            continue;
        };
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let notification_id = request
            .idempotency_key
            .as_deref()
            .and_then(|key| key.split(':').next())
            .or_else(|| body["dedup_key"].as_str())
            .map(str::to_string);
        let key = notification_id.clone().unwrap_or_default();
        let accepted = Accepted {
            channel,
            key: key.clone(),
            notification_id,
            message_id: None,
            idempotency_key: request.idempotency_key.clone(),
            body: body.clone(),
        };
        let success = match channel {
            Channel::Pagerduty => format!(
                "{{\"status\":\"success\",\"message\":\"Event processed\",\"dedup_key\":{}}}",
                serde_json::json!(body["dedup_key"].as_str().unwrap_or(&key))
            ),
            _ => "ok".to_string(),
        };
        let status_ok = if channel == Channel::Pagerduty {
            202
        } else {
            200
        };
        // A script for "id:CHANNEL" wins over one for the whole notification.
        let per_channel = format!("{key}:{channel}");
        match control.next_of(&[&per_channel, &key]) {
            Behavior::Accept => {
                control.record(accepted);
                respond(&mut write, status_ok, &success).await?;
            }
            Behavior::DelayAccept(delay) => {
                control.record(accepted);
                tokio::time::sleep(delay).await;
                respond(&mut write, status_ok, &success).await?;
            }
            Behavior::Hold => {
                control.record(accepted);
                control.held().await;
                respond(&mut write, status_ok, &success).await?;
            }
            Behavior::Reject(code) => {
                respond(&mut write, code, "{\"error\":\"rejected by fake\"}").await?;
            }
            Behavior::Hang => {
                control.record(accepted);
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink).await;
                return Ok(());
            }
            Behavior::Drop => return Ok(()),
        }
    }
    Ok(())
}

async fn read_request<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut content_length = 0usize;
    let mut idempotency_key = None;
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.parse().unwrap_or(0);
            } else if name.eq_ignore_ascii_case("idempotency-key") {
                idempotency_key = Some(value.to_string());
            }
        }
    }
    if content_length > MAX_BODY_BYTES {
        return Ok(None);
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body).await?;
    Ok(Some(Request {
        path,
        idempotency_key,
        body,
    }))
}

async fn respond<W: AsyncWriteExt + Unpin>(
    write: &mut W,
    status: u16,
    body: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    write.write_all(response.as_bytes()).await
}
