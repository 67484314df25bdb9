// plantd dashboard view: draws a dashboard's widgets from history (/v1/telemetry/series, /latest, /v1/alerts), then keeps them live from /v1/ws.
(function () {
  'use strict';

  // Test hook: a browser test reads that live points arrived (pointsReceived) and were drawn (frames, lastDrawMs);
  // drawnAfterMs holds, per live point, the time from its timestamp to the frame that drew it (the benchmark's
  // ingest-to-screen latency; the newest 10,000).
  const stats = { frames: 0, pointsReceived: 0, lastDrawMs: 0, drawnAfterMs: [] };
  let undrawn = [];
  const hook = { stats: stats, connected: false, live: true };
  window.plantdDashboard = hook;
  const root = document.getElementById('dashboard');
  if (!root) return;
  const toolbarEl = document.getElementById('toolbar');
  const errorEl = document.getElementById('dash-error');
  const gridEl = document.getElementById('grid');
  const dashId = root.dataset.dashboardId || '';
  const RANGES = ['15m', '1h', '6h', '24h', '7d', '30d'];
  const THEME_KEY = 'plantd-theme';
  const DEFAULT_EXPECT_MS = 120000;     // a value whose update interval is not known yet is stale after 2 min
  const DASHES = [[], [6, 3], [2, 2], [10, 3, 2, 3], [1, 3], [8, 2, 2, 2, 2, 2], [12, 4], [3, 5]];
  const GLYPH = { critical: '\u25B2', warning: '\u25C6', info: '\u25CF', custom: '\u25A0' };   // as the server's badges
  const STATUS_RANK = { active: 0, acknowledged: 1, resolved: 2 };
  const SEV_RANK = { critical: 0, warning: 1, info: 2, custom: 3 };
  const DOT = ' \u00B7 ';
  const state = {
    dash: null, vars: {}, range: '', live: true, from: null, to: null, frozenAt: Date.now(),
    widgets: [], routes: new Map(), latest: new Map(), alerts: new Map(),
  };
  // ---------- helpers ----------
  function el(tag, props) {
    const e = document.createElement(tag);
    for (const k of Object.keys(props || {})) {
      const v = props[k]; if (v == null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), v);
      else if (k === 'value' || k === 'hidden') e[k] = v;
      else e.setAttribute(k, String(v));
    }
    for (let i = 2; i < arguments.length; i++) if (arguments[i] != null) e.append(arguments[i]);
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const k of Object.keys(attrs)) e.setAttribute(k, String(attrs[k]));
    return text != null ? Object.assign(e, { textContent: text }) : e;
  }
  const keyOf = (asset, tag) => asset + '\u0000' + tag;
  const iso = (ms) => new Date(ms).toISOString();
  const fmtTime = (ms) => new Date(ms).toLocaleString();
  function parseRange(text) {
    const m = /^(\d+)([mhd])$/.exec(text || ''); return m && +m[1] > 0 ? +m[1] * { m: 60000, h: 3600000, d: 86400000 }[m[2]] : 0;
  }
  function fmtNum(v, decimals) {
    if (v == null || !isFinite(v)) return '\u2013';
    const d = decimals == null ? null : Math.max(0, Math.min(6, decimals));
    return Number(v).toLocaleString(undefined, d == null ? { maximumFractionDigits: 3, useGrouping: false }
      : { minimumFractionDigits: d, maximumFractionDigits: d, useGrouping: false });
  }
  function fmtAge(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    return s < 90 ? s + ' s' : s < 5400 ? Math.round(s / 60) + ' min' : s < 172800 ? Math.round(s / 3600) + ' h' : Math.round(s / 86400) + ' d';
  }
  function lowerBound(arr, x) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function showError(msg) { errorEl.textContent = msg; errorEl.hidden = false; }
  function clearError() { errorEl.textContent = ''; errorEl.hidden = true; }
  // GET an API path; resolves to `data` (or the whole body), rejects with the envelope's message.
  async function api(path, full) {
    const res = await fetch(path, { credentials: 'same-origin', headers: { Accept: 'application/json' } })
      .catch((e) => { throw Object.assign(new Error('cannot reach the server (' + e.message + ')'), { status: 0 }); });
    const body = res.status === 204 ? null : await res.json().catch(() => null); if (res.ok) return full ? body : body && body.data;
    const er = body && body.error, msg = er && er.message ? er.message : 'request failed: HTTP ' + res.status;
    if (res.status === 401) showError(msg + ' \u2014 sign in again to continue.');
    throw Object.assign(new Error(msg), { status: res.status });
  }
  // ---------- theme and palette (canvas colours come from the CSS variables) ----------
  let palette = {};
  function readPalette() {
    const cs = getComputedStyle(document.documentElement);
    const names = ['chart-axis', 'chart-grid', 'band', 'limit-line', 'zone-alpha', 'critical', 'warning', 'info', 'marker-ack', 'marker-resolve'];
    for (let i = 1; i <= 8; i++) names.push('trend-' + i);
    palette = {}; for (const n of names) palette[n] = cs.getPropertyValue('--' + n).trim() || '#777';
  }
  function currentTheme() {
    const t = document.documentElement.dataset.theme;
    return t || (window.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
  }
  function themeChanged() {
    readPalette(); const dark = currentTheme() === 'dark';
    for (const b of document.querySelectorAll('.theme-button')) { b.textContent = dark ? 'Light theme' : 'Dark theme'; b.setAttribute('aria-pressed', String(dark)); }
    for (const w of state.widgets) markDirty(w);
  }
  function toggleTheme() {
    const next = document.documentElement.dataset.theme = currentTheme() === 'dark' ? 'light' : 'dark';
    try { localStorage.setItem(THEME_KEY, next); } catch (e) { /* storage refused: the choice lasts this page */ }
  }
  function initTheme() {
    let saved = null;
    try { saved = localStorage.getItem(THEME_KEY); } catch (e) { /* no storage */ }
    if (saved === 'light' || saved === 'dark') document.documentElement.dataset.theme = saved;
    if (window.matchMedia) matchMedia('(prefers-color-scheme: dark)').addEventListener('change', themeChanged);
    // Whoever switches the theme (this toolbar, the top bar through console.js), the canvases follow.
    new MutationObserver(themeChanged).observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
    const top = document.getElementById('theme-toggle');    // the top bar's button, unless console.js took it
    if (top && !top.dataset.bound) { top.dataset.bound = '1'; top.classList.add('theme-button'); top.addEventListener('click', toggleTheme); }
    readPalette();
  }
  // ---------- URL state: ?var-asset=..&range=24h&live=0&from=<ms>&to=<ms>&kiosk ----------
  const variables = () => (state.dash && state.dash.layout && state.dash.layout.variables) || [];
  function readUrl() {
    const q = new URLSearchParams(location.search); state.vars = {};
    for (const v of variables()) state.vars[v.name] = q.get('var-' + v.name) || v.default;
    state.range = parseRange(q.get('range')) ? q.get('range') : ''; const from = Number(q.get('from')), to = Number(q.get('to'));
    const fixed = q.has('from') && q.has('to') && isFinite(from) && isFinite(to) && from < to;
    state.from = fixed ? from : null; state.to = fixed ? to : null; state.live = !fixed && q.get('live') !== '0';
    state.frozenAt = Date.now();                        // live=0 without from/to: the window as of now
    document.body.classList.toggle('kiosk', q.has('kiosk'));
  }
  function writeUrl(push) {
    const q = new URLSearchParams(location.search); for (const k of Array.from(q.keys())) if (k.slice(0, 4) === 'var-') q.delete(k);
    for (const v of variables()) if (state.vars[v.name] && state.vars[v.name] !== v.default) q.set('var-' + v.name, state.vars[v.name]);
    if (state.range) q.set('range', state.range); else q.delete('range');
    if (state.live) q.delete('live'); else q.set('live', '0');
    if (state.from != null) { q.set('from', String(state.from)); q.set('to', String(state.to)); } else { q.delete('from'); q.delete('to'); }
    const qs = q.toString(), url = location.pathname + (qs ? '?' + qs : '') + location.hash;
    if (url !== location.pathname + location.search + location.hash) history[push ? 'pushState' : 'replaceState'](null, '', url);
  }
  // ---------- time windows, thresholds, staleness ----------
  const rangeMsOf = (w) => parseRange(state.range || (w.q && w.q.range) || '1h') || 3600000;
  function windowFor(w) {
    if (state.from != null) return { start: state.from, end: state.to };
    const end = state.live ? Math.max(Date.now(), w.lastT || 0) : state.frozenAt; return { start: end - rangeMsOf(w), end: end };
  }
  // Ascending thresholds; from each value up the value is in that state. `normal` (or no colour) is not abnormal.
  function thresholds(o) {
    return ((o && o.thresholds) || []).filter((t) => t && isFinite(t.value)).sort((a, b) => a.value - b.value).map((t) => {
      const c = String(t.color || '');
      const level = c === 'critical' || c === 'warning' ? c : c === 'advisory' || c === 'info' ? 'info' : c[0] === '#' ? 'custom' : null;
      return { value: t.value, level: level, color: c, label: c[0] === '#' ? 'limit' : c };
    });
  }
  function levelFor(o, v) {
    if (v == null || !isFinite(v)) return null;
    let hit = null; for (const t of thresholds(o)) if (v >= t.value) hit = t;
    return hit && hit.level ? hit : null;
  }
  const colorOf = (t) => t.level === 'custom' ? t.color : palette[t.level];
  // `server`: what GET /v1/telemetry/latest said of the value (whether its source still confirms it, and
  // since when); a point from the stream confirms it by itself.
  function updateLatest(key, value, t, quality, server) {
    let rec = state.latest.get(key);
    if (!rec) { rec = { value: value, t: t, quality: quality, interval: 0 }; state.latest.set(key, rec); }
    else if (t >= rec.t) {                              // the greatest timestamp wins; the interval is a moving average
      if (t > rec.t) rec.interval = rec.interval ? 0.7 * rec.interval + 0.3 * (t - rec.t) : t - rec.t;
      Object.assign(rec, { value: value, t: t, quality: quality });
    }
    if (server) Object.assign(rec, { serverStale: server.stale, confirmed: server.confirmed, answeredAt: Date.now() });
    else if (rec.answeredAt && t >= rec.t) Object.assign(rec, { serverStale: quality !== 'good', confirmed: Math.max(rec.confirmed || 0, t), answeredAt: Date.now() });
  }
  // A value is stale when its source stopped confirming it (the server's `stale`, asked every 10 s; an OPC UA
  // value that does not change stays fresh while the subscription is alive). Without the server's word yet,
  // or when it has not answered for 30 s, the age of the last point against its update interval decides.
  function staleness(rec) {
    if (!rec) return { stale: false, age: 0 };
    if (rec.answeredAt && Date.now() - rec.answeredAt < 30000) {
      return { stale: !!rec.serverStale, age: Math.max(0, Date.now() - (rec.confirmed || rec.t)) };
    }
    const age = Math.max(0, Date.now() - rec.t);
    return { stale: age > (rec.interval ? Math.max(3 * rec.interval, 5000) : DEFAULT_EXPECT_MS), age: age };
  }
  const staleSig = (w) => w.tags.map((t) => { const s = staleness(state.latest.get(keyOf(w.asset, t))); return s.stale ? fmtAge(s.age) : '-'; }).join();
  // ---------- chart series: raw {t, v} or downsampled {t, v = avg, min, max} ----------
  function medianDelta(t) {
    const n = Math.min(t.length - 1, 50), d = []; for (let i = t.length - n; i < t.length && n >= 2; i++) d.push(t[i] - t[i - 1]);
    return d.length ? d.sort((a, b) => a - b)[d.length >> 1] : 0;
  }
  function seriesFrom(tag, sr) {
    sr = sr || {}; const down = !!sr.downsampled, t = (sr.t || []).slice();
    const s = { tag: tag, down: down, bucketMs: down ? sr.bucket_ms || 60000 : 0, t: t, v: ((down ? sr.avg : sr.value) || []).slice(),
      min: down ? (sr.min || []).slice() : null, max: down ? (sr.max || []).slice() : null, points: sr.points != null ? sr.points : t.length, lastN: 0 };
    s.gapMs = down ? 2.5 * s.bucketMs : 5 * medianDelta(t); return s;
  }
  function insertAt(s, j, t, v) { s.t.splice(j, 0, t); s.v.splice(j, 0, v); if (s.down) { s.min.splice(j, 0, v); s.max.splice(j, 0, v); } }
  function appendPoint(s, t, v) {
    s.points++;
    if (!s.down) {
      if (!s.t.length || t > s.t[s.t.length - 1]) { s.t.push(t); s.v.push(v); return; }
      const j = lowerBound(s.t, t); if (s.t[j] === t) s.v[j] = v; else insertAt(s, j, t, v);
      return;
    }
    // Live points into the server's buckets: a new bucket averages its own points; an old one widens its min/max.
    const b = Math.floor(t / s.bucketMs) * s.bucketMs, i = s.t.length - 1;
    if (i < 0 || b > s.t[i]) { s.t.push(b); s.v.push(v); s.min.push(v); s.max.push(v); s.lastN = 1; return; }
    const j = b === s.t[i] ? i : lowerBound(s.t, b);
    if (s.t[j] !== b) { insertAt(s, j, b, v); return; }
    s.min[j] = Math.min(s.min[j], v); s.max[j] = Math.max(s.max[j], v);
    if (j === i && s.lastN > 0) { s.v[j] = (s.v[j] * s.lastN + v) / (s.lastN + 1); s.lastN++; }
  }
  function trim(s, start) {                             // the sliding window: drop what fell out of the range
    const k = lowerBound(s.t, s.down ? start - s.bucketMs + 1 : start);
    if (k > 0) { s.t.splice(0, k); s.v.splice(0, k); if (s.down) { s.min.splice(0, k); s.max.splice(0, k); } }
  }
  // One table for uPlot: the union of the series' timestamps. A place without a point of a series is undefined
  // (the line bridges it); a silence longer than gapMs gets a null (the line breaks there).
  function mergeSorted(a, b) {
    const out = []; let i = 0, j = 0;
    while (i < a.length || j < b.length) {
      const x = j >= b.length || (i < a.length && a[i] <= b[j]) ? a[i++] : b[j++];
      if (!out.length || out[out.length - 1] !== x) out.push(x);
    }
    return out;
  }
  function align(list) {
    const own = list.map((s) => {
      const o = { t: [], y: [], lo: s.down ? [] : null, hi: s.down ? [] : null };
      for (let i = 0; i < s.t.length; i++) {
        if (i && s.gapMs && s.t[i] - s.t[i - 1] > s.gapMs) { o.t.push(s.t[i - 1] + 1); o.y.push(null); if (o.lo) { o.lo.push(null); o.hi.push(null); } }
        o.t.push(s.t[i]); o.y.push(s.v[i]);
        if (o.lo) { o.lo.push(s.min[i]); o.hi.push(s.max[i]); }
      }
      return o;
    });
    let xs = [], lo = Infinity, hi = -Infinity; for (const o of own) xs = mergeSorted(xs, o.t);
    const data = [xs.map((t) => t / 1000)], bands = [];
    for (const o of own) {
      const y = new Array(xs.length), blo = o.lo && new Array(xs.length), bhi = o.lo && new Array(xs.length);
      for (let i = 0, j = 0; i < o.t.length; i++) {
        while (xs[j] < o.t[i]) j++;
        y[j] = o.y[i];
        if (o.y[i] != null) { lo = Math.min(lo, o.y[i]); hi = Math.max(hi, o.y[i]); }
        if (blo) { blo[j] = o.lo[i]; bhi[j] = o.hi[i]; if (o.lo[i] != null) { lo = Math.min(lo, o.lo[i]); hi = Math.max(hi, o.hi[i]); } }
      }
      data.push(y); bands.push(blo ? { lo: blo, hi: bhi } : null);
    }
    return { data: data, bands: bands, lo: isFinite(lo) ? lo : null, hi: isFinite(hi) ? hi : null };
  }
  function yRange(w) {                                  // options.min/max fix the scale; otherwise data (and bands) plus a margin
    const o = w.opts, a = w.aligned || {}, lo = a.lo != null ? a.lo : o.min != null ? o.min : 0, hi = a.lo != null ? a.hi : o.max != null ? o.max : lo + 1;
    const pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.1 || 1;
    const min = o.min != null ? o.min : lo - pad, max = o.max != null ? o.max : hi + pad; return [min, max > min ? max : min + 1];
  }
  // ---------- line chart (uPlot) ----------
  function clip(u) { const b = u.bbox; u.ctx.save(); u.ctx.beginPath(); u.ctx.rect(b.left, b.top, b.width, b.height); u.ctx.clip(); }
  function drawUnder(w, u) {                            // under the lines: abnormal zones, limit lines, min–max bands
    const ctx = u.ctx, b = u.bbox, dpr = window.devicePixelRatio || 1, ymin = u.scales.y.min, ymax = u.scales.y.max;
    if (ymin == null) return;
    clip(u); const th = thresholds(w.opts);
    th.forEach((t, i) => {
      const lo = Math.max(t.value, ymin), hi = i + 1 < th.length ? Math.min(th[i + 1].value, ymax) : ymax;
      if (!t.level || hi <= lo) return;
      const y1 = u.valToPos(hi, 'y', true), y0 = u.valToPos(lo, 'y', true);
      ctx.globalAlpha = parseFloat(palette['zone-alpha']) || 0.12; ctx.fillStyle = colorOf(t);
      ctx.fillRect(b.left, y1, b.width, y0 - y1);
    });
    ctx.globalAlpha = 1; ctx.strokeStyle = palette['limit-line']; ctx.lineWidth = dpr; ctx.setLineDash([6 * dpr, 4 * dpr]);
    for (const t of th) {
      if (t.value < ymin || t.value > ymax) continue;
      const y = Math.round(u.valToPos(t.value, 'y', true)) + 0.5;
      ctx.beginPath(); ctx.moveTo(b.left, y); ctx.lineTo(b.left + b.width, y); ctx.stroke();
    }
    ctx.setLineDash([]); ctx.fillStyle = palette.band; const xs = u.data[0], X = (i) => u.valToPos(xs[i], 'x', true);
    for (const band of (w.aligned && w.aligned.bands) || []) {
      if (!band) continue;
      let seg = [];
      const flush = () => {
        if (seg.length > 1) {
          ctx.beginPath(); ctx.moveTo(X(seg[0]), u.valToPos(band.hi[seg[0]], 'y', true));
          for (const i of seg) ctx.lineTo(X(i), u.valToPos(band.hi[i], 'y', true));
          for (let k = seg.length - 1; k >= 0; k--) ctx.lineTo(X(seg[k]), u.valToPos(band.lo[seg[k]], 'y', true));
          ctx.closePath(); ctx.fill();
        }
        seg = [];
      };
      for (let i = 0; i < xs.length; i++) { if (band.lo[i] === null) flush(); else if (band.lo[i] !== undefined) seg.push(i); }
      flush();
    }
    ctx.restore();
  }
  function chartEvents(w) {                             // trigger, acknowledge and resolve times of the alerts on this trend's asset and tags
    const out = []; if (!w.asset || !w.view) return out;
    for (const a of state.alerts.values()) {
      if (a.asset_id !== w.asset || (a.tag_name && w.tags && !w.tags.includes(a.tag_name))) continue;
      const add = (ts, kind, text) => {
        const t = ts ? Date.parse(ts) : NaN;
        if (isFinite(t) && t >= w.view.start && t <= w.view.end) out.push({ t: t, kind: kind, alert: a, text: text });
      };
      const what = (a.title || a.rule_name || 'alert') + (a.tag_name ? ' (' + a.tag_name + (a.value != null ? ' = ' + fmtNum(a.value, w.opts.decimals) : '') +
        (a.operator ? ', ' + a.operator + ' ' + fmtNum(a.threshold) : '') + ')' : '');
      add(a.triggered_at, 'trigger', (GLYPH[a.severity] || GLYPH.critical) + ' ' + a.severity + ' triggered: ' + what);
      add(a.acknowledged_at, 'ack', '\u2713 acknowledged' + (a.acknowledged_by ? ' by ' + a.acknowledged_by : '') + (a.note ? ': \u201C' + a.note + '\u201D' : '') + ' \u2014 ' + what);
      add(a.resolved_at, 'resolve', '\u25CB resolved' + (a.resolved_by ? ' by ' + a.resolved_by : '') + ' \u2014 ' + what);
    }
    return out.sort((x, y) => x.t - y.t);
  }
  function drawOver(w, u) {                             // over the lines: alert markers
    const ctx = u.ctx, b = u.bbox, dpr = window.devicePixelRatio || 1; clip(u);
    ctx.font = (11 * dpr) + 'px system-ui, sans-serif'; ctx.textAlign = 'center';
    for (const ev of w.events || []) {
      const x = Math.round(u.valToPos(ev.t / 1000, 'x', true)) + 0.5, trig = ev.kind === 'trigger';
      ctx.strokeStyle = ctx.fillStyle = trig ? palette[ev.alert.severity] || palette.critical : palette[ev.kind === 'ack' ? 'marker-ack' : 'marker-resolve'];
      ctx.lineWidth = (trig ? 2 : 1.5) * dpr; ctx.setLineDash(trig ? [] : ev.kind === 'ack' ? [4 * dpr, 3 * dpr] : [dpr, 3 * dpr]);
      ctx.beginPath(); ctx.moveTo(x, b.top + 12 * dpr); ctx.lineTo(x, b.top + b.height); ctx.stroke();
      ctx.fillText(trig ? GLYPH[ev.alert.severity] || GLYPH.critical : ev.kind === 'ack' ? '\u2713' : '\u25CB', x, b.top + 10 * dpr);
    }
    ctx.setLineDash([]); ctx.restore();
  }
  function chartSize(w) {
    const legend = w.u && w.u.root.querySelector('.u-legend');
    return { width: Math.max(120, Math.floor(w.chartEl.clientWidth)),
      height: Math.max(50, Math.floor(w.chartEl.clientHeight - (legend ? legend.offsetHeight : 0) - 4)) };
  }
  function createChart(w) {
    if (typeof window.uPlot !== 'function') throw new Error('the chart library (uPlot) did not load');
    const o = w.opts, unit = o.unit ? ' ' + o.unit : '';
    const axis = (extra) => Object.assign({ stroke: () => palette['chart-axis'], grid: { stroke: () => palette['chart-grid'], width: 1 },
      ticks: { stroke: () => palette['chart-grid'], width: 1 } }, extra);
    const opts = {
      width: 400, height: 150, legend: { live: true },
      cursor: { drag: { x: true, y: false, setScale: false } },
      scales: { x: { time: true, range: () => [w.view.start / 1000, w.view.end / 1000] }, y: { range: () => yRange(w) } },
      axes: [axis(), axis({ size: 56 })],
      series: [{ value: (u, v) => v == null ? '\u2013' : fmtTime(v * 1000) }].concat(w.tags.map((tag, i) => ({
        label: tag + (o.unit ? ' (' + o.unit + ')' : ''), stroke: () => palette['trend-' + (i % 8 + 1)], width: 1.5,
        dash: DASHES[i % DASHES.length], spanGaps: false, value: (u, v) => v == null ? '\u2013' : fmtNum(v, o.decimals) + unit }))),
      hooks: { drawAxes: [(u) => drawUnder(w, u)], draw: [(u) => drawOver(w, u)],
        setSelect: [(u) => {                            // a drag-select zooms: that fixed range, live paused
          if (u.select.width < 5) return;
          const a = u.posToVal(u.select.left, 'x') * 1000, b = u.posToVal(u.select.left + u.select.width, 'x') * 1000;
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false); setFixedRange(Math.round(a), Math.round(b));
        }] },
    };
    w.u = new window.uPlot(opts, [[]].concat(w.tags.map(() => [])), w.chartEl); w.u.setSize(chartSize(w));
  }
  function chartNote(w) {
    const parts = w.series.map((s) => (w.series.length > 1 ? s.tag + ': ' : '') + (s.down
      ? 'downsampled: min/max per ' + fmtNum(s.bucketMs / 1000) + ' s bucket, ' + s.points.toLocaleString() + ' points'
      : 'raw, ' + s.t.length.toLocaleString() + ' points'));
    let age = 0;
    for (const tag of w.tags) { const s = staleness(state.latest.get(keyOf(w.asset, tag))); if (s.stale) age = Math.max(age, s.age); }
    if (age && state.live) parts.push('\u25CC no new data for ' + fmtAge(age));
    w.noteEl.textContent = w.noteEl.title = parts.join(DOT); w.noteEl.classList.toggle('stale', !!age && state.live);
  }
  function renderAnnotations(w) {                       // the markers' text: time, event, who acknowledged, note
    const sig = w.events.map((e) => e.kind + e.t + e.alert.id + (e.alert.note || '')).join('|'); if (sig === w.eventSig) return;
    w.eventSig = sig; const list = w.annEl.querySelector('ul');
    list.textContent = ''; for (const e of w.events) list.append(el('li', { class: e.kind === 'trigger' ? 'sev-' + e.alert.severity : null, text: fmtTime(e.t) + ' ' + e.text }));
    w.annEl.querySelector('summary').textContent = w.events.length + ' alert event' + (w.events.length === 1 ? '' : 's') + ' in range';
    w.annEl.hidden = !w.events.length;
  }
  const lineChart = {
    build(w) {
      w.body.classList.add('chart-body');
      w.chartEl = el('div', { class: 'chart', role: 'img', 'aria-label': 'trend of ' + w.tags.join(', ') });
      w.noteEl = el('p', { class: 'note' }); w.annEl = el('details', { class: 'annotations', hidden: true }, el('summary'), el('ul'));
      w.body.prepend(w.chartEl, w.noteEl, w.annEl); w.series = w.tags.map((t) => seriesFrom(t, null));
      if (window.ResizeObserver) new ResizeObserver(() => {
        const size = w.u && chartSize(w); if (size && (size.width !== w.u.width || size.height !== w.u.height)) w.u.setSize(size);
        if (size && w.fetchWidth && size.width > w.fetchWidth * 1.5 && w.series.some((s) => s.down)) lineChart.load(w);  // finer history
      }).observe(w.chartEl);
    },
    async load(w) {                                     // history first; live points that arrive meanwhile wait in w.buffer
      const seq = ++w.seq; w.view = windowFor(w);
      if (!w.asset || !w.tags.length) { widgetError(w, 'no asset selected'); return; }
      if (w.loadedAsset !== w.asset) { w.loadedAsset = w.asset; w.series = w.tags.map((t) => seriesFrom(t, null)); w.lastT = 0; markDirty(w); }
      w.fetchWidth = Math.max(100, Math.round(w.chartEl.clientWidth || 600));
      const p = new URLSearchParams({ asset_id: w.asset, tags: w.tags.join(','), start: iso(w.view.start), end: iso(w.view.end), width: String(w.fetchWidth) });
      if (w.q.data_source_id) p.set('data_source_id', w.q.data_source_id);
      w.loading = true; w.buffer = [];
      try {
        const data = await api('/v1/telemetry/series?' + p); if (seq !== w.seq) return;
        const got = (data && data.series) || []; w.series = w.tags.map((tag) => seriesFrom(tag, got.find((x) => x.tag_name === tag)));
        for (const s of w.series) {
          const rec = state.latest.get(keyOf(w.asset, s.tag));
          if (rec && !rec.interval && !s.down && s.gapMs) rec.interval = s.gapMs / 5;   // expected update interval, for staleness
          if (s.t.length) w.lastT = Math.max(w.lastT || 0, s.t[s.t.length - 1]);
        }
        w.loading = false; for (const b of w.buffer.splice(0)) lineChart.append(w, b[0], b[1], b[2]);
        if (!w.u) createChart(w);
        widgetError(w, null); markDirty(w);
      } catch (e) {
        if (seq === w.seq) { w.loading = false; widgetError(w, 'history: ' + e.message); }
      }
    },
    append(w, tag, t, v) {
      const s = w.series.find((x) => x.tag === tag);
      if (s) { appendPoint(s, t, v); w.lastT = Math.max(w.lastT || 0, t); }
    },
    point(w, p, t) {
      if (!state.live) return;                          // paused: the view stays as it is
      if (w.loading) { w.buffer.push([p.tag_name, t, p.value]); return; }
      lineChart.append(w, p.tag_name, t, p.value); markDirty(w);
    },
    draw(w) {
      if (!w.u) return false;
      if (state.live && !w.loading) { w.view = windowFor(w); for (const s of w.series) trim(s, w.view.start); }
      w.aligned = align(w.series); w.events = chartEvents(w); w.u.setData(w.aligned.data); chartNote(w); renderAnnotations(w);
    },
  };
  // ---------- stat, gauge, table: latest values ----------
  function setAbnormal(w, lvl, stale) {
    w.el.classList.remove('abnormal-critical', 'abnormal-warning', 'abnormal-info');
    if (lvl && !stale && lvl.level !== 'custom') w.el.classList.add('abnormal-' + lvl.level);
    w.el.classList.toggle('stale', !!stale);
  }
  function stateBadges(box, lvl, st) {                  // state as text + shape + colour, never colour alone
    box.textContent = '';
    if (lvl && lvl.level === 'custom') { const b = el('span', { class: 'badge', text: GLYPH.custom + ' ' + lvl.label }); b.style.borderColor = lvl.color; box.append(b, ' '); }
    else if (lvl) box.append(el('span', { class: 'badge ' + lvl.level, text: GLYPH[lvl.level] + ' ' + lvl.label }), ' ');
    if (st.stale) box.append(el('span', { class: 'badge stale', text: '\u25CC stale ' + fmtAge(st.age) }));
  }
  function latestBox(w, className, first) {
    w.stateEl = el('div', { class: 'state', 'aria-live': 'polite' }); w.metaEl = el('div', { class: 'meta' });
    w.body.prepend(el('div', { class: className }, first, w.stateEl, w.metaEl));
  }
  const meta = (w, rec) => w.tags[0] + DOT + fmtTime(rec.t) + (rec.quality && rec.quality !== 'good' ? DOT + 'quality ' + rec.quality : '');
  const stat = {
    build(w) { w.valueEl = el('span', { class: 'value' }); latestBox(w, 'stat', w.valueEl); },
    draw(w) {
      const rec = state.latest.get(keyOf(w.asset, w.tags[0])), o = w.opts; w.valueEl.textContent = rec ? '' : '\u2013';
      if (!rec) { w.metaEl.textContent = 'no data'; w.stateEl.textContent = ''; return; }
      const st = staleness(rec), lvl = levelFor(o, rec.value), shown = lvl && !st.stale;
      if (lvl) w.valueEl.append(el('span', { class: 'marker', 'aria-hidden': 'true', text: GLYPH[lvl.level] }));
      w.valueEl.append(fmtNum(rec.value, o.decimals)); if (o.unit) w.valueEl.append(el('span', { class: 'unit', text: o.unit }));
      w.valueEl.className = 'value' + (shown && lvl.level !== 'custom' ? ' sev-' + lvl.level : '');
      w.valueEl.style.color = shown && lvl.level === 'custom' ? lvl.color : ''; stateBadges(w.stateEl, lvl, st);
      w.metaEl.textContent = meta(w, rec); setAbnormal(w, lvl, st.stale);
    },
  };
  function arcPoint(r, deg) { const a = deg * Math.PI / 180; return [100 + r * Math.cos(a), 100 + r * Math.sin(a)]; }
  function arcD(r, a0, a1) {
    const p0 = arcPoint(r, a0), p1 = arcPoint(r, a1);
    return 'M ' + p0[0].toFixed(2) + ' ' + p0[1].toFixed(2) + ' A ' + r + ' ' + r + ' 0 ' + (a1 - a0 > 180 ? 1 : 0) + ' 1 ' + p1[0].toFixed(2) + ' ' + p1[1].toFixed(2);
  }
  const gauge = {                                       // a 270° arc from min (lower left) to max (lower right)
    bounds(w) {
      const o = w.opts, th = thresholds(o), min = o.min != null ? o.min : 0;
      const max = o.max != null ? o.max : th.length ? th[th.length - 1].value * 1.25 : 100; return [min, max > min ? max : min + 1];
    },
    angle(w, v) { const b = gauge.bounds(w); return 135 + 270 * Math.max(0, Math.min(1, (v - b[0]) / (b[1] - b[0]))); },
    build(w) {
      const o = w.opts, b = gauge.bounds(w), th = thresholds(o);
      const s = svg('svg', { viewBox: '0 0 200 180', class: 'gauge', role: 'img', 'aria-label': 'gauge of ' + (w.tags[0] || '') });
      s.append(svg('path', { class: 'track', d: arcD(78, 135, 405) }));
      th.forEach((t, i) => {                            // zones of the abnormal thresholds, outside the track
        const a0 = gauge.angle(w, t.value), a1 = gauge.angle(w, i + 1 < th.length ? th[i + 1].value : b[1]);
        if (!t.level || a1 - a0 < 0.5) return;
        const z = svg('path', { class: 'zone ' + t.level, d: arcD(92, a0, a1) }); if (t.level === 'custom') z.style.stroke = t.color;
        s.append(z);
      });
      const lo = arcPoint(78, 135), hi = arcPoint(78, 405); w.fillEl = svg('path', { class: 'fill' });
      w.readEl = svg('text', { class: 'reading', x: 100, y: 108, 'text-anchor': 'middle' });
      s.append(w.fillEl, w.readEl, svg('text', { class: 'unit', x: 100, y: 130, 'text-anchor': 'middle' }, o.unit || ''),
        svg('text', { class: 'tick', x: lo[0].toFixed(1), y: (lo[1] + 22).toFixed(1), 'text-anchor': 'middle' }, fmtNum(b[0], o.decimals)),
        svg('text', { class: 'tick', x: hi[0].toFixed(1), y: (hi[1] + 22).toFixed(1), 'text-anchor': 'middle' }, fmtNum(b[1], o.decimals)));
      latestBox(w, 'gauge-wrap', s);
    },
    draw(w) {
      const rec = state.latest.get(keyOf(w.asset, w.tags[0]));
      if (!rec) { w.readEl.textContent = '\u2013'; w.fillEl.setAttribute('d', ''); w.metaEl.textContent = 'no data'; return; }
      const st = staleness(rec), lvl = levelFor(w.opts, rec.value), a = gauge.angle(w, rec.value);
      w.fillEl.setAttribute('d', a > 135.2 ? arcD(78, 135, a) : '');
      w.fillEl.setAttribute('class', 'fill' + (st.stale ? ' stale' : lvl && lvl.level !== 'custom' ? ' ' + lvl.level : ''));
      w.fillEl.style.stroke = lvl && lvl.level === 'custom' && !st.stale ? lvl.color : '';
      w.readEl.textContent = (lvl ? GLYPH[lvl.level] + ' ' : '') + fmtNum(rec.value, w.opts.decimals);
      w.readEl.setAttribute('class', 'reading' + (st.stale ? ' stale' : '')); stateBadges(w.stateEl, lvl, st);
      w.metaEl.textContent = meta(w, rec); setAbnormal(w, lvl, st.stale);
    },
  };
  const table = {
    build(w) {
      const th = (text, cls) => el('th', { scope: 'col', class: cls, text: text }); w.tbody = el('tbody');
      w.body.prepend(el('table', { class: 'list' }, el('thead', null, el('tr', null, th('Tag'), th('Value', 'num'), th('Time'), th('Quality'))), w.tbody));
    },
    draw(w) {
      const o = w.opts; let worst = null, anyStale = false; w.tbody.textContent = '';
      for (const tag of w.tags) {
        const rec = state.latest.get(keyOf(w.asset, tag)), st = staleness(rec), lvl = rec ? levelFor(o, rec.value) : null;
        anyStale = anyStale || st.stale; if (lvl && !st.stale && (!worst || SEV_RANK[lvl.level] < SEV_RANK[worst.level])) worst = lvl;
        const val = el('td', { class: 'num value' + (st.stale ? ' stale' : lvl && lvl.level !== 'custom' ? ' sev-' + lvl.level : '') },
          rec ? (lvl ? GLYPH[lvl.level] + ' ' : '') + fmtNum(rec.value, o.decimals) + (o.unit ? ' ' + o.unit : '') : '\u2013');
        const time = el('td', null, rec ? fmtTime(rec.t) : 'no data', st.stale ? ' ' : null, st.stale ? el('span', { class: 'stale-age', text: '\u25CC ' + fmtAge(st.age) + ' old' }) : null);
        const q = rec ? rec.quality || 'good' : '';
        w.tbody.append(el('tr', null, el('th', { scope: 'row', text: tag }), val, time, el('td', { class: q && q !== 'good' ? 'quality-' + q : null, text: q })));
      }
      setAbnormal(w, worst, false); w.el.classList.toggle('stale', anyStale);
    },
  };
  // ---------- alerts ----------
  function mergeAlert(a) {
    if (!a || !a.id) return;
    const old = state.alerts.get(a.id);
    if (!old || (STATUS_RANK[a.status] || 0) >= (STATUS_RANK[old.status] || 0)) state.alerts.set(a.id, a);   // never step back
  }
  async function fetchAlerts(params, maxPages) {        // GET /v1/alerts has no asset filter: widgets filter by asset_id
    for (let page = 1; page <= maxPages; page++) {
      const q = new URLSearchParams(params); q.set('per_page', '100'); q.set('page', String(page));
      const list = ((await api('/v1/alerts?' + q, true)) || {}).data || []; list.forEach(mergeAlert); if (list.length < 100) return;
    }
  }
  async function loadAlerts() {
    const lists = state.widgets.filter((w) => w.kind === 'alert_list'), charts = state.widgets.filter((w) => w.kind === 'line_chart' && w.view);
    if (!lists.length && !charts.length) return;
    try {
      const jobs = [fetchAlerts({ status: 'active' }, 5), fetchAlerts({ status: 'acknowledged' }, 5)];
      if (charts.length) {                              // triggered in the charts' windows, or one range before (acknowledged/resolved in it)
        const p = { start: iso(Math.min.apply(null, charts.map((w) => 2 * w.view.start - w.view.end))) };
        if (!state.live) p.end = iso(Math.max.apply(null, charts.map((w) => w.view.end)));
        jobs.push(fetchAlerts(p, 10));
      }
      await Promise.all(jobs); lists.forEach((w) => widgetError(w, null));
    } catch (e) {
      lists.forEach((w) => widgetError(w, 'alerts: ' + e.message));
    }
    lists.concat(charts).forEach(markDirty);
  }
  function onAlert(a) {
    mergeAlert(a);
    for (const w of state.widgets) if (w.kind === 'alert_list' || (w.kind === 'line_chart' && a && w.asset === a.asset_id)) markDirty(w);
  }
  const alertList = {
    build(w) { w.listEl = el('ul', { class: 'alerts', 'aria-live': 'polite' }); w.body.prepend(w.listEl); },
    draw(w) {
      const open = Array.from(state.alerts.values()).filter((a) => a.status !== 'resolved' && (!w.asset || a.asset_id === w.asset))
        .sort((a, b) => (SEV_RANK[a.severity] - SEV_RANK[b.severity]) || (Date.parse(b.triggered_at) - Date.parse(a.triggered_at)));
      w.listEl.textContent = ''; if (!open.length) w.listEl.append(el('li', { class: 'empty', text: 'no open alerts' }));
      for (const a of open) {
        const detail = [a.asset_id + (a.tag_name ? ' / ' + a.tag_name : '')];
        if (a.value != null) detail.push('value ' + fmtNum(a.value) + (a.operator ? ' (' + a.operator + ' ' + fmtNum(a.threshold) + ')' : ''));
        detail.push(a.status === 'acknowledged' ? '\u2713 acknowledged' + (a.acknowledged_by ? ' by ' + a.acknowledged_by : '') + (a.note ? ': ' + a.note : '')
          : 'active, not acknowledged');
        w.listEl.append(el('li', { 'data-alert-id': a.id }, el('span', { class: 'badge ' + a.severity, text: (GLYPH[a.severity] || '') + ' ' + a.severity }),
          el('span', { class: 'what', text: a.title || a.rule_name || a.message || 'alert' }),
          el('time', { class: 'when', datetime: a.triggered_at, text: fmtTime(Date.parse(a.triggered_at)) }),
          el('span', { class: 'detail', text: detail.join(DOT) })));
      }
      w.sub.textContent = (w.asset || 'all assets') + DOT + open.length + ' open';
    },
  };
  const textWidget = { build(w) { w.body.prepend(el('p', { class: 'text', text: w.def.text || '' })); }, draw() { /* static */ } };
  const KINDS = { line_chart: lineChart, stat: stat, gauge: gauge, table: table, alert_list: alertList, text: textWidget };
  // ---------- grid, widgets and frames ----------
  const byEl = new WeakMap();
  const io = window.IntersectionObserver ? new IntersectionObserver((entries) => {
    for (const e of entries) {
      const w = byEl.get(e.target);
      if (w) { w.visible = e.isIntersecting; if (w.visible && w.dirty) schedule(); }
    }
  }, { rootMargin: '120px' }) : null;
  function widgetError(w, msg) { w.errEl.textContent = msg || ''; w.errEl.hidden = !msg; }
  function resolveWidgets() {                           // variables → assets; (asset, tag) → the widgets that show it
    state.routes = new Map();
    for (const w of state.widgets) {
      const a = w.q && w.q.asset_id; w.asset = !a ? null : a[0] === '$' ? state.vars[a.slice(1)] || null : a;
      if (w.kind === 'text' || w.kind === 'alert_list') continue;
      for (const tag of w.tags) {
        const k = keyOf(w.asset, tag); if (!state.routes.has(k)) state.routes.set(k, []);
        state.routes.get(k).push(w);
      }
      w.sub.textContent = (w.asset || 'no asset') + (w.kind === 'line_chart' ? DOT + (state.from != null
        ? fmtTime(state.from) + ' \u2013 ' + fmtTime(state.to) : (state.range || (w.q && w.q.range) || '1h') + (state.live ? '' : ' (paused)')) : '');
    }
  }
  function buildGrid() {
    const layout = state.dash.layout || {}, cols = Math.max(1, Math.min(24, layout.columns || 12)); gridEl.textContent = '';
    gridEl.style.setProperty('--columns', String(cols)); state.widgets = [];
    const defs = (layout.widgets || []).slice().sort((a, b) => (a.y - b.y) || (a.x - b.x));
    for (const def of defs) {
      const impl = KINDS[def.type], q = def.query || null, one = def.type === 'stat' || def.type === 'gauge';
      const w = { def: def, kind: def.type, impl: impl, q: q, opts: def.options || {}, seq: 0, visible: !io, dirty: true,
        tags: q && q.tags ? q.tags.slice(0, one ? 1 : q.tags.length) : [] };
      const x = Math.min(Math.max(0, def.x | 0), cols - 1), span = Math.max(1, Math.min(def.w | 0 || 1, cols - x)), h = Math.max(1, def.h | 0 || 1);
      w.sub = el('span', { class: 'sub' }); w.errEl = el('p', { class: 'error', hidden: true, role: 'alert' });
      w.body = el('div', { class: 'body' }, w.errEl);
      w.el = el('section', { class: 'widget widget-' + def.type, 'aria-label': def.title || def.type }, el('header', null, el('h3', { text: def.title || '' }), w.sub), w.body);
      // Placement through the CSSOM (custom properties read by console.css), never style attributes.
      w.el.style.setProperty('--gc', (x + 1) + ' / span ' + span); w.el.style.setProperty('--gr', ((def.y | 0) + 1) + ' / span ' + h);
      w.el.style.setProperty('--h', String(h)); gridEl.append(w.el); byEl.set(w.el, w); if (io) io.observe(w.el);
      if (!impl) { widgetError(w, 'unknown widget type "' + def.type + '"'); continue; }
      state.widgets.push(w);
      try { impl.build(w); } catch (e) { widgetError(w, e.message); }
    }
    if (!defs.length) gridEl.append(el('p', { class: 'hint', text: 'This dashboard has no widgets yet.' }));
  }
  let frameReq = 0;
  function schedule() { if (!frameReq) frameReq = requestAnimationFrame(frame); }
  function markDirty(w) { w.dirty = true; if (w.visible) schedule(); }
  function frame() {                                    // at most one redraw per animation frame, visible widgets only
    frameReq = 0; const t0 = performance.now(); let drew = 0;
    for (const w of state.widgets) {
      if (!w.dirty || !w.visible) continue;             // off-screen widgets stay dirty until they are seen
      w.dirty = false;
      try { if (w.impl.draw(w) !== false) drew++; } catch (e) { widgetError(w, 'drawing failed: ' + e.message); }
    }
    if (drew) {
      stats.frames++; stats.lastDrawMs = Math.round((performance.now() - t0) * 100) / 100;
      const now = Date.now();
      for (const t of undrawn) stats.drawnAfterMs.push(now - t);
      if (stats.drawnAfterMs.length > 10000) stats.drawnAfterMs.splice(0, stats.drawnAfterMs.length - 10000);
      undrawn = [];
    }
  }
  async function loadLatest() {                         // one request per asset: values and their sources' confirmations
    const byAsset = new Map();
    for (const w of state.widgets) {
      if (!w.asset || !(w.kind === 'stat' || w.kind === 'gauge' || w.kind === 'table' || w.kind === 'line_chart')) continue;
      if (!byAsset.has(w.asset)) byAsset.set(w.asset, { tags: new Set(), widgets: [] });
      w.tags.forEach((t) => byAsset.get(w.asset).tags.add(t)); byAsset.get(w.asset).widgets.push(w);
    }
    await Promise.all(Array.from(byAsset.entries()).map(async ([asset, g]) => {
      try {
        const rows = await api('/v1/telemetry/latest?' + new URLSearchParams({ asset_id: asset, tags: Array.from(g.tags).join(',') }));
        for (const r of rows || []) {
          const t = Date.parse(r.timestamp), c = Date.parse(r.confirmed_at);
          if (isFinite(t)) updateLatest(keyOf(r.asset_id, r.tag_name), r.value, t, r.quality, { stale: !!r.stale, confirmed: isFinite(c) ? c : t });
        }
        g.widgets.forEach((w) => { widgetError(w, null); markDirty(w); });
      } catch (e) {
        g.widgets.forEach((w) => widgetError(w, 'latest values: ' + e.message));
      }
    }));
  }
  function reloadAll() {
    clearError(); resolveWidgets(); hook.live = state.live; syncToolbar(); syncSubscriptions();
    const charts = state.widgets.filter((w) => w.kind === 'line_chart').map((w) => lineChart.load(w)); loadLatest();
    Promise.all(charts).then(loadAlerts); state.widgets.forEach(markDirty);
  }
  function setFixedRange(from, to) {                    // zoom or a chosen range: fixed, live paused (Back returns)
    if (!(to > from)) return;
    state.from = from; state.to = to; state.live = false; writeUrl(true); reloadAll();
  }
  function resumeLive() {
    state.live = true; state.from = state.to = null; writeUrl(false); reloadAll();
  }
  // ---------- the live stream ----------
  // One subscription per asset (covers its tags and its alerts; a message per batch, not per tag), or one
  // unfiltered subscription when an alert list shows every asset's alerts. Client messages are paced to 4/s.
  const live = { ws: null, attempt: 0, timer: 0, nextAt: 0, queue: [], gap: 0, outstanding: [], subs: new Map(), lostAt: null, ping: 0, pong: 0, reason: '' };
  function wantedSubscriptions() {
    const wanted = new Map();
    for (const w of state.widgets) {
      if (w.kind === 'alert_list' && !w.asset) return new Map([['*', {}]]);
      if (w.kind !== 'text' && w.asset) wanted.set('a:' + w.asset, { asset_id: w.asset });
    }
    return wanted;
  }
  function send(msg, req) { live.queue.push([JSON.stringify(msg), req]); pump(); }
  function pump() {
    if (live.gap || !live.ws || live.ws.readyState !== 1 || !live.queue.length) return;
    const m = live.queue.shift();
    live.outstanding.push(m[1]);                        // the server answers every message, in order
    live.ws.send(m[0]);
    live.gap = setTimeout(() => { live.gap = 0; pump(); }, 260);
  }
  function syncSubscriptions() {
    if (!live.ws || live.ws.readyState !== 1) return;
    const wanted = wantedSubscriptions();
    for (const [key, id] of Array.from(live.subs.entries())) {
      if (!wanted.has(key)) { live.subs.delete(key); send({ type: 'unsubscribe', subscription: id }, { kind: 'unsub' }); }
    }
    const pending = new Set(live.outstanding.concat(live.queue.map((m) => m[1])).filter((r) => r.kind === 'sub').map((r) => r.key));
    for (const [key, filter] of wanted.entries()) {
      if (!live.subs.has(key) && !pending.has(key)) send(Object.assign({ type: 'subscribe' }, filter), { kind: 'sub', key: key });
    }
  }
  function onMessage(text) {
    let m;
    try { m = JSON.parse(text); } catch (e) { return; }
    if (m.type === 'telemetry') {
      for (const p of m.data || []) {
        const routes = state.routes.get(keyOf(p.asset_id, p.tag_name)), t = Date.parse(p.timestamp);
        if (!routes || !isFinite(t) || typeof p.value !== 'number') continue;
        stats.pointsReceived++; updateLatest(keyOf(p.asset_id, p.tag_name), p.value, t, p.quality);
        if (undrawn.length < 10000) undrawn.push(t);
        for (const w of routes) {
          if (w.q.data_source_id && p.data_source_id && p.data_source_id !== w.q.data_source_id) continue;
          if (w.impl.point) w.impl.point(w, p, t); else markDirty(w);
        }
      }
    } else if (m.type === 'alert') {
      onAlert(m.data);
    } else if (m.type === 'subscribed' || m.type === 'unsubscribed' || m.type === 'pong' || m.type === 'error') {
      const req = live.outstanding.shift() || {};
      if (m.type === 'pong') { clearTimeout(live.pong); live.pong = 0; }
      if (m.type === 'subscribed' && req.kind === 'sub') {
        if (wantedSubscriptions().has(req.key)) live.subs.set(req.key, m.subscription);
        else send({ type: 'unsubscribe', subscription: m.subscription }, { kind: 'unsub' });
      }
      if (m.type === 'error') showError('live stream: ' + m.message);
    }
  }
  function connect() {
    clearTimeout(live.timer); let ws;
    try { ws = new WebSocket((location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + location.host + '/v1/ws'); } catch (e) { lost(null, e.message); return; }
    live.ws = ws;
    ws.onopen = () => {
      const wasLost = live.lostAt != null;
      live.lostAt = null; live.reason = ''; live.subs.clear(); live.outstanding = []; live.queue = [];
      clearTimeout(live.gap); live.gap = 0;
      setTimeout(() => { if (live.ws === ws) live.attempt = 0; }, 5000);   // the backoff restarts once the link has held
      hook.connected = true;
      banner(); syncToolbar(); syncSubscriptions();
      live.ping = setInterval(() => {                   // a silently dead link shows within 40 s
        send({ type: 'ping' }, { kind: 'ping' }); if (!live.pong) live.pong = setTimeout(() => lost(ws, 'no answer to ping'), 15000);
      }, 25000);
      if (wasLost) backfill();
    };
    ws.onmessage = (ev) => onMessage(ev.data);
    ws.onclose = (ev) => lost(ws, ev.reason || (ev.code && ev.code !== 1006 ? 'code ' + ev.code : ''));
  }
  function lost(ws, reason) {                           // reconnect after 1 s, 2 s, 4 s ... at most 30 s
    if (ws && live.ws !== ws) return;
    if (ws) { ws.onclose = ws.onmessage = ws.onopen = null; try { ws.close(); } catch (e) { /* already closed */ } }
    live.ws = null; hook.connected = false; clearInterval(live.ping); clearTimeout(live.pong); live.pong = 0;
    if (live.lostAt == null) live.lostAt = Date.now();
    live.reason = reason || ''; const delay = Math.min(30000, 1000 * Math.pow(2, live.attempt++)); live.nextAt = Date.now() + delay;
    live.timer = setTimeout(connect, delay);
    if (live.attempt % 3 === 0) api('/v1/dashboards/' + encodeURIComponent(dashId)).catch(() => { /* a 401 shows itself */ });
    banner(); syncToolbar(); state.widgets.forEach(markDirty);
  }
  function backfill() {                                 // fill the gap the stream left from history
    if (state.live) reloadAll(); else { loadLatest(); loadAlerts(); }
  }
  let bannerEl = null;
  function banner() {
    if (live.lostAt == null) { if (bannerEl) bannerEl.hidden = true; return; }
    if (!bannerEl) { bannerEl = el('div', { class: 'banner stream-lost', role: 'status', 'aria-live': 'polite' }); root.insertBefore(bannerEl, gridEl); }
    bannerEl.hidden = false; const wait = Math.max(0, Math.ceil((live.nextAt - Date.now()) / 1000));
    bannerEl.textContent = 'live stream lost \u2013 reconnecting\u2026 (' + (wait ? 'next attempt in ' + wait + ' s' : 'connecting') +
      (live.reason ? '; ' + live.reason : '') + '; lost ' + fmtAge(Date.now() - live.lostAt) + ' ago)';
  }
  // ---------- toolbar: variables, range, custom range, live indicator, resume, theme ----------
  const ui = {};
  const control = (id, label, input) => { input.id = id; return el('div', { class: 'control' }, el('label', { for: id, text: label }), input); };
  const localInput = (ms) => new Date(ms - new Date(ms).getTimezoneOffset() * 60000).toISOString().slice(0, 16);
  function buildToolbar() {
    toolbarEl.textContent = '';
    if (!document.querySelector('h1')) toolbarEl.append(el('h1', { text: state.dash.name || 'Dashboard', title: state.dash.description || null }));
    ui.vars = {};
    for (const v of variables()) {
      const input = v.options && v.options.length ? el('select') : el('input', { type: 'text', autocomplete: 'off', spellcheck: 'false' });
      for (const o of v.options || []) input.append(el('option', { value: o, text: o }));
      input.addEventListener('change', () => { if (input.value) { state.vars[v.name] = input.value; writeUrl(true); reloadAll(); } });
      ui.vars[v.name] = input; toolbarEl.append(control('var-' + v.name, v.label || v.name, input));
    }
    ui.range = el('select', null, el('option', { value: '', text: 'widget default' }));
    for (const r of RANGES) ui.range.append(el('option', { value: r, text: 'last ' + r }));
    ui.range.addEventListener('change', () => {
      state.range = ui.range.value; state.from = state.to = null; state.live = true; writeUrl(true); reloadAll();
    });
    toolbarEl.append(control('range-select', 'Range', ui.range)); ui.from = el('input', { type: 'datetime-local' });
    ui.to = el('input', { type: 'datetime-local' });
    const apply = el('button', { type: 'button', text: 'Show range', onclick: () => {
      const a = new Date(ui.from.value).getTime(), b = new Date(ui.to.value).getTime();
      if (isFinite(a) && isFinite(b) && b > a) setFixedRange(a, b); else showError('choose a start before the end');
    } });
    toolbarEl.append(el('div', { class: 'custom-range' }, control('range-from', 'From', ui.from), control('range-to', 'To', ui.to), apply));
    ui.indicator = el('span', { id: 'live-indicator', class: 'live-indicator', role: 'status', 'aria-live': 'polite' });
    ui.resume = el('button', { type: 'button', id: 'resume-live', class: 'primary', text: 'Resume live', onclick: resumeLive });
    // The top bar has a theme button; in kiosk mode (no top bar) the toolbar shows its own.
    const own = document.getElementById('theme-toggle') ? 'theme-button kiosk-only' : 'theme-button';
    toolbarEl.append(ui.indicator, ui.resume, el('button', { type: 'button', id: 'dash-theme', class: own, onclick: toggleTheme }));
    themeChanged(); syncToolbar();
  }
  function syncToolbar() {
    if (!ui.range) return;
    const ensure = (sel, value, text) => { if (value && !Array.from(sel.options).some((o) => o.value === value)) sel.append(el('option', { value: value, text: text })); };
    for (const name of Object.keys(ui.vars)) {
      if (ui.vars[name].tagName === 'SELECT') ensure(ui.vars[name], state.vars[name], state.vars[name]);
      ui.vars[name].value = state.vars[name] || '';
    }
    ensure(ui.range, state.range, 'last ' + state.range); ui.range.value = state.range; const lostNow = live.lostAt != null;
    ui.indicator.className = 'live-indicator ' + (!state.live ? 'paused' : lostNow ? 'lost' : 'live');
    ui.indicator.textContent = !state.live ? 'paused' : lostNow ? 'live stream lost' : 'live'; ui.resume.hidden = state.live;
    const to = state.to != null ? state.to : Date.now();
    ui.from.value = localInput(state.from != null ? state.from : to - Math.max.apply(null, [3600000].concat(state.widgets.map(rangeMsOf))));
    ui.to.value = localInput(to);
  }
  function tick() {                                     // once a second: ages of stale values, the banner's countdown
    if (live.lostAt != null) banner();
    for (const w of state.widgets) {
      if (w.kind === 'text' || w.kind === 'alert_list') continue;
      const sig = staleSig(w);
      if (sig !== w.staleSig) { w.staleSig = sig; markDirty(w); }
    }
  }
  async function init() {
    initTheme();
    if (!dashId) { showError('No dashboard id on this page.'); return; }
    try {
      state.dash = await api('/v1/dashboards/' + encodeURIComponent(dashId));
    } catch (e) {
      showError('Cannot load the dashboard: ' + e.message); return;
    }
    try {
      document.title = (state.dash.name || 'Dashboard') + ' \u00B7 plantd'; readUrl(); buildToolbar(); buildGrid(); reloadAll();
      connect(); window.addEventListener('popstate', () => { readUrl(); reloadAll(); }); setInterval(tick, 1000);
      setInterval(() => { if (state.live && !document.hidden) loadLatest(); }, 10000);   // the sources' confirmations
    } catch (e) {
      showError('The dashboard could not be shown: ' + e.message);
    }
  }
  init();
})();
