//! A hook for the desktop tests (scripts/desktop-tests.sh), off unless
//! `MLXR_DESKTOP_TEST_JS` names a script: once the first page has loaded,
//! that script runs in the page; it reports lines with
//! `window.ipc.postMessage(JSON.stringify({op: "report", line}))`, which
//! are appended, like the page loads, to `MLXR_DESKTOP_TEST_REPORT`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

pub struct Hook {
    script: String,
    report: PathBuf,
    ran: bool,
}

/// The line of a report message from the page, if it is one.
pub fn report_line(message: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(message).ok()?;
    if v.get("op")?.as_str()? != "report" {
        return None;
    }
    Some(v.get("line")?.as_str()?.to_string())
}

impl Hook {
    pub fn from_env() -> Result<Option<Hook>> {
        let Some(script) = std::env::var_os("MLXR_DESKTOP_TEST_JS") else {
            return Ok(None);
        };
        let report = std::env::var_os("MLXR_DESKTOP_TEST_REPORT")
            .context("MLXR_DESKTOP_TEST_JS needs MLXR_DESKTOP_TEST_REPORT (where lines go)")?;
        let script = std::fs::read_to_string(&script)
            .with_context(|| format!("reading {}", PathBuf::from(&script).display()))?;
        eprintln!("mlxr-desktop: test hook on");
        Ok(Some(Hook {
            script,
            report: report.into(),
            ran: false,
        }))
    }

    /// Records `line`; the first page load runs the script.
    pub fn on_report(&mut self, line: &str, webview: &wry::WebView) {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.report)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = written {
            eprintln!("mlxr-desktop: test report {}: {e}", self.report.display());
        }
        if line.starts_with("loaded ") && !self.ran {
            self.ran = true;
            if let Err(e) = webview.evaluate_script(&self.script) {
                eprintln!("mlxr-desktop: test script: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_messages_are_told_from_bridge_messages() {
        assert_eq!(
            report_line(r#"{"op":"report","line":"PASS"}"#),
            Some("PASS".into())
        );
        assert_eq!(report_line(r#"{"op":"fetch","id":1}"#), None);
        assert_eq!(report_line("nonsense"), None);
    }
}
