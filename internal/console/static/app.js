// Terrace console. Plain JavaScript, no build step, no external requests:
// every byte comes from this node's admin listener. The DOM is built with
// h() (textContent, never innerHTML), so names from the store cannot
// inject markup.
'use strict';

const API = '/console/api';
const state = { csrf: '', session: null, view: null, viewName: '', charts: [], busy: false, es: null, poll: null };

// ---------- helpers ----------

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'style') el.setAttribute('style', v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat(Infinity)) {
    if (k === undefined || k === null || k === false) continue;
    el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

// IDs are uint64 and can exceed what a JavaScript number holds exactly:
// keep them as strings by quoting long integers before JSON.parse.
function parseJSON(text) {
  return JSON.parse(text.replace(/("(?:extent|egroup|seed|id)"\s*:\s*)(\d{15,})/g, '$1"$2"'));
}

async function api(method, path, query, body) {
  let url = API + path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    const s = q.toString();
    if (s) url += '?' + s;
  }
  const init = { method, headers: {}, credentials: 'same-origin' };
  // Every admin API call carries the token, reads included (the node
  // refuses /console/api/v1/ without it); only /session, which hands it
  // out, goes without.
  if (state.csrf) init.headers['X-Terrace-CSRF'] = state.csrf;
  if (body !== undefined) init.body = body;
  let resp;
  try {
    resp = await fetch(url, init);
  } catch (e) {
    throw new ApiError(0, 'Unreachable', 'cannot reach the node: ' + e.message);
  }
  if (resp.status === 401) {
    location.href = '/console/login';
    throw new ApiError(401, 'Unauthenticated', 'session ended; log in again');
  }
  const text = await resp.text();
  if (!resp.ok) {
    let msg = resp.status + ' ' + resp.statusText, code = 'HTTP' + resp.status;
    try { const j = JSON.parse(text); if (j.error) { msg = j.error; code = j.code || code; } } catch (_) { if (text) msg += ': ' + text.slice(0, 200); }
    throw new ApiError(resp.status, code, msg);
  }
  if (!text) return null;
  return parseJSON(text);
}

function fmtBytes(n) {
  n = Number(n) || 0;
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + ' ' + u[i];
}
const fmtRate = (n) => fmtBytes(n) + '/s';
function fmtDur(ns) {
  const s = Number(ns) / 1e9;
  if (!isFinite(s) || s <= 0) return '-';
  if (s < 1) return (s * 1000).toFixed(0) + ' ms';
  if (s < 90) return s.toFixed(1) + ' s';
  if (s < 5400) return (s / 60).toFixed(1) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}
function fmtTime(t) {
  if (!t || t.startsWith('0001-')) return '-';
  const d = new Date(t);
  return d.toLocaleString();
}
function ago(t) {
  if (!t || t.startsWith('0001-')) return 'never';
  const s = (Date.now() - new Date(t).getTime()) / 1000;
  if (s < 60) return Math.max(0, s).toFixed(0) + ' s ago';
  if (s < 3600) return (s / 60).toFixed(0) + ' min ago';
  return (s / 3600).toFixed(1) + ' h ago';
}
const hex = (id) => { try { return BigInt(id).toString(16).padStart(16, '0'); } catch (_) { return String(id); } };
const pct = (a, b) => (b > 0 ? (100 * a) / b : 0);
const tierBadge = (t) => h('span', { class: 'tier tier-' + t }, t);
const DEVICE_STATES = ['up', 'draining', 'failed'];

function usageBar(used, cap) {
  const p = pct(used, cap);
  const cls = p >= 90 ? 'bar bad' : p >= 75 ? 'bar warn' : 'bar';
  return h('div', { class: cls, title: fmtBytes(used) + ' of ' + fmtBytes(cap) },
    h('span', { style: 'width:' + Math.min(100, p).toFixed(1) + '%' }), h('em', {}, p.toFixed(1) + '%'));
}

function errorBox(err, what) {
  const code = err && err.code ? ' (' + err.code + ')' : '';
  return h('div', { class: 'msg error', role: 'alert' }, (what ? what + ': ' : '') + (err && err.message ? err.message : String(err)) + code);
}

function flash(kind, text) {
  const box = document.getElementById('messages');
  const m = h('div', { class: 'msg ' + kind, role: kind === 'error' ? 'alert' : 'status' }, text);
  box.append(m);
  setTimeout(() => m.remove(), kind === 'error' ? 15000 : 6000);
}

function counts(m) {
  const e = Object.entries(m || {}).sort();
  return e.length ? e.map(([k, v]) => k + '=' + v).join(', ') : '-';
}

// panel(title, promise-producing fn, render): each panel loads on its own
// and shows its own error, so one failing endpoint never blanks the page.
const nodes = (x) => [].concat(x).flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false);

async function fill(el, load, render) {
  try {
    const data = await load();
    el.replaceChildren(...nodes(render(data)));
  } catch (e) {
    el.replaceChildren(errorBox(e));
  }
}

// ---------- overview ----------

