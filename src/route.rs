//! The operations' facts in one table, which `cargo test` holds to
//! openapi.yaml (tests/api/interface.rs), and axum's router of their handlers
//! (`plants.rs`) within each request's deadline; 404, 405 and CORS.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use lambda_http::http::header::{
    ACCESS_CONTROL_REQUEST_METHOD, AUTHORIZATION, CONTENT_TYPE, LINK, ORIGIN, RETRY_AFTER,
    WWW_AUTHENTICATE,
};
use lambda_http::http::{HeaderValue, Method, Uri};
use tower::ServiceExt;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::auth::Access;
use crate::error::ApiError;
use crate::metrics::record;
use crate::plants::{self, Plants};
use crate::store::STORE_BUDGET;

/// What answering takes after the store gives up (the response, the log
/// lines, handing it back to Lambda), kept free of the invocation's time.
const ANSWER_MARGIN: Duration = Duration::from_millis(300);

/// When a request's work must be over: past it the answer is 503
/// ([`operation`], which drops the work: docs/contract.md).
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub(crate) tokio::time::Instant);

impl Deadline {
    /// The request's deadline in an invocation whose own is `invocation_ms`
    /// (`Lambda-Runtime-Deadline-Ms`): that less [`ANSWER_MARGIN`], at most
    /// [`STORE_BUDGET`] from now; one already past (emulators', tests') is none.
    pub fn before(invocation_ms: u64) -> Self {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |now| u64::try_from(now.as_millis()).unwrap_or(u64::MAX));
        let left = Duration::from_millis(invocation_ms.saturating_sub(now_ms));
        let left = if left.is_zero() { STORE_BUDGET } else { left.saturating_sub(ANSWER_MARGIN) };
        Self(tokio::time::Instant::now() + left.min(STORE_BUDGET))
    }
}

/// One operation: openapi.yaml's method, path and `operationId`; its handler.
pub struct Operation {
    pub id: &'static str,
    pub method: Method,
    pub path: &'static str,
    /// What its `security` requirement names: `read` or `write`.
    pub access: Access,
    /// The statuses the function answers it with (the edge adds its own).
    pub answers: &'static [u16],
    pub(crate) handler: fn(MethodFilter) -> MethodRouter<Arc<Plants>>,
}

/// Every operation of the API. Each needs a bearer token.
pub static OPERATIONS: [Operation; 2] = [
    Operation {
        id: "listPlants",
        method: Method::GET,
        path: "/plants",
        access: Access::Read,
        answers: &[200, 400, 401, 403, 431, 500, 503],
        handler: |method| on(method, plants::list_plants),
    },
    Operation {
        id: "createPlant",
        method: Method::POST,
        path: "/plants",
        access: Access::Write,
        answers: &[200, 400, 401, 403, 409, 413, 415, 431, 500, 503],
        handler: |method| on(method, plants::create_plant),
    },
];

/// The operations' handlers, each request within its deadline.
pub(crate) fn router(plants: Arc<Plants>) -> Router {
    let routes = OPERATIONS.iter().fold(Router::new(), |routes, op| {
        routes.route(op.path, (op.handler)(op.method.clone().try_into().expect("routable")))
    });
    routes
        .route_layer(middleware::from_fn(operation))
        .fallback(async || ApiError::NotFound)
        .method_not_allowed_fallback(async |method: Method, uri: Uri| ApiError::MethodNotAllowed {
            method: method.to_string(),
            path: uri.path().into(),
        })
        .with_state(plants)
}

/// The routed request's operation in [`OPERATIONS`] (HEAD is GET's): its
/// access for the handler's `Caller`, its answer within the request's
/// [`Deadline`] (past it, 503), and its id for the request's line.
async fn operation(mut request: Request, next: Next) -> Response {
    let path = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
    let method = if request.method() == Method::HEAD { &Method::GET } else { request.method() };
    let found = OPERATIONS.iter().find(|op| op.method == method && Some(op.path) == path);
    let Some(operation) = found else {
        return next.run(request).await; // a method its path has no operation for: 405
    };
    let Some(Deadline(deadline)) = request.extensions().get::<Deadline>().copied() else {
        return ApiError::Internal("a request without its deadline".into()).into_response();
    };
    record(|served| served.operation = Some(operation.id));
    request.extensions_mut().insert(operation.access);
    let answer = tokio::time::timeout_at(deadline, next.run(request)).await;
    let passed = || ApiError::Unavailable("the request's deadline passed".into()).into_response();
    let response = answer.unwrap_or_else(|_| passed());
    // Every test holds the answers to the table (held to openapi.yaml).
    let status = response.status().as_u16();
    debug_assert!(operation.answers.contains(&status), "{} answered {status}", operation.id);
    response
}

/// `router` answering browsers of the origins listed (the Fetch Standard),
/// never `*`: tower-http's layer names a listed origin on every answer and
/// answers a preflight before any token is read. It takes every OPTIONS for
/// a preflight, so only a listed origin's preflight of a routed path reaches
/// it; any other OPTIONS is a method without an operation (405, or 404).
pub(crate) fn with_cors(router: Router, cors: CorsLayer, origins: &[String]) -> Router {
    let origins: Vec<HeaderValue> = origins.iter().filter_map(|o| o.parse().ok()).collect();
    let answers = router.clone().layer(cors.clone());
    let preflights = router.clone().route_layer(cors);
    Router::new().fallback_service(tower::service_fn(move |request: Request| {
        let headers = request.headers();
        let listed = headers.get(ORIGIN).is_some_and(|origin| origins.contains(origin));
        let service = match request.method() == Method::OPTIONS {
            false => answers.clone(),
            true if listed && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD) => {
                preflights.clone()
            }
            true => router.clone(),
        };
        service.oneshot(request)
    }))
}

/// tower-http's CORS layer for the origins listed.
pub(crate) fn cors(origins: &[String]) -> CorsLayer {
    let origins = origins.iter().filter_map(|origin| HeaderValue::from_str(origin).ok());
    let methods: BTreeMap<&str, Method> =
        OPERATIONS.iter().map(|op| (op.method.as_str(), op.method.clone())).collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods(methods.into_values().collect::<Vec<_>>())
        .allow_headers([AUTHORIZATION, CONTENT_TYPE])
        .expose_headers([LINK, RETRY_AFTER, WWW_AUTHENTICATE])
        .max_age(Duration::from_secs(600))
}
