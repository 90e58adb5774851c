//! The service's errors: a status, a stable code and a message that says what to do, as JSON.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::es::EsError;
use crate::store::{Match, StoreError};
use crate::Method;

/// An error answer: `{"error": {"code", "message"}}` with the status.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, for programs: `not_found`, `bad_request`, `unauthorized`, `overloaded`, …
    pub code: &'static str,
    /// For people: what went wrong and what to do.
    pub message: String,
    /// Extra fields merged into the body (e.g. the matches of a refused insert).
    pub extra: Option<Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            extra: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 409: `what` (an index, a store) holds sketches of `held` only, not of the `asked`
    /// method; says which query parameter fits. The one wording for both backends.
    pub fn method_not_held(what: &str, held: Method, asked: Method) -> ApiError {
        let fits = match held {
            Method::MinHash => "`?threshold=T` (0 < T ≤ 1)",
            Method::SimHash => "`?k=N` (0–7)",
        };
        ApiError::new(
            StatusCode::CONFLICT,
            "index_not_usable",
            format!(
                "{what} holds {held} fingerprints only, not {asked}: ask with {fits}, or with neither for its default"
            ),
        )
    }

    /// 409: a dedupe insert refused, with the near-duplicates that are stored.
    pub fn duplicate(matches: Vec<Match>) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::CONFLICT,
            "duplicate",
            format!(
                "not stored: {} near-duplicate(s) of this article are stored already",
                matches.len()
            ),
        );
        e.extra = Some(json!({ "matches": matches }));
        e
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": { "code": self.code, "message": self.message } });
        if let Some(Value::Object(extra)) = self.extra {
            body.as_object_mut().expect("object").extend(extra);
        }
        (self.status, Json(body)).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        let status = r.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            _ => "bad_request",
        };
        let message = match status {
            StatusCode::PAYLOAD_TOO_LARGE => {
                "the body is larger than the service's --max-body".to_owned()
            }
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                "send the article as JSON with `Content-Type: application/json`".to_owned()
            }
            _ => format!("the body is not a usable JSON article: {}", r.body_text()),
        };
        ApiError::new(status, code, message)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> ApiError {
        ApiError::bad_request(format!(
            "the query string is not usable ({}): `threshold` is a number with 0 < threshold ≤ 1, `k` a whole number 0–7, `dedupe` true or false, each given once",
            r.body_text()
        ))
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> ApiError {
        ApiError::bad_request(format!(
            "the path is not usable ({}): the index and the id are percent-encoded UTF-8",
            r.body_text()
        ))
    }
}

impl From<EsError> for ApiError {
    fn from(e: EsError) -> ApiError {
        if let EsError::MethodNotHeld { index, held, asked } = &e {
            return ApiError::method_not_held(&format!("index `{index}`"), *held, *asked);
        }
        let (status, code) = match &e {
            EsError::IndexNotFound { .. }
            | EsError::NoIndexMatches { .. }
            | EsError::DocumentNotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            EsError::AmbiguousId { .. } => (StatusCode::CONFLICT, "ambiguous_id"),
            EsError::BadDocument { .. } | EsError::BadText(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable")
            }
            EsError::NotInitialised { .. }
            | EsError::VersionMismatch { .. }
            | EsError::MetaMismatch { .. }
            | EsError::BadMeta { .. }
            | EsError::MappingConflict { .. } => (StatusCode::CONFLICT, "index_not_usable"),
            EsError::Unreachable { .. } | EsError::Exhausted { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "es_unavailable")
            }
            EsError::Unauthorized { .. } => (StatusCode::BAD_GATEWAY, "es_refused_credentials"),
            EsError::Status { status, .. } if *status >= 500 || *status == 429 => {
                (StatusCode::BAD_GATEWAY, "es_error")
            }
            EsError::DistanceTooLarge { .. } => (StatusCode::BAD_REQUEST, "bad_request"),
            // The path's index name breaks Elasticsearch's rules (a leading `_`, `-` or `+`,
            // `#`, `:`, …): no index has it, as on a store; the message quotes the rule.
            EsError::Status {
                status: 400,
                error_type,
                ..
            } if error_type == "invalid_index_name_exception" => {
                (StatusCode::NOT_FOUND, "not_found")
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let (status, code) = match &e {
            StoreError::Mismatch { .. } => (StatusCode::CONFLICT, "index_not_usable"),
            StoreError::Core(crate::Error::UnsupportedDistance { .. }) => {
                (StatusCode::BAD_REQUEST, "bad_request")
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, e.to_string())
    }
}
