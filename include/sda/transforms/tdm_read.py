"""CCSDS Tracking Data Messages (TDM, CCSDS 503.0-B-2) landed under ``tdm/``: a file -> its bronze records.

Ingest's half (plain Python, on the driver). The whole message is first parsed and validated by
``ccsds-ndm`` (a maintained parser: it refuses unknown keywords, bad values and a broken block
structure); a file it refuses goes to quarantine whole, with the parser's reason and the line
(1-based, as an editor shows it; the quarantine's ``record_no`` is that line, 0-based).

The parser is stricter than the standard in places, so a KVN message is first brought to the form it
accepts (:func:`normalise`), keeping a map from its lines to the landed file's, so every reason names
the line of the file as landed:

* blank lines are left out of the text validated (the parser refuses one between META_STOP and
  DATA_START; the standard allows them anywhere); the text read keeps every line;
* blanks before and after the content of a line are removed. The KVN syntax of CCSDS 503.0-B-2 (as
  of 502.0) lets blanks precede and follow keywords, values and whole lines without meaning anything;
  ``ccsds-ndm`` 0.0.9 refuses an indented header line and a block marker followed by blanks;
* tabs are read as blanks. KVN has none (only printable ASCII and blanks), but files indented with
  tabs are common: such a file is read *leniently* -- :func:`read` says so, and ingest counts it in
  the run report -- and so is one starting with a UTF-8 byte-order mark, which is removed (an XML
  message may start with one: removed, not counted);
* ``REFERENCE_FRAME`` values outside the parser's list (version 2.0 takes them from the SANA registry:
  GCRF, TEME, ...) are validated as if ``EME2000`` and kept as written in the records: normalize
  refuses per measurement the frames it cannot rotate, naming them.

COMMENT lines in the header, metadata and data, versions 1.0 and 2.0 and day-of-year epochs the
parser takes as the standard does. An XML message is validated as landed (XML has its own
white-space rules), except for the frame names.

An accepted message is split into one bronze record per *measurement*: the data lines of one
segment that share an epoch (a radar's RANGE, ANGLE_1, ANGLE_2 and DOPPLER_INSTANTANEOUS at one
instant are one measurement, as one detection in the project's radar format). Each record carries
its segment's metadata and the message header as written, so normalize interprets a record alone
(:mod:`sda.transforms.tdm`), and a measurement is one bronze row (one ``bronze_id``) -- never a
"frame" of several objects. The payload is JSON::

    {"format": "KVN", "version": "2.0", "header": {"ORIGINATOR": ...}, "segment": 0,
     "metadata": {"TIME_SYSTEM": "UTC", "PARTICIPANT_1": ..., ...},
     "lines": [[17, "RANGE", "2026-11-21T06:00:01.253", "1234.5"], ...]}

``lines`` holds each data line's 0-based line number, keyword, epoch and value *as written* (no
unit converted, nothing dropped: keywords the envelope does not carry stay in bronze too).
``record_no`` is the 0-based line of the measurement's first data line. Nothing here judges whether
the pipeline supports what a message declares (time system, path, units): normalize does, so a
later version that supports more can replay bronze.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from xml.parsers import expat

KVN_LINE = re.compile(r"^\s*([A-Za-z0-9_]+)\s*=\s*(.*?)\s*$")
HEADER_KEYS = ("CCSDS_TDM_VERS", "CREATION_DATE", "ORIGINATOR", "MESSAGE_ID")
LINE_RE = re.compile(r"at line (\d+)")
# the frames ccsds-ndm 0.0.9 takes (version 1.0's list); others are validated as EME2000, see normalise
PARSER_FRAMES = ("EME2000", "ICRF", "ITRF2000", "ITRF-93", "ITRF-97", "TOD")
KVN_FRAME = re.compile(r"^(REFERENCE_FRAME\s*=\s*)(\S+)$")
XML_FRAME = re.compile(r"(<REFERENCE_FRAME>)\s*([^<]*?)\s*(</REFERENCE_FRAME>)")


@dataclass
class Segment:
    metadata: dict[str, str] = field(default_factory=dict)
    lines: list[tuple[int, int, str, str, str]] = field(default_factory=list)  # (line, column, keyword, epoch, value)


@dataclass
class Message:
    format: str  # KVN | XML
    header: dict[str, str]
    segments: list[Segment]


def detect_format(text: str) -> str:
    return "XML" if text.lstrip("\ufeff \t\r\n").startswith("<") else "KVN"


def _lines_text(numbers: list[int]) -> str:
    """0-based line numbers -> "line 3" / "lines 2-9" / "lines 2-9, 12 and 3 more" (1-based)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [f"{a + 1}" if a == b else f"{a + 1}-{b + 1}" for a, b in runs]
    more = f" and {len(parts) - 3} more" if len(parts) > 3 else ""
    return ("line " if len(numbers) == 1 else "lines ") + ", ".join(parts[:3]) + more


