"""The harness itself: ``app_url`` can serve one page file, chosen by indirect parametrization."""

from __future__ import annotations

import urllib.request

import pytest

from tests.e2e.harness import open_page

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("app_url", ["app_pages/why_miss.py"], indirect=True)
def test_app_url_serves_the_given_script(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    with urllib.request.urlopen(f"{app_url}/_stcore/health", timeout=5) as response:
        assert response.status == 200
    open_page(page, app_url)
    assert "Why did it miss?" in page.locator("h1").first.inner_text()
