# SPDX-License-Identifier: MIT
"""The shared parsers and number formats of the CLI."""

import math

import pytest

from thrifty.cli.common import fmt_duration, fmt_usd, fmt_usd_bound, fmt_usd_range, parse_duration_s, parse_money_usd
from thrifty.errors import ThriftyError
from thrifty.quantities import told_apart


@pytest.mark.parametrize("seconds, text", [(0.0004, "0.4 ms"), (0.9996, "1 s"), (1.5, "1.5 s"),
                                           (119.96, "2 min"), (7199, "2 h"), (90_000, "25 h"),
                                           (math.inf, "-")])
def test_durations_pick_their_unit_after_rounding(seconds, text):
    assert fmt_duration(seconds) == text


@pytest.mark.parametrize("dollars, text", [(12.345, "$12.35"), (1234.5, "$1,234.50"), (0.999, "$1.00"),
                                           (0.52, "$0.52"), (0.5, "$0.50"), (0.07, "$0.070"), (0.00999, "$0.010"),
                                           (0.0052, "$0.0052"), (0.0079, "$0.0079"),
                                           (0.0041, "$0.0041"), (4.1e-7, "$0.00000041"), (0.0, "$0.00"),
                                           (6.7e-14, "$6.7e-14"), (1e-300, "$1.0e-300"),  # a pass: 300 zeros
                                           (-3.2, "-$3.20"), (math.nan, "-")])
def test_money_in_plain_decimals(dollars, text):
    """Below a dollar two significant digits. Mutation caught: cents from a cent up (a user's $0.0052,
    $0.0060 and $0.0079 all printed as $0.01, and an interval [0.0043, 0.0051] as $0.0043-0.01)."""
    assert fmt_usd(dollars) == text


@pytest.mark.parametrize("dollars, text", [(0.001599, "$0.00160"), (0.001617, "$0.00162"), (0.1252, "$0.125"),
                                           (0.999, "$0.999"), (0.9996, "$1.00"), (12.345, "$12.35")])
def test_plan_costs_take_three_significant_digits(dollars, text):
    """The plan's tables tell costs 1% apart (plan.ties.PRINTED_LOG). Mutation caught: two digits
    (a user's rows at $0.001599, $0.001617 and $0.001637 all printed as $0.0016)."""
    assert fmt_usd(dollars, digits=3) == text


def test_a_limit_and_the_nearest_value_never_read_alike():
    """A review: "the budget of $0.000621: the cheapest costs $0.000621". Mutation caught: three
    digits whatever the values."""
    assert told_apart(fmt_usd, 0.0006212, 0.0006214) == ("$0.0006212", "$0.0006214")
    assert told_apart(fmt_duration, 3600.0, 3603.0) == ("60 min", "60.05 min")
    assert told_apart(fmt_usd, 0.5, 0.75) == ("$0.500", "$0.750")


def test_a_money_range_has_one_dollar_sign():
    assert fmt_usd_range(0.07, 0.16) == "$0.070-0.16"
    assert fmt_usd_range(0.0043, 0.0051) == "$0.0043-0.0051"
    assert fmt_usd_range(1.2, math.inf) == ">= $1.20"
    assert fmt_usd_range(1e-12, 3e-12) == "$1.0e-12 to 3.0e-12"  # not $1.0e-12-3.0e-12


def test_a_money_range_is_rounded_outward_and_holds_the_point_printed_beside_it():
    # a new user's pass: the plan printed "$0.00124  $0.0012-0.0012" (JSON: [0.0012395, 0.0012444]).
    # Mutation caught: each end rounded to nearest
    assert fmt_usd_range(0.0012395, 0.0012444) == "$0.0012-0.0013"
    assert fmt_usd_range(12.104, 15.391) == "$12.10-15.40"
    assert fmt_usd_range(0.0995, 0.1004) == "$0.099-0.11"
    assert fmt_usd_range(0.0, 0.0) == "$0.00-0.00"
    # the plan's "recommended" panel prints its ends one by one, outward too (a review)
    assert (fmt_usd_bound(0.0012395, up=False), fmt_usd_bound(0.0012444, up=True)) == ("$0.0012", "$0.0013")


def test_a_long_duration_prints_whole_hours_not_an_exponent():
    # a new user's pass: "2.87e+03 h (90%: 1.13e+03 h - 7.27e+03 h)". Mutation caught: the `g` format alone
    assert fmt_duration(2.8704e3 * 3600) == "2,870 h"
    assert fmt_duration(123456 * 3600) == "123,000 h"
    assert fmt_duration(999 * 3600) == "999 h"


@pytest.mark.parametrize("text, bare_unit, seconds", [("90m", "h", 5400), ("2.5h", "s", 9000), ("1d", "s", 86400),
                                                      ("60", "s", 60), ("12", "h", 43200), ("0", "s", 0),
                                                      ("100ms", "h", 0.1),
                                                      # as other numbers are written (a new user's pass: refused)
                                                      ("1e3", "s", 1000), ("1e1h", "s", 36000), (".5h", "s", 1800)])
def test_durations(text, bare_unit, seconds):
    assert parse_duration_s(text, what="x", bare_unit=bare_unit, allow_zero=True) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5m", "5 weeks", "1e999", "e3", "1e", "."])
def test_bad_durations(text):
    with pytest.raises(ThriftyError):
        parse_duration_s(text, what="x", bare_unit="s")


def test_money():
    assert parse_money_usd("$12.5") == 12.5 and parse_money_usd("50 USD") == 50
    for bad in ("free", "-1", "nan", "0"):
        with pytest.raises(ThriftyError):
            parse_money_usd(bad)


def test_ctrl_c_ends_in_one_line_the_commands_own_where_it_has_one(capsys):
    # mutations caught: a silent 130; md sweep's note printed beside the generic line (two lines),
    # or an earlier command's note said for the next one
    import typer

    from thrifty.cli.common import run_app, say_on_interrupt
    app = typer.Typer()

    @app.command()
    def work(note: bool = False) -> None:
        if note:
            say_on_interrupt("interrupted: the stored runs stay")
        raise KeyboardInterrupt

    assert run_app(app, ["--note"]) == 130
    assert capsys.readouterr().err.strip() == "error: interrupted: the stored runs stay"
    assert run_app(app, []) == 130
    assert capsys.readouterr().err.strip() == "error: interrupted"

