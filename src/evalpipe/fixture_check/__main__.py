"""`python -m evalpipe.fixture_check FIXTURE ...` (same as `evalpipe check-fixture`)."""

import sys

from evalpipe.fixture_check.cli import main

if __name__ == "__main__":
    sys.exit(main())
