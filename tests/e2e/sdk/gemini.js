// SPDX-License-Identifier: MIT
// tests/e2e/sdk/gemini.js - the official `@google/genai` npm package through gw:
// models.generateContent, models.generateContentStream (the chunks the SDK yields),
// a function calling round trip (non-streamed, then streamed with two parallel calls),
// models.countTokens, models.list and models.get; then the same calls with a bad key,
// which must each raise ApiError. Prints one JSON object on stdout.
// usage: node gemini.js BASE_URL API_KEY MODEL [API_VERSION]
//   BASE_URL without a version (the SDK adds /<API_VERSION>/models/...); API_VERSION
//   "v1beta" (the Gemini API's), or "" for the SDK's own default ("v1" in 3.x). The
//   upstream behind the gateway is a `gwbench upstream --tool-call get_weather`.
// Run by tests/e2e/test_sdk_gemini.py. Every step is caught on its own: a failed step is
// {"error": ..., "status": ..., "message": ...} in its place, so one failure does not
// hide the others; exit 0 unless the script itself broke.
'use strict';

const { GoogleGenAI, ApiError } = require('@google/genai');

const decl = (name, description) => ({
    name,
    description,
    parameters: { type: 'OBJECT', properties: { city: { type: 'STRING' } }, required: ['city'] },
});
const TOOLS = [{ functionDeclarations: [decl('get_weather', 'The weather of a city'), decl('get_time', 'The local time of a city')] }];
const BOTH = { headers: { 'x-bench-tool-call': 'get_weather,get_time' } };

// The response headers a test reads: the gateway's own (x-gw-*) and the request id.
// The SDK gives them as a plain object (sdkHttpResponse.headers) or a Headers.
function gwHeaders(h) {
    const out = {};
    if (!h) return out;
    const add = (v, k) => {
        k = k.toLowerCase();
        if (k.startsWith('x-gw-') || k === 'x-request-id' || k === 'retry-after') out[k] = v;
    };
    if (typeof h.forEach === 'function') h.forEach(add);
    else for (const [k, v] of Object.entries(h)) add(v, k);
    return out;
}

function failure(e) {
    let body = null;
    try {
        body = JSON.parse(e.message);
    } catch (_) {
        body = null;
    }
    return {
        error: String(e && e.stack ? e.stack : e),
        class: e && e.constructor ? e.constructor.name : null,
        api_error: e instanceof ApiError,
        status: e && e.status !== undefined ? e.status : null,
        message: e && e.message,
        body,
    };
}

async function step(fn) {
    try {
        return await fn();
    } catch (e) {
        return failure(e);
    }
}

function summary(r) {
    const cand = (r.candidates || [])[0] || {};
    return {
        text: r.text === undefined ? null : r.text,
        function_calls: r.functionCalls || [],
        content: cand.content || null,
        finish_reason: cand.finishReason || null,
        candidates: (r.candidates || []).length,
        usage: r.usageMetadata || null,
        response_id: r.responseId || null,
        model_version: r.modelVersion || null,
        headers: gwHeaders(r.sdkHttpResponse && r.sdkHttpResponse.headers),
    };
}

// Runs a stream to its end: each chunk's summary, the texts joined, the function calls
// of all chunks in order, and the model turn put together from the chunks' parts.
async function runStream(ai, params) {
    const chunks = [];
    let text = '';
    const calls = [];
    const parts = [];
    for await (const c of await ai.models.generateContentStream(params)) {
        const s = summary(c);
        chunks.push(s);
        if (s.text) text += s.text;
        for (const fc of s.function_calls) calls.push(fc);
        for (const p of (s.content && s.content.parts) || []) parts.push(p);
    }
    const last = chunks[chunks.length - 1] || {};
    return {
        chunks: chunks.length,
        texts: chunks.map((c) => c.text),
        text,
        function_calls: calls,
        parts,
        finish_reasons: chunks.map((c) => c.finish_reason),
        usage: last.usage || null,
        headers: (chunks[0] || {}).headers || {},
    };
}

