// memory_viz_check.mjs: opens a `memsnap export --format torch` pickle in
// PyTorch's own memory_viz page (MemoryViz.js) in headless Chromium and
// checks what a person would see there.
//
//   node memory_viz_check.mjs --viz MemoryViz.js --modules NODE_MODULES
//        --chromium PATH --pickle FILE --expect EXPECT.json --shots PREFIX
//        [--history-max N]
//
// The page is served from 127.0.0.1 as PyTorch's memory_viz.html serves it:
// an HTML page whose only script is MemoryViz.js as a module.  MemoryViz.js
// imports d3 from a CDN; nothing here edits the page: an import map, made at
// serve time, points each CDN address (d3@7 from jsdelivr in current PyTorch,
// d3@5 from skypack in older releases) at the same package of the major
// version it names under NODE_MODULES (npm's d3 and d3-v5 = d3@5), and the
// packages' own bare imports at their npm copies.  The files next to
// MemoryViz.js are served too (current PyTorch imports process_alloc_data.js
// from there).  A request to any other host is a failure: the check must not
// depend on the network.
//
// The pickle goes in through the page's own loading path: a File in a
// DataTransfer dropped on the page body, as when a person drags the file onto
// pytorch.org/memory_viz (FileReader, the page's unpickler, its annotation
// pass, then the first view).  Then, for every device the page lists and
// every view it offers (Active Memory Timeline, Allocator State History,
// Active Cached Segment Timeline, ...), the view is selected and must draw.
//
// EXPECT.json (made by memory_viz_browser.sh from Python's pickle.load of the
// same file) gives what the page must have read: the devices, per device the
// number of entries after the page merges each free_requested with the
// free_completed right after it, the number of alloc entries, the first and
// last time_us, and the number of segments.
//
// Asserts: no uncaught error, no console error, no request off this machine;
// the device selector lists exactly the expected devices; the page's parsed
// snapshot (the object it logs after unpickling) has the expected counts and
// times, and its first and last time_us are dates in the recording's year,
// not 1970; each timeline view draws polygons with a y axis; the Allocator
// State History lists one line per entry (skipped above --history-max
// entries: it makes one DOM element per entry) and draws the segments; where
// the page shows an allocation's timestamp on hover (current PyTorch), that
// date is the recording's year.  Prints the load time (drop to first view
// drawn) and each view's time; screenshots PREFIX-<device>-<view>.png.
// Exit 0 pass, 1 a failed check, 2 usage.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';

const opts = { 'history-max': '200000' };
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i];
  if (!k.startsWith('--') || i + 1 >= process.argv.length) usage(`bad argument ${k}`);
  opts[k.slice(2)] = process.argv[i + 1];
}
for (const k of ['viz', 'modules', 'chromium', 'pickle', 'expect', 'shots'])
  if (!opts[k]) usage(`--${k} is missing`);

// Prints a one-line usage error and exits 2.
function usage(why) {
  console.error(`memory_viz_check: ${why} (usage: node memory_viz_check.mjs --viz FILE ` +
                '--modules DIR --chromium PATH --pickle FILE --expect FILE --shots PREFIX ' +
                '[--history-max N])');
  process.exit(2);
}

const failures = [];
// Records a failed check (the run goes on, so one run reports them all).
function fail(msg) {
  failures.push(msg);
  console.log(`FAIL: ${msg}`);
}

const vizDir = path.dirname(path.resolve(opts.viz));
const vizName = path.basename(opts.viz);
const modules = path.resolve(opts.modules);
const expect = JSON.parse(fs.readFileSync(opts.expect, 'utf8'));
const historyMax = Number(opts['history-max']);

// ---------------------------------------------------------------- packages

