# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for the output of NVIDIA's nccl-tests.

The functions take the text a benchmark printed and return plain data (dicts, lists, strings, numbers); none
runs a command or touches ``AnsibleModule``. Text they cannot understand raises :class:`NcclTestsParseError`;
no other exception escapes.

Interface:

* ``parse_all_reduce_perf(text)``: the output of ``all_reduce_perf`` (the result table, the devices used and
  the ``Avg bus bandwidth`` line)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

__all__ = [
    "NcclTestsParseError",
    "parse_all_reduce_perf",
]


class NcclTestsParseError(ValueError):
    """The text is not output of the nccl-tests benchmark the parser reads."""


# A decimal as nccl-tests prints it (%7.1f, %6.2f): only what float() reads.
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
# A result row: size, count, type, redop, root, then time, algbw, busbw and #wrong out of place and in place.
_MEASUREMENT = r"((?:%s\s+){3}\d+)" % _NUMBER
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+%s\s+%s\s*$" % (_MEASUREMENT, _MEASUREMENT))
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(%s)" % _NUMBER)
_DEVICE = re.compile(r"^#\s+Rank\s+(\d+).*?device\s+(\d+)\s+\[(0x[0-9a-fA-F]+)\]\s+(.*?)\s*$")


def _measurement(columns):
    return {"time_us": float(columns[0]), "algbw_gbps": float(columns[1]), "busbw_gbps": float(columns[2]),
            "wrong": int(columns[3])}


def parse_all_reduce_perf(text):
    """Parses the output of nccl-tests' ``all_reduce_perf``.

    Returns ``rows`` (one per message size: ``size_bytes``, ``count``, ``type``, ``redop`` and the
    ``out_of_place`` and ``in_place`` measurements, each ``time_us``, ``algbw_gbps``, ``busbw_gbps`` and
    ``wrong``), ``ranks`` (the devices used: ``rank``, ``device``, ``bus``, ``name``), ``avg_busbw_gbps`` (the
    average nccl-tests prints, over every size), ``peak_busbw_gbps`` (the best busbw at the largest size, the
    figure to compare with what the fabric allows), ``largest_size_bytes`` and ``wrong`` (the sum of the
    #wrong columns: data that did not add up).

    Raises :class:`NcclTestsParseError` when ``text`` is not a string, or has no result row or no
    ``Avg bus bandwidth`` line (a failed run prints an NCCL error instead).
    """
    if not isinstance(text, str):
        raise NcclTestsParseError("expected the text all_reduce_perf printed, got %s" % type(text).__name__)
    rows, ranks, average = [], [], None
    for line in text.splitlines():
        row = _ROW.match(line)
        if row:
            rows.append({
                "size_bytes": int(row.group(1)), "count": int(row.group(2)), "type": row.group(3),
                "redop": row.group(4),
                "out_of_place": _measurement(row.group(6).split()),
                "in_place": _measurement(row.group(7).split()),
            })
            continue
        avg = _AVG.match(line)
        if avg:
            average = float(avg.group(1))
            continue
        device = _DEVICE.match(line)
        if device:
            ranks.append({"rank": int(device.group(1)), "device": int(device.group(2)),
                          "bus": device.group(3), "name": device.group(4)})
    if not rows or average is None:
        raise NcclTestsParseError("all_reduce_perf printed no result table or no 'Avg bus bandwidth' line: %s"
                                  % (text.strip().splitlines()[-1:] or ["(no output)"])[0])
    largest = max(rows, key=lambda r: r["size_bytes"])
    return {
        "rows": rows,
        "ranks": ranks,
        "avg_busbw_gbps": average,
        "peak_busbw_gbps": max(largest["out_of_place"]["busbw_gbps"], largest["in_place"]["busbw_gbps"]),
        "largest_size_bytes": largest["size_bytes"],
        "wrong": sum(r["out_of_place"]["wrong"] + r["in_place"]["wrong"] for r in rows),
    }
