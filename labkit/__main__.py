"""`python -m labkit …` runs the `labkit` command (the same entry point as the console script)."""

from labkit.tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