// A package's ES module entry from its package.json: exports (string, or
// its "import"/"default" condition), else "module", else "main".
function moduleEntry(pkg) {
  let e = pkg.exports;
  if (e && typeof e === 'object' && e['.']) e = e['.'];
  if (e && typeof e === 'object') e = e.import || e.default;
  if (typeof e !== 'string') e = pkg.module || pkg.main || 'index.js';
  return e.replace(/^\.\//, '');
}

// The packages under dir/node_modules-like folder `dir`: [{name, major,
// rel (URL path under /nm/), entry}], one level deep (scoped names skipped:
// d3 has none).
function listPackages(dir, relBase) {
  const out = [];
  if (!fs.existsSync(dir)) return out;
  for (const d of fs.readdirSync(dir)) {
    const pj = path.join(dir, d, 'package.json');
    if (d.startsWith('.') || d.startsWith('@') || !fs.existsSync(pj)) continue;
    const pkg = JSON.parse(fs.readFileSync(pj, 'utf8'));
    out.push({ name: pkg.name, dirName: d, major: Number(String(pkg.version).split('.')[0]),
               rel: `${relBase}${d}`, entry: moduleEntry(pkg) });
  }
  return out;
}

const top = listPackages(modules, '');
const trees = [{ prefix: '', pkgs: top }];
// an npm alias (d3-v5 = d3@5) brings its own older dependencies in its
// nested node_modules: a scope in the import map, as node resolves them
for (const p of top) {
  const nested = listPackages(path.join(modules, p.dirName, 'node_modules'),
                              `${p.dirName}/node_modules/`);
  if (nested.length) trees.push({ prefix: `${p.dirName}/`, pkgs: nested, root: p });
}

// The CDN addresses MemoryViz.js and its neighbours import.
function cdnImports() {
  const urls = new Set();
  for (const f of fs.readdirSync(vizDir)) {
    if (!/\.m?js$/.test(f)) continue;
    const text = fs.readFileSync(path.join(vizDir, f), 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*["'](https?:\/\/[^"']+)["']/g))
      urls.add(m[1]);
  }
  return [...urls];
}

// The import map: each CDN address of d3 or one of its modules at the
// installed package of the same name and major version (when only another
// major is installed: the one of the tree that serves the page's d3, said
// on stdout), and every installed package's bare name.
function importMap() {
  const imports = {};
  const scopes = {};
  for (const p of top) imports[p.name] = `/nm/${p.rel}/${p.entry}`;
  for (const t of trees.slice(1)) {
    const s = (scopes[`/nm/${t.prefix}`] = {});
    for (const p of t.pkgs) s[p.name] = `/nm/${p.rel}/${p.entry}`;
  }
  // every package with the tree its own bare imports resolve in (an alias
  // with a nested node_modules: that one)
  const all = trees.flatMap(t => t.pkgs.map(p => ({
    ...p, tree: trees.find(n => n.root && n.root.dirName === p.dirName && t === trees[0]) || t })));
  const urls = cdnImports();
  const wanted = urls.map(u => [u, /\/(d3(?:-[a-z0-9]+)*)@(\d+)/.exec(u)]);
  const d3want = wanted.find(([, m]) => m && m[1] === 'd3');
  const d3tree = d3want && all.find(p => p.name === 'd3' && p.major === Number(d3want[1][2]));
  for (const [u, m] of wanted) {
    if (!m) {
      fail(`MemoryViz.js imports ${u}, which is not d3: nothing here can serve it`);
      continue;
    }
    const [, name, major] = m;
    let p = all.find(q => q.name === name && q.major === Number(major) &&
                          (!d3tree || q.tree === d3tree.tree || name === 'd3'));
    p = p || all.find(q => q.name === name && q.major === Number(major));
    if (!p && d3tree) {
      p = all.find(q => q.name === name && q.tree === d3tree.tree);
      if (p) console.log(`note: ${u} served by ${name}@${p.major} (the one d3@${d3tree.major} uses)`);
    }
    if (!p) {
      fail(`MemoryViz.js imports ${name}@${major} (${u}); ${modules} has no such package ` +
           '(npm ci --prefix tests/interop/browser)');
      continue;
    }
    imports[u] = `/nm/${p.rel}/${p.entry}`;
  }
  return { imports, scopes };
}

