// Times a JavaScript MDX parser on the same files, the same way bench/parse.py times ours.
//
//   node bench/node_reference.mjs BUNDLE [--rounds N] [--min-round S] [--detail K]
//        [--detail-file FILE]... [--detail-min-round S] [--] FILE...
//
// BUNDLE is an ES module (or CommonJS file) built from some viewer's MDX parser, for example
// flowtsohg/mdx-m3-viewer's src/parsers/mdlx bundled with esbuild (see bench/README.md). It is
// never part of this repository. The harness looks for a Model class as `default.Model`,
// `Model` or `default`, reads with `new Model(); model.load(arrayBuffer)` and writes with
// `model.saveMdx()`.
//
// Method, kept identical to bench/parse.py:
//   * the files are read from disk once, outside any timing;
//   * a file the parser throws on is reported under "failed" and left out of the timed set;
//   * one "pass" reads (or writes) every file of the set once; a round repeats passes, the count
//     fixed before timing (doubling until one round takes >= --min-round seconds);
//   * the result is the best (shortest) of --rounds rounds; MB/s = bytes of the input files per
//     pass * passes / seconds / 1e6, for reading and for writing alike;
//   * writing times saveMdx() on models loaded beforehand;
//   * round-trip: saveMdx() of a freshly loaded model compared byte for byte with the input;
//   * per-file numbers (--detail K: the K largest files read; --detail-file: those files) use
//     rounds of >= --detail-min-round seconds (0.1).
// Prints one JSON object on stdout.

import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

function usage(msg) {
  process.stderr.write(`${msg}\nusage: node node_reference.mjs BUNDLE [--rounds N] [--min-round S] [--detail K] `
    + '[--detail-file FILE]... [--detail-min-round S] [--] FILE...\n');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { bundle: null, rounds: 5, minRound: 0.3, detail: 0, detailFiles: [], detailMinRound: 0.1, files: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v < 0) usage(`bad value for ${a}`);
      return v;
    };
    if (a === '--rounds') opts.rounds = Math.max(1, Math.floor(num()));
    else if (a === '--min-round') opts.minRound = num();
    else if (a === '--detail') opts.detail = Math.floor(num());
    else if (a === '--detail-min-round') opts.detailMinRound = num();
    else if (a === '--detail-file') {
      if (i + 1 >= argv.length) usage('missing value for --detail-file');
      opts.detailFiles.push(argv[++i]);
    }
    else if (a === '--') opts.files.push(...argv.slice(i + 1)), (i = argv.length);
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else if (opts.bundle === null) opts.bundle = a;
    else opts.files.push(a);
  }
  if (!opts.bundle) usage('missing BUNDLE');
  if (!opts.files.length) usage('no files');
  return opts;
}

async function loadModelClass(bundle) {
  const mod = await import(pathToFileURL(resolve(bundle)).href);
  const candidates = [mod.default && mod.default.Model, mod.Model, mod.default && mod.default.default && mod.default.default.Model, mod.default];
  for (const c of candidates) {
    if (typeof c === 'function' && typeof c.prototype.load === 'function' && typeof c.prototype.saveMdx === 'function') {
      return c;
    }
  }
  throw new Error(`${bundle}: no Model class with load() and saveMdx() found among its exports`);
}

const now = () => Number(process.hrtime.bigint()) / 1e9;

// Keeps results observable so the JIT cannot drop the work.
let sink = 0;

function timeRounds(pass, rounds, minRound) {
  pass(); // warm-up: JIT, inline caches
  let passes = 1;
  for (;;) {
    const t0 = now();
    for (let i = 0; i < passes; i++) pass();
    const dt = now() - t0;
    if (dt >= minRound || passes >= 1 << 20) break;
    passes = Math.min(passes * 100, Math.max(passes * 2, Math.ceil((passes * minRound * 1.1) / Math.max(dt, 1e-9))));
  }
  let best = Infinity;
  const all = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = now();
    for (let i = 0; i < passes; i++) pass();
    const dt = now() - t0;
    all.push(dt);
    if (dt < best) best = dt;
  }
  return { passes, best_s: best, rounds_s: all };
}

function rate(bytes, t) {
  return { ...t, mb_s: (bytes * t.passes) / t.best_s / 1e6 };
}

function firstDiff(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const Model = await loadModelClass(opts.bundle);

  const ok = []; // { path, ab, bytes, model }
  const failed = [];
  const roundtrip = { ok: 0, total: 0, mismatched: [] };
  for (const path of opts.files) {
    const buf = readFileSync(path);
    // A fresh, exactly sized ArrayBuffer: what a browser's fetch() would hand the viewer.
    const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    let model;
    try {
      model = new Model();
      model.load(ab);
    } catch (e) {
      failed.push({ path, stage: 'read', error: String(e && e.message ? e.message : e) });
      continue;
    }
    let out;
    try {
      out = model.saveMdx();
    } catch (e) {
      failed.push({ path, stage: 'write', error: String(e && e.message ? e.message : e) });
      continue;
    }
    const input = new Uint8Array(ab);
    const d = firstDiff(input, out);
    roundtrip.total++;
    if (d < 0) roundtrip.ok++;
    else roundtrip.mismatched.push({ path, in_bytes: input.length, out_bytes: out.length, first_diff: d });
    ok.push({ path, ab, bytes: ab.byteLength, model });
  }

  const bytes = ok.reduce((s, f) => s + f.bytes, 0);
  const readPass = (set) => () => {
    for (const f of set) {
      const m = new Model();
      m.load(f.ab);
      sink += m.version;
    }
  };
  const writePass = (set) => () => {
    for (const f of set) sink += f.model.saveMdx().length;
  };

  const result = {
    parser: resolve(opts.bundle),
    node: process.version,
    files: ok.length,
    bytes,
    rounds: opts.rounds,
    min_round_s: opts.minRound,
    failed,
    roundtrip,
  };
  if (ok.length) {
    result.read = rate(bytes, timeRounds(readPass(ok), opts.rounds, opts.minRound));
    result.write = rate(bytes, timeRounds(writePass(ok), opts.rounds, opts.minRound));
  }
  if (opts.detail > 0 || opts.detailFiles.length) {
    const wanted = new Set(opts.detailFiles);
    const largest = [...ok].sort((a, b) => b.bytes - a.bytes || (a.path < b.path ? -1 : 1)).slice(0, opts.detail);
    const chosen = [...largest, ...ok.filter((f) => wanted.has(f.path) && !largest.includes(f))];
    result.detail = chosen.map((f) => ({
      path: f.path,
      bytes: f.bytes,
      read: rate(f.bytes, timeRounds(readPass([f]), opts.rounds, opts.detailMinRound)),
      write: rate(f.bytes, timeRounds(writePass([f]), opts.rounds, opts.detailMinRound)),
    }));
  }
  result.sink = sink;
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((e) => {
  process.stderr.write(`${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
