"""The alert lifecycle: what a run does to the alerts (pure: no I/O but the ``emitted`` lookup).

``gold.alerts`` holds the current state of each alert, ``gold.alert_events`` one row per emitted change
(its history); :func:`plan_alerts` plans a run's changes from the assessed events
(:func:`sda.alerts.assessment.assess`) and the alerts as they stand. An alert is identified by its pair
and TCA: an event matches an alert of the same (primary, secondary) whose TCA is within
``settings.alert_tca_tolerance_s`` (by default 120 s: a new element set moves a TCA by seconds, while two
approaches of one pair are at least a large fraction of an orbit apart); each event matches at most one
alert and vice versa, nearest TCA first. Then:

* an alert-level event matching no alert -> a **new** alert, version 1, alert_id = the event's
  event_id (sha256 of the pair and the TCA minute);
* a matched open alert whose emitted content changed (:func:`sda.alerts.content.content_changed`; an
  object newly found to have manoeuvred, its CDM's MANEUVERABLE now YES, is a change) -> **updated**,
  version + 1. Unchanged -> nothing emitted, nothing rewritten;
* a matched open alert whose event fell below both thresholds -> **closed** ("risk dropped below
  thresholds", level none, the new values);
* an open alert whose TCA is before the run's screening start -> **closed** ("TCA passed", values
  and level of its last version);
* an open alert not found again although this screening covered its TCA (TCA in
  ``[screen_start + tolerance, screen_end - tolerance)``: the margin keeps a TCA that moved across a
  window edge from counting as lost) -> **closed** ("no longer found by screening": the miss grew
  beyond the screening threshold or the TCA moved by more than the tolerance; level none, values of
  its last version). Open alerts outside that range are left as they are;
* a closed alert whose TCA is still ahead (closed for risk dropped / not found) that an alert-level
  event matches again is reopened: **updated**, version + 1 (its reason starts with "reopened").
* the open events an incremental screening kept without re-assessing them (``kept``) keep their
  alerts as they are: still found, nothing emitted;
* a persistent proximity (``flag`` "persistent: ...", event_id of the pair alone) is one alert per
  pair: matched whatever its time, changed only by its level or Pc, closed ("no longer found by
  screening") when the screening no longer finds the pair persistent.

Every change increments ``version`` and is emitted exactly once. Crash recovery: before planning, each
alert's next version is looked up in the outbox (``emitted``) and, if present, *adopted* -- recorded as
emitted, from its JSON twin -- and the new plan starts after it (:mod:`sda.alerts.publish` has the order
of the writes that makes this enough).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping

import pandas as pd

from sda.alerts.assessment import SIGMA_FIELDS, STATE_FIELDS
from sda.alerts.content import content_changed, content_hash, persistent_changed
from sda.alerts.outbox import ALERT_FIELDS, file_names
from sda.alerts.values import aware, iso, missing

__all__ = [
    "STATUSES",
    "CLOSE_TCA_PASSED",
    "CLOSE_RISK_DROPPED",
    "CLOSE_NOT_FOUND",
    "Plan",
    "plan_alerts",
]

STATUSES = ("new", "updated", "closed")
CLOSE_TCA_PASSED = "TCA passed"
CLOSE_RISK_DROPPED = "risk dropped below thresholds"
CLOSE_NOT_FOUND = "no longer found by screening"
#: what an alert version takes from its event (the rest is the lifecycle's)
_VALUE_FIELDS = ("event_id", "primary_id", "secondary_id", "primary_name", "secondary_name", "primary_intldes",
                 "secondary_intldes", "screen_start", "tca", "miss_m", "rel_speed_ms", "r_m", "t_m", "n_m", "pc",
                 "pc_valid", "pc_flag", "hbr_m", *STATE_FIELDS, *SIGMA_FIELDS, "p_cov_source", "s_cov_source",
                 "p_cov_rtn", "s_cov_rtn", "p_maneuverable", "s_maneuverable", "miss_probability", "alert_rule",
                 "p_dcp_sigma", "p_dcp_rtn", "s_dcp_sigma", "s_dcp_rtn")


@dataclasses.dataclass
class Plan:
    """What a run does to the alerts: ``changes`` to emit (full ALERT rows, new versions, in order),
    ``adopted`` versions found in the outbox but not in the table (recorded, not re-emitted),
    ``unchanged`` matched alerts with nothing to emit."""

    changes: list[dict]
    adopted: list[dict]
    unchanged: int = 0

    def count(self, status: str) -> int:
        return sum(1 for c in self.changes if c["status"] == status)


def _values(event: Mapping, screen_start) -> dict:
    out = {k: event.get(k) for k in _VALUE_FIELDS if k != "screen_start"}
    out["screen_start"] = aware(screen_start)
    out["tca"] = aware(event["tca"])
    if missing(out.get("pc")):
        out["pc"] = None
    return out


def _flagged(event: Mapping) -> bool:
    from sda.orbit import screening

    return screening.is_persistent(event.get("flag"))


def _persistent_alert(a: Mapping) -> bool:
    from sda.orbit import screening

    return a.get("event_id") == screening.persistent_event_id(a["primary_id"], a["secondary_id"])


class _Lifecycle:
    """One run's planning: the alerts as they stand (updated as changes are planned), the changes and
    adopted versions so far, and the alerts this run found again (``touched``)."""

    def __init__(self, current: Iterable[Mapping], screen_start, screen_end, run_id: str, tol: float,
                 emitted: Callable[[str, int], Mapping | None] | None):
        self.screen_start, self.screen_end, self.run_id, self.tol = screen_start, screen_end, run_id, tol
        self.start_s, self.end_s = aware(screen_start).timestamp(), aware(screen_end).timestamp()
        self.cdm_created = aware(screen_start)
        self.emitted = emitted or (lambda alert_id, version: None)
        self.adopted: list[dict] = []
        self.changes: list[dict] = []
        self.unchanged = 0
        self.touched: set[str] = set()
        self.alerts: dict[str, dict] = {}
        for a in current:
            a = {k: a.get(k) for k in ALERT_FIELDS}
            self.alerts[a["alert_id"]] = self.catch_up(a["alert_id"], a)

    def catch_up(self, alert_id: str, row: dict | None) -> dict | None:
        """``row`` advanced past the versions found in the outbox after it (adopted), or None."""
        version = int(row["version"]) if row else 0
        while True:
            found = self.emitted(alert_id, version + 1)
            if found is None:
                return row
            found = {k: found.get(k) for k in ALERT_FIELDS}
            found["first_run_id"] = (row or {}).get("first_run_id") or found.get("first_run_id") or found["run_id"]
            self.adopted.append(found)
            row, version = found, version + 1

    def change(self, base: dict | None, alert_id: str, status: str, level: str, reason: str,
               close_reason: str | None, values: Mapping) -> dict:
        """Plan the next version of an alert (``base`` None: a new one) with these values."""
        version = (int(base["version"]) if base else 0) + 1
        row = {**(base or {}), **values, "alert_id": alert_id, "version": version, "status": status,
               "level": level, "reason": reason, "close_reason": close_reason}
        row["content_hash"] = content_hash(row)
        row["cdm_file"], row["json_file"] = file_names(alert_id, version)
        row["cdm_created"] = self.cdm_created
        row["run_id"] = self.run_id
        row["first_run_id"] = (base or {}).get("first_run_id") or self.run_id
        row = {k: row.get(k) for k in ALERT_FIELDS}
        self.changes.append(row)
        self.alerts[alert_id] = row
        return row

    def _matchable(self, a: dict) -> bool:
        if a["status"] != "closed" or _persistent_alert(a):
            return True
        return a.get("close_reason") != CLOSE_TCA_PASSED and aware(a["tca"]).timestamp() >= self.start_s - self.tol

    def match(self, events: list[dict]) -> dict[int, str]:
        """event index -> alert_id: per pair, nearest TCA first within the tolerance, each event and each
        alert at most once; a persistent proximity matches its pair's persistent alert whatever the time."""
        pairs: dict[tuple[int, int], tuple[list[int], list[str]]] = {}
        for i, e in enumerate(events):
            pairs.setdefault((int(e["primary_id"]), int(e["secondary_id"])), ([], []))[0].append(i)
        for aid, a in self.alerts.items():
            key = (int(a["primary_id"]), int(a["secondary_id"]))
            if key in pairs and self._matchable(a):
                pairs[key][1].append(aid)
        matched: dict[int, str] = {}
        for ev_idx, alert_ids in pairs.values():
            options = sorted(
                (0.0 if _persistent_alert(self.alerts[aid]) else
                 abs(float(events[i]["tca_unix"]) - aware(self.alerts[aid]["tca"]).timestamp()), i, aid)
                for i in ev_idx for aid in alert_ids
                if _persistent_alert(self.alerts[aid]) == _flagged(events[i]))
            used_alerts: set[str] = set()
            for gap, i, aid in options:
                if gap <= self.tol and i not in matched and aid not in used_alerts:
                    matched[i] = aid
                    used_alerts.add(aid)
        return matched

    def _new_alert_id(self, event: Mapping) -> str:
        aid = event["event_id"]
        if aid in self.alerts:  # the id of an unrelated old alert (TCA long past, same minute): disambiguate
            aid = hashlib.sha256(f"{aid}|{self.run_id}|{event['tca_unix']!r}".encode()).hexdigest()
        return aid

    def apply(self, event: Mapping, aid: str | None) -> None:
        """Plan what one assessed event does to its matched alert ``aid`` (None: it matched none)."""
        values = _values(event, self.screen_start)
        level, reason = event["level"], event["reason"]
        if aid is None:
            if level == "none":
                return
            aid = self._new_alert_id(event)
            base = self.catch_up(aid, None)  # a version emitted by a crashed attempt and never recorded
            if base is None:
                self.change(None, aid, "new", level, reason, None, values)
                self.touched.add(aid)
                return
            self.alerts[aid] = base
        a = self.alerts[aid]
        self.touched.add(aid)
        if a["status"] == "closed":
            if level != "none":
                self.change(a, aid, "updated", level, f"reopened: {reason}", None, values)
        elif level == "none":
            self.change(a, aid, "closed", "none", reason, CLOSE_RISK_DROPPED, values)
        elif (persistent_changed if _flagged(event) else content_changed)(a, {**a, **values, "level": level}):
            self.change(a, aid, "updated", level, reason, None, values)
        else:
            self.unchanged += 1

    def keep(self, kept: pd.DataFrame | None) -> None:
        """The alerts of events kept as screened before (not re-assessed): still found, nothing to emit."""
        open_by_pair: dict[tuple[int, int], list[str]] = {}
        for aid, a in self.alerts.items():
            if aid not in self.touched and a is not None and a["status"] != "closed" and not _persistent_alert(a):
                open_by_pair.setdefault((int(a["primary_id"]), int(a["secondary_id"])), []).append(aid)
        for p, s_id, t in ([] if kept is None or not len(kept) or not open_by_pair else
                           zip(kept["primary_id"], kept["secondary_id"], kept["tca_unix"])):
            for aid in open_by_pair.get((int(p), int(s_id)), ()):
                if aid not in self.touched and abs(aware(self.alerts[aid]["tca"]).timestamp() - float(t)) <= self.tol:
                    self.touched.add(aid)
                    self.unchanged += 1
                    break

    def close_unfound(self) -> None:
        """Close the open alerts this run did not find again: TCA passed, or not found although covered."""
        window = f"[{iso(self.screen_start)}, {iso(self.screen_end)})"
        for aid, a in list(self.alerts.items()):
            if aid in self.touched or a is None or a["status"] == "closed":
                continue
            tca_s = aware(a["tca"]).timestamp()
            last = {k: a[k] for k in _VALUE_FIELDS}
            if _persistent_alert(a):
                self.change(a, aid, "closed", "none",
                            f"no longer a persistent proximity in the screening of {window}; last level {a['level']}",
                            CLOSE_NOT_FOUND, last)
            elif tca_s < self.start_s:
                self.change(a, aid, "closed", a["level"],
                            f"TCA {iso(a['tca'])} passed (before the screening start {iso(self.screen_start)}); "
                            f"last level {a['level']}", CLOSE_TCA_PASSED, last)
            elif self.start_s + self.tol <= tca_s < self.end_s - self.tol:
                self.change(a, aid, "closed", "none",
                            f"not found by the screening of {window}: the miss grew beyond the screening threshold "
                            f"or the TCA moved by more than {self.tol:g} s; last level {a['level']}",
                            CLOSE_NOT_FOUND, last)


