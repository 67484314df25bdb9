//! A real SMTP server for email tests: python's aiosmtpd (`tests/interop/smtp_sink.py`),
//! requiring STARTTLS with a certificate of this run's own CA and AUTH, writing each accepted
//! message to a JSON-lines file.

use plantd_alerts::channels::{SmtpConfig, SmtpTls};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A running SMTP sink and the configuration that sends to it.
pub struct SmtpSink {
    pub config: SmtpConfig,
    /// One JSON object per accepted message: mail_from, rcpt_tos, data, tls, authenticated.
    pub out: PathBuf,
    child: Child,
}

impl SmtpSink {
    /// Starts the sink with `python` (a python3 with aiosmtpd). With `refuse_first`, the
    /// first message is answered "451 try again later".
    pub fn start(python: &str, refuse_first: bool) -> Self {
        let dir = crate::temp_dir("plantd-smtp");
        crate::private_ca(&dir);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let out = dir.join("mail.jsonl");
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/interop/smtp_sink.py");
        let mut command = Command::new(python);
        command
            .arg(script)
            .arg(port.to_string())
            .arg(dir.join("cert.pem"))
            .arg(dir.join("key.pem"))
            .args(["plantd", "s3cret-relay"])
            .arg(&out)
            .stdout(Stdio::piped());
        if !refuse_first {
            command.arg("accept-first");
        }
        let mut child = command.spawn().expect("start the SMTP sink");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read the sink's first line");
        assert_eq!(line.trim(), "ready", "the SMTP server did not start");
        let config = SmtpConfig {
            host: "localhost".into(),
            port: Some(port),
            tls: SmtpTls::Starttls,
            username: Some("plantd".into()),
            password: Some("s3cret-relay".into()),
            from: "Plant alerts <alerts@plant.example>".into(),
            ca_file: Some(dir.join("ca.pem")),
            timeout_secs: Some(10),
        };
        Self { config, out, child }
    }

    /// The messages accepted so far.
    pub fn messages(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
