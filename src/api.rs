//! The edge: one invocation from the event Lambda hands over to the answer
//! in the event's format. Routing, content negotiation, status codes and
//! headers are here; the rules are the domain's, the reading and writing
//! the store's. One handler serves API Gateway REST (v1) and HTTP API (v2)
//! events, Lambda function URLs and `cargo lambda watch` alike.
//!
//! Each invocation is a `tracing` span, `invocation` (its request id and
//! trace id on every log line), and, where X-Ray is on, `## handler` with a
//! span per step (`auth`, `parse`, `store.create` or `store.list`), which
//! `crate::xray` turns into subsegments. The request's log line and metrics
//! line are written once, when the answer is ready.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lambda_http::http::header::{CONTENT_TYPE, LINK};
use lambda_http::http::{HeaderMap, HeaderValue, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Context, Request, RequestExt, Response};
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::auth::Verifier;
use crate::domain::limits::MAX_BODY_BYTES;
use crate::domain::{Cursor, Limit, NewPlant, Owner};
use crate::error::ApiError;
use crate::event::{self, InvocationResponse};
use crate::metrics::{RequestMetrics, emf_line};
use crate::response::json_response;
use crate::route::{Operation, Route};
use crate::store::{Created, Deadline, PlantStore, STORE_BUDGET};
use crate::xray;

/// What answering takes after the store gives up (the response, the log
/// lines, handing it back to Lambda), kept free of the invocation's time.
const ANSWER_MARGIN: Duration = Duration::from_millis(300);

/// The Plant Store API: the handler that production and the tests both run.
pub struct PlantApi {
    verifier: Verifier,
    store: PlantStore,
}

impl PlantApi {
    pub fn new(verifier: Verifier, store: PlantStore) -> Self {
        Self { verifier, store }
    }

    /// Makes both remote calls of a request ready (the signing keys fetched,
    /// the DynamoDB connection open) while init has full CPU: X-Ray's
    /// `## init`. Neither failure is fatal: requests retry.
    pub async fn prepare(&self) {
        let init = tracing::info_span!(target: "xray", "## init", xray.outcome = Empty);
        let work = async {
            tokio::join!(self.verifier.load_keys(), self.store.warm_up());
        };
        work.instrument(init.clone()).await;
        init.record("xray.outcome", "ok");
    }

