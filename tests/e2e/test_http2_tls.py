# SPDX-License-Identifier: MIT
# tests/e2e/test_http2_tls.py - HTTP/2 over TLS (issue 14 points 1 and 2) beyond curl's
# answers (test_tls_listen.py): h2load runs many streams over few TLS connections (ALPN
# h2); a raw python3-h2 client over ssl gets its answer and the server's SETTINGS (the
# stream cap). The protections are tested in cleartext (test_http2.py): both reach the
# same session code (net_h2_start).

import socket
import subprocess

import h2.config
import h2.connection
import h2.events
import h2.settings

from gwtest import ALICE_KEY, WAIT_TIMEOUT, chat_body
from test_tls_listen import client_ctx, pki, tls_config, tls_port  # noqa: F401 (fixture)


def test_h2load_over_tls(tmp_path, pki, bench, gwd):
    g = gwd(tls_config(tmp_path, bench()))
    body = tmp_path / "body.json"
    body.write_bytes(chat_body())
    p = subprocess.run(["h2load", "-n", "200", "-c", "2", "-m", "20", "-d", str(body),
                        "-H", f"authorization: Bearer {ALICE_KEY}",
                        "-H", "content-type: application/json",
                        f"https://127.0.0.1:{tls_port(g)}/v1/chat/completions"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Application protocol: h2" in p.stdout, p.stdout
    assert "200 succeeded, 0 failed, 0 errored" in p.stdout, p.stdout


def test_raw_h2_over_tls_sees_the_stream_cap(tmp_path, pki, bench, gwd):
    g = gwd(tls_config(tmp_path, bench()))
    ctx = client_ctx(pki)
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", tls_port(g)),
                                                 timeout=WAIT_TIMEOUT),
                        server_hostname="localhost")
    assert s.selected_alpn_protocol() == "h2"
    c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "POST"), (":path", "/v1/chat/completions"),
                         (":scheme", "https"), (":authority", "localhost"),
                         ("authorization", f"Bearer {ALICE_KEY}"),
                         ("content-type", "application/json")])
    c.send_data(sid, chat_body(), end_stream=True)
    s.sendall(c.data_to_send())
    settings, status, ended = None, None, False
    while not ended:
        data = s.recv(65536)
        assert data, "closed"
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.RemoteSettingsChanged):
                settings = {k: v.new_value for k, v in ev.changed_settings.items()}
            elif isinstance(ev, h2.events.ResponseReceived):
                status = dict(ev.headers)[b":status"]
            elif isinstance(ev, h2.events.StreamEnded):
                ended = True
        s.sendall(c.data_to_send())
    assert status == b"200"
    assert settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] == 100, settings
    s.close()
