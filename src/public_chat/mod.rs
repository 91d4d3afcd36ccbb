//! Public chat: anonymous visitors reaching an agent through a public link or the website widget.
//!
//! - [`token`]: the signed session and resume tokens and the session secret.
//! - [`session`]: launch tokens open sessions; every later request is re-checked against them.
//! - [`chat`]: a visitor's message (body rules, the session's conversations, greetings) → a turn.
//! - [`history`]: what a session may read back (its conversations, history, tail, feedback).
//!
//! The routes are in `http/routes/public_chat.rs`; the widget is `assets/widget/`.

pub mod chat;
pub mod history;
pub mod session;
mod store;
pub mod token;
