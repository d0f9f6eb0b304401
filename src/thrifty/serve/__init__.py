# SPDX-License-Identifier: MIT
"""`thrifty serve`: one local web page and JSON API over the stores thrifty writes (plans,
profiles, searches, training runs, MD campaigns), live by server-sent events, with opt-in
steering. Needs the `[serve]` extra (FastAPI, uvicorn, Plotly); the rest of thrifty imports
without it. See docs/serve.md."""
