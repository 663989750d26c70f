"""The HTTP edge's rules without a server: Host names, upload shares, upload deadlines."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from asrserve.api.hosts import allowed_hosts, host_name
from asrserve.api.uploads import UploadGate, UploadLimits, _Deadlines, upload_key
from asrserve.auth.principal import Principal
from asrserve.errors import Unavailable
from asrserve.settings import Settings


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8000", "localhost"),
        ("[::1]:8000", "::1"),
        ("::1", "::1"),
        ("Evil.Example.", "evil.example"),
        ("127.0.0.1", "127.0.0.1"),
    ],
)
def test_host_name_drops_port_brackets_case_and_final_dot(header: str, name: str) -> None:
    assert host_name(header) == name


def allowed(settings: Settings) -> frozenset[str] | None:
    """The names ``Host`` may carry as the app wires its check from ``settings``."""
    return allowed_hosts(settings, host=settings.host, auth_enabled=settings.auth_enabled)


def test_which_host_names_are_allowed() -> None:
    loopback = frozenset({"127.0.0.1", "::1", "localhost"})
    assert allowed(Settings(auth="off")) == loopback
    assert allowed(Settings(auth="off", host="10.0.0.5")) == loopback | {"10.0.0.5"}
    assert allowed(Settings(auth="off", allowed_hosts="*")) is None
    assert allowed(Settings(auth="on")) is None  # keys stop a rebinding page
    named = Settings(auth="on", allowed_hosts="asr.example, API.example")
    assert allowed(named) == loopback | {"asr.example", "api.example"}


def test_one_key_gets_its_share_and_the_others_keep_theirs() -> None:
    gate = UploadGate(UploadLimits(max_concurrent=4, per_key=2))
    with gate.slot("a"), gate.slot("a"):
        with pytest.raises(Unavailable) as refused, gate.slot("a"):
            pass
        assert refused.value.status == 503 and "your share" in refused.value.message
        with gate.slot("b"):
            assert gate.by_key == {"a": 2, "b": 1}
    assert gate.by_key == {} and gate.active == 0


def _request(principal: Principal | None, client: tuple[str, int]) -> Request:
    scope = {"type": "http", "method": "POST", "headers": [], "client": client, "state": {}}
    request = Request(scope)
    if principal is not None:
        request.state.principal = principal
    return request


def test_uploads_count_against_the_key_or_with_auth_off_the_address() -> None:
    alice = Principal(key_id="key_alice", admin=False)
    assert upload_key(_request(alice, ("10.0.0.1", 5000))) == "key:key_alice"
    assert upload_key(_request(None, ("10.0.0.1", 5000))) == "addr:10.0.0.1"


def test_a_slow_body_is_due_after_the_grace_plus_its_bytes_at_the_minimum_rate() -> None:
    limits = UploadLimits(
        idle_timeout_s=30, total_timeout_s=900, min_rate_bytes_s=1000, rate_grace_s=10
    )
    deadlines = _Deadlines(limits, start=100.0, received=2000)
    assert deadlines.next_wait(now=105.0) == (7.0, "the upload arrived slower than 1000 bytes/s")
    deadlines.received = 60_000  # keeping up: the idle timeout comes first
    assert deadlines.next_wait(now=105.0) == (30.0, "the upload sent nothing for 30 s")
    deadlines.received = 10_000_000
    assert deadlines.next_wait(now=990.0) == (10.0, "the upload took longer than 900 s")
    assert (
        _Deadlines(UploadLimits(min_rate_bytes_s=0), start=0, received=0).next_wait(now=50)[0] == 30
    )
