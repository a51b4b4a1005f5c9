"""`python -m epochledger`: the command line (docs/cli.md)."""

import sys

from epochledger.cli import main

sys.exit(main())
