"""The XLA flag registry, XLA's flag-rejection messages, and a pre-flight check against the installed jax."""

from __future__ import annotations

from flagopt.flags._preflight import FlagCheck, PreflightReport, preflight
from flagopt.flags._registry import FlagInfo, FlagRegistry, flag_name, version_tuple
from flagopt.flags._unknown import FlagRejection, parse_flag_rejection, reliable_flag_text

__all__ = [
    "FlagCheck",
    "FlagInfo",
    "FlagRegistry",
    "FlagRejection",
    "PreflightReport",
    "flag_name",
    "parse_flag_rejection",
    "preflight",
    "reliable_flag_text",
    "version_tuple",
]