const overview = {
  title: 'Overview',
  down: new Set(),
  render(root) {
    this.nodes = h('div', { class: 'panel', id: 'panel-nodes' }, 'loading…');
    this.health = h('div', { class: 'panel', id: 'panel-health' }, 'loading…');
    this.capacity = h('div', { class: 'panel', id: 'panel-capacity' }, 'loading…');
    this.devices = h('div', { id: 'panel-devices' }, 'loading…');
    root.append(h('div', { class: 'grid' }, this.nodes, this.health, this.capacity), this.devices);
    return this.refresh();
  },
  async refresh() {
    const [st, rep, cur] = await Promise.allSettled([api('GET', '/v1/status'), api('GET', '/v1/tier/report'), api('GET', '/v1/curator/status')]);
    this.down = new Set(st.status === 'fulfilled' && st.value.cluster ? (st.value.cluster.nodes || []).filter((n) => !n.up).map((n) => n.id) : []);
    const show = (el, r, fn) => el.replaceChildren(...nodes(r.status === 'fulfilled' ? fn(r.value) : errorBox(r.reason)));
    show(this.nodes, st, (s) => this.renderNodes(s));
    show(this.capacity, rep, (r) => this.renderCapacity(r));
    show(this.devices, rep, (r) => this.renderDevices(r));
    this.health.replaceChildren(...nodes(this.renderHealth(st, rep, cur)));
  },
  renderNodes(s) {
    const nodes = s.cluster && s.cluster.nodes && s.cluster.nodes.length
      ? s.cluster.nodes.map((n) => ({ id: n.ID || n.id, rack: n.Rack || n.rack, up: n.up, draining: n.draining }))
      : [{ id: s.node, rack: s.rack, up: true, draining: false }];
    const up = nodes.filter((n) => n.up).length;
    const rows = nodes.map((n) => h('tr', { 'data-node': n.id },
      h('td', {}, h('b', {}, n.id), n.id === s.node ? h('span', { class: 'muted small' }, ' (this node)') : null),
      h('td', {}, n.rack || '-'),
      h('td', {}, n.up ? h('span', { class: 'badge ok' }, 'up') : h('span', { class: 'badge bad' }, 'down'),
        n.draining ? h('span', { class: 'badge warn' }, 'draining') : null)));
    const out = [h('h2', {}, 'Nodes'), h('div', { class: 'big' }, up + ' / ' + nodes.length, h('span', { class: 'muted small' }, ' up')),
      h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'node'), h('th', {}, 'rack'), h('th', {}, 'state'))), h('tbody', {}, rows))];
    if (s.cluster && s.cluster.meta_members) {
      out.push(h('h3', {}, 'Metadata (etcd) members'),
        h('div', {}, s.cluster.meta_members.map((m) => h('span', { class: 'badge ' + (m.healthy ? 'ok' : 'bad'), title: m.error || m.endpoint },
          (m.name || m.endpoint || '?') + (m.leader ? ' ★' : '')), ' ')));
    }
    out.push(h('p', { class: 'muted small' }, 'placement ', h('code', {}, s.placement), ' · default vector ', h('code', {}, s.default_vector)));
    return out;
  },
  renderHealth(st, rep, cur) {
    const problems = [];
    if (rep.status === 'fulfilled') {
      const devs = rep.value.devices || [];
      const failed = devs.filter((d) => d.State === 2);
      if (failed.length) problems.push(failed.length + ' failed device(s): ' + failed.map((d) => d.ID).join(', '));
      const bad = devs.reduce((a, d) => a + (d.bad_replicas || 0), 0);
      if (bad) problems.push(bad + ' replica(s) marked bad (being repaired)');
      for (const t of rep.value.tiers || []) {
        if (t.capacity_bytes > 0 && t.used_bytes / t.capacity_bytes >= 0.9) problems.push('tier ' + t.tier + ' is ' + pct(t.used_bytes, t.capacity_bytes).toFixed(0) + '% full');
      }
    }
    if (st.status === 'fulfilled' && st.value.cluster) {
      const down = (st.value.cluster.nodes || []).filter((n) => !n.up);
      if (down.length) problems.push(down.length + ' node(s) down: ' + down.map((n) => n.ID || n.id).join(', '));
      const sick = (st.value.cluster.meta_members || []).filter((m) => !m.healthy);
      if (sick.length) problems.push(sick.length + ' metadata member(s) unhealthy');
    }
    let last = null;
    if (cur.status === 'fulfilled' && cur.value.last_job) {
      last = cur.value.last_job;
      const s = last.stats || {};
      if (s.UnderReplicatedBytes > 0) problems.push(fmtBytes(s.UnderReplicatedBytes) + ' under-replicated at the last scan');
      if ((last.dangling || []).length) problems.push((last.dangling || []).length + ' dangling reference(s) found by the last scan');
      if (last.bad_replicas_found) problems.push(last.bad_replicas_found + ' bad replica(s) found by scrubbing');
    }
    const out = [h('h2', {}, 'Health'),
      problems.length ? h('div', { class: 'big' }, h('span', { class: 'badge bad', id: 'health-state' }, 'degraded'))
        : h('div', { class: 'big' }, h('span', { class: 'badge ok', id: 'health-state' }, 'healthy'))];
    if (problems.length) out.push(h('ul', {}, problems.map((p) => h('li', {}, p))));
    else out.push(h('p', { class: 'muted' }, 'Every device up, nothing under-replicated at the last scan, no corruption found.'));
    for (const r of [st, rep, cur]) if (r.status === 'rejected') out.push(errorBox(r.reason));
    if (last) out.push(h('p', { class: 'muted small' }, 'last Curator job: ' + last.kind + ' scan, ' + ago(last.start)));
    return out;
  },
  renderCapacity(r) {
    const tiers = r.tiers || [];
    const used = tiers.reduce((a, t) => a + t.used_bytes, 0), cap = tiers.reduce((a, t) => a + t.capacity_bytes, 0);
    return [h('h2', {}, 'Capacity'), h('div', { class: 'big' }, fmtBytes(used), h('span', { class: 'muted small' }, ' of ' + fmtBytes(cap))),
      usageBar(used, cap),
      h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'tier'), h('th', {}, 'usage'), h('th', { class: 'num' }, 'hot'), h('th', { class: 'num' }, 'cold'), h('th', { class: 'num' }, 'pending moves'))),
        h('tbody', {}, tiers.map((t) => h('tr', { 'data-tier': t.tier }, h('td', {}, tierBadge(t.tier)), h('td', {}, usageBar(t.used_bytes, t.capacity_bytes)),
          h('td', { class: 'num' }, fmtBytes(t.hot_bytes)), h('td', { class: 'num' }, fmtBytes(t.cold_bytes)),
          h('td', { class: 'num' }, t.pending_moves ? t.pending_moves + ' (' + fmtBytes(t.pending_bytes) + ')' : '-')))))];
  },
  renderDevices(r) {
    const byTier = {};
    for (const d of r.devices || []) (byTier[d.Tier] = byTier[d.Tier] || []).push(d);
    const order = ['mem', 'ssd', 'hdd', 'remote'];
    const tiers = Object.keys(byTier).sort((a, b) => (order.indexOf(a) + 10 * (order.indexOf(a) < 0)) - (order.indexOf(b) + 10 * (order.indexOf(b) < 0)));
    return tiers.map((t) => h('div', { class: 'panel', 'data-tier-panel': t },
      h('h2', {}, 'Devices · ', tierBadge(t), h('span', { class: 'muted small' }, ' ' + byTier[t].length + ' device(s)')),
      h('table', {}, h('thead', {}, h('tr', {}, ['device', 'node', 'state', 'usage', 'used', 'capacity', 'egroups', 'queue', 'read speed', 'write speed', 'bad replicas'].map((c, i) => h('th', { class: i > 3 ? 'num' : '' }, c)))),
        h('tbody', {}, byTier[t].map((d) => h('tr', { 'data-device': d.ID, 'data-tier': d.Tier },
          h('td', {}, h('code', {}, d.ID)), h('td', {}, d.Node), h('td', {}, this.down.has(d.Node) ? h('span', { class: 'badge bad', title: 'its node is down' }, 'node down')
            : h('span', { class: 'badge ' + ['ok', 'warn', 'bad'][d.State] }, DEVICE_STATES[d.State] || d.State)),
          h('td', {}, usageBar(d.UsedBytes, d.CapacityBytes)), h('td', { class: 'num' }, fmtBytes(d.UsedBytes)), h('td', { class: 'num' }, fmtBytes(d.CapacityBytes)),
          h('td', { class: 'num' }, d.egroups), h('td', { class: 'num' }, d.QueueLen), h('td', { class: 'num' }, fmtRate(d.ReadBps)), h('td', { class: 'num' }, fmtRate(d.WriteBps)),
          h('td', { class: 'num' }, d.bad_replicas || 0)))))));
  },
};

