//! The real `plantd` binary as a child process (`serve`, `sim start`): started on port 0, what
//! it prints read from stdout, stopped with a signal. Integration tests pass the binary
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
        let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let mut p = Self::launch(bin, &all, "database:");
        p.base = p.printed_after("listening on ").unwrap_or_default();
        assert!(
            !p.base.is_empty(),
            "server did not report its address: {:?}",
            p.printed
        );
        // First-start lines follow the database line when there are any.
        while let Ok(line) = p._lines.recv_timeout(Duration::from_millis(500)) {
            p.printed.push(line);
        }
        p
    }

    /// Runs `BIN ARGS...` and collects what it prints up to the first line starting with
    /// `ready` (`base` is left empty for the caller to fill).
    pub fn launch(bin: &str, args: &[&str], ready: &str) -> Self {
        Self::launch_with_env(bin, args, &[], ready)
    }

    /// [`ServerProcess::launch`] with environment variables set.
    pub fn launch_with_env(bin: &str, args: &[&str], env: &[(&str, &str)], ready: &str) -> Self {
        let mut child = Command::new(bin)
            .args(args)
            .env("PLANTD_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            // PLANTD_TEST_SERVER_STDERR=1 shows the server's log (with PLANTD_LOG in `env`).
            .stderr(if std::env::var_os("PLANTD_TEST_SERVER_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("start plantd");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut printed = Vec::new();
        // Generous bound so a loaded machine does not fail a test; a healthy start takes < 1 s.
        while let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) {
            let done = line.starts_with(ready);
            printed.push(line);
            if done {
                break;
            }
        }
        assert!(
            printed.last().is_some_and(|l| l.starts_with(ready)),
            "plantd {args:?} did not print {ready:?}: {printed:?}"
        );
        Self {
            child,
            base: String::new(),
            printed,
            _lines: lines,
        }
    }

    /// What the server printed after `marker` on the first line holding it, trimmed
    /// (`printed_after("login password: ")`).
    pub fn printed_after(&self, marker: &str) -> Option<String> {
        self.printed
            .iter()
            .find_map(|l| l.split(marker).nth(1))
            .map(|v| v.trim().to_string())
    }

    /// What the process printed since its `ready` line (or the last call), without waiting.
    pub fn printed_since(&mut self) -> Vec<String> {
        let more: Vec<String> = self._lines.try_iter().collect();
        self.printed.extend(more.iter().cloned());
        more
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
