//! What a run found: one [`Check`] per rule, printed one a line and written as JSON for CI.

use std::fmt;

use serde_json::{Value, json};

/// How strongly the spec words a rule (RFC 2119).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// A failure breaks conformance: the checker exits 1.
    Must,
    /// A failure is reported, and does not change the exit code.
    Should,
}

impl Level {
    /// `MUST` or `SHOULD`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
        }
    }
}

/// What became of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server did what the rule says.
    Pass,
    /// It did not: what it did instead.
    Fail(String),
    /// The check could not be made against this server: why (no tool needs a secret, say).
    Skip(String),
}

/// One rule of the spec, checked against the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// How strongly the spec words it.
    pub level: Level,
    /// Where in the spec (`../spec/oxp-notes.md`) it comes from: `§1 H.11` is item 11 of the
    /// normative checklist, `§2` the exact JSON shapes, `§3.7` recommendation 7.
    pub section: &'static str,
    /// What was checked, in a line.
    pub what: String,
    /// What became of it.
    pub outcome: Outcome,
}

impl Check {
    /// `PASS`, `FAIL` or `SKIP`.
    pub fn status(&self) -> &'static str {
        match self.outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail(_) => "FAIL",
            Outcome::Skip(_) => "SKIP",
        }
    }

    /// Whether this is a failed MUST (what makes the checker exit 1).
    pub fn is_failed_must(&self) -> bool {
        self.level == Level::Must && matches!(self.outcome, Outcome::Fail(_))
    }
}

impl fmt::Display for Check {
    /// `PASS  MUST    §1 H.11    GET /health answers 200`, and for a failure or a skip, the
    /// reason on the next line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}  {:<6}  {:<9}  {}",
            self.status(),
            self.level.as_str(),
            self.section,
            self.what
        )?;
        match &self.outcome {
            Outcome::Pass => Ok(()),
            Outcome::Fail(why) | Outcome::Skip(why) => write!(f, "\n{:27}↳ {why}", ""),
        }
    }
}

/// Every check of one run against one server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The server's base URL, as given.
    pub url: String,
    /// In the order they ran.
    pub checks: Vec<Check>,
}

impl Report {
    /// The checks whose MUST failed: none means the server conforms, as far as checked.
    pub fn failed_musts(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.is_failed_must())
    }

    /// The exit code the command line gives: 1 on a failed MUST, else 0.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.failed_musts().next().is_some())
    }

    /// `N checks: P passed, F failed (M of them MUSTs), S skipped`.
    pub fn summary(&self) -> String {
        let count = |status| self.checks.iter().filter(|c| c.status() == status).count();
        format!(
            "{} checks: {} passed, {} failed ({} of them MUSTs), {} skipped",
            self.checks.len(),
            count("PASS"),
            count("FAIL"),
            self.failed_musts().count(),
            count("SKIP")
        )
    }

    /// The report as CI reads it: `{"url", "spec", "conforms", "summary", "checks": [{"status",
    /// "level", "section", "what", "detail"?}]}`.
    pub fn to_json(&self) -> Value {
        let checks: Vec<Value> = self
            .checks
            .iter()
            .map(|c| {
                let mut check = json!({
                    "status": c.status(),
                    "level": c.level.as_str(),
                    "section": c.section,
                    "what": c.what,
                });
                if let Outcome::Fail(detail) | Outcome::Skip(detail) = &c.outcome {
                    check["detail"] = json!(detail);
                }
                check
            })
            .collect();
        let count = |status| self.checks.iter().filter(|c| c.status() == status).count();
        json!({
            "url": self.url,
            "spec": "OXP 1.0 (oxp-notes.md; OpenExecProtocol/Specification spec/http/1.0/openapi.json at 4ebed7f)",
            "conforms": self.exit_code() == 0,
            "summary": {
                "passed": count("PASS"),
                "failed": count("FAIL"),
                "failed_musts": self.failed_musts().count(),
                "skipped": count("SKIP"),
            },
            "checks": checks,
        })
    }
}

impl fmt::Display for Report {
    /// Every check, one a line, then the summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.checks {
            writeln!(f, "{check}")?;
        }
        write!(f, "{}", self.summary())
    }
}

/// A body cut to a readable length for a failure's detail.
pub(crate) fn excerpt(body: &Value) -> String {
    let text = body.to_string();
    if text.chars().count() <= 200 {
        return text;
    }
    let cut: String = text.chars().take(200).collect();
    format!("{cut}…")
}