// ---------- tiers over time ----------

const TIER_COLORS = { mem: '#8e44ad', ssd: '#2f6fde', hdd: '#1f9d55', remote: '#d9822b' };
const colorOf = (t, i) => TIER_COLORS[t] || ['#555', '#c0392b', '#16a085', '#7f8c8d'][i % 4];

const tiersView = {
  title: 'Tiers',
  render(root) {
    this.info = h('p', { class: 'muted' });
    this.box = h('div', {}, 'loading…');
    root.append(h('div', { class: 'panel' }, h('h2', {}, 'Tiers over time'), this.info, this.box));
    return this.refresh();
  },
  destroy() { for (const c of state.charts) c.destroy(); state.charts = []; },
  samples: [],
  async refresh() {
    // Fetch only the samples newer than the ones held (a full ring is
    // hundreds of kilobytes); keep as many as the node's ring holds.
    let hist;
    const newest = this.samples.length ? this.samples[this.samples.length - 1].time : '';
    try { hist = await api('GET', '/history', { since: newest }); } catch (e) { this.box.replaceChildren(errorBox(e, 'metric history')); return; }
    this.samples = this.samples.concat(hist.samples || []);
    if (hist.capacity && this.samples.length > hist.capacity) this.samples = this.samples.slice(this.samples.length - hist.capacity);
    const samples = this.samples;
    this.info.replaceChildren('From this node\'s own metric history: ' + samples.length + ' samples, one every ' + (hist.interval_ms / 1000) + ' s (kept in memory; Grafana keeps the long view). Throughput is this node\'s devices; usage and hot/cold bytes are cluster-wide.');
    if (samples.length < 2) { this.box.replaceChildren(h('div', { class: 'msg info' }, 'Collecting samples… charts appear after the second sample.')); return; }
    const last = samples[samples.length - 1];
    if (last.tiers_error) this.box.before(errorBox({ message: last.tiers_error }, 'tier report'));
    const tiers = [...new Set(samples.flatMap((s) => s.tiers.map((t) => t.tier)))];
    const xs = samples.map((s) => new Date(s.time).getTime() / 1000);
    const col = (f) => tiers.map((t) => samples.map((s) => { const x = s.tiers.find((y) => y.tier === t); return x ? f(x) : null; }));
    const specs = [
      { id: 'usage', title: 'Usage (% of capacity)', series: tiers.map((t) => t + ' used %'), data: col((x) => (x.capacity_bytes ? (100 * x.used_bytes) / x.capacity_bytes : null)), fmt: (v) => v.toFixed(1) + '%' },
      { id: 'hot', title: 'Hot bytes (read within the access window)', series: tiers.map((t) => t + ' hot'), data: col((x) => x.hot_bytes), fmt: fmtBytes },
      { id: 'cold', title: 'Cold bytes', series: tiers.map((t) => t + ' cold'), data: col((x) => x.cold_bytes), fmt: fmtBytes },
      { id: 'read', title: 'Read throughput (this node)', series: tiers.map((t) => t + ' read'), data: col((x) => x.read_bps), fmt: fmtRate },
      { id: 'write', title: 'Write throughput (this node)', series: tiers.map((t) => t + ' write'), data: col((x) => x.write_bps), fmt: fmtRate },
      { id: 'latency', title: 'Client latency (writes and read opens, moving average)', series: ['recent', 'quiet baseline'], colors: ['#d64545', '#6b7383'],
        data: [samples.map((s) => s.latency_s * 1000), samples.map((s) => (s.baseline_s ? s.baseline_s * 1000 : null))], fmt: (v) => v.toFixed(2) + ' ms' },
    ];
    this.destroy();
    const full = Math.max(320, Math.min(1360, this.box.clientWidth || 900));
    const twoCols = full >= 900;
    const width = twoCols ? Math.floor(full / 2) - 12 : full;
    const wrap = h('div', { class: twoCols ? 'charts two' : 'charts' });
    for (const sp of specs) {
      const el = h('div', { class: 'chart', id: 'chart-' + sp.id });
      wrap.append(h('div', {}, h('h3', {}, sp.title), el));
      const opts = {
        width, height: 180,
        scales: { x: { time: true } },
        axes: [{}, { size: 80, values: (u, vals) => vals.map((v) => (v == null ? '' : sp.fmt(v))) }],
        series: [{}].concat(sp.series.map((name, i) => ({ label: name, stroke: (sp.colors || [])[i] || colorOf(tiers[i], i), width: 2, value: (u, v) => (v == null ? '-' : sp.fmt(v)) }))),
      };
      if (window.uPlot) state.charts.push(new uPlot(opts, [xs].concat(sp.data), el));
      else el.append(errorBox({ message: 'chart library failed to load' }));
    }
    this.box.replaceChildren(wrap);
  },
};

