"""`python -m ttlstate`: the `ttlstate` command (`demo`, `inspect`, `jar`, `--version`)."""

from ttlstate.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
