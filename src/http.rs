//! The HTTP edge: routing, content negotiation, status codes and headers.
//! One handler serves API Gateway REST (v1) and HTTP API (v2) events, Lambda
//! function URLs and `cargo lambda watch` alike.

use std::time::Instant;

use lambda_http::http::header::{CONTENT_TYPE, LINK};
use lambda_http::http::{HeaderMap, HeaderValue, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Context, LambdaEvent, Request, RequestExt, Response};
use serde_json::Value;

use crate::auth::Verifier;
use crate::domain::{Cursor, Limit, NewPlant, Owner};
use crate::error::ApiError;
use crate::event::{self, Answer};
use crate::metrics;
use crate::response::json_response;
use crate::route::{Operation, Route};
use crate::store::{Created, Deadline, PlantStore};

/// Request bodies larger than this are refused with 413.
const MAX_BODY_BYTES: usize = 16 * 1024;

/// The Plant Store API: the handler that production and the tests both run.
pub struct PlantApi {
    verifier: Verifier,
    store: PlantStore,
}

impl PlantApi {
    pub fn new(verifier: Verifier, store: PlantStore) -> Self {
        Self { verifier, store }
    }

    /// Answers one invocation: the event Lambda delivered, read by
    /// [`crate::event`], answered in the event's own format. Every outcome,
    /// an unreadable event included, is a response: the function itself
    /// never fails an invocation.
    pub async fn invoke(&self, event: LambdaEvent<Value>) -> Answer {
        let LambdaEvent { payload, context } = event;
        let (format, request) = event::read(payload);
        let response = match request {
            Ok(request) => self.handle(request.with_lambda_context(context)).await,
            Err(error) => {
                let started = Instant::now();
                let response = error.into_response();
                log_request(&context, "-", "-", Route::NotFound, &response, started);
                response
            }
        };
        format.answer(response)
    }

    /// Answers one request.
    pub async fn handle(&self, request: Request) -> Response<Body> {
        let started = Instant::now();
        // One deadline for all the store work of this request.
        let deadline = Deadline::for_invocation(
            request
                .lambda_context_ref()
                .map_or(0, |context| context.deadline),
        );
        let route = Route::resolve(request.method(), route_path(&request));
        let response = match self.dispatch(&request, route, deadline).await {
            Ok(response) => response,
            Err(error) => {
                if let Some(detail) = error.log_detail() {
                    let request_id = request
                        .lambda_context_ref()
                        .map_or("-", |context| context.request_id.as_str());
                    tracing::error!(request_id, status = error.status().as_u16(), detail);
                }
                error.into_response()
            }
        };
        // A request built without an invocation (a test's) logs an empty one.
        let no_context;
        let context = match request.lambda_context_ref() {
            Some(context) => context,
            None => {
                no_context = Context::default();
                &no_context
            }
        };
        let method = request.method().as_str();
        log_request(
            context,
            method,
            request.uri().path(),
            route,
            &response,
            started,
        );
        response
    }

    /// Every route needs a token: it is verified here, once, with the
    /// route's scope (before any body is read), and each operation receives
    /// the caller it names.
    async fn dispatch(
        &self,
        request: &Request,
        route: Route,
        deadline: Deadline,
    ) -> Result<Response<Body>, ApiError> {
        let route = match route {
            Route::Found(route) => route,
            Route::MethodNotAllowed { path } => {
                return Err(ApiError::MethodNotAllowed {
                    method: request.method().to_string(),
                    path,
                    allowed: Route::allowed_methods(path),
                });
            }
            Route::NotFound => return Err(ApiError::NotFound),
        };
        let owner = self
            .verifier
            .authenticate(request.headers(), route.access)
            .await?;
        match route.operation {
            Operation::ListPlants => self.list_plants(&owner, request, deadline).await,
            Operation::CreatePlant => self.create_plant(&owner, request, deadline).await,
        }
    }

    async fn create_plant(
        &self,
        owner: &Owner,
        request: &Request,
        deadline: Deadline,
    ) -> Result<Response<Body>, ApiError> {
        require_json_content_type(request.headers())?;
        let body: &[u8] = request.body().as_ref();
        if body.len() > MAX_BODY_BYTES {
            return Err(ApiError::PayloadTooLarge {
                max_bytes: MAX_BODY_BYTES,
            });
        }
        let new = NewPlant::from_json(body)?;
        match self.store.create(owner, &new, deadline).await? {
            Created::New => {}
            Created::AlreadyStored(stored) => new.check_retry_of(&stored)?,
            Created::LimitReached => {
                return Err(ApiError::TooManyPlants {
                    max: self.store.max_plants_per_owner(),
                });
            }
        }
        Ok(json_response(StatusCode::OK, &new.plant)?)
    }

