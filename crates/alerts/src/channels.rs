//! Notification channels: email through an SMTP relay and Slack through an incoming webhook.
//! What a message says is decided here ([`email_message`], [`slack_message`]); queueing,
//! retries and the delivery log belong to the caller.

use lettre::message::header::{ContentTransferEncoding, ContentType};
use lettre::message::{Attachment, Body, Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use plantd_model::alert::{Alert, AlertStatus};
use plantd_model::event::EventType;
use serde::Deserialize;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// How the SMTP connection is secured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    /// Plain connection upgraded with STARTTLS, which the relay must offer (port 587).
    #[default]
    Starttls,
    /// TLS from the first byte (SMTPS, port 465).
    Tls,
    /// No encryption (a relay on the same host or a trusted network; port 25).
    None,
}

/// `[smtp]` of the configuration: the relay that sends alert emails.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpConfig {
    pub host: String,
    /// Default 587 (starttls), 465 (tls) or 25 (none).
    pub port: Option<u16>,
    #[serde(default)]
    pub tls: SmtpTls,
    pub username: Option<String>,
    /// Also `PLANTD_SMTP_PASSWORD`, which wins over the file.
    pub password: Option<String>,
    /// The sender, `alerts@example.com` or `Plant alerts <alerts@example.com>`.
    pub from: String,
    /// PEM certificate(s) of a private certificate authority that signed the relay's
    /// certificate, trusted beside the system's.
    pub ca_file: Option<PathBuf>,
    /// Per connection and command; default 30.
    pub timeout_secs: Option<u64>,
}

/// Why a message was not sent; `permanent` failures are not worth retrying.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SendError {
    pub message: String,
    pub permanent: bool,
}

impl SendError {
    fn retry(message: String) -> Self {
        Self {
            message,
            permanent: false,
        }
    }
}

/// An SMTP relay, ready to send (connections are pooled).
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    relay: String,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mailer({} from {})", self.relay, self.from)
    }
}

impl SmtpConfig {
    /// Whether the settings can be used (addresses, certificate file, credentials); no
    /// connection is made.
    pub fn check(&self) -> Result<(), String> {
        self.transport().map(drop)
    }

    fn transport(
        &self,
    ) -> Result<
        (
            lettre::transport::smtp::AsyncSmtpTransportBuilder,
            Mailbox,
            String,
        ),
        String,
    > {
        let c = self;
        if c.host.trim().is_empty() {
            return Err("smtp.host must not be empty".into());
        }
        let from = Mailbox::from_str(&c.from)
            .map_err(|e| format!("smtp.from {:?} is not an email address: {e}", c.from))?;
        let port = c.port.unwrap_or(match c.tls {
            SmtpTls::Starttls => 587,
            SmtpTls::Tls => 465,
            SmtpTls::None => 25,
        });
        let mut builder =
            AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(c.host.clone()).port(port);
        if c.tls != SmtpTls::None {
            let mut params = TlsParameters::builder(c.host.clone());
            if let Some(path) = &c.ca_file {
                let pem = std::fs::read(path)
                    .map_err(|e| format!("smtp.ca_file {}: {e}", path.display()))?;
                let cert = Certificate::from_pem(&pem).map_err(|e| {
                    format!(
                        "smtp.ca_file {}: not a PEM certificate: {e}",
                        path.display()
                    )
                })?;
                params = params.add_root_certificate(cert);
            }
            let params = params
                .build()
                .map_err(|e| format!("smtp TLS settings: {e}"))?;
            builder = builder.tls(if c.tls == SmtpTls::Tls {
                Tls::Wrapper(params)
            } else {
                Tls::Required(params)
            });
        }
        match (&c.username, &c.password) {
            (Some(user), Some(password)) => {
                builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
            }
            (Some(_), None) => {
                return Err(
                    "smtp.username is set but no password (smtp.password or PLANTD_SMTP_PASSWORD)"
                        .into(),
                );
            }
            (None, Some(_)) => return Err("smtp.password is set but no smtp.username".into()),
            (None, None) => {}
        }
        let timeout = Duration::from_secs(c.timeout_secs.unwrap_or(30).max(1));
        Ok((
            builder.timeout(Some(timeout)),
            from,
            format!("{}:{port}", c.host),
        ))
    }
}

impl Mailer {
    /// Checks the configuration and prepares the transport (no connection is made yet).
    pub fn new(c: &SmtpConfig) -> Result<Self, String> {
        let (builder, from, relay) = c.transport()?;
        Ok(Self {
            transport: builder.build(),
            from,
            relay,
        })
    }

