"""``python -m flagopt``."""

from __future__ import annotations

import sys

from flagopt.cli import main

if __name__ == "__main__":
    sys.exit(main())
