//! Errors: [`ApiError`] is what a request gets back (a status and a JSON body naming the field at
//! fault); [`ServeError`] is what stops the server from starting.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A failed request: its HTTP status and a message naming the field or input at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    /// The HTTP status (4xx: the request; 5xx: the server).
    pub status: StatusCode,
    /// What went wrong, for the client.
    pub message: String,
}

impl ApiError {
    /// A 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// A 500 Internal Server Error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
        }
    }

    /// A 500 whose message is `e` and its causes, joined by ": ".
    pub fn internal_chain(e: &dyn std::error::Error) -> Self {
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = cause.source();
        }
        Self::internal(message)
    }

    /// A 503 Service Unavailable (the synthesis worker is gone).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
        }
    }
}

/// The JSON body of an error, shaped like OpenAI's: `{"error": {"message", "type"}}`.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    message: &'a str,
    r#type: &'static str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let kind = if self.status.is_client_error() {
            "invalid_request_error"
        } else {
            "server_error"
        };
        let body = ErrorBody {
            error: ErrorDetail {
                message: &self.message,
                r#type: kind,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

/// Errors of starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The pipeline could not be loaded or a voice not encoded.
    #[error(transparent)]
    Tts(#[from] voxspec_tts::TtsError),
    /// A setting is invalid.
    #[error("{field}: {reason}")]
    Config {
        /// The setting.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The address could not be bound or the server failed.
    #[error("serving on {addr}: {source}")]
    Io {
        /// The address.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}
