# SPDX-License-Identifier: MIT
"""The page: one HTML document, its script and style (static/), and Plotly's own bundle from the
installed plotly package (plotly/package_data/plotly.min.js), all served from this server;
nothing is fetched from elsewhere. Native controls (select, input, button) with labels keep it
usable from the keyboard; the layout is one column below 900 px (a laptop's half screen)."""

from html import escape
from pathlib import Path

import plotly

STATIC = Path(__file__).parent / "static"
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"

SECTIONS = (
    ("plans", "Plan", "Cost-time plane of the plan's candidates, its Pareto front and the recommendation",
     ("plot-plan",)),
    ("searches", "Search", "The search's path: spend and time per window, probes and moves",
     ("plot-search",)),
    ("runs", "Training run", "Per-worker batch split and step times over the run", ("plot-split", "plot-steptime")),
    ("campaigns", "MD campaign", "Progress, preemptions and redone work, surrogate accuracy",
     ("plot-campaign-progress", "plot-campaign-bill", "plot-campaign-accuracy")),
)


def _section(key: str, title: str, caption: str, plots: tuple[str, ...]) -> str:
    divs = "".join(f'<div class="plot" id="{p}" role="img" aria-label="{escape(title)} plot"></div>' for p in plots)
    return (f'<section id="section-{key}" aria-labelledby="h-{key}"><h2 id="h-{key}">{escape(title)}</h2>'
            f'<p class="caption">{escape(caption)}</p>'
            f'<label for="pick-{key}">{escape(title)}:</label> <select id="pick-{key}" data-kind="{key}"></select>'
            f'<p class="note" id="note-{key}"></p>{divs}</section>')


def page_html(*, writes: bool) -> str:
    sections = "".join(_section(*s) for s in SECTIONS)
    surrogate = (
        '<section id="section-surrogate" aria-labelledby="h-surrogate"><h2 id="h-surrogate">Surrogate profile</h2>'
        '<p class="caption">Density profiles the MD surrogate predicts for the parameters you type '
        '(mean of its networks, band: the calibrated 90% band, as <code>thrifty md predict</code> gives it)</p><form id="surrogate-form">'
        + "".join(f'<label>{label} <input name="{name}" id="in-{name}" inputmode="decimal" required></label>'
                  for name, label in (("h_nm", "h (nm)"), ("z_plus", "z+"), ("c_molar", "c (M)"),
                                      ("d_plus_nm", "d+ (nm)"), ("d_minus_nm", "d- (nm)")))
        + '<button type="submit">Predict</button></form><p class="note" id="note-surrogate"></p>'
        '<div class="plot" id="plot-surrogate" role="img" aria-label="surrogate profile plot"></div></section>')
    jobs = (
        '<section id="section-jobs" aria-labelledby="h-jobs"><h2 id="h-jobs">Jobs under thrifty run</h2>'
        + ('<p><label>Token <input id="token" type="password" autocomplete="off"></label> '
           '(printed by thrifty serve at start; kept in this tab only)</p>' if writes else
           '<p class="note">Read-only: start thrifty serve with --allow-writes to stop jobs and start plans.</p>')
        + '<table id="jobs"><thead><tr><th>job</th><th>state</th><th>attempts</th><th>checkpoints</th>'
          '<th>preemptions</th><th></th></tr></thead><tbody></tbody></table>'
          '<p class="note" id="note-jobs"></p></section>')
    new_plan = ('<section id="section-new-plan"><h2>New plan</h2><form id="plan-form">'
                '<label>profile <select id="pick-profile" name="profile"></select></label> '
                '<label>objective <select name="objective"><option>cost</option><option>time</option>'
                '<option>knee</option></select></label> <button type="submit">Plan</button></form>'
                '<p class="note" id="note-new-plan"></p></section>') if writes else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>thrifty serve</title><link rel="stylesheet" href="/assets/page.css">
<script src="/assets/plotly.min.js"></script><script src="/assets/page.js" defer></script></head>
<body data-writes="{'1' if writes else '0'}"><header><h1>thrifty</h1>
<span id="live" aria-live="polite">connecting...</span></header>
<main>{sections}{surrogate}{jobs}{new_plan}</main></body></html>"""