def normalise(text: str, fmt: str) -> tuple[str, str, list[int] | None, str | None]:
    """(the text to read, the text to validate, the 0-based landed line of each line validated -- None:
    the same --, what was read leniently or None): see the module's docstring. The text to read has
    the landed text's lines, one for one."""
    lenient = []
    if text.startswith("\ufeff"):
        text = text[1:]
        if fmt == "KVN":
            lenient.append("a UTF-8 byte-order mark before line 1 (removed)")
    if fmt == "XML":
        checked = XML_FRAME.sub(lambda m: m.group(0) if m.group(2) in PARSER_FRAMES
                                else m.group(1) + "EME2000" + m.group(3), text)
        return text, checked, None, "; ".join(lenient) or None
    lines = text.split("\n")
    tabs = [no for no, line in enumerate(lines) if "\t" in line]
    if tabs:
        lenient.append(f"tabs read as blanks on {_lines_text(tabs)} (KVN allows blanks only)")
    clean = [line.replace("\t", " ").strip(" \r") for line in lines]
    kept = [no for no, line in enumerate(clean) if line]
    checked = [KVN_FRAME.sub(lambda m: m.group(0) if m.group(2) in PARSER_FRAMES else m.group(1) + "EME2000",
                             clean[no]) for no in kept]
    return "\n".join(clean), "\n".join(checked), kept, "; ".join(lenient) or None


def validate(text: str, fmt: str, line_map: list[int] | None = None) -> tuple[str, int] | None:
    """(reason, 0-based line) when ``ccsds-ndm`` refuses the message, None when it accepts it.
    ``line_map``: the landed line of each line of ``text`` (:func:`normalise`), for the reason."""
    import ccsds_ndm

    def landed(no: int) -> int:  # 0-based, in text -> 0-based, in the landed file
        return line_map[no] if line_map and 0 <= no < len(line_map) else no

    try:
        ccsds_ndm.Tdm.from_str(text, fmt.lower())
    except Exception as exc:  # the library raises ValueError subclasses; any refusal is the file's
        message = " ".join(str(exc).split())
        message = LINE_RE.sub(lambda m: f"at line {landed(int(m.group(1)) - 1) + 1}", message)
        return f"TDM refused by ccsds-ndm: {message}", landed(_error_line(text, message, line_map))
    return None


def _error_line(text: str, message: str, line_map: list[int] | None = None) -> int:
    """The 0-based line of ``text`` a parser message points at: its own "at line N" (already a landed
    line number where ``line_map`` is given), else the first line holding a token the message quotes
    (a field name or a value), else 0."""
    found = LINE_RE.search(message)
    if found:
        landed = max(0, int(found.group(1)) - 1)
        return line_map.index(landed) if line_map and landed in line_map else landed
    lines = text.split("\n")
    for token in re.findall(r"['\"`]([^'\"`]{1,80})['\"`]", message):
        for no, line in enumerate(lines):
            if token in line:
                return no
    return 0


def read_kvn(text: str) -> Message:
    """A validated KVN message -> header, and per segment its metadata and data lines with line numbers."""
    header: dict[str, str] = {}
    segments: list[Segment] = []
    block = "header"
    for no, line in enumerate(text.split("\n")):
        stripped = line.strip().lstrip("\ufeff")
        if not stripped or stripped.startswith("COMMENT"):
            continue
        if stripped in ("META_START", "DATA_START", "META_STOP", "DATA_STOP"):
            if stripped == "META_START":
                segments.append(Segment())
            block = {"META_START": "meta", "DATA_START": "data"}.get(stripped, "between")
            continue
        m = KVN_LINE.match(stripped)
        if not m:
            continue  # the validating parser accepted it: nothing the records need
        key, value = m.group(1).upper(), m.group(2)
        if block == "header":
            header[key] = value
        elif block == "meta":
            segments[-1].metadata[key] = value
        elif block == "data":
            parts = value.split()
            segments[-1].lines.append((no, 0, key, parts[0] if parts else "", " ".join(parts[1:])))
    return Message("KVN", header, segments)


