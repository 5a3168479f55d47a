"""Fixtures the unit tests share: the Hub, download and library fixtures of tests/support/fixtures.py.

Listed here once, so test modules take them as parameters without importing them
(an imported fixture shadowed by a parameter of the same name is a lint error, F811).
"""

from __future__ import annotations

from tests.support.fixtures import fake_hub, gb_paths, hf_isolated, hub_endpoint, no_leaks

__all__ = ["fake_hub", "gb_paths", "hf_isolated", "hub_endpoint", "no_leaks"]
