//! The real `plantd serve` binary as a child process: started on port 0, its address and
//! first-start lines read from stdout, stopped with a signal. Integration tests pass the binary
//! path (`env!("CARGO_BIN_EXE_plantd")`), which only they know.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct ServerProcess {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// What the server printed up to and including its first-start lines.
    pub printed: Vec<String>,
    _lines: mpsc::Receiver<String>,
}

impl ServerProcess {
    /// Runs `BIN serve --listen 127.0.0.1:0 ARGS...` and waits until it reports its address.
    pub fn start(bin: &str, args: &[&str]) -> Self {
        let mut child = Command::new(bin)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("PLANTD_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start plantd serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut printed = Vec::new();
        let mut base = String::new();
        // Generous bound so a loaded machine does not fail a test; a healthy start takes < 1 s.
        while let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) {
            if let Some(addr) = line.split("listening on ").nth(1) {
                base = addr.trim().to_string();
            }
            let done = line.starts_with("database:");
            printed.push(line);
            if done {
                break;
            }
        }
        assert!(
            !base.is_empty(),
            "server did not report its address: {printed:?}"
        );
        // First-start lines follow the database line when there are any.
        while let Ok(line) = lines.recv_timeout(Duration::from_millis(500)) {
            printed.push(line);
        }
        Self {
            child,
            base,
            printed,
            _lines: lines,
        }
    }

    /// Sends a signal (`TERM`, `KILL`, ...) to the server.
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status();
        assert!(ok.is_ok_and(|s| s.success()), "kill -{name} failed");
    }

    /// Sends `name` and waits (at most 60 s) for the process to end.
    pub fn stop(&mut self, name: &str) -> ExitStatus {
        self.signal(name);
        for _ in 0..600 {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("plantd did not stop within 60 s of SIG{name}");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
