//! The API's operations in one table, each held to openapi.yaml's by
//! tests/api/interface.rs; axum's router built from it (404, 405 with
//! `Allow`), and tower-http's CORS layer for the origins listed.

use std::pin::Pin;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::{MethodFilter, on};
use lambda_http::http::header::{
    ACCESS_CONTROL_REQUEST_METHOD, AUTHORIZATION, CONTENT_TYPE, LINK, ORIGIN, RETRY_AFTER,
    WWW_AUTHENTICATE,
};
use lambda_http::http::{HeaderValue, Method};
use tower::ServiceExt;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::auth::Access;
use crate::error::ApiError;
use crate::plants::{self, Call};
use crate::store::PlantStore;

/// One operation: openapi.yaml's method, path and `operationId`.
pub struct Operation {
    pub id: &'static str,
    pub method: Method,
    pub path: &'static str,
    /// What its `security` requirement names: `read` or `write`.
    pub access: Access,
    /// The statuses the function answers it with (the edge adds its own).
    pub answers: &'static [u16],
    /// The operation's answer, from the store, for the call's caller.
    pub(crate) handler: Handler,
}

pub(crate) type Handler = for<'a> fn(&'a PlantStore, Call<'a>, Request) -> Answer<'a>;
pub(crate) type Answer<'a> = Pin<Box<dyn Future<Output = Result<Response, ApiError>> + Send + 'a>>;

/// Every operation of the API. Each needs a bearer token.
pub static OPERATIONS: [Operation; 2] = [
    Operation {
        id: "listPlants",
        method: Method::GET,
        path: "/plants",
        access: Access::Read,
        answers: &[200, 400, 401, 403, 431, 500, 503],
        handler: |store, call, request| Box::pin(plants::list_plants(store, call, request)),
    },
    Operation {
        id: "createPlant",
        method: Method::POST,
        path: "/plants",
        access: Access::Write,
        answers: &[200, 400, 401, 403, 409, 413, 415, 431, 500, 503],
        handler: |store, call, request| Box::pin(plants::create_plant(store, call, request)),
    },
];

/// The router of [`OPERATIONS`], each request of one answered by `serve`.
pub(crate) fn router<S, F>(serve: S) -> Router
where
    S: Fn(&'static Operation, Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let routes = OPERATIONS.iter().fold(Router::new(), |router, operation| {
        let filter =
            MethodFilter::try_from(operation.method.clone()).expect("a method axum routes");
        let serve = serve.clone();
        router.route(operation.path, on(filter, move |request: Request| serve(operation, request)))
    });
    let not_allowed = |request: Request| async move {
        let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
        ApiError::MethodNotAllowed { method, path }
    };
    routes.fallback(async || ApiError::NotFound).method_not_allowed_fallback(not_allowed)
}

/// `router` answering browsers of the origins listed (the Fetch Standard),
/// never `*`: tower-http's layer names a listed origin on every answer, and
/// answers a preflight before any token is read. It takes every OPTIONS
/// for a preflight, so only a listed origin's (with
/// `Access-Control-Request-Method`) of a path an operation has reaches it as
/// one; any other OPTIONS is a method without an operation (405, or 404).
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
    let mut methods: Vec<Method> =
        OPERATIONS.iter().map(|operation| operation.method.clone()).collect();
    methods.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    methods.dedup();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods(methods)
        .allow_headers([AUTHORIZATION, CONTENT_TYPE])
        .expose_headers([LINK, RETRY_AFTER, WWW_AUTHENTICATE])
        .max_age(Duration::from_secs(600))
}