    /// Answers one invocation: `event`, the JSON Lambda delivered, read by
    /// [`crate::event`], answered in the event's own format. Every outcome,
    /// an unreadable event included, is a response: the function itself
    /// never fails an invocation.
    pub async fn invoke(&self, event: &str, context: Context) -> InvocationResponse {
        let started = Instant::now();
        let header = context.xray_trace_id.as_deref();
        // At every log level, so that every line of the invocation names it.
        let invocation = tracing::error_span!(
            "invocation",
            requestId = context.request_id.as_str(),
            traceId = header.and_then(xray::trace_id).unwrap_or("-"),
        );
        let handler = match header {
            Some(header) => tracing::info_span!(
                target: "xray",
                parent: &invocation,
                "## handler",
                xray.trace_header = header,
                http.method = Empty,
                http.url = Empty,
                http.status = Empty,
            ),
            None => Span::none(),
        };
        let deadline = store_deadline(context.deadline);
        let (format, request) = event::read(event);
        let (method, path, route, outcome) = match &request {
            Ok(request) => {
                let route = Route::resolve(request.method(), route_path(request));
                let dispatched = self.dispatch(request, route, deadline);
                let outcome = dispatched.instrument(handler.clone());
                let outcome = outcome.instrument(invocation.clone()).await;
                handler.record("http.method", request.method().as_str());
                handler.record("http.url", request.uri().path());
                (
                    request.method().as_str(),
                    request.uri().path(),
                    route,
                    outcome,
                )
            }
            Err(error) => ("-", "-", Route::NotFound, Err(error.clone())),
        };
        let served = Served {
            method,
            path,
            route,
            started,
            function: &context.env_config.function_name,
        };
        let response = served.log(outcome, &invocation);
        handler.record("http.status", response.status().as_u16());
        format.answer(response)
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
        let owner = step(
            tracing::info_span!(target: "xray", "auth", xray.status = Empty),
            async {
                Ok(self
                    .verifier
                    .authenticate(request.headers(), route.access)
                    .await?)
            },
        )
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
        let parse = tracing::info_span!(target: "xray", "parse", xray.status = Empty);
        let new = step(parse, async {
            require_json_content_type(request.headers())?;
            let body: &[u8] = request.body().as_ref();
            if body.len() > MAX_BODY_BYTES {
                return Err(ApiError::PayloadTooLarge {
                    max_bytes: MAX_BODY_BYTES,
                });
            }
            Ok(NewPlant::from_json(body)?)
        })
        .await?;
        let store = tracing::info_span!(target: "xray", "store.create", xray.status = Empty);
        let created = step(store, async {
            Ok(self.store.create(owner, &new, deadline).await?)
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
        let parse = tracing::info_span!(target: "xray", "parse", xray.status = Empty);
        let (limit, cursor) = step(parse, async {
            Ok((limit_parameter(request)?, cursor_parameter(request)?))
        })
        .await?;
        let after = cursor.map(|cursor| cursor.after);
        let store = tracing::info_span!(target: "xray", "store.list", xray.status = Empty);
        let page = step(store, async {
            Ok(self.store.list(owner, limit, after, deadline).await?)
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

/// One step of the handler, in its span: the span says the status its
/// answer would have (200 when it succeeded).
async fn step<T>(
    span: Span,
    work: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let done = work.instrument(span.clone()).await;
    let status = done
        .as_ref()
        .map_or_else(ApiError::status, |_| StatusCode::OK);
    span.record("xray.status", status.as_u16());
    done
}

/// What a request asked, for its log line and metrics.
struct Served<'a> {
    method: &'a str,
    path: &'a str,
    route: Route,
    started: Instant,
    function: &'a str,
}

impl Served<'_> {
    /// The answer to `outcome`, written to the log as one JSON line (with
    /// the refusal's message, and the cause of a 5xx) and one EMF metrics
    /// line, in the `invocation` span: the one place a request is logged.
    fn log(&self, outcome: Result<Response<Body>, ApiError>, invocation: &Span) -> Response<Body> {
        let _in_it = invocation.enter();
        let latency_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let (response, message, at_bound) = match outcome {
            Ok(response) => (response, None, false),
            Err(error) => {
                let refusal = error.refusal();
                let status = refusal.status.as_u16();
                if let Some(detail) = error.log_detail() {
                    tracing::error!(status, detail);
                }
                let message = Some(refusal.message.clone());
                let at_bound = matches!(error, ApiError::TooManyPlants { .. });
                (refusal.into_response(), message, at_bound)
            }
        };
        let status = response.status().as_u16();
        tracing::info!(
            method = self.method,
            path = self.path,
            status,
            latency_ms,
            error = message.as_deref(),
            "request"
        );
        crate::log::write_line(&emf_line(&RequestMetrics {
            function: self.function,
            route: self.route.metric_name(),
            status,
            latency_ms,
            at_bound,
        }));
        response
    }
}

/// The store's deadline for an invocation whose own ends at `deadline_ms`
/// (milliseconds since the Unix epoch, `Lambda-Runtime-Deadline-Ms`): that
/// less [`ANSWER_MARGIN`], and at most [`STORE_BUDGET`]. A deadline already
/// past when the request starts is none: Lambda never hands out such an
/// invocation, while emulators send a constant (`cargo lambda watch`:
/// 600000) and tests 0.
fn store_deadline(deadline_ms: u64) -> Deadline {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |now| u64::try_from(now.as_millis()).unwrap_or(u64::MAX));
    match deadline_ms.checked_sub(now_ms) {
        Some(left) if left > 0 => {
            Deadline::within(Duration::from_millis(left).saturating_sub(ANSWER_MARGIN))
        }
        _ => Deadline::within(STORE_BUDGET),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_deadline_is_the_invocations_less_the_margin_and_at_most_the_budget() {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let near = |left: Duration, wanted: Duration| {
            let gap = left.abs_diff(wanted);
            assert!(
                gap < Duration::from_millis(50),
                "{left:?} against {wanted:?}"
            );
        };
        // No deadline, or one already past (an emulator's): the budget.
        for deadline_ms in [0, 600_000, now_ms - 1] {
            near(store_deadline(deadline_ms).left(), STORE_BUDGET);
        }
        // Lambda's: what is left, less the margin, within the budget.
        near(store_deadline(now_ms + 10_000).left(), STORE_BUDGET);
        near(
            store_deadline(now_ms + 1_500).left(),
            Duration::from_millis(1_500) - ANSWER_MARGIN,
        );
        near(store_deadline(now_ms + 100).left(), Duration::ZERO);
    }
}
