"""sda.transforms.cssi: CelesTrak's CSSI space-weather files read into 3-hour intervals, hand-written files with
their intervals and refusals worked out by hand."""

from __future__ import annotations

import datetime as dt

import pytest

from sda.transforms import cssi

UTC = dt.timezone.utc
HEADER = [
    "DATATYPE CssiSpaceWeather",
    "VERSION 1.2",
    "UPDATED 2026 Nov 21 09:00:00 UTC",
    "# FORMAT(I4,I3,I3,I5,I3,8I3,I4,8I4,I4,F4.1,I2,I4,F6.1,I2,5F6.1)",
    "# yy mm dd BSRN ND Kp Kp Kp Kp Kp Kp Kp Kp Sum Ap  Ap  Ap  Ap  Ap  Ap  Ap  Ap  Avg Cp C9 ISN F10.7 Q Ctr81 "
    "Lst81 F10.7 Ctr81 Lst81",
]
OBS_19 = ("2026 11 19 2636  7 13 13 13 13 13 13 13 13 104   5   5   5   5   5   5   5   5   5 0.2 1  78 110.0 0 "
          "111.0 107.6 112.9 113.7 108.2")
OBS_20 = ("2026 11 20 2636  8 20 23 17 13 10 13 17 20 133   7   9   6   5   4   5   6   7   6 0.3 1  78 110.0 0 "
          "111.0 107.6 112.9 113.7 108.2")
PRED_21 = ("2026 11 21 2636  9 30 37 73 13 13 13 13 13 205  15  22 280   5   5   5   5   5  43 1.4 6  78 105.0   "
           "110.7 107.5 107.8 113.5 108.2")
PRED_22 = ("2026 11 22 2636 10 13 13 13 13 13 13 13 13 104   5   5   5   5   5   5   5   5   5 0.2 1  78 105.0   "
           "110.7 107.4 107.9 113.5 108.2")
MONTH_12 = ("2026 12 01 2636 10" + " " * 72 + "  75 116.5   110.6 107.4 119.8 113.5 108.4")
# the brief's excerpt of SW-Last5Years.txt: lines 0-4 header, 5-9 OBSERVED, 10 blank, 11-15 DAILY_PREDICTED,
# 16 blank, 17-20 MONTHLY_PREDICTED
EXAMPLE = [*HEADER, "NUM_OBSERVED_POINTS 2", "BEGIN OBSERVED", OBS_19, OBS_20, "END OBSERVED", "",
           "NUM_DAILY_PREDICTED_POINTS 2", "BEGIN DAILY_PREDICTED", PRED_21, PRED_22, "END DAILY_PREDICTED", "",
           "NUM_MONTHLY_PREDICTED_POINTS 1", "BEGIN MONTHLY_PREDICTED", MONTH_12, "END MONTHLY_PREDICTED"]


def _file(lines: list[str], end: str = "\n") -> bytes:
    return (end.join(lines) + end).encode()


def _at(day: int, hour: int) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, tzinfo=UTC)


def _summary(parsed: cssi.CssiFile) -> list[tuple]:
    return [(iv.start, iv.kp, iv.ap, iv.observed, iv.section, iv.record_no) for iv in parsed.intervals]


def _refused(parsed: cssi.CssiFile) -> list[tuple[int, str]]:
    return [(r.record_no, r.reason) for r in parsed.records if r.reason is not None]


@pytest.mark.parametrize("kp_x10, kp", [(0, 0.0), (3, 1 / 3), (7, 2 / 3), (10, 1.0), (13, 4 / 3), (17, 5 / 3),
                                        (20, 2.0), (47, 14 / 3), (50, 5.0), (73, 22 / 3), (90, 9.0)])
def test_kp_is_the_tenths_rounded_to_thirds(kp_x10, kp):
    assert cssi.kp_value(kp_x10) == pytest.approx(kp, abs=1e-12)


