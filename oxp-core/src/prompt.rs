//! What a `#[prompt]` returns: [`Message`]s, each a [`Role`] and a content block (text, an
//! image, audio, an embedded resource). See [`resource`](mod@crate::resource) for the attributes.
//!
//! ```
//! use oxp_runtime::content::Content;
//! use oxp_runtime::prompt::{Message, Role};
//! use oxp_runtime::{prompt, ToolError};
//!
//! /// Explain a file to the user.
//! #[prompt]
//! fn explain(
//!     /// The file's URI.
//!     uri: String,
//! ) -> Result<Vec<Message>, ToolError> {
//!     Ok(vec![
//!         Message::user_content(Content::text_resource(&uri, "text/plain", "fn main() {}")?),
//!         Message::user("Explain the file above."),
//!         Message::assistant("Here is what it does:"),
//!     ])
//! }
//!
//! let messages = explain("file:///main.rs".into()).unwrap();
//! assert_eq!(messages[2].role, Role::Assistant);
//! ```

use serde::{Deserialize, Serialize};

use crate::content::Content;
use crate::descriptor::{InvokeError, InvokeResult};
use crate::error::ToolError;

/// Who says a message.
///
/// ```
/// use oxp_runtime::prompt::Role;
/// assert_eq!(serde_json::to_value(Role::User).unwrap(), "user");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user.
    User,
    /// The model.
    Assistant,
}

/// One message of a prompt, in MCP's shape.
///
/// ```
/// use oxp_runtime::prompt::Message;
/// let message = Message::user("Summarise the week.");
/// assert_eq!(
///     serde_json::to_value(&message).unwrap(),
///     serde_json::json!({"role": "user", "content": {"type": "text", "text": "Summarise the week."}})
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: Content,
}

impl Message {
    /// A message of `role` with `content`.
    ///
    /// ```
    /// use oxp_runtime::{content::Content, prompt::{Message, Role}};
    /// let message = Message::new(Role::Assistant, Content::text("Sure."));
    /// assert_eq!(message.role, Role::Assistant);
    /// ```
    pub fn new(role: Role, content: Content) -> Self {
        Message { role, content }
    }

    /// The user says `text`.
    ///
    /// ```
    /// let message = oxp_runtime::prompt::Message::user("Hello");
    /// assert_eq!(message.content, oxp_runtime::content::Content::text("Hello"));
    /// ```
    pub fn user(text: impl Into<String>) -> Self {
        Message::new(Role::User, Content::text(text))
    }

    /// The model says `text`.
    ///
    /// ```
    /// let message = oxp_runtime::prompt::Message::assistant("Hi");
    /// assert_eq!(message.role, oxp_runtime::prompt::Role::Assistant);
    /// ```
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::new(Role::Assistant, Content::text(text))
    }

    /// The user gives a block: an image, audio, a resource.
    ///
    /// ```
    /// use oxp_runtime::{content::Content, prompt::Message};
    /// let message = Message::user_content(Content::image(b"GIF89a", "image/gif").unwrap());
    /// assert!(matches!(message.content, Content::Image { .. }));
    /// ```
    pub fn user_content(content: Content) -> Self {
        Message::new(Role::User, content)
    }
}

/// What a `#[prompt]` fn may return: text (one user message), a [`Message`], a list of them,
/// or a `Result` of one of these.
///
/// ```
/// use oxp_runtime::prompt::{Message, PromptOutput};
/// let messages = "Say hi.".into_messages().unwrap();
/// assert_eq!(messages, [Message::user("Say hi.")]);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a prompt",
    label = "a #[prompt] returns its messages",
    note = "return `String` (one user message), `prompt::Message`, `Vec<prompt::Message>`, or a `Result` of one"
)]
pub trait PromptOutput {
    /// The prompt's messages.
    fn into_messages(self) -> Result<Vec<Message>, ToolError>;
}

impl PromptOutput for String {
    fn into_messages(self) -> Result<Vec<Message>, ToolError> {
        Ok(vec![Message::user(self)])
    }
}

impl PromptOutput for &'static str {
    fn into_messages(self) -> Result<Vec<Message>, ToolError> {
        Ok(vec![Message::user(self)])
    }
}

impl PromptOutput for Message {
    fn into_messages(self) -> Result<Vec<Message>, ToolError> {
        Ok(vec![self])
    }
}

impl PromptOutput for Vec<Message> {
    fn into_messages(self) -> Result<Vec<Message>, ToolError> {
        Ok(self)
    }
}

impl<T: PromptOutput, E: Into<ToolError>> PromptOutput for Result<T, E> {
    fn into_messages(self) -> Result<Vec<Message>, ToolError> {
        self.map_err(Into::into)?.into_messages()
    }
}

/// What the glue of a prompt makes of the fn's return.
pub(crate) fn messages<T: PromptOutput>(returned: T) -> InvokeResult {
    let messages = returned.into_messages()?;
    serde_json::to_value(messages)
        .map(Some)
        .map_err(InvokeError::Output)
}
