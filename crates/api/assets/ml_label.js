// plantd console, the labeling page (/ml/datasets/{id}/label): one row at a time, labelled from the keyboard. Keys 1-9
// label the row with the n-th class and go to the next row, s skips, f flags (again: unflags), u or Ctrl+Z undoes the
// last label, skip or flag (the row's previous state written back through the API: its old class, its skip, or no
// label; its old flag) and returns to that row, the arrow keys move. Rows come from GET .../preview, 100 per call (the
// route allows 60 calls a minute, so never one per row), the next page fetched ahead. Actions run one after another in
// the order they were asked, so keys pressed quickly are neither lost nor reordered. Counts follow each action; they
// are read again from the API once the labeller pauses. A dataset made from telemetry shows its number columns over the
// 50 rows before and after the row as a uPlot trend (x: the `timestamp` column) with the row marked.
(function () {
  'use strict';
  const root = document.getElementById('labeler');
  if (!root) return;
  const id = root.dataset.id, rowCount = Number(root.dataset.rowCount) || 0, write = root.dataset.write === 'true';
  const base = '/v1/ml/datasets/' + encodeURIComponent(id);
  const PER_PAGE = 100, AROUND = 50, KEEP_PAGES = 30;
  // Test hook: ready once the first row is shown; pending counts queued actions; row is the row id shown.
  const hook = { ready: false, pending: 0, fetches: 0, row: null, undone: 0 };
  window.plantdLabel = hook;

  const $ = (x) => document.getElementById(x);
  function el(tag, props, children) {
    const e = document.createElement(tag);
    for (const k of Object.keys(props || {})) {
      const v = props[k];
      if (v == null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children || []) if (c != null) e.append(c);
    return e;
  }
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const classes = Array.from(document.querySelectorAll('#class-buttons button.label-class')).map((b) => ({
    id: b.dataset.classId, name: b.querySelector('.name').textContent, color: b.dataset.color, button: b,
    count: Number(b.querySelector('.count').textContent) || 0,
  }));
  const counts = { labeled: Number($('count-labeled').textContent) || 0, skipped: Number($('count-skipped').textContent) || 0,
    flagged: Number($('count-flagged').textContent) || 0 };

  function say(text) { $('label-status').textContent = text || ''; }
  function fail(err) {
    const box = $('label-error');
    box.textContent = (err && err.message) || String(err);
    box.hidden = false;
  }
  function clearError() { const box = $('label-error'); box.hidden = true; box.textContent = ''; }

  // ---------- rows, a page of 100 at a time ----------
  let columns = null;                                   // [{name, type}], from the first answer
  const pages = new Map(), loading = new Map();         // page number -> rows; page number -> its request
  const pageOf = (i) => Math.floor(i / PER_PAGE) + 1;
  const rowAt = (i) => { const rows = pages.get(pageOf(i)); return rows ? rows[i % PER_PAGE] : undefined; };
  async function fetchPage(p) {
    for (;;) {
      hook.fetches++;
      const res = await fetch(base + '/preview?page=' + p + '&per_page=' + PER_PAGE, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
      const body = await res.json().catch(() => null);
      if (res.status === 429) {                         // the preview's limit: wait as told, then ask again
        const wait = Number((body && body.error && body.error.retry_after) || res.headers.get('Retry-After')) || 5;
        say('rows are read at most 60 times a minute: waiting ' + wait + ' s');
        await sleep(wait * 1000);
        say('');
        continue;
      }
      if (!res.ok || !body || !body.data) throw (body && body.error) || { message: 'rows could not be read: HTTP ' + res.status };
      if (!columns) columns = (body.data.columns || []).map((c) => typeof c === 'string' ? { name: c, type: '' } : c);
      return body.data.rows || [];
    }
  }
  function load(p) {
    if (p < 1 || (p - 1) * PER_PAGE >= rowCount) return Promise.resolve(null);
    if (pages.has(p)) return Promise.resolve(pages.get(p));
    if (!loading.has(p)) {
      loading.set(p, fetchPage(p).then((rows) => { pages.set(p, rows); loading.delete(p); forget(p); return rows; },
        (err) => { loading.delete(p); throw err; }));
    }
    return loading.get(p);
  }
  function forget(near) {                               // a long session keeps the pages around it only
    if (pages.size <= KEEP_PAGES) return;
    const far = Array.from(pages.keys()).sort((a, b) => Math.abs(b - near) - Math.abs(a - near));
    for (const p of far.slice(0, pages.size - KEEP_PAGES)) pages.delete(p);
  }
  function prefetch() {                                 // the next page; for a trend, the pages of the rows around too
    const wanted = [pageOf(pos) + 1];
    if (trendBox) wanted.push(pageOf(Math.max(0, pos - AROUND)), pageOf(Math.min(rowCount - 1, pos + AROUND)));
    for (const p of wanted) {
      if (pages.has(p) || loading.has(p)) continue;
      load(p).then(() => { if (trendBox) drawTrend(); }, () => { /* asked again when needed */ });
    }
  }

  // ---------- the row shown ----------
  let pos = (() => {                                    // ?row=N (row ids are 1..row_count), else the first row
    const n = Number(new URLSearchParams(location.search).get('row'));
    return Number.isInteger(n) && n >= 1 ? Math.min(n, rowCount) - 1 : 0;
  })();
  async function current() {
    await load(pageOf(pos));
    const row = rowAt(pos);
    if (!row) throw { message: 'row ' + (pos + 1) + ' is not in the dataset any more; reload the page' };
    return row;
  }
  async function show(i) {
    pos = Math.max(0, Math.min(rowCount - 1, i));
    const row = await current();
    draw(row);
    prefetch();
    return row;
  }
  const classOf = (cid) => classes.find((c) => c.id === cid);
  function cellText(v) {
    if (v == null) return '\u2013';
    if (typeof v === 'number') return Number.isInteger(v) ? String(v) : String(Math.round(v * 1e6) / 1e6);
    return String(v);
  }
  function draw(row) {
    hook.row = row.row_id;
    $('row-id').textContent = String(row.row_id);
    $('row-position').textContent = (pos + 1).toLocaleString() + ' of ' + rowCount.toLocaleString();
    const state = $('row-state');
    state.textContent = '';
    const c = classOf(row.label_class_id);
    if (c) state.append(el('span', { class: 'badge row-label', 'data-class-id': c.id, text: c.name }));
    else if (row.label_class_id) state.append(el('span', { class: 'badge row-label', text: 'a removed class' }));
    else if (row.skipped) state.append(el('span', { class: 'badge stale', 'data-skipped': 'true', text: 'skipped' }));
    else state.append(el('span', { class: 'badge', text: 'not labelled' }));
    if (row.flagged) state.append(' ', el('span', { class: 'badge warning', 'data-flagged': 'true', text: '\u2691 flagged' }));
    state.dataset.label = row.label_class_id || '';
    state.dataset.skipped = String(!!row.skipped);
    state.dataset.flagged = String(!!row.flagged);
    for (const k of classes) k.button.setAttribute('aria-pressed', String(k.id === row.label_class_id));
    $('row-flag').setAttribute('aria-pressed', String(!!row.flagged));
    $('row-prev').disabled = pos === 0;
    $('row-next').disabled = pos >= rowCount - 1;
    const body = $('row-values').tBodies[0];
    body.textContent = '';
    for (const col of columns || []) {
      const v = row.values ? row.values[col.name] : null;
      body.append(el('tr', { 'data-column': col.name }, [el('th', { scope: 'row', text: col.name }),
        el('td', { class: (col.type === 'number' ? 'num' : '') + (v == null ? ' quiet' : ''), text: cellText(v) })]));
    }
    if (history.replaceState) history.replaceState(null, '', location.pathname + '?row=' + row.row_id);
    if (trendBox) drawTrend();
  }
  function drawCounts() {
    $('count-labeled').textContent = String(counts.labeled);
    $('count-skipped').textContent = String(counts.skipped);
    $('count-flagged').textContent = String(counts.flagged);
    $('label-progress').value = Math.min(rowCount, counts.labeled + counts.skipped);
    for (const c of classes) c.button.querySelector('.count').textContent = String(c.count);
  }

  // ---------- actions, one after another ----------
  let queue = Promise.resolve(), actions = 0;
  const undoStack = [];
  function enqueue(task) {
    hook.pending++;
    actions++;
    queue = queue.then(async () => { clearError(); await task(); })
      .catch(fail)
      .then(() => { hook.pending--; scheduleSync(); });
  }
  async function send(method, path, body) {
    const init = { method: method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    let res;
    try { res = await fetch(base + path, init); } catch (e) { throw { message: 'cannot reach the server (' + e.message + ')' }; }
    const answer = res.status === 204 ? null : await res.json().catch(() => null);
    if (!res.ok) throw (answer && answer.error) || { message: 'the request failed: HTTP ' + res.status };
    return answer && answer.data;
  }
  const stateOf = (r) => ({ label_class_id: r.label_class_id || null, skipped: !!r.skipped, flagged: !!r.flagged });
  // The row takes its new state (the API's answer, else what was asked); the counts follow the change.
  function apply(row, answer, asked) {
    const before = stateOf(row), after = stateOf(answer || asked);
    if (before.label_class_id !== after.label_class_id) {
      const was = classOf(before.label_class_id), now = classOf(after.label_class_id);
      if (was) was.count = Math.max(0, was.count - 1);
      if (now) now.count++;
      counts.labeled += (after.label_class_id ? 1 : 0) - (before.label_class_id ? 1 : 0);
    }
    counts.skipped += (after.skipped ? 1 : 0) - (before.skipped ? 1 : 0);
    counts.flagged += (after.flagged ? 1 : 0) - (before.flagged ? 1 : 0);
    row.label_class_id = after.label_class_id;
    row.skipped = after.skipped;
    row.flagged = after.flagged;
    drawCounts();
  }
  async function forward(row) {                         // after a label or a skip: the next row
    if (pos + 1 < rowCount) await show(pos + 1);
    else { draw(row); say('that was the last row'); }
  }
  function labelWith(n) {
    const c = classes[n - 1];
    if (!c || !write) return;
    enqueue(async () => {
      const row = await current(), before = stateOf(row);
      const answer = await send('POST', '/rows/' + row.row_id + '/label', { label_class_id: c.id });
      apply(row, answer, { label_class_id: c.id, skipped: false, flagged: before.flagged });
      undoStack.push({ index: pos, kind: 'label', before: before });
      await forward(row);
    });
  }
  function skip() {
    if (!write) return;
    enqueue(async () => {
      const row = await current(), before = stateOf(row);
      const answer = await send('POST', '/rows/' + row.row_id + '/skip');
      apply(row, answer, { label_class_id: null, skipped: true, flagged: before.flagged });
      undoStack.push({ index: pos, kind: 'skip', before: before });
      await forward(row);
    });
  }
  function flag() {
    if (!write) return;
    enqueue(async () => {
      const row = await current(), before = stateOf(row);
      const answer = await send('POST', '/rows/' + row.row_id + '/flag', { flagged: !before.flagged });
      apply(row, answer, Object.assign({}, before, { flagged: !before.flagged }));
      undoStack.push({ index: pos, kind: 'flag', before: before });
      draw(row);
    });
  }
  function undo() {
    if (!write) return;
    enqueue(async () => {
      const last = undoStack.pop();
      if (!last) { say('nothing to undo'); return; }
      try {
        const row = await show(last.index), b = last.before, path = '/rows/' + row.row_id;
        let answer;
        if (last.kind === 'flag') answer = await send('POST', path + '/flag', { flagged: b.flagged });
        else if (b.label_class_id) answer = await send('POST', path + '/label', { label_class_id: b.label_class_id });
        else if (b.skipped) answer = await send('POST', path + '/skip');
        else answer = await send('DELETE', path + '/label');
        const asked = last.kind === 'flag' ? Object.assign(stateOf(row), { flagged: b.flagged })
          : { label_class_id: b.label_class_id, skipped: b.skipped, flagged: row.flagged };
        apply(row, answer, asked);
        draw(row);
        hook.undone++;
        say('undone: the ' + last.kind + ' of row ' + row.row_id);
      } catch (err) {
        undoStack.push(last);                           // still the last thing to undo
        throw err;
      }
    });
  }
  function move(step) {
    enqueue(async () => { say(''); await show(pos + step); });
  }

  // The counts again from the API once the labeller pauses (others may label the same dataset).
  let syncTimer = 0;
  function scheduleSync() { clearTimeout(syncTimer); syncTimer = setTimeout(sync, 5000); }
  async function sync() {
    if (hook.pending) return;
    const seen = actions;
    try {
      const get = (p) => fetch(p, { credentials: 'same-origin', headers: { Accept: 'application/json' } })
        .then((r) => r.ok ? r.json() : Promise.reject(new Error('HTTP ' + r.status)));
      const [list, d] = await Promise.all([get(base + '/label-classes'), get(base)]);
      if (seen !== actions || hook.pending) return;     // an action since: its own counts are newer
      for (const c of list.data || []) { const mine = classOf(c.id); if (mine) mine.count = c.count; }
      if (d.data && d.data.labels) Object.assign(counts, d.data.labels);
      drawCounts();
    } catch (e) { /* the counts kept so far stay */ }
  }

  // ---------- keys and buttons ----------
  document.addEventListener('keydown', (ev) => {
    const t = ev.target;
    if (t instanceof Element && t.closest('input, select, textarea, [contenteditable]')) return;
    if ((ev.ctrlKey || ev.metaKey) && !ev.altKey && !ev.shiftKey && (ev.key === 'z' || ev.key === 'Z')) {
      ev.preventDefault();
      if (!ev.repeat) undo();
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const k = ev.key;
    if (k.length === 1 && k >= '1' && k <= '9') { ev.preventDefault(); if (!ev.repeat) labelWith(Number(k)); return; }
    if (k === 'ArrowRight' || k === 'ArrowLeft') { ev.preventDefault(); move(k === 'ArrowRight' ? 1 : -1); return; }
    const act = { s: skip, f: flag, u: undo }[k.toLowerCase()];
    if (act) { ev.preventDefault(); if (!ev.repeat) act(); }
  });
  classes.forEach((c, i) => c.button.addEventListener('click', () => labelWith(i + 1)));
  $('row-skip').addEventListener('click', skip);
  $('row-flag').addEventListener('click', flag);
  $('row-undo').addEventListener('click', undo);
  $('row-prev').addEventListener('click', () => move(-1));
  $('row-next').addEventListener('click', () => move(1));

  // ---------- the trend around the row (datasets made from telemetry) ----------
  const trendBox = $('row-trend');
  let plot = null, markerX = null, series = null;
  const css = (n) => getComputedStyle(document.documentElement).getPropertyValue('--' + n).trim() || '#777';
  function drawTrend() {
    if (!trendBox || !columns || rowCount === 0) return;
    if (typeof window.uPlot !== 'function') { trendBox.textContent = 'the chart library (uPlot) did not load'; return; }
    if (!series) series = columns.filter((c) => c.type === 'number');
    if (!series.length) { trendBox.textContent = 'no number columns to draw'; return; }
    const xs = [], ys = series.map(() => []);
    markerX = null;
    for (let i = Math.max(0, pos - AROUND); i <= Math.min(rowCount - 1, pos + AROUND); i++) {
      const r = rowAt(i);
      if (!r || !r.values) continue;
      const t = Date.parse(r.values.timestamp) / 1000;
      if (!isFinite(t) || (xs.length && t <= xs[xs.length - 1])) continue;   // uPlot wants x ascending
      xs.push(t);
      series.forEach((c, k) => { const v = r.values[c.name]; ys[k].push(typeof v === 'number' ? v : null); });
      if (i === pos) markerX = t;
    }
    const data = [xs].concat(ys);
    if (plot) { plot.setData(data); return; }
    const axis = (extra) => Object.assign({ stroke: () => css('chart-axis'), grid: { stroke: () => css('chart-grid'), width: 1 },
      ticks: { stroke: () => css('chart-grid'), width: 1 } }, extra);
    const opts = {
      width: Math.max(300, trendBox.clientWidth), height: 240, legend: { live: true },
      scales: { x: { time: true } },
      axes: [axis(), axis({ size: 56 })],
      series: [{}].concat(series.map((c, k) => ({ label: c.name, stroke: () => css('trend-' + ((k % 8) + 1)), width: 1.5, spanGaps: false }))),
      hooks: { draw: [(u) => {                          // the current row: a vertical line
        if (markerX == null) return;
        const x = Math.round(u.valToPos(markerX, 'x', true)) + 0.5, b = u.bbox, ctx = u.ctx, dpr = window.devicePixelRatio || 1;
        if (x < b.left || x > b.left + b.width) return;
        ctx.save();
        ctx.strokeStyle = css('text'); ctx.lineWidth = 2 * dpr; ctx.setLineDash([5 * dpr, 3 * dpr]);
        ctx.beginPath(); ctx.moveTo(x, b.top); ctx.lineTo(x, b.top + b.height); ctx.stroke();
        ctx.restore();
      }] },
    };
    plot = new window.uPlot(opts, data, trendBox);
    window.addEventListener('resize', () => plot.setSize({ width: Math.max(300, trendBox.clientWidth), height: 240 }));
  }

  // ---------- start ----------
  if (rowCount === 0) return;
  enqueue(async () => { await show(pos); hook.ready = true; });
})();