// The user turn answering a model's function calls: one functionResponse per call, with
// the call's id when it had one (the SDK's documented round trip).
function answers(calls, result) {
    return {
        role: 'user',
        parts: calls.map((fc) => ({
            functionResponse: Object.assign({ name: fc.name, response: { result: result(fc) } }, fc.id ? { id: fc.id } : {}),
        })),
    };
}

async function main() {
    const [baseUrl, apiKey, model, version] = process.argv.slice(2);
    if (!baseUrl || !apiKey || !model) {
        console.error('usage: node gemini.js BASE_URL API_KEY MODEL [API_VERSION]');
        process.exit(2);
    }
    const httpOptions = { baseUrl, timeout: 20000 };
    if (version) httpOptions.apiVersion = version;
    // No retryOptions: the SDK then tries once, so a failure of the gateway shows.
    const ai = new GoogleGenAI({ apiKey, httpOptions });
    const out = { api_version: version || '(sdk default)' };

    out.plain = await step(async () =>
        summary(
            await ai.models.generateContent({
                model,
                contents: 'say hello',
                config: { systemInstruction: 'be brief', maxOutputTokens: 64 },
            })
        )
    );

    out.stream = await step(() => runStream(ai, { model, contents: 'say hello', config: { maxOutputTokens: 64 } }));

    // Function calling, non-streamed: the model calls get_weather; the client sends the
    // model's turn back as it got it, and a functionResponse for the call.
    out.tools = await step(async () => {
        const q = { role: 'user', parts: [{ text: 'What is the weather in Paris?' }] };
        const first = await ai.models.generateContent({ model, contents: [q], config: { tools: TOOLS } });
        const calls = first.functionCalls || [];
        const second = await ai.models.generateContent({
            model,
            contents: [q, first.candidates[0].content, answers(calls, (fc) => `18C in ${fc.args.city}`)],
            config: { tools: TOOLS },
        });
        return { first: summary(first), second: summary(second) };
    });

    // Function calling, streamed, two parallel calls (x-bench-tool-call names both).
    out.tools_stream = await step(async () => {
        const q = { role: 'user', parts: [{ text: 'Weather and time in Paris?' }] };
        const first = await runStream(ai, { model, contents: [q], config: { tools: TOOLS, httpOptions: BOTH } });
        const second = await runStream(ai, {
            model,
            contents: [
                q,
                { role: 'model', parts: first.parts },
                answers(first.function_calls, (fc) => `${fc.name} ok for ${fc.args.city}`),
            ],
            config: { tools: TOOLS, httpOptions: BOTH },
        });
        return { first, second };
    });

    out.count = await step(async () => {
        const r = await ai.models.countTokens({ model, contents: 'say hello' });
        return { total_tokens: r.totalTokens, body: r, headers: gwHeaders(r.sdkHttpResponse && r.sdkHttpResponse.headers) };
    });

    out.models = await step(async () => {
        const names = [];
        const items = [];
        for await (const m of await ai.models.list()) {
            names.push(m.name);
            items.push(m);
        }
        return { names, items };
    });

    out.model_get = await step(async () => ai.models.get({ model }));

    // A bad key: every call must fail with ApiError 401.
    const bad = new GoogleGenAI({ apiKey: 'AIza-not-a-gateway-key', httpOptions });
    const refused = async (fn) => {
        try {
            await fn();
            return { error: 'no error raised' };
        } catch (e) {
            return failure(e);
        }
    };
    out.bad_key = {
        generate: await refused(() => bad.models.generateContent({ model, contents: 'say hello' })),
        stream: await refused(async () => {
            for await (const _ of await bad.models.generateContentStream({ model, contents: 'say hello' }));
        }),
        count: await refused(() => bad.models.countTokens({ model, contents: 'say hello' })),
        list: await refused(async () => {
            for await (const _ of await bad.models.list());
        }),
    };

    process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
    process.stdout.write(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }) + '\n');
    process.exit(1);
});
