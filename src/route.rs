//! The API's routes, in one table: dispatch, the `Allow` header, the 404 and
//! 405 answers and the metrics' `Route` dimension all read it.

use lambda_http::http::Method;

use crate::auth::Access;

/// What a request asks the API to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    ListPlants,
    CreatePlant,
}

/// One row of the table.
#[derive(Debug, PartialEq, Eq)]
pub struct RouteSpec {
    pub method: Method,
    pub path: &'static str,
    /// The route key as API Gateway writes it (and `template.yaml` declares
    /// it): the metrics' `Route` dimension.
    pub key: &'static str,
    pub operation: Operation,
    /// The scope kind a token must grant, when scopes are configured.
    pub access: Access,
}

/// Every route of the API. Each needs a bearer token.
pub const ROUTES: [RouteSpec; 2] = [
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

/// The metrics' `Route` value of every request that matches no route, so
/// that callers cannot create dimension values at will.
const OTHER: &str = "other";

/// A request's route, decided once from its method and path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Found(&'static RouteSpec),
    /// The path exists, but not with this method.
    MethodNotAllowed {
        path: &'static str,
    },
    NotFound,
}

impl Route {
    /// `path` is the route path: without a stage prefix or trailing slash.
    pub fn resolve(method: &Method, path: &str) -> Self {
        let mut on_path = ROUTES.iter().filter(|route| route.path == path).peekable();
        let Some(first) = on_path.peek() else {
            return Self::NotFound;
        };
        let path = first.path;
        match on_path.find(|route| route.method == *method) {
            Some(route) => Self::Found(route),
            None => Self::MethodNotAllowed { path },
        }
    }

    /// The methods a path allows, in table order.
    pub fn allowed_methods(path: &str) -> Vec<&'static Method> {
        ROUTES
            .iter()
            .filter(|route| route.path == path)
            .map(|route| &route.method)
            .collect()
    }

    /// The metrics' `Route` dimension.
    pub fn metric_name(self) -> &'static str {
        match self {
            Self::Found(route) => route.key,
            Self::MethodNotAllowed { .. } | Self::NotFound => OTHER,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_key_is_its_method_and_path() {
        for route in &ROUTES {
            assert_eq!(route.key, format!("{} {}", route.method, route.path));
        }
    }

    #[test]
    fn requests_resolve_to_a_route_a_405_or_a_404() {
        let list = Route::resolve(&Method::GET, "/plants");
        assert!(matches!(list, Route::Found(route) if route.operation == Operation::ListPlants));
        let create = Route::resolve(&Method::POST, "/plants");
        assert!(matches!(create, Route::Found(route) if route.operation == Operation::CreatePlant));
        assert_eq!(
            Route::resolve(&Method::DELETE, "/plants"),
            Route::MethodNotAllowed { path: "/plants" }
        );
        assert_eq!(Route::resolve(&Method::GET, "/plants/7"), Route::NotFound);
        assert_eq!(
            Route::allowed_methods("/plants"),
            [&Method::GET, &Method::POST]
        );
    }

    #[test]
    fn unknown_routes_share_one_metric_name() {
        for (method, path, name) in [
            (Method::GET, "/plants", "GET /plants"),
            (Method::POST, "/plants", "POST /plants"),
            (Method::DELETE, "/plants", "other"),
            (Method::GET, "/other", "other"),
        ] {
            assert_eq!(Route::resolve(&method, path).metric_name(), name);
        }
    }
}