    async fn list_plants(
        &self,
        owner: &Owner,
        request: &Request,
        deadline: Deadline,
    ) -> Result<Response<Body>, ApiError> {
        let limit = limit_parameter(request)?;
        let cursor = cursor_parameter(request)?;
        let page = self
            .store
            .list(owner, limit, cursor.map(|cursor| cursor.after), deadline)
            .await?;
        let mut response = json_response(StatusCode::OK, &page.plants)?;
        if let Some(after) = page.next_after {
            // RFC 8288, relative to the path as the caller saw it.
            let next = format!(
                "<{}?limit={}&cursor={}>; rel=\"next\"",
                request.uri().path(),
                limit.get(),
                Cursor::after(after).encode()
            );
            if let Ok(value) = HeaderValue::from_str(&next) {
                response.headers_mut().insert(LINK, value);
            }
        }
        Ok(response)
    }
}

/// One JSON log line and one EMF metrics line per request.
fn log_request(
    context: &Context,
    method: &str,
    path: &str,
    route: Route,
    response: &Response<Body>,
    started: Instant,
) {
    let status = response.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let request_id = context.request_id.as_str();
    tracing::info!(request_id, method, path, status, latency_ms, "request");
    crate::log::write_line(&metrics::emf_line(
        &context.env_config.function_name,
        route.metric_name(),
        status,
        latency_ms,
    ));
}

/// The path the route is matched on. Where API Gateway matched a route of
/// its own, that route's path: an HTTP API's `routeKey` (`GET /plants`),
/// a REST API's resource path; so that a custom domain's API mapping
/// (`/v1`, kept in the event's path) changes nothing. Otherwise (the
/// `$default` route, a function URL) the event's own path, without the API
/// Gateway stage prefix (present in REST and named-stage HTTP API events) and
/// without a trailing slash.
fn route_path(request: &Request) -> &str {
    let matched = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context
            .route_key
            .as_deref()
            .and_then(|key| key.split_once(' '))
            .map(|(_, path)| path),
        Some(RequestContext::ApiGatewayV1(context)) => context.resource_path.as_deref(),
        _ => None,
    };
    if let Some(path) = matched.filter(|path| !path.contains('{')) {
        return path;
    }
    let raw = match request.raw_http_path() {
        "" => request.uri().path(),
        raw => raw,
    };
    let unstaged = stage(request)
        .and_then(|stage| raw.strip_prefix('/')?.strip_prefix(stage))
        .filter(|rest| rest.len() > 1 && rest.starts_with('/'))
        .unwrap_or(raw);
    match unstaged.strip_suffix('/') {
        Some(trimmed) if !trimmed.is_empty() => trimmed,
        _ => unstaged,
    }
}

fn stage(request: &Request) -> Option<&str> {
    match request.request_context_ref()? {
        RequestContext::ApiGatewayV1(context) => context.stage.as_deref(),
        RequestContext::ApiGatewayV2(context) => context.stage.as_deref(),
        _ => None,
    }
}

/// `application/json`, with any parameters; a missing Content-Type is read as JSON.
fn require_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Ok(());
    };
    let media_type = value
        .to_str()
        .ok()
        .and_then(|value| value.split(';').next());
    match media_type.map(str::trim) {
        Some(media_type) if media_type.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ApiError::UnsupportedMediaType),
    }
}

/// The one value of a query parameter, if given; repeating it is an error.
fn single_parameter<'r>(request: &'r Request, name: &str) -> Result<Option<&'r str>, ApiError> {
    let query = request.query_string_parameters_ref();
    match query.and_then(|query| query.all(name)).as_deref() {
        None => Ok(None),
        Some([value]) => Ok(Some(value)),
        Some(_) => Err(ApiError::InvalidQuery(format!(
            "The query parameter `{name}` must be given at most once."
        ))),
    }
}

fn limit_parameter(request: &Request) -> Result<Limit, ApiError> {
    match single_parameter(request, "limit")? {
        None => Ok(Limit::DEFAULT),
        Some(value) => Limit::parse(value).ok_or_else(|| {
            ApiError::InvalidQuery(format!(
                "The query parameter `limit` must be an integer from 1 to {}.",
                Limit::MAX
            ))
        }),
    }
}

fn cursor_parameter(request: &Request) -> Result<Option<Cursor>, ApiError> {
    single_parameter(request, "cursor")?
        .map(|value| {
            Cursor::parse(value).ok_or_else(|| {
                ApiError::InvalidQuery(
                    "The query parameter `cursor` is not one this API issued; \
                     use the Link header of the previous page."
                        .into(),
                )
            })
        })
        .transpose()
}
