//! The operations' handlers: the request read into domain types, the store
//! called for the caller the token names (`api.rs` checked it), the answer.

use std::borrow::Cow;

use axum::Json;
use axum::body::to_bytes;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use lambda_http::http::header::{CONTENT_TYPE, LINK};
use lambda_http::http::{HeaderMap, HeaderValue};

use crate::domain::limits::MAX_BODY_BYTES;
use crate::domain::{Cursor, Limit, NewPlant, Owner};
use crate::error::ApiError;
use crate::event::ClientPath;
use crate::metrics::{Steps, timed};
use crate::store::{Created, Deadline, PlantStore, StoredPlant};

/// One call of an operation: the caller the token names, when the store's
/// work must end, and the times of its steps.
pub(crate) struct Call<'a> {
    pub(crate) owner: Owner,
    pub(crate) deadline: Deadline,
    pub(crate) steps: &'a mut Steps,
}

pub(crate) async fn create_plant(
    store: &PlantStore,
    call: Call<'_>,
    request: Request,
) -> Result<Response, ApiError> {
    require_json_content_type(request.headers())?;
    let body = to_bytes(request.into_body(), usize::MAX).await;
    let body = body.map_err(|error| ApiError::Internal(error.to_string()))?;
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::PayloadTooLarge);
    }
    let new = NewPlant::from_json(&body)?;
    let created = store.create(&call.owner, &new, call.deadline);
    match timed(&mut call.steps.store, created).await? {
        Created::New | Created::Retry => {}
        Created::Conflict => return Err(ApiError::Conflict(new.id)),
        Created::LimitReached(max) => return Err(ApiError::TooManyPlants(max)),
    }
    Ok(Json(StoredPlant::from(&new.plant)).into_response())
}

pub(crate) async fn list_plants(
    store: &PlantStore,
    call: Call<'_>,
    request: Request,
) -> Result<Response, ApiError> {
    let (limit, cursor) = (limit_parameter(&request)?, cursor_parameter(&request)?);
    let after = cursor.map(|cursor| cursor.after);
    let listed = store.list(&call.owner, limit, after, call.deadline);
    let page = timed(&mut call.steps.store, listed).await?;
    let mut response = Json(&page.plants).into_response();
    if let Some(after) = page.next_after {
        // RFC 8288, relative to the path as the caller saw it, with one
        // leading slash: `//host/...` would name another host.
        let next = format!(
            "</{}?limit={}&cursor={}>; rel=\"next\"",
            ClientPath::of(&request).trim_start_matches('/'),
            limit.get(),
            Cursor::after(after).encode()
        );
        if let Ok(value) = HeaderValue::from_str(&next) {
            response.headers_mut().insert(LINK, value);
        }
    }
    Ok(response)
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
