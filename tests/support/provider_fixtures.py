"""The fixtures the provider tests (``test_provider_anthropic``, ``test_provider_gemini``) share:
one fake provider server per module, handed to each test as if new."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from tests.support.fake_provider import FakeProvider

P = TypeVar("P", bound=FakeProvider)


def fake_provider_fixtures(cls: type[P]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Two fixtures for a test module to hold: ``provider_server``, one ``cls`` for the module
    (its 429s say ``Retry-After: 2``), and ``fake``, that server with its log cleared and its
    server-wide options (``responder``, ``api_key``, ``hang_after``, ``hang_s``) back to the
    defaults, so that no test sees another's. Usage, at module level:
    ``provider_server, fake_fixture = fake_provider_fixtures(FakeAnthropic)``."""

    @pytest.fixture(scope="module", name="provider_server")
    def server() -> Iterator[P]:
        """One fake provider server for the module."""
        with cls(retry_after="2") as fake:
            yield fake

    @pytest.fixture(name="fake")
    def fresh(provider_server: P) -> P:
        """The module's fake provider server, as if new."""
        s = provider_server
        s.reset()
        s.responder, s.api_key, s.hang_after, s.hang_s = None, None, None, 30.0
        return s

    return server, fresh