def test_the_example_file_gives_eight_intervals_per_daily_line():
    parsed = cssi.parse(_file(EXAMPLE))
    assert parsed.issued == dt.datetime(2026, 11, 21, 9, tzinfo=UTC)
    assert _refused(parsed) == []
    assert [r.text for r in parsed.records] == EXAMPLE  # every line kept, as landed
    # 2026-11-20 (line 8): Kp 2o 2+ 2- 1+ 1o 1+ 2- 2o, ap 7 9 6 5 4 5 6 7, all ended by 09:00 on the 21st
    kp_20 = [2.0, 7 / 3, 5 / 3, 4 / 3, 1.0, 4 / 3, 5 / 3, 2.0]
    ap_20 = [7, 9, 6, 5, 4, 5, 6, 7]
    # 2026-11-21 (line 13): 00-03, 03-06 and 06-09 ended by 09:00 (observed); 09-12 and later are forecasts
    kp_21 = [3.0, 11 / 3, 22 / 3] + [4 / 3] * 5
    ap_21 = [15, 22, 280, 5, 5, 5, 5, 5]
    expected = (
        [(_at(19, 3 * i), 4 / 3, 5, True, "OBSERVED", 7) for i in range(8)]
        + [(_at(20, 3 * i), kp_20[i], ap_20[i], True, "OBSERVED", 8) for i in range(8)]
        + [(_at(21, 3 * i), kp_21[i], ap_21[i], i < 3, "DAILY_PREDICTED", 13) for i in range(8)]
        + [(_at(22, 3 * i), 4 / 3, 5, False, "DAILY_PREDICTED", 14) for i in range(8)]
    )
    assert _summary(parsed) == expected  # Kp n/3 exactly as written out above
    day_21 = [iv for iv in parsed.intervals if iv.start.day == 21]
    assert day_21[0].kp_x10 == 30 and day_21[2].kp_x10 == 73
    assert day_21[0].end == _at(21, 3) and day_21[7].end == _at(22, 0)
    assert {iv.ap_daily for iv in day_21} == {43}
    assert day_21[0].flux == {"f107_adj": 105.0, "f107_adj_ctr81": 110.7, "f107_adj_lst81": 107.5,
                              "f107_obs": 107.8, "f107_obs_ctr81": 113.5, "f107_obs_lst81": 108.2}
    assert {iv.issued for iv in parsed.intervals} == {parsed.issued}


@pytest.mark.parametrize("updated, observed_on_21", [
    ("2026 Nov 21 08:59:59", 2),  # 06-09 has not ended yet
    ("2026 Nov 21 09:00:00", 3),  # ...now it has: an interval ending at the issue time is observed
    ("2026 Nov 21 11:59:59", 3),
    ("2026 Nov 21 12:00:00", 4),
    ("2026 Nov 20 23:00:00", 0),  # issued the day before: the 20th's last interval (21-24) is a forecast too
])
def test_an_interval_is_observed_once_it_has_ended_by_the_issue_time(updated, observed_on_21):
    lines = [line.replace("2026 Nov 21 09:00:00", updated) for line in EXAMPLE]
    parsed = cssi.parse(_file(lines))
    on_21 = [iv.observed for iv in parsed.intervals if iv.start.day == 21]
    assert on_21 == [True] * observed_on_21 + [False] * (8 - observed_on_21)
    on_20 = [iv.observed for iv in parsed.intervals if iv.start.day == 20]
    assert on_20 == ([True] * 7 + [False] if updated.startswith("2026 Nov 20") else [True] * 8)


def test_what_real_files_hold_is_tolerated():
    """CRLF line ends, a byte-order mark, blanks around lines, blank and comment lines inside sections, a Q flag
    blank in an observed line, trailing blank lines: the same intervals as the clean file."""
    clean = cssi.parse(_file(EXAMPLE))
    lines = list(EXAMPLE)
    lines[0] = "\ufeff" + lines[0]
    lines[2] = "  " + lines[2] + "   "
    lines[7] = OBS_19.replace(" 110.0 0 ", " 110.0   ") + "  "  # Q blank: 32 fields
    lines[8:8] = ["", "# a comment inside a section"]
    messy = cssi.parse(("\r\n".join(lines) + "\r\n\r\n  \r\n").encode())
    assert _refused(messy) == []
    assert [(iv.start, iv.kp_x10, iv.ap, iv.observed, iv.flux) for iv in messy.intervals] == \
        [(iv.start, iv.kp_x10, iv.ap, iv.observed, iv.flux) for iv in clean.intervals]
    assert len(messy.records) == len(lines)  # the trailing blank lines are no records


BAD = [
    *HEADER,                                                                           # 0-4
    "NUM_OBSERVED_POINTS 6",                                                           # 5: one line too many
    "BEGIN OBSERVED",                                                                  # 6
    OBS_19,                                                                            # 7
    OBS_20.replace("  78 110.0 0 ", "  78 "),                                          # 8: 31 fields
    OBS_20.replace(" 23 17 ", " 2x 17 "),                                              # 9: not an integer
    OBS_20.replace("2026 11 20", "2026 02 30"),                                        # 10: impossible date
    OBS_20.replace(" 20 23 17 ", " 20 23 95 "),                                        # 11: Kp 9.5
    "END OBSERVED",                                                                    # 12
    "WHATEVER 1",                                                                      # 13: not a keyword
    "BEGIN DAILY_PREDICTED",                                                           # 14
    PRED_21.replace(" 280 ", " 401 "),                                                 # 15: ap above 400
    PRED_22,                                                                           # 16
    PRED_22.replace(" 13 13 13 13 13 13 13 13 104", " 20 20 20 20 20 20 20 20 160"),  # 17: the 22nd again
    OBS_19,                                                                            # 18: the 19th again
    PRED_22.replace("110.7 107.4 107.9", "110.7 -07.4 107.9"),                         # 19: negative flux
    "END DAILY_PREDICTED",                                                             # 20
]


