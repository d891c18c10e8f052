# SPDX-License-Identifier: MIT
# tests/e2e/codex/base_url_arg.py - runs CMD with every argument "@BASE_URL@" replaced by
# the address netns_run.py gives the command it starts (its ANTHROPIC_BASE_URL, the only
# way out of the network namespace):
#   netns_run.py SOCK -- python3 base_url_arg.py -- codex exec -c 'x.base_url="@BASE_URL@/v1"' ...
# Codex reads its provider's address from its config, not from the environment, so
# tests/e2e/test_codex.py passes it this way. Exits with CMD's exit code. Standard library.

import os
import subprocess
import sys


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "--":
        print("usage: base_url_arg.py -- CMD ARGS...", file=sys.stderr)
        return 2
    url = os.environ.get("ANTHROPIC_BASE_URL")
    if not url:
        print("base_url_arg: ANTHROPIC_BASE_URL is not set (run it under netns_run.py)",
              file=sys.stderr)
        return 2
    env = dict(os.environ)
    del env["ANTHROPIC_BASE_URL"]
    argv = [a.replace("@BASE_URL@", url) for a in sys.argv[2:]]
    return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL).returncode


if __name__ == "__main__":
    sys.exit(main())
