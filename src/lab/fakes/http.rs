//! The fake Slack webhook and PagerDuty Events API v2, and the read side verify uses:
//! PagerDuty's `GET /incidents` and Slack's `GET /api/conversations.history`, in the real
//! APIs' shapes (auth headers, query parameters, pagination). A small HTTP/1.1 server
//! with keep-alive, written by hand so it can also drop a connection mid-request.

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
    method: String,
    path: String,
    query: Vec<(String, String)>,
    authorization: Option<String>,
    idempotency_key: Option<String>,
    body: Vec<u8>,
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

async fn connection(stream: TcpStream, control: Arc<Control>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    while let Some(request) = read_request(&mut reader).await? {
        if request.method == "GET" {
            let (status, body) = match request.path.as_str() {
                "/incidents" => incidents(&request, &control),
                "/api/conversations.history" => history(&request, &control),
                _ => (404, "{\"error\":\"not found\"}".to_string()),
            };
            respond(&mut write, status, &body).await?;
            continue;
        }
        let channel = if request.path.starts_with("/v2/enqueue") {
            Channel::Pagerduty
        } else if request.path.starts_with("/services/") {
            Channel::Slack
        } else {
            respond(&mut write, 404, "{\"error\":\"not found\"}").await?;
            continue;
        };
        let _delivering = control.delivering();
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
            at: now(),
        };
        let (status_ok, success) = accepted_reply(channel, &body, &key);
        // A script for "id:CHANNEL" wins over one for the whole notification.
        let per_channel = format!("{key}:{channel}");
        let behavior = control.next_of(&[&per_channel, &key]);
        match behavior {
            Behavior::Accept
            | Behavior::DelayAccept(_)
            | Behavior::Hold
            | Behavior::AcceptOnceCopied => {
                let key = accepted.key.clone();
                control.record(accepted);
                control.before_answering(behavior, &key).await;
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
            Behavior::Drop | Behavior::Lose => return Ok(()),
        }
    }
    Ok(())
}

/// What the provider answers a call it takes: PagerDuty's 202 naming the dedup key,
/// Slack's 200 "ok".
fn accepted_reply(channel: Channel, body: &serde_json::Value, key: &str) -> (u16, String) {
    match channel {
        Channel::Pagerduty => (
            202,
            format!(
                "{{\"status\":\"success\",\"message\":\"Event processed\",\"dedup_key\":{}}}",
                serde_json::json!(body["dedup_key"].as_str().unwrap_or(key))
            ),
        ),
        _ => (200, "ok".to_string()),
    }
}

