"""Under CI (``CI=true``) the shared corpus must be there: without it more than a hundred tests (the only real
two-run ``diff``, HTA parity, the F1 floors) would be skipped and CI would still pass. Run by ``.ci/run``
before the tests: ``python -m tests.corpus_check`` exits 1 with one line naming the folder it looked for."""

from __future__ import annotations

import os
import sys

from tests.paths import HAVE_CORPUS, SHARED


def main() -> int:
    if os.environ.get("CI", "").lower() != "true" or HAVE_CORPUS:
        return 0
    sys.stderr.write(f"error: CI=true but the shared corpus is missing ({SHARED}): its tests would be skipped; "
                     "set TRACEQL_SHARED to the folder that holds datasets/\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