// ---------- curator ----------

const curatorView = {
  title: 'Curator',
  selected: null,
  render(root) {
    this.status = h('div', { class: 'panel', id: 'panel-curator-status' }, 'loading…');
    this.jobs = h('div', { class: 'panel', id: 'panel-jobs' }, 'loading…');
    this.history = h('div', { class: 'panel', id: 'panel-history' }, 'loading…');
    this.detail = h('div', { class: 'panel', id: 'panel-job-detail' }, h('p', { class: 'muted' }, 'Select a job to see every task with its reason.'));
    const run = (kind) => async (ev) => {
      ev.target.disabled = true;
      try {
        await api('POST', '/v1/curator/run', { kind });
        flash('ok', kind + ' scan started; it appears under running jobs, then in the history.');
        setTimeout(() => this.refresh(), 500);
      } catch (e) { flash('error', 'run ' + kind + ' scan: ' + e.message); }
      finally { ev.target.disabled = false; }
    };
    root.append(h('div', { class: 'row', style: 'margin-bottom:12px' },
      h('button', { id: 'run-full', onclick: run('full') }, 'Run full scan'),
      h('button', { id: 'run-partial', class: 'secondary', onclick: run('partial') }, 'Run partial scan'),
      h('span', { class: 'muted' }, 'A full scan checks objects, extents and egroups (recovery, garbage, scrubbing, tiering); a partial scan only egroups and access records.')),
    this.status, this.jobs, this.history, this.detail);
    return this.refresh();
  },
  async refresh() {
    await Promise.all([
      fill(this.status, () => api('GET', '/v1/curator/status'), (s) => [h('h2', {}, 'Status'),
        h('p', {}, 'this node is ', s.leader ? h('b', {}, 'the Curator master') : 'not the Curator master', '. ',
          Object.entries(s.last_run || {}).map(([k, v]) => 'last ' + k + ' scan ' + ago(v) + '. ')),
        s.running ? h('p', {}, h('span', { class: 'badge warn' }, 'scanning'), ' ', s.running.kind + ' scan (' + s.running.trigger + ') since ' + ago(s.running.start)) : null,
        Object.keys(s.nodes_down_since || {}).length ? h('p', {}, 'nodes down: ' + Object.entries(s.nodes_down_since).map(([n, t]) => n + ' since ' + ago(t)).join(', ')) : null,
        h('p', { class: 'muted small' }, h('code', {}, s.options))]),
      fill(this.jobs, () => api('GET', '/v1/curator/jobs', { n: 15 }), (j) => this.renderJobs(j)),
      fill(this.history, () => api('GET', '/v1/curator/history', { n: 15 }), (hs) => this.renderHistory(hs || [])),
    ]);
    if (this.selected) await this.showJob(this.selected, false);
  },
  jobRow(p, running) {
    const done = p.bytes_total ? pct(p.bytes_done, p.bytes_total) : (p.tasks ? (100 * (p.tasks - (p.states.pending || 0))) / p.tasks : 100);
    return h('tr', { class: 'clickable' + (this.selected === p.id ? ' selected' : ''), 'data-job': p.id, 'data-kind': p.kind, onclick: () => this.showJob(p.id, true) },
      h('td', {}, running ? h('span', { class: 'badge warn' }, 'running') : p.finished && !p.finished.startsWith('0001') ? h('span', { class: 'badge ok' }, 'finished') : h('span', { class: 'badge' }, 'unfinished')),
      h('td', {}, p.kind), h('td', {}, p.trigger), h('td', {}, fmtTime(p.created)),
      h('td', { class: 'num' }, p.tasks), h('td', {}, counts(p.states)),
      h('td', {}, h('div', { class: 'bar' }, h('span', { style: 'width:' + done.toFixed(1) + '%' }), h('em', {}, fmtBytes(p.bytes_done) + ' / ' + fmtBytes(p.bytes_total)))),
      h('td', { class: 'num' }, p.rate_bytes_per_s ? fmtRate(p.rate_bytes_per_s) : '-'), h('td', { class: 'num' }, running ? fmtDur(p.eta_ns) : '-'));
  },
  renderJobs(j) {
    const running = j.running || [], recent = (j.recent || []).filter((p) => !running.some((r) => r.id === p.id));
    const head = h('thead', {}, h('tr', {}, ['state', 'kind', 'trigger', 'created', 'tasks', 'task states', 'bytes moved', 'rate', 'ETA'].map((c) => h('th', {}, c))));
    return [h('h2', {}, 'Jobs ', h('span', { class: 'muted small' }, running.length + ' running')),
      running.length + recent.length === 0 ? h('p', { class: 'muted', id: 'no-jobs' }, 'No jobs yet: scans that find work create a job of tasks.') :
        h('table', { id: 'jobs-table' }, head, h('tbody', {}, running.map((p) => this.jobRow(p, true)), recent.map((p) => this.jobRow(p, false))))];
  },
  renderHistory(hs) {
    return [h('h2', {}, 'Scan history'),
      hs.length === 0 ? h('p', { class: 'muted' }, 'No scans yet.') :
        h('table', { id: 'history-table' }, h('thead', {}, h('tr', {}, ['started', 'kind', 'trigger', 'took', 'records', 'under-repl.', 'garbage', 'tasks planned', 'tasks done', 'stale', 'failed', 'moved', 'freed', 'scrubbed', 'bad'].map((c) => h('th', {}, c)))),
          h('tbody', {}, hs.map((r) => h('tr', { 'data-history': r.id, 'data-kind': r.kind },
            h('td', {}, fmtTime(r.start)), h('td', {}, r.kind), h('td', {}, r.trigger),
            h('td', {}, r.end && !r.end.startsWith('0001') ? fmtDur((new Date(r.end) - new Date(r.start)) * 1e6) : 'running'),
            h('td', { class: 'num' }, r.records_scanned), h('td', { class: 'num' }, fmtBytes((r.stats || {}).UnderReplicatedBytes)), h('td', { class: 'num' }, fmtBytes((r.stats || {}).GarbageBytes)),
            h('td', {}, counts(r.tasks_planned)), h('td', {}, counts(r.tasks_done)), h('td', { class: 'num' }, r.tasks_stale), h('td', { class: 'num' }, r.tasks_failed),
            h('td', { class: 'num' }, fmtBytes(r.bytes_moved)), h('td', { class: 'num' }, fmtBytes(r.bytes_freed)), h('td', { class: 'num' }, fmtBytes(r.bytes_scrubbed)),
            h('td', { class: 'num' }, r.bad_replicas_found)))))];
  },
  async showJob(id, scroll) {
    this.selected = id;
    for (const tr of document.querySelectorAll('tr[data-job]')) tr.classList.toggle('selected', tr.dataset.job === id);
    await fill(this.detail, () => api('GET', '/v1/curator/jobs/' + encodeURIComponent(id), { max: 500 }), (j) => {
      const byKind = {};
      for (const t of j.task_list) { const k = byKind[t.kind] = byKind[t.kind] || { n: 0, bytes: 0 }; k.n++; k.bytes += t.bytes || 0; }
      return [h('h2', {}, 'Job ' + j.id + ' · ' + j.kind),
        h('p', {}, 'trigger: ' + j.trigger + ' · seed ', h('code', {}, j.seed), ' · owner ' + (j.owner || '-') + ' · started ' + fmtTime(j.started) + ' · finished ' + fmtTime(j.finished)),
        h('p', {}, 'tasks by kind: ', Object.entries(byKind).map(([k, v]) => h('span', { class: 'badge', style: 'margin-right:4px' }, k + ' ' + v.n + ' (' + fmtBytes(v.bytes) + ')'))),
        j.rules ? h('p', {}, 'planner rules: ' + counts(j.rules)) : null,
        (j.errors || []).map((e) => h('div', { class: 'msg error' }, e)),
        j.matched > j.task_list.length ? h('p', { class: 'muted' }, 'showing ' + j.task_list.length + ' of ' + j.matched + ' tasks') : null,
        h('table', { id: 'tasks-table' }, h('thead', {}, h('tr', {}, ['kind', 'egroup', 'bytes', 'from', 'to', 'reason', 'state'].map((c) => h('th', {}, c)))),
          h('tbody', {}, j.task_list.map((t) => h('tr', { 'data-task-kind': t.kind },
            h('td', {}, t.kind), h('td', {}, h('code', {}, hex(t.egroup))), h('td', { class: 'num' }, fmtBytes(t.bytes)),
            h('td', {}, (t.remove || []).map((r) => h('div', {}, h('code', {}, r.Device), ' ', tierBadge(r.Tier)))),
            h('td', {}, (t.add || []).map((r) => h('div', {}, h('code', {}, r.Device), ' ', tierBadge(r.Tier)))),
            h('td', {}, t.reason || '-', t.rules ? h('div', { class: 'muted small' }, 'rules ' + t.rules.join(', ') + (t.cost_before ? ' · cost ' + t.cost_before.toFixed(2) + ' → ' + (t.cost_after || 0).toFixed(2) : '')) : null),
            h('td', {}, h('span', { class: 'badge ' + ({ done: 'ok', failed: 'bad', stale: 'warn' }[t.state] || '') }, t.state))))))];
    });
    if (scroll) this.detail.scrollIntoView({ behavior: 'smooth' });
  },
};

