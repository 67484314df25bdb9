// plantd embedded dashboard: draws the widgets of /v1/bi-embed/embed/{id}/data (read with the page's guest
// token, under its row-level security) and refreshes them every 30 s until the token expires. The framing page
// may hand over a new token before then: postMessage({type: 'plantd:guest-token', token}) from an origin
// allowed to frame the dashboard.
(function () {
  'use strict';
  const root = document.getElementById('embed');
  if (!root) return;
  let token = root.dataset.token;
  const dashId = root.dataset.dashboardId;
  const origins = (root.dataset.origins || '').split(' ').filter(Boolean).concat([location.origin]);
  const grid = document.getElementById('embed-grid'), errorEl = document.getElementById('embed-error');
  const updated = document.getElementById('embed-updated');
  const REFRESH_MS = 30000;
  const charts = new Map();
  let timer = null;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function fmt(v, o) {
    if (v == null || !isFinite(v)) return '\u2014';
    const d = o && o.decimals != null ? o.decimals : Math.abs(v) >= 100 ? 1 : 2;
    return v.toFixed(d) + (o && o.unit ? ' ' + o.unit : '');
  }
  function fmtTime(t) { return t ? new Date(t).toLocaleString() : '\u2014'; }
  function showError(msg) { errorEl.textContent = msg; errorEl.hidden = false; }

  function frame(w) {
    const card = el('section', 'widget widget-' + w.type.replace('_', '-'));
    card.style.setProperty('--gc', (w.x + 1) + ' / span ' + w.w);
    card.style.setProperty('--gr', (w.y + 1) + ' / span ' + w.h);
    const head = el('header');
    head.appendChild(el('h3', null, w.title || w.type.replace('_', ' ')));
    if (w.asset_id) head.appendChild(el('span', 'sub', w.asset_id));
    card.appendChild(head);
    const body = el('div', 'body');
    card.appendChild(body);
    return { card: card, body: body };
  }

  function lineChart(w, body) {
    body.classList.add('chart-body');
    const box = el('div', 'chart');
    body.appendChild(box);
    const times = Array.from(new Set([].concat.apply([], w.series.map((s) => s.points.map((p) => p[0]))))).sort((a, b) => a - b);
    const data = [times.map((t) => t / 1000)];
    for (const s of w.series) {
      const at = new Map(s.points.map((p) => [p[0], p[1]]));
      data.push(times.map((t) => (at.has(t) ? at.get(t) : null)));
    }
    const cs = getComputedStyle(document.documentElement);
    const series = [{}].concat(w.series.map((s, i) => ({
      label: s.tag, stroke: cs.getPropertyValue('--trend-' + ((i % 8) + 1)).trim() || '#1e88e5', width: 1.5, spanGaps: false,
    })));
    const width = Math.max(200, box.clientWidth || 600), height = Math.max(80, (box.clientHeight || 180) - 30);
    if (typeof uPlot === 'undefined') { box.textContent = 'chart library missing'; return; }
    const opts = { width: width, height: height, series: series, scales: { x: { time: true, min: w.start_ms / 1000, max: w.end_ms / 1000 } }, legend: { show: true } };
    charts.set(w.id, new uPlot(opts, data, box));
    if (!times.length) body.appendChild(el('p', 'note', 'No data in the range.'));
  }

  function stat(w, body) {
    const v = w.latest && w.latest[0];
    const box = el('div', 'stat');
    box.appendChild(el('span', 'value', fmt(v && v.value, w.options)));
    box.appendChild(el('span', 'meta', v && v.timestamp ? fmtTime(v.timestamp) : 'no value in the range'));
    if (w.type === 'gauge' && w.options && isFinite(w.options.min) && isFinite(w.options.max) && v && v.value != null) {
      const bar = el('progress');
      bar.max = w.options.max - w.options.min;
      bar.value = Math.min(Math.max(v.value - w.options.min, 0), bar.max);
      box.appendChild(bar);
    }
    body.appendChild(box);
  }

  function table(w, body) {
    const t = el('table', 'list');
    const head = el('tr');
    ['Tag', 'Value', 'Time', 'Quality'].forEach((h) => head.appendChild(el('th', null, h)));
    t.appendChild(el('thead')).appendChild(head);
    const tb = t.appendChild(el('tbody'));
    for (const v of w.latest || []) {
      const r = el('tr');
      r.appendChild(el('td', null, v.tag));
      r.appendChild(el('td', 'num', fmt(v.value, w.options)));
      r.appendChild(el('td', null, fmtTime(v.timestamp)));
      r.appendChild(el('td', null, v.quality || '\u2014'));
      tb.appendChild(r);
    }
    body.appendChild(t);
  }

  function alertList(w, body) {
    if (!w.alerts || !w.alerts.length) { body.appendChild(el('p', 'quiet', 'No open alerts.')); return; }
    const ul = el('ul', 'alert-list');
    for (const a of w.alerts) {
      const li = el('li', 'sev-' + (a.severity || 'info'));
      li.textContent = (a.severity || '') + ' \u00b7 ' + (a.title || a.rule_name || 'alert') + ' \u00b7 ' + (a.asset_id || '') + ' \u00b7 ' + fmtTime(a.triggered_at) + ' (' + (a.status || '') + ')';
      ul.appendChild(li);
    }
    body.appendChild(ul);
  }

  // The variables the address chooses (?var-pump=Pump_02), passed on to the data request.
  function variableQuery() {
    const q = new URLSearchParams();
    new URLSearchParams(location.search).forEach((v, k) => { if (k.indexOf('var-') === 0) q.set(k, v); });
    const s = q.toString();
    return s ? '?' + s : '';
  }
  // A choice for each variable that offers several values; a change reads the dashboard again.
  function drawVariables(vars) {
    const box = document.getElementById('embed-variables');
    if (box.dataset.drawn) return;
    box.dataset.drawn = '1';
    for (const v of vars || []) {
      if (!v.options || v.options.length < 2) continue;
      const label = el('label', null, (v.label || v.name) + ' ');
      const select = el('select');
      select.name = 'var-' + v.name;
      for (const o of v.options) { const opt = el('option', null, o); opt.value = o; opt.selected = o === v.value; select.appendChild(opt); }
      select.addEventListener('change', () => {
        const q = new URLSearchParams(location.search);
        q.set('var-' + v.name, select.value);
        history.replaceState(null, '', location.pathname + '?' + q.toString());
        load();
      });
      label.appendChild(select);
      box.appendChild(label);
    }
  }

  function draw(d) {
    for (const c of charts.values()) c.destroy();
    charts.clear();
    grid.textContent = '';
    grid.style.setProperty('--columns', String(d.columns || 12));
    drawVariables(d.variables);
    for (const w of d.widgets) {
      w.start_ms = Date.parse(w.start); w.end_ms = Date.parse(w.end);
      const f = frame(w);
      grid.appendChild(f.card);
      if (w.error) { f.body.appendChild(el('p', 'error', w.error)); continue; }
      if (w.type === 'line_chart') lineChart(w, f.body);
      else if (w.type === 'stat' || w.type === 'gauge') stat(w, f.body);
      else if (w.type === 'table') table(w, f.body);
      else if (w.type === 'alert_list') alertList(w, f.body);
      else if (w.type === 'text') f.body.appendChild(el('p', null, w.text || ''));
    }
    updated.textContent = 'Updated ' + fmtTime(d.generated_at);
    root.dataset.loaded = String(Date.now());
  }

  async function load() {
    let res;
    try {
      res = await fetch('/v1/bi-embed/embed/' + encodeURIComponent(dashId) + '/data' + variableQuery(), { headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' } });
    } catch (e) { showError('cannot reach the server (' + e.message + ')'); return schedule(); }
    const body = await res.json().catch(() => null);
    if (!res.ok) {
      const msg = body && body.error && body.error.message ? body.error.message : 'HTTP ' + res.status;
      showError(msg);
      if (res.status === 401 || res.status === 403) { root.dataset.expired = '1'; return; }   // the host page must issue a new token
      return schedule();
    }
    errorEl.hidden = true;
    draw(body.data);
    schedule();
  }
  function schedule() { clearTimeout(timer); timer = setTimeout(load, REFRESH_MS); }
  window.addEventListener('message', (ev) => {
    const d = ev.data;
    if (!d || d.type !== 'plantd:guest-token' || typeof d.token !== 'string' || origins.indexOf(ev.origin) < 0) return;
    token = d.token;
    root.dataset.token = token;
    delete root.dataset.expired;
    load();
  });
  load();
})();
