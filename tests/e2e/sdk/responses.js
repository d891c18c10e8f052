// SPDX-License-Identifier: MIT
// tests/e2e/sdk/responses.js - the official `openai` npm package's Responses API through
// gw: responses.create (non-streamed), responses.stream (the events the SDK emits, in
// order, and finalResponse()), a function call round trip (non-streamed with the whole
// output sent back, then streamed with two parallel calls), previous_response_id across
// two turns (plain, and carrying a function_call_output), and a bad key (which must raise
// AuthenticationError). Prints one JSON object on stdout.
// usage: node responses.js BASE_URL API_KEY MODEL
//   BASE_URL with /v1 (the SDK adds /responses); the upstream behind the gateway is a
//   `gwbench upstream --tool-call get_weather` (docs/gwbench.md, Tool calls).
// Run by tests/e2e/test_sdk_responses.py. Every step is caught on its own: a failed step
// is {"error": ..., "status": ..., "body": ..., "headers": {...}} in its place, so one
// failure does not hide the others; exit 0 unless the script itself broke.
'use strict';

const OpenAI = require('openai');

const fn = (name, description) => ({
    type: 'function',
    name,
    description,
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    strict: false,
});
const TOOLS = [fn('get_weather', 'The weather of a city'), fn('get_time', 'The local time of a city')];
const BOTH = { headers: { 'x-bench-tool-call': 'get_weather,get_time' } };

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
        authentication_error: e instanceof OpenAI.AuthenticationError,
    };
}

async function step(fn) {
    try {
        return await fn();
    } catch (e) {
        return failure(e);
    }
}

function calls(resp) {
    return resp.output
        .filter((o) => o.type === 'function_call')
        .map((o) => ({ id: o.id, call_id: o.call_id, name: o.name, arguments: o.arguments }));
}

function summary(resp, response) {
    return {
        id: resp.id,
        object: resp.object,
        status: resp.status,
        model: resp.model,
        output_text: resp.output_text,
        output_types: resp.output.map((o) => o.type),
        calls: calls(resp),
        usage: resp.usage,
        headers: gwHeaders(response && response.headers),
    };
}

// Runs responses.stream to its end: the event types in the order the SDK emitted them,
// the sequence numbers seen, the text deltas joined and finalResponse().
async function runStream(client, params, options) {
    const stream = client.responses.stream(params, options);
    const events = [];
    const seq = [];
    let text = '';
    let args = '';
    for await (const ev of stream) {
        events.push(ev.type);
        if (ev.sequence_number !== undefined) seq.push(ev.sequence_number);
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    }
    const final = await stream.finalResponse();
    return { events, seq, text, args, final: summary(final) };
}

async function main() {
    const [baseURL, apiKey, model] = process.argv.slice(2);
    if (!baseURL || !apiKey || !model) {
        console.error('usage: node responses.js BASE_URL API_KEY MODEL');
        process.exit(2);
    }
    // maxRetries 0: a failure of the gateway must show, not be retried away.
    const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
    const out = {};

    out.plain = await step(async () => {
        const { data, response } = await client.responses
            .create({ model, input: 'say hello', instructions: 'be brief', max_output_tokens: 64 })
            .withResponse();
        return summary(data, response);
    });

    out.stream = await step(() => runStream(client, { model, input: 'say hello', max_output_tokens: 64 }));

    // Function call, non-streamed: the model calls get_weather; the client sends the
    // whole output back with a function_call_output carrying the call_id it was given.
    out.tools = await step(async () => {
        const q = [{ role: 'user', content: 'What is the weather in Paris?' }];
        const first = await client.responses.create({ model, input: q, tools: TOOLS });
        const results = calls(first).map((c) => ({
            type: 'function_call_output',
            call_id: c.call_id,
            output: `18C in ${JSON.parse(c.arguments).city}`,
        }));
        const second = await client.responses.create({
            model,
            input: [...q, ...first.output, ...results],
            tools: TOOLS,
        });
        return { first: summary(first), second: summary(second) };
    });

    // Function calls, streamed, two parallel calls (x-bench-tool-call names both tools).
    out.tools_stream = await step(async () => {
        const q = [{ role: 'user', content: 'Weather and time in Paris?' }];
        const first = await runStream(client, { model, input: q, tools: TOOLS }, BOTH);
        const items = first.final.calls.map((c) => ({
            type: 'function_call',
            call_id: c.call_id,
            name: c.name,
            arguments: c.arguments,
        }));
        const results = first.final.calls.map((c) => ({
            type: 'function_call_output',
            call_id: c.call_id,
            output: `${c.name} ok for ${JSON.parse(c.arguments).city}`,
        }));
        const second = await runStream(client, { model, input: [...q, ...items, ...results], tools: TOOLS }, BOTH);
        return { first, second };
    });

    // previous_response_id: the second turn names the first instead of resending it.
    out.previous = await step(async () => {
        const first = await client.responses.create({ model, input: 'remember the word kiwi' });
        const { data, response } = await client.responses
            .create({ model, input: 'which word?', previous_response_id: first.id })
            .withResponse();
        return { first: summary(first), second: summary(data, response) };
    });

    // previous_response_id with a function call: the second turn is only the result.
    out.previous_tools = await step(async () => {
        const first = await client.responses.create({ model, input: 'What is the weather in Paris?', tools: TOOLS });
        const results = calls(first).map((c) => ({
            type: 'function_call_output',
            call_id: c.call_id,
            output: `18C in ${JSON.parse(c.arguments).city}`,
        }));
        const second = await client.responses.create({
            model,
            input: results,
            tools: TOOLS,
            previous_response_id: first.id,
        });
        return { first: summary(first), second: summary(second) };
    });

    // A bad key: AuthenticationError (401, the OpenAI error body) on both calls.
    const bad = new OpenAI({ baseURL, apiKey: 'sk-not-a-gateway-key', maxRetries: 0, timeout: 20000 });
    const refused = async (fn) => {
        try {
            await fn();
            return { error: 'no error raised' };
        } catch (e) {
            return failure(e);
        }
    };
    out.bad_key = {
        create: await refused(() => bad.responses.create({ model, input: 'say hello' })),
        stream: await refused(() => bad.responses.stream({ model, input: 'say hello' }).finalResponse()),
    };

    process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
    process.stdout.write(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }) + '\n');
    process.exit(1);
});
