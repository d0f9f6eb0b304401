# SPDX-License-Identifier: MIT
"""Errors a user can act on. The CLI prints their message on one line and exits with code 2."""


class ThriftyError(Exception):
    """Base class: bad input or a state the user must fix; the message says what and where."""


class CatalogError(ThriftyError):
    """A catalog or hardware file is missing, malformed or holds impossible values."""


class WorkloadError(ThriftyError):
    """A workload cannot be found, loaded, or run."""


class ModelError(ThriftyError):
    """A performance model cannot be fitted, read, or applied."""


class PlanError(ThriftyError):
    """No configuration satisfies the request, or the request itself is malformed."""
