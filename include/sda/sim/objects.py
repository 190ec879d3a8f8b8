"""The observed objects: catalogue loaded or generated, subsampled, the injected pair appended, and
their true trajectories (:func:`true_orbits`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from pathlib import Path

import numpy as np

from sda.orbit import frames, uncertainty
from sda.orbit.catalog import CatalogEntry, latest_by_object, load_catalog, parse_tle_text, synthetic
from sda.sim import dynamics, events, tle_error
from sda.sim.common import hash_int
from sda.sim.conjunction import PRIMARY_ID, SECONDARY_ID, design_conjunction, design_true_conjunction
from sda.sim.weather import Weather


def load_objects(cfg, settings, write_catalog: bool = True
                 ) -> tuple[list[CatalogEntry], Path, dict | None, "tle_error.TleErrors | None"]:
    """The observed entries (catalogue element sets), the catalogue file, the injected pair, and with
    ``cfg.tle_age_days`` the element-set errors (:mod:`sda.sim.tle_error`: the catalogue file then
    holds the re-epoched element sets and the sensors observe the true orbits). Without
    ``write_catalog`` the catalogue file is named, not written (a continuation: it is there already)."""
    injected = None
    errors = None
    if cfg.catalog is not None:
        entries, _rejected = load_catalog(cfg.catalog)
        entries = [e for e in latest_by_object(entries)
                   if e.norad_id not in (PRIMARY_ID, SECONDARY_ID) or not cfg.inject_conjunction]
        if not entries:
            raise ValueError(f"catalogue {cfg.catalog} has no usable element sets")
        base_text = Path(cfg.catalog).read_text(encoding="utf-8", errors="replace")
        generated = False
    else:
        base_text = synthetic.generate_catalog(cfg.objects, cfg.start, cfg.seed)
        entries, _ = parse_tle_text(base_text)
        generated = True
    if getattr(cfg, "tle_age_days", None) is not None:
        errors = tle_error.apply(entries, cfg.start, cfg.end, cfg.tle_age_days, cfg.seed)
        entries = errors.catalogue
        base_text = errors.catalogue_text()
        generated = True  # the catalogue written is the re-epoched one
    if cfg.max_objects is not None and len(entries) > cfg.max_objects:
        pick = np.sort(np.random.default_rng([cfg.seed, 3]).choice(len(entries), cfg.max_objects, replace=False))
        entries = [entries[i] for i in pick]
    catalog_file = Path(cfg.catalog) if cfg.catalog is not None else None
    if cfg.inject_conjunction:
        tca = cfg.tca or cfg.start + dt.timedelta(hours=2)
        if getattr(cfg, "truth", "numerical") == "numerical":
            injected = design_true_conjunction(cfg.start, tca, cfg.miss_m, cfg.seed, Weather.of(cfg),
                                               getattr(cfg, "conjunction_burn_h", None))
        else:
            injected = design_conjunction(tca, cfg.miss_m, cfg.seed)
        extra = synthetic.format_tle(injected["tle"])
        new_entries, _ = parse_tle_text(extra)
        entries = entries + new_entries
        base_text = base_text if base_text.endswith("\n") or not base_text else base_text + "\n"
        if (errors is None and cfg.catalog is not None
                and not base_text.lstrip().startswith(("1 ", "2 ")) and "\n1 " not in base_text):
            # an OMM catalogue: write the combined catalogue as TLE text
            full, _ = load_catalog(cfg.catalog)
            base_text = "".join(f"{e.name}\n{e.line1}\n{e.line2}\n" for e in latest_by_object(full))
        base_text += extra
    entries, base_text, hidden = _hide(cfg, entries, base_text)
    if generated or injected is not None or hidden:
        catalog_file = Path(cfg.catalog_out) if cfg.catalog_out else settings.catalog_file
        if write_catalog:
            catalog_file.parent.mkdir(parents=True, exist_ok=True)
            catalog_file.write_text(base_text)
    elif cfg.catalog_out and write_catalog:
        Path(cfg.catalog_out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.catalog_out).write_text(base_text)
    return entries, catalog_file, injected, errors


def _hide(cfg, entries: list[CatalogEntry], base_text: str) -> tuple[list[CatalogEntry], str, set[int]]:
    """The uncatalogued bodies and the fresh launch (:mod:`sda.sim.events`): observed (in ``entries``), left
    out of the catalogue text; the text is then TLE whatever the input catalogue's format was."""
    share, launch = getattr(cfg, "uncatalogued_share", 0.0), getattr(cfg, "launch", False)
    hidden = events.uncatalogued([e.norad_id for e in entries if e.norad_id not in (PRIMARY_ID, SECONDARY_ID)],
                                 share, cfg.seed)
    if launch:
        new, _ = parse_tle_text(synthetic.format_tle(events.launch_entries(cfg.start, cfg.seed)))
        entries = entries + new
        hidden |= {e.norad_id for e in new}
    if not hidden:
        return entries, base_text, hidden
    listed, _ = parse_tle_text(base_text)
    if not listed and cfg.catalog is not None:  # an OMM catalogue
        listed = latest_by_object(load_catalog(cfg.catalog)[0])
    text = "".join(f"{e.name}\n{e.line1}\n{e.line2}\n" for e in listed if e.norad_id not in hidden)
    return entries, text, hidden


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bodies(entries: list[CatalogEntry]) -> tuple[list[CatalogEntry], dict[int, tuple[int, ...]]]:
    """One entry per physical body, and the bodies published under several catalogue numbers.

    Entries with one element set (:func:`sda.sim.tle_error.element_set_key`: same epoch and elements)
    are one body: a docked stack, such as the ISS and its visiting vehicles, whose element sets are
    published identical for each number. A sensor sees such a stack as one object and reports one
    detection, not one per number. The body is observed as its lowest number (the first entry of
    each group, in ``entries``' order, keeps its place); the second value maps that number to every
    number of the body, for the bodies that have more than one."""
    groups: dict[str, list[CatalogEntry]] = {}
    for e in entries:
        groups.setdefault(tle_error.element_set_key(e.line1, e.line2), []).append(e)
    first = {id(min(g, key=lambda e: e.norad_id)) for g in groups.values()}
    several = {min(e.norad_id for e in g): tuple(sorted(e.norad_id for e in g)) for g in groups.values() if len(g) > 1}
    return [e for e in entries if id(e) in first], several


