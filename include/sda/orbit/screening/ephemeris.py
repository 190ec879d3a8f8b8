"""The catalogue's positions on the focus grid, kept on the local disk of the process that propagates
them, so that an incremental screening propagates only the element sets that changed.

An incremental screening's focus part (:mod:`.incremental`) screens the renewed objects against every
object over the whole horizon; its cost is SGP4 over the whole catalogue at every focus step (about
half of the part). The other objects' element sets are the ones the previous screening propagated,
at the same times: the focus grid is anchored to absolute multiples of its step, and every screening
(full, or the newly opened slice) stores the catalogue's states at the grid times it passes
(:meth:`Ephemeris.states` with ``reuse`` False).

One file a grid time (``k<index>.npy``, 0.8 MB for 13,000 objects, memory-mapped when read) holds, in
catalogue order, SGP4's position, velocity and error code of each object and its element-set key
(:func:`element_keys`: the norad id and every number SGP4 starts from). A read takes the states of
the objects whose key the file has and propagates only the others (one small ``SatrecArray``); a
file that misses more than :data:`REWRITE_MISS_FRACTION` of the catalogue is written again whole.
The values are SGP4's own doubles, bit for bit, so a screening finds the same candidates whatever
the cache holds (an unreadable or absent file is propagated and written again). Files are replaced
atomically (``os.replace``); those before a screening's start are removed (:meth:`Ephemeris.prune`).
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import uuid
from pathlib import Path

import numpy as np
import sgp4
from sgp4.api import SatrecArray, accelerated

from sda.orbit.frames import unix_to_jd

#: a file missing more of the catalogue than this (renewed or new element sets) is written again
REWRITE_MISS_FRACTION = 0.05
#: the library and its build: another SGP4 gives other doubles
SGP4_TAG = f"sgp4-{sgp4.__version__}-{'c' if accelerated else 'py'}"
#: a file's rows: position (km), velocity (km/s), SGP4's error code, element-set key (its bits)
COLUMNS = ("x", "y", "z", "vx", "vy", "vz", "err", "key")
ERR, KEY = COLUMNS.index("err"), COLUMNS.index("key")
_KEY_FIELDS = ("operationmode", "jdsatepoch", "jdsatepochF", "no_kozai", "ecco", "inclo", "nodeo", "argpo", "mo",
               "bstar", "ndot", "nddot", "radiusearthkm", "j2", "j3", "j4", "xke")


def element_keys(norad_ids: np.ndarray, satrecs: list) -> np.ndarray:
    """A 64-bit key per element set: the norad id and every number SGP4 starts from."""
    out = np.empty(len(satrecs), dtype=np.uint64)
    for i, (n, s) in enumerate(zip(norad_ids.tolist(), satrecs)):
        values = [getattr(s, f) for f in _KEY_FIELDS]
        data = struct.pack("<qb16d", int(n), ord(values[0][:1] or "i"), *values[1:])
        out[i] = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
    return out


def grid_index(t: float, every_s: float) -> int | None:
    """k when ``t`` is exactly ``k * every_s`` (an integral step: the same double whoever computes it)."""
    if every_s != int(every_s) or t != int(t) or int(t) % int(every_s):
        return None
    return int(t) // int(every_s)


class Ephemeris:
    """States of the catalogue ``objects`` (a :class:`.propagation.ScreeningObjects`) at the grid
    times ``k * every_s`` under ``root``; build with :meth:`open`."""

    def __init__(self, directory: Path, every_s: float, norad_ids: np.ndarray, satrecs: list):
        self.directory = directory
        self.every_s = float(every_s)
        self.satrecs = satrecs
        self.keys = element_keys(norad_ids, satrecs)
        self._rows: dict[bytes, tuple[np.ndarray | None, np.ndarray]] = {}  # a file's key digest -> _match
        self.hits = self.misses = self.written = 0

    @classmethod
    def open(cls, root: str | os.PathLike | None, every_s: float, norad_ids: np.ndarray,
             satrecs: list) -> "Ephemeris | None":
        """The cache under ``root`` for this grid, or None (no root, a step off whole seconds, or a
        directory that cannot be made: the screening then propagates everything, as without one)."""
        if root is None or not len(satrecs) or every_s != int(every_s):
            return None
        directory = Path(root) / SGP4_TAG / f"every-{int(every_s)}s"
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            print(f"sda ephemeris cache off: {directory}: {exc}", file=sys.stderr)
            return None
        return cls(directory, every_s, np.asarray(norad_ids, dtype=np.int64), list(satrecs))

    def _path(self, k: int) -> Path:
        return self.directory / f"k{k}.npy"

    def _read(self, k: int) -> np.ndarray | None:
        """The file of grid time ``k`` (memory-mapped, rows :data:`COLUMNS`), or None when absent or
        not a whole file (then propagated and written again)."""
        try:
            data = np.load(self._path(k), mmap_mode="r")
        except (OSError, ValueError, EOFError):
            return None
        return data if data.ndim == 2 and data.shape[0] == len(COLUMNS) and data.dtype == np.float64 else None

    def _load(self, k: int) -> tuple[np.ndarray | None, np.ndarray, np.ndarray] | None:
        """(file column per object -- None: its own --, found mask, the file) of grid time ``k``."""
        data = self._read(k)
        if data is None:
            return None
        stored = data[KEY].view(np.uint64)
        if len(stored) == len(self.keys) and np.array_equal(stored, self.keys):  # this catalogue's
            return None, np.ones(len(self.keys), dtype=bool), data
        digest = hashlib.blake2b(stored.tobytes(), digest_size=16).digest()
        if digest not in self._rows:
            self._rows[digest] = self._match(np.asarray(stored))
        return (*self._rows[digest], data)

    def _match(self, stored: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """(column of each object in a file holding ``stored`` keys -- None when every object found
        is in its own column, as in a file of this catalogue with some element sets renewed --,
        found mask)."""
        n = len(self.keys)
        if not len(stored):
            return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
        order = np.argsort(stored, kind="stable")
        rows = order[np.minimum(np.searchsorted(stored[order], self.keys), len(stored) - 1)]
        found = stored[rows] == self.keys
        if len(stored) == n and np.array_equal(rows[found], np.flatnonzero(found)):
            return None, found
        return rows, found

    def _store(self, k: int, err: np.ndarray, r: np.ndarray, v: np.ndarray) -> None:
        """Write the catalogue's states at grid time ``k`` (in catalogue order), atomically."""
        data = np.empty((len(COLUMNS), len(self.keys)))
        data[0:3], data[3:6], data[ERR] = r.T, v.T, err
        data[KEY] = self.keys.view(np.float64)
        tmp = self.directory / f".k{k}.{uuid.uuid4().hex}.npy"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)  # removed while this process kept its Ephemeris
            np.save(tmp, data)
            os.replace(tmp, self._path(k))
            self.written += 1
        except OSError as exc:  # a full disk costs speed, never a result
            print(f"sda ephemeris cache: {self._path(k)} not written: {exc}", file=sys.stderr)
            tmp.unlink(missing_ok=True)

    def _is_current(self, k: int) -> bool:
        data = self._read(k)
        return data is not None and np.array_equal(data[KEY].view(np.uint64), self.keys)

    def states(self, arr: SatrecArray, times: np.ndarray, reuse: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``arr.sgp4`` at ``times`` -- (err, r, v) of shapes (n, m), (n, m, 3), (n, m, 3) --: with
        ``reuse``, the stored states of the objects a grid time's file has, the other objects
        propagated at those times (one small ``SatrecArray``) and every object at the other times;
        without, all propagated. States at grid times are stored when absent, stale (``reuse``) or,
        without ``reuse``, of another catalogue."""
        times = np.asarray(times, dtype=float)
        ks = [grid_index(t, self.every_s) for t in times]
        loaded = [self._load(k) if reuse and k is not None else None for k in ks]
        n, m = len(self.satrecs), len(times)
        have = np.array([x is not None for x in loaded], dtype=bool)
        if not have.any():
            err, r, v = arr.sgp4(*unix_to_jd(times))
            return self._stored(ks, loaded, reuse, err, r, v, 0)
        # step-major buffers, returned as (n, m, 3) views: a step's rows are contiguous
        err_t = np.empty((m, n), dtype=np.uint8)
        r_t, v_t = np.empty((m, n, 3)), np.empty((m, n, 3))
        err, r, v = err_t.T, r_t.transpose(1, 0, 2), v_t.transpose(1, 0, 2)
        missing = np.zeros(n, dtype=bool)
        for c in np.flatnonzero(have):
            rows, found, data = loaded[c]
            missing |= ~found
            if rows is not None:
                data = data[:, rows]
            r_t[c], v_t[c], err_t[c] = data[0:3].T, data[3:6].T, data[ERR]
        idx = np.flatnonzero(missing)
        if len(idx):  # renewed or new element sets, at the times read
            e2, r2, v2 = SatrecArray([self.satrecs[i] for i in idx]).sgp4(*unix_to_jd(times[have]))
            for col, c in enumerate(np.flatnonzero(have)):
                err_t[c, idx], r_t[c, idx], v_t[c, idx] = e2[:, col], r2[:, col], v2[:, col]
        if not have.all():  # every object at the times without a file
            e2, r2, v2 = arr.sgp4(*unix_to_jd(times[~have]))
            err[:, ~have], r[:, ~have], v[:, ~have] = e2, r2, v2
        return self._stored(ks, loaded, reuse, err, r, v, int(have.sum()) * (n - len(idx)))

    def _stored(self, ks: list[int | None], loaded: list, reuse: bool, err: np.ndarray, r: np.ndarray, v: np.ndarray,
                read: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Count ``read`` object-steps read, store the grid times :meth:`states` says, and return
        (err, r, v)."""
        n = len(self.satrecs)
        self.hits += read
        self.misses += n * len(ks) - read
        if reuse:  # absent, or missing too much of the catalogue
            stale = [c for c, k in enumerate(ks) if k is not None and
                     (loaded[c] is None or (~loaded[c][1]).sum() > REWRITE_MISS_FRACTION * n)]
        else:  # a screening of every object: refresh what another catalogue left
            stale = [c for c, k in enumerate(ks) if k is not None and not self._is_current(k)]
        for c in stale:
            self._store(ks[c], err[:, c], r[:, c], v[:, c])
        return err, r, v

    def prune(self, before: float) -> int:
        """Remove the files of grid times before ``before`` (a screening never goes back to them):
        how many went."""
        gone = 0
        for path in self.directory.glob("k*.npy"):
            try:
                if int(path.stem[1:]) * self.every_s < before:
                    path.unlink()
                    gone += 1
            except (ValueError, OSError):
                continue  # not ours, or removed by another task already
        return gone


_WORKER: dict[tuple, tuple[object, Ephemeris | None]] = {}


def worker_ephemeris(root: str | os.PathLike | None, every_s: float, objects) -> Ephemeris | None:
    """:meth:`Ephemeris.open` once per Python process and catalogue (``objects`` from
    :func:`.propagation.worker_objects`, kept alive here so its identity stays its own)."""
    key = (None if root is None else str(root), float(every_s), id(objects))
    held = _WORKER.get(key)
    if held is None or held[0] is not objects:
        _WORKER.clear()
        held = _WORKER[key] = (objects, Ephemeris.open(root, every_s, objects.norad_ids, objects.satrecs))
    return held[1]