// ---------- objects ----------

const objectsView = {
  title: 'Objects',
  bucket: '', prefix: '', after: '', located: null,
  render(root) {
    this.buckets = h('div', { class: 'panel', id: 'panel-buckets' }, 'loading…');
    this.listing = h('div', { class: 'panel', id: 'panel-objects' }, h('p', { class: 'muted' }, 'Select a bucket.'));
    this.locate = h('div', { class: 'panel', id: 'panel-locate' });
    const b = h('input', { id: 'locate-bucket', placeholder: 'bucket', size: 16 }), k = h('input', { id: 'locate-key', placeholder: 'key', size: 40 });
    const form = h('form', { class: 'row', id: 'locate-form', onsubmit: (e) => { e.preventDefault(); this.showLocate(b.value.trim(), k.value); } },
      h('b', {}, 'Locate an object'), b, ' / ', k, h('button', { type: 'submit' }, 'Locate'));
    root.append(h('div', { class: 'panel' }, form), h('div', { class: 'grid', style: 'grid-template-columns: 260px 1fr' }, this.buckets, this.listing), this.locate);
    if (this.located) this.showLocate(this.located.bucket, this.located.key);
    if (this.bucket) this.list();
    return this.refresh();
  },
  async refresh() {
    await fill(this.buckets, () => api('GET', '/v1/buckets'), (bs) => [h('h2', {}, 'Buckets'),
      bs.length === 0 ? h('p', { class: 'muted' }, 'No buckets. Create one with any S3 client or `terrace bucket create`.') :
        h('table', { id: 'buckets-table' }, h('tbody', {}, bs.map((b) => h('tr', { class: 'clickable' + (b.name === this.bucket ? ' selected' : ''), 'data-bucket': b.name,
          onclick: () => { this.bucket = b.name; this.prefix = ''; this.after = ''; this.list(); this.refresh(); } },
        h('td', {}, h('b', {}, b.name), h('div', { class: 'muted small' }, 'vector ' + (b.vector || 'default')))))))]);
  },
  async list() {
    const bucket = this.bucket, prefix = this.prefix;
    await fill(this.listing, () => api('GET', '/v1/data/' + encodeURIComponent(bucket), { prefix, delimiter: '/', after: this.after, max: 100 }), (res) => {
      const parts = prefix.split('/').filter(Boolean);
      const crumbs = [h('a', { onclick: () => { this.prefix = ''; this.after = ''; this.list(); } }, bucket)];
      parts.forEach((p, i) => crumbs.push(' / ', h('a', { onclick: () => { this.prefix = parts.slice(0, i + 1).join('/') + '/'; this.after = ''; this.list(); } }, p)));
      const rows = (res.prefixes || []).map((p) => h('tr', { class: 'clickable', 'data-prefix': p, onclick: () => { this.prefix = p; this.after = ''; this.list(); } },
        h('td', {}, '▸ ' + p.slice(prefix.length)), h('td', {}), h('td', {}), h('td', {})));
      for (const o of res.objects) {
        rows.push(h('tr', { class: 'clickable', 'data-key': o.key, onclick: () => this.showLocate(bucket, o.key) },
          h('td', {}, h('code', {}, o.key.slice(prefix.length))), h('td', { class: 'num' }, fmtBytes(o.size)), h('td', {}, h('code', {}, o.vector)), h('td', {}, fmtTime(o.mtime))));
      }
      return [h('h2', {}, 'Objects'), h('div', { class: 'crumbs' }, crumbs),
        rows.length === 0 ? h('p', { class: 'muted' }, 'Empty.') :
          h('table', { id: 'objects-table' }, h('thead', {}, h('tr', {}, h('th', {}, 'key'), h('th', { class: 'num' }, 'size'), h('th', {}, 'vector'), h('th', {}, 'modified'))), h('tbody', {}, rows)),
        h('div', { class: 'row', style: 'margin-top:8px' }, this.after ? h('button', { class: 'secondary', onclick: () => { this.after = ''; this.list(); } }, 'First page') : null,
          res.truncated ? h('button', { class: 'secondary', id: 'next-page', onclick: () => { this.after = res.next; this.list(); } }, 'Next page') : null)];
    });
  },
  async showLocate(bucket, key) {
    if (!bucket || !key) { this.locate.replaceChildren(errorBox({ message: 'give a bucket and a key' })); return; }
    this.located = { bucket, key };
    document.getElementById('locate-bucket').value = bucket;
    document.getElementById('locate-key').value = key;
    await fill(this.locate, () => api('GET', '/v1/object/locate', { bucket, key }), (loc) => {
      const vec = h('input', { id: 'vector-input', value: loc.vector, size: 18 });
      const out = h('div', { id: 'vector-result' });
      const setVector = async (e) => {
        e.preventDefault();
        const btn = e.target.querySelector('button');
        btn.disabled = true;
        out.replaceChildren(h('div', { class: 'msg info' }, 'moving data to ' + vec.value + '…'));
        try {
          const r = await api('POST', '/v1/object/set-replication', { bucket, key, vector: vec.value.trim(), wait: 1 });
          out.replaceChildren(h('div', { class: 'msg ok' }, 'vector is now ' + r.vector + ' (' + r.status + ')'));
          setTimeout(() => this.showLocate(bucket, key), 300);
        } catch (err) { out.replaceChildren(errorBox(err, 'set replication')); }
        finally { btn.disabled = false; }
      };
      const egroups = {};
      for (const x of loc.extents || []) (egroups[x.egroup] = egroups[x.egroup] || { x, extents: [] }).extents.push(x);
      return [h('h2', {}, 'Location of ', h('code', { id: 'located-name' }, loc.bucket + '/' + loc.key)),
        h('p', {}, fmtBytes(loc.size) + ' · etag ', h('code', {}, loc.etag), ' · vector ', h('code', { id: 'located-vector' }, loc.vector), loc.class ? ' · class ' + loc.class : '', ' · placement ', h('code', {}, loc.policy)),
        h('p', {}, 'replicas by tier (distinct egroups): ', Object.entries(loc.tiers || {}).map(([t, n]) => h('span', { style: 'margin-right:6px' }, tierBadge(t), ' ×' + n))),
        h('form', { class: 'row', id: 'vector-form', onsubmit: setVector }, 'Change the replication vector:', vec, h('button', { type: 'submit' }, 'Apply'),
          h('span', { class: 'muted small' }, 'e.g. ssd=1,hdd=1 · hdd=2 · any=3; the bytes are copied, verified and switched over')), out,
        h('h3', {}, (loc.extents || []).length + ' extent(s) in ' + Object.keys(egroups).length + ' egroup(s)'),
        h('div', { id: 'locate-tree' }, Object.values(egroups).map((g) => h('div', { class: 'egroup', 'data-egroup': hex(g.x.egroup) },
          h('div', {}, 'egroup ', h('code', {}, hex(g.x.egroup)), ' ', h('span', { class: 'badge' }, g.x.state || '?')),
          h('div', { class: 'tree' },
            g.extents.map((x) => h('div', { class: 'muted small' }, 'extent ', h('code', {}, hex(x.extent)), ' bytes ' + x.offset + '…' + (x.offset + x.length) + ' at egroup offset ' + x.egroup_offset, x.error ? h('span', { class: 'badge bad' }, x.error) : null)),
            (g.x.replicas || []).map((r) => h('div', { class: 'replica', 'data-replica-tier': r.t }, '→ replica on ', h('code', {}, r.d), ' ', tierBadge(r.t), ' node ' + r.n, r.b ? h('span', { class: 'badge bad' }, ' bad') : null))))))];
    });
  },
};