    /// Sends one plain-text message about `alert_id` to every recipient. Its Message-ID is
    /// derived from the alert and event (a retry sends the same id, so a relay or mailbox can
    /// tell a duplicate), and an `alert.resolved` message refers to the `alert.triggered` one,
    /// so mail programs show both in one thread.
    pub async fn send(
        &self,
        to: &[String],
        subject: &str,
        body: &str,
        alert_id: &str,
        event: EventType,
    ) -> Result<(), SendError> {
        let domain = self.from.email.domain();
        let id = |word: &str| format!("<{alert_id}.{word}@{domain}>");
        let mut message = lettre::Message::builder()
            .from(self.from.clone())
            .subject(subject)
            .message_id(Some(id(event_word(event))))
            .header(ContentType::TEXT_PLAIN);
        if event != EventType::AlertTriggered {
            message = message
                .in_reply_to(id("triggered"))
                .references(id("triggered"));
        }
        let message = addressed(message, to)?;
        let message = message.body(body.to_string()).map_err(|e| SendError {
            message: format!("cannot build the message: {e}"),
            permanent: true,
        })?;
        self.deliver(message).await
    }

    /// Sends one plain-text message to one person (invitations, password resets).
    pub async fn send_plain(&self, to: &str, subject: &str, body: &str) -> Result<(), SendError> {
        let mailbox = Mailbox::from_str(to).map_err(|e| SendError {
            message: format!("recipient {to:?} is not an email address: {e}"),
            permanent: true,
        })?;
        let message = lettre::Message::builder()
            .from(self.from.clone())
            .to(mailbox)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(body.to_string())
            .map_err(|e| SendError {
                message: format!("cannot build the message: {e}"),
                permanent: true,
            })?;
        self.deliver(message).await
    }

    /// Sends one message with a file attached (a report) to every recipient.
    pub async fn send_with_attachment(
        &self,
        to: &[String],
        subject: &str,
        body: &str,
        file: (&str, &str, Vec<u8>),
    ) -> Result<(), SendError> {
        let (filename, content_type, bytes) = file;
        let bad = |e: String| SendError {
            message: e,
            permanent: true,
        };
        let message = addressed(
            lettre::Message::builder()
                .from(self.from.clone())
                .subject(subject),
            to,
        )?;
        let content_type = ContentType::parse(content_type)
            .map_err(|e| bad(format!("content type {content_type}: {e}")))?;
        // Base64 whatever the file holds, so that it arrives byte for byte (quoted-printable,
        // lettre's choice for text, would rewrite a CSV's line ends).
        let file_body = Body::new_with_encoding(bytes, ContentTransferEncoding::Base64)
            .map_err(|_| bad("cannot encode the attachment".into()))?;
        let message = message
            .multipart(
                MultiPart::mixed()
                    .singlepart(SinglePart::plain(body.to_string()))
                    .singlepart(
                        Attachment::new(filename.to_string()).body(file_body, content_type),
                    ),
            )
            .map_err(|e| bad(format!("cannot build the message: {e}")))?;
        self.deliver(message).await
    }

    async fn deliver(&self, message: lettre::Message) -> Result<(), SendError> {
        self.transport.send(message).await.map(drop).map_err(|e| {
            let permanent = e.is_permanent();
            let reason = if e.is_timeout() {
                "no answer in time".to_string()
            } else {
                // The error's chain holds the cause (refused, TLS, the server's reply).
                plantd_model::error_chain(&e)
            };
            SendError {
                message: format!("SMTP relay {}: {reason}", self.relay),
                permanent,
            }
        })
    }
}

/// `message` addressed to every recipient; a recipient that is no address fails it for good.
fn addressed(
    mut message: lettre::message::MessageBuilder,
    to: &[String],
) -> Result<lettre::message::MessageBuilder, SendError> {
    for r in to {
        let mailbox = Mailbox::from_str(r).map_err(|e| SendError {
            message: format!("recipient {r:?} is not an email address: {e}"),
            permanent: true,
        })?;
        message = message.to(mailbox);
    }
    Ok(message)
}

/// Whether `text` is an address an SMTP relay can be given (`name@example.com`, no display
/// name).
pub fn check_recipient(text: &str) -> Result<(), String> {
    lettre::Address::from_str(text)
        .map(drop)
        .map_err(|e| format!("is not an email address ({e})"))
}

fn event_word(event: EventType) -> &'static str {
    match event {
        EventType::AlertTriggered => "triggered",
        EventType::AlertAcknowledged => "acknowledged",
        EventType::AlertResolved => "resolved",
        // Only alert events reach email and Slack.
        other => other.as_str(),
    }
}

fn resolved_by(by: &str) -> &str {
    match by {
        "auto" => "the condition cleared",
        "rule_deleted" => "the rule was deleted",
        user => user,
    }
}

/// A rule alert's condition (`Vibration_X gt 5`); `None` for alerts created through the API.
fn condition(a: &Alert) -> Option<String> {
    match (&a.tag_name, a.operator, a.threshold) {
        (Some(tag), Some(op), Some(threshold)) => {
            Some(format!("{tag} {} {threshold}", op.as_str()))
        }
        _ => None,
    }
}

