"""The report's words for an interval (issue 50): one run a side has no interval, and says
so, rather than printing ``0.1504 [0.1504, 0.1504]``."""

from __future__ import annotations

from bench.analysis import stats
from bench.report.sections.common import ratio_text


def test_a_degenerate_interval_is_said_as_such() -> None:
    one = stats.Verdict(stats.NOT_TESTED, "", ratio=0.1504, ci_low=0.1504, ci_high=0.1504)
    assert ratio_text(one) == "0.1504 (one run a side: no interval)"
    assert "no interval" in ratio_text(stats.Verdict(stats.NOT_TESTED, "", ratio=0.5))
    many = stats.Verdict(stats.FASTER, "", ratio=0.5, ci_low=0.45, ci_high=0.55)
    assert ratio_text(many) == "0.5000 [0.4500, 0.5500]"
