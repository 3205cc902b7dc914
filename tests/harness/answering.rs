//! An rmcp client of an earlier revision that answers its user's questions, for the tests that
//! ask over stdio and over HTTP.

use rmcp::RoleClient;
use serde_json::{Value, json};

/// A client of an earlier revision that answers its user's questions: it records each question
/// and answers with `answer`'s reply to it.
#[derive(Clone)]
pub struct Answering {
    pub revision: &'static str,
    /// What it declares at `initialize`.
    pub capabilities: Value,
    pub asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// `None`: never answers.
    pub answer: fn(&str) -> Option<Value>,
}

impl rmcp::ClientHandler for Answering {
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let request = serde_json::to_value(request).unwrap();
        let message = request["message"].as_str().unwrap_or_default().to_owned();
        self.asked.lock().unwrap().push(message.clone());
        match (self.answer)(&message) {
            Some(answer) => Ok(serde_json::from_value(answer).unwrap()),
            None => std::future::pending().await,
        }
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        serde_json::from_value(json!({"protocolVersion": self.revision,
            "capabilities": self.capabilities,
            "clientInfo": {"name": "answering", "version": "1"}}))
        .unwrap()
    }
}

/// The answers a user gives: yes, four stars, no to "never", and nothing to "silent".
pub fn user(message: &str) -> Option<Value> {
    Some(if message.starts_with("How many") {
        json!({"action": "accept", "content": {"stars": 4}})
    } else if message.contains("never") {
        json!({"action": "decline"})
    } else if message.contains("silent") {
        return None;
    } else {
        json!({"action": "accept", "content": {}})
    })
}
