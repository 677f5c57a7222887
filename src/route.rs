//! The API's routes, in one table: dispatch, the `Allow` header, the 404 and
//! 405 answers and the metrics' `Route` dimension all read it, and
//! `openapi.yaml` must hold the same operations (tests/template_test.py).
//! A route is one row, with one operation: a path segment `{name}` matches
//! any one segment. API Gateway hands every path to the function
//! (`template.yaml`), so a route needs no other file.

use lambda_http::http::Method;

use crate::auth::Access;

/// What a request asks the API to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    ListPlants,
    CreatePlant,
}

/// One row of the table.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RouteSpec {
    pub method: Method,
    pub path: &'static str,
    /// `METHOD path`: the metrics' `Route` dimension.
    pub key: &'static str,
    pub operation: Operation,
    /// The scope kind a token must grant, when scopes are configured.
    pub access: Access,
}

/// Every route of the API. Each needs a bearer token.
pub(crate) const ROUTES: &[RouteSpec] = &[
    RouteSpec {
        method: Method::GET,
        path: "/plants",
        key: "GET /plants",
        operation: Operation::ListPlants,
        access: Access::Read,
    },
    RouteSpec {
        method: Method::POST,
        path: "/plants",
        key: "POST /plants",
        operation: Operation::CreatePlant,
        access: Access::Write,
    },
];

/// A request's route, decided once from its method and path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Found(&'static RouteSpec),
    /// The path exists, but not with this method.
    MethodNotAllowed {
        path: &'static str,
    },
    NotFound,
}

/// Whether `path` has the segments of `pattern`, `{name}` matching any one.
fn matches(pattern: &str, path: &str) -> bool {
    let (mut pattern, mut path) = (pattern.split('/'), path.split('/'));
    loop {
        match (pattern.next(), path.next()) {
            (None, None) => return true,
            (Some(wanted), Some(segment)) if wanted == segment => {}
            (Some(wanted), Some(segment)) if wanted.starts_with('{') && !segment.is_empty() => {}
            _ => return false,
        }
    }
}

impl Route {
    /// `path` is the route path (`crate::event::route_path`).
    pub(crate) fn resolve(method: &Method, path: &str) -> Self {
        let mut on_path = ROUTES.iter().filter(|route| matches(route.path, path));
        let Some(first) = on_path.clone().next() else {
            return Self::NotFound;
        };
        match on_path.find(|route| route.method == *method) {
            Some(route) => Self::Found(route),
            None => Self::MethodNotAllowed { path: first.path },
        }
    }

    /// The methods a route's path allows, in table order.
    pub(crate) fn allowed_methods(path: &str) -> Vec<&'static Method> {
        let on_path = ROUTES.iter().filter(|route| route.path == path);
        on_path.map(|route| &route.method).collect()
    }

    /// The metrics' `Route` dimension: `other` for every request that
    /// matches no route, so that callers cannot create dimension values.
    pub(crate) fn metric_name(self) -> &'static str {
        match self {
            Self::Found(route) => route.key,
            Self::MethodNotAllowed { .. } | Self::NotFound => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_segment_matches_any_one_segment() {
        for path in ["/plants/7", "/plants/{id}", "/plants/a%20b"] {
            assert!(matches("/plants/{id}", path), "{path}");
        }
        for path in ["/plants", "/plants/", "/plants/7/x", "/other/7"] {
            assert!(!matches("/plants/{id}", path), "{path}");
        }
    }
}
