"""``python -m asrserve.cli``."""

from asrserve.cli.main import main

raise SystemExit(main())
