"""Earth-orientation parameters from CelesTrak's EOP file, for :class:`sda.orbit.frames.Eop`.

Source: https://celestrak.org/SpaceData/EOP-All.csv (format: https://celestrak.org/SpaceData/EOP-format.php),
one row per UTC day at 0h, observed (``DATA_TYPE`` O) then predicted (P) values::

    DATE,MJD,X,Y,UT1-UTC,LOD,DPSI,DEPS,DX,DY,DAT,DATA_TYPE
    2000-01-01,51544,0.043282,0.377909,0.3553880,0.0009536,-0.050263,-0.002471,-0.000005,-0.000050,32,O

Only MJD, X, Y (pole coordinates, arcsec), UT1-UTC (s) and DAT (TAI-UTC, s) are used; other columns
and blank fields in them are ignored. Download the file yourself (it is updated daily; nothing here
touches the network) and load it with :meth:`EopTable.from_csv`::

    table = EopTable.from_csv("EOP-All.csv")
    r_itrf, v_itrf = frames.teme_to_ecef(r, v, t, eop=table.at(t))

Values between rows are interpolated linearly in time. UT1-UTC jumps by ~1 s at a leap second, so
it is interpolated as UT1-TAI (= UT1-UTC - DAT, smooth) and the DAT in force at the instant (that of
the row starting the UTC day) is added back. Without a DAT column, jumps of more than 0.5 s between
consecutive rows are taken to be leap seconds (UT1-UTC otherwise changes by a few ms a day).
Times outside the table raise ``ValueError``.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from typing import IO

import numpy as np

from sda.orbit.frames import Eop

UNIX_EPOCH_MJD = 40587.0  # 1970-01-01 0h UTC


def unix_to_mjd(unix_s) -> np.ndarray:
    """Unix seconds (UTC) -> Modified Julian Date (UTC)."""
    return np.asarray(unix_s, dtype=float) / 86400.0 + UNIX_EPOCH_MJD


@dataclass(frozen=True, eq=False)
class EopTable:
    """Daily EOP rows, sorted by MJD: pole coordinates (arcsec), UT1-UTC (s), TAI-UTC (s)."""

    mjd: np.ndarray
    xp_arcsec: np.ndarray
    yp_arcsec: np.ndarray
    dut1_s: np.ndarray
    dat_s: np.ndarray

    @classmethod
    def from_csv(cls, source: str | os.PathLike | IO[str]) -> EopTable:
        """Read a CelesTrak EOP CSV from a path or an open text file."""
        if hasattr(source, "read"):
            return cls._parse(source)  # type: ignore[arg-type]
        with open(source, newline="", encoding="utf-8") as fh:
            return cls._parse(fh)

    @classmethod
    def from_csv_text(cls, text: str) -> EopTable:
        """Parse CelesTrak EOP CSV content held in a string."""
        return cls._parse(io.StringIO(text))

    @classmethod
    def _parse(cls, fh: IO[str]) -> EopTable:
        reader = csv.DictReader(fh)
        fields = {name.strip().upper(): name for name in (reader.fieldnames or [])}
        missing = {"MJD", "X", "Y", "UT1-UTC"} - fields.keys()
        if missing:
            raise ValueError(f"EOP CSV lacks column(s) {sorted(missing)}; header is {reader.fieldnames}")
        rows = []
        for line in reader:
            values = [line.get(fields[c], "") or "" for c in ("MJD", "X", "Y", "UT1-UTC")]
            if any(not v.strip() for v in values):
                continue  # blank or incomplete row
            dat = (line.get(fields["DAT"], "") or "").strip() if "DAT" in fields else ""
            rows.append([float(v) for v in values] + [float(dat) if dat else np.nan])
        if len(rows) < 2:
            raise ValueError("EOP CSV has fewer than two usable rows")
        a = np.array(rows, dtype=float)
        a = a[np.argsort(a[:, 0], kind="stable")]
        if np.any(np.diff(a[:, 0]) <= 0):
            raise ValueError("EOP CSV has duplicate MJD rows")
        dut1, dat = a[:, 3], a[:, 4]
        if np.any(np.isnan(dat)):
            # no (complete) DAT column: count the leap seconds from the jumps in UT1-UTC
            jumps = np.round(np.diff(dut1))
            dat = np.concatenate([[0.0], np.cumsum(np.where(np.abs(np.diff(dut1)) > 0.5, jumps, 0.0))])
        return cls(mjd=a[:, 0], xp_arcsec=a[:, 1], yp_arcsec=a[:, 2], dut1_s=dut1, dat_s=dat)

    def at(self, unix_s) -> Eop:
        """EOP at UTC unix seconds (scalar or array): linear interpolation between the daily rows,
        UT1-UTC through UT1-TAI across leap seconds. Returns an :class:`Eop` of floats for a scalar
        time, of arrays shaped like ``unix_s`` otherwise."""
        mjd = unix_to_mjd(unix_s)
        lo, hi = self.mjd[0], self.mjd[-1]
        if np.any((mjd < lo) | (mjd > hi)) or np.any(np.isnan(mjd)):
            raise ValueError(f"time(s) outside the EOP table (MJD {lo:.0f} to {hi:.0f})")
        xp = np.interp(mjd, self.mjd, self.xp_arcsec)
        yp = np.interp(mjd, self.mjd, self.yp_arcsec)
        ut1_tai = np.interp(mjd, self.mjd, self.dut1_s - self.dat_s)
        day = np.searchsorted(self.mjd, mjd, side="right") - 1  # the row whose UTC day holds the instant
        dut1 = ut1_tai + self.dat_s[day]
        if np.ndim(mjd) == 0:
            return Eop(dut1_s=float(dut1), xp_arcsec=float(xp), yp_arcsec=float(yp))
        return Eop(dut1_s=dut1, xp_arcsec=xp, yp_arcsec=yp)
