# SPDX-License-Identifier: MIT
# tests/e2e/conftest.py - fixtures of the end-to-end suite.
#   bench(*args)         starts `gwbench upstream --listen 127.0.0.1:0 ARGS`, stopped after the test
#   tls_bench(*args)     the same with --tls-cert/--tls-key (gwtest.TlsBench), the test CA and
#                        certificate made in tmp_path (test_egress.make_pki) on the first call
#   gwd(cfg, name=..., env=..., wrap=...)
#                        writes cfg (dict -> YAML) into tmp_path and starts `gwd -c` on it
#                        (wrap: argv put before gwd's, which must exec it);
#                        after the test every gwd gets SIGTERM and must exit 0
#   restart(g)           SIGTERM g (exit 0 asserted) and start a new gwd on the same config
# Run: /usr/bin/python3 -m pytest tests/e2e   (GW_BIN=<build>/bin, default <repo>/bin)

import pytest

import gwtest


@pytest.fixture
def bench():
    started = []

    def start(*args, env=None):
        b = gwtest.Bench(*args, env=env)
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop(5)


@pytest.fixture
def tls_bench(tmp_path):
    started = []

    def start(*args, env=None):
        if not (tmp_path / "ca.pem").exists():
            from test_egress import make_pki  # a test module: imported only when needed
            make_pki(tmp_path)
        b = gwtest.TlsBench(tmp_path, *args, env=env)
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop(5)


@pytest.fixture
def gwd(tmp_path):
    started = []

    def start(cfg, name="gw.yaml", env=None, wrap=None):
        path = gwtest.write_config(tmp_path, cfg, name)
        g = gwtest.Gwd(path, env=env, wrap=wrap)
        started.append(g)
        return g

    start.started = started
    yield start
    crashed = []
    for g in started:
        rc = g.stop()
        if rc != 0:
            crashed.append(f"gwd exited {rc} after SIGTERM (want 0)\n{g.log(80)}")
        else:
            print(g.log(80))  # shown by pytest only when the test failed
    if crashed:
        pytest.fail("\n".join(crashed), pytrace=False)


@pytest.fixture
def restart(gwd):
    def do(g):
        rc = g.stop()
        assert rc == 0, f"gwd exited {rc} after SIGTERM\n{g.log()}"
        ng = gwtest.Gwd(g.config_path)
        gwd.started.append(ng)
        return ng

    return do
