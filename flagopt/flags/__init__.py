"""The XLA flag registry, XLA's flag-rejection messages, and the pre-flight of a space against the installed jax."""

from __future__ import annotations

from flagopt.flags._preflight import FlagCheck, PreflightReport, preflight
from flagopt.flags._registry import FlagInfo, FlagRegistry, flag_name, version_tuple
from flagopt.flags._space_check import SpacePreflight, check_space, flag_sets, require_baselines_start, unchecked_libtpu
from flagopt.flags._unknown import FlagRejection, parse_flag_rejection, reliable_flag_text

__all__ = [
    "FlagCheck",
    "FlagInfo",
    "FlagRegistry",
    "FlagRejection",
    "PreflightReport",
    "SpacePreflight",
    "check_space",
    "flag_name",
    "flag_sets",
    "parse_flag_rejection",
    "preflight",
    "reliable_flag_text",
    "require_baselines_start",
    "unchecked_libtpu",
    "version_tuple",
]