// ------------------------------------------------------------------ server

const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html',
                '.json': 'application/json' };

// Serves file `f`, or f.js when f does not exist (d3@5's sources import
// "./bisect" without the extension, which a bundler or node would resolve).
function sendFile(res, f) {
  let file = f;
  if (!fs.existsSync(file) && fs.existsSync(`${file}.js`)) file = `${file}.js`;
  if (!fs.existsSync(file) || !fs.statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
}

// `rel` under `root`, or null when it would leave root.
function inside(root, rel) {
  const f = path.resolve(root, `.${path.sep}${decodeURIComponent(rel)}`);
  return f === root || f.startsWith(root + path.sep) ? f : null;
}

const map = importMap();
const page = '<!DOCTYPE html>\n<html>\n<head><meta charset="utf-8">\n' +
  `<script type="importmap">${JSON.stringify(map)}</script>\n</head>\n` +
  `<body>\n<script type="module" src="/viz/${vizName}"></script>\n</body>\n</html>\n`;
const server = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  let f = null;
  if (u.pathname === '/') {
    res.writeHead(200, { 'content-type': 'text/html' }).end(page);
    return;
  }
  if (u.pathname === '/favicon.ico') {   // the browser's own request, not the page's
    res.writeHead(204).end();
    return;
  }
  if (u.pathname.startsWith('/viz/')) f = inside(vizDir, u.pathname.slice(5));
  else if (u.pathname.startsWith('/nm/')) f = inside(modules, u.pathname.slice(4));
  else if (u.pathname === '/snapshot') f = path.resolve(opts.pickle);
  if (!f) {
    res.writeHead(404).end();
    return;
  }
  sendFile(res, f);
});
await new Promise(r => server.listen(0, '127.0.0.1', r));
const origin = `http://127.0.0.1:${server.address().port}`;

// ----------------------------------------------------------------- browser

const require = createRequire(path.join(modules, 'x.js'));
const { chromium } = require('playwright-core');
// --no-sandbox: Chromium's sandbox refuses to start as root (CI runs as root)
const browser = await chromium.launch({ executablePath: opts.chromium, headless: true,
                                        args: ['--no-sandbox'] });
const tab = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
let parsed = null;   // the page's `console.log(data)` of the unpickled snapshot
tab.on('pageerror', e => fail(`uncaught error in the page: ${e.message}`));
tab.on('console', async msg => {
  if (msg.type() === 'error') fail(`console error: ${msg.text()}`);
  const a = msg.args()[0];
  if (!parsed && a) {
    try {
      if (await a.evaluate(o => !!o && typeof o === 'object' && 'device_traces' in o)) parsed = a;
    } catch (_e) { /* the page moved on: not the snapshot */ }
  }
});
tab.on('response', r => {
  if (r.status() >= 400) fail(`${r.url()}: HTTP ${r.status()}`);
});
tab.on('requestfailed', r => fail(`request failed: ${r.url()} (${r.failure()?.errorText})`));
tab.on('request', r => {
  if (!r.url().startsWith(origin) && !r.url().startsWith('data:'))
    fail(`the page asked for ${r.url()}: not served here (MemoryViz.js changed its imports?)`);
});

await tab.goto(origin + '/', { waitUntil: 'load' });
await tab.waitForFunction(() => document.querySelectorAll('select').length >= 3, null,
                          { timeout: 60000 });

// The visible view: the body's div that is neither hidden nor the controls.
const VISIBLE = `(() => [...document.body.children].filter(d => d.tagName === 'DIV' &&
  getComputedStyle(d).display !== 'none' && !d.querySelector(':scope > select')).at(-1))()`;