def plan_alerts(assessed: pd.DataFrame, current: Iterable[Mapping], screen_start, screen_end, run_id: str,
                settings, emitted: Callable[[str, int], Mapping | None] | None = None,
                kept: pd.DataFrame | None = None) -> Plan:
    """The alert changes of a run (pure: no I/O but ``emitted``).

    assessed: :func:`sda.alerts.assessment.assess` rows (one per event_id); current: the ``alerts`` rows
    that may be affected (open ones, and closed ones whose TCA is not long past); screen_start /
    screen_end: the interval this screening covered; emitted(alert_id, version): the JSON-twin row of an
    emitted version found in the outbox, or None (crash recovery, see the module docstring). kept: open
    events of the screening that were not re-assessed this run (an incremental screening kept them as
    they were: primary_id, secondary_id, tca_unix): their alerts are still found, nothing changes for them.

    A persistent proximity (event_id :func:`sda.orbit.screening.persistent_event_id`) is one alert per pair:
    it matches its alert whatever its time, changes only with its level or Pc
    (:func:`sda.alerts.content.persistent_changed`), and closes when a screening no longer finds the pair
    persistent (persistent pairs are worked out over the whole horizon by every screening).
    """
    run = _Lifecycle(current, screen_start, screen_end, run_id, float(settings.alert_tca_tolerance_s), emitted)
    events = [] if assessed is None or len(assessed) == 0 else assessed.to_dict("records")
    matched = run.match(events)
    for i, e in enumerate(events):
        run.apply(e, matched.get(i))
    run.keep(kept)
    run.close_unfound()
    return Plan(run.changes, run.adopted, run.unchanged)
