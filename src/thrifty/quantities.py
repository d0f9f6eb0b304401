# SPDX-License-Identifier: MIT
"""Times and money as people read them: one formatter each, for the command line and for the
messages the library raises (a plan that no configuration meets says how near the best came)."""

import math
from collections.abc import Callable


def fmt_duration(seconds: float, digits: int = 3) -> str:
    """`digits` significant digits in ms, s, min or h, the unit chosen after rounding (0.9996 s is 1 s);
    hours past 10^digits in whole hours with thousands separators, never in exponent form."""
    if not math.isfinite(seconds):
        return "-"
    for limit, scale, unit in ((1, 1e3, "ms"), (120, 1, "s"), (7200, 1 / 60, "min")):
        if float(f"{seconds:.3g}") < limit:
            return f"{seconds * scale:.{digits}g} {unit}"
    hours = float(f"{seconds / 3600:.{digits}g}")
    return f"{hours:,.0f} h" if hours >= 10**digits else f"{seconds / 3600:.{digits}g} h"  # 2,870 h, not 2.87e+03 h


def told_apart(fmt: Callable[..., str], asked: float, reached: float) -> tuple[str, str]:
    """Two values in `fmt` (fmt_duration, fmt_usd) with as many more digits as they need to print
    differently (up to 8): a limit asked for and the nearest value reached must not read alike
    ("the budget of $0.000621: the cheapest costs $0.000621")."""
    for digits in range(3, 9):
        pair = (fmt(asked, digits=digits), fmt(reached, digits=digits))
        if pair[0] != pair[1]:
            break
    return pair


def fmt_usd(dollars: float, digits: int = 2) -> str:
    """$12.34 from a dollar up; below, `digits` significant digits in plain decimals ($0.52,
    $0.070, $0.0052, $0.00000041; below $1e-8 in powers of ten, $6.7e-14), so that $0.0052 and $0.0079 do not both print as $0.01. The
    plan's point costs take 3 (plan.ties: a resolution as fine as 1% must not print alike)."""
    if not math.isfinite(dollars):
        return "-"
    sign, dollars = ("-" if dollars < 0 else ""), abs(dollars)
    rounded = float(f"{dollars:.{digits}g}")
    if rounded >= 1 or dollars == 0:
        return f"{sign}${dollars:,.2f}"
    if rounded < 1e-8:  # a new user's pass: --budget 1e-300 printed 300 zeros
        return f"{sign}${rounded:.{digits - 1}e}"
    decimals = digits - 1 - math.floor(math.log10(rounded))  # significant digits, after rounding
    return f"{sign}${rounded:.{decimals}f}"


def _outward(dollars: float, up: bool, digits: int = 2) -> float:
    """`dollars` rounded down (or up) to what fmt_usd prints: cents from a dollar up, else `digits`
    significant digits (the product is rounded to 9 decimals first: 0.07 x 100 is 7.000000000000001)."""
    if dollars <= 0 or not math.isfinite(dollars):
        return dollars
    scale = 100.0 if dollars >= 1 else 10.0 ** (digits - 1 - math.floor(math.log10(dollars)))
    return (math.ceil if up else math.floor)(round(dollars * scale, 9)) / scale


def fmt_usd_bound(dollars: float, up: bool) -> str:
    """One end of an interval as fmt_usd prints it, rounded outward: a low end down, a high end up."""
    return fmt_usd(_outward(dollars, up))


def fmt_usd_range(low: float, high: float) -> str:
    """'$0.07-0.16': one dollar sign for both ends, rounded outward (low down, high up) so that the
    printed interval holds every value it holds, the point estimate printed beside it to more
    digits included ($0.00124 in $0.0012-0.0013, not '$0.0012-0.0012'); '>= $1.20' when the top
    is unbounded."""
    if not math.isfinite(high):
        return f">= {fmt_usd_bound(low, up=False)}"
    low_text, high_text = fmt_usd_bound(low, up=False), fmt_usd_bound(high, up=True).lstrip("$")
    return f"{low_text}{' to ' if 'e' in low_text + high_text else '-'}{high_text}"  # not $1.0e-09-3.0e-09
