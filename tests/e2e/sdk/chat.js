// SPDX-License-Identifier: MIT
// tests/e2e/sdk/chat.js - call chat.completions.create through gw with the official
// `openai` npm package, non-streamed and streamed, and print one JSON object on stdout.
// With "tools" as 4th argument also a tool call round trip: non-streamed with one call,
// then streamed with two parallel calls (the upstream is a `gwbench upstream
// --tool-call get_weather`; x-bench-tool-call names both tools for the parallel one).
// usage: node chat.js BASE_URL API_KEY MODEL [tools]
// Run by tests/e2e/test_sdk.py; a failure prints {"error": ...} and exits 1.
'use strict';

const OpenAI = require('openai');

const fn = (name, description) => ({
    type: 'function',
    function: {
        name,
        description,
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
});
const TOOLS = [fn('get_weather', 'The weather of a city'), fn('get_time', 'The local time of a city')];

// The tool calls of a streamed answer, put together from delta.tool_calls by index.
async function collectStream(stream) {
    const calls = [];
    let content = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
        chunks++;
        if (chunk.usage) usage = chunk.usage;
        for (const c of chunk.choices || []) {
            if (c.finish_reason) finish = c.finish_reason;
            if (!c.delta) continue;
            if (typeof c.delta.content === 'string') content += c.delta.content;
            for (const tc of c.delta.tool_calls || []) {
                const call = (calls[tc.index] = calls[tc.index] || { id: '', name: '', arguments: '' });
                if (tc.id) call.id = tc.id;
                if (tc.function && tc.function.name) call.name += tc.function.name;
                if (tc.function && tc.function.arguments) call.arguments += tc.function.arguments;
            }
        }
    }
    return { content, finish_reason: finish, tool_calls: calls, usage, chunks };
}

// The round trip: the model calls the tool(s), the client answers each call with a
// tool message carrying its id, the model's text says what it got.
async function toolRoundTrip(client, model) {
    const q = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await client.chat.completions.create({ model, messages: q, tools: TOOLS });
    const msg = first.choices[0].message;
    const results = (msg.tool_calls || []).map((tc) => ({
        role: 'tool',
        tool_call_id: tc.id,
        content: `18C in ${JSON.parse(tc.function.arguments).city}`,
    }));
    const second = await client.chat.completions.create({
        model,
        messages: [...q, msg, ...results],
        tools: TOOLS,
    });
    const out = {
        first: {
            finish_reason: first.choices[0].finish_reason,
            content: msg.content,
            tool_calls: (msg.tool_calls || []).map((tc) => ({
                id: tc.id,
                type: tc.type,
                name: tc.function.name,
                arguments: tc.function.arguments,
            })),
            usage: first.usage,
        },
        second: {
            finish_reason: second.choices[0].finish_reason,
            content: second.choices[0].message.content,
            usage: second.usage,
        },
    };

    const opts = { headers: { 'x-bench-tool-call': 'get_weather,get_time' } };
    const q2 = [{ role: 'user', content: 'Weather and time in Paris?' }];
    const sfirst = await collectStream(
        await client.chat.completions.create(
            { model, messages: q2, tools: TOOLS, stream: true, stream_options: { include_usage: true } },
            opts
        )
    );
    const assistant = {
        role: 'assistant',
        content: null,
        tool_calls: sfirst.tool_calls.map((c) => ({
            id: c.id,
            type: 'function',
            function: { name: c.name, arguments: c.arguments },
        })),
    };
    const sresults = sfirst.tool_calls.map((c) => ({
        role: 'tool',
        tool_call_id: c.id,
        content: `${c.name} ok for ${JSON.parse(c.arguments).city}`,
    }));
    const ssecond = await collectStream(
        await client.chat.completions.create(
            {
                model,
                messages: [...q2, assistant, ...sresults],
                tools: TOOLS,
                stream: true,
                stream_options: { include_usage: true },
            },
            opts
        )
    );
    out.stream = { first: sfirst, second: ssecond };
    return out;
}

async function main() {
    const [baseURL, apiKey, model, mode] = process.argv.slice(2);
    if (!baseURL || !apiKey || !model) {
        console.error('usage: node chat.js BASE_URL API_KEY MODEL [tools]');
        process.exit(2);
    }
    // maxRetries 0: a failure of the gateway must show, not be retried away.
    const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
    const messages = [{ role: 'user', content: 'say hello' }];

    const plain = await client.chat.completions.create({ model, messages });
    const out = {
        plain: {
            content: plain.choices[0].message.content,
            usage: plain.usage,
            model: plain.model,
        },
    };

    const stream = await client.chat.completions.create({
        model,
        messages,
        stream: true,
        stream_options: { include_usage: true },
    });
    let content = '';
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
        chunks++;
        if (chunk.usage) usage = chunk.usage;
        for (const c of chunk.choices || []) {
            if (c.delta && typeof c.delta.content === 'string') content += c.delta.content;
        }
    }
    out.stream = { content, usage, chunks };
    if (mode === 'tools') out.tools = await toolRoundTrip(client, model);
    process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
    process.stdout.write(
        JSON.stringify({ error: String(e && e.stack ? e.stack : e), status: e && e.status }) + '\n'
    );
    process.exit(1);
});
