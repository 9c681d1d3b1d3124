"""`python -m evalsuite` runs the CLI."""

from evalsuite.cli import main

raise SystemExit(main())
