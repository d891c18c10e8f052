# SPDX-License-Identifier: MIT
# tests/e2e/test_readiness.py - issue 8, point 5: the control port's /healthz answers 200
# only once the data port accepts connections (503 gw.starting before), and its /readyz
# (DESIGN.md 4) answers 503 gw.shutting_down while gwd drains.

import signal
import socket
import time

from gwtest import (ALICE_KEY, READY_RE, START_TIMEOUT, Proc, base_env, bearer, binary,
                    chat_body, config, free_port, http_request, provider, write_config)


def data_port_accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def test_control_healthz_is_200_only_once_the_data_port_accepts(tmp_path, bench):
    b = bench()
    data, control = free_port(), free_port()
    cfg = config(tmp_path, [provider("up", b)], server={"listen": [f"127.0.0.1:{data}"]})
    cfg["control"]["listen"] = f"127.0.0.1:{control}"
    g = Proc([binary("gwd"), "-c", str(write_config(tmp_path, cfg))], base_env(), "gwd")
    try:
        # Poll from the start: every answer before the data port listens is a 503
        # gw.starting; the first 200 comes when the data port already accepts.
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert time.monotonic() < deadline, g.log()
            try:
                r = http_request(control, "GET", "/healthz", timeout=2)
            except OSError:  # the control port is not bound yet
                assert g.p.poll() is None, g.log()
                time.sleep(0.002)  # a poll interval, as in wait_until
                continue
            if r.status == 200:
                assert data_port_accepts(data), "healthz said ok before the data port listened"
                break
            assert r.status == 503, r
            assert r.json()["error"]["code"] == "gw.starting", r
        g.err.wait_for(READY_RE)
        assert http_request(control, "GET", "/readyz").status == 200
        r = http_request(data, "POST", "/v1/chat/completions", chat_body(),
                         bearer(ALICE_KEY))
        assert r.status == 200, r
    finally:
        assert g.stop() == 0, g.log()


def test_control_readyz_is_503_while_draining(tmp_path, bench, gwd):
    b = bench("--chunks", 400, "--interval-ms", 50)
    g = gwd(config(tmp_path, [provider("up", b)], server={"drain_secs": 30}))
    assert g.control("/healthz", token=None).status == 200
    assert g.control("/readyz", token=None).status == 200

    s = g.stream(chat_body(stream=True))  # holds the drain open
    s.next_content()
    start = g.err.count()
    g.signal(signal.SIGTERM)
    g.err.wait_for(r"code=stopping\b", start=start)

    r = g.control("/readyz", token=None)
    assert r.status == 503, r
    assert r.json()["error"]["code"] == "gw.shutting_down", r
    assert g.control("/healthz", token=None).status == 200  # alive while it drains
    s.close()  # the drain ends with the last stream
    assert g.wait_exit() == 0, g.log()