// ---------- policies ----------

const policiesView = {
  title: 'Policies',
  render(root) {
    this.list = h('div', { class: 'panel', id: 'panel-policies' }, 'loading…');
    this.detail = h('div', { class: 'panel', id: 'panel-policy-detail', hidden: true });
    root.append(this.list, this.detail);
    return this.refresh();
  },
  async refresh() {
    try {
      const res = await api('GET', '/v1/policies');
      const ps = (res && res.policies) || [];
      this.list.replaceChildren(h('h2', {}, 'Policies'), ps.length === 0 ? h('p', { class: 'muted' }, 'No policies installed.') :
        h('table', { id: 'policies-table' }, h('thead', {}, h('tr', {}, ['name', 'hook', 'version', 'running', 'state', 'author', 'calls', 'errors'].map((c) => h('th', {}, c)))),
          h('tbody', {}, ps.map((p) => h('tr', { class: 'clickable', 'data-policy': p.name, onclick: () => this.show(p.name) },
            h('td', {}, h('b', {}, p.name)), h('td', {}, p.hook), h('td', { class: 'num' }, p.version), h('td', { class: 'num' }, p.running),
            h('td', {}, p.disabled ? h('span', { class: 'badge bad', title: p.last_error || '' }, 'disabled') : h('span', { class: 'badge ok' }, 'active')),
            h('td', {}, p.author || '-'), h('td', { class: 'num' }, p.calls || 0), h('td', { class: 'num' }, p.errors || 0))))));
    } catch (e) {
      if (e.status === 404) this.list.replaceChildren(h('h2', {}, 'Policies'), h('div', { class: 'msg info', id: 'policies-disabled' }, 'Policies are not enabled on this node (its admin API has no /v1/policies).'));
      else this.list.replaceChildren(h('h2', {}, 'Policies'), errorBox(e));
    }
  },
  async show(name) {
    this.detail.hidden = false;
    await fill(this.detail, () => api('GET', '/v1/policies/' + encodeURIComponent(name) + '/history'), (hist) => {
      hist = hist || [];
      const a = h('select', { id: 'diff-from' }, hist.map((v) => h('option', { value: v.version }, 'v' + v.version)));
      const b = h('select', { id: 'diff-to' }, hist.map((v, i) => h('option', { value: v.version, selected: i === 0 }, 'v' + v.version)));
      if (hist.length > 1) a.value = hist[1].version;
      const out = h('div', {});
      const diff = async () => {
        try {
          const [x, y] = await Promise.all([a.value, b.value].map((v) => api('GET', '/v1/policies/' + encodeURIComponent(name), { version: v })));
          out.replaceChildren(h('pre', { class: 'diff' }, lineDiff((x.source || (x.record || {}).source || ''), (y.source || (y.record || {}).source || ''))));
        } catch (e) { out.replaceChildren(errorBox(e, 'diff')); }
      };
      const rollback = async (v) => {
        if (!confirm('Roll ' + name + ' back to version ' + v + '? A new version with that source is committed.')) return;
        try { await api('POST', '/v1/policies/' + encodeURIComponent(name) + '/rollback', { version: v }); flash('ok', name + ' rolled back to v' + v); this.refresh(); this.show(name); } catch (e) { flash('error', 'rollback: ' + e.message); }
      };
      return [h('h2', {}, 'Policy ' + name),
        h('table', {}, h('thead', {}, h('tr', {}, ['version', 'author', 'time', 'comment', ''].map((c) => h('th', {}, c)))),
          h('tbody', {}, hist.map((v) => h('tr', {}, h('td', {}, 'v' + v.version + (v.deleted ? ' (deleted)' : '')), h('td', {}, v.author || '-'), h('td', {}, fmtTime(v.time)), h('td', {}, v.comment || ''),
            h('td', {}, h('button', { class: 'secondary', onclick: () => rollback(v.version) }, 'Roll back to this')))))),
        h('div', { class: 'row', style: 'margin-top:10px' }, 'Diff ', a, ' → ', b, h('button', { onclick: diff }, 'Show diff')), out];
    });
  },
};

