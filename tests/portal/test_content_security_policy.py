"""The Content-Security-Policy: sent with every page in every profile and enforced in production;
the exceptions are the framed, sandboxed what-if report and the API reference pages. The browser
test (tests/browser/test_content_security_policy.py) checks that no page breaks it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.test import Client

from tests.portal.test_settings import PROBE, _production_env, _run
from tests.portal.test_settings import var_dir as var_dir  # noqa: F401  # the fixture

STRICT = {
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
}


def _directives(header: str) -> set[str]:
    return {directive.strip() for directive in header.split(";")}


def test_the_login_page_is_sent_with_the_strict_policy(db: None) -> None:
    assert _directives(Client().get("/login/")["Content-Security-Policy"]) == STRICT


def test_the_production_profile_enforces_the_policy(var_dir: Path) -> None:  # noqa: F811
    names = ["CONTENT_SECURITY_POLICY"]
    result = _run([sys.executable, "-c", f"NAMES = {names!r}; {PROBE}"], _production_env(var_dir, CSP_REPORT_ONLY=""))
    assert result.returncode == 0, result.stderr
    assert "'script-src': [\"'self'\"]" in json.loads(result.stdout)["CONTENT_SECURITY_POLICY"]
