// plantd console, BI pages: SQL Lab's editor (Ctrl+Enter runs, names from the table list inserted at the cursor,
// saved and past queries loaded), and an answer drawn as a table and, when its first column is a time or a number and
// another is numeric, as a line chart (uPlot). The RLS page's test draws its answer the same way; the embedding page
// turns a guest token into the iframe snippet.
(function () {
  'use strict';
  const hook = { answers: 0, charts: 0 };
  window.plantdBi = hook;
  const css = (n) => getComputedStyle(document.documentElement).getPropertyValue('--' + n).trim() || '#777';
  function el(tag, props, text) {
    const e = document.createElement(tag);
    for (const k of Object.keys(props || {})) e.setAttribute(k, props[k]);
    if (text != null) e.textContent = text;
    return e;
  }
  const cell = (v) => v == null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  const isTime = (v) => typeof v === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(v) && !isNaN(Date.parse(v));

  let plot = null;
  function chart(box, data) {
    if (plot) { plot.destroy(); plot = null; }
    box.textContent = '';
    const rows = data.rows || [], cols = data.columns || [];
    if (!window.uPlot || rows.length < 2 || cols.length < 2) return;
    const first = rows[0][0], time = isTime(first);
    if (!time && typeof first !== 'number') return;
    const numeric = [];
    for (let c = 1; c < cols.length; c++) if (rows.every((r) => r[c] == null || typeof r[c] === 'number')) numeric.push(c);
    if (!numeric.length) return;
    const sorted = rows.slice().sort((a, b) => (time ? Date.parse(a[0]) - Date.parse(b[0]) : a[0] - b[0]));
    const xs = sorted.map((r) => (time ? Date.parse(r[0]) / 1000 : r[0]));
    const series = [{ label: cols[0] }].concat(numeric.map((c, i) => ({ label: cols[c], stroke: css('trend-' + ((i % 6) + 1)), width: 1.5 })));
    const axis = (extra) => Object.assign({ stroke: () => css('chart-axis'), grid: { stroke: () => css('chart-grid'), width: 1 } }, extra);
    plot = new window.uPlot({ width: Math.max(300, box.clientWidth || 600), height: 260, scales: { x: { time: time } },
      axes: [axis(), axis({ size: 56 })], series: series }, [xs].concat(numeric.map((c) => sorted.map((r) => r[c]))), box);
    hook.charts++;
  }
  function show(data, extra) {
    const answer = document.getElementById('sql-answer');
    if (!answer) return;
    answer.hidden = false;
    const summary = document.getElementById('sql-summary');
    summary.textContent = (extra ? extra + ' \u2014 ' : '') + data.row_count + ' row' + (data.row_count === 1 ? '' : 's') +
      (data.execution_time_ms != null ? ' in ' + data.execution_time_ms + ' ms' : '') + (data.truncated ? ' (cut at the row limit)' : '');
    const table = document.getElementById('sql-table');
    table.textContent = '';
    const head = el('tr');
    for (const c of data.columns || []) head.append(el('th', { scope: 'col' }, c));
    const thead = el('thead');
    thead.append(head);
    table.append(thead);
    const body = table.appendChild(el('tbody'));
    for (const r of data.rows || []) {
      const tr = body.appendChild(el('tr'));
      for (const v of r) tr.append(el('td', typeof v === 'number' ? { class: 'num' } : {}, cell(v)));
    }
    chart(document.getElementById('sql-chart'), data);
    hook.answers++;
  }
  document.addEventListener('api-form:success', (ev) => {
    const form = ev.target;
    if (form.id === 'sql-run') { ev.preventDefault(); show(ev.detail || {}); }
    if (form.id === 'rls-test') {
      ev.preventDefault();
      const d = ev.detail || {};
      show(d, d.effective_filter ? 'filter ' + d.effective_filter : 'no rule applies');
    }
  });

  // The embedding page: a guest token for the chosen dashboard becomes the iframe snippet to copy.
  const guest = document.getElementById('guest-token');
  if (guest) {
    const fail = guest.querySelector('.form-error');
    guest.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      fail.textContent = '';
      for (const p of guest.querySelectorAll('.field-error')) p.textContent = '';
      const dash = guest.elements.namedItem('dashboard_id').value, clause = guest.elements.namedItem('clause').value.trim();
      const body = { dashboard_id: dash, resources: [{ type: 'dashboard', id: dash }], rls: clause ? [{ clause: clause }] : [] };
      let res, answer;
      try {
        res = await fetch('/v1/bi-embed/guest-token', { method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body) });
        answer = await res.json().catch(() => null);
      } catch (e) { fail.textContent = 'cannot reach the server (' + e.message + ')'; return; }
      if (!res.ok) {
        const er = (answer && answer.error) || { message: 'HTTP ' + res.status };
        fail.textContent = er.message;
        for (const d of er.details || []) { const p = guest.querySelector('[data-error-for="' + CSS.escape(d.field) + '"]'); if (p) p.textContent = d.message; }
        return;
      }
      const url = location.origin + '/v1/bi-embed/embed/' + encodeURIComponent(dash) + '?token=' + encodeURIComponent(answer.data.token);
      document.getElementById('embed-code').value = '<iframe src="' + url + '" width="100%" height="720" style="border:0" title="plantd dashboard"></iframe>';
      document.getElementById('embed-expires').textContent = new Date(answer.data.expires_at).toLocaleString();
      document.getElementById('embed-open').href = url;
      document.getElementById('embed-snippet').hidden = false;
    });
    document.getElementById('embed-copy').addEventListener('click', async (ev) => {
      const code = document.getElementById('embed-code');
      code.select();
      try { await navigator.clipboard.writeText(code.value); ev.target.textContent = 'Copied'; } catch (e) { ev.target.textContent = 'Press Ctrl+C'; }
    });
  }

  const editor = document.getElementById('sql-editor');
  if (!editor) return;
  const run = document.getElementById('sql-run');
  editor.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run.requestSubmit(); }
  });
  // Saving takes the editor's SQL (this listener runs before the console's, which reads the form).
  const save = document.getElementById('sql-save');
  save.addEventListener('submit', () => { save.elements.namedItem('sql').value = editor.value; });
  document.addEventListener('click', (ev) => {
    const load = ev.target.closest('.load-sql');
    if (load) { editor.value = load.dataset.sql; editor.focus(); return; }
    const ins = ev.target.closest('.insert-name');
    if (ins) {
      const at = editor.selectionStart, end = editor.selectionEnd;
      editor.value = editor.value.slice(0, at) + ins.dataset.insert + editor.value.slice(end);
      editor.selectionStart = editor.selectionEnd = at + ins.dataset.insert.length;
      editor.focus();
    }
  });
})();