// Drops the pickle on the page; resolves with the seconds until the first
// view's elements were there, and until they were painted.
async function dropPickle() {
  const name = path.basename(opts.pickle);
  await tab.evaluate(async n => {
    const blob = await (await fetch('/snapshot')).blob();
    window.__memsnap_file = new File([blob], n);
  }, name);
  const t0 = Date.now();
  await tab.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(window.__memsnap_file);
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true,
                                                        cancelable: true }));
  });
  await tab.waitForFunction(`(() => { const v = ${VISIBLE};
    return v && v.querySelector('svg polygon, svg rect, pre'); })()`, null,
                            { timeout: 600000, polling: 100 });
  const dom = (Date.now() - t0) / 1000;
  await painted();
  return [dom, (Date.now() - t0) / 1000];
}

// Resolves once the browser has painted a frame of what the page holds now.
async function painted() {
  await tab.evaluate(() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0))));
}

// Selects `value` in the n-th select (0 snapshot, 1 view, 2 device) as a
// person would (a change event).
async function choose(n, value) {
  await tab.evaluate(([i, v]) => {
    const s = document.querySelectorAll('select')[i];
    s.value = v;
    s.dispatchEvent(new Event('change', { bubbles: true }));
  }, [n, String(value)]);
}

// What the visible view shows: polygons, rects, pre lines, y-axis ticks.
async function viewStats() {
  return tab.evaluate(`(() => { const v = ${VISIBLE}; if (!v) return null;
    return { polygons: v.querySelectorAll('svg polygon').length,
             rects: v.querySelectorAll('svg rect').length,
             pres: v.querySelectorAll('pre').length,
             ticks: [...v.querySelectorAll('svg g.tick text')].map(t => t.textContent),
             text: v.innerText.slice(0, 2000) }; })()`);
}

// Hovers the largest allocation polygon of the visible timeline and returns
// the context text the page shows for it.
async function hoverLargest() {
  return tab.evaluate(`(() => { const v = ${VISIBLE};
    let best = null, area = 0;
    for (const p of v.querySelectorAll('svg polygon')) {
      const d = p.__data__;
      if (!d || d.elem === 'summarized') continue;
      const b = p.getBBox();
      if (b.width * b.height > area) { area = b.width * b.height; best = p; }
    }
    if (!best) return '';
    best.dispatchEvent(new MouseEvent('mouseover', { bubbles: true }));
    return [...v.querySelectorAll('pre')].map(p => p.textContent).join('\\n'); })()`);
}

// A view's name as a file name part: "Active Memory Timeline" -> active-memory-timeline.
const slug = s => s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');

const [domS, loadS] = await dropPickle();
console.log(`load: ${loadS.toFixed(1)} s (drop to the first view painted; ${domS.toFixed(1)} s ` +
            'to its elements: read, unpickle, annotate, lay out)');

// the device selector
const devices = await tab.evaluate(() =>
  [...document.querySelectorAll('select')[2].options].map(o => Number(o.text)));
console.log(`devices: ${devices.join(' ')}`);
if (JSON.stringify(devices) !== JSON.stringify(expect.devices))
  fail(`the device selector lists ${JSON.stringify(devices)}, expected ${JSON.stringify(expect.devices)}`);

