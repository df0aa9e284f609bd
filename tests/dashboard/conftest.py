"""Shared real studies (built once per session by the real driver): see tests/report/studies.py."""

from tests.report.studies import built, cli, fsdp, partial, pp  # noqa: F401
