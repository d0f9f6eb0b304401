# SPDX-License-Identifier: MIT
"""`python -m thrifty.cli ARGS` = `thrifty ARGS`."""

import sys

from thrifty.cli.app import main

sys.exit(main())