def read_xml(text: str) -> Message:
    """A validated XML message -> the same as :func:`read_kvn` (line of each ``<observation>``)."""
    header: dict[str, str] = {}
    segments: list[Segment] = []
    stack: list[str] = []
    chars: list[str] = []
    obs: dict = {}
    parser = expat.ParserCreate()

    def start(name: str, attrs: dict) -> None:
        tag = name.rsplit(":", 1)[-1]
        stack.append(tag)
        chars.clear()
        if tag == "tdm":
            header["CCSDS_TDM_VERS"] = attrs.get("version", "")
        elif tag == "segment":
            segments.append(Segment())
        elif tag == "observation":
            obs.clear()
            obs.update(line=parser.CurrentLineNumber - 1, column=parser.CurrentColumnNumber)

    def end(name: str) -> None:
        tag = stack.pop()
        value = "".join(chars).strip()
        chars.clear()
        parent = stack[-1] if stack else ""
        if tag == "COMMENT":
            return
        if parent == "header":
            header[tag] = value
        elif parent == "metadata":
            segments[-1].metadata[tag] = value
        elif parent == "observation":
            obs["EPOCH" if tag == "EPOCH" else "keyword"] = value if tag == "EPOCH" else tag
            if tag != "EPOCH":
                obs["value"] = value
        elif tag == "observation":
            segments[-1].lines.append((obs["line"], obs["column"], obs.get("keyword", ""), obs.get("EPOCH", ""),
                                       obs.get("value", "")))

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars.append
    parser.Parse(text.encode("utf-8"), True)
    return Message("XML", header, segments)


def measurements(message: Message) -> list[tuple[int, str, str]]:
    """(record number, record identity, JSON payload) per measurement -- a segment's data lines sharing
    an epoch (as written) -- in file order. The identity is the line, or line:column where an XML
    message puts several observations on one line."""
    out = []
    for index, segment in enumerate(message.segments):
        groups: dict[str, list[tuple[int, int, str, str, str]]] = {}
        for line in segment.lines:
            groups.setdefault(line[3], []).append(line)
        for lines in groups.values():
            first = lines[0]
            payload = {"format": message.format, "version": message.header.get("CCSDS_TDM_VERS", ""),
                       "header": {k: v for k, v in message.header.items() if k != "CCSDS_TDM_VERS"},
                       "segment": index, "metadata": segment.metadata,
                       "lines": [[no, keyword, epoch, value] for no, _, keyword, epoch, value in lines]}
            ident = str(first[0]) if message.format == "KVN" else f"{first[0]}:{first[1]}"
            out.append((first[0], ident, json.dumps(payload, separators=(",", ":"))))
    return out


def read(data: bytes) -> tuple[list[tuple[int, str, str]], tuple[str, int] | None, str | None]:
    """A landed TDM file -> (its measurements as :func:`measurements`, None, what was read leniently or
    None), or ([], (reason, 0-based line), None) when the whole file is refused. Never raises: a file
    this cannot read is refused with why."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n")
        return [], (f"TDM line {line + 1}: not valid UTF-8", line), None
    fmt = detect_format(text)
    text, checked, line_map, lenient = normalise(text, fmt)
    refused = validate(checked, fmt, line_map)
    if refused:
        reason, line = refused
        return [], (f"TDM line {line + 1}: {reason}", line), None
    try:
        message = read_kvn(text) if fmt == "KVN" else read_xml(text)
    except expat.ExpatError as exc:
        return [], (f"TDM line {exc.lineno}: not well-formed XML ({expat.errors.messages[exc.code]})",
                    exc.lineno - 1), None
    except Exception as exc:  # noqa: BLE001 -- a file this code cannot split must not stop the batch
        return [], (f"TDM line 1: could not be split into records ({type(exc).__name__}: {exc})", 0), None
    records = measurements(message)
    if not records:
        return [], ("TDM line 1: the message holds no data lines", 0), None
    return records, None, lenient