/// The subject and plain-text body of the email for an alert event.
pub fn email_message(event: EventType, a: &Alert) -> (String, String) {
    let severity = a.severity.as_str().to_uppercase();
    let title = a.headline();
    let subject = if a.status == AlertStatus::Resolved {
        format!("[plantd] Resolved: {title} on {}", a.asset_id)
    } else {
        format!(
            "[plantd] {severity} alert {}: {title} on {}",
            event_word(event),
            a.asset_id
        )
    };
    let mut body = format!("Alert {title} {}.\n\n", event_word(event));
    let mut line = |label: &str, value: String| {
        body.push_str(&format!("{label:<12} {value}\n"));
    };
    match &a.rule_name {
        Some(rule) => line("Rule:", format!("{rule} ({})", a.severity.as_str())),
        None => line("Source:", format!("{} ({})", a.source, a.severity.as_str())),
    }
    line("Asset:", a.asset_id.clone());
    if let Some(message) = &a.message {
        line("Message:", message.clone());
    }
    match condition(a) {
        Some(c) => line("Condition:", c),
        None => {
            if let Some(tag) = &a.tag_name {
                line("Tag:", tag.clone());
            }
        }
    }
    match a.value {
        Some(v) => line("Value:", format!("{v} at {}", a.triggered_at)),
        None => line("Raised:", a.triggered_at.to_string()),
    }
    if !a.tags.is_empty() {
        line("Tags:", a.tags.join(", "));
    }
    line("Status:", a.status.as_str().to_string());
    if let (Some(at), Some(by)) = (a.acknowledged_at, &a.acknowledged_by) {
        line("Acknowledged:", format!("{at} by {by}"));
    }
    if let Some(note) = &a.note {
        line("Note:", note.clone());
    }
    if let (Some(at), Some(by)) = (a.resolved_at, &a.resolved_by) {
        line("Resolved:", format!("{at} ({})", resolved_by(by)));
    }
    if let Some(ds) = &a.data_source_id {
        line("Data source:", ds.clone());
    }
    line("Alert id:", a.id.clone());
    if let Some(rule_id) = &a.rule_id {
        line("Rule id:", rule_id.clone());
    }
    (subject, body)
}

/// The JSON body posted to a Slack incoming webhook for an alert event.
pub fn slack_message(event: EventType, a: &Alert) -> serde_json::Value {
    let icon = match (a.status, a.severity.as_str()) {
        (AlertStatus::Resolved, _) => ":white_check_mark:",
        (_, "critical") => ":red_circle:",
        (_, "warning") => ":warning:",
        _ => ":information_source:",
    };
    let head = format!(
        "{icon} *{}* {}: *{}* on `{}`",
        a.severity.as_str().to_uppercase(),
        event_word(event),
        a.headline(),
        a.asset_id,
    );
    let fact = match (condition(a), &a.tag_name, a.value) {
        (Some(c), Some(tag), Some(v)) => {
            format!("{tag} = {v} (condition {c}) at {}", a.triggered_at)
        }
        (_, tag, value) => {
            let what = a.message.as_deref().unwrap_or(a.headline());
            let reading = match (tag, value) {
                (Some(tag), Some(v)) => format!("{tag} = {v}; "),
                _ => String::new(),
            };
            format!("{reading}{what} (from {}) at {}", a.source, a.triggered_at)
        }
    };
    let text = match (a.resolved_at, &a.resolved_by) {
        (Some(at), Some(by)) => {
            format!("{head} at {at} ({}); triggered by {fact}", resolved_by(by))
        }
        _ => format!("{head}: {fact}"),
    };
    serde_json::json!({ "text": text })
}

