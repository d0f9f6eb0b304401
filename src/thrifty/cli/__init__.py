# SPDX-License-Identifier: MIT
"""The command-line interface: `app` assembles the commands of one module per group (catalog,
profile, model, plan, train, preempt, run/md); `common` holds the shared options and parsers.
Library code never imports it; the only other importer is the entry point `python -m
thrifty.train` (train/__main__.py), which runs the train command alone."""
