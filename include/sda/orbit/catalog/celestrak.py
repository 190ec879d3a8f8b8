"""Fetching a current catalogue from CelesTrak (``sda catalog fetch``: an operator's command, never
run by the pipeline, which reads only files)."""

from __future__ import annotations

import re

CELESTRAK_GP_URL = "https://celestrak.org/NORAD/elements/gp.php?GROUP={group}&FORMAT={fmt}"


CELESTRAK_GROUP_RE = re.compile(r"^[A-Za-z0-9-]{1,64}$")


class CelesTrakError(OSError):
    """CelesTrak could not be reached or did not answer; the message names the URL."""


def check_celestrak_group(group: str) -> str:
    """A CelesTrak GP group name (``active``, ``cosmos-2251-debris``, ...): ASCII letters, digits and ``-``."""
    if not isinstance(group, str) or not CELESTRAK_GROUP_RE.fullmatch(group):
        raise ValueError(f"CelesTrak group {group!r}: use 1-64 characters from letters, digits and '-'")
    return group


def celestrak_url(group: str, fmt: str = "tle") -> str:
    check_celestrak_group(group)
    if fmt not in ("tle", "3le", "csv", "json", "xml"):
        raise ValueError(f"CelesTrak format {fmt!r} not accepted (tle, 3le, csv, json, xml)")
    return CELESTRAK_GP_URL.format(group=group, fmt=fmt)


def fetch_celestrak(group: str = "active", fmt: str = "tle", timeout_s: float = 30.0) -> str:
    """Download a CelesTrak GP group (needs network). Offline, or on an HTTP error, raises
    :class:`CelesTrakError` (an ``OSError``) naming the URL and the underlying error."""
    import urllib.request

    url = celestrak_url(group, fmt)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.read().decode("utf-8", errors="replace")
    except OSError as exc:
        raise CelesTrakError(f"cannot fetch {url}: {exc}") from exc
