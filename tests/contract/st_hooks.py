"""Schemathesis hooks for every contract run. Each leaves out one kind of
generated input, says why, and names the test that covers it instead; no
check is disabled.

1. Bodies that are not UTF-8.

`cargo lambda watch` cannot carry a request body that is not UTF-8 under a
text Content-Type such as application/json: its event builder answers a
text/plain 500 itself and never invokes the function (seen with cargo-lambda
1.9.2; the same bytes as application/octet-stream do reach the function).
So such bodies are left out here, and only they: no check is disabled. The
function's own answer to them, 400 with the Error body, is tested by
tests/api/hostile.rs ("invalid UTF-8").

2. An `id` written as a whole float (`6547.0`). The contract refuses any `id`
that is not an integer literal (it names `1e3`), but JSON Schema's data model
counts every number with a zero fraction as an integer, so no schema can say
so, and Schemathesis deliberately sends `2.0` where `integer` is declared.
openapi.yaml states the rule in prose; tests/api/hostile.rs covers the
400 for `1e3`, `1.0`-style ids and the rest. This is a conflict between the
contract and JSON Schema, reported to the contract's owner, not a fix.
"""

import schemathesis


def _is_utf8(value):
    if isinstance(value, (bytes, bytearray)):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True


def _has_whole_float_id(value):
    return isinstance(value, dict) and isinstance(value.get("id"), float)


@schemathesis.hook
def filter_body(ctx, body):
    return _is_utf8(body) and not _has_whole_float_id(body)
