//! A task as the store keeps it: its record, its states, its lease, and every change a record
//! may go through. Nothing here knows a front: what a client sees of a record is the front's
//! translation of it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::idempotency::StoreError;
use crate::seal::Ledger;
use crate::signals::Progress;
use crate::time::millis;

/// Why a task whose lease lapsed failed: its run's process stopped renewing it, which is all
/// another replica can know.
pub const LAPSED: &str = "The server running this task stopped renewing its lease before the task \
                      ended: it stopped, stalled, or lost the task store.";

/// The longest status message a task keeps of a tool's progress (in bytes, cut at a character):
/// well within a record's reserve, so that progress never needs room the store may not have.
pub const MAX_STATUS_MESSAGE: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// How a call's result is put in the creating front's terms (for MCP: what `tools/call` would
/// have answered).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Render {
    pub any_output: bool,
    pub per_caller: bool,
    pub contents: bool,
}

/// Who holds a task's run, and until when (milliseconds since the epoch).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Lease {
    pub holder: String,
    pub until: u64,
}

impl Lease {
    /// `holder`'s lease for `lease` from `now` (the store's clock).
    pub fn new(holder: &str, lease: Duration, now: u64) -> Self {
        Lease {
            holder: holder.to_owned(),
            until: now + millis(lease),
        }
    }
}

/// A task, as the store keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub tool_id: String,
    /// Kept beside the record ([`IdempotencyStore::attach`]), not in it: the record is written
    /// at every renewal, and the input, which may be large, never changes. Read here only
    /// from records an earlier version wrote.
    ///
    /// [`IdempotencyStore::attach`]: crate::idempotency::IdempotencyStore::attach
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub input: Value,
    pub user: Option<String>,
    /// The capabilities the creating request declared: what the tool's asks inside the task
    /// may need.
    pub can: Vec<String>,
    pub render: Render,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub created: u64,
    pub updated: u64,
    pub ttl_ms: u64,
    /// What the tool's asks established so far, for its next round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<Ledger>,
    /// The asks not yet answered: key on the wire → (the tool's key, the request as sent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub asked: BTreeMap<String, (String, Value)>,
    /// Every key on the wire the task ever asked under: none is used twice.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub issued: BTreeSet<String>,
    /// Answers to this round's asks so far, by the tool's key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub answers: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// A client asked to cancel it; its run stops at its next beat.
    #[serde(default)]
    pub cancel: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Made, and its first round not yet past its first wait: it may yet be answered as a
    /// plain call and forgotten, so the same round sent again meanwhile waits to see.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub starting: bool,
}

/// Why a task could not be read or changed.
pub enum TaskError {
    Store(StoreError),
    /// A record this server did not write (another version's, or damaged).
    Unreadable(String),
}

impl From<StoreError> for TaskError {
    fn from(error: StoreError) -> Self {
        TaskError::Store(error)
    }
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskError::Store(error) => error.fmt(f),
            TaskError::Unreadable(why) => write!(f, "a task record is unreadable: {why}"),
        }
    }
}

pub fn parse(body: &str) -> Result<Record, TaskError> {
    serde_json::from_str(body).map_err(|e| TaskError::Unreadable(e.to_string()))
}

/// The JSON-RPC error a task fails with.
pub fn rpc_error(message: &str) -> Value {
    json!({"code": -32603, "message": message})
}

impl Record {
    /// A new task's record, `working` under `holder`'s lease from `now`, its first round not
    /// yet past its first wait.
    #[allow(clippy::too_many_arguments)]
    pub fn starting(
        tool_id: String,
        user: Option<String>,
        can: Vec<String>,
        render: Render,
        holder: &str,
        lease: Duration,
        now: u64,
        ttl_ms: u64,
    ) -> Self {
        Record {
            tool_id,
            input: Value::Null,
            user,
            can,
            render,
            status: Status::Working,
            message: None,
            created: now,
            updated: now,
            ttl_ms,
            ledger: None,
            asked: BTreeMap::new(),
            issued: BTreeSet::new(),
            answers: BTreeMap::new(),
            result: None,
            error: None,
            cancel: false,
            lease: Some(Lease::new(holder, lease, now)),
            starting: true,
        }
    }

    /// Whether its run's process stopped renewing its lease.
    pub fn lapsed(&self, now: u64) -> bool {
        !self.status.is_terminal() && self.lease.as_ref().is_some_and(|lease| lease.until <= now)
    }

    /// Whether it is a round handed back to the store, waiting for a replica to run it.
    pub fn unheld(&self) -> bool {
        self.status == Status::Working && self.lease.is_none()
    }

