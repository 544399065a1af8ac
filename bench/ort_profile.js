// ONNX Runtime's side of bench/import_gains.py: profiles a model and times it
// under two graph optimisation levels, CPU provider, sequential execution.
//
//   node ort_profile.js profile MODEL LEVELS PREFIX THREADS WARMUP RUNS SHAPES [BLOCK]
//       one session per level of LEVELS (comma-separated: 'disabled',
//       'basic', 'extended', 'all'), each with enableProfiling and
//       profileFilePrefix PREFIX_<level>; WARMUP + RUNS runs of each, in blocks
//       of BLOCK runs (default 10) alternating between the levels, so that the
//       profiles see the same machine; then endProfiling (ORT writes
//       PREFIX_<level>_<date>.json). Prints {"ok":true}.
//   node ort_profile.js time MODEL THREADS ROUNDS ITERS WARMUP SHAPES [BLOCK]
//       two sessions, 'disabled' and 'all', loaded side by side; their outputs
//       compared once; then ROUNDS rounds of ITERS runs of each level, in
//       blocks of BLOCK runs (default 10) alternating between the levels,
//       the first level swapped every block pair (ABBA...), all in this one
//       process so that drift, and a neighbour coming and going, hits both
//       alike. Prints each round's median (ms) per level.
//
// SHAPES is JSON: {"input name": [dims...], ...}; inputs are seeded float32
// in [-1, 1). Errors print {"ok":false,"error":...} and exit 1.
'use strict';
const ort = require('onnxruntime-node');

function feedsFor(shapes) {
    let seed = 12345;
    const rnd = () => {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff;
        return seed / 0x40000000 - 1;
    };
    const feeds = {};
    for (const [name, dims] of Object.entries(shapes)) {
        const n = dims.reduce((a, b) => a * b, 1);
        const d = new Float32Array(n);
        for (let i = 0; i < n; i++) d[i] = rnd();
        feeds[name] = new ort.Tensor('float32', d, dims);
    }
    return feeds;
}

function options(level, threads, extra) {
    return Object.assign({
        executionProviders: ['cpu'],
        graphOptimizationLevel: level,
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
    }, extra || {});
}

function median(xs) {
    const s = xs.slice().sort((a, b) => a - b);
    const n = s.length;
    return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

async function profile(model, levels, prefix, threads, warmup, runs, shapes, block) {
    const feeds = feedsFor(shapes);
    const sessions = {};
    for (const l of levels) {
        sessions[l] = await ort.InferenceSession.create(model, options(l, threads, {
            enableProfiling: true,
            profileFilePrefix: prefix + '_' + l,
        }));
    }
    const done = {};
    for (const l of levels) done[l] = 0;
    const total = warmup + runs;
    for (let b = 0; done[levels[levels.length - 1]] < total; b++) {
        const order = b % 2 ? levels.slice().reverse() : levels;
        for (const l of order) {
            const n = Math.min(block, total - done[l]);
            for (let i = 0; i < n; i++) await sessions[l].run(feeds);
            done[l] += n;
        }
    }
    for (const l of levels) {
        sessions[l].endProfiling();
        await sessions[l].release();
    }
    return { ok: true, version: require('onnxruntime-node/package.json').version };
}

async function time(model, threads, rounds, iters, warmup, shapes, block_) {
    const feeds = feedsFor(shapes);
    const levels = ['disabled', 'all'];
    const sessions = {};
    for (const l of levels) sessions[l] = await ort.InferenceSession.create(model, options(l, threads));
    // The two levels must compute the same thing.
    const a = await sessions.disabled.run(feeds);
    const b = await sessions.all.run(feeds);
    let maxAbs = 0;
    for (const name of Object.keys(a)) {
        const x = a[name].data, y = b[name].data;
        for (let i = 0; i < x.length; i++) maxAbs = Math.max(maxAbs, Math.abs(x[i] - y[i]));
    }
    for (const l of levels) for (let i = 0; i < warmup; i++) await sessions[l].run(feeds);
    const out = { disabled: [], all: [] };
    const block = Math.max(1, Math.min(block_, iters));
    for (let r = 0; r < rounds; r++) {
        const samples = { disabled: [], all: [] };
        for (let b = 0; samples.all.length < iters; b++) {
            const order = b % 2 ? ['all', 'disabled'] : ['disabled', 'all'];
            for (const l of order) {
                const n = Math.min(block, iters - samples[l].length);
                for (let i = 0; i < n; i++) {
                    const t0 = process.hrtime.bigint();
                    await sessions[l].run(feeds);
                    samples[l].push(Number(process.hrtime.bigint() - t0) / 1e6);
                }
            }
        }
        for (const l of levels) out[l].push(median(samples[l]));
    }
    for (const l of levels) await sessions[l].release();
    return { ok: true, max_abs_diff: maxAbs, median_ms: out };
}

(async () => {
    const [cmd, ...a] = process.argv.slice(2);
    try {
        let r;
        if (cmd === 'profile') {
            r = await profile(a[0], a[1].split(','), a[2], +a[3], +a[4], +a[5], JSON.parse(a[6]),
                a[7] ? +a[7] : 10);
        } else if (cmd === 'time') {
            r = await time(a[0], +a[1], +a[2], +a[3], +a[4], JSON.parse(a[5]), a[6] ? +a[6] : 10);
        } else {
            throw new Error('usage: ort_profile.js profile|time ...');
        }
        process.stdout.write(JSON.stringify(r) + '\n');
    } catch (e) {
        process.stdout.write(JSON.stringify({ ok: false, error: String(e && e.message ? e.message : e) }) + '\n');
        process.exit(1);
    }
})();