class Objects:
    """The observed bodies (:func:`bodies`: one per docked stack): ``sats`` the element sets the true
    orbits start from (the perturbed ones when the catalogue has errors), ``catalogue_sats`` the
    catalogue's element sets when they differ (else None), ``same_body`` the stacks' catalogue numbers by
    the number observed, ``truth`` the true trajectories the sensors see (:func:`true_orbits`)."""

    def __init__(self, entries: list[CatalogEntry], true_sats: dict | None = None):
        entries, self.same_body = bodies(entries)
        self.norad = np.array([e.norad_id for e in entries], dtype=np.int64)
        self.names = [e.name for e in entries]
        self.catalogue_sats = None if true_sats is None else [e.satrec for e in entries]
        self.sats = [e.satrec if true_sats is None else true_sats.get(e.norad_id, e.satrec) for e in entries]
        # a deterministic radar cross-section / optical area per object
        self.rcs_db = np.array([(hash_int("rcs", n) % 2000) / 100.0 - 10.0 for n in self.norad])
        for i, name in enumerate(self.names):
            if "DEB" in name.upper():
                self.rcs_db[i] -= 8.0
        self.area_m2 = 10.0 ** (self.rcs_db / 10.0)
        self.truth: TrueOrbits | None = None


@dataclasses.dataclass
class TrueOrbits:
    """The bodies' true trajectories (:mod:`sda.sim.dynamics`): the ephemeris, each body's force
    parameters, its GCRF state at the run's start, and the last grid states (to extend the ephemeris)."""

    ephemeris: dynamics.Ephemeris
    params: list[dynamics.BodyParams]
    start_gcrf: np.ndarray
    last_gcrf: np.ndarray
    burns: list = dataclasses.field(default_factory=list)  # sda.sim.events.Burn, the manoeuvres in the run

    def rows(self) -> list[dict]:
        """One truth row per body: its parameters and initial state (what regenerates its trajectory)."""
        return [{"norad_id": int(n), "cd": p.cd, "cr": p.cr, "area_to_mass_m2_kg": p.area_to_mass,
                 **({"tumble": [list(term) for term in p.tumble]} if p.tumble else {}),
                 "start_gcrf_m": [None if not np.isfinite(x) else float(x) for x in s]}
                for n, p, s in zip(self.ephemeris.norad, self.params, self.start_gcrf)]


