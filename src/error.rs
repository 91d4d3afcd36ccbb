//! The crate's one error type. Every failure that reaches a client is an [`Error`] with a closed
//! [`ErrorCode`]; the HTTP edge turns it into `{"error":{"code","message","details"}}`.
//!
//! This module knows nothing about axum: the mapping to a response lives in `http::error`.

use std::fmt;

use serde_json::Value;

/// Declares [`ErrorCode`] from one table: each code with its wire name and HTTP status, so the
/// three can never drift apart (docs/api.md lists the same table).
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $status:literal;)+) => {
        /// Stable, snake_case error codes, each with one HTTP status.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)+
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant),+];

            /// The wire name (`error.code`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)+
                }
            }

            /// The HTTP status for this code.
            pub fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)+
                }
            }
        }
    };
}

error_codes! {
    /// The request body or parameters are invalid.
    InvalidRequest = "invalid_request", 400;
    /// The body is not valid JSON.
    MalformedJson = "malformed_json", 400;
    Unauthorized = "unauthorized", 401;
    Forbidden = "forbidden", 403;
    /// Registration without an invitation once the organization exists.
    InvitationRequired = "invitation_required", 403;
    NotFound = "not_found", 404;
    MethodNotAllowed = "method_not_allowed", 405;
    Conflict = "conflict", 409;
    RevisionConflict = "revision_conflict", 409;
    ChatTurnSuperseded = "chat_turn_superseded", 409;
    PayloadTooLarge = "payload_too_large", 413;
    UnsupportedMediaType = "unsupported_media_type", 415;
    RevisionInvalid = "revision_invalid", 422;
    /// A routine definition failed validation (`details.validation.diagnostics`).
    RoutineInvalid = "routine_invalid", 422;
    /// A routine markdown v1 cannot express.
    RoutineNotPortable = "routine_not_portable", 422;
    /// A decision that was already resolved.
    AlreadyResolved = "already_resolved", 409;
    /// An agent bundle whose `bundleVersion` or `agent.schemaVersion` this server does not read.
    UnsupportedBundleVersion = "unsupported_bundle_version", 400;
    /// A bundle import with the same idempotency key is still applying.
    AgentBundleImportInProgress = "agent_bundle_import_in_progress", 409;
    /// The cleanup fenced an interrupted import with this key; retryable.
    AgentBundleImportFenced = "agent_bundle_import_fenced", 409;
    Unprocessable = "unprocessable", 422;
    RateLimitExceeded = "rate_limit_exceeded", 429;
    UsageLimitExceeded = "usage_limit_exceeded", 429;
    Internal = "internal_error", 500;
    ProviderMisconfigured = "provider_misconfigured", 502;
    ServiceUnavailable = "service_unavailable", 503;
    EncryptionNotConfigured = "encryption_not_configured", 503;
    Timeout = "timeout", 504;
}

impl ErrorCode {
    /// The code a bare HTTP status maps to, for responses produced outside our handlers
    /// (body limit, panics, timeouts, unknown routes).
    pub fn from_status(status: u16) -> ErrorCode {
        match status {
            400 => ErrorCode::InvalidRequest,
            401 => ErrorCode::Unauthorized,
            403 => ErrorCode::Forbidden,
            404 => ErrorCode::NotFound,
            405 => ErrorCode::MethodNotAllowed,
            408 | 504 => ErrorCode::Timeout,
            409 => ErrorCode::Conflict,
            413 => ErrorCode::PayloadTooLarge,
            415 => ErrorCode::UnsupportedMediaType,
            422 => ErrorCode::Unprocessable,
            429 => ErrorCode::RateLimitExceeded,
            503 => ErrorCode::ServiceUnavailable,
            s if (400..500).contains(&s) => ErrorCode::InvalidRequest,
            _ => ErrorCode::Internal,
        }
    }
}

type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error's `details`: free-form JSON (the field, limits, ids) the envelope carries.
pub type ErrorDetails = Value;

/// A failure with a stable code, a message fit for the client, optional structured details and an
/// optional internal source (logged, never sent).
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<ErrorDetails>,
    pub source: Option<Source>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error { code, message: message.into(), details: None, source: None }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }
    /// A 400 naming the field that is wrong.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message).with_details(serde_json::json!({ "field": field }))
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }
    /// A 404 for `what` (for example "document"), worded the same whether it never existed or
    /// belongs to another workspace.
    pub fn not_found(what: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} not found"))
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ServiceUnavailable, message)
    }
    /// An internal failure: the client sees a generic message, the cause is logged.
    pub fn internal(source: impl Into<Source>) -> Self {
        Error {
            code: ErrorCode::Internal,
            message: "internal error".into(),
            details: None,
            source: Some(source.into()),
        }
    }
    pub fn internal_msg(message: impl Into<String>) -> Self {
        let m: String = message.into();
        Self::internal(m)
    }
    pub fn with_details(mut self, details: ErrorDetails) -> Self {
        self.details = Some(details);
        self
    }
    pub fn with_source(mut self, source: impl Into<Source>) -> Self {
        self.source = Some(source.into());
        self
    }
    pub fn status(&self) -> u16 {
        self.code.status()
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("code", &self.code.as_str()).field("message", &self.message);
        if let Some(details) = &self.details {
            d.field("details", details);
        }
        if let Some(source) = &self.source {
            d.field("source", &source.to_string());
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)?;
        if let Some(source) = &self.source {
            write!(f, " ({source})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|s| s as &(dyn std::error::Error + 'static))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::internal(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::internal(e)
    }
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Self {
        Error::internal(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_status_and_a_unique_snake_case_name() {
        let mut names = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let name = code.as_str();
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name}");
            assert!(names.insert(name), "{name} is used twice");
            assert!((400..600).contains(&code.status()));
        }
    }

    #[test]
    fn docs_api_lists_every_code_with_its_status() {
        let doc = include_str!("../docs/api.md");
        for code in ErrorCode::ALL {
            let row = format!("| `{}` | {} |", code.as_str(), code.status());
            assert!(doc.contains(&row), "docs/api.md's error table lacks {row}");
        }
    }

    #[test]
    fn internal_errors_hide_their_source_from_the_message() {
        let e = Error::internal_msg("disk on fire at /secret/path");
        assert_eq!(e.message, "internal error");
        assert!(e.to_string().contains("disk on fire"));
    }
}
