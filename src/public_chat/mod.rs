//! Public chat: anonymous visitors reaching an agent through a public link or the website widget.
//!
//! Built so far: the signed session and resume tokens and the session secret ([`token`]). The
//! launch tokens, sessions, messages, history, events and the widget build on them (issue 19).

pub mod session;
pub mod token;
