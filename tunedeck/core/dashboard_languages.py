"""The languages the dashboard speaks: their codes and each one's name in its own words."""

from __future__ import annotations

from collections.abc import Mapping

ENGLISH = "en"
LANGUAGES: Mapping[str, str] = {"en": "English", "fr": "Français"}