/// Posts `body` to a Slack incoming webhook; any 2xx is success. A 4xx other than 408/429
/// (the URL is wrong, revoked or the channel gone) is permanent.
pub async fn post_slack(client: &reqwest::Client, url: &str, body: &str) -> Result<(), SendError> {
    let reply = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| {
            SendError::retry(if e.is_timeout() {
                "Slack did not answer in time".to_string()
            } else {
                format!("could not post to Slack: {e}")
            })
        })?;
    let status = reply.status();
    if status.is_success() {
        return Ok(());
    }
    let text: String = reply
        .text()
        .await
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    Err(SendError {
        message: format!("Slack answered {status}: {}", text.trim()),
        permanent: status.is_client_error() && status.as_u16() != 408 && status.as_u16() != 429,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use plantd_model::Timestamp;
    use plantd_model::alert::{Operator, Severity};

    fn alert() -> Alert {
        Alert {
            id: "a1".into(),
            org_id: "o".into(),
            rule_id: Some("r1".into()),
            rule_name: Some("Vibration high".into()),
            severity: Severity::Critical,
            status: AlertStatus::Active,
            data_source_id: Some("ds".into()),
            asset_id: "Pump_01".into(),
            tag_name: Some("Vibration_X".into()),
            value: Some(5.51),
            threshold: Some(5.0),
            operator: Some(Operator::Gt),
            title: "Vibration high".into(),
            message: None,
            source: "rule".into(),
            tags: vec![],
            notifications: vec![],
            dedup_key: None,
            triggered_at: Timestamp::parse("2026-11-22T06:00:00Z").unwrap(),
            acknowledged_at: None,
            acknowledged_by: None,
            note: None,
            resolved_at: None,
            resolved_by: None,
        }
    }

    #[test]
    fn messages_say_what_happened() {
        let (subject, body) = email_message(EventType::AlertTriggered, &alert());
        assert_eq!(
            subject,
            "[plantd] CRITICAL alert triggered: Vibration high on Pump_01"
        );
        assert!(body.contains("Condition:   Vibration_X gt 5\n"), "{body}");
        assert!(
            body.contains("Value:       5.51 at 2026-11-22T06:00:00"),
            "{body}"
        );
        let mut resolved = alert();
        resolved.status = AlertStatus::Resolved;
        resolved.resolved_at = Some(Timestamp::parse("2026-11-22T06:05:00Z").unwrap());
        resolved.resolved_by = Some("auto".into());
        let (subject, body) = email_message(EventType::AlertResolved, &resolved);
        assert_eq!(subject, "[plantd] Resolved: Vibration high on Pump_01");
        assert!(body.contains("(the condition cleared)"), "{body}");
        let text = slack_message(EventType::AlertResolved, &resolved)["text"].to_string();
        assert!(
            text.contains("on `Pump_01` at 2026-11-22T06:05:00.000Z (the condition cleared); triggered by Vibration_X = 5.51"),
            "{text}"
        );
        let slack = slack_message(EventType::AlertTriggered, &alert());
        let text = slack["text"].as_str().unwrap();
        assert!(
            text.starts_with(":red_circle: *CRITICAL* triggered: *Vibration high* on `Pump_01`"),
            "{text}"
        );
    }

    /// An alert created through the API (no rule): its title, source, message and tags.
    #[test]
    fn messages_of_alerts_without_a_rule() {
        let mut a = alert();
        a.rule_id = None;
        a.rule_name = None;
        a.threshold = None;
        a.operator = None;
        a.data_source_id = None;
        a.title = "Bearing temperature high".into();
        a.message = Some("Reported by gateway 7".into());
        a.source = "edge-gw-7".into();
        a.tags = vec!["line-2".into(), "bearing".into()];
        let (subject, body) = email_message(EventType::AlertTriggered, &a);
        assert_eq!(
            subject,
            "[plantd] CRITICAL alert triggered: Bearing temperature high on Pump_01"
        );
        assert!(
            body.contains("Source:      edge-gw-7 (critical)\n"),
            "{body}"
        );
        assert!(
            body.contains("Message:     Reported by gateway 7\n"),
            "{body}"
        );
        assert!(body.contains("Tag:         Vibration_X\n"), "{body}");
        assert!(body.contains("Tags:        line-2, bearing\n"), "{body}");
        assert!(
            !body.contains("Rule") && !body.contains("Condition"),
            "{body}"
        );
        let text = slack_message(EventType::AlertTriggered, &a)["text"].to_string();
        assert!(
            text.contains("*Bearing temperature high* on `Pump_01`: Vibration_X = 5.51; Reported by gateway 7 (from edge-gw-7)"),
            "{text}"
        );
        a.value = None;
        a.tag_name = None;
        let (_, body) = email_message(EventType::AlertTriggered, &a);
        assert!(body.contains("Raised:      2026-11-22T06:00:00"), "{body}");
    }

    #[tokio::test]
    async fn settings_are_checked() {
        let mut c = SmtpConfig {
            host: "smtp.example.com".into(),
            port: None,
            tls: SmtpTls::Starttls,
            username: Some("u".into()),
            password: None,
            from: "Plant alerts <alerts@example.com>".into(),
            ca_file: None,
            timeout_secs: None,
        };
        assert!(Mailer::new(&c).unwrap_err().contains("no password"));
        c.password = Some("p".into());
        assert_eq!(Mailer::new(&c).unwrap().relay, "smtp.example.com:587");
        c.from = "not an address".into();
        assert!(Mailer::new(&c).unwrap_err().contains("smtp.from"));
        c.from = "alerts@example.com".into();
        c.ca_file = Some("/nonexistent/ca.pem".into());
        assert!(Mailer::new(&c).unwrap_err().contains("smtp.ca_file"));
    }
}
