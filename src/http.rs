//! The HTTP edge: routing, content negotiation, status codes and headers.
//! One handler serves API Gateway REST (v1) and HTTP API (v2) events, Lambda
//! function URLs and `cargo lambda watch` alike.

use std::time::Instant;

use lambda_http::http::header::{CONTENT_TYPE, LINK};
use lambda_http::http::{HeaderMap, HeaderValue, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Context, LambdaEvent, Request, RequestExt, Response};
use serde_json::Value;
use tracing::Instrument;

use crate::auth::Verifier;
use crate::domain::{Cursor, Limit, NewPlant, Owner};
use crate::error::ApiError;
use crate::event::{self, Answer};
use crate::metrics;
use crate::response::json_response;
use crate::route::{Operation, Route};
use crate::store::{Created, Deadline, PlantStore};
use crate::trace::{self, Tracer};

/// Request bodies larger than this are refused with 413.
const MAX_BODY_BYTES: usize = 16 * 1024;

/// The Plant Store API: the handler that production and the tests both run.
pub struct PlantApi {
    verifier: Verifier,
    store: PlantStore,
    tracer: Tracer,
}

impl PlantApi {
    /// The API, tracing nothing.
    pub fn new(verifier: Verifier, store: PlantStore) -> Self {
        Self {
            verifier,
            store,
            tracer: Tracer::default(),
        }
    }

    /// The API, sending each invocation's X-Ray subsegments through `tracer`.
    pub fn traced_by(self, tracer: Tracer) -> Self {
        Self { tracer, ..self }
    }

    /// Answers one invocation: the event Lambda delivered, read by
    /// [`crate::event`], answered in the event's own format. Every outcome,
    /// an unreadable event included, is a response: the function itself
    /// never fails an invocation. Traced under the invocation's own trace
    /// header, and every log line of it carries its request id and trace id.
    pub async fn invoke(&self, event: LambdaEvent<Value>) -> Answer {
        let LambdaEvent { payload, context } = event;
        let trace = self.tracer.invocation(context.xray_trace_id.as_deref());
        let log_span = tracing::info_span!(
            "invocation",
            requestId = context.request_id.as_str(),
            traceId = trace.trace_id().unwrap_or("-"),
        );
        let (format, request) = event::read(payload);
        // For the trace; clones of shared bytes, not copies.
        let asked = request
            .as_ref()
            .map(|request| (request.method().clone(), request.uri().clone()))
            .ok();
        let answer = async {
            match request {
                Ok(request) => self.handle(request.with_lambda_context(context)).await,
                Err(error) => {
                    let asked = Asked {
                        context: &context,
                        method: "-",
                        path: "-",
                        route: Route::NotFound,
                        started: Instant::now(),
                    };
                    log_request(&asked, error.status().as_u16(), Some(&error));
                    error.into_response()
                }
            }
        };
        let response = trace.run(answer).instrument(log_span).await;
        let asked = asked
            .as_ref()
            .map(|(method, uri)| (method.as_str(), uri.path()));
        trace.finish(asked, response.status().as_u16());
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
        let answered = self.dispatch(&request, route, deadline).await;
        // A request built without an invocation (a test's) logs an empty one.
        let no_context;
        let context = match request.lambda_context_ref() {
            Some(context) => context,
            None => {
                no_context = Context::default();
                &no_context
            }
        };
        let asked = Asked {
            context,
            method: request.method().as_str(),
            path: request.uri().path(),
            route,
            started,
        };
        match answered {
            Ok(response) => {
                log_request(&asked, response.status().as_u16(), None);
                response
            }
            Err(error) => {
                if let Some(detail) = error.log_detail() {
                    tracing::error!(status = error.status().as_u16(), detail);
                }
                log_request(&asked, error.status().as_u16(), Some(&error));
                error.into_response()
            }
        }
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
        let owner = trace::in_subsegment("auth", async {
            let owner = self.verifier.authenticate(request.headers(), route.access);
            Ok::<_, ApiError>(owner.await?)
        })
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
        let new = trace::record("parse", || {
            require_json_content_type(request.headers())?;
            let body: &[u8] = request.body().as_ref();
            if body.len() > MAX_BODY_BYTES {
                return Err(ApiError::PayloadTooLarge {
                    max_bytes: MAX_BODY_BYTES,
                });
            }
            Ok(NewPlant::from_json(body)?)
        })?;
        let created = trace::in_subsegment("store.create", async {
            Ok::<_, ApiError>(self.store.create(owner, &new, deadline).await?)
        });
        match created.await? {
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
        let (limit, cursor) = trace::record("parse", || {
            Ok::<_, ApiError>((limit_parameter(request)?, cursor_parameter(request)?))
        })?;
        let after = cursor.map(|cursor| cursor.after);
        let page = trace::in_subsegment("store.list", async {
            Ok::<_, ApiError>(self.store.list(owner, limit, after, deadline).await?)
        })
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

/// What a request asked, for its log line.
struct Asked<'a> {
    context: &'a Context,
    method: &'a str,
    path: &'a str,
    route: Route,
    started: Instant,
}

/// One JSON log line and one EMF metrics line per request, answered with
/// `status`, and `error`'s message when it was refused.
fn log_request(asked: &Asked, status: u16, error: Option<&ApiError>) {
    let latency_ms = asked.started.elapsed().as_secs_f64() * 1000.0;
    let message = error.map(ApiError::message);
    tracing::info!(
        method = asked.method,
        path = asked.path,
        status,
        latency_ms,
        error = message.as_deref(),
        "request"
    );
    crate::log::write_line(&metrics::emf_line(&metrics::Answered {
        function: &asked.context.env_config.function_name,
        route: asked.route.metric_name(),
        status,
        latency_ms,
        at_bound: matches!(error, Some(ApiError::TooManyPlants { .. })),
    }));
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
