# SPDX-License-Identifier: MIT
"""Data files shipped with thrifty; each has its source noted in a Markdown file beside it."""

from importlib.resources import files
from pathlib import Path


def data_path(*parts: str) -> Path:
    """Path of a bundled data file, e.g. data_path("catalog", "aws.csv")."""
    return Path(str(files("thrifty.data").joinpath(*parts)))
