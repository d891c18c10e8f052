// SPDX-License-Identifier: MIT
// tests/e2e/sdk/messages.js - the official `@anthropic-ai/sdk` npm package through gw:
// messages.create (non-streamed), messages.stream (the events the SDK sees, in order),
// a tool use round trip (non-streamed, then streamed with two parallel calls),
// messages.countTokens and models.list; then the same calls with a bad key, which must
// each raise AuthenticationError. Prints one JSON object on stdout.
// usage: node messages.js BASE_URL API_KEY MODEL
//   BASE_URL without /v1 (the SDK adds /v1/messages); the upstream behind the gateway
//   is a `gwbench upstream --tool-call get_weather` (docs/gwbench.md, Tool calls).
// Run by tests/e2e/test_sdk_messages.py. Every step is caught on its own: a failed step
// is {"error": ..., "status": ..., "body": ..., "headers": {...}} in its place, so one
// failure does not hide the others; exit 0 unless the script itself broke.
'use strict';

const Anthropic = require('@anthropic-ai/sdk');

const TOOLS = [
    {
        name: 'get_weather',
        description: 'The weather of a city',
        input_schema: {
            type: 'object',
            properties: { city: { type: 'string' } },
            required: ['city'],
        },
    },
    {
        name: 'get_time',
        description: 'The local time of a city',
        input_schema: {
            type: 'object',
            properties: { city: { type: 'string' } },
            required: ['city'],
        },
    },
];

// The response headers a test reads: the gateway's own (x-gw-*) and the request id.
function gwHeaders(h) {
    const out = {};
    if (!h || typeof h.forEach !== 'function') return out;
    h.forEach((v, k) => {
        if (k.startsWith('x-gw-') || k === 'x-request-id' || k === 'retry-after') out[k] = v;
    });
    return out;
}

function failure(e) {
    return {
        error: String(e && e.stack ? e.stack : e),
        class: e && e.constructor ? e.constructor.name : null,
        status: e && e.status !== undefined ? e.status : null,
        body: e && e.error !== undefined ? e.error : null,
        headers: gwHeaders(e && e.headers),
        authentication_error: e instanceof Anthropic.AuthenticationError,
    };
}

async function step(fn) {
    try {
        return await fn();
    } catch (e) {
        return failure(e);
    }
}

function toolUses(msg) {
    return msg.content
        .filter((b) => b.type === 'tool_use')
        .map((b) => ({ id: b.id, name: b.name, input: b.input }));
}

function textOf(msg) {
    return msg.content
        .filter((b) => b.type === 'text')
        .map((b) => b.text)
        .join('');
}

function summary(msg, response) {
    return {
        id: msg.id,
        type: msg.type,
        role: msg.role,
        model: msg.model,
        text: textOf(msg),
        tool_uses: toolUses(msg),
        content_types: msg.content.map((b) => b.type),
        stop_reason: msg.stop_reason,
        stop_sequence: msg.stop_sequence,
        usage: msg.usage,
        headers: gwHeaders(response && response.headers),
    };
}

// Runs a stream to its end; returns the event types the SDK saw, in order (a block's
// deltas as "content_block_delta:<delta type>"), the text deltas and the final message.
async function runStream(client, params, options) {
    const stream = client.messages.stream(params, options);
    const events = [];
    let text = '';
    for await (const ev of stream) {
        if (ev.type === 'content_block_delta') {
            events.push('content_block_delta:' + ev.delta.type);
            if (ev.delta.type === 'text_delta') text += ev.delta.text;
        } else if (ev.type === 'content_block_start') {
            events.push('content_block_start:' + ev.content_block.type);
        } else {
            events.push(ev.type);
        }
    }
    const final = await stream.finalMessage();
    const { response } = await stream.withResponse();
    return { events, text, final: summary(final, response) };
}

async function main() {
    const [baseURL, apiKey, model] = process.argv.slice(2);
    if (!baseURL || !apiKey || !model) {
        console.error('usage: node messages.js BASE_URL API_KEY MODEL');
        process.exit(2);
    }
    // maxRetries 0: a failure of the gateway must show, not be retried away.
    const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
    const ask = [{ role: 'user', content: 'say hello' }];
    const out = {};

    out.plain = await step(async () => {
        const { data, response } = await client.messages
            .create({ model, max_tokens: 64, messages: ask })
            .withResponse();
        return summary(data, response);
    });

    out.stream = await step(() => runStream(client, { model, max_tokens: 64, messages: ask }));

    // Tool use, non-streamed: the model calls get_weather; the client runs it and sends
    // the tool_result with the id it was given; the model's text says what it got.
    out.tools = await step(async () => {
        const q = [{ role: 'user', content: 'What is the weather in Paris?' }];
        const first = await client.messages.create({ model, max_tokens: 256, tools: TOOLS, messages: q });
        const uses = toolUses(first);
        const results = uses.map((u) => ({
            type: 'tool_result',
            tool_use_id: u.id,
            content: `18C in ${u.input.city}`,
        }));
        const second = await client.messages.create({
            model,
            max_tokens: 256,
            tools: TOOLS,
            messages: [...q, { role: 'assistant', content: first.content }, { role: 'user', content: results }],
        });
        return { first: summary(first), second: summary(second) };
    });

    // Tool use, streamed, two parallel calls (x-bench-tool-call names both tools).
    out.tools_stream = await step(async () => {
        const q = [{ role: 'user', content: 'Weather and time in Paris?' }];
        const opts = { headers: { 'x-bench-tool-call': 'get_weather,get_time' } };
        const first = await runStream(client, { model, max_tokens: 256, tools: TOOLS, messages: q }, opts);
        const content = first.final.tool_uses.map((u) => ({ type: 'tool_use', ...u }));
        const results = first.final.tool_uses.map((u) => ({
            type: 'tool_result',
            tool_use_id: u.id,
            content: [{ type: 'text', text: `${u.name} ok for ${u.input.city}` }],
        }));
        const second = await runStream(
            client,
            {
                model,
                max_tokens: 256,
                tools: TOOLS,
                messages: [...q, { role: 'assistant', content }, { role: 'user', content: results }],
            },
            opts
        );
        return { first, second };
    });

    out.count = await step(async () => {
        const { data, response } = await client.messages
            .countTokens({ model, messages: ask })
            .withResponse();
        return { input_tokens: data.input_tokens, body: data, headers: gwHeaders(response.headers) };
    });

    out.models = await step(async () => {
        const page = await client.models.list();
        const all = [];
        for await (const m of client.models.list()) all.push(m);
        return {
            data: page.data,
            has_more: page.has_more,
            first_id: page.first_id,
            last_id: page.last_id,
            ids: all.map((m) => m.id),
        };
    });

    // A bad key: every call must fail with AuthenticationError (401, Anthropic shape).
    const bad = new Anthropic({ baseURL, apiKey: 'sk-ant-not-a-gateway-key', maxRetries: 0, timeout: 20000 });
    const refused = async (fn) => {
        try {
            await fn();
            return { error: 'no error raised' };
        } catch (e) {
            return failure(e);
        }
    };
    out.bad_key = {
        create: await refused(() => bad.messages.create({ model, max_tokens: 64, messages: ask })),
        stream: await refused(() => bad.messages.stream({ model, max_tokens: 64, messages: ask }).finalMessage()),
        count: await refused(() => bad.messages.countTokens({ model, messages: ask })),
        models: await refused(() => bad.models.list()),
    };

    process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
    process.stdout.write(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }) + '\n');
    process.exit(1);
});
