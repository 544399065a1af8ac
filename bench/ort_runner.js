// ONNX Runtime's side of bench/ort_compare.py: one long-lived process that
// takes commands on stdin, one JSON object a line, and answers each with one
// JSON line on stdout, so the driver can interleave its rounds with
// `cannprof bench` without paying ORT's session setup every round.
//
//   {"cmd":"load","model":F,"threads":T,"inputs":{"name":"x.npy",...},
//    "outputs":{"name":"ref.npy",...}}
//       -> {"ok":true,"rel_l2":{"name":r,...}}  (ORT's outputs vs the reference)
//   {"cmd":"save","outputs":{"name":"out.npy",...}}
//       -> {"ok":true}  (writes ORT's outputs of the loaded inputs as .npy:
//          the references of models no framework here can run)
//   {"cmd":"time","warmup":W,"iterations":N}
//       -> {"ok":true,"median_ms":m,"samples":N}
//   errors -> {"ok":false,"error":"..."}
//
// The CPU provider with every graph optimisation, intra-op threads = T,
// inter-op 1, sequential execution: ORT's defaults for a latency run.
'use strict';
const fs = require('fs');
const readline = require('readline');
const ort = require('onnxruntime-node');

// .npy reader for the dtypes the corpus writes (numpy's format 1.0 / 2.0).
const NPY_TYPES = {
    '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
    '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
    '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
};

function readNpy(path) {
    const buf = fs.readFileSync(path);
    if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(path + ': not an .npy file');
    const major = buf[6];
    const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
    const hstart = major === 1 ? 10 : 12;
    const header = buf.toString('latin1', hstart, hstart + hlen);
    const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
    if (/'fortran_order':\s*True/.test(header)) throw new Error(path + ': fortran order');
    const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1]
        .split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
    const t = NPY_TYPES[descr];
    if (!t) throw new Error(path + ': dtype ' + descr);
    const off = hstart + hlen;
    const bytes = buf.subarray(off);
    const aligned = new Uint8Array(bytes.length);
    aligned.set(bytes);
    let data = new t[1](aligned.buffer, 0, bytes.length / t[1].BYTES_PER_ELEMENT);
    if (t[0] === 'bool') data = Uint8Array.from(data);
    return new ort.Tensor(t[0], data, shape);
}

const NPY_DESCR = {
    float32: '<f4', float64: '<f8', int64: '<i8', int32: '<i4', bool: '|b1', uint8: '|u1',
    int8: '|i1',
};

// .npy format 1.0: the header padded with spaces to a multiple of 64 bytes.
function writeNpy(path, t) {
    const descr = NPY_DESCR[t.type];
    if (!descr) throw new Error(path + ': no .npy form for ORT type ' + t.type);
    const dims = t.dims.map(Number);
    const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
    let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
    const pad = 64 - ((10 + header.length + 1) % 64);
    header += ' '.repeat(pad % 64) + '\n';
    const pre = Buffer.alloc(10);
    pre.write('\x93NUMPY', 0, 'latin1');
    pre[6] = 1;
    pre[7] = 0;
    pre.writeUInt16LE(header.length, 8);
    const d = t.data;
    const body = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
    fs.writeFileSync(path, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function relL2(ref, out) {
    let num = 0, den = 0;
    const n = ref.data.length;
    if (out.data.length !== n) return Infinity;
    for (let i = 0; i < n; i++) {
        const a = Number(ref.data[i]), b = Number(out.data[i]);
        num += (a - b) * (a - b);
        den += a * a;
    }
    if (den === 0) return num === 0 ? 0 : Infinity;
    return Math.sqrt(num / den);
}

let session = null;
let feeds = null;

async function handle(msg) {
    if (msg.cmd === 'load') {
        if (session) await session.release();
        session = await ort.InferenceSession.create(msg.model, {
            executionProviders: ['cpu'],
            graphOptimizationLevel: 'all',
            intraOpNumThreads: msg.threads,
            interOpNumThreads: 1,
            executionMode: 'sequential',
        });
        feeds = {};
        for (const [name, file] of Object.entries(msg.inputs)) feeds[name] = readNpy(file);
        const out = await session.run(feeds);
        const rel = {};
        for (const [name, file] of Object.entries(msg.outputs || {})) {
            rel[name] = out[name] ? relL2(readNpy(file), out[name]) : null;
        }
        return { ok: true, rel_l2: rel };
    }
    if (msg.cmd === 'save') {
        const out = await session.run(feeds);
        for (const [name, file] of Object.entries(msg.outputs)) {
            if (!out[name]) throw new Error('the model has no output ' + name);
            writeNpy(file, out[name]);
        }
        return { ok: true };
    }
    if (msg.cmd === 'time') {
        for (let i = 0; i < msg.warmup; i++) await session.run(feeds);
        const s = [];
        for (let i = 0; i < msg.iterations; i++) {
            const t0 = process.hrtime.bigint();
            await session.run(feeds);
            s.push(Number(process.hrtime.bigint() - t0) / 1e6);
        }
        s.sort((a, b) => a - b);
        const m = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
        return { ok: true, median_ms: m, samples: s.length };
    }
    if (msg.cmd === 'version') return { ok: true, version: require('onnxruntime-node/package.json').version };
    throw new Error('unknown command ' + msg.cmd);
}

const rl = readline.createInterface({ input: process.stdin });
let chain = Promise.resolve();
rl.on('line', (line) => {
    chain = chain.then(async () => {
        let reply;
        try {
            reply = await handle(JSON.parse(line));
        } catch (e) {
            reply = { ok: false, error: String(e && e.message ? e.message : e).split('\n')[0] };
        }
        process.stdout.write(JSON.stringify(reply) + '\n');
    });
});
rl.on('close', () => chain.then(() => process.exit(0)));