    pub fn held_by(&self, holder: &str) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|lease| lease.holder == holder)
    }

    /// Ends the task `failed` with a JSON-RPC error saying `why`.
    pub fn fail(&mut self, why: &str, now: u64) {
        self.error = Some(rpc_error(why));
        self.end(Status::Failed, Some(why.to_owned()), now);
    }

    /// Ends the task's round with `status`. A terminal one drops what only its runs needed
    /// (its input, its asks and their answers), so that a task's end never needs more room
    /// than its reserve.
    pub fn end(&mut self, status: Status, message: Option<String>, now: u64) {
        self.status = status;
        self.message = message;
        self.lease = None;
        self.updated = now;
        if status.is_terminal() {
            self.input = Value::Null;
            self.ledger = None;
            self.asked.clear();
            self.answers.clear();
        }
    }

    /// Parks the task `input_required` on `asked` (the tool's key → the request as sent),
    /// each under a key on the wire it never used, with the `ledger` its next round needs.
    pub fn park(&mut self, ledger: &Ledger, asked: &BTreeMap<String, Value>, now: u64) {
        self.answers.clear();
        self.asked.clear();
        for (key, request) in asked {
            let wire = unused_key(&self.issued, key);
            self.issued.insert(wire.clone());
            self.asked.insert(wire, (key.clone(), request.clone()));
        }
        self.ledger = Some(ledger.clone());
        self.end(
            Status::InputRequired,
            Some("Waiting for an answer.".to_owned()),
            now,
        );
    }

    /// Takes `responses` (by key on the wire) for the asks still outstanding, others ignored;
    /// whether any counted. When none is left outstanding, the task is `working` again under
    /// `holder`'s lease, and `resumed` says so.
    pub fn answer(
        &mut self,
        responses: &BTreeMap<String, Value>,
        holder: &str,
        lease: Duration,
        now: u64,
        resumed: &mut bool,
    ) -> bool {
        *resumed = false;
        if self.status != Status::InputRequired {
            return false;
        }
        let mut changed = false;
        for (wire, response) in responses {
            if let Some((key, _)) = self.asked.remove(wire) {
                self.answers.insert(key, response.clone());
                changed = true;
            }
        }
        if changed && self.asked.is_empty() {
            self.status = Status::Working;
            self.message = None;
            self.updated = now;
            self.lease = Some(Lease::new(holder, lease, now));
            *resumed = true;
        }
        changed
    }

    /// A client's cancellation: a task waiting for answers (or for a replica) ends at once, and
    /// `ended` says so; a running one is marked, for its run to stop at its next beat. One
    /// that has ended, or was already asked to, stays as it is (`false`).
    pub fn cancel(&mut self, now: u64, ended: &mut bool) -> bool {
        *ended = false;
        match self.status {
            _ if self.status.is_terminal() || self.cancel => false,
            _ if self.unheld() || self.status == Status::InputRequired => {
                self.end(
                    Status::Cancelled,
                    Some("Cancelled at the client's request.".into()),
                    now,
                );
                *ended = true;
                true
            }
            _ => {
                self.cancel = true;
                true
            }
        }
    }

    /// Renews `holder`'s lease from `now`, taking the tool's `progress` as its message when it
    /// has one; `false` if the lease is no longer `holder`'s.
    pub fn renew(
        &mut self,
        holder: &str,
        lease: Duration,
        progress: &Option<String>,
        now: u64,
    ) -> bool {
        if !self.held_by(holder) {
            return false;
        }
        self.lease = Some(Lease::new(holder, lease, now));
        if progress.is_some() && self.message != *progress {
            self.message = progress.clone();
            self.updated = now;
        }
        true
    }

    /// Hands `holder`'s round back, held by no one, its answers kept; `false` if the lease is
    /// no longer `holder`'s.
    pub fn release(&mut self, holder: &str, now: u64) -> bool {
        if !self.held_by(holder) {
            return false;
        }
        self.lease = None;
        self.message = Some("Waiting for a server to run it.".to_owned());
        self.updated = now;
        true
    }

    /// Takes up a round handed back, under `holder`'s lease; `false` if it is not one.
    pub fn take(&mut self, holder: &str, lease: Duration, now: u64) -> bool {
        let taken = self.unheld();
        if taken {
            self.lease = Some(Lease::new(holder, lease, now));
            self.message = None;
            self.updated = now;
        }
        taken
    }
}

/// The tool's last progress, for the task's status message.
pub fn status_message(progress: &Progress) -> String {
    let count = match progress.total {
        Some(total) => format!("{}/{total}", progress.done),
        None => progress.done.to_string(),
    };
    let mut message = match &progress.message {
        Some(message) => format!("{count}: {message}"),
        None => count,
    };
    if message.len() > MAX_STATUS_MESSAGE {
        let cut = (0..=MAX_STATUS_MESSAGE - 3)
            .rev()
            .find(|at| message.is_char_boundary(*at))
            .unwrap_or(0);
        message.truncate(cut);
        message.push('…');
    }
    message
}

/// `key` if the task never asked under it, else `key#2`, `key#3`, …: a key on the wire names
/// one request over a task's life.
fn unused_key(issued: &BTreeSet<String>, key: &str) -> String {
    if !issued.contains(key) {
        return key.to_owned();
    }
    (2..)
        .map(|n| format!("{key}#{n}"))
        .find(|wire| !issued.contains(wire))
        .expect("some suffix is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_on_the_wire_is_never_used_twice() {
        let mut issued = BTreeSet::new();
        for expected in ["confirm", "confirm#2", "confirm#3"] {
            let wire = unused_key(&issued, "confirm");
            assert_eq!(wire, expected);
            issued.insert(wire);
        }
    }

    #[test]
    fn a_status_message_is_bounded_and_cut_at_a_character() {
        let progress = |message: String| Progress {
            done: 1,
            total: Some(2),
            message: Some(message),
        };
        let long = status_message(&progress("é".repeat(4000)));
        assert!(long.len() <= MAX_STATUS_MESSAGE, "{}", long.len());
        assert!(long.starts_with("1/2: é") && long.ends_with('…'));
        assert_eq!(status_message(&progress("ok".into())), "1/2: ok");
    }
}