def test_each_bad_line_is_refused_with_why_and_the_good_lines_are_taken():
    parsed = cssi.parse(_file(BAD))
    assert _refused(parsed) == [
        (5, "CSSI line 6: NUM_OBSERVED_POINTS 6, but section OBSERVED has 5 data line(s)"),
        (8, "CSSI line 9: 31 fields: a line of section OBSERVED has 33 (32 with the Q flag blank)"),
        (9, "CSSI line 10: field kp2 is not an integer: '2x'"),
        (10, "CSSI line 11: impossible date 2026-02-30"),
        (11, "CSSI line 12: kp3 = 95: Kp x 10 outside 0-90 (Kp 0-9)"),
        (13, "CSSI line 14: not a header keyword, comment or blank, outside a BEGIN/END section"),
        (15, "CSSI line 16: ap3 = 401: outside 0-400"),
        (17, "CSSI line 18: 2026-11-22 is given twice (first on line 17)"),
        (18, "CSSI line 19: 2026-11-19 is given twice (first on line 8)"),
        (19, "CSSI line 20: f107_adj_lst81 = -7.4: a flux is not negative"),
    ]
    assert sorted({(iv.start.day, iv.record_no) for iv in parsed.intervals}) == [(19, 7), (22, 16)]
    refused = dict(_refused(parsed))
    assert all((r.text is None) == (r.record_no in refused) for r in parsed.records)
    assert parsed.records[8].raw == BAD[8].encode()  # the line as landed goes to quarantine


def test_without_an_updated_time_no_data_line_can_be_judged():
    parsed = cssi.parse(_file([line for line in EXAMPLE if not line.startswith("UPDATED")]))
    reason = ("no readable UPDATED line: the file's issue time, which tells observed values from forecast ones, "
              "is unknown")
    # the data lines (the header moved up one line): 6, 7 (OBSERVED), 12, 13 (DAILY), 18 (MONTHLY)
    assert _refused(parsed) == [(no, f"CSSI line {no + 1}: {reason}") for no in (6, 7, 12, 13, 18)]
    assert parsed.issued is None and parsed.intervals == []


@pytest.mark.parametrize("line, reason", [
    ("UPDATED 2026 Nov 31 09:00:00 UTC", "UPDATED time not readable (as in 'UPDATED 2026 Nov 21 09:00:00 UTC')"),
    ("UPDATED 21/11/2026 09:00", "UPDATED time not readable (as in 'UPDATED 2026 Nov 21 09:00:00 UTC')"),
    ("DATATYPE CssiSolarFlux", "'DATATYPE CssiSolarFlux': not a CSSI space-weather file (DATATYPE CssiSpaceWeather)"),
])
def test_a_bad_header_line_is_refused(line, reason):
    keyword = line.split()[0]
    lines = [line if existing.startswith(keyword) else existing for existing in EXAMPLE]
    parsed = cssi.parse(_file(lines))
    no = 2 if keyword == "UPDATED" else 0
    assert _refused(parsed)[0] == (no, f"CSSI line {no + 1}: {reason}")
    assert (parsed.intervals == []) == (keyword == "UPDATED")  # a bad DATATYPE line alone: the data still reads


def test_a_line_that_is_not_utf8_is_refused():
    data = _file(EXAMPLE).replace(b"# FORMAT", b"# \xff FORMAT")
    parsed = cssi.parse(data)
    assert _refused(parsed) == [(3, "CSSI line 4: not valid UTF-8")]
    assert len(parsed.intervals) == 32


def test_the_interval_table_has_the_silver_columns():
    parsed = cssi.parse(_file(EXAMPLE))
    table = cssi.interval_table(parsed, "space_weather/SW-20261121T0900Z.txt", "abc", lambda no: f"id-{no}")
    assert table.num_rows == 32
    assert table.column_names == ["interval_start", "interval_end", "kp", "kp_x10", "ap", "ap_daily", "f107_adj",
                                  "f107_adj_ctr81", "f107_adj_lst81", "f107_obs", "f107_obs_ctr81", "f107_obs_lst81",
                                  "observed", "issued", "section", "source_file", "source_sha256", "record_no",
                                  "bronze_id"]
    row = table.slice(18, 1).to_pylist()[0]  # 2026-11-21 06-09: Kp 7+, observed by 09:00
    assert row == {"interval_start": _at(21, 6), "interval_end": _at(21, 9), "kp": pytest.approx(22 / 3),
                   "kp_x10": 73, "ap": 280, "ap_daily": 43, "f107_adj": 105.0, "f107_adj_ctr81": 110.7,
                   "f107_adj_lst81": 107.5, "f107_obs": 107.8, "f107_obs_ctr81": 113.5, "f107_obs_lst81": 108.2,
                   "observed": True, "issued": _at(21, 9), "section": "DAILY_PREDICTED",
                   "source_file": "space_weather/SW-20261121T0900Z.txt", "source_sha256": "abc", "record_no": 13,
                   "bronze_id": "id-13"}
