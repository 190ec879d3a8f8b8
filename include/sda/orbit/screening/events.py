"""A screening's open events: their ids (:func:`event_key`), their columns (:data:`EVENT_COLUMNS`),
and :func:`combine`, which makes the open events of a screening from the events it kept and the rows
it found -- one row per event id."""

from __future__ import annotations

import datetime as dt
import hashlib

import pandas as pd

from sda.orbit.screening.persistent import NO_EVENT, is_persistent, persistent_event_id
from sda.orbit.screening.tca import APPROACH_COLUMNS, approach_frame

EVENT_COLUMNS = (*APPROACH_COLUMNS, "flag")


def event_id(primary_id: int, secondary_id: int, tca_unix: float) -> str:
    """Deterministic id: sha256 of the pair and the TCA rounded to the minute."""
    minute = dt.datetime.fromtimestamp(round(tca_unix / 60.0) * 60.0, tz=dt.timezone.utc)
    text = f"{int(primary_id)}|{int(secondary_id)}|{minute:%Y-%m-%dT%H:%MZ}"
    return hashlib.sha256(text.encode()).hexdigest()


def event_key(primary_id: int, secondary_id: int, tca_unix: float, flag) -> str:
    """The event's id: a persistent proximity's is its pair's, any other's the pair and TCA minute."""
    if is_persistent(flag):
        return persistent_event_id(primary_id, secondary_id)
    return event_id(primary_id, secondary_id, tca_unix)


def event_keys(events: pd.DataFrame | None) -> list[str]:
    """:func:`event_key` of each row of ``events`` (primary_id, secondary_id, tca_unix, flag)."""
    if events is None or not len(events):
        return []
    return [event_key(p, s, t, f) for p, s, t, f in
            zip(events["primary_id"], events["secondary_id"], events["tca_unix"], events["flag"])]


def empty_events() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype=t) for c, t in APPROACH_COLUMNS.items()})
    frame["flag"] = pd.Series(dtype=object)
    return frame


def _pairs_of(frame: pd.DataFrame) -> pd.Series:
    """(primary_id, secondary_id) of each row, as Python ints."""
    return pd.Series(list(zip(frame["primary_id"].astype(int), frame["secondary_id"].astype(int))),
                     index=frame.index, dtype=object)


def combine(kept: pd.DataFrame, found: pd.DataFrame, rechecked: pd.DataFrame | None = None) -> pd.DataFrame:
    """The open events after a screening: kept ones and those found (:func:`refine_pairs` rows), where
    every pair worked out whole (``exact``; ``rechecked`` first) has exactly the events
    :func:`pair_events` gave it. One row per event id (the closest), columns :data:`EVENT_COLUMNS`."""
    frames = [f for f in (rechecked, found) if f is not None and len(f)]
    exact_parts, exact_pairs = [], set()
    for f in frames:  # the first answer per pair (rechecked before found: the same maths)
        rows = f[f["exact"]]
        pairs = _pairs_of(rows)
        exact_parts.append(rows[~pairs.isin(exact_pairs).to_numpy()])
        exact_pairs |= set(pairs)
    exact = pd.concat(exact_parts) if exact_parts else approach_frame([])
    plain = [f[~f["exact"]] for f in frames] + ([kept] if kept is not None and len(kept) else [])
    plain = pd.concat(plain) if plain else empty_events()
    if len(plain) and exact_pairs:
        plain = plain[~_pairs_of(plain).isin(exact_pairs).to_numpy()]
    whole = exact[exact["flag"] != NO_EVENT] if len(exact) else exact
    out = (pd.concat([x[list(EVENT_COLUMNS)] for x in (plain, whole) if len(x)]) if (len(plain) or len(whole))
           else empty_events())
    if not len(out):
        return empty_events()
    out = out.assign(_id=event_keys(out))
    out = out.sort_values(["miss_km", "primary_id", "secondary_id", "tca_unix"], kind="stable").drop_duplicates("_id")
    out = out.sort_values(["tca_unix", "primary_id", "secondary_id"], kind="stable").drop(columns="_id")
    return out.reset_index(drop=True).astype(APPROACH_COLUMNS)