fn query<'r>(request: &'r Request, name: &str) -> Option<&'r str> {
    request
        .query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `GET /incidents`: one incident per dedup key the fake took a trigger for (later
/// triggers with the key fold into it, as PagerDuty does), paged by offset.
fn incidents(request: &Request, control: &Control) -> (u16, String) {
    let expected = format!("Token token={}", super::PAGERDUTY_TOKEN);
    if request.authorization.as_deref() != Some(expected.as_str()) {
        return (
            401,
            serde_json::json!({"error": {"message": "Unauthorized", "code": 2006}}).to_string(),
        );
    }
    let key = query(request, "incident_key");
    let seen: Vec<super::Incident> = control
        .incidents()
        .into_iter()
        .filter(|i| key.is_none_or(|k| k == i.dedup_key))
        .collect();
    let offset: usize = query(request, "offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    let limit: usize = query(request, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(25)
        .clamp(1, 100);
    let page: Vec<serde_json::Value> = seen
        .iter()
        .enumerate()
        .skip(offset)
        .take(limit)
        .map(|(_, incident)| {
            let id = format!("PFAKE{:04}", incident.number - 1);
            // To the second, as PagerDuty writes it.
            let changed = incident.resolved.unwrap_or(incident.created).floor();
            serde_json::json!({
                "id": id,
                "type": "incident",
                "incident_number": incident.number,
                "incident_key": incident.dedup_key,
                "title": incident.title,
                "status": if incident.resolved.is_some() { "resolved" } else { "triggered" },
                "created_at": crate::clock::rfc3339(incident.created.floor()),
                "last_status_change_at": crate::clock::rfc3339(changed),
                "html_url": format!("https://fake.pagerduty.com/incidents/{id}"),
                "service": {"id": "PSVCFAKE", "type": "service_reference", "summary": "uns-fake-service"},
            })
        })
        .collect();
    let page = twice_if(control, page);
    let body = serde_json::json!({
        "incidents": page,
        "limit": limit,
        "offset": offset,
        "more": offset + limit < seen.len(),
        "total": null,
    });
    (200, body.to_string())
}

/// `GET /api/conversations.history`: the messages the webhook took, newest first, within
/// `oldest`..`latest`, with their metadata when asked for, paged by cursor. Errors come
/// back as Slack's do: HTTP 200 and `ok: false`.
fn history(request: &Request, control: &Control) -> (u16, String) {
    let failed = |error: &str| {
        (
            200,
            serde_json::json!({"ok": false, "error": error}).to_string(),
        )
    };
    let expected = format!("Bearer {}", super::SLACK_TOKEN);
    if request.authorization.as_deref() != Some(expected.as_str()) {
        return failed("invalid_auth");
    }
    if query(request, "channel") != Some(super::SLACK_CHANNEL) {
        return failed("channel_not_found");
    }
    let bound = |name: &str, default: f64| {
        query(request, name)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(default)
    };
    let (oldest, latest) = (bound("oldest", 0.0), bound("latest", f64::MAX));
    let metadata = query(request, "include_all_metadata") == Some("true");
    let mut messages: Vec<(f64, serde_json::Value)> = control
        .ledger()
        .into_iter()
        .filter(|a| a.channel == Channel::Slack && a.at >= oldest && a.at <= latest)
        .map(|a| {
            let mut message = serde_json::json!({
                "type": "message",
                "ts": format!("{:.6}", a.at),
                "text": a.body["text"],
                "bot_id": super::SLACK_BOT_ID,
            });
            if metadata && !a.body["metadata"].is_null() {
                message["metadata"] = a.body["metadata"].clone();
            }
            (a.at, message)
        })
        .collect();
    messages.sort_by(|a, b| b.0.total_cmp(&a.0));
    let start: usize = query(request, "cursor")
        .and_then(|c| c.strip_prefix("next:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let limit: usize = query(request, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(100)
        .clamp(1, 999);
    let page: Vec<serde_json::Value> = messages
        .iter()
        .skip(start)
        .take(limit)
        .map(|(_, m)| m.clone())
        .collect();
    let more = start + limit < messages.len();
    let page = twice_if(control, page);
    let body = serde_json::json!({
        "ok": true,
        "messages": page,
        "has_more": more,
        "response_metadata": {"next_cursor": if more { format!("next:{}", start + limit) } else { String::new() }},
    });
    (200, body.to_string())
}

/// `page` with every record listed twice when the fake is told to repeat them.
fn twice_if(control: &Control, page: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    if !control.listings_repeated() {
        return page;
    }
    page.into_iter()
        .flat_map(|item| [item.clone(), item])
        .collect()
}

async fn read_request<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or("GET").to_ascii_uppercase();
    let target = words.next().unwrap_or("/").to_string();
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (
            path.to_string(),
            form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect(),
        ),
        None => (target, Vec::new()),
    };
    let mut content_length = 0usize;
    let mut idempotency_key = None;
    let mut authorization = None;
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
            } else if name.eq_ignore_ascii_case("authorization") {
                authorization = Some(value.to_string());
            }
        }
    }
    if content_length > MAX_BODY_BYTES {
        return Ok(None);
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body).await?;
    Ok(Some(Request {
        method,
        path,
        query,
        authorization,
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
        401 => "Unauthorized",
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
