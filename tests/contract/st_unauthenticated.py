"""Schemathesis hooks for the run without a token: every answer of each of
openapi.yaml's operations is 401 with a Bearer challenge (the plain one, or
error="invalid_token" for an Authorization value that is not one token).
Other methods are unsupported-method probes, answered 405 before any token
is read, which --checks all checks as usual."""

import schemathesis

import st_hooks  # noqa: F401  (the hooks of every run)


@schemathesis.check
def answers_401_without_a_token(ctx, response, case):
    if case.method.upper() != case.operation.method.upper():
        return None
    if response.status_code != 401:
        raise AssertionError(f"expected 401 without a token, got {response.status_code}")
    challenge = response.headers.get("www-authenticate", [""])
    challenge = challenge[0] if isinstance(challenge, list) else challenge
    if not challenge.startswith('Bearer realm="plants"'):
        raise AssertionError(f"unexpected WWW-Authenticate: {challenge!r}")
