//! The edge: one invocation from the event Lambda hands over to the answer
//! in the event's format: the route (`route.rs`) and the token checked,
//! content type, size and parameters read, the operation called, its
//! outcome answered (`error.rs` maps each error to its status). The rules
//! are the domain's, the reading and writing the store's. Each request
//! writes one log line and one metrics line.

use std::borrow::Cow;
use std::time::Instant;

use lambda_http::http::header::{CONTENT_TYPE, LINK};
use lambda_http::http::{HeaderMap, HeaderValue, StatusCode};
use lambda_http::{Body, Context, Request, Response};
use tracing::{Instrument, Span};

use crate::auth::Verifier;
use crate::cors::Cors;
use crate::domain::limits::MAX_BODY_BYTES;
use crate::domain::{Cursor, Limit, NewPlant, Owner};
use crate::error::ApiError;
use crate::event::{self, InvocationResponse, RoutePath};
use crate::metrics::RequestLine;
use crate::response::json_response;
use crate::route::{Operation, Route};
use crate::store::{Created, Deadline, PlantStore, StoredPlant};
use crate::xray;

/// The Plant Store API: the handler that production and the tests both run.
pub struct PlantApi {
    verifier: Verifier,
    store: PlantStore,
    cors: Cors,
}

/// How long each step of a request took, in milliseconds, for its log line.
#[derive(Default)]
struct Steps {
    auth: Option<f64>,
    parse: Option<f64>,
    store: Option<f64>,
}

/// `work`, its time kept in `step`.
async fn timed<T>(step: &mut Option<f64>, work: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let done = work.await;
    *step = Some(started.elapsed().as_secs_f64() * 1000.0);
    done
}

impl PlantApi {
    pub fn new(verifier: Verifier, store: PlantStore) -> Self {
        Self { verifier, store, cors: Cors::default() }
    }

    /// Answers browsers of these origins (`crate::cors`).
    pub fn with_cors(self, cors: Cors) -> Self {
        Self { cors, ..self }
    }

    /// Makes both remote calls of a request ready (the signing keys fetched,
    /// the DynamoDB connection open) while init has full CPU. Neither
    /// failure is fatal: requests try again.
    pub async fn prepare(&self) {
        tokio::join!(self.verifier.load_keys(), self.store.warm_up());
    }

    /// Answers one invocation: `event`, the JSON Lambda delivered, read by
    /// [`crate::event`], answered in the event's own format. Every outcome,
    /// an unreadable event included, is a response: the function itself
    /// never fails an invocation.
    pub async fn invoke(&self, event: &str, context: Context) -> InvocationResponse {
        let started = Instant::now();
        let trace = context.xray_trace_id.as_deref().and_then(xray::parse);
        // At every log level, so that every line of the invocation names it.
        let invocation = tracing::error_span!(
            "invocation",
            requestId = context.request_id.as_str(),
            traceId = trace.map_or("-", |(root, _, _)| root),
        );
        let (format, request) = event::read(event);
        let mut steps = Steps::default();
        let (route, outcome) = match &request {
            Ok(request) => {
                let path = request.extensions().get::<RoutePath>().map_or("", |path| &path.0);
                let route = Route::resolve(request.method(), path);
                let deadline = Deadline::before(context.deadline);
                let work = self.dispatch(request, route, deadline, &mut steps);
                let outcome = xray::within(trace, work).instrument(invocation.clone()).await;
                (route, outcome)
            }
            Err(error) => (Route::NotFound, Err(error.clone())),
        };
        let request = request.as_ref().ok();
        let mut response = Answered {
            method: request.map_or("-", |request| request.method().as_str()),
            path: request.map_or("-", |request| request.uri().path()),
            route,
            started,
            steps,
            context: &context,
            trace_id: trace.map_or("-", |(root, _, _)| root),
        }
        .write_line(outcome, &invocation);
        if let Some(request) = request {
            self.cors.answer(request, &mut response);
        }
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
        steps: &mut Steps,
    ) -> Result<Response<Body>, ApiError> {
        let route = match route {
            Route::Found(route) => route,
            Route::MethodNotAllowed { path } => {
                if let Some(preflight) = self.cors.preflight(request, path) {
                    return Ok(preflight);
                }
                return Err(ApiError::MethodNotAllowed {
                    method: request.method().to_string(),
                    path,
                    allowed: Route::allowed_methods(path),
                });
            }
            Route::NotFound => return Err(ApiError::NotFound),
        };
        let authenticated = self.verifier.authenticate(request.headers(), route.access);
        let owner = timed(&mut steps.auth, authenticated).await?;
        match route.operation {
            Operation::ListPlants => self.list_plants(&owner, request, deadline, steps).await,
            Operation::CreatePlant => self.create_plant(&owner, request, deadline, steps).await,
        }
    }