// the page's own reading of the file
for (let i = 0; i < 50 && !parsed; i++) await new Promise(r => setTimeout(r, 100));
if (!parsed) {
  fail('the page logged no parsed snapshot (console.log(data) after unpickle)');
} else {
  const got = await parsed.evaluate(d => {
    const per = {};
    let first = null, last = null;
    d.device_traces.forEach((tr, i) => {
      per[i] = { entries: tr.length, allocs: tr.filter(e => e.action === 'alloc').length };
      for (const e of tr) {
        if (typeof e.time_us !== 'number') continue;
        if (first === null || e.time_us < first) first = e.time_us;
        if (last === null || e.time_us > last) last = e.time_us;
      }
    });
    const year = us => (us === null ? null : new Date(us / 1000).getUTCFullYear());
    return { per, first, last, firstYear: year(first), lastYear: year(last),
             segments: d.segments.length };
  });
  console.log(`parsed by the page: ${JSON.stringify(got.per)}, ${got.segments} segments, ` +
              `time_us ${got.first}..${got.last} (${got.firstYear}..${got.lastYear})`);
  for (const [dev, want] of Object.entries(expect.traces)) {
    const g = got.per[dev] || { entries: 0, allocs: 0 };
    if (g.entries !== want.entries || g.allocs !== want.allocs)
      fail(`device ${dev}: the page read ${g.entries} entries (${g.allocs} alloc), ` +
           `expected ${want.entries} (${want.allocs})`);
  }
  if (got.segments !== expect.segments)
    fail(`the page read ${got.segments} segments, expected ${expect.segments}`);
  if (got.first !== expect.first_time_us || got.last !== expect.last_time_us)
    fail(`the page read time_us ${got.first}..${got.last}, expected ` +
         `${expect.first_time_us}..${expect.last_time_us}`);
  if (got.firstYear !== expect.year || got.lastYear !== expect.year)
    fail(`the page dates the entries ${got.firstYear}..${got.lastYear}, expected ${expect.year}`);
}

// every view the page offers, on every device
const views = await tab.evaluate(() =>
  [...document.querySelectorAll('select')[1].options].map(o => o.text));
console.log(`views: ${views.join(' | ')}`);
const shots = [];
for (const dev of devices) {
  await choose(2, dev);
  for (const view of views) {
    const want = expect.traces[dev] ? expect.traces[dev].entries : 0;
    const history = /history/i.test(view);
    if (history && want > historyMax) {
      console.log(`device ${dev}, ${view}: skipped (${want} entries > --history-max ${historyMax})`);
      continue;
    }
    const t0 = Date.now();
    await choose(1, view);
    try {
      await tab.waitForFunction(`(() => { const v = ${VISIBLE};
        return v && v.querySelector('svg polygon, svg rect, pre, table, div'); })()`, null,
                                { timeout: 300000, polling: 100 });
    } catch (_e) {
      fail(`device ${dev}, ${view}: nothing drawn in 300 s`);
      continue;
    }
    await painted();
    const secs = (Date.now() - t0) / 1000;
    const s = await viewStats();
    const shot = `${opts.shots}-${dev}-${slug(view)}.png`;
    await tab.screenshot({ path: shot });
    shots.push(shot);
    console.log(`device ${dev}, ${view}: ${secs.toFixed(1)} s, ${s.polygons} polygons, ` +
                `${s.rects} rects, ${s.pres} lines, y ticks ${s.ticks.slice(0, 3).join(' ')}.. -> ${shot}`);
    if (/timeline|allocated memory/i.test(view)) {
      if (s.polygons < 2 || s.ticks.length < 2)
        fail(`device ${dev}, ${view}: ${s.polygons} polygons and ${s.ticks.length} y ticks drawn`);
      if (/active memory timeline/i.test(view)) {
        const ctx = await hoverLargest();
        const m = /timestamp (.*)/.exec(ctx);
        if (m) {
          const y = new Date(m[1]).getFullYear();
          console.log(`device ${dev}: hover shows timestamp ${m[1]}`);
          if (y !== expect.year) fail(`device ${dev}: the hover says timestamp ${m[1]}, expected ${expect.year}`);
        } else if (!ctx.includes('Size:')) {
          fail(`device ${dev}: hovering the largest allocation shows no context: ${ctx.slice(0, 200)}`);
        }
      }
    } else if (history) {
      // one line per entry (the page's list), and the segments drawn
      if (s.pres < want || s.rects < 1)
        fail(`device ${dev}, ${view}: ${s.pres} lines for ${want} entries, ${s.rects} rects`);
    } else if (!s.text.trim() && !s.polygons && !s.rects) {
      fail(`device ${dev}, ${view}: the view is empty`);
    }
  }
}

await browser.close();
server.close();
if (failures.length) {
  console.log(`memory_viz_check: ${failures.length} check(s) failed`);
  process.exit(1);
}
console.log(`memory_viz_check: PASS (${shots.length} views drawn)`);
