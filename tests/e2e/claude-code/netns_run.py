# SPDX-License-Identifier: MIT
# tests/e2e/claude-code/netns_run.py - runs a command inside a fresh network namespace
# whose only way out is a Unix socket: started as
#   unshare -n   (or unshare -r -n when not root)  python3 netns_run.py SOCK -- CMD ARGS...
# it brings the namespace's loopback up, listens on 127.0.0.1:<free port> and relays
# every connection made there to the Unix socket SOCK (a path in the shared file system,
# served outside the namespace by tests/e2e/test_claude_code.py, which relays it to gwd).
# CMD runs with ANTHROPIC_BASE_URL=http://127.0.0.1:<that port>; any other address is
# unreachable (no route, no DNS), so nothing CMD does can leave the machine.
# Exits with CMD's exit code; its stdout and stderr are passed through.
# Standard library only.

import os
import socket
import subprocess
import sys
import threading


def pipe(src, dst):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            dst.sendall(b)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(lsock, path):
    while True:
        try:
            c, _ = lsock.accept()
        except OSError:
            return
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            u.connect(path)
        except OSError as e:
            print(f"netns_run: cannot reach {path}: {e}", file=sys.stderr)
            c.close()
            continue
        threading.Thread(target=pipe, args=(c, u), daemon=True).start()
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print("usage: netns_run.py SOCK -- CMD ARGS...", file=sys.stderr)
        return 2
    path, cmd = sys.argv[1], sys.argv[3:]
    # A new network namespace has only `lo`, and it is down.
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    routes = subprocess.run(["ip", "-o", "route", "show"], capture_output=True, text=True,
                            check=True).stdout.strip()
    if routes:  # only loopback: no default route, no other interface
        print(f"netns_run: unexpected routes in the namespace: {routes}", file=sys.stderr)
        return 3
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    threading.Thread(target=relay, args=(lsock, path), daemon=True).start()
    env = dict(os.environ)
    env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}"
    return subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL).returncode


if __name__ == "__main__":
    sys.exit(main())
