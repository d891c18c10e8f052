// SPDX-License-Identifier: MIT
// tests/e2e/sdk/chat.js - call chat.completions.create through gw with the official
// `openai` npm package, non-streamed and streamed, and print one JSON object on stdout.
// usage: node chat.js BASE_URL API_KEY MODEL
// Run by tests/e2e/test_sdk.py; a failure prints {"error": ...} and exits 1.
'use strict';

const OpenAI = require('openai');

async function main() {
    const [baseURL, apiKey, model] = process.argv.slice(2);
    if (!baseURL || !apiKey || !model) {
        console.error('usage: node chat.js BASE_URL API_KEY MODEL');
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
    process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
    process.stdout.write(
        JSON.stringify({ error: String(e && e.stack ? e.stack : e), status: e && e.status }) + '\n'
    );
    process.exit(1);
});
