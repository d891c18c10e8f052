// SPDX-License-Identifier: MIT
// tests/e2e/sdk/ws.js - the official `openai` npm package's Responses WebSocket client
// (ResponsesWS, openai/resources/responses/ws) through gw: one socket, turns sent one
// after another as response.create events, each collected until its final event
// (response.completed, response.failed, response.incomplete) or an `error` event.
// usage: node ws.js BASE_URL API_KEY TURNS_JSON
//   BASE_URL with /v1 (the SDK makes ws://HOST/v1/responses of it);
//   TURNS_JSON: a list of {"body": {...response.create fields...}, "chain": true to send
//   the previous turn's response id as previous_response_id, "close_after": N to close
//   the socket after the turn's N-th event instead of waiting for its end}.
// Prints one JSON object on stdout: {"turns": [{"events": [types], "text": deltas joined,
// "final": the final event, "error": an error event or message}], "close": {code, reason}}.
// Run by tests/e2e/test_ws.py; exit 0 unless the script itself broke.
'use strict';

const OpenAI = require('openai');
const { ResponsesWS } = require('openai/resources/responses/ws');

const [baseURL, apiKey, turnsJson] = process.argv.slice(2);
const turns = JSON.parse(turnsJson);
const FINAL = new Set(['response.completed', 'response.failed', 'response.incomplete']);

async function main() {
    const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
    const ws = new ResponsesWS(client);
    const out = { turns: [], close: null };
    let cur = null; // {rec, resolve, n, closeAfter}
    const closed = new Promise((resolve) => {
        ws.on('close', (code, reason) => {
            out.close = { code, reason: String(reason || '') };
            if (cur) cur.resolve();
            resolve();
        });
    });
    ws.on('event', (ev) => {
        if (!cur) return;
        const rec = cur.rec;
        rec.events.push(ev.type);
        if (ev.type === 'response.output_text.delta') rec.text += ev.delta;
        if (ev.type === 'error') {
            rec.error = ev;
            cur.resolve();
        } else if (FINAL.has(ev.type)) {
            rec.final = ev;
            cur.resolve();
        } else if (cur.closeAfter && rec.events.length >= cur.closeAfter) {
            ws.close({ code: 1000, reason: 'bye' });
            cur.resolve();
        }
    });
    ws.on('error', (e) => {
        if (cur && !cur.rec.error) cur.rec.error = { message: String(e && e.message) };
    });
    let prev = null;
    for (const t of turns) {
        const rec = { events: [], text: '', final: null, error: null };
        out.turns.push(rec);
        const body = { type: 'response.create', ...t.body };
        if (t.chain && prev) body.previous_response_id = prev;
        const done = new Promise((resolve) => {
            cur = { rec, resolve, closeAfter: t.close_after || 0 };
        });
        ws.send(body);
        await done;
        cur = null;
        if (rec.final && rec.final.response) prev = rec.final.response.id;
        if (out.close) break;
        if (t.close_after) {
            await closed;
            break;
        }
    }
    if (!out.close) {
        ws.close({ code: 1000, reason: 'done' });
        await closed;
    }
    console.log(JSON.stringify(out));
}

main().catch((e) => {
    console.log(JSON.stringify({ fatal: String(e && e.stack ? e.stack : e) }));
    process.exit(1);
});