    async fn create_plant(
        &self,
        owner: &Owner,
        request: &Request,
        deadline: Deadline,
        steps: &mut Steps,
    ) -> Result<Response<Body>, ApiError> {
        let parsed = async {
            require_json_content_type(request.headers())?;
            let body: &[u8] = request.body().as_ref();
            if body.len() > MAX_BODY_BYTES {
                return Err(ApiError::PayloadTooLarge);
            }
            Ok(NewPlant::from_json(body)?)
        };
        let new = timed(&mut steps.parse, parsed).await?;
        let created = timed(&mut steps.store, self.store.create(owner, &new, deadline));
        match created.await? {
            Created::New | Created::Retry => {}
            Created::Conflict => return Err(ApiError::Conflict(new.id)),
            Created::LimitReached(max) => return Err(ApiError::TooManyPlants(max)),
        }
        Ok(json_response(StatusCode::OK, &StoredPlant::from(&new.plant)))
    }

    async fn list_plants(
        &self,
        owner: &Owner,
        request: &Request,
        deadline: Deadline,
        steps: &mut Steps,
    ) -> Result<Response<Body>, ApiError> {
        let parsed =
            async { Ok::<_, ApiError>((limit_parameter(request)?, cursor_parameter(request)?)) };
        let (limit, cursor) = timed(&mut steps.parse, parsed).await?;
        let after = cursor.map(|cursor| cursor.after);
        let listed = self.store.list(owner, limit, after, deadline);
        let page = timed(&mut steps.store, listed).await?;
        let mut response = json_response(StatusCode::OK, &page.plants);
        if let Some(after) = page.next_after {
            // RFC 8288, relative to the path as the caller saw it, with one
            // leading slash: `//host/...` would name another host.
            let next = format!(
                "</{}?limit={}&cursor={}>; rel=\"next\"",
                request.uri().path().trim_start_matches('/'),
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

/// What a request asked and how long its steps took, for its line.
struct Answered<'a> {
    method: &'a str,
    path: &'a str,
    route: Route,
    started: Instant,
    steps: Steps,
    context: &'a Context,
    trace_id: &'a str,
}

impl Answered<'_> {
    /// The answer to `outcome` (an error's, from `error.rs`), after writing
    /// the request's one line (`crate::metrics`: with the refusal's message
    /// and reason), and a 5xx's cause on an ERROR line in the `invocation`
    /// span.
    fn write_line(
        &self,
        outcome: Result<Response<Body>, ApiError>,
        invocation: &Span,
    ) -> Response<Body> {
        let latency_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let (response, message, reason, at_bound) = match outcome {
            Ok(response) => (response, None, None, false),
            Err(error) => {
                let (status, mut reason) = (error.status_and_header().0, error.log_detail());
                if let Some(detail) = reason.take_if(|_| status.is_server_error()) {
                    invocation.in_scope(|| tracing::error!(status = status.as_u16(), detail));
                }
                let message = Some(error.to_string());
                let at_bound = matches!(error, ApiError::TooManyPlants(_));
                (error.into_response(), message, reason, at_bound)
            }
        };
        let Steps { auth, parse, store } = self.steps;
        let line = RequestLine {
            function: &self.context.env_config.function_name,
            route: self.route.metric_name(),
            method: self.method,
            path: self.path,
            status: response.status().as_u16(),
            latency_ms,
            steps: [auth, parse, store],
            error: message.as_deref(),
            reason: reason.as_deref(),
            request_id: &self.context.request_id,
            trace_id: self.trace_id,
            at_bound,
        };
        crate::log::write_line(&line.to_json());
        response
    }
}

/// `application/json`, with any parameters; a missing Content-Type is read as JSON.
fn require_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Ok(());
    };
    let media_type = value.to_str().ok().and_then(|value| value.split(';').next());
    match media_type.map(str::trim) {
        Some(media_type) if media_type.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ApiError::UnsupportedMediaType),
    }
}

/// The one value of a query parameter, if given; repeating it is an error.
fn single_parameter<'r>(
    request: &'r Request,
    name: &'static str,
) -> Result<Option<Cow<'r, str>>, ApiError> {
    let query = form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes());
    let mut values = query.filter(|(parameter, _)| parameter == name).map(|(_, value)| value);
    match (values.next(), values.next()) {
        (value, None) => Ok(value),
        (Some(_), Some(_)) | (None, Some(_)) => Err(ApiError::RepeatedParameter(name)),
    }
}

fn limit_parameter(request: &Request) -> Result<Limit, ApiError> {
    match single_parameter(request, "limit")? {
        None => Ok(Limit::DEFAULT),
        Some(value) => Limit::parse(&value).ok_or(ApiError::InvalidLimit),
    }
}

fn cursor_parameter(request: &Request) -> Result<Option<Cursor>, ApiError> {
    let cursor = single_parameter(request, "cursor")?;
    cursor.map(|value| Cursor::parse(&value).ok_or(ApiError::InvalidCursor)).transpose()
}
