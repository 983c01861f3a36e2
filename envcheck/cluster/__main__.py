"""``python -m envcheck.cluster`` (under torchrun) works like ``envcheck cluster``."""

import sys

from envcheck.cli import main

if __name__ == "__main__":
    sys.argv[1:1] = ["cluster"]
    main()
