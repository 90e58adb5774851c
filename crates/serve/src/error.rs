//! The service's errors: a status, a stable code and a message that says what to do, as JSON.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use neardup_core::relation::Relation;
use neardup_core::Method;
use neardup_es::EsError;
use neardup_store::{Match, StoreError};

/// Declares [`ErrorCode`], its wire names and the list of them, from one table.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)+) => {
        /// The stable `error.code` of an error answer, for programs (the description's
        /// `ErrorCode` enum lists the same names, in the same order).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)+
        }

        impl ErrorCode {
            /// Every code, in the order the description lists them.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The name on the wire, e.g. `not_found`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)+
                }
            }
        }
    };
}

error_codes! {
    /// 400: the path, query string or body cannot be used as given.
    BadRequest = "bad_request",
    /// 401: `/v1/…` needs `Authorization: Bearer <token>`.
    Unauthorized = "unauthorized",
    /// 404: no such index, document or endpoint.
    NotFound = "not_found",
    /// 405: the endpoint does not take that method.
    MethodNotAllowed = "method_not_allowed",
    /// 413: the body is larger than `--max-body`.
    TooLarge = "too_large",
    /// 415: the body is not sent as `application/json`.
    UnsupportedMediaType = "unsupported_media_type",
    /// 422: the article's text fields (or, on Elasticsearch, the document) cannot be used.
    Unprocessable = "unprocessable",
    /// 422: a local store cannot keep an article too short to fingerprint.
    TooShort = "too_short",
    /// 404: a local store keeps fingerprints, not texts.
    TextNotKept = "text_not_kept",
    /// 409: `dedupe=true` and a near-duplicate is stored, or one that contains the article
    /// (the answer names the relation and lists the matches).
    Duplicate = "duplicate",
    /// 409: the id is in more than one of the indices asked.
    AmbiguousId = "ambiguous_id",
    /// 409: the index does not hold what the request needs (a method, neardup's fields).
    IndexNotUsable = "index_not_usable",
    /// 503: too many requests at once; retry.
    Overloaded = "overloaded",
    /// 503: a near-duplicate's insert held the keys past the timeout; retry.
    Busy = "busy",
    /// 504: the request took longer than `--timeout`.
    Timeout = "timeout",
    /// 503: Elasticsearch does not answer.
    EsUnavailable = "es_unavailable",
    /// 502: Elasticsearch refused the service's credentials.
    EsRefusedCredentials = "es_refused_credentials",
    /// 502: Elasticsearch failed.
    EsError = "es_error",
    /// 500: a bug.
    Internal = "internal",
}

/// An error answer: `{"error": {"code", "message"}}` with the status.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, for programs: `not_found`, `bad_request`, `unauthorized`, `overloaded`, …
    pub code: ErrorCode,
    /// For people: what went wrong and what to do.
    pub message: String,
    /// Extra fields merged into the body (e.g. the matches of a refused insert).
    pub extra: Option<Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            extra: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message)
    }

    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::Unprocessable,
            message,
        )
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            message,
        )
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
            ErrorCode::IndexNotUsable,
            format!(
                "{what} holds {held} fingerprints only, not {asked}: ask with {fits}, or with neither for its default"
            ),
        )
    }

    /// 409: a dedupe insert refused, with the related articles that are stored. The body
    /// names the relation that refused it (`near_duplicate`, or `contained_in`: the article
    /// is mostly contained in a stored one; a match without a relation, from SimHash or an
    /// index without containment, is a near-duplicate), and its message the match's id and
    /// containment.
    pub fn duplicate(matches: Vec<Match>) -> ApiError {
        let refusing = matches
            .iter()
            .find(|m| m.relation.is_none_or(Relation::refuses_insert));
        let relation = refusing
            .and_then(|m| m.relation)
            .unwrap_or(Relation::NearDuplicate);
        let what = match refusing {
            Some(m) => {
                let containment = m
                    .containment
                    .map(|c| format!(" (containment {c:.2})"))
                    .unwrap_or_default();
                match relation {
                    Relation::ContainedIn => format!("is contained in `{}`{containment}", m.id),
                    _ => format!("is a near-duplicate of `{}`{containment}", m.id),
                }
            }
            None => "has a near-duplicate".to_owned(),
        };
        let mut e = ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Duplicate,
            format!(
                "not stored: this article {what}, stored already; `matches` lists the {} related article(s) stored",
                matches.len()
            ),
        );
        e.extra = Some(json!({ "relation": relation, "matches": matches }));
        e
    }
}

impl ApiError {
    /// The answer's body: `{"error": {"code", "message"}, …extra}`.
    pub fn body(self) -> Value {
        let mut body = json!({ "error": { "code": self.code.as_str(), "message": self.message } });
        if let Some(Value::Object(extra)) = self.extra {
            body.as_object_mut().expect("object").extend(extra);
        }
        body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        (status, Json(self.body())).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        let status = r.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::TooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
            _ => ErrorCode::BadRequest,
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
            "the query string is not usable ({}): `threshold` is a number with 0 < threshold ≤ 1, `k` a whole number 0–7, `dedupe` and `containment` true or false, `refresh` false, wait_for or true, each given once",
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
            | EsError::DocumentNotFound { .. } => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            EsError::AmbiguousId { .. } => (StatusCode::CONFLICT, ErrorCode::AmbiguousId),
            EsError::BadDocument { .. } | EsError::BadText(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::Unprocessable)
            }
            EsError::NotInitialised { .. }
            | EsError::VersionMismatch { .. }
            | EsError::MetaMismatch { .. }
            | EsError::BadMeta { .. }
            | EsError::GroupTextFields { .. }
            | EsError::MappingConflict { .. }
            | EsError::FieldLimit { .. } => (StatusCode::CONFLICT, ErrorCode::IndexNotUsable),
            EsError::Unreachable { .. } | EsError::Exhausted { .. } | EsError::Tls { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::EsUnavailable)
            }
            EsError::Unauthorized { .. } => {
                (StatusCode::BAD_GATEWAY, ErrorCode::EsRefusedCredentials)
            }
            EsError::Blocked { .. } => (StatusCode::BAD_GATEWAY, ErrorCode::EsError),
            EsError::Status { status, .. } if *status >= 500 || *status == 429 => {
                (StatusCode::BAD_GATEWAY, ErrorCode::EsError)
            }
            EsError::DistanceTooLarge { .. } | EsError::DedupeDistance { .. } => {
                (StatusCode::BAD_REQUEST, ErrorCode::BadRequest)
            }
            // The path's index name breaks Elasticsearch's rules (a leading `_`, `-` or `+`,
            // `#`, `:`, …): no index has it, as on a store; the message quotes the rule.
            EsError::Status {
                status: 400,
                error_type,
                ..
            } if error_type == "invalid_index_name_exception" => {
                (StatusCode::NOT_FOUND, ErrorCode::NotFound)
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal),
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let (status, code) = match &e {
            StoreError::Mismatch { .. } => (StatusCode::CONFLICT, ErrorCode::IndexNotUsable),
            StoreError::Core(neardup_core::Error::UnsupportedDistance { .. }) => {
                (StatusCode::BAD_REQUEST, ErrorCode::BadRequest)
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal),
        };
        ApiError::new(status, code, e.to_string())
    }
}