// lineDiff marks lines removed (-) and added (+) between two texts
// (longest common subsequence; policies are small).
function lineDiff(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  if (x.length * y.length > 4e6) return [h('span', {}, 'too large to diff here')];
  const L = Array.from({ length: x.length + 1 }, () => new Int32Array(y.length + 1));
  for (let i = x.length - 1; i >= 0; i--) for (let j = y.length - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < x.length || j < y.length) {
    if (i < x.length && j < y.length && x[i] === y[j]) { out.push(h('span', {}, '  ' + x[i] + '\n')); i++; j++; }
    else if (j < y.length && (i === x.length || L[i][j + 1] >= L[i + 1][j])) { out.push(h('span', { class: 'add' }, '+ ' + y[j] + '\n')); j++; }
    else { out.push(h('span', { class: 'del' }, '- ' + x[i] + '\n')); i++; }
  }
  return out;
}

// ---------- shell: routing, live updates ----------

const VIEWS = { overview, tiers: tiersView, curator: curatorView, objects: objectsView, policies: policiesView };

async function route() {
  const name = (location.hash.replace(/^#\/?/, '').split('/')[0]) || 'overview';
  const view = VIEWS[name] || overview;
  if (state.view && state.view.destroy) state.view.destroy();
  state.view = view;
  state.viewName = name;
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.view === name);
  document.title = view.title + ' · Terrace console';
  const root = document.getElementById('view');
  root.replaceChildren();
  root.dataset.view = name;
  state.busy = true;
  try { await view.render(root); } catch (e) { root.append(errorBox(e)); } finally { state.busy = false; root.dataset.loaded = name; }
}

async function tick() {
  if (state.busy || !state.view || document.hidden) return;
  state.busy = true;
  try { await state.view.refresh(); } catch (e) { flash('error', e.message); } finally { state.busy = false; }
}

function startLive(intervalMs) {
  const dot = document.getElementById('live');
  const poll = () => { if (!state.poll) state.poll = setInterval(tick, Math.max(2000, intervalMs)); };
  if (!window.EventSource) { poll(); return; }
  const es = new EventSource(API + '/events');
  state.es = es;
  es.addEventListener('open', () => { dot.classList.add('on'); dot.title = 'live updates (server-sent events)'; if (state.poll) { clearInterval(state.poll); state.poll = null; } });
  es.addEventListener('sample', tick);
  es.addEventListener('expired', () => { es.close(); location.href = '/console/login'; });
  es.addEventListener('error', () => { dot.classList.remove('on'); dot.title = 'live updates interrupted; polling'; poll(); });
}

async function main() {
  try {
    state.session = await api('GET', '/session');
  } catch (e) {
    document.getElementById('view').replaceChildren(errorBox(e, 'session'));
    return;
  }
  state.csrf = state.session.csrf;
  document.getElementById('who').textContent = state.session.access_key;
  document.getElementById('node-name').textContent = 'node ' + state.session.node;
  document.getElementById('logout').addEventListener('click', async () => {
    try {
      await fetch('/console/logout', { method: 'POST', credentials: 'same-origin', headers: { 'X-Terrace-CSRF': state.csrf } });
    } catch (_) { /* the login page follows either way */ }
    location.href = '/console/login';
  });
  // Shown only now: a click before the handler exists would do nothing.
  document.getElementById('logout').hidden = false;
  window.addEventListener('hashchange', route);
  await route();
  startLive(state.session.sample_every_ms || 5000);
}

main();
