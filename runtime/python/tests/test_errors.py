"""Every error status, with the process surviving all of them."""

from __future__ import annotations

import httpx
import pytest


def _err(r: httpx.Response, status: int, type_: str) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["error"]["type"] == type_, body
    # The platform's one error shape: `code`, with `type` kept as its deprecated alias.
    assert body["error"]["code"] == type_, body
    return body["error"]["message"]


def test_error_statuses_and_process_survives(rt):
    u = rt.url
    _err(httpx.post(f"{u}/echo", content=b"{not json"), 400, "bad_request")
    _err(httpx.post(f"{u}/echo", content=b"\xff\xfe\x00garbage"), 400, "bad_request")
    msg = _err(httpx.post(f"{u}/echo", json=[1, 2]), 400, "bad_request")
    assert "object" in msg
    _err(httpx.post(f"{u}/echo", json="text"), 400, "bad_request")
    assert "nope" in _err(httpx.post(f"{u}/nope", json={}), 404, "not_found")
    _err(httpx.post(f"{u}/add/extra", json={"a": 1, "b": 2}), 404, "not_found")
    _err(httpx.post(f"{u}/", json={}), 404, "not_found")
    r = httpx.get(f"{u}/add")
    _err(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"
    _err(httpx.put(f"{u}/add", json={}), 405, "method_not_allowed")
    msg = _err(httpx.post(f"{u}/add", json={"a": 1}), 422, "invalid_arguments")
    assert "'b'" in msg and "missing" in msg
    msg = _err(httpx.post(f"{u}/add", json={"a": 1, "b": 2, "zzz": 3}), 422, "invalid_arguments")
    assert "'zzz'" in msg and "unexpected" in msg
    msg = _err(httpx.post(f"{u}/fails", json={}), 500, "function_error")
    assert msg == "ValueError: boom"
    msg = _err(httpx.post(f"{u}/unserialisable", json={}), 500, "serialization_error")
    assert "serialis" in msg.lower() or "serializ" in msg.lower()

    assert rt.alive()
    assert httpx.get(f"{u}/health").status_code == 200
    assert httpx.post(f"{u}/add", json={"a": 1, "b": 2}).json() == 3
    out = rt.stdout()
    assert "Traceback" in out and "ValueError: boom" in out, "function errors are logged with their traceback"


@pytest.mark.parametrize("path", ["/health", "/ready", "/functions"])
def test_probe_paths_reject_post(rt, path):
    _err(httpx.post(f"{rt.url}{path}", json={}), 405, "method_not_allowed")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"name":1e999999}', "argument 'name': number 1e999999 is out of range"),
        (b'{"name":{"deep":[1,-1e400]}}', "argument 'name': number -1e400 is out of range"),
        (b'{"name":1' + b"0" * 400 + b"}", "argument 'name': number 1000000"),
        (b'{"name":NaN}', "NaN is not a JSON value"),
        (b'{"name":Infinity}', "Infinity is not a JSON value"),
        (b'{"name":"\xff"}', "not valid UTF-8"),
        (b'{"name":' + b"[" * 1000 + b"]" * 1000 + b"}", "nested deeper than 512 levels"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 512 levels"),
    ],
)
def test_bodies_the_gateway_also_refuses_are_400_naming_the_problem(rt, body, needle):
    msg = _err(httpx.post(f"{rt.url}/echo", content=body), 400, "bad_request")
    assert needle in msg
    assert rt.alive()


def test_the_limits_themselves_are_accepted(rt):
    depth_511 = b'{"a":' + b"[" * 511 + b"]" * 511 + b"}"  # 512 levels with the object
    assert httpx.post(f"{rt.url}/echo", content=depth_511).status_code == 200
    assert httpx.post(f"{rt.url}/echo", content=b'{"a":1.7976931348623157e308}').json() == {
        "a": 1.7976931348623157e308
    }
    assert httpx.post(f"{rt.url}/echo", content=b'{"s":"' + b"[" * 2000 + b'"}').status_code == 200