class Sgp4Truth:
    """``--truth sgp4``: the bodies' true element sets' own SGP4 trajectories (the pipeline's model: a
    test device for measurement models, never a truth to score accuracy against)."""

    def __init__(self, sats):
        self.ephemeris = self
        self._sats = sats

    def at(self, unix_s):
        return frames.propagate(self._sats, unix_s)


MATCH_STEP_S, MATCH_SAMPLES = 600.0, 12  # the arc a body's start is matched to its element set over: 2 h


def true_orbits(cfg, objs: Objects, injected: dict | None) -> TrueOrbits:
    """Integrate every body from its true element set's state at ``cfg.start``, its mean motion matched to
    the set's (:func:`sda.sim.dynamics.match_mean_motion`; the injected pair from its designed state), to
    ``cfg.end`` with the simulator's force model (:mod:`sda.sim.dynamics`)."""
    t0 = cfg.start.timestamp()
    _, r, v = frames.propagate(objs.sats, np.array([t0]))
    params = dynamics.draw_params(objs.norad, objs.names, cfg.seed, getattr(cfg, "sky", "kind"))
    start = np.full((len(objs.norad), 6), np.nan)
    ok = np.isfinite(r[:, 0]).all(axis=1)
    if ok.any():
        start[ok] = dynamics.teme_to_gcrf(r[ok, 0], v[ok, 0], t0)
        times = t0 + MATCH_STEP_S * np.arange(1, MATCH_SAMPLES + 1)
        _, ref, _ = frames.propagate([objs.sats[i] for i in np.flatnonzero(ok)], times)
        start[ok] = dynamics.match_mean_motion(start[ok], t0, ref, times)
    if injected is not None:
        for k, norad in enumerate((injected["primary"], injected["secondary"])):
            row = np.flatnonzero(objs.norad == norad)
            if row.size:
                start[row[0]] = injected["true_gcrf_start"][k]
                params[row[0]] = injected["params"][k]
    regimes = [uncertainty.orbit_regime(*frames.perigee_apogee_km(sat)) for sat in objs.sats]
    burns = events.draw_burns(objs.norad, regimes, t0, cfg.end.timestamp(), getattr(cfg, "manoeuvre_share", 0.0),
                              getattr(cfg, "manoeuvre_rate", 0.0), cfg.seed)
    designed = (injected or {}).get("burn")
    if designed is not None:  # the pair's encounter is designed: no drawn burn of theirs, the designed one
        pair = (injected["primary"], injected["secondary"])
        burns = sorted([b for b in burns if b.norad_id not in pair] + [events.Burn(
            injected["primary"], designed["t_unix"], tuple(designed["dv_rtn_ms"]), "designed")],
            key=lambda b: (b.t_unix, b.norad_id))
    row = {int(n): i for i, n in enumerate(objs.norad)}
    eph, last = dynamics.propagate(objs.norad, start, t0, cfg.end.timestamp(), params,
                                   burns=[(row[b.norad_id], b.t_unix, b.dv_rtn_ms) for b in burns],
                                   weather=Weather.of(cfg))
    return TrueOrbits(eph, params, start, last, burns)
